"""Reading a run's own stream: which runs there are, how one started, what cap it has now,
and which seeds runs have taken."""

from __future__ import annotations

from store.errors import ConfigError
from store.events import RunStarted, run_stream
from store.eventstore import EventStore
from store.ledger import current_cap


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
