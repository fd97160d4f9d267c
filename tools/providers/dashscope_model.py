"""The DashScope (Qwen) adapter: a pydantic-ai model that speaks DashScope's native multimodal
API through the ``dashscope`` SDK (``AioMultiModalConversation``).

Why the native route and not DashScope's OpenAI-compatible one: the native API takes a video with
a declared rate (``{"video": "oss://…", "fps": 0.5}`` for a file, ``{"video": [frame, …], "fps":
0.5}`` for a frame list), so Qwen applies its temporal handling to what is really a video. Qwen
takes no audio here, so the narration reaches it as the transcript already in the prompt text.

How a call is made:

* The clips are planned with :func:`tools.providers.base.frame_times` (``config.video_fps``,
  ``config.max_frames``, at least :data:`MIN_VIDEO_FRAMES` per clip): the plan the budget
  reserves for (``agents.recorded`` plans with the same figures; :data:`FAMILY` sets no cap of
  its own, see below). A text item goes before each video: the clip's
  :func:`~tools.providers.base.clip_label` and when its frames were taken, so the model (and our
  fake server) know what each frame shows.
* Which route a clip whose frames the caller did not fix takes depends on the endpoint's region
  (:func:`video_route`): DashScope's temporary storage, which video files need, is documented
  for China (Beijing) only (:data:`TEMPORARY_STORAGE_REGIONS`), while the default endpoint is
  the international one. There the clip goes as a video file (below); anywhere else (and behind
  a host that names no region: a proxy or a fake, unless told its region) as a **Base64 frame
  list** of its planned frames, ``{"video": [data URI, …], "fps": spacing}``, which every
  region takes, within the 250 Base64 images a request (:data:`MAX_BASE64_IMAGES`). The plan is
  not thinned here to fit them (the prompt states the plan's rate, and the budget reserves it):
  a request whose plan is over is refused before anything is sent, naming the model's
  ``max_frames`` to lower. Each response records the region, the route and, per clip, the fps
  and frames sent (``provider_details["playlisteval_sent"]``).
* On the temporary-storage route a clip goes as a **video file**: we cut its planned frames
  out of the clip attachment, encode them (H.264 mp4 at ``frame_height``, one planned frame per
  video frame, :func:`encode_mp4`), upload the file to DashScope's temporary storage and send
  ``{"video": "oss://…", "fps": rate}``. DashScope samples a file at one frame every ``1/fps`` s
  of the file (:data:`MIN_FPS`–:data:`MAX_FPS`), so ``rate`` is the file's own frame rate: the
  frames it samples are the frames planned, counted as :func:`sampled_frames` says (rounded
  down to an even number: one fewer for an odd plan, never more). This is what lets a video
  gate see 0.5 fps over 2 × 20 minutes (1,200 frames), where 250 Base64 pictures gave it 0.1.
  The rate is the plan's, floored to 4 decimals; below DashScope's floor of 0.1 fps (a plan
  thinned that far) the file runs at 0.1 fps, faster than the source video, so the frames sent
  are still exactly the planned ones, and the label gives each frame's time in the source video
  (``frame k shows MM:SS + k × step s``). A file must keep within its model's limits
  (:data:`VIDEO_FILE_LIMITS`: duration, size) and the frames one file is sampled for
  (:data:`MAX_FILE_FRAMES`); a longer clip goes as several files, each with a label giving its
  span, and one that cannot be cut to fit is refused before anything is uploaded or sent. A clip
  too short for a file (under 2 s once encoded) goes as a frame list, as below.
* The upload is the SDK's own (``dashscope/utils/oss_utils.py``, ``OssUtils``): a ``GET
  {base_url}/uploads?action=getPolicy&model=…`` for a policy, then one form POST per file to the
  policy's ``upload_host``; the file is ``oss://{upload_dir}/{name}``. We call the two halves
  ourselves rather than passing a ``file://`` path to the call, because the call's own upload
  (``check_and_upload`` in dashscope 2.0.2) asks for the policy at the module-wide
  ``dashscope.base_http_api_url``, not at ``config.base_url``; ``get_upload_certificate`` takes
  ``base_address``. Both halves are blocking ``requests`` calls: they run in a worker thread
  (``anyio.to_thread``). A file is bound to the model it was uploaded for and lives 48 h
  (Model Studio, "Upload local files to get temporary URLs",
  https://www.alibabacloud.com/help/en/model-studio/get-temporary-file-url, which also says the
  storage is offered in the China (Beijing) region only and takes 100 policy requests a second
  per account and model), so an upload is kept in the model's :class:`ResourceLedger` under a
  key of the model, endpoint and content, and reused for 47 h. An ``oss://`` URL needs the
  header ``X-DashScope-OssResourceResolve: enable`` (same page); the SDK adds it itself when a
  message holds one (``AioMultiModalConversation._preprocess_messages``).
* A clip that fixes its frames (an evaluation condition's ``frame_times``) sends exactly those,
  at its own height, as Base64 ``data:image/jpeg`` URIs: a frame list at the spacing the caller
  gave (the declared ``fps`` only states the spacing, kept within DashScope's 0.1–10, and the
  label gives each frame's exact time), or with fewer than a frame list takes, each frame as a
  picture after its ``(video-id @ MM:SS)``. Those frames and the pictures sent as they are count
  against DashScope's :data:`MAX_BASE64_IMAGES` a request, and a request that would carry more
  is refused here, before it is sent.
* Why :data:`FAMILY` has no ``max_frames`` any more: the 250 it held was the Base64 image limit,
  and video files are not held to it. Frames per request are now capped by the model's own
  ``max_frames`` setting (and a caller's fit to the context window); fixed frames, and off
  Beijing every frame list, still meet the 250 in this adapter (a family's spec cannot depend
  on its endpoint's region: at a region without temporary storage set the model's
  ``max_frames`` to 250 at most; ``playlisteval doctor`` says so).
* Structured output is *prompted*: pydantic-ai puts the role's JSON schema in the system
  instructions and we ask for ``response_format={"type": "json_object"}`` (JSON mode; the schema
  mode of the API is only offered for some text models). JSON mode and a non-streamed call both
  need Qwen's non-thinking mode, so ``enable_thinking`` is sent as ``False``.
* The base URL, key and timeout go with every call (``base_address``, ``api_key``,
  ``request_timeout``) and each call opens its own ``aiohttp`` session: nothing is set on the
  ``dashscope`` module, so models with different endpoints can live in one process, on any loop.

Errors: the SDK does not raise for an HTTP error, it returns a response with ``status_code``,
``code`` and ``message`` (and the response ``headers``, so a 429's ``Retry-After`` is read). We
raise pydantic-ai's categorised errors from them, by code before status (:func:`_category`: a
spent account, 403 ``AllocationQuota.FreeTierOnly`` or 400 ``Arrearage``, is a
:class:`~pydantic_ai.exceptions.ModelQuotaExceededError`, not a rate limit, while 429
``Throttling.AllocationQuota``, the tokens-a-minute limit, is a rate limit and retried; an unknown
model id a :class:`~pydantic_ai.exceptions.ModelNotFoundError`); a content-moderation refusal
(``DataInspectionFailed``) becomes a response with ``finish_reason='content_filter'``, which the
agent raises as :class:`~pydantic_ai.exceptions.ContentFilterError`. Transport failures are
``aiohttp`` exceptions (``requests`` ones for an upload) and become
:class:`~pydantic_ai.exceptions.ModelTimeoutError` /
:class:`~pydantic_ai.exceptions.ModelConnectionError`; a body that is not JSON becomes
:class:`~pydantic_ai.exceptions.ModelAPIError`. A refused policy request is categorised like a
refused call; a refused form upload (the SDK's ``UploadFileException``) is a
:class:`~pydantic_ai.exceptions.ModelAPIError` quoting OSS's answer.

Retries: the SDK has no retry setting. Its only resend is one retry when ``aiohttp`` reports a
*connection* error before any response (meant for a dropped pooled connection); with a fresh
session per call that fires only when a connection fails outright, and a timed-out request is
never resent. Every other retry belongs to the recorded-call wrapper.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlparse

import aiohttp
import anyio.to_thread
import numpy as np
import requests
from dashscope import AioMultiModalConversation, Models
from dashscope.api_entities.aio_session import get_ssl_context
from dashscope.common.error import AuthenticationError as DashScopeAuthenticationError
from dashscope.common.error import DashScopeException, UploadFileException
from dashscope.utils.oss_utils import OssUtils
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelServerError,
    ModelTimeoutError,
    ModelUnavailableError,
    UserError,
)
from pydantic_ai.messages import (
    BinaryContent,
    FinishReason,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
    VideoUrl,
)
from pydantic_ai.models import Model, ModelRequestParameters, check_allow_model_requests
from pydantic_ai.profiles import ModelProfile, merge_profile
from pydantic_ai.profiles.qwen import qwen_model_profile
from pydantic_ai.usage import RequestUsage

from tools.offline.vision import decode_clip
from tools.providers.base import (
    PICTURES_PROMPTED_PROFILE,
    ClipInfo,
    ConfiguredModel,
    MemoryResourceLedger,
    ModelCall,
    ProviderConfig,
    ProviderResource,
    ResourceLedger,
    TimedFrame,
    clip_frames,
    clip_info,
    clip_label,
    frame_times,
    nearest_frames,
    sent_frame_height,
    shown_height,
    timestamp,
)
from tools.providers.base import (
    encode_mp4 as base_encode_mp4,
)
from tools.providers.specs.dashscope import (
    DEFAULT_BASE_URL,
    FAMILY,
    MAX_BASE64_IMAGES,
    MIN_VIDEO_FRAMES,
)

__all__ = [
    "BEIJING",
    "DEFAULT_BASE_URL",
    "FAMILY",
    "MAX_BASE64_IMAGES",
    "MAX_FILE_FRAMES",
    "MIN_VIDEO_FRAMES",
    "TEMPORARY_STORAGE_REGIONS",
    "VIDEO_FILE_LIMITS",
    "DashScopeModel",
    "VideoFileLimits",
    "VideoRoute",
    "dashscope_model",
    "encode_mp4",
    "endpoint_region",
    "file_label",
    "file_rate",
    "frame_time_text",
    "sampled_frames",
    "video_file_limits",
    "video_label",
    "video_route",
]

SYSTEM = "dashscope"
# MIN_VIDEO_FRAMES and MAX_BASE64_IMAGES (Base64 images a request takes) are the spec's
# (tools.providers.specs.dashscope), with the sources they are from.
# A video's declared rate, a file's or a frame list's: ``fps`` in [0.1, 10], "1 frame every
# 1/fps seconds", default 2.0 (QwenCloud's vision guide, QwenCloud/qwencloud-ai
# skills/vision/qwencloud-vision/references/api-guide.md, "Key Parameters"; the same range in
# the skill's SKILL.md, "Input Limits").
MIN_FPS = 0.1
MAX_FPS = 10.0
# How many frames DashScope takes of a video file: ``duration × fps``, floored to a multiple of
# 2 (two frames make one temporal patch), at least 4, at most 768 and never more than the file
# holds. DashScope's pages say only "1 frame every 1/fps seconds"; the rounding and bounds are
# those of the models' own open video processor, qwen-vl-utils (QwenLM/Qwen3-VL,
# qwen-vl-utils/src/qwen_vl_utils/vision_process.py: ``smart_nframes``, ``FRAME_FACTOR = 2``,
# ``FPS_MIN_FRAMES = 4``, ``FPS_MAX_FRAMES = 768``), the best statement of the rule in reach.
FRAME_FACTOR = 2
MIN_FILE_FRAMES = 4
MAX_FILE_FRAMES = 768
# A temporary upload lives 48 h (the temporary-URL page above); we reuse one for an hour less.
UPLOAD_TTL = timedelta(hours=47)
_RATE_DECIMALS = 4  # a file's rate is declared with this many decimals, exactly
REFUSAL_CODES = frozenset({"DataInspectionFailed", "data_inspection_failed"})
_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_call",
    "content_filter": "content_filter",
}
_DETAIL_NAMES = (
    ("text_tokens", "text_prompt_tokens"),
    ("image_tokens", "image_prompt_tokens"),
    ("video_tokens", "video_prompt_tokens"),
    ("audio_tokens", "audio_prompt_tokens"),
)


@dataclass(frozen=True)
class VideoFileLimits:
    """What DashScope takes of one video file for a model: its duration, and its size as a
    temporary (``oss://``) upload."""

    max_duration_s: float
    min_duration_s: float = 2.0
    max_bytes: int = 100 * 1000 * 1000


# Per model (longest prefix of the provider's id first). Sources: QwenCloud's vision guide
# (QwenCloud/qwencloud-ai skills/vision/qwencloud-vision/references/api-guide.md, "guide") and
# the skill's SKILL.md, "Input Limits" ("skill"), both valid 2026-04.
#
# | model                             | duration     | size   | where                          |
# | --------------------------------- | ------------ | ------ | ------------------------------ |
# | qwen3.6-plus, qwen3.5-plus/-flash | 2 s – 2 h    | 100 MB | guide FAQ: "Qwen3.6/Qwen3.5    |
# |                                   |              |        | supports up to 2 hours";       |
# |                                   |              |        | skill: "2s–2h (Qwen3.5)"       |
# | qwen3.7-plus                      | 2 s – 2 h    | 100 MB | in neither: taken as its       |
# |                                   |              |        | predecessor, qwen3.6-plus      |
# | qwen3-vl-plus                     | 2 s – 1 h    | 100 MB | guide FAQ: "Qwen3-VL-Plus up   |
# |                                   |              |        | to 1 hour"                     |
# | the others (qwen3-vl-flash, QVQ,  | 2 s – 10 min | 100 MB | skill: "2s–10min (others)";    |
# | qwen-vl-max, qwen-vl-plus)        |              |        | guide: "QVQ: 2s-10min"         |
#
# The size is the guide's "File Input Methods" table: "Temp upload (oss://) … Up to 100 MB
# (local upload)" (a public URL may be 2 GB, a Base64 video 10 MB); Model Studio's
# temporary-URL page adds that each model enforces its own size limit at upload. Taken as
# 10^8 bytes, the smaller reading of "100 MB".
_TWO_HOURS = VideoFileLimits(max_duration_s=2 * 3600.0)
VIDEO_FILE_LIMITS: dict[str, VideoFileLimits] = {
    "qwen3.7-": _TWO_HOURS,
    "qwen3.6-": _TWO_HOURS,
    "qwen3.5-": _TWO_HOURS,
    "qwen3-vl-plus": VideoFileLimits(max_duration_s=3600.0),
    "": VideoFileLimits(max_duration_s=600.0),
}


# Which region a DashScope endpoint serves, by its host: each region's DashScope domain (Model
# Studio, "Base URL overview", https://www.alibabacloud.com/help/model-studio/base-url: China
# (Beijing) dashscope.aliyuncs.com, Singapore dashscope-intl.aliyuncs.com, US (Virginia)
# dashscope-us.aliyuncs.com, China (Hong Kong) cn-hongkong.dashscope.aliyuncs.com; the native
# API is the same host with /api/v1), and a workspace-dedicated domain
# ``{WorkspaceId}.{region}.maas.aliyuncs.com`` (same page; "Regions and endpoints",
# https://www.alibabacloud.com/help/en/model-studio/regions, names the region ids).
BEIJING = "cn-beijing"
_REGION_HOSTS = {
    "dashscope.aliyuncs.com": BEIJING,
    "dashscope-intl.aliyuncs.com": "ap-southeast-1",
    "dashscope-us.aliyuncs.com": "us-east-1",
    "cn-hongkong.dashscope.aliyuncs.com": "cn-hongkong",
}
_WORKSPACE_HOST = re.compile(r"^[a-z0-9-]+\.(?P<region>[a-z0-9-]+)\.maas\.aliyuncs\.com$")
# Where the temporary storage (``oss://`` uploads) exists: Model Studio, "Upload local files to
# get temporary URLs" (https://www.alibabacloud.com/help/en/model-studio/get-temporary-file-url,
# edition of 2026-02-04): "This document applies only to the China (Beijing) region. To use the
# models, you must use an API key from the China (Beijing) region." Later editions of the page
# in other languages (es and pt-br, 2026-10) add Singapore; we hold to the region every edition
# names, so a call made here works whichever edition is right.
TEMPORARY_STORAGE_REGIONS = frozenset({BEIJING})
# How a clip whose frames the caller did not fix reaches the model (fixed frames always go as a
# Base64 frame list): video files on the temporary storage, or its planned frames as a Base64
# frame list.
Route = Literal["temporary-storage", "frame-list"]


@dataclass(frozen=True)
class VideoRoute:
    """How an endpoint takes video: its ``region`` (None: a host that names none, such as a
    proxy or a fake), and the ``route`` planned clips take there."""

    region: str | None
    route: Route

    def describe(self, video_fps: float, max_frames: int) -> str:
        """The route in words, for ``playlisteval doctor``: how clips go, at what rate, and
        what bounds the frames of a request."""
        where = f"region {self.region}" if self.region else "a host that names no region"
        if self.route == "temporary-storage":
            return (
                f"{where}: clips go as mp4 video files on DashScope's temporary storage "
                f"(oss://), each declared at its own frame rate, at most {video_fps:g} fps; "
                f"up to {max_frames} frames a request"
            )
        return (
            f"{where}: DashScope's temporary storage is documented for China (Beijing) only, "
            f"so clips go as Base64 JPEG frame lists at up to {video_fps:g} fps, at most "
            f"{MAX_BASE64_IMAGES} images a request (max_frames here: {max_frames})"
        )


def endpoint_region(base_url: str) -> str | None:
    """The Model Studio region a DashScope endpoint is in, from its host (None: a host that is
    not one of DashScope's own, such as a proxy)."""
    host = (urlparse(base_url).hostname or "").lower()
    if host in _REGION_HOSTS:
        return _REGION_HOSTS[host]
    match = _WORKSPACE_HOST.match(host)
    return match.group("region") if match else None


def video_route(base_url: str, region: str | None = None) -> VideoRoute:
    """How the endpoint at ``base_url`` takes planned clips: as video files on the temporary
    storage where its region has one (:data:`TEMPORARY_STORAGE_REGIONS`), else as Base64 frame
    lists. ``region`` names the endpoint's region where its host does not (a proxy, a fake)."""
    where = region or endpoint_region(base_url)
    files = where in TEMPORARY_STORAGE_REGIONS
    return VideoRoute(where, "temporary-storage" if files else "frame-list")


def video_file_limits(model_name: str) -> VideoFileLimits:
    """The limits of one video file for DashScope's model ``model_name`` (:data:`VIDEO_FILE_LIMITS`,
    longest prefix)."""
    name = model_name.lower()
    prefix = max((p for p in VIDEO_FILE_LIMITS if name.startswith(p)), key=len)
    return VIDEO_FILE_LIMITS[prefix]


def sampled_frames(frames: int, duration_s: Fraction | float, fps: Fraction | float) -> int:
    """How many frames DashScope samples of a video file of ``frames`` frames lasting
    ``duration_s`` at the declared ``fps`` (qwen-vl-utils' ``smart_nframes``, see
    :data:`FRAME_FACTOR`): ``duration × fps`` within [4, min(768, frames)], floored to even."""
    wanted = Fraction(duration_s) * Fraction(fps)
    ceiling = min(MAX_FILE_FRAMES, frames) // FRAME_FACTOR * FRAME_FACTOR
    bounded = min(max(wanted, Fraction(MIN_FILE_FRAMES)), Fraction(ceiling))
    return math.floor(bounded / FRAME_FACTOR) * FRAME_FACTOR


def file_rate(frames: int, duration_s: float) -> Fraction:
    """The frame rate a video file of a clip's ``frames`` planned frames over its
    ``duration_s`` runs (and is declared) at: the plan's rate, floored to
    :data:`_RATE_DECIMALS` decimals (an exact decimal, so the ``fps`` sent is the file's rate),
    kept within DashScope's [:data:`MIN_FPS`, :data:`MAX_FPS`]."""
    scale = 10**_RATE_DECIMALS
    rate = Fraction(math.floor(frames / duration_s * scale), scale) if duration_s > 0 else None
    low, high = Fraction(str(MIN_FPS)), Fraction(str(MAX_FPS))
    return high if rate is None else min(max(rate, low), high)


def dashscope_model(
    model_id: str,
    config: ProviderConfig,
    resources: ResourceLedger | None = None,
    *,
    region: str | None = None,
) -> Model:
    """Our model ``model_id`` served by DashScope as ``config.model_name``; its video-file
    uploads are kept in ``resources`` (default: the model's own) and reused while they live.
    ``region``: the endpoint's Model Studio region where its host does not say (a proxy)."""
    return DashScopeModel(model_id, config, resources, region=region)


def frame_time_text(seconds: float) -> str:
    """A frame's time as a label shows it: ``MM:SS``, with tenths when it is not whole."""
    tenths = round(seconds * 10)
    if tenths % 10 == 0:
        return timestamp(tenths / 10)
    return f"{timestamp(tenths // 10)}.{tenths % 10}"


def video_label(info: ClipInfo, times_s: Sequence[float], fps: float) -> str:
    """The text before a clip's frame list: which segment it is and when each frame was taken."""
    at = ", ".join(frame_time_text(t) for t in times_s)
    return (
        f"{clip_label(info, source_timeline=True)} The video that follows is {len(times_s)} "
        f"frames at {fps:g} fps; in the video's own time they show {at}."
    )


def file_label(
    info: ClipInfo, frames: int, fps: float, step_s: float, part: tuple[int, int]
) -> str:
    """The text before a video file: which segment (``info``: the span the file covers) and,
    for its frame ``k``, the time in the source video it shows (``part``: which of how many
    files the segment went as)."""
    index, parts = part
    of = f" (part {index} of {parts} of this segment)" if parts > 1 else ""
    return (
        f"{clip_label(info, source_timeline=True)} The video file that follows{of} holds "
        f"{frames} frames at {fps:g} fps; its frame k (k = 0, 1, …) shows "
        f"{frame_time_text(info.start_s)} + k × {step_s:g} s of the video's own time."
    )


def encode_mp4(pictures: Sequence[np.ndarray], rate: Fraction, max_height: int) -> bytes:
    """A video file of ``pictures`` (RGB, at least one, one size), one per ``1 / rate`` s, at
    most ``max_height`` high (:func:`tools.providers.base.encode_mp4`, fast preset: a file is
    encoded per clip and call)."""
    return base_encode_mp4(pictures, rate, max_height, preset="veryfast")


def _profile(model_name: str) -> ModelProfile:
    # This route offers the multimodal models a JSON mode (though no native schema output).
    return merge_profile(
        qwen_model_profile(model_name),
        PICTURES_PROMPTED_PROFILE,
        ModelProfile(supports_json_object_output=True),
    )


@dataclass(frozen=True)
class _VideoFile:
    """One video file of a clip: its span, frames, rate and encoded bytes; ``key`` names its
    upload (model, endpoint, content)."""

    info: ClipInfo  # the clip, its span narrowed to what this file covers
    frames: int
    rate: Fraction
    step_s: float  # source-video seconds between two of its frames
    mp4: bytes
    key: str
    part: tuple[int, int] = (1, 1)


@dataclass(frozen=True)
class _Clip:
    info: ClipInfo
    frames: list[TimedFrame]
    fps: float
    pictures: bool = False  # sent as labelled pictures, not as a frame list
    files: tuple[_VideoFile, ...] = ()  # sent as video files (the frames are in them)


def _clip_content(clip: _Clip) -> list[dict[str, Any]]:
    """A clip on the wire: its label and frame list, or (``pictures``) its label and each frame
    as a picture after its ``(video-id @ MM:SS)``, or per video file its label and the file (the
    :class:`_VideoFile` itself, until it is uploaded and replaced by its ``oss://`` URL)."""
    if clip.files:
        out: list[dict[str, Any]] = []
        for file in clip.files:
            fps = float(file.rate)
            out.append({"text": file_label(file.info, file.frames, fps, file.step_s, file.part)})
            out.append({"video": file, "fps": fps})
        return out
    if clip.pictures:
        label = clip_label(clip.info, source_timeline=True) + " Frames follow, each labelled."
        out = [{"text": label}]
        for frame in clip.frames:
            out.append({"text": frame.label()})
            out.append({"image": _data_uri(frame.jpeg, "image/jpeg")})
        return out
    times = [f.t_s for f in clip.frames]
    return [
        {"text": video_label(clip.info, times, clip.fps)},
        {"video": [_data_uri(f.jpeg, "image/jpeg") for f in clip.frames], "fps": clip.fps},
    ]


def _sent_video(clip: _Clip) -> dict[str, Any]:
    """What a request carries of one clip, as its response records it: the route, the fps
    declared and the frames the model sees (a file: those DashScope samples of it)."""
    if clip.files:
        sampled = sum(sampled_frames(f.frames, f.frames / f.rate, f.rate) for f in clip.files)
        return {
            "segment_id": clip.info.segment_id,
            "route": "temporary-storage",
            "fps": float(clip.files[0].rate),
            "files": len(clip.files),
            "frames": sampled,
        }
    return {
        "segment_id": clip.info.segment_id,
        "route": "pictures" if clip.pictures else "frame-list",
        "fps": None if clip.pictures else clip.fps,
        "frames": len(clip.frames),
    }


@dataclass(frozen=True)
class _Wire:
    """A request's messages as DashScope is sent them, and what it carries of each clip."""

    messages: list[dict[str, Any]]
    videos: list[dict[str, Any]]


def _even_sizes(total: int, parts: int) -> list[int]:
    """``total`` frames in ``parts`` runs as equal as can be, even-sized (an odd run loses a
    frame to DashScope's sampling), the longer ones first and an odd frame left in the last."""
    pairs, odd = divmod(total, 2)
    base, extra = divmod(pairs, parts)
    sizes = [2 * (base + (1 if i < extra else 0)) for i in range(parts)]
    sizes[-1] += odd
    return sizes


class DashScopeModel(ConfiguredModel):
    """A Qwen model on DashScope's native multimodal generation API."""

    def __init__(
        self,
        model_id: str,
        config: ProviderConfig,
        resources: ResourceLedger | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        region: str | None = None,
    ) -> None:
        """``model_id`` is ours (priced by the price table); ``config.model_name`` is sent.
        ``resources`` keeps the video files uploaded (default: this model's own ledger);
        ``clock`` says when they expire; ``region`` is the endpoint's Model Studio region where
        its host does not name one (:func:`video_route`)."""
        super().__init__(model_id, config, _profile(config.model_name))
        self.resources: ResourceLedger = (
            resources if resources is not None else MemoryResourceLedger()
        )
        self.clock = clock
        self.video = video_route(self.base_url, region)

    @property
    def system(self) -> str:
        """The provider, for telemetry: ``dashscope``."""
        return SYSTEM

    @property
    def base_url(self) -> str:
        """The API root every call goes to (``…/api/v1``)."""
        return self.config.base_url or DEFAULT_BASE_URL

    async def respond(self, call: ModelCall) -> ModelResponse:
        """One non-streamed generation call (its video files uploaded first)."""
        messages, params = call.messages, call.parameters
        settings: Mapping[str, Any] = call.settings or {}
        wire = await anyio.to_thread.run_sync(self._map_messages, messages, params)
        wire_messages = wire.messages
        media = _media_of(wire_messages)
        uploads = [
            item for item in _items_of(wire_messages) if isinstance(item.get("video"), _VideoFile)
        ]
        if uploads:
            await anyio.to_thread.run_sync(self._upload, uploads, self._timeout_s(settings))
        response = await self._call(wire_messages, settings, params)
        processed = self._process(response)
        arguments = self._call_arguments(settings, params)
        processed.provider_details = {
            **(processed.provider_details or {}),
            # What the request carried (recorded with the response): thinking is off for
            # every role here, whatever the role asks.
            "playlisteval_sent": {
                "model": self.model_name,
                "temperature": arguments.get("temperature"),
                "max_output_tokens": arguments.get("max_tokens"),
                "thinking": arguments.get("enable_thinking"),
                "frame_height": sent_frame_height(messages, self.config.frame_height),
                "media": media,
                # Where the endpoint is, and how each clip went (route, fps, frames).
                "region": self.video.region,
                "video_route": self.video.route,
                "videos": wire.videos,
            },
        }
        return processed

    # -- the request ---------------------------------------------------------------------------

    def _timeout_s(self, settings: Mapping[str, Any]) -> float:
        timeout = settings.get("timeout")
        return float(timeout) if isinstance(timeout, int | float) else self.config.timeout_s

    def _call_arguments(
        self, settings: Mapping[str, Any], params: ModelRequestParameters
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = {"result_format": "message", "enable_thinking": False}
        for ours, theirs in (
            ("max_tokens", "max_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("seed", "seed"),
            ("stop_sequences", "stop"),
            ("presence_penalty", "presence_penalty"),
        ):
            if settings.get(ours) is not None:
                arguments[theirs] = settings[ours]
        if params.output_mode in ("prompted", "native") and params.output_object is not None:
            arguments["response_format"] = {"type": "json_object"}
        return arguments

    async def _call(
        self,
        wire_messages: list[dict[str, Any]],
        settings: Mapping[str, Any],
        params: ModelRequestParameters,
    ) -> Any:
        timeout_s = self._timeout_s(settings)
        # A session per call, made like the SDK's own shared one (certifi roots, proxy settings
        # from the environment): bound to this loop, closed when the call ends.
        connector = aiohttp.TCPConnector(ssl=get_ssl_context())
        try:
            async with aiohttp.ClientSession(connector=connector, trust_env=True) as session:
                response = await AioMultiModalConversation.call(
                    model=self.config.model_name,
                    messages=wire_messages,
                    api_key=self.config.api_key,
                    base_address=self.base_url,
                    request_timeout=timeout_s,
                    session=session,
                    **self._call_arguments(settings, params),
                )
        except TimeoutError as exc:  # aiohttp's total timeout and ServerTimeoutError alike
            raise ModelTimeoutError(
                self.model_name, f"no answer from {self.base_url!r} within {timeout_s:g} s"
            ) from exc
        except aiohttp.ClientConnectionError as exc:
            raise ModelConnectionError(
                self.model_name, f"could not reach {self.base_url!r}: {exc}"
            ) from exc
        except (aiohttp.ContentTypeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelAPIError(
                self.model_name, f"DashScope answered with a body that is not JSON: {exc}"
            ) from exc
        except DashScopeAuthenticationError as exc:  # no key given and none in the environment
            raise ModelAuthenticationError(self.model_name, str(exc)) from exc
        except DashScopeException as exc:  # the SDK refused to build the request
            raise ModelRequestRejectedError(self.model_name, str(exc)) from exc
        except (TypeError, KeyError, AttributeError) as exc:
            # The SDK builds its response object from the body without checking its shape.
            raise ModelAPIError(
                self.model_name, f"DashScope answered with an unexpected body: {exc!r}"
            ) from exc
        return response

    def _map_messages(
        self, messages: Sequence[ModelMessage], params: ModelRequestParameters
    ) -> _Wire:
        system: list[str] = [
            part.content for part in self._get_instruction_parts(messages, params) or []
        ]
        turns: list[dict[str, Any]] = []
        videos: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, SystemPromptPart):
                        system.append(part.content)
                    elif isinstance(part, UserPromptPart):
                        content = self._user_content(part, videos)
                        turns.append({"role": "user", "content": content})
                    else:
                        raise UserError(
                            f"the DashScope adapter cannot send a {type(part).__name__}; it "
                            "serves single-turn role calls without tools"
                        )
            else:
                texts = [p.content for p in message.parts if isinstance(p, TextPart)]
                if texts:
                    turns.append({"role": "assistant", "content": [{"text": "\n\n".join(texts)}]})
        if system:
            turns.insert(0, {"role": "system", "content": [{"text": "\n\n".join(system)}]})
        sent = sum(_base64_images(item) for turn in turns for item in turn["content"])
        if sent > MAX_BASE64_IMAGES:
            raise UserError(self._too_many_images(sent, videos))
        return _Wire(turns, videos)

    def _too_many_images(self, sent: int, videos: Sequence[Mapping[str, Any]]) -> str:
        """Why a request of ``sent`` Base64 images is refused, and what to do."""
        planned = [v for v in videos if v["route"] == "frame-list" and not v.get("fixed")]
        if self.video.route == "frame-list" and planned:
            where = self.video.region or "a host that names no region"
            return (
                f"this DashScope request would carry {sent} base64 images: DashScope takes at "
                f"most {MAX_BASE64_IMAGES} per request, and at {self.base_url!r} ({where}) "
                "clips go as base64 frame lists, since DashScope's temporary storage for video "
                "files is documented for China (Beijing) only: set "
                f"providers.models.{self.our_model_id!r}.max_frames to at most "
                f"{MAX_BASE64_IMAGES} (fewer with pictures or fixed frames beside the clips), "
                "or use the Beijing endpoint https://dashscope.aliyuncs.com/api/v1"
            )
        return (
            f"this DashScope request would carry {sent} base64 images (pictures and the "
            f"frames of clips whose frames were fixed); DashScope takes at most "
            f"{MAX_BASE64_IMAGES} per request: send fewer pictures or fixed frames (each "
            f"such clip is at least {MIN_VIDEO_FRAMES} frames, or its frames as pictures)"
        )

    def _user_content(
        self, part: UserPromptPart, videos: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """The wire content of a user prompt; what goes of each clip is added to ``videos``."""
        if isinstance(part.content, str):
            return [{"text": part.content}]
        items = list(part.content)
        clips = self._clips(items)
        content: list[dict[str, Any]] = []
        for item in items:
            clip = clips.get(id(item))
            if clip is not None:
                content.extend(_clip_content(clip))
                if videos is not None:
                    videos.append({**_sent_video(clip), "fixed": clip.info.fixed})
            elif isinstance(item, str):
                content.append({"text": item})
            elif isinstance(item, BinaryContent) and item.media_type.startswith("image/"):
                content.append({"image": _data_uri(item.data, item.media_type)})
            elif isinstance(item, ImageUrl):
                content.append({"image": item.url})
            elif isinstance(item, VideoUrl):
                content.append({"video": item.url})
            else:
                raise UserError(
                    f"the DashScope adapter cannot send {type(item).__name__} content "
                    f"({getattr(item, 'media_type', '?')!r}); Qwen takes text, images and video"
                )
        return content

    def _clips(self, items: Sequence[object]) -> dict[int, _Clip]:
        """The clips among ``items`` as they are sent, planned as the budget plans them
        (:func:`frame_times` with ``config.video_fps`` and ``config.max_frames``): as video
        files where the endpoint has temporary storage (:attr:`video`), else as frame lists."""
        found = [(item, info) for item in items if (info := clip_info(item)) is not None]
        if not found:
            return {}
        wanted = frame_times(
            [info for _, info in found],
            self.config.video_fps,
            max(self.config.max_frames, 0),
            MIN_VIDEO_FRAMES,
        )
        out: dict[int, _Clip] = {}
        as_files = self.video.route == "temporary-storage"
        for (item, info), times in zip(found, wanted, strict=True):
            assert isinstance(item, BinaryContent)
            if as_files and not info.fixed:
                files = self._video_files(item, info, times)
                if files:
                    out[id(item)] = _Clip(info, [], float(files[0].rate), files=tuple(files))
                    continue
            frames = clip_frames(item, info, times, shown_height(info, self.config.frame_height))
            if info.fixed and len(frames) < MIN_VIDEO_FRAMES:
                # Fewer fixed frames than a frame list takes: each goes as a picture of its own
                # (what the caller fixed is what is shown; padding it would show more).
                out[id(item)] = _Clip(info, frames, info.fps, pictures=True)
                continue
            if len(frames) < MIN_VIDEO_FRAMES:
                raise UserError(
                    f"segment {info.segment_id!r}: its clip decoded to {len(frames)} frames; "
                    f"DashScope needs at least {MIN_VIDEO_FRAMES} per video"
                )
            rate = len(frames) / info.duration_s if info.duration_s > 0 else MAX_FPS
            if info.fixed and info.fps > 0:
                rate = info.fps  # the spacing of the frames the caller fixed
            # A frame list's fps only states the frames' spacing (the label gives each one's
            # time); DashScope refuses one outside [0.1, 10].
            fps = min(max(round(rate, 3), MIN_FPS), MAX_FPS)
            out[id(item)] = _Clip(info, frames, fps)
        return out

    def _video_files(
        self, part: BinaryContent, info: ClipInfo, times: Sequence[float]
    ) -> list[_VideoFile]:
        """A clip's planned frames (clip-relative ``times``) as the video files it is sent as,
        each within the model's :func:`video_file_limits` and :data:`MAX_FILE_FRAMES`; none
        when the clip is too short for a file (it goes as a frame list)."""
        limits = video_file_limits(self.model_name)
        count = len(times)
        if info.duration_s <= 0 or count < MIN_VIDEO_FRAMES:
            return []
        rate = file_rate(count, info.duration_s)
        if count / rate < limits.min_duration_s:
            return []
        step_s = info.duration_s / count  # the plan's spacing (frame_times: i × duration / n)
        # As few files as the file's duration and DashScope's frames per file allow.
        parts = max(
            math.ceil(count / MAX_FILE_FRAMES),
            math.ceil(count / rate / Fraction(limits.max_duration_s)),
        )
        sizes = _even_sizes(count, parts)
        if min(sizes) < MIN_VIDEO_FRAMES:
            raise UserError(
                f"segment {info.segment_id!r}: {count} frames at {float(rate):g} fps last "
                f"{float(count / rate):g} s, and files of {self.model_name!r} of at most "
                f"{limits.max_duration_s:g} s would hold fewer than {MIN_VIDEO_FRAMES} frames "
                "each: send shorter segments"
            )
        pictures = self._clip_pictures(part, info, times)
        content = hashlib.sha256(part.data).hexdigest()
        files: list[_VideoFile] = []
        first = 0
        for size in sizes:
            run = (first, first + size)
            files += self._encoded(info, content, pictures, run, rate, step_s, limits)
            first += size
        total = len(files)
        return [replace(f, part=(index, total)) for index, f in enumerate(files, 1)]

    def _encoded(
        self,
        info: ClipInfo,
        content: str,
        pictures: Sequence[np.ndarray],
        run: tuple[int, int],
        rate: Fraction,
        step_s: float,
        limits: VideoFileLimits,
    ) -> list[_VideoFile]:
        """Frames ``run`` (first, past-last) of a clip (its bytes' digest: ``content``) as one
        video file, or as two halves, and so on, while a file is over the model's size limit;
        refused when it cannot be cut into files of :data:`MIN_VIDEO_FRAMES` frames and the
        shortest duration a file may have."""
        first, last = run
        mp4 = encode_mp4(pictures[first:last], rate, self.config.frame_height)
        if len(mp4) <= limits.max_bytes:
            start = info.start_s + first * step_s
            span = replace(
                info, start_s=start, end_s=min(start + (last - first) * step_s, info.end_s)
            )
            digest = hashlib.sha256(
                json.dumps(
                    [
                        self.model_name,
                        self.base_url,
                        content,
                        round(span.start_s, 3),
                        round(span.end_s, 3),
                        last - first,
                        str(rate),
                        self.config.frame_height,
                    ]
                ).encode()
            ).hexdigest()
            return [_VideoFile(span, last - first, rate, step_s, mp4, digest)]
        half = (first + last) // 2 // 2 * 2
        shortest = min(half - first, last - half)
        if shortest < MIN_VIDEO_FRAMES or shortest / rate < Fraction(limits.min_duration_s):
            raise UserError(
                f"segment {info.segment_id!r}: a video file of its {last - first} frames from "
                f"{frame_time_text(info.start_s + first * step_s)} is {len(mp4):,} bytes, over "
                f"the {limits.max_bytes:,} bytes DashScope takes of one {self.model_name!r} "
                f"video file (a temporary upload), and it cannot be cut into files of at least "
                f"{MIN_VIDEO_FRAMES} frames and {limits.min_duration_s:g} s that fit: lower "
                "frame_height"
            )
        return [
            *self._encoded(info, content, pictures, (first, half), rate, step_s, limits),
            *self._encoded(info, content, pictures, (half, last), rate, step_s, limits),
        ]

    def _clip_pictures(
        self, part: BinaryContent, info: ClipInfo, times: Sequence[float]
    ) -> list[np.ndarray]:
        """The clip's decoded frames nearest the clip-relative ``times`` (RGB; a frame nearest
        several times is one array, not copies)."""
        decoded = nearest_frames(decode_clip(part.data, max(info.fps, 0.01)), times)
        if len(decoded) < MIN_VIDEO_FRAMES:
            raise UserError(
                f"segment {info.segment_id!r}: its clip decoded to {len(decoded)} frames; "
                f"DashScope needs at least {MIN_VIDEO_FRAMES} per video"
            )
        return [frame.image for frame in decoded]

    # -- video files on DashScope's temporary storage --------------------------------------------

    def _upload(self, items: Sequence[dict[str, Any]], timeout_s: float) -> None:
        """Upload the video file of each wire item (unless one uploaded for the same key still
        lives) and put its ``oss://`` URL in its place. Blocking: run in a worker thread."""
        policy: dict[str, Any] | None = None
        expires: datetime | None = None
        for item in items:
            file = item["video"]
            assert isinstance(file, _VideoFile)
            found = self.resources.find(SYSTEM, "upload", file.key, self.clock())
            if found is not None:
                item["video"] = found.name
                continue
            if policy is None or (expires is not None and self.clock() >= expires):
                policy, expires = self._upload_policy(timeout_s)
            url = self._post(file, policy)
            self.resources.record(
                ProviderResource(
                    SYSTEM, "upload", file.key, url, expires_at=self.clock() + UPLOAD_TTL
                )
            )
            item["video"] = url

    def _upload_policy(self, timeout_s: float) -> tuple[dict[str, Any], datetime]:
        """A policy for form uploads to the temporary storage, for this model, at this
        endpoint (``GET {base_url}/uploads?action=getPolicy``), and when it stops being good."""
        with self._storage_errors(
            timed_out=f"no upload policy from {self.base_url!r} within {timeout_s:g} s",
            unreachable=f"could not reach {self.base_url!r} for an upload policy",
        ):
            try:
                response = OssUtils.get_upload_certificate(
                    model=self.model_name,
                    # The SDK's ``api_key: str = None``: None reads DASHSCOPE_API_KEY.
                    api_key=cast(str, self.config.api_key),
                    base_address=self.base_url,
                    request_timeout=timeout_s,
                )
            except DashScopeAuthenticationError as exc:
                raise ModelAuthenticationError(self.model_name, str(exc)) from exc
        status = int(getattr(response, "status_code", 0) or 0)
        if status != 200:
            self._failure(response, status)
            raise ModelAPIError(
                self.model_name, f"DashScope refused an upload policy: {response.message!r}"
            )
        policy = response.output
        if not isinstance(policy, dict) or "upload_host" not in policy:
            raise ModelAPIError(
                self.model_name, f"DashScope answered an upload policy without one: {policy!r}"
            )
        lives = timedelta(seconds=float(policy.get("expire_in_seconds") or 300) * 0.9)
        return policy, self.clock() + lives

    def _post(self, file: _VideoFile, policy: dict[str, Any]) -> str:
        """``file`` posted under ``policy`` with the SDK's form upload: its ``oss://`` URL."""
        with tempfile.TemporaryDirectory(prefix="dashscope-upload-") as folder:
            path = Path(folder) / f"{file.key[:32]}.mp4"  # the object's name: one per content
            path.write_bytes(file.mp4)
            with self._storage_errors(
                timed_out=f"the upload of {file.info.segment_id!r} timed out",
                unreachable=f"could not upload {file.info.segment_id!r}",
            ):
                try:
                    url, _ = OssUtils.upload(
                        model=self.model_name,
                        file_path=str(path),
                        api_key=cast(str, self.config.api_key),
                        upload_certificate=policy,
                    )
                except UploadFileException as exc:
                    raise ModelAPIError(self.model_name, str(exc)) from exc
        return str(url)

    @contextmanager
    def _storage_errors(self, *, timed_out: str, unreachable: str) -> Iterator[None]:
        """The temporary storage's transport failures in the block (the SDK reaches it through
        requests, not our aiohttp session) as the model errors the recorded-call wrapper
        retries: a timeout says ``timed_out``, a dropped connection ``unreachable`` and why."""
        try:
            yield
        except requests.Timeout as exc:
            raise ModelTimeoutError(self.model_name, timed_out) from exc
        except requests.ConnectionError as exc:
            raise ModelConnectionError(self.model_name, f"{unreachable}: {exc}") from exc

    # -- the response --------------------------------------------------------------------------

    def _process(self, response: Any) -> ModelResponse:
        status = int(getattr(response, "status_code", 0) or 0)
        if status != 200:
            return self._failure(response, status)
        output: Mapping[str, Any] = response.output or {}
        choices = output.get("choices") or []
        if not choices:
            raise ModelAPIError(
                self.model_name, f"DashScope answered 200 with no choices: {dict(output)!r}"
            )
        choice: Mapping[str, Any] = choices[0]
        message: Mapping[str, Any] = choice.get("message") or {}
        parts: list[ModelResponsePart] = []
        if reasoning := message.get("reasoning_content"):
            parts.append(ThinkingPart(content=str(reasoning)))
        text = _text_of(message.get("content"))
        if text:
            parts.append(TextPart(content=text))
        raw_finish = str(choice.get("finish_reason") or "")
        return ModelResponse(
            parts=parts,
            usage=_usage(response.usage or {}),
            model_name=self.model_name,
            provider_name=SYSTEM,
            provider_url=self.base_url,
            provider_response_id=getattr(response, "request_id", None) or None,
            finish_reason=_FINISH_REASONS.get(raw_finish),
            provider_details={"finish_reason": raw_finish} if raw_finish else None,
        )

    def _failure(self, response: Any, status: int) -> ModelResponse:
        code = str(getattr(response, "code", "") or "")
        message = str(getattr(response, "message", "") or "")
        request_id = str(getattr(response, "request_id", "") or "")
        if code in REFUSAL_CODES:
            # A refusal is an answer, not a failed request: the agent raises ContentFilterError.
            return ModelResponse(
                parts=[],
                model_name=self.model_name,
                provider_name=SYSTEM,
                provider_url=self.base_url,
                provider_response_id=request_id or None,
                finish_reason="content_filter",
                provider_details={"block_reason": code, "message": message},
            )
        headers: dict[str, str] = {
            str(k): str(v) for k, v in (getattr(response, "headers", None) or {}).items()
        }
        body = {"code": code, "message": message, "request_id": request_id}
        raise ModelHTTPError.for_category(
            _category(status, code, message),
            status_code=status,
            model_name=self.model_name,
            body=body,
            headers=headers,
            provider_error_code=code or None,
        )


def _category(
    status: int, code: str, message: str
) -> (
    type[
        ModelRateLimitError
        | ModelQuotaExceededError
        | ModelUnavailableError
        | ModelServerError
        | ModelRequestRejectedError
    ]
    | None
):
    """The pydantic-ai error category of a DashScope error: its code first (DashScope answers a
    used-up quota and a rate limit both with 429), then its status.

    Codes from Model Studio's "Error messages" page
    (https://www.alibabacloud.com/help/en/model-studio/error-code): 400 ``Arrearage``, 429
    ``PrepaidBillOverdue`` / ``PostpaidBillOverdue`` and 403 ``AllocationQuota.FreeTierOnly``
    (a free-tier-only account past its free quota): no wait helps, so a quota error, which the
    recorded-call wrapper does not retry; 429 ``Throttling`` / ``Throttling.RateQuota`` /
    ``LimitRequests`` and 429 ``Throttling.AllocationQuota``: a rate limit, retried after a
    wait; 404 ``ModelNotFound``, and the 400 ``InvalidParameter`` "Model not exist." the
    generation API answers for an unknown id: a model that is not there.

    ``Throttling.AllocationQuota`` ("Allocated quota exceeded, please increase your quota
    limit.") is the tokens-a-minute limit, not a spent account: Model Studio's "Rate limits"
    page (https://www.alibabacloud.com/help/en/model-studio/rate-limit, FAQ "Why is rate
    limiting triggered?": "Allocated quota exceeded ... the tokens per minute (TPM) limit was
    triggered"; requests "typically recover automatically within one minute"), and the
    dashscope SDK's own error map says the same (dashscope 2.0.2, ``dashscope/v2/errors.py``,
    ``_WIRE_TO_PUBLIC``: ``THROTTLING_ALLOCATION_QUOTA`` → ``rate_limit_exceeded``, the catalog's
    429 ``RateLimitError`` in ``dashscope/v2/_error_registry.py``).
    """
    if code in _QUOTA_CODES or code.startswith("AllocationQuota"):
        return ModelQuotaExceededError
    if code == "CommodityNotPurchased":  # the model was never activated on the account
        return ModelAuthenticationError
    if code == "ModelNotFound" or (code == "InvalidParameter" and _names_missing_model(message)):
        return ModelNotFoundError
    if status == 429 or code.startswith("Throttling") or code == "LimitRequests":
        return ModelRateLimitError
    if status in (401, 403) or code in ("InvalidApiKey", "AccessDenied"):
        return ModelAuthenticationError
    if status == 404:
        return ModelNotFoundError
    if status == 503:
        return ModelUnavailableError
    if status >= 500:
        return ModelServerError
    if status >= 400:
        lowered = message.lower()
        if "input length" in lowered or "too long" in lowered:
            return ModelContextWindowExceededError
        return ModelRequestRejectedError
    return None


_QUOTA_CODES = frozenset({"Arrearage", "PrepaidBillOverdue", "PostpaidBillOverdue"})


def _names_missing_model(message: str) -> bool:
    lowered = message.lower()
    return "model not exist" in lowered or "model can not be found" in lowered


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        items = cast(list[object], content)
        return "".join(
            str(item["text"]) for item in items if isinstance(item, dict) and "text" in item
        )
    return ""


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _usage(raw: Mapping[str, Any]) -> RequestUsage:
    """DashScope's usage as pydantic-ai counts it.

    DashScope reports ``input_tokens``/``output_tokens`` with per-modality input counts both at
    the top level (``image_tokens``, ``video_tokens``, ``audio_tokens``) and in
    ``input_tokens_details``; cached input is ``prompt_tokens_details.cached_tokens``.
    """
    details_in: Mapping[str, Any] = raw.get("input_tokens_details") or {}
    details: dict[str, int] = {}
    for theirs, ours in _DETAIL_NAMES:
        value = _count(details_in.get(theirs))
        if value is None and theirs != "text_tokens":
            value = _count(raw.get(theirs))
        if value is not None:
            details[ours] = value
    prompt_details: Mapping[str, Any] = raw.get("prompt_tokens_details") or {}
    cached = _count(prompt_details.get("cached_tokens")) or _count(details_in.get("cached_tokens"))
    output_details: Mapping[str, Any] = raw.get("output_tokens_details") or {}
    return RequestUsage(
        input_tokens=_count(raw.get("input_tokens")) or 0,
        output_tokens=_count(raw.get("output_tokens")) or 0,
        cache_read_tokens=cached or 0,
        input_audio_tokens=details.get("audio_prompt_tokens", 0),
        output_reasoning_tokens=_count(output_details.get("reasoning_tokens")) or 0,
        details=details,
    )


def _is_frame_list(item: Mapping[str, Any]) -> bool:
    return isinstance(item.get("video"), list)


def _base64_images(item: Mapping[str, Any]) -> int:
    """How many Base64 images a wire content item carries (a frame list: one per frame)."""
    values = item["video"] if _is_frame_list(item) else [item.get("image")]
    return sum(1 for v in values if isinstance(v, str) and v.startswith("data:"))


def _inline_images(message: ModelMessage) -> int:
    """The pictures (not clips) of a message that go as Base64 data URIs."""
    if not isinstance(message, ModelRequest):
        return 0
    return sum(
        1
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
        if isinstance(item, BinaryContent) and item.media_type.startswith("image/")
    )


def _data_uri(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


# Model Studio "List models" (https://www.alibabacloud.com/help/en/model-studio/list-models):
# ``GET {base}/api/v1/models`` with the key as ``Authorization: Bearer``, paged by ``page_no`` /
# ``page_size``, answers the generation models of the account's region. The dashscope SDK's call
# for it is ``dashscope.Models.list`` (sync: run in a thread); its page is ``output.models[]``,
# each entry's id in ``model``, with ``output.total`` (the SDK's own parser of that body:
# ``_parse_list`` in dashscope/v2/resources/models.py).
LIST_PAGE_SIZE = 100


async def dashscope_list_models(config: ProviderConfig) -> list[str]:
    """The ids DashScope at ``config.base_url`` serves, every page of ``Models.list``."""
    check_allow_model_requests()

    def fetch(page: int) -> Any:
        # The SDK's stub (dashscope/__init__.pyi) omits ``Models.list``; models.py defines it.
        return Models.list(  # type: ignore[attr-defined]
            page,
            LIST_PAGE_SIZE,
            api_key=config.api_key,
            base_address=config.base_url or DEFAULT_BASE_URL,
            request_timeout=config.timeout_s,
        )

    ids: list[str] = []
    page = 1
    while True:
        response = await anyio.to_thread.run_sync(fetch, page)
        if response.status_code != 200:
            raise DashScopeException(f"{response.status_code} {response.code}: {response.message}")
        output = response.output or {}
        models = output.get("models") or []
        ids += [str(m["model"]) for m in models if isinstance(m, dict) and m.get("model")]
        total = int(output.get("total", len(ids)))
        if not models or len(ids) >= total:
            return ids
        page += 1


def _items_of(wire_messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every content item of the request's messages."""
    return [
        item
        for message in wire_messages
        if isinstance(content := message.get("content"), list)
        for item in content
        if isinstance(item, dict)
    ]


def _media_of(wire_messages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many pictures, frames (of frame lists and video files) and video files the
    request's messages carry, and how many frames DashScope takes of them (a file:
    :func:`sampled_frames`)."""
    counts = {"images": 0, "frames": 0, "video_files": 0, "sampled_frames": 0}
    for item in _items_of(wire_messages):
        video = item.get("video")
        if "image" in item:
            counts["images"] += 1
        if isinstance(video, list):
            counts["frames"] += len(video)
            counts["sampled_frames"] += len(video)
        elif isinstance(video, _VideoFile):
            counts["frames"] += video.frames
            counts["video_files"] += 1
            duration = video.frames / video.rate
            counts["sampled_frames"] += sampled_frames(video.frames, duration, video.rate)
    return counts
