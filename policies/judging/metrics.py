"""The judge metrics of one run (one judge under one condition), and two runs compared.

Per judgment: accuracy (a tie or an unparseable verdict counts 0.5), strict accuracy (they count
0), answered-only accuracy (they are left out) and position bias (share of decisive verdicts that
pick the first position, minus 0.5). Per pair (both orders present): swap-averaged accuracy,
consistent accuracy (1 only if both orders pick the preferred answer) and position consistency
(the two verdicts name the same answer, or both say tie, across the swap). Each overall (micro)
and per domain, rating gap and playlist length, with the macro mean of the per-stratum values
and N per cell (:func:`judge_metrics`); :func:`paired_test` compares two runs on the same pairs.

A pair is keyed by ``(pair_id, length_hours)``: one run may judge the same pair inside haystacks
of several lengths, and each is its own unit. Pure functions over plain data; stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from policies.judging.estimates import Estimate, mean_estimate, sign_test_p, two_sided_normal_p
from policies.judging.records import JudgingError, Judgment, Order, PairKey

# --- pairs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgedPair:
    """Both orders of one pair from one run, with the pair's strata and cluster."""

    pair_id: str
    length_hours: float
    domain: str
    gap: int
    playlist_id: str
    chosen_first: Judgment
    rejected_first: Judgment

    @property
    def swap_averaged(self) -> float:
        """Mean of the two orders' scores (a tie or an unparseable verdict scoring 0.5)."""
        return (_half_score(self.chosen_first) + _half_score(self.rejected_first)) / 2

    @property
    def consistent_correct(self) -> bool:
        """True when both orders pick the preferred answer."""
        return self.chosen_first.correct and self.rejected_first.correct

    @property
    def position_consistent(self) -> bool:
        """True when both verdicts name the same answer (or both say tie) across the swap.

        An unparseable verdict is never consistent.
        """
        first, second = self.chosen_first.answer, self.rejected_first.answer
        return first is not None and first == second


def _half_score(judgment: Judgment) -> float:
    if judgment.answered:
        return 1.0 if judgment.correct else 0.0
    return 0.5


def split_runs(judgments: Iterable[Judgment]) -> dict[tuple[str, str], list[Judgment]]:
    """Group judgments by ``(judge, condition)``, in first-seen order, keeping their order."""
    runs: dict[tuple[str, str], list[Judgment]] = {}
    for judgment in judgments:
        runs.setdefault((judgment.judge, judgment.condition), []).append(judgment)
    return runs


def _one_run(judgments: Iterable[Judgment], what: str) -> list[Judgment]:
    items = list(judgments)
    if not items:
        raise JudgingError(f"{what} needs at least one judgment, got none")
    runs = sorted({(j.judge, j.condition) for j in items})
    if len(runs) > 1:
        raise JudgingError(
            f"{what} is computed per run (one judge under one condition), got {len(runs)!r} "
            f"runs {runs[:4]!r}; group them with split_runs() first"
        )
    return items


def _pairs(items: Sequence[Judgment]) -> tuple[list[JudgedPair], int]:
    """Complete pairs in first-seen order, and how many pairs lack one of the two orders."""
    by_key: dict[PairKey, dict[Order, Judgment]] = {}
    for judgment in items:
        orders = by_key.setdefault(judgment.key, {})
        if judgment.order in orders:
            raise JudgingError(
                f"pair {judgment.pair_id!r} at {judgment.length_hours!r} h has two "
                f"{judgment.order!r} judgments from {judgment.judge!r} under "
                f"{judgment.condition!r}; keep one verdict per pair and order"
            )
        orders[judgment.order] = judgment
    pairs: list[JudgedPair] = []
    incomplete = 0
    for (pair_id, length), orders in by_key.items():
        if len(orders) < 2:
            incomplete += 1
            continue
        first, second = orders["chosen_first"], orders["rejected_first"]
        strata = (first.domain, first.gap, first.playlist_id)
        if strata != (second.domain, second.gap, second.playlist_id):
            raise JudgingError(
                f"pair {pair_id!r} at {length!r} h has (domain, gap, playlist) {strata!r} in "
                f"one order and {(second.domain, second.gap, second.playlist_id)!r} in the "
                "other; both orders must describe the same pair"
            )
        pairs.append(
            JudgedPair(
                pair_id=pair_id,
                length_hours=length,
                domain=first.domain,
                gap=first.gap,
                playlist_id=first.playlist_id,
                chosen_first=first,
                rejected_first=second,
            )
        )
    return pairs, incomplete


def judged_pairs(judgments: Iterable[Judgment]) -> list[JudgedPair]:
    """The run's pairs that have both orders, in first-seen order (one run only).

    Pairs missing an order are left out (see :attr:`JudgeMetrics.incomplete_pairs`); a pair with
    two verdicts in the same order, or whose orders disagree on its strata, raises.
    """
    pairs, _ = _pairs(_one_run(judgments, "judged_pairs"))
    return pairs


# --- the metrics, one number each ------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """One observation of a metric: its value and where it belongs."""

    value: float
    playlist_id: str
    domain: str
    gap: int
    length_hours: float


def _judgment_unit(judgment: Judgment, value: float) -> _Unit:
    return _Unit(value, judgment.playlist_id, judgment.domain, judgment.gap, judgment.length_hours)


def _pair_unit(pair: JudgedPair, value: float) -> _Unit:
    return _Unit(value, pair.playlist_id, pair.domain, pair.gap, pair.length_hours)


def _accuracy_units(items: Sequence[Judgment]) -> list[_Unit]:
    return [_judgment_unit(j, _half_score(j)) for j in items]


def _strict_units(items: Sequence[Judgment]) -> list[_Unit]:
    return [_judgment_unit(j, 1.0 if j.correct else 0.0) for j in items]


def _answered_units(items: Sequence[Judgment]) -> list[_Unit]:
    return [_judgment_unit(j, 1.0 if j.correct else 0.0) for j in items if j.answered]


def _first_units(items: Sequence[Judgment]) -> list[_Unit]:
    return [_judgment_unit(j, 1.0 if j.picked == "first" else 0.0) for j in items if j.answered]


def _swap_units(pairs: Sequence[JudgedPair]) -> list[_Unit]:
    return [_pair_unit(p, p.swap_averaged) for p in pairs]


def _consistent_units(pairs: Sequence[JudgedPair]) -> list[_Unit]:
    return [_pair_unit(p, 1.0 if p.consistent_correct else 0.0) for p in pairs]


def _position_units(pairs: Sequence[JudgedPair]) -> list[_Unit]:
    return [_pair_unit(p, 1.0 if p.position_consistent else 0.0) for p in pairs]


#: Why a metric over decisive verdicts only is undefined.
_NONE_DECISIVE = "every verdict is a tie or unparseable"


@dataclass(frozen=True)
class _Metric:
    """A metric: the units it averages, read off a run's judgments or off its complete pairs
    (the one of ``of_judgments`` and ``of_pairs`` that is given)."""

    name: str
    of_judgments: Callable[[Sequence[Judgment]], list[_Unit]] | None = None
    of_pairs: Callable[[Sequence[JudgedPair]], list[_Unit]] | None = None
    shift: float = 0.0  # position bias reports the share of "first" minus 0.5
    empty: str = "no judgments"

    @property
    def level(self) -> Literal["judgment", "pair"]:
        """What one unit of the metric is."""
        return "judgment" if self.of_judgments is not None else "pair"


METRICS: dict[str, _Metric] = {
    m.name: m
    for m in (
        _Metric("accuracy", of_judgments=_accuracy_units),
        _Metric("strict_accuracy", of_judgments=_strict_units),
        _Metric("answered_accuracy", of_judgments=_answered_units, empty=_NONE_DECISIVE),
        _Metric("swap_averaged_accuracy", of_pairs=_swap_units),
        _Metric("consistent_accuracy", of_pairs=_consistent_units),
        _Metric("position_consistency", of_pairs=_position_units),
        _Metric("position_bias", of_judgments=_first_units, shift=-0.5, empty=_NONE_DECISIVE),
    )
}
"""Every metric :func:`judge_metrics` reports, by name, in report order."""


def _estimate(units: Sequence[_Unit], shift: float) -> Estimate:
    estimate = mean_estimate([u.value for u in units], [u.playlist_id for u in units])
    if shift:
        return Estimate(
            value=estimate.value + shift,
            n=estimate.n,
            clusters=estimate.clusters,
            se=estimate.se,
            clustered_se=estimate.clustered_se,
        )
    return estimate


def _metric_units(metric: _Metric, items: Sequence[Judgment]) -> list[_Unit]:
    if metric.of_judgments is not None:
        units = metric.of_judgments(items)
    else:
        assert metric.of_pairs is not None  # a metric reads its judgments or its pairs
        pairs, incomplete = _pairs(items)
        if not pairs:
            raise JudgingError(
                f"{metric.name} needs pairs judged in both orders; all {incomplete!r} pairs lack "
                "one order"
            )
        units = metric.of_pairs(pairs)
    if not units:
        raise JudgingError(f"{metric.name} is undefined: {metric.empty}")
    return units


def _single(name: str, judgments: Iterable[Judgment]) -> Estimate:
    metric = METRICS[name]
    return _estimate(_metric_units(metric, _one_run(judgments, name)), metric.shift)


def accuracy(judgments: Iterable[Judgment]) -> Estimate:
    """Share of verdicts that pick the preferred answer; a tie or unparseable one counts 0.5."""
    return _single("accuracy", judgments)


def strict_accuracy(judgments: Iterable[Judgment]) -> Estimate:
    """Share of verdicts that pick the preferred answer; a tie or unparseable one counts 0."""
    return _single("strict_accuracy", judgments)


def answered_accuracy(judgments: Iterable[Judgment]) -> Estimate:
    """Accuracy over decisive verdicts only (ties and unparseable ones left out).

    Raises :class:`JudgingError` when no verdict is decisive.
    """
    return _single("answered_accuracy", judgments)


def swap_averaged_accuracy(judgments: Iterable[Judgment]) -> Estimate:
    """Per pair the mean score of its two orders (ties 0.5), then the mean over pairs."""
    return _single("swap_averaged_accuracy", judgments)


def consistent_accuracy(judgments: Iterable[Judgment]) -> Estimate:
    """Share of pairs whose both orders pick the preferred answer."""
    return _single("consistent_accuracy", judgments)


def position_consistency(judgments: Iterable[Judgment]) -> Estimate:
    """Share of pairs whose two verdicts name the same answer (or both tie) across the swap."""
    return _single("position_consistency", judgments)


def position_bias(judgments: Iterable[Judgment]) -> Estimate:
    """Share of decisive verdicts that pick the first position, minus 0.5 (+0.5: always first).

    Ties and unparseable verdicts are left out, so a judge that often ties is not read as biased
    toward the second answer. Raises :class:`JudgingError` when no verdict is decisive.
    """
    return _single("position_bias", judgments)


# --- strata ----------------------------------------------------------------------------------


Stratum: TypeAlias = str | int | float


@dataclass(frozen=True)
class Breakdown:
    """One metric per value of one stratum (domain, gap or length), and their macro mean.

    ``cells`` holds each stratum's :class:`Estimate` (its ``n`` is the cell's N), or ``None`` when
    the metric is undefined there (for instance no decisive verdict in that cell); ``macro`` is the
    unweighted mean over the defined cells.
    """

    by: Literal["domain", "gap", "length_hours"]
    cells: dict[Stratum, Estimate | None]
    macro: float


@dataclass(frozen=True)
class MetricTable:
    """One metric for one run: the micro value over every unit and its three breakdowns."""

    name: str
    unit: Literal["judgment", "pair"]
    micro: Estimate
    by_domain: Breakdown
    by_gap: Breakdown
    by_length: Breakdown


def _breakdown(
    metric: _Metric,
    units_of: Callable[[Stratum], list[_Unit]],
    keys: Iterable[Stratum],
    by: Literal["domain", "gap", "length_hours"],
) -> Breakdown:
    cells: dict[Stratum, Estimate | None] = {}
    for key in sorted(set(keys), key=lambda k: (str(type(k)), k)):
        units = units_of(key)
        cells[key] = _estimate(units, metric.shift) if units else None
    defined = [cell.value for cell in cells.values() if cell is not None]
    return Breakdown(by=by, cells=cells, macro=math.fsum(defined) / len(defined))


def _table(metric: _Metric, items: Sequence[Judgment]) -> MetricTable:
    units = _metric_units(metric, items)

    def breakdown(by: Literal["domain", "gap", "length_hours"]) -> Breakdown:
        # Every stratum the run judged gets a cell, also one where this metric has no unit.
        return _breakdown(
            metric,
            lambda k: [u for u in units if getattr(u, by) == k],
            (getattr(j, by) for j in items),
            by,
        )

    return MetricTable(
        name=metric.name,
        unit=metric.level,
        micro=_estimate(units, metric.shift),
        by_domain=breakdown("domain"),
        by_gap=breakdown("gap"),
        by_length=breakdown("length_hours"),
    )


def metric_table(name: str, judgments: Iterable[Judgment]) -> MetricTable:
    """One metric of one run, micro and per domain, gap and length (``name`` from ``METRICS``)."""
    if name not in METRICS:
        raise JudgingError(f"unknown metric {name!r}; expected one of {tuple(METRICS)!r}")
    return _table(METRICS[name], _one_run(judgments, name))


@dataclass(frozen=True)
class JudgeMetrics:
    """Every metric of one run (one judge under one condition), ready for a report.

    ``tables`` maps each metric name (in ``METRICS`` order) to its :class:`MetricTable`, or to
    ``None`` when it is undefined for the whole run (no decisive verdict, or no complete pair).
    """

    judge: str
    condition: str
    judgments: int
    pairs: int
    incomplete_pairs: int
    ties: int
    unparseable: int
    tables: dict[str, MetricTable | None]


def judge_metrics(judgments: Iterable[Judgment]) -> JudgeMetrics:
    """All metrics of one run, each micro and per domain, gap and length with N per cell.

    Raises :class:`JudgingError` for no judgments, judgments of several runs, or clashing records.
    """
    items = _one_run(judgments, "judge_metrics")
    pairs, incomplete = _pairs(items)
    tables: dict[str, MetricTable | None] = {}
    for name, metric in METRICS.items():
        try:
            tables[name] = _table(metric, items)
        except JudgingError:
            # Only an undefined metric lands here: the records were checked by _pairs above.
            tables[name] = None
    return JudgeMetrics(
        judge=items[0].judge,
        condition=items[0].condition,
        judgments=len(items),
        pairs=len(pairs),
        incomplete_pairs=incomplete,
        ties=sum(1 for j in items if j.picked == "tie"),
        unparseable=sum(1 for j in items if j.picked is None),
        tables=tables,
    )


# --- paired test -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedTest:
    """Run A against run B on the pairs both judged in both orders.

    ``difference`` is the mean over pairs of A's swap-averaged accuracy minus B's, with its plain
    and playlist-clustered SE; ``z`` is ``difference / clustered_se`` and ``p`` its two-sided
    normal p-value (both ``None`` when the clustered SE is undefined or zero). ``a_only`` and
    ``b_only`` count the pairs consistently correct under one run and not the other; ``sign_p`` is
    the exact McNemar (sign) test on them. ``only_in_a``/``only_in_b`` count complete pairs the
    other run lacks, which the test leaves out.
    """

    a: tuple[str, str]
    b: tuple[str, str]
    pairs: int
    difference: Estimate
    z: float | None
    p: float | None
    a_only: int
    b_only: int
    sign_p: float
    only_in_a: int
    only_in_b: int


def paired_test(a: Iterable[Judgment], b: Iterable[Judgment]) -> PairedTest:
    """Compare two runs (say retrieved against uniform frames) on the same pairs.

    Pairs match on ``(pair_id, length_hours)``; both runs must place a shared pair in the same
    playlist. Raises :class:`JudgingError` when the runs share no complete pair.
    """
    items_a, items_b = _one_run(a, "paired_test (run A)"), _one_run(b, "paired_test (run B)")
    pairs_a = {(p.pair_id, p.length_hours): p for p in _pairs(items_a)[0]}
    pairs_b = {(p.pair_id, p.length_hours): p for p in _pairs(items_b)[0]}
    shared = [key for key in pairs_a if key in pairs_b]
    if not shared:
        raise JudgingError(
            f"paired_test needs pairs both runs judged in both orders; A has {len(pairs_a)!r} "
            f"complete pairs, B has {len(pairs_b)!r}, none shared"
        )
    differences: list[float] = []
    clusters: list[str] = []
    a_only = b_only = 0
    for key in shared:
        pa, pb = pairs_a[key], pairs_b[key]
        if pa.playlist_id != pb.playlist_id:
            raise JudgingError(
                f"pair {key[0]!r} at {key[1]!r} h is in playlist {pa.playlist_id!r} in run A "
                f"and {pb.playlist_id!r} in run B; a paired test needs the same pairs"
            )
        differences.append(pa.swap_averaged - pb.swap_averaged)
        clusters.append(pa.playlist_id)
        if pa.consistent_correct != pb.consistent_correct:
            if pa.consistent_correct:
                a_only += 1
            else:
                b_only += 1
    difference = mean_estimate(differences, clusters)
    z = p = None
    if difference.clustered_se:
        z = difference.value / difference.clustered_se
        p = two_sided_normal_p(z)
    return PairedTest(
        a=(items_a[0].judge, items_a[0].condition),
        b=(items_b[0].judge, items_b[0].condition),
        pairs=len(shared),
        difference=difference,
        z=z,
        p=p,
        a_only=a_only,
        b_only=b_only,
        sign_p=sign_test_p(a_only, b_only),
        only_in_a=len(pairs_a) - len(shared),
        only_in_b=len(pairs_b) - len(shared),
    )
