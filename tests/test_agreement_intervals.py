"""Bootstrap intervals of Cohen's kappa and Krippendorff's alpha: the vectorised formulas the
resamples use give what the reference implementations give, and the intervals are seeded, hold
the point estimate and narrow as the shared items grow."""

from __future__ import annotations

import numpy as np
import pytest

from policies.agreement import (
    Annotation,
    ValidationItem,
    alpha_of_coincidences,
    bootstrap_alpha_interval,
    bootstrap_kappa_interval,
    cohen_kappa,
    kappa_of_tables,
    krippendorff_alpha,
    summary,
)

INT, OTH, CT = "intended", "other", "cant_tell"

KAPPA_CASES = [
    ([INT, INT, OTH, OTH, CT, INT], [INT, OTH, OTH, OTH, CT, INT]),
    ([INT, INT, INT, INT], [INT, INT, INT, OTH]),
    ([INT, OTH, INT, OTH, INT, OTH], [OTH, INT, OTH, INT, OTH, INT]),
    ([CT, CT, CT], [CT, CT, CT]),  # one label throughout: 1.0 by convention
]


@pytest.mark.parametrize(("a", "b"), KAPPA_CASES)
def test_the_vectorised_kappa_equals_statsmodels_on_the_whole_table(
    a: list[str], b: list[str]
) -> None:
    labels = sorted(set(a) | set(b))
    table = np.zeros((1, len(labels), len(labels)))
    for x, y in zip(a, b, strict=True):
        table[0, labels.index(x), labels.index(y)] += 1
    assert float(kappa_of_tables(table)[0]) == pytest.approx(cohen_kappa(a, b), abs=1e-12)


ALPHA_CASES = [
    {
        "p1": [INT, INT, INT],
        "p2": [INT, INT, INT],
        "p3": [INT, INT, OTH],
        "p4": [INT, OTH, OTH],
        "p5": [CT, CT, INT],
    },
    {"p1": [INT, OTH], "p2": [OTH, OTH], "p3": [CT, INT, INT, INT], "p4": [INT, INT]},
    {"p1": [OTH, OTH], "p2": [OTH, OTH, OTH]},  # one label throughout: 1.0 by convention
]


@pytest.mark.parametrize("units", ALPHA_CASES)
def test_the_vectorised_alpha_equals_the_krippendorff_package(units: dict[str, list[str]]) -> None:
    labels = sorted({v for row in units.values() for v in row})
    coincidences = np.zeros((1, len(labels), len(labels)))
    for row in units.values():
        counts = np.bincount([labels.index(v) for v in row], minlength=len(labels))
        coincidences[0] += (np.outer(counts, counts) - np.diag(counts)) / (len(row) - 1)
    expected = krippendorff_alpha(units)
    assert float(alpha_of_coincidences(coincidences)[0]) == pytest.approx(expected, abs=1e-12)


def test_kappa_intervals_are_seeded_hold_the_estimate_and_narrow_with_more_items() -> None:
    a, b = KAPPA_CASES[0]
    few = bootstrap_kappa_interval(a * 2, b * 2)
    assert few is not None
    assert few == bootstrap_kappa_interval(a * 2, b * 2)  # the same labels, the same interval
    many = bootstrap_kappa_interval(a * 10, b * 10)
    assert many is not None
    assert many != bootstrap_kappa_interval(a * 10, b * 10, seed=1)  # the seed draws them
    point = cohen_kappa(a, b)
    for low, high in (few, many):
        assert -1.0 <= low <= point <= high <= 1.0
    assert many[1] - many[0] < few[1] - few[0]
    # Below ten shared items no interval: six that resample to anything say little.
    assert bootstrap_kappa_interval(a, b) is None


def test_alpha_intervals_hold_the_estimate_and_need_ten_shared_items() -> None:
    units = {f"{k}-{n}": v for n in range(2) for k, v in ALPHA_CASES[0].items()}
    interval = bootstrap_alpha_interval(units)
    assert interval is not None
    low, high = interval
    assert low <= krippendorff_alpha(units) <= high
    assert bootstrap_alpha_interval(ALPHA_CASES[0]) is None  # five shared items


def test_the_summary_says_how_many_items_were_shared_and_gives_intervals() -> None:
    items = {
        f"p{i}": ValidationItem(f"p{i}", intended="A", other="B", domain="d", gap=1)
        for i in range(12)
    }
    # ann labels all twelve; bob eleven of them (p0..p10): eleven shared items.
    choices = {"ann": "AABABBAABABA", "bob": "ABBABAABBAB"}
    annotations = [
        Annotation(item_id=f"p{i}", annotator=name, choice=choice)
        for name, row in choices.items()
        for i, choice in enumerate(row)
    ]
    overall = summary(annotations, items).overall
    assert overall.shared == 11
    labels = {"A": INT, "B": OTH}
    ann = [labels[c] for c in choices["ann"][:11]]
    bob = [labels[c] for c in choices["bob"]]
    assert overall.kappa == pytest.approx(cohen_kappa(ann, bob))
    assert overall.kappa_interval == bootstrap_kappa_interval(ann, bob)
    assert overall.alpha_interval is not None
