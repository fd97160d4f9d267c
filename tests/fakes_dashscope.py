"""A fake DashScope native API for the adapter tests, driven by the real ``dashscope`` SDK.

It serves ``POST /api/v1/services/aigc/multimodal-generation/generation`` in DashScope's native
wire format: the answer is ``output.choices[0].message.content == [{"text": …}]`` with its
``finish_reason``, ``usage`` and ``request_id``; an error is ``{code, message, request_id}`` with
the HTTP status. Video arrives as frame lists (``{"video": [data URI, …], "fps": …}``) after a
label text naming the segment and each frame's time in its video; the fake decodes the JPEG
frames and answers what the offline provider would answer to the same prompt and frames.

Faults come in DashScope's own forms: 429 ``Throttling.RateQuota`` with ``Retry-After``, 500
``InternalError``, a held answer, a body that is not JSON, ``finish_reason: "length"`` with half
the answer, and the content-moderation refusal (400 ``DataInspectionFailed``);
:meth:`DashScopeFake.refuse_next` answers with any other error of :data:`ERRORS` (a used-up
quota, throttling). It refuses what the service refuses: a wrong key, a model id it does not
serve, more Base64 images than one request may carry; and it bills images and frames by the
documented Qwen-VL rule (:func:`image_tokens`). Each rule cites where it is written.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import math
import re
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlparse

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
from tools import media
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


def request_videos(body: Any) -> list[dict[str, Any]]:
    """Each frame list of a request with what its label says: ``segment_id``, ``times`` (s)."""
    videos: list[dict[str, Any]] = []
    label = ""
    for _, item in _items(body):
        if "text" in item:
            label = str(item["text"])
        elif isinstance(item.get("video"), list):
            segment = _SEGMENT_RE.search(label)
            times = _TIMES_RE.search(label)
            if segment is None or times is None:
                raise ValueError(f"a frame list without a segment/times label: {label!r}")
            videos.append(
                {
                    "segment_id": segment.group(1),
                    "times": [_seconds(t) for t in times.group(1).split(",")],
                    "frames": list(item["video"]),
                    "fps": item.get("fps"),
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

    def __init__(self, server: FakeProviderServer) -> None:
        """Route the endpoint on ``server``; answers are the offline provider's for the model
        the request names."""
        self.server = server
        self.api_key = API_KEY  # the key requests must carry
        self.models: set[str] = set(MODELS)  # the ids it serves
        self.usage: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._refusals: deque[str] = deque()
        server.route("POST", GENERATION_PATH, self.generation)
        server.route("GET", MODELS_PATH, self.list_models)

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
        frames: dict[str, list[media.Frame]] = {}
        video_billed = 0
        for video in videos:
            images = [_decode_jpeg(uri) for uri in video["frames"]]
            frames[video["segment_id"]] = [
                media.Frame(t=t, image=image)
                for t, image in zip(video["times"], images, strict=True)
            ]
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
        (``qwen-3.7-plus`` → ``qwen3.7-plus``)."""
        endpoint = default_endpoints().get(model_id)
        settings: dict[str, Any] = {
            "family": "dashscope",
            "model_name": (endpoint.model_name if endpoint else None) or model_id,
            "base_url": f"{self.server.base_url}/api/v1",
            "api_key": API_KEY,
            **config,
        }
        return dashscope_model(model_id, ProviderConfig(**settings))

    def model_requests(self) -> list[SeenRequest]:
        """The generation requests, in order."""
        return self.server.seen("POST", GENERATION_PATH)

    def prompt_text(self, request: SeenRequest) -> str:
        """Every text item of the request."""
        return request_text(request.json())

    def media(self, request: SeenRequest) -> list[dict[str, Any]]:
        """Each frame list as one video (``start_s``/``end_s`` from its frames' times)."""
        out: list[dict[str, Any]] = []
        for video in request_videos(request.json()):
            fps = float(video["fps"])
            out.append(
                {
                    "kind": "video",
                    "fps": fps,
                    "start_s": video["times"][0],
                    "end_s": video["times"][-1] + 1 / fps,
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
def dashscope_harness(**server: Any) -> Iterator[DashScopeHarness]:
    """A running fake DashScope (``server`` sets FakeProviderServer fields, e.g. ``fault_rate``)."""
    fake_server = FakeProviderServer(**server)
    fake = DashScopeFake(fake_server)
    with serve_provider(fake_server) as running:
        yield DashScopeHarness(running, fake)
