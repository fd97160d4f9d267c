"""A fake Gemini API (``generativelanguage.googleapis.com`` v1beta) for the real google-genai SDK.

It serves ``models/{m}:generateContent``, the Files API (the resumable upload protocol, get,
download, delete), ``cachedContents`` (create, get, delete) and Batch Mode
(``models/{m}:batchGenerateContent``, ``batches/{id}``). A generation is answered as the
offline provider would answer the same prompt, looking at the frames of the video the request
carries: inline mp4s, uploaded files between their start and end offsets, and the videos of the
context cache it names. Usage is billed as Gemini bills: text at ``len(text) // 4``, video
frames at the part's fps and the model's tokens per frame at the media resolution asked
(:data:`VIDEO_FRAME_TOKENS`, the fake's own reading of Gemini's token table, never the
adapter's: the two must be able to disagree), 32 per second of audio; cached tokens are counted in
the prompt and reported again as ``cachedContentTokenCount``; thinking tokens come out of
``maxOutputTokens`` as Gemini 3's do.

It refuses what Gemini refuses, each rule with its source beside it: model ids it does not
serve, context caches below the model's minimum, requests (and cache creations) whose body,
inline data base64-encoded, is not under Gemini's 100 MB (decimal: :data:`MAX_REQUEST_BYTES`),
uploads over the Files API's per-file limit, a part's ``mediaResolution`` that is not the
API's message, and a cached request that also sets a system instruction, tools or tool config.
A part's empty ``mediaResolution`` (``{}``: no level) is taken as Gemini takes it, at the
default resolution, and each video's applied resolution is recorded (``Seen.media``). It fails
as Gemini fails: 429 with ``google.rpc.RetryInfo`` in the body, a daily-quota 429, 503.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import math
import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

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
from tools.contracts.roles import parse_context
from tools.index import media
from tools.providers.base import MemoryResourceLedger, ProviderConfig, ResourceLedger
from tools.providers.gemini import GeminiModel, gemini_model

API = "/v1beta"
PUBLIC_FILES = "https://generativelanguage.googleapis.com/v1beta/"  # what real file uris start with
NO_CONTEXT_ANSWER = "OK"
_SEGMENT_RE = re.compile(r"\(segment ([^)\s]+)\)")


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(duration: str | None) -> float | None:
    """A protobuf Duration (``"12s"``, ``"12.5s"``) in seconds."""
    if not duration:
        return None
    return float(duration.rstrip("s"))


def camel_keys(value: Any) -> Any:
    """``value`` with snake_case keys in camelCase: Gemini's JSON parser takes either spelling
    of a field, and google-genai sends parts built from dicts with their snake_case keys."""
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        out[head + "".join(w.title() for w in rest)] = camel_keys(item)
    return out


def _error(
    status: int, name: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if details:
        error["details"] = details
    return {"error": error}


# The models the fake serves, as models.list names them ("Gemini models",
# https://ai.google.dev/gemini-api/docs/models: the Gemini 3 models are served as previews).
SERVED_MODELS = (
    "gemini-3-flash-preview",
    "gemini-3.1-pro-preview",
    "gemini-2.5-flash",
    "gemini-2.5-pro",
)
# Explicit context caches below a model's minimum are refused ("Context caching", minimum input
# token count per model, https://ai.google.dev/gemini-api/docs/caching: Gemini 3 Flash Preview
# 1,024, Gemini 3 Pro Preview 4,096, Gemini 2.5 Flash 1,024, Gemini 2.5 Pro 4,096).
CACHE_MIN_TOKENS = {
    "gemini-3-flash-preview": 1024,
    "gemini-3.1-pro-preview": 4096,
    "gemini-2.5-flash": 1024,
    "gemini-2.5-pro": 4096,
}
# What a request may carry inline: "Inline Data | < 100MB" ("Video understanding", input methods
# table, https://ai.google.dev/gemini-api/docs/video-understanding; "File input methods",
# https://ai.google.dev/gemini-api/docs/file-input-methods; up from 20 MB of total request
# size: "Increased file size limits and expanded inputs support in Gemini API",
# https://blog.google/innovation-and-ai/technology/developers-tools/gemini-api-new-file-limits).
# Held against the request body as it arrives (inline data is base64 in the JSON), in decimal
# megabytes, the smaller reading; a body of it or more is refused with Google's 400 for an
# oversized payload (its words as the API sends them: "Request payload size exceeds the limit:
# N bytes.", status INVALID_ARGUMENT, quoted in MaKTaiL/gemini-srt-translator issue #63).
MAX_REQUEST_BYTES = 100 * 1000 * 1000
# What Gemini bills one video frame, per model the fake serves and media resolution ("Media
# resolution", token counts, https://ai.google.dev/gemini-api/docs/media-resolution: Gemini 3
# takes a video frame at 70 tokens at LOW and MEDIUM (its default) and 280 at HIGH; Gemini 2.5
# at 66 at LOW and 258 at MEDIUM and HIGH, 258 by default). Written here from that table, not
# taken from the adapter, so the fake can disagree with the adapter's count.
VIDEO_FRAME_TOKENS: dict[str, dict[str, int]] = {
    "gemini-3-flash-preview": {"low": 70, "medium": 70, "high": 280},
    "gemini-3.1-pro-preview": {"low": 70, "medium": 70, "high": 280},
    "gemini-2.5-flash": {"low": 66, "medium": 258, "high": 258},
    "gemini-2.5-pro": {"low": 66, "medium": 258, "high": 258},
}
# Audio: "Gemini represents each second of audio as 32 tokens" ("Understand and count tokens",
# https://ai.google.dev/gemini-api/docs/tokens), at every media resolution ("Media resolution":
# audio is tokenised at a fixed rate a second).
AUDIO_TOKENS_PER_SECOND = 32
# The Gemini 3 models among those served: they think at HIGH unless told and their thoughts count
# against maxOutputTokens (see THINKING_TOKENS).
GEMINI_3_MODELS = frozenset({"gemini-3-flash-preview", "gemini-3.1-pro-preview"})
# One uploaded file may be this big: "You can store up to 20 GB of files per project, with a
# per-file maximum size of 2 GB" ("Files API", https://ai.google.dev/gemini-api/docs/files; read
# in decimal gigabytes). ``GeminiState.max_file_bytes`` scales it down for a test. The refusal's
# wording is ours: the docs give none.
MAX_FILE_BYTES = 2 * 1000**3
# A part's resolution is the message ``Part.MediaResolution`` with one enum field ``level`` (and
# ``numTokens``): google-genai ``types.PartMediaResolution`` / ``PartMediaResolutionLevel``, and
# Vertex's ``Part.MediaResolution.Level`` (MEDIA_RESOLUTION_UNSPECIFIED, _LOW, _MEDIUM, _HIGH,
# _ULTRA_HIGH). Anything else fails the request's JSON parse with 400 INVALID_ARGUMENT, in the
# shape Google's JSON parser reports (e.g. ``Invalid JSON payload received. Unknown name
# "mediaResolution" at 'contents[2].parts[1].inline_data': Cannot find field.``, with a
# google.rpc.BadRequest naming the field; quoted in cecli-dev/cecli issue #320).
PART_RESOLUTION_FIELDS = ("level", "numTokens")
PART_RESOLUTION_LEVELS = (
    "MEDIA_RESOLUTION_UNSPECIFIED",
    "MEDIA_RESOLUTION_LOW",
    "MEDIA_RESOLUTION_MEDIUM",
    "MEDIA_RESOLUTION_HIGH",
    "MEDIA_RESOLUTION_ULTRA_HIGH",
)
# A request naming a context cache may not set these: the cache owns them. Gemini answers 400
# INVALID_ARGUMENT (the Developer API's words, as reported in vercel/ai issue #3333 and
# langchain-ai/langchain-google issue #978; pydantic-ai's ``GoogleModelSettings.
# google_cached_content`` documents the rule and strips the three fields).
CACHE_OWNED_FIELDS = ("systemInstruction", "tools", "toolConfig")
CACHE_OWNED_MESSAGE = (
    "CachedContent can not be used with GenerateContent request setting system_instruction, "
    "tools or tool_config. Proposed fix: move those values to CachedContent from GenerateContent "
    "request."
)
# What a thinking level spends before the answer, a stand-in: the real spend varies with the
# task. The rule kept is Gemini 3's: thoughts count against maxOutputTokens (python-genai
# issue #2062: at the default HIGH level, 1,024 output tokens went to ~906 of thinking and the
# answer was cut with finishReason MAX_TOKENS). Gemini 3 thinks HIGH when not told ("Gemini
# thinking", https://ai.google.dev/gemini-api/docs/thinking: thinkingLevel defaults to high).
THINKING_TOKENS = {"MINIMAL": 32, "LOW": 256, "MEDIUM": 1024, "HIGH": 4096}
RETRY_DELAY_S = 13  # what a RetryInfo 429 asks for (Gemini sends no Retry-After header)
# Faults only Gemini has, queued with ``GeminiState.gemini_faults``.
GEMINI_FAULTS = ("retry_info", "daily_quota", "503")


def _too_large(size: int) -> Reply:
    """Gemini's refusal of a request body of ``size`` bytes, not under :data:`MAX_REQUEST_BYTES`."""
    del size  # the service names the limit, not the size
    message = f"Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes."
    return Reply.json(400, _error(400, "INVALID_ARGUMENT", message))


def _not_found(model: str, method: str) -> Reply:
    """Gemini's answer to a model id it does not serve."""
    message = (
        f"models/{model} is not found for API version v1beta, or is not supported for "
        f"{method}. Call ListModels to see the list of available models and their supported "
        "methods."
    )
    return Reply.json(404, _error(404, "NOT_FOUND", message))


def _rate_limited(kind: str) -> Reply:
    """A 429 as Gemini sends it: the wait in ``google.rpc.RetryInfo``, and for a spent daily
    quota a ``QuotaFailure`` naming the per-day quota (the Gemini API "Rate limits" page,
    https://ai.google.dev/gemini-api/docs/rate-limits; pydantic-ai reads both)."""
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
    }
    if kind == "daily_quota":
        violation = {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        }
    details: list[dict[str, Any]] = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{RETRY_DELAY_S}s"},
    ]
    message = (
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
    )
    return Reply.json(429, _error(429, "RESOURCE_EXHAUSTED", message, details))


def _resolution(value: str | None) -> str:
    """``MEDIA_RESOLUTION_LOW`` → ``low``; unset means the model's default (medium)."""
    name = (value or "").removeprefix("MEDIA_RESOLUTION_").lower()
    return name if name in ("low", "medium", "high") else "medium"


def _part_level(part: dict[str, Any]) -> str | None:
    """The resolution a (camelCase) part sets for itself, or None: no ``mediaResolution``, or
    one with no level (``{}`` parses to a message whose level is MEDIA_RESOLUTION_UNSPECIFIED,
    "Media resolution has not been set"), leaves the request's resolution to apply."""
    value = part.get("mediaResolution")
    level = value.get("level") if isinstance(value, dict) else None
    if not level or level == "MEDIA_RESOLUTION_UNSPECIFIED":
        return None
    return _resolution(str(level))


def _invalid_argument(message: str, field: str) -> Reply:
    """A 400 INVALID_ARGUMENT with the google.rpc.BadRequest naming the field."""
    violation = {"field": field, "description": message}
    details = [
        {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}
    ]
    return Reply.json(400, _error(400, "INVALID_ARGUMENT", message, details))


def _part_resolution_refusal(contents: list[dict[str, Any]]) -> Reply | None:
    """Gemini's 400 for the first part whose ``mediaResolution`` is not a ``MediaResolution``
    message with a known level (see ``PART_RESOLUTION_FIELDS``); None when every one is."""
    for ci, content in enumerate(camel_keys(contents)):
        for pi, part in enumerate(content.get("parts", [])):
            if "mediaResolution" not in part:
                continue
            value = part["mediaResolution"]
            path = f"contents[{ci}].parts[{pi}].media_resolution"
            if not isinstance(value, dict):
                message = (
                    f"Invalid value at '{path}' (type.googleapis.com/google.ai."
                    f"generativelanguage.v1beta.Part.MediaResolution), {json.dumps(value)}"
                )
                return _invalid_argument(message, path)
            for key in value:
                if key not in PART_RESOLUTION_FIELDS:
                    message = (
                        f'Invalid JSON payload received. Unknown name "{key}" at '
                        f"'{path}': Cannot find field."
                    )
                    return _invalid_argument(message, path)
            level = value.get("level")
            if level is not None and level not in PART_RESOLUTION_LEVELS:
                message = (
                    f"Invalid value at '{path}.level' (type.googleapis.com/google.ai."
                    f"generativelanguage.v1beta.Part.MediaResolution.Level), {json.dumps(level)}"
                )
                return _invalid_argument(message, f"{path}.level")
    return None


@dataclass
class StoredFile:
    """An uploaded file: its metadata and bytes."""

    name: str
    display_name: str
    mime_type: str
    data: bytes = b""
    created: datetime = field(default_factory=_now)
    active: bool = False  # PROCESSING until first read back, as large videos are

    def json(self, base_url: str) -> dict[str, Any]:
        """The File resource."""
        return {
            "name": self.name,
            "displayName": self.display_name,
            "mimeType": self.mime_type,
            "sizeBytes": str(len(self.data)),
            "createTime": _stamp(self.created),
            "updateTime": _stamp(self.created),
            "expirationTime": _stamp(self.created + timedelta(hours=48)),
            "uri": PUBLIC_FILES + self.name,
            "downloadUri": f"{base_url}{API}/{self.name}:download?alt=media",
            "state": "ACTIVE" if self.active else "PROCESSING",
            "source": "UPLOADED",
        }


@dataclass
class StoredCache:
    """A context cache: what it holds and what it is billed as."""

    name: str
    model: str
    contents: list[dict[str, Any]]
    tokens: int
    usage: dict[str, int]
    created: datetime
    expires: datetime

    def json(self) -> dict[str, Any]:
        """The CachedContent resource (contents are never returned)."""
        return {
            "name": self.name,
            "model": self.model,
            "displayName": "",
            "createTime": _stamp(self.created),
            "updateTime": _stamp(self.created),
            "expireTime": _stamp(self.expires),
            "usageMetadata": {"totalTokenCount": self.tokens},
        }


@dataclass
class Seen:
    """What a request's contents amount to: its text, videos and the tokens they cost."""

    text: list[str] = field(default_factory=list)
    videos: dict[str, list[media.Frame]] = field(default_factory=dict)
    media: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: {"TEXT": 0, "VIDEO": 0, "AUDIO": 0})


@dataclass
class GeminiState:
    """Everything the fake keeps between requests."""

    server: FakeProviderServer
    files: dict[str, StoredFile] = field(default_factory=dict)
    uploads: dict[str, StoredFile] = field(default_factory=dict)
    caches: dict[str, StoredCache] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    usage: list[dict[str, int]] = field(default_factory=list)
    # Statuses the next file-upload starts and cache creations answer with (429 or 500).
    resource_faults: list[int] = field(default_factory=list)
    # Gemini's own failures of the next generateContent calls (one of GEMINI_FAULTS each).
    gemini_faults: list[str] = field(default_factory=list)
    # The Files API's per-file limit; a test scales it down rather than send 2 GB.
    max_file_bytes: int = MAX_FILE_BYTES
    served: tuple[str, ...] = SERVED_MODELS
    ids: Iterator[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def resource_fault(self) -> Reply | None:
        """The error the next upload or cache creation answers with, if one is queued."""
        with self.lock:
            status = self.resource_faults.pop(0) if self.resource_faults else None
        if status == 429:
            body = _error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted.")
            return Reply.json(429, body, {"Retry-After": str(RETRY_AFTER_S)})
        if status is not None:
            return Reply.json(status, _error(status, "INTERNAL", "Internal error encountered."))
        return None

    def new_id(self, prefix: str) -> str:
        with self.lock:
            return f"{prefix}{next(self.ids):04d}"

    # -- contents ------------------------------------------------------------------------------

    def read(
        self,
        contents: list[dict[str, Any]],
        seen: Seen,
        context_text: str,
        model: str = "gemini-3-flash-preview",
        resolution: str = "medium",
    ) -> None:
        """Add ``contents``' text, video frames (timed in their source video) and tokens:
        ``model``'s tokens per frame at the part's ``mediaResolution`` level, else
        ``resolution`` (the request's ``generationConfig.mediaResolution``; the model's default
        for a cache's contents), and record each video's applied resolution."""
        starts = _segment_starts(context_text)
        label = ""
        for content in camel_keys(contents):
            for part in content.get("parts", []):
                if "text" in part:
                    seen.text.append(part["text"])
                    seen.tokens["TEXT"] += len(part["text"]) // 4
                    label = part["text"]
                    continue
                meta = part.get("videoMetadata") or {}
                fps = float(meta.get("fps", 1.0))
                start = _seconds(meta.get("startOffset"))
                end = _seconds(meta.get("endOffset"))
                if "inlineData" in part:
                    data = base64.urlsafe_b64decode(
                        part["inlineData"]["data"]
                    )  # as google-genai sends it
                elif "fileData" in part:
                    name = part["fileData"]["fileUri"].removeprefix(PUBLIC_FILES)
                    data = self.files[name].data
                else:
                    continue
                match = _SEGMENT_RE.search(label)
                segment = match.group(1) if match else f"video-{len(seen.videos)}"
                frames, audio_s = _frames(data, fps, start, end)
                if start is None:  # a clip: its 00:00 is the segment's start in the video
                    offset = starts.get(segment, 0.0)
                    frames = [dataclasses.replace(f, t=offset + f.t) for f in frames]
                seen.videos.setdefault(segment, []).extend(frames)
                level = _part_level(part) or resolution
                seen.tokens["VIDEO"] += len(frames) * VIDEO_FRAME_TOKENS[model][level]
                seen.tokens["AUDIO"] += math.ceil(audio_s * AUDIO_TOKENS_PER_SECOND)
                span = (start, end) if start is not None else _segment_span(context_text, segment)
                seen.media.append(
                    {
                        "kind": "video",
                        "fps": fps,
                        "start_s": span[0],
                        "end_s": span[1],
                        "audio": audio_s > 0,
                        "route": "inline" if "inlineData" in part else "file",
                        "resolution": level,
                    }
                )

    # -- generation ----------------------------------------------------------------------------

    def generate(self, model: str, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The GenerateContentResponse for ``body`` and the full answer text."""
        own = Seen()
        cache = (
            self.caches.get(body.get("cachedContent", "")) if body.get("cachedContent") else None
        )
        system = body.get("systemInstruction")
        contents = ([system] if system else []) + body.get("contents", [])
        all_text = " ".join(
            p.get("text", "")
            for c in contents + (cache.contents if cache else [])
            for p in c["parts"]
        )
        config = camel_keys(body.get("generationConfig") or {})
        resolution = _resolution(config.get("mediaResolution"))
        cached = Seen()
        if cache is not None:
            self.read(cache.contents, cached, all_text, model)
        self.read(contents, own, all_text, model, resolution)
        prompt = "\n\n".join(cached.text + own.text)
        videos = {**cached.videos}
        for segment, frames in own.videos.items():
            videos.setdefault(segment, []).extend(frames)
        if prompt_has_context(prompt):
            answer = offline_answer(prompt, model, videos)
        else:
            answer = NO_CONTEXT_ANSWER
        by_modality = {k: own.tokens[k] + cached.tokens[k] for k in own.tokens}
        output_tokens = max(1, len(answer) // 4)
        thoughts = 0
        finish = "STOP"
        if model in GEMINI_3_MODELS:
            level = str((config.get("thinkingConfig") or {}).get("thinkingLevel") or "HIGH")
            thoughts = THINKING_TOKENS.get(level.upper(), THINKING_TOKENS["HIGH"])
            cap = int(config.get("maxOutputTokens") or 65536)
            thoughts = min(thoughts, cap)
            if thoughts + output_tokens > cap:
                # The answer gets what thinking left: cut mid-JSON, or nothing at all.
                output_tokens = cap - thoughts
                answer = answer[: output_tokens * 4]
                finish = "MAX_TOKENS"
        usage: dict[str, Any] = {
            "promptTokenCount": sum(by_modality.values()),
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": sum(by_modality.values()) + output_tokens + thoughts,
            "promptTokensDetails": [
                {"modality": k, "tokenCount": v} for k, v in by_modality.items() if v
            ],
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        if cache is not None:
            usage["cachedContentTokenCount"] = cache.tokens
            usage["cacheTokensDetails"] = [
                {"modality": k, "tokenCount": v} for k, v in cache.usage.items() if v
            ]
        response = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": answer}] if answer else []},
                    "finishReason": finish,
                    "index": 0,
                }
            ],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": self.new_id("resp-"),
        }
        return response, answer

    def record_usage(self, usage: dict[str, Any]) -> None:
        details = {d["modality"]: d["tokenCount"] for d in usage.get("promptTokensDetails", [])}
        with self.lock:
            self.usage.append(
                {
                    "input_tokens": usage.get("promptTokenCount", 0),
                    # Billed as output: the answer and the thinking before it.
                    "output_tokens": usage.get("candidatesTokenCount", 0)
                    + usage.get("thoughtsTokenCount", 0),
                    "cached_tokens": usage.get("cachedContentTokenCount", 0),
                    "thoughts": usage.get("thoughtsTokenCount", 0),
                    "text": details.get("TEXT", 0),
                    "image": details.get("IMAGE", 0),
                    "video": details.get("VIDEO", 0),
                    "audio": details.get("AUDIO", 0),
                }
            )

    # -- handlers ------------------------------------------------------------------------------

    def list_models(self, request: SeenRequest) -> Reply:
        """``GET /v1beta/models``: the served models, as ``models.list`` pages them."""
        del request
        models = [
            {
                "name": f"models/{name}",
                "displayName": name,
                "supportedGenerationMethods": [
                    "generateContent",
                    "countTokens",
                    "createCachedContent",
                    "batchGenerateContent",
                ],
            }
            for name in self.served
        ]
        return Reply.json(200, {"models": models})

    def models(self, request: SeenRequest) -> Reply:
        path = urlparse(request.path).path
        model, _, method = path.removeprefix(f"{API}/models/").partition(":")
        if method == "generateContent" and len(request.body) >= MAX_REQUEST_BYTES:
            return _too_large(len(request.body))  # refused as it arrives, before it is parsed
        body = request.json() or {}
        if model not in self.served:
            return _not_found(model, method or "generateContent")
        if method == "generateContent":
            return self.generate_content(model, request, body)
        if method == "batchGenerateContent":
            return self.create_batch(model, body)
        return Reply.json(404, _error(404, "NOT_FOUND", f"no method {method!r}"))

    def generate_content(self, model: str, request: SeenRequest, body: dict[str, Any]) -> Reply:
        with self.lock:
            own = self.gemini_faults.pop(0) if self.gemini_faults else None
        if own in ("retry_info", "daily_quota"):
            return _rate_limited(own)
        if own == "503":
            message = "The model is overloaded. Please try again later."
            return Reply.json(503, _error(503, "UNAVAILABLE", message))
        fault = self.server.next_fault(request)
        if fault == "429":
            return Reply.json(
                429,
                _error(
                    429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
                ),
                {"Retry-After": str(RETRY_AFTER_S)},
            )
        if fault == "500":
            return Reply.json(500, _error(500, "INTERNAL", "Internal error encountered."))
        if fault == "malformed":
            return Reply(200, b'{"candidates": [{"content": ', {"Content-Type": "application/json"})
        if (refused := _part_resolution_refusal(body.get("contents", []))) is not None:
            return refused
        if body.get("cachedContent") and any(body.get(f) for f in CACHE_OWNED_FIELDS):
            return Reply.json(400, _error(400, "INVALID_ARGUMENT", CACHE_OWNED_MESSAGE))
        if body.get("cachedContent") and body["cachedContent"] not in self.caches:
            message = f"CachedContent not found (or permission denied): {body['cachedContent']}"
            return Reply.json(403, _error(403, "PERMISSION_DENIED", message))
        response, answer = self.generate(model, body)
        candidate = response["candidates"][0]
        if fault == "truncated":
            candidate["content"]["parts"] = [{"text": answer[: len(answer) // 2]}]
            candidate["finishReason"] = "MAX_TOKENS"
        if fault == "refusal":
            candidate.pop("content")
            candidate["finishReason"] = "SAFETY"
            candidate["safetyRatings"] = [
                {
                    "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                    "probability": "HIGH",
                    "blocked": True,
                }
            ]
        self.record_usage(response["usageMetadata"])
        return dataclasses.replace(
            Reply.json(200, response),
            delay_s=self.server.timeout_sleep_s if fault == "timeout" else 0.0,
        )

    def upload(self, request: SeenRequest) -> Reply:
        """The resumable upload protocol: ``start`` names the file and returns the upload url;
        ``upload``/``upload, finalize`` commands carry the bytes at an offset."""
        command = request.headers.get("X-Goog-Upload-Command", "").lower()
        query = parse_qs(urlparse(request.path).query)
        if command == "start":
            if (failed := self.resource_fault()) is not None:
                return failed
            # The size google-genai declares for the resumable upload (``X-Goog-Upload-Header-
            # Content-Length``): past the per-file limit the upload is refused before its bytes.
            declared = int(request.headers.get("X-Goog-Upload-Header-Content-Length") or 0)
            if declared > self.max_file_bytes:
                return self._too_big(declared)
            meta = camel_keys((request.json() or {}).get("file") or {})
            name = meta.get("name") or self.new_id("files/f")
            started = StoredFile(
                name=name,
                display_name=meta.get("displayName", ""),
                mime_type=request.headers.get("X-Goog-Upload-Header-Content-Type")
                or meta.get("mimeType", "application/octet-stream"),
            )
            upload_id = self.new_id("u")
            self.uploads[upload_id] = started
            url = f"{self.server.base_url}/upload{API}/files?upload_id={upload_id}"
            return Reply(200, b"", {"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"})
        upload_id = (query.get("upload_id") or [""])[0]
        stored = self.uploads.get(upload_id)
        if stored is None:
            return Reply.json(404, _error(404, "NOT_FOUND", f"no upload {upload_id!r}"))
        offset = int(request.headers.get("X-Goog-Upload-Offset", "0"))
        if offset != len(stored.data):
            return Reply.json(400, _error(400, "INVALID_ARGUMENT", "bad upload offset"))
        if len(stored.data) + len(request.body) > self.max_file_bytes:  # more than declared
            del self.uploads[upload_id]
            return self._too_big(len(stored.data) + len(request.body))
        stored.data += request.body
        if "finalize" not in command:
            return Reply(200, b"", {"X-Goog-Upload-Status": "active"})
        del self.uploads[upload_id]
        self.files[stored.name] = stored
        return Reply.json(
            200, {"file": stored.json(self.server.base_url)}, {"X-Goog-Upload-Status": "final"}
        )

    def _too_big(self, size: int) -> Reply:
        """The refusal of a file over the per-file limit (``MAX_FILE_BYTES``)."""
        message = (
            f"File size {size} bytes exceeds the maximum allowed size of {self.max_file_bytes} "
            "bytes per file."
        )
        return Reply.json(400, _error(400, "INVALID_ARGUMENT", message))

    def files_get(self, request: SeenRequest) -> Reply:
        path = urlparse(request.path).path.removeprefix(f"{API}/")
        name, _, action = path.partition(":")
        stored = self.files.get(name)
        if stored is None:
            return Reply.json(404, _error(404, "NOT_FOUND", f"File {name} not found."))
        if action == "download":
            return Reply(200, stored.data, {"Content-Type": stored.mime_type})
        reply = Reply.json(200, stored.json(self.server.base_url))
        stored.active = True  # processing done by the time anyone asks again
        return reply

    def files_delete(self, request: SeenRequest) -> Reply:
        name = urlparse(request.path).path.removeprefix(f"{API}/")
        self.files.pop(name, None)
        return Reply.json(200, {})

    def caches_create(self, request: SeenRequest) -> Reply:
        if (failed := self.resource_fault()) is not None:
            return failed
        if len(request.body) >= MAX_REQUEST_BYTES:  # a cache's contents travel inline too
            return _too_large(len(request.body))
        body = request.json() or {}
        contents = body.get("contents", [])
        model = str(body.get("model", "")).removeprefix("models/")
        if model not in self.served:
            return _not_found(model, "createCachedContent")
        if (refused := _part_resolution_refusal(contents)) is not None:
            return refused
        seen = Seen()
        self.read(contents, seen, "", model)
        tokens = sum(seen.tokens.values())
        minimum = CACHE_MIN_TOKENS.get(model, 4096)
        if tokens < minimum:
            message = (
                f"Cached content is too small. total_token_count={tokens}, "
                f"min_total_token_count={minimum}"
            )
            return Reply.json(400, _error(400, "INVALID_ARGUMENT", message))
        created = _now()
        ttl = _seconds(body.get("ttl")) or 3600.0
        cache = StoredCache(
            name=self.new_id("cachedContents/c"),
            model=body.get("model", ""),
            contents=contents,
            tokens=tokens,
            usage=dict(seen.tokens),
            created=created,
            expires=created + timedelta(seconds=ttl),
        )
        self.caches[cache.name] = cache
        return Reply.json(200, cache.json())

    def caches_get(self, request: SeenRequest) -> Reply:
        name = urlparse(request.path).path.removeprefix(f"{API}/")
        cache = self.caches.get(name)
        if cache is None:
            return Reply.json(404, _error(404, "NOT_FOUND", f"{name} not found"))
        return Reply.json(200, cache.json())

    def caches_delete(self, request: SeenRequest) -> Reply:
        name = urlparse(request.path).path.removeprefix(f"{API}/")
        self.caches.pop(name, None)
        return Reply.json(200, {})

    # -- batches -------------------------------------------------------------------------------

    def create_batch(self, model: str, body: dict[str, Any]) -> Reply:
        """Run a batch at once (its input file's lines), reporting it RUNNING on the first
        poll and SUCCEEDED with a responses file after."""
        batch = body.get("batch") or {}
        source = (batch.get("inputConfig") or {}).get("fileName", "")
        stored = self.files.get(source)
        if stored is None:
            return Reply.json(400, _error(400, "INVALID_ARGUMENT", f"no input file {source!r}"))
        lines = []
        for raw in stored.data.splitlines():
            if not raw.strip():
                continue
            item = json.loads(raw)
            refused = self._batch_line_refusal(item["request"])
            if refused is not None:
                # A failed request of a job is a line with its google.rpc.Status ("Batch API",
                # results file: "each line is either a GenerateContentResponse or a status
                # object"); the job itself still succeeds.
                lines.append(json.dumps({"key": item["key"], "error": refused}))
                continue
            response, _ = self.generate(model, item["request"])
            self.record_usage(response["usageMetadata"])
            lines.append(json.dumps({"key": item["key"], "response": response}))
        out = StoredFile(
            name=self.new_id("files/batch-out-"),
            display_name="responses",
            mime_type="application/jsonl",
            data="\n".join(lines).encode(),
            active=True,
        )
        self.files[out.name] = out
        name = self.new_id("batches/b")
        self.batches[name] = {
            "name": name,
            "displayName": batch.get("displayName", ""),
            "model": f"models/{model}",
            "createTime": _stamp(_now()),
            "polls": 0,
            "output": out.name,
        }
        return Reply.json(200, self._batch_json(name, "BATCH_STATE_PENDING"))

    def _batch_line_refusal(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The ``google.rpc.Status`` a job's line fails with, as a live call with it would:
        a ``cachedContent`` that is gone (a cache can expire while a job waits its turn), or a
        ``fileData`` naming no live upload (uploads live 48 h, "Files API",
        https://ai.google.dev/gemini-api/docs/files). None: the line runs."""
        request = camel_keys(request)
        cached = request.get("cachedContent")
        if (refused := _part_resolution_refusal(request.get("contents", []))) is not None:
            return _status_of(refused)
        if cached and any(request.get(f) for f in CACHE_OWNED_FIELDS):
            return {"code": 3, "message": CACHE_OWNED_MESSAGE, "status": "INVALID_ARGUMENT"}
        if cached and cached not in self.caches:
            message = f"CachedContent not found (or permission denied): {cached}"
            return {"code": 7, "message": message, "status": "PERMISSION_DENIED"}
        for content in request.get("contents", []):
            for part in content.get("parts", []):
                uri = (part.get("fileData") or {}).get("fileUri")
                if uri and uri.removeprefix(PUBLIC_FILES) not in self.files:
                    message = f"File {uri} not found or permission denied."
                    return {"code": 7, "message": message, "status": "PERMISSION_DENIED"}
        return None

    def _batch_json(self, name: str, state: str) -> dict[str, Any]:
        job = self.batches[name]
        metadata: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "name": name,
            "displayName": job["displayName"],
            "model": job["model"],
            "state": state,
            "createTime": job["createTime"],
            "updateTime": _stamp(_now()),
        }
        reply: dict[str, Any] = {"name": name, "metadata": metadata}
        if state == "BATCH_STATE_SUCCEEDED":
            metadata["endTime"] = _stamp(_now())
            metadata["output"] = {"responsesFile": job["output"]}
            reply["done"] = True
        return reply

    def batches_get(self, request: SeenRequest) -> Reply:
        name = urlparse(request.path).path.removeprefix(f"{API}/")
        job = self.batches.get(name)
        if job is None:
            return Reply.json(404, _error(404, "NOT_FOUND", f"{name} not found"))
        job["polls"] += 1
        state = "BATCH_STATE_RUNNING" if job["polls"] == 1 else "BATCH_STATE_SUCCEEDED"
        return Reply.json(200, self._batch_json(name, state))


def _status_of(reply: Reply) -> dict[str, Any]:
    """The ``google.rpc.Status`` of an error reply (a batch line's ``error``)."""
    error = json.loads(reply.body)["error"]
    return {"code": 3, "message": error["message"], "status": error["status"]}


def _frames(
    data: bytes, fps: float, start: float | None, end: float | None
) -> tuple[list[media.Frame], float]:
    """Frames of an mp4 at ``fps`` (between ``start`` and ``end`` when given: then timed in
    the file) and the seconds of audio they come with."""
    with tempfile.TemporaryDirectory(prefix="fake-gemini-") as tmp:
        path = Path(tmp) / "video.mp4"
        path.write_bytes(data)
        info = media.probe(path)
        lo = start or 0.0
        hi = min(end, info.duration_s) if end is not None else info.duration_s
        frames = media.sample_frames(path, fps=fps, max_height=720, start_s=lo, end_s=hi)
    return frames, (hi - lo) if info.has_audio else 0.0


def _segment_starts(text: str) -> dict[str, float]:
    try:
        context = parse_context(text)
    except ValueError:
        return {}
    return {s.segment_id: s.start_s for s in getattr(context, "segments", ())}


def _segment_span(text: str, segment: str) -> tuple[float | None, float | None]:
    try:
        context = parse_context(text)
    except ValueError:
        return None, None
    for s in getattr(context, "segments", ()):
        if s.segment_id == segment:
            return s.start_s, s.end_s
    return None, None


class GeminiHarness(Harness):
    """The fake Gemini API with our adapter pointed at it."""

    name = "gemini"

    def __init__(self, state: GeminiState, resources: ResourceLedger) -> None:
        self.state = state
        self.server = state.server
        self.resources = resources
        self.models: list[GeminiModel] = []

    async def aclose(self) -> None:
        """Close the HTTP connections of the models made here."""
        for model in self.models:
            await model.aclose()

    def config(self, model_id: str, **config: Any) -> ProviderConfig:
        """How ``model_id`` reaches the fake (sent as the provider's model name too)."""
        settings: dict[str, Any] = {
            "family": "gemini",
            "model_name": model_id,
            "base_url": self.server.base_url,
            "api_key": "fake-gemini-key",
            **config,
        }
        return ProviderConfig(**settings)

    def model(self, model_id: str, *, max_upload_bytes: int | None = None, **config: Any) -> Any:
        """Our Gemini adapter for ``model_id`` against the fake; uploads and caches go to this
        harness's ledger. ``max_upload_bytes``: the adapter's per-file limit, where a test has
        scaled the fake's down (``GeminiState.max_file_bytes``)."""
        limits: dict[str, Any] = {}
        if max_upload_bytes is not None:
            limits["max_upload_bytes"] = max_upload_bytes
        model = gemini_model(
            model_id,
            self.config(model_id, **config),
            self.resources,
            upload_poll_s=0.01,
            **limits,
        )
        assert isinstance(model, GeminiModel)
        self.models.append(model)
        return model

    def model_requests(self) -> list[SeenRequest]:
        """The ``generateContent`` requests, in order."""
        return [
            r
            for r in self.server.seen("POST", f"{API}/models/")
            if urlparse(r.path).path.endswith(":generateContent")
        ]

    def _seen(self, request: SeenRequest) -> Seen:
        body = request.json() or {}
        cache = self.state.caches.get(body.get("cachedContent") or "")
        system = body.get("systemInstruction")
        contents = ([system] if system else []) + body.get("contents", [])
        everything = (cache.contents if cache else []) + contents
        text = " ".join(p.get("text", "") for c in everything for p in c.get("parts", []))
        seen = Seen()
        self.state.read(everything, seen, text)
        return seen

    def prompt_text(self, request: SeenRequest) -> str:
        """All text the model reads for ``request``: system instruction, the context cache it
        names (clip labels) and its own contents."""
        return "\n\n".join(self._seen(request).text)

    def media(self, request: SeenRequest) -> list[dict[str, Any]]:
        """The videos the model sees for ``request`` (its cache's included), with fps, span in
        the source video, audio and route."""
        return self._seen(request).media

    def output_schema(self, request: SeenRequest) -> dict[str, Any] | None:
        """``generationConfig.responseJsonSchema`` (or the older ``responseSchema``)."""
        config = (request.json() or {}).get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        return dict(schema) if schema else None

    def last_usage(self) -> dict[str, int]:
        """The usage of the last answered generation."""
        return dict(self.state.usage[-1]) if self.state.usage else {}


@contextmanager
def gemini_harness(resources: ResourceLedger | None = None) -> Iterator[GeminiHarness]:
    """The fake Gemini API running on loopback, with its harness."""
    server = FakeProviderServer()
    state = GeminiState(server)
    server.route("POST", f"{API}/models/", state.models)
    server.route("GET", f"{API}/models", state.list_models)
    server.route("POST", f"/upload{API}/files", state.upload)
    server.route("GET", f"{API}/files/", state.files_get)
    server.route("DELETE", f"{API}/files/", state.files_delete)
    server.route("POST", f"{API}/cachedContents", state.caches_create)
    server.route("GET", f"{API}/cachedContents/", state.caches_get)
    server.route("DELETE", f"{API}/cachedContents/", state.caches_delete)
    server.route("GET", f"{API}/batches/", state.batches_get)
    with serve_provider(server):
        yield GeminiHarness(state, resources if resources is not None else MemoryResourceLedger())
