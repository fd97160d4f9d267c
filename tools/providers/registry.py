"""Model id → the live adapter that answers as it, and the provider families there are.

The families are found, not listed (:func:`tools.providers.family.families`, re-exported
here: the specs of ``tools/providers/specs/`` and any adapter module that declares ``FAMILY``).
The composition root resolves each configured model id to a :class:`ProviderConfig` (family,
the provider's own id, endpoint, key); :class:`ProviderRegistry` builds one adapter per id on
first use with its family's factory and keeps it (its SDK client and connection pool live as
long as the run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from store.errors import ConfigError
from tools.providers.base import ProviderConfig, ResourceLedger
from tools.providers.family import families as families
from tools.providers.family import family_named as family_named
from tools.providers.family import family_of as family_of

if TYPE_CHECKING:
    from pydantic_ai.models import Model


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
