"""A run's audit: each seed's timeline of attempts, calls, verdicts and reasons, the run's
spend by phase, gate, role and model (the one ledger's), and its rejection histogram — read
from the log alone."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from store.errors import ConfigError
from store.events import (
    AttemptStarted,
    CallFailed,
    CallRecorded,
    CallRefused,
    GatePassed,
    GateRejected,
    ItemAccepted,
    RunFinished,
    SeedDiscarded,
    SeedStopped,
    run_stream,
    seed_stream,
)
from store.eventstore import EventStore
from store.ledger import LedgerFold
from store.runlog import run_cap, run_started


@dataclass
class SeedTimeline:
    """One seed's attempts, gates, reasons and costs, in order."""

    seed_id: str
    status: str
    spent_micros: int
    steps: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Audit:
    """A run's audit: timelines, totals and the reasons it rejected."""

    run_id: str
    outcome: str
    budget_micros: int | None
    spent_micros: int
    seeds: list[SeedTimeline]
    by_phase: dict[str, int]
    by_gate: dict[str, int]
    by_role: dict[str, int]
    by_model: dict[str, int]
    rejections: dict[str, int]
    rejections_by_gate: dict[str, int]
    retries_accepted: list[str]
    open_micros: int = 0  # reservations with no answer in the log (a crash): counted as spent

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "budget_micros": self.budget_micros,
            "spent_micros": self.spent_micros,
            "open_micros": self.open_micros,
            "spend": {
                "phase": self.by_phase,
                "gate": self.by_gate,
                "role": self.by_role,
                "model": self.by_model,
            },
            "rejections": self.rejections,
            "rejections_by_gate": self.rejections_by_gate,
            "accepted_after_rejection": self.retries_accepted,
            "seeds": [
                {
                    "seed_id": t.seed_id,
                    "status": t.status,
                    "spent_micros": t.spent_micros,
                    "steps": t.steps,
                }
                for t in self.seeds
            ],
        }


def _reason_kind(reason: str) -> str:
    """A rejection reason's first clause, for the histogram (numbering and quotes dropped)."""
    text = re.sub(r"^\(\d+\)\s*", "", reason.strip())
    text = re.sub(r"'[^']*'|\"[^\"]*\"|\([^)]*\)|\d+:\d\d(?:\s*[–-]\s*\d+:\d\d)?", "…", text)
    cut = min((i for i in (text.find(c) for c in ":;.") if i > 0), default=len(text))
    return text[:cut].strip()[:60] or "(no reason given)"


def audit_run(store: EventStore, run_id: str, seed_id: str | None = None) -> Audit:
    """Read run ``run_id``'s log back as an audit: each seed's timeline (only ``seed_id``'s when
    given), spend by the one ledger, and the rejection reasons."""
    run_started(store, run_id)
    outcome = "running"
    for stored in store.read_stream(run_stream(run_id)):
        event = stored.event()
        if isinstance(event, RunFinished):
            outcome = event.outcome
    prefix = seed_stream(run_id, "")
    timelines: dict[str, SeedTimeline] = {}
    rejections: Counter[str] = Counter()
    by_gate: Counter[str] = Counter()
    rejected_seeds: set[str] = set()
    accepted: set[str] = set()
    fold = LedgerFold()
    for stored in store.read_all(stream_prefix=prefix):
        sid = stored.stream[len(prefix) :]
        fold.apply_stored(stored)
        event = stored.event()
        line = timelines.setdefault(
            sid, SeedTimeline(seed_id=sid, status="running", spent_micros=0)
        )
        step: dict[str, Any] | None = None
        if isinstance(event, AttemptStarted):
            step = {"step": "attempt", "phase": event.phase, "attempt": event.attempt}
        elif isinstance(event, CallRecorded):
            step = {
                "step": "call",
                "role": event.role,
                "model": event.model,
                "cost_micros": 0 if event.replayed else event.cost_micros,
                "replayed": event.replayed,
                "offline": event.offline,
            }
        elif isinstance(event, CallFailed):
            step = {
                "step": "call failed",
                "role": event.role,
                "error": event.error,
                "charged_micros": event.charged_micros,
            }
        elif isinstance(event, CallRefused):
            step = {"step": "call refused", "role": event.role, "reason": event.reason}
        elif isinstance(event, GatePassed):
            step = {"step": "pass", "phase": event.phase, "gate": event.gate}
        elif isinstance(event, GateRejected):
            rejections[f"{event.gate}: {_reason_kind(event.reason)}"] += 1
            by_gate[f"phase {event.phase} {event.gate}"] += 1
            rejected_seeds.add(sid)
            step = {
                "step": "reject",
                "phase": event.phase,
                "gate": event.gate,
                "attempt": event.attempt,
                "reason": event.reason,
                "rejected_output": event.rejected_output,
            }
        elif isinstance(event, ItemAccepted):
            line.status = "accepted"
            accepted.add(sid)
            step = {"step": "accepted"}
        elif isinstance(event, SeedDiscarded):
            line.status = "discarded"
            step = {"step": "discarded", "reasons": list(event.reasons)}
        elif isinstance(event, SeedStopped):
            line.status = f"stopped ({event.reason})"
            step = {"step": "stopped", "reason": event.reason, "detail": event.detail}
        if step is not None and (seed_id is None or sid == seed_id):
            line.steps.append(step)
    spent = fold.ledger()
    for line in timelines.values():
        line.spent_micros = spent.owner_spent(line.seed_id)
    seeds = list(timelines.values())
    if seed_id is not None:
        seeds = [t for t in seeds if t.seed_id == seed_id]
        if not seeds:
            raise ConfigError(f"no seed {seed_id!r} in run {run_id!r}")
    return Audit(
        run_id=run_id,
        outcome=outcome,
        budget_micros=run_cap(store, run_id),
        spent_micros=spent.spent_micros,
        seeds=seeds,
        by_phase=spent.breakdown("phase"),
        by_gate=spent.breakdown("gate"),
        by_role=spent.breakdown("role"),
        by_model=spent.breakdown("model"),
        rejections=dict(rejections.most_common()),
        rejections_by_gate=dict(by_gate.most_common()),
        retries_accepted=sorted(rejected_seeds & accepted),
        open_micros=spent.open_micros,
    )
