"""The evaluation report: judgments of one or more evaluations → ``report.md`` and ``report.html``.

An evaluation directory holds ``judgments.jsonl`` (one verdict per line: judge, condition, pair,
answer order, what it picked, retrieved and gold spans) and ``evaluation.json``. This module reads
those records with the strict parse of :class:`policies.judging.JudgmentRecord` (the one shape
evaluation writes), turns them into :class:`policies.judging.Judgment` and
:class:`policies.judging.RetrievalCase` and lets :mod:`policies.judging` compute every number;
a condition is named by :meth:`policies.judging.Condition.label` here as in the evaluation. It
then writes, in the spirit of the paper's Table 1 and figures:

* a table per judge × condition (accuracy, swap-averaged and consistent accuracy, position
  consistency and bias, N, clustered SE), per-domain and per-gap tables, the modality ablation,
  retrieved against uniform frames with a paired test, and retriever recall@k;
* one self-contained HTML page with the same tables and inline SVG charts (no script, no external
  resource; a Content-Security-Policy forbids loading any). A chart whose data is absent (say one
  haystack length only) is replaced by a sentence that says why.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policies.judging import (
    DEFAULT_KS,
    IOU_THRESHOLDS,
    Condition,
    Estimate,
    JudgeMetrics,
    JudgingError,
    Judgment,
    JudgmentRecord,
    PairedTest,
    RetrievalCase,
    RetrievalMetrics,
    judge_metrics,
    paired_test,
    retrieval_metrics,
)
from store.errors import PlaylistEvalError

JUDGMENTS_FILE = "judgments.jsonl"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
RECALL_THRESHOLD = 0.5
"""The tIoU at which the recall@k chart is drawn (the tables show every threshold)."""

TABLE1_METRICS: tuple[tuple[str, str], ...] = (
    ("accuracy", "accuracy"),
    ("swap_averaged_accuracy", "swap-averaged"),
    ("consistent_accuracy", "consistent"),
    ("position_consistency", "position consistency"),
    ("position_bias", "position bias"),
)


class ReportError(PlaylistEvalError):
    """The evaluation directories cannot be reported on (missing file, malformed record)."""


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportSummary:
    """What :func:`write_report` wrote and from what.

    ``figures`` are the titles of the charts drawn; ``omitted`` the sentences that stand in for
    charts whose data is absent.
    """

    markdown: Path
    html: Path
    judgments: int
    runs: int
    figures: tuple[str, ...]
    omitted: tuple[str, ...]


def _parse(line: str, where: str) -> JudgmentRecord:
    try:
        return JudgmentRecord.from_line(line)
    except JudgingError as error:
        raise ReportError(f"{where}: {error}") from error


def _said(record: JudgmentRecord) -> tuple[Any, ...]:
    """What a record says, not the call that made it: equal for a verdict recorded twice."""
    return (record.judgment, record.condition, record.ranked, record.gold)


def load_records(eval_dirs: Sequence[Path]) -> list[JudgmentRecord]:
    """Every judgment of the evaluation directories, in file order, one per verdict.

    A verdict recorded twice (a resumed run, or a directory given twice) counts once; two
    different verdicts for the same judge, condition, pair, length and order raise.
    """
    seen: dict[tuple[str, str, str, float, str], tuple[JudgmentRecord, str]] = {}
    for directory in eval_dirs:
        path = Path(directory) / JUDGMENTS_FILE
        if not path.is_file():
            raise ReportError(
                f"{str(directory)!r} has no {JUDGMENTS_FILE}; run `eval` into it first"
            )
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            item = _parse(line, where)
            j = item.judgment
            key = (j.judge, j.condition, j.pair_id, j.length_hours, j.order)
            if key in seen:
                first, first_where = seen[key]
                if _said(first) != _said(item):
                    raise ReportError(
                        f"{where}: {j.judge!r} under {j.condition!r} judged pair {j.pair_id!r} "
                        f"({j.order}, {j.length_hours:g} h) differently at {first_where}; keep one"
                    )
                continue
            seen[key] = (item, where)
    return [item for item, _ in seen.values()]


# --- computing -------------------------------------------------------------------------------


@dataclass
class _Run:
    judge: str
    condition_id: str
    condition: Condition
    records: list[JudgmentRecord] = field(default_factory=list)

    @property
    def judgments(self) -> list[Judgment]:
        return [r.judgment for r in self.records]


@dataclass(frozen=True)
class _Comparison:
    judge: str
    retrieved: _Run
    uniform: _Run
    test: PairedTest


@dataclass(frozen=True)
class _RecallRow:
    retriever: str
    hours: float
    metrics: RetrievalMetrics


def _runs(records: Iterable[JudgmentRecord]) -> list[_Run]:
    runs: dict[tuple[str, str], _Run] = {}
    for item in records:
        j = item.judgment
        run = runs.get((j.judge, j.condition))
        if run is None:
            run = runs[(j.judge, j.condition)] = _Run(j.judge, j.condition, item.condition)
        elif run.condition != item.condition:
            raise ReportError(
                f"condition id {j.condition!r} names two conditions, {run.condition!r} and "
                f"{item.condition!r}; condition ids must be unique"
            )
        run.records.append(item)
    return sorted(runs.values(), key=_run_order)


def _run_order(run: _Run) -> tuple[Any, ...]:
    """Judge, then sampling, retriever, modality and hours in numeric order (1 h before 10 h)."""
    c = run.condition
    return (
        run.judge,
        c.frames != "uniform",
        c.retriever or "",
        c.modality,
        c.hours,
        c.n_frames,
        -1 if c.thinking_budget is None else c.thinking_budget,
        c.resolution,
        run.condition_id,
    )


def _comparisons(runs: Sequence[_Run]) -> list[_Comparison]:
    """Each retrieved run against the same judge's uniform run that differs only in sampling."""
    uniform = {
        (r.judge, r.condition.without("frames", "retriever")): r
        for r in runs
        if r.condition.frames == "uniform"
    }
    found: list[_Comparison] = []
    for run in runs:
        if run.condition.frames != "retrieved":
            continue
        base = uniform.get((run.judge, run.condition.without("frames", "retriever")))
        if base is None:
            continue
        try:
            test = paired_test(run.judgments, base.judgments)
        except JudgingError:
            continue  # no shared complete pair: nothing to compare
        found.append(_Comparison(run.judge, run, base, test))
    return found


def _recall_rows(records: Iterable[JudgmentRecord]) -> list[_RecallRow]:
    """Retriever quality per (retriever, hours), one case per pair (judges and orders share it)."""
    cases: dict[tuple[str, float], dict[str, RetrievalCase]] = {}
    for item in records:
        c = item.condition
        if c.frames != "retrieved" or not item.gold:
            continue
        per = cases.setdefault((c.retriever or "?", item.judgment.length_hours), {})
        per.setdefault(item.pair_id, item.retrieval_case())
    return [
        _RecallRow(retriever, hours, retrieval_metrics(per.values()))
        for (retriever, hours), per in sorted(cases.items())
    ]


def _relabelled(records: Iterable[JudgmentRecord], condition: str) -> list[Judgment]:
    return [replace(r.judgment, condition=condition) for r in records]


def _hours_series(runs: Sequence[_Run]) -> list[tuple[str, list[tuple[float, float]]]]:
    """Accuracy against haystack hours, one line per judge and condition apart from its hours."""
    families: dict[tuple[str, tuple[Any, ...]], tuple[str, list[JudgmentRecord]]] = {}
    for run in runs:
        key = (run.judge, run.condition.without("hours"))
        label = f"{run.judge} · {run.condition.label('hours')}"
        families.setdefault(key, (label, []))[1].extend(run.records)
    series: list[tuple[str, list[tuple[float, float]]]] = []
    for label, records in families.values():
        table = judge_metrics(_relabelled(records, label)).tables["accuracy"]
        if table is None:
            continue
        points = [
            (float(hours), cell.value)
            for hours, cell in table.by_length.cells.items()
            if cell is not None
        ]
        if len(points) >= 2:
            series.append((label, sorted(points)))
    return series


def _modality_groups(runs: Sequence[_Run]) -> list[tuple[str, list[_Run]]]:
    """Runs of one judge that differ only in modality, when there are at least two of them."""
    groups: dict[tuple[str, tuple[Any, ...]], list[_Run]] = {}
    for run in runs:
        groups.setdefault((run.judge, run.condition.without("modality")), []).append(run)
    return [
        (f"{members[0].judge} · {members[0].condition.label('modality')}", members)
        for members in groups.values()
        if len({m.condition.modality for m in members}) >= 2
    ]


# --- formatting ------------------------------------------------------------------------------


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _metric(metrics: JudgeMetrics, name: str) -> Estimate | None:
    table = metrics.tables[name]
    return None if table is None else table.micro


def _p(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g}"


@dataclass(frozen=True)
class _Table:
    """One table of the report, rendered both as markdown and as HTML."""

    title: str
    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    note: str = ""

    def markdown(self) -> str:
        lines = [f"## {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        if not self.rows:
            return "\n".join([*lines, "_No data for this table._", ""])
        lines.append("| " + " | ".join(self.header) + " |")
        lines.append("|" + "|".join(" --- " for _ in self.header) + "|")
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join([*lines, ""])

    def html(self) -> str:
        e = html.escape
        parts = [f"<h2>{e(self.title)}</h2>"]
        if self.note:
            parts.append(f"<p>{e(self.note)}</p>")
        if not self.rows:
            parts.append('<p class="no-data">No data for this table.</p>')
            return "\n".join(parts)
        parts.append("<table><thead><tr>")
        parts += [f"<th>{e(h)}</th>" for h in self.header]
        parts.append("</tr></thead><tbody>")
        for row in self.rows:
            parts.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
        parts.append("</tbody></table>")
        return "\n".join(parts)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table1(runs: Sequence[_Run], metrics: Mapping[tuple[str, str], JudgeMetrics]) -> _Table:
    rows = []
    for run in runs:
        m = metrics[(run.judge, run.condition_id)]
        acc = _metric(m, "accuracy")
        cells = [
            _fmt(None if (e := _metric(m, name)) is None else e.value, name == "position_bias")
            for name, _ in TABLE1_METRICS
        ]
        rows.append(
            (
                run.judge,
                run.condition_id,
                *cells,
                str(m.judgments),
                str(m.pairs),
                _fmt(None if acc is None else acc.clustered_se),
            )
        )
    return _Table(
        "Judges by condition",
        (
            "judge",
            "condition",
            *(label for _, label in TABLE1_METRICS),
            "N",
            "pairs",
            "SE (clustered)",
        ),
        rows,
        note=(
            "Accuracy counts a tie or an unparseable verdict as 0.5; N counts judgments; "
            "swap-averaged, consistent and position consistency are over the pairs judged in "
            "both orders; SE is the accuracy's standard error clustered by playlist."
        ),
    )


def _strata_table(
    runs: Sequence[_Run],
    metrics: Mapping[tuple[str, str], JudgeMetrics],
    by: str,
    title: str,
) -> _Table:
    keys: set[Any] = set()
    for m in metrics.values():
        table = m.tables["accuracy"]
        if table is not None:
            keys.update(getattr(table, by).cells)
    ordered = sorted(keys, key=lambda k: (str(type(k)), k))
    rows = []
    for run in runs:
        table = metrics[(run.judge, run.condition_id)].tables["accuracy"]
        cells: list[str] = []
        for key in ordered:
            cell = None if table is None else getattr(table, by).cells.get(key)
            cells.append("—" if cell is None else f"{cell.value:.3f} (N={cell.n})")
        macro = None if table is None else getattr(table, by).macro
        rows.append((run.judge, run.condition_id, *cells, _fmt(macro)))
    return _Table(
        title,
        ("judge", "condition", *(str(k) for k in ordered), "macro"),
        rows,
        note="Accuracy per stratum with its N (judgments); macro is the unweighted mean of cells.",
    )


def _modality_table(
    groups: Sequence[tuple[str, list[_Run]]], metrics: Mapping[tuple[str, str], JudgeMetrics]
) -> _Table:
    rows = []
    for _, members in groups:
        for run in sorted(members, key=lambda r: r.condition.modality):
            m = metrics[(run.judge, run.condition_id)]
            acc, swap = _metric(m, "accuracy"), _metric(m, "swap_averaged_accuracy")
            rows.append(
                (
                    run.judge,
                    run.condition.label("modality"),
                    run.condition.modality,
                    _fmt(None if acc is None else acc.value),
                    _fmt(None if swap is None else swap.value),
                    str(m.judgments),
                )
            )
    return _Table(
        "Modality ablation",
        ("judge", "setting", "modality", "accuracy", "swap-averaged", "N"),
        rows,
        note="Runs of one judge that differ only in what the judge is shown.",
    )


def _comparison_table(comparisons: Sequence[_Comparison]) -> _Table:
    rows = []
    for c in comparisons:
        t = c.test
        rows.append(
            (
                c.judge,
                c.retrieved.condition.retriever or "?",
                c.uniform.condition_id,
                c.retrieved.condition_id,
                str(t.pairs),
                _fmt(t.difference.value, signed=True),
                _fmt(t.difference.clustered_se),
                _fmt(t.z, signed=True),
                _p(t.p),
                str(t.a_only),
                str(t.b_only),
                _p(t.sign_p),
            )
        )
    return _Table(
        "Retrieved against uniform frames",
        (
            "judge",
            "retriever",
            "uniform",
            "retrieved",
            "pairs",
            "difference",
            "SE (clustered)",
            "z",
            "p",
            "only retrieved consistent",
            "only uniform consistent",
            "sign test p",
        ),
        rows,
        note=(
            "Difference: retrieved minus uniform swap-averaged accuracy on the pairs both judged "
            "in both orders; z and p from the playlist-clustered SE; the sign test is McNemar's "
            "on pairs consistently correct under one run only."
        ),
    )


def _recall_table(rows_in: Sequence[_RecallRow], ks: Sequence[int]) -> _Table:
    rows = []
    for row in rows_in:
        for threshold in IOU_THRESHOLDS:
            rows.append(
                (
                    row.retriever,
                    f"{row.hours:g}",
                    f"{threshold:g}",
                    *(_fmt(row.metrics.recall[(k, threshold)].value) for k in ks),
                    _fmt(row.metrics.coverage.value),
                    _fmt(row.metrics.mean_best_iou.value),
                    str(row.metrics.cases),
                )
            )
    return _Table(
        "Retriever recall of the gold evidence",
        ("retriever", "hours", "tIoU ≥", *(f"R@{k}" for k in ks), "coverage", "mean IoU", "N"),
        rows,
        note="Recall@k: share of gold segments matched by a top-k retrieved span at the tIoU.",
    )


# --- SVG charts ------------------------------------------------------------------------------

_W, _H = 920, 320
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 340, 36, 56
_COLOURS = (
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


def _svg_open(title: str, kind: str) -> list[str]:
    e = html.escape
    return [
        f'<svg class="plot" data-kind="{e(kind)}" role="img" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}"><title>{e(title)}</title>',
        f'<text x="{_W / 2:g}" y="20" text-anchor="middle" font-weight="bold">{e(title)}</text>',
    ]


def _y_axis(label: str) -> list[str]:
    """A 0–1 vertical axis with gridlines every 0.25."""
    e = html.escape
    plot_h = _H - _TOP - _BOTTOM
    parts = []
    for i in range(5):
        value = i / 4
        y = _TOP + plot_h * (1 - value)
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y:g}" y2="{y:g}" stroke="#ddd"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:g}" text-anchor="end" font-size="11">{value:g}</text>'
        )
    parts.append(
        f'<text x="14" y="{_TOP + plot_h / 2:g}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2:g})">{e(label)}</text>'
    )
    return parts


def _legend(labels: Sequence[str]) -> list[str]:
    e = html.escape
    x = _W - _RIGHT + 10
    return [
        f'<rect x="{x}" y="{_TOP + 16 * i}" width="10" height="10" '
        f'fill="{_COLOURS[i % len(_COLOURS)]}"/>'
        f'<text x="{x + 14}" y="{_TOP + 16 * i + 9}" font-size="11">{e(label)}</text>'
        for i, label in enumerate(labels)
    ]


def _y(value: float) -> float:
    plot_h = _H - _TOP - _BOTTOM
    return _TOP + plot_h * (1 - max(0.0, min(1.0, value)))


def line_chart(
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    x_label: str,
    y_label: str,
    log_x: bool = False,
) -> str:
    """An inline SVG line chart of ``series`` (label, points) with values from 0 to 1."""
    e = html.escape
    xs = sorted({x for _, points in series for x, _ in points})
    log = log_x and xs[0] > 0

    def scale(x: float) -> float:
        return math.log10(x) if log else x

    low, high = scale(xs[0]), scale(xs[-1])
    width = _W - _LEFT - _RIGHT

    def x_pos(x: float) -> float:
        if high == low:
            return _LEFT + width / 2
        return _LEFT + width * (scale(x) - low) / (high - low)

    parts = _svg_open(title, "line") + _y_axis(y_label)
    base = _H - _BOTTOM
    for x in xs:
        parts.append(
            f'<text x="{x_pos(x):g}" y="{base + 16}" text-anchor="middle" '
            f'font-size="11">{x:g}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + width / 2:g}" y="{_H - 12}" text-anchor="middle" '
        f'font-size="12">{e(x_label)}</text>'
    )
    for i, (label, points) in enumerate(series):
        colour = _COLOURS[i % len(_COLOURS)]
        path = " ".join(f"{x_pos(x):.1f},{_y(y):.1f}" for x, y in points)
        parts.append(
            f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2" '
            f'points="{path}"><title>{e(label)}</title></polyline>'
        )
        parts += [
            f'<circle cx="{x_pos(x):.1f}" cy="{_y(y):.1f}" r="3" fill="{colour}">'
            f"<title>{e(f'{label}: {y:.3f} at {x:g}')}</title></circle>"
            for x, y in points
        ]
    parts += _legend([label for label, _ in series])
    parts.append("</svg>")
    return "\n".join(parts)


def bar_chart(
    title: str,
    groups: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    y_label: str,
) -> str:
    """An inline SVG grouped bar chart: ``groups`` of (bar label, value from 0 to 1)."""
    e = html.escape
    labels: list[str] = []
    for _, bars in groups:
        labels += [label for label, _ in bars if label not in labels]
    width = _W - _LEFT - _RIGHT
    slot = width / max(1, len(groups))
    bar_w = slot * 0.8 / max(1, len(labels))
    parts = _svg_open(title, "bar") + _y_axis(y_label)
    base = _H - _BOTTOM
    for g, (group, bars) in enumerate(groups):
        left = _LEFT + g * slot + slot * 0.1
        for label, value in bars:
            i = labels.index(label)
            top = _y(value)
            parts.append(
                f'<rect class="bar" x="{left + i * bar_w:.1f}" y="{top:.1f}" '
                f'width="{bar_w * 0.9:.1f}" height="{base - top:.1f}" '
                f'fill="{_COLOURS[i % len(_COLOURS)]}">'
                f"<title>{e(f'{group} · {label}: {value:.3f}')}</title></rect>"
                f'<text x="{left + i * bar_w + bar_w * 0.45:.1f}" y="{top - 3:.1f}" '
                f'text-anchor="middle" font-size="9">{value:.2f}</text>'
            )
        parts.append(
            f'<text x="{left + slot * 0.4:.1f}" y="{base + 16}" text-anchor="middle" '
            f'font-size="11">{e(group)}</text>'
        )
    parts += _legend(labels)
    parts.append("</svg>")
    return "\n".join(parts)


# --- the report ------------------------------------------------------------------------------


@dataclass
class _Figures:
    html: list[str] = field(default_factory=list)
    drawn: list[str] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)

    def add(self, title: str, draw: Callable[[], str] | None, why: str) -> None:
        """Draw the chart, or say in a sentence why there is none."""
        if draw is None:
            sentence = f"{title}: not drawn, {why}."
            self.omitted.append(sentence)
            self.html.append(f'<p class="no-figure">{html.escape(sentence)}</p>')
        else:
            self.drawn.append(title)
            self.html.append(f"<figure>{draw()}</figure>")


_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
figure { margin: 1em 0; }
.no-figure { color: #666; font-style: italic; }
"""


def write_report(eval_dirs: Sequence[Path], out_dir: Path) -> ReportSummary:
    """Read the judgments of ``eval_dirs``; write ``report.md`` and ``report.html`` in ``out_dir``.

    Raises :class:`ReportError` when a directory has no judgments file, a record is malformed, or
    there is no judgment at all.
    """
    if not eval_dirs:
        raise ReportError("write_report needs at least one evaluation directory, got none")
    records = load_records(eval_dirs)
    if not records:
        raise ReportError(
            f"no judgments in {[str(d) for d in eval_dirs]!r}; run `eval` before `report`"
        )
    runs = _runs(records)
    metrics = {(r.judge, r.condition_id): judge_metrics(r.judgments) for r in runs}
    comparisons = _comparisons(runs)
    recall_rows = _recall_rows(records)
    modality_groups = _modality_groups(runs)
    hours_series = _hours_series(runs)
    ks = DEFAULT_KS

    tables = [
        _table1(runs, metrics),
        _strata_table(runs, metrics, "by_domain", "Accuracy per domain"),
        _strata_table(runs, metrics, "by_gap", "Accuracy per rating gap"),
        _modality_table(modality_groups, metrics),
        _comparison_table(comparisons),
        _recall_table(recall_rows, ks),
    ]

    figures = _Figures()
    figures.add(
        "Accuracy against haystack hours",
        (
            (
                lambda: line_chart(
                    "Accuracy against haystack hours",
                    hours_series,
                    "haystack hours",
                    "accuracy",
                    log_x=True,
                )
            )
            if hours_series
            else None
        ),
        "no judge was run at more than one haystack length under one condition",
    )
    figures.add(
        "Retrieved against uniform frames",
        (
            (
                lambda: bar_chart(
                    "Retrieved against uniform frames",
                    [
                        (
                            f"{c.judge} · {c.uniform.condition.label('frames', 'retriever')}",
                            [
                                ("uniform", _swap(metrics, c.uniform)),
                                (
                                    f"retrieved ({c.retrieved.condition.retriever})",
                                    _swap(metrics, c.retrieved),
                                ),
                            ],
                        )
                        for c in comparisons
                    ],
                    "swap-averaged accuracy",
                )
            )
            if comparisons
            else None
        ),
        "no judge has both a retrieved and a uniform run on the same pairs and setting",
    )
    figures.add(
        "Modality ablation",
        (
            (
                lambda: bar_chart(
                    "Modality ablation",
                    [
                        (
                            label,
                            [
                                (m.condition.modality, _accuracy(metrics, m))
                                for m in sorted(members, key=lambda r: r.condition.modality)
                            ],
                        )
                        for label, members in modality_groups
                    ],
                    "accuracy",
                )
            )
            if modality_groups
            else None
        ),
        "no judge was run under two modalities with everything else equal",
    )
    consistency: dict[str, list[tuple[str, float]]] = {}
    for r in runs:
        v = _value(metrics[(r.judge, r.condition_id)], "position_consistency")
        if v is not None:
            consistency.setdefault(r.judge, []).append((r.condition_id, v))
    figures.add(
        "Position consistency across the answer swap",
        (
            (
                lambda: bar_chart(
                    "Position consistency across the answer swap",
                    list(consistency.items()),
                    "share of pairs",
                )
            )
            if consistency
            else None
        ),
        "no pair was judged in both answer orders",
    )
    domain_groups = _domain_groups(runs, metrics)
    figures.add(
        "Accuracy per domain",
        (
            (lambda: bar_chart("Accuracy per domain", domain_groups, "accuracy"))
            if domain_groups
            else None
        ),
        "no run has an accuracy",
    )
    recall_series = [
        (
            f"{row.retriever} · {row.hours:g}h",
            [(float(k), row.metrics.recall[(k, RECALL_THRESHOLD)].value) for k in ks],
        )
        for row in recall_rows
    ]
    figures.add(
        f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
        (
            (
                lambda: line_chart(
                    f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
                    recall_series,
                    "k (retrieved segments)",
                    "recall",
                )
            )
            if recall_series
            else None
        ),
        "no judgment carries retrieved and gold spans",
    )

    out_dir.mkdir(parents=True, exist_ok=True)
    sources = ", ".join(str(d) for d in eval_dirs)
    markdown = "\n".join(
        [
            "# Judge evaluation report",
            "",
            f"{len(records)} judgments, {len(runs)} runs (judge × condition), from {sources}.",
            "",
            *(t.markdown() for t in tables),
        ]
    )
    md_path = out_dir / REPORT_MD
    md_path.write_text(markdown, encoding="utf-8")

    e = html.escape
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            # Nothing may load from anywhere: the page is one file, readable offline.
            '<meta http-equiv="Content-Security-Policy" '
            "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
            "<title>Judge evaluation report</title>",
            f"<style>{_CSS}</style></head><body>",
            "<h1>Judge evaluation report</h1>",
            f"<p>{len(records)} judgments, {len(runs)} runs (judge × condition), from "
            f"{e(sources)}.</p>",
            "<h2>Figures</h2>",
            *figures.html,
            *(t.html() for t in tables),
            "</body></html>",
            "",
        ]
    )
    html_path = out_dir / REPORT_HTML
    html_path.write_text(page, encoding="utf-8")
    return ReportSummary(
        markdown=md_path,
        html=html_path,
        judgments=len(records),
        runs=len(runs),
        figures=tuple(figures.drawn),
        omitted=tuple(figures.omitted),
    )


def _value(metrics: JudgeMetrics, name: str) -> float | None:
    estimate = _metric(metrics, name)
    return None if estimate is None else estimate.value


def _swap(metrics: Mapping[tuple[str, str], JudgeMetrics], run: _Run) -> float:
    return _value(metrics[(run.judge, run.condition_id)], "swap_averaged_accuracy") or 0.0


def _accuracy(metrics: Mapping[tuple[str, str], JudgeMetrics], run: _Run) -> float:
    return _value(metrics[(run.judge, run.condition_id)], "accuracy") or 0.0


def _domain_groups(
    runs: Sequence[_Run], metrics: Mapping[tuple[str, str], JudgeMetrics]
) -> list[tuple[str, list[tuple[str, float]]]]:
    """Per domain a bar per run with its accuracy there."""
    groups: dict[str, list[tuple[str, float]]] = {}
    for run in runs:
        table = metrics[(run.judge, run.condition_id)].tables["accuracy"]
        if table is None:
            continue
        for domain, cell in table.by_domain.cells.items():
            if cell is not None:
                groups.setdefault(str(domain), []).append(
                    (f"{run.judge} · {run.condition_id}", cell.value)
                )
    return sorted(groups.items())
