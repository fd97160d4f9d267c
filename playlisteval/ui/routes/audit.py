"""The audit pages (the curation runs of the workspace, one seed's timeline) and the status page
(what the curator daemon and its workers are doing now: the coordination tables and the log's
counters). The audit pages are the owner's: a seed's timeline holds its accepted gold answer and
its rated wrong answers, which would tell an annotator which answer of a pair was intended. The
status page holds only counters and asks for no identity.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, Response

from agents.audit import Audit
from playlisteval import runs
from playlisteval.app import App
from playlisteval.metrics import LogSnapshot
from playlisteval.ui.pages import error_page, page, usd, usd_exact
from playlisteval.ui.state import Ui, owner_only
from store.coordination import AccountRow, ItemRow
from store.errors import ConfigError
from store.runlog import run_ids, run_started

# Queue columns of the status page, in an item's order of life ("expired": leased, lease lapsed).
_QUEUE_STATES = ("queued", "leased", "expired", "done", "parked")


def _offline_run(app: App, report: Audit) -> bool:
    """Whether the offline provider answered run ``report``: its ``RunStarted`` says so, or a
    call it recorded does. Such a run is a harness, never evidence of model quality."""
    calls = (step for line in report.seeds for step in line.steps if step["step"] == "call")
    return run_started(app.events, report.run_id).offline or any(s["offline"] for s in calls)


def _gate_rates(audit: Audit) -> list[dict[str, Any]]:
    """GatePassed against GateRejected per (phase, gate), from the audit's timelines."""
    passed: Counter[tuple[int, str]] = Counter()
    rejected: Counter[tuple[int, str]] = Counter()
    for line in audit.seeds:
        for step in line.steps:
            if step["step"] == "pass":
                passed[step["phase"], step["gate"]] += 1
            elif step["step"] == "reject":
                rejected[step["phase"], step["gate"]] += 1
    rows = []
    for phase, gate in sorted(set(passed) | set(rejected)):
        p, r = passed[phase, gate], rejected[phase, gate]
        rows.append({"phase": phase, "gate": gate, "passed": p, "rejected": r, "rate": p / (p + r)})
    return rows


def _status_view(
    workers: list[dict[str, Any]],
    counts: dict[tuple[str, str], int],
    accounts: list[AccountRow],
    holds: int,
    parked: list[ItemRow],
    snap: LogSnapshot,
    stale_after_s: float,
) -> dict[str, Any]:
    """What the status page shows, from the coordination tables and the log's counters."""
    seen = {state for _kind, state in counts}
    states = [*_QUEUE_STATES, *sorted(seen - set(_QUEUE_STATES))]
    calls_by_outcome: Counter[str] = Counter()
    for (_model, _role, outcome), n in snap.calls.items():
        calls_by_outcome[outcome] += n
    ratios = snap.gate_pass_ratio()
    return {
        "workers": [
            {
                "name": w["name"],
                "state": w["state"],
                "age": f"{float(w['age_s']):.0f} s",
                # A worker that said it stopped beats no more; only a silent one is stale.
                "stale": w["state"] != "stopped" and float(w["age_s"]) > stale_after_s,
                "active": [str(item) for item in w["info"].get("active", [])],
            }
            for w in workers
        ],
        "stale_after": f"{stale_after_s:g} s",
        "states": states,
        "queue": [
            {"kind": kind, "counts": [counts.get((kind, state), 0) for state in states]}
            for kind in sorted({kind for kind, _state in counts})
        ],
        "accounts": [
            {
                "name": row.name,
                "cap": "uncapped" if row.cap_micros is None else usd(row.cap_micros),
                "spent": usd(row.spent_micros),
                "reserved": usd(row.reserved_micros),
                "left": "uncapped" if row.left_micros is None else usd(row.left_micros),
            }
            for row in accounts
        ],
        "holds": holds,
        "parked": parked,
        "events": snap.events,
        "seeds": sorted(snap.seeds.items()),
        "calls": sorted(calls_by_outcome.items()),
        "spend": usd(snap.spend_micros),
        "spend_by_model": [(model, usd(m)) for model, m in snap.spend_by_model.items()],
        "unsettled": snap.in_flight,
        "unsettled_usd": usd(snap.reserved_micros),
        "gates": [
            {
                "phase": phase,
                "gate": gate,
                "passed": snap.gates.get((phase, gate, "passed"), 0),
                "rejected": snap.gates.get((phase, gate, "rejected"), 0),
                "rate": ratio,
            }
            for (phase, gate), ratio in sorted(ratios.items())
        ],
        "provider_errors": sorted(snap.provider_errors.items()),
        "retries": sorted(snap.retries.items()),
    }


router = APIRouter()

_OWNER_ONLY = (
    "the audit pages show each seed's gold answer and rated wrong answers, so they are for "
    "whoever runs the UI: open its owner link (`playlisteval ui` prints it) in this browser first"
)
_OWNER = [Depends(owner_only(_OWNER_ONLY))]


@router.get("/audit", response_class=HTMLResponse, dependencies=_OWNER)
def audit_runs(ui: Ui) -> Response:
    """Every curation run of the workspace: spend, seeds' outcomes, gate pass rates."""
    views = []
    for run_id in run_ids(ui.app.events):
        report = runs.audit(ui.app, run_id)
        statuses = Counter(line.status for line in report.seeds)
        views.append(
            {
                "report": report,
                "share": (
                    report.spent_micros / report.budget_micros if report.budget_micros else None
                ),
                "statuses": sorted(statuses.items()),
                "gates": _gate_rates(report),
                "phases": sorted(report.by_phase.items()),
                "offline": _offline_run(ui.app, report),
            }
        )
    return page("audit.html", runs=views, usd=usd, exact=usd_exact)


@router.get("/audit/{run_id}/{seed_id}", response_class=HTMLResponse, dependencies=_OWNER)
def audit_seed(ui: Ui, run_id: str, seed_id: str) -> Response:
    """One seed's timeline in one run."""
    try:
        report = runs.audit(ui.app, run_id, seed_id)
    except ConfigError as exc:
        return error_page(404, str(exc))
    line = report.seeds[0]
    return page(
        "audit_seed.html",
        run_id=run_id,
        line=line,
        usd=usd,
        exact=usd_exact,
        offline=_offline_run(ui.app, report),
    )


@router.get("/status", response_class=HTMLResponse)
def status(ui: Ui) -> Response:
    """What the curator daemon and its workers are doing now."""
    ui.log_metrics.catch_up()
    view = _status_view(
        ui.queue.workers(),
        ui.queue.counts(),
        ui.accounts.accounts(),
        ui.accounts.holds(),
        [item for item in ui.queue.items() if item.state == "parked"],
        ui.log_metrics.snapshot(),
        ui.stale_after_s,
    )
    return page("status.html", **view)
