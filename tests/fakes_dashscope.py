"""A fake DashScope native API for the adapter tests, driven by the real ``dashscope`` SDK.

It serves ``POST /api/v1/services/aigc/multimodal-generation/generation`` in DashScope's native
wire format: the answer is ``output.choices[0].message.content == [{"text": …}]`` with its
``finish_reason``, ``usage`` and ``request_id``; an error is ``{code, message, request_id}`` with
the HTTP status. Video arrives as frame lists (``{"video": [data URI, …], "fps": …}``) or as
video files on its temporary storage (``{"video": "oss://…", "fps": …}``), each after a label
text naming the segment and when its frames were taken; the fake decodes the frames (a file: the
frames DashScope samples of it at the declared rate, :func:`sampled_frames`) and answers what the
offline provider would answer to the same prompt and frames.

The temporary storage is served as the SDK uses it (``dashscope/utils/oss_utils.py``):
``GET /api/v1/uploads?action=getPolicy&model=…`` answers an upload policy, and the policy's
``upload_host`` (this server, :data:`OSS_PATH`) takes the form POST as OSS's PostObject does;
the object is ``oss://{key}``, bound to the model it was uploaded for. The fake stands for one
region's endpoint (:attr:`DashScopeFake.region`, China (Beijing) unless told otherwise): the
storage is documented for Beijing only (:data:`STORAGE_REGIONS`), so elsewhere the policy
request is refused (:data:`NO_STORAGE`) and no ``oss://`` URL resolves.

Faults come in DashScope's own forms: 429 ``Throttling.RateQuota`` with ``Retry-After``, 500
``InternalError``, a held answer, a body that is not JSON, ``finish_reason: "length"`` with half
the answer, and the content-moderation refusal (400 ``DataInspectionFailed``);
:meth:`DashScopeFake.refuse_next` answers with any other error of :data:`ERRORS` (a used-up
quota, throttling). It refuses what the service refuses: a wrong key, a model id it does not
serve, more Base64 images than one request may carry, a rate outside 0.1–10 fps, a video file
longer or larger than its model takes (:data:`FILE_LIMITS`), an ``oss://`` URL without the
header that resolves it or uploaded for another model; and it bills images, frames and the
frames it samples of a file by the documented Qwen-VL rule (:func:`image_tokens`). Each rule
cites where it is written. What it received of each video is kept (:attr:`DashScopeFake.received`).
"""

from __future__ import annotations

import base64
import email
import email.policy
import hashlib
import hmac
import io
import itertools
import json
import math
import re
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from urllib.parse import parse_qs, urlparse

import av
import numpy as np
from PIL import Image

from playlisteval.settings import default_endpoints
from tests.fakes_providers import (
    RETRY_AFTER_S,
    FakeProviderServer,
    Harness,
    Reply,
    SeenRequest,
    offline_answer,
    prompt_has_context,
    serve_provider,
)
from tools.index import media
from tools.providers.base import ProviderConfig
from tools.providers.dashscope_model import dashscope_model

GENERATION_PATH = "/api/v1/services/aigc/multimodal-generation/generation"
# Model Studio "List models" (https://www.alibabacloud.com/help/en/model-studio/list-models):
# ``GET /api/v1/models?page_no=&page_size=`` with the key as a Bearer token; the page comes as
# ``{"request_id", "output": {"models": [{"model": <id>, …}], "page_no", "page_size", "total"}}``
# (the dashscope SDK's parser of it: ``_parse_list`` in dashscope/v2/resources/models.py).
MODELS_PATH = "/api/v1/models"
API_KEY = "sk-fake-dashscope"
PLAIN_ANSWER = '{"answer": "a fixed short answer from the fake DashScope"}'
# The model ids the fake serves: those Model Studio's pages name for this endpoint (the vision
# guide https://www.alibabacloud.com/help/en/model-studio/vision calls qwen3.7-plus in its
# example and lists the Qwen3.6/3.5, Qwen3-VL, QVQ and Qwen-VL models; qwen3-asr-flash is the
# speech-recognition model of the same generation API). Any other id is refused as the service
# refuses it (:data:`UNKNOWN_MODEL`).
MODELS = frozenset(
    {
        "qwen3.7-plus",
        "qwen3.6-plus",
        "qwen3.5-plus",
        "qwen3.5-flash",
        "qwen3-vl-plus",
        "qwen3-vl-flash",
        "qwen-vl-max",
        "qwen-vl-plus",
        "qvq-max",
        "qwen3-asr-flash",
    }
)
# Model Studio vision guide, "Image limits": at most 250 images passed as Base64 in one request
# (URLs and file paths allow more); a frame of a frame list is one image. The service answers
# with its general invalid-parameter error (400 ``InvalidParameter`` on the "Error messages"
# page, https://www.alibabacloud.com/help/en/model-studio/error-code).
MAX_BASE64_IMAGES = 250
# The declared rate of a video (a file or a frame list): ``fps`` in [0.1, 10] (QwenCloud's own
# vision guide, QwenCloud/qwencloud-ai skills/vision/qwencloud-vision/references/api-guide.md,
# request fields and "Input Limits": "fps range [0.1, 10], default 2.0").
MIN_FPS = 0.1
MAX_FPS = 10.0
DEFAULT_FPS = 2.0
# The temporary storage (Model Studio, "Upload local files to get temporary URLs",
# https://www.alibabacloud.com/help/en/model-studio/get-temporary-file-url): a policy from
# ``GET {base}/uploads?action=getPolicy&model=<model>`` behind the key, answered as
# ``{"request_id", "data": {policy, signature, upload_dir, upload_host, expire_in_seconds,
# max_file_size_mb, capacity_limit_mb, oss_access_key_id, x_oss_object_acl,
# x_oss_forbid_overwrite}}`` (the fields the SDK's ``OssUtils.upload`` reads, and where its
# ``_handle_http_stream_response`` finds them: ``data``); the file is then form-posted to
# ``upload_host`` and used as ``oss://<key>``. "Specify the model name at upload. Use the same
# model in subsequent calls -- files cannot be shared across models"; an ``oss://`` URL is
# resolved only with the header ``X-DashScope-OssResourceResolve: enable`` ("skipping it
# causes errors"); files live 48 hours.
UPLOADS_PATH = "/api/v1/uploads"
# Where that storage exists: "This document applies only to the China (Beijing) region. To use
# the models, you must use an API key from the China (Beijing) region." (the same page, English
# edition of 2026-02-04; editions in other languages of 2026-10 add Singapore: the fake takes
# the region every edition names). Model Studio's region ids ("Regions and endpoints",
# https://www.alibabacloud.com/help/en/model-studio/regions).
BEIJING = "cn-beijing"
SINGAPORE = "ap-southeast-1"
STORAGE_REGIONS = frozenset({BEIJING})
# What an endpoint without the storage answers a policy request with. The service's words for
# it are not published (neither the pages above nor the dashscope SDK quote them); the status
# and code are the "Error codes" page's for an API path a region does not serve (Model Studio,
# https://help.aliyun.com/en/model-studio/error-code-start, "Quick troubleshooting": "404:
# model, resource, or API path not found | ModelNotFound, NotFound | ... whether the model is
# available in the region, and whether the request path and call method meet the API
# requirements"). The message is the fake's own.
NO_STORAGE = (404, "NotFound", "The temporary file storage is not offered in region {region}.")
OSS_PATH = "/oss-instant"  # the policy's upload_host, on this server
OSS_RESOLVE_HEADER = "X-DashScope-OssResourceResolve"
POLICY_LIFETIME_S = 300
_OSS_KEY_ID = "LTAI-fake-dashscope-instant"
_OSS_SECRET = b"fake-dashscope-instant-secret"
# A video file per model: its duration (at least 2 s) and its size as a temporary upload, from
# QwenCloud's vision guide (QwenCloud/qwencloud-ai skills/vision/qwencloud-vision/references/
# api-guide.md, FAQ "How long a video can the model understand?": "Qwen3.6/Qwen3.5 supports up
# to 2 hours, Qwen3-VL-Plus up to 1 hour"; "File Input Methods": "Temp upload (oss://) … Up to
# 100 MB (local upload)") and the skill's SKILL.md ("Input Limits": "Duration 2s–2h (Qwen3.5)
# / 2s–10min (others)"). qwen3.7-plus is in neither; the fake takes it as qwen3.6-plus.
MIN_FILE_SECONDS = 2.0
MAX_UPLOAD_BYTES = 100 * 1000 * 1000
FILE_SECONDS: dict[str, float] = {
    "qwen3.7-plus": 7200.0,
    "qwen3.6-plus": 7200.0,
    "qwen3.5-plus": 7200.0,
    "qwen3.5-flash": 7200.0,
    "qwen3-vl-plus": 3600.0,
}
OTHER_FILE_SECONDS = 600.0
# The frames DashScope samples of a video file: "1 frame every 1/fps seconds" (the guide, "Key
# Parameters"), counted as the models' open video processor counts them (QwenLM/Qwen3-VL,
# qwen-vl-utils/src/qwen_vl_utils/vision_process.py, ``smart_nframes``: duration × fps, within
# [FPS_MIN_FRAMES = 4, min(FPS_MAX_FRAMES = 768, frames)], floored to a multiple of
# FRAME_FACTOR = 2; the frames taken ``linspace(0, frames - 1, n).round()``). DashScope's own
# arithmetic is not published; the fake does it exactly (in fractions).
FRAME_FACTOR = 2
FILE_MIN_FRAMES = 4
FILE_MAX_FRAMES = 768
# Image tokens, Model Studio vision guide, "Image token conversion" (the same rule and code in
# its Chinese edition, https://help.aliyun.com/zh/model-studio/vision): tokens = h_bar * w_bar /
# token_pixels + 2, where each side is rounded to a multiple of the token's side (32 px for
# Qwen3-VL and the models after it, 28 px for QVQ and the Qwen2.5-VL models), scaled to keep the
# area within [4, max] tokens; the two are the <|vision_bos|>/<|vision_eos|> markers.
TOKEN_SIDE = 32
TOKEN_SIDE_QWEN25 = 28
_QWEN25_PREFIXES = ("qvq", "qwen2.5-vl")
MIN_IMAGE_TOKENS = 4
# The highest an image is counted at (``vl_high_resolution_images``: 16384 tokens); the default
# cap (``max_pixels``) is lower, but no frame we send (720p at most: 900 tokens) comes near either.
MAX_IMAGE_TOKENS = 16384
VISION_MARKERS = 2
TEMPORAL_PATCH = 2  # Qwen-VL merges every two consecutive video frames into one (temporal patch)
_SEGMENT_RE = re.compile(r"\(segment ([^)\s]+)\)")
_FILE_RE = re.compile(
    r"holds (\d+) frames at ([0-9.]+) fps; its frame k \(k = 0, 1, …\) shows "
    r"(\d+:\d{2}(?:\.\d)?) \+ k × ([0-9.e+-]+) s"
)
_TIMES_RE = re.compile(r"they show ([0-9:., ]+)\.")
_PICTURE_LABEL_RE = re.compile(r"^\([^()@\s]+ @ (\d+:\d{2})\)$")  # "(video-id @ MM:SS)"
_TIME_RE = re.compile(r"(\d+):(\d{2})(?:\.(\d))?")
_SCHEMA_MARK = "schema:"


# The errors :meth:`DashScopeFake.refuse_next` can answer with, as the service sends them: status,
# code and message from Model Studio's "Error messages" page
# (https://www.alibabacloud.com/help/en/model-studio/error-code), in the native API's body
# ``{"code", "message", "request_id"}``.
ERRORS: dict[str, tuple[int, str]] = {
    "Throttling.AllocationQuota": (
        429,
        "Allocated quota exceeded, please increase your quota limit.",
    ),
    "Throttling.RateQuota": (429, "Requests rate limit exceeded, please try again later."),
    "Throttling": (429, "Requests throttling triggered."),
    "Arrearage": (400, "Access denied, please make sure your account is in good standing."),
    # A free-tier-only account past its free quota, as the service words it (the compatible
    # API's body quoted at https://errs.dmxapi.cn/detail.php?id=1942; the native API sends the
    # same code and message in its own body).
    "AllocationQuota.FreeTierOnly": (
        403,
        "The free tier of the model has been exhausted. If you wish to continue access the model "
        'on a paid basis, please disable the "use free tier only" mode in the management console.',
    ),
}
# An id the service does not serve: 400 ``InvalidParameter`` "Model not exist." (what the
# generation API answers; the SDK's own tests use this body for it: github.com/dashscope/
# dashscope-sdk-python, tests/unit/test_error_registry_p0_regressions.py). The error page's
# general table also lists 404 ``ModelNotFound`` "Model can not be found."; the adapter maps both.
UNKNOWN_MODEL = (400, "InvalidParameter", "Model not exist.")
TOO_MANY_IMAGES = (
    400,
    "InvalidParameter",
    "Required parameter(s) missing or invalid, please check the request parameters.",
)


def _error(status: int, code: str, message: str, request_id: str) -> Reply:
    return Reply.json(status, {"code": code, "message": message, "request_id": request_id})


def _signature(policy: str) -> str:
    """The OSS signature of a POST policy: base64 of its HMAC-SHA1 under the bucket's secret."""
    digest = hmac.new(_OSS_SECRET, policy.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def _oss_error(status: int, code: str, message: str) -> Reply:
    """An OSS error, in OSS's XML body."""
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{message}</Message><RequestId>fake-oss</RequestId></Error>"
    )
    return Reply(status, body.encode(), {"Content-Type": "application/xml"})


def _form(request: SeenRequest) -> dict[str, bytes]:
    """The fields of a multipart/form-data body (a file field: its bytes)."""
    content_type = request.headers.get("Content-Type") or request.headers.get("content-type", "")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.message_from_bytes(head + request.body, policy=email.policy.HTTP)
    fields: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = payload
    return fields


def token_side(model: str) -> int:
    """The side, in pixels, of the square one visual token covers for ``model``."""
    return TOKEN_SIDE_QWEN25 if model.startswith(_QWEN25_PREFIXES) else TOKEN_SIDE


def image_tokens(height: int, width: int, model: str) -> int:
    """What DashScope bills one image of ``height`` x ``width`` pixels (the vision guide's
    "Image token conversion", markers included): the sides rounded to the token grid, the area
    scaled into [4, 16384] tokens."""
    side = token_side(model)
    unit = side * side
    h_bar, w_bar = round(height / side) * side, round(width / side) * side
    if h_bar * w_bar > MAX_IMAGE_TOKENS * unit:
        beta = math.sqrt(height * width / (MAX_IMAGE_TOKENS * unit))
        h_bar = math.floor(height / beta / side) * side
        w_bar = math.floor(width / beta / side) * side
    elif h_bar * w_bar < MIN_IMAGE_TOKENS * unit:
        beta = math.sqrt(MIN_IMAGE_TOKENS * unit / (height * width))
        h_bar = math.ceil(height * beta / side) * side
        w_bar = math.ceil(width * beta / side) * side
    return h_bar * w_bar // unit + VISION_MARKERS


def video_tokens(frames: list[tuple[int, int]], model: str) -> int:
    """What a frame list of ``(height, width)`` frames is billed: each frame's grid as an image's,
    every two consecutive frames merged into one (temporal patch 2), one pair of markers."""
    grids = [image_tokens(h, w, model) - VISION_MARKERS for h, w in frames]
    return math.ceil(sum(grids) / TEMPORAL_PATCH) + VISION_MARKERS


def _seconds(text: str) -> float:
    match = _TIME_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a frame time: {text!r}")
    return int(match.group(1)) * 60 + int(match.group(2)) + int(match.group(3) or 0) / 10


def _decode_jpeg(uri: str) -> np.ndarray:
    _, _, data = uri.partition("base64,")
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        return np.asarray(image.convert("RGB"))


def _size(image: np.ndarray) -> tuple[int, int]:
    return int(image.shape[0]), int(image.shape[1])


def base64_images(body: Any) -> int:
    """How many Base64 images a request carries: pictures and every frame of a frame list."""
    count = 0
    for _, item in _items(body):
        values = item["video"] if isinstance(item.get("video"), list) else [item.get("image")]
        count += sum(1 for v in values if isinstance(v, str) and v.startswith("data:"))
    return count


def _declared_rates(body: Any) -> list[float]:
    """The ``fps`` every video item of a request declares."""
    return [float(item["fps"]) for _, item in _items(body) if "video" in item and "fps" in item]


def _items(body: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every content item of the request, with the role of its message."""
    messages = (body or {}).get("input", {}).get("messages", [])
    out: list[tuple[str, dict[str, Any]]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            out.append((message.get("role", ""), {"text": content}))
        else:
            out.extend((message.get("role", ""), item) for item in content or [])
    return out


def request_text(body: Any) -> str:
    """All text a request carries, in order (system instructions, prompt, frame labels)."""
    return "\n".join(str(item["text"]) for _, item in _items(body) if "text" in item)


@dataclass(frozen=True)
class StoredObject:
    """A file on the fake's temporary storage: its bytes, and the model it was uploaded for."""

    url: str  # oss://<key>
    model: str
    data: bytes


@dataclass(frozen=True)
class DecodedFile:
    """A stored video file as the service reads it: its frames, rate and duration."""

    frames: list[np.ndarray]
    rate: Fraction  # frames a second (the stream's average rate)

    @property
    def duration_s(self) -> Fraction:
        """Its length: its frames over its rate."""
        return Fraction(len(self.frames)) / self.rate


@dataclass(frozen=True)
class SeenVideo:
    """One video item of a generation request as the fake received it: its segment, the
    rate it declared, and (a file) its duration and the frames sampled of it."""

    segment_id: str
    kind: str  # "file" or "frames" (a frame list)
    fps: float
    frames: int  # sampled of a file; sent in a frame list
    duration_s: float | None = None  # a file's
    url: str | None = None  # a file's oss:// URL
    start_s: float | None = None  # source-video time of its first frame (from its label)
    step_s: float | None = None  # source-video seconds between two of a file's frames

    @property
    def rate(self) -> float | None:
        """Frames seen a second of the file (what the model sees of the video)."""
        return self.frames / self.duration_s if self.duration_s else None


# Every object uploaded to any fake in this process, by URL (the keys are unique: see
# DashScopeFake.get_policy), so request_videos can read a request's files from its body alone.
_STORED: dict[str, StoredObject] = {}
_STORED_LOCK = threading.Lock()
_UPLOAD_DIRS = itertools.count(1)


def file_seconds(model: str) -> float:
    """The longest video file ``model`` takes (:data:`FILE_SECONDS`)."""
    return FILE_SECONDS.get(model, OTHER_FILE_SECONDS)


def sampled_frames(frames: int, rate: Fraction, fps: Fraction) -> int:
    """How many frames the service samples of a file of ``frames`` frames at ``rate`` when it
    is declared at ``fps`` (qwen-vl-utils' ``smart_nframes``)."""
    wanted = Fraction(frames) / rate * fps
    floor = math.ceil(FILE_MIN_FRAMES / FRAME_FACTOR) * FRAME_FACTOR
    ceiling = min(FILE_MAX_FRAMES, frames) // FRAME_FACTOR * FRAME_FACTOR
    bounded = min(max(wanted, Fraction(floor)), Fraction(ceiling))
    return math.floor(bounded / FRAME_FACTOR) * FRAME_FACTOR


def sampled_indices(frames: int, count: int) -> list[int]:
    """Which of a file's ``frames`` the service takes when it samples ``count``."""
    return [int(i) for i in np.linspace(0, frames - 1, count).round()]


def decode_file(data: bytes) -> DecodedFile:
    """A video file's frames (RGB) and rate, as PyAV reads it."""
    with av.open(io.BytesIO(data), mode="r") as container:
        stream = container.streams.video[0]
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
        rate = stream.average_rate
    if rate is None or not frames:
        raise ValueError("not a video file with frames")
    return DecodedFile(frames, Fraction(rate))


def file_duration(data: bytes) -> Fraction:
    """A video file's length, its frames over its rate, read without decoding its pictures."""
    with av.open(io.BytesIO(data), mode="r") as container:
        stream = container.streams.video[0]
        frames = stream.frames or sum(1 for packet in container.demux(stream) if packet.size)
        rate = stream.average_rate
    if rate is None or not frames:
        raise ValueError("not a video file with frames")
    return Fraction(frames) / Fraction(rate)


def declared_fps(item: dict[str, Any]) -> Fraction:
    """A video item's declared rate, exactly as written (default 2.0)."""
    return Fraction(repr(float(item.get("fps", DEFAULT_FPS))))


def request_videos(body: Any) -> list[dict[str, Any]]:
    """Each video of a request (a frame list, or a file on the temporary storage) with what its
    label says: ``segment_id``, ``times`` (s, in the source video, of the frames the model
    sees), ``frames`` (a frame list's data URIs; a file's sampled frames, RGB arrays), ``fps``
    as declared and ``kind``; a file also its ``url``, ``duration_s``, ``start_s`` and
    ``step_s`` (source-video seconds between its frames)."""
    videos: list[dict[str, Any]] = []
    label = ""
    for _, item in _items(body):
        if "text" in item:
            label = str(item["text"])
            continue
        video = item.get("video")
        if not isinstance(video, list | str):
            continue
        segment = _SEGMENT_RE.search(label)
        if isinstance(video, list):
            times = _TIMES_RE.search(label)
            if segment is None or times is None:
                raise ValueError(f"a frame list without a segment/times label: {label!r}")
            videos.append(
                {
                    "kind": "frames",
                    "segment_id": segment.group(1),
                    "times": [_seconds(t) for t in times.group(1).split(",")],
                    "frames": list(video),
                    "fps": item.get("fps"),
                }
            )
            continue
        stored = _STORED.get(video)
        described = _FILE_RE.search(label)
        if stored is None or segment is None or described is None:
            raise ValueError(f"a video {video!r} not stored here, or without a file label")
        decoded = decode_file(stored.data)
        count = sampled_frames(len(decoded.frames), decoded.rate, declared_fps(item))
        taken = sampled_indices(len(decoded.frames), count)
        start, step = _seconds(described.group(3)), float(described.group(4))
        videos.append(
            {
                "kind": "file",
                "segment_id": segment.group(1),
                "times": [start + i * step for i in taken],
                "frames": [decoded.frames[i] for i in taken],
                "fps": item.get("fps"),
                "url": video,
                "duration_s": float(decoded.duration_s),
                "start_s": start,
                "step_s": step,
                "file_frames": len(decoded.frames),
            }
        )
    return videos


def request_pictures(body: Any) -> dict[str, list[tuple[float, str]]]:
    """Segment id → (time in the video, data URI) of each picture a clip was sent as: a clip
    too short for a frame list goes as its label (naming the segment) and then, per frame, a
    ``(video-id @ MM:SS)`` text and the picture. Pictures with no such labels are not frames."""
    out: dict[str, list[tuple[float, str]]] = {}
    segment: str | None = None
    at: float | None = None
    for _, item in _items(body):
        if "text" in item:
            text = str(item["text"]).strip()
            named = _SEGMENT_RE.search(text)
            label = _PICTURE_LABEL_RE.match(text)
            if named is not None:
                segment, at = named.group(1), None
            elif label is not None:
                at = _seconds(label.group(1))
            else:
                segment = at = None
        elif "image" in item and segment is not None and at is not None:
            out.setdefault(segment, []).append((at, str(item["image"])))
            at = None
    return out


class DashScopeFake:
    """The generation endpoint's behaviour, over a :class:`FakeProviderServer`."""

    def __init__(self, server: FakeProviderServer, region: str = BEIJING) -> None:
        """Route the endpoint on ``server``; answers are the offline provider's for the model
        the request names. ``region``: the Model Studio region the endpoint is in (its
        temporary storage exists in :data:`STORAGE_REGIONS` only)."""
        self.server = server
        self.region = region
        self.api_key = API_KEY  # the key requests must carry
        self.models: set[str] = set(MODELS)  # the ids it serves
        self.usage: dict[str, int] = {}
        # What each accepted generation request carried of video, in order (one list each).
        self.received: list[list[SeenVideo]] = []
        self.objects: dict[str, StoredObject] = {}  # its temporary storage, by oss:// URL
        self._policies: dict[str, tuple[str, str]] = {}  # policy → (upload_dir, model)
        self._ids = itertools.count(1)
        self._refusals: deque[str] = deque()
        server.route("POST", GENERATION_PATH, self.generation)
        server.route("GET", MODELS_PATH, self.list_models)
        server.route("GET", UPLOADS_PATH, self.get_policy)
        server.route("POST", OSS_PATH, self.post_object)

    # -- the temporary storage ---------------------------------------------------------------

    def get_policy(self, request: SeenRequest) -> Reply:
        """``GET /api/v1/uploads?action=getPolicy&model=…``: a form-upload policy for ``model``
        (a fresh ``upload_dir`` each time), behind the key."""
        request_id = f"fake-{next(self._ids):06d}"
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "InvalidApiKey", "Invalid API-key provided.", request_id)
        if self.region not in STORAGE_REGIONS:
            status, code, message = NO_STORAGE
            return _error(status, code, message.format(region=self.region), request_id)
        query = parse_qs(urlparse(request.path).query)
        model = query.get("model", [""])[0]
        if query.get("action", [""])[0] != "getPolicy":
            return _error(*TOO_MANY_IMAGES, request_id)  # the general invalid-parameter error
        if model not in self.models:
            return _error(*UNKNOWN_MODEL, request_id)
        upload_dir = f"dashscope-instant/fake{next(_UPLOAD_DIRS):06d}/{model}"
        # An OSS POST policy (OSS, "PostObject": base64 of the JSON policy, its conditions
        # checked on the upload) signed with the bucket's secret (HMAC-SHA1, base64).
        document = {
            "expiration": "2099-01-01T00:00:00.000Z",
            "conditions": [
                ["content-length-range", 0, MAX_UPLOAD_BYTES],
                ["starts-with", "$key", upload_dir],
            ],
        }
        policy = base64.b64encode(json.dumps(document).encode()).decode("ascii")
        self._policies[policy] = (upload_dir, model)
        data = {
            "policy": policy,
            "signature": _signature(policy),
            "upload_dir": upload_dir,
            "upload_host": f"{self.server.base_url}{OSS_PATH}",
            "expire_in_seconds": POLICY_LIFETIME_S,
            "max_file_size_mb": MAX_UPLOAD_BYTES // 1_000_000,
            "capacity_limit_mb": 999999999,
            "oss_access_key_id": _OSS_KEY_ID,
            "x_oss_object_acl": "private",
            "x_oss_forbid_overwrite": "true",
        }
        return Reply.json(200, {"request_id": request_id, "data": data})

    def post_object(self, request: SeenRequest) -> Reply:
        """The policy's ``upload_host``: OSS's PostObject (https://www.alibabacloud.com/help/
        en/oss/developer-reference/postobject), a multipart form whose ``file`` comes last.
        It checks what OSS checks: the key id and the policy's signature (403
        ``SignatureDoesNotMatch``/``InvalidAccessKeyId``), the policy's conditions (403
        ``AccessDenied`` for a key outside ``upload_dir``, 400 ``EntityTooLarge`` past the
        length range) and ``x-oss-forbid-overwrite`` (409 ``FileAlreadyExists``); answers 200
        with no body (``success_action_status=200``). Errors are OSS's XML."""
        form = _form(request)
        policy = form.get("policy", b"").decode()
        if form.get("OSSAccessKeyId", b"").decode() != _OSS_KEY_ID:
            return _oss_error(403, "InvalidAccessKeyId", "The OSS Access Key Id does not exist.")
        known = self._policies.get(policy)
        if known is None or form.get("Signature", b"").decode() != _signature(policy):
            return _oss_error(
                403, "SignatureDoesNotMatch", "The request signature we calculated does not match."
            )
        upload_dir, model = known
        key = form.get("key", b"").decode()
        data = form.get("file")
        if data is None:
            return _oss_error(400, "InvalidArgument", "The form has no file.")
        if not key.startswith(upload_dir + "/"):
            return _oss_error(
                403,
                "AccessDenied",
                'Invalid according to Policy: Policy Condition failed: ["starts-with", "$key", "'
                + upload_dir
                + '"]',
            )
        if len(data) > MAX_UPLOAD_BYTES:
            return _oss_error(
                400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size."
            )
        url = f"oss://{key}"
        forbid = form.get("x-oss-forbid-overwrite", b"false").decode().lower() == "true"
        if forbid and url in self.objects:
            return _oss_error(
                409,
                "FileAlreadyExists",
                "The object you specified already exists and can not be overwritten.",
            )
        stored = StoredObject(url, model, bytes(data))
        self.objects[url] = stored
        with _STORED_LOCK:
            _STORED[url] = stored
        return Reply(200, b"", {"Content-Type": "application/xml"})

    def uploads(self) -> list[SeenRequest]:
        """The form uploads received, in order."""
        return self.server.seen("POST", OSS_PATH)

    def policy_requests(self) -> list[SeenRequest]:
        """The upload-policy requests received, in order."""
        return self.server.seen("GET", UPLOADS_PATH)

    def _file_refusal(self, request: SeenRequest, body: dict[str, Any]) -> str | None:
        """Why the service refuses a request's video files, if it does: an ``oss://`` URL
        without the resolve header, not on its storage, or uploaded for another model; a file
        that is not a video, or shorter or longer than its model takes."""
        model = str(body["model"])
        for _, item in _items(body):
            url = item.get("video")
            if not isinstance(url, str):
                continue
            if not url.startswith("oss://"):
                return f"the video {url!r} is not a URL this service reads"
            if self.region not in STORAGE_REGIONS:
                return f"{url!r}: region {self.region} has no temporary storage to resolve it from"
            if request.headers.get(OSS_RESOLVE_HEADER, "").lower() != "enable":
                return f"{url!r} is an oss:// URL and the request did not ask to resolve it"
            stored = self.objects.get(url)
            if stored is None:
                return f"no file {url!r} on the temporary storage"
            if stored.model != model:
                return f"{url!r} was uploaded for {stored.model!r}, not {model!r}"
            try:
                seconds = file_duration(stored.data)
            except (ValueError, av.error.FFmpegError):
                return f"{url!r} is not a video the service can read"
            if not MIN_FILE_SECONDS <= seconds <= file_seconds(model):
                return (
                    f"{url!r} lasts {float(seconds):.1f} s; {model!r} takes "
                    f"{MIN_FILE_SECONDS:g}–{file_seconds(model):g} s"
                )
        return None

    def _seen(self, videos: list[dict[str, Any]]) -> list[SeenVideo]:
        return [
            SeenVideo(
                segment_id=v["segment_id"],
                kind=v["kind"],
                fps=float(v["fps"]) if v["fps"] is not None else DEFAULT_FPS,
                frames=len(v["frames"]),
                duration_s=v.get("duration_s"),
                url=v.get("url"),
                start_s=v["times"][0] if v["kind"] == "frames" else v["start_s"],
                step_s=v.get("step_s"),
            )
            for v in videos
        ]

    def refuse_next(self, *codes: str) -> None:
        """The next generation requests are answered with these errors of :data:`ERRORS`, in
        order (each one a model request, like the server's faults)."""
        unknown = [c for c in codes if c not in ERRORS]
        if unknown:
            raise ValueError(f"no DashScope error {unknown!r}; the fake knows {sorted(ERRORS)!r}")
        self._refusals.extend(codes)

    def list_models(self, request: SeenRequest) -> Reply:
        """``GET /api/v1/models``: one page of the served ids (sorted), behind the key."""
        request_id = f"fake-{next(self._ids):06d}"
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "InvalidApiKey", "Invalid API-key provided.", request_id)
        query = parse_qs(urlparse(request.path).query)
        try:
            page_no = int(query.get("page_no", ["1"])[0])
            page_size = int(query.get("page_size", ["10"])[0])
        except ValueError:
            return _error(*TOO_MANY_IMAGES, request_id)  # the general invalid-parameter error
        served = sorted(self.models)
        start = (page_no - 1) * page_size
        page = [
            {"model": model, "name": model, "provider": "Bailian"}
            for model in served[start : start + page_size]
        ]
        output = {"models": page, "page_no": page_no, "page_size": page_size, "total": len(served)}
        return Reply.json(200, {"request_id": request_id, "output": output})

    def generation(self, request: SeenRequest) -> Reply:
        """``POST …/multimodal-generation/generation``."""
        request_id = f"fake-{next(self._ids):06d}"
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "InvalidApiKey", "Invalid API-key provided.", request_id)
        body = request.json()
        if not isinstance(body, dict) or not body.get("model"):
            # "Error messages" page: 400 BadRequest.EmptyModel.
            return _error(
                400,
                "BadRequest.EmptyModel",
                'Required parameter "model" missing from request.',
                request_id,
            )
        if str(body["model"]) not in self.models:
            return _error(*UNKNOWN_MODEL, request_id)
        if base64_images(body) > MAX_BASE64_IMAGES:
            return _error(*TOO_MANY_IMAGES, request_id)
        if any(not MIN_FPS <= fps <= MAX_FPS for fps in _declared_rates(body)):
            return _error(*TOO_MANY_IMAGES, request_id)  # the general invalid-parameter error
        refused = self._file_refusal(request, body)
        if refused is not None:
            # The service's wording for these is not published; its general 400 code is.
            return _error(400, "InvalidParameter", refused, request_id)
        if self._refusals:
            self.server.next_fault(request)  # a model request like any other (counted once)
            code = self._refusals.popleft()
            status, message = ERRORS[code]
            return _error(status, code, message, request_id)
        fault = self.server.next_fault(request)
        if fault == "429":
            reply = _error(
                429,
                "Throttling.RateQuota",
                "Requests rate limit exceeded, please try again later.",
                request_id,
            )
            return Reply(
                reply.status, reply.body, {**reply.headers, "Retry-After": str(RETRY_AFTER_S)}
            )
        if fault == "500":
            return _error(
                500,
                "InternalError",
                "An internal error has occured, please try again later or contact service support.",
                request_id,
            )
        if fault == "refusal":
            return _error(
                400,
                "DataInspectionFailed",
                "Input data may contain inappropriate content.",
                request_id,
            )
        if fault == "malformed":
            return Reply(
                200, b'{"output": {"choices": [{"message": ', {"Content-Type": "application/json"}
            )
        model = str(body["model"])
        text = request_text(body)
        videos = request_videos(body)
        self.received.append(self._seen(videos))
        frames: dict[str, list[media.Frame]] = {}
        video_billed = 0
        for video in videos:
            images = [
                _decode_jpeg(f) if isinstance(f, str) else np.asarray(f) for f in video["frames"]
            ]
            frames.setdefault(video["segment_id"], []).extend(
                media.Frame(t=t, image=image)
                for t, image in zip(video["times"], images, strict=True)
            )
            # A file is billed as the frames sampled of it, like a frame list of them.
            video_billed += video_tokens([_size(i) for i in images], model)
        for segment_id, pictures in request_pictures(body).items():
            frames.setdefault(segment_id, []).extend(
                media.Frame(t=t, image=_decode_jpeg(uri)) for t, uri in pictures
            )
        image_billed = sum(
            image_tokens(*_size(_decode_jpeg(str(item["image"]))), model)
            for _, item in _items(body)
            if str(item.get("image", "")).startswith("data:")
        )
        answer = offline_answer(text, model, frames) if prompt_has_context(text) else PLAIN_ANSWER
        finish_reason = "stop"
        if fault == "truncated":
            answer = answer[: len(answer) // 2]
            finish_reason = "length"
        text_tokens = len(text) // 4
        output_tokens = max(1, len(answer) // 4)
        input_tokens = text_tokens + image_billed + video_billed
        details = {"text_tokens": text_tokens}
        if image_billed:
            details["image_tokens"] = image_billed
        if video_billed:
            details["video_tokens"] = video_billed
        usage: dict[str, Any] = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": details,
            "output_tokens_details": {"text_tokens": output_tokens},
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        if image_billed:
            usage["image_tokens"] = image_billed
        if video_billed:
            usage["video_tokens"] = video_billed
        self.usage = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cached_tokens": 0,
            "text": text_tokens,
            "image": image_billed,
            "video": video_billed,
            "audio": 0,
        }
        envelope = {
            "output": {
                "choices": [
                    {
                        "finish_reason": finish_reason,
                        "message": {"role": "assistant", "content": [{"text": answer}]},
                    }
                ]
            },
            "usage": usage,
            "request_id": request_id,
        }
        reply = Reply.json(200, envelope)
        if fault == "timeout":
            return Reply(
                reply.status, reply.body, reply.headers, delay_s=self.server.timeout_sleep_s
            )
        return reply


class DashScopeHarness(Harness):
    """The provider contract's view of the fake DashScope."""

    name = "dashscope"

    def __init__(self, server: FakeProviderServer, fake: DashScopeFake) -> None:
        """A harness over a running ``server`` with the fake's routes."""
        self.server = server
        self.fake = fake

    def model(self, model_id: str, **config: Any) -> Any:
        """Our adapter for ``model_id`` pointed at the fake (``config`` overrides fields); it
        sends DashScope's id for it, as the settings' default endpoints name it
        (``qwen-3.7-plus`` → ``qwen3.7-plus``), and is told the fake's region, which a real
        endpoint's host would name."""
        endpoint = default_endpoints().get(model_id)
        settings: dict[str, Any] = {
            "family": "dashscope",
            "model_name": (endpoint.model_name if endpoint else None) or model_id,
            "base_url": f"{self.server.base_url}/api/v1",
            "api_key": API_KEY,
            **config,
        }
        return dashscope_model(model_id, ProviderConfig(**settings), region=self.fake.region)

    def model_requests(self) -> list[SeenRequest]:
        """The generation requests, in order."""
        return self.server.seen("POST", GENERATION_PATH)

    def prompt_text(self, request: SeenRequest) -> str:
        """Every text item of the request."""
        return request_text(request.json())

    def media(self, request: SeenRequest) -> list[dict[str, Any]]:
        """Each video as one item: a frame list's span from its frames' times, a file's from
        its label (its first frame's time, plus its frames' spacing for each of them);
        ``frames`` the frames the model sees (a file: those sampled of it)."""
        out: list[dict[str, Any]] = []
        for video in request_videos(request.json()):
            fps = float(video["fps"])
            if video["kind"] == "file":
                start = video["start_s"]
                end = start + video["file_frames"] * video["step_s"]
            else:
                start, end = video["times"][0], video["times"][-1] + 1 / fps
            out.append(
                {
                    "kind": "video",
                    "fps": fps,
                    "start_s": start,
                    "end_s": end,
                    "audio": False,
                    "frames": len(video["frames"]),
                }
            )
        return out

    def output_schema(self, request: SeenRequest) -> dict[str, Any] | None:
        """The schema the prompted-output instructions quote (JSON mode carries none)."""
        text = self.prompt_text(request)
        at = text.find(_SCHEMA_MARK)
        if at < 0:
            return None
        start = text.find("{", at)
        if start < 0:
            return None
        schema, _ = json.JSONDecoder().raw_decode(text[start:])
        return schema if isinstance(schema, dict) else None

    def last_usage(self) -> dict[str, int]:
        """The usage of the fake's last answer."""
        return dict(self.fake.usage)


@contextmanager
def dashscope_harness(region: str = BEIJING, **server: Any) -> Iterator[DashScopeHarness]:
    """A running fake DashScope endpoint of ``region`` (``server`` sets FakeProviderServer
    fields, e.g. ``fault_rate``)."""
    fake_server = FakeProviderServer(**server)
    fake = DashScopeFake(fake_server, region)
    with serve_provider(fake_server) as running:
        yield DashScopeHarness(running, fake)
