"""What a video gate's prompt says of its video is what the request carries: the frames per
second a frame-based adapter actually sends (thinned to the request's frame cap when the clips
ask for more), not a fixed "0.5 fps".

A sufficiency gate runs in the real loop with its model, ``qwen-3.7-plus``, served by our
DashScope adapter through the real ``dashscope`` SDK against the fake native API (every other
role offline); the frames the fake received, over each segment's seconds, are the rate the
prompt states."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import BinaryContent

from agents.prompts import render_prompt
from agents.workers import video_rates
from playlisteval.app import App, model_factory, provider_config, traffic_for
from playlisteval.settings import load_settings
from policies.attempts import default_gate
from tests.fakes_dashscope import API_KEY, DashScopeHarness, dashscope_harness, request_videos
from tools.contracts.roles import ChunkText, SegmentEvidence, SufficiencyContext, parse_context
from tools.providers.dashscope_model import FAMILY

MODEL = "qwen-3.7-plus"  # plays sufficiency by default
STATED = re.compile(r"full video at (?P<rates>[^()]*?fps)(?: \((?P<note>thinned[^)]*)\))? with")
RATE = re.compile(r"([0-9.]+) fps")


@pytest.fixture
def harness(allow_model_requests: None) -> Any:
    with dashscope_harness() as running:
        yield running


def _sufficiency_requests(
    workspace: Path, harness: DashScopeHarness, endpoint: dict[str, Any]
) -> list[dict[str, Any]]:
    """The bodies of the sufficiency requests the fake received while one seed was curated with
    the structural gate and sufficiency (``endpoint``: the model's settings)."""
    providers = {
        "dashscope": {"base_url": f"{harness.server.base_url}/api/v1"},
        "models": {MODEL: {"family": "dashscope", "model_name": "qwen3.7-plus", **endpoint}},
    }
    settings = load_settings(workspace, generation={"max_attempts": 2}, providers=providers)
    with App(settings) as app:
        offline = model_factory(app.settings)
        live = FAMILY.factory(
            MODEL, provider_config(app.settings, MODEL, env={"DASHSCOPE_API_KEY": API_KEY}), None
        )
        curator = app.curator()
        curator.model_for = lambda model_id: live if model_id == MODEL else offline(model_id)
        gates = (default_gate("structural", 1), default_gate("sufficiency", 1))
        curator.config = replace(curator.config, policy=replace(curator.config.policy, gates=gates))
        seed = app.catalog.seeds()[0]
        anyio.run(lambda: curator.curate("rates", [seed], budget_micros=None))
    bodies = [r.json() for r in harness.model_requests()]
    assert bodies, "the sufficiency gate never called its model"
    return bodies


def _sent_and_stated(body: dict[str, Any]) -> tuple[list[tuple[int, float]], str, str]:
    """``([(frames sent, segment seconds)], the rates the prompt states, its note)``."""
    text = "\n".join(
        str(item["text"])
        for message in body["input"]["messages"]
        for item in message["content"]
        if isinstance(item, dict) and "text" in item
    )
    context = parse_context(text)
    assert isinstance(context, SufficiencyContext)
    seconds = {s.segment_id: s.end_s - s.start_s for s in context.segments}
    sent = [(len(v["frames"]), seconds[v["segment_id"]]) for v in request_videos(body)]
    stated = STATED.search(text)
    assert stated is not None, "the prompt states no rate"
    return sent, stated["rates"], stated["note"] or ""


def _rates(stated: str) -> list[float]:
    return [float(r) for r in RATE.findall(stated)]


def test_an_unthinned_request_states_the_rate_its_frames_are_sent_at(
    workspace: Path, harness: DashScopeHarness
) -> None:
    for body in _sufficiency_requests(workspace, harness, {}):
        sent, stated, note = _sent_and_stated(body)
        # Nothing thinned these clips: they fit the family's own frame cap.
        assert FAMILY.max_frames is None or sum(n for n, _ in sent) < FAMILY.max_frames
        assert note == ""
        rates = _rates(stated)
        for (frames, seconds), rate in zip(sent, rates * len(sent), strict=False):
            assert frames / seconds == pytest.approx(rate, abs=0.005)
        assert rates == [0.5]


def test_a_thinned_request_states_the_thinned_rate_and_why(
    workspace: Path, harness: DashScopeHarness
) -> None:
    # A cap well under what two demo segments take at 0.5 fps, and above the family's floor of
    # frames per clip (a paper-length clip would thin at the family's own cap, FAMILY.max_frames,
    # but take minutes to decode).
    cap = 4 * FAMILY.min_frames_per_clip
    if FAMILY.max_frames is not None:
        cap = min(cap, FAMILY.max_frames)
    for body in _sufficiency_requests(workspace, harness, {"max_frames": cap}):
        sent, stated, note = _sent_and_stated(body)
        assert sum(n for n, _ in sent) <= cap
        assert note == f"thinned from 0.50 fps to fit {cap} frames per request"
        rates = _rates(stated)
        assert len(rates) in (1, len(sent))
        for (frames, seconds), rate in zip(sent, rates * len(sent), strict=False):
            assert frames / seconds == pytest.approx(rate, abs=0.005)
            assert rate < 0.5


def _clip(segment_id: str, seconds: float, fps: float = 0.5) -> BinaryContent:
    return BinaryContent(
        data=b"",
        media_type="video/mp4",
        identifier=segment_id,
        vendor_metadata={"fps": fps, "start_s": 0.0, "end_s": seconds, "video_id": segment_id},
    )


def _segment(segment_id: str, seconds: float) -> SegmentEvidence:
    chunk = ChunkText(start_s=0.0, end_s=30.0, text="narration")
    return SegmentEvidence(
        segment_id=segment_id, video_id=segment_id, start_s=0.0, end_s=seconds, chunks=(chunk,)
    )


def test_native_video_is_stated_at_the_clips_own_rate(tmp_path: Path) -> None:
    """Gemini takes the clip itself (no frame cap): the prompt states the clip's rate, however
    long the segments are."""
    traffic = traffic_for(load_settings(tmp_path), live=False)("gemini-3-flash-preview")
    clips = [_clip("a", 1200.0), _clip("b", 1200.0)]
    rates = video_rates(clips, traffic)
    assert [r.fps for r in rates] == [0.5, 0.5]
    context = SufficiencyContext(
        question="q?",
        gold_answer="g",
        segments=(_segment("a", 1200.0), _segment("b", 1200.0)),
        video_rates=rates,
    )
    assert "full video at 0.50 fps with its transcript" in render_prompt(context)


def test_a_prompt_that_is_told_no_rate_claims_none() -> None:
    context = SufficiencyContext(
        question="q?", gold_answer="g", segments=(_segment("a", 60.0), _segment("b", 60.0))
    )
    prompt = render_prompt(context)
    assert "fps" not in prompt[: prompt.index("<context>")]
