"""What every live provider adapter shares: its configuration, how our clip attachments are
read, frames for the providers that take video as pictures, and the ledger of provider-side
resources (uploaded files, context caches) that must be reused rather than paid for again.

A role call carries each segment as a :class:`~pydantic_ai.messages.BinaryContent` mp4 clip whose
``identifier`` is the segment id and whose ``vendor_metadata`` says what it is (see
``agents.evidence.SeedEvidence.videos``): ``fps``, ``start_s``/``end_s`` in the source video,
``height``, ``audio``, ``source`` (a content key of the source file), ``video_id`` and ``path``
(the source file). Each adapter turns that into its provider's native form: Gemini native video
with ``video_metadata``; OpenAI, DashScope and open-weight judges a list of timed frames.

A clip may also fix what is shown of it: ``frame_times``, the instants (seconds into the source
video) an evaluation condition names. Such a clip is shown exactly so by every family — those
frames, at the clip's own ``height`` and ``fps`` — whatever the model's configured rate, frame
height or per-clip minimum (:func:`frame_times`, :func:`shown_height`); the budget reserves for
the same frames.
"""

from __future__ import annotations

import io
import math
from abc import abstractmethod
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any, Literal, Protocol, TypeVar

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models import (
    Model,
    ModelRequestParameters,
    StreamedResponse,
    check_allow_model_requests,
)
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from tools.contracts.roles import format_timestamp


@dataclass(frozen=True)
class ProviderConfig:
    """How one configured model id is reached.

    ``model_name`` is the provider's own id for it (ours are priced by the price table and may
    differ, e.g. ``qwen-3.7-plus`` → ``qwen3.7-plus``). SDK-level retries are always off: the
    recorded-call wrapper retries, so every attempt is visible in the log and budgeted once.
    """

    family: str  # a provider family's name (``tools.providers.registry.families``)
    model_name: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 600.0
    # Frame-based providers (OpenAI, DashScope, open-weight): how each segment is sampled.
    video_fps: float = 0.5
    frame_height: int = 720
    max_frames: int = 256  # per request, spread uniformly over the segments when exceeded
    # Gemini: clips go inline while a request's inline video stays within this many bytes
    # (Gemini takes 100 MB of inline data per request, base64 included); the rest through the
    # Files API (uploaded once).
    inline_max_bytes: int = 72 * 1024 * 1024
    # Gemini: the mediaResolution its video is sent (and billed) at.
    media_resolution: Literal["low", "medium", "high"] = "medium"
    # Gemini explicit context caching of a call's videos (reused by every later call with them).
    context_cache: bool = True
    cache_ttl_s: int = 600
    cache_min_tokens: int = 4096  # below this Gemini refuses to cache; send inline instead
    # transformers: a local model folder (or any id ``from_pretrained`` resolves offline).
    local_path: str | None = None
    device: str = "auto"


PICTURES_PROMPTED_PROFILE = ModelProfile(
    # Text and pictures in (our clips go as timed frames, or video files made of them); audio
    # and documents never. The role's answer is JSON the instructions ask for: no tools and no
    # native (schema) output, which neither a local chat template nor DashScope's multimodal
    # route offers.
    default_structured_output_mode="prompted",
    supports_json_schema_output=False,
    supports_tools=False,
    supports_image_input=True,
    supports_video_input=True,
    supports_audio_input=False,
    supports_audio_file_input=False,
    supports_document_input=False,
)
"""What a model takes that is sent our clips as pictures and prompted for its structured answer
(DashScope's Qwen models, open-weight models run here): the part of its profile such models
share."""


@dataclass(frozen=True)
class ModelCall:
    """One call as pydantic-ai hands it to a model: the messages, settings and request
    parameters."""

    messages: list[ModelMessage]
    settings: ModelSettings | None
    parameters: ModelRequestParameters


class CallAnsweringModel(Model):
    """A pydantic-ai model that answers a non-streamed call whole: :meth:`request` hands the call
    to :meth:`answer` as one :class:`ModelCall`, so a subclass says only how it answers."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """The answer to one non-streamed call: :meth:`answer` to it as pydantic-ai hands it."""
        return await self.answer(ModelCall(messages, model_settings, model_request_parameters))

    @abstractmethod
    async def answer(self, call: ModelCall) -> ModelResponse:
        """This model's answer to ``call``."""


class ConfiguredModel(CallAnsweringModel):
    """A pydantic-ai model of ours that calls its provider (or runs its weights) itself, wrapping
    no SDK model: ``our_model_id`` is our id (as priced), ``model_name`` the provider's own
    (``config.model_name``). A subclass says which family it is (:attr:`system`) and how it
    answers a call (:meth:`respond`); :meth:`answer` is the same for all, so none can skip the
    guard that keeps the tests from reaching a model.
    """

    def __init__(
        self,
        model_id: str,
        config: ProviderConfig,
        profile: ModelProfile,
        settings: ModelSettings | None = None,
    ) -> None:
        """Keep our id and the model's configuration; ``profile`` says what the model takes."""
        super().__init__(settings=settings, profile=profile)
        self.our_model_id = model_id  # ours, as priced; ``model_id`` is pydantic-ai's
        self.config = config

    @property
    def model_name(self) -> str:
        """The provider's id of the model (``model_name`` in its settings, else our id)."""
        return self.config.model_name

    async def answer(self, call: ModelCall) -> ModelResponse:
        """Refused where model requests are not allowed (``ALLOW_MODEL_REQUESTS``, off in the
        tests), else :meth:`respond` to ``call`` as pydantic-ai prepares it for this model (its
        own settings merged in, the parameters fitted to its profile)."""
        check_allow_model_requests()
        settings, parameters = self.prepare_request(call.settings, call.parameters)
        return await self.respond(ModelCall(call.messages, settings, parameters))

    @abstractmethod
    async def respond(self, call: ModelCall) -> ModelResponse:
        """This model's answer to ``call``, its settings and parameters already prepared."""


class CallWrapper(CallAnsweringModel, WrapperModel):
    """A model wrapped so that it answers a non-streamed call whole (:meth:`answer`), the way
    the wrapped model does unless a subclass says otherwise; a streamed call is the wrapped
    model's."""

    async def answer(self, call: ModelCall) -> ModelResponse:
        """The wrapped model's answer to ``call``."""
        return await self.wrapped.request(call.messages, call.settings, call.parameters)


class RewritingModel(CallWrapper):
    """An SDK model of pydantic-ai wrapped so that our clips reach it in its provider's form.

    A subclass says how a call is rewritten (:meth:`rewrite`); a live call and a streamed one
    both send the call so rewritten, so the two never differ in what they send. A live call's
    answer carries what the rewrite recorded of it (``provider_details``, e.g.
    ``playlisteval_sent``).
    """

    @abstractmethod
    async def rewrite(self, call: ModelCall) -> tuple[ModelCall, dict[str, Any]]:
        """``call`` as the wrapped model is to send it, and the entries to record with its
        answer's ``provider_details``."""

    async def answer(self, call: ModelCall) -> ModelResponse:
        """The wrapped model's answer to the rewritten call, with what the rewrite recorded."""
        sent, recorded = await self.rewrite(call)
        response = await super().answer(sent)
        response.provider_details = {**(response.provider_details or {}), **recorded}
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        """The wrapped model's streamed answer to the call rewritten as :meth:`answer` does."""
        sent, _ = await self.rewrite(ModelCall(messages, model_settings, model_request_parameters))
        async with self.wrapped.request_stream(
            sent.messages, sent.settings, sent.parameters, run_context
        ) as stream:
            yield stream


@dataclass(frozen=True)
class ClipInfo:
    """One segment clip attached to a call."""

    segment_id: str
    video_id: str
    start_s: float
    end_s: float
    fps: float
    height: int
    audio: bool
    source: str
    path: str | None
    # The instants (seconds into the source video) the caller fixed: exactly these frames are
    # shown, at the clip's height. None: the model's own frame plan decides.
    shown_times: tuple[float, ...] | None = None
    # The clip's width at ``height`` (its source's aspect ratio), when its maker knew it.
    width: int | None = None
    # The most frames the request this clip goes in may carry, when the caller fitted the
    # request to the model's context window (``max_frames`` in its metadata): the frame plan
    # takes the smallest of these and the model's own ``max_frames``. None: no such cap.
    request_max_frames: int | None = None

    @property
    def duration_s(self) -> float:
        """Seconds the clip covers."""
        return max(self.end_s - self.start_s, 0.0)

    @property
    def fixed(self) -> bool:
        """Whether the caller fixed the clip's frames (``frame_times`` in its metadata)."""
        return self.shown_times is not None

    @property
    def native_frames(self) -> int:
        """Frames the clip shows as native video: its fixed frames, else one per ``1/fps`` s of
        its span (at least one)."""
        if self.shown_times is not None:
            return len(self.shown_times)
        return max(1, math.ceil(self.duration_s * self.fps))


def clip_info(part: object) -> ClipInfo | None:
    """The clip description of an attachment, or ``None`` when it is not one of our clips."""
    if not isinstance(part, BinaryContent) or not part.media_type.startswith("video/"):
        return None
    meta: dict[str, Any] = dict(part.vendor_metadata or {})
    fixed = meta.get("frame_times")
    return ClipInfo(
        segment_id=part.identifier or "",
        video_id=str(meta.get("video_id", part.identifier or "")),
        start_s=float(meta.get("start_s", 0.0)),
        end_s=float(meta.get("end_s", 0.0)),
        fps=float(meta.get("fps", 0.5)),
        height=int(meta.get("height", 720)),
        audio=bool(meta.get("audio", False)),
        source=str(meta.get("source", "")),
        path=str(meta["path"]) if meta.get("path") else None,
        shown_times=tuple(float(t) for t in fixed) if isinstance(fixed, list | tuple) else None,
        request_max_frames=int(meta["max_frames"]) if meta.get("max_frames") else None,
        width=int(meta["width"]) if meta.get("width") else None,
    )


def user_prompt_items(messages: Iterable[ModelMessage]) -> Iterator[UserContent]:
    """Every item of every user prompt in ``messages``, in order (a prompt given as one string
    is that one item): the text and attachments a request sends the model."""
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                yield from [part.content] if isinstance(part.content, str) else part.content


def latest_user_prompt(messages: Sequence[ModelMessage]) -> UserPromptPart | None:
    """The last user prompt of ``messages`` (the one a model answers), or ``None``."""
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            if isinstance(part, UserPromptPart):
                return part
    return None


def shown_height(info: ClipInfo, configured: int) -> int:
    """The height a clip's frames are sent at: the model's ``configured`` frame height, or the
    clip's own when the caller fixed its frames (an evaluation condition's resolution)."""
    return info.height if info.fixed else configured


def sent_frame_height(messages: Sequence[ModelMessage], configured: int) -> int:
    """The height a frame-based request's frames go at (at most; a smaller source stays
    smaller): ``configured``, or a clip's own where the caller fixed its frames."""
    heights = [
        shown_height(info, configured)
        for item in user_prompt_items(messages)
        if (info := clip_info(item)) is not None
    ]
    return max(heights, default=configured)


def timestamp(seconds: float) -> str:
    """``MM:SS`` (minutes may pass 59), the citation format of the prompts: the one formatter
    (:func:`tools.contracts.roles.format_timestamp`), so a frame's label and a citation of it
    agree."""
    return format_timestamp(max(seconds, 0.0))


def clip_label(info: ClipInfo, *, source_timeline: bool) -> str:
    """The text put before a clip so a model can cite it in the source video's timeline."""
    span = f"{timestamp(info.start_s)}–{timestamp(info.end_s)}"
    if source_timeline:
        return (
            f"Video {info.video_id} (segment {info.segment_id}), shown from {span}; "
            "its timestamps are the video's own."
        )
    return (
        f"Video {info.video_id} (segment {info.segment_id}), {span} of the video; this clip's "
        f"00:00 is {timestamp(info.start_s)} of the video, so add {timestamp(info.start_s)} to "
        "clip times when citing."
    )


@dataclass(frozen=True)
class TimedFrame:
    """One frame of a segment as a JPEG, at ``t_s`` seconds of its source video."""

    video_id: str
    t_s: float
    jpeg: bytes

    def label(self) -> str:
        """How the frame is introduced to the model: ``(video-id @ MM:SS)``."""
        return f"({self.video_id} @ {timestamp(self.t_s)})"


def frame_times(
    clips: Sequence[ClipInfo], fps: float, max_frames: int, min_per_clip: int = 1
) -> list[list[float]]:
    """Per clip, the clip-relative times to sample: each clip at its own rate (what the caller
    asked to show), never above ``fps`` (the model's setting), at least ``min_per_clip``, thinned
    uniformly (over all clips together) when the total would pass ``max_frames``, to at most
    ``max_frames`` — or the smaller cap a clip's ``request_max_frames`` names — (unless the
    clips' ``min_per_clip`` floors alone are more). A clip whose
    frames the caller fixed (:attr:`ClipInfo.shown_times`) keeps exactly those, whatever
    ``fps`` and ``min_per_clip`` say, and the others share what it leaves — unless the fixed
    frames leave no room for the others' floors (or are past ``max_frames`` themselves): then
    every clip is thinned together, a fixed one to an even subset of its own instants.

    The one plan of what a frame-based request carries: the adapters send exactly these frames
    and the budget reserves for exactly these (``agents.recorded``).
    """
    floor = max(min_per_clip, 1)
    fitted = [c.request_max_frames for c in clips if c.request_max_frames]
    if fitted:  # the caller fitted the request to the model's context window
        max_frames = min([max_frames, *fitted]) if max_frames > 0 else min(fitted)
    wanted: list[int] = []
    for clip in clips:
        if clip.shown_times is not None:
            wanted.append(len(clip.shown_times))
            continue
        rate = min(clip.fps, fps) if clip.fps > 0 else fps
        wanted.append(max(floor, math.ceil(clip.duration_s * rate)))
    free = [i for i, clip in enumerate(clips) if not clip.fixed]
    cap = max_frames - sum(n for i, n in enumerate(wanted) if clips[i].fixed)
    if max_frames > 0 and cap < len(free) * floor:
        # The fixed frames alone leave no room: every clip is thinned, the fixed ones to an
        # even subset of their own instants (what the request then shows, and the caller's
        # record of what was shown, are these).
        free = list(range(len(clips)))
        cap = max_frames
    total = sum(wanted[i] for i in free)
    if max_frames > 0 and total > cap:
        for i in free:
            wanted[i] = max(floor, math.floor(wanted[i] * max(cap, 0) / total))
        # Clips raised to the floor can push the total back over: take the excess, a frame at a
        # time, from the clips with the most (never below the floor, which no cap can undo).
        for _ in range(sum(wanted[i] for i in free) - cap):
            most = max(free, key=lambda i: wanted[i])
            if wanted[most] <= floor:
                break
            wanted[most] -= 1
    out: list[list[float]] = []
    for clip, n in zip(clips, wanted, strict=True):
        if clip.shown_times is not None:
            kept = _even_subset(clip.shown_times, n)
            out.append([round(t - clip.start_s, 3) for t in kept])
            continue
        step = clip.duration_s / n if n else 0.0
        out.append([round(i * step, 3) for i in range(n)])
    return out


def _even_subset(times: Sequence[float], n: int) -> Sequence[float]:
    """``n`` of ``times`` spread evenly over them, first included (all of them when ``n`` is
    not fewer)."""
    if n >= len(times):
        return times
    step = len(times) / max(n, 1)
    return [times[min(int(i * step), len(times) - 1)] for i in range(max(n, 1))]


class _Timed(Protocol):
    @property
    def t(self) -> float:
        """Seconds from the clip's start."""
        ...


_T = TypeVar("_T", bound=_Timed)


def nearest_frames(decoded: Sequence[_T], times: Sequence[float]) -> list[_T]:
    """For each clip-relative time, the decoded frame nearest it (none when nothing decoded)."""
    if not decoded:
        return []
    return [min(decoded, key=lambda f: abs(f.t - t)) for t in times]


JPEG_QUALITY = 85  # the frames' JPEG quality, unless a request's byte limit asks for less


def clip_frames(
    part: BinaryContent,
    info: ClipInfo,
    times: Sequence[float],
    max_height: int,
    quality: int = JPEG_QUALITY,
) -> list[TimedFrame]:
    """JPEG frames of a clip at the clip-relative ``times`` (nearest decoded frame)."""
    from PIL import Image

    from tools.offline.vision import decode_clip

    decoded = decode_clip(part.data, max(info.fps, 0.01))
    frames: list[TimedFrame] = []
    for nearest in nearest_frames(decoded, times):
        image = Image.fromarray(nearest.image)
        if image.height > max_height:
            width = max(2, round(image.width * max_height / image.height))
            image = image.resize((width, max_height))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=quality)
        frames.append(TimedFrame(info.video_id, info.start_s + nearest.t, buffer.getvalue()))
    return frames


def encode_mp4(
    pictures: Sequence[Any], rate: Fraction, max_height: int, preset: str | None = None
) -> bytes:
    """An H.264 mp4 (yuv420p, even sides, at most ``max_height`` high, aspect kept) of
    ``pictures`` (RGB arrays, at least one, one size) in order, one per ``1 / rate`` s, at the
    encoder's ``preset`` (None: libx264's own): the one way a provider that takes video as a
    file or a ``video_url`` is sent the frames the plan picked."""
    import av
    import numpy as np
    from PIL import Image

    first = pictures[0]
    height = min(int(first.shape[0]), max_height)
    width = max(2, round(first.shape[1] * height / first.shape[0]) // 2 * 2)
    height = max(2, height // 2 * 2)
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.time_base = 1 / rate
        if preset is not None:
            stream.options = {"preset": preset}
        for index, picture in enumerate(pictures):
            image = Image.fromarray(picture).convert("RGB")
            if image.size != (width, height):
                image = image.resize((width, height))
            rgb = np.asarray(image, dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = index, 1 / rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


@dataclass(frozen=True)
class ProviderResource:
    """Something made on the provider's side that later calls reuse: an uploaded file or a
    context cache. ``key`` is ours (a content key); ``name`` the provider's handle."""

    provider: str
    kind: Literal["upload", "cache"]
    key: str
    name: str
    expires_at: datetime | None = None
    tokens: int = 0


class ResourceLedger(Protocol):
    """Where adapters look up and record provider-side resources."""

    def find(self, provider: str, kind: str, key: str, now: datetime) -> ProviderResource | None:
        """The live (unexpired at ``now``) resource under ``key``, if one was recorded."""

    def record(self, resource: ProviderResource) -> None:
        """Remember a resource just made."""


class MemoryResourceLedger:
    """A ledger that lives as long as the process (tests, one-off calls)."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str, str], ProviderResource] = {}

    def find(self, provider: str, kind: str, key: str, now: datetime) -> ProviderResource | None:
        """The live resource under ``key``."""
        found = self._items.get((provider, kind, key))
        if found is None or (found.expires_at is not None and found.expires_at <= now):
            return None
        return found

    def record(self, resource: ProviderResource) -> None:
        """Remember ``resource``."""
        self._items[(resource.provider, resource.kind, resource.key)] = resource


def planned_clips(
    parts: Sequence[object], fps: float, max_frames: int
) -> dict[int, tuple[ClipInfo, list[float]]]:
    """Each clip attachment of ``parts`` (by ``id``) with its description and the clip-relative
    times :func:`frame_times` plans to show of it: what every frame-based request sends."""
    clips = [(p, info) for p in parts if (info := clip_info(p)) is not None]
    times = frame_times([info for _, info in clips], fps, max_frames)
    return {id(p): (info, t) for (p, info), t in zip(clips, times, strict=True)}


ClipReplacement = Callable[[BinaryContent, ClipInfo, list[float]], list[object]]
"""What a clip attachment is sent as, from the clip, its description and the clip-relative
times planned to show of it (:func:`replace_clips`)."""


def replace_clips(
    parts: Sequence[object], fps: float, max_frames: int, replacement: ClipReplacement
) -> list[object]:
    """``parts`` (a user prompt's items) with every clip attachment replaced by the items
    ``replacement`` makes of it and the times :func:`planned_clips` plans to show of it. Other
    items pass through unchanged."""
    by_part = planned_clips(parts, fps, max_frames)
    out: list[object] = []
    for part in parts:
        found = by_part.get(id(part))
        if found is None:
            out.append(part)
            continue
        assert isinstance(part, BinaryContent)
        out.extend(replacement(part, *found))
    return out


def frames_content(
    parts: Sequence[object],
    fps: float,
    max_height: int,
    max_frames: int,
    quality: int = JPEG_QUALITY,
) -> list[object]:
    """``parts`` (a user prompt's items) with every clip replaced by its timed frames: a label
    text, then per frame ``(video-id @ MM:SS)`` and the JPEG as image content. Other items pass
    through unchanged. For providers that take video as pictures (OpenAI, DashScope, open-weight
    judges); the transcript is already in the prompt text."""

    def as_frames(part: BinaryContent, info: ClipInfo, wanted: list[float]) -> list[object]:
        items: list[object] = [
            clip_label(info, source_timeline=True) + " Frames follow, each labelled."
        ]
        for frame in clip_frames(part, info, wanted, shown_height(info, max_height), quality):
            items.append(frame.label())
            items.append(
                BinaryContent(
                    data=frame.jpeg,
                    media_type="image/jpeg",
                    identifier=f"{info.segment_id}@{frame.t_s:.1f}",
                )
            )
        return items

    return replace_clips(parts, fps, max_frames, as_frames)
