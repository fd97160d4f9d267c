"""The ``playlisteval`` command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
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

from playlisteval.app import App
from playlisteval.settings import SETTINGS_FILE, default_home, load_settings
from store.catalog import FAILED, DomainHours, VideoRow
from store.errors import PlaylistEvalError
from tools.indexer import AddSummary, IndexSummary

# Models are loaded from files shipped in packages or given by path; never from a hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

app = typer.Typer(
    help="PlaylistEval: trustworthy benchmarks for video-language judges from long playlists.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

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


@contextmanager
def _open(home: Path | None, **overrides: Any) -> Iterator[App]:
    """An App for the workspace; project errors become a one-line message and exit code 2."""
    try:
        with App(load_settings(home, **overrides)) as opened:
            yield opened
    except PlaylistEvalError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc


class RichIndexProgress:
    """Overall and per-video bars with ETA."""

    def __init__(self, progress: Progress) -> None:
        self.bars = progress
        self.overall: TaskID | None = None
        self.current: TaskID | None = None

    def begin(self, total_chunks: int, videos: int) -> None:
        """Create the overall bar."""
        self.overall = self.bars.add_task(f"all {videos} videos", total=total_chunks)

    def video_started(self, video: VideoRow, chunks: int) -> None:
        """A bar for this video."""
        self.current = self.bars.add_task(f"  {video.id}", total=max(chunks, 1))
        if chunks == 0:
            self.bars.update(self.current, completed=1)

    def advance(self, chunks: int) -> None:
        """Move both bars."""
        for task in (self.overall, self.current):
            if task is not None:
                self.bars.advance(task, chunks)

    def video_finished(self, video: VideoRow, error: str | None) -> None:
        """Drop the video's bar; print a failure."""
        if self.current is not None:
            self.bars.remove_task(self.current)
            self.current = None
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


def _index(app_: App) -> IndexSummary:
    with _progress() as bars:
        indexer = app_.indexer(RichIndexProgress(bars))
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
    home: HomeOption = None,
) -> None:
    """Take a playlist in: list it, drop unavailable entries with a reason, download what is new."""
    with _open(home) as app_:
        roots = [*app_.settings.ingest.allowed_roots, *(allowed_root or [])]
        target = target_hours if target_hours is not None else app_.settings.ingest.target_hours
        indexer = app_.indexer()
        summary = indexer.add(source, domain=domain, allowed_roots=roots, target_hours=target)
        _print_add(summary)
        if download:
            indexer.prepare_media()
            if target is not None:
                for playlist in summary.playlists:
                    for ref, reason in indexer.apply_target_hours(playlist.domain, target):
                        console.print(f"[yellow]reserve[/] {escape(ref)}: {escape(reason)}")
        console.print(_hours_table(app_.catalog.domain_hours(), target))


@app.command()
def index(home: HomeOption = None) -> None:
    """Index every video taken in: chunks, transcripts, embeddings, segments, duplicates, seeds."""
    with _open(home) as app_:
        _print_index(app_, _index(app_))


@app.command()
def seeds(
    domain: Annotated[str | None, typer.Option(help="Only this domain.")] = None,
    show: Annotated[int, typer.Option(help="Print this many seeds per domain.")] = 0,
    home: HomeOption = None,
) -> None:
    """Recompute near-duplicates and seeds from the stored vectors; print counts per domain."""
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


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for (spoken or shown).")],
    domain: Annotated[str | None, typer.Option(help="Only this domain.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many chunks.")] = 5,
    home: HomeOption = None,
) -> None:
    """Search the chunk index; print video id, span, score and transcript."""
    with _open(home) as app_:
        hits = app_.search().search(query, k=k, filters={"domain": domain} if domain else None)
        if not hits:
            console.print("no hits: is the workspace indexed? (`playlisteval index`)")
        for rank, hit in enumerate(hits, 1):
            console.print(f"{rank}. {hit.citation()}  score {hit.score:.3f}  ({hit.domain})")
            console.print(f"   {hit.transcript}", soft_wrap=True, markup=False)


@app.command()
def status(home: HomeOption = None) -> None:
    """Where the workspace stands: videos by status, hours per domain, recorded problems."""
    with _open(home) as app_:
        counts: dict[str, int] = {}
        for video in app_.catalog.videos():
            counts[video.status] = counts.get(video.status, 0) + 1
        console.print(f"workspace {app_.workspace.root}")
        console.print("videos: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        console.print(f"chunks: {app_.catalog.chunk_count()}, seeds: {len(app_.catalog.seeds())}")
        console.print(_hours_table(app_.catalog.domain_hours(), app_.settings.ingest.target_hours))
        for problem in app_.catalog.problems():
            console.print(
                f"[yellow]{problem.stage}[/] {problem.ref}: {problem.reason}", markup=True
            )


@app.command()
def demo(
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Workspace for the demo. Default: <default home>/demo."),
    ] = None,
    narrate: Annotated[
        bool | None, typer.Option(help="Narrate with espeak-ng (default: when installed).")
    ] = None,
) -> None:
    """Run the whole pipeline on a synthetic playlist: no key, no network."""
    from tools.synthetic import make_demo_playlist

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
    with _open(root) as app_:
        summary = app_.indexer().add(str(manifest), domain=None)
        _print_add(summary)
        _print_index(app_, _index(app_))
        console.print(f"\nworkspace: {root}")
        console.print(f"try: playlisteval search 'kneading the dough' --home {root}")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted: run the same command again to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()
