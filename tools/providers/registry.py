"""Model id → the live adapter that answers as it, and the provider families there are.

The families are found, not listed: every module of the ``tools.providers`` package is imported
and its module-level ``FAMILY`` (or ``FAMILIES``) collected (:func:`families`). The composition
root resolves each configured model id to a :class:`ProviderConfig` (family, the provider's own
id, endpoint, key); :class:`ProviderRegistry` builds one adapter per id on first use with its
family's factory and keeps it (its SDK client and connection pool live as long as the run).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType

from pydantic_ai.models import Model

import tools.providers
from store.errors import ConfigError
from tools.providers.base import ProviderConfig, ResourceLedger
from tools.providers.family import ProviderFamily


@dataclass(frozen=True)
class _Found:
    families: Mapping[str, ProviderFamily]
    broken: Mapping[str, str]  # module → why it did not import


_FOUND: dict[tuple[str, ...], _Found] = {}
_FOUND_LOCK = threading.RLock()  # an adapter module may ask for families while imported


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


def _discover(path: tuple[str, ...]) -> _Found:
    found: dict[str, ProviderFamily] = {}
    broken: dict[str, str] = {}
    prefix = f"{tools.providers.__name__}."
    for info in pkgutil.iter_modules(list(path), prefix):
        try:
            module = importlib.import_module(info.name)
        except ImportError as exc:  # a missing SDK: only its own family is unavailable
            broken[info.name] = f"{type(exc).__name__}: {exc}"
            continue
        for spec in _declared(module):
            if spec.name in found:
                raise ConfigError(
                    f"provider family {spec.name!r} is declared twice (again in {info.name})"
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
    """Every provider family the modules of ``tools.providers`` declare, by name."""
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


class ProviderRegistry:
    """Builds and keeps one live adapter per configured model id."""

    def __init__(
        self, configs: Mapping[str, ProviderConfig], resources: ResourceLedger | None = None
    ) -> None:
        self.configs = dict(configs)
        self.resources = resources
        self._models: dict[str, Model] = {}
        self._lock = threading.Lock()

    def config(self, model_id: str) -> ProviderConfig:
        """How ``model_id`` is reached; ConfigError when it is not configured."""
        found = self.configs.get(model_id)
        if found is None:
            raise ConfigError(
                f"model {model_id!r} has no provider: name its family under "
                f"[providers.models.{model_id!r}] ({', '.join(sorted(families()))})"
            )
        return found

    async def aclose(self) -> None:
        """Close every adapter built here that can be closed (its connections, and what it
        made on the provider's side for this run, such as Gemini's uploads)."""
        with self._lock:
            models = list(self._models.values())
        for model in models:
            close = getattr(model, "aclose", None)  # an optional method, not a name dispatch
            if close is not None:
                await close()

    def model(self, model_id: str) -> Model:
        """The adapter for ``model_id`` (built on first use by its family's factory)."""
        with self._lock:
            if model_id not in self._models:
                config = self.config(model_id)
                factory = family_named(config.family).factory
                self._models[model_id] = factory(model_id, config, self.resources)
            return self._models[model_id]


async def release_models(model_for: Callable[[str], Model]) -> None:
    """Close the live adapters behind ``model_for`` when it is a registry's (the offline
    provider and test models have nothing to close)."""
    registry = getattr(model_for, "__self__", None)
    if isinstance(registry, ProviderRegistry):
        await registry.aclose()
