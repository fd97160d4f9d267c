"""The DashScope (Qwen) adapter: a pydantic-ai model that speaks DashScope's native multimodal
API through the ``dashscope`` SDK (``AioMultiModalConversation``).

Why the native route and not DashScope's OpenAI-compatible one: the native API takes a video as a
list of frames at a declared rate (``{"video": [frame, …], "fps": 0.5}``), so Qwen applies its
temporal handling (time positions between frames) to what is really a video; the compatible API
only has an image list, which Qwen reads as unrelated pictures. Qwen takes no audio here, so the
narration reaches it as the transcript already in the prompt text.

How a call is made:

* Each clip attachment is sampled with :func:`tools.providers.base.frame_times` /
  :func:`~tools.providers.base.clip_frames` (``config.video_fps``, ``frame_height``,
  ``max_frames``; at least :data:`MIN_VIDEO_FRAMES` per clip, the API's minimum for a frame list),
  and never more than :data:`MAX_BASE64_IMAGES` base64 images in one request, frames and pictures
  together: a lower ``max_frames`` is what is planned (the family's ``max_frames``, so the budget
  reserves the same frames), and a request that would still carry more is refused here.
  A text item goes before each video: the clip's :func:`~tools.providers.base.clip_label` and the
  exact source-video time of every frame, so the model (and our fake server) know what each
  unlabelled frame shows. The declared ``fps`` is the rate actually sampled. A clip that fixes
  its frames (an evaluation condition's ``frame_times``) sends exactly those, at its own height;
  with fewer than a frame list takes, each goes as a picture after its ``(video-id @ MM:SS)``.
* Frames travel as base64 ``data:image/jpeg`` URIs. The SDK passes those through untouched; an
  ``http`` URL would need a server we do not have, and a ``file://`` path makes the SDK upload each
  frame to OSS first (a ``GET /uploads?action=getPolicy`` and a form POST per frame), a round trip
  per frame we avoid.
* Why the 250-frame cap stays, though URLs and file paths are not held to it (issue 15): the
  documentation within reach does not say how many URL or ``oss://`` frames a frame list may
  hold, so a higher cap would be a guess the service could refuse mid-campaign. And the SDK's own
  upload of ``file://`` frames (dashscope 2.0.2, ``utils/oss_utils.py``: ``check_and_upload``
  calls ``check_and_upload_local`` without the call's ``base_address``) asks for its upload
  policy at the module-wide ``dashscope.base_http_api_url``, not at ``config.base_url``, and
  uploads with blocking ``requests`` calls, one form POST per frame, from inside the async call;
  DashScope's temporary storage takes 100 uploads a second and keeps them 48 h (QwenCloud's
  vision guide, QwenCloud/qwencloud-ai skills/vision/qwencloud-vision/references/api-guide.md).
  So the cap thins two segments to 250 frames in all (0.069 fps over 2 × 30 minutes, 0.10 over
  2 × 20), and the prompt states the rate planned. The documented way to more frames is a
  video *file* (``{"video": "oss://…", "fps": 0.5}``, up to 2 h for the Qwen3.5/3.6 models and
  1 h for qwen3-vl-plus, 100 MB a temporary upload, same guide), which changes what the frame
  plan and the prompt's frame times describe: not done here.
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
used-up quota, 429 ``Throttling.AllocationQuota``, is a
:class:`~pydantic_ai.exceptions.ModelQuotaExceededError`, not a rate limit; an unknown model id
a :class:`~pydantic_ai.exceptions.ModelNotFoundError`); a content-moderation refusal
(``DataInspectionFailed``) becomes a response with ``finish_reason='content_filter'``, which the
agent raises as :class:`~pydantic_ai.exceptions.ContentFilterError`. Transport failures are
``aiohttp`` exceptions and become :class:`~pydantic_ai.exceptions.ModelTimeoutError` /
:class:`~pydantic_ai.exceptions.ModelConnectionError`; a body that is not JSON becomes
:class:`~pydantic_ai.exceptions.ModelAPIError`.

Retries: the SDK has no retry setting. Its only resend is one retry when ``aiohttp`` reports a
*connection* error before any response (meant for a dropped pooled connection); with a fresh
session per call that fires only when a connection fails outright, and a timed-out request is
never resent. Every other retry belongs to the recorded-call wrapper.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
import anyio.to_thread
from dashscope import AioMultiModalConversation, Models
from dashscope.api_entities.aio_session import get_ssl_context
from dashscope.common.error import AuthenticationError as DashScopeAuthenticationError
from dashscope.common.error import DashScopeException
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
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.profiles.qwen import qwen_model_profile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from tools.providers.base import (
    ClipInfo,
    ProviderConfig,
    ResourceLedger,
    TimedFrame,
    clip_frames,
    clip_info,
    clip_label,
    frame_times,
    sent_frame_height,
    shown_height,
    timestamp,
)
from tools.providers.family import ProviderFamily

__all__ = [
    "DEFAULT_BASE_URL",
    "MAX_BASE64_IMAGES",
    "MIN_VIDEO_FRAMES",
    "DashScopeModel",
    "dashscope_model",
    "frame_time_text",
    "video_label",
]

SYSTEM = "dashscope"
DEFAULT_BASE_URL = "https://dashscope-intl.aliyuncs.com/api/v1"
MIN_VIDEO_FRAMES = 4  # the API refuses a frame list shorter than this
# Alibaba Cloud Model Studio, "Image and video understanding"
# (https://www.alibabacloud.com/help/en/model-studio/vision), "Image limits": one request takes
# at most 250 images passed as Base64 (public URLs and local file paths allow more). Every frame
# of a frame list counts as one image, and ours all travel as Base64 data URIs.
MAX_BASE64_IMAGES = 250
# The API's accepted range for a frame list's declared rate.
MIN_FPS = 0.1
MAX_FPS = 10.0
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


def dashscope_model(
    model_id: str, config: ProviderConfig, resources: ResourceLedger | None = None
) -> Model:
    """Our model ``model_id`` served by DashScope as ``config.model_name``.

    ``resources`` is accepted for the common factory signature; frames go inline, so nothing is
    made on DashScope's side that a later call could reuse.
    """
    del resources
    return DashScopeModel(model_id, config)


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


def _profile(model_name: str) -> ModelProfile:
    base = ModelProfile(**(qwen_model_profile(model_name) or ModelProfile()))
    base.update(
        ModelProfile(
            default_structured_output_mode="prompted",
            supports_json_object_output=True,
            # Native (schema) output is not offered on this route for the multimodal models.
            supports_json_schema_output=False,
            supports_tools=False,
            supports_image_input=True,
            supports_video_input=True,
            supports_audio_file_input=False,
            supports_document_input=False,
        )
    )
    return base


@dataclass(frozen=True)
class _Clip:
    info: ClipInfo
    frames: list[TimedFrame]
    fps: float
    pictures: bool = False  # sent as labelled pictures, not as a frame list


def _clip_content(clip: _Clip) -> list[dict[str, Any]]:
    """A clip on the wire: its label and frame list, or (``pictures``) its label and each frame
    as a picture after its ``(video-id @ MM:SS)``."""
    if clip.pictures:
        label = clip_label(clip.info, source_timeline=True) + " Frames follow, each labelled."
        out: list[dict[str, Any]] = [{"text": label}]
        for frame in clip.frames:
            out.append({"text": frame.label()})
            out.append({"image": _data_uri(frame.jpeg, "image/jpeg")})
        return out
    times = [f.t_s for f in clip.frames]
    return [
        {"text": video_label(clip.info, times, clip.fps)},
        {"video": [_data_uri(f.jpeg, "image/jpeg") for f in clip.frames], "fps": clip.fps},
    ]


class DashScopeModel(Model):
    """A Qwen model on DashScope's native multimodal generation API."""

    def __init__(self, model_id: str, config: ProviderConfig) -> None:
        """``model_id`` is ours (priced by the price table); ``config.model_name`` is sent."""
        super().__init__(profile=_profile(config.model_name))
        self.our_model_id = model_id
        self.config = config

    @property
    def model_name(self) -> str:
        """The provider's id of the model."""
        return self.config.model_name

    @property
    def system(self) -> str:
        """The provider, for telemetry: ``dashscope``."""
        return SYSTEM

    @property
    def base_url(self) -> str:
        """The API root every call goes to (``…/api/v1``)."""
        return self.config.base_url or DEFAULT_BASE_URL

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """One non-streamed generation call."""
        check_allow_model_requests()
        model_settings, params = self.prepare_request(model_settings, model_request_parameters)
        settings: Mapping[str, Any] = model_settings or {}
        wire_messages = await anyio.to_thread.run_sync(self._map_messages, messages, params)
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
                "media": _media_of(wire_messages),
            },
        }
        return processed

    # -- the request ---------------------------------------------------------------------------

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
        timeout = settings.get("timeout")
        timeout_s = float(timeout) if isinstance(timeout, int | float) else self.config.timeout_s
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
    ) -> list[dict[str, Any]]:
        system: list[str] = [
            part.content for part in self._get_instruction_parts(messages, params) or []
        ]
        turns: list[dict[str, Any]] = []
        # Pictures sent as they are take their share of the request's Base64 images first; the
        # clips' frames are planned within what is left.
        budget = self.frame_budget - sum(_inline_images(m) for m in messages)
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, SystemPromptPart):
                        system.append(part.content)
                    elif isinstance(part, UserPromptPart):
                        content, framed = self._user_content(part, budget)
                        budget -= framed
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
            raise UserError(
                f"this DashScope request would carry {sent} base64 images (frames and pictures); "
                f"DashScope takes at most {MAX_BASE64_IMAGES} per request: send fewer clips or "
                f"pictures (each clip is at least {MIN_VIDEO_FRAMES} frames)"
            )
        return turns

    @property
    def frame_budget(self) -> int:
        """The most frames one request plans: ``config.max_frames``, never above
        :data:`MAX_BASE64_IMAGES` (the family's ``max_frames``, which the reservation plans by)."""
        wanted = self.config.max_frames
        return min(wanted, MAX_BASE64_IMAGES) if wanted > 0 else MAX_BASE64_IMAGES

    def _user_content(self, part: UserPromptPart, budget: int) -> tuple[list[dict[str, Any]], int]:
        """The wire content of a user prompt, and how many clip frames it carries."""
        if isinstance(part.content, str):
            return [{"text": part.content}], 0
        items = list(part.content)
        clips = self._clips(items, budget)
        content: list[dict[str, Any]] = []
        for item in items:
            clip = clips.get(id(item))
            if clip is not None:
                content.extend(_clip_content(clip))
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
        return content, sum(len(c.frames) for c in clips.values())

    def _clips(self, items: Sequence[object], budget: int | None = None) -> dict[int, _Clip]:
        """The clips among ``items`` as the frames sent, planned within ``budget`` frames
        (default :attr:`frame_budget`)."""
        found = [(item, info) for item in items if (info := clip_info(item)) is not None]
        if not found:
            return {}
        if budget is None:
            budget = self.frame_budget
        # At least one frame list's worth, so an over-full request is refused with the real
        # count (in _map_messages) rather than planned with no cap at all (frame_times: <= 0).
        wanted = frame_times(
            [info for _, info in found],
            self.config.video_fps,
            max(budget, MIN_VIDEO_FRAMES),
            MIN_VIDEO_FRAMES,
        )
        out: dict[int, _Clip] = {}
        for (item, info), times in zip(found, wanted, strict=True):
            assert isinstance(item, BinaryContent)
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
            fps = min(max(round(rate, 3), MIN_FPS), MAX_FPS)
            out[id(item)] = _Clip(info, frames, fps)
        return out

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
    (https://www.alibabacloud.com/help/en/model-studio/error-code): 429
    ``Throttling.AllocationQuota`` "Allocated quota exceeded, please increase your quota limit."
    (also "Free allocated quota exceeded."), 400 ``Arrearage``, 429 ``PrepaidBillOverdue`` /
    ``PostpaidBillOverdue``: no wait helps, so a quota error, which the recorded-call wrapper
    does not retry; 429 ``Throttling`` / ``Throttling.RateQuota`` / ``LimitRequests``: a rate
    limit, retried after a wait; 404 ``ModelNotFound``, and the 400 ``InvalidParameter`` "Model
    not exist." the generation API answers for an unknown id: a model that is not there.
    """
    if code in _QUOTA_CODES or code.startswith(("Throttling.AllocationQuota", "AllocationQuota")):
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


FAMILY = ProviderFamily(
    name="dashscope",
    factory=dashscope_model,
    about="DashScope (Qwen, native multimodal API).",
    key_env="DASHSCOPE_API_KEY",
    token_rule="qwen",
    prefixes=("qwen-", "qwen3.", "qvq", "qwen-vl"),
    min_frames_per_clip=MIN_VIDEO_FRAMES,
    max_frames=MAX_BASE64_IMAGES,
    base_url=DEFAULT_BASE_URL,
    rpm=600,
    notes={"base_url": "Endpoint (default: the international region; a proxy or a fake)."},
    list_models=dashscope_list_models,
)


def _media_of(wire_messages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many pictures and frames the request's messages carry."""
    counts = {"images": 0, "frames": 0}
    for message in wire_messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for item in content:
            if not isinstance(item, Mapping):
                continue
            if "image" in item:
                counts["images"] += 1
            if isinstance(item.get("video"), list):
                counts["frames"] += len(item["video"])
    return counts
