"""A check made while another process appends (``runs`` or ``status`` beside a running curation or
the daemon) judges the log up to the last event it walked: it finds no problem in a log nobody
tampered with, and the checkpoint it leaves beside the key is that event's seq with that event's
own link — never a later seq with an earlier link, which would make every later quick check
report the log rewritten. Seeded random interleavings, on SQLite and the real PostgreSQL."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from store.chain import HeadFile, read_log_key
from store.events import CapSet
from store.eventstore import EVENTS, EventStore, open_event_store
from tests.conftest import PG_URL


@pytest.fixture(params=["sqlite", "postgres"])
def keyed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[EventStore, Path]]:
    key_file = tmp_path / "log.key"
    key = read_log_key(key_file, create=True)
    if request.param == "sqlite":
        url: str | Path = tmp_path / "events.db"
        schema = None
    else:
        url, schema = PG_URL, request.getfixturevalue("pg_schema")
    opened = open_event_store(url, schema=schema, key=key, key_file=key_file)
    yield opened, key_file
    opened.close()


def _link_at(store: EventStore, seq: int) -> str:
    # The stored row itself (its table as the store declares it), not the store's reading.
    with store._engine.connect() as conn:
        found = conn.execute(select(EVENTS.c.link).where(EVENTS.c.seq == seq))
        return str(found.scalar_one())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_checks_beside_a_writer_find_nothing_and_leave_a_true_checkpoint(
    keyed: tuple[EventStore, Path], seed: int
) -> None:
    store, key_file = keyed
    rng = random.Random(seed)
    streams = [f"eval-{n}" for n in range(4)]
    for stream in streams:
        store.append(stream, [CapSet(cap_micros=1, command="start")])
    stop = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        writer_rng = random.Random(seed * 7919)
        try:
            while not stop.is_set():
                stream = writer_rng.choice(streams)
                batch = [CapSet(cap_micros=n, command="w") for n in range(writer_rng.randint(1, 3))]
                store.append(stream, batch)
        except BaseException as exc:  # surfaced in the test's thread
            failures.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        for _ in range(12):
            quick = rng.random() < 0.75
            found = store.check(quick=quick)
            assert not found.problems, [str(p) for p in found.problems]
            head = HeadFile(key_file).get(store._log_id or "")
            assert head is not None
            if head.verified_seq:
                assert _link_at(store, head.verified_seq) == head.verified_link
    finally:
        stop.set()
        writer.join(timeout=30)
    assert not failures, failures
    # Quiet now: a full check and a quick one from the checkpoint agree, and find nothing.
    assert not store.check().problems
    assert not store.check(quick=True).problems
