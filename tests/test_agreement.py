"""Agreement statistics for the human check, against tables computed by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from policies.agreement import (
    CANT_TELL,
    INTENDED,
    OTHER,
    Z_95,
    AgreementError,
    Annotation,
    ValidationItem,
    agreement_with_intended,
    answered_agreement_with_intended,
    cohen_kappa,
    intended_label,
    krippendorff_alpha,
    proportion,
    stratified,
    summary,
    wilson_interval,
)
from store.errors import PlaylistEvalError

IN, OT, CT = INTENDED, OTHER, CANT_TELL


def _pairs_from_table(
    labels: Sequence[str], table: Sequence[Sequence[int]]
) -> tuple[list[str], list[str]]:
    """Expand a contingency table (rows: annotator a, columns: annotator b) into paired labels."""
    a: list[str] = []
    b: list[str] = []
    for row_label, row in zip(labels, table, strict=True):
        for column_label, count in zip(labels, row, strict=True):
            a += [row_label] * count
            b += [column_label] * count
    return a, b


# --- Wilson score interval -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (score interval).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_newcombes_published_table(
    k: int, n: int, low: float, high: float
) -> None:
    got_low, got_high = wilson_interval(k, n)
    assert (round(got_low, 4), round(got_high, 4)) == (low, high)


def test_wilson_bounds_are_the_roots_of_the_score_equation() -> None:
    """By hand: p = 0.8, n = 10; both bounds solve (p - pi)^2 = z^2 pi (1 - pi) / n."""
    k, n = 8, 10
    low, high = wilson_interval(k, n)
    z2 = Z_95**2
    # The quadratic (1 + z2/n) pi^2 - (2p + z2/n) pi + p^2 = 0, solved longhand.
    a, b, c = 1 + z2 / n, -(2 * 0.8 + z2 / n), 0.8**2
    root = math.sqrt(b * b - 4 * a * c)
    assert low == pytest.approx((-b - root) / (2 * a), abs=1e-12)
    assert high == pytest.approx((-b + root) / (2 * a), abs=1e-12)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)


def test_proportion_carries_counts_value_and_interval() -> None:
    p = proportion(141, 152)
    assert (p.k, p.n, p.value) == (141, 152, 141 / 152)
    assert (p.low, p.high) == wilson_interval(141, 152)
    assert p.low < p.value < p.high


@pytest.mark.parametrize(("k", "n"), [(0, 0), (3, 2), (-1, 5)])
def test_wilson_interval_refuses_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(AgreementError, match=repr(n) if n <= 0 else repr(k)):
        wilson_interval(k, n)


# --- agreement with the intended preference ---------------------------------------------------


def test_cant_tell_counts_against_agreement_but_not_in_the_answered_variant() -> None:
    labels = [IN] * 7 + [OT] * 2 + [CT]
    assert agreement_with_intended(labels) == proportion(7, 10)
    assert answered_agreement_with_intended(labels) == proportion(7, 9)


def test_all_intended_gives_one_with_an_interval_below_one() -> None:
    p = agreement_with_intended([IN] * 5)
    assert (p.value, p.high) == (1.0, 1.0)
    assert p.low == pytest.approx(5 / (5 + Z_95**2))  # Wilson lower bound at k == n


def test_empty_labels_raise_a_value_error_that_says_so() -> None:
    with pytest.raises(ValueError, match="at least one label"):
        agreement_with_intended([])


def test_answered_variant_is_undefined_when_everyone_cannot_tell() -> None:
    with pytest.raises(AgreementError, match="no answered labels among 3"):
        answered_agreement_with_intended([CT, CT, CT])


def test_unknown_labels_are_named_in_the_error() -> None:
    with pytest.raises(AgreementError, match="'A'"):
        agreement_with_intended([IN, "A"])


@pytest.mark.parametrize(
    ("choice", "label"), [("A", INTENDED), ("B", OTHER), (CANT_TELL, CANT_TELL)]
)
def test_intended_label_maps_choices(choice: str, label: str) -> None:
    assert intended_label(choice, intended="A", other="B") == label


def test_intended_label_refuses_a_choice_that_is_neither_answer() -> None:
    with pytest.raises(AgreementError, match="'C'"):
        intended_label("C", intended="A", other="B")


# --- Cohen's kappa ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        # Textbook 2x2: p_o = 35/50 = 0.7, p_e = (25*30 + 25*20)/50^2 = 0.5 -> 0.2/0.5 = 0.4.
        ([[20, 5], [10, 15]], 0.4),
        # p_o = 0.6, p_e = (60*70 + 40*30)/100^2 = 0.54 -> 0.06/0.46 = 3/23.
        ([[45, 15], [25, 15]], 3 / 23),
    ],
)
def test_cohen_kappa_on_two_by_two_tables(table: list[list[int]], expected: float) -> None:
    a, b = _pairs_from_table(["yes", "no"], table)
    assert cohen_kappa(a, b) == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_on_three_categories_including_cant_tell() -> None:
    """n = 25, agreed 19; margins a (13, 7, 5), b (11, 8, 6).

    p_o = 19/25, p_e = (13*11 + 7*8 + 5*6)/625 = 229/625, kappa = (475 - 229)/(625 - 229) = 41/66.
    """
    a, b = _pairs_from_table([IN, OT, CT], [[10, 2, 1], [1, 5, 1], [0, 1, 4]])
    assert cohen_kappa(a, b) == pytest.approx(41 / 66, abs=1e-12)


def test_cohen_kappa_is_minus_one_for_systematic_disagreement() -> None:
    assert cohen_kappa(["x", "y"], ["y", "x"]) == -1.0


def test_cohen_kappa_is_one_when_both_used_one_same_label() -> None:
    """p_e == 1 makes the formula 0/0; perfect agreement is reported as 1.0."""
    assert cohen_kappa([CT, CT, CT], [CT, CT, CT]) == 1.0


def test_cohen_kappa_is_zero_when_one_annotator_never_varies() -> None:
    assert cohen_kappa([IN, IN, IN, IN], [IN, IN, OT, OT]) == 0.0


def test_cohen_kappa_refuses_unpaired_or_empty_input() -> None:
    with pytest.raises(AgreementError, match="3 and 2"):
        cohen_kappa([IN, IN, OT], [IN, OT])
    with pytest.raises(ValueError, match="at least one item"):
        cohen_kappa([], [])


# --- Krippendorff's alpha ---------------------------------------------------------------------

_N = None
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4-observer, 12-unit
# example with missing values. Worked by hand: unit 12 has one value and drops out; n = 40 with
# margins n_1..n_5 = 9, 13, 10, 5, 3; off-diagonal coincidences D_o = 8: unit 6 (1, 2, 3, 4)
# has 12 unlike ordered pairs / (4 - 1) = 4, units 2 (2, 2, 3, 2) and 8 (1, 1, 2, 1) 6 / 3 = 2
# each; D_e = 40^2 - (81 + 169 + 100 + 25 + 9) = 1216. alpha = 1 - 39 * 8 / 1216 = 113/152.
_RELIABILITY_DATA: dict[int, list[int | None]] = {
    unit: [a, b, c, d]
    for unit, (a, b, c, d) in enumerate(
        zip(
            [1, 2, 3, 3, 2, 1, 4, 1, 2, _N, _N, _N],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _N, 3],
            [_N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _N],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _N],
            strict=True,
        ),
        start=1,
    )
}


def test_krippendorff_alpha_on_the_textbook_reliability_data() -> None:
    alpha = krippendorff_alpha(_RELIABILITY_DATA)
    assert alpha == pytest.approx(113 / 152, abs=1e-12)
    assert round(alpha, 3) == 0.743


def test_krippendorff_alpha_ignores_units_with_fewer_than_two_values() -> None:
    more = dict(_RELIABILITY_DATA) | {13: [_N, 4, _N, _N], 14: [_N, _N, _N, _N]}
    assert krippendorff_alpha(more) == krippendorff_alpha(_RELIABILITY_DATA)


def test_krippendorff_alpha_differs_from_kappa_for_two_coders_without_missing_data() -> None:
    """The 3-category table above: coincidences o = T + T', margins (24, 15, 11), n = 50.

    D_o = 2 * (3 + 1 + 2) = 12, D_e = 50^2 - (576 + 225 + 121) = 1578,
    alpha = 1 - 49 * 12 / 1578 = 165/263, a little above kappa = 41/66.
    """
    a, b = _pairs_from_table([IN, OT, CT], [[10, 2, 1], [1, 5, 1], [0, 1, 4]])
    alpha = krippendorff_alpha({i: [x, y] for i, (x, y) in enumerate(zip(a, b, strict=True))})
    assert alpha == pytest.approx(165 / 263, abs=1e-12)
    assert alpha != pytest.approx(cohen_kappa(a, b), abs=1e-3)


def test_krippendorff_alpha_is_one_when_every_value_is_the_same() -> None:
    units: dict[str, list[str | None]] = {"u1": [CT, CT], "u2": [CT, CT, _N]}
    assert krippendorff_alpha(units) == 1.0


@pytest.mark.parametrize(
    "units",
    [{}, {"u1": [IN]}, {"u1": [IN, _N], "u2": [_N, _N]}],
    ids=["empty", "one-label", "only-missing"],
)
def test_krippendorff_alpha_needs_a_pairable_unit(units: dict[str, list[str | None]]) -> None:
    with pytest.raises(ValueError, match="none pairable"):
        krippendorff_alpha(units)


# --- strata and the summary -------------------------------------------------------------------


def test_stratified_groups_in_first_seen_order_and_keeps_item_order() -> None:
    items = [("cooking", 1), ("travel", 2), ("cooking", 3), ("music", 4), ("travel", 5)]
    groups = stratified(items, lambda item: item[0])
    assert list(groups) == ["cooking", "travel", "music"]
    assert groups["cooking"] == [("cooking", 1), ("cooking", 3)]


_ITEMS = {
    "i1": ValidationItem("i1", intended="A", other="B", domain="cooking", gap=1),
    "i2": ValidationItem("i2", intended="B", other="A", domain="cooking", gap=2),
    "i3": ValidationItem("i3", intended="A", other="B", domain="travel", gap=1),
    "i4": ValidationItem("i4", intended="B", other="A", domain="travel", gap=2),
}
# Mapped labels: i1 (IN, IN), i2 (IN, CT), i3 (OT, OT), i4 (IN, IN) for (ann1, ann2).
_TWO_ANNOTATORS = [
    Annotation("i1", "ann1", "A"),
    Annotation("i1", "ann2", "A"),
    Annotation("i2", "ann1", "B"),
    Annotation("i2", "ann2", CANT_TELL),
    Annotation("i3", "ann1", "B"),
    Annotation("i3", "ann2", "B"),
    Annotation("i4", "ann1", "B"),
    Annotation("i4", "ann2", "B"),
]


def test_summary_overall_by_hand() -> None:
    """Labels I I I C O O I I: 5/8 agree, 5/7 answered.

    kappa: ann1 (IN, IN, OT, IN) vs ann2 (IN, CT, OT, IN), agreed 3, chance 3*2 + 1*1 = 7 ->
    (4*3 - 7)/(16 - 7) = 5/9. alpha: o_II = 4, o_IC = o_CI = 1, o_OO = 2; margins (5, 1, 2),
    n = 8, D_o = 2, D_e = 64 - 30 = 34 -> 1 - 7*2/34 = 10/17.
    """
    overall = summary(_TWO_ANNOTATORS, _ITEMS).overall
    assert (overall.items, overall.annotators, overall.cant_tell) == (4, 2, 1)
    assert overall.agreement == proportion(5, 8)
    assert overall.answered == proportion(5, 7)
    assert overall.kappa == pytest.approx(5 / 9, abs=1e-12)
    assert overall.alpha == pytest.approx(10 / 17, abs=1e-12)


@pytest.mark.parametrize(
    ("stratum", "k", "n", "answered", "kappa", "alpha"),
    [
        # cooking: I I I C; kappa (2*1 - 2)/(4 - 2) = 0; alpha 1 - 3*2/(16 - 10) = 0.
        ("cooking", 3, 4, (3, 3), 0.0, 0.0),
        # travel: O O I I, both annotators agree on both items.
        ("travel", 2, 4, (2, 4), 1.0, 1.0),
        (1, 2, 4, (2, 4), 1.0, 1.0),
        (2, 3, 4, (3, 3), 0.0, 0.0),
    ],
)
def test_summary_per_domain_and_gap_by_hand(
    stratum: str | int, k: int, n: int, answered: tuple[int, int], kappa: float, alpha: float
) -> None:
    result = summary(_TWO_ANNOTATORS, _ITEMS)
    got = result.by_domain[stratum] if isinstance(stratum, str) else result.by_gap[stratum]
    assert got.agreement == proportion(k, n)
    assert got.answered == proportion(*answered)
    assert got.kappa == pytest.approx(kappa, abs=1e-12)
    assert got.alpha == pytest.approx(alpha, abs=1e-12)


def test_summary_strata_are_sorted() -> None:
    result = summary(reversed(_TWO_ANNOTATORS), _ITEMS)
    assert list(result.by_domain) == ["cooking", "travel"]
    assert list(result.by_gap) == [1, 2]


def test_summary_with_three_annotators_reports_alpha_only() -> None:
    """ann3 on i1 (IN): unit i1 becomes (IN, IN, IN) and gives o_II 3 * 2/2 = 3 instead of 2.

    o_II = 5, margins (6, 1, 2), n = 9, D_o = 2, D_e = 81 - 41 = 40 -> alpha = 1 - 8*2/40 = 3/5.
    """
    result = summary([*_TWO_ANNOTATORS, Annotation("i1", "ann3", "A")], _ITEMS)
    assert result.overall.annotators == 3
    assert result.overall.kappa is None
    assert result.overall.alpha == pytest.approx(3 / 5, abs=1e-12)


def test_summary_without_overlap_has_no_inter_annotator_statistic() -> None:
    disjoint = [Annotation("i1", "ann1", "A"), Annotation("i2", "ann2", "A")]
    overall = summary(disjoint, _ITEMS).overall
    assert overall.agreement == proportion(1, 2)
    assert (overall.kappa, overall.alpha) == (None, None)


def test_summary_answered_is_none_when_a_stratum_is_all_cant_tell() -> None:
    result = summary([Annotation("i1", "ann1", CANT_TELL)], _ITEMS)
    assert result.overall.answered is None
    assert result.overall.agreement == proportion(0, 1)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ([], "at least one annotation"),
        ([Annotation("i9", "ann1", "A")], "'i9'"),
        ([Annotation("i1", "ann1", "A"), Annotation("i1", "ann1", "B")], "twice"),
        ([Annotation("i1", "ann1", "maybe")], "'maybe'"),
    ],
    ids=["empty", "unknown-item", "duplicate", "unknown-choice"],
)
def test_summary_refuses_bad_annotations(annotations: list[Annotation], message: str) -> None:
    with pytest.raises(AgreementError, match=message) as caught:
        summary(annotations, _ITEMS)
    assert isinstance(caught.value, PlaylistEvalError)
    assert isinstance(caught.value, ValueError)
