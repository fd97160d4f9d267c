"""The transformers adapter runs a local vision-language model on the prompt and the clips' frames.

A tiny, randomly initialised Qwen3-VL (built here, saved to a temporary folder) stands in for
Qwen3-VL-30B-A3B / InternVL3.5: it writes garbage, so these tests check the plumbing — the request
ran, frames became image inputs, new tokens were decoded and counted — and that garbage where a
role's structured answer is wanted surfaces as pydantic-ai's ``UnexpectedModelBehavior``.
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from pathlib import Path
from typing import Any

import anyio
import av
import numpy as np
import pytest
from pydantic_ai import Agent, BinaryContent, capture_run_messages
from pydantic_ai.exceptions import (
    ModelTimeoutError,
    OutputTokenLimitExceeded,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings

from agents.prompts import render_prompt
from store.errors import ConfigError
from tests.tiny_models import QWEN3_VL_CHAT_TEMPLATE, save_tiny_qwen3_vl, tiny_qwen_tokenizer
from tools.contracts.roles import ChunkText, SegmentEvidence, SufficiencyContext, SufficiencyVerdict
from tools.index.media import export_clip
from tools.providers.base import CallWrapper, ModelCall, ProviderConfig
from tools.providers.local_vlm import LocalVLMModel, transformers_model

# These tests drive the adapters against local fake servers (see conftest).
pytestmark = pytest.mark.usefixtures("allow_model_requests")

MAX_TOKENS = 8
# A 64x48 frame under max_pixels=64*64 becomes a 64x64 image: 4x4 patches of 16 px, merged 2x2.
TOKENS_PER_IMAGE = 4
FRAME_HEIGHT = 48


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3-VL that always writes up to ``max_tokens``."""
    return save_tiny_qwen3_vl(tmp_path_factory.mktemp("vlm-long"), stop_on_every_token=False)


@pytest.fixture(scope="module")
def tiny_vlm_one_token(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3-VL that stops after one token."""
    return save_tiny_qwen3_vl(tmp_path_factory.mktemp("vlm-short"), stop_on_every_token=True)


def _source_video(path: Path, seconds: int = 6, fps: int = 4) -> Path:
    """A few seconds of changing colour blocks, 64x48."""
    rng = np.random.default_rng(7)
    with av.open(str(path), mode="w") as out:
        stream: Any = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.time_base = Fraction(1, fps)
        for index in range(seconds * fps):
            colour = rng.integers(0, 256, 3, dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(
                np.broadcast_to(colour, (48, 64, 3)).copy(), format="rgb24"
            )
            frame.pts = index
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return path


def _clip(source: Path, out: Path, segment_id: str, start_s: float, end_s: float) -> BinaryContent:
    """A segment clip as ``SeedEvidence.videos`` attaches it."""
    export_clip(source, out, start_s, end_s, fps=1.0, max_height=FRAME_HEIGHT, audio=False)
    return BinaryContent(
        data=out.read_bytes(),
        media_type="video/mp4",
        identifier=segment_id,
        vendor_metadata={
            "fps": 1.0,
            "start_s": start_s,
            "end_s": end_s,
            "height": FRAME_HEIGHT,
            "audio": False,
            "source": "src-key",
            "video_id": "vid1",
            "path": str(source),
        },
    )


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[BinaryContent]:
    """Two real clips of one video: 4 s and 2 s, sampled at 1 fps → 4 + 2 frames."""
    folder = tmp_path_factory.mktemp("clips")
    source = _source_video(folder / "source.mp4")
    return [
        _clip(source, folder / "s1.mp4", "vid1-s1", 0.0, 4.0),
        _clip(source, folder / "s2.mp4", "vid1-s2", 4.0, 6.0),
    ]


def _config(path: Path, **overrides: Any) -> ProviderConfig:
    options: dict[str, Any] = {
        "family": "transformers",
        "model_name": "tiny/qwen3-vl",
        "local_path": str(path),
        "device": "cpu",
        "video_fps": 1.0,
        "frame_height": FRAME_HEIGHT,
        **overrides,
    }
    return ProviderConfig(**options)


def _context() -> SufficiencyContext:
    segments = tuple(
        SegmentEvidence(
            segment_id=f"vid1-s{i}",
            video_id="vid1",
            start_s=start,
            end_s=end,
            chunks=(ChunkText(start_s=start, end_s=end, text="a red cat sat on the mat"),),
        )
        for i, (start, end) in enumerate([(0.0, 4.0), (4.0, 6.0)], 1)
    )
    return SufficiencyContext(
        question="What colour is the cat?", gold_answer="Red.", segments=segments
    )


def _last_response(messages: list[ModelMessage]) -> ModelResponse:
    response = messages[-1]
    assert isinstance(response, ModelResponse)
    return response


SETTINGS = ModelSettings(max_tokens=MAX_TOKENS, temperature=0.0)


def test_prompt_and_frames_reach_the_model_and_new_tokens_come_back(
    tiny_vlm: Path, clips: list[BinaryContent]
) -> None:
    """Each clip becomes labelled frames, each frame an image input; only new tokens decode."""
    model = transformers_model("tiny-vlm", _config(tiny_vlm))
    prompt = "Describe what happens in the two segments of the cat video."
    agent = Agent(model, output_type=str, retries=0)

    result = agent.run_sync([prompt, *clips], model_settings=SETTINGS)

    response = _last_response(result.all_messages())
    assert response.finish_reason == "length"
    assert response.usage.output_tokens == MAX_TOKENS
    frames = 4 + 2
    assert response.provider_details is not None
    assert response.provider_details["images"] == frames
    assert response.usage.details["image_prompt_tokens"] == frames * TOKENS_PER_IMAGE
    assert response.usage.details["text_prompt_tokens"] > len(prompt) // 10
    assert response.usage.input_tokens == sum(response.usage.details.values())
    assert result.output
    assert prompt[:12] not in result.output

    assert isinstance(model, LocalVLMModel)
    chat = model.chat(result.all_messages()[:1], ModelRequestParameters())
    (user,) = [m for m in chat if m["role"] == "user"]
    kinds = [item["type"] for item in user["content"]]
    assert kinds.count("image") == frames
    texts = [item["text"] for item in user["content"] if item["type"] == "text"]
    assert texts[0].startswith(prompt)
    assert any("segment vid1-s2" in text for text in texts)
    assert [t.strip() for t in texts if t.startswith("(vid1 @")] == [
        "(vid1 @ 00:00)",
        "(vid1 @ 00:01)",
        "(vid1 @ 00:02)",
        "(vid1 @ 00:03)",
        "(vid1 @ 00:04)",
        "(vid1 @ 00:05)",
    ]


class _SeesRequests(CallWrapper):
    """Keeps what pydantic-ai hands the model, as the recorded-call wrapper sees it."""

    def __init__(self, wrapped: LocalVLMModel) -> None:
        super().__init__(wrapped)
        self.local = wrapped
        self.seen: list[tuple[list[ModelMessage], ModelRequestParameters]] = []

    async def answer(self, call: ModelCall) -> ModelResponse:
        self.seen.append((list(call.messages), call.parameters))
        return await super().answer(call)


def test_role_answer_cut_at_max_tokens_is_an_output_token_limit(
    tiny_vlm: Path, clips: list[BinaryContent]
) -> None:
    """A role call: the schema goes in the system turn; a cut-off answer is a model error."""
    local = transformers_model("tiny-vlm", _config(tiny_vlm))
    assert isinstance(local, LocalVLMModel)
    model = _SeesRequests(local)
    agent = Agent(model, output_type=SufficiencyVerdict, retries=0)

    with capture_run_messages() as messages, pytest.raises(OutputTokenLimitExceeded):
        agent.run_sync([render_prompt(_context()), *clips], model_settings=SETTINGS)

    response = _last_response(messages)
    assert response.finish_reason == "length"
    assert response.usage.output_tokens == MAX_TOKENS
    ((sent, params),) = model.seen
    _, prepared = local.prepare_request(SETTINGS, params)
    system, user = local.chat(sent, prepared)
    assert system["role"] == "system"
    assert user["role"] == "user"
    schema_text = "".join(item["text"] for item in system["content"])
    assert "unsupported_claims" in schema_text
    assert "answerable" in schema_text
    assert "<context>" in user["content"][0]["text"]


def test_garbage_instead_of_json_is_unexpected_model_behavior(
    tiny_vlm_one_token: Path, clips: list[BinaryContent]
) -> None:
    """An answer that ended normally but is not the role's JSON fails validation, nothing else."""
    model = transformers_model("tiny-vlm", _config(tiny_vlm_one_token))
    agent = Agent(model, output_type=SufficiencyVerdict, retries=0)

    with capture_run_messages() as messages, pytest.raises(UnexpectedModelBehavior) as caught:
        agent.run_sync([render_prompt(_context()), *clips], model_settings=SETTINGS)

    assert not isinstance(caught.value, OutputTokenLimitExceeded)
    response = _last_response(messages)
    assert response.finish_reason == "stop"
    assert response.usage.output_tokens == 1


def test_generation_past_timeout_is_a_model_timeout(tiny_vlm: Path) -> None:
    """Generation is bounded by ``timeout_s``; stopping on it is a timeout, not an answer."""
    model = transformers_model("tiny-vlm", _config(tiny_vlm, timeout_s=1e-9))
    agent = Agent(model, output_type=str, retries=0)
    with pytest.raises(ModelTimeoutError, match="timeout_s"):
        agent.run_sync("a red cat", model_settings=SETTINGS)


def test_concurrent_calls_on_one_folder_both_answer_alike(tiny_vlm: Path) -> None:
    """Two model ids over one folder, called at once, share it: both run, greedy answers agree."""
    agent = Agent(None, output_type=str, retries=0)
    outputs: list[str] = []

    async def one(model_id: str) -> None:
        model = transformers_model(model_id, _config(tiny_vlm))
        result = await agent.run("a red cat sat", model=model, model_settings=SETTINGS)
        outputs.append(result.output)

    async def both() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(one, "tiny-vlm")
            group.start_soon(one, "tiny-vlm-again")

    anyio.run(both)
    assert len(outputs) == 2
    assert outputs[0] == outputs[1]


def _save_tiny_llava(folder: Path) -> Path:
    """A tiny random Llava (CLIP vision tower, Qwen2 text): its processor has no video half, so
    it loads through ``AutoProcessor`` as-is, the path Qwen3-VL takes where torchvision is."""
    import torch

    transformers: Any = importlib.import_module("transformers")
    tokenizer = tiny_qwen_tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"],
        "a red cat sat on the mat; system user assistant",
        vocab_size=400,
    )
    processor = transformers.LlavaProcessor(
        image_processor=transformers.CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=tokenizer,
        patch_size=16,
        vision_feature_select_strategy="default",
        image_token="<image>",
        num_additional_image_tokens=1,
        chat_template=QWEN3_VL_CHAT_TEMPLATE.replace(
            "<|vision_start|><|image_pad|><|vision_end|>", "<image>"
        ),
    )
    config = transformers.LlavaConfig(
        vision_config={
            "model_type": "clip_vision_model",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 16,
            "projection_dim": 32,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": len(tokenizer),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
        },
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    model = transformers.LlavaForConditionalGeneration(config)
    model.generation_config = transformers.GenerationConfig(eos_token_id=None, pad_token_id=0)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def test_a_processor_without_video_half_loads_through_auto_processor(
    tmp_path: Path, clips: list[BinaryContent]
) -> None:
    """Another architecture, its own image tokens: 4 per 32x32 picture (2x2 patches)."""
    model = transformers_model("tiny-llava", _config(_save_tiny_llava(tmp_path / "llava")))
    result = Agent(model, output_type=str, retries=0).run_sync(
        ["Describe the clip.", clips[1]], model_settings=SETTINGS
    )
    response = _last_response(result.all_messages())
    assert response.provider_details is not None
    assert response.provider_details["images"] == 2
    assert response.usage.details["image_prompt_tokens"] == 2 * 4
    assert response.usage.output_tokens == MAX_TOKENS


def test_missing_model_folder_is_a_config_error(tmp_path: Path) -> None:
    """Nothing is downloaded: a folder that is not there says so, naming it."""
    missing = tmp_path / "no-such-model"
    model = transformers_model("tiny-vlm", _config(missing))
    with pytest.raises(ConfigError, match="no-such-model"):
        Agent(model, output_type=str).run_sync("hello", model_settings=SETTINGS)
