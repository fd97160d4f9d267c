"""Preference pairs from accepted items: the shapes every later step shares, and the pure rules.

An accepted item holds the gold answer (rated 5) and four distractors rated 4..1. Any two of the
five answers make a candidate pair, the higher rating preferred. The difficulty gate keeps a pair
only when at least one weak judge fails it (in either answer order); sampling then draws a fixed
number of pairs per domain, stratified by rating gap.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

GOLD_RATING = 5
RATINGS = (5, 4, 3, 2, 1)


@dataclass(frozen=True)
class JudgeVerdict:
    """One difficulty judge on one pair, in both answer orders.

    ``verdict_chosen_first`` is what the judge answered when the preferred answer was shown
    first ("A" means it picked the first answer, "B" the second, "tie" or "invalid" otherwise);
    ``verdict_rejected_first`` the same with the order swapped. ``failed`` is true when either
    verdict does not pick the preferred answer.
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


def judge_failed(verdict_chosen_first: str, verdict_rejected_first: str) -> bool:
    """A judge fails a pair unless it picks the preferred answer in both orders."""
    return not (
        picks_preferred(verdict_chosen_first, "chosen_first")
        and picks_preferred(verdict_rejected_first, "rejected_first")
    )


def gap_quotas(available: dict[int, int], total: int) -> dict[int, int]:
    """How many pairs to draw of each gap: as even across gaps as ``available`` allows.

    Every gap gets an equal share (capped at what it has); what a short gap cannot take is
    shared among the others again; a remainder smaller than the number of gaps still open goes
    one each to the gaps with the most left (the smaller gap first on a tie). Draws
    ``min(total, sum(available))`` in all.
    """
    quotas = {gap: 0 for gap in available}
    remaining = min(total, sum(available.values()))
    while remaining > 0:
        open_gaps = sorted(gap for gap in available if quotas[gap] < available[gap])
        share = remaining // len(open_gaps)
        if share == 0:
            by_left = sorted(open_gaps, key=lambda gap: (quotas[gap] - available[gap], gap))
            for gap in by_left[:remaining]:
                quotas[gap] += 1
            break
        for gap in open_gaps:
            take = min(share, available[gap] - quotas[gap])
            quotas[gap] += take
            remaining -= take
    return quotas


def _sort_key(pair: SelectedPair) -> tuple[str, int, str, int, str]:
    return (pair.domain, pair.gap, pair.seed_id, -pair.chosen_rating, pair.pair_id)


def sample_pairs(kept: Sequence[SelectedPair], per_domain: int, seed: int) -> list[SelectedPair]:
    """Up to ``per_domain`` of the kept pairs of each domain, stratified by rating gap.

    Quotas per gap come from :func:`gap_quotas`; within a gap the pairs are drawn with
    ``random.Random(f"{seed}|{domain}")`` from the pairs sorted by (gap, seed, ratings), so the
    draw depends only on ``seed`` and the kept pairs of that domain, not on their order or on
    other domains. A domain with at most ``per_domain`` kept pairs gives all of them. The result
    is sorted by domain, gap, seed and ratings.
    """
    if per_domain < 0:
        raise ValueError(f"per_domain must be >= 0, got {per_domain!r}")
    by_domain: dict[str, dict[int, list[SelectedPair]]] = {}
    for pair in sorted(kept, key=_sort_key):
        by_domain.setdefault(pair.domain, {}).setdefault(pair.gap, []).append(pair)
    chosen: list[SelectedPair] = []
    for domain, by_gap in sorted(by_domain.items()):
        rng = random.Random(f"{seed}|{domain}")
        quotas = gap_quotas({gap: len(pairs) for gap, pairs in by_gap.items()}, per_domain)
        for gap in sorted(by_gap):
            pairs = by_gap[gap]
            chosen.extend(pairs if quotas[gap] == len(pairs) else rng.sample(pairs, quotas[gap]))
    return sorted(chosen, key=_sort_key)
