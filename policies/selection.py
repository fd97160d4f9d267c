"""Which seeds a run takes, in which order: a pure rule over the catalogue's seed rows.

A capped run must not spend itself on one corner of the playlist. The catalogue lists seeds in
(domain, segment_a, segment_b) order, so taking them in that order pairs the first segment of
each domain with every other before any second segment appears. :func:`spread_seeds` instead
takes, domain by domain in turn, the seed whose two segments the run has used least, each
segment in at most ``per_segment`` seeds, ties broken by a seeded shuffle: the same catalogue
and ``salt`` always give the same run.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from store.catalog import SeedRow


@dataclass(frozen=True)
class SeedSpread:
    """How a run's seeds were spread (recorded with the run): each segment in at most
    ``per_segment`` of them, ties broken by ``salt``; ``raised`` when the run asked for more
    seeds than the configured cap allows and the cap was raised to give them."""

    per_segment: int
    salt: str
    raised: bool = False

    def facts(self) -> dict[str, object]:
        """The plain-data form ``RunStarted.settings`` carries."""
        return {"per_segment": self.per_segment, "salt": self.salt, "raised": self.raised}


def _shuffle_key(salt: str, seed: SeedRow) -> str:
    return hashlib.sha256(f"{salt}:{seed.id}".encode()).hexdigest()


def spread_seeds(
    seeds: Sequence[SeedRow], max_seeds: int | None, *, per_segment: int = 2, salt: str = ""
) -> tuple[list[SeedRow], SeedSpread]:
    """At most ``max_seeds`` of ``seeds``, round-robin over their domains; within a domain in
    rounds (first seeds whose segments are both unused, then used once, …, in the seeded
    shuffle's order), no segment in more than ``per_segment`` seeds. When that cap leaves fewer
    seeds than ``max_seeds`` asks for (and more exist), it is raised until it does not, and the
    spread says so."""
    if per_segment < 1:
        raise ValueError(f"per_segment must be at least 1, got {per_segment!r}")
    wanted = len(seeds) if max_seeds is None else min(max_seeds, len(seeds))
    degree = Counter(seg for s in seeds for seg in (s.segment_a, s.segment_b))
    most = max(degree.values(), default=1)
    # Every seed wanted: only the busiest segment's count lets them all in.
    cap = max(per_segment, most) if wanted == len(seeds) else per_segment
    while True:
        chosen = _spread(seeds, wanted, cap, salt)
        if len(chosen) >= wanted or cap >= most:
            return chosen, SeedSpread(per_segment=cap, salt=salt, raised=cap != per_segment)
        cap += 1


def _spread(seeds: Sequence[SeedRow], wanted: int, cap: int, salt: str) -> list[SeedRow]:
    by_domain: dict[str, list[SeedRow]] = {}
    for seed in sorted(seeds, key=lambda s: _shuffle_key(salt, s)):
        by_domain.setdefault(seed.domain, []).append(seed)
    orders = [_domain_order(pool, cap, wanted) for _, pool in sorted(by_domain.items())]
    chosen: list[SeedRow] = []
    for rank in range(max((len(o) for o in orders), default=0)):
        for order in orders:
            if rank < len(order) and len(chosen) < wanted:
                chosen.append(order[rank])
    return chosen


def _domain_order(pool: Sequence[SeedRow], cap: int, limit: int) -> list[SeedRow]:
    """One domain's seeds in the order a run takes them: in rounds, a seed whose segments are
    both used fewer than ``level`` times so far, ``level`` rising to ``cap``."""
    used: Counter[str] = Counter()
    taken: list[SeedRow] = []
    left = list(pool)
    for level in range(1, cap + 1):
        rest: list[SeedRow] = []
        for seed in left:
            fits = used[seed.segment_a] < level and used[seed.segment_b] < level
            if len(taken) < limit and fits:
                used[seed.segment_a] += 1
                used[seed.segment_b] += 1
                taken.append(seed)
            else:
                rest.append(seed)
        left = rest
        if len(taken) >= limit or not left:
            break
    return taken
