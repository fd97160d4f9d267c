"""Agreement statistics for the human check of sampled preference pairs.

Annotators see a pair and pick the answer they prefer, or say they cannot tell. Each choice maps
to one of three labels: ``"intended"`` (the answer the rating marks as better), ``"other"`` or
``"cant_tell"``. From those labels this module computes

* agreement with the intended preference, a proportion with a 95 % Wilson score interval, both
  counting "can't tell" as not agreeing and over answered labels only;
* inter-annotator agreement: Cohen's kappa for two annotators and Krippendorff's nominal alpha for
  any number of annotators with missing values;
* the same numbers per stratum (domain, rating gap) via :func:`stratified` and :func:`summary`;
* how many items two or more annotators shared, and a 95 % percentile-bootstrap interval of kappa
  and alpha over those items (vectorised formulas, pinned to the reference implementations).

The statistics come from reference implementations (statsmodels for Cohen's kappa and the Wilson
interval, ``krippendorff`` for alpha): published benchmark numbers should. A degenerate table
(one label throughout) is detected on the labels themselves, before any float. Pure functions
over plain data.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TypeVar

import krippendorff
import numpy as np
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from store.errors import PlaylistEvalError

INTENDED = "intended"
OTHER = "other"
CANT_TELL = "cant_tell"
LABELS: tuple[str, str, str] = (INTENDED, OTHER, CANT_TELL)

Z_95 = NormalDist().inv_cdf(0.975)
"""The two-sided 95 % normal quantile, 1.95996..."""

_Item = TypeVar("_Item")
_Stratum = TypeVar("_Stratum", bound=Hashable)
_Unit = TypeVar("_Unit", bound=Hashable)
_Label = TypeVar("_Label", bound=Hashable)


class AgreementError(PlaylistEvalError, ValueError):
    """The annotations cannot give the asked-for statistic (empty, mismatched or unknown labels)."""


@dataclass(frozen=True)
class Proportion:
    """``k`` successes out of ``n`` with the point estimate and a Wilson score interval."""

    k: int
    n: int
    value: float
    low: float
    high: float


def wilson_interval(k: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for ``k`` successes in ``n`` trials (statsmodels'
    ``proportion_confint(method="wilson")``; ``z`` the two-sided normal quantile).

    Unlike the Wald interval it stays inside [0, 1] and is not empty at ``k == 0`` or ``k == n``.
    """
    if n <= 0:
        raise AgreementError(f"a proportion needs at least one trial, got n={n!r}")
    if not 0 <= k <= n:
        raise AgreementError(f"successes must lie in 0..n, got k={k!r} for n={n!r}")
    alpha = 2 * (1 - NormalDist().cdf(z))
    low, high = proportion_confint(k, n, alpha=alpha, method="wilson")
    # At k == 0 or k == n one bound is exactly 0 or 1; rounding may land a hair outside.
    return max(0.0, float(low)), min(1.0, float(high))


def proportion(k: int, n: int, z: float = Z_95) -> Proportion:
    """``k`` out of ``n`` as a :class:`Proportion` with its Wilson interval (95 % by default)."""
    low, high = wilson_interval(k, n, z)
    return Proportion(k=k, n=n, value=k / n, low=low, high=high)


def _label_counts(labels: Iterable[str]) -> Counter[str]:
    counts = Counter(labels)
    unknown = sorted(set(counts) - set(LABELS))
    if unknown:
        raise AgreementError(
            f"labels must be one of {LABELS!r}, got {unknown!r}; map each annotator choice "
            "with intended_label() first"
        )
    return counts


def agreement_with_intended(labels: Iterable[str]) -> Proportion:
    """Share of labels that agree with the intended preference, "can't tell" counting as not.

    ``labels`` are ``"intended"``, ``"other"`` or ``"cant_tell"``, one per annotator judgement;
    the value is ``intended / (intended + other + cant_tell)`` with a 95 % Wilson interval.
    """
    counts = _label_counts(labels)
    n = sum(counts.values())
    if n == 0:
        raise AgreementError("agreement with the intended preference needs at least one label")
    return proportion(counts[INTENDED], n)


def answered_agreement_with_intended(labels: Iterable[str]) -> Proportion:
    """Share of answered labels that agree, ``intended / (intended + other)``.

    "Can't tell" labels are left out of both counts.

    Raises :class:`AgreementError` when every label is "can't tell" (nothing was answered).
    """
    counts = _label_counts(labels)
    n = counts[INTENDED] + counts[OTHER]
    if n == 0:
        raise AgreementError(
            f"no answered labels among {sum(counts.values())} (all {CANT_TELL!r}); "
            "the answered-only agreement is undefined"
        )
    return proportion(counts[INTENDED], n)


def intended_label(choice: str, intended: str, other: str) -> str:
    """Map one annotator ``choice`` to ``"intended"``, ``"other"`` or ``"cant_tell"``.

    ``intended`` and ``other`` are the choice values that pick the intended and the other answer
    for this item (for instance ``"A"`` and ``"B"`` when the order was shown that way).
    """
    if choice == intended:
        return INTENDED
    if choice == other:
        return OTHER
    if choice == CANT_TELL:
        return CANT_TELL
    raise AgreementError(
        f"choice {choice!r} is neither the intended {intended!r}, the other {other!r} nor "
        f"{CANT_TELL!r}; fix the annotation or the item's choice values"
    )


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa for two annotators who labelled the same items, ``a[i]`` and ``b[i]`` paired
    (statsmodels' ``cohens_kappa`` over their contingency table).

    Labels are nominal and may be anything hashable (``"cant_tell"`` is a category like any
    other). When both annotators used one and the same label throughout, chance agreement is 1
    and kappa is 0/0: 1.0 is returned then (the observed agreement is perfect).
    """
    if len(a) != len(b):
        raise AgreementError(
            f"kappa pairs the two annotators item by item, got {len(a)!r} and {len(b)!r} labels"
        )
    if not a:
        raise AgreementError("cohen_kappa needs at least one item labelled by both annotators")
    categories = {label: i for i, label in enumerate(dict.fromkeys([*a, *b]))}
    if len(categories) == 1:
        return 1.0
    table = np.zeros((len(categories), len(categories)))
    for x, y in zip(a, b, strict=True):
        table[categories[x], categories[y]] += 1
    with warnings.catch_warnings():  # its z statistic divides by 0 at perfect agreement
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(cohens_kappa(table).kappa)


def krippendorff_alpha(units: Mapping[_Unit, Sequence[_Label | None]]) -> float:
    """Krippendorff's alpha for nominal labels, any number of annotators, missing values allowed
    (the ``krippendorff`` package).

    ``units`` maps each item to the labels it received; ``None`` marks a missing value. Items
    with fewer than two labels cannot be paired and are ignored (:class:`AgreementError` when
    none is left). When every pairable value is the same label alpha is 0/0; like
    :func:`cohen_kappa` this returns 1.0 then (the observed agreement is perfect).
    """
    rows = [[v for v in values if v is not None] for values in units.values()]
    pairable = [row for row in rows if len(row) >= 2]
    if not pairable:
        raise AgreementError(
            f"krippendorff_alpha needs at least one item with two or more labels; "
            f"got {len(units)!r} items, none pairable"
        )
    labels = {label: i for i, label in enumerate(dict.fromkeys(v for row in pairable for v in row))}
    if len(labels) == 1:
        return 1.0
    # Nominal alpha depends on each unit's counts of each label, not on who gave which: the
    # reliability matrix puts a unit's labels in its first rows and leaves the rest missing.
    data = np.full((max(len(row) for row in pairable), len(pairable)), np.nan)
    for column, row in enumerate(pairable):
        for position, label in enumerate(row):
            data[position, column] = labels[label]
    return float(
        krippendorff.alpha(
            reliability_data=data,
            level_of_measurement="nominal",
            value_domain=list(range(len(labels))),
        )
    )


BOOTSTRAP_DRAWS = 2000
"""Resamples of the shared items behind each bootstrap interval."""
MIN_BOOTSTRAP_ITEMS = 10
"""Fewer shared items get no interval: resampling a handful says little (two items that agree
resample to [1, 1]), and a narrow interval there would mislead."""


def kappa_of_tables(tables: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each ``(L, L)`` contingency table in ``tables`` (shape ``(B, L, L)``), by
    its definition ``(p_o - p_e) / (1 - p_e)``: what statsmodels' ``cohens_kappa`` gives for
    one table (tests pin the two together), for thousands of resampled tables at once. A table
    whose chance agreement is 1 (one label throughout) gives 1.0, as :func:`cohen_kappa` does."""
    n = tables.sum(axis=(1, 2))
    observed = np.trace(tables, axis1=1, axis2=2) / n
    chance = (tables.sum(axis=2) * tables.sum(axis=1)).sum(axis=1) / (n * n)
    degenerate = np.isclose(chance, 1.0)
    safe = np.where(degenerate, 0.0, chance)
    return np.where(degenerate, 1.0, (observed - safe) / (1.0 - safe))


def alpha_of_coincidences(coincidences: np.ndarray) -> np.ndarray:
    """Krippendorff's nominal alpha of each ``(L, L)`` coincidence matrix in ``coincidences``
    (shape ``(B, L, L)``): ``1 - (n - 1) * sum(o_ck, c != k) / sum(n_c * n_k, c != k)``, what
    the ``krippendorff`` package gives for one set of units (tests pin the two together). One
    label throughout gives 1.0, as :func:`krippendorff_alpha` does."""
    off = ~np.eye(coincidences.shape[1], dtype=bool)
    totals = coincidences.sum(axis=2)
    n = totals.sum(axis=1)
    disagreement = coincidences[:, off].sum(axis=1)
    expected = (totals[:, :, None] * totals[:, None, :])[:, off].sum(axis=1)
    degenerate = np.isclose(expected, 0.0)
    safe = np.where(degenerate, 1.0, expected)
    return np.where(degenerate, 1.0, 1.0 - (n - 1) * disagreement / safe)


def _percentile_interval(values: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _resample_weights(items: int, draws: int, seed: int) -> np.ndarray:
    """How often each of ``items`` is drawn in each of ``draws`` resamples with replacement."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(items, np.full(items, 1.0 / items), size=draws).astype(float)


def bootstrap_kappa_interval(
    a: Sequence[Hashable], b: Sequence[Hashable], draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[float, float] | None:
    """A 95 % percentile-bootstrap interval of Cohen's kappa for two annotators' labels of the
    same items (``a[i]`` with ``b[i]``): the items are resampled with replacement ``draws``
    times (seeded by ``seed``: the same labels give the same interval). None below
    :data:`MIN_BOOTSTRAP_ITEMS` items."""
    if len(a) != len(b):
        raise AgreementError(
            f"kappa pairs the two annotators item by item, got {len(a)!r} and {len(b)!r} labels"
        )
    if len(a) < MIN_BOOTSTRAP_ITEMS:
        return None
    categories = {label: i for i, label in enumerate(dict.fromkeys([*a, *b]))}
    size = len(categories)
    per_item = np.zeros((len(a), size * size))
    for row, (x, y) in enumerate(zip(a, b, strict=True)):
        per_item[row, categories[x] * size + categories[y]] = 1.0
    tables = (_resample_weights(len(a), draws, seed) @ per_item).reshape(draws, size, size)
    return _percentile_interval(kappa_of_tables(tables))


def bootstrap_alpha_interval(
    units: Mapping[_Unit, Sequence[_Label | None]], draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[float, float] | None:
    """A 95 % percentile-bootstrap interval of Krippendorff's nominal alpha: the units with two
    or more labels are resampled with replacement ``draws`` times (seeded by ``seed``). None
    below :data:`MIN_BOOTSTRAP_ITEMS` such units."""
    rows = [[v for v in values if v is not None] for values in units.values()]
    pairable = [row for row in rows if len(row) >= 2]
    if len(pairable) < MIN_BOOTSTRAP_ITEMS:
        return None
    labels = {label: i for i, label in enumerate(dict.fromkeys(v for row in pairable for v in row))}
    size = len(labels)
    per_unit = np.zeros((len(pairable), size, size))
    for index, row in enumerate(pairable):
        counts = np.bincount([labels[v] for v in row], minlength=size).astype(float)
        # Each ordered pair of a unit's values, weighted 1 / (m - 1) (Krippendorff's coincidences).
        per_unit[index] = (np.outer(counts, counts) - np.diag(counts)) / (len(row) - 1)
    weights = _resample_weights(len(pairable), draws, seed)
    coincidences = (weights @ per_unit.reshape(len(pairable), -1)).reshape(draws, size, size)
    return _percentile_interval(alpha_of_coincidences(coincidences))


def stratified(
    items: Iterable[_Item], key: Callable[[_Item], _Stratum]
) -> dict[_Stratum, list[_Item]]:
    """Group ``items`` by ``key(item)``, keeping their order within each stratum.

    Strata appear in the order their first item does; callers compute any statistic per stratum
    over the lists (``{s: agreement_with_intended(v) for s, v in stratified(...).items()}``).
    """
    groups: dict[_Stratum, list[_Item]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


@dataclass(frozen=True)
class ValidationItem:
    """One pair shown to annotators: which choice picks the intended answer, and its strata."""

    item_id: str
    intended: str
    other: str
    domain: str
    gap: int


@dataclass(frozen=True)
class Annotation:
    """One annotator's choice on one item: the ``intended`` or ``other`` value, or "cant_tell"."""

    item_id: str
    annotator: str
    choice: str


@dataclass(frozen=True)
class StratumAgreement:
    """Agreement numbers over one set of items (all of them, one domain or one gap).

    ``agreement`` counts every label, "can't tell" as not agreeing; ``answered`` leaves "can't
    tell" out and is ``None`` when nothing was answered. ``kappa`` is set when exactly two
    annotators labelled overlapping items (computed over those items), ``alpha`` whenever at least
    one item has two labels. Both use the mapped labels (intended / other / cant_tell), so the
    A/B position of the answers does not enter the chance term.
    """

    items: int
    annotators: int
    agreement: Proportion
    answered: Proportion | None
    cant_tell: int
    kappa: float | None
    alpha: float | None
    # Items labelled by two or more annotators (what kappa and alpha are computed over), and a
    # 95 % bootstrap interval of each over those items (None below MIN_BOOTSTRAP_ITEMS).
    shared: int = 0
    kappa_interval: tuple[float, float] | None = None
    alpha_interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class AgreementSummary:
    """Agreement overall, per domain and per rating gap."""

    overall: StratumAgreement
    by_domain: dict[str, StratumAgreement]
    by_gap: dict[int, StratumAgreement]


def _stratum_agreement(labelled: Sequence[tuple[Annotation, str]]) -> StratumAgreement:
    labels = [label for _, label in labelled]
    counts = Counter(labels)
    answered = (
        answered_agreement_with_intended(labels) if counts[INTENDED] + counts[OTHER] else None
    )
    per_item: dict[str, dict[str, str]] = {}
    for annotation, label in labelled:
        per_item.setdefault(annotation.item_id, {})[annotation.annotator] = label
    annotators = sorted({annotation.annotator for annotation, _ in labelled})
    kappa: float | None = None
    kappa_interval: tuple[float, float] | None = None
    if len(annotators) == 2:
        first, second = annotators
        shared = [by for by in per_item.values() if first in by and second in by]
        if shared:
            a, b = [by[first] for by in shared], [by[second] for by in shared]
            kappa = cohen_kappa(a, b)
            kappa_interval = bootstrap_kappa_interval(a, b)
    pairable = {item: list(by.values()) for item, by in per_item.items() if len(by) >= 2}
    alpha = krippendorff_alpha(pairable) if pairable else None
    return StratumAgreement(
        items=len(per_item),
        annotators=len(annotators),
        agreement=agreement_with_intended(labels),
        answered=answered,
        cant_tell=counts[CANT_TELL],
        kappa=kappa,
        alpha=alpha,
        shared=len(pairable),
        kappa_interval=kappa_interval,
        alpha_interval=bootstrap_alpha_interval(pairable) if pairable else None,
    )


def summary(
    annotations: Iterable[Annotation], intended: Mapping[str, ValidationItem]
) -> AgreementSummary:
    """Agreement with the intended preference and between annotators, overall and per stratum.

    ``intended`` maps each item id to its :class:`ValidationItem`. Agreement with the intended
    preference counts each annotator's label once (the Wilson interval treats labels as
    independent, which is optimistic when several annotators label the same item). Raises
    :class:`AgreementError` for no annotations, an unknown item, a choice that matches neither
    answer nor "cant_tell", or an annotator who labelled one item twice.
    """
    labelled: list[tuple[Annotation, str]] = []
    seen: set[tuple[str, str]] = set()
    for annotation in annotations:
        item = intended.get(annotation.item_id)
        if item is None:
            raise AgreementError(
                f"annotation by {annotation.annotator!r} names item {annotation.item_id!r}, "
                "which is not among the validation items"
            )
        if (annotation.item_id, annotation.annotator) in seen:
            raise AgreementError(
                f"annotator {annotation.annotator!r} labelled item {annotation.item_id!r} "
                "twice; keep one label per annotator and item"
            )
        seen.add((annotation.item_id, annotation.annotator))
        labelled.append((annotation, intended_label(annotation.choice, item.intended, item.other)))
    if not labelled:
        raise AgreementError("summary needs at least one annotation")
    by_domain = stratified(labelled, lambda pair: intended[pair[0].item_id].domain)
    by_gap = stratified(labelled, lambda pair: intended[pair[0].item_id].gap)
    return AgreementSummary(
        overall=_stratum_agreement(labelled),
        by_domain={d: _stratum_agreement(by_domain[d]) for d in sorted(by_domain)},
        by_gap={g: _stratum_agreement(by_gap[g]) for g in sorted(by_gap)},
    )
