"""Batch mode (``curate --batch``): text-only gate calls go through the Gemini and OpenAI batch
APIs (the real SDKs against the fakes' batch endpoints) at batch prices; the job ids are in the
event log, and a run stopped while jobs are out collects them after the restart instead of
submitting anything again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agents.coordinator import fold
from playlisteval.app import App
from playlisteval.runs import choose_seeds
from playlisteval.settings import load_settings
from policies.budget import Budget
from store.events import CallBatched, CallRecorded, Event, seed_stream
from store.eventstore import StoredEvent
from tests.live_fakes import Fakes, running_fakes

# These tests drive the adapters against local fake servers (see conftest).
pytestmark = pytest.mark.usefixtures("allow_model_requests")

KEYS = {
    "GEMINI_API_KEY": "gem-batch-key-000001",
    "OPENAI_API_KEY": "oai-batch-key-000002",
    "DASHSCOPE_API_KEY": "dsc-batch-key-000003",
}
TEXT_ROLES = {
    "transcript_answerer",
    "transcript_matcher",
    "parametric_answerer",
    "parametric_verifier",
    "textual_ranker",
}


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    with running_fakes(monkeypatch, KEYS) as running:
        yield running


def _app(home: Path, fakes: Fakes) -> App:
    return App(
        load_settings(
            home,
            curation={"offline": False, "concurrency": 6},
            providers={
                **fakes.provider_settings(),
                "batch": True,
                "batch_window_s": 0.2,
                "batch_poll_s": 0.01,
            },
        )
    )


def _events(app: App, run_id: str) -> list[tuple[str, Event]]:
    stored: list[StoredEvent] = list(app.events.read_all(stream_prefix=seed_stream(run_id, "")))
    return [(s.stream, s.event()) for s in stored]


def test_text_gates_go_through_batch_jobs_at_batch_prices(workspace: Path, fakes: Fakes) -> None:
    with _app(workspace, fakes) as app:
        seeds, _ = choose_seeds(app, 4)
        report = anyio.run(lambda: app.curator().curate("batch", seeds, budget_micros=None))
        events = _events(app, "batch")
        prices = app.prices()
    assert len(report.accepted) + len(report.discarded) == len(seeds)
    batched = {e.call_id: e for _, e in events if isinstance(e, CallBatched)}
    # First-hand calls (a request repeated in a seed is answered from its first record).
    recorded = [e for _, e in events if isinstance(e, CallRecorded) and not e.replayed]
    assert batched
    for call in recorded:
        if call.role in TEXT_ROLES:
            # Every text-only call went through a job and was priced at the batch rate.
            assert call.batch
            assert call.call_id in batched
            usage = prices.as_usage(call.usage)
            assert call.cost_micros == prices.cost_micros(call.model, usage, batch=True)
            assert call.cost_micros < prices.cost_micros(call.model, usage)
        else:
            assert not call.batch  # video calls stay live
    assert fakes.openai.model_requests() == []  # the OpenAI roles are all text-only
    assert all(fakes.gemini.media(r) for r in fakes.gemini.model_requests())
    assert fakes.batch_jobs() == len({e.batch["id"] for e in batched.values()})


class StopAtFirstJob:
    """A progress listener that stops the run once the first batch job is in the log."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None

    def event(self, stream: str, event: Event, budget: Budget) -> None:
        if isinstance(event, CallBatched) and self.scope is not None:
            self.scope.cancel()


def test_a_run_stopped_while_jobs_are_out_collects_them_after_the_restart(
    workspace: Path, fakes: Fakes
) -> None:
    stopper = StopAtFirstJob()
    with _app(workspace, fakes) as app:
        seeds, _ = choose_seeds(app, 4)

        async def first() -> None:
            with anyio.CancelScope() as scope:
                stopper.scope = scope
                await app.curator(stopper).curate("batch", seeds, budget_micros=None)

        anyio.run(first)
        before = _events(app, "batch")
    out = {e.call_id for _, e in before if isinstance(e, CallBatched)}
    answered = {e.call_id for _, e in before if isinstance(e, CallRecorded)}
    assert out - answered, "the run stopped with batch requests out"
    jobs_before = fakes.batch_jobs()

    with _app(workspace, fakes) as app:
        report = anyio.run(lambda: app.curator().curate("batch", seeds, budget_micros=None))
        after = _events(app, "batch")
    assert len(report.accepted) + len(report.discarded) == len(seeds)
    # The requests that were out were collected from their jobs, never submitted again.
    recorded_ids = Counter(e.call_id for _, e in after if isinstance(e, CallRecorded))
    for call_id in out:
        assert recorded_ids[call_id] == 1
    keys = Counter((s, e.key) for s, e in after if isinstance(e, CallBatched))
    assert max(keys.values()) == 1  # no request went into two jobs
    new_jobs = {e.batch["id"] for _, e in after if isinstance(e, CallBatched)} - {
        e.batch["id"] for _, e in before if isinstance(e, CallBatched)
    }
    assert fakes.batch_jobs() == jobs_before + len(new_jobs)
    states = [fold([e for s, e in after if s == seed_stream("batch", x.id)]) for x in seeds]
    assert {s.status for s in states} <= {"accepted", "discarded"}
