"""Metrics for judges evaluated on preference pairs: accuracy, swap consistency, bias, retrieval.

A pairwise judge sees one pair twice, once with the preferred answer first (``"chosen_first"``)
and once with it second (``"rejected_first"``). Each :class:`Judgment` records which *position* it
picked (``"first"``, ``"second"``, ``"tie"``, or ``None`` when the verdict could not be parsed).
From those this module computes, for one run (one judge under one condition):

* per judgment: accuracy (a tie or an unparseable verdict counts 0.5), strict accuracy (they count
  0), answered-only accuracy (they are left out) and position bias (share of decisive verdicts
  that pick the first position, minus 0.5);
* per pair (both orders present): swap-averaged accuracy, consistent accuracy (1 only if both
  orders pick the preferred answer) and position consistency (the two verdicts name the same
  answer, or both say tie, across the swap);
* each overall (micro) and per domain, rating gap and playlist length, with the macro mean of the
  per-stratum values and N per cell (:func:`judge_metrics`);
* standard errors clustered by playlist beside the plain ones (:func:`mean_estimate`);
* a paired test between two runs on the same pairs (:func:`paired_test`);
* retrieval: temporal IoU, recall@k of the gold evidence at tIoU thresholds, evidence coverage and
  mean best IoU (:func:`retrieval_metrics`).

It also holds the two records every reader of an evaluation shares: the :class:`Condition` a judge
was shown (one :meth:`Condition.label` names it everywhere) and the :class:`JudgmentRecord`, one
line of ``judgments.jsonl``, which evaluation writes and the report reads back with a strict parse.

A pair is keyed by ``(pair_id, length_hours)``: one run may judge the same pair inside haystacks of
several lengths, and each is its own unit. Pure functions over plain data; no I/O, stdlib only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from store.errors import ConfigError, PlaylistEvalError
from store.modality import Modality

Order: TypeAlias = Literal["chosen_first", "rejected_first"]
Picked: TypeAlias = Literal["first", "second", "tie"] | None
Verdict: TypeAlias = Literal["A", "B", "tie"] | None
FrameSampling: TypeAlias = Literal["uniform", "retrieved"]
ORDERS: tuple[Order, Order] = ("chosen_first", "rejected_first")
PICKS: tuple[Picked, ...] = ("first", "second", "tie", None)
PICKED_BY_VERDICT: dict[str, Picked] = {"A": "first", "B": "second", "tie": "tie"}
"""The position a judge's verdict (answer ``A`` shown first, ``B`` second, or ``tie``) picks."""
DEFAULT_RESOLUTION = 360
"""Clip height in pixels when a condition names none; a label leaves it out."""
CONDITION_FIELDS: tuple[str, ...] = (
    "frames",
    "retriever",
    "modality",
    "hours",
    "n_frames",
    "thinking_budget",
    "resolution",
)
IOU_THRESHOLDS: tuple[float, float, float] = (0.3, 0.5, 0.7)
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)

PairKey: TypeAlias = tuple[str, float]
"""``(pair_id, length_hours)``: a pair as judged inside one haystack length."""


class JudgingError(PlaylistEvalError, ValueError):
    """The judgments cannot give the asked-for metric (empty, mixed runs, clashing records)."""


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgment:
    """One verdict of one judge under one condition on one pair in one answer order.

    ``picked`` is the position the verdict chose (``"first"``, ``"second"``, ``"tie"``) or
    ``None`` when the output could not be parsed. ``domain``, ``gap`` (rating steps between the
    answers), ``length_hours`` (the haystack) and ``playlist_id`` are the pair's strata and cluster.
    """

    pair_id: str
    judge: str
    condition: str
    order: Order
    picked: Picked
    domain: str
    gap: int
    length_hours: float
    playlist_id: str

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has order {self.order!r}; "
                f"expected one of {ORDERS!r}"
            )
        if self.picked not in PICKS:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} picked {self.picked!r}; expected one of "
                f"{PICKS!r} (None for an unparseable verdict)"
            )

    @property
    def correct(self) -> bool:
        """True when the verdict picks the preferred answer (a tie or unparseable one does not)."""
        preferred = "first" if self.order == "chosen_first" else "second"
        return self.picked == preferred

    @property
    def answered(self) -> bool:
        """True when the verdict picks a position (neither a tie nor unparseable)."""
        return self.picked in ("first", "second")

    @property
    def answer(self) -> Literal["chosen", "rejected", "tie"] | None:
        """The answer the verdict names, independent of the order it was shown in."""
        if self.picked == "tie":
            return "tie"
        if self.picked is None:
            return None
        return "chosen" if self.correct else "rejected"

    @property
    def key(self) -> PairKey:
        """The pair this judgment belongs to: ``(pair_id, length_hours)``."""
        return (self.pair_id, self.length_hours)


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


# --- standard errors -------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A mean over ``n`` units from ``clusters`` playlists, with a plain and a clustered SE.

    ``se`` is the sample standard deviation over ``sqrt(n)`` (``None`` when ``n < 2``);
    ``clustered_se`` is the cluster-robust SE of the mean by playlist (``None`` when fewer than two
    playlists). With one unit per playlist the two coincide.
    """

    value: float
    n: int
    clusters: int
    se: float | None
    clustered_se: float | None


def plain_se(values: Sequence[float]) -> float | None:
    """``sqrt(sum (x - mean)**2 / (n - 1)) / sqrt(n)``; ``None`` for fewer than two values."""
    n = len(values)
    if n == 0:
        raise JudgingError("a standard error needs at least one value, got none")
    if n < 2:
        return None
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1) / n)


def clustered_se(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Cluster-robust SE of the mean: ``sqrt(G/(G-1) * sum_g (sum_{i in g} (x_i - mean))**2) / n``.

    ``clusters[i]`` names the cluster (playlist) of ``values[i]``; ``G`` is the number of distinct
    clusters. ``None`` when ``G < 2`` (one cluster carries no information about its own spread).
    """
    if len(values) != len(clusters):
        raise JudgingError(
            f"each value needs its cluster, got {len(values)!r} values and {len(clusters)!r} "
            "cluster labels"
        )
    n = len(values)
    if n == 0:
        raise JudgingError("a standard error needs at least one value, got none")
    mean = math.fsum(values) / n
    sums: dict[Hashable, list[float]] = {}
    for x, g in zip(values, clusters, strict=True):
        sums.setdefault(g, []).append(x - mean)
    groups = len(sums)
    if groups < 2:
        return None
    total = math.fsum(math.fsum(residuals) ** 2 for residuals in sums.values())
    return math.sqrt(groups / (groups - 1) * total) / n


def mean_estimate(values: Sequence[float], clusters: Sequence[Hashable]) -> Estimate:
    """The mean of ``values`` with its plain and playlist-clustered standard errors.

    Raises :class:`JudgingError` when ``values`` is empty or the lengths differ.
    """
    if not values:
        raise JudgingError("a mean needs at least one value, got none")
    return Estimate(
        value=math.fsum(values) / len(values),
        n=len(values),
        clusters=len(set(clusters)),
        se=plain_se(values),
        clustered_se=clustered_se(values, clusters),
    )


def normal_cdf(x: float) -> float:
    """The standard normal CDF, ``(1 + erf(x / sqrt 2)) / 2``."""
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def two_sided_normal_p(z: float) -> float:
    """``P(|Z| >= |z|)`` for a standard normal ``Z``, via ``erfc`` to keep small p exact."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided sign (McNemar) test: ``min(1, 2 * P(X <= min(b, c)))``, X ~ Bin(b+c, 1/2).

    ``wins`` and ``losses`` are the two discordant counts; with none at all the p-value is 1.
    """
    if wins < 0 or losses < 0:
        raise JudgingError(f"discordant counts must be >= 0, got {wins!r} and {losses!r}")
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
    return min(1.0, 2 * tail / (1 << n))


# --- grouping --------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class _Metric:
    name: str
    level: Literal["judgment", "pair"]
    units: Callable[[Sequence[Judgment], Sequence[JudgedPair]], list[_Unit]]
    shift: float = 0.0  # position bias reports the share of "first" minus 0.5
    empty: str = "no judgments"


METRICS: dict[str, _Metric] = {
    m.name: m
    for m in (
        _Metric("accuracy", "judgment", lambda js, _: _accuracy_units(js)),
        _Metric("strict_accuracy", "judgment", lambda js, _: _strict_units(js)),
        _Metric(
            "answered_accuracy",
            "judgment",
            lambda js, _: _answered_units(js),
            empty="every verdict is a tie or unparseable",
        ),
        _Metric("swap_averaged_accuracy", "pair", lambda _, ps: _swap_units(ps)),
        _Metric("consistent_accuracy", "pair", lambda _, ps: _consistent_units(ps)),
        _Metric("position_consistency", "pair", lambda _, ps: _position_units(ps)),
        _Metric(
            "position_bias",
            "judgment",
            lambda js, _: _first_units(js),
            shift=-0.5,
            empty="every verdict is a tie or unparseable",
        ),
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
    pairs: list[JudgedPair] = []
    if metric.level == "pair":
        pairs, incomplete = _pairs(items)
        if not pairs:
            raise JudgingError(
                f"{metric.name} needs pairs judged in both orders; all {incomplete!r} pairs lack "
                "one order"
            )
    units = metric.units(items, pairs)
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


# --- retrieval -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A time span ``[start, end)`` in seconds inside one video (``video_id``).

    Spans in different videos never overlap; pass one ``video_id`` for all spans (the default)
    when times are offsets into the whole haystack.
    """

    start: float
    end: float
    video_id: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start) and math.isfinite(self.end)):
            raise JudgingError(f"span bounds must be finite, got {self.start!r}..{self.end!r}")
        if self.end <= self.start:
            raise JudgingError(
                f"a span must end after it starts, got {self.start!r}..{self.end!r} in "
                f"{self.video_id!r}"
            )

    @property
    def seconds(self) -> float:
        """The span's length in seconds."""
        return self.end - self.start


def temporal_iou(a: Span, b: Span) -> float:
    """Intersection over union of two spans' time (0 for disjoint, touching or other-video)."""
    if a.video_id != b.video_id:
        return 0.0
    intersection = max(0.0, min(a.end, b.end) - max(a.start, b.start))
    union = a.seconds + b.seconds - intersection
    return intersection / union


def _union_seconds(spans: Iterable[Span]) -> dict[str, list[tuple[float, float]]]:
    """Merge spans per video into disjoint, sorted intervals."""
    merged: dict[str, list[tuple[float, float]]] = {}
    for span in sorted(spans, key=lambda s: (s.video_id, s.start, s.end)):
        intervals = merged.setdefault(span.video_id, [])
        if intervals and span.start <= intervals[-1][1]:
            intervals[-1] = (intervals[-1][0], max(intervals[-1][1], span.end))
        else:
            intervals.append((span.start, span.end))
    return merged


def evidence_coverage(gold: Sequence[Span], retrieved: Sequence[Span]) -> float:
    """Share of the gold spans' seconds (their union) covered by the union of retrieved spans."""
    if not gold:
        raise JudgingError("evidence coverage needs at least one gold span, got none")
    gold_union, got = _union_seconds(gold), _union_seconds(retrieved)
    total = covered = 0.0
    for video, intervals in gold_union.items():
        for start, end in intervals:
            total += end - start
            for r_start, r_end in got.get(video, []):
                covered += max(0.0, min(end, r_end) - max(start, r_start))
    return covered / total


def recall_at_k(gold: Sequence[Span], ranked: Sequence[Span], k: int, threshold: float) -> float:
    """Share of gold spans matched (tIoU >= ``threshold``) by any of the top ``k`` retrieved."""
    if not gold:
        raise JudgingError("recall needs at least one gold span, got none")
    if k < 1:
        raise JudgingError(f"recall@k needs k >= 1, got k={k!r}")
    top = ranked[:k]
    matched = sum(1 for g in gold if any(temporal_iou(g, r) >= threshold for r in top))
    return matched / len(gold)


def best_iou(gold: Sequence[Span], retrieved: Sequence[Span]) -> float:
    """Mean over gold spans of the best tIoU any retrieved span reaches (0 with none retrieved)."""
    if not gold:
        raise JudgingError("best IoU needs at least one gold span, got none")
    return math.fsum(max((temporal_iou(g, r) for r in retrieved), default=0.0) for g in gold) / len(
        gold
    )


@dataclass(frozen=True)
class RetrievalCase:
    """One query's gold evidence (a pair's two segments) and the retriever's ranked spans."""

    pair_id: str
    playlist_id: str
    gold: tuple[Span, ...]
    retrieved: tuple[Span, ...]


@dataclass(frozen=True)
class RetrievalMetrics:
    """Retriever quality over ``cases`` queries, each a mean over queries clustered by playlist.

    ``recall[(k, threshold)]`` is recall@k at that tIoU; ``coverage`` and ``mean_best_iou`` use
    every retrieved span of a case.
    """

    cases: int
    recall: dict[tuple[int, float], Estimate]
    coverage: Estimate
    mean_best_iou: Estimate


def retrieval_metrics(
    cases: Iterable[RetrievalCase],
    ks: Sequence[int] = DEFAULT_KS,
    thresholds: Sequence[float] = IOU_THRESHOLDS,
) -> RetrievalMetrics:
    """Recall@k at each tIoU threshold, evidence coverage and mean best IoU over the cases.

    Raises :class:`JudgingError` for no cases or a case without gold spans.
    """
    items = list(cases)
    if not items:
        raise JudgingError("retrieval_metrics needs at least one case, got none")
    for case in items:
        if not case.gold:
            raise JudgingError(f"retrieval case {case.pair_id!r} has no gold spans")
    clusters = [case.playlist_id for case in items]
    recall = {
        (k, t): mean_estimate([recall_at_k(c.gold, c.retrieved, k, t) for c in items], clusters)
        for k in ks
        for t in thresholds
    }
    return RetrievalMetrics(
        cases=len(items),
        recall=recall,
        coverage=mean_estimate([evidence_coverage(c.gold, c.retrieved) for c in items], clusters),
        mean_best_iou=mean_estimate([best_iou(c.gold, c.retrieved) for c in items], clusters),
    )


# --- conditions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """What a judge is shown: how frames are sampled, from where, which modalities, how much.

    ``hours`` is the haystack asked for; ``n_frames`` the frames spread over the haystack
    (uniform) or over the retrieved spans; ``resolution`` the clips' height in pixels;
    ``thinking_budget`` is recorded with each judgment (None: the provider's default). Raises
    :class:`store.errors.ConfigError` for a combination no evaluation can run.
    """

    frames: FrameSampling
    retriever: str | None
    modality: Modality
    hours: float
    n_frames: int
    thinking_budget: int | None = None
    resolution: int = DEFAULT_RESOLUTION

    def __post_init__(self) -> None:
        if self.frames not in get_args(FrameSampling):
            raise ConfigError(f"frame sampling {self.frames!r} is not uniform or retrieved")
        if self.modality not in get_args(Modality):
            raise ConfigError(f"modality {self.modality!r} is not one of {get_args(Modality)!r}")
        if (self.frames == "retrieved") != bool(self.retriever):
            raise ConfigError(
                f"a retriever goes with retrieved frames only (frames={self.frames!r}, "
                f"retriever={self.retriever!r})"
            )
        if not self.hours > 0 or self.n_frames < 0 or self.resolution <= 0:
            raise ConfigError(
                f"hours={self.hours!r} must be > 0, n_frames={self.n_frames!r} >= 0 and "
                f"resolution={self.resolution!r} > 0"
            )

    @property
    def shows_frames(self) -> bool:
        """Whether clips are attached (frames, or the audio of clips)."""
        return self.modality in ("frames+transcript", "frames", "audio") and self.n_frames > 0

    @property
    def shows_transcript(self) -> bool:
        """Whether the shown spans' transcripts go into the prompt."""
        return self.modality in ("frames+transcript", "transcript")

    def label(self, *without: str) -> str:
        """The condition's one name, e.g. ``retrieved-bm25-frames+transcript-1h-32f``.

        Fields named in ``without`` are left out (a chart's series differ only there). The
        retriever, a thinking budget and a resolution other than :data:`DEFAULT_RESOLUTION`
        (as ``720p``) appear only when set.
        """
        unknown = [name for name in without if name not in CONDITION_FIELDS]
        if unknown:
            raise JudgingError(
                f"unknown condition fields {unknown!r}; expected {CONDITION_FIELDS!r}"
            )
        parts: list[str] = []
        if "frames" not in without:
            parts.append(self.frames)
        if "retriever" not in without and self.retriever:
            parts.append(self.retriever)
        if "modality" not in without:
            parts.append(self.modality)
        if "hours" not in without:
            parts.append(f"{self.hours:g}h")
        if "n_frames" not in without:
            parts.append(f"{self.n_frames}f")
        if "thinking_budget" not in without and self.thinking_budget is not None:
            parts.append(f"think{self.thinking_budget}")
        if "resolution" not in without and self.resolution != DEFAULT_RESOLUTION:
            parts.append(f"{self.resolution}p")
        return "-".join(parts)

    @property
    def condition_id(self) -> str:
        """The condition's label with every field: the id its judgments are recorded under."""
        return self.label()

    def without(self, *names: str) -> tuple[tuple[str, Any], ...]:
        """The condition's fields except ``names``: conditions equal on it differ only there."""
        return tuple((name, getattr(self, name)) for name in CONDITION_FIELDS if name not in names)

    def to_json(self) -> dict[str, Any]:
        """The condition as each judgment record holds it."""
        return {name: getattr(self, name) for name in CONDITION_FIELDS}

    @classmethod
    def from_json(cls, raw: object) -> Condition:
        """The condition a judgment record holds; raises :class:`JudgingError` naming the fault.

        ``retriever`` and ``thinking_budget`` may be absent (none); the other fields must be there.
        """
        if not isinstance(raw, Mapping):
            raise JudgingError(f"condition must be an object, got {raw!r}")
        thinking = raw.get("thinking_budget")
        try:
            return cls(
                frames=_text(raw, "frames", "condition"),  # type: ignore[arg-type]  # checked
                retriever=_text(raw, "retriever", "condition", optional=True) or None,
                modality=_text(raw, "modality", "condition"),  # type: ignore[arg-type]  # checked
                hours=_number(raw, "hours", "condition"),
                n_frames=_integer(raw, "n_frames", "condition"),
                thinking_budget=None
                if thinking is None
                else _integer(raw, "thinking_budget", "condition"),
                resolution=_integer(raw, "resolution", "condition"),
            )
        except ConfigError as error:
            raise JudgingError(f"bad condition {dict(raw)!r}: {error}") from error


def parse_condition(text: str) -> Condition:
    """``frames:retriever:modality:hours:n_frames[:think=N][:res=N]`` → a :class:`Condition`.

    ``hours`` may end in ``h`` (``1h``, ``0.5``); the retriever is empty for uniform frames, e.g.
    ``retrieved:bm25:frames+transcript:1h:32`` or ``uniform::none:1h:32``. Raises
    :class:`store.errors.ConfigError` naming what is wrong.
    """
    parts = text.strip().split(":")
    if len(parts) < 5:
        raise ConfigError(
            f"condition {text!r} needs frames:retriever:modality:hours:n_frames, e.g. "
            "'retrieved:bm25:frames+transcript:1h:32' or 'uniform::none:1h:32'"
        )
    frames, retriever, modality, hours, n_frames = parts[:5]
    options: dict[str, int] = {}
    for extra in parts[5:]:
        name, _, value = extra.partition("=")
        if name not in ("think", "res") or not value.isdigit():
            raise ConfigError(f"condition {text!r}: unknown option {extra!r} (think=N or res=N)")
        options[name] = int(value)
    try:
        hours_value = float(hours.removesuffix("h"))
        frames_value = int(n_frames.removesuffix("f"))
    except ValueError as exc:
        raise ConfigError(f"condition {text!r}: hours and n_frames must be numbers") from exc
    if frames not in get_args(FrameSampling) or modality not in get_args(Modality):
        raise ConfigError(
            f"condition {text!r}: frames must be one of {get_args(FrameSampling)!r} and "
            f"modality one of {get_args(Modality)!r}"
        )
    return Condition(
        frames=frames,  # type: ignore[arg-type]  # checked just above
        retriever=retriever or None,
        modality=modality,  # type: ignore[arg-type]
        hours=hours_value,
        n_frames=frames_value,
        thinking_budget=options.get("think"),
        resolution=options.get("res", DEFAULT_RESOLUTION),
    )


# --- judgment records ------------------------------------------------------------------------


def _field(raw: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in raw:
        raise JudgingError(f"the {what} has no {key!r} field; was it written by `eval`?")
    return raw[key]


def _text(raw: Mapping[str, Any], key: str, what: str, *, optional: bool = False) -> str:
    """A string field ('' for an absent or null optional one)."""
    value = raw.get(key) if optional else _field(raw, key, what)
    if optional and value is None:
        return ""
    if not isinstance(value, str):
        raise JudgingError(f"the {what}'s {key!r} must be a string, got {value!r}")
    return value


def _integer(raw: Mapping[str, Any], key: str, what: str) -> int:
    value = _field(raw, key, what)
    if isinstance(value, bool) or not isinstance(value, int):
        raise JudgingError(f"the {what}'s {key!r} must be an integer, got {value!r}")
    return value


def _number(raw: Mapping[str, Any], key: str, what: str) -> float:
    value = _field(raw, key, what)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JudgingError(f"the {what}'s {key!r} must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class SpanRecord:
    """A span as a judgment record holds it; ``score`` is the retriever's (none for gold)."""

    video_id: str
    start_s: float
    end_s: float
    score: float | None = None

    @property
    def span(self) -> Span:
        """The span for the retrieval metrics (raises :class:`JudgingError` if it is empty)."""
        return Span(self.start_s, self.end_s, self.video_id)

    def to_json(self) -> dict[str, Any]:
        """The span as the record's JSON holds it (``score`` only when there is one)."""
        out: dict[str, Any] = {
            "video_id": self.video_id,
            "start_s": self.start_s,
            "end_s": self.end_s,
        }
        if self.score is not None:
            out["score"] = self.score
        return out

    @classmethod
    def from_json(cls, raw: object) -> SpanRecord:
        """A recorded span; ``video_id`` may be absent (one haystack-wide timeline)."""
        if not isinstance(raw, Mapping):
            raise JudgingError(f"a span must be an object, got {raw!r}")
        score = raw.get("score")
        return cls(
            video_id=_text(raw, "video_id", "span", optional=True),
            start_s=_number(raw, "start_s", "span"),
            end_s=_number(raw, "end_s", "span"),
            score=None if score is None else _number(raw, "score", "span"),
        )


def _span_records(raw: object, key: str) -> tuple[SpanRecord, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise JudgingError(f"{key!r} must be a list of spans, got {raw!r}")
    try:
        spans = tuple(SpanRecord.from_json(s) for s in raw)
        for span in spans:
            span.span  # noqa: B018  # an empty or reversed span is refused here, not in a metric
    except JudgingError as error:
        raise JudgingError(f"bad span in {key!r} {raw!r}: {error}") from error
    return spans


@dataclass(frozen=True)
class Shown:
    """What one judgment's judge was given, so anyone can check it against the condition:
    ``frames`` pictures (or frames of video) at ``frame_times`` (video id, seconds into it),
    ``resolution`` their height in pixels (None when no picture was shown),
    ``transcript_chars`` characters of transcript from the windows ``transcript_spans``, and
    ``audio_s`` seconds of sound from the windows ``audio_spans`` (records written before the
    spans were recorded read with none)."""

    frames: int = 0
    frame_times: tuple[tuple[str, float], ...] = ()
    resolution: int | None = None
    transcript_chars: int = 0
    audio_s: float = 0.0
    transcript_spans: tuple[SpanRecord, ...] = ()
    audio_spans: tuple[SpanRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """As ``judgments.jsonl`` holds it."""
        return {
            "frames": self.frames,
            "frame_times": [[video, t] for video, t in self.frame_times],
            "resolution": self.resolution,
            "transcript_chars": self.transcript_chars,
            "audio_s": self.audio_s,
            "transcript_spans": [s.to_json() for s in self.transcript_spans],
            "audio_spans": [s.to_json() for s in self.audio_spans],
        }

    @classmethod
    def from_json(cls, raw: object) -> Shown:
        """A recorded ``shown``; raises :class:`JudgingError` naming the faulty field."""
        if not isinstance(raw, Mapping):
            raise JudgingError(f"shown must be an object, got {raw!r}")
        times = raw.get("frame_times") or []
        if not isinstance(times, list) or not all(
            isinstance(t, list) and len(t) == 2 and isinstance(t[1], int | float) for t in times
        ):
            raise JudgingError(f"shown.frame_times must be [video id, seconds] pairs: {times!r}")
        resolution = raw.get("resolution")
        return cls(
            frames=_integer(raw, "frames", "shown"),
            frame_times=tuple((str(video), float(t)) for video, t in times),
            resolution=None if resolution is None else _integer(raw, "resolution", "shown"),
            transcript_chars=_integer(raw, "transcript_chars", "shown"),
            audio_s=_number(raw, "audio_s", "shown"),
            transcript_spans=_span_records(raw.get("transcript_spans"), "shown.transcript_spans"),
            audio_spans=_span_records(raw.get("audio_spans"), "shown.audio_spans"),
        )


@dataclass(frozen=True)
class JudgmentRecord:
    """One line of ``judgments.jsonl``: one judge's verdict on one pair in one answer order.

    Evaluation writes it (:meth:`to_json`) and the report reads it back (:meth:`from_json`,
    :meth:`from_line`). ``verdict`` is the judge's own answer (``A`` shown first, ``B`` second,
    ``tie``, or ``None`` when unparseable) and ``picked`` the position it names;
    ``retrieved_spans`` are the retriever's, best first as recorded; ``gold_spans`` the pair's
    evidence; ``length_hours`` the haystack built; ``call_key`` the recorded call's request key.
    """

    pair_id: str
    judge: str
    condition: Condition
    order: Order
    verdict: Verdict
    picked: Picked
    raw_output: str
    domain: str
    gap: int
    playlist_id: str
    length_hours: float
    seed: int = 0
    call_key: str = ""
    retrieved_spans: tuple[SpanRecord, ...] = ()
    gold_spans: tuple[SpanRecord, ...] = ()
    shown: Shown | None = None  # what the judge was given (None in records written before)

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has order {self.order!r}; "
                f"expected one of {ORDERS!r}"
            )
        if self.verdict is not None and self.verdict not in tuple(PICKED_BY_VERDICT):
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has verdict {self.verdict!r}; expected one "
                f"of {tuple(PICKED_BY_VERDICT)!r} or None"
            )
        expected = None if self.verdict is None else PICKED_BY_VERDICT[self.verdict]
        if self.picked != expected:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has verdict {self.verdict!r} but picked "
                f"{self.picked!r}; verdict {self.verdict!r} picks {expected!r}"
            )

    @property
    def condition_id(self) -> str:
        """The condition's label: the name the record is filed under."""
        return self.condition.label()

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(pair id, judge, condition id, order)``: one verdict per key in an evaluation."""
        return (self.pair_id, self.judge, self.condition_id, self.order)

    @property
    def judgment(self) -> Judgment:
        """The record as a :class:`Judgment` for the metrics (its condition: the condition id)."""
        return Judgment(
            pair_id=self.pair_id,
            judge=self.judge,
            condition=self.condition_id,
            order=self.order,
            picked=self.picked,
            domain=self.domain,
            gap=self.gap,
            length_hours=self.length_hours,
            playlist_id=self.playlist_id,
        )

    @property
    def gold(self) -> tuple[Span, ...]:
        """The pair's evidence spans."""
        return tuple(s.span for s in self.gold_spans)

    @property
    def ranked(self) -> tuple[Span, ...]:
        """The retrieved spans highest score first; equal scores keep their recorded order."""
        ordered = sorted(self.retrieved_spans, key=lambda s: -(s.score or 0.0))
        return tuple(s.span for s in ordered)

    def retrieval_case(self) -> RetrievalCase:
        """The record's gold evidence against its ranked retrieved spans."""
        return RetrievalCase(
            pair_id=self.pair_id,
            playlist_id=self.playlist_id,
            gold=self.gold,
            retrieved=self.ranked,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as one line of ``judgments.jsonl`` holds it."""
        return {
            "pair_id": self.pair_id,
            "judge": self.judge,
            "condition_id": self.condition_id,
            "condition": self.condition.to_json(),
            "order": self.order,
            "raw_output": self.raw_output,
            "verdict": self.verdict,
            "picked": self.picked,
            "retrieved_spans": [s.to_json() for s in self.retrieved_spans],
            "gold_spans": [s.to_json() for s in self.gold_spans],
            "seed": self.seed,
            "domain": self.domain,
            "gap": self.gap,
            "playlist_id": self.playlist_id,
            "length_hours": self.length_hours,
            "call_key": self.call_key,
            **({} if self.shown is None else {"shown": self.shown.to_json()}),
        }

    def to_line(self) -> str:
        """The record as one line of ``judgments.jsonl`` (keys sorted, no newline)."""
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, raw: object) -> JudgmentRecord:
        """Parse one record strictly; raises :class:`JudgingError` naming the faulty field.

        Records written before read the same: ``picked`` absent is an unparseable verdict,
        ``verdict`` absent is the one ``picked`` implies, and ``raw_output``, ``seed``,
        ``call_key`` and the span lists may be absent. ``condition_id`` must be the label of
        the record's condition.
        """
        if not isinstance(raw, Mapping):
            raise JudgingError(f"expected a JSON object, got {raw!r}")
        condition = Condition.from_json(_field(raw, "condition", "record"))
        condition_id = _text(raw, "condition_id", "record")
        if condition_id != condition.label():
            raise JudgingError(
                f"the record is filed under condition {condition_id!r} but its condition "
                f"{condition.to_json()!r} is labelled {condition.label()!r}; fix the record"
            )
        order, picked = _field(raw, "order", "record"), raw.get("picked")
        if order not in ORDERS or picked not in PICKS:
            raise JudgingError(
                f"order {order!r} / picked {picked!r}; expected one of {ORDERS!r} and {PICKS!r}"
            )
        verdict = raw["verdict"] if "verdict" in raw else _VERDICT_BY_PICKED[picked]
        seed = raw.get("seed")
        return cls(
            pair_id=_text(raw, "pair_id", "record"),
            judge=_text(raw, "judge", "record"),
            condition=condition,
            order=order,
            verdict=verdict,
            picked=picked,
            raw_output=_text(raw, "raw_output", "record", optional=True),
            domain=_text(raw, "domain", "record"),
            gap=_integer(raw, "gap", "record"),
            playlist_id=_text(raw, "playlist_id", "record"),
            length_hours=_number(raw, "length_hours", "record"),
            seed=0 if seed is None else _integer(raw, "seed", "record"),
            call_key=_text(raw, "call_key", "record", optional=True),
            retrieved_spans=_span_records(raw.get("retrieved_spans"), "retrieved_spans"),
            gold_spans=_span_records(raw.get("gold_spans"), "gold_spans"),
            shown=None if raw.get("shown") is None else Shown.from_json(raw["shown"]),
        )

    @classmethod
    def from_line(cls, line: str) -> JudgmentRecord:
        """Parse one ``judgments.jsonl`` line; raises :class:`JudgingError`, also for non-JSON."""
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as error:
            raise JudgingError(f"not JSON ({error}); fix or delete the line") from error
        return cls.from_json(raw)


_VERDICT_BY_PICKED: dict[Picked, Verdict] = {"first": "A", "second": "B", "tie": "tie", None: None}
