"""The event store's contract, passed by every backend (SQLite file, PostgreSQL schema)."""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy import create_engine

from policies.budget import BudgetExhausted
from store.errors import ConfigError, StoreConflict
from store.events import (
    UPCASTERS,
    AttemptStarted,
    CallFailed,
    CallRecorded,
    CallRefused,
    Event,
    GateRejected,
    ItemAccepted,
    RunStarted,
    SeedStarted,
    SeedStopped,
    decode_event,
)
from store.eventstore import (
    EventStore,
    PostgresEventStore,
    SqliteEventStore,
    StoredEvent,
    open_event_store,
)

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def attempt(n: int, phase: Literal[1, 2] = 1) -> AttemptStarted:
    """A small real event, numbered so tests can tell them apart."""
    return AttemptStarted(phase=phase, attempt=n)


def call(n: int, cost: int = 100) -> CallRecorded:
    """A model call record like the curation loop writes."""
    return CallRecorded(
        call_id=f"c{n}",
        key=f"k{n}",
        role="judge",
        model="gemini-3-flash",
        phase=1,
        gate="text_only",
        response={"parts": [{"content": "yes", "part_kind": "text"}]},
        input_tokens=1200,
        output_tokens=80,
        cost_micros=cost,
        offline=True,
    )


ROUND_TRIP = [
    RunStarted(
        run_id="r1",
        seeds=("s1", "s2"),
        budget_micros=5_000_000,
        max_attempts=3,
        concurrency=4,
        offline=True,
        models={"judge": "gemini-3-flash"},
    ),
    SeedStarted(run_id="r1", seed_id="s1", domain="cooking", segment_a="a", segment_b="b"),
    AttemptStarted(phase=2, attempt=3, feedback=("too easy", "cites the wrong clip")),
    call(1, cost=1234),
    CallFailed(call_id="c2", key="k2", role="gen", model="m", error="HTTP 500", charged_micros=7),
    GateRejected(phase=1, gate="blind", attempt=1, reason="answerable blind", rejected_output="{}"),
    ItemAccepted(
        seed_id="s1", qa={"question": "why?", "answer": "because"}, distractors={"4": "x"}
    ),
    SeedStopped(seed_id="s1", reason="budget", detail="cap reached"),
]


class LegacySeedStopped(Event):
    """SeedStopped as schema 0 wrote it: the reason was called ``why``."""

    schema_version: int = 0
    type: Literal["SeedStopped"] = "SeedStopped"
    seed_id: str
    why: str


class EventStoreContract:
    """What every event store backend must do. Subclasses only say how to make one."""

    def make_store(self, tmp_path: Path) -> EventStore:
        """A fresh, empty store (reopening the same place gives the same log)."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[EventStore]:
        store = self.make_store(tmp_path)
        yield store
        store.close()

    def test_events_round_trip_as_their_typed_classes(self, store: EventStore) -> None:
        stored = store.append("seed-r1-s1", ROUND_TRIP, expected_version=0)
        read = store.read_stream("seed-r1-s1")
        assert read == stored
        assert [e.event() for e in read] == ROUND_TRIP
        assert all(e.recorded_at.tzinfo is not None for e in read)
        assert all(e.recorded_at.utcoffset() == UTC.utcoffset(None) for e in read)

    def test_an_empty_store_has_nothing(self, store: EventStore) -> None:
        assert store.last_seq() == 0
        assert store.stream_version("seed-r-s") == 0
        assert store.streams() == []
        assert store.read_all() == []
        assert store.read_stream("seed-r-s") == []

    def test_versions_count_per_stream_and_seq_grows_across_streams(
        self, store: EventStore
    ) -> None:
        store.append("a", [attempt(1), attempt(2)])
        store.append("b", [attempt(1)])
        store.append("a", [attempt(3)], expected_version=2)
        log = store.read_all()
        assert [(e.stream, e.version) for e in log] == [("a", 1), ("a", 2), ("b", 1), ("a", 3)]
        assert [e.seq for e in log] == [1, 2, 3, 4]
        assert store.stream_version("a") == 3
        assert store.last_seq() == 4
        assert [e.version for e in store.read_stream("a", after_version=1)] == [2, 3]

    @pytest.mark.parametrize("expected", [0, 1, 3])
    def test_a_stale_expected_version_conflicts_and_writes_nothing(
        self, store: EventStore, expected: int
    ) -> None:
        store.append("seed-r-s", [attempt(1), attempt(2)], expected_version=0)
        with pytest.raises(
            StoreConflict, match=r"'seed-r-s'.*version 2.*expected " + str(expected)
        ):
            store.append("seed-r-s", [attempt(9)], expected_version=expected)
        assert store.stream_version("seed-r-s") == 2
        assert store.last_seq() == 2

    def test_no_expected_version_appends_at_the_end(self, store: EventStore) -> None:
        store.append("s", [attempt(1)])
        stored = store.append("s", [attempt(2), attempt(3)], expected_version=None)
        assert [e.version for e in stored] == [2, 3]

    def test_a_batch_writes_several_streams_at_once(self, store: EventStore) -> None:
        stored = store.append_batch(
            [("a", [attempt(1)], 0), ("b", [attempt(1), attempt(2)], None), ("a", [attempt(2)], 1)]
        )
        assert [(e.stream, e.version, e.seq) for e in stored] == [
            ("a", 1, 1),
            ("b", 1, 2),
            ("b", 2, 3),
            ("a", 2, 4),
        ]
        assert store.read_all() == stored

    def test_a_conflicting_stream_in_a_batch_writes_none_of_the_batch(
        self, store: EventStore
    ) -> None:
        store.append("taken", [attempt(1)])
        with pytest.raises(StoreConflict, match="'taken'"):
            store.append_batch([("fresh", [attempt(1), attempt(2)], 0), ("taken", [attempt(2)], 0)])
        assert store.streams() == ["taken"]
        assert store.last_seq() == 1

    @pytest.mark.parametrize(
        ("stream", "expected"), [("", None), ("s", -1)], ids=["empty-stream", "negative-version"]
    )
    def test_bad_arguments_are_refused_before_writing(
        self, store: EventStore, stream: str, expected: int | None
    ) -> None:
        with pytest.raises(ValueError, match="stream"):
            store.append(stream, [attempt(1)], expected_version=expected)
        assert store.last_seq() == 0

    @pytest.mark.parametrize(
        ("after", "limit", "prefix", "types", "expected"),
        [
            (0, None, None, None, [1, 2, 3, 4, 5, 6]),
            (2, None, None, None, [3, 4, 5, 6]),
            (0, 2, None, None, [1, 2]),
            (0, None, "seed-r1-", None, [2, 3, 4]),
            (0, None, "seed-r1_", None, []),  # "_" is a literal, not a LIKE wildcard
            (0, None, "seed-r%", None, [6]),
            (0, None, None, ["CallRecorded"], [3, 5]),
            (0, None, None, ["CallRecorded", "RunStarted"], [1, 3, 5]),
            (3, 1, "seed-", ["CallRecorded", "AttemptStarted"], [4]),
            (0, None, None, [], []),
        ],
    )
    def test_read_all_filters_by_position_stream_and_type(
        self,
        store: EventStore,
        after: int,
        limit: int | None,
        prefix: str | None,
        types: list[str] | None,
        expected: list[int],
    ) -> None:
        store.append("run-r1", [ROUND_TRIP[0]])
        store.append("seed-r1-s1", [ROUND_TRIP[1], call(1), attempt(1)])
        store.append("seed-r2-s1", [call(2)])
        store.append("seed-r%-s1", [attempt(1)])
        got = store.read_all(after, limit, stream_prefix=prefix, types=types)
        assert [e.seq for e in got] == expected

    def test_streams_are_listed_by_prefix(self, store: EventStore) -> None:
        for name in ["seed-r1-b", "run-r1", "seed-r1-a", "seed-r2-a"]:
            store.append(name, [attempt(1)])
        assert store.streams() == ["run-r1", "seed-r1-a", "seed-r1-b", "seed-r2-a"]
        assert store.streams("seed-r1-") == ["seed-r1-a", "seed-r1-b"]

    def test_follow_yields_late_events_in_order_and_stops(self, store: EventStore) -> None:
        store.append("s", [attempt(1)])
        done = threading.Event()
        got: queue.Queue[StoredEvent] = queue.Queue()

        def follower() -> None:
            for stored in store.follow(0, poll_s=0.005, stop=done.is_set):
                got.put(stored)

        thread = threading.Thread(target=follower)
        thread.start()
        assert got.get(timeout=30).seq == 1
        store.append("t", [attempt(1), attempt(2)])
        assert [got.get(timeout=30).seq for _ in range(2)] == [2, 3]
        store.append("s", [attempt(2)])
        done.set()  # set right after the append: the follower still hands that event over
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert [got.get_nowait().seq for _ in range(got.qsize())] == [4]

    def test_follow_starts_after_the_given_seq(self, store: EventStore) -> None:
        store.append("s", [attempt(n) for n in range(1, 6)])
        seen = [e.seq for e in store.follow(3, poll_s=0.001, stop=lambda: True)]
        assert seen == [4, 5]

    def test_racing_writers_on_one_stream_each_win_a_distinct_version(
        self, store: EventStore
    ) -> None:
        writers, wins_each = 6, 8
        won: list[tuple[int, int]] = []
        won_lock = threading.Lock()
        failures: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                mine = 0
                while mine < wins_each:
                    seen = store.stream_version("seed-r-shared")
                    try:
                        out = store.append(
                            "seed-r-shared", [attempt(w * 100 + mine)], expected_version=seen
                        )
                    except StoreConflict:
                        continue
                    with won_lock:
                        won.append((out[0].version, w))
                    mine += 1
            except BaseException as exc:  # surfaced to the test thread below
                failures.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        total = writers * wins_each
        assert sorted(v for v, _ in won) == list(range(1, total + 1))
        log = store.read_stream("seed-r-shared")
        assert [e.version for e in log] == list(range(1, total + 1))
        payloads = sorted(e.data["attempt"] for e in log)
        assert payloads == sorted(w * 100 + i for w in range(writers) for i in range(wins_each))

    def test_a_follower_sees_every_event_once_in_order_under_concurrent_appends(
        self, store: EventStore
    ) -> None:
        writers, appends_each = 6, 25
        done = threading.Event()
        seen: list[int] = []
        failures: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                for i in range(appends_each):
                    events = [attempt(i), call(i)][: 1 + (i % 2)]
                    if i % 3 == 0:  # some batches span two streams in one transaction
                        store.append_batch([(f"w{w}", events, None), ("shared", events, None)])
                    else:
                        store.append(f"w{w}", events)
            except BaseException as exc:
                failures.append(exc)

        def follower() -> None:
            seen.extend(e.seq for e in store.follow(0, poll_s=0.001, stop=done.is_set))

        watcher = threading.Thread(target=follower)
        watcher.start()
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        watcher.join(timeout=60)
        assert failures == []
        last = store.last_seq()
        # Contiguous and in order: a seq passed over and filled later would show as a gap.
        assert seen == list(range(1, last + 1))
        assert [e.seq for e in store.read_all()] == seen

    def test_upcasters_bring_old_stored_schemas_to_the_current_class(
        self, store: EventStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def from_schema_0(data: dict[str, Any]) -> dict[str, Any]:
            data = dict(data)
            data["reason"] = data.pop("why")
            return data

        monkeypatch.setitem(UPCASTERS, ("SeedStopped", 0), from_schema_0)
        (stored,) = store.append("seed-r-s", [LegacySeedStopped(seed_id="s", why="provider")])
        assert (stored.type, stored.schema, stored.data) == (
            "SeedStopped",
            0,
            {"seed_id": "s", "why": "provider"},
        )
        (read,) = store.read_stream("seed-r-s")
        assert read.event() == SeedStopped(seed_id="s", reason="provider")


class TestSqliteEventStore(EventStoreContract):
    """SQLite file in WAL mode."""

    def make_store(self, tmp_path: Path) -> EventStore:
        return SqliteEventStore(tmp_path / "playlisteval.db")

    def test_reopening_the_file_keeps_everything(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        before = store.append_batch([("a", [attempt(1), call(1)], 0), ("b", ROUND_TRIP, 0)])
        store.close()
        again = open_event_store(tmp_path / "playlisteval.db")
        assert again.read_all() == before
        assert again.append("a", [attempt(2)], expected_version=2)[0].seq == len(before) + 1
        again.close()

    def test_the_events_table_sits_beside_other_tables_in_one_file(self, tmp_path: Path) -> None:
        db = tmp_path / "playlisteval.db"
        engine = create_engine(f"sqlite:///{db}")
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE videos (id TEXT PRIMARY KEY)")
        engine.dispose()
        store = open_event_store(f"sqlite:///{db}")
        store.append("s", [attempt(1)])
        store.close()
        engine = create_engine(f"sqlite:///{db}")
        with engine.connect() as conn:
            tables = {
                r[0]
                for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")
            }
        engine.dispose()
        assert tables == {"videos", "events", "stream_heads", "store_meta"}


@pytest.mark.postgres
class TestPostgresEventStore(EventStoreContract):
    """PostgreSQL, each test in a schema of its own that is dropped afterwards."""

    schema: str | None = None

    def make_store(self, tmp_path: Path) -> EventStore:
        if self.schema is None:
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

    def test_reopening_the_schema_keeps_everything(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        before = store.append_batch([("a", [attempt(1), call(1)], 0), ("b", ROUND_TRIP, 0)])
        store.close()
        again = self.make_store(tmp_path)
        assert isinstance(again, PostgresEventStore)
        assert again.read_all() == before
        again.close()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("mysql://me@host/db", "unknown event store"),
        ("sqlite:///:memory:", "needs a SQLite file"),
        ("postgresql://postgres@127.0.0.1:1/test", "pg_ctlcluster --skip-systemctl-redirect"),
    ],
    ids=["unknown-scheme", "sqlite-memory", "postgres-down"],
)
def test_an_unusable_store_address_says_what_to_do(target: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_event_store(target)


def test_a_schema_name_that_is_not_an_identifier_is_refused() -> None:
    with pytest.raises(ConfigError, match="'x; drop table events'"):
        PostgresEventStore(PG_URL, schema="x; drop table events")


def test_an_event_store_path_is_sqlite(tmp_path: Path) -> None:
    store = open_event_store(str(tmp_path / "sub" / "ev.db"))
    assert isinstance(store, SqliteEventStore)
    assert (tmp_path / "sub" / "ev.db").exists()
    store.close()


@pytest.mark.parametrize(
    ("which", "account"), [("run", None), ("seed", None), ("account", "daemon")]
)
def test_a_schema_1_refusal_reads_whose_cap_refused_it_from_its_reason(
    which: Literal["run", "seed", "account"], account: str | None
) -> None:
    """``CallRefused`` schema 1 said whose cap refused only in its reason; read today, its
    ``cap`` is the one that reason names (worded as the budget words it)."""
    reason = str(
        BudgetExhausted(
            seed_id="s1",
            needed_micros=10,
            left_micros=1,
            cap_micros=5,
            which=which,
            account=account,
        )
    )
    data = {"key": "k", "role": "r", "model": "m", "needed_micros": 10, "reason": reason}
    event = decode_event("CallRefused", 1, data)
    assert isinstance(event, CallRefused)
    assert event.cap == which
    assert event.schema_version == 2
