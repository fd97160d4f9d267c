"""``playlisteval demo``: the whole pipeline on a synthetic playlist, or (with ``--domains`` and
``--hours-per-domain``, or ``--scale paper``) a measured rehearsal of a whole campaign."""

from __future__ import annotations

import math
import sys
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
        int, typer.Option(help="Rehearsal: seeds curated per domain (a capped sample).")
    ] = 3,
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
    check_count(frames, 1, "--frames")
    # Before anything is generated (it was refused only after the collection was made).
    check_count(concurrency, 1, "--concurrency")
    try:
        spec = campaign_spec(domains, hours_per_domain, scale, haystack_hours, video_minutes)
    except PlaylistEvalError as exc:
        raise fail(exc) from exc
    rehearse_campaign(
        home,
        spec,
        budget=budget,
        seeds_per_domain=seeds_per_domain,
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
    console.print(
        f"[bold]Campaign rehearsal[/]: {spec.domains} domain(s) x {spec.hours_per_domain:g} h "
        f"({spec.hours:g} h in {spec.domains * spec.videos_per_domain} videos); {seeds} seeds; "
        f"haystacks {', '.join(f'{h:g}' for h in hours)} h; offline provider (a harness, "
        "not evidence of model quality)"
    )
    manifest = _generate(meter, collection, spec)
    with open_app(root, create=True) as app_:
        _index_campaign(app_, meter, manifest, collection)
        cap = budget if budget is not None else 3.0 * seeds
        written = _judge_campaign(app_, meter, root, cap, seeds, concurrency, hours, n_frames)
    record = RehearsalRecord(
        command=" ".join(["playlisteval", *sys.argv[1:]]),
        domains=spec.domains,
        hours_per_domain=spec.hours_per_domain,
        hours=spec.hours,
        started=started,
        stages=meter.figures,
    )
    saved = save_record(root, record)
    console.print(stages_table(record))
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


def _judge_campaign(
    app_: App,
    meter: StageMeter,
    root: Path,
    cap: float,
    seeds: int,
    concurrency: int | None,
    hours: list[float],
    n_frames: int,
) -> Path:
    """The rehearsal's later stages, measured: curate, pairs, export, eval, report (its path)."""
    from playlisteval import runs
    from playlisteval.rehearsal import campaign_conditions
    from playlisteval.report import write_report

    with meter.stage("curate") as notes:
        report = run_curation(
            app_,
            budget=cap,
            max_seeds=seeds,
            concurrency=concurrency,
            run=None,
            per_seed=None,
            again=True,
        )
        notes.append(f"{len(report.accepted)} of {seeds} seeds accepted")
    with meter.stage("pairs") as notes, step_bars() as bars:
        run_id, chosen = runs.select_pairs(app_, report.run_id, progress=StepBars(bars))
        notes.append(f"{len(chosen)} pairs kept")
    out = root / "exports" / report.run_id
    with meter.stage("export") as notes:
        exported = runs.export(app_, out / "benchmark", run_id)
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
    return written.markdown


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
