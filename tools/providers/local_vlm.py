"""Open-weight judges run in this process with transformers (Qwen3-VL, InternVL3.5 on a GPU box).

:func:`transformers_model` gives a pydantic-ai :class:`~pydantic_ai.models.Model` that answers a
role call with a local vision-language model: the prompt text plus each clip as labelled, timed
frames (:func:`tools.providers.base.frames_content`), put through the model's own chat template
by its processor, then greedy generation. The weights are loaded from ``config.local_path``
(never downloaded) on the first request, once per process whatever the number of model ids that
point at them, and generation runs in a worker thread so the event loop keeps serving other
calls. A local model has no JSON mode, so structured output is *prompted*: pydantic-ai writes the
role's schema into the instructions and validates the text that comes back; output that does not
parse surfaces as pydantic-ai's :class:`~pydantic_ai.exceptions.UnexpectedModelBehavior`.
"""

from __future__ import annotations

import importlib
import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from pydantic_ai.exceptions import ModelTimeoutError, UserError
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.profiles import ModelProfile, merge_profile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from store.errors import ConfigError
from tools.providers.base import (
    PICTURES_PROMPTED_PROFILE,
    ConfiguredModel,
    ModelCall,
    ProviderConfig,
    ResourceLedger,
    frames_content,
)
from tools.providers.specs.local_vlm import FAMILY
from tools.runtime.devices import resolve_device

__all__ = ["FAMILY", "LocalVLMModel", "transformers_model"]

DEFAULT_MAX_NEW_TOKENS = 2048
_THINK_END = "</think>"

# What the chat template and the processor can take: text and pictures (clips become frames
# before they reach the template). No tools: a role call is one structured answer, and no JSON
# mode either.
LOCAL_VLM_PROFILE = merge_profile(
    PICTURES_PROMPTED_PROFILE, ModelProfile(supports_json_object_output=False)
)


@dataclass
class _Loaded:
    """A processor and model in memory; ``lock`` lets one generation run on them at a time."""

    processor: Any
    model: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


_LOADED: dict[tuple[str, str], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _image_only_processor(path: str) -> Any:
    """The model's processor class without its video half.

    Qwen3-VL's and InternVL's processors carry a video processor that needs torchvision even
    when no video is ever sent; we only send frames as images, so where torchvision is missing
    the same processor is built from its image processor and tokenizer alone.
    """
    transformers: Any = importlib.import_module("transformers")
    processing_auto: Any = importlib.import_module("transformers.models.auto.processing_auto")
    config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    full = processing_auto.PROCESSOR_MAPPING[type(config)]
    attributes = [name for name in full.attributes if name != "video_processor"]
    image_only: Any = type(full.__name__, (full,), {"attributes": attributes})
    return image_only.from_pretrained(path, local_files_only=True)


def _load_processor(path: str) -> Any:
    transformers: Any = importlib.import_module("transformers")
    try:
        return transformers.AutoProcessor.from_pretrained(path, local_files_only=True)
    except ImportError as exc:
        if "torchvision" not in str(exc).lower():
            raise
        return _image_only_processor(path)


def _load_model(path: str, device: str) -> Any:
    """The weights under ``path`` on ``device``, already resolved (``cpu`` or ``cuda:N``)."""
    transformers: Any = importlib.import_module("transformers")
    model = transformers.AutoModelForImageTextToText.from_pretrained(
        # The CPU is where from_pretrained puts weights anyway (no accelerate needed for it).
        path,
        dtype="auto",
        device_map=None if device == "cpu" else device,
        local_files_only=True,
    )
    return model.eval()


def _load(path: str, device: str) -> _Loaded:
    """The processor and model under ``path``, loaded on first use and then shared."""
    with _LOAD_LOCK:
        found = _LOADED.get((path, device))
        if found is None:
            try:
                found = _Loaded(_load_processor(path), _load_model(path, device))
            except (OSError, ValueError, ImportError, KeyError) as exc:
                raise ConfigError(
                    f"cannot load the local model {path!r}: {exc}; local_path must be a folder "
                    "holding the weights, processor and chat template (nothing is downloaded)"
                ) from exc
            _LOADED[(path, device)] = found
    return found


def _text_item(text: str) -> dict[str, Any]:
    # Chat templates join a message's items with nothing between them.
    return {"type": "text", "text": text if text.endswith(("\n", " ")) else text + "\n"}


def _user_items(content: str | Sequence[object], config: ProviderConfig) -> list[dict[str, Any]]:
    """A user prompt as chat-template items: text, and each picture (or clip frame) as an image."""
    from PIL import Image

    if isinstance(content, str):
        return [_text_item(content)]
    items: list[dict[str, Any]] = []
    for part in frames_content(content, config.video_fps, config.frame_height, config.max_frames):
        if isinstance(part, str):
            items.append(_text_item(part))
        elif isinstance(part, BinaryContent) and part.is_image:
            image = Image.open(io.BytesIO(part.data)).convert("RGB")
            items.append({"type": "image", "image": image})
        elif isinstance(part, CachePoint):
            continue
        else:
            raise UserError(
                f"the local model cannot take {type(part).__name__} "
                f"({getattr(part, 'media_type', '?')}); send text, images or our video clips"
            )
    return items


@dataclass(frozen=True)
class _Generated:
    text: str
    input_tokens: int
    output_tokens: int
    image_tokens: int
    images: int
    hit_max_tokens: bool
    timed_out: bool


def _generate(
    loaded: _Loaded, chat: list[dict[str, Any]], max_new_tokens: int, max_time_s: float
) -> _Generated:
    """Tokenise ``chat`` with the processor's template and decode greedily (blocking)."""
    import torch

    processor, model = loaded.processor, loaded.model
    # One call at a time per model: a fast tokenizer is not safe to share between threads, and
    # two generations on one GPU would only compete for its memory.
    with loaded.lock, torch.inference_mode():
        inputs = processor.apply_chat_template(
            chat, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        )
        inputs = inputs.to(model.device, dtype=model.dtype)
        input_ids = inputs["input_ids"]
        prompt_len = int(input_ids.shape[1])
        generated = model.generate(
            **inputs, max_new_tokens=max_new_tokens, do_sample=False, max_time=max_time_s
        )
        text = processor.decode(generated[0, prompt_len:], skip_special_tokens=True)
    new_tokens = generated[0, prompt_len:]
    stop_ids = _stop_token_ids(model)
    ended = bool(len(new_tokens)) and int(new_tokens[-1]) in stop_ids
    image_token_id = getattr(processor, "image_token_id", None)
    if image_token_id is None:
        image_token_id = getattr(model.config, "image_token_id", None)
    image_tokens = int((input_ids == image_token_id).sum()) if image_token_id is not None else 0
    grid = inputs.get("image_grid_thw")
    images = sum(1 for m in chat for item in m["content"] if item["type"] == "image")
    return _Generated(
        text=text,
        input_tokens=prompt_len,
        output_tokens=len(new_tokens),
        image_tokens=image_tokens,
        images=int(grid.shape[0]) if grid is not None else images,
        hit_max_tokens=not ended and len(new_tokens) >= max_new_tokens,
        timed_out=not ended and len(new_tokens) < max_new_tokens,
    )


def _stop_token_ids(model: Any) -> set[int]:
    """The tokens ``generate`` stops on: the generation config's end-of-sequence ids."""
    value = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(value, int):
        return {value}
    return {int(v) for v in value or ()}


def _response_parts(text: str) -> list[ModelResponsePart]:
    # Thinking variants open ``<think>`` in the template and close it in the output.
    if _THINK_END in text:
        thinking, _, answer = text.partition(_THINK_END)
        thinking = thinking.replace("<think>", "").strip()
        return [ThinkingPart(content=thinking), TextPart(content=answer.strip())]
    return [TextPart(content=text.strip())]


class LocalVLMModel(ConfiguredModel):
    """A vision-language model run here with transformers, as a pydantic-ai model."""

    def __init__(
        self,
        model_id: str,
        config: ProviderConfig,
        *,
        settings: ModelSettings | None = None,
        profile: ModelProfile | None = None,
    ) -> None:
        """Describe the model and pick its device now (``config.device``: ``auto`` is a CUDA
        GPU when present; a GPU asked for and absent is a ConfigError before any call); nothing
        is loaded until the first request."""
        super().__init__(model_id, config, profile or LOCAL_VLM_PROFILE, settings)
        self.device = resolve_device(config.device, f"providers.models.{model_id!r}.device").device

    @property
    def system(self) -> str:
        """Where the model runs."""
        return "transformers"

    @property
    def path(self) -> str:
        """What ``from_pretrained`` is given: the local folder, else the model name (offline)."""
        return self.config.local_path or self.config.model_name

    def chat(
        self, messages: Sequence[ModelMessage], model_request_parameters: ModelRequestParameters
    ) -> list[dict[str, Any]]:
        """The conversation as chat-template messages (instructions first, as the system turn)."""
        chat: list[dict[str, Any]] = []
        instructions = self._get_instruction_parts(list(messages), model_request_parameters)
        if instructions:
            chat.append(
                {"role": "system", "content": [_text_item(p.content) for p in instructions]}
            )
        for message in messages:
            if isinstance(message, ModelResponse):
                text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
                chat.append({"role": "assistant", "content": [_text_item(text)]})
                continue
            assert isinstance(message, ModelRequest)
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    chat.insert(0, {"role": "system", "content": [_text_item(part.content)]})
                elif isinstance(part, UserPromptPart):
                    chat.append({"role": "user", "content": _user_items(part.content, self.config)})
                elif isinstance(part, ToolReturnPart):
                    text = part.model_response_str()
                    chat.append({"role": "user", "content": [_text_item(text)]})
                elif isinstance(part, RetryFeedbackPart | RetryPromptPart):
                    text = part.model_response()
                    chat.append({"role": "user", "content": [_text_item(text)]})
        return chat

    async def respond(self, call: ModelCall) -> ModelResponse:
        """Generate one answer to the call's messages (greedy, up to the settings'
        ``max_tokens``)."""
        max_new_tokens = int((call.settings or {}).get("max_tokens", DEFAULT_MAX_NEW_TOKENS))
        # Decoding clips into frames is CPU work too: off the event loop with generation.
        chat = await anyio.to_thread.run_sync(self.chat, call.messages, call.parameters)
        loaded = await anyio.to_thread.run_sync(_load, self.path, self.device)
        out = await anyio.to_thread.run_sync(
            _generate, loaded, chat, max_new_tokens, self.config.timeout_s
        )
        if out.timed_out:
            raise ModelTimeoutError(
                self.model_name,
                f"generation stopped after {self.config.timeout_s:g}s (timeout_s) with "
                f"{out.output_tokens} of at most {max_new_tokens} tokens",
            )
        details = {"text_prompt_tokens": out.input_tokens - out.image_tokens}
        if out.image_tokens:
            details["image_prompt_tokens"] = out.image_tokens
        return ModelResponse(
            parts=_response_parts(out.text),
            usage=RequestUsage(
                input_tokens=out.input_tokens, output_tokens=out.output_tokens, details=details
            ),
            model_name=self.model_name,
            provider_name="transformers",
            provider_details={"images": out.images, "local_path": self.path},
            finish_reason="length" if out.hit_max_tokens else "stop",
        )


def transformers_model(
    model_id: str, config: ProviderConfig, resources: ResourceLedger | None = None
) -> Model:
    """A pydantic-ai model for ``model_id`` run locally from ``config.local_path``.

    ``resources`` is accepted like every adapter's; a local model makes nothing to reuse.
    """
    del resources
    return LocalVLMModel(model_id, config)
