"""Reading a run's own stream: which runs there are, how one started, what cap it has now,
and which seeds runs have taken."""

from __future__ import annotations

from collections.abc import Iterable

from store.errors import ConfigError
from store.events import (
    AnyEvent,
    ItemAccepted,
    RunFinished,
    RunStarted,
    SeedDiscarded,
    SeedStarted,
    SeedStopped,
    run_stream,
    seed_stream,
)
from store.eventstore import EventStore
from store.ledger import LEDGER_OMITS as LEDGER_OMITS  # handed on: the omit tests read it
from store.ledger import Ledger, current_cap, stream_spend


def run_ids(store: EventStore) -> list[str]:
    """Every run in the log, oldest first."""
    return sorted(s[len("run-") :] for s in store.streams("run-"))


def run_started(store: EventStore, run_id: str) -> RunStarted:
    """The run's first event; ConfigError (naming the recent runs) when there is no such run."""
    stored = store.read_stream(run_stream(run_id))
    if not stored:
        known = ", ".join(run_ids(store)[-5:]) or "none yet"
        raise ConfigError(f"no run {run_id!r} in the log (recent runs: {known})")
    first = stored[0].event()
    if not isinstance(first, RunStarted):
        raise ConfigError(
            f"run {run_id!r} does not begin with RunStarted (it begins with {stored[0].type!r}); "
            "check the log with `playlisteval store verify`"
        )
    return first


def run_cap(store: EventStore, run_id: str) -> int | None:
    """The run's cap now: its ``RunStarted`` budget, or the last ``RunResumed`` one."""
    return current_cap(s.event() for s in store.read_stream(run_stream(run_id)))


def seeds_in_runs(store: EventStore) -> set[str]:
    """Every seed some run has taken (its ``RunStarted`` lists it): single-process runs and the
    fleet's alike."""
    taken: set[str] = set()
    for stored in store.read_all(types=["RunStarted"]):
        taken.update(stored.data.get("seeds", ()))
    return taken


def seeds_spend(store: EventStore, run_id: str) -> Ledger:
    """The one ledger over the run's seed streams (what ``runs`` shows it spent):
    :func:`store.ledger.stream_spend` of their prefix, read without the calls' responses
    through the streams' index, so what ``runs`` and ``status`` pay per run stays the run's
    calls, not the log's."""
    return stream_spend(store, seed_stream(run_id, ""))


def run_end(run_id: str, events: Iterable[tuple[str, AnyEvent]], spent_micros: int) -> RunFinished:
    """The run's end as its seeds' logs say it: how many were accepted, discarded and stopped
    (each seed by its last state), ``budget`` when a cap stopped one, and what the ledger says it
    spent. One rule for the single-process run, the fleet and strict replay."""
    last: dict[str, AnyEvent] = {}
    for seed_id, event in events:
        if isinstance(event, ItemAccepted | SeedDiscarded | SeedStopped | SeedStarted):
            last[seed_id] = event
    ends = list(last.values())
    budget = any(isinstance(e, SeedStopped) and e.reason == "budget" for e in ends)
    return RunFinished(
        run_id=run_id,
        outcome="budget" if budget else "completed",
        spent_micros=spent_micros,
        accepted=sum(isinstance(e, ItemAccepted) for e in ends),
        discarded=sum(isinstance(e, SeedDiscarded) for e in ends),
        stopped=sum(isinstance(e, SeedStopped) for e in ends),
    )
