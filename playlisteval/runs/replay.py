"""Strict and counterfactual replay of a run, and the log's chain check."""

from __future__ import annotations

from dataclasses import dataclass

from agents.curation import RunReport
from agents.replay import Replayer, ReplayVerdict
from playlisteval.app import (
    App,
)
from policies.budget import cap_micros, check_concurrency
from store.errors import ConfigError
from store.events import (
    seed_stream,
)
from store.eventstore import Verification
from store.ledger import stream_spend
from store.runlog import run_started


@dataclass
class ReplayReport:
    """What a strict (or counterfactual) replay found."""

    run_id: str
    policy: str
    report: RunReport
    original_accepted: list[str]
    original_cost_micros: int
    model_calls: int
    verdict: ReplayVerdict | None = None  # strict replays: what was compared, what differs


def replayer(app: App) -> Replayer:
    """The workspace's replayer (composed by :meth:`App.replayer`)."""
    return app.replayer()


def replay_strict(
    app: App,
    run_id: str,
    *,
    budget_usd: float | None = None,
    max_attempts: int | None = None,
    concurrency: int | None = None,
    against_today: bool = False,
) -> ReplayReport:
    """Re-run ``run_id`` from its log with no model call, into a scratch log.

    Under the run's recorded definition and policy the replay is strict: the hash chains are
    checked and every derived event is compared with the log (see :mod:`agents.replay`). Under
    another policy (``budget_usd``, ``max_attempts``) or today's code and settings
    (``against_today``) the replay is counterfactual: it reports what that policy would have
    accepted and paid, and which seeds would have needed a call the log does not hold.
    """
    run_started(app.events, run_id)
    cap = cap_micros(budget_usd, "--budget")
    if max_attempts is not None and max_attempts < 1:
        raise ConfigError(f"--max-attempts must be at least 1, got {max_attempts!r}")
    check_concurrency(concurrency, most=app.settings.curation.max_concurrency)
    verdict = replayer(app).replay(
        run_id,
        budget_micros=cap,
        max_attempts=max_attempts,
        concurrency=concurrency,
        against_today=against_today,
    )
    prefix = seed_stream(run_id, "")
    log = app.events.read_all(stream_prefix=prefix, types=["ItemAccepted"])
    original = [str(s.data["seed_id"]) for s in log]
    counterfactual = cap is not None or max_attempts is not None or against_today
    policy = "the run's own policy"
    if counterfactual:
        parts = ["today's code and settings"] if against_today else []
        if budget_usd is not None:
            parts.append(f"budget {budget_usd:g} USD")
        if max_attempts is not None:
            parts.append(f"max attempts {max_attempts}")
        policy = ", ".join(parts)
    return ReplayReport(
        run_id=run_id,
        policy=policy,
        report=verdict.report,
        original_accepted=original,
        original_cost_micros=stream_spend(app.events, prefix).spent_micros,
        model_calls=verdict.report.live_calls,
        verdict=None if counterfactual else verdict,
    )


def verify_store(app: App) -> Verification:
    """Every event of the workspace's log checked against its hash chains and heads."""
    return app.events.check()
