"""What the rest of the system knows of a provider family: one frozen spec per family, and
where the specs are found.

Each family's spec is a module-level ``FAMILY`` (or a tuple ``FAMILIES`` when one module serves
several) of a light module of :mod:`tools.providers.specs`, which imports no SDK: the spec names
its adapter's functions (``Deferred("tools.providers.gemini:gemini_model")``) instead of importing
them, so that module, its SDK and pydantic-ai are imported when the family's first model is
built (or its model list is first asked for). :func:`families` reads those specs, and any module
of ``tools.providers`` that declares ``FAMILY`` itself (a family added as one module). The
settings, the composition root, the doctor and the token counts read these specs instead of
keeping lists of family names, so a new family is its spec, its adapter module, its prices, its
fake server and its contract-test row.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, Literal

import tools.providers
import tools.providers.specs
from store.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from tools.providers.base import ProviderConfig, ResourceLedger

Factory = Callable[[str, "ProviderConfig", "ResourceLedger | None"], "Model"]
# The model-list call: the provider's own ids of the models it serves at ``config.base_url``,
# asked with ``config.api_key`` through the family's SDK (``playlisteval doctor`` checks every
# configured ``model_name`` against it).
ListModels = Callable[["ProviderConfig"], Awaitable[list[str]]]
# The context windows the server at ``config.base_url`` reports, by the provider's model id (a
# vLLM server's ``max_model_len`` on ``GET /v1/models``): what a model's requests are fitted to
# when its settings name no ``context_window``, and what ``playlisteval doctor`` checks.
ServedWindows = Callable[["ProviderConfig"], Awaitable[dict[str, int]]]
VideoForm = Literal["frames", "native"]
Requirement = Literal["base_url", "local_path"]


@dataclass(frozen=True)
class Deferred:
    """A function of an adapter module, named (``"package.module:function"``) rather than
    imported: calling it imports the module (its SDK with it) and calls the function. A spec
    holds these so that reading the families imports no SDK."""

    target: str

    def __post_init__(self) -> None:
        module, _, name = self.target.partition(":")
        if not module or not name.isidentifier():
            raise ConfigError(f"{self.target!r} names no function: write 'package.module:name'")

    def resolve(self) -> Callable[..., Any]:
        """The function named (its module imported now, once)."""
        module, _, name = self.target.partition(":")
        found: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return found

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


@dataclass(frozen=True)
class ProviderFamily:
    """One provider family: how its models are built, reached, limited and counted.

    ``token_rule`` names a counting rule of :mod:`policies.tokens` (``gemini``, ``openai``,
    ``qwen``) by string: ``tools`` does not import ``policies``. ``prefixes`` are the model-id
    prefixes it serves when the settings name no family (the longest match over all families
    wins). ``key_env``, ``base_url``, ``rpm`` and ``max_concurrency`` are the defaults of its
    ``[providers.<family>]`` settings block; ``about`` heads that block in the settings
    reference and ``notes`` replace the reference's description of a key there.
    """

    name: str
    factory: Factory
    about: str
    key_env: str
    token_rule: str
    video: VideoForm = "frames"
    keyless: bool = False
    batchable: bool = False
    context_cache: bool = False
    prefixes: tuple[str, ...] = ()
    min_frames_per_clip: int = 1
    # The most frames (images) one request may carry, the provider's own limit: a model's
    # ``max_frames`` setting above it is planned as this. None: the provider sets none.
    max_frames: int | None = None
    # The most pictures one request may carry where frames go as pictures (a clip whose frames
    # the caller fixed, an evaluation condition's): DashScope's 250 Base64 images. None: no
    # limit of its own (``max_frames`` holds).
    max_pictures: int | None = None
    requires: tuple[Requirement, ...] = ()
    # Where ``playlisteval doctor`` probes when the settings name no base_url (the SDK's own).
    default_endpoint: str | None = None
    base_url: str | None = None
    rpm: int | None = None
    max_concurrency: int = 16
    notes: Mapping[str, str] = field(default_factory=dict, hash=False)
    # The model-list call (None: the family has none, e.g. a local model folder).
    list_models: ListModels | None = None
    # The served context windows (None: the family's server reports none).
    served_windows: ServedWindows | None = None

    @property
    def settings_key(self) -> str:
        """The TOML key of its settings block (``openai-compatible`` → ``openai_compatible``)."""
        return self.name.replace("-", "_")

    @property
    def local(self) -> bool:
        """It runs a model folder on this machine (no endpoint to reach)."""
        return "local_path" in self.requires

    def serves(self, model_id: str) -> int:
        """The length of the longest of its prefixes ``model_id`` starts with (0: none)."""
        name = model_id.lower().rsplit("/", 1)[-1]
        return max((len(p) for p in self.prefixes if name.startswith(p)), default=0)


def local_model_family(
    *, name: str, factory: Factory, about: str, notes: Mapping[str, str]
) -> ProviderFamily:
    """The spec of a family of open-weight models run on this machine from a ``local_path``
    (the real-local and the transformers families): no key needed to call them (``HF_TOKEN``,
    the hub token's variable, is its ``key_env``), one model in memory serving its calls one
    at a time, tokens counted by the Qwen rule. ``notes`` say what its settings
    keys mean for the family."""
    return ProviderFamily(
        name=name,
        factory=factory,
        about=about,
        key_env="HF_TOKEN",
        token_rule="qwen",
        keyless=True,
        requires=("local_path",),
        max_concurrency=1,
        notes=notes,
    )


# -- where the specs are found -------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    families: Mapping[str, ProviderFamily]
    broken: Mapping[str, str]  # module → why it did not import


_FOUND: dict[tuple[str, ...], _Found] = {}
_FOUND_LOCK = threading.RLock()  # a module may ask for the families while it is imported
# A module that declares its own family: a top-level ``FAMILY =`` / ``FAMILIES =`` (annotated or
# not). Read from its source so that an adapter module declaring none is not imported.
_DECLARES = re.compile(r"^FAMIL(?:Y|IES)\s*(?::[^=\n]*)?=", re.M)


def _declared(module: ModuleType) -> tuple[ProviderFamily, ...]:
    one = getattr(module, "FAMILY", None)
    several = getattr(module, "FAMILIES", ())
    declared = ((one,) if one is not None else ()) + tuple(several)
    for spec in declared:
        if not isinstance(spec, ProviderFamily):
            raise ConfigError(
                f"{module.__name__}: FAMILY/FAMILIES must hold ProviderFamily specs, got {spec!r}"
            )
    return declared


def _declaring_modules(path: tuple[str, ...]) -> list[str]:
    """The modules of ``tools.providers`` (on ``path``) whose source declares a family."""
    names: list[str] = []
    for entry in path:
        for file in sorted(Path(entry).glob("*.py")):
            if file.stem != "__init__" and _DECLARES.search(file.read_text(encoding="utf-8")):
                names.append(f"{tools.providers.__name__}.{file.stem}")
    return names


def _discover(path: tuple[str, ...]) -> _Found:
    specs = pkgutil.iter_modules(
        tools.providers.specs.__path__, f"{tools.providers.specs.__name__}."
    )
    names = [info.name for info in specs] + _declaring_modules(path)
    found: dict[str, ProviderFamily] = {}
    broken: dict[str, str] = {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # a missing SDK: only its own family is unavailable
            broken[name] = f"{type(exc).__name__}: {exc}"
            continue
        for spec in _declared(module):
            if spec.name in found:
                raise ConfigError(
                    f"provider family {spec.name!r} is declared twice (again in {name})"
                )
            found[spec.name] = spec
    return _Found(MappingProxyType(found), MappingProxyType(broken))


def _found() -> _Found:
    # Keyed by the package path, so a module put on it later is found by the same mechanism.
    path = tuple(tools.providers.__path__)
    with _FOUND_LOCK:
        if path not in _FOUND:
            _FOUND[path] = _discover(path)
        return _FOUND[path]


def families() -> Mapping[str, ProviderFamily]:
    """Every provider family, by name: the specs of :mod:`tools.providers.specs`, and those the
    modules of ``tools.providers`` declare themselves. No SDK is imported for them."""
    return _found().families


def family_named(name: str) -> ProviderFamily:
    """The family called ``name``; ConfigError naming the known ones when there is none."""
    found = _found()
    spec = found.families.get(name)
    if spec is not None:
        return spec
    known = ", ".join(sorted(found.families)) or "none"
    broken = "".join(f"; {module} did not import ({why})" for module, why in found.broken.items())
    raise ConfigError(f"no provider family {name!r}: the known ones are {known}{broken}")


def family_of(model_id: str) -> ProviderFamily | None:
    """The family a model id is served by when the settings do not say: the one with the
    longest prefix of the id (its last path part, lower case)."""
    scored = [(spec.serves(model_id), spec.name) for spec in families().values()]
    best = max(scored, default=(0, ""))
    return families()[best[1]] if best[0] else None
