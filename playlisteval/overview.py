"""What a workspace holds, for ``playlisteval runs`` and ``status``: its curation runs (when each
started, where it stands, what it accepted and spent against its cap, offline or live), the
benchmarks exported under it and how far their human annotation has come.

Each row is a pure function of what the log, the coordination tables and the export folders say
(:func:`run_row`, :func:`annotation_row`); the readers around them only gather that.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from playlisteval.app import App
from store.errors import PlaylistEvalError
from store.events import (
    AnyEvent,
    RunFinished,
    RunResumed,
    RunStarted,
    run_stream,
    seed_stream,
)
from store.eventstore import StoredEvent
from store.ledger import current_cap
from store.runlog import run_end, run_ids, seeds_spend

#: The seed events that say where a seed ended (the last one of a seed stands).
SEED_ENDS = ["SeedStarted", "ItemAccepted", "SeedDiscarded", "SeedStopped"]
#: What a finished run's outcome reads as.
OUTCOMES = {
    "completed": "completed",
    "budget": "stopped by its cap",
    "interrupted": "interrupted",
}


@dataclass(frozen=True)
class RunRow:
    """One curation run as ``playlisteval runs`` lists it."""

    run_id: str
    started: datetime
    state: str
    seeds: int
    accepted: int
    discarded: int
    stopped: int
    spent_micros: int
    cap_micros: int | None
    offline: bool
    finished: bool
    real_local: tuple[str, ...] = ()  # its models that are real ones run on this machine

    @property
    def mode(self) -> str:
        """``offline`` or ``live``, and ``+ real local model`` when a real model run on this
        machine answered as one of its models (in an offline run too: not the harness)."""
        mode = "offline" if self.offline else "live"
        return f"{mode} + real local model" if self.real_local else mode

    @property
    def resumable(self) -> bool:
        """Whether ``curate --run`` has something to pick up: a run that is neither finished
        nor worked on now, or one a cap stopped."""
        return self.state in ("unfinished", OUTCOMES["budget"])


def run_state(
    lifecycle: Sequence[AnyEvent], holder: str | None, open_items: int
) -> tuple[str, bool]:
    """Where a run stands, and whether it is finished: the outcome of its last ``RunFinished``
    unless a ``RunResumed`` came after it; else ``running`` while a process holds its lease,
    ``queued`` while the shared queue holds its seeds, ``unfinished`` otherwise (killed or
    stopped before its end: ``curate --run`` resumes it)."""
    last = next((e for e in reversed(lifecycle) if isinstance(e, RunFinished | RunResumed)), None)
    if isinstance(last, RunFinished):
        return OUTCOMES.get(last.outcome, last.outcome), True
    if holder is not None:
        return f"running ({holder})", False
    if open_items:
        return f"queued ({open_items} open)", False
    return "unfinished", False


def run_row(
    run_id: str,
    run_events: Sequence[StoredEvent],
    seed_events: Iterable[tuple[str, AnyEvent]],
    spent_micros: int,
    holder: str | None = None,
    open_items: int = 0,
) -> RunRow:
    """A run's row from its own stream (``RunStarted`` first), its seeds' end events (seed id,
    event) and what the ledger says it spent."""
    lifecycle = [s.event() for s in run_events]
    started = lifecycle[0]
    if not isinstance(started, RunStarted):
        raise PlaylistEvalError(
            f"run {run_id!r} does not begin with RunStarted: check the log with "
            "`playlisteval store verify`"
        )
    ends = run_end(run_id, seed_events, spent_micros)
    state, finished = run_state(lifecycle, holder, open_items)
    return RunRow(
        run_id=run_id,
        started=run_events[0].recorded_at,
        state=state,
        seeds=len(started.seeds),
        accepted=ends.accepted,
        discarded=ends.discarded,
        stopped=ends.stopped,
        spent_micros=spent_micros,
        cap_micros=current_cap(lifecycle),
        offline=started.offline,
        finished=finished,
        real_local=real_local_models_of(started),
    )


def real_local_models_of(started: RunStarted) -> tuple[str, ...]:
    """The run's models that its recorded traffic facts mark as real local models."""
    traffic = started.settings.get("traffic")
    if not isinstance(traffic, dict):
        return ()
    return tuple(
        sorted(
            m for m, facts in traffic.items() if isinstance(facts, dict) and facts.get("real_local")
        )
    )


def _holder(app: App, run_id: str) -> str | None:
    """Who holds the run's lease now (a live ``curate``), or None."""
    from agents.ownership import run_lease  # not at import: `status` starts light

    found = app.leases().holder(run_lease(run_id))
    return None if found is None else str(found["owner"])


def list_runs(app: App) -> list[RunRow]:
    """Every curation run in the workspace's log, oldest first."""
    rows = []
    queue = app.queue()
    for run_id in run_ids(app.events):
        stream = app.events.read_stream(run_stream(run_id))
        if not stream:
            continue
        prefix = seed_stream(run_id, "")
        seeds = [
            (s.stream[len(prefix) :], s.event())
            for s in app.events.read_all(stream_prefix=prefix, types=SEED_ENDS)
        ]
        spent = seeds_spend(app.events, run_id).spent_micros
        rows.append(
            run_row(run_id, stream, seeds, spent, _holder(app, run_id), queue.open_items(run_id))
        )
    return rows


# -- benchmarks and their annotations ------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkRow:
    """An export found under the workspace's ``exports`` folder."""

    path: Path
    pairs: int
    content_sha256: str
    runs: tuple[str, ...]
    offline_pairs: int


@dataclass(frozen=True)
class AnnotationRow:
    """How far one benchmark's human annotation has come (its ``annotations-…`` stream)."""

    stream: str
    sample: int
    invited: int
    joined: int
    answers: int  # standing answers given, on the pairs assigned to whoever gave them
    assigned: int  # answers the design asks for in all (each pair times its annotators)
    benchmark: Path | None  # the export it labels, when it lies under the workspace

    @property
    def share_done(self) -> float:
        """Answers given of those asked for (0 when none is asked for yet)."""
        return self.answers / self.assigned if self.assigned else 0.0


def find_benchmarks(exports: Path) -> list[BenchmarkRow]:
    """Every export (a folder with ``benchmark.json``) under ``exports``, by path; staging
    folders a killed export left (``.NAME.new-…``) and unreadable files are skipped."""
    rows = []
    for info in sorted(exports.rglob("benchmark.json")) if exports.is_dir() else []:
        relative = info.parent.relative_to(exports)
        if any(part.startswith(".") for part in relative.parts):
            continue
        try:
            data: Any = json.loads(info.read_text(encoding="utf-8"))
            counts, provenance = data["counts"], data.get("provenance", {})
            rows.append(
                BenchmarkRow(
                    path=info.parent,
                    pairs=int(counts["pairs"]),
                    content_sha256=str(data["content_sha256"]),
                    runs=tuple(sorted(provenance.get("runs", {}))),
                    offline_pairs=int(provenance.get("offline_pairs", 0)),
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not an export this code wrote, or one being replaced right now
    return rows


def annotation_row(
    stream: str, stored: Iterable[StoredEvent], benchmarks: Iterable[BenchmarkRow]
) -> AnnotationRow:
    """A benchmark's annotation progress from its annotations stream: the sample, who was
    invited and joined, and the standing answers against those the overlap design asks for."""
    from playlisteval.ui.annotations import fold

    state = fold(stored)
    assigned = {name: set(state.assigned(name)) for name in state.invited}
    answers = sum(1 for (name, pair) in state.labels if pair in assigned.get(name, ()))
    labelled = next(
        (b.path for b in benchmarks if stream == f"annotations-{b.content_sha256[:12]}"), None
    )
    return AnnotationRow(
        stream=stream,
        sample=len(state.pair_ids),
        invited=len(state.invited),
        joined=len(state.annotators),
        answers=answers,
        assigned=sum(len(pairs) for pairs in assigned.values()),
        benchmark=labelled,
    )


def list_annotations(app: App, benchmarks: Sequence[BenchmarkRow]) -> list[AnnotationRow]:
    """Every benchmark's annotation progress in the workspace's log."""
    return [
        annotation_row(stream, app.events.read_stream(stream), benchmarks)
        for stream in app.events.streams("annotations-")
    ]
