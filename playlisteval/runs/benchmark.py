"""The difficulty gate's pair selection and the benchmark's export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from agents.ownership import pairs_lease
from playlisteval.app import (
    App,
    model_factory,
)
from playlisteval.export import ExportSummary, export_benchmark
from playlisteval.runs.auditing import latest_run
from playlisteval.runs.release import then_release
from policies.pairs import SelectedPair
from store.errors import ConfigError
from store.events import (
    pairs_stream,
)
from store.runlog import run_started

if TYPE_CHECKING:
    from agents.pairs import PairsProgress


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
            lambda: then_release(
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
