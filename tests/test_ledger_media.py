"""The ledger's ``media`` dimension: spend told by what the calls carried (video or images, sound,
text), folded by the same rules as every other figure — its parts add up to the total, an
answer served from the log counts 0 in it, and a call with no answer in the log (an open
reservation, a charged failure) is ``-``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.audit import audit_run
from store.events import (
    CallFailed,
    CallRecorded,
    CallReserved,
    Event,
    RunStarted,
    run_stream,
    seed_stream,
)
from store.eventstore import open_event_store
from store.ledger import DIMENSIONS, MEDIA, NONE_KEY, LedgerFold, media_of, spend


def _reserve(call: str, micros: int) -> CallReserved:
    return CallReserved(
        call_id=call, key="k" + call, role="judge", model="m", gate="g", reserved_micros=micros
    )


def _record(call: str, cost: int, usage: dict[str, int], *, replayed: bool = False) -> Event:
    return CallRecorded(
        call_id=call,
        key="k" + call,
        role="judge",
        model="m",
        gate="g",
        response={},
        cost_micros=cost,
        offline=True,
        replayed=replayed,
        usage=usage,
    )


def _fail(call: str, charged: int) -> CallFailed:
    return CallFailed(
        call_id=call, key="k" + call, role="judge", model="m", gate="g", error="500",
        charged_micros=charged,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("usage", "media"),
    [
        ({"video": 1400, "text": 300, "output": 90}, "video"),
        ({"image": 2240, "text": 300}, "video"),
        ({"video": 700, "audio": 900}, "video"),  # pictures with sound: a video call
        ({"audio": 900, "text": 300}, "audio"),
        ({"text": 300, "output": 90, "cached": 100}, "text"),
        ({"video": 0, "image": 0, "text": 5}, "text"),  # a kind counted as zero carried nothing
        ({}, "text"),
    ],
)
def test_a_call_is_a_video_audio_or_text_call_by_its_recorded_usage(
    usage: dict[str, int], media: str
) -> None:
    assert media_of(usage) == media


def test_the_media_of_a_log_each_call_by_its_answer_a_call_without_one_as_none() -> None:
    log = [
        _reserve("p:1", 900),
        _record("p:1", 400, {"video": 1400, "text": 100}),
        _reserve("p:2", 300),
        _record("p:2", 30, {"text": 100}),
        _record("p:3", 400, {"video": 1400}, replayed=True),  # served again: free
        _reserve("p:4", 200),
        _fail("p:4", 50),  # charged, no usage: which media is unknown
        _reserve("p:5", 700),  # a crash: open, counted once
        _reserve("q:1", 100),
        _record("q:1", 60, {"audio": 900, "text": 10}),
    ]
    ledger = spend(log)
    assert ledger.breakdown("media") == {NONE_KEY: 750, "audio": 60, "text": 30, "video": 400}
    assert ledger.spent_micros == 1240


# -- the fold's rules hold for the new dimension on any log ---------------------------------------

_USAGES = st.sampled_from(
    [{"video": 1400, "text": 10}, {"image": 280}, {"audio": 900}, {"text": 30}, {}]
)


@st.composite
def _logs(draw: st.DrawFn) -> list[Event]:
    """A log of calls, each reserved or not, then answered (first-hand or from the log),
    failed (charged or not) or left open, in a shuffled order of calls."""
    log: list[Event] = []
    for n in range(draw(st.integers(0, 12))):
        call = f"{draw(st.sampled_from(['p', 'q', 'r']))}:{n + 1}"
        if draw(st.booleans()):
            log.append(_reserve(call, draw(st.integers(1, 5000))))
        end = draw(st.sampled_from(["paid", "replayed", "failed", "open"]))
        cost = draw(st.integers(0, 5000))
        if end in ("paid", "replayed"):
            log.append(_record(call, cost, draw(_USAGES), replayed=end == "replayed"))
        elif end == "failed":
            log.append(_fail(call, draw(st.sampled_from([0, cost]))))
    return log


def _without_replays(log: list[Event]) -> list[Event]:
    """The log with every answer served from the log taken out, and its reservation too."""
    replayed = {e.call_id for e in log if isinstance(e, CallRecorded) and e.replayed}
    kept = (CallReserved, CallRecorded)
    return [e for e in log if not (isinstance(e, kept) and e.call_id in replayed)]


@settings(max_examples=200, deadline=None)
@given(_logs())
def test_every_dimension_adds_up_to_the_spend_and_a_replayed_call_counts_nothing_in_media(
    log: list[Event],
) -> None:
    ledger = spend(log)
    for dimension in DIMENSIONS:
        assert sum(ledger.breakdown(dimension).values()) == ledger.spent_micros, dimension
    assert set(ledger.breakdown("media")) <= {*MEDIA, NONE_KEY}
    # Video is exactly the first-hand answers that carried pictures.
    video = sum(
        e.cost_micros
        for e in log
        if isinstance(e, CallRecorded) and not e.replayed and media_of(e.usage) == "video"
    )
    assert ledger.breakdown("media").get("video", 0) == video
    # An answer served from the log adds nothing to any media (nor does its reservation, which
    # it closes): the log without them breaks down the same.
    assert spend(_without_replays(log)).breakdown("media") == ledger.breakdown("media")


@settings(max_examples=100, deadline=None)
@given(_logs())
def test_what_the_fold_settles_per_event_adds_up_to_the_settled_total(log: list[Event]) -> None:
    """The audit's per-call figures are the fold's own (a replayed call 0, a failure what it was
    charged): summed over the log they are the ledger's settled spend."""
    fold = LedgerFold()
    settled = sum(fold.apply_event(event) for event in log)
    assert settled == fold.ledger().settled_micros


def test_the_audit_reads_every_figure_from_the_fold(tmp_path: Path) -> None:
    """A run's audit: a replayed call's step costs 0, a failure's its charge, the spend by media
    is the ledger's, and ``--json`` carries it."""
    store = open_event_store(tmp_path / "log.db")
    try:
        store.append(
            run_stream("r"),
            [
                RunStarted(
                    run_id="r",
                    seeds=("s",),
                    budget_micros=None,
                    max_attempts=6,
                    concurrency=1,
                    offline=True,
                )
            ],
        )
        log = [
            _reserve("s:1", 900),
            _record("s:1", 400, {"video": 1400}),
            _record("s:2", 400, {"video": 1400}, replayed=True),
            _reserve("s:3", 300),
            _fail("s:3", 70),
            _reserve("s:4", 90),
            _record("s:4", 20, {"text": 9}),
        ]
        store.append(seed_stream("r", "s"), log)
        audit = audit_run(store, "r")
    finally:
        store.close()
    (seed,) = audit.seeds
    costs = [
        (step["step"], step.get("cost_micros", step.get("charged_micros"))) for step in seed.steps
    ]
    assert costs == [("call", 400), ("call", 0), ("call failed", 70), ("call", 20)]
    assert audit.by_media == spend(log).breakdown("media") == {"-": 70, "text": 20, "video": 400}
    assert audit.to_json()["spend"]["media"] == audit.by_media
    assert audit.spent_micros == sum(audit.by_media.values()) == 490
