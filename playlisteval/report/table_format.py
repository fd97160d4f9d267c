"""The report's tables, each written four ways: markdown, HTML, CSV and LaTeX (booktabs).

A :class:`Table` holds typed cells (text, counts, numbers, :class:`Stat` — a value with its
95 % interval and N —, :class:`Versus` — the paper's "retrieved / uniform" percentages — and
:class:`Sourced` — a :class:`Stat` with the evaluation it came from) under :class:`Column` kinds
that say how each is shown. Markdown, HTML and LaTeX show numbers to three decimals and an
interval as ``[low, high]``; the CSV keeps six significant digits and gives an interval's ends,
each side of a :class:`Versus` and a :class:`Sourced` cell's evaluation their own columns, so a
plotting script reads numbers, not strings. No pandas: the four writers are a few lines each.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from policies.bootstrap import Interval

ColumnKind = Literal[
    "text", "int", "num", "signed", "p", "stat", "signed_stat", "versus", "sourced"
]
STATS: tuple[ColumnKind, ...] = ("stat", "signed_stat")


@dataclass(frozen=True)
class Stat:
    """A value with its 95 % interval (None: none could be drawn) and its N (None: not shown)."""

    value: float | None
    interval: Interval | None = None
    n: int | None = None


@dataclass(frozen=True)
class Versus:
    """Two shares side by side, read as percentages: ``retrieved / uniform`` (the paper's
    Table 1 cell, e.g. ``71.2 / 63.5``); None where that side was not run."""

    retrieved: float | None
    uniform: float | None


@dataclass(frozen=True)
class Sourced:
    """A :class:`Stat` and the evaluation (or evaluations, when merged) it came from."""

    stat: Stat
    source: str


Cell = str | int | float | Stat | Versus | Sourced | None


@dataclass(frozen=True)
class Column:
    """A column's header and how its cells read: ``text``, ``int``, ``num`` (0.123),
    ``signed`` (+0.123), ``p`` (three significant digits), ``stat`` (:class:`Stat`),
    ``signed_stat`` (a :class:`Stat` of a difference, every number signed), ``versus``
    (:class:`Versus`, ``71.2 / 63.5``) or ``sourced`` (:class:`Sourced`)."""

    name: str
    kind: ColumnKind = "text"
    latex_width: str | None = None  # a LaTeX length: the column wraps (``p{...}``) at it


MISSING = "—"


def _number(value: float, kind: ColumnKind) -> str:
    if kind == "signed":
        return f"{value:+.3f}"
    if kind == "p":
        return f"{value:.3g}"
    return f"{value:.3f}"


def _percent(value: float | None) -> str:
    return MISSING if value is None else f"{value * 100:.1f}"


def shown(cell: Cell, kind: ColumnKind) -> str:
    """A cell as the markdown, HTML and LaTeX tables show it."""
    if cell is None:
        return MISSING
    if isinstance(cell, Versus):
        return f"{_percent(cell.retrieved)} / {_percent(cell.uniform)}"
    if isinstance(cell, Sourced):
        return f"{shown(cell.stat, 'stat')} ({cell.source})"
    if isinstance(cell, Stat):
        if cell.value is None:
            return MISSING
        style = "+.3f" if kind == "signed_stat" else ".3f"
        text = format(cell.value, style)
        if cell.interval is not None:
            text += f" [{cell.interval.low:{style}}, {cell.interval.high:{style}}]"
        if cell.n is not None:
            text += f" (N={cell.n})"
        return text
    if isinstance(cell, str):
        return cell
    if kind in ("num", "signed", "p"):
        return _number(float(cell), kind)
    return str(cell)


def _csv_number(value: float | int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return format(value, ".6g")


@dataclass(frozen=True)
class Table:
    """One table of the report: ``slug`` names its files (``<slug>.csv``, ``<slug>.tex``)."""

    slug: str
    title: str
    columns: tuple[Column, ...]
    rows: Sequence[tuple[Cell, ...]]
    note: str = ""
    # Marked as the paper prints Table 1: in each ``versus`` column, each side's best value in
    # bold and its second underlined (ties share a mark).
    ranked: bool = False

    def _shown_rows(self) -> list[list[str]]:
        return [
            [shown(cell, column.kind) for cell, column in zip(row, self.columns, strict=True)]
            for row in self.rows
        ]

    def _marks(self) -> dict[tuple[int, int], tuple[Mark, Mark]]:
        """(row, column) → the marks of a ``versus`` cell's retrieved and uniform values."""
        if not self.ranked:
            return {}
        out: dict[tuple[int, int], tuple[Mark, Mark]] = {}
        for j, column in enumerate(self.columns):
            if column.kind != "versus":
                continue
            cells = [_versus(row[j]) for row in self.rows]
            sides = [
                _rank([_shown_percent(c.retrieved) for c in cells]),
                _rank([_shown_percent(c.uniform) for c in cells]),
            ]
            for i in range(len(cells)):
                out[(i, j)] = (sides[0][i], sides[1][i])
        return out

    def _rendered_rows(
        self, escape: Callable[[str], str], wrap: Mapping[str, str]
    ) -> list[list[str]]:
        """The rows as one format writes them: ``escape`` for text, ``wrap`` (a ``{}`` pattern
        per mark) around a ranked value."""
        marks = self._marks()
        out = []
        for i, row in enumerate(self._shown_rows()):
            cells = []
            for j, text in enumerate(row):
                found = marks.get((i, j))
                cell = self.rows[i][j]
                if found and any(found) and isinstance(cell, Versus):
                    parts = [
                        escape(_percent(value))
                        if mark is None
                        else wrap[mark].format(escape(_percent(value)))
                        for value, mark in zip((cell.retrieved, cell.uniform), found, strict=True)
                    ]
                    cells.append(f"{parts[0]} / {parts[1]}")
                else:
                    cells.append(escape(text))
            out.append(cells)
        return out

    def markdown(self, files: str = "") -> str:
        """A ``##`` section: title, note, the table (or a line saying it is empty), ``files``."""
        lines = [f"## {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        if not self.rows:
            lines += ["_No data for this table._", ""]
        else:
            lines.append("| " + " | ".join(c.name for c in self.columns) + " |")
            lines.append("|" + "|".join(" --- " for _ in self.columns) + "|")
            rows = self._rendered_rows(_md_cell, {"best": "**{}**", "second": "<u>{}</u>"})
            lines += ["| " + " | ".join(row) + " |" for row in rows]
            lines.append("")
        if files:
            lines += [files, ""]
        return "\n".join(lines)

    def html(self, files: str = "") -> str:
        """An ``<h2>`` section with the table (cells escaped); ``files`` is trusted markup."""
        e = html.escape
        parts = [f'<h2 id="{e(self.slug)}">{e(self.title)}</h2>']
        if self.note:
            parts.append(f"<p>{e(self.note)}</p>")
        if not self.rows:
            parts.append('<p class="no-data">No data for this table.</p>')
        else:
            parts.append("<table><thead><tr>")
            parts += [f"<th>{e(c.name)}</th>" for c in self.columns]
            parts.append("</tr></thead><tbody>")
            for row in self._rendered_rows(e, {"best": "<b>{}</b>", "second": "<u>{}</u>"}):
                parts.append("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
            parts.append("</tbody></table>")
        if files:
            parts.append(f'<p class="files">{files}</p>')
        return "\n".join(parts)

    def csv_text(self) -> str:
        """The table as CSV: one column per plain column; a ``stat`` column becomes the value,
        its interval's low and high ends, and its N when any cell has one."""
        header: list[str] = []
        with_n = [_has_n(row[i] for row in self.rows) for i in range(len(self.columns))]
        for column, n in zip(self.columns, with_n, strict=True):
            if column.kind == "versus":
                header += [f"{column.name} retrieved (%)", f"{column.name} uniform (%)"]
                continue
            header.append(column.name)
            if column.kind == "sourced":
                header += [
                    f"{column.name} 95% low",
                    f"{column.name} 95% high",
                    f"{column.name} evaluation",
                ]
            elif column.kind in STATS:
                header += [f"{column.name} 95% low", f"{column.name} 95% high"]
                if n:
                    header.append(f"{column.name} N")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        for row in self.rows:
            cells: list[str] = []
            for cell, column, n in zip(row, self.columns, with_n, strict=True):
                cells += _csv_cells(cell, column.kind, n)
            writer.writerow(cells)
        return out.getvalue()

    def latex(self, caption_note: str = "") -> str:
        """A booktabs ``table`` environment (needs ``\\usepackage{booktabs}``) with the title
        and note (and ``caption_note``) as its caption."""
        align = "".join(
            f"p{{{c.latex_width}}}" if c.latex_width else "l" if c.kind == "text" else "r"
            for c in self.columns
        )
        caption = " ".join(x for x in (self.title + ".", self.note, caption_note) if x)
        lines = [
            "% Written by playlisteval report; needs \\usepackage{booktabs}.",
            "\\begin{table}[ht]",
            "\\centering",
            f"\\caption{{{latex_escape(caption)}}}",
            f"\\label{{tab:{self.slug}}}",
            f"\\begin{{tabular}}{{{align}}}",
            "\\toprule",
            " & ".join(latex_escape(c.name) for c in self.columns) + " \\\\",
            "\\midrule",
        ]
        if not self.rows:
            lines.append(f"\\multicolumn{{{len(self.columns)}}}{{l}}{{No data.}} \\\\")
        wrap = {"best": "\\textbf{{{}}}", "second": "\\underline{{{}}}"}
        lines += [" & ".join(row) + " \\\\" for row in self._rendered_rows(latex_escape, wrap)]
        lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
        return "\n".join(lines)


Mark = Literal["best", "second"] | None


def _versus(cell: Cell) -> Versus:
    return cell if isinstance(cell, Versus) else Versus(None, None)


def _shown_percent(value: float | None) -> float | None:
    """A share as the table shows it (rounded to its tenth of a percent): ties are ties there."""
    return None if value is None else round(value * 100, 1)


def _rank(values: Sequence[float | None]) -> list[Mark]:
    """Each value's mark: the highest "best", the next distinct one "second" (none for a
    column with fewer than two values to rank)."""
    distinct = sorted({v for v in values if v is not None}, reverse=True)
    if len(distinct) < 2:
        return [None] * len(values)
    best, second = distinct[0], distinct[1]
    return ["best" if v == best else "second" if v == second else None for v in values]


def _has_n(cells: Iterable[Cell]) -> bool:
    return any(isinstance(cell, Stat) and cell.n is not None for cell in cells)


def _csv_cells(cell: Cell, kind: ColumnKind, with_n: bool) -> list[str]:
    if kind == "versus":
        versus = cell if isinstance(cell, Versus) else Versus(None, None)
        return [
            "" if v is None else _csv_number(v * 100) for v in (versus.retrieved, versus.uniform)
        ]
    if kind == "sourced":
        if not isinstance(cell, Sourced):
            return ["", "", "", ""]
        return [*_csv_cells(cell.stat, "stat", False), cell.source]
    if kind in STATS:
        stat = cell if isinstance(cell, Stat) else Stat(None)
        interval = stat.interval
        cells = [
            _csv_number(stat.value),
            _csv_number(None if interval is None else interval.low),
            _csv_number(None if interval is None else interval.high),
        ]
        return [*cells, _csv_number(stat.n)] if with_n else cells
    if cell is None:
        return [""]
    if isinstance(cell, str):
        return [cell]
    if isinstance(cell, Stat):  # a Stat under a plain column: its value
        return [_csv_number(cell.value)]
    if isinstance(cell, Versus | Sourced):  # under a plain column: as the page shows it
        return [shown(cell, kind)]
    return [_csv_number(cell)]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_LATEX_SPECIAL = {
    "\\": "\\textbackslash{}",
    "&": "\\&",
    "%": "\\%",
    "$": "\\$",
    "#": "\\#",
    "_": "\\_",
    "{": "\\{",
    "}": "\\}",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
    # Characters pdfLaTeX's default fonts lack, written as LaTeX says them.
    "—": "---",
    "–": "--",
    "−": "$-$",
    "≥": "$\\geq$",
    "≤": "$\\leq$",
    "·": "$\\cdot$",
    "×": "$\\times$",
    "…": "\\ldots{}",
    "\n": " ",
}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (a value cannot break the table)."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
