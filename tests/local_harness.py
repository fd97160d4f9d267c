"""The providers with no network edge, as provider-contract rows: the offline provider and a
tiny, randomly initialised Qwen3-VL run by the ``transformers`` adapter.

Each harness gives the contract what a live provider's fake gives it — a model built by our
adapter, the requests that reached the model and provider-neutral readings of them — with the
model's own boundary standing in for the wire: a wrapper sees each request as pydantic-ai hands
it over (the offline model reads those messages; the transformers adapter turns them into the
chat its processor tokenises, which is what ``media`` and ``prompt_text`` read).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings

from policies.ratelimits import Traffic
from store.errors import MediaError
from tests.tiny_models import save_tiny_qwen3_vl
from tools.providers import local_vlm, offline
from tools.providers.base import CallWrapper, ModelCall, ProviderConfig, clip_info
from tools.providers.local_vlm import LocalVLMModel, transformers_model

__all__ = [
    "FRAME_HEIGHT",
    "MAX_FRAMES",
    "LocalHarness",
    "LocalRequest",
    "ProviderHarness",
    "offline_harness",
    "transformers_harness",
]

FRAME_HEIGHT = 48  # the tiny model's processor takes at most 64x64 pixels a picture
MAX_FRAMES = 7  # below the demo clips' 9 + 12 frames at 0.5 fps: the plan must thin them
GENERATION_FAILURE = "CUDA out of memory while generating (the contract's injected failure)"
DECODE_FAILURE = "the clip's mp4 cannot be decoded (the contract's injected failure)"


class ProviderHarness(Protocol):
    """What the contract reads from any provider's harness, live fake or local."""

    name: str

    def model(self, model_id: str, **config: Any) -> Any:
        """Our adapter's model for ``model_id``."""

    def model_requests(self) -> Sequence[Any]:
        """The model requests made, in order."""

    def prompt_text(self, request: Any) -> str:
        """All text the request carries."""

    def media(self, request: Any) -> list[dict[str, Any]]:
        """Each visual item of the request, as the model takes it."""

    def output_schema(self, request: Any) -> dict[str, Any] | None:
        """The JSON schema the request asks the output to follow."""

    def last_usage(self) -> dict[str, int]:
        """The usage the model reported in its last answer."""


@dataclass(frozen=True)
class LocalRequest:
    """One request as it reached the model: pydantic-ai's messages, settings and parameters,
    and the answer the model gave (``None`` when it raised)."""

    messages: list[ModelMessage]
    settings: ModelSettings | None
    params: ModelRequestParameters
    response: ModelResponse | None


class _SeesRequests(CallWrapper):
    """Keeps each request the wrapped model is handed, and its answer."""

    def __init__(self, wrapped: Model, seen: list[LocalRequest]) -> None:
        super().__init__(wrapped)
        self.seen = seen

    async def answer(self, call: ModelCall) -> ModelResponse:
        """Answer as the wrapped model, noting the request and the answer."""
        sent = LocalRequest(list(call.messages), call.settings, call.parameters, None)
        self.seen.append(sent)
        response = await super().answer(call)
        self.seen[self.seen.index(sent)] = replace(sent, response=response)
        return response


class LocalHarness:
    """A provider that runs in this process: no server, so nothing fails on a wire.

    ``offline_recorder``: a curation run makes its recorder offline for it (calls are priced
    as the model id it stands in for would be, from what the call carries). ``writes_json``:
    whether its answer is the role's JSON (a random tiny model writes garbage).
    """

    name = ""
    offline_recorder = False
    writes_json = True

    def __init__(self) -> None:
        self.seen: list[LocalRequest] = []

    def model(self, model_id: str, **config: Any) -> Model:
        """Our adapter's model for ``model_id``, seen by the harness."""
        return _SeesRequests(self._build(model_id, config), self.seen)

    def _build(self, model_id: str, config: dict[str, Any]) -> Model:
        raise NotImplementedError

    def traffic(self, base: Traffic) -> Traffic:
        """How a run sends this provider's calls (``base``: the contract's retries)."""
        return base

    def fail_inside(self, monkeypatch: pytest.MonkeyPatch) -> str:
        """Make the next calls fail inside the model; the failure's message."""
        raise NotImplementedError

    def model_requests(self) -> list[LocalRequest]:
        """The requests the model was handed, in order."""
        return list(self.seen)

    def prompt_text(self, request: LocalRequest) -> str:
        """Every text item of the user prompt (the role prompt: context, transcripts, schema
        notes)."""
        texts: list[str] = []
        for part in _user_parts(request.messages):
            items = [part.content] if isinstance(part.content, str) else part.content
            texts += [item for item in items if isinstance(item, str)]
        return "\n".join(texts)

    def media(self, request: LocalRequest) -> list[dict[str, Any]]:
        """The clips as the model takes them."""
        raise NotImplementedError

    def output_schema(self, request: LocalRequest) -> dict[str, Any] | None:
        """The output tool's parameters, else the output object's schema."""
        tools = request.params.output_tools
        if tools:
            return tools[0].parameters_json_schema
        found = request.params.output_object
        return None if found is None else found.json_schema

    def last_usage(self) -> dict[str, int]:
        """The usage of the last answer: input and output tokens, images where counted."""
        response = next(r.response for r in reversed(self.seen) if r.response is not None)
        assert response is not None
        usage = response.usage
        return {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "image": usage.details.get("image_prompt_tokens", 0),
        }


def _user_parts(messages: Sequence[ModelMessage]) -> list[UserPromptPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


class OfflineHarness(LocalHarness):
    """The offline provider answering as any model id: it reads the prompt's context and
    decodes the attached clips itself."""

    name = "offline"
    offline_recorder = True

    def __init__(self) -> None:
        super().__init__()
        self.provider = offline.OfflineProvider()

    def _build(self, model_id: str, config: dict[str, Any]) -> Model:
        del config  # endpoints, timeouts and caches are a live adapter's settings
        return self.provider.model(model_id)

    def media(self, request: LocalRequest) -> list[dict[str, Any]]:
        """Each clip, whole, as the offline model is handed it (it samples the frames)."""
        out: list[dict[str, Any]] = []
        for part in _user_parts(request.messages):
            for item in [] if isinstance(part.content, str) else part.content:
                info = clip_info(item)
                if info is not None:
                    out.append(
                        {
                            "kind": "video",
                            "segment_id": info.segment_id,
                            "fps": info.fps,
                            "start_s": info.start_s,
                            "end_s": info.end_s,
                            "audio": info.audio,
                        }
                    )
        return out

    def fail_inside(self, monkeypatch: pytest.MonkeyPatch) -> str:
        """The clips cannot be decoded."""

        def broken(data: bytes, fps: float) -> Any:
            raise MediaError(DECODE_FAILURE)

        monkeypatch.setattr(offline, "decode_clip", broken)
        return DECODE_FAILURE


class TransformersHarness(LocalHarness):
    """The ``transformers`` adapter over a tiny random Qwen3-VL that stops after one token:
    its answers are garbage, never the role's JSON."""

    name = "transformers"
    writes_json = False

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.config = ProviderConfig(
            family="transformers",
            model_name="tiny/qwen3-vl",
            local_path=str(folder),
            device="cpu",
            video_fps=0.5,
            frame_height=FRAME_HEIGHT,
            max_frames=MAX_FRAMES,
            # Not the contract's loopback timeout: generation on a shared CPU takes its time.
            timeout_s=600.0,
        )

    def _build(self, model_id: str, config: dict[str, Any]) -> Model:
        del config  # endpoints, client timeouts and caches are a live adapter's settings
        return transformers_model(model_id, self.config)

    def traffic(self, base: Traffic) -> Traffic:
        """As ``playlisteval.app.traffic_for`` sends a frame-based family: its frame caps."""
        return replace(
            base,
            frame_height=self.config.frame_height,
            max_frames=self.config.max_frames,
            video_fps=self.config.video_fps,
            min_frames_per_clip=local_vlm.FAMILY.min_frames_per_clip,
            token_rule=local_vlm.FAMILY.token_rule,
        )

    def chat(self, request: LocalRequest) -> list[dict[str, Any]]:
        """The chat the adapter's processor tokenised for this request."""
        local = LocalVLMModel("contract", self.config)
        _, prepared = local.prepare_request(request.settings, request.params)
        return local.chat(request.messages, prepared)

    def prompt_text(self, request: LocalRequest) -> str:
        """Every text item of the chat (system turn, prompt, clip and frame labels)."""
        return "".join(
            item["text"]
            for turn in self.chat(request)
            for item in turn["content"]
            if item["type"] == "text"
        )

    def media(self, request: LocalRequest) -> list[dict[str, Any]]:
        """Each picture of the chat: the clips' frames."""
        return [
            {"kind": "image", "size": item["image"].size}
            for turn in self.chat(request)
            for item in turn["content"]
            if item["type"] == "image"
        ]

    def output_schema(self, request: LocalRequest) -> dict[str, Any] | None:
        """The schema written into the system turn (a local model's output is prompted)."""
        system = "".join(
            item["text"]
            for turn in self.chat(request)
            if turn["role"] == "system"
            for item in turn["content"]
        )
        start = system.find("{")
        if start < 0:
            return None
        schema, _ = json.JSONDecoder().raw_decode(system, start)
        return schema if isinstance(schema, dict) else None

    def fail_inside(self, monkeypatch: pytest.MonkeyPatch) -> str:
        """Generation raises (the GPU ran out of memory)."""
        transformers: Any = importlib.import_module("transformers")

        def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(GENERATION_FAILURE)

        monkeypatch.setattr(transformers.Qwen3VLForConditionalGeneration, "generate", broken)
        return GENERATION_FAILURE


@contextmanager
def offline_harness() -> Iterator[OfflineHarness]:
    """The offline provider as a contract row."""
    yield OfflineHarness()


@contextmanager
def transformers_harness() -> Iterator[TransformersHarness]:
    """The transformers adapter over the process's tiny Qwen3-VL as a contract row."""
    yield TransformersHarness(_tiny_vlm_folder())


@functools.cache
def _tiny_vlm_folder() -> Path:
    # Built once per process (weights, tokenizer, processor: seconds on a CPU), removed at exit.
    folder = Path(tempfile.mkdtemp(prefix="contract-tiny-qwen3-vl-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return save_tiny_qwen3_vl(folder, stop_on_every_token=True)
