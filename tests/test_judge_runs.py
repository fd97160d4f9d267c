"""One judging shell (``agents.judge_runs``) under the judge evaluation and the difficulty gate:
a cap reached stops both the same way — the cap recorded first, a refusal in the log for each
job it stopped, no reservation left open, nothing spent past the cap, the refusal reported —
and a later pass under a larger cap finishes the work without paying for any call twice.

On the demo workspace (real SQLite log, real clips), with the offline provider playing a priced
difficulty judge: one hand-made accepted item for the gate (ten candidate pairs), a two-pair
benchmark for the evaluation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from agents.deps import CallDeps
from agents.evaluation import eval_stream, evaluate, evaluation_id_of, read_judgments
from agents.pairs import select_pairs
from playlisteval.app import App, offline_models
from playlisteval.settings import load_settings
from policies.budget import BudgetExhausted
from policies.judging import parse_condition
from store.events import (
    CallFailed,
    CallRecorded,
    CallRefused,
    CallReserved,
    CapSet,
    ItemAccepted,
    PairDropped,
    PairJudged,
    PairKept,
    SeedStarted,
    pairs_stream,
    seed_stream,
)
from store.ledger import spend
from tests.test_ui import CELLS, write_benchmark
from tests.workspaces import copy_workspace
from tools.contracts.roles import QA, DistractorSet, GradedAnswer

RUN = "r-shell"
JUDGE = "qwen3-vl-30b-a3b"  # priced by the default table, played by the offline provider
CONDITION = "uniform::frames:1h:4"
CAP_EVENTS = (CapSet, CallReserved, CallRecorded, CallFailed, CallRefused)


@dataclass(frozen=True)
class Workspace:
    """The demo workspace with an accepted item in run :data:`RUN` and a benchmark beside it."""

    home: Path
    bench: Path


@pytest.fixture(scope="module")
def ws(demo_home: Path, demo_playlist: Path, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("judge-runs")
    home = copy_workspace(demo_home, root / "ws")
    with App(load_settings(home)) as app:
        first, second = app.catalog.segments()[:2]
        video = app.catalog.video(first.video_id)
        assert video is not None
        qa = QA(question="What is shown on the board?", gold_answer="A diagram, drawn in red.")
        wrong = DistractorSet(
            answers=tuple(
                GradedAnswer(rating=r, answer=f"A diagram, drawn in colour {r}.", causal_record=())
                for r in (4, 3, 2, 1)
            )
        )
        app.events.append(
            seed_stream(RUN, "s1"),
            [
                SeedStarted(
                    run_id=RUN,
                    seed_id="s1",
                    domain=video.domain,
                    segment_a=first.id,
                    segment_b=second.id,
                ),
                ItemAccepted(
                    seed_id="s1", qa=qa.model_dump(mode="json"), distractors=wrong.model_dump()
                ),
            ],
        )
    return Workspace(home, write_benchmark(root / "bench", demo_playlist, CELLS[:2]))


@dataclass(frozen=True)
class Pass:
    """One pass of a caller under a cap: its stream afterwards, what it reported, what it made."""

    events: list[Any]
    failure: Exception | None
    judged: int


def _deps(app: App) -> CallDeps:
    return CallDeps(
        store=app.events,
        catalog=app.catalog,
        clips=app.clips(),
        model_for=offline_models(),
        prices=app.prices(),
    )


def _gate(app: App, ws: Workspace, cap: int | None) -> Pass:
    """The difficulty gate over :data:`RUN`'s pairs: the first failure is raised."""
    failure: Exception | None = None
    try:
        anyio.run(
            lambda: select_pairs(
                _deps(app),
                run_id=RUN,
                judges=[JUDGE],
                per_domain=2,
                budget_micros=cap,
                concurrency=1,
                offline=True,
            )
        )
    except BudgetExhausted as exc:
        failure = exc
    events = [s.event() for s in app.events.read_stream(pairs_stream(RUN))]
    return Pass(events, failure, sum(isinstance(e, PairKept | PairDropped) for e in events))


def _evaluation(app: App, ws: Workspace, cap: int | None) -> Pass:
    """The evaluation of the benchmark: failures are handed back, the first one taken."""
    out = ws.home.parent / "eval"
    result = anyio.run(
        lambda: evaluate(
            _deps(app),
            benchmark_dir=ws.bench,
            judges=[JUDGE],
            conditions=[parse_condition(CONDITION)],
            out_dir=out,
            budget_micros=cap,
            concurrency=1,
            offline=True,
        )
    )
    stream = eval_stream(evaluation_id_of(ws.bench, out))
    events = [s.event() for s in app.events.read_stream(stream)]
    failure = result.failures[0] if result.failures else None
    return Pass(events, failure, len(read_judgments(out / "judgments.jsonl")))


CALLERS: dict[str, tuple[str, Callable[[App, Workspace, int | None], Pass]]] = {
    "difficulty gate": ("pairs", _gate),
    "evaluation": ("eval", _evaluation),
}


def _stopped_by_the_cap(run: Pass, since: int, cap: int, command: str) -> list[Any]:
    """What every capped pass leaves, whichever caller: its cap first, refusals of the stream's
    cap, no reservation open, nothing spent past the cap, the refusal reported. The pass's own
    cap and call events."""
    mine = [e for e in run.events[since:] if isinstance(e, CAP_EVENTS)]
    assert mine[0] == CapSet(cap_micros=cap, command=command)
    refused = [e for e in mine if isinstance(e, CallRefused)]
    assert refused
    assert {e.cap for e in refused} == {"run"}
    assert isinstance(run.failure, BudgetExhausted)
    ledger = spend(run.events)
    assert ledger.open_micros == 0
    assert ledger.spent_micros <= cap
    return mine


@pytest.mark.parametrize("caller", list(CALLERS))
def test_a_cap_reached_stops_the_evaluation_and_the_gate_the_same_way_and_a_later_pass_finishes(
    ws: Workspace, caller: str
) -> None:
    command, run = CALLERS[caller]
    with App(load_settings(ws.home)) as app:
        # A cap below any call: every job is refused before it reserves, and nothing is judged.
        first = run(app, ws, 1)
        calls = _stopped_by_the_cap(first, 0, 1, command)
        assert [type(e) for e in calls] == [CapSet] + [CallRefused] * (len(calls) - 1)
        assert first.judged == 0
        assert not any(isinstance(e, PairJudged) for e in first.events)

        # A cap of exactly the first call's worst case: it is made, and the next is refused.
        needed = next(e for e in calls if isinstance(e, CallRefused)).needed_micros
        second = run(app, ws, needed)
        calls = _stopped_by_the_cap(second, len(first.events), needed, command)
        assert calls[1:3] == [
            next(e for e in calls if isinstance(e, CallReserved)),
            next(e for e in calls if isinstance(e, CallRecorded)),
        ]
        made = [e for e in calls if isinstance(e, CallRecorded)]
        assert made
        assert not any(e.replayed for e in made)

        # No cap: the rest is judged, and no call is paid for twice.
        third = run(app, ws, None)
    assert third.failure is None
    assert third.events[len(second.events)] == CapSet(cap_micros=None, command=command)
    paid = Counter(e.key for e in third.events if isinstance(e, CallRecorded) and not e.replayed)
    assert set(paid.values()) == {1}
    assert third.judged > second.judged
    assert spend(third.events).open_micros == 0
