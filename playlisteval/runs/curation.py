"""Curation runs: choose seeds, open a run (its definition recorded), resume one under its
recorded definition (refused, or upgraded, when today's code defines it otherwise), queue one
for the fleet."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio

from agents.curation import CurationProgress, Curator, RunReport
from agents.ownership import SEEDS_LEASE, run_lease
from agents.run_spec import RunSpec, recorded_spec, run_gates_asked, unhonoured
from agents.seed_driver import CurationConfig
from playlisteval.app import (
    App,
    curation_config,
    round_up_usd,
    traffic_for,
)
from playlisteval.runs.release import then_release
from policies.budget import cap_micros, check_concurrency
from policies.prices import PriceTable
from policies.selection import SeedSpread, spread_seeds
from store.catalog import SeedRow
from store.errors import ConfigError, RunDefinitionMismatch
from store.events import (
    RunUpgraded,
    micros_to_usd,
    run_stream,
    seed_stream,
)
from store.ledger import stream_spend
from store.runlog import run_cap, run_ids, run_started, seeds_in_runs


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
        # How the seeds were spread, and how many candidates a segment kept when they were
        # computed (seeds.candidates_per_segment).
        settings["seeding"] = {
            **spread.facts(),
            "candidates_per_segment": app.settings.seeds.candidates_per_segment,
        }
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
        return _drive(curator, run_id, seeds, cap, per_seed, lease.name, opened=True)


def _drive(
    curator: Curator,
    run_id: str,
    seeds: Sequence[SeedRow],
    cap: int | None,
    per_seed: int | None,
    lease: str,
    *,
    opened: bool = False,
) -> RunReport:
    """Curate run ``run_id``'s ``seeds`` under ``lease``, then close the live adapters."""
    return anyio.run(
        lambda: then_release(
            curator.deps.model_for,
            curator.curate(
                run_id,
                seeds,
                budget_micros=cap,
                per_seed_micros=per_seed,
                opened=opened,
                lease=lease,
            ),
        )
    )


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
        return _drive(curator, run_id, seeds, cap, started.per_seed_micros, lease.name)


def _definition_for_resume(
    app: App, run_id: str, today: CurationConfig, *, upgrade: bool
) -> CurationConfig:
    """The config run ``run_id`` goes on under: its recorded definition when today's code and
    settings define it the same; else RunDefinitionMismatch, or with ``upgrade`` today's (a
    ``RunUpgraded`` naming each difference appended first)."""
    recorded, now, differences = _definitions(app, run_id, today)
    if not differences:
        return recorded.config(today)
    if not upgrade:
        raise _mismatch(run_id, differences)
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


def check_resumable(app: App, run_id: str) -> None:
    """RunDefinitionMismatch when today's code and settings define run ``run_id`` otherwise
    than its log records (what ``curate --run`` refuses without ``--upgrade``): asked before a
    command draws anything; the resume itself asks again under the run's lease."""
    run_started(app.events, run_id)
    _recorded, _now, differences = _definitions(app, run_id, curation_config(app.settings))
    if differences:
        raise _mismatch(run_id, differences)


def _definitions(
    app: App, run_id: str, today: CurationConfig
) -> tuple[RunSpec, RunSpec, list[str]]:
    """The run's recorded definition, today's, and how they differ (what today's code cannot
    honour of the recorded one first)."""
    run_log = app.events.read_stream(run_stream(run_id))
    recorded = recorded_spec(run_log, run_gates_asked(app.events, run_id))
    models = today.models.all_models()
    now = RunSpec.today(today, check_prices(app, models).snapshot(models))
    return recorded, now, [*unhonoured(recorded), *recorded.differences(now)]


def _mismatch(run_id: str, differences: list[str]) -> RunDefinitionMismatch:
    return RunDefinitionMismatch(
        run_id,
        differences,
        f"`playlisteval curate --run {run_id} --upgrade` records the change and goes on "
        "under today's definition from here; or restore the settings and code it was "
        f"recorded with (`playlisteval replay {run_id}` still replays it as recorded)",
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
