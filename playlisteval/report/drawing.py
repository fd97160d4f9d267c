"""The evaluation report's figures, drawn with matplotlib and saved as PNG and PDF.

A figure is described as plain data first (:class:`BarFigure`, :class:`LineFigure`,
:class:`HeatFigure`: labels, values and their 95 % intervals) by :mod:`playlisteval.report`;
:func:`draw` turns one into a matplotlib :class:`~matplotlib.figure.Figure` on the Agg canvas
(no pyplot, no global state, no display) and :func:`save` writes it beside the report.

Readable by construction: bars are horizontal so long condition names sit on their own lines;
every bar slot is taller than its value label; value labels sit right of the interval's end;
legends go under the axes and the offline note in a strip of its own below them; the figure
grows with what it holds. :func:`text_overlaps` measures the drawn text (tick labels, value
labels, legend, titles) and lists any two that touch or any that leaves the canvas, so a test
can hold the figures to it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure, SubFigure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

PNG_DPI = 150
WIDTH_IN = 7.5
LABEL_CHARS = 44  # a tick label longer than this wraps onto more lines
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


@dataclass(frozen=True)
class Bar:
    """One bar: its series (legend) label, its value and the value's interval, if any."""

    series: str
    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class BarGroup:
    """Bars drawn together under one label (a condition, a judge's setting)."""

    label: str
    bars: tuple[Bar, ...]


@dataclass(frozen=True)
class BarFigure:
    """Horizontal grouped bars of values from 0 to 1, with interval whiskers and value labels;
    ``reference`` draws a dashed line there (0.5: a coin flip)."""

    slug: str
    title: str
    groups: tuple[BarGroup, ...]
    axis_label: str
    reference: float | None = None


@dataclass(frozen=True)
class Point:
    """One point of a line, with its interval, if any."""

    x: float
    y: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Series:
    """One line of a :class:`LineFigure`."""

    label: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class LineFigure:
    """Lines of values from 0 to 1 against ``x``, with interval whiskers; ticks at the data's
    x values (a log axis when ``log_x`` and they span a factor of ten or more)."""

    slug: str
    title: str
    series: tuple[Series, ...]
    x_label: str
    y_label: str
    log_x: bool = False
    reference: float | None = None


@dataclass(frozen=True)
class HeatCell:
    """One cell of a :class:`HeatFigure`: value, interval and N."""

    value: float
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class HeatFigure:
    """A table of values from 0 to 1 as coloured cells, each written with its interval and N
    (rows: runs; columns: strata such as domains); a missing cell is left blank."""

    slug: str
    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: dict[tuple[str, str], HeatCell] = field(default_factory=dict)
    value_label: str = "accuracy"


FigureSpec = BarFigure | LineFigure | HeatFigure


def wrapped(label: str, width: int = LABEL_CHARS) -> str:
    """``label`` on lines of at most ``width`` characters, broken at its `` · `` separators
    first and at spaces inside a part only when the part alone is too long."""
    lines: list[str] = []
    for part in label.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines += textwrap.wrap(part, width, break_on_hyphens=False) or [part]
    return "\n".join(lines)


def _series_order(groups: Sequence[BarGroup]) -> list[str]:
    order: list[str] = []
    for group in groups:
        order += [bar.series for bar in group.bars if bar.series not in order]
    return order


NOTE_IN = 0.4  # the height of the strip under a figure that holds its note


def _new_figure(
    height_in: float, title: str, note: str | None
) -> tuple[Figure, Figure | SubFigure]:
    """A figure of ``height_in`` inches (plus a strip for ``note``) titled ``title``; the plot
    goes in the second value, a subfigure above the note's strip when there is a note."""
    figure = Figure(
        figsize=(WIDTH_IN, height_in + (NOTE_IN if note else 0.0)), layout="constrained"
    )
    FigureCanvasAgg(figure)
    host: Figure | SubFigure = figure
    if note:
        # Its own strip, under everything and centred on the figure, so neither the legend nor
        # long tick labels can push it into something else.
        grid = figure.add_gridspec(2, 1, height_ratios=[height_in, NOTE_IN])
        host, strip = figure.add_subfigure(grid[0]), figure.add_subfigure(grid[1])
        strip.text(
            0.5,
            0.5,
            wrapped(note, 100),
            ha="center",
            va="center",
            fontsize=7.5,
            style="italic",
            color="#8b0000",
        )
    host.suptitle(title, fontsize=11, fontweight="bold")
    return figure, host


LEGEND_CHARS = 60  # a legend entry longer than this wraps onto more lines


def _legend_layout(labels: Sequence[str]) -> tuple[int, float]:
    """How many columns the legend of ``labels`` takes (three short entries fit side by side
    in the figure's width, two of middling length, else one) and its height in inches (none
    for a single entry, which is not drawn)."""
    if len(labels) <= 1:
        return 1, 0.0
    shown = [wrapped(label, LEGEND_CHARS) for label in labels]
    widest = max(len(line) for label in shown for line in label.split("\n"))
    columns = min(len(labels), 3 if widest <= 28 else 2 if widest <= 46 else 1)
    rows = math.ceil(len(labels) / columns)
    return columns, rows * (0.14 + 0.16 * max(_lines_of(label) for label in shown))


def _legend(host: Figure | SubFigure, axes: Axes, count: int) -> None:
    if count > 1:
        handles, labels = axes.get_legend_handles_labels()
        columns, _ = _legend_layout(labels)
        host.legend(
            handles,
            [wrapped(label, LEGEND_CHARS) for label in labels],
            loc="outside lower center",
            ncols=columns,
            fontsize=8,
            frameon=False,
        )


def _lines_of(label: str) -> int:
    return label.count("\n") + 1


def _draw_bars(spec: BarFigure, note: str | None) -> Figure:
    series = _series_order(spec.groups)
    labels = [wrapped(g.label) for g in spec.groups]
    slot_in = 0.24  # each bar's height in inches: taller than a 7-pt value label
    group_in = [max(len(series) * slot_in, 0.17 * _lines_of(label)) + 0.22 for label in labels]
    _, legend_in = _legend_layout(series)
    figure, host = _new_figure(1.3 + sum(group_in) + legend_in, spec.title, note)
    axes = host.add_subplot()
    centres: list[float] = []
    top = 0.0
    for height in group_in:  # groups from the top down, in data units of inches
        centres.append(top + height / 2)
        top += height
    bar_h = slot_in * 0.8
    # One barh and one errorbar call per series (artists are what drawing costs).
    placed: dict[str, list[tuple[float, Bar]]] = {name: [] for name in series}
    for centre, group in zip(centres, spec.groups, strict=True):
        present = [s for s in series if any(b.series == s for b in group.bars)]
        first = centre - (len(present) - 1) * slot_in / 2
        for bar in group.bars:
            placed[bar.series].append((first + present.index(bar.series) * slot_in, bar))
    for index, name in enumerate(series):
        ys = [y for y, _ in placed[name]]
        values = [bar.value for _, bar in placed[name]]
        colour = COLOURS[index % len(COLOURS)]
        axes.barh(ys, values, height=bar_h, color=colour, label=name)
        whiskers = [
            (y, bar) for y, bar in placed[name] if bar.low is not None and bar.high is not None
        ]
        if whiskers:
            axes.errorbar(
                [bar.value for _, bar in whiskers],
                [y for y, _ in whiskers],
                xerr=[
                    [bar.value - (bar.low or 0.0) for _, bar in whiskers],
                    [(bar.high or 0.0) - bar.value for _, bar in whiskers],
                ],
                fmt="none",
                ecolor="#222",
                elinewidth=1,
                capsize=2.5,
            )
        for y, bar in placed[name]:
            end = max(bar.value, bar.high if bar.high is not None else bar.value)
            axes.text(end + 0.015, y, f"{bar.value:.2f}", va="center", ha="left", fontsize=7)
    if spec.reference is not None:
        axes.axvline(spec.reference, color="#666", linestyle="--", linewidth=0.8)
    axes.set_yticks(centres, labels, fontsize=8)
    axes.set_ylim(top, 0.0)  # the first group on top
    axes.set_xlim(0.0, 1.2)
    axes.set_xticks([0.0, 0.25, 0.5, 0.75, 1.0])
    axes.set_xlabel(spec.axis_label, fontsize=9)
    axes.tick_params(axis="x", labelsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    axes.spines["bottom"].set_bounds(0.0, 1.0)  # the room right of 1 is for value labels
    axes.grid(axis="x", color="#ddd", linewidth=0.6)
    axes.set_axisbelow(True)
    _legend(host, axes, len(series))
    return figure


def _x_positions(spec: LineFigure) -> tuple[list[float], bool]:
    xs = sorted({p.x for s in spec.series for p in s.points})
    log = spec.log_x and xs[0] > 0 and xs[-1] / xs[0] >= 10
    return xs, log


def _dodge(x: float, index: int, count: int, log: bool, span: float) -> float:
    """Shift series ``index`` of ``count`` a little sideways so whiskers at one x stay apart."""
    offset = (index - (count - 1) / 2) * 0.012
    return x * 10 ** (offset * 1.5) if log else x + offset * span


def _draw_lines(spec: LineFigure, note: str | None) -> Figure:
    xs, log = _x_positions(spec)
    count = len(spec.series)
    _, legend_in = _legend_layout([line.label for line in spec.series])
    figure, host = _new_figure(3.4 + legend_in, spec.title, note)
    axes = host.add_subplot()
    span = (xs[-1] - xs[0]) or 1.0
    for index, line in enumerate(spec.series):
        colour = COLOURS[index % len(COLOURS)]
        px = [_dodge(p.x, index, count, log, span) for p in line.points]
        py = [p.y for p in line.points]
        axes.plot(px, py, marker="o", markersize=4, color=colour, label=line.label, linewidth=1.5)
        for x, point in zip(px, line.points, strict=True):
            if point.low is not None and point.high is not None:
                axes.errorbar(
                    x,
                    point.y,
                    yerr=[[point.y - point.low], [point.high - point.y]],
                    fmt="none",
                    ecolor=colour,
                    elinewidth=1,
                    capsize=2.5,
                )
    if spec.reference is not None:
        axes.axhline(spec.reference, color="#666", linestyle="--", linewidth=0.8)
    if log:
        axes.set_xscale("log")
        axes.minorticks_off()
        axes.set_xlim(xs[0] / 1.6, xs[-1] * 1.6)
    else:
        pad = span * 0.08
        axes.set_xlim(xs[0] - pad, xs[-1] + pad)
    axes.set_xticks(xs, [f"{x:g}" for x in xs], fontsize=8)
    axes.set_ylim(0.0, 1.05)
    axes.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
    axes.tick_params(axis="y", labelsize=8)
    axes.set_xlabel(spec.x_label, fontsize=9)
    axes.set_ylabel(spec.y_label, fontsize=9)
    axes.spines[["top", "right"]].set_visible(False)
    axes.grid(axis="y", color="#ddd", linewidth=0.6)
    _legend(host, axes, count)
    return figure


def _draw_heat(spec: HeatFigure, note: str | None) -> Figure:
    import numpy as np

    rows = [wrapped(r) for r in spec.rows]
    row_in = [max(0.42, 0.17 * _lines_of(r) + 0.1) for r in rows]
    figure, host = _new_figure(1.6 + sum(row_in), spec.title, note)
    axes = host.add_subplot()
    values = np.full((len(spec.rows), len(spec.columns)), np.nan)
    for (row, column), cell in spec.cells.items():
        values[spec.rows.index(row), spec.columns.index(column)] = cell.value
    # Row edges in inches, so a row with a two-line label is taller.
    edges = np.concatenate([[0.0], np.cumsum(row_in)])
    mesh = axes.pcolormesh(
        np.arange(len(spec.columns) + 1),
        edges,
        np.ma.masked_invalid(values),
        cmap="Blues",
        vmin=0.0,
        vmax=1.0,
        edgecolors="white",
        linewidth=1.0,
    )
    for (row, column), cell in spec.cells.items():
        r, c = spec.rows.index(row), spec.columns.index(column)
        interval = (
            "" if cell.low is None or cell.high is None else f"\n[{cell.low:.2f}, {cell.high:.2f}]"
        )
        axes.text(
            c + 0.5,
            (edges[r] + edges[r + 1]) / 2,
            f"{cell.value:.2f}{interval} N={cell.n}",
            ha="center",
            va="center",
            fontsize=7,
            color="white" if cell.value > 0.6 else "#111",
        )
    axes.set_yticks((edges[:-1] + edges[1:]) / 2, rows, fontsize=8)
    axes.set_ylim(edges[-1], 0.0)
    axes.set_xticks(np.arange(len(spec.columns)) + 0.5, spec.columns, fontsize=8)
    axes.xaxis.tick_top()
    axes.tick_params(length=0)
    colourbar = host.colorbar(mesh, ax=axes, shrink=0.8, pad=0.02)
    colourbar.set_label(spec.value_label, fontsize=8)
    colourbar.ax.tick_params(labelsize=7)
    return figure


def draw(spec: FigureSpec, note: str | None = None) -> Figure:
    """The figure of ``spec``; ``note`` is a line under the title (the offline label)."""
    if isinstance(spec, BarFigure):
        return _draw_bars(spec, note)
    if isinstance(spec, LineFigure):
        return _draw_lines(spec, note)
    return _draw_heat(spec, note)


def save(figure: Figure, stem: Path) -> tuple[Path, Path]:
    """Write ``figure`` as ``<stem>.png`` and ``<stem>.pdf``; both paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    figure.savefig(png, dpi=PNG_DPI, metadata={"Software": None})
    # No creation date: the same report writes the same bytes.
    figure.savefig(pdf, metadata={"CreationDate": None, "Creator": None, "Producer": None})
    return png, pdf


def _texts(figure: Figure | SubFigure) -> list[Text]:
    """Every text of ``figure`` and its subfigures: titles, legends, ticks, labels, values."""
    found: list[Text] = list(figure.texts)
    for name in ("_suptitle", "_supxlabel", "_supylabel"):
        text = getattr(figure, name, None)
        if text is not None:
            found.append(text)
    for legend in figure.legends:
        found += legend.get_texts()
    for axes in figure.get_axes():
        found += [*axes.get_xticklabels(), *axes.get_yticklabels(), *axes.texts]
        found += [axes.title, axes.xaxis.label, axes.yaxis.label]
    for sub in figure.subfigs:
        found += _texts(sub)
    # A text reached twice (a suptitle is among the texts too; axes show in both) counts once.
    unique = list({id(t): t for t in found}.values())
    return [t for t in unique if t.get_visible() and t.get_text().strip()]


def text_overlaps(figure: Figure) -> list[str]:
    """Every two drawn texts of ``figure`` whose boxes overlap, and every text that leaves the
    canvas, as readable lines (empty: nothing collides)."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    canvas = Bbox.from_bounds(0, 0, figure.bbox.width, figure.bbox.height)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(figure)]
    problems = []
    for text, box in boxes:
        if not (canvas.x0 - 1 <= box.x0 and box.x1 <= canvas.x1 + 1):
            problems.append(f"{text!r} leaves the canvas ({box.x0:.0f}..{box.x1:.0f} px)")
        elif not (canvas.y0 - 1 <= box.y0 and box.y1 <= canvas.y1 + 1):
            problems.append(f"{text!r} leaves the canvas ({box.y0:.0f}..{box.y1:.0f} px)")
    for i, (text_a, a) in enumerate(boxes):
        for text_b, b in boxes[i + 1 :]:
            # A pixel of shared edge is no collision.
            if min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1:
                problems.append(f"{text_a!r} overlaps {text_b!r}")
    return problems
