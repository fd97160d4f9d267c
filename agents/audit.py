"""A run's audit: each seed's timeline of attempts, calls, verdicts and reasons, the run's
spend by phase, gate, role and model (the one ledger's), and its rejection histogram — read
from the log alone."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from store.answers import answered_by
from store.errors import ConfigError
from store.events import (
    AttemptStarted,
    CallFailed,
    CallRecorded,
    CallRefused,
    Event,
    GatePassed,
    GateRejected,
    ItemAccepted,
    RunFinished,
    SeedDiscarded,
    SeedStopped,
    micros_to_usd,
    run_stream,
    seed_stream,
)
from store.eventstore import EventStore
from store.ledger import LedgerFold
from store.runlog import run_cap, run_started
from tools.providers.specs.local_llm import REAL_LOCAL_LABEL


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
    # Each kind of rejection's first reason as logged (values filled in), for whoever reads the
    # histogram: its keys are the kinds of :attr:`rejections`.
    rejection_examples: dict[str, str] = field(default_factory=dict)
    # Spend by what the calls carried (video/audio/text; "-": no answer in the log yet).
    by_media: dict[str, int] = field(default_factory=dict)
    # Attempts sent whose outcome is unknown (a timeout, a dropped connection, a 5xx): counted
    # at their reservations as what the service may have billed (in ``spent_micros``).
    uncertain_micros: int = 0
    uncertain_attempts: int = 0

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "budget_micros": self.budget_micros,
            "spent_micros": self.spent_micros,
            "open_micros": self.open_micros,
            "may_have_been_billed": {
                "micros": self.uncertain_micros,
                "attempts": self.uncertain_attempts,
            },
            "spend": {
                "phase": self.by_phase,
                "gate": self.by_gate,
                "role": self.by_role,
                "model": self.by_model,
                "media": self.by_media,
            },
            "rejections": self.rejections,
            "rejection_examples": self.rejection_examples,
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


def first_clause(reason: str, limit: int = 200) -> str:
    """A reason's first statement, values as logged: up to the first ``; `` or ``. `` outside
    brackets (the numbering of a list of problems, and the advice after it, dropped), cut at
    ``limit`` characters. What a histogram row shows of its kind."""
    text = re.sub(r"^\(\d+\)\s*", "", reason.strip())
    depth, cut = 0, len(text)
    for i, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0 and char in ";." and text[i + 1 : i + 2] in (" ", ""):
            cut = i
            break
    text = text[:cut].strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


#: What each phase's attempt makes.
PHASE_WORK = {1: "question and gold answer", 2: "four graded distractors"}


def _usd(micros: int, digits: int = 5) -> str:
    return f"{micros_to_usd(micros):.{digits}f} USD"


def describe_step(step: Mapping[str, Any]) -> str:
    """One step of a seed's timeline in words, every value filled in (plain text: the CLI adds
    colour, the JSON keeps the step's fields)."""
    kind = step["step"]
    if kind == "attempt":
        work = PHASE_WORK.get(int(step["phase"]), "")
        return f"phase {step['phase']}, attempt {step['attempt']}" + (f": {work}" if work else "")
    if kind == "call":
        source = " (served from the log, free)" if step["replayed"] else ""
        who = "offline provider as " if step.get("offline") else ""
        if step.get("real_local"):
            who = f"{REAL_LOCAL_LABEL} "
        return f"call {step['role']} → {who}{step['model']}: {_usd(step['cost_micros'])}{source}"
    if kind == "call failed":
        charged = step.get("charged_micros") or 0
        paid = f" ({_usd(charged)} charged)" if charged else ""
        return f"call {step['role']} failed{paid}: {step['error']}"
    if kind == "call refused":
        return f"call {step['role']} refused by the budget: {step['reason']}"
    if kind == "pass":
        return f"passed phase {step['phase']} {step['gate']}"
    if kind == "reject":
        return (
            f"rejected by phase {step['phase']} {step['gate']} (attempt {step['attempt']}): "
            f"{step['reason']}"
        )
    if kind == "accepted":
        return "accepted: the item joins the benchmark"
    if kind == "discarded":
        reasons = list(step.get("reasons") or [])
        more = f" (and {len(reasons) - 1} earlier reasons)" if len(reasons) > 1 else ""
        return "discarded: " + (first_clause(reasons[0]) if reasons else "no reason given") + more
    if kind == "stopped":
        detail = f": {step['detail']}" if step.get("detail") else ""
        return f"stopped ({step['reason']}){detail}"
    rest = ", ".join(f"{k} {v}" for k, v in step.items() if k != "step")
    return f"{kind}: {rest}" if rest else str(kind)


class _Step(NamedTuple):
    """How an event shows in its seed's timeline: the step's name, the event's fields it keeps
    (in this order) and, for a call, the key its settled cost goes under."""

    name: str
    fields: tuple[str, ...] = ()
    cost: str = ""


#: The events that word their own step (any other decision says its type and every field).
_STEPS: dict[type[Event], _Step] = {
    AttemptStarted: _Step("attempt", ("phase", "attempt")),
    CallFailed: _Step("call failed", ("role", "error"), cost="charged_micros"),
    CallRefused: _Step("call refused", ("role", "cap", "reason")),
    GatePassed: _Step("pass", ("phase", "gate")),
    GateRejected: _Step("reject", ("phase", "gate", "attempt", "reason", "rejected_output")),
    ItemAccepted: _Step("accepted"),
    SeedDiscarded: _Step("discarded", ("reasons",)),
    SeedStopped: _Step("stopped", ("reason", "detail")),
}


def _step_of(event: Event, settled: int) -> dict[str, Any] | None:
    """The step ``event`` makes in its seed's timeline (None: it makes none). A call's cost is
    ``settled``, what the one ledger settled for it (an answer served from the log: 0)."""
    if isinstance(event, CallRecorded):
        return {
            "step": "call",
            "role": event.role,
            "model": event.model,
            "cost_micros": settled,
            "replayed": event.replayed,
            "offline": event.offline,
            # Only where true: the steps of every other call read as they always have.
            "answered_by": answered_by(event),
            **({"real_local": True} if answered_by(event, original=True) == "real-local" else {}),
        }
    for cls, step in _STEPS.items():
        if isinstance(event, cls):
            values = event.model_dump(mode="json", include=set(step.fields))
            return {
                "step": step.name,
                **{name: values[name] for name in step.fields},
                **({step.cost: settled} if step.cost else {}),
            }
    # Any other decision (one declared after this module was written) says what it is.
    return event.timeline_step()


def _status_of(event: Event) -> str | None:
    """The seed status ``event`` sets (None: it sets none)."""
    if isinstance(event, ItemAccepted):
        return "accepted"
    if isinstance(event, SeedDiscarded):
        return "discarded"
    if isinstance(event, SeedStopped):
        return f"stopped ({event.reason})"
    return None


@dataclass
class _Rejections:
    """The run's rejections as the audit counts them."""

    kinds: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    by_gate: Counter[str] = field(default_factory=Counter)
    seeds: set[str] = field(default_factory=set)

    def add(self, seed_id: str, event: GateRejected) -> None:
        """Count one rejection of seed ``seed_id``."""
        kind = f"{event.gate}: {_reason_kind(event.reason)}"
        self.kinds[kind] += 1
        self.examples.setdefault(kind, f"{event.gate}: {first_clause(event.reason)}")
        self.by_gate[f"phase {event.phase} {event.gate}"] += 1
        self.seeds.add(seed_id)


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
    rejections = _Rejections()
    accepted: set[str] = set()
    fold = LedgerFold()
    for stored in store.read_all(stream_prefix=prefix):
        sid = stored.stream[len(prefix) :]
        settled = fold.apply_stored(stored)
        event = stored.event()
        line = timelines.setdefault(
            sid, SeedTimeline(seed_id=sid, status="running", spent_micros=0)
        )
        if isinstance(event, GateRejected):
            rejections.add(sid, event)
        status = _status_of(event)
        if status is not None:
            line.status = status
            if isinstance(event, ItemAccepted):
                accepted.add(sid)
        step = _step_of(event, settled)
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
        rejections=dict(rejections.kinds.most_common()),
        rejections_by_gate=dict(rejections.by_gate.most_common()),
        retries_accepted=sorted(rejections.seeds & accepted),
        open_micros=spent.open_micros,
        rejection_examples={kind: rejections.examples[kind] for kind in rejections.kinds},
        by_media=spent.breakdown("media"),
        uncertain_micros=spent.uncertain_micros,
        uncertain_attempts=spent.uncertain_attempts,
    )
