"""OpenAI and OpenAI-compatible adapters: clips as timed frames, through the real ``openai`` SDK.

Two factories, one per API:

* :func:`openai_model` — OpenAI itself, over the Responses API (pydantic-ai's
  ``OpenAIResponsesModel``), with batch passthrough to ``/v1/files`` + ``/v1/batches``.
* :func:`openai_compatible_model` — the open-weight judges (Qwen3-VL, InternVL) behind any
  OpenAI-compatible server such as vLLM or OpenRouter, over Chat Completions (pydantic-ai's
  ``OpenAIChatModel``).

OpenAI's APIs take no video, so every clip attachment becomes its label, then per frame a
``(video-id @ MM:SS)`` text and the JPEG (:func:`tools.providers.base.frames_content`). A vLLM
server takes video for the Qwen-VL families (vLLM's "Supported models": Qwen2-VL, Qwen2.5-VL and
Qwen3-VL take ``T + I + V``; InternVL's video is in parentheses there — some checkpoints only —
so InternVL gets frames): each clip goes as its label, then one ``video_url`` part, an mp4 data
URI of exactly the frames the frame plan picks (:func:`tools.providers.base.frame_times`, the
plan the budget reserves for) at the clip's planned rate, so its timeline is the clip's own.
A clip that fixes its frames (``frame_times``, an evaluation condition's) sends exactly those,
at the clip's own height rather than ``frame_height``.
Text-only roles are sent unchanged. The SDK never retries (the recorded-call wrapper does) and
gives up after ``config.timeout_s``; pydantic-ai turns its errors into the categorised
``pydantic_ai.exceptions`` the recorder understands.

The role's JSON schema is sent natively (``text.format`` / ``response_format`` of type
``json_schema``) with ``strict: true``, rewritten to OpenAI's strict subset ("Structured
Outputs", supported schemas: https://developers.openai.com/api/docs/guides/structured-outputs
#supported-schemas — every property in ``required``, ``additionalProperties: false`` on every
object, no ``default``): pydantic-ai would otherwise send ``strict: false`` for every output type
with a defaulted field (``QA``, ``SufficiencyVerdict``, ``Ranking``), and the schema would only
be a hint. The answer then carries every field, defaults included, which validates the same.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any, Literal, TypedDict, cast

import anyio.to_thread
import numpy as np
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from openai.types import chat
from PIL import Image
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    UserPromptPart,
)
from pydantic_ai.models import (
    Model,
    ModelRequestParameters,
    check_allow_model_requests,
)
from pydantic_ai.models.batch import BatchRequest, EncodedBatchRequest
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.profiles import ModelProfile, merge_profile
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer, OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.providers.vllm import VLLMProvider
from pydantic_ai.settings import ModelSettings

from tools.providers.base import (
    JPEG_QUALITY,
    ClipInfo,
    ModelCall,
    ProviderConfig,
    ResourceLedger,
    RewritingModel,
    TimedFrame,
    clip_frames,
    clip_info,
    clip_label,
    encode_mp4,
    frames_content,
    replace_clips,
    sent_frame_height,
    shown_height,
)
from tools.providers.specs.openai import FAMILIES, OPENAI_MAX_IMAGES, QWEN_VL_MAX_FRAMES

__all__ = [
    "FAMILIES",
    "OPENAI_MAX_IMAGES",
    "OpenAIFramesModel",
    "openai_compatible_model",
    "openai_model",
]

# What an OpenAI-compatible server that does not need a key is sent (vLLM ignores it, the SDK
# refuses to build a client without one).
NO_KEY = "EMPTY"

# Model families a vLLM server takes video for (vLLM "Supported models", multimodal table:
# Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration, Qwen3VL(Moe)For...:
# T + I^E+ + V^E+). InternVLChatModel's video is "(V^E+)": some checkpoints only, so not here.
VIDEO_MODEL_PREFIXES = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl")

# OpenAI's "Images and vision" guide, "Image input requirements"
# (https://developers.openai.com/api/docs/guides/images-vision#image-input-requirements): "Up to
# 500 individual image inputs per request" and "Up to 50 MB total payload size per request".
# The count is the family's ``max_frames`` (so the frame plan, the budget and the prompt hold
# it); the bytes are counted here as they travel, base64 data URLs, and the frames re-encoded
# at a lower JPEG quality (the same frames, so the rate the prompt states holds) until they fit.
# (OPENAI_MAX_IMAGES, 500, is the spec's: tools.providers.specs.openai.)
OPENAI_MAX_IMAGE_BYTES = 50_000_000
LOWER_QUALITIES = (70, 55, 40, 25)

# vLLM's OpenCV loader reads ``num_frames`` frames of a video (32 unless the server's
# --media-io-kwargs says otherwise: VideoMediaIO in vllm/multimodal/video.py), spread over it. A
# request may set its own (ChatCompletionRequest.media_io_kwargs, merged over the server's:
# ``request_media_io_kwargs`` of parse_chat_messages in vllm/entrypoints/chat_utils.py); -1 reads
# every frame. Our mp4 holds exactly the planned frames.
VLLM_READ_EVERY_FRAME = {"video": {"num_frames": -1}}
# A Qwen-VL model then samples what was read again, whatever ``num_frames`` said (vLLM's dynamic
# loader: "num_frames: Not used"; the model's video processor, ``sample_frames`` of transformers'
# Qwen3VLVideoProcessor and Qwen2VLVideoProcessor, with the checkpoints'
# video_preprocessor_config.json): int(frames / the video's fps x ``fps``) frames, ``fps`` 2
# unless the request's ``mm_processor_kwargs`` says otherwise (ChatCompletionRequest
# .mm_processor_kwargs, handed to the HF processor; Qwen3-VL's model card: "video frame sampling
# can be configured via extra_body (e.g., by setting fps)"), never above ``max_frames`` 768 (nor
# above the frames there are). So each request asks for a rate above its fastest clip's, and
# every planned frame is kept; the family's frame cap holds each request (so each clip) to 768.
QWEN_VL_SAMPLING_FPS = 2
# (QWEN_VL_MAX_FRAMES, 768, is the spec's: tools.providers.specs.openai.)
# Qwen2-VL's processor (Qwen2.5-VL's too) also floors the frames it keeps to a multiple of its
# ``temporal_patch_size`` 2 (``sample_frames`` in transformers' video_processing_qwen2_vl.py), so
# a clip of an odd count goes with its last frame twice: the pair the model would make of it
# anyway (an odd count's last frame is repeated to fill its pair), so it costs nothing more.
PAIRED_PREFIXES = ("qwen2-vl", "qwen2.5-vl")

# The role's JSON schema goes in the request (``json_schema``), not in the prompt.
_NATIVE_OUTPUT = ModelProfile(
    default_structured_output_mode="native", supports_json_schema_output=True
)


def _ask_strict(params: ModelRequestParameters) -> ModelRequestParameters:
    """``params`` with its output schema (if any) asked for ``strict: true`` (unless the caller
    said ``strict=False``): what :func:`_strict_schema` then holds the schema to."""
    output = params.output_object
    if output is None or output.strict is not None:
        return params
    return replace(params, output_object=replace(output, strict=True))


def _strict_schema(params: ModelRequestParameters) -> ModelRequestParameters:
    """``params`` with a strict output schema rewritten to OpenAI's strict subset.

    Run after the profile's own transformer (a Qwen profile inlines ``$defs`` but leaves
    optional fields optional): :class:`OpenAIJsonSchemaTransformer` with ``strict=True`` lists
    every property in ``required``, sets ``additionalProperties: false`` and drops ``default`` —
    the rules OpenAI refuses a strict schema for — and is idempotent, so a schema already in
    the subset goes out unchanged.
    """
    output = params.output_object
    if output is None or not output.strict:
        return params
    schema = OpenAIJsonSchemaTransformer(output.json_schema, strict=True).walk()
    return replace(params, output_object=replace(output, json_schema=schema))


class _StrictResponsesModel(OpenAIResponsesModel):
    """The Responses API with the role's schema sent strict (:func:`_strict_schema`)."""

    def customize_request_parameters(
        self, model_request_parameters: ModelRequestParameters
    ) -> ModelRequestParameters:
        """pydantic-ai's customisation, then the strict schema."""
        asked = _ask_strict(model_request_parameters)
        return _strict_schema(super().customize_request_parameters(asked))


def _takes_video(model_name: str) -> bool:
    """Whether a vLLM server takes video for ``model_name`` (:data:`VIDEO_MODEL_PREFIXES`)."""
    return model_name.lower().rsplit("/", 1)[-1].startswith(VIDEO_MODEL_PREFIXES)


class OpenAIFramesModel(RewritingModel):
    """A pydantic-ai OpenAI model that is sent each clip as its timed frames: as pictures, or
    (``video``) as one mp4 of them per clip.

    ``model_id`` is ours (what the price table and the log name); the wrapped model sends
    ``config.model_name``. Frames are decoded off the event loop.
    """

    def __init__(
        self,
        wrapped: Model,
        model_id: str,
        config: ProviderConfig,
        *,
        video: bool = False,
        client: AsyncOpenAI | None = None,
        max_image_bytes: int | None = None,
    ) -> None:
        super().__init__(wrapped)
        self.our_model_id = model_id
        self.config = config
        self.video = video
        self.max_image_bytes = max_image_bytes  # a request's base64 image payload at most
        self._client = client

    async def aclose(self) -> None:
        """Close the SDK client's connections. A run closes its adapters when it ends; an
        unclosed client closes itself when collected, on whatever event loop runs then, and
        fails there ("Event loop is closed") when its own loop is gone."""
        if self._client is not None:
            await self._client.close()

    async def rewrite(self, call: ModelCall) -> tuple[ModelCall, dict[str, Any]]:
        """``call`` with its clips as frames and its settings as sent (:meth:`wire_settings`),
        and what it sends (``playlisteval_sent``)."""
        framed = await self.with_frames(call.messages)
        wire = self.wire_settings(call.settings, framed)
        thinking = call.parameters.thinking
        sent = {
            "model": self.config.model_name,
            "temperature": (wire or {}).get("temperature"),
            "max_output_tokens": (wire or {}).get("max_tokens"),
            "thinking": thinking
            if thinking is not None
            else ((wire or {}).get("thinking") if self._reasons() else None),
            "frame_height": sent_frame_height(call.messages, self.config.frame_height),
            "media": _media_counts(framed),
            **(self._video_reading(framed) if self._sends_video(framed) else {}),
        }
        return ModelCall(framed, wire, call.parameters), {"playlisteval_sent": sent}

    def _video_reading(self, framed: Sequence[ModelMessage]) -> dict[str, Any]:
        """What a request with video parts asks the server to read, and what it reads: each
        video's frames as its model's video processor keeps them at the asked rate."""
        fps = _sampling_fps(framed)
        paired = _pads_pairs(self.config.model_name)
        return {
            "media_io_kwargs": VLLM_READ_EVERY_FRAME,
            "mm_processor_kwargs": {"fps": fps},
            "videos_read": [
                _qwen_vl_frames_read(frames, rate, fps, paired=paired)
                for frames, rate in _videos_sent(framed)
            ],
        }

    def _reasons(self) -> bool:
        return bool(self.wrapped.profile.get("supports_thinking", False))

    def _sends_video(self, framed: Sequence[ModelMessage]) -> bool:
        return self.video and _media_counts(framed)["videos"] > 0

    def wire_settings(
        self, settings: ModelSettings | None, framed: Sequence[ModelMessage] = ()
    ) -> ModelSettings | None:
        """The settings as sent: a reasoning model asked to think gets no sampling parameters
        (OpenAI's reasoning models refuse temperature and top_p while they reason, "Reasoning
        models" guide; pydantic-ai drops them with a warning, we drop them and record it); a
        request with video parts to a vLLM server tells it to read every frame of each
        (:data:`VLLM_READ_EVERY_FRAME`)."""
        if self._sends_video(framed):
            extra: dict[str, Any] = dict(
                cast(dict[str, Any], (settings or {}).get("extra_body") or {})
            )
            extra["media_io_kwargs"] = VLLM_READ_EVERY_FRAME
            extra["mm_processor_kwargs"] = {
                **cast(dict[str, Any], extra.get("mm_processor_kwargs") or {}),
                "fps": _sampling_fps(framed),
            }
            settings = ModelSettings(**{**(settings or {}), "extra_body": extra})
        if settings is None:
            return None
        wire: dict[str, Any] = dict(settings)
        reasoning = self.wrapped.profile.get("openai_supports_reasoning", False)
        if reasoning and wire.get("thinking") not in (None, False):
            for key in ("temperature", "top_p"):
                wire.pop(key, None)
        return wire  # type: ignore[return-value]

    async def batch_encode(self, request: BatchRequest) -> EncodedBatchRequest:
        """The batch line of ``request``, clips as frames, as the wrapped model encodes it."""
        framed = await self.with_frames(request.messages)
        wire = self.wire_settings(request.model_settings, framed)
        return await self.wrapped.batch_encode(
            replace(request, messages=framed, model_settings=wire)
        )

    async def with_frames(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """``messages`` with every clip attachment replaced by its timed frames."""
        if not any(_has_clip(m) for m in messages):
            return list(messages)
        return await anyio.to_thread.run_sync(self._frame_messages, list(messages))

    def _frame_messages(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """``messages`` framed; where the images' payload passes :attr:`max_image_bytes`, the
        same frames again at lower JPEG qualities until it fits, else a refusal naming the
        limit before anything is sent."""
        framed = self._framed(messages, JPEG_QUALITY)
        if self.max_image_bytes is None:
            return framed
        sent = _image_payload(framed)
        for quality in LOWER_QUALITIES:
            if sent <= self.max_image_bytes:
                return framed
            framed = self._framed(messages, quality)
            sent = _image_payload(framed)
        if sent <= self.max_image_bytes:
            return framed
        raise UserError(
            f"{self.our_model_id}: the request's {_media_counts(framed)['images']} frames take "
            f"{sent:,} bytes as sent even at JPEG quality {LOWER_QUALITIES[-1]}, over the "
            f"provider's {self.max_image_bytes:,} per request (OpenAI, \"Image input "
            'requirements"): lower providers.models.<id>.frame_height or max_frames'
        )

    def _framed(self, messages: list[ModelMessage], quality: int) -> list[ModelMessage]:
        out: list[ModelMessage] = []
        for message in messages:
            if not _has_clip(message):
                out.append(message)
                continue
            assert isinstance(message, ModelRequest)
            parts = [self._frame_part(p, quality) for p in message.parts]
            out.append(replace(message, parts=parts))
        return out

    def _frame_part(self, part: Any, quality: int = JPEG_QUALITY) -> Any:
        if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
            return part
        if not any(clip_info(item) is not None for item in part.content):
            return part
        content = list(part.content)
        fps, height, cap = self.config.video_fps, self.config.frame_height, self.config.max_frames
        framed: list[Any] = (
            _videos_content(content, fps, height, cap, pairs=_pads_pairs(self.config.model_name))
            if self.video
            else frames_content(content, fps, height, cap, quality)
        )
        return replace(part, content=framed)


def _binary_items(messages: Sequence[ModelMessage]) -> Iterator[BinaryContent]:
    """The binary items (pictures, videos) of a request's user prompts, in order."""
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
                continue
            yield from (item for item in part.content if isinstance(item, BinaryContent))


def _media_counts(messages: Sequence[ModelMessage]) -> dict[str, int]:
    """How many pictures and videos the framed request carries."""
    items = list(_binary_items(messages))
    return {
        "images": sum(item.media_type.startswith("image/") for item in items),
        "videos": sum(item.media_type.startswith("video/") for item in items),
    }


def _videos_sent(messages: Sequence[ModelMessage]) -> list[tuple[int, float]]:
    """(frames, frames a second) of each mp4 the framed request carries."""
    found: list[tuple[int, float]] = []
    for item in _binary_items(messages):
        if item.media_type.startswith("video/"):
            meta = item.vendor_metadata or {}
            found.append((int(meta.get("frames", 0)), float(meta.get("fps", 0.0))))
    return found


def _sampling_fps(messages: Sequence[ModelMessage]) -> int:
    """The ``mm_processor_kwargs.fps`` that keeps every frame of each video: half as fast again
    as the fastest clip (so ``int(frames / rate x fps)`` is never short of the frames, whatever
    rate the decoder reads from the mp4's time base), at least the processor's own 2."""
    fastest = max((rate for _, rate in _videos_sent(messages)), default=0.0)
    return max(QWEN_VL_SAMPLING_FPS, math.ceil(fastest * 1.5))


def _qwen_vl_frames_read(frames: int, rate: float, fps: float, *, paired: bool = False) -> int:
    """Frames a Qwen-VL video processor keeps of ``frames`` played at ``rate`` when sampling at
    ``fps`` (``sample_frames``: int(frames / rate x fps), at most ``max_frames`` and the frames
    there are; Qwen2-VL's, ``paired``, an even count)."""
    if frames <= 0 or rate <= 0:
        return frames
    kept = min(int(frames / rate * fps), QWEN_VL_MAX_FRAMES, frames)
    return kept - kept % 2 if paired else kept


def _image_payload(messages: Sequence[ModelMessage]) -> int:
    """Bytes the request's pictures take as sent: their base64 data URLs."""
    return sum(
        len(item.data_uri)
        for item in _binary_items(messages)
        if item.media_type.startswith("image/")
    )


def _pads_pairs(model_name: str) -> bool:
    """Whether ``model_name``'s processor drops an odd clip's last frame
    (:data:`PAIRED_PREFIXES`)."""
    return model_name.lower().rsplit("/", 1)[-1].startswith(PAIRED_PREFIXES)


def _videos_content(
    parts: Sequence[object],
    fps: float,
    max_height: int,
    max_frames: int,
    *,
    pairs: bool = False,
) -> list[object]:
    """``parts`` with every clip replaced by its label and an mp4 of its planned frames.

    The frames are :func:`~tools.providers.base.frames_content`'s (the same plan, the same
    pictures); the mp4 plays them at the clip's planned rate, so its 00:00 is the clip's start
    and the label says where that is in the video. With ``pairs``, an odd count's last frame
    goes twice (:data:`PAIRED_PREFIXES`).
    """

    def as_video(part: BinaryContent, info: ClipInfo, wanted: list[float]) -> list[object]:
        frames = clip_frames(part, info, wanted, shown_height(info, max_height))
        label = clip_label(info, source_timeline=False)
        if not frames:  # nothing decodable: the label alone, as the frames path sends it
            return [label]
        rate = _planned_rate(info, len(frames))
        if pairs and len(frames) % 2:
            frames = [*frames, frames[-1]]
        video = BinaryContent(
            data=_frames_mp4(frames, rate),
            media_type="video/mp4",
            identifier=info.segment_id,
            vendor_metadata={"fps": float(rate), "frames": len(frames)},
        )
        return [label, video]

    return replace_clips(parts, fps, max_frames, as_video)


def _planned_rate(info: ClipInfo, frames: int) -> Fraction:
    """Frames a second that spread ``frames`` over the clip as the plan spaces them (a clip
    whose frames the caller fixed: its own rate, the spacing of those frames)."""
    if info.fixed and info.fps > 0:
        return Fraction(info.fps).limit_denominator(1001)
    if info.duration_s <= 0 or frames <= 0:
        return Fraction(1)
    return Fraction(frames / info.duration_s).limit_denominator(1001)


def _frames_mp4(frames: Sequence[TimedFrame], rate: Fraction) -> bytes:
    """An H.264 mp4 of ``frames`` (at least one) in order, one per ``1 / rate`` s, at their
    own size (:func:`tools.providers.base.encode_mp4`)."""
    pictures = [np.asarray(Image.open(io.BytesIO(f.jpeg)).convert("RGB")) for f in frames]
    return encode_mp4(pictures, rate, max_height=int(pictures[0].shape[0]))


def _has_clip(message: ModelMessage) -> bool:
    if not isinstance(message, ModelRequest):
        return False
    return any(
        isinstance(part, UserPromptPart)
        and not isinstance(part.content, str)
        and any(clip_info(item) is not None for item in part.content)
        for part in message.parts
    )


def _client(config: ProviderConfig, api_key: str | None) -> AsyncOpenAI:
    # SDK retries off: the recorded-call wrapper retries, so each attempt is logged and budgeted.
    # Our own HTTP client (the SDK's defaults, without the wrapper the SDK makes for itself,
    # whose __del__ schedules aclose() on whatever loop is running when it is collected and
    # fails there when its own loop is gone): OpenAIFramesModel.aclose closes it.
    return AsyncOpenAI(
        api_key=api_key,
        base_url=config.base_url,
        max_retries=0,
        timeout=config.timeout_s,
        http_client=DefaultAsyncHttpxClient(timeout=config.timeout_s),
    )


def openai_model(
    model_id: str, config: ProviderConfig, resources: ResourceLedger | None = None
) -> Model:
    """OpenAI over the Responses API: clips as frames, the role's schema as ``text.format``.

    ``resources`` is accepted for the common factory signature; OpenAI needs no uploads or
    caches (its prompt caching is automatic).
    """
    del resources
    client = _client(config, config.api_key)
    provider = OpenAIProvider(openai_client=client)
    wrapped = _StrictResponsesModel(config.model_name, provider=provider, profile=_NATIVE_OUTPUT)
    return OpenAIFramesModel(
        wrapped, model_id, config, client=client, max_image_bytes=OPENAI_MAX_IMAGE_BYTES
    )


class _VideoURL(TypedDict):
    url: str


class _VideoURLPart(TypedDict):
    """vLLM's video content part (its "Multimodal Inputs" guide, OpenAI-compatible server:
    ``{"type": "video_url", "video_url": {"url": ...}}``, a data URI allowed); the openai SDK
    has no type for it."""

    type: Literal["video_url"]
    video_url: _VideoURL


class _CostReportingChatModel(OpenAIChatModel):
    """Chat Completions that keeps a cost figure the endpoint reports (OpenRouter's
    ``usage.cost``, in USD) as ``provider_details['cost_usd']``; pydantic-ai keeps it only for
    its own OpenRouter model. The role's schema goes strict (:func:`_strict_schema`); an mp4
    goes as a ``video_url`` part, which pydantic-ai's Chat model refuses (Chat Completions has
    none) but vLLM serves."""

    _unsupported_file_inputs = frozenset()

    async def _map_binary_content_item(
        self, item: BinaryContent
    ) -> chat.ChatCompletionContentPartParam:
        if item.is_video:
            part = _VideoURLPart(type="video_url", video_url={"url": item.data_uri})
            return cast(chat.ChatCompletionContentPartParam, part)
        return await super()._map_binary_content_item(item)

    def customize_request_parameters(
        self, model_request_parameters: ModelRequestParameters
    ) -> ModelRequestParameters:
        """pydantic-ai's customisation, then the strict schema."""
        asked = _ask_strict(model_request_parameters)
        return _strict_schema(super().customize_request_parameters(asked))

    def _process_provider_details(self, response: chat.ChatCompletion) -> dict[str, Any] | None:
        details = dict(super()._process_provider_details(response) or {})
        cost = (response.usage.model_extra or {}).get("cost") if response.usage else None
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            details["cost_usd"] = float(cost)
        return details or None


def _compatible_profile(model_name: str) -> Any:
    """pydantic-ai's OpenAI defaults, then what vLLM serves for the model's family (a JSON
    schema by guided decoding, which the model only sees if it is in the instructions too),
    then native structured output."""
    family = VLLMProvider.model_profile(model_name)
    # ``max_tokens``, not ``max_completion_tokens``: every compatible server takes the former.
    wire = OpenAIModelProfile(openai_chat_supports_max_completion_tokens=False)

    def profile(default: ModelProfile) -> ModelProfile:
        return merge_profile(default, family, wire, _NATIVE_OUTPUT)

    return profile


def openai_compatible_model(
    model_id: str, config: ProviderConfig, resources: ResourceLedger | None = None
) -> Model:
    """An open-weight judge behind an OpenAI-compatible server (vLLM, OpenRouter, …) over Chat
    Completions: clips as one ``video_url`` mp4 each for the families vLLM takes video for
    (:func:`_takes_video`), else as ``image_url`` frames; the role's schema as
    ``response_format``.

    A server with no key (local vLLM) is sent ``EMPTY``. ``resources`` is unused (no uploads).
    """
    del resources
    client = _client(config, config.api_key or NO_KEY)
    provider = OpenAIProvider(openai_client=client)
    wrapped = _CostReportingChatModel(
        config.model_name, provider=provider, profile=_compatible_profile(config.model_name)
    )
    return OpenAIFramesModel(
        wrapped, model_id, config, video=_takes_video(config.model_name), client=client
    )


async def openai_list_models(config: ProviderConfig) -> list[str]:
    """The ids the server at ``config.base_url`` serves: ``AsyncOpenAI.models.list()``
    (``GET /models``: OpenAI's, or a vLLM server's ``--served-model-name`` ids); a server with
    no key is sent ``EMPTY``, as the model calls are."""
    check_allow_model_requests()
    async with _client(config, config.api_key or NO_KEY) as client:
        return [model.id async for model in client.models.list()]


async def openai_served_windows(config: ProviderConfig) -> dict[str, int]:
    """The context window of each model the server at ``config.base_url`` serves: vLLM's
    model cards on ``GET /v1/models`` carry ``max_model_len`` (``ModelCard`` in
    vllm/entrypoints/openai/protocol.py: "max_model_len: Optional[int]"); OpenAI's carry none."""
    check_allow_model_requests()
    async with _client(config, config.api_key or NO_KEY) as client:
        found: dict[str, int] = {}
        async for model in client.models.list():
            window = (model.model_extra or {}).get("max_model_len")
            if isinstance(window, int) and not isinstance(window, bool) and window > 0:
                found[model.id] = window
        return found
