"""Every figure of the report, as data (:mod:`playlisteval.report.drawing`'s specs) with its
caption — accuracy by condition, against the haystack hours actually built, retrieved against
uniform frames, the modality ablation, position consistency, per domain, retriever recall@k,
retriever recall against the hours built and the difficulty gate's accuracy by rating gap —
each with its 95 % interval; a figure whose data is absent is a sentence that says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from playlisteval.report.compute import (
    RECALL_THRESHOLD,
    Comparison,
    Computed,
    RecallRow,
    Run,
    RunStats,
    coincidence_sentence,
    hours_text,
    metric_value,
    modality_groups,
    run_order,
    twin_names,
)
from playlisteval.report.drawing import (
    Bar,
    BarFigure,
    BarGroup,
    FigureSpec,
    HeatCell,
    HeatFigure,
    LineFigure,
    Point,
    Series,
)
from playlisteval.report.gate import GATE_SCORING, GateRow
from policies.bootstrap import Interval
from policies.judging import DEFAULT_KS


def _bar(series: str, value: float | None, interval: Interval | None) -> Bar | None:
    if value is None:
        return None
    if interval is None:
        return Bar(series, value)
    return Bar(series, value, interval.low, interval.high)


def _present(*bars: Bar | None) -> tuple[Bar, ...]:
    return tuple(b for b in bars if b is not None)


@dataclass
class PlannedFigures:
    """The figures to draw, each with its caption, and the sentences for those not drawn."""

    drawn: list[tuple[FigureSpec, str]] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)

    def add(self, spec: FigureSpec | None, caption: str, title: str, why: str) -> None:
        """A figure to draw with its caption, or (``spec`` None) the sentence that says why not."""
        if spec is None:
            self.omitted.append(f"{title}: not drawn, {why}.")
        else:
            self.drawn.append((spec, caption))


WHISKERS = "Whiskers: 95 % intervals (see Provenance)."


def _judge_bars(
    runs: Sequence[Run],
    stats: Mapping[tuple[str, str], RunStats],
    metric: str,
    interval: Callable[[RunStats], Interval | None],
) -> tuple[BarGroup, ...]:
    """A group per run name (in run order) of a bar per judge: its ``metric`` and that
    metric's ``interval``; a judge without the metric has no bar, a name without bars no group."""
    groups: dict[str, list[Bar]] = {}
    for run in sorted(runs, key=lambda r: (run_order(r)[1:], r.judge)):
        s = stats[(run.judge, run.condition_id)]
        bar = _bar(run.judge, metric_value(s.metrics, metric), interval(s))
        if bar is not None:
            groups.setdefault(run.name(), []).append(bar)
    return tuple(BarGroup(label, tuple(bars)) for label, bars in groups.items())


def _accuracy_figure(runs: Sequence[Run], stats: Mapping[tuple[str, str], RunStats]) -> BarFigure:
    return BarFigure(
        "accuracy-by-condition",
        "Accuracy by condition",
        _judge_bars(runs, stats, "accuracy", lambda s: s.accuracy),
        "accuracy",
        reference=0.5,
    )


def _hours_figure(
    runs: Sequence[Run], stats: Mapping[tuple[str, str], RunStats]
) -> tuple[LineFigure | None, str]:
    """Accuracy against the haystack hours built, one line per judge and condition apart from
    its hours; or None and why not."""
    families: dict[tuple[str, tuple[Any, ...]], list[Run]] = {}
    for run in runs:
        families.setdefault((run.judge, run.condition.without("hours")), []).append(run)
    series: list[Series] = []
    collapsed: list[Run] = []
    for members in families.values():
        points = []
        for run in sorted(members, key=lambda r: (r.mean_built, r.condition.hours)):
            s = stats[(run.judge, run.condition_id)]
            value = metric_value(s.metrics, "accuracy")
            if value is None:
                continue
            low = high = None
            if s.accuracy is not None:
                low, high = s.accuracy.low, s.accuracy.high
            points.append(Point(round(run.mean_built, 4), value, low, high))
        if len({p.x for p in points}) >= 2:
            label = f"{members[0].judge} · {members[0].condition.label('hours')}"
            series.append(Series(label, tuple(points)))
        elif len({m.condition.hours for m in members}) >= 2:
            collapsed += members
    if series:
        figure = LineFigure(
            "accuracy-vs-hours",
            "Accuracy against haystack hours",
            tuple(series),
            "haystack hours built",
            "accuracy",
            log_x=True,
            reference=0.5,
        )
        return figure, ""
    if collapsed:
        asked = [f"{h:g}" for h in sorted({r.condition.hours for r in collapsed})]
        built = hours_text([h for r in collapsed for h in r.built])
        return None, (
            f"conditions asked for {', '.join(asked[:-1])} and {asked[-1]} h, but every haystack "
            f"built holds {built} h (the playlists hold no more), so there is no length axis"
        )
    return None, "no judge was run at more than one haystack length under one condition"


def _comparison_figure(
    comparisons: Sequence[Comparison],
    stats: Mapping[tuple[str, str], RunStats],
    twins: Mapping[tuple[float, str], str],
) -> BarFigure | None:
    if not comparisons:
        return None
    groups: dict[tuple[str, str], list[Bar]] = {}
    for c in comparisons:
        key = (c.judge, c.uniform.condition_id)
        bars = groups.setdefault(key, [])
        if not bars:
            s = stats[(c.uniform.judge, c.uniform.condition_id)]
            bars += _present(
                _bar("uniform", metric_value(s.metrics, "swap_averaged_accuracy"), s.swap)
            )
        retriever = c.retrieved.condition.retriever or "?"
        name = twins.get((c.retrieved.condition.hours, retriever), retriever)
        series = f"retrieved: {name}"
        if any(b.series == series for b in bars):
            continue  # a retriever that coincides with one drawn: the same bar
        s = stats[(c.retrieved.judge, c.retrieved.condition_id)]
        value = metric_value(s.metrics, "swap_averaged_accuracy")
        bars += _present(_bar(series, value, s.swap))
    labels = {
        (c.judge, c.uniform.condition_id): f"{c.judge} · {c.uniform.name('frames', 'retriever')}"
        for c in comparisons
    }
    return BarFigure(
        "retrieved-vs-uniform",
        "Retrieved against uniform frames",
        tuple(BarGroup(labels[key], tuple(bars)) for key, bars in groups.items()),
        "swap-averaged accuracy",
        reference=0.5,
    )


def _modality_figure(
    groups: Sequence[tuple[str, list[Run]]], stats: Mapping[tuple[str, str], RunStats]
) -> BarFigure | None:
    if not groups:
        return None
    drawn = []
    for label, members in groups:
        bars = []
        for run in sorted(members, key=lambda r: r.condition.modality):
            s = stats[(run.judge, run.condition_id)]
            bars.append(
                _bar(run.condition.modality, metric_value(s.metrics, "accuracy"), s.accuracy)
            )
        drawn.append(BarGroup(label, _present(*bars)))
    return BarFigure("modality-ablation", "Modality ablation", tuple(drawn), "accuracy", 0.5)


def _consistency_figure(
    runs: Sequence[Run], stats: Mapping[tuple[str, str], RunStats]
) -> BarFigure | None:
    groups = _judge_bars(runs, stats, "position_consistency", lambda s: s.consistency)
    if not groups:
        return None
    return BarFigure(
        "position-consistency",
        "Position consistency across the answer swap",
        groups,
        "share of pairs",
    )


def _domain_figure(
    runs: Sequence[Run], stats: Mapping[tuple[str, str], RunStats]
) -> HeatFigure | None:
    cells: dict[tuple[str, str], HeatCell] = {}
    rows: list[str] = []
    columns: set[str] = set()
    for run in runs:
        s = stats[(run.judge, run.condition_id)]
        table = s.metrics.tables["accuracy"]
        if table is None:
            continue
        row = f"{run.judge} · {run.name()}"
        for domain, cell in table.by_domain.cells.items():
            if cell is None:
                continue
            interval = s.by_domain.get(str(domain))
            cells[(row, str(domain))] = HeatCell(
                cell.value,
                None if interval is None else interval.low,
                None if interval is None else interval.high,
                cell.n,
            )
            columns.add(str(domain))
            if row not in rows:
                rows.append(row)
    if not cells:
        return None
    return HeatFigure(
        "accuracy-per-domain", "Accuracy per domain", tuple(rows), tuple(sorted(columns)), cells
    )


def _recall_point(x: float, row: RecallRow, k: int) -> Point:
    stat = row.recall(k)
    interval = stat.interval
    return Point(
        x,
        stat.value or 0.0,
        None if interval is None else interval.low,
        None if interval is None else interval.high,
    )


def _recall_figure(
    rows: Sequence[RecallRow], ks: Sequence[int], twins: Mapping[tuple[float, str], str]
) -> LineFigure | None:
    series: list[Series] = []
    seen: set[str] = set()
    for row in rows:
        name = twins.get((row.hours, row.retriever), row.retriever)
        label = f"{name} · {hours_text(row.built)} h"
        if label in seen:
            continue  # its twin is drawn: the same line
        seen.add(label)
        # A k past the spans the retriever handed over repeats the last point: not drawn.
        drawn = [k for k in ks if k <= row.handed] or list(ks[:1])
        series.append(Series(label, tuple(_recall_point(float(k), row, k) for k in drawn)))
    if not series:
        return None
    return LineFigure(
        "retriever-recall",
        f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
        tuple(series),
        "k (retrieved segments)",
        "recall",
    )


def _retriever_name(rows: Sequence[RecallRow], twins: Mapping[tuple[float, str], str]) -> str:
    """A retriever's name in the recall-against-hours figure: its twins' joined name when it
    returned the same spans as they did at every length, else its own."""
    names = {twins.get((row.hours, row.retriever), row.retriever) for row in rows}
    return names.pop() if len(names) == 1 else rows[0].retriever


def _recall_hours_figure(
    rows: Sequence[RecallRow], k: int, twins: Mapping[tuple[float, str], str]
) -> tuple[LineFigure | None, str]:
    """Recall@k against the haystack hours built, one line per retriever; or None and why."""
    by_retriever: dict[str, list[RecallRow]] = {}
    for row in rows:
        by_retriever.setdefault(row.retriever, []).append(row)
    series: list[Series] = []
    for members in by_retriever.values():
        name = _retriever_name(members, twins)
        if any(s.label == name for s in series):
            continue  # its twin is drawn: the same line
        ordered = sorted(members, key=lambda r: (r.mean_built, r.hours))
        points = tuple(_recall_point(round(r.mean_built, 4), r, k) for r in ordered)
        if len({p.x for p in points}) >= 2:
            series.append(Series(name, points))
    if not series:
        if not rows:
            return None, "no judgment carries retrieved and gold spans"
        return None, "no retriever searched haystacks of two or more lengths built"
    return (
        LineFigure(
            "recall-vs-hours",
            f"Retriever recall@{k} against haystack hours",
            tuple(series),
            "haystack hours built",
            f"recall@{k} (tIoU ≥ {RECALL_THRESHOLD:g})",
            log_x=True,
        ),
        "",
    )


def _gate_figure(rows: Sequence[GateRow]) -> LineFigure | None:
    series = [
        Series(
            row.judge,
            tuple(
                Point(
                    float(gap),
                    stat.value or 0.0,
                    None if stat.interval is None else stat.interval.low,
                    None if stat.interval is None else stat.interval.high,
                )
                for gap, stat in row.by_gap.items()
            ),
        )
        for row in rows
    ]
    if not series:
        return None
    return LineFigure(
        "gate-accuracy-by-gap",
        "Difficulty-gate accuracy by rating gap",
        tuple(series),
        "rating gap (chosen − rejected)",
        "accuracy",
        reference=0.5,
    )


def _accuracy_figures(c: Computed, figures: PlannedFigures) -> None:
    runs, stats = c.runs, c.stats
    figures.add(
        _accuracy_figure(runs, stats),
        "Accuracy of each judge under each condition (a tie or an unparseable verdict counts "
        "0.5), named with the haystack hours actually built. Dashed line: 0.5, a coin flip. "
        + WHISKERS,
        "Accuracy by condition",
        "no run has an accuracy",
    )
    hours, why = _hours_figure(runs, stats)
    figures.add(
        hours,
        "Accuracy against the haystack hours each judgment was given (log scale), one line per "
        "judge and condition apart from its hours. " + WHISKERS,
        "Accuracy against haystack hours",
        why,
    )
    figures.add(
        _comparison_figure(c.comparisons, stats, twin_names(c.coincidences)),
        f"Swap-averaged accuracy with uniform and retrieved frames, all else equal. {WHISKERS} "
        + " ".join(coincidence_sentence(x) for x in c.coincidences),
        "Retrieved against uniform frames",
        "no judge has both a retrieved and a uniform run on the same pairs and setting",
    )
    figures.add(
        _modality_figure(modality_groups(runs), stats),
        "Accuracy of one judge shown different modalities, all else equal. " + WHISKERS,
        "Modality ablation",
        "no judge was run under two modalities with everything else equal",
    )
    figures.add(
        _consistency_figure(runs, stats),
        "Share of pairs whose two verdicts name the same answer across the answer swap. "
        + WHISKERS,
        "Position consistency across the answer swap",
        "no pair was judged in both answer orders",
    )
    figures.add(
        _domain_figure(runs, stats),
        "Accuracy per domain with its 95 % interval (brackets) and N (judgments).",
        "Accuracy per domain",
        "no run has an accuracy",
    )


def _retrieval_figures(c: Computed, figures: PlannedFigures) -> None:
    twins = twin_names(c.coincidences)
    twin_note = " ".join(coincidence_sentence(x) for x in c.coincidences)
    figures.add(
        _recall_figure(c.recall_rows, DEFAULT_KS, twins),
        f"Share of gold segments matched at tIoU ≥ {RECALL_THRESHOLD:g} by a top-k retrieved "
        f"span, for k up to the spans the retriever handed over. {WHISKERS} " + twin_note,
        f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
        "no judgment carries retrieved and gold spans",
    )
    recall_hours, why = _recall_hours_figure(c.recall_rows, c.k, twins)
    figures.add(
        recall_hours,
        f"Recall@{c.k} (the largest k every retriever handed over at every length) at tIoU ≥ "
        f"{RECALL_THRESHOLD:g} against the haystack hours searched (log scale), one line per "
        f"retriever. {WHISKERS} " + twin_note,
        "Retriever recall against haystack hours",
        why,
    )
    gate = c.gate
    figures.add(
        _gate_figure(gate.rows),
        "Accuracy of each difficulty-gate judge by the pair's rating gap, from the gate's own "
        f"verdicts on every candidate pair of run(s) {', '.join(gate.runs)} (kept and dropped), "
        f"both answer orders; {GATE_SCORING}. Dashed line: 0.5. Whiskers: 95 % intervals "
        "resampling whole items.",
        "Difficulty-gate accuracy by rating gap",
        gate.why,
    )


def plan_figures(c: Computed) -> PlannedFigures:
    """Every figure of the report (accuracy, then retrieval and the gate), drawn or said why not."""
    figures = PlannedFigures()
    _accuracy_figures(c, figures)
    _retrieval_figures(c, figures)
    return figures
