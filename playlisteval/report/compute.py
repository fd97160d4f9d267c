"""The report's numbers: judgments grouped into runs (judge × condition), each run's metrics and
95 % intervals, retrieved runs against uniform ones, retriever recall, retrievers that returned
the same spans — computed from the records before a line of the report is written.

Figures and the hours columns name the haystack hours each run actually built
(``length_hours``), so a condition asked as "1h" over a playlist of 0.1 h reads "0.1 h (1 h
asked)". Pure functions over the records (:mod:`policies.judging` computes every metric and
:mod:`policies.bootstrap` every interval).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from playlisteval.report.gate import GateSummary, summarize_gate
from playlisteval.report.load import ReportError
from playlisteval.report.table_format import Stat
from policies.bootstrap import Interval, clustered_interval
from policies.judging import (
    DEFAULT_KS,
    Condition,
    JudgedPair,
    JudgeMetrics,
    JudgingError,
    Judgment,
    JudgmentRecord,
    PairedTest,
    RetrievalCase,
    RetrievalMetrics,
    judge_metrics,
    judged_pairs,
    paired_test,
    recall_at_k,
    retrieval_metrics,
)

if TYPE_CHECKING:
    from store.eventstore import EventStore


RECALL_THRESHOLD = 0.5
"""The tIoU at which the recall@k figure is drawn (the tables show every threshold)."""


def _score(judgment: Judgment) -> float:
    """A judgment's accuracy score: 1 right, 0 wrong, 0.5 a tie or an unparseable verdict."""
    if judgment.answered:
        return 1.0 if judgment.correct else 0.0
    return 0.5


def hours_text(hours: Sequence[float]) -> str:
    """Haystack hours as a table shows them: one value, or the range ``low–high``."""
    if not hours:
        return "?"
    low, high = min(hours), max(hours)
    return f"{low:.3g}" if math.isclose(low, high) else f"{low:.3g}–{high:.3g}"


def _judgment_interval(judgments: Sequence[Judgment]) -> Interval | None:
    return clustered_interval(
        [_score(j) for j in judgments],
        [j.playlist_id for j in judgments],
        [j.key for j in judgments],
    )


def _pair_interval(pairs: Sequence[JudgedPair], value: Any) -> Interval | None:
    if not pairs:
        return None
    return clustered_interval(
        [float(value(p)) for p in pairs],
        [p.playlist_id for p in pairs],
        [(p.pair_id, p.length_hours) for p in pairs],
    )


@dataclass
class Run:
    """One run: a judge under one condition, its records and their judgments."""

    judge: str
    condition_id: str
    condition: Condition
    records: list[JudgmentRecord] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)  # the records', made once

    @property
    def built(self) -> tuple[float, ...]:
        """The haystack hours the run's judgments were actually given, distinct and sorted."""
        return tuple(sorted({r.length_hours for r in self.records}))

    @property
    def mean_built(self) -> float:
        """The mean haystack hours its judgments were given (a figure's x)."""
        return math.fsum(r.length_hours for r in self.records) / len(self.records)

    def hours_label(self) -> str:
        """The hours built, and those asked when they differ: ``0.1 h (1 h asked)``."""
        built = hours_text(self.built)
        asked = self.condition.hours
        # No-break spaces: a wrapped figure label keeps "(1 h asked)" on one line.
        if len(self.built) == 1 and math.isclose(self.built[0], asked, rel_tol=0.005):
            return f"{built}\u00a0h"
        return f"{built}\u00a0h\u00a0({asked:g}\u00a0h\u00a0asked)"

    def name(self, *without: str) -> str:
        """The condition's label without its asked hours, then the hours built."""
        return f"{self.condition.label('hours', *without)} · {self.hours_label()}"


@dataclass(frozen=True)
class RunStats:
    """One run's metrics and the intervals the report shows beside them."""

    metrics: JudgeMetrics
    pairs: tuple[JudgedPair, ...]
    accuracy: Interval | None
    swap: Interval | None
    consistent: Interval | None
    consistency: Interval | None
    by_domain: dict[str, Interval | None]
    by_gap: dict[int, Interval | None]


def run_stats(run: Run) -> RunStats:
    """A run's metrics, with the 95 % intervals the report shows beside them."""
    judgments = run.judgments
    pairs = tuple(judged_pairs(judgments))

    def strata(key: str) -> dict[Any, Interval | None]:
        groups: dict[Any, list[Judgment]] = {}
        for j in judgments:
            groups.setdefault(getattr(j, key), []).append(j)
        return {k: _judgment_interval(v) for k, v in groups.items()}

    return RunStats(
        metrics=judge_metrics(judgments),
        pairs=pairs,
        accuracy=_judgment_interval(judgments),
        swap=_pair_interval(pairs, lambda p: p.swap_averaged),
        consistent=_pair_interval(pairs, lambda p: p.consistent_correct),
        consistency=_pair_interval(pairs, lambda p: p.position_consistent),
        by_domain=strata("domain"),
        by_gap=strata("gap"),
    )


@dataclass(frozen=True)
class Comparison:
    """A retrieved run against the same judge's uniform run, all else equal."""

    judge: str
    retrieved: Run
    uniform: Run
    test: PairedTest
    interval: Interval | None  # of the difference


@dataclass(frozen=True)
class RecallRow:
    """One retriever at one haystack length asked: its recall, cases and intervals."""

    retriever: str
    hours: float  # asked
    built: tuple[float, ...]
    metrics: RetrievalMetrics
    cases: tuple[RetrievalCase, ...]
    mean_built: float  # the haystack hours its cases were given, on average
    handed: int  # the most spans the retriever handed over for one case
    intervals: dict[int, Interval | None]  # recall@k at RECALL_THRESHOLD, by k

    def recall(self, k: int) -> Stat:
        """Recall@k at :data:`RECALL_THRESHOLD` with its 95 % interval."""
        return Stat(self.metrics.recall[(k, RECALL_THRESHOLD)].value, self.intervals.get(k))


def group_runs(records: Iterable[JudgmentRecord]) -> list[Run]:
    """The records grouped into runs (judge × condition id), in :func:`run_order`."""
    runs: dict[tuple[str, str], Run] = {}
    for item in records:
        j = item.judgment
        run = runs.get((j.judge, j.condition))
        if run is None:
            run = runs[(j.judge, j.condition)] = Run(j.judge, j.condition, item.condition)
        elif run.condition != item.condition:
            raise ReportError(
                f"condition id {j.condition!r} names two conditions, {run.condition!r} and "
                f"{item.condition!r}; condition ids must be unique"
            )
        run.records.append(item)
        run.judgments.append(j)
    return sorted(runs.values(), key=run_order)


def run_order(run: Run) -> tuple[Any, ...]:
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


def compare_runs(
    runs: Sequence[Run], stats: Mapping[tuple[str, str], RunStats]
) -> list[Comparison]:
    """Each retrieved run against the same judge's uniform run that differs only in sampling."""
    uniform = {
        (r.judge, r.condition.without("frames", "retriever")): r
        for r in runs
        if r.condition.frames == "uniform"
    }
    found: list[Comparison] = []
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
        a = {(p.pair_id, p.length_hours): p for p in stats[(run.judge, run.condition_id)].pairs}
        b = {(p.pair_id, p.length_hours): p for p in stats[(base.judge, base.condition_id)].pairs}
        shared = [k for k in a if k in b]
        interval = clustered_interval(
            [a[k].swap_averaged - b[k].swap_averaged for k in shared],
            [a[k].playlist_id for k in shared],
            shared,
        )
        found.append(Comparison(run.judge, run, base, test, interval))
    return found


def _recall_intervals(
    cases: Sequence[RetrievalCase], ks: Sequence[int]
) -> dict[int, Interval | None]:
    """Recall@k's 95 % interval at :data:`RECALL_THRESHOLD` for each k (playlists resampled)."""
    playlists = [c.playlist_id for c in cases]
    pair_ids = [c.pair_id for c in cases]
    return {
        k: clustered_interval(
            [recall_at_k(c.gold, c.retrieved, k, RECALL_THRESHOLD) for c in cases],
            playlists,
            pair_ids,
        )
        for k in ks
    }


def retrieval_rows(
    records: Iterable[JudgmentRecord], ks: Sequence[int] = DEFAULT_KS
) -> list[RecallRow]:
    """Retriever quality per (retriever, hours asked), one case per pair and haystack (judges,
    modalities and orders share a retrieval), with recall@k's intervals for each of ``ks``."""
    cases: dict[tuple[str, float], dict[tuple[str, float], RetrievalCase]] = {}
    for item in records:
        c = item.condition
        if c.frames != "retrieved" or not item.gold_spans:
            continue
        per = cases.setdefault((c.retriever or "?", c.hours), {})
        key = (item.pair_id, item.length_hours)
        if key not in per:
            per[key] = item.retrieval_case()
    rows = []
    for (retriever, hours), per in sorted(cases.items()):
        found = tuple(per.values())
        lengths = [length for _, length in per]
        rows.append(
            RecallRow(
                retriever,
                hours,
                tuple(sorted(set(lengths))),
                retrieval_metrics(found, ks),
                found,
                math.fsum(lengths) / len(lengths),
                max(len(c.retrieved) for c in found),
                _recall_intervals(found, ks),
            )
        )
    return rows


def figure_k(rows: Sequence[RecallRow], ks: Sequence[int] = DEFAULT_KS) -> int:
    """The k the recall-against-hours figure and Table 1's retriever choice read: the largest
    of ``ks`` that every retriever handed over at every length (else the smallest k)."""
    reach = min((row.handed for row in rows), default=0)
    return max((k for k in ks if k <= reach), default=ks[0])


@dataclass(frozen=True)
class Coincidence:
    """Retrievers that returned the same ranked spans for every pair they share."""

    hours: float
    retrievers: tuple[str, ...]
    pairs: int


def find_coincidences(records: Iterable[JudgmentRecord]) -> list[Coincidence]:
    """Retrievers that returned the same ranked spans for every pair they share, per hours."""
    spans: dict[float, dict[str, dict[tuple[str, float], tuple[Any, ...]]]] = {}
    for item in records:
        c = item.condition
        if c.frames != "retrieved":
            continue
        per = spans.setdefault(c.hours, {}).setdefault(c.retriever or "?", {})
        per.setdefault((item.pair_id, item.length_hours), item.ranked)
    found: list[Coincidence] = []
    for hours, by_retriever in sorted(spans.items()):
        left = sorted(by_retriever)
        while left:
            first, *rest = left
            same = [
                other
                for other in rest
                if (shared := by_retriever[first].keys() & by_retriever[other].keys())
                and all(by_retriever[first][k] == by_retriever[other][k] for k in shared)
            ]
            if same:
                shared_pairs = set(by_retriever[first])
                for other in same:
                    shared_pairs &= set(by_retriever[other])
                found.append(Coincidence(hours, (first, *same), len(shared_pairs)))
            left = [r for r in rest if r not in same]
    return found


def coincidence_sentence(c: Coincidence) -> str:
    """The sentence that says two (or more) retrievers are one measurement."""
    names = " and ".join(c.retrievers)
    count = {2: "two", 3: "three", 4: "four"}.get(len(c.retrievers), str(len(c.retrievers)))
    return (
        f"{names} returned the same ranked spans for every one of the {c.pairs} pairs at "
        f"{c.hours:g} h asked: their recall, and the accuracy of judges shown their spans, are "
        f"one measurement, not {count}."
    )


def twin_names(coincidences: Sequence[Coincidence]) -> dict[tuple[float, str], str]:
    """(hours asked, retriever) → how figures name it, e.g. ``text = multimodal``."""
    names = {}
    for c in coincidences:
        for r in c.retrievers:
            names[(c.hours, r)] = " = ".join(c.retrievers)
    return names


def modality_groups(runs: Sequence[Run]) -> list[tuple[str, list[Run]]]:
    """Runs of one judge that differ only in modality, when there are at least two of them."""
    groups: dict[tuple[str, tuple[Any, ...]], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.judge, run.condition.without("modality")), []).append(run)
    return [
        (f"{members[0].judge} · {members[0].name('modality')}", members)
        for members in groups.values()
        if len({m.condition.modality for m in members}) >= 2
    ]


def metric_value(metrics: JudgeMetrics, name: str) -> float | None:
    """A metric's micro value for a run, or None when it is undefined there."""
    table = metrics.tables[name]
    return None if table is None else table.micro.value


@dataclass(frozen=True)
class Computed:
    """Everything the report shows, computed from the records (and the log) before a line is
    written: the pure core that the pages, tables and figures render."""

    records: Sequence[JudgmentRecord]
    runs: list[Run]
    stats: dict[tuple[str, str], RunStats]
    comparisons: list[Comparison]
    recall_rows: list[RecallRow]
    coincidences: list[Coincidence]
    k: int  # the recall@k the recall-against-hours figure and Table 1's retriever rule read
    gate: GateSummary


def compute(records: Sequence[JudgmentRecord], events: EventStore | None) -> Computed:
    """Everything the report shows, from the records (and the log, for the gate)."""
    runs = group_runs(records)
    stats = {(r.judge, r.condition_id): run_stats(r) for r in runs}
    recall_rows = retrieval_rows(records)
    return Computed(
        records=records,
        runs=runs,
        stats=stats,
        comparisons=compare_runs(runs, stats),
        recall_rows=recall_rows,
        coincidences=find_coincidences(records),
        k=figure_k(recall_rows),
        gate=summarize_gate(events, records),
    )
