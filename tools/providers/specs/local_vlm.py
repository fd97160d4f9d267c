"""The transformers family's spec (adapter: :mod:`tools.providers.local_vlm`): a vision-language
model run locally with transformers."""

from __future__ import annotations

from tools.providers.family import Deferred, ProviderFamily

FAMILY = ProviderFamily(
    name="transformers",
    factory=Deferred("tools.providers.local_vlm:transformers_model"),
    about="Local transformers on this machine's GPU.",
    key_env="HF_TOKEN",
    token_rule="qwen",
    keyless=True,
    requires=("local_path",),
    max_concurrency=1,
    notes={
        "api_key_env": "Environment variable holding the hub token.",
        "max_concurrency": "Calls on the GPU at once.",
    },
)
