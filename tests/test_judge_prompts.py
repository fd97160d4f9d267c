"""A pair judge's prompt says what the judge receives under its condition, and nothing else: a
judge shown transcripts is not told of frames, one shown frames not of a transcript, none of
them how the benchmark's answers were made; the video rate it states is the one its request
carries."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from agents.prompts import render_prompt
from tools.contracts.roles import (
    ChunkText,
    JudgeEvidence,
    PairJudgeContext,
    SegmentEvidence,
    VideoRate,
)

SPAN = SegmentEvidence(
    segment_id="v1@60-90",
    video_id="v1",
    start_s=60.0,
    end_s=90.0,
    chunks=(ChunkText(start_s=60.0, end_s=90.0, text="she lifts the red bowl"),),
)
BARE = SPAN.model_copy(update={"chunks": ()})

# What each condition's judge must not be told it has (the instructions, before the sections).
NOT_GIVEN: dict[str, tuple[str, ...]] = {
    "frames+transcript": ("sound",),
    "frames": ("with its transcript", "transcripts say"),
    "transcript": ("footage", "frames"),
    "audio": ("footage", "frames", "transcript of the span"),
    "none": ("footage", "frames", "transcript of", "sound of"),
}
# How the benchmark was made is not the judge's business.
NEVER = ("0.5 fps", "visual details", "degrad", "distractor", "benchmark", "gold")


def _context(receives: JudgeEvidence, rates: tuple[VideoRate, ...] = ()) -> PairJudgeContext:
    segments = {
        "frames+transcript": (SPAN,),
        "transcript": (SPAN,),
        "frames": (BARE,),
        "audio": (BARE,),
        "none": (),
    }[receives]
    return PairJudgeContext(
        question="What does she lift?",
        answer_a="The red bowl.",
        answer_b="The blue bowl.",
        segments=segments,
        receives=receives,
        video_rates=rates,
    )


def _instructions(prompt: str) -> str:
    return prompt.split("\n## ")[0].split("<context>")[0]


@pytest.mark.parametrize("receives", get_args(JudgeEvidence))
def test_the_judge_is_told_only_what_it_receives(receives: JudgeEvidence) -> None:
    prompt = render_prompt(_context(receives))
    told = " ".join(_instructions(prompt).split()).lower()
    for phrase in NOT_GIVEN[receives]:
        assert phrase not in told, (receives, phrase)
    for phrase in NEVER:
        assert phrase not in prompt.lower(), (receives, phrase)
    if receives == "transcript":
        assert "no video and no sound" in told
    if receives in ("frames", "audio"):
        assert "## Transcripts" not in prompt  # the spans are listed, with no text to read
        assert "## Spans shown" in prompt


def test_a_judge_shown_frames_is_told_the_rate_its_request_carries() -> None:
    rate = VideoRate(segment_id="v1@60-90", seconds=30.0, fps=0.27, asked_fps=0.27, frames=8)
    told = " ".join(_instructions(render_prompt(_context("frames", (rate,)))).split())
    assert re.search(r"video of each of the spans listed below at 0\.27 fps", told), told
    plain = " ".join(_instructions(render_prompt(_context("frames"))).split())
    assert "fps" not in plain  # no rate is claimed that the request does not say
