"""Model id → the live adapter that answers as it.

The composition root resolves each configured model id to a :class:`ProviderConfig` (family,
the provider's own id, endpoint, key); this registry builds one adapter per id on first use and
keeps it (its SDK client and connection pool live as long as the run).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping

from pydantic_ai.models import Model

from store.errors import ConfigError
from tools.providers.base import Family, ProviderConfig, ResourceLedger

# family → (module, factory): imported only when a model of that family is used, so a run that
# never calls DashScope does not need its SDK to import.
_FACTORIES: dict[Family, tuple[str, str]] = {
    "gemini": ("tools.providers.gemini", "gemini_model"),
    "openai": ("tools.providers.openai_models", "openai_model"),
    "openai-compatible": ("tools.providers.openai_models", "openai_compatible_model"),
    "dashscope": ("tools.providers.dashscope_model", "dashscope_model"),
    "transformers": ("tools.providers.local_vlm", "transformers_model"),
}


def family_of(model_id: str) -> Family | None:
    """The family a model id is served by when the settings do not say."""
    name = model_id.lower().rsplit("/", 1)[-1]
    if name.startswith("gemini"):
        return "gemini"
    if name.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if name.startswith(("qwen-", "qwen3.", "qvq", "qwen-vl")):
        return "dashscope"
    if name.startswith(("qwen3-vl", "qwen2.5-vl", "internvl")):
        return "openai-compatible"
    return None


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
                f"[providers.models.{model_id!r}] (gemini, openai, dashscope, openai-compatible "
                "or transformers)"
            )
        return found

    def model(self, model_id: str) -> Model:
        """The adapter for ``model_id`` (built on first use)."""
        with self._lock:
            if model_id not in self._models:
                config = self.config(model_id)
                module, name = _FACTORIES[config.family]
                factory: Callable[..., Model] = getattr(importlib.import_module(module), name)
                self._models[model_id] = factory(model_id, config, self.resources)
            return self._models[model_id]
