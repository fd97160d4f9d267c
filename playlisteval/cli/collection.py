"""The collection's commands: ``add`` (take playlists in), ``index``, ``seeds`` and ``search``.

The indexer, the catalogue and the models are imported inside the commands, so listing them
(``--help``) loads none of them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.output import RichIndexProgress, console, index_bars
from playlisteval.cli.shell import HomeOption, check_count, checked, fail, open_app
from store.errors import ConfigError

if TYPE_CHECKING:
    from playlisteval.app import App
    from store.catalog import DomainHours, VideoRow
    from tools.index.indexer import AddSummary, DomainBackfill, IndexStore, IndexSummary, RedoReport

commands = typer.Typer()

LOCAL_RAY = "local"  # `index --ray` with no address: RAY_ADDRESS, else a local cluster
REDO_ONLY = ("transcripts", "embeddings")  # tools.index.index_records.REDO_ONLY, without its import
SHOWN_IDS = 8  # video ids named per line before "and N more"


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOWN_IDS])
    return shown + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")


def print_transcript_plan(indexer: IndexStore, videos: list[VideoRow]) -> None:
    """Which videos get which transcript source (captions, a speech-to-text model, or none and
    why), one line per source; and one line when speech-to-text cannot run here."""
    note = indexer.speech_note()
    if note is not None:
        console.print(f"[yellow]warning:[/] {escape(note)}", soft_wrap=True)
    sources: dict[str, list[str]] = {}
    for video in videos:
        plan = indexer.transcript_plan(video)
        if plan is not None:
            sources.setdefault(str(plan), []).append(video.id)
    for source, ids in sorted(sources.items()):
        count = f"{len(ids)} video{'s' if len(ids) != 1 else ''}"
        console.print(f"transcripts from {escape(source)}: {count} ({escape(_ids(ids))})")


def hours_table(rows: list[DomainHours], target: float | None = None) -> Table:
    """Hours per domain: in seeding (against the domain's recorded target, else ``target``),
    duplicates, failed, in reserve."""
    table = Table(title="Hours per domain")
    for name in (
        "domain",
        "videos",
        "in seeding (h)",
        "duplicates (h)",
        "failed (h)",
        "reserve (h)",
    ):
        table.add_column(name, justify="right" if name != "domain" else "left")
    for r in rows:
        goal = r.hours_target or target
        table.add_row(
            r.domain,
            str(r.videos),
            f"{r.hours_in_seeding:.2f}" + (f" / {goal:g}" if goal else ""),
            f"{r.hours_duplicate:.2f}",
            f"{r.hours_failed:.2f}",
            f"{r.hours_reserve:.2f}",
        )
    return table


def print_add(summary: AddSummary) -> None:
    """The playlists taken in, and each entry dropped, held in reserve or moved, with why."""
    for playlist in summary.playlists:
        order = " (re-sorted by episode)" if playlist.reordered else ""
        console.print(
            f"playlist [bold]{playlist.id}[/] ({playlist.domain}): {playlist.title}{order}"
        )
    console.print(f"{summary.videos} videos listed")
    for ref, reason in summary.dropped:
        console.print(f"[yellow]dropped[/] {escape(ref)}: {escape(reason)}")
    for ref, reason in summary.reserve:
        console.print(f"[yellow]reserve[/] {escape(ref)}: {escape(reason)}")
    for video_id, was, now in summary.moved:
        console.print(f"[yellow]moved[/] {escape(video_id)}: {escape(was)} → {escape(now)}")


def print_index(app_: App, summary: IndexSummary) -> None:
    """The index summary table, the duplicates and failures, and the hours per domain."""
    from store.catalog import FAILED

    table = Table(title="Index summary")
    table.add_column("what")
    table.add_column("value", justify="right")
    indexed = len(app_.catalog.videos(statuses=["indexed"]))
    table.add_row("videos indexed (this run)", str(summary.videos_indexed))
    table.add_row("videos in seeding", str(indexed))
    table.add_row("videos failed", str(len(app_.catalog.videos(statuses=[FAILED]))))
    table.add_row("hours in seeding", f"{summary.hours_indexed:.2f}")
    table.add_row(
        "chunks (computed this run / stored)", f"{summary.chunks_computed} / {summary.chunks_total}"
    )
    table.add_row("segments", str(summary.segments_total))
    redo = summary.redo
    for kind in ("chunks", "transcripts", "embeddings", "segments"):
        if kind in redo.videos:
            table.add_row(f"videos redone: {kind}", str(len(redo.videos[kind])))
    if redo.videos:
        table.add_row("chunks transcribed again", str(redo.chunks_retranscribed))
        table.add_row("chunks embedded again", str(redo.chunks_reembedded))
    table.add_row("near-duplicates dropped", str(len(summary.duplicates)))
    if summary.backfill:
        brought = sum(len(d.brought) for d in summary.backfill)
        table.add_row("videos backfilled from reserve (this run)", str(brought))
    for domain, count in summary.seeds_per_domain.items():
        table.add_row(f"seeds: {domain}", str(count))
    print_redo(redo)
    console.print(table)
    for dup in summary.duplicates:
        console.print(
            f"[yellow]duplicate[/] {dup.video_id} repeats {dup.kept_video_id} "
            f"({dup.segment_id} ~ {dup.kept_segment_id}, cosine {dup.cosine:.3f})"
        )
    for video_id, reason in summary.videos_failed:
        console.print(f"[red]failed[/] {video_id}: {escape(reason)}")
    print_backfill(summary.backfill)
    console.print(hours_table(app_.catalog.domain_hours(), app_.settings.ingest.target_hours))


def print_backfill(domains: list[DomainBackfill]) -> None:
    """Per domain with a target: the videos taken from reserve this run (each with the
    dropped video it stands in for), how many in all, and a domain left short, said so."""
    for d in domains:
        for row in d.brought:
            console.print(f"backfill {escape(row.video_id)}: {escape(row.reason)}", soft_wrap=True)
        videos = f"{len(d.brought)} video{'s' if len(d.brought) != 1 else ''}"
        console.print(
            f"backfilled {escape(d.domain)}: {videos}, {d.hours_brought:.2f} h from reserve "
            f"this run ({d.total} in all); {d.hours_in_seeding:.2f} h in seeding of its "
            f"{d.target_hours:g} h target",
            soft_wrap=True,
        )
        if d.short:  # the backfill stops short only when the reserve is used up
            console.print(
                f"[yellow]short[/] {escape(d.domain)}: {d.hours_in_seeding:.2f} h in seeding, "
                f"below its {d.target_hours:g} h target, and its reserve is used up: add more "
                "of its playlists "
                f"(`playlisteval add SOURCE --domain {escape(d.domain)} --target-hours "
                f"{d.target_hours:g}`), then `playlisteval index`",
                soft_wrap=True,
            )


def print_redo(report: RedoReport) -> None:
    """What changed settings made ``index`` redo, video by video, and the videos that had no
    record of their settings (taken as made with the old defaults)."""
    if report.unrecorded:
        console.print(
            f"{len(report.unrecorded)} video(s) indexed before settings were recorded "
            f"({escape(_ids(report.unrecorded))}): taken as made with the old defaults (their "
            "recorded transcript source and embedder; the rest as the settings say now)",
            soft_wrap=True,
        )
    for kind, ids in report.videos.items():
        for video_id in ids:
            changes = "; ".join(report.changes.get(video_id, ()))
            console.print(f"redo {kind} of {escape(video_id)}: {escape(changes)}", soft_wrap=True)


def run_index(
    app_: App, retry_failed: bool = False, ray: str | None = None, redo: str | None = None
) -> IndexSummary:
    """Index what is taken in, locally or on Ray, with bars; first redo what changed settings
    made stale (``redo``: what ``--redo`` forces)."""
    from store.catalog import READY

    on_ray = ray is not None or app_.settings.index.engine == "ray"
    with index_bars() as bars:
        progress = RichIndexProgress(bars)
        if on_ray:
            address = None if ray in (None, LOCAL_RAY) else ray
            indexer: IndexStore = app_.ray_indexer(progress, address)
        else:
            indexer = app_.indexer(progress)
        if retry_failed:
            again = indexer.retry_failed()
            console.print(f"{len(again)} failed video(s) taken up again")
        if not on_ray:  # on Ray, each task fetches and probes its own video on its node
            media_task = bars.add_task("preparing media", total=None)
            indexer.prepare_media()
            bars.remove_task(media_task)
        print_transcript_plan(indexer, app_.catalog.videos(statuses=[READY]))
        return indexer.run(redo)


@commands.command()
def add(
    source: Annotated[
        str, typer.Argument(help="Playlist URL, local folder of videos, or manifest (.json/.toml).")
    ],
    domain: Annotated[
        str | None, typer.Option(help="Domain of the playlist(s), e.g. education.")
    ] = None,
    target_hours: Annotated[
        float | None, typer.Option(help="Trim or extend the domain to about this many hours.")
    ] = None,
    allowed_root: Annotated[
        list[Path] | None, typer.Option(help="Extra folder a manifest may point into (repeatable).")
    ] = None,
    download: Annotated[bool, typer.Option(help="Download and probe the media now.")] = True,
    move: Annotated[
        bool,
        typer.Option(
            "--move",
            help="Move videos already listed in another playlist or domain to this one (an "
            "indexed video keeps its vectors; its domain's seeds are recomputed).",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Take a playlist in: list it, drop unavailable entries with a reason, download what is new."""

    def check_target() -> None:
        if target_hours is not None and not (math.isfinite(target_hours) and target_hours > 0):
            raise ConfigError(
                f"--target-hours must be a positive number of hours, got {target_hours!r}"
            )

    checked(check_target)  # before anything is listed into the catalogue
    with open_app(home, create=True) as app_:
        roots = [*app_.settings.ingest.allowed_roots, *(allowed_root or [])]
        target = target_hours if target_hours is not None else app_.settings.ingest.target_hours
        indexer = app_.indexer()
        summary = indexer.add(
            source, domain=domain, allowed_roots=roots, target_hours=target, move=move
        )
        print_add(summary)
        if download:
            _download(app_, indexer, summary, target)
            listed = {p.id for p in summary.playlists}
            videos = [v for v in app_.catalog.videos() if v.playlist_id in listed]
            print_transcript_plan(indexer, [v for v in videos if v.status != "failed"])
        console.print(hours_table(app_.catalog.domain_hours(), target))


def _download(app_: App, indexer: IndexStore, summary: AddSummary, target: float | None) -> None:
    """``add``'s download: each file that fails said with its reason, then the target hours."""
    from store.catalog import FAILED

    failed = {video.id for video in app_.catalog.videos(statuses=[FAILED])}
    indexer.prepare_media()
    # A file that cannot be downloaded or read as a video: said here, with its reason.
    for video in app_.catalog.videos(statuses=[FAILED]):
        if video.id not in failed:
            console.print(f"[red]failed[/] {video.id}: {escape(video.reason or '')}")
    if target is not None:
        for playlist in summary.playlists:
            for ref, reason in indexer.apply_target_hours(playlist.domain, target):
                console.print(f"[yellow]reserve[/] {escape(ref)}: {escape(reason)}")


@commands.command()
def index(
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="Take failed videos up again (a file restored or replaced, a backend fixed).",
        ),
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="[ADDRESS]",
            help="Compute the chunks on a Ray cluster: ADDRESS (`ray://HOST:10001`, `HOST:6379`, "
            "`auto`), else index.ray_address, else RAY_ADDRESS, else a local cluster started "
            "for the run. Each node fetches and decodes its own videos; one model replica per "
            "GPU share.",
        ),
    ] = None,
    redo: Annotated[
        bool,
        typer.Option(
            "--redo",
            help="Redo every indexed video's transcripts and embeddings (then segments, "
            "duplicates, seeds), changed settings or not. Without it, `index` redoes only what "
            "a changed setting made stale.",
        ),
    ] = False,
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            metavar="transcripts|embeddings",
            help="With --redo: only transcripts (and the embeddings of chunks whose transcript "
            "changed), or only embeddings (from the stored transcripts).",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Index every video taken in: chunks, transcripts, embeddings, segments, duplicates, seeds.

    Each video records the settings its index was made with; when a setting changes, `index`
    redoes what that change made stale (a transcriber: transcripts, then the embeddings that
    changed with them; an embedder, frames or OCR: embeddings; segment lengths: segments) and
    keeps the rest."""

    def check_redo() -> None:
        if only is not None and only not in REDO_ONLY:
            raise ConfigError(f"--only {only!r}: choose one of {', '.join(REDO_ONLY)}")
        if only is not None and not redo:
            raise ConfigError(f"--only {only} goes with --redo: `index --redo --only {only}`")

    checked(check_redo)
    forced = (only or "all") if redo else None
    with open_app(home) as app_:
        print_index(app_, run_index(app_, retry_failed, ray, forced))


@commands.command()
def seeds(
    domain: Annotated[str | None, typer.Option(help="Only this domain.")] = None,
    show: Annotated[int, typer.Option(help="Print this many seeds per domain.")] = 0,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Change nothing: print how the same-domain segment pairs' cosines fall for "
            "the embedder in use, the share in the seed band and at the duplicate threshold, "
            "and a suggested band (related but distinct).",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Recompute near-duplicates and seeds from the stored vectors; print counts per domain."""
    check_count(show, 0, "--show")
    if calibrate:
        with open_app(home) as app_:
            print_calibration(app_)
        return
    with open_app(home) as app_:
        indexer = app_.indexer()
        duplicates = indexer.dedupe()
        indexer.backfill()  # a domain a duplicate left under its target takes its next videos
        counts = indexer.compute_seeds()
        console.print(f"near-duplicates dropped: {len(duplicates)}")
        for name, count in counts.items():
            if domain is None or name == domain:
                console.print(f"seeds: {name}: {count}")
                for seed in app_.catalog.seeds(domain=name)[:show]:
                    console.print(
                        f"  {seed.id}  {seed.segment_a} ~ {seed.segment_b}  {seed.cosine:.3f}"
                    )


def print_calibration(app_: App) -> None:
    """``seeds --calibrate``: the distribution, the shares, the suggested band, the warnings."""
    from playlisteval.app import seed_band
    from tools.index.indexer import seed_calibration

    found = seed_calibration(app_.catalog, seed_band(app_.settings))
    embedder = app_.settings.index.embedder
    console.print(
        f"seed band calibration for embedder {embedder}: {found.pairs} same-domain pairs of "
        "segments of different videos"
    )
    if not found.pairs:
        console.print("no same-domain pairs: index at least two videos of a domain first")
        return
    widest = max(count for _, _, count in found.histogram)
    for low, high, count in found.histogram:
        bar = "#" * math.ceil(40 * count / widest) if count else ""
        console.print(f"  {low:.2f}-{high:.2f} {bar:<40} {count}")
    quantiles = "  ".join(f"{q:.0%} {v:.3f}" for q, v in found.quantiles.items())
    console.print(f"quantiles: {quantiles}")
    if found.cross_quantiles:
        cross = "  ".join(f"{q:.0%} {v:.3f}" for q, v in found.cross_quantiles.items())
        console.print(f"cross-domain pairs (unrelated): {cross}")
    band, suggested = found.current, found.suggested
    console.print(
        f"band in force [{band.min_cosine:.2f}, {band.max_cosine:.2f}] ({band.source}): "
        f"{found.in_current:.1%} of the pairs; at or above the duplicate threshold "
        f"{band.duplicate_cosine:.2f}: {found.duplicates:.1%}"
    )
    console.print(
        f"suggested band [{suggested.min_cosine:.2f}, {suggested.max_cosine:.2f}]: "
        f"{found.in_suggested:.1%} of the pairs; to use it, put under \\[seeds] in "
        f"playlisteval.toml: seed_min_cosine = {suggested.min_cosine:.2f}, "
        f"seed_max_cosine = {suggested.max_cosine:.2f}"
    )
    for warning in found.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")


@commands.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for (spoken or shown).")],
    domain: Annotated[str | None, typer.Option(help="Only this domain.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many chunks.")] = 5,
    home: HomeOption = None,
) -> None:
    """Search the chunk index; print video id, span, score and transcript."""
    check_count(k, 1, "-k")
    with open_app(home) as app_:
        if not app_.catalog.chunk_count():
            todo = (
                "index the videos taken in with `playlisteval index`"
                if app_.catalog.videos()
                else "take videos in with `playlisteval add SOURCE`, then `playlisteval index`"
            )
            raise fail(
                ConfigError(
                    f"nothing is indexed in {str(app_.workspace.root)!r} yet, so there is "
                    f"nothing to search: {todo}"
                )
            )
        hits = app_.search().search(query, k=k, filters={"domain": domain} if domain else None)
        if not hits:
            console.print("no hits: is the workspace indexed? (`playlisteval index`)")
        for rank, hit in enumerate(hits, 1):
            console.print(f"{rank}. {hit.citation()}  score {hit.score:.3f}  ({hit.domain})")
            console.print(f"   {hit.transcript}", soft_wrap=True, markup=False)
