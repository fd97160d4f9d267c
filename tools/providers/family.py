"""What the rest of the system knows of a provider family: one frozen spec per family.

Each adapter module of ``tools.providers`` exports its spec as a module-level ``FAMILY`` (or a
tuple ``FAMILIES`` when one module serves several); :func:`tools.providers.registry.families`
finds them by importing every module of the package. The settings, the composition root, the
doctor and the token counts read these specs instead of keeping lists of family names, so a
new family is its adapter module, its prices, its fake server and its contract-test row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic_ai.models import Model

from tools.providers.base import ProviderConfig, ResourceLedger

Factory = Callable[[str, ProviderConfig, ResourceLedger | None], Model]
# The model-list call: the provider's own ids of the models it serves at ``config.base_url``,
# asked with ``config.api_key`` through the family's SDK (``playlisteval doctor`` checks every
# configured ``model_name`` against it).
ListModels = Callable[[ProviderConfig], Awaitable[list[str]]]
# The context windows the server at ``config.base_url`` reports, by the provider's model id (a
# vLLM server's ``max_model_len`` on ``GET /v1/models``): what a model's requests are fitted to
# when its settings name no ``context_window``, and what ``playlisteval doctor`` checks.
ServedWindows = Callable[[ProviderConfig], Awaitable[dict[str, int]]]
VideoForm = Literal["frames", "native"]
Requirement = Literal["base_url", "local_path"]


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
