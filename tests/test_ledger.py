"""The one ledger: a table of logs — paid, replayed, crashed, resumed, failed — and what each
spent, by the rule every reader uses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from store.events import (
    CallBatched,
    CallFailed,
    CallRecorded,
    CallReserved,
    Event,
    encode_event,
)
from store.eventstore import StoredEvent
from store.ledger import LedgerFold, spend

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def reserve(call: str, micros: int, *, role: str = "judge", gate: str = "blind") -> CallReserved:
    return CallReserved(
        call_id=call, key="k" + call, role=role, model="m", phase=1, gate=gate,
        reserved_micros=micros,
    )  # fmt: skip


def record(call: str, cost: int, *, replayed: bool = False, role: str = "judge") -> CallRecorded:
    return CallRecorded(
        call_id=call, key="k" + call, role=role, model="m", phase=1, gate="blind", response={},
        cost_micros=cost, offline=True, replayed=replayed,
    )  # fmt: skip


def fail(call: str, charged: int, outcome: str = "error") -> CallFailed:
    return CallFailed(
        call_id=call, key="k" + call, role="judge", model="m", phase=1, gate="blind",
        error="500", charged_micros=charged, outcome=outcome,  # type: ignore[arg-type]
    )  # fmt: skip


# (name, log, settled, open, replayed, spent per owner)
CASES: list[tuple[str, list[Event], int, int, int, dict[str, int]]] = [
    ("a paid call", [reserve("s:1", 900), record("s:1", 400)], 400, 0, 0, {"s": 400}),
    (
        "an answer served again from the log costs nothing now",
        [reserve("s:1", 900), record("s:1", 400), record("s:2", 400, replayed=True)],
        400,
        0,
        400,
        {"s": 400},
    ),
    (
        "a crash leaves a reservation with no answer: spent, once",
        [reserve("s:1", 900), record("s:1", 400), reserve("s:2", 700)],
        400,
        700,
        0,
        {"s": 1100},
    ),
    (
        "resumed after the crash: the orphan stays counted, the redo is paid",
        [reserve("s:1", 700), reserve("s:2", 700), record("s:2", 300)],
        300,
        700,
        0,
        {"s": 1000},
    ),
    (
        "a charged failure counts once, an uncharged one not at all",
        [reserve("s:1", 900), fail("s:1", 250), reserve("s:2", 900), fail("s:2", 0)],
        250,
        0,
        0,
        {"s": 250},
    ),
    (
        "an interrupted call is charged at its reservation",
        [reserve("s:1", 900), fail("s:1", 900, "interrupted")],
        900,
        0,
        0,
        {"s": 900},
    ),
    (
        "a call out in a batch job is open until its answer is collected",
        [
            reserve("s:1", 600),
            CallBatched(
                call_id="s:1", key="ks:1", role="judge", model="m", custom_id="s:1", batch={}
            ),
        ],
        0,
        600,
        0,
        {"s": 600},
    ),
    (
        "the batch answer collected after a restart settles the same call id",
        [
            reserve("s:1", 600),
            CallBatched(
                call_id="s:1", key="ks:1", role="judge", model="m", custom_id="s:1", batch={}
            ),
            record("s:1", 150),
        ],
        150,
        0,
        0,
        {"s": 150},
    ),
    (
        "owners are the call ids' (owners may hold colons)",
        [
            reserve("p/j:c/o:1", 10),
            record("p/j:c/o:1", 10),
            reserve("t:2", 5),
            record("t:2", 5),
        ],
        15,
        0,
        0,
        {"p/j:c/o": 10, "t": 5},
    ),
]


@pytest.mark.parametrize(
    ("log", "settled", "open_", "replayed", "owners"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_the_ledger_of_a_log(
    log: list[Event], settled: int, open_: int, replayed: int, owners: dict[str, int]
) -> None:
    ledger = spend(log)
    assert (ledger.settled_micros, ledger.open_micros, ledger.replayed_micros) == (
        settled,
        open_,
        replayed,
    )
    assert ledger.spent_micros == settled + open_
    assert dict(ledger.per_owner) == owners
    for dimension in ("phase", "gate", "role", "model"):
        assert sum(ledger.breakdown(dimension).values()) == ledger.spent_micros


def _stored(log: list[tuple[str, Event]]) -> list[StoredEvent]:
    versions: dict[str, int] = {}
    out = []
    for seq, (stream, event) in enumerate(log, start=1):
        versions[stream] = versions.get(stream, 0) + 1
        type_, schema, data = encode_event(event)
        out.append(StoredEvent(seq, stream, versions[stream], type_, schema, data, T0))
    return out


def test_stored_and_typed_events_fold_alike() -> None:
    for _name, log, *_ in CASES:
        assert spend(_stored([("a", e) for e in log])) == spend(log)


def test_one_streams_answer_does_not_close_anothers_reservation() -> None:
    """Two evaluations may both have an owner named ``p:1``: keyed by stream, each keeps its own."""
    log = _stored([("eval-1", reserve("p:1", 50)), ("eval-2", record("p:1", 20))])
    ledger = spend(log)
    assert (ledger.open_micros, ledger.settled_micros) == (50, 20)


def test_the_incremental_fold_equals_the_whole_fold_at_every_point() -> None:
    log = [e for _, events, *_ in CASES for e in events]
    fold = LedgerFold()
    for n, event in enumerate(log, start=1):
        fold.apply_event(event)
        assert fold.ledger() == spend(log[:n])
        assert fold.spent_micros == fold.ledger().spent_micros
