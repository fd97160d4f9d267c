"""The live path held to what the services accept, at campaign scale (step 17): each rule is a
request through the real ``openai`` SDK to a fake that refuses what the service refuses, made as
a run makes it (``ModelRunner`` → ``CallRecorder`` → the adapter, with the settings, prices and
traffic the composition root builds).

* OpenAI takes at most 500 images and 50 MB of them a request ("Image input requirements").
* A ``:think=N`` condition's thinking counts against the output cap (OpenAI's
  ``max_output_tokens`` bounds "visible output tokens and reasoning tokens").
* A request that cannot fit the served model's context window is refused before anything is
  reserved or sent, naming the window.

The vLLM rules (``max_model_len``, ``media_io_kwargs``) are tested where they bite: the
difficulty gate against a 32k server (``tests/test_pairs.py``) and the adapter's video parts
(``tests/test_openai_adapter.py``).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import av
import numpy as np
import pytest
from PIL import Image, ImageFilter
from pydantic_ai.messages import BinaryContent

from agents.evaluation import thinking_settings
from agents.recorded import CallRecorder
from agents.workers import ModelRunner, SeedCall
from playlisteval.app import model_factory, traffic_for
from playlisteval.settings import Settings, load_settings
from policies.budget import Budget
from policies.prices import PriceTable
from store.errors import ProviderError
from store.events import CallRecorded, CallReserved, Event
from tests.fakes_openai import (
    OPENAI_MAX_IMAGE_PAYLOAD,
    OPENAI_MAX_IMAGES,
    OpenAIHarness,
    openai_compatible_harness,
    openai_harness,
)
from tools.contracts.roles import (
    ChunkText,
    PairJudgeContext,
    PairVerdict,
    SegmentEvidence,
    SufficiencyContext,
    SufficiencyVerdict,
    role_spec,
)

KEY = "sk-fake-key"
pytestmark = pytest.mark.usefixtures("allow_model_requests")


def _picture(width: int, height: int, seed: int, textured: bool) -> np.ndarray[Any, Any]:
    """A frame: flat colour, or blurred noise (JPEG cannot squeeze it much, like busy footage)."""
    if not textured:
        return np.full((height, width, 3), (seed * 40) % 256, dtype=np.uint8)
    noise = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    blurred = Image.fromarray(noise).filter(ImageFilter.GaussianBlur(1.2))
    return np.asarray(blurred, dtype=np.uint8)


def _mp4(frames: int, width: int, height: int, textured: bool) -> bytes:
    """A real H.264 mp4 of ``frames`` distinct pictures at 1 fps (lossless-ish, so the
    texture survives into the frames the adapter decodes)."""
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=1)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"crf": "4"}
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(_picture(width, height, index, textured))
            for packet in stream.encode(frame.reformat(format="yuv420p")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def _segments_and_clips(
    span_s: float, height: int, data: bytes
) -> tuple[tuple[SegmentEvidence, SegmentEvidence], list[BinaryContent]]:
    """Two segments of ``span_s`` seconds each, their clips sampled at 0.5 fps: the clip bytes
    are short (the frames nearest each planned instant are repeated), the span is what plans."""
    segments: list[SegmentEvidence] = []
    clips: list[BinaryContent] = []
    for index in range(2):
        video = f"vid{index}"
        segment = SegmentEvidence(
            segment_id=f"{video}#0",
            video_id=video,
            title=f"Episode {index}",
            start_s=0.0,
            end_s=span_s,
            chunks=(ChunkText(start_s=0.0, end_s=span_s, text=f"narration of {video}"),),
        )
        segments.append(segment)
        clips.append(
            BinaryContent(
                data=data,
                media_type="video/mp4",
                identifier=segment.segment_id,
                vendor_metadata={
                    "fps": 0.5,
                    "start_s": 0.0,
                    "end_s": span_s,
                    "height": height,
                    "audio": False,
                    "source": f"sha256:{video}",
                    "video_id": video,
                },
            )
        )
    return (segments[0], segments[1]), clips


def _settings(home: Path, harness: OpenAIHarness, **model: Any) -> Settings:
    family = "openai" if harness.api == "responses" else "openai_compatible"
    return load_settings(
        home,
        curation={"offline": False},
        providers={
            family: {"base_url": f"{harness.server.base_url}/v1", "max_retries": 0},
            "models": {harness.default_model: model} if model else {},
        },
    )


def _run(
    settings: Settings,
    model: str,
    role: str,
    context: Any,
    output_type: type[Any],
    clips: list[BinaryContent],
    extra_settings: Any = None,
) -> tuple[Any, list[Event]]:
    """One role call as a live run makes it; the output (or the exception) and its events."""
    events: list[Event] = []

    async def append(event: Event) -> None:
        events.append(event)

    async def main() -> Any:
        recorder = CallRecorder(
            budget=Budget(None),
            prices=PriceTable.load(),
            traffic=traffic_for(settings, live=True),
        )
        runner = ModelRunner(recorder=recorder, model_for=model_factory(settings, None, {model}))
        try:
            return await runner.run(
                SeedCall(seed_id="s1", evidence=None, append=append),  # type: ignore[arg-type]
                role,
                model,
                context,
                output_type,
                phase=None,
                gate="sufficiency",
                attachments=clips,
                extra_settings=extra_settings,
            )
        except Exception as exc:  # returned so the test can look at what happened
            return exc

    return anyio.run(main), events


@pytest.fixture
def openai_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIHarness]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with openai_harness() as harness:
        yield harness


def _sufficiency(segments: tuple[SegmentEvidence, SegmentEvidence]) -> SufficiencyContext:
    return SufficiencyContext(
        question="What colours appear in the two episodes?",
        gold_answer="Grey scenes on a plain background.",
        segments=segments,
    )


def test_an_openai_request_carries_at_most_500_images(
    openai_fake: OpenAIHarness, tmp_path: Path
) -> None:
    """Two 10-minute segments at 0.5 fps are 600 frames and the model's max_frames says 512;
    OpenAI takes 500 images a request, so 500 go (the plan, the prompt and the reservation
    agree), and the fake answers."""
    settings = _settings(tmp_path, openai_fake, max_frames=512, frame_height=36)
    segments, clips = _segments_and_clips(600.0, 36, _mp4(4, 64, 36, textured=False))
    output, events = _run(
        settings, "gpt-5.4", "sufficiency", _sufficiency(segments), SufficiencyVerdict, clips
    )
    assert isinstance(output, SufficiencyVerdict), output
    (request,) = openai_fake.model_requests()
    images = [m for m in openai_fake.media(request) if m["kind"] == "image"]
    assert len(images) == OPENAI_MAX_IMAGES
    assert "thinned from 0.50 fps to fit 500 frames" in openai_fake.prompt_text(request)
    (recorded,) = [e for e in events if isinstance(e, CallRecorded)]
    assert recorded.response["provider_details"]["playlisteval_sent"]["media"]["images"] == 500


def test_an_openai_requests_pictures_stay_under_50_mb_at_a_lower_jpeg_quality(
    openai_fake: OpenAIHarness, tmp_path: Path
) -> None:
    """250 busy 720p frames take ~70 MB as base64 JPEGs at quality 85; OpenAI takes 50 MB of
    images a request, so the same 250 frames go at a lower quality (the rate stays what the
    prompt says)."""
    settings = _settings(tmp_path, openai_fake, frame_height=720)
    segments, clips = _segments_and_clips(250.0, 720, _mp4(6, 1280, 720, textured=True))
    output, _events = _run(
        settings, "gpt-5.4", "sufficiency", _sufficiency(segments), SufficiencyVerdict, clips
    )
    assert isinstance(output, SufficiencyVerdict), output
    (request,) = openai_fake.model_requests()
    items = openai_fake.items(request)
    pictures = [value for kind, value in items if kind == "image"]
    assert len(pictures) == 250
    assert sum(len(p) for p in pictures) <= OPENAI_MAX_IMAGE_PAYLOAD


def test_a_thinking_budget_raises_the_output_cap_so_the_answer_survives(
    openai_fake: OpenAIHarness, tmp_path: Path
) -> None:
    """A ``:think=4096`` condition on a reasoning model that thinks 4,096 tokens: its output
    cap is the budget plus the judge's own answer cap, so the answer is whole (at the answer
    cap alone the thinking would use it all and the response end incomplete)."""
    openai_fake.fake.reasoning_tokens = {"medium": 4096}  # type: ignore[attr-defined]
    settings = _settings(tmp_path, openai_fake)
    context = PairJudgeContext(question="Q?", answer_a="a", answer_b="b", segments=())
    output, _events = _run(
        settings, "gpt-5.4", "pair_judge", context, PairVerdict, [], thinking_settings(4096)
    )
    assert isinstance(output, PairVerdict), output
    (request,) = openai_fake.model_requests()
    body = request.json()
    assert body["reasoning"]["effort"] == "medium"
    assert body["max_output_tokens"] == 4096 + role_spec("pair_judge").max_output_tokens


def test_a_request_no_frame_of_which_fits_the_window_is_refused_before_anything_is_spent(
    tmp_path: Path,
) -> None:
    """A context window too small for the prompt, the answer and a frame a clip: refused
    before a reservation or a request, naming the window and the setting to change."""
    with openai_compatible_harness() as harness:
        settings = _settings(tmp_path, harness, context_window=4000)
        segments, clips = _segments_and_clips(60.0, 36, _mp4(2, 64, 36, textured=False))
        output, events = _run(
            settings,
            harness.default_model,
            "sufficiency",
            _sufficiency(segments),
            SufficiencyVerdict,
            clips,
        )
        assert harness.model_requests() == []
    assert isinstance(output, ProviderError)
    assert "context window of 4,000 tokens" in str(output)
    assert "context_window" in str(output)
    assert not [e for e in events if isinstance(e, CallReserved)]


def test_eval_with_an_unknown_judge_prints_the_toml_to_add(tmp_path: Path) -> None:
    """``eval --judge X --live`` for an X with no provider and no price: one error that gives
    the settings to add (family, endpoint, id and a zero price for a server of one's own),
    before anything is read or spent."""
    from typer.testing import CliRunner

    from playlisteval.app import App
    from playlisteval.cli import app as cli_app
    from playlisteval.cli.shell import EXIT_UNKNOWN_JUDGE

    with App(load_settings(tmp_path / "home")) as app:
        assert app.catalog.videos() == []  # a started, empty workspace
    result = CliRunner().invoke(
        cli_app,
        [
            "eval",
            "--benchmark",
            str(tmp_path / "bench"),
            "--judge",
            "mystery-vl-9000",
            "--live",
            "--home",
            str(tmp_path / "home"),
        ],
    )
    assert result.exit_code == EXIT_UNKNOWN_JUDGE, result.output
    said = result.output
    assert "judge 'mystery-vl-9000' is no model this project knows" in said
    assert "/playlisteval.toml" in said  # the workspace's own file, never the installed package
    assert '[providers.models."mystery-vl-9000"]' in said
    assert 'family = "openai-compatible"' in said
    assert '[budget.price_overrides."mystery-vl-9000"]' in said
    assert "input_per_mtok = 0.0" in said


def test_a_connection_error_names_the_url_it_tried(tmp_path: Path) -> None:
    """A judge's server that is not there (nothing listens on the port): the call's error says
    where it tried, so a wrong ``base_url`` is seen at once."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    settings = load_settings(
        tmp_path,
        curation={"offline": False},
        providers={"openai_compatible": {"base_url": url, "max_retries": 0}},
    )
    context = PairJudgeContext(question="Q?", answer_a="a", answer_b="b", segments=())
    output, _events = _run(settings, "internvl3.5-8b", "pair_judge", context, PairVerdict, [])
    assert isinstance(output, ProviderError), output
    assert f"(at {url}" in str(output)
