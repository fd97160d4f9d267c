"""Preference pairs from accepted items: the shapes every later step shares, and the pure rules.

An accepted item holds the gold answer (rated 5) and four distractors rated 4..1. Any two of the
five answers make a candidate pair, the higher rating preferred. The difficulty gate keeps a pair
only when at least one weak judge fails it (:class:`GateRule` says what failing is, with the
answers shown in both orders); sampling then draws a fixed number of pairs per domain, in the
kept pairs' own proportions of rating gaps or evenly across gaps (:data:`Sampling`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Literal, TypeVar

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

GOLD_RATING = 5
RATINGS = (5, 4, 3, 2, 1)
_K = TypeVar("_K", bound="SupportsRichComparison")

KeepWhen = Literal["wrong_or_inconsistent", "wrong_both_orders"]
"""When a judge fails a pair (and so keeps it as hard): ``"wrong_or_inconsistent"`` — it is not
right in both answer orders (wrong in both, or right in one and wrong in the other);
``"wrong_both_orders"`` — it is wrong in both (a judge that flips with the order does not keep
the pair)."""

Ties = Literal["ignore", "half", "wrong"]
"""How a verdict that picks neither answer ("tie", or "invalid": no usable answer) counts:
``"ignore"`` — that order says nothing (a judge with no other verdict on the pair abstains);
``"half"`` — half right, as a coin flip would be; ``"wrong"`` — as a wrong answer."""

Sampling = Literal["proportional", "stratified"]
"""How a domain's sample splits across rating gaps: ``"proportional"`` — in the kept pairs' own
proportions (:func:`proportional_quotas`); ``"stratified"`` — as evenly as they allow
(:func:`gap_quotas`)."""


@dataclass(frozen=True)
class GateRule:
    """What it takes for a difficulty judge to fail a pair.

    The default is the paper's gate (Sec. 3.3, "Controllable Pair Selection"): "only those [pairs]
    that at least one of them fails are retained ... the gate removes pairs that even a modest
    judge solves". A judge that reverses its verdict when the answers swap sides — which the paper
    reports weak judges do "on roughly half of pairs" (Sec. 1) — has not solved the pair, so
    ``keep_when`` defaults to ``"wrong_or_inconsistent"``. The paper says nothing of ties; a
    judge that cannot separate two answers gives no evidence either way, so ``ties`` defaults to
    ``"ignore"``: an always-tying (or always-unparseable) judge keeps no pair by itself, where
    counting a tie as wrong would make it keep every one, gap 4 included.
    """

    keep_when: KeepWhen = "wrong_or_inconsistent"
    ties: Ties = "ignore"

    def label(self) -> str:
        """The rule as the gate's events record it."""
        return f"keep_when={self.keep_when}, ties={self.ties}"


PAPER_GATE = GateRule()
"""The default rule: the paper's gate (see :class:`GateRule`)."""


@dataclass(frozen=True)
class JudgeVerdict:
    """One difficulty judge on one pair, in both answer orders.

    ``verdict_chosen_first`` is what the judge answered when the preferred answer was shown
    first ("A" means it picked the first answer, "B" the second, "tie" or "invalid" otherwise);
    ``verdict_rejected_first`` the same with the order swapped. ``failed`` is true when the judge
    failed the pair under the gate's rule (:func:`judge_fails`) when it was decided.
    """

    judge: str
    verdict_chosen_first: str
    verdict_rejected_first: str
    failed: bool


@dataclass(frozen=True)
class SelectedPair:
    """A pair of one accepted item's answers: a candidate, and once it passed the difficulty gate
    and was sampled into the benchmark, with the judges' verdicts."""

    pair_id: str
    run_id: str
    seed_id: str
    domain: str
    chosen_rating: int
    rejected_rating: int
    judges: tuple[JudgeVerdict, ...] = field(default_factory=tuple)

    @property
    def gap(self) -> int:
        """How many rating steps separate the two answers (1..4)."""
        return self.chosen_rating - self.rejected_rating


def pair_id(seed_id: str, chosen: int, rejected: int) -> str:
    """The pair's stable id: ``"pair-"`` + the first 16 hex digits of sha1(seed|chosen|rejected)."""
    digest = hashlib.sha1(f"{seed_id}|{chosen}|{rejected}".encode()).hexdigest()
    return f"pair-{digest[:16]}"


def rating_pairs(ratings: Iterable[int] = RATINGS) -> list[tuple[int, int]]:
    """Every two distinct ratings as ``(chosen, rejected)``, the higher first: best pairs first.

    The five ratings of an item give ten pairs: four of gap 1, three of gap 2, two of gap 3 and
    one of gap 4.
    """
    ordered = sorted(set(ratings), reverse=True)
    return [(high, low) for high, low in combinations(ordered, 2)]


def candidate_pairs(
    seed_id: str, run_id: str, domain: str, ratings: Iterable[int] = RATINGS
) -> list[SelectedPair]:
    """The candidate pairs of one accepted item (no verdicts yet), in :func:`rating_pairs` order."""
    return [
        SelectedPair(
            pair_id=pair_id(seed_id, chosen, rejected),
            run_id=run_id,
            seed_id=seed_id,
            domain=domain,
            chosen_rating=chosen,
            rejected_rating=rejected,
        )
        for chosen, rejected in rating_pairs(ratings)
    ]


def picks_preferred(choice: str, order: str) -> bool:
    """Whether a judge's ``choice`` ("A", "B", "tie", "invalid") is the preferred answer when the
    pair was shown in ``order`` ("chosen_first" or "rejected_first")."""
    return choice == ("A" if order == "chosen_first" else "B")


def order_score(choice: str, order: str, ties: Ties) -> float | None:
    """How right one verdict is: 1 for the preferred answer, 0 for the other, and for a tie or an
    invalid answer what ``ties`` says (``None``: it does not count)."""
    if choice in ("A", "B"):
        return 1.0 if picks_preferred(choice, order) else 0.0
    return {"ignore": None, "half": 0.5, "wrong": 0.0}[ties]


def judge_score(
    verdict_chosen_first: str, verdict_rejected_first: str, ties: Ties = "ignore"
) -> float | None:
    """The judge's accuracy on a pair over the orders that count (``None``: none counts)."""
    scores = [
        score
        for choice, order in (
            (verdict_chosen_first, "chosen_first"),
            (verdict_rejected_first, "rejected_first"),
        )
        if (score := order_score(choice, order, ties)) is not None
    ]
    return sum(scores) / len(scores) if scores else None


def judge_fails(
    verdict_chosen_first: str, verdict_rejected_first: str, rule: GateRule = PAPER_GATE
) -> bool:
    """Whether a judge with these two verdicts fails the pair under ``rule``.

    On the orders that count (:func:`judge_score`): ``"wrong_or_inconsistent"`` fails a judge
    that is not right in all of them; ``"wrong_both_orders"`` one that is right in less than half
    (wrong in both; with ``ties="half"``, also wrong in one and tied in the other). A judge with
    no order that counts abstains: it fails nothing.
    """
    score = judge_score(verdict_chosen_first, verdict_rejected_first, rule.ties)
    if score is None:
        return False
    return score < 1.0 if rule.keep_when == "wrong_or_inconsistent" else score < 0.5


def failing_judges(verdicts: Sequence[JudgeVerdict], rule: GateRule) -> tuple[str, ...]:
    """The judges that fail the pair under ``rule``, in the verdicts' order: the gate keeps the
    pair when there is one."""
    return tuple(
        v.judge
        for v in verdicts
        if judge_fails(v.verdict_chosen_first, v.verdict_rejected_first, rule)
    )


def gate_reason(verdicts: Sequence[JudgeVerdict], rule: GateRule) -> str:
    """Why no judge failed a pair, one clause per judge (a dropped pair's recorded reason)."""
    clauses = []
    for v in verdicts:
        score = judge_score(v.verdict_chosen_first, v.verdict_rejected_first, rule.ties)
        if score is None:
            what = "abstains (no answer counts)"
        elif score == 1.0:
            what = "right in both orders"
        else:
            what = f"right in {score:.0%} of the orders that count"
        clauses.append(f"{v.judge} {what} ({v.verdict_chosen_first}/{v.verdict_rejected_first})")
    return f"no judge fails it (keep_when={rule.keep_when!r}, ties={rule.ties!r}): " + "; ".join(
        clauses
    )


def gap_quotas(available: dict[int, int], total: int) -> dict[int, int]:
    """How many pairs to draw of each gap, stratified: as even across gaps as ``available`` allows.

    Every gap gets an equal share (capped at what it has); what a short gap cannot take is
    shared among the others again; a remainder smaller than the number of gaps still open goes
    one each to the gaps with the most left (the smaller gap first on a tie). Draws
    ``min(total, sum(available))`` in all.
    """
    return even_shares(
        available,
        total,
        lambda open_gaps, quotas: sorted(
            open_gaps, key=lambda gap: (quotas[gap] - available[gap], gap)
        ),
    )


def even_shares(
    capacity: Mapping[_K, int],
    total: int,
    remainder: Callable[[list[_K], Mapping[_K, int]], Sequence[_K]],
) -> dict[_K, int]:
    """``total`` shared over the keys as evenly as their ``capacity`` allows (water filling).

    Every key still open (below its capacity) gets an equal share, capped at its capacity, and
    what a full key cannot take is shared among the others again; a remainder smaller than the
    number of keys still open goes one each to the first of ``remainder(the open keys in
    order, the shares so far)``. Shares ``min(total, sum(capacity))`` in all.
    """
    shares = dict.fromkeys(capacity, 0)
    left = min(total, sum(capacity.values()))
    while left > 0:
        open_keys = sorted(key for key in capacity if shares[key] < capacity[key])
        share = left // len(open_keys)
        if share == 0:
            for key in remainder(open_keys, shares)[:left]:
                shares[key] += 1
            break
        for key in open_keys:
            step = min(share, capacity[key] - shares[key])
            shares[key] += step
            left -= step
    return shares


def proportional_quotas(available: dict[int, int], total: int) -> dict[int, int]:
    """How many pairs to draw of each gap in the proportions of ``available`` (largest remainder).

    Each gap gets ``total × its share``, rounded down; the pairs still missing go one each to
    the gaps with the largest fractions (the larger gap count first, then the smaller gap). So a
    gap's quota is within one of its exact share and never more than it has. Draws
    ``min(total, sum(available))`` in all.
    """
    whole = sum(available.values())
    draw = min(total, whole)
    if draw <= 0:
        return {gap: 0 for gap in available}
    # Integer arithmetic: quota·whole + rest = draw·count, so the remainders compare exactly.
    quotas = {gap: draw * count // whole for gap, count in available.items()}
    rests = {gap: draw * count % whole for gap, count in available.items()}
    missing = draw - sum(quotas.values())
    by_rest = sorted(available, key=lambda gap: (-rests[gap], -available[gap], gap))
    for gap in by_rest[:missing]:
        quotas[gap] += 1
    return quotas


def _sort_key(pair: SelectedPair) -> tuple[str, int, str, int, str]:
    return (pair.domain, pair.gap, pair.seed_id, -pair.chosen_rating, pair.pair_id)


def sample_pairs(
    kept: Sequence[SelectedPair],
    per_domain: int,
    seed: int,
    sampling: Sampling = "proportional",
) -> list[SelectedPair]:
    """Up to ``per_domain`` of the kept pairs of each domain, split across rating gaps as
    ``sampling`` says.

    Quotas per gap come from :func:`proportional_quotas` (the default: the sample keeps the gap
    distribution the gate left) or :func:`gap_quotas` (``"stratified"``: even gaps); within a gap
    the pairs are drawn with ``random.Random(f"{seed}|{domain}")`` from the pairs sorted by
    (gap, seed, ratings), so the draw depends only on ``seed`` and the kept pairs of that domain,
    not on their order or on other domains. A domain with at most ``per_domain`` kept pairs gives
    all of them. The result is sorted by domain, gap, seed and ratings.
    """
    if per_domain < 0:
        raise ValueError(f"per_domain must be >= 0, got {per_domain!r}")
    if sampling not in ("proportional", "stratified"):
        raise ValueError(f"sampling must be 'proportional' or 'stratified', got {sampling!r}")
    quotas_of = proportional_quotas if sampling == "proportional" else gap_quotas
    by_domain: dict[str, dict[int, list[SelectedPair]]] = {}
    for pair in sorted(kept, key=_sort_key):
        by_domain.setdefault(pair.domain, {}).setdefault(pair.gap, []).append(pair)
    chosen: list[SelectedPair] = []
    for domain, by_gap in sorted(by_domain.items()):
        rng = random.Random(f"{seed}|{domain}")
        quotas = quotas_of({gap: len(pairs) for gap, pairs in by_gap.items()}, per_domain)
        for gap in sorted(by_gap):
            pairs = by_gap[gap]
            chosen.extend(pairs if quotas[gap] == len(pairs) else rng.sample(pairs, quotas[gap]))
    return sorted(chosen, key=_sort_key)
