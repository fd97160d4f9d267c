"""The report's pages and files: ``report.md`` and ``report.html`` (one page, nothing loaded
from elsewhere: its figures are the PNG files beside it, which a Content-Security-Policy of
``img-src 'self'`` lets it show), ``figures/<name>.png`` and ``.pdf``, ``tables/<name>.csv`` and
``.tex``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from playlisteval.report.drawing import FigureSpec
from playlisteval.report.sources import Source
from playlisteval.report.table_format import Table

REPORT_MD = "report.md"


REPORT_HTML = "report.html"


FIGURES_DIR = "figures"


TABLES_DIR = "tables"


_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 0.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
[id$="provenance"] + table td { text-align: left; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 13px; color: #444; max-width: 60em; }
.no-figure { color: #666; font-style: italic; }
.files { font-size: 12px; }
.offline { background: #fff3f3; border: 1px solid #d99; padding: 0.6em 1em; }
.provenance-line { font-size: 13px; color: #444; }
"""


@dataclass(frozen=True)
class WrittenFigure:
    """A figure drawn and saved: its spec, caption and files (relative to the report)."""

    spec: FigureSpec
    caption: str
    png: str  # relative to the report folder
    pdf: str


def write_figures(
    figures: Sequence[tuple[FigureSpec, str]], out_dir: Path, note: str | None
) -> list[WrittenFigure]:
    """Draw and save each figure under ``figures/``, the offline ``note`` on each."""
    from playlisteval.report.drawing import draw, save

    written = []
    for spec, caption in figures:
        figure = draw(spec, note)
        png, pdf = save(figure, out_dir / FIGURES_DIR / spec.slug)
        written.append(
            WrittenFigure(
                spec,
                caption,
                png.relative_to(out_dir).as_posix(),
                pdf.relative_to(out_dir).as_posix(),
            )
        )
    return written


def _files_md(table: Table) -> str:
    return f"Files: [{table.slug}.csv]({TABLES_DIR}/{table.slug}.csv) · " + (
        f"[{table.slug}.tex]({TABLES_DIR}/{table.slug}.tex)"
    )


def _files_html(table: Table) -> str:
    e = html.escape
    csv_path, tex_path = f"{TABLES_DIR}/{table.slug}.csv", f"{TABLES_DIR}/{table.slug}.tex"
    return f'Files: <a href="{e(csv_path)}">CSV</a> · <a href="{e(tex_path)}">LaTeX</a>'


def write_tables(tables: Sequence[Table], out_dir: Path, note: str | None) -> list[Path]:
    """Each table as ``tables/<slug>.csv`` and ``.tex``; the files written."""
    written: list[Path] = []
    (out_dir / TABLES_DIR).mkdir(exist_ok=True)
    for table in tables:
        csv_path = out_dir / TABLES_DIR / f"{table.slug}.csv"
        tex_path = out_dir / TABLES_DIR / f"{table.slug}.tex"
        csv_path.write_text(table.csv_text(), encoding="utf-8")
        tex_path.write_text(table.latex(note or ""), encoding="utf-8")
        written += [csv_path, tex_path]
    return written


@dataclass(frozen=True)
class Opening:
    """What a report page says before its results: how many judgments from where, who
    answered (``banner``, styled by ``source``) and the one line of provenance."""

    summary_line: str
    banner: str
    provenance_line: str
    source: Source


@dataclass(frozen=True)
class PagePart:
    """One benchmark's results on a page: the headline tables (Table 1, the leaderboard), its
    figures (or the sentences that stand in for them), every other table, and its provenance
    (shown at the end of the page). ``benchmark`` names it when the page holds several."""

    headline: Sequence[Table]
    details: Sequence[Table]
    provenance: Table
    figures: Sequence[WrittenFigure]
    omitted: Sequence[str]
    benchmark: str | None = None


def figure_title(figure: WrittenFigure) -> str:
    """A figure's title on one line (a figure of a report over several benchmarks names its
    benchmark on a second line of the drawing)."""
    return " — ".join(figure.spec.title.splitlines())


def _figures_heading(part: PagePart) -> str:
    return f"Figures — {part.benchmark}" if part.benchmark else "Figures"


def markdown_page(opening: Opening, parts: Sequence[PagePart]) -> str:
    """``report.md``: what it is and who answered, then each benchmark's results — Table 1 and
    the leaderboard, the figures, every other table — and the provenance at the end."""
    lines = [
        "# Judge evaluation report",
        "",
        opening.summary_line,
        "",
        f"**{opening.banner}**",
        "",
        f"_{opening.provenance_line}_",
        "",
    ]
    number = 0
    for part in parts:
        lines += [t.markdown(_files_md(t)) for t in part.headline]
        lines += [f"## {_figures_heading(part)}", ""]
        for w in part.figures:
            number += 1
            title = figure_title(w)
            lines += [
                f"### Figure {number}. {title}",
                "",
                f"![{title}]({w.png})",
                "",
                f"{w.caption.strip()} PDF: [{Path(w.pdf).name}]({w.pdf})",
                "",
            ]
        lines += [f"_{sentence}_\n" for sentence in part.omitted]
        lines += [t.markdown(_files_md(t)) for t in part.details]
    lines += [part.provenance.markdown(_files_md(part.provenance)) for part in parts]
    return "\n".join(lines)


def _html_part(part: PagePart) -> list[str]:
    e = html.escape
    figures = [
        f'<figure><img src="{e(w.png)}" alt="{e(figure_title(w))}">'
        f"<figcaption><b>{e(figure_title(w))}.</b> {e(w.caption.strip())} "
        f'<a href="{e(w.pdf)}">PDF</a></figcaption></figure>'
        for w in part.figures
    ]
    figures += [f'<p class="no-figure">{e(s)}</p>' for s in part.omitted]
    return [
        *(t.html(_files_html(t)) for t in part.headline),
        f"<h2>{e(_figures_heading(part))}</h2>",
        *figures,
        *(t.html(_files_html(t)) for t in part.details),
    ]


def html_page(opening: Opening, parts: Sequence[PagePart]) -> str:
    """``report.html``: what ``report.md`` holds, in its order, on one self-contained page."""
    e = html.escape
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            # Nothing may load from anywhere but the report's own folder (its figures).
            '<meta http-equiv="Content-Security-Policy" '
            "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src 'self'\">",
            "<title>Judge evaluation report</title>",
            f"<style>{_CSS}</style></head><body>",
            "<h1>Judge evaluation report</h1>",
            f"<p>{e(opening.summary_line)}</p>",
            f'<p class="{"offline" if opening.source != "live" else "live"}">'
            f"{e(opening.banner)}</p>",
            f'<p class="provenance-line">{e(opening.provenance_line)}</p>',
            *(line for part in parts for line in _html_part(part)),
            *(p.provenance.html(_files_html(p.provenance)) for p in parts),
            "</body></html>",
            "",
        ]
    )
