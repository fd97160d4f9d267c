"""Where the workspace stands: ``status`` (videos, hours, problems, the latest runs, benchmarks
and annotation) and ``runs`` (every curation run, and the command that takes each further)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.collection import hours_table
from playlisteval.cli.output import console, err_console, usd
from playlisteval.cli.shell import HomeOption, open_app

if TYPE_CHECKING:
    from playlisteval.overview import AnnotationRow, BenchmarkRow, RunRow

commands = typer.Typer()

STATUS_RUNS = 5  # the runs `status` shows; `runs` lists them all


@commands.command()
def status(home: HomeOption = None) -> None:
    """Where the workspace stands: videos by status, hours per domain, recorded problems, the
    latest runs, the benchmarks exported under it and their annotation progress."""
    from playlisteval.overview import find_benchmarks, list_annotations, list_runs

    with open_app(home) as app_:
        counts: dict[str, int] = {}
        for video in app_.catalog.videos():
            counts[video.status] = counts.get(video.status, 0) + 1
        console.print(f"workspace {app_.workspace.root}", soft_wrap=True)
        videos = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        console.print(f"videos: {videos or 'none yet (`playlisteval add SOURCE`)'}")
        console.print(f"chunks: {app_.catalog.chunk_count()}, seeds: {len(app_.catalog.seeds())}")
        console.print(hours_table(app_.catalog.domain_hours(), app_.settings.ingest.target_hours))
        for problem in app_.catalog.problems():
            # Refs and reasons quote file names and titles: printed as written, never as markup.
            console.print(
                f"[yellow]{problem.stage}[/] {escape(problem.ref)}: {escape(problem.reason)}"
            )
        found = list_runs(app_)
        if found:
            latest = found[-STATUS_RUNS:]
            more = f" (the latest {len(latest)} of {len(found)}: `playlisteval runs`)"
            console.print(runs_table(latest, f"Runs{more if len(found) > len(latest) else ''}"))
        else:
            console.print("runs: none yet (`playlisteval curate`)")
        benchmarks = find_benchmarks(app_.workspace.exports)
        if benchmarks:
            console.print(benchmarks_table(benchmarks, app_.workspace.exports))
        else:
            console.print("benchmarks: none exported under exports/ yet (`playlisteval export`)")
        annotations = list_annotations(app_, benchmarks)
        if annotations:
            console.print(annotations_table(annotations, app_.workspace.exports))


def runs_table(rows: Sequence[RunRow], title: str = "Runs") -> Table:
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
        cap = "no cap" if row.cap_micros is None else usd(row.cap_micros)
        table.add_row(
            escape(row.run_id),
            row.started.strftime("%Y-%m-%d %H:%M"),
            escape(row.state),
            f"{row.accepted} of {row.seeds}",
            f"{usd(row.spent_micros)} / {cap}",
            row.mode,
        )
    return table


def _text_table(
    title: str, columns: Sequence[str], counts: Collection[str], rows: Iterable[Sequence[str]]
) -> Table:
    """A titled table of text cells, one row a sequence of them; the ``counts`` columns flush
    right."""
    table = Table(title=title)
    for name in columns:
        table.add_column(name, justify="right" if name in counts else "left")
    for cells in rows:
        table.add_row(*cells)
    return table


def _made_by(row: BenchmarkRow) -> str:
    """Who answered a benchmark's calls: the offline provider, live models, or both."""
    if row.offline_pairs == row.pairs:
        return "offline provider"
    return f"partly offline ({row.offline_pairs})" if row.offline_pairs else "live models"


def benchmarks_table(rows: Sequence[BenchmarkRow], exports: Path) -> Table:
    """The exports found under the workspace."""
    cells = [
        (
            escape(str(row.path.relative_to(exports))),
            str(row.pairs),
            row.content_sha256[:12],
            escape(", ".join(row.runs)),
            _made_by(row),
        )
        for row in rows
    ]
    columns = ("folder", "pairs", "sha256", "runs", "made by")
    return _text_table("Benchmarks (under exports/)", columns, {"pairs"}, cells)


def _annotated(row: AnnotationRow, exports: Path) -> str:
    """The benchmark an annotation stream labels, as a folder under exports/; the stream's name
    when the export it labels lies outside the workspace."""
    return row.stream if row.benchmark is None else str(row.benchmark.relative_to(exports))


def annotations_table(rows: Sequence[AnnotationRow], exports: Path) -> Table:
    """Each benchmark's human annotation progress."""
    cells = [
        (
            escape(_annotated(row, exports)),
            str(row.sample),
            f"{row.joined} / {row.invited}",
            f"{row.answers} / {row.assigned}",
            f"{row.share_done:.0%}",
        )
        for row in rows
    ]
    columns = ("benchmark", "sample", "annotators joined / invited", "answers / asked", "done")
    return _text_table("Annotation", columns, columns[1:], cells)


@commands.command("runs")
def runs_(home: HomeOption = None) -> None:
    """Every curation run: id, when it started, where it stands, its seeds, what it accepted,
    its spend against its cap, offline or live."""
    from playlisteval import integrity, runs
    from playlisteval.overview import list_runs

    with open_app(home) as app_:
        found = list_runs(app_)
        untrusted = integrity.log_warning(app_) if found else None
        # Per way each run stopped, the command that takes it further (not --budget for all).
        advice = [line for row in found for line in runs.resume_lines(app_, row)]
    if not found:
        console.print("no run yet: `playlisteval curate` starts one")
        return
    if untrusted:
        err_console.print(f"[bold red]warning:[/] {escape(untrusted)}")
    console.print(runs_table(found))
    for line in advice:
        console.print(escape(line), soft_wrap=True)
