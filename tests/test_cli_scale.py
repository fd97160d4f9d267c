"""What keeps `runs`, `audit` and `status` fast on a campaign's log, read back as it was written:
a stream prefix read through the streams' index means exactly "starts with" (case, LIKE's
wildcards and the escape character included), reads that leave a key out leave only that key
out, the run's spend read without the responses is the one ledger's, and the events read by
the SQLite fast path are the ones the store appended. (How fast is bench/cli_scale.py's.)"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from store.events import (
    CallFailed,
    CallRecorded,
    CallReserved,
    SeedStarted,
    SeedStopped,
    seed_stream,
)
from store.eventstore import EventStore, SqliteEventStore
from store.ledger import stream_spend
from store.runlog import LEDGER_OMITS, seeds_spend

# Streams whose names hold what a LIKE pattern treats specially (``_``, ``%``, the ``/`` the
# store escapes with), other cases, and characters past ASCII.
STREAMS = [
    "seed-r1-a",
    "seed-r1-b",
    "seed-r10-a",
    "seed-r1_x",
    "seed-r1%x",
    "seed-r1/x",
    "Seed-r1-a",
    "SEED-R1-A",
    "seed-r1-é",
    "seed-r1-\U0001f600",
    "seed-r1.",
    "seed-r2-a",
    "run-r1",
]
PREFIXES = [
    *("seed-r1-", "seed-r1", "seed-r1_", "seed-r1%", "seed-r1/", "Seed-", "seed-r1-é"),
    *("s", ""),
]


def started(seed: str) -> SeedStarted:
    return SeedStarted(run_id="r", seed_id=seed, domain="d", segment_a="a", segment_b="b")


@pytest.fixture
def store(event_store: EventStore) -> EventStore:
    """The streams above, twice each, in a real SQLite and the real PostgreSQL store."""
    for n, stream in enumerate(STREAMS * 2):
        event_store.append(stream, [started(f"{n}")])
    return event_store


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_prefix_read_holds_exactly_the_streams_that_start_with_it(
    store: EventStore, prefix: str
) -> None:
    everything = store.read_all()
    expected = [e for e in everything if e.stream.startswith(prefix)]
    assert store.read_all(stream_prefix=prefix) == expected
    assert store.streams(prefix) == sorted({e.stream for e in expected})


def test_a_prefix_read_of_some_types_keeps_seq_order_and_after_seq(
    store: EventStore,
) -> None:
    store.append("seed-r1-a", [SeedStopped(seed_id="a", reason="budget")])
    store.append("seed-r2-a", [SeedStopped(seed_id="a", reason="budget")])
    found = store.read_all(stream_prefix="seed-r1-", types=["SeedStopped", "SeedStarted"])
    assert [e.seq for e in found] == sorted(e.seq for e in found)
    assert [e.type for e in found][-1] == "SeedStopped"
    later = store.read_all(found[2].seq, stream_prefix="seed-r1-", types=["SeedStarted"])
    assert later == [e for e in found[3:] if e.type == "SeedStarted"]


def test_events_read_back_are_the_ones_appended(tmp_path: Path) -> None:
    when = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)
    opened = SqliteEventStore(tmp_path / "events.db", clock=lambda: when)
    try:
        data = {"unicode": "é \U0001f600", "big": 2**70, "nested": {"z": [1, 2.5, None]}}
        event = CallRecorded(
            call_id="s:1", key="k", role="judge", model="m", response=data, cost_micros=5,
            offline=True,
        )  # fmt: skip
        appended = opened.append(seed_stream("r1", "s"), [event])
        assert opened.read_all() == appended
        assert opened.read_stream(seed_stream("r1", "s")) == appended
        (read,) = opened.read_all()
        assert read.recorded_at == when
        assert read.recorded_at.tzinfo is not None
        assert read.event() == event
    finally:
        opened.close()


def test_omit_leaves_out_only_the_keys_it_names(store: EventStore) -> None:
    call = CallRecorded(
        call_id="s:1", key="k", role="judge", model="m", response={"parts": ["x" * 500]},
        cost_micros=7, offline=True,
    )  # fmt: skip
    (written,) = store.append("seed-r1-a", [call])
    (read,) = store.read_all(written.seq - 1, omit=LEDGER_OMITS)
    assert "response" in written.data
    assert read.data == {k: v for k, v in written.data.items() if k != "response"}
    assert (read.seq, read.stream, read.type, read.hash) == (
        written.seq,
        written.stream,
        written.type,
        written.hash,
    )


@pytest.mark.parametrize("key", ["response')", "a.b", "", "$"])
def test_omit_refuses_what_is_no_key_name(store: EventStore, key: str) -> None:
    with pytest.raises(ValueError, match="omit names data keys"):
        store.read_all(omit=[key])


def test_a_runs_spend_read_without_responses_is_the_one_ledgers(tmp_path: Path) -> None:
    opened = SqliteEventStore(tmp_path / "events.db")
    try:
        for seed, cost in (("s1", 11), ("s2", 13), ("s_3", 17)):
            stream = seed_stream("r1", seed)
            opened.append(stream, [started(seed)])
            for n in range(3):
                call = f"{seed}:{n}"
                opened.append(
                    stream,
                    [
                        CallReserved(call_id=call, key=call, role="judge", model="m",
                                     reserved_micros=100),
                        CallRecorded(call_id=call, key=call, role="judge", model="m",
                                     response={"text": "y" * 300}, cost_micros=cost * (n + 1),
                                     offline=True, usage={"video": 5}),
                    ],
                )  # fmt: skip
            open_call = f"{seed}:open"
            opened.append(
                stream,
                [
                    CallReserved(call_id=open_call, key="o", role="gen", model="m",
                                 reserved_micros=40),
                    CallFailed(call_id=f"{seed}:f", key="f", role="gen", model="m", error="500",
                               charged_micros=3),
                ],
            )  # fmt: skip
        # Another run whose id starts like this one's must not count.
        opened.append(
            seed_stream("r10", "s1"),
            [CallReserved(call_id="x:1", key="x", role="judge", model="m", reserved_micros=999)],
        )
        ledger = seeds_spend(opened, "r1")
        assert ledger == stream_spend(opened, seed_stream("r1", ""))
        assert ledger.spent_micros == 6 * (11 + 13 + 17) + 3 * (40 + 3)
    finally:
        opened.close()
