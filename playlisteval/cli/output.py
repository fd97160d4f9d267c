"""What every command prints with: the two consoles, money as text, and the progress bars of
the long commands (indexing, pairs, export, evaluation).

On a terminal the consoles are as wide as it is. Piped into a file, a pager or a CI log they
have no terminal to fit, and rich would assume 80 columns and cut a wider table's cells with
"…": there they are :data:`PIPE_WIDTH` wide instead (or ``COLUMNS`` wide, when it is set), so a
table keeps its natural width and every cell whole.

Light on purpose: it is imported when the CLI starts, before any command runs, so it loads
rich and nothing of the workspace.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleDimensions
from rich.markup import escape

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from store.catalog import VideoRow

PIPE_WIDTH = 1000
"""The consoles' width when they write to no terminal and ``COLUMNS`` is unset: wider than any
table the commands print, so none is squeezed; a table takes only the width it needs, and no
command draws anything that stretches to the console's width."""


class CommandConsole(Console):
    """A rich console as wide as its terminal, or :data:`PIPE_WIDTH` wide when it writes to
    none (a pipe, a file, a CI log) and ``COLUMNS`` does not say otherwise."""

    @property
    def size(self) -> ConsoleDimensions:
        """The console's width and height: rich's on a terminal or under ``COLUMNS``, else at
        least :data:`PIPE_WIDTH` columns."""
        found = super().size
        if self.is_terminal or os.environ.get("COLUMNS", "").isdigit():
            return found
        return ConsoleDimensions(max(found.width, PIPE_WIDTH), found.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self.width, self.height = new_size


console = CommandConsole()
# Error lines are not folded by rich: a path or a command in them stays whole, to copy (the
# terminal wraps a long line where it must).
err_console = CommandConsole(stderr=True, soft_wrap=True)


def usd(micros: int) -> str:
    """Integer micro-dollars as USD with four decimals (how every command shows money)."""
    from store.events import micros_to_usd

    return f"{micros_to_usd(micros):.4f}"


def _drawn() -> bool:
    """Bars are drawn on a terminal, or anywhere with PLAYLISTEVAL_PROGRESS=1."""
    return console.is_terminal or os.environ.get("PLAYLISTEVAL_PROGRESS") == "1"


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


def _bars(*, count_label: str | None = None, eta_label: str | None = None) -> Progress:
    """Bars of a description, done of all (then ``count_label``), elapsed time and ETA (after
    ``eta_label``): drawn on a terminal, or anywhere with PLAYLISTEVAL_PROGRESS=1."""
    # rich.progress is imported here: the commands that draw no bars (status, runs, audit)
    # do not pay for it at start.
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[ProgressColumn] = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
    ]
    columns += [TextColumn(count_label)] if count_label else []
    columns.append(TimeElapsedColumn())
    columns += [TextColumn(eta_label)] if eta_label else []
    columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console, transient=False, disable=not _drawn())


def index_bars() -> Progress:
    """The indexing bars: chunks done of all, elapsed time and ETA."""
    return _bars(count_label="chunks")


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


def step_bars() -> Progress:
    """Bars with elapsed time and ETA (``pairs``, ``export``, ``eval``)."""
    return _bars(eta_label="ETA")


class JudgingProgress:
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
