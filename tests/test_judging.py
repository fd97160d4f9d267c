"""Judge-evaluation metrics against tables computed by hand (arithmetic in the comments)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from statistics import NormalDist

import pytest

from policies.judging import (
    DEFAULT_RESOLUTION,
    METRICS,
    Condition,
    Estimate,
    JudgingError,
    Judgment,
    JudgmentRecord,
    Order,
    Picked,
    RetrievalCase,
    Shown,
    Span,
    SpanRecord,
    accuracy,
    answered_accuracy,
    best_iou,
    clustered_se,
    consistent_accuracy,
    evidence_coverage,
    judge_metrics,
    judged_pairs,
    mean_estimate,
    metric_table,
    normal_cdf,
    paired_test,
    parse_condition,
    plain_se,
    position_bias,
    position_consistency,
    recall_at_k,
    retrieval_metrics,
    sign_test_p,
    split_runs,
    strict_accuracy,
    swap_averaged_accuracy,
    temporal_iou,
    two_sided_normal_p,
)
from store.errors import ConfigError, PlaylistEvalError

CF: Order = "chosen_first"
RF: Order = "rejected_first"


def _j(
    pair: str,
    order: Order,
    picked: Picked,
    *,
    domain: str = "cooking",
    gap: int = 1,
    hours: float = 1.0,
    playlist: str = "P1",
    judge: str = "judge-a",
    condition: str = "uniform",
) -> Judgment:
    return Judgment(
        pair_id=pair,
        judge=judge,
        condition=condition,
        order=order,
        picked=picked,
        domain=domain,
        gap=gap,
        length_hours=hours,
        playlist_id=playlist,
    )


def _pair(
    pair: str,
    cf: Picked,
    rf: Picked,
    **strata: object,
) -> list[Judgment]:
    """Both orders of one pair: ``cf`` answered with the preferred answer first, ``rf`` second."""
    return [_j(pair, CF, cf, **strata), _j(pair, RF, rf, **strata)]  # type: ignore[arg-type]


def _assert_cell(cell: Estimate | None, value: float, n: int) -> None:
    assert cell is not None
    assert cell.value == pytest.approx(value)
    assert cell.n == n


# The hand table. "first" is correct under chosen_first, "second" under rejected_first.
#
# pair  domain   gap hours playlist  chosen_first rejected_first  half    strict  answers named
# p1    cooking  1   1     P1        first  ✓     second ✓        1, 1    1, 1    chosen, chosen
# p2    cooking  2   1     P1        first  ✓     first  ✗        1, 0    1, 0    chosen, rejected
# p3    travel   1   10    P2        tie          tie             .5, .5  0, 0    tie, tie
# p4    travel   2   10    P3        second ✗     None            0, .5   0, 0    rejected, None
# p5    travel   1   10    P3        first  ✓     second ✓        1, 1    1, 1    chosen, chosen
TABLE: list[Judgment] = [
    *_pair("p1", "first", "second", domain="cooking", gap=1, hours=1.0, playlist="P1"),
    *_pair("p2", "first", "first", domain="cooking", gap=2, hours=1.0, playlist="P1"),
    *_pair("p3", "tie", "tie", domain="travel", gap=1, hours=10.0, playlist="P2"),
    *_pair("p4", "second", None, domain="travel", gap=2, hours=10.0, playlist="P3"),
    *_pair("p5", "first", "second", domain="travel", gap=1, hours=10.0, playlist="P3"),
]


# --- the records -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("order", "picked", "correct", "answer"),
    [
        (CF, "first", True, "chosen"),
        (CF, "second", False, "rejected"),
        (RF, "first", False, "rejected"),
        (RF, "second", True, "chosen"),
        (CF, "tie", False, "tie"),
        (RF, None, False, None),
    ],
)
def test_a_verdict_is_correct_when_it_picks_the_preferred_answers_position(
    order: Order, picked: Picked, correct: bool, answer: str | None
) -> None:
    judgment = _j("p", order, picked)
    assert judgment.correct is correct
    assert judgment.answer == answer
    assert judgment.answered is (picked in ("first", "second"))


@pytest.mark.parametrize(
    ("field", "value"), [("order", "first_chosen"), ("picked", "A"), ("picked", "")]
)
def test_a_judgment_with_an_unknown_order_or_pick_is_refused(field: str, value: str) -> None:
    kwargs: dict[str, object] = {"order": CF, "picked": "first"}
    kwargs[field] = value
    with pytest.raises(JudgingError, match=repr(value)):
        _j("p", **kwargs)  # type: ignore[arg-type]


# --- single metrics on the hand table --------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "value", "n", "clusters"),
    [
        # Half-scores 1+1 + 1+0 + .5+.5 + 0+.5 + 1+1 = 6.5 over 10 verdicts.
        (accuracy, 0.65, 10, 3),
        # Correct: p1 twice, p2 once, p5 twice = 5 over 10; the ties and the None count 0.
        (strict_accuracy, 0.5, 10, 3),
        # Decisive: p1 (2), p2 (2), p4's first (1), p5 (2) = 7, of which 2+1+0+2 = 5 correct.
        (answered_accuracy, 5 / 7, 7, 2),  # P2 holds only ties
        # Per pair: p1 1, p2 .5, p3 .5, p4 .25, p5 1 → 3.25 / 5.
        (swap_averaged_accuracy, 0.65, 5, 3),
        # Both orders correct: p1 and p5 → 2 / 5.
        (consistent_accuracy, 0.4, 5, 3),
        # Same answer named: p1 (chosen, chosen), p3 (tie, tie), p5 (chosen, chosen) → 3 / 5.
        (position_consistency, 0.6, 5, 3),
        # Decisive picking "first": p1 1, p2 2, p4 0, p5 1 = 4 of 7 → 4/7 − 1/2 = 1/14.
        (position_bias, 1 / 14, 7, 2),
    ],
)
def test_each_metric_matches_the_hand_table(
    metric: object, value: float, n: int, clusters: int
) -> None:
    estimate = metric(TABLE)  # type: ignore[operator]
    assert estimate.value == pytest.approx(value)
    assert estimate.n == n
    assert estimate.clusters == clusters


def test_accuracy_standard_errors_match_the_hand_computation() -> None:
    estimate = accuracy(TABLE)
    # Clusters P1: 1,1,1,0   P2: .5,.5   P3: 0,.5,1,1; mean .65.
    # Residual sums: P1 .35*3 − .65 = .4; P2 −.15*2 = −.3; P3 −.65 − .15 + .35*2 = −.1.
    # sqrt(3/2 * (.16 + .09 + .01)) / 10 = sqrt(.39) / 10.
    assert estimate.clustered_se == pytest.approx(math.sqrt(0.39) / 10)
    # Squared deviations: five 1s .1225*5 = .6125; two 0s .4225*2 = .845; three .5s .0225*3 =
    # .0675; total 1.525; sqrt(1.525 / 9 / 10).
    assert estimate.se == pytest.approx(math.sqrt(1.525 / 9 / 10))


def test_position_bias_shifts_the_value_but_not_its_standard_error() -> None:
    bias = position_bias(TABLE)
    # Indicators of "first" over the 7 decisive verdicts: 1,0,1,1,0,1,0 (p1, p2, p4, p5).
    share = mean_estimate([1, 0, 1, 1, 0, 1, 0], ["P1", "P1", "P1", "P1", "P3", "P3", "P3"])
    assert bias.value == pytest.approx(share.value - 0.5)
    assert bias.se == pytest.approx(share.se)
    assert bias.clustered_se == pytest.approx(share.clustered_se)


# --- strata ----------------------------------------------------------------------------------


def test_accuracy_per_domain_gap_and_length_with_micro_macro_and_n() -> None:
    table = metric_table("accuracy", TABLE)
    assert table.unit == "judgment"
    assert table.micro.value == pytest.approx(0.65)
    domain = table.by_domain
    assert list(domain.cells) == ["cooking", "travel"]
    cooking, travel = domain.cells["cooking"], domain.cells["travel"]
    # cooking: p1, p2 → 1+1+1+0 = 3 / 4; travel: p3, p4, p5 → .5+.5+0+.5+1+1 = 3.5 / 6.
    _assert_cell(cooking, 0.75, 4)
    _assert_cell(travel, 3.5 / 6, 6)
    # Macro: (3/4 + 7/12) / 2 = 2/3, not the micro .65.
    assert domain.macro == pytest.approx(2 / 3)
    gap = table.by_gap
    assert list(gap.cells) == [1, 2]
    gap1, gap2 = gap.cells[1], gap.cells[2]
    # gap 1: p1, p3, p5 → 1+1+.5+.5+1+1 = 5 / 6; gap 2: p2, p4 → 1+0+0+.5 = 1.5 / 4.
    _assert_cell(gap1, 5 / 6, 6)
    _assert_cell(gap2, 0.375, 4)
    assert gap.macro == pytest.approx((5 / 6 + 3 / 8) / 2)  # 29/48
    length = table.by_length
    assert list(length.cells) == [1.0, 10.0]
    assert [c.n for c in length.cells.values() if c is not None] == [4, 6]
    assert length.macro == pytest.approx(2 / 3)


def test_pair_metrics_are_stratified_over_pairs() -> None:
    table = metric_table("consistent_accuracy", TABLE)
    assert table.unit == "pair"
    cells = table.by_domain.cells
    cooking, travel = cells["cooking"], cells["travel"]
    # cooking: p1 ✓ p2 ✗ → 1/2 over 2 pairs; travel: p3 ✗ p4 ✗ p5 ✓ → 1/3 over 3 pairs.
    _assert_cell(cooking, 0.5, 2)
    _assert_cell(travel, 1 / 3, 3)
    assert table.by_domain.macro == pytest.approx((1 / 2 + 1 / 3) / 2)  # 5/12
    assert table.micro.value == pytest.approx(0.4)


def test_position_bias_per_gap() -> None:
    cells = metric_table("position_bias", TABLE).by_gap.cells
    gap1, gap2 = cells[1], cells[2]
    # gap 1 decisive: p1 (first, second), p5 (first, second) → 2/4 − 1/2 = 0 (p3 only ties).
    _assert_cell(gap1, 0.0, 4)
    # gap 2 decisive: p2 (first, first), p4 (second) → 2/3 − 1/2 = 1/6.
    _assert_cell(gap2, 1 / 6, 3)


def test_a_stratum_where_a_metric_is_undefined_gets_an_empty_cell_and_no_macro_weight() -> None:
    run = [
        *_pair("q1", "first", "second", domain="cooking"),  # answered 2, correct 2 → 1.0
        *_pair("q2", "first", "first", domain="travel"),  # answered 2, correct 1 → 0.5
        *_pair("q3", "tie", None, domain="music"),  # nothing decisive
    ]
    table = metric_table("answered_accuracy", run)
    assert table.by_domain.cells["music"] is None
    assert set(table.by_domain.cells) == {"cooking", "music", "travel"}
    # Macro over the two defined cells: (1 + .5) / 2; micro: 3 correct of 4 decisive.
    assert table.by_domain.macro == pytest.approx(0.75)
    assert table.micro.value == pytest.approx(0.75)


def test_judge_metrics_gathers_every_metric_and_the_counts() -> None:
    report = judge_metrics([*TABLE, _j("p6", CF, "first", playlist="P2")])
    assert (report.judge, report.condition) == ("judge-a", "uniform")
    assert report.judgments == 11
    # p6 lacks its rejected_first verdict: it counts for judgment metrics, not for pair ones.
    assert (report.pairs, report.incomplete_pairs) == (5, 1)
    assert (report.ties, report.unparseable) == (2, 1)
    assert list(report.tables) == list(METRICS)
    accuracy_table = report.tables["accuracy"]
    swap_table = report.tables["swap_averaged_accuracy"]
    assert accuracy_table is not None
    assert swap_table is not None
    # Accuracy gains p6's correct verdict: 7.5 / 11. Swap-averaged stays 3.25 / 5.
    assert accuracy_table.micro.value == pytest.approx(7.5 / 11)
    assert swap_table.micro.value == pytest.approx(0.65)


def test_judge_metrics_leaves_undefined_metrics_empty_when_every_verdict_ties() -> None:
    run = [*_pair("t1", "tie", "tie"), *_pair("t2", "tie", None, playlist="P2")]
    tables = judge_metrics(run).tables
    assert tables["answered_accuracy"] is None
    assert tables["position_bias"] is None
    acc, consistency = tables["accuracy"], tables["position_consistency"]
    assert acc is not None
    assert consistency is not None
    assert acc.micro.value == pytest.approx(0.5)  # four half points
    assert consistency.micro.value == pytest.approx(0.5)  # t1 tie/tie; t2 has a None


def test_the_same_pair_at_two_haystack_lengths_is_two_units() -> None:
    run = [
        *_pair("p", "first", "second", hours=1.0),
        *_pair("p", "first", "first", hours=100.0),
    ]
    assert len(judged_pairs(run)) == 2
    # 1 h: both right → 1; 100 h: one right → .5; mean .75.
    assert swap_averaged_accuracy(run).value == pytest.approx(0.75)
    cells = metric_table("swap_averaged_accuracy", run).by_length.cells
    assert [c.value for c in cells.values() if c is not None] == [1.0, 0.5]


def test_two_unparseable_verdicts_do_not_count_as_surviving_the_swap() -> None:
    # u: None, None → not consistent; v: tie, tie → consistent (same verdict); 1 / 2.
    run = [*_pair("u", None, None), *_pair("v", "tie", "tie")]
    assert position_consistency(run).value == pytest.approx(0.5)
    assert swap_averaged_accuracy(run).value == pytest.approx(0.5)  # everything scores .5


# --- the always-first judge ------------------------------------------------------------------


def test_a_judge_that_always_picks_first_scores_chance_never_survives_a_swap_and_is_biased() -> (
    None
):
    run = [
        j
        for i in range(12)
        for j in _pair(f"a{i}", "first", "first", playlist=f"P{i % 3}", gap=1 + i % 4)
    ]
    assert accuracy(run).value == pytest.approx(0.5)
    assert strict_accuracy(run).value == pytest.approx(0.5)
    assert answered_accuracy(run).value == pytest.approx(0.5)
    assert swap_averaged_accuracy(run).value == pytest.approx(0.5)
    assert consistent_accuracy(run).value == 0.0
    consistency = position_consistency(run)
    assert consistency.value == 0.0
    assert consistency.se == 0.0
    assert position_bias(run).value == pytest.approx(0.5)
    # Every pair scores exactly .5 after the swap, so even per gap there is no spread.
    swap = metric_table("swap_averaged_accuracy", run)
    assert all(c is not None and c.value == 0.5 for c in swap.by_gap.cells.values())
    assert swap.micro.clustered_se == 0.0


# --- standard errors -------------------------------------------------------------------------


def test_clustered_standard_error_on_three_clusters_by_hand() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    clusters = ["a", "a", "a", "b", "b", "c"]
    # mean 4/6 = 2/3. Residual sums: a 1/3 − 2/3 + 1/3 = 0; b 1/3 + 1/3 = 2/3; c −2/3.
    # sqrt(3/2 * (0 + 4/9 + 4/9)) / 6 = sqrt(4/3) / 6.
    estimate = mean_estimate(values, clusters)
    assert estimate.value == pytest.approx(2 / 3)
    assert (estimate.n, estimate.clusters) == (6, 3)
    assert estimate.clustered_se == pytest.approx(math.sqrt(4 / 3) / 6)  # 0.19245
    # Plain: four 1s at (1/3)² and two 0s at (2/3)²: 4/9 + 8/9 = 4/3; sqrt(4/3 / 5 / 6).
    assert estimate.se == pytest.approx(math.sqrt(4 / 3 / 5 / 6))  # 0.21082


def test_one_unit_per_cluster_makes_the_clustered_se_the_plain_one() -> None:
    values = [0.0, 1.0, 0.5, 1.0, 0.25]
    # G/(G−1) · Σ r² / n² = Σ r² / ((n−1) n): the same expression as s² / n.
    assert clustered_se(values, ["a", "b", "c", "d", "e"]) == pytest.approx(plain_se(values))


def test_standard_errors_are_undefined_with_one_value_or_one_cluster() -> None:
    assert plain_se([1.0]) is None
    assert clustered_se([1.0, 0.0, 1.0], ["a", "a", "a"]) is None
    estimate = mean_estimate([1.0], ["a"])
    assert estimate == Estimate(value=1.0, n=1, clusters=1, se=None, clustered_se=None)


def test_clustered_se_refuses_values_without_their_clusters() -> None:
    with pytest.raises(JudgingError, match="2 values and 3 cluster labels"):
        clustered_se([1.0, 0.0], ["a", "b", "c"])


@pytest.mark.parametrize(
    ("x", "cdf"),
    [(0.0, 0.5), (1.959963984540054, 0.975), (-1.0, 0.15865525393145707), (3.0, 0.9986501)],
)
def test_normal_cdf_matches_the_tables(x: float, cdf: float) -> None:
    assert normal_cdf(x) == pytest.approx(cdf, abs=1e-7)
    assert normal_cdf(x) == pytest.approx(NormalDist().cdf(x), abs=1e-12)


@pytest.mark.parametrize(
    ("z", "p"),
    [(0.0, 1.0), (1.959963984540054, 0.05), (-1.959963984540054, 0.05), (10.0, 1.523970e-23)],
)
def test_two_sided_normal_p(z: float, p: float) -> None:
    assert two_sided_normal_p(z) == pytest.approx(p, rel=1e-6)


@pytest.mark.parametrize(
    ("wins", "losses", "p"),
    [
        (0, 0, 1.0),  # no discordant pair: no evidence either way
        (5, 0, 2 / 32),  # 2 · C(5,0) / 2^5
        (3, 1, 2 * (1 + 4) / 16),  # 2 · (C(4,0) + C(4,1)) / 2^4 = .625
        (2, 10, 2 * (1 + 12 + 66) / 4096),  # 2 · (C(12,0)+C(12,1)+C(12,2)) / 2^12 = .03857
        (3, 3, 1.0),  # 2 · 42/64 > 1, capped
    ],
)
def test_exact_sign_test(wins: int, losses: int, p: float) -> None:
    assert sign_test_p(wins, losses) == pytest.approx(p)


def test_sign_test_refuses_negative_counts() -> None:
    with pytest.raises(JudgingError, match="-1"):
        sign_test_p(-1, 3)


# --- paired test -----------------------------------------------------------------------------


def _run(condition: str, verdicts: Sequence[tuple[str, Picked, Picked, str]]) -> list[Judgment]:
    return [
        j
        for pair, cf, rf, playlist in verdicts
        for j in _pair(pair, cf, rf, playlist=playlist, condition=condition)
    ]


def test_paired_test_on_a_hand_example() -> None:
    # pair playlist  A (cf, rf)        A swap  A both  B (cf, rf)       B swap  B both  A − B
    # p1   Q1        first, second     1       ✓       first, first     .5      ✗       .5
    # p2   Q1        first, second     1       ✓       second, first    0       ✗       1
    # p3   Q2        first, first      .5      ✗       first, second    1       ✓       −.5
    # p4   Q3        first, second     1       ✓       tie, second      .75     ✗       .25
    a = _run(
        "retrieved",
        [
            ("p1", "first", "second", "Q1"),
            ("p2", "first", "second", "Q1"),
            ("p3", "first", "first", "Q2"),
            ("p4", "first", "second", "Q3"),
        ],
    )
    b = _run(
        "uniform",
        [
            ("p1", "first", "first", "Q1"),
            ("p2", "second", "first", "Q1"),
            ("p3", "first", "second", "Q2"),
            ("p4", "tie", "second", "Q3"),
        ],
    )
    test = paired_test(a, b)
    assert (test.a, test.b) == (("judge-a", "retrieved"), ("judge-a", "uniform"))
    assert test.pairs == 4
    # Mean difference (.5 + 1 − .5 + .25) / 4 = .3125.
    assert test.difference.value == pytest.approx(0.3125)
    # Residual sums: Q1 .1875 + .6875 = .875; Q2 −.8125; Q3 −.0625.
    # sqrt(3/2 · (.765625 + .66015625 + .00390625)) / 4 = sqrt(2.14453125) / 4 = .366106.
    se = math.sqrt(1.5 * (0.875**2 + 0.8125**2 + 0.0625**2)) / 4
    assert test.difference.clustered_se == pytest.approx(se)
    assert test.difference.clustered_se == pytest.approx(0.366106, abs=1e-6)
    assert test.z == pytest.approx(0.3125 / se)  # 0.8536
    assert test.p == pytest.approx(2 * (1 - NormalDist().cdf(0.3125 / se)))  # 0.3933
    assert test.p == pytest.approx(0.39334, abs=1e-4)
    # Consistently correct: A on p1, p2, p4 and B not; B on p3 and A not → sign test 3 vs 1.
    assert (test.a_only, test.b_only) == (3, 1)
    assert test.sign_p == pytest.approx(0.625)
    assert (test.only_in_a, test.only_in_b) == (0, 0)


def test_paired_test_uses_only_pairs_both_runs_completed() -> None:
    a = _run("retrieved", [("p1", "first", "second", "Q1"), ("p2", "first", "second", "Q2")])
    b = _run("uniform", [("p1", "first", "first", "Q1"), ("p3", "first", "second", "Q3")])
    b.append(_j("p2", CF, "first", playlist="Q2", condition="uniform"))  # p2 half-judged in B
    test = paired_test(a, b)
    assert test.pairs == 1
    assert (test.only_in_a, test.only_in_b) == (1, 1)
    assert test.difference.value == pytest.approx(0.5)  # p1: 1 − .5
    # One pair, one playlist: no standard error, so no z and no p.
    assert (test.z, test.p) == (None, None)


def test_paired_test_refuses_runs_with_no_shared_pair_or_clashing_playlists() -> None:
    a = _run("retrieved", [("p1", "first", "second", "Q1")])
    with pytest.raises(JudgingError, match="none shared"):
        paired_test(a, _run("uniform", [("p9", "first", "second", "Q1")]))
    with pytest.raises(JudgingError, match="'Q1' in run A and 'Q2' in run B"):
        paired_test(a, _run("uniform", [("p1", "first", "second", "Q2")]))


# --- malformed and empty input ---------------------------------------------------------------


@pytest.mark.parametrize(
    "metric",
    [
        accuracy,
        strict_accuracy,
        answered_accuracy,
        swap_averaged_accuracy,
        consistent_accuracy,
        position_consistency,
        position_bias,
        judge_metrics,
        judged_pairs,
    ],
)
def test_empty_input_raises_a_clear_value_error(metric: object) -> None:
    with pytest.raises(ValueError, match="at least one judgment, got none") as caught:
        metric([])  # type: ignore[operator]
    assert isinstance(caught.value, PlaylistEvalError)


def test_other_empty_inputs_raise_value_errors() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        mean_estimate([], [])
    with pytest.raises(ValueError, match="at least one value"):
        plain_se([])
    with pytest.raises(ValueError, match="at least one judgment"):
        paired_test([], TABLE)
    with pytest.raises(ValueError, match="at least one case"):
        retrieval_metrics([])
    with pytest.raises(ValueError, match="at least one gold span"):
        recall_at_k([], [Span(0, 1)], 1, 0.5)
    with pytest.raises(ValueError, match="at least one gold span"):
        evidence_coverage([], [Span(0, 1)])
    with pytest.raises(ValueError, match="at least one gold span"):
        best_iou([], [])


def test_answered_accuracy_and_bias_are_undefined_when_nothing_is_decisive() -> None:
    run = [*_pair("t", "tie", None)]
    with pytest.raises(JudgingError, match="every verdict is a tie or unparseable"):
        answered_accuracy(run)
    with pytest.raises(JudgingError, match="every verdict is a tie or unparseable"):
        position_bias(run)


def test_pair_metrics_need_a_pair_judged_in_both_orders() -> None:
    run = [_j("p1", CF, "first"), _j("p2", RF, "second")]
    assert accuracy(run).value == 1.0
    with pytest.raises(JudgingError, match="all 2 pairs lack one order"):
        consistent_accuracy(run)


def test_metrics_refuse_judgments_of_several_runs_and_split_runs_groups_them() -> None:
    mixed = [*_pair("p1", "first", "second"), *_pair("p1", "first", "first", judge="judge-b")]
    with pytest.raises(JudgingError, match="group them with split_runs"):
        accuracy(mixed)
    runs = split_runs(mixed)
    assert list(runs) == [("judge-a", "uniform"), ("judge-b", "uniform")]
    assert accuracy(runs["judge-a", "uniform"]).value == 1.0
    assert accuracy(runs["judge-b", "uniform"]).value == 0.5


def test_two_verdicts_in_one_order_or_orders_that_disagree_on_the_pair_are_refused() -> None:
    twice = [_j("p1", CF, "first"), _j("p1", CF, "second"), _j("p1", RF, "second")]
    with pytest.raises(JudgingError, match="two 'chosen_first' judgments"):
        judge_metrics(twice)
    clash = [_j("p1", CF, "first", gap=1), _j("p1", RF, "second", gap=3)]
    with pytest.raises(JudgingError, match="both orders must describe the same pair"):
        swap_averaged_accuracy(clash)


def test_an_unknown_metric_name_is_refused() -> None:
    with pytest.raises(JudgingError, match="'f1'"):
        metric_table("f1", TABLE)


# --- retrieval -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "iou"),
    [
        (Span(0, 10), Span(0, 10), 1.0),  # identical
        (Span(0, 10), Span(10, 20), 0.0),  # touching: zero-length intersection
        (Span(0, 10), Span(20, 30), 0.0),  # disjoint
        (Span(0, 20), Span(5, 10), 0.25),  # nested: 5 / 20
        (Span(5, 10), Span(0, 20), 0.25),  # nested, either way round
        (Span(0, 10), Span(5, 15), 1 / 3),  # overlap 5, union 15
        (Span(0, 10, "v1"), Span(0, 10, "v2"), 0.0),  # same times, other video
    ],
)
def test_temporal_iou(a: Span, b: Span, iou: float) -> None:
    assert temporal_iou(a, b) == pytest.approx(iou)
    assert temporal_iou(b, a) == pytest.approx(iou)


@pytest.mark.parametrize(("start", "end"), [(5.0, 5.0), (6.0, 5.0), (0.0, math.nan)])
def test_an_empty_reversed_or_nan_span_is_refused(start: float, end: float) -> None:
    with pytest.raises(JudgingError, match="span"):
        Span(start, end)


# Gold G1 = 100–110, G2 = 300–320. Ranked retrieval and each span's IoU with the gold:
#   R1 105–115: G1 5/15 = .333        R2 500–510: 0
#   R3 300–316: G2 16/20 = .8         R4  98–110: G1 10/12 = .833
GOLD = (Span(100, 110), Span(300, 320))
RANKED = (Span(105, 115), Span(500, 510), Span(300, 316), Span(98, 110))


@pytest.mark.parametrize(
    ("k", "threshold", "recall"),
    [
        (1, 0.3, 0.5),  # R1 matches G1 at .333
        (1, 0.5, 0.0),
        (3, 0.3, 1.0),  # R1 → G1, R3 → G2
        (3, 0.5, 0.5),  # only R3 → G2
        (3, 0.7, 0.5),
        (4, 0.7, 1.0),  # R4 → G1 at .833
        (10, 0.9, 0.0),  # k beyond the list uses all of it
    ],
)
def test_recall_at_k(k: int, threshold: float, recall: float) -> None:
    assert recall_at_k(GOLD, RANKED, k, threshold) == pytest.approx(recall)


def test_recall_at_k_refuses_k_below_one() -> None:
    with pytest.raises(JudgingError, match="k=0"):
        recall_at_k(GOLD, RANKED, 0, 0.5)


def test_mean_best_iou_and_coverage_by_hand() -> None:
    # Best per gold span: G1 max(.333, .833) = .833; G2 .8 → (5/6 + 4/5) / 2.
    assert best_iou(GOLD, RANKED) == pytest.approx((5 / 6 + 0.8) / 2)
    assert best_iou(GOLD, []) == 0.0
    # Retrieved union: 98–115, 300–316, 500–510. Covered gold: G1 all 10 s, G2 16 of 20 → 26/30.
    assert evidence_coverage(GOLD, RANKED) == pytest.approx(26 / 30)


def test_coverage_counts_overlapping_retrieved_spans_once_and_respects_videos() -> None:
    gold = [Span(0, 10, "v1")]
    # 0–6 and 4–10 overlap on 4–6: the union is 0–10, coverage 1, not 1.2.
    assert evidence_coverage(gold, [Span(0, 6, "v1"), Span(4, 10, "v1")]) == pytest.approx(1.0)
    assert evidence_coverage(gold, [Span(0, 10, "v2")]) == 0.0
    # Overlapping gold spans are one stretch of evidence: 0–10 ∪ 5–15 = 15 s, 5 covered.
    assert evidence_coverage([Span(0, 10), Span(5, 15)], [Span(10, 15)]) == pytest.approx(1 / 3)


def test_retrieval_metrics_over_cases_clustered_by_playlist() -> None:
    miss = RetrievalCase("p2", "L2", gold=(Span(0, 10, "v2"),), retrieved=(Span(0, 10, "v1"),))
    hit = RetrievalCase("p1", "L1", gold=GOLD, retrieved=RANKED)
    metrics = retrieval_metrics([hit, miss], ks=(1, 3), thresholds=(0.3, 0.5))
    assert metrics.cases == 2
    assert set(metrics.recall) == {(1, 0.3), (1, 0.5), (3, 0.3), (3, 0.5)}
    # The miss scores 0 everywhere; the hit as in the table above.
    assert metrics.recall[1, 0.3].value == pytest.approx(0.25)  # (.5 + 0) / 2
    assert metrics.recall[3, 0.3].value == pytest.approx(0.5)  # (1 + 0) / 2
    assert metrics.recall[3, 0.5].value == pytest.approx(0.25)  # (.5 + 0) / 2
    assert metrics.coverage.value == pytest.approx(13 / 30)  # (26/30 + 0) / 2
    assert metrics.mean_best_iou.value == pytest.approx((5 / 6 + 0.8) / 4)
    # Two cases in two playlists: clustered = plain; values 1 and 0 → sqrt(.5 / 2) = .5.
    recall3 = metrics.recall[3, 0.3]
    assert recall3.clusters == 2
    assert recall3.se == pytest.approx(0.5)
    assert recall3.clustered_se == pytest.approx(0.5)


def test_retrieval_metrics_default_to_the_papers_thresholds_and_refuse_goldless_cases() -> None:
    metrics = retrieval_metrics([RetrievalCase("p1", "L1", gold=GOLD, retrieved=RANKED)])
    assert {t for _, t in metrics.recall} == {0.3, 0.5, 0.7}
    with pytest.raises(JudgingError, match="'p9' has no gold spans"):
        retrieval_metrics([RetrievalCase("p9", "L1", gold=(), retrieved=RANKED)])


# --- conditions and judgment records ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "without", "label"),
    [
        ("uniform::frames+transcript:1h:32", (), "uniform-frames+transcript-1h-32f"),
        ("uniform::frames+transcript:1h:32:res=360", (), "uniform-frames+transcript-1h-32f"),
        ("uniform::frames:10h:32:res=448", (), "uniform-frames-10h-32f-448p"),
        ("uniform::frames:10h:32:res=448", ("hours",), "uniform-frames-32f-448p"),
        ("retrieved:bm25:audio:0.5:8:think=0", ("frames", "retriever"), "audio-0.5h-8f-think0"),
        ("retrieved:bm25:frames:1h:32:res=720", ("modality",), "retrieved-bm25-1h-32f-720p"),
    ],
)
def test_a_condition_has_one_label_and_the_default_resolution_is_left_out(
    text: str, without: tuple[str, ...], label: str
) -> None:
    condition = parse_condition(text)
    assert condition.label(*without) == label
    assert condition.condition_id == condition.label()
    assert DEFAULT_RESOLUTION == 360


def test_conditions_equal_but_for_some_fields_share_their_without() -> None:
    one, ten = parse_condition("uniform::frames:1h:32"), parse_condition("uniform::frames:10h:32")
    assert one.without("hours") == ten.without("hours")
    assert one.without() != ten.without()
    with pytest.raises(JudgingError, match="unknown condition fields"):
        one.label("speed")


def test_a_condition_round_trips_through_its_json_and_a_bad_one_is_refused() -> None:
    condition = parse_condition("retrieved:hybrid:frames:2h:16:think=512:res=480")
    assert Condition.from_json(condition.to_json()) == condition
    with pytest.raises(ConfigError, match="retriever goes with retrieved frames only"):
        Condition("uniform", "bm25", "frames", 1.0, 32)
    with pytest.raises(JudgingError, match="has no 'resolution' field"):
        Condition.from_json({k: v for k, v in condition.to_json().items() if k != "resolution"})
    with pytest.raises(JudgingError, match="modality 'smell'"):
        Condition.from_json({**condition.to_json(), "modality": "smell"})


def _record(**changes: object) -> JudgmentRecord:
    fields: dict[str, object] = {
        "pair_id": "p1",
        "judge": "judge-a",
        "condition": parse_condition("retrieved:bm25:frames+transcript:1h:32"),
        "order": CF,
        "verdict": "B",
        "picked": "second",
        "raw_output": "B",
        "domain": "cooking",
        "gap": 2,
        "playlist_id": "P1",
        "length_hours": 1.5,
        "seed": 7,
        "call_key": "k",
        "retrieved_spans": (SpanRecord("v", 0.0, 5.0, 0.1), SpanRecord("v", 5.0, 9.0, 0.9)),
        "gold_spans": (SpanRecord("v", 4.0, 9.0),),
    }
    fields.update(changes)
    return JudgmentRecord(**fields)  # type: ignore[arg-type]


def test_a_judgment_record_round_trips_and_gives_the_metrics_their_inputs() -> None:
    record = _record()
    assert JudgmentRecord.from_line(record.to_line()) == record
    assert record.to_json()["condition_id"] == "retrieved-bm25-frames+transcript-1h-32f"
    assert "score" not in record.to_json()["gold_spans"][0]
    assert record.key == ("p1", "judge-a", "retrieved-bm25-frames+transcript-1h-32f", CF)
    assert record.judgment == _j(
        "p1", CF, "second", gap=2, hours=1.5, condition="retrieved-bm25-frames+transcript-1h-32f"
    )
    case = record.retrieval_case()
    assert case.retrieved == (Span(5.0, 9.0, "v"), Span(0.0, 5.0, "v"))  # best score first
    assert case.gold == (Span(4.0, 9.0, "v"),)


def test_an_older_record_without_its_optional_fields_still_parses() -> None:
    raw = _record().to_json()
    for key in ("verdict", "raw_output", "seed", "call_key", "retrieved_spans", "gold_spans"):
        del raw[key]
    record = JudgmentRecord.from_json(raw)
    assert (record.verdict, record.picked) == ("B", "second")  # the verdict picked implies
    assert (record.raw_output, record.seed, record.call_key) == ("", 0, "")
    assert record.retrieved_spans == record.gold_spans == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"order": "first_chosen"}, "order 'first_chosen'"),
        ({"picked": "A"}, "picked 'A'"),
        ({"verdict": "C", "picked": None}, "verdict 'C'"),
        ({"pair_id": 3}, "'pair_id' must be a string, got 3"),
        ({"gap": True}, "'gap' must be an integer, got True"),
        ({"condition_id": "uniform"}, "filed under condition 'uniform'"),
        ({"condition": "uniform"}, "condition must be an object"),
        ({"retrieved_spans": {"start_s": 0}}, "must be a list of spans"),
        ({"gold_spans": [{"video_id": "v", "start_s": 3.0}]}, "has no 'end_s' field"),
    ],
)
def test_a_malformed_record_is_refused_naming_what_is_wrong(
    change: dict[str, object], message: str
) -> None:
    raw = {**_record().to_json(), **change}
    with pytest.raises(JudgingError, match=re.escape(message)):
        JudgmentRecord.from_json(raw)


def test_a_line_that_is_not_json_or_not_an_object_is_refused() -> None:
    with pytest.raises(JudgingError, match="not JSON"):
        JudgmentRecord.from_line('{"pair_id": "p1"')
    with pytest.raises(JudgingError, match="expected a JSON object"):
        JudgmentRecord.from_line("[1, 2]")


SHOWN = Shown(
    frames=2,
    frame_times=(("v", 12.5), ("v", 42.5)),
    resolution=720,
    transcript_chars=57,
    audio_s=0.0,
    transcript_spans=(SpanRecord("v", 0.0, 30.0), SpanRecord("v", 30.0, 60.0)),
)


def test_what_a_judge_was_shown_round_trips_with_its_record() -> None:
    record = _record(shown=SHOWN)
    assert JudgmentRecord.from_line(record.to_line()) == record
    assert record.to_json()["shown"]["transcript_spans"][1] == {
        "video_id": "v",
        "start_s": 30.0,
        "end_s": 60.0,
    }


@pytest.mark.parametrize(
    "dropped",
    [("shown",), ("transcript_spans", "audio_spans")],
    ids=["before shown", "before the spans"],
)
def test_records_written_before_shown_or_its_spans_still_read(dropped: tuple[str, ...]) -> None:
    raw = _record(shown=SHOWN).to_json()
    target = raw if dropped == ("shown",) else raw["shown"]
    for key in dropped:
        del target[key]
    record = JudgmentRecord.from_json(raw)
    if dropped == ("shown",):
        assert record.shown is None
    else:
        assert record.shown is not None
        assert record.shown.frames == 2
        assert record.shown.transcript_spans == record.shown.audio_spans == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"frames": "2"}, "'frames' must be an integer, got '2'"),
        ({"frame_times": [["v"]]}, "shown.frame_times must be [video id, seconds] pairs"),
        ({"transcript_spans": [{"video_id": "v", "start_s": 9.0, "end_s": 3.0}]}, "bad span"),
        ({"audio_spans": {"start_s": 0}}, "'shown.audio_spans' must be a list of spans"),
    ],
)
def test_a_malformed_shown_is_refused_naming_what_is_wrong(
    change: dict[str, object], message: str
) -> None:
    raw = _record(shown=SHOWN).to_json()
    raw["shown"] = {**raw["shown"], **change}
    with pytest.raises(JudgingError, match=re.escape(message)):
        JudgmentRecord.from_json(raw)
