"""The OpenAI and OpenAI-compatible families' specs (adapter: :mod:`tools.providers.openai_models`,
the openai SDK) and the image limits spec and adapter both read."""

from __future__ import annotations

from tools.providers.family import Deferred, ProviderFamily

# OpenAI's "Images and vision" guide, "Image input requirements"
# (https://developers.openai.com/api/docs/guides/images-vision#image-input-requirements): "Up to
# 500 individual image inputs per request". The count is the family's ``max_frames`` (so the
# frame plan, the budget and the prompt hold it); the adapter counts the bytes.
OPENAI_MAX_IMAGES = 500
# A vLLM server's Qwen-VL video processor keeps at most 768 frames of a video (``max_frames``;
# the adapter module says where that is from): the OpenAI-compatible family's frame cap.
QWEN_VL_MAX_FRAMES = 768

_LIST_MODELS = Deferred("tools.providers.openai_models:openai_list_models")

FAMILIES = (
    ProviderFamily(
        name="openai",
        factory=Deferred("tools.providers.openai_models:openai_model"),
        about="OpenAI (Responses API).",
        key_env="OPENAI_API_KEY",
        token_rule="openai",
        batchable=True,
        prefixes=("gpt-", "o1", "o3", "o4", "chatgpt"),
        max_frames=OPENAI_MAX_IMAGES,
        default_endpoint="https://api.openai.com/v1",
        rpm=500,
        list_models=_LIST_MODELS,
    ),
    ProviderFamily(
        name="openai-compatible",
        factory=Deferred("tools.providers.openai_models:openai_compatible_model"),
        about="Any OpenAI-compatible endpoint (vLLM serving the open-weight judges).",
        key_env="OPENWEIGHT_API_KEY",
        token_rule="qwen",
        keyless=True,
        prefixes=("qwen3-vl", "qwen2.5-vl", "internvl"),
        requires=("base_url",),
        max_frames=QWEN_VL_MAX_FRAMES,
        list_models=_LIST_MODELS,
        served_windows=Deferred("tools.providers.openai_models:openai_served_windows"),
    ),
)
