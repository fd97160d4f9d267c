"""The DashScope family's spec (adapter: :mod:`tools.providers.dashscope_model`, the dashscope
SDK) and the service's limits that spec and adapter both read."""

from __future__ import annotations

from tools.providers.family import Deferred, ProviderFamily

DEFAULT_BASE_URL = "https://dashscope-intl.aliyuncs.com/api/v1"
MIN_VIDEO_FRAMES = 4  # the API refuses a frame list shorter than this
# Alibaba Cloud Model Studio, "Image and video understanding"
# (https://www.alibabacloud.com/help/en/model-studio/vision), "Image limits": one request takes
# at most 250 images passed as Base64 (public URLs and local file paths allow more). Every frame
# of a frame list counts as one image; ours all travel as Base64 data URIs.
MAX_BASE64_IMAGES = 250

FAMILY = ProviderFamily(
    name="dashscope",
    factory=Deferred("tools.providers.dashscope_model:dashscope_model"),
    about="DashScope (Qwen, native multimodal API).",
    key_env="DASHSCOPE_API_KEY",
    token_rule="qwen",
    prefixes=("qwen-", "qwen3.", "qvq", "qwen-vl"),
    min_frames_per_clip=MIN_VIDEO_FRAMES,
    # No cap of the family's own: in Beijing clips go as video files, which DashScope's 250
    # Base64 images a request do not hold (fixed frames, and elsewhere frame lists, still meet
    # that limit, in the adapter's message mapping).
    max_frames=None,
    max_pictures=MAX_BASE64_IMAGES,
    base_url=DEFAULT_BASE_URL,
    rpm=600,
    notes={"base_url": "Endpoint (default: the international region; a proxy or a fake)."},
    list_models=Deferred("tools.providers.dashscope_model:dashscope_list_models"),
)
