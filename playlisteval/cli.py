"""The ``playlisteval`` command."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import typer
from rich import box
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from sqlalchemy.engine import make_url

from agents.audit import Audit
from agents.curation import RunReport
from agents.fleet import WorkerReport
from playlisteval import logs, runs, smoke
from playlisteval.app import App, role_models, seed_band
from playlisteval.export import ExportSummary
from playlisteval.settings import SETTINGS_FILE, Settings, default_home, load_settings
from playlisteval.workspace import Workspace
from policies.budget import Budget, cap_micros, check_concurrency
from store.catalog import FAILED, DomainHours, VideoRow
from store.coordination import LeaseHeld
from store.errors import (
    ConfigError,
    DiskFull,
    PlaylistEvalError,
    StoreUnreadable,
    UndecodableEvent,
    disk_full,
)
from store.events import (
    Event,
    ItemAccepted,
    SeedDiscarded,
    SeedStopped,
    micros_to_usd,
    pairs_stream,
)
from store.ledger import stream_spend
from store.runlog import run_cap, run_started
from tools.indexer import AddSummary, IndexStore, IndexSummary

if TYPE_CHECKING:
    from playlisteval.export import ExportSummary
    from playlisteval.overview import AnnotationRow, BenchmarkRow, RunRow
    from playlisteval.rehearsal import RehearsalRecord
    from policies.judging import JudgeMetrics, JudgmentRecord, MetricTable
    from tools.campaign import CampaignSpec

# Models are loaded from files shipped in packages or given by path; never from a hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pydantic-ai prints a first-run Logfire banner on a terminal; this CLI's output is its own.
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

app = typer.Typer(
    help="PlaylistEval: trustworthy benchmarks for video-language judges from long playlists.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
_T = TypeVar("_T")
# Error lines are not folded by rich: a path or a command in them stays whole, to copy (the
# terminal wraps a long line where it must).
err_console = Console(stderr=True, soft_wrap=True)

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Workspace folder (database, Qdrant data, media, exports). "
        "Default: $PLAYLISTEVAL_HOME or ~/.playlisteval.",
        envvar="PLAYLISTEVAL_HOME",
    ),
]

DEMO_SETTINGS = """\
# Written by `playlisteval demo`: short segments for the short synthetic videos.
[index]
segment_min_minutes = 1.0
segment_target_minutes = 1.0
segment_max_minutes = 2.0
"""


# Exit codes: what a script can tell apart.
EXIT_FIX = 2  # a setting, a value or the workspace needs fixing: the line says what
EXIT_BUSY = 3  # another live process holds what this command would write to
EXIT_TAMPERED = 4  # the log does not check out (replay or `store verify` found a difference)
EXIT_UNREADABLE = 5  # a database file is corrupt or not a database: `doctor` says more
EXIT_NOTHING_JUDGED = 6  # an evaluation judged no pair at all: the line gives the first reason
EXIT_DISK = 7  # a write found no room (disk or quota full, file-size limit): what came before stays


def _fail(exc: PlaylistEvalError, more: int = 0) -> typer.Exit:
    """Print ``exc`` as one line (saying how many ``more`` errors came with it) and return the
    exit that fits it."""
    also = f" (and {more} more like it)" if more else ""
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}{also}")
    if isinstance(exc, LeaseHeld):
        return typer.Exit(EXIT_BUSY)
    if isinstance(exc, UndecodableEvent):
        return typer.Exit(EXIT_TAMPERED)
    if isinstance(exc, DiskFull):
        return typer.Exit(EXIT_DISK)
    return typer.Exit(EXIT_UNREADABLE if isinstance(exc, StoreUnreadable) else EXIT_FIX)


def _require_workspace(settings: Settings) -> None:
    """A command that reads a workspace refuses one that was never started, rather than make
    an empty one where a mistyped ``--home`` points (a catalogue on a server stands in)."""
    workspace = Workspace(Path(settings.home))
    if settings.store.catalog_url or workspace.started() or workspace.blocked_by_file():
        return  # a file in the way is App's to explain
    raise ConfigError(
        f"no workspace at {str(workspace.root)!r}: start one there with `playlisteval add "
        f"SOURCE --home {workspace.root}` (or `playlisteval demo --home {workspace.root}`), or "
        "give the --home of an existing workspace"
    )


@contextmanager
def _open(home: Path | None, *, create: bool = False, **overrides: Any) -> Iterator[App]:
    """An App for the workspace; project errors become a one-line message and exit code 2
    (3 when another process holds the run). Unless ``create``, a workspace that was never
    started is refused (exit 2), not made."""
    try:
        settings = load_settings(home, **overrides)
        if not create:
            _require_workspace(settings)
        with App(settings) as opened:
            yield opened
    except PlaylistEvalError as exc:
        raise _fail(disk_full(exc) or exc) from exc
    except KeyboardInterrupt:
        raise _interrupted() from None
    except BaseExceptionGroup as group:
        # Concurrent work (seeds, judgments) fails as a group: when every error in it is one of
        # ours, the first is the line to print, not the group's traceback. A full disk fails
        # every writer at once, whatever each was doing: that is the line then.
        leaves = _leaves(group)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            raise _interrupted() from None
        no_room = [f for f in map(disk_full, leaves) if f is not None]
        if no_room:
            raise _fail(no_room[0]) from group
        known = [e for e in leaves if isinstance(e, PlaylistEvalError)]
        if not known or len(known) != len(leaves):
            raise
        raise _fail(known[0], more=len(known) - 1) from group
    except typer.Exit:
        raise  # already said
    except Exception as exc:
        # A write that found no room surfaces from SQLite, SQLAlchemy, pyarrow or a plain
        # file: one line and EXIT_DISK; anything else is a bug and keeps its traceback.
        written = disk_full(exc)
        if written is None:
            raise
        raise _fail(written) from exc


EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


def _interrupted() -> typer.Exit:
    """Ctrl-C inside a command: what was done is kept (every call and record is in the log or
    its file before it counts), so the same command goes on from there."""
    err_console.print(
        "interrupted: what was done is kept; run the same command again to go on from there"
    )
    return typer.Exit(EXIT_INTERRUPTED)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The errors of a (nested) exception group, in order."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def _checked(check: Callable[[], object]) -> None:
    """Run an input check before anything is opened or written; its error is one line."""
    try:
        check()
    except PlaylistEvalError as exc:
        raise _fail(exc) from exc


class RichIndexProgress:
    """Overall and per-video bars with ETA (several videos at once on a Ray cluster)."""

    def __init__(self, progress: Progress) -> None:
        self.bars = progress
        self.overall: TaskID | None = None
        self.videos: dict[str, TaskID] = {}

    def begin(self, total_chunks: int, videos: int) -> None:
        """Create the overall bar."""
        self.overall = self.bars.add_task(f"all {videos} videos", total=total_chunks)

    def video_started(self, video: VideoRow, chunks: int) -> None:
        """A bar for this video."""
        task = self.bars.add_task(f"  {video.id}", total=max(chunks, 1))
        self.videos[video.id] = task
        if chunks == 0:
            self.bars.update(task, completed=1)

    def expect(self, chunks: int) -> None:
        """More chunks than planned: the overall bar grows."""
        if self.overall is not None:
            total = self.bars.tasks[self.overall].total or 0
            self.bars.update(self.overall, total=total + chunks)

    def advance(self, chunks: int, video: VideoRow | None = None) -> None:
        """Move the overall bar and the video's (the only one under way, if not named)."""
        tasks = [self.overall]
        if video is not None:
            tasks.append(self.videos.get(video.id))
        elif len(self.videos) == 1:
            tasks.extend(self.videos.values())
        for task in tasks:
            if task is not None:
                self.bars.advance(task, chunks)

    def video_finished(self, video: VideoRow, error: str | None) -> None:
        """Drop the video's bar; print a failure."""
        task = self.videos.pop(video.id, None)
        if task is not None:
            self.bars.remove_task(task)
        if error:
            self.bars.console.print(f"[red]✗ {video.id}[/]: {escape(error)}")

    def end(self) -> None:
        """Nothing left to draw."""


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal and os.environ.get("PLAYLISTEVAL_PROGRESS") != "1",
    )


def _hours_table(rows: list[DomainHours], target: float | None = None) -> Table:
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
        table.add_row(
            r.domain,
            str(r.videos),
            f"{r.hours_in_seeding:.2f}" + (f" / {target:g}" if target else ""),
            f"{r.hours_duplicate:.2f}",
            f"{r.hours_failed:.2f}",
            f"{r.hours_reserve:.2f}",
        )
    return table


def _print_add(summary: AddSummary) -> None:
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


def _print_index(app_: App, summary: IndexSummary) -> None:
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
    table.add_row("near-duplicates dropped", str(len(summary.duplicates)))
    for domain, count in summary.seeds_per_domain.items():
        table.add_row(f"seeds: {domain}", str(count))
    console.print(table)
    for dup in summary.duplicates:
        console.print(
            f"[yellow]duplicate[/] {dup.video_id} repeats {dup.kept_video_id} "
            f"({dup.segment_id} ~ {dup.kept_segment_id}, cosine {dup.cosine:.3f})"
        )
    for video_id, reason in summary.videos_failed:
        console.print(f"[red]failed[/] {video_id}: {escape(reason)}")
    console.print(_hours_table(app_.catalog.domain_hours(), app_.settings.ingest.target_hours))


LOCAL_RAY = "local"  # `index --ray` with no address: RAY_ADDRESS, else a local cluster


def _index(app_: App, retry_failed: bool = False, ray: str | None = None) -> IndexSummary:
    on_ray = ray is not None or app_.settings.index.engine == "ray"
    with _progress() as bars:
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
        return indexer.run()


@app.command()
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

    _checked(check_target)  # before anything is listed into the catalogue
    with _open(home, create=True) as app_:
        roots = [*app_.settings.ingest.allowed_roots, *(allowed_root or [])]
        target = target_hours if target_hours is not None else app_.settings.ingest.target_hours
        indexer = app_.indexer()
        summary = indexer.add(
            source, domain=domain, allowed_roots=roots, target_hours=target, move=move
        )
        _print_add(summary)
        if download:
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
        console.print(_hours_table(app_.catalog.domain_hours(), target))


@app.command()
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
    home: HomeOption = None,
) -> None:
    """Index every video taken in: chunks, transcripts, embeddings, segments, duplicates, seeds."""
    with _open(home) as app_:
        _print_index(app_, _index(app_, retry_failed, ray))


@app.command()
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
    _check_count(show, 0, "--show")
    if calibrate:
        with _open(home) as app_:
            _print_calibration(app_)
        return
    with _open(home) as app_:
        indexer = app_.indexer()
        duplicates = indexer.dedupe()
        counts = indexer.compute_seeds()
        console.print(f"near-duplicates dropped: {len(duplicates)}")
        for name, count in counts.items():
            if domain is None or name == domain:
                console.print(f"seeds: {name}: {count}")
                for seed in app_.catalog.seeds(domain=name)[:show]:
                    console.print(
                        f"  {seed.id}  {seed.segment_a} ~ {seed.segment_b}  {seed.cosine:.3f}"
                    )


def _print_calibration(app_: App) -> None:
    """``seeds --calibrate``: the distribution, the shares, the suggested band, the warnings."""
    from tools.indexer import seed_calibration

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


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for (spoken or shown).")],
    domain: Annotated[str | None, typer.Option(help="Only this domain.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many chunks.")] = 5,
    home: HomeOption = None,
) -> None:
    """Search the chunk index; print video id, span, score and transcript."""
    _check_count(k, 1, "-k")
    with _open(home) as app_:
        if not app_.catalog.chunk_count():
            todo = (
                "index the videos taken in with `playlisteval index`"
                if app_.catalog.videos()
                else "take videos in with `playlisteval add SOURCE`, then `playlisteval index`"
            )
            raise _fail(
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


@app.command()
def status(home: HomeOption = None) -> None:
    """Where the workspace stands: videos by status, hours per domain, recorded problems, the
    latest runs, the benchmarks exported under it and their annotation progress."""
    from playlisteval.overview import find_benchmarks, list_annotations, list_runs

    with _open(home) as app_:
        counts: dict[str, int] = {}
        for video in app_.catalog.videos():
            counts[video.status] = counts.get(video.status, 0) + 1
        console.print(f"workspace {app_.workspace.root}", soft_wrap=True)
        videos = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        console.print(f"videos: {videos or 'none yet (`playlisteval add SOURCE`)'}")
        console.print(f"chunks: {app_.catalog.chunk_count()}, seeds: {len(app_.catalog.seeds())}")
        console.print(_hours_table(app_.catalog.domain_hours(), app_.settings.ingest.target_hours))
        for problem in app_.catalog.problems():
            # Refs and reasons quote file names and titles: printed as written, never as markup.
            console.print(
                f"[yellow]{problem.stage}[/] {escape(problem.ref)}: {escape(problem.reason)}"
            )
        found = list_runs(app_)
        if found:
            latest = found[-STATUS_RUNS:]
            more = f" (the latest {len(latest)} of {len(found)}: `playlisteval runs`)"
            console.print(_runs_table(latest, f"Runs{more if len(found) > len(latest) else ''}"))
        else:
            console.print("runs: none yet (`playlisteval curate`)")
        benchmarks = find_benchmarks(app_.workspace.exports)
        if benchmarks:
            console.print(_benchmarks_table(benchmarks, app_.workspace.exports))
        else:
            console.print("benchmarks: none exported under exports/ yet (`playlisteval export`)")
        annotations = list_annotations(app_, benchmarks)
        if annotations:
            console.print(_annotations_table(annotations, app_.workspace.exports))


STATUS_RUNS = 5  # the runs `status` shows; `runs` lists them all


def _usd(micros: int) -> str:
    return f"{micros_to_usd(micros):.4f}"


def _runs_table(rows: Sequence[RunRow], title: str = "Runs") -> Table:
    """Runs as ``runs`` and ``status`` show them."""
    # Light lines, so a row fits 80 columns; a value may wrap between its words, never inside
    # one (no "complet…"), and ids, which a user copies into the next command, never wrap.
    table = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    words = [w for r in rows for w in r.state.split()]
    table.add_column("run", no_wrap=True, min_width=max(len(r.run_id) for r in rows))
    table.add_column("started (UTC)", min_width=10)
    table.add_column("state", min_width=max(map(len, words), default=5))
    table.add_column("accepted of seeds", justify="right", min_width=8)
    table.add_column("USD spent / cap", justify="right", min_width=8)
    table.add_column("mode", min_width=7)
    for row in rows:
        cap = "no cap" if row.cap_micros is None else _usd(row.cap_micros)
        table.add_row(
            escape(row.run_id),
            row.started.strftime("%Y-%m-%d %H:%M"),
            escape(row.state),
            f"{row.accepted} of {row.seeds}",
            f"{_usd(row.spent_micros)} / {cap}",
            "offline" if row.offline else "live",
        )
    return table


def _benchmarks_table(rows: Sequence[BenchmarkRow], exports: Path) -> Table:
    """The exports found under the workspace."""
    table = Table(title="Benchmarks (under exports/)")
    for name in ("folder", "pairs", "sha256", "runs", "made by"):
        table.add_column(name, justify="right" if name == "pairs" else "left")
    for row in rows:
        made = (
            "offline provider"
            if row.offline_pairs == row.pairs
            else (f"partly offline ({row.offline_pairs})" if row.offline_pairs else "live models")
        )
        table.add_row(
            escape(str(row.path.relative_to(exports))),
            str(row.pairs),
            row.content_sha256[:12],
            escape(", ".join(row.runs)),
            made,
        )
    return table


def _annotations_table(rows: Sequence[AnnotationRow], exports: Path) -> Table:
    """Each benchmark's human annotation progress."""
    table = Table(title="Annotation")
    for name in ("benchmark", "sample", "annotators joined / invited", "answers / asked", "done"):
        table.add_column(name, justify="left" if name == "benchmark" else "right")
    for row in rows:
        where = str(row.benchmark.relative_to(exports)) if row.benchmark is not None else row.stream
        table.add_row(
            escape(where),
            str(row.sample),
            f"{row.joined} / {row.invited}",
            f"{row.answers} / {row.assigned}",
            f"{row.share_done:.0%}",
        )
    return table


@app.command("runs")
def runs_(home: HomeOption = None) -> None:
    """Every curation run: id, when it started, where it stands, its seeds, what it accepted,
    its spend against its cap, offline or live."""
    from playlisteval import integrity
    from playlisteval.overview import list_runs

    with _open(home) as app_:
        found = list_runs(app_)
        untrusted = integrity.log_warning(app_) if found else None
        # Per way each run stopped, the command that takes it further (not --budget for all).
        advice = [line for row in found for line in runs.resume_lines(app_, row)]
    if not found:
        console.print("no run yet: `playlisteval curate` starts one")
        return
    if untrusted:
        err_console.print(f"[bold red]warning:[/] {escape(untrusted)}")
    console.print(_runs_table(found))
    for line in advice:
        console.print(escape(line), soft_wrap=True)


@app.command()
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
    max_seeds: Annotated[int | None, typer.Option(help="Curate at most this many seeds.")] = 18,
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
            help="Rehearsal: haystack lengths to build (repeatable). Default: those of 1, 10 "
            "and 100 hours a domain can hold."
        ),
    ] = None,
) -> None:
    """Run the whole pipeline on a synthetic playlist: no key, no network.

    With --domains and --hours-per-domain (or --scale paper) it rehearses a campaign instead:
    a generated collection of that size through index, near-duplicates, seeds, curation,
    pairs, evaluation at haystacks of 1, 10 and 100 hours and the report, each stage's wall
    time, peak memory and disk printed and kept in the workspace's rehearsal.json.
    """
    _check_count(max_seeds, 1, "--max-seeds")
    if domains is not None or hours_per_domain is not None or scale is not None:
        _check_count(seeds_per_domain, 1, "--seeds-per-domain")
        _check_count(frames, 1, "--frames")
        try:
            spec = _campaign_spec(domains, hours_per_domain, scale, haystack_hours, video_minutes)
        except PlaylistEvalError as exc:
            raise _fail(exc) from exc
        _rehearse_campaign(
            home,
            spec,
            budget=budget,
            seeds_per_domain=seeds_per_domain,
            concurrency=concurrency,
            n_frames=frames,
            haystacks=haystack_hours,
        )
        return
    from tools.synthetic import make_demo_playlist

    budget = 5.0 if budget is None else budget
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
    with _open(root, create=True) as app_:
        summary = app_.indexer().add(str(manifest), domain=None)
        _print_add(summary)
        _print_index(app_, _index(app_))
        console.print("\n[bold]Curation[/] (offline provider, priced as the configured models)")
        report = _curate(
            app_, budget=budget, max_seeds=max_seeds, concurrency=None, run=None, per_seed=None
        )
        _print_audit(runs.audit(app_, report.run_id))
        console.print("\n[bold]Benchmark[/] (difficulty gate with the offline weak judges)")
        exported = runs.export(app_, root / "exports" / "benchmark", report.run_id)
        _print_export(exported)
        console.print("\n[bold]Judge evaluation[/] (offline judges of known behaviour)")
        evaluation = runs.evaluate(
            app_,
            exported.path,
            ["offline-first", "offline-transcript", "offline-frames"],
            root / "exports" / "evaluation",
            list(runs.DEMO_CONDITIONS),
        )
        from playlisteval.report import write_report

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


def _campaign_spec(
    domains: int | None,
    hours_per_domain: float | None,
    scale: str | None,
    haystacks: list[float] | None,
    video_minutes: float = 30.0,
) -> CampaignSpec:
    """The rehearsal's collection from the options, or ConfigError saying which is missing."""
    from tools.campaign import PAPER_SCALE, CampaignSpec

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
    return CampaignSpec(
        domains=domains, hours_per_domain=hours_per_domain, video_minutes=video_minutes
    )


REHEARSAL_SETTINGS = """\
# Written by `playlisteval demo --domains … --hours-per-domain …`: the paper's settings, except
# that the generated collection's captions stand in for speech.
[index]
transcriber = "captions"
"""


def _rehearse_campaign(
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

    from playlisteval.rehearsal import (
        RehearsalRecord,
        StageMeter,
        campaign_conditions,
        default_haystacks,
        save_record,
    )
    from playlisteval.report import write_report
    from tools.campaign import make_campaign

    name = f"rehearsal-{spec.domains}x{spec.hours_per_domain:g}h"
    root = (home or default_home() / name).expanduser().resolve()
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
    collection = root / "collection"
    with meter.stage("generate") as notes, _progress() as bars:
        task = bars.add_task("generating videos", total=None)
        manifest = make_campaign(
            collection,
            spec,
            progress=lambda done, total: bars.update(task, completed=done, total=total),
        )
        notes.append(f"{spec.domains * spec.videos_per_domain} videos")
    with _open(root, create=True) as app_:
        with meter.stage("load models") as notes:
            notes.append(f"embedder {app_.embedder.name}, vector store")
            loaded = app_.indexer()
        with meter.stage("add") as notes:
            summary = loaded.add(str(manifest), domain=None, allowed_roots=[collection])
            notes.append(f"{summary.videos} videos listed")
        with meter.stage("index") as notes:
            with _progress() as bars:
                indexer = app_.indexer(RichIndexProgress(bars))
                indexer.prepare_media()
                done = indexer.index_ready()
            notes.append(f"{done.chunks_computed} chunks computed")
        with meter.stage("near-duplicates") as notes:
            done.duplicates = indexer.dedupe()
            notes.append(f"{len(done.duplicates)} dropped")
        with meter.stage("seeds") as notes:
            done.seeds_per_domain = indexer.compute_seeds()
            notes.append(f"{sum(done.seeds_per_domain.values())} seeds")
        _print_index(app_, indexer.totals(done))
        cap = budget if budget is not None else 3.0 * seeds
        with meter.stage("curate") as notes:
            report = _curate(
                app_,
                budget=cap,
                max_seeds=seeds,
                concurrency=concurrency,
                run=None,
                per_seed=None,
                again=True,
            )
            notes.append(f"{len(report.accepted)} of {seeds} seeds accepted")
        with meter.stage("pairs") as notes, _step_bars() as bars:
            run_id, chosen = runs.select_pairs(app_, report.run_id, progress=StepBars(bars))
            notes.append(f"{len(chosen)} pairs kept")
        out = root / "exports" / report.run_id
        with meter.stage("export") as notes:
            exported = runs.export(app_, out / "benchmark", run_id)
            notes.append(f"{exported.pairs} pairs")
        _print_export(exported)
        conditions = campaign_conditions(hours, n_frames)
        with meter.stage("eval") as notes, _step_bars() as bars:
            evaluation = runs.evaluate(
                app_,
                exported.path,
                ["offline-first", "offline-transcript", "offline-frames"],
                out / "evaluation",
                conditions,
                progress=_JudgingProgress(bars),
            )
            notes.append(f"{len(evaluation.records)} judgments")
        with meter.stage("report") as notes:
            written = write_report([evaluation.out_dir], out / "report", events=app_.events)
            notes.append(str(written.markdown))
    record = RehearsalRecord(
        command=" ".join(["playlisteval", *sys.argv[1:]]),
        domains=spec.domains,
        hours_per_domain=spec.hours_per_domain,
        hours=spec.hours,
        started=started,
        stages=meter.figures,
    )
    saved = save_record(root, record)
    console.print(_stages_table(record))
    for line in (
        f"stage figures: {saved}",
        f"report: {written.markdown}",
        f"workspace: {root}",
    ):
        console.print(line, soft_wrap=True)


def _stages_table(record: RehearsalRecord) -> Table:
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


# -- curation -------------------------------------------------------------------------------------


def _print_report(report: RunReport, stops: BudgetStops | None = None) -> None:
    console.print(
        f"run [bold]{report.run_id}[/]: {report.outcome}; accepted {len(report.accepted)}, "
        f"discarded {len(report.discarded)}, stopped {len(report.stopped)}; "
        f"spent {micros_to_usd(report.spent_micros):.4f} USD "
        f"({report.live_calls} calls made, {report.replayed_calls} served from the log)"
    )
    budget_stops = stops.seeds if stops is not None else {}
    for seed_id, reason in sorted(report.stopped.items()):
        if seed_id not in budget_stops:
            console.print(f"[yellow]stopped[/] {seed_id}: {escape(reason)}")
    if stops is not None and stops.seeds:
        for line in stops.lines(report.run_id):
            console.print(line, soft_wrap=True)
    elif report.outcome == "budget":
        console.print(
            f"the cap stopped it: resume with `playlisteval curate --run {report.run_id} "
            "--budget USD`, USD being the run's new total cap (above the "
            f"{micros_to_usd(report.spent_micros):.4f} spent)",
            soft_wrap=True,
        )


@dataclass(frozen=True)
class BudgetStops:
    """The seeds a cap stopped, what their refused calls needed, and what to resume with."""

    seeds: dict[str, tuple[str, int]]  # seed → (whose cap: run, seed or account; micros needed)
    spent_micros: int
    cap_micros: int | None
    finished: int  # seeds of the run that ended (accepted or discarded)

    def lines(self, run_id: str) -> list[str]:
        """What happened and the command that goes on, with a cap that would."""
        by_cap = Counter(which for which, _ in self.seeds.values())
        out = []
        for which, count in sorted(by_cap.items()):
            largest = max(n for w, n in self.seeds.values() if w == which)
            whose = {
                "run": "the run's cap",
                "seed": "the per-seed cap",
                "account": "a shared account's cap",
            }[which]
            out.append(
                f"[yellow]stopped by {whose}[/]: {count} seed(s); the largest next call "
                f"needed {micros_to_usd(largest):.4f} USD"
            )
        if by_cap.get("run"):
            suggest = _round_up_cents(self.suggested_micros())
            out.append(
                f"resume with: playlisteval curate --run {run_id} --budget {suggest} "
                f"(the run's new total cap; it has spent {micros_to_usd(self.spent_micros):.4f}"
                + (f" of {micros_to_usd(self.cap_micros):.4f}" if self.cap_micros else "")
                + f" USD; {suggest} is {self.basis()})"
            )
        if by_cap.get("seed"):
            out.append(
                "a resumed run keeps its per-seed cap: start a new run with a larger --per-seed "
                "(`playlisteval curate --again --per-seed USD`) to take those seeds further"
            )
        return out

    def _per_finished(self) -> int | None:
        return self.spent_micros // self.finished if self.finished else None

    def suggested_micros(self) -> int:
        """A total cap that lets every stopped seed make its next call and, at what this run
        paid per finished seed, finish."""
        run_seeds = [n for w, n in self.seeds.values() if w == "run"]
        per = self._per_finished() or 0
        return self.spent_micros + max(sum(run_seeds), per * len(run_seeds))

    def basis(self) -> str:
        """How :meth:`suggested_micros` was reckoned, in words."""
        per = self._per_finished()
        if per:
            return (
                f"what was spent plus {micros_to_usd(per):.4f} USD per stopped seed, this run's "
                "cost per finished seed"
            )
        return "what was spent plus each stopped seed's next call"


def _round_up_cents(micros: int) -> str:
    """Micro-dollars as USD rounded up to the cent (a cap that is at least as much)."""
    return f"{math.ceil(micros / 10_000) / 100:.2f}"


def _budget_stops(app_: App, report: RunReport) -> BudgetStops:
    """Read from the run's log what the calls its cap refused needed."""
    from store.events import CallRefused, seed_stream

    seeds: dict[str, tuple[str, int]] = {}
    for seed_id, reason in report.stopped.items():
        if not reason.startswith("budget"):
            continue
        refused = [
            e
            for s in app_.events.read_stream(seed_stream(report.run_id, seed_id))
            if isinstance(e := s.event(), CallRefused)
        ]
        if refused:
            seeds[seed_id] = (refused[-1].cap, refused[-1].needed_micros)
    return BudgetStops(
        seeds=seeds,
        spent_micros=report.spent_micros,
        cap_micros=run_cap(app_.events, report.run_id),
        finished=len(report.accepted) + len(report.discarded),
    )


def _earlier_ends(app_: App, run_id: str) -> Counter[str]:
    """The run's seeds that ended for good before now (accepted or discarded: a stopped seed
    is taken up again by a resume), by how they ended (``run_end``'s rule)."""
    from agents.curation import run_end
    from playlisteval.curation_display import ACCEPTED, DISCARDED
    from playlisteval.overview import SEED_ENDS
    from store.events import seed_stream

    prefix = seed_stream(run_id, "")
    seeds = app_.events.read_all(stream_prefix=prefix, types=SEED_ENDS)
    ends = run_end(run_id, ((s.stream, s.event()) for s in seeds), 0)
    return +Counter({ACCEPTED: ends.accepted, DISCARDED: ends.discarded})  # none of a kind: no row


def _curate(
    app_: App,
    *,
    budget: float | None,
    max_seeds: int | None,
    concurrency: int | None,
    run: str | None,
    per_seed: float | None,
    again: bool = False,
) -> RunReport:
    from playlisteval.curation_display import LiveCuration

    check_concurrency(concurrency, most=app_.settings.curation.max_concurrency)
    earlier: Counter[str] = Counter()
    if run is not None:
        started = run_started(app_.events, run)
        total = len(started.seeds)
        offline = started.offline
        earlier = _earlier_ends(app_, run)
    else:
        total = max_seeds or len(app_.catalog.seeds())
        offline = app_.settings.curation.offline
        # Before the progress display: a model with no price is one line, and no run opens.
        runs.check_prices(app_, role_models(app_.settings).all_models())
    view = LiveCuration(total, offline=offline, earlier=earlier)
    # Redrawn from the view four times a second (rich's own thread): the figures and the clock
    # move while seeds work, not only when one ends. What is printed meanwhile (a warning, a
    # log line) goes above the table, never into it.
    live = Live(
        get_renderable=view.render,
        console=console,
        transient=False,
        auto_refresh=True,
        refresh_per_second=4,
        redirect_stderr=True,
    )
    try:
        with live:
            if run is not None:
                report = runs.resume(
                    app_, run, budget_usd=budget, concurrency=concurrency, progress=view
                )
            else:
                report = runs.curate(
                    app_,
                    budget_usd=budget,
                    max_seeds=max_seeds,
                    concurrency=concurrency,
                    per_seed_usd=per_seed,
                    progress=view,
                    again=again,
                )
    except BaseException:
        console.print()  # the error that follows starts on a line of its own, apart from the table
        raise
    console.print()
    stops = _budget_stops(app_, report) if report.stopped else None
    _print_report(report, stops)
    return report


def _check_money(
    budget: float | None = None, per_seed: float | None = None, concurrency: int | None = None
) -> None:
    _checked(lambda: cap_micros(budget, "--budget"))
    _checked(lambda: cap_micros(per_seed, "--per-seed"))
    _checked(lambda: check_concurrency(concurrency))


def _check_count(value: int | None, least: int, flag: str) -> None:
    """A count option below ``least`` is one line and exit 2 before anything opens
    (``--max-seeds 0`` must not mean every seed, nor ``--show -3`` all but three)."""

    def check() -> None:
        if value is not None and value < least:
            raise ConfigError(f"{flag} must be at least {least}, got {value!r}")

    _checked(check)


@app.command()
def curate(
    budget: Annotated[
        float | None,
        typer.Option(
            help="Cap of the run in USD (default budget.cap_usd). With --run: the run's new "
            "total cap (not money added), refused below what it has spent; without it a "
            "resumed run keeps its cap."
        ),
    ] = None,
    max_seeds: Annotated[int | None, typer.Option(help="Curate at most this many seeds.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Seeds in flight at once.")] = None,
    run: Annotated[
        str | None,
        typer.Option(help="Resume this run (its own seeds, its cap unless --budget gives one)."),
    ] = None,
    per_seed: Annotated[float | None, typer.Option(help="Cap per seed in USD.")] = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Take seeds that earlier runs curated too (their calls are paid again); by "
            "default a new run takes only seeds no run has taken.",
        ),
    ] = False,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--offline",
            help="Call the configured providers (keys and a cap needed) or the offline provider "
            "(default: curation.offline, which is true).",
        ),
    ] = None,
    batch: Annotated[
        bool | None,
        typer.Option(
            "--batch/--no-batch",
            help="Send text-only gate calls through the Gemini and OpenAI batch APIs "
            "(half price, answers within hours; default: providers.batch).",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Curate seeds into benchmark items under a dollar budget (offline provider by default).
    One process works on a run at a time: a second `curate --run` on it is refused (exit 3)."""
    _check_money(budget, per_seed, concurrency)
    _check_count(max_seeds, 1, "--max-seeds")
    if run is not None and (again or max_seeds is not None or per_seed is not None):
        err_console.print(
            "[bold red]error:[/] --again, --max-seeds and --per-seed shape a new run; a resumed "
            "run keeps its own seeds and per-seed cap"
        )
        raise typer.Exit(EXIT_FIX)
    overrides: dict[str, Any] = {}
    if live is not None:
        overrides["curation"] = {"offline": not live}
    if batch is not None:
        overrides["providers"] = {"batch": batch}
    with _open(home, **overrides) as app_:
        cap = budget if budget is not None or run is not None else app_.settings.budget.cap_usd
        _curate(
            app_,
            budget=cap,
            max_seeds=max_seeds,
            concurrency=concurrency,
            run=run,
            per_seed=per_seed if per_seed is not None else app_.settings.budget.per_seed_usd,
            again=again,
        )


def _print_audit(report: Audit) -> None:
    """A run's audit: its spend by phase, gate, role and model, and why it rejected (each kind
    of reason shown by its first example, values as logged, and how many were like it)."""
    cap = f" of {micros_to_usd(report.budget_micros):.4f}" if report.budget_micros else ""
    console.print(
        f"run [bold]{report.run_id}[/] ({report.outcome}): spent "
        f"{micros_to_usd(report.spent_micros):.4f} USD{cap}"
    )
    for title, data in (
        ("spend by phase", report.by_phase),
        ("spend by gate", report.by_gate),
        ("spend by role", report.by_role),
        ("spend by model", report.by_model),
    ):
        table = Table(title=title)
        table.add_column("key")
        table.add_column("USD", justify="right")
        for key, micros in sorted(data.items(), key=lambda kv: -kv[1]):
            table.add_row(key, f"{micros_to_usd(micros):.4f}")
        console.print(table)
    hist = Table(title="rejection reasons (the first of each kind, as logged)")
    hist.add_column("gate: reason")
    hist.add_column("count", justify="right")
    hist.add_column("")
    top = max(report.rejections.values(), default=1)
    for kind, count in report.rejections.items():
        example = report.rejection_examples.get(kind, kind)
        alike = f"\n[dim](and {count - 1} more like it)[/]" if count > 1 else ""
        hist.add_row(escape(example) + alike, str(count), "█" * max(1, round(20 * count / top)))
    console.print(hist)
    console.print(
        "accepted after at least one rejection: " + (", ".join(report.retries_accepted) or "none")
    )
    statuses = Counter(t.status for t in report.seeds)
    console.print("seeds: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))


#: How each kind of timeline step is marked.
STEP_MARKS = {
    "attempt": "[bold]",
    "pass": "[green]",
    "reject": "[red]",
    "call failed": "[red]",
    "call refused": "[yellow]",
    "accepted": "[bold green]",
    "discarded": "[yellow]",
    "stopped": "[yellow]",
}


def _print_timeline(report: Audit) -> None:
    """The seeds' timelines alone (``audit --seed``): each step in words, the rejected output
    under each rejection."""
    from agents.audit import describe_step

    for line in report.seeds:
        console.print(
            f"run [bold]{escape(report.run_id)}[/], seed [bold]{escape(line.seed_id)}[/]: "
            f"{escape(line.status)}, {micros_to_usd(line.spent_micros):.4f} USD"
        )
        for step in line.steps:
            mark = STEP_MARKS.get(step["step"], "")
            indent = "" if step["step"] == "attempt" else "  "
            text = escape(describe_step(step))
            console.print(f"{indent}{mark}{text}[/]" if mark else f"{indent}{text}")
            if step["step"] == "reject" and step.get("rejected_output"):
                console.print(
                    "    rejected output: " + escape(step["rejected_output"][:300]),
                    soft_wrap=True,
                )


@app.command()
def audit(
    run: Annotated[str | None, typer.Option(help="The run (default: the latest).")] = None,
    seed: Annotated[str | None, typer.Option(help="Show this seed's timeline.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """A run's timelines, spend by phase/gate/role/model and its rejection reasons."""
    from playlisteval import integrity

    with _open(home) as app_:
        report = runs.audit(app_, run, seed)
        untrusted = integrity.log_warning(app_, [report.run_id])
        offline = run_started(app_.events, report.run_id).offline
        if as_json:
            facts = {"log_warning": untrusted, "offline": offline}
            print(json.dumps({**report.to_json(), **facts}, indent=2))
            return
        if untrusted:
            err_console.print(f"[bold red]warning:[/] {escape(untrusted)}")
        banner = (
            "[bold yellow]offline provider[/]: this run is a harness of the loop, never "
            "evidence of model quality"
        )
        if seed is not None:
            _print_timeline(report)  # that seed alone: the run's totals are `audit` without it
            if offline:
                console.print(banner)  # after the timeline, whose first line names the seed
        else:
            if offline:
                console.print(banner)
            _print_audit(report)


@app.command()
def replay(
    run: Annotated[str, typer.Argument(help="The run to replay.")],
    strict: Annotated[
        bool,
        typer.Option(
            help="No model call at all; check the hash chains and compare every derived event "
            "with the log (the default unless --resume)."
        ),
    ] = True,
    resume: Annotated[
        bool,
        typer.Option(help="Serve recorded calls free and go on live (as `curate --run`)."),
    ] = False,
    budget: Annotated[
        float | None,
        typer.Option(
            help="USD: the run's new total cap (--resume) or the what-if cap (a counterfactual "
            "replay)."
        ),
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option(help="Counterfactual attempts per seed and phase.")
    ] = None,
    concurrency: Annotated[int | None, typer.Option(help="Seeds in flight at once.")] = None,
    home: HomeOption = None,
) -> None:
    """Replay a run from its log: audit it strictly (exit 4 and the first seq that differs when
    the log is not what its answers derive), ask what another policy would have done, or finish
    its stopped seeds."""
    _check_money(budget, None, concurrency)
    with _open(home) as app_:
        if resume:
            if max_attempts is not None:
                raise typer.BadParameter("--max-attempts goes with a strict replay")
            _curate(
                app_, budget=budget, max_seeds=None, concurrency=concurrency, run=run, per_seed=None
            )
            return
        result = runs.replay_strict(
            app_, run, budget_usd=budget, max_attempts=max_attempts, concurrency=concurrency
        )
    report = result.report
    if result.verdict is None:
        console.print(
            f"replay of {run} under {result.policy}: {result.model_calls} model calls; "
            f"accepted {len(report.accepted)} (the run accepted "
            f"{len(result.original_accepted)}), cost "
            f"{micros_to_usd(report.spent_micros + report.replayed_micros):.4f} USD (the run "
            f"paid {micros_to_usd(result.original_cost_micros):.4f})"
        )
        missing = [s for s, why in report.stopped.items() if why.startswith("unrecorded")]
        budget_stopped = [s for s, why in report.stopped.items() if why.startswith("budget")]
        if budget_stopped:
            console.print(f"stopped by the budget: {len(budget_stopped)} seeds")
        if missing:
            console.print(f"would need calls the log does not hold: {len(missing)} seeds")
        extra = set(report.accepted) - set(result.original_accepted)
        if extra:
            console.print(f"accepted only under this policy: {', '.join(sorted(extra))}")
        return
    verdict = result.verdict
    console.print(
        f"strict replay of {run}: {result.model_calls} model calls; {verdict.seeds} seeds, "
        f"{verdict.decisions} decisions and {verdict.served_checked} recorded answers "
        f"re-derived; accepted {len(report.accepted)} (the log: "
        f"{len(result.original_accepted)}); the log spent "
        f"{micros_to_usd(result.original_cost_micros):.4f} USD"
    )
    if verdict.ok:
        console.print("[green]the log replays exactly[/]: hash chains intact, nothing differs")
        return
    problems = verdict.problems()
    err_console.print(
        f"[bold red]the log does not replay[/]: {len(problems)} problem(s); the first is at "
        f"seq {verdict.first_seq}"
    )
    for line in problems[:10]:
        err_console.print(f"  {escape(line)}")
    raise typer.Exit(EXIT_TAMPERED)


@app.command()
def rehearse(
    seeds: Annotated[int, typer.Option(help="How many seeds to rehearse on.")] = 20,
    concurrency: Annotated[int | None, typer.Option(help="Seeds in flight at once.")] = None,
    paper: Annotated[
        bool,
        typer.Option(
            "--paper/--as-is",
            help="Price each segment at the paper's length (index.segment_target_minutes) "
            "or at this playlist's own.",
        ),
    ] = True,
    batch: Annotated[
        bool | None,
        typer.Option(
            "--batch/--no-batch",
            help="Price text-only gates at batch rates (default: providers.batch).",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """What curation will cost with the configured models, before any money is spent: the loop
    with the offline provider, every call priced with the live models' token rules, prices,
    context caching and batch rates."""
    with _open(home) as app_:
        result = runs.rehearse(app_, seeds=seeds, concurrency=concurrency, paper=paper, batch=batch)
        _print_audit(result.audit)
        table = Table(title="what the savings are worth (same calls, priced again)")
        table.add_column("pricing")
        table.add_column("total USD", justify="right")
        table.add_column("per accepted question", justify="right")
        for name, total in result.scenarios.items():
            per = result.per_accepted(name)
            table.add_row(
                name,
                f"{micros_to_usd(total):.4f}",
                "n/a" if per is None else f"{micros_to_usd(per):.4f}",
            )
        console.print(table)
        per = result.cost_per_accepted_micros
        if result.scale > 1.0:
            console.print(
                f"segments priced as {result.segment_minutes:g}-minute segments (the paper's; "
                f"this playlist's are {result.scale:.1f}× shorter): video, audio and "
                "transcripts scaled, answers not"
            )
        console.print(
            f"rehearsal on {result.seeds} seeds: {result.accepted} accepted, "
            f"{micros_to_usd(result.audit.spent_micros):.4f} USD in all "
            f"({result.video_share:.0%} on video calls; {result.cached_tokens:,} input tokens "
            f"read from context caches; {result.batch_calls} calls at batch rates); "
            "expected cost per accepted question: "
            + (
                f"[bold]{micros_to_usd(per):.4f} USD[/]"
                if per is not None
                else "n/a (none accepted)"
            )
        )
        console.print(
            "(offline answers; prices and token counts are the configured live models'. "
            "The paper paid about 1.00 USD per accepted question.)"
        )


def _print_export(summary: ExportSummary) -> None:
    table = Table(title=f"{summary.pairs} preference pairs")
    table.add_column("domain")
    table.add_column("pairs", justify="right")
    for domain, count in sorted(summary.per_domain.items()):
        table.add_row(domain, str(count))
    console.print(table)
    gaps = ", ".join(f"gap {g}: {n}" for g, n in sorted(summary.per_gap.items()))
    console.print(f"by rating gap: {gaps}")
    clips = f", {summary.clips} clips with their frames" if summary.clips else ""
    console.print(f"written to {summary.path} (sha256 {summary.content_sha256[:12]}…{clips})")


class StepBars:
    """A bar with elapsed time and ETA per step of a long command (the pairs the difficulty
    judges decide, the items an export reads, the clips it cuts): what
    :class:`agents.pairs.PairsProgress` and :class:`playlisteval.export.ExportProgress` hear."""

    def __init__(self, bars: Progress) -> None:
        self.bars = bars
        self.task: TaskID | None = None

    def begin(self, label: str, total: int) -> None:
        """A new bar of ``total`` units (the last one stays drawn, finished)."""
        self.task = self.bars.add_task(label, total=max(total, 0))

    def advance(self) -> None:
        """One more unit done."""
        if self.task is not None:
            self.bars.advance(self.task)


def _step_bars() -> Progress:
    """Bars with elapsed time and ETA (``pairs``, ``export``, ``eval``): drawn on a terminal, or
    anywhere with PLAYLISTEVAL_PROGRESS=1."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal and os.environ.get("PLAYLISTEVAL_PROGRESS") != "1",
    )


@app.command()
def pairs(
    run: Annotated[str | None, typer.Option(help="The run (default: the newest).")] = None,
    per_domain: Annotated[
        int | None, typer.Option(help="Pairs sampled per domain (default: pairs.pairs_per_domain).")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            help="Total cap of the run's difficulty-gate calls (USD), earlier ones included "
            "(default: the cap it was last given, else budget.pairs_usd)."
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Make preference pairs of a run's accepted items: any two answers, the higher rating
    preferred; keep a pair when a weak difficulty judge fails it; sample per domain by gap."""
    _check_money(budget)
    with _open(home) as app_:
        with _step_bars() as bars:  # closed before the summary: it is the command's last word
            run_id, chosen = runs.select_pairs(
                app_, run, per_domain=per_domain, budget_usd=budget, progress=StepBars(bars)
            )
        spent = stream_spend(app_.events, pairs_stream(run_id)).spent_micros
        by_domain = Counter(p.domain for p in chosen)
        by_gap = Counter(p.gap for p in chosen)
        console.print(
            f"run {run_id}: {len(chosen)} pairs sampled ("
            + ", ".join(f"{d} {n}" for d, n in sorted(by_domain.items()))
            + "); by gap: "
            + ", ".join(f"{g}: {n}" for g, n in sorted(by_gap.items()))
            + f"; the difficulty judges' calls cost {micros_to_usd(spent):.4f} USD in all",
            soft_wrap=True,
        )


@app.command()
def export(
    directory: Annotated[Path, typer.Argument(help="Where to write the benchmark.")],
    run: Annotated[str | None, typer.Option(help="The run (default: the newest).")] = None,
    per_domain: Annotated[
        int | None, typer.Option(help="Pairs per domain when the run has no selection yet.")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(help="Cap of the difficulty gate when the run has no selection yet (USD)."),
    ] = None,
    with_clips: Annotated[
        bool,
        typer.Option(
            "--with-clips",
            help="Bundle each evidence span's clip (as the generators were sent it) and the "
            "frames a judge is shown of it into DIRECTORY/clips, so a copy of the folder "
            "shows them anywhere.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Export a run's benchmark into the folder DIRECTORY: JSONL and Parquet that `datasets`
    loads, a manifest of videos and clips, a dataset card with Hugging Face metadata, a license
    file, a version and a content hash; every path in it relative to the folder."""
    from playlisteval.export import check_export_target

    _check_money(budget)
    _checked(lambda: check_export_target(directory))  # `export x.parquet`: one line, nothing made
    with _open(home) as app_:
        with _step_bars() as bars:
            summary = runs.export(
                app_,
                directory,
                run,
                per_domain=per_domain,
                budget_usd=budget,
                with_clips=with_clips,
                progress=StepBars(bars),
            )
        _print_export(summary)
        console.print(
            f"validate it: playlisteval ui {summary.path} --home {app_.workspace.root} "
            "--invite YOUR_NAME",
            soft_wrap=True,
        )


@app.command()
def ui(
    benchmark: Annotated[Path, typer.Argument(help="An exported benchmark folder.")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    sample_size: Annotated[
        int | None, typer.Option(help="Pairs in the human sample (default: pairs.human_sample).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed.")] = None,
    evaluation: Annotated[
        list[Path] | None,
        typer.Option(
            help="An evaluation folder of this benchmark (`eval --out`) for the judgments "
            "viewer at /evaluations (repeat)."
        ),
    ] = None,
    invite: Annotated[
        list[str] | None,
        typer.Option(
            help="Invite an annotator by name (repeat): each gets an invite link of their own, "
            "printed here; only an invited annotator can join and label."
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Human validation (blind pairwise labels, agreement and kappa), the judgments viewer and
    the curation audit, in the browser."""
    from playlisteval.ui import create_app, serve

    with _open(home) as app_:
        size = sample_size or app_.settings.pairs.human_sample
        web = create_app(
            app_,
            benchmark,
            sample_size=size,
            sample_seed=app_.settings.pairs.sample_seed if seed is None else seed,
            evaluations=evaluation or (),
            invites=invite or (),
        )
        base = f"http://{host}:{port}"
        console.print(f"serving {benchmark} on {base}/ (Ctrl-C to stop)")
        console.print(f"sample: {web.state.design}")
        console.print(
            f"owner (results and every label; keep it to yourself): {base}{web.state.owner_link}",
            soft_wrap=True,
        )
        _print_invites(web.state.invite_links, base, invite or [])
        if evaluation:
            console.print(f"judgments: {base}/evaluations")
        serve(web, host, port)


def _print_invites(links: dict[str, str], base: str, new: list[str]) -> None:
    """One invite link per annotator (each is that annotator's login: hand it to them alone)."""
    if not links:
        console.print(
            "[yellow]no annotator is invited yet[/]: add --invite NAME for each annotator"
        )
        return
    for name, path in links.items():
        earlier = "" if name in new else " (invited before)"
        console.print(f"invite {escape(name)}: {base}{path}{earlier}", soft_wrap=True)


class _JudgingProgress:
    """The evaluation's bar: judgments made of those to make, elapsed time and ETA (what
    :class:`agents.evaluation.EvaluationProgress` hears)."""

    def __init__(self, bars: Progress) -> None:
        self.bars = bars
        self.task: TaskID | None = None
        self.failed = 0

    def started(self, jobs: int, done: int = 0) -> None:
        """A bar of every judgment of the evaluation, the ``done`` ones (a resumed run's)
        counted already."""
        self.task = self.bars.add_task("judgments", total=jobs + done, completed=done)

    def judged(self, made: bool) -> None:
        """One more judgment made, or failed (counted in the bar's label)."""
        self.failed += 0 if made else 1
        if self.task is not None:
            label = f"judgments ({self.failed} not made)" if self.failed else "judgments"
            self.bars.update(self.task, advance=1, description=label)


def _judges_table(records: list[JudgmentRecord], offline: bool) -> Table:
    """Accuracy (with its playlist-clustered standard error) and swap consistency of every
    judge under every condition; the offline provider's runs say they are a harness."""
    from policies.judging import judge_metrics, split_runs

    title = "Judges by condition"
    if offline:
        title += " (offline provider: a harness, not evidence of model quality)"
    # Fits an 80-column terminal by design: short headers (the caption says what they mean),
    # figures at their own widths, judges whole, and a long condition folded onto more lines of
    # its cell (never cut to "uniform-n…").
    table = Table(
        title=title,
        caption="acc.: accuracy ± its standard error (clustered by playlist); cons.: accuracy "
        "over pairs judged alike in both orders; pos.: the share judged alike in both orders",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        show_edge=False,
    )
    judges = {r.judge for r in records}
    table.add_column("judge", no_wrap=True, min_width=max(map(len, judges), default=5))
    table.add_column("condition", overflow="fold")
    for name, width in (("pairs", 5), ("acc. ± SE", 13), ("cons.", 5), ("pos.", 5)):
        table.add_column(name, justify="right", no_wrap=True, width=width)

    def value(metrics: JudgeMetrics, name: str) -> MetricTable | None:
        return metrics.tables.get(name)

    def shown(found: MetricTable | None) -> str:
        return "—" if found is None or found.micro.value is None else f"{found.micro.value:.3f}"

    for (judge, condition), items in sorted(split_runs(r.judgment for r in records).items()):
        metrics = judge_metrics(items)
        accuracy = value(metrics, "accuracy")
        se = None if accuracy is None else accuracy.micro.clustered_se or accuracy.micro.se
        table.add_row(
            escape(judge),
            escape(condition),
            str(metrics.pairs),
            shown(accuracy) + ("" if se is None else f" ± {se:.3f}"),
            shown(value(metrics, "consistent_accuracy")),
            shown(value(metrics, "position_consistency")),
        )
    return table


@app.command("eval")
def eval_(
    benchmark: Annotated[Path, typer.Option(help="An exported benchmark folder.")],
    judge: Annotated[
        list[str],
        typer.Option(
            help="A judge model id (repeat); offline-first, offline-transcript and "
            "offline-frames are offline judges of known behaviour."
        ),
    ],
    condition: Annotated[
        list[str] | None,
        typer.Option(
            help="A condition to judge under (repeat); its form and examples are above. "
            "Default: uniform::frames+transcript:1h:32 and "
            "retrieved:hybrid:frames+transcript:1h:32.",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Evaluation folder (resumable).")] = Path("evaluation"),
    budget: Annotated[
        float | None,
        typer.Option(
            help="Total cap of this evaluation's calls (USD), earlier ones included (default: "
            "the cap it was last given, else budget.eval_usd)."
        ),
    ] = None,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--offline",
            help="Call the configured providers for the judges that are not offline ones (their "
            "keys and a cap needed) or play them with the offline provider (default: "
            "curation.offline, which is true).",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(min=1, help="Judge only the benchmark's first N pairs (a smoke run)."),
    ] = None,
    allow_modified_benchmark: Annotated[
        bool,
        typer.Option(
            "--allow-modified-benchmark",
            help="Judge a benchmark whose pairs.jsonl no longer matches the content hash in its "
            "benchmark.json (records edited after the export); evaluation.json and the report "
            "record it. Without it that is refused.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Run judges on a benchmark's pairs, in both answer orders, under each condition (frame
    sampling, retriever, modality, haystack length); per-judgment records in OUT/judgments.jsonl,
    and a table of each judge's accuracy and consistency per condition at the end.

    A condition is frames:retriever:modality:hours:n_frames[:think=N][:res=N]
    - frames: uniform or retrieved
    - retriever: bm25, text, multimodal or hybrid (left empty for uniform)
    - modality: frames+transcript, frames, transcript, audio or none
    - hours: the haystack's length (1h, 10h, 100h)
    - n_frames: how many frames the judge is shown
    - think=N: a thinking budget; res=N: a frame resolution
    For example uniform::frames+transcript:10h:32 or retrieved:bm25:transcript:100h:32."""
    _check_money(budget)
    overrides: dict[str, Any] = {} if live is None else {"curation": {"offline": not live}}
    with _open(home, **overrides) as app_:
        with _step_bars() as bars:
            result = runs.evaluate(
                app_,
                benchmark,
                judge,
                out,
                condition,
                budget_usd=budget,
                limit=limit,
                progress=_JudgingProgress(bars),
                allow_modified=allow_modified_benchmark,
            )
        if result.benchmark_check == "modified":
            err_console.print(
                "[yellow]modified benchmark:[/] its records differ from the export's content "
                "hash; evaluation.json and the report record it"
            )
        if not result.records:
            # Nothing to report on: say why in one line (the first failure), not exit 0.
            why = str(result.failures[0]) if result.failures else "no pair and judge to judge"
            err_console.print(
                f"[bold red]error:[/] nothing could be judged ({len(result.failures)} "
                f"failure(s)); the first: {escape(why)}"
            )
            raise typer.Exit(EXIT_NOTHING_JUDGED)
        console.print(_judges_table(result.records, app_.settings.curation.offline))
        console.print(
            f"{len(result.records)} judgments in {result.out_dir} ({result.new_records} new, "
            f"{result.live_calls} model calls, {result.replayed_calls} served from the log)"
        )
        for failure in result.failures[:5]:
            err_console.print(f"[yellow]not judged:[/] {escape(str(failure))}")
        console.print(
            f"report: playlisteval report {result.out_dir} --out REPORT_DIR "
            f"--home {app_.workspace.root}",
            soft_wrap=True,
        )


@app.command()
def report(
    evaluations: Annotated[
        list[Path], typer.Argument(help="Evaluation folders (each with judgments.jsonl).")
    ],
    out: Annotated[
        Path, typer.Option(help="The report folder (report.md, report.html, figures/, tables/).")
    ] = Path("report"),
    merge_duplicates: Annotated[
        bool,
        typer.Option(
            "--merge-duplicates",
            help="Let two evaluation folders that judged the same judge under the same condition "
            "share one leaderboard cell (the cell says so); without it that is refused.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """The evaluation report, fit for a paper: report.md and report.html with the provenance
    (benchmark hash, judges and the provider ids that answered, conditions, dates, code version,
    offline or live: read from the log of the workspace that evaluated, --home), figures as PNG
    and PDF with 95 % intervals (accuracy by condition and against the hours built, retrieved
    against uniform, modality ablation, swap consistency, per domain, recall@k and recall
    against hours, the difficulty gate's accuracy by rating gap), the paper's Table 1 layout, a
    leaderboard across the folders given, and every table as CSV and LaTeX."""
    from playlisteval.report import write_workspace_report

    try:
        summary = write_workspace_report(evaluations, out, home, merge_duplicates=merge_duplicates)
    except PlaylistEvalError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    console.print(f"{summary.judgments} judgments in {summary.runs} runs ({summary.source})")
    if summary.source in ("offline", "mixed"):
        console.print(
            "[yellow]offline judges:[/] the offline provider is a harness, not evidence of "
            "model quality (the report says which judges)"
        )
    elif summary.source == "unknown":
        console.print(
            "[yellow]who answered is not known:[/] the evaluation's log was not read; give the "
            "--home of the workspace that evaluated"
        )
    for sentence in summary.omitted:
        console.print(f"  {sentence}")
    console.print(
        f"report: {summary.markdown}\n        {summary.html}\n"
        f"        {len(summary.figure_files)} figure files in {out / 'figures'}, "
        f"{len(summary.table_files)} table files in {out / 'tables'}"
    )


@app.command()
def doctor(home: HomeOption = None) -> None:
    """Check prices, keys, seeds and the event log; each failure says what to do."""
    from playlisteval.doctor import Check, database_checks, run_checks

    def show(checks: list[Check]) -> None:
        for check in checks:
            mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
            console.print(f"{mark} {escape(check.name)}: {escape(check.detail)}")
            if not check.ok and check.fix:
                console.print(f"      → {escape(check.fix)}")

    try:
        settings = load_settings(home)
    except PlaylistEvalError as exc:
        raise _fail(exc) from exc
    databases = database_checks(settings)
    show(databases)
    if not all(c.ok for c in databases):
        # Opening the workspace would only fail on them again: fix these first.
        raise typer.Exit(1)
    with _open(home, create=True) as app_:
        checks = run_checks(app_)
        show(checks)
        if not all(c.ok for c in checks):
            raise typer.Exit(1)


# -- the daemon and the fleet ---------------------------------------------------------------------


async def _until_signalled(
    body: Callable[[anyio.Event], Awaitable[_T]], stop_after_s: float | None = None
) -> _T:
    """Run ``body(stop)``; SIGTERM or Ctrl-C sets ``stop`` (a graceful stop), a second one
    ends the process at once (what is in the log stays; a restart resumes from it). With
    ``stop_after_s``, ``stop`` is also set that many seconds after the start."""
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        if stop_after_s is not None:

            async def timer() -> None:
                await anyio.sleep(stop_after_s)
                err_console.print(f"{stop_after_s:g} s are over: stopping gracefully")
                stop.set()

            group.start_soon(timer)

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    if stop.is_set():
                        err_console.print("stopping now; run the same command to resume")
                        os._exit(130)
                    err_console.print(
                        f"{signal.Signals(signum).name}: finishing the calls in flight, then "
                        "stopping (send it again to stop at once)"
                    )
                    stop.set()

        group.start_soon(watch)
        result = await body(stop)
        group.cancel_scope.cancel()
    return result


class FleetProgress:
    """One line per seed that ends, for a worker's terminal."""

    def event(self, stream: str, event: Event, budget: Budget) -> None:
        """Print accepted, discarded and stopped seeds."""
        if isinstance(event, ItemAccepted | SeedDiscarded | SeedStopped):
            kind = {
                "ItemAccepted": "[green]accepted[/]",
                "SeedDiscarded": "[yellow]discarded[/]",
                "SeedStopped": "[red]stopped[/]",
            }[type(event).__name__]
            detail = f" ({escape(event.reason)})" if isinstance(event, SeedStopped) else ""
            console.print(f"{escape(stream)} {kind}{detail}")


def _print_worker(report: WorkerReport) -> None:
    results = Counter(report.seeds_finished.values())
    done = ", ".join(f"{n} {r}" for r, n in sorted(results.items())) or "none"
    console.print(
        f"worker [bold]{escape(report.owner)}[/] stopped: seeds finished: {escape(done)}; "
        f"released to the queue: {len(report.seeds_released)}; taken over by others: "
        f"{len(report.seeds_lost)}; videos indexed: {len(report.indexed)}; "
        f"{report.live_calls} calls made, {report.replayed_calls} served from the log"
    )


@app.command()
def worker(
    concurrency: Annotated[int | None, typer.Option(help="Seeds in flight at once.")] = None,
    name: Annotated[
        str | None, typer.Option(help="This worker's name (default: worker.name, else HOST:PID).")
    ] = None,
    exit_when_idle: Annotated[
        bool | None,
        typer.Option(
            "--exit-when-idle/--wait",
            help="Exit once nothing is left to claim (default: worker.exit_when_idle).",
        ),
    ] = None,
    stop_after: Annotated[
        float | None, typer.Option(help="Stop gracefully after this many seconds.")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Claim seeds (and, with a Qdrant server, indexing jobs) from the shared queue and curate
    them until SIGTERM. Run any number, on any number of machines, with store.url set."""
    with _open(home, create=True) as app_:
        _checked(
            lambda: check_concurrency(concurrency, most=app_.settings.curation.max_concurrency)
        )
        index_job = None
        if app_.settings.vectors.backend == "qdrant-server":
            indexer = app_.indexer()
            index_job = indexer.index_video
        fleet = app_.fleet_worker(
            app_.fleet_config(name, exit_when_idle=exit_when_idle),
            concurrency=concurrency,
            index_job=index_job,
            progress=FleetProgress(),
        )
        err_console.print(
            f"worker {fleet.fleet.owner} claiming from {_store_label(app_)}; "
            "SIGTERM or Ctrl-C stops it gracefully"
        )
        report = anyio.run(lambda: _until_signalled(fleet.work, stop_after))
        _print_worker(report)


def _store_label(app_: App) -> str:
    url = app_.settings.store.url
    if not url:
        return str(app_.workspace.database)
    return make_url(url).render_as_string(hide_password=True)


@app.command()
def serve(
    playlists: Annotated[
        Path | None,
        typer.Option(help="Manifest of the playlists to curate (default: daemon.playlists_file)."),
    ] = None,
    work: Annotated[
        bool | None,
        typer.Option(
            "--work/--no-work",
            help="Also curate and index in this process (default: daemon.work); --no-work "
            "only schedules, for `playlisteval worker` processes.",
        ),
    ] = None,
    concurrency: Annotated[int | None, typer.Option(help="Seeds in flight at once.")] = None,
    port: Annotated[
        int | None,
        typer.Option(help="Port of /healthz and /metrics (default: daemon.metrics_port; 0: off)."),
    ] = None,
    stop_after: Annotated[
        float | None,
        typer.Option(help="Stop gracefully after this many seconds (soak tests, rehearsals)."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """The curator daemon: playlists → index → seeds → curation → scheduled exports, under
    budget.cap_usd and budget.per_day_usd, until SIGTERM; a restart resumes exactly."""
    from playlisteval.daemon import Daemon

    with _open(home, create=True) as app_:
        _checked(
            lambda: check_concurrency(concurrency, most=app_.settings.curation.max_concurrency)
        )
        daemon = Daemon(
            app_, work=work, playlists_file=playlists, concurrency=concurrency, metrics_port=port
        )
        err_console.print(
            f"serving {app_.workspace.root} (store {_store_label(app_)}); "
            "SIGTERM or Ctrl-C stops it gracefully"
        )
        anyio.run(lambda: _until_signalled(daemon.run, stop_after))
        if daemon.worker_report is not None:
            _print_worker(daemon.worker_report)


@app.command()
def enqueue(
    max_seeds: Annotated[int | None, typer.Option(help="Queue at most this many seeds.")] = None,
    home: HomeOption = None,
) -> None:
    """Open a run over the active seeds never queued before, for `playlisteval worker`s."""
    _check_count(max_seeds, 1, "--max-seeds")
    with _open(home) as app_:
        app_.set_budget_caps()
        opened = runs.queue_fresh_seeds(app_, max_seeds or app_.settings.curation.max_seeds)
        if opened is None:
            err_console.print(
                "[bold red]error:[/] no seed left to queue: every active seed is queued already "
                "(see `playlisteval fleet`), or there are none (`playlisteval index`)"
            )
            raise typer.Exit(2)
        run_id, count = opened
        console.print(f"run {run_id}: {count} seeds queued; start `playlisteval worker`s")


@app.command()
def fleet(home: HomeOption = None) -> None:
    """Workers, the queue, the shared budget and parked items."""
    with _open(home) as app_:
        queue, accounts = app_.queue(), app_.accounts()
        # True to the queue: the leases a worker holds are the queue's, not what its last
        # heartbeat said, and one silent for three heartbeats is gone, whatever it last said.
        stale_after_s = 3 * app_.settings.worker.heartbeat_s
        items = queue.items()
        leases = Counter(i.owner for i in items if i.state == "leased" and i.owner)
        table = Table(title="workers")
        for column in ("worker", "state", "heartbeat age (s)", "leases held"):
            table.add_column(column)
        for row in queue.workers():
            state = str(row["state"])
            if state != "stopped" and float(row["age_s"]) > stale_after_s:
                state = f"gone ({state})"  # silent; what it said last
            table.add_row(
                escape(row["name"]),
                escape(state),
                f"{row['age_s']:.1f}",
                str(leases.get(row["name"], 0)),
            )
        console.print(table if table.row_count else "no worker has run yet")
        counts = queue.counts()
        table = Table(title="queue")
        for column in ("kind", "state", "items"):
            table.add_column(column)
        for (kind, state), n in sorted(counts.items()):
            table.add_row(kind, state, str(n))
        console.print(table if table.row_count else "the queue is empty")
        for account in accounts.accounts():
            cap = (
                "uncapped"
                if account.cap_micros is None
                else (f"{micros_to_usd(account.cap_micros):.4f}")
            )
            console.print(
                f"budget {escape(account.name)}: spent {micros_to_usd(account.spent_micros):.4f}"
                f" + reserved {micros_to_usd(account.reserved_micros):.4f} of {cap} USD"
            )
        for item in items:
            if item.state == "parked":
                console.print(f"parked {escape(item.id)}: {escape(item.result or '')}")


annotations_app = typer.Typer(
    help="Human annotations of a benchmark: invites and label export.", no_args_is_help=True
)
app.add_typer(annotations_app, name="annotations")


def _use_home(home: Path | None) -> None:
    """``--home`` given before a subcommand (``playlisteval --home WS status``, ``playlisteval
    store --home WS verify``) is the workspace of the command that follows, unless that command
    is given its own ``--home``."""
    if home is not None:
        os.environ["PLAYLISTEVAL_HOME"] = str(home)


@annotations_app.callback()
def _annotations(home: HomeOption = None) -> None:
    """Human annotations of a benchmark: invites and label export."""
    _use_home(home)


@annotations_app.command("invite")
def annotations_invite(
    benchmark: Annotated[Path, typer.Argument(help="An exported benchmark folder.")],
    names: Annotated[list[str], typer.Argument(help="Annotators to invite.")],
    url: Annotated[
        str, typer.Option(help="Where the UI is reached, to print whole links.")
    ] = "http://127.0.0.1:8000",
    home: HomeOption = None,
) -> None:
    """Invite annotators to label a benchmark and print each one's invite link (the same link
    every time: `ui` prints them too)."""
    from playlisteval.ui import invite_annotators

    with _open(home) as app_:
        links = invite_annotators(app_, benchmark, names)
    _print_invites(links, url.rstrip("/"), names)


@annotations_app.command("withdraw")
def annotations_withdraw(
    benchmark: Annotated[Path, typer.Argument(help="An exported benchmark folder.")],
    names: Annotated[list[str], typer.Argument(help="Invited annotators to withdraw.")],
    home: HomeOption = None,
) -> None:
    """Withdraw invited annotators (one who never joined, or stopped): the pairs assigned to
    them go to the others, and only theirs move; their answers so far are kept; their invite
    link no longer lets them in. `annotations invite` takes them back."""
    from playlisteval.ui import withdraw_annotators

    with _open(home) as app_:
        held = withdraw_annotators(app_, benchmark, names)
    for name, pairs in held.items():
        moved = (
            f"the {pairs} sampled pair(s) assigned to them now go to the other annotators"
            if pairs
            else "no sampled pair was theirs"
        )
        console.print(f"withdrew {escape(name)}: {moved}", soft_wrap=True)


@annotations_app.command("export")
def annotations_export(
    benchmark: Annotated[Path, typer.Argument(help="An exported benchmark folder.")],
    out: Annotated[Path, typer.Option(help="The file to write: labels.csv or labels.jsonl.")],
    format_: Annotated[
        str | None,
        typer.Option("--format", help="csv or jsonl (default: from OUT's suffix)."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Write the benchmark's standing human labels (one row per annotator and pair: the letter
    picked, the label it means, the comment, the pair's strata, overlap or not, when) as CSV or
    JSON Lines."""
    from playlisteval.ui import export_labels

    with _open(home) as app_:
        count = export_labels(app_, benchmark, out, format_)
    console.print(f"{count} label(s) written to {out}")


store_app = typer.Typer(help="The event log.", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.callback()
def _store(home: HomeOption = None) -> None:
    """The event log."""
    _use_home(home)


@store_app.command("rebuild")
def store_rebuild(home: HomeOption = None) -> None:
    """Rebuild the projections (seed status, spend, accepted items) from the log."""
    with _open(home) as app_:
        count = app_.projections().rebuild()
        console.print(f"projections rebuilt from {count} events")


@store_app.command("verify")
def store_verify(
    home: HomeOption = None,
    anchor: Annotated[
        list[Path] | None,
        typer.Option(
            "--anchor",
            help="Also check the log against the anchors published in this export folder, "
            "benchmark.json, report.json or anchor file (repeatable): a rewrite after an anchor "
            "was taken shows, even one made with the log key.",
        ),
    ] = None,
) -> None:
    """Check every stream of the log against its keyed hash chain and head (exit 4 at the first
    event that is not what was written: edited, inserted, deleted or reordered), and against
    published anchors."""
    from playlisteval import integrity

    with _open(home) as app_:
        anchors = [named for path in anchor or [] for named in integrity.read_anchors(path)]
        streams = len(app_.events.streams())
        events = app_.events.last_seq()
        problems = [str(p) for p in runs.verify_store(app_)]
        first = f"the first at seq {runs.verify_store(app_)[0].seq}" if problems else ""
        moved = integrity.check_anchors(app_.events, anchors)
    if not problems and not moved:
        console.print(f"[green]ok[/]: {events} events in {streams} streams, every chain intact")
        for named in anchors:
            console.print(f"[green]ok[/]: {escape(named.label)} matches its anchor {named.anchor}")
        return
    if problems:
        err_console.print(f"[bold red]the log was changed[/]: {len(problems)} problem(s); {first}")
    for line in moved:
        err_console.print(f"[bold red]the log differs from an anchor[/]: {escape(line)}")
    for problem in problems[:10]:
        err_console.print(f"  {escape(problem)}")
    err_console.print(
        "  restore the database from a backup, or replay the runs (`playlisteval replay RUN`) "
        "to see what differs"
    )
    raise typer.Exit(EXIT_TAMPERED)


@store_app.command("anchor")
def store_anchor(
    run: Annotated[
        list[str] | None,
        typer.Option("--run", help="Anchor this run's streams (repeatable; default: every run)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the anchors here as JSON (to publish or keep apart)."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """The anchors of runs as the log holds them now: publish them (or keep them away from the
    workspace) and `store verify --anchor FILE` shows any later rewrite of those runs."""
    from playlisteval import integrity
    from playlisteval.overview import list_runs

    with _open(home) as app_:
        run_ids = run or [row.run_id for row in list_runs(app_)]
        if not run_ids:
            raise ConfigError("no run in this workspace's log to anchor")
        anchors = [integrity.run_anchor(app_, run_id) for run_id in run_ids]
    text = json.dumps({"anchors": [a.to_json() for a in anchors]}, indent=2) + "\n"
    if out is not None:
        out.write_text(text, encoding="utf-8")
        console.print(f"{len(anchors)} anchor(s) written to {out}")
    else:
        console.print(text, end="", markup=False, highlight=False)


smoke.register(app)


@app.callback()
def _setup(home: HomeOption = None) -> None:
    """Structured logs on stderr: warnings and errors unless PLAYLISTEVAL_LOG_LEVEL says more;
    ``--home`` here is every subcommand's workspace."""
    _use_home(home)
    level = os.environ.get("PLAYLISTEVAL_LOG_LEVEL", "warning")
    known = ("debug", "info", "warning", "error", "critical")
    if level.lower() not in known:  # a typo must not quietly keep the default
        err_console.print(
            f"[bold red]error:[/] PLAYLISTEVAL_LOG_LEVEL={escape(repr(level))} is no log level; "
            f"use one of {', '.join(known)}"
        )
        raise typer.Exit(EXIT_FIX)
    logs.configure(level=getattr(logging, level.upper()))


# Options whose value may be left out (`index --ray` and `index --ray ADDRESS`): typer's parser
# takes none, so a bare one gets its default value here, before parsing.
OPTIONAL_VALUES = {"--ray": LOCAL_RAY}


def with_optional_values(args: list[str]) -> list[str]:
    """``args`` with each bare optional-value option (last, or followed by another option)
    given its default value."""
    out: list[str] = []
    for n, arg in enumerate(args):
        out.append(arg)
        following = args[n + 1] if n + 1 < len(args) else None
        if arg in OPTIONAL_VALUES and (following is None or following.startswith("-")):
            out.append(OPTIONAL_VALUES[arg])
    return out


def main() -> None:
    """Console-script entry point."""
    try:
        app(args=with_optional_values(sys.argv[1:]))
    except KeyboardInterrupt:
        err_console.print("interrupted: run the same command again to resume")
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
