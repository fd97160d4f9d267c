"""The transformers family's spec (adapter: :mod:`tools.providers.local_vlm`): a vision-language
model run locally with transformers."""

from __future__ import annotations

from tools.providers.family import Deferred, local_model_family

FAMILY = local_model_family(
    name="transformers",
    factory=Deferred("tools.providers.local_vlm:transformers_model"),
    about="Local transformers on this machine's GPU.",
    notes={
        "api_key_env": "Environment variable holding the hub token.",
        "max_concurrency": "Calls on the GPU at once.",
    },
)
