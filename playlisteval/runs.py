"""Runs as the CLI sees them: start or resume a curation run, replay one, audit one."""

from __future__ import annotations

import hashlib
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
from pydantic_ai.models import Model
from pydantic_ai.models.test import TestModel

from agents.audit import Audit, audit_run
from agents.curation import CurationProgress, Curator, RunReport
from agents.deps import CallDeps
from agents.evidence import MAX_WINDOW_CHUNKS
from agents.ownership import SEEDS_LEASE, eval_lease, pairs_lease, run_lease
from agents.recorded import NoCallModel, Pricing
from agents.replay import Replayer, ReplayVerdict
from agents.run_spec import RunSpec, recorded_spec, unhonoured
from agents.seed_driver import CurationConfig
from playlisteval.app import (
    App,
    curation_config,
    model_factory,
    offline_models,
    round_up_usd,
    traffic_for,
)
from playlisteval.export import ExportSummary, export_benchmark
from playlisteval.settings import IndexSettings
from policies.budget import cap_micros, check_concurrency
from policies.pairs import SelectedPair
from policies.prices import PriceTable
from policies.selection import SeedSpread, spread_seeds
from store.catalog import SeedRow
from store.errors import ConfigError, RunDefinitionMismatch
from store.events import (
    CallRecorded,
    CallRefused,
    RunUpgraded,
    SeedStopped,
    micros_to_usd,
    pairs_stream,
    run_stream,
    seed_stream,
)
from store.eventstore import ChainProblem, EventStore, open_event_store
from store.ledger import stream_spend
from store.runlog import run_cap, run_ids, run_started, seeds_in_runs
from tools.providers.registry import release_models

if TYPE_CHECKING:
    from agents.evaluation import EvaluationProgress, EvaluationResult
    from agents.pairs import PairsProgress
    from playlisteval.overview import RunRow

T = TypeVar("T")


def new_run_id(now: datetime | None = None, salt: str = "") -> str:
    """A sortable, readable run id (the clock is the shell's, never the loop's)."""
    moment = now or datetime.now(UTC)
    tail = hashlib.sha1(f"{moment.isoformat()}|{salt}".encode()).hexdigest()[:6]
    return f"{moment:%Y%m%d-%H%M%S}-{tail}"


def choose_seeds(
    app: App, max_seeds: int | None, *, again: bool = False
) -> tuple[list[SeedRow], SeedSpread]:
    """Active seeds that no run has taken (``again``: every active seed), at most
    ``max_seeds``, domains in turn, spread over the playlist
    (``policies.selection.spread_seeds``: each segment in at most
    ``curation.seeds_per_segment`` seeds), and how they were spread."""
    seeds = app.catalog.seeds()
    if not again:
        taken = seeds_in_runs(app.events)
        seeds = [s for s in seeds if s.id not in taken]
    curation = app.settings.curation
    return spread_seeds(
        seeds, max_seeds, per_segment=curation.seeds_per_segment, salt=curation.seed_salt
    )


def check_prices(app: App, models: Iterable[str]) -> PriceTable:
    """The price table, once every one of ``models`` is known to it: a model with no price
    could never have a call reserved, so a run refuses it before it opens
    (:class:`policies.prices.UnknownPriceError`, one line saying where to add the price)."""
    prices = app.prices()
    for model in sorted(set(models)):
        prices.price(model)
    return prices


def run_settings(app: App, models: set[str], spread: SeedSpread | None = None) -> dict[str, Any]:
    """What a run records of how it was configured: the generation, model and index settings,
    the price rows its models are priced by, how each model's calls travel (frame caps, cache
    lifetimes): enough for a replay to price every call as the run did; and how its seeds were
    spread over the playlist. A model with no known price is refused here, before the run is
    opened (:func:`check_prices`)."""
    prices = check_prices(app, models)
    settings = app.settings.model_dump(mode="json", include={"generation", "models", "index"})
    if spread is not None:
        settings["seeding"] = spread.facts()
    traffic = traffic_for(app.settings, live=False)
    settings["prices"] = prices.snapshot(models)
    settings["traffic"] = {
        model: found.facts() for model in sorted(models) if (found := traffic(model))
    }
    return settings


def curate(
    app: App,
    *,
    budget_usd: float | None,
    max_seeds: int | None = None,
    concurrency: int | None = None,
    run_id: str | None = None,
    per_seed_usd: float | None = None,
    progress: CurationProgress | None = None,
    again: bool = False,
) -> RunReport:
    """Start a new run over seeds that no run has taken yet (``again``: any active seed, paid
    again), under the cap ``budget_usd`` (``None``: offline only).

    The seeds are chosen, and the run opened, under the workspace's seeds lease, so two
    commands started together take different seeds; the run is curated under its own lease.
    """
    cap = cap_micros(budget_usd, "--budget")
    per_seed = cap_micros(per_seed_usd, "--per-seed")
    check_concurrency(concurrency, most=app.settings.curation.max_concurrency)
    app.needs_cap(cap, "curation run")
    curator = app.curator(progress, concurrency)
    with app.writer(SEEDS_LEASE, "curate (choosing seeds)", wait_s=30.0):
        seeds, spread = choose_seeds(app, max_seeds or app.settings.curation.max_seeds, again=again)
        if not seeds:
            raise ConfigError(_no_fresh_seeds(app))
        run_id = run_id or new_run_id(salt=str(app.workspace.root))
        if app.events.stream_version(run_stream(run_id)):
            raise ConfigError(
                f"run {run_id!r} exists already; resume it with `playlisteval curate --run "
                f"{run_id}`"
            )
        lease = app.writer(run_lease(run_id), f"curate --run {run_id}")
        try:
            curator.open_run(
                run_id,
                seeds,
                budget_micros=cap,
                per_seed_micros=per_seed,
                settings=run_settings(app, curator.config.models.all_models(), spread),
            )
        except BaseException:
            lease.release()
            raise
    with lease:
        return anyio.run(
            lambda: _then_release(
                curator.deps.model_for,
                curator.curate(
                    run_id,
                    seeds,
                    budget_micros=cap,
                    per_seed_micros=per_seed,
                    opened=True,
                    lease=lease.name,
                ),
            )
        )


async def _then_release(model_for: Callable[[str], Model], work: Awaitable[T]) -> T:
    """``work``, then the live adapters behind ``model_for`` closed: their connections (an
    unclosed SDK client closes itself when collected, on whatever event loop then runs, and
    fails if its own is gone), and the whole-source uploads Gemini holds against the project's
    file quota (a resumed run uploads again)."""
    try:
        return await work
    finally:
        with anyio.CancelScope(shield=True):
            await release_models(model_for)


def _no_fresh_seeds(app: App) -> str:
    if not app.catalog.seeds():
        return "no seeds to curate: run `playlisteval index` (and `seeds`) first"
    recent = ", ".join(run_ids(app.events)[-3:])
    return (
        "every active seed is in a run already: resume one with `playlisteval curate --run RUN` "
        f"(recent runs: {recent}), or pass --again to curate seeds again in a new run (their "
        "calls are paid again)"
    )


def resume(
    app: App,
    run_id: str,
    *,
    budget_usd: float | None = None,
    concurrency: int | None = None,
    progress: CurationProgress | None = None,
    upgrade: bool = False,
) -> RunReport:
    """Pick run ``run_id`` up where it stopped (a crash, ``kill -9``, its cap), its own seeds,
    under its recorded definition (:mod:`agents.run_spec`).

    Without ``budget_usd`` the run keeps its cap; with it, ``budget_usd`` is the run's new
    *total* cap, refused when below what the run has spent already. A run whose seeds are in
    the fleet's queue belongs to its workers; another live ``curate`` on the run is refused.
    When today's code and settings define the run otherwise (a gate added or gone, a template,
    a model changed), it is refused before any call (:class:`RunDefinitionMismatch`) unless
    ``upgrade``: then a ``RunUpgraded`` naming the differences is recorded and the run goes on
    under today's definition from there.
    """
    started = run_started(app.events, run_id)
    new_cap = cap_micros(budget_usd, "--budget")
    check_concurrency(concurrency, most=app.settings.curation.max_concurrency)
    if app.queue().items(run_id=run_id):
        raise ConfigError(
            f"run {run_id!r} belongs to the fleet (its seeds are in the shared queue): start "
            "`playlisteval worker`s to work on it, or see `playlisteval fleet`"
        )
    curator = app.curator(progress, concurrency)
    with app.writer(run_lease(run_id), f"curate --run {run_id}") as lease:
        spent = stream_spend(app.events, seed_stream(run_id, "")).spent_micros
        cap = run_cap(app.events, run_id) if new_cap is None else new_cap
        if new_cap is not None and new_cap < spent:
            raise ConfigError(
                f"run {run_id!r} has spent {micros_to_usd(spent):.4f} USD already; --budget is "
                f"the run's total cap, so give at least that (e.g. --budget "
                f"{round_up_usd(spent)})"
            )
        app.needs_cap(cap, "curation run")
        curator.config = _definition_for_resume(app, run_id, curator.config, upgrade=upgrade)
        seeds = app.catalog.seeds_by_id(started.seeds)
        return anyio.run(
            lambda: _then_release(
                curator.deps.model_for,
                curator.curate(
                    run_id,
                    seeds,
                    budget_micros=cap,
                    per_seed_micros=started.per_seed_micros,
                    lease=lease.name,
                ),
            )
        )


def _definition_for_resume(
    app: App, run_id: str, today: CurationConfig, *, upgrade: bool
) -> CurationConfig:
    """The config run ``run_id`` goes on under: its recorded definition when today's code and
    settings define it the same; else RunDefinitionMismatch, or with ``upgrade`` today's (a
    ``RunUpgraded`` naming each difference appended first)."""
    run_log = app.events.read_stream(run_stream(run_id))
    recorded = recorded_spec(run_log, gates_asked(app.events, run_id))
    prices = check_prices(app, today.models.all_models()).snapshot(today.models.all_models())
    now = RunSpec.today(today, prices)
    differences = [*unhonoured(recorded), *recorded.differences(now)]
    if not differences:
        return recorded.config(today)
    if not upgrade:
        raise RunDefinitionMismatch(
            run_id,
            differences,
            f"`playlisteval curate --run {run_id} --upgrade` records the change and goes on "
            "under today's definition from here; or restore the settings and code it was "
            f"recorded with (`playlisteval replay {run_id}` still replays it as recorded)",
        )
    app.events.append(
        run_stream(run_id),
        [
            RunUpgraded(
                run_id=run_id,
                spec=now.to_json(),
                differences=tuple(dict.fromkeys(differences)),
                command=f"curate --run {run_id} --upgrade",
            )
        ],
    )
    return today


def gates_asked(store: EventStore, run_id: str) -> set[tuple[str, int]]:
    """The ``(gate, phase)`` pairs run ``run_id``'s seeds asked for (what rebuilds the gate set
    of a run recorded before definitions were)."""
    asked = store.read_all(stream_prefix=seed_stream(run_id, ""), types=["GateRequested"])
    return {(str(e.data["gate"]), int(e.data["phase"])) for e in asked}


#: Why a run's seeds stand stopped, as far as what takes them further goes: whose cap refused
#: their next call (the run's, the per-seed cap, the campaign's for the day or in all), or a
#: failure (a provider's, the evidence's) that a resume simply tries again.
StopKind = Literal["run", "seed", "day", "total", "failure"]

_SEED_ENDS = ["SeedStarted", "ItemAccepted", "SeedDiscarded", "SeedStopped"]


def stop_kinds(store: EventStore, run_id: str) -> Counter[StopKind]:
    """How many of run ``run_id``'s seeds stand stopped, by :data:`StopKind` (each seed by its
    last end; a budget stop by whose cap its last refused call names)."""
    prefix = seed_stream(run_id, "")
    ends = {s.stream: s.event() for s in store.read_all(stream_prefix=prefix, types=_SEED_ENDS)}
    refused = {
        s.stream: s.event() for s in store.read_all(stream_prefix=prefix, types=["CallRefused"])
    }
    kinds: Counter[StopKind] = Counter()
    for stream, end in ends.items():
        if isinstance(end, SeedStopped):
            kinds[_stop_kind(end, refused.get(stream))] += 1
    return kinds


def _stop_kind(stopped: SeedStopped, refusal: object) -> StopKind:
    if stopped.reason != "budget":
        return "failure"
    if not isinstance(refusal, CallRefused):
        return "run"  # a log from before refusals said whose cap: the run's, as it was then
    if refusal.cap == "account":
        return "day" if "account 'day:" in refusal.reason else "total"
    return refusal.cap


def resume_advice(
    run_id: str,
    state: str,
    stops: Mapping[StopKind, int],
    spent_micros: int,
    *,
    fleet: bool = False,
) -> list[str]:
    """The commands that would take run ``run_id`` further, one line for each way it stopped
    (``state`` as ``playlisteval runs`` shows it; ``stops`` from :func:`stop_kinds`; ``fleet``:
    its seeds are in the shared queue). A resumed run keeps its per-seed cap, and a campaign's
    cap is no --budget's, so each names what works for it; empty when nothing waits."""
    if state.startswith(("running", "queued")):
        return []  # someone is on it
    if fleet:
        if not any(stops.values()):
            return []
        return [
            f"{run_id} is the fleet's (its seeds are in the shared queue), which `curate --run` "
            "does not take: `playlisteval worker`s take up its queued seeds, and "
            "`playlisteval fleet` lists the parked ones"
        ]
    go_on = f"`playlisteval curate --run {run_id}`"
    lines = []
    if stops.get("run"):
        lines.append(
            f"{run_id}: its cap stopped {stops['run']} seed(s): `playlisteval curate --run "
            f"{run_id} --budget USD` takes it further, USD being its new total cap (above the "
            f"{micros_to_usd(spent_micros):.4f} USD spent)"
        )
    if stops.get("seed"):
        lines.append(
            f"{run_id}: the per-seed cap stopped {stops['seed']} seed(s), and a resumed run "
            "keeps it: `playlisteval curate --again --per-seed USD` curates seeds again in a new "
            "run with a larger one"
        )
    if stops.get("day"):
        lines.append(
            f"{run_id}: the campaign's cap for the day stopped {stops['day']} seed(s): after "
            f"00:00 UTC, when it renews, {go_on} takes them further"
        )
    if stops.get("total"):
        lines.append(
            f"{run_id}: the campaign's total cap stopped {stops['total']} seed(s): raise "
            "budget.cap_usd (a running `playlisteval serve` applies it at its next tick), then "
            f"{go_on} takes them further"
        )
    why = [f"it is {state}"] if state in ("unfinished", "interrupted") else []
    if stops.get("failure"):
        why.append(f"{stops['failure']} seed(s) stopped on a provider failure or an error")
    if why and not stops.get("run"):  # the --budget command above picks those up as well
        lines.append(f"{run_id}: {' and '.join(why)}: {go_on} picks it up")
    return lines


def resume_lines(app: App, row: RunRow) -> list[str]:
    """:func:`resume_advice` for a run as ``playlisteval runs`` lists it, from the log and the
    queue."""
    if row.state.startswith(("running", "queued")):
        return []
    return resume_advice(
        row.run_id,
        row.state,
        stop_kinds(app.events, row.run_id),
        row.spent_micros,
        fleet=bool(app.queue().items(run_id=row.run_id)),
    )


def queue_fresh_seeds(
    app: App, max_seeds: int | None, *, concurrency: int | None = None
) -> tuple[str, int] | None:
    """Open a run for the fleet over the active seeds no run has taken (single-process runs
    included), spread over domains, at most ``max_seeds``: its RunStarted in the log, its seeds
    in the shared queue. Returns ``(run id, seeds queued)``, or None when no seed is left."""
    from agents.fleet import start_run

    with app.writer(SEEDS_LEASE, "enqueue (choosing seeds)", wait_s=30.0):
        seeds, spread = choose_seeds(app, max_seeds)
        if not seeds:
            return None
        run_id = new_run_id(salt=str(app.workspace.root))
        budget = app.settings.budget
        config = curation_config(app.settings, concurrency)
        count = start_run(
            app.events,
            app.queue(),
            run_id,
            seeds,
            budget_micros=cap_micros(budget.cap_usd, "budget.cap_usd"),
            per_seed_micros=cap_micros(budget.per_seed_usd, "budget.per_seed_usd"),
            config=config,
            settings=run_settings(app, config.models.all_models(), spread),
        )
    return run_id, count


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
    """A replayer over the workspace's log: no live adapter is built, so a strict replay needs
    no key even where the settings say live; every model it could reach refuses to answer."""
    config = replace(curation_config(app.settings), offline=True)

    def guard(model_id: str) -> Model:
        return NoCallModel(TestModel(custom_output_text=f"no call to {model_id}"))

    return Replayer(
        store=app.events,
        catalog=app.catalog,
        clips=app.clips(),
        model_for=guard,
        config=config,
        prices=app.prices(),
        traffic=traffic_for(app.settings, live=False),
    )


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


def verify_store(app: App) -> list[ChainProblem]:
    """Every stream of the workspace's log checked against its hash chain and head."""
    return app.events.verify()


@dataclass
class Rehearsal:
    """What a curation would cost with the configured live models, before any money is spent.

    ``scenarios`` prices the same calls again without the savings: ``without caching`` (every
    video call pays full input price, no cache written or kept), ``without batch`` (text-only
    gates at list price) and ``neither``.
    """

    audit: Audit
    accepted: int
    seeds: int
    scale: float = 1.0
    segment_minutes: float = 0.0
    batch: bool = False
    scenarios: dict[str, int] = field(default_factory=dict)
    cached_tokens: int = 0
    batch_calls: int = 0
    video_share: float = 0.0

    @property
    def cost_per_accepted_micros(self) -> int | None:
        """Expected spend per accepted question (all retries and discards included)."""
        return self.audit.spent_micros // self.accepted if self.accepted else None

    def per_accepted(self, scenario: str) -> int | None:
        """Cost per accepted question in one scenario."""
        total = self.scenarios.get(scenario)
        return None if total is None or not self.accepted else total // self.accepted


def paper_scale(app: App, seeds: list[SeedRow]) -> tuple[float, float]:
    """``(factor, minutes)``: how much longer the paper's segments are than these seeds' (the
    paper's segment length, the default of ``index.segment_target_minutes``, over the mean
    segment length here; never below 1)."""
    lengths: list[float] = []
    for seed in seeds:
        for segment_id in (seed.segment_a, seed.segment_b):
            row = app.catalog.segment(segment_id)
            if row is not None and row.end_s > row.start_s:
                lengths.append(row.end_s - row.start_s)
    target_s = IndexSettings().segment_target_minutes * 60.0
    if not lengths:
        return 1.0, target_s / 60.0
    mean = sum(lengths) / len(lengths)
    return max(target_s / mean, 1.0), target_s / 60.0


def rehearse(
    app: App,
    *,
    seeds: int = 20,
    concurrency: int | None = None,
    paper: bool = True,
    batch: bool | None = None,
) -> Rehearsal:
    """Run the loop with the offline provider in a scratch log, every call priced with the
    configured live models' token rules, prices, context caching and (``batch``) batch rates,
    and audit it. With ``paper`` the video, audio and transcripts of each call are priced at the
    paper's segment length (20 minutes) whatever this playlist's segments are. The workspace's
    log is not touched."""
    check_concurrency(concurrency, most=app.settings.curation.max_concurrency)
    # Any active seed, curated already or not: a rehearsal writes to a scratch log, never to a run.
    chosen, _ = choose_seeds(app, seeds, again=True)
    if not chosen:
        raise ConfigError("no seeds to rehearse on: run `playlisteval index` first")
    config = replace(app.curator().config, offline=True)
    if concurrency is not None:
        config = replace(config, concurrency=concurrency)
    scale, minutes = paper_scale(app, chosen) if paper else (1.0, 0.0)
    # The transcript test's windows stop at MAX_WINDOW_CHUNKS chunks, however long the segments.
    cap_s = MAX_WINDOW_CHUNKS * app.settings.index.chunk_seconds
    windows = scale * min(1.0, cap_s / (minutes * 60.0)) if minutes > 0 else scale
    use_batch = app.settings.providers.batch if batch is None else batch
    traffic = traffic_for(app.settings, live=False)
    prices = app.prices()
    with tempfile.TemporaryDirectory(prefix="playlisteval-rehearsal-") as scratch:
        store = open_event_store(Path(scratch) / "rehearsal.db")
        try:
            curator = Curator(
                CallDeps(
                    store=store,
                    catalog=app.catalog,
                    clips=app.clips(),
                    model_for=offline_models(),
                    prices=prices,
                    traffic=traffic,
                    pricing=Pricing(
                        scale=scale, batch_text=use_batch, window_scale=max(windows, 1.0)
                    ),
                ),
                config=config,
            )
            report = anyio.run(lambda: curator.curate("rehearsal", chosen, budget_micros=None))
            result = audit(app, "rehearsal", store=store)
            calls = [
                e
                for s in store.read_all(stream_prefix=seed_stream("rehearsal", ""))
                if isinstance(e := s.event(), CallRecorded)
            ]
        finally:
            store.close()
    scenarios = {"as configured": result.spent_micros}
    for name, cache, batch_on in (
        ("without caching", False, use_batch),
        ("without batch", True, False),
        ("neither", False, False),
    ):
        scenarios[name] = sum(
            prices.repriced(e.model, e.usage, batch=batch_on and e.batch, cache=cache)
            for e in calls
        )
    # The native-video (and image) calls' share, by the one ledger the audit folded.
    video = result.by_media.get("video", 0)
    return Rehearsal(
        audit=result,
        accepted=len(report.accepted),
        seeds=len(chosen),
        scale=scale,
        segment_minutes=minutes,
        batch=use_batch,
        scenarios=scenarios,
        cached_tokens=sum(e.cached_tokens for e in calls),
        batch_calls=sum(1 for e in calls if e.batch),
        video_share=video / result.spent_micros if result.spent_micros else 0.0,
    )


# -- audit ----------------------------------------------------------------------------------------


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
    if run_id is None:
        found = run_ids(store)
        if not found:
            raise ConfigError("no run in the log yet: run `playlisteval curate` first")
        run_id = found[-1]
    return audit_run(store, run_id, seed_id)


# -- pairs and export -----------------------------------------------------------------------------


def latest_run(app: App) -> str:
    """The newest run in the log; ConfigError when there is none."""
    found = run_ids(app.events)
    if not found:
        raise ConfigError("no run in the log yet: run `playlisteval curate` first")
    return found[-1]


def select_pairs(
    app: App,
    run_id: str | None = None,
    *,
    per_domain: int | None = None,
    budget_usd: float | None = None,
    command: str = "pairs",
    progress: PairsProgress | None = None,
) -> tuple[str, list[SelectedPair]]:
    """``(run_id, sampled pairs)``: the run's accepted items as preference pairs, judged in both
    orders by the difficulty judges (``models.difficulty_judges``), kept when one fails them by
    ``pairs.keep_when`` (ties counted as ``pairs.ties`` says), sampled per domain across rating
    gaps as ``pairs.sampling`` says. Judgments already in the log are not made (or paid) again.

    The judges' calls are capped (:meth:`App.stream_cap`, ``budget.pairs_usd``) and, in a campaign,
    reserve in its accounts too; the selection runs under the run's pairs lease, so a second
    ``pairs`` on the same run is refused rather than paying twice. ``progress`` hears how
    many pairs are judged and each one decided."""
    from agents.pairs import select_pairs as select

    if per_domain is not None and per_domain < 1:
        raise ConfigError(f"--per-domain must be at least 1, got {per_domain!r}")
    run = run_id or latest_run(app)
    run_started(app.events, run)
    settings = app.settings
    judges = list(settings.models.difficulty_judges)
    offline = settings.curation.offline
    with app.writer(pairs_lease(run), f"{command} --run {run}") as lease:
        cap = app.stream_cap(pairs_stream(run), budget_usd, "budget.pairs_usd", "difficulty gate")
        app.needs_cap(cap, "difficulty gate")
        model_for = model_factory(settings, app, set(judges))
        chosen = anyio.run(
            lambda: _then_release(
                model_for,
                select(
                    app.call_deps(model_for=model_for),
                    run_id=run,
                    judges=judges,
                    per_domain=per_domain or settings.pairs.pairs_per_domain,
                    sample_seed=settings.pairs.sample_seed,
                    rule=settings.pairs.gate_rule(),
                    sampling=settings.pairs.sampling,
                    budget_micros=cap,
                    concurrency=settings.curation.concurrency,
                    offline=offline,
                    lease=lease.name,
                    command=command,
                    progress=progress,
                ),
            )
        )
    return run, chosen


def export(
    app: App,
    out_dir: Path,
    run_id: str | None = None,
    *,
    per_domain: int | None = None,
    budget_usd: float | None = None,
    with_clips: bool = False,
    progress: PairsProgress | None = None,
) -> ExportSummary:
    """Export run ``run_id``'s benchmark to ``out_dir``: its last pair selection, made first
    (under ``budget_usd``, as by ``pairs``) when the run has none yet; ``with_clips`` bundles
    each evidence span's clip and frames. ``progress`` hears each step (pairs judged, clips
    cut)."""
    from agents.pairs import load_selection
    from playlisteval.export import check_export_target

    check_export_target(out_dir)  # a bad target costs nothing: before any judge is asked
    run = run_id or latest_run(app)
    pairs = load_selection(app.events, run)
    if not pairs:
        run, pairs = select_pairs(
            app,
            run,
            per_domain=per_domain,
            budget_usd=budget_usd,
            command="export",
            progress=progress,
        )
    if not pairs:
        raise ConfigError(
            f"run {run!r} has no preference pair to export: no accepted item, or the difficulty "
            "judges got every pair right (see `playlisteval pairs`)"
        )
    settings = app.settings
    return export_benchmark(
        app,
        out_dir,
        pairs,
        # How the pairs were chosen; who made and judged them comes from the log, not from
        # these settings (export.py reads each record's provenance from the recorded calls).
        settings={
            "pairs_per_domain": per_domain or settings.pairs.pairs_per_domain,
            "sample_seed": settings.pairs.sample_seed,
            "keep_when": settings.pairs.keep_when,
            "ties": settings.pairs.ties,
            "sampling": settings.pairs.sampling,
        },
        with_clips=with_clips,
        progress=progress,
    )


# -- judge evaluation -----------------------------------------------------------------------------

DEFAULT_CONDITIONS = (
    "uniform::frames+transcript:1h:32",
    "retrieved:hybrid:frames+transcript:1h:32",
)
#: The demo's: the defaults, and the other three retrievers on the transcript (no clips to cut,
#: so cheap), so the demo's report has each retriever's recall side by side.
DEMO_CONDITIONS = (
    *DEFAULT_CONDITIONS,
    "retrieved:bm25:transcript:1h:32",
    "retrieved:text:transcript:1h:32",
    "retrieved:multimodal:transcript:1h:32",
)


def evaluate(
    app: App,
    benchmark: Path,
    judges: list[str],
    out_dir: Path,
    conditions: list[str] | None = None,
    *,
    budget_usd: float | None = None,
    limit: int | None = None,
    progress: EvaluationProgress | None = None,
    allow_modified: bool = False,
) -> EvaluationResult:
    """Judge every pair of an exported benchmark with each judge, under each condition, in both
    answer orders; records go to ``out_dir/judgments.jsonl`` (resumable: recorded calls and
    records already written are not made again). ``offline-first``, ``offline-transcript`` and
    ``offline-frames`` are offline judges of known behaviour; other ids are configured models
    (live when the settings say so: keys and a cap are checked before anything is spent).
    ``limit`` judges the benchmark's first pairs only; ``progress`` hears of each judgment;
    ``allow_modified`` judges records changed after the export (recorded as such)."""
    from agents.evaluation import eval_stream, evaluation_id_of
    from agents.evaluation import evaluate as run_evaluation
    from policies.judging import parse_condition

    parsed = [parse_condition(c) for c in (conditions or DEFAULT_CONDITIONS)]
    # Everything the evaluation is run with, composed by the composition root (keys, prices
    # and the judges' endpoints checked there, before anything is written).
    parts = app.evaluation(judges)
    evaluation_id = evaluation_id_of(benchmark, out_dir, allow_modified=allow_modified)
    with parts.writer(eval_lease(str(out_dir.resolve())), f"eval --out {out_dir}") as held:
        cap = parts.cap(eval_stream(evaluation_id), budget_usd)
        return anyio.run(
            lambda: _then_release(
                parts.live_models,
                run_evaluation(
                    parts.deps,
                    benchmark_dir=benchmark,
                    judges=judges,
                    conditions=parsed,
                    out_dir=out_dir,
                    retrievers=parts.retrievers,
                    concurrency=parts.concurrency,
                    budget_micros=cap,
                    offline=parts.offline,
                    lease=held.name,
                    limit=limit,
                    progress=progress,
                    allow_modified=allow_modified,
                ),
            )
        )
