"""A run's audit, and the newest run."""

from __future__ import annotations

from agents.audit import Audit, audit_run
from playlisteval.app import (
    App,
)
from store.errors import ConfigError
from store.eventstore import EventStore
from store.runlog import run_ids


def audit(
    app: App,
    run_id: str | None = None,
    seed_id: str | None = None,
    *,
    store: EventStore | None = None,
) -> Audit:
    """Run ``run_id``'s audit (the newest run's when None) from the workspace's log, unless
    ``store`` is given (a rehearsal's scratch log)."""
    store = store or app.events
    return audit_run(store, _newest_run(store) if run_id is None else run_id, seed_id)


def latest_run(app: App) -> str:
    """The newest run in the log; ConfigError when there is none."""
    return _newest_run(app.events)


def _newest_run(store: EventStore) -> str:
    found = run_ids(store)
    if not found:
        raise ConfigError("no run in the log yet: run `playlisteval curate` first")
    return found[-1]
