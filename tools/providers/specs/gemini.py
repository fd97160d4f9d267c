"""The Gemini family's spec (adapter: :mod:`tools.providers.gemini`, google-genai)."""

from __future__ import annotations

from tools.providers.family import Deferred, ProviderFamily

FAMILY = ProviderFamily(
    name="gemini",
    factory=Deferred("tools.providers.gemini:gemini_model"),
    about="Gemini (google-genai).",
    key_env="GEMINI_API_KEY",
    token_rule="gemini",
    video="native",
    batchable=True,
    context_cache=True,
    prefixes=("gemini",),
    default_endpoint="https://generativelanguage.googleapis.com",
    rpm=1000,
    list_models=Deferred("tools.providers.gemini:gemini_list_models"),
)
