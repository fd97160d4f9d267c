"""The live curate table's figures (counted from the run's events, timed by an injected clock)
and the audit's words for a timeline's steps and a rejection's reason."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from agents.audit import describe_step, first_clause
from playlisteval.curation_display import LiveCuration, clock_text, render
from policies.budget import Budget
from store.events import (
    AttemptStarted,
    CallRecorded,
    GateRejected,
    ItemAccepted,
    SeedDiscarded,
    SeedStopped,
)


class Clock:
    """Seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def call(n: int, *, replayed: bool = False) -> CallRecorded:
    return CallRecorded(
        call_id=f"c{n}",
        key=f"k{n}",
        role="phase1_generator",
        model="m",
        response={},
        cost_micros=1000,
        offline=True,
        replayed=replayed,
    )


def spent(budget: Budget, micros: int, name: str) -> None:
    """Spend through the budget as a call does: reserve, then settle."""
    budget.settle(budget.reserve("s", micros, name), micros)


def test_the_figures_follow_the_events_and_the_clock() -> None:
    clock = Clock()
    view = LiveCuration(total=4, offline=True, clock=clock)
    budget = Budget(cap_micros=1_000_000)
    first = view.snapshot()
    assert (first.done, first.in_flight, first.queued) == (0, 0, 4)
    assert first.eta_s is None

    for stream in ("seed-a", "seed-b"):
        view.event(stream, AttemptStarted(phase=1, attempt=1), budget)
    spent(budget, 250_000, "r1")
    view.event("seed-a", call(1), budget)
    view.event("seed-b", call(2, replayed=True), budget)
    view.event(
        "seed-b",
        GateRejected(phase=1, gate="structural", attempt=1, reason="x", rejected_output=""),
        budget,
    )
    clock.now += 10
    mid = view.snapshot()
    assert (mid.done, mid.in_flight, mid.queued) == (0, 2, 2)
    assert mid.spent_micros == 250_000
    assert mid.cap_micros == 1_000_000
    assert (mid.calls_made, mid.calls_replayed) == (1, 1)
    assert mid.calls_per_s == pytest.approx(0.1)
    assert mid.rejections == {"phase 1 structural": 1}
    assert mid.eta_s is None  # no seed ended yet: no rate to extrapolate

    view.event("seed-a", ItemAccepted(seed_id="a", qa={}, distractors={}), budget)
    clock.now += 10
    late = view.snapshot()
    assert (late.done, late.in_flight, late.queued) == (1, 1, 2)
    assert late.ended == {"accepted": 1}
    assert late.eta_s == pytest.approx(60.0)  # one seed in 20 s, three to go

    view.event("seed-b", SeedDiscarded(seed_id="b", reasons=("r",)), budget)
    view.event("seed-c", SeedStopped(seed_id="c", reason="budget"), budget)
    console = Console(record=True, width=120, file=io.StringIO())
    console.print(render(view.snapshot()))
    shown = console.export_text()
    assert "3 of 4 done · 0 in flight · 1 queued" in shown
    assert "0.2500 of 1.0000 (25%)" in shown
    assert "stopped (budget)" in shown
    assert "offline provider: a harness" in shown


def test_a_resumed_run_counts_the_seeds_that_ended_before() -> None:
    clock = Clock()
    view = LiveCuration(total=5, earlier={"accepted": 2, "discarded": 1}, clock=clock)
    budget = Budget(cap_micros=None)
    view.event("seed-d", AttemptStarted(phase=2, attempt=1), budget)
    view.event("seed-d", ItemAccepted(seed_id="d", qa={}, distractors={}), budget)
    clock.now += 30
    snap = view.snapshot()
    assert snap.done == 4
    assert snap.queued == 1
    assert snap.eta_s == pytest.approx(30.0)  # the rate counts only what ended in this process


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0:00:00"), (59.6, "0:01:00"), (3725, "1:02:05")]
)
def test_clock_text(seconds: float, text: str) -> None:
    assert clock_text(seconds) == text


@pytest.mark.parametrize(
    ("step", "words"),
    [
        (
            {"step": "attempt", "phase": 1, "attempt": 2},
            "phase 1, attempt 2: question and gold answer",
        ),
        (
            {"step": "attempt", "phase": 2, "attempt": 1},
            "phase 2, attempt 1: four graded distractors",
        ),
        (
            {
                "step": "call",
                "role": "sufficiency",
                "model": "qwen",
                "cost_micros": 5730,
                "replayed": False,
                "offline": True,
            },
            "call sufficiency → offline provider as qwen: 0.00573 USD",
        ),
        (
            {
                "step": "call",
                "role": "r",
                "model": "m",
                "cost_micros": 0,
                "replayed": True,
                "offline": False,
            },
            "call r → m: 0.00000 USD (served from the log, free)",
        ),
        (
            {"step": "call failed", "role": "r", "error": "HTTP 500", "charged_micros": 20},
            "call r failed (0.00002 USD charged): HTTP 500",
        ),
        ({"step": "pass", "phase": 2, "gate": "structural"}, "passed phase 2 structural"),
        (
            {
                "step": "reject",
                "phase": 1,
                "gate": "sufficiency",
                "attempt": 3,
                "reason": "claims not supported",
                "rejected_output": "",
            },
            "rejected by phase 1 sufficiency (attempt 3): claims not supported",
        ),
        (
            {"step": "discarded", "reasons": ["phase 1 used its 6 attempts; x", "b"]},
            "discarded: phase 1 used its 6 attempts (and 1 earlier reasons)",
        ),
        ({"step": "stopped", "reason": "budget", "detail": "cap"}, "stopped (budget): cap"),
    ],
    ids=lambda v: v["step"] if isinstance(v, dict) else "",
)
def test_a_timeline_step_reads_as_words(step: dict[str, Any], words: str) -> None:
    assert describe_step(step) == words
    assert "{" not in describe_step(step)


@pytest.mark.parametrize(
    ("reason", "clause"),
    [
        (
            "(1) '(v @ 01:30–02:00)' lies outside segment 's0' 00:00–01:00 of video 'v'; cite "
            "spans inside the segments. (2) more",
            "'(v @ 01:30–02:00)' lies outside segment 's0' 00:00–01:00 of video 'v'",
        ),
        (
            "answerable from the transcripts alone: matched (22 of 26 words (85%; a match needs "
            "50%) and 0 visual). Ground the answer in what is seen.",
            "answerable from the transcripts alone: matched (22 of 26 words (85%; a match needs "
            "50%) and 0 visual)",
        ),
        ("a ratio of 0.5. Then more", "a ratio of 0.5"),
    ],
    ids=["a numbered list", "brackets hold a semicolon", "a decimal point"],
)
def test_a_reason_is_shown_by_its_first_statement_with_its_values(reason: str, clause: str) -> None:
    assert first_clause(reason) == clause


def test_a_long_first_statement_is_cut_and_says_so() -> None:
    shown = first_clause("word " * 100, limit=50)
    assert len(shown) == 50
    assert shown.endswith("…")
