"""``playlisteval demo``: the whole pipeline on a synthetic playlist, or (with ``--domains`` and
``--hours-per-domain``, or ``--scale paper``) a measured rehearsal of a whole campaign."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.collection import print_add, print_index, run_index
from playlisteval.cli.curation import run_curation
from playlisteval.cli.curation_report import print_audit
from playlisteval.cli.exporting import print_export
from playlisteval.cli.options import MaxSeedsOption
from playlisteval.cli.output import (
    JudgingProgress,
    RichIndexProgress,
    StepBars,
    console,
    index_bars,
    step_bars,
)
from playlisteval.cli.shell import check_count, fail, open_app
from store.errors import ConfigError, PlaylistEvalError, disk_full

if TYPE_CHECKING:
    from playlisteval.app import App
    from playlisteval.rehearsal import RehearsalRecord, StageMeter
    from tools.offline.campaign import CampaignSpec

commands = typer.Typer()

DEMO_SETTINGS = """\
# Written by `playlisteval demo`: short segments for the short synthetic videos.
[index]
segment_min_minutes = 1.0
segment_target_minutes = 1.0
segment_max_minutes = 2.0
"""

REHEARSAL_SETTINGS = """\
# Written by `playlisteval demo --domains … --hours-per-domain …`: the paper's settings, except
# that the generated collection's captions stand in for speech.
[index]
transcriber = "captions"
"""

#: The paper's benchmark: 90 preference pairs per domain (630 over seven domains).
PAPER_PAIRS_PER_DOMAIN = 90

#: The offline judges of known behaviour the demo and the rehearsal evaluate.
OFFLINE_JUDGES = ["offline-first", "offline-transcript", "offline-frames"]


@commands.command()
def demo(
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Workspace for the demo. Default: <default home>/demo."),
    ] = None,
    narrate: Annotated[
        bool | None, typer.Option(help="Narrate with espeak-ng (default: when installed).")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            help="Cap of the curation run (USD). Default: 5 for the demo, 3 a seed for a "
            "rehearsal (the offline provider spends nothing; it is priced as the configured "
            "models would be)."
        ),
    ] = None,
    max_seeds: MaxSeedsOption = 18,
    domains: Annotated[
        int | None,
        typer.Option(
            help="Rehearse a campaign: generate this many domains (1 to 7) of "
            "--hours-per-domain hours and run every stage on them, measured."
        ),
    ] = None,
    hours_per_domain: Annotated[
        float | None, typer.Option(help="Rehearsal: hours of video per domain.")
    ] = None,
    scale: Annotated[
        str | None,
        typer.Option(help="Rehearsal at a named scale: 'paper' is 7 domains x 100 hours."),
    ] = None,
    seeds_per_domain: Annotated[
        int | None,
        typer.Option(
            help="Rehearsal: seeds curated per domain (a capped sample; default 3). With "
            "--scale paper it replaces filling the benchmark by a quick sample."
        ),
    ] = None,
    pairs_per_domain: Annotated[
        int | None,
        typer.Option(
            help="Rehearsal: curate in rounds until every domain fills this many preference "
            "pairs, or its seeds run out (said so). Default: the paper's 90 with --scale paper "
            "(unless --seeds-per-domain is given), else a quick sample."
        ),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Rehearsal: seeds and judgments worked on at once.")
    ] = None,
    frames: Annotated[
        int, typer.Option(help="Rehearsal: frames each judgment is shown (uniform or retrieved).")
    ] = 64,
    video_minutes: Annotated[
        float, typer.Option(help="Rehearsal: length of each generated episode (minutes).")
    ] = 30.0,
    haystack_hours: Annotated[
        list[float] | None,
        typer.Option(
            help="Rehearsal: haystack lengths to build (repeatable). Default: the paper's 1, "
            "10 and 100 hours as far as a domain reaches, then the whole domain (3 h per "
            "domain builds 1 and 3 h)."
        ),
    ] = None,
) -> None:
    """Run the whole pipeline on a synthetic playlist: no key, no network.

    With --domains and --hours-per-domain (or --scale paper) it rehearses a campaign instead:
    a generated collection of that size through index, near-duplicates, seeds, curation,
    pairs, evaluation at haystacks of 1, 10 and 100 hours and the report, each stage's wall
    time, peak memory and disk printed and kept in the workspace's rehearsal.json.
    """
    check_count(max_seeds, 1, "--max-seeds")
    if domains is None and hours_per_domain is None and scale is None:
        run_demo(
            home, narrate=narrate, budget=5.0 if budget is None else budget, max_seeds=max_seeds
        )
        return
    check_count(seeds_per_domain, 1, "--seeds-per-domain")
    check_count(pairs_per_domain, 1, "--pairs-per-domain")
    if seeds_per_domain is not None and pairs_per_domain is not None:
        raise fail(
            ConfigError(
                "--seeds-per-domain takes a fixed sample and --pairs-per-domain fills the "
                "benchmark: give one or the other"
            )
        )
    check_count(frames, 1, "--frames")
    # Before anything is generated (it was refused only after the collection was made).
    check_count(concurrency, 1, "--concurrency")
    try:
        spec = campaign_spec(domains, hours_per_domain, scale, haystack_hours, video_minutes)
    except PlaylistEvalError as exc:
        raise fail(exc) from exc
    if pairs_per_domain is None and seeds_per_domain is None and scale is not None:
        pairs_per_domain = PAPER_PAIRS_PER_DOMAIN  # the paper's benchmark: 90 pairs a domain
    rehearse_campaign(
        home,
        spec,
        budget=budget,
        seeds_per_domain=seeds_per_domain or 3,
        pairs_per_domain=pairs_per_domain,
        concurrency=concurrency,
        n_frames=frames,
        haystacks=haystack_hours,
    )


def run_demo(
    home: Path | None, *, narrate: bool | None, budget: float, max_seeds: int | None
) -> None:
    """The demo: a synthetic playlist taken in, indexed, curated, exported, judged, reported."""
    from playlisteval import runs
    from playlisteval.report import write_report
    from playlisteval.settings import SETTINGS_FILE, default_home
    from tools.offline.synthetic import make_demo_playlist

    root = (home or default_home() / "demo").expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    settings_file = root / SETTINGS_FILE
    if not settings_file.exists():
        settings_file.write_text(DEMO_SETTINGS)
    playlist_dir = root / "synthetic-playlist"
    manifest = playlist_dir / "manifest.json"
    if not manifest.exists():
        console.print(f"generating the synthetic playlist in {playlist_dir} …")
        manifest = make_demo_playlist(playlist_dir, narrate=narrate)
    with open_app(root, create=True) as app_:
        summary = app_.indexer().add(str(manifest), domain=None)
        print_add(summary)
        print_index(app_, run_index(app_))
        console.print("\n[bold]Curation[/] (offline provider, priced as the configured models)")
        report = run_curation(
            app_, budget=budget, max_seeds=max_seeds, concurrency=None, run=None, per_seed=None
        )
        print_audit(runs.audit(app_, report.run_id))
        console.print("\n[bold]Benchmark[/] (difficulty gate with the offline weak judges)")
        exported = runs.export(app_, root / "exports" / "benchmark", report.run_id)
        print_export(exported)
        console.print("\n[bold]Judge evaluation[/] (offline judges of known behaviour)")
        evaluation = runs.evaluate(
            app_,
            exported.path,
            OFFLINE_JUDGES,
            root / "exports" / "evaluation",
            list(runs.DEMO_CONDITIONS),
        )
        judged = write_report([evaluation.out_dir], root / "exports" / "report", events=app_.events)
        console.print(f"{len(evaluation.records)} judgments; report: {judged.html}")
        # The next commands, each on a line of its own, whole (to copy), however narrow.
        for line in (
            f"\nworkspace: {root}",
            f"try: playlisteval search 'kneading the dough' --home {root}",
            f"     playlisteval audit --run {report.run_id} --seed SEED --home {root}",
            f"     playlisteval replay {report.run_id} --home {root}",
            f"benchmark: {exported.path}",
            f"validate it: playlisteval ui {exported.path} --home {root} --invite YOUR_NAME",
            f"judge report: {judged.markdown} and {judged.html}",
        ):
            console.print(line, soft_wrap=True)


def campaign_spec(
    domains: int | None,
    hours_per_domain: float | None,
    scale: str | None,
    haystacks: list[float] | None,
    video_minutes: float = 30.0,
) -> CampaignSpec:
    """The rehearsal's collection from the options, or ConfigError saying which is missing."""
    from tools.offline.campaign import PAPER_SCALE, CampaignSpec

    for hours in haystacks or []:
        if not (math.isfinite(hours) and hours > 0):
            raise ConfigError(f"--haystack-hours must be positive hours, got {hours!r}")
    if scale is not None:
        if scale != "paper":
            raise ConfigError(f"--scale {scale!r} is not known; the one named scale is 'paper'")
        if domains is not None or hours_per_domain is not None:
            raise ConfigError(
                "--scale paper sets --domains and --hours-per-domain: give one or the other"
            )
        return PAPER_SCALE
    if domains is None or hours_per_domain is None:
        raise ConfigError(
            "a rehearsal needs both --domains N and --hours-per-domain H (or --scale paper)"
        )
    spec = CampaignSpec(
        domains=domains, hours_per_domain=hours_per_domain, video_minutes=video_minutes
    )
    spec.check_rehearsable()  # before anything is generated (it failed at curation, after)
    return spec


def rehearse_campaign(
    home: Path | None,
    spec: CampaignSpec,
    *,
    budget: float | None,
    seeds_per_domain: int,
    concurrency: int | None,
    n_frames: int,
    haystacks: list[float] | None,
    pairs_per_domain: int | None = None,
) -> None:
    """Every stage of a campaign on a generated collection, each one measured."""
    from datetime import UTC, datetime

    from playlisteval.rehearsal import RehearsalRecord, StageMeter, default_haystacks, save_record
    from playlisteval.settings import SETTINGS_FILE, default_home

    name = f"rehearsal-{spec.domains}x{spec.hours_per_domain:g}h"
    root = (home or default_home() / name).expanduser().resolve()
    collection = root / "collection"
    _check_collection(root, collection, spec)
    root.mkdir(parents=True, exist_ok=True)
    if not (root / SETTINGS_FILE).exists():
        (root / SETTINGS_FILE).write_text(REHEARSAL_SETTINGS)
    meter = StageMeter(root)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    hours = haystacks or default_haystacks(spec.hours_per_domain)
    seeds = spec.domains * seeds_per_domain
    asked = (
        f"{seeds} seeds"
        if pairs_per_domain is None
        else f"curating until each domain fills {pairs_per_domain} pairs"
    )
    console.print(
        f"[bold]Campaign rehearsal[/]: {spec.domains} domain(s) x {spec.hours_per_domain:g} h "
        f"({spec.hours:g} h in {spec.domains * spec.videos_per_domain} videos); {asked}; "
        f"haystacks {', '.join(f'{h:g}' for h in hours)} h; offline provider (a harness, "
        "not evidence of model quality)"
    )
    manifest = _generate(meter, collection, spec)
    with open_app(root, create=True) as app_:
        _index_campaign(app_, meter, manifest, collection)
        plan = _Plan(budget, seeds_per_domain, pairs_per_domain, concurrency)
        written, filled = _judge_campaign(app_, meter, root, plan, hours, n_frames)
    record = RehearsalRecord(
        command=" ".join(["playlisteval", *sys.argv[1:]]),
        domains=spec.domains,
        hours_per_domain=spec.hours_per_domain,
        hours=spec.hours,
        started=started,
        stages=meter.figures,
        pairs_target=pairs_per_domain,
        pairs_by_domain=filled.pairs,
        short=filled.short,
    )
    saved = save_record(root, record)
    console.print(stages_table(record))
    for line in filled.short:
        console.print(f"[yellow]short:[/] {escape(line)}", soft_wrap=True)
    for line in (
        f"stage figures: {saved}",
        f"report: {written}",
        f"workspace: {root}",
    ):
        console.print(line, soft_wrap=True)


def _check_collection(root: Path, collection: Path, spec: CampaignSpec) -> None:
    """Refuse, in one line and before anything is written, a workspace whose collection was
    generated with other settings (or whose record of them is torn): its catalogue holds those
    videos, under the ids this spec's would take."""
    from tools.offline.campaign import ForeignCollection, check_collection

    try:
        check_collection(collection, spec)
    except ForeignCollection as exc:
        raise fail(
            ConfigError(
                f"{exc}: rehearse with another --home, or delete {str(root)!r} to start this "
                "workspace afresh"
            )
        ) from exc


def _generate(meter: StageMeter, collection: Path, spec: CampaignSpec) -> Path:
    """The rehearsal's first stage, measured: the collection generated (its manifest's path);
    a project error, or a disk with no room, is one line."""
    from tools.offline.campaign import make_campaign

    try:
        with meter.stage("generate") as notes, index_bars() as bars:
            task = bars.add_task("generating videos", total=None)
            manifest = make_campaign(
                collection,
                spec,
                progress=lambda done, total: bars.update(task, completed=done, total=total),
            )
            notes.append(f"{spec.domains * spec.videos_per_domain} videos")
    except PlaylistEvalError as exc:
        raise fail(exc) from exc
    except OSError as exc:
        full = disk_full(exc)
        if full is None:
            raise
        raise fail(full) from exc
    return manifest


def _index_campaign(app_: App, meter: StageMeter, manifest: Path, collection: Path) -> None:
    """The rehearsal's first stages, measured: models, add, index, near-duplicates, seeds."""
    with meter.stage("load models") as notes:
        notes.append(f"embedder {app_.embedder.name}, vector store")
        loaded = app_.indexer()
    with meter.stage("add") as notes:
        summary = loaded.add(str(manifest), domain=None, allowed_roots=[collection])
        notes.append(f"{summary.videos} videos listed")
    with meter.stage("index") as notes:
        with index_bars() as bars:
            indexer = app_.indexer(RichIndexProgress(bars))
            indexer.prepare_media()
            done = indexer.index_ready()
        notes.append(f"{done.chunks_computed} chunks computed")
    with meter.stage("near-duplicates") as notes:
        done.duplicates = indexer.dedupe()
        notes.append(f"{len(done.duplicates)} dropped")
        filled = indexer.backfill(done)  # a domain below a recorded target takes its reserve
        if filled:
            notes.append(f"{sum(len(d.brought) for d in filled)} backfilled")
    with meter.stage("seeds") as notes:
        done.seeds_per_domain = indexer.compute_seeds()
        notes.append(f"{sum(done.seeds_per_domain.values())} seeds")
    print_index(app_, indexer.totals(done))


@dataclass(frozen=True)
class _Plan:
    """How a rehearsal curates: a fixed sample of seeds per domain, or rounds until each
    domain fills ``pairs_per_domain`` pairs; the cap (USD) a round runs under."""

    budget: float | None
    seeds_per_domain: int
    pairs_per_domain: int | None
    concurrency: int | None

    def cap(self, seeds: int) -> float:
        """A round's cap: ``--budget``, else 3 USD a seed (priced as the configured models)."""
        return self.budget if self.budget is not None else 3.0 * seeds


@dataclass
class _Filled:
    """What curation and the difficulty gate gave: the run holding the benchmark, its sampled
    pairs per domain, and each domain that fell short (and why)."""

    run_id: str
    pairs: dict[str, int]
    short: list[str] = field(default_factory=list)


def _judge_campaign(
    app_: App,
    meter: StageMeter,
    root: Path,
    plan: _Plan,
    hours: list[float],
    n_frames: int,
) -> tuple[Path, _Filled]:
    """The rehearsal's later stages, measured: curate and pairs (in rounds when filling), then
    export, eval and report; the report's path and what the rounds filled."""
    from playlisteval import runs
    from playlisteval.rehearsal import campaign_conditions
    from playlisteval.report import write_report

    filled = _curate_rounds(app_, meter, plan)
    out = root / "exports" / filled.run_id
    with meter.stage("export") as notes:
        exported = runs.export(
            app_, out / "benchmark", filled.run_id, per_domain=plan.pairs_per_domain
        )
        notes.append(f"{exported.pairs} pairs")
    print_export(exported)
    conditions = campaign_conditions(hours, n_frames)
    with meter.stage("eval") as notes, step_bars() as bars:
        evaluation = runs.evaluate(
            app_,
            exported.path,
            OFFLINE_JUDGES,
            out / "evaluation",
            conditions,
            progress=JudgingProgress(bars),
        )
        notes.append(f"{len(evaluation.records)} judgments")
    with meter.stage("report") as notes:
        written = write_report([evaluation.out_dir], out / "report", events=app_.events)
        notes.append(str(written.markdown))
    return written.markdown, filled


#: Rounds a filling rehearsal curates at most (each measures the yield the next is sized by).
MAX_FILL_ROUNDS = 4


def _curate_rounds(app_: App, meter: StageMeter, plan: _Plan) -> _Filled:
    """Curate and pass the difficulty gate: once over a fixed sample, or (filling) in rounds,
    each over the seeds of the one before and more (``curate --again``), sized by the yield the
    round before measured (:func:`playlisteval.rehearsal.next_fill`), until every domain fills
    its pairs, its seeds run out, or :data:`MAX_FILL_ROUNDS` were curated. The last round's run
    holds the benchmark; the earlier ones stay in the log, named in the stage notes."""
    from collections import Counter

    from playlisteval.rehearsal import first_fill, next_fill

    target = plan.pairs_per_domain
    if target is None:
        return _curate_round(app_, meter, plan, plan.seeds_per_domain, "", None)
    available = Counter(seed.domain for seed in app_.catalog.seeds())
    taken = first_fill(target)
    for round_ in range(1, MAX_FILL_ROUNDS + 1):
        filled = _curate_round(app_, meter, plan, taken, f" {round_}", target)
        console.print(
            f"round {round_}: up to {taken} seeds a domain gave "
            + ", ".join(f"{d} {filled.pairs.get(d, 0)}" for d in sorted(available))
            + f" pairs (of {target} a domain)"
        )
        more = next_fill(target, taken, filled.pairs, dict(available))
        if more is None or round_ == MAX_FILL_ROUNDS:
            break
        taken = more
    filled.short = [
        f"{d}: {filled.pairs.get(d, 0)} of {target} pairs from "
        + (
            f"all its {available[d]} seeds (its seeds ran out)"
            if available[d] <= taken
            else f"{taken} seeds after {MAX_FILL_ROUNDS} rounds"
        )
        for d in sorted(available)
        if filled.pairs.get(d, 0) < target
    ]
    return filled


def _curate_round(
    app_: App, meter: StageMeter, plan: _Plan, taken: int, suffix: str, target: int | None
) -> _Filled:
    """One round, measured: ``taken`` seeds a domain curated in a new run, then its pairs
    through the difficulty gate and sampled (``target`` a domain, else the setting's)."""
    from collections import Counter

    from playlisteval import runs
    from store.runlog import run_started

    seeds = taken * len({seed.domain for seed in app_.catalog.seeds()})
    with meter.stage("curate" + suffix) as notes:
        report = run_curation(
            app_,
            budget=plan.cap(seeds),
            max_seeds=seeds,
            concurrency=plan.concurrency,
            run=None,
            per_seed=None,
            again=True,
        )
        taken_in_run = len(run_started(app_.events, report.run_id).seeds)  # as few as exist
        notes.append(
            f"run {report.run_id}: {len(report.accepted)} of {taken_in_run} seeds accepted"
        )
    with meter.stage("pairs" + suffix) as notes, step_bars() as bars:
        run_id, chosen = runs.select_pairs(
            app_, report.run_id, per_domain=target, progress=StepBars(bars)
        )
        notes.append(f"{len(chosen)} pairs kept")
    return _Filled(run_id, dict(sorted(Counter(p.domain for p in chosen).items())))


def stages_table(record: RehearsalRecord) -> Table:
    """Each stage's wall time, peak memory, disk afterwards and what it did."""
    table = Table(title=f"Stages ({record.hours:g} h in all)")
    for column in ("stage", "wall (s)", "peak memory (MiB)", "disk after (MiB)", "what"):
        table.add_column(column, justify="left" if column in ("stage", "what") else "right")
    for f in record.stages:
        table.add_row(
            f.stage,
            f"{f.seconds:.1f}",
            f"{f.peak_rss_bytes / 2**20:.0f}",
            f"{f.disk_bytes / 2**20:.0f}",
            escape(f.note),
        )
    table.add_row("all", f"{record.total_seconds:.1f}", "", "", "")
    return table
