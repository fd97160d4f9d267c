"""Which seeds a run takes, in which order: a pure rule over the catalogue's seed rows."""

from __future__ import annotations

from collections.abc import Sequence

from store.catalog import SeedRow


def spread_by_domain(seeds: Sequence[SeedRow], max_seeds: int | None) -> list[SeedRow]:
    """``seeds`` in round-robin order over their domains (each domain's own order kept), at
    most ``max_seeds``."""
    by_domain: dict[str, list[SeedRow]] = {}
    for seed in seeds:
        by_domain.setdefault(seed.domain, []).append(seed)
    chosen: list[SeedRow] = []
    queues = [list(v) for _, v in sorted(by_domain.items())]
    while queues and (max_seeds is None or len(chosen) < max_seeds):
        for queue in queues:
            if queue and (max_seeds is None or len(chosen) < max_seeds):
                chosen.append(queue.pop(0))
        queues = [q for q in queues if q]
    return chosen
