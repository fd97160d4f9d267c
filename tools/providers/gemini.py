"""Gemini through google-genai and pydantic-ai's ``GoogleModel``, with our clips as native video.

Each clip attachment becomes a Gemini video part at the clip's fps (never above the model's
``video_fps``, unless the clip fixes its frames: then exactly its own rate, so Gemini samples
those frames over its span), audio as the clip has it, introduced by its
:func:`~tools.providers.base.clip_label` (the clip's 00:00 is its start in the video). A clip
small enough goes inline; a larger one (the clip itself, never its whole source video) is
uploaded once through the Files API and reused by every later call while the upload lives; one
over the Files API's per-file limit is refused before anything is uploaded. "Small enough" is
two limits: the configured ``inline_max_bytes`` of raw video a request, and Gemini's own limit on
what a request carries inline, :data:`INLINE_REQUEST_MAX_BYTES` (100 MB, decimal), measured as
Gemini receives it: the video base64-encoded (:func:`base64_size`, a third more) with the rest of
the request beside it. When a call's video
is worth enough tokens, it goes into an explicit context cache instead, which every later call
with the same clips (retries, Phase II, other Gemini roles of the seed) reads rather than pays
for again. On Gemini 3 each video part carries its media resolution (``{"level": …}``), the only
place a cache's contents can say it.

SDK retries are off (the recorded-call wrapper retries); errors surface as pydantic-ai's
categorised exceptions, including those of the upload and cache calls made here.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx2
from google.genai import Client, errors
from google.genai import types as genai_types
from pydantic_ai.exceptions import ModelAPIError, ModelRequestRejectedError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    SystemPromptPart,
    UploadedFile,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models import (
    Model,
    ModelRequestParameters,
    check_allow_model_requests,
)
from pydantic_ai.models.batch import BatchRequest, EncodedBatchRequest
from pydantic_ai.models.google import GoogleModel, GoogleModelSettings
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.settings import ModelSettings

from tools.providers.base import (
    ClipInfo,
    MemoryResourceLedger,
    ModelCall,
    ProviderConfig,
    ProviderResource,
    ResourceLedger,
    RewritingModel,
    clip_info,
    clip_label,
)
from tools.providers.gemini_errors import map_google_error
from tools.providers.specs.gemini import FAMILY

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "FAMILY",
    "FILES_API_MAX_BYTES",
    "FRAME_TOKENS",
    "INLINE_REQUEST_MAX_BYTES",
    "UPLOAD_LIFETIME",
    "GeminiModel",
    "base64_size",
    "estimate_video_tokens",
    "frame_tokens",
    "gemini_generation",
    "gemini_model",
]

PROVIDER = "gemini"
AUDIO_TOKENS_PER_SECOND = 32
# Video tokens per frame by model generation and media resolution ("Media resolution", token
# counts table, https://ai.google.dev/gemini-api/docs/media-resolution; policies/tokens.py
# counts the same for budgets): Gemini 3 bills 70 a frame at low and medium and 280 at high;
# Gemini 2.x 66 at low and 258 at medium (its default) and high.
FRAME_TOKENS: dict[int, dict[str, int]] = {
    3: {"low": 70, "medium": 70, "high": 280},
    2: {"low": 66, "medium": 258, "high": 258},
}
_WIRE_RESOLUTION = {
    "low": genai_types.MediaResolution.MEDIA_RESOLUTION_LOW,
    "medium": genai_types.MediaResolution.MEDIA_RESOLUTION_MEDIUM,
    "high": genai_types.MediaResolution.MEDIA_RESOLUTION_HIGH,
}
# A part's own resolution is a message, not the request-wide enum: ``Part.media_resolution`` is a
# ``PartMediaResolution`` whose ``level`` is a ``PartMediaResolutionLevel`` (google-genai
# ``types.py``; the API's ``Part.MediaResolution.level``, "Media resolution", per part,
# https://ai.google.dev/gemini-api/docs/media-resolution). The SDK validates a bare
# ``MediaResolution`` given there into an empty message and sends ``"mediaResolution": {}``,
# which sets no level: the part then goes at the model's default.
_PART_RESOLUTION: dict[str, genai_types.PartMediaResolutionDict] = {
    "low": {"level": genai_types.PartMediaResolutionLevel.MEDIA_RESOLUTION_LOW},
    "medium": {"level": genai_types.PartMediaResolutionLevel.MEDIA_RESOLUTION_MEDIUM},
    "high": {"level": genai_types.PartMediaResolutionLevel.MEDIA_RESOLUTION_HIGH},
}
# Files live 48 h on Gemini's side; an hour's margin so no call references one about to vanish.
UPLOAD_LIFETIME = timedelta(hours=47)
# The Files API takes "up to 20 GB of files per project, with a per-file maximum size of 2 GB"
# ("Files API", https://ai.google.dev/gemini-api/docs/files). Read in decimal gigabytes, the
# smaller reading, so a clip under it passes whichever Google means.
FILES_API_MAX_BYTES = 2 * 1000**3
# What one request may carry as inline data: "Inline Data | < 100MB | Small files (<100MB),
# short duration (<1min), one-off inputs" ("Video understanding", input methods table,
# https://ai.google.dev/gemini-api/docs/video-understanding; the "File input methods" guide,
# https://ai.google.dev/gemini-api/docs/file-input-methods, compares the same methods), raised
# from the 20 MB of total request size the guides gave before ("Increased file size limits and
# expanded inputs support in Gemini API", https://blog.google/innovation-and-ai/technology/
# developers-tools/gemini-api-new-file-limits: inline files up to 100 MB). Inline data travels
# base64-encoded in the request's JSON (google-genai's ``_api_client`` json.dumps the body, its
# bytes as base64), so the limit is held against the encoded request, in decimal megabytes (the
# smaller reading): 72 MiB of video is 100.7 MB once encoded, and is refused.
INLINE_REQUEST_MAX_BYTES = 100 * 1000 * 1000
# Room kept for what a request carries besides its texts and inline data (counted one by one,
# :meth:`GeminiModel._other_request_bytes`): its JSON keys and punctuation, the clip labels,
# the generation config and safety settings.
_REQUEST_FRAMING_BYTES = 64 * 1024
UPLOAD_POLL_S = 1.0
# A context cache this close to its expiry is not reused: a call that names an expired cache
# is refused (403 "CachedContent not found"), so a fresh one is made instead.
CACHE_MARGIN = timedelta(seconds=60)

Route = Literal["inline", "file"]
# What a file's uri starts with before its name (``files/…``), which the Files API's calls take.
_PUBLIC_FILES = "https://generativelanguage.googleapis.com/v1beta/"


def gemini_generation(model_name: str) -> int:
    """The major version in a Gemini id (``gemini-3.1-pro-preview`` → 3); 2 when it says none."""
    name = model_name.lower().rsplit("/", 1)[-1]
    digits = name.removeprefix("gemini-").split(".", 1)[0].split("-", 1)[0]
    return int(digits) if digits.isdigit() else 2


def frame_tokens(model_name: str, resolution: str) -> int:
    """Tokens Gemini bills per video frame of ``model_name`` at a media resolution."""
    return FRAME_TOKENS[3 if gemini_generation(model_name) >= 3 else 2][resolution]


def base64_size(raw_bytes: int) -> int:
    """The bytes ``raw_bytes`` of data take base64-encoded, padding included (RFC 4648): the
    size inline data has in a request."""
    return 4 * math.ceil(raw_bytes / 3)


def estimate_video_tokens(
    clips: Sequence[ClipInfo],
    model_name: str = "gemini-3-flash-preview",
    resolution: str = "medium",
) -> int:
    """What Gemini bills for ``clips``: :func:`frame_tokens` per frame at each clip's fps, plus
    32 per second of audio for clips that carry it."""
    per_frame = frame_tokens(model_name, resolution)
    total = 0
    for clip in clips:
        total += clip.native_frames * per_frame
        if clip.audio:
            total += math.ceil(clip.duration_s * AUDIO_TOKENS_PER_SECOND)
    return total


@dataclass(frozen=True)
class _Video:
    """One clip of a call, resolved to what Gemini is sent: a label and a video item."""

    info: ClipInfo
    route: Route
    label: str
    item: BinaryContent | UploadedFile

    def part_dicts(self) -> list[genai_types.PartDict]:
        """The label and the video as Gemini parts (for a context cache's contents)."""
        video: genai_types.PartDict
        vendor = dict(self.item.vendor_metadata or {})
        metadata = genai_types.VideoMetadataDict(fps=vendor["fps"])  # the clip whole: no offsets
        if isinstance(self.item, BinaryContent):
            video = {
                "inline_data": {"data": self.item.data, "mime_type": self.item.media_type},
                "video_metadata": metadata,
            }
        else:
            video = {
                "file_data": {"file_uri": self.item.file_id, "mime_type": self.item.media_type},
                "video_metadata": metadata,
            }
        if "media_resolution" in vendor:
            # A cache's contents take no generationConfig: Gemini 3 takes the resolution per part.
            video["media_resolution"] = vendor["media_resolution"]
        return [{"text": self.label}, video]


@dataclass(frozen=True)
class _Rewritten:
    """A call's messages with its clips resolved, the settings, request parameters and cache
    report to use, and what the request carries (recorded with its response as
    ``playlisteval_sent``)."""

    messages: list[ModelMessage]
    settings: ModelSettings | None
    parameters: ModelRequestParameters
    cache_report: dict[str, Any] | None
    sent: dict[str, Any] = field(default_factory=dict)


class GeminiModel(RewritingModel):
    """A :class:`GoogleModel` that sends our clips as Gemini native video (inline, or uploaded
    once and referenced), caching a call's videos when they are worth it.

    ``model_id`` is ours (priced by the price table); the wrapped model sends
    ``config.model_name``. Uploads and caches are recorded in ``resources`` and reused. No clip
    over ``max_upload_bytes`` (the Files API's per-file limit; smaller in tests) is uploaded,
    and no request carries more inline than Gemini takes (:data:`INLINE_REQUEST_MAX_BYTES`,
    base64 included): the clips past it go through the Files API.
    """

    def __init__(
        self,
        model_id: str,
        config: ProviderConfig,
        wrapped: GoogleModel,
        resources: ResourceLedger,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        upload_poll_s: float = UPLOAD_POLL_S,
        http_client: httpx2.AsyncClient | None = None,
        max_upload_bytes: int = FILES_API_MAX_BYTES,
    ) -> None:
        super().__init__(wrapped)
        self._http_client = http_client
        self.our_model_id = model_id
        self.config = config
        self.resources = resources
        self.clock = clock
        self.upload_poll_s = upload_poll_s
        self.max_upload_bytes = max_upload_bytes
        self._google = wrapped
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._uploaded: list[ProviderResource] = []  # made by this model, deleted on close

    @property
    def client(self) -> Client:
        """The google-genai client the wrapped model speaks through."""
        return self._google.client

    async def aclose(self) -> None:
        """Delete the uploads this model made (:meth:`delete_uploads`) and close the HTTP
        connections it opened. A run closes its models when it ends; tests and one-off scripts
        close theirs."""
        try:
            await self.delete_uploads()
        finally:
            if self._http_client is not None:
                await self._http_client.aclose()

    async def delete_uploads(self) -> int:
        """Delete, through the Files API, every file this model uploaded, and mark each expired
        in the ledger so no later call names it; how many went. Gemini keeps an upload 48 h
        against the project's 20 GB of files ("Files API", https://ai.google.dev/gemini-api/docs/
        files): a campaign's whole source videos would fill it. A file that is gone already (or
        a delete that fails) is left to expire; the run's answers do not depend on it."""
        deleted = 0
        for resource in list(self._uploaded):
            name = resource.name.removeprefix(_PUBLIC_FILES)
            try:
                await self.client.aio.files.delete(name=name)
                deleted += 1
            except (errors.APIError, httpx2.HTTPError, ValueError):
                pass
            self.resources.record(replace(resource, expires_at=self.clock()))
            self._uploaded.remove(resource)
        return deleted

    # -- pydantic-ai Model --------------------------------------------------------------------

    async def rewrite(self, call: ModelCall) -> tuple[ModelCall, dict[str, Any]]:
        """A ``generateContent`` call with the clips in Gemini's native form, and what it
        carries (``playlisteval_sent``; ``playlisteval_cache`` where it uses a context cache)."""
        rewritten = await self._rewrite(call.messages, call.settings, call.parameters)
        recorded: dict[str, Any] = {
            "playlisteval_sent": {
                **rewritten.sent,
                # pydantic-ai's unified level, mapped by it to the model's thinkingLevel.
                "thinking": call.parameters.thinking
                if call.parameters.thinking is not None
                else (call.settings or {}).get("thinking"),
            }
        }
        if rewritten.cache_report is not None:
            recorded["playlisteval_cache"] = rewritten.cache_report
        return ModelCall(rewritten.messages, rewritten.settings, rewritten.parameters), recorded

    async def batch_encode(self, request: BatchRequest) -> EncodedBatchRequest:
        """A batch line for ``request``: its clips as a live call's are, except that every clip
        goes through the Files API (``fileData``) and none into a context cache.

        Why: a batch line is one ``GenerateContentRequest`` in a JSONL input file ("Batch API",
        https://ai.google.dev/gemini-api/docs/batch-mode), and the Gemini cookbook's batch guide
        (google-gemini/cookbook, quickstarts/Batch_mode, "Generate with multimodal inputs") has
        multimodal lines reference media by Files API URI. Inline video would put every clip's
        base64 into the input file, once per line. A context cache is left out because a job
        runs up to 24 h after it is submitted (the batch docs' target turnaround) while our
        caches live ``cache_ttl_s`` (600 s by default): a line naming a cache that expired
        before the job reached it fails ("CachedContent not found"), and Vertex AI's batch
        prediction refuses cached content outright ("does not support cached content with batch
        prediction", reported on discuss.ai.google.dev). Uploads live 48 h, longer than a job.
        """
        rewritten = await self._rewrite(
            request.messages,
            request.model_settings,
            request.model_request_parameters,
            batch=True,
        )
        return await self.wrapped.batch_encode(
            replace(request, messages=rewritten.messages, model_settings=rewritten.settings)
        )

    # -- rewriting ----------------------------------------------------------------------------

    def _wire_settings(self, settings: ModelSettings | None) -> ModelSettings:
        """The settings as this model is sent them: Gemini 3 keeps its default temperature,
        and video goes at the configured media resolution."""
        wire: dict[str, Any] = dict(settings or {})
        if gemini_generation(self.config.model_name) >= 3:
            # Gemini 3 developer guide, "Temperature": keep it at its default of 1.0; lower
            # values "may lead to unexpected behavior, such as looping or degraded
            # performance" (https://ai.google.dev/gemini-api/docs/gemini-3).
            wire.pop("temperature", None)
        wire["google_video_resolution"] = _WIRE_RESOLUTION[self.config.media_resolution]
        return wire  # type: ignore[return-value]

    def _sent(self, wire: ModelSettings, videos: Sequence[_Video]) -> dict[str, Any]:
        return {
            "model": self.config.model_name,
            "temperature": wire.get("temperature"),
            "max_output_tokens": wire.get("max_tokens"),
            "media_resolution": self.config.media_resolution,
            "videos": [
                {
                    "segment_id": v.info.segment_id,
                    "start_s": v.info.start_s,
                    "end_s": v.info.end_s,
                    "fps": v.info.fps,
                    "audio": v.info.audio,
                    "route": v.route,
                }
                for v in videos
            ],
        }

    async def _rewrite(
        self,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
        *,
        batch: bool = False,
    ) -> _Rewritten:
        wire = self._wire_settings(settings)
        clips = [
            (item, info)
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
            for item in part.content
            if isinstance(item, BinaryContent) and (info := clip_info(item)) is not None
        ]
        if not clips:
            return _Rewritten(messages, wire, parameters, None, self._sent(wire, ()))
        clip_ids = {id(item) for item, _ in clips}
        routes = _routes(
            [len(item.data) for item, _ in clips],
            inline_budget=-1 if batch else self.config.inline_max_bytes,
            # Gemini's limit on the encoded request, less what else the request carries (<).
            request_budget=INLINE_REQUEST_MAX_BYTES
            - 1
            - self._other_request_bytes(messages, parameters, clip_ids),
        )
        self._check_upload_sizes(clips, routes)  # before anything is uploaded
        videos: dict[int, _Video] = {}
        for (item, info), route in zip(clips, routes, strict=True):
            # Never more frames a second than the model is configured for, unless the caller
            # fixed the clip's frames (an evaluation condition): then exactly its own rate.
            fps = info.fps if info.fixed else min(info.fps, self.config.video_fps)
            videos[id(item)] = await self._video(item, replace(info, fps=fps), route=route)
        ordered = [videos[id(item)] for item, _ in clips]
        sent = self._sent(wire, ordered)
        use_cache = (
            not batch
            and self.config.context_cache
            # A cached request may carry no tools or tool config (Gemini refuses them beside
            # ``cachedContent``; pydantic-ai strips them): a call with tools keeps its videos.
            and not _has_tools(self.prepare_request(settings, parameters)[1])
            and estimate_video_tokens(
                [v.info for v in ordered], self.config.model_name, self.config.media_resolution
            )
            >= self.config.cache_min_tokens
        )
        if not use_cache:
            return _Rewritten(
                _replace_clips(messages, videos, drop=False), wire, parameters, None, sent
            )
        report = await self._cache(ordered)
        cached_settings: GoogleModelSettings = {
            **wire,  # type: ignore[typeddict-item]
            "google_cached_content": report["name"],
        }
        # Nor a system instruction: the call's instructions go as user text, as its system
        # prompt does (``_replace_clips``), so the cache stays the clips' alone and every role
        # with the same clips reads it.
        instructions = _instructions(messages, parameters)
        return _Rewritten(
            _replace_clips(messages, videos, drop=True, instructions=instructions),
            cached_settings,
            replace(parameters, instruction_parts=[]),
            report,
            sent,
        )

    def _other_request_bytes(
        self,
        messages: Sequence[ModelMessage],
        parameters: ModelRequestParameters,
        clip_ids: set[int],
    ) -> int:
        """At most what a request of ``messages`` carries besides its clips (``clip_ids``):
        its texts and instructions as google-genai's ``json.dumps`` writes them (non-ASCII
        escaped), the output schema, any other inline data base64-encoded, and
        :data:`_REQUEST_FRAMING_BYTES` for the JSON around them."""
        texts: list[str] = [_instructions(messages, parameters)]
        other_inline = 0
        for message in messages:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    texts.append(part.content)
                elif isinstance(part, UserPromptPart):
                    items = [part.content] if isinstance(part.content, str) else part.content
                    for item in items:
                        if isinstance(item, str):
                            texts.append(item)
                        elif isinstance(item, BinaryContent) and id(item) not in clip_ids:
                            other_inline += base64_size(len(item.data))
        output = parameters.output_object
        schema = output.json_schema if output is not None else None
        return len(json.dumps([texts, schema])) + other_inline + _REQUEST_FRAMING_BYTES

    def _check_upload_sizes(
        self, clips: Sequence[tuple[BinaryContent, ClipInfo]], routes: Sequence[Route]
    ) -> None:
        """Refuse the call when a clip bound for the Files API is over its per-file limit: the
        upload would be refused after its bytes were sent. A clip is cut by the caller, so the
        way out is a smaller one (lower fps or height, or a shorter segment)."""
        for (item, info), route in zip(clips, routes, strict=True):
            if route == "file" and len(item.data) > self.max_upload_bytes:
                raise ModelRequestRejectedError(
                    self.model_name,
                    f"clip {info.segment_id!r} is {len(item.data):,} bytes, over the Gemini "
                    f"Files API's per-file limit of {self.max_upload_bytes:,} bytes "
                    "(https://ai.google.dev/gemini-api/docs/files); attach it at a lower fps "
                    "or height, or as shorter segments",
                )

    async def _video(self, part: BinaryContent, info: ClipInfo, *, route: Route) -> _Video:
        resolution: dict[str, Any] = {}
        if gemini_generation(self.config.model_name) >= 3:
            # Per-part resolution is Gemini 3's ("Media resolution", per part (Gemini 3 only),
            # https://ai.google.dev/gemini-api/docs/media-resolution), in the message shape the
            # API reads: a context cache's contents have no generationConfig to carry it.
            resolution = {"media_resolution": _PART_RESOLUTION[self.config.media_resolution]}
        # Inline or uploaded, the video is the clip itself: its 00:00 is the clip's start.
        label = clip_label(info, source_timeline=False)
        metadata = {"fps": info.fps, **resolution}
        if route == "inline":
            item = BinaryContent(
                data=part.data,
                media_type=part.media_type,
                identifier=part.identifier,
                vendor_metadata=metadata,
            )
            return _Video(info, "inline", label, item)
        # Keyed by the clip's bytes, so every call attaching the same clip reuses the upload.
        uri = await self._upload(_bytes_key(part.data), part.data, part.media_type)
        uploaded = UploadedFile(
            file_id=uri,
            provider_name="google",
            media_type=part.media_type,
            identifier=part.identifier,
            vendor_metadata=metadata,
        )
        return _Video(info, "file", label, uploaded)

    # -- provider-side resources --------------------------------------------------------------

    def _lock(self, kind: str, key: str) -> asyncio.Lock:
        return self._locks.setdefault((kind, key), asyncio.Lock())

    async def _upload(self, key: str, data: bytes, mime_type: str) -> str:
        """The file uri of ``data`` (a ``mime_type`` video) on Gemini's side, uploaded now
        unless a live upload of it is in the ledger."""
        async with self._lock("upload", key):
            found = self.resources.find(PROVIDER, "upload", key, self.clock())
            if found is not None:
                return found.name
            upload_config = genai_types.UploadFileConfig(
                mime_type=mime_type, display_name=f"clip-{key}"
            )
            with self._mapped_errors():
                file = await self.client.aio.files.upload(
                    file=io.BytesIO(data), config=upload_config
                )
                file = await self._until_active(file)
            if not file.uri:
                raise ModelAPIError(self.model_name, f"the uploaded file {file.name!r} has no uri")
            created = file.create_time or self.clock()
            resource = ProviderResource(
                provider=PROVIDER,
                kind="upload",
                key=key,
                name=file.uri,
                expires_at=created + UPLOAD_LIFETIME,
            )
            self.resources.record(resource)
            self._uploaded.append(resource)
            return file.uri

    async def _until_active(self, file: genai_types.File) -> genai_types.File:
        waited = 0.0
        while file.state == genai_types.FileState.PROCESSING:
            if waited > self.config.timeout_s:
                raise ModelAPIError(
                    self.model_name,
                    f"the uploaded file {file.name!r} still PROCESSING after {waited:.0f} s",
                )
            await asyncio.sleep(self.upload_poll_s)
            waited += self.upload_poll_s
            assert file.name is not None
            file = await self.client.aio.files.get(name=file.name)
        if file.state == genai_types.FileState.FAILED:
            raise ModelAPIError(
                self.model_name, f"Gemini could not process the uploaded file {file.name!r}"
            )
        return file

    async def _cache(self, videos: Sequence[_Video]) -> dict[str, Any]:
        """The context cache holding ``videos`` (with their labels): a live one from the
        ledger, or one created now."""
        key = _cache_key(self.config.model_name, videos)
        async with self._lock("cache", key):
            # Not one about to expire: the call naming it may reach Gemini after it has.
            found = self.resources.find(PROVIDER, "cache", key, self.clock() + CACHE_MARGIN)
            if found is not None:
                return self._cache_report(found, created=False)
            contents: list[genai_types.ContentDict] = [
                {"role": "user", "parts": [p for v in videos for p in v.part_dicts()]}
            ]
            with self._mapped_errors():
                cache = await self.client.aio.caches.create(
                    model=self.config.model_name,
                    config=genai_types.CreateCachedContentConfig(
                        contents=contents,
                        ttl=f"{self.config.cache_ttl_s}s",
                        display_name=f"playlisteval-{key[:12]}",
                    ),
                )
            if not cache.name:
                raise ModelAPIError(self.model_name, "Gemini created a cache without a name")
            reported = cache.usage_metadata.total_token_count if cache.usage_metadata else None
            expires = cache.expire_time or (
                self.clock() + timedelta(seconds=self.config.cache_ttl_s)
            )
            resource = ProviderResource(
                provider=PROVIDER,
                kind="cache",
                key=key,
                name=cache.name,
                expires_at=expires,
                tokens=reported
                or estimate_video_tokens(
                    [v.info for v in videos], self.config.model_name, self.config.media_resolution
                ),
            )
            self.resources.record(resource)
            return self._cache_report(resource, created=True)

    def _cache_report(self, resource: ProviderResource, *, created: bool) -> dict[str, Any]:
        return {
            "name": resource.name,
            "created": created,
            "tokens": resource.tokens,
            "ttl_s": self.config.cache_ttl_s,
        }

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """google-genai and transport errors of our own calls as pydantic-ai's exceptions."""
        try:
            yield
        except (errors.APIError, httpx2.TransportError, httpx2.HTTPStatusError) as exc:
            raise map_google_error(exc, self.model_name) from exc
        except (ValueError, KeyError) as exc:
            # The SDK's own complaints about a reply it could not use (no upload url, an
            # upload never finalised, a body that is not JSON).
            raise ModelAPIError(self.model_name, f"Gemini file/cache call failed: {exc}") from exc


def _bytes_key(data: bytes) -> str:
    return "clip:" + hashlib.sha256(data).hexdigest()[:16]


def _routes(sizes: Sequence[int], *, inline_budget: int, request_budget: int) -> list[Route]:
    """How each clip of a call (by its size in bytes, in order) reaches Gemini: inline while
    the request's inline video stays within ``inline_budget`` bytes (the setting) and, base64-
    encoded, within ``request_budget`` (Gemini's per-request limit, less the rest of the
    request), the rest through the Files API; all of them with a negative budget."""
    routes: list[Route] = []
    raw_left, encoded_left = inline_budget, request_budget
    for size in sizes:
        encoded = base64_size(size)
        if size <= raw_left and encoded <= encoded_left:
            routes.append("inline")
            raw_left -= size
            encoded_left -= encoded
        else:
            routes.append("file")
    return routes


def _has_tools(prepared: ModelRequestParameters) -> bool:
    """Whether a request (its parameters as the model prepared them: output tools only in tool
    output mode) sends tools: function or output tools, or the provider's own."""
    return bool(prepared.declared_tool_defs or prepared.native_tools)


def _instructions(messages: Sequence[ModelMessage], parameters: ModelRequestParameters) -> str:
    """The instructions a request is sent with: the agent's (``instruction_parts``), or for a
    direct ``request()`` call those of its latest request; empty when there are none."""
    if parameters.instruction_parts is not None:
        texts = [part.content for part in parameters.instruction_parts]
    else:
        latest = next((m for m in reversed(messages) if isinstance(m, ModelRequest)), None)
        texts = [latest.instructions] if latest is not None and latest.instructions else []
    return "\n\n".join(text for text in texts if text)


def _cache_key(model_name: str, videos: Sequence[_Video]) -> str:
    described = [
        [
            v.info.source,
            v.info.start_s,
            v.info.end_s,
            v.info.fps,
            v.info.audio,
            v.route,
            v.item.file_id if isinstance(v.item, UploadedFile) else "",
        ]
        for v in videos
    ]
    payload = json.dumps([model_name, described], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _replace_clips(
    messages: list[ModelMessage],
    videos: dict[int, _Video],
    *,
    drop: bool,
    instructions: str = "",
) -> list[ModelMessage]:
    """``messages`` with each clip as its label and video item, or (``drop``: the videos are
    in a context cache) without either. When dropping, system prompts become user text and
    ``instructions`` follow them at the head of the first request, since a cached request may
    not carry a system instruction (Gemini refuses it beside ``cachedContent``; pydantic-ai
    would strip it, and the model would never read it)."""
    out: list[ModelMessage] = []
    first = True
    for message in messages:
        if not isinstance(message, ModelRequest):
            out.append(message)
            continue
        parts: list[Any] = []
        if drop and first and instructions:
            leading = 0
            while leading < len(message.parts) and isinstance(
                message.parts[leading], SystemPromptPart
            ):
                leading += 1
            message = replace(
                message,
                parts=[
                    *message.parts[:leading],
                    UserPromptPart(instructions),
                    *message.parts[leading:],
                ],
            )
        first = False
        for part in message.parts:
            if drop and isinstance(part, SystemPromptPart):
                parts.append(UserPromptPart(part.content, timestamp=part.timestamp))
                continue
            if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
                parts.append(part)
                continue
            content: list[UserContent] = []
            for item in part.content:
                video = videos.get(id(item))
                if video is None:
                    content.append(item)
                elif not drop:
                    content.extend((video.label, video.item))
            parts.append(replace(part, content=content))
        out.append(replace(message, parts=parts))
    return out


def _client(config: ProviderConfig, http_client: httpx2.AsyncClient) -> Client:
    """A google-genai client for ``config``: its endpoint and key, SDK retries off, the
    timeout in milliseconds, over ``http_client``."""
    return Client(
        api_key=config.api_key,
        http_options=genai_types.HttpOptions(
            base_url=config.base_url,
            timeout=int(config.timeout_s * 1000),
            retry_options=genai_types.HttpRetryOptions(attempts=1),
            # An httpx2 client, so transport errors are the ones pydantic-ai maps (with aiohttp
            # installed the SDK would otherwise use it, whose errors escape unmapped).
            httpx_async_client=http_client,
        ),
    )


def gemini_model(
    model_id: str,
    config: ProviderConfig,
    resources: ResourceLedger | None = None,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    upload_poll_s: float = UPLOAD_POLL_S,
    max_upload_bytes: int = FILES_API_MAX_BYTES,
) -> Model:
    """Our Gemini adapter for ``model_id``: ``config.model_name`` through google-genai at
    ``config.base_url`` (the Gemini API when unset), SDK retries off, timeout
    ``config.timeout_s``, JSON-schema output native. ``resources`` (default: this model's own
    memory) records uploads and caches so they are reused, never repeated while alive; no clip
    over ``max_upload_bytes`` is uploaded."""
    http_client = httpx2.AsyncClient(timeout=httpx2.Timeout(config.timeout_s))
    client = _client(config, http_client)
    google = GoogleModel(
        config.model_name,
        provider=GoogleProvider(client=client),
        # Merged over the provider's profile for the model: the role's JSON schema goes in
        # generationConfig (responseJsonSchema) rather than as an output tool.
        profile=ModelProfile(default_structured_output_mode="native"),
    )
    return GeminiModel(
        model_id,
        config,
        google,
        resources if resources is not None else MemoryResourceLedger(),
        clock=clock,
        upload_poll_s=upload_poll_s,
        http_client=http_client,
        max_upload_bytes=max_upload_bytes,
    )


async def gemini_list_models(config: ProviderConfig) -> list[str]:
    """The ids the Gemini API at ``config.base_url`` serves: ``client.aio.models.list()``
    (``GET /v1beta/models``, paged by the SDK), each name without its ``models/`` prefix."""
    check_allow_model_requests()
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(config.timeout_s)) as http_client:
        client = _client(config, http_client)
        return [
            model.name.removeprefix("models/")
            async for model in await client.aio.models.list()
            if model.name
        ]
