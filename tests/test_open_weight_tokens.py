"""The open-weight judges' tokens counted as a vLLM server bills them, and their video read in
full (issue 42, items 3 and 4), through the real ``openai`` SDK against the vLLM-like fake.

* Qwen3-VL bills one token a 32-px patch (16-px patches merged 2x2), two frames to a token grid;
  InternVL3.5 bills 256 tokens a 448-px tile, and a thumbnail when a picture takes more than one
  (a 16:9 480p frame: 2 tiles and the thumbnail, 768 tokens). The fake counts with its own
  implementation of those rules (``VLLMVision``); the reservation's count is
  :mod:`policies.tokens`'s.
* So a 32,768-token window holds some 2.7 times the Qwen3-VL frames the old 28-px, frame-by-frame
  count let through.
* A Qwen-VL model's video processor samples each video again at 2 fps (at most 768 frames),
  whatever ``num_frames`` says: the adapter asks for a rate above its fastest clip's
  (``mm_processor_kwargs.fps``) and caps a request at 768 frames, so the server reads every
  planned frame, and the record says what it read.
"""

from __future__ import annotations

import base64
import io
import math
from pathlib import Path
from typing import Any

import anyio
import av
import numpy as np
import pytest
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings

from agents.prompts import render_prompt
from agents.recorded import CallRecorder
from agents.workers import ModelRunner, SeedCall
from playlisteval.app import model_factory, provider_config, traffic_for
from playlisteval.settings import Settings, load_settings
from policies.budget import Budget
from policies.prices import PriceTable
from policies.tokens import (
    CallShape,
    estimate_input_tokens,
    internvl_image_tokens,
    open_weight_family,
)
from store.events import Event
from tests.fakes_openai import OpenAIHarness, openai_compatible_harness
from tools.contracts.roles import ChunkText, SegmentEvidence, SufficiencyContext, SufficiencyVerdict

pytestmark = pytest.mark.usefixtures("allow_model_requests")

QWEN3_VL = "qwen3-vl-30b-a3b"  # served as Qwen/Qwen3-VL-30B-A3B-Instruct
INTERNVL = "internvl3.5-8b"  # served as OpenGVLab/InternVL3_5-8B
WINDOW = 32_768
SETTINGS = ModelSettings(max_tokens=2048, temperature=0.0)


def _mp4(frames: int, width: int, height: int, fps: int = 1) -> bytes:
    """An H.264 mp4 of ``frames`` distinct flat pictures at ``fps``."""
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index in range(frames):
            picture = np.full((height, width, 3), (index * 37) % 256, dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(picture).reformat(format="yuv420p")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def _segments_and_clips(
    span_s: float, fps: float, data: bytes, height: int
) -> tuple[tuple[SegmentEvidence, ...], list[BinaryContent]]:
    """Two segments of ``span_s`` seconds, their clips sampled at ``fps`` (the clip bytes may be
    shorter: the frames nearest each planned instant are repeated)."""
    segments: list[SegmentEvidence] = []
    clips: list[BinaryContent] = []
    for index in range(2):
        video = f"vid{index}"
        segments.append(
            SegmentEvidence(
                segment_id=f"{video}#0",
                video_id=video,
                title=f"Episode {index}",
                start_s=0.0,
                end_s=span_s,
                chunks=(ChunkText(start_s=0.0, end_s=span_s, text=f"narration of {video}"),),
            )
        )
        clips.append(
            BinaryContent(
                data=data,
                media_type="video/mp4",
                identifier=f"{video}#0",
                vendor_metadata={
                    "fps": fps,
                    "start_s": 0.0,
                    "end_s": span_s,
                    "height": height,
                    "audio": False,
                    "source": f"sha256:{video}",
                    "video_id": video,
                },
            )
        )
    return tuple(segments), clips


def _picture_size(data_url: str) -> tuple[int, int]:
    """(width, height) of a data-URL picture as it went on the wire."""
    _, _, encoded = data_url.partition("base64,")
    with Image.open(io.BytesIO(base64.b64decode(encoded))) as picture:
        return picture.size


def _context(segments: tuple[SegmentEvidence, ...]) -> SufficiencyContext:
    return SufficiencyContext(
        question="What appears in the episodes?",
        gold_answer="Grey scenes on a plain background.",
        segments=segments,
    )


def _ask(model: Any, context: SufficiencyContext, clips: list[BinaryContent]) -> ModelResponse:
    """One role call as ``agents.workers.ModelRunner`` makes it (a real Agent, retries off)."""

    async def run() -> ModelResponse:
        agent = Agent(None, output_type=SufficiencyVerdict, retries=0)
        result = await agent.run(
            [render_prompt(context), *clips], model=model, model_settings=SETTINGS
        )
        response = result.all_messages()[-1]
        assert isinstance(response, ModelResponse)
        return response

    return anyio.run(run)


# -- the rules, as each model's card and vLLM's model code give them ------------------------------


@pytest.mark.parametrize(
    ("size", "tiles"),
    [
        ((854, 480), 3),  # 16:9 at 480p: a 2x1 grid and the thumbnail
        ((640, 480), 13),  # 4:3: the 4x3 grid (12, the most) and the thumbnail
        ((1280, 720), 9),  # 16:9 at 720p fills half a 4x2 grid: that one, and the thumbnail
        ((448, 448), 1),  # one tile, no thumbnail
    ],
)
def test_internvl_bills_256_tokens_a_448_px_tile_and_a_thumbnail(
    size: tuple[int, int], tiles: int
) -> None:
    assert internvl_image_tokens(*size) == tiles * 256


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("qwen3-vl-30b-a3b", "qwen3-vl"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", "qwen3-vl"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl"),
        ("internvl3.5-8b", "internvl"),
        ("OpenGVLab/InternVL3_5-8B", "internvl"),
        ("qwen3-vl-plus", None),  # DashScope's hosted model: its own billing
        ("qwen-3.7-plus", None),
    ],
)
def test_a_checkpoint_id_names_its_open_weight_family(model: str, family: str | None) -> None:
    assert open_weight_family(model) == family


def test_qwen3_vl_frames_are_billed_in_pairs_of_32_px_patches() -> None:
    """Two clips of ten 854x480 frames: vLLM bills each 5 pairs of a 15 x 27 grid (480 x 864
    after rounding to 32 px); the reservation counts half a grid a frame and half a grid more
    a clip (an odd clip's padding) — not 18 x 31 a frame, the old 28-px frame-by-frame count."""
    segments, clips = _segments_and_clips(20.0, 0.5, _mp4(10, 854, 480), 480)
    with openai_compatible_harness(max_model_len=1_048_576) as harness:
        model = harness.model(QWEN3_VL, frame_height=480)
        _ask(model, _context(segments), clips)
        billed = harness.last_usage()["video"]
        (read,) = harness.fake.videos_read
    assert read == [10, 10]
    assert billed == 2 * 5 * 15 * 27
    shape = CallShape(QWEN3_VL, video_frames=20, video_height=480, video_width=854, video_clips=2)
    counted = estimate_input_tokens(shape).input_video_tokens
    assert billed <= counted == (20 + 2) * math.ceil(15 * 27 / 2) < 20 * 18 * 31 / 2


def test_internvl_frames_are_billed_three_tiles_each_at_480p_16_9() -> None:
    """Each 16:9 480p frame InternVL3.5 is sent as a picture bills 2 tiles and the thumbnail,
    768 tokens; a shape that knows the frames' width reserves exactly that (the old count: 13
    tiles a frame, 3,328)."""
    segments, clips = _segments_and_clips(20.0, 0.5, _mp4(10, 854, 480), 480)
    with openai_compatible_harness(max_model_len=1_048_576) as harness:
        model = harness.model(INTERNVL, frame_height=480)
        _ask(model, _context(segments), clips)
        billed = harness.last_usage()["image"]
        (request,) = harness.model_requests()
        sizes = [_picture_size(value) for kind, value in harness.items(request) if kind == "image"]
    assert len(sizes) == 20
    assert billed == sum(internvl_image_tokens(w, h) for w, h in sizes) == 20 * 768
    shape = CallShape(INTERNVL, video_frames=20, video_height=480, video_width=854)
    assert estimate_input_tokens(shape).input_video_tokens == billed


# -- the fit gives the judges what the window holds -----------------------------------------------


def _settings(home: Path, harness: OpenAIHarness, **model: Any) -> Settings:
    return load_settings(
        home,
        curation={"offline": False},
        providers={
            "openai_compatible": {"base_url": f"{harness.server.base_url}/v1", "max_retries": 0},
            "models": {
                QWEN3_VL: {
                    "family": "openai-compatible",
                    "model_name": "Qwen/Qwen3-VL-30B-A3B-Instruct",
                    **model,
                }
            },
        },
    )


def _run(
    settings: Settings, context: SufficiencyContext, clips: list[BinaryContent]
) -> tuple[Any, list[Event]]:
    """One role call as a live run makes it (ModelRunner → CallRecorder → the adapter)."""
    events: list[Event] = []

    async def append(event: Event) -> None:
        events.append(event)

    async def main() -> Any:
        recorder = CallRecorder(
            budget=Budget(None), prices=PriceTable.load(), traffic=traffic_for(settings, live=True)
        )
        runner = ModelRunner(recorder=recorder, model_for=model_factory(settings, None, {QWEN3_VL}))
        return await runner.run(
            SeedCall(seed_id="s1", evidence=None, append=append),  # type: ignore[arg-type]
            "sufficiency",
            QWEN3_VL,
            context,
            SufficiencyVerdict,
            phase=None,
            gate="sufficiency",
            attachments=clips,
        )

    return anyio.run(main), events


def test_a_32k_window_holds_qwen3_vl_frames_at_what_vllm_bills(tmp_path: Path) -> None:
    """Two 20-minute segments at 0.5 fps (600 frames planned, 480p) against a 32,768-token
    server: the fit thins them to what the window holds at Qwen3-VL's billing — well over twice
    what the old count (558 tokens a frame, none paired) let through — and the server takes the
    request."""
    segments, clips = _segments_and_clips(1200.0, 0.5, _mp4(4, 854, 480), 480)
    with openai_compatible_harness(max_model_len=WINDOW) as harness:
        settings = _settings(tmp_path, harness, context_window=WINDOW, frame_height=480)
        _run(settings, _context(segments), clips)
        (request,) = harness.model_requests()
        sent = sum(m["frames"] for m in harness.media(request) if m["kind"] == "video")
        usage = harness.last_usage()
        answer_cap = int(request.json()["max_tokens"])
    assert usage["input_tokens"] + answer_cap <= WINDOW
    old_fit = (WINDOW - answer_cap - usage["text"]) // (18 * 31)
    assert sent > 2 * old_fit
    assert sent < 600


# -- what vLLM reads of a Qwen-VL video -----------------------------------------------------------


def test_a_clip_faster_than_2_fps_is_read_in_full_and_the_record_says_so() -> None:
    """Forty frames of each 10-s clip at 4 fps: the video processor would keep 20 at its 2 fps;
    the request asks for a faster rate, so the server reads all 40, and the record says what
    it was asked and what it read."""
    segments, clips = _segments_and_clips(10.0, 4.0, _mp4(40, 320, 240, fps=4), 240)
    with openai_compatible_harness(max_model_len=1_048_576) as harness:
        model = harness.model(QWEN3_VL, video_fps=4.0)
        response = _ask(model, _context(segments), clips)
        (request,) = harness.model_requests()
        sent = [m["frames"] for m in harness.media(request)]
        (read,) = harness.fake.videos_read
    assert sent == [40, 40]
    assert read == sent
    wire = request.json()
    assert wire["mm_processor_kwargs"]["fps"] > 4
    recorded = (response.provider_details or {})["playlisteval_sent"]
    assert recorded["mm_processor_kwargs"] == wire["mm_processor_kwargs"]
    assert recorded["videos_read"] == read


def test_a_qwen2_5_vl_clip_of_an_odd_count_goes_with_its_last_frame_twice() -> None:
    """Qwen2.5-VL's processor keeps an even count of frames: nine planned frames would lose
    their last, so the clip goes with it twice (the pair the model makes of it anyway) and all
    nine are read."""
    segments, clips = _segments_and_clips(18.0, 0.5, _mp4(9, 320, 240), 240)
    with openai_compatible_harness(max_model_len=1_048_576) as harness:
        model = harness.model("Qwen/Qwen2.5-VL-7B-Instruct")
        response = _ask(model, _context(segments), clips)
        (request,) = harness.model_requests()
        sent = [m["frames"] for m in harness.media(request)]
        (read,) = harness.fake.videos_read
    assert sent == [10, 10] == read
    assert (response.provider_details or {})["playlisteval_sent"]["videos_read"] == read


def test_a_request_never_carries_more_frames_than_the_qwen_vl_processor_keeps(
    tmp_path: Path,
) -> None:
    """``max_frames`` 2,000 on a Qwen3-VL judge is planned as the family's 768 (the video
    processor's ``max_frames``, which one clip could otherwise pass): two clips of 800 frames
    each go as 384 each, and the server reads every one."""
    segments, clips = _segments_and_clips(400.0, 2.0, _mp4(8, 96, 64), 64)
    with openai_compatible_harness(max_model_len=1_048_576) as harness:
        settings = _settings(tmp_path, harness, max_frames=2000, video_fps=2.0)
        assert provider_config(settings, QWEN3_VL).max_frames == 768
        _run(settings, _context(segments), clips)
        (request,) = harness.model_requests()
        sent = [m["frames"] for m in harness.media(request)]
        (read,) = harness.fake.videos_read
    assert sent == [384, 384] == read


@pytest.mark.parametrize(("width", "tiles"), [(854, 3), (640, 13), (None, 13)])
def test_the_reservation_reads_the_clips_width_for_internvls_tiles(
    width: int | None, tiles: int, tmp_path: Path
) -> None:
    """A clip that says its width (its source's aspect ratio at its height, as the evidence and
    the evaluation's clips do) is reserved at InternVL's tiles for that picture; one that does
    not is reserved at the dearest grid. The width is no part of the request key."""
    from agents.recorded import CallContext, call_clips, call_shape, request_key

    _segments, clips = _segments_and_clips(20.0, 0.5, b"clip", 480)
    if width is not None:
        clips = [
            BinaryContent(
                data=c.data,
                media_type=c.media_type,
                identifier=c.identifier,
                vendor_metadata={**(c.vendor_metadata or {}), "width": width},
            )
            for c in clips
        ]
    settings = load_settings(
        tmp_path / "home", providers={"models": {INTERNVL: {"frame_height": 480}}}
    )
    recorder = CallRecorder(
        budget=Budget(None), prices=PriceTable.load(), traffic=traffic_for(settings, live=False)
    )
    messages = [ModelRequest(parts=[UserPromptPart(content=["frames", *clips])])]
    context = CallContext(seed_id="s", role="sufficiency", model=INTERNVL)
    shape = recorder._effective(context, call_shape(INTERNVL, messages, None), call_clips(messages))
    assert shape.video_clips == 2
    assert shape.video_width == width
    frames = shape.video_frames or 0
    assert frames > 0
    assert estimate_input_tokens(shape).input_video_tokens == frames * tiles * 256
    bare = [ModelRequest(parts=[UserPromptPart(content=["frames", *_segments_and_clips(
        20.0, 0.5, b"clip", 480)[1]])])]  # fmt: skip
    params = ModelRequestParameters()
    assert request_key("sufficiency", INTERNVL, messages, params, None) == request_key(
        "sufficiency", INTERNVL, bare, params, None
    )
