"""Read models folded from the log: seed statuses, spend splits, accepted items."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy import create_engine, delete

from store.events import (
    UPCASTERS,
    AttemptStarted,
    CallFailed,
    CallRecorded,
    Event,
    GatePassed,
    GateRejected,
    ItemAccepted,
    RunStarted,
    SeedDiscarded,
    SeedStarted,
    SeedStopped,
    encode_event,
    run_stream,
    seed_stream,
)
from store.eventstore import EventStore, SqliteEventStore, StoredEvent, open_event_store
from store.projections import (
    SEED_STATUS,
    AcceptedItem,
    Projections,
    SeedStatus,
    fold,
)

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def started(run: str, seed: str) -> SeedStarted:
    """A seed entering the loop."""
    return SeedStarted(run_id=run, seed_id=seed, domain="cooking", segment_a="a", segment_b="b")


_CALLS = itertools.count(1)


def recorded(
    owner: str,
    cost: int,
    *,
    phase: int | None = 1,
    gate: str | None = "blind",
    role: str = "judge",
) -> CallRecorded:
    """A settled model call of seed ``owner`` (its call ids are ``<seed>:<n>``)."""
    return CallRecorded(
        call_id=f"{owner}:{next(_CALLS)}",
        key="k",
        role=role,
        model="gemini-3-flash" if role == "judge" else "qwen-vl",
        phase=phase,
        gate=gate,
        response={},
        cost_micros=cost,
        offline=True,
    )


def failed(owner: str, charged: int) -> CallFailed:
    """A call that failed for good but may have been charged."""
    return CallFailed(
        call_id=f"{owner}:{next(_CALLS)}",
        key="k",
        role="gen",
        model="qwen-vl",
        phase=2,
        error="500",
        charged_micros=charged,
    )


def rejected(phase: Literal[1, 2], gate: str, attempt: int, reason: str) -> GateRejected:
    """A gate saying no."""
    return GateRejected(
        phase=phase, gate=gate, attempt=attempt, reason=reason, rejected_output="{...}"
    )


S1, S2, S3, S4 = (seed_stream("r1", s) for s in ("s1", "s2", "s3", "s-with-dash"))
R2 = seed_stream("r2", "s1")

# (stream, event) in log order: four seeds of run r1 ending four different ways, one seed of r2.
LOG: list[tuple[str, Event]] = [
    (
        run_stream("r1"),
        RunStarted(
            run_id="r1",
            seeds=("s1", "s2", "s3", "s-with-dash"),
            budget_micros=None,
            max_attempts=3,
            concurrency=2,
            offline=True,
        ),
    ),
    (S1, started("r1", "s1")),
    (S2, started("r1", "s2")),
    (S1, AttemptStarted(phase=1, attempt=1)),
    (S1, recorded("s1", 300, gate="generator", role="gen")),
    (S2, AttemptStarted(phase=1, attempt=1)),
    (S1, recorded("s1", 50, gate="blind")),
    (S1, GatePassed(phase=1, gate="blind", attempt=1)),
    (S2, recorded("s2", 40, gate="blind")),
    (S2, rejected(1, "blind", 1, "answerable without the video")),
    (S1, AttemptStarted(phase=2, attempt=1)),
    (S1, recorded("s1", 500, phase=2, gate="native_video")),
    (S2, AttemptStarted(phase=1, attempt=2)),
    (S2, failed("s2", 25)),
    (S1, ItemAccepted(seed_id="s1", qa={"q": "why"}, distractors={"4": "w"})),
    (S2, SeedDiscarded(seed_id="s2", reasons=("blind: too easy", "blind: still too easy"))),
    (S3, started("r1", "s3")),
    (S3, recorded("s3", 10, phase=None, gate=None)),
    (S3, SeedStopped(seed_id="s3", reason="budget", detail="cap")),
    (S4, started("r1", "s-with-dash")),
    (S4, AttemptStarted(phase=1, attempt=1)),
    (R2, started("r2", "s1")),
    (R2, recorded("s1", 7, phase=None, gate=None)),
]

EXPECTED_STATUSES = [
    SeedStatus("r1", "s-with-dash", "running", 1, 0, None, 0),
    SeedStatus("r1", "s1", "accepted", 1, 1, None, 850),
    SeedStatus("r1", "s2", "discarded", 2, 0, "blind: still too easy", 65),
    SeedStatus("r1", "s3", "stopped", 0, 0, "budget: cap", 10),
    SeedStatus("r2", "s1", "running", 0, 0, None, 7),
]

SPEND_CASES = [
    (None, "run", {"r1": 925, "r2": 7}),
    ("r1", "run", {"r1": 925}),
    ("r1", "phase", {"1": 390, "2": 525, "-": 10}),
    ("r1", "gate", {"generator": 300, "blind": 90, "native_video": 500, "-": 35}),
    ("r1", "role", {"gen": 325, "judge": 600}),
    ("r1", "model", {"qwen-vl": 325, "gemini-3-flash": 600}),
    (None, "phase", {"1": 390, "2": 525, "-": 17}),
    ("r2", "role", {"judge": 7}),
    ("nobody", "run", {}),
]


def as_stored(log: list[tuple[str, Event]]) -> list[StoredEvent]:
    """The log as the store would hand it back, with no database."""
    versions: dict[str, int] = {}
    out = []
    for seq, (stream, event) in enumerate(log, start=1):
        versions[stream] = versions.get(stream, 0) + 1
        type_, schema, data = encode_event(event)
        out.append(StoredEvent(seq, stream, versions[stream], type_, schema, data, T0))
    return out


def write(store: EventStore, log: list[tuple[str, Event]]) -> None:
    """Append the log one event at a time, as the loop would."""
    for stream, event in log:
        store.append(stream, [event])


# -- the pure fold ------------------------------------------------------------------------------


def test_folding_the_log_gives_each_seeds_status() -> None:
    assert fold(as_stored(LOG)).seed_statuses() == EXPECTED_STATUSES


@pytest.mark.parametrize(("run_id", "by", "expected"), SPEND_CASES)
def test_folding_the_log_splits_spend(
    run_id: str | None,
    by: Literal["run", "phase", "gate", "role", "model"],
    expected: dict[str, int],
) -> None:
    assert fold(as_stored(LOG)).spend_by(run_id, by) == dict(sorted(expected.items()))


@pytest.mark.parametrize(
    ("tail", "state", "reason"),
    [
        ([], "stopped", "provider: 500 twice"),
        ([AttemptStarted(phase=1, attempt=2)], "running", "provider: 500 twice"),
        (
            [AttemptStarted(phase=1, attempt=2), SeedDiscarded(seed_id="s", reasons=())],
            "discarded",
            "provider: 500 twice",
        ),
    ],
    ids=["stopped", "resumed", "resumed-then-discarded"],
)
def test_a_stopped_seed_that_is_resumed_runs_again(
    tail: list[Event], state: str, reason: str
) -> None:
    stream = seed_stream("r", "s")
    log: list[tuple[str, Event]] = [
        (stream, started("r", "s")),
        (stream, SeedStopped(seed_id="s", reason="provider", detail="500 twice")),
    ] + [(stream, e) for e in tail]
    (status,) = fold(as_stored(log)).seed_statuses()
    assert (status.state, status.last_reason) == (state, reason)


def test_the_fold_upcasts_old_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    def cost_was_in_cents(data: dict[str, Any]) -> dict[str, Any]:
        data = dict(data)
        data["cost_micros"] = data.pop("cost_cents") * 10_000
        return data

    monkeypatch.setitem(UPCASTERS, ("CallRecorded", 0), cost_was_in_cents)
    stored = as_stored([(S1, started("r1", "s1"))])
    old = {"call_id": "s1:1", "key": "k", "role": "judge", "model": "m", "response": {}}
    stored.append(
        StoredEvent(2, S1, 2, "CallRecorded", 0, {**old, "cost_cents": 3, "offline": True}, T0)
    )
    assert fold(stored).spend_by("r1") == {"r1": 30_000}


# -- the tables -------------------------------------------------------------------------------


class ProjectionsContract:
    """Projections over a real store; subclasses say which database."""

    def make_store(self, tmp_path: Path) -> EventStore:
        """A fresh, empty store."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[EventStore]:
        store = self.make_store(tmp_path)
        yield store
        store.close()

    def test_catch_up_fills_the_tables_from_the_log(self, store: EventStore) -> None:
        write(store, LOG)
        projections = Projections(store, store.engine)
        assert projections.catch_up() == len(LOG)
        assert projections.seed_statuses() == EXPECTED_STATUSES
        assert projections.seed_statuses("r2") == EXPECTED_STATUSES[-1:]
        for run_id, by, expected in SPEND_CASES:
            assert projections.spend(run_id, by) == dict(sorted(expected.items()))  # type: ignore[arg-type]
        assert projections.accepted() == [AcceptedItem("r1", "s1", {"q": "why"}, {"4": "w"})]
        assert projections.accepted("r2") == []
        assert projections.catch_up() == 0

    @pytest.mark.parametrize("cut", [1, 5, 14, 20])
    def test_catching_up_in_steps_equals_a_rebuild(self, store: EventStore, cut: int) -> None:
        projections = Projections(store, store.engine)
        write(store, LOG[:cut])
        assert projections.catch_up() == cut
        write(store, LOG[cut:])
        # A second instance (another process) picks up from the checkpoint the first left.
        other = Projections(store, store.engine)
        assert other.catch_up() == len(LOG) - cut
        incremental = (other.seed_statuses(), other.spend(by="gate"), other.accepted())
        assert projections.rebuild() == len(LOG)
        assert (
            projections.seed_statuses(),
            projections.spend(by="gate"),
            projections.accepted(),
        ) == incremental
        assert projections.seed_statuses() == EXPECTED_STATUSES

    def test_a_rebuild_restores_deleted_rows(self, store: EventStore) -> None:
        write(store, LOG)
        projections = Projections(store, store.engine)
        projections.catch_up()
        with store.engine.begin() as conn:
            conn.execute(delete(SEED_STATUS))
        assert projections.seed_statuses() == []
        assert projections.rebuild() == len(LOG)
        assert projections.seed_statuses() == EXPECTED_STATUSES
        assert projections.spend() == {"r1": 925, "r2": 7}


class TestSqliteProjections(ProjectionsContract):
    """Projection tables in the event store's SQLite file."""

    def make_store(self, tmp_path: Path) -> EventStore:
        return SqliteEventStore(tmp_path / "playlisteval.db")


@pytest.mark.postgres
class TestPostgresProjections(ProjectionsContract):
    """Projection tables in the event store's PostgreSQL schema."""

    schema: str | None = None

    def make_store(self, tmp_path: Path) -> EventStore:
        self.schema = f"t_{uuid.uuid4().hex[:16]}"
        return open_event_store(PG_URL, schema=self.schema)

    @pytest.fixture(autouse=True)
    def _drop_schema(self) -> Iterator[None]:
        yield
        if self.schema is not None:
            engine = create_engine(PG_URL)
            with engine.begin() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            engine.dispose()
