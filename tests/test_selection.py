"""Which seeds a run takes: spread over the playlist's segments, domain by domain, the same for
the same salt (``policies.selection``); on a 300-segment synthetic catalogue (no video needed)."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest

from playlisteval import runs
from playlisteval.app import App
from playlisteval.settings import load_settings
from policies.selection import spread_seeds
from store.catalog import SeedRow

DOMAINS = ("cooking", "chess", "pottery")


def catalogue(segments_per_domain: int = 100, density: float = 0.3) -> list[SeedRow]:
    """Seeds as the catalogue lists them — (domain, segment_a, segment_b) order — over
    ``segments_per_domain`` segments a domain: a random ``density`` of the same-domain pairs
    (those in the cosine band)."""
    rng = random.Random(7)
    seeds: list[SeedRow] = []
    for domain in DOMAINS:
        names = [f"{domain}-{i // 10:02d}-s{i % 10:03d}" for i in range(segments_per_domain)]
        for a, b in combinations(names, 2):
            if a.split("-s")[0] != b.split("-s")[0] and rng.random() < density:
                seeds.append(
                    SeedRow(id=f"seed-{a}-{b}", domain=domain, segment_a=a, segment_b=b, cosine=0.6)
                )
    return seeds


def uses(chosen: list[SeedRow]) -> Counter[str]:
    return Counter(seg for s in chosen for seg in (s.segment_a, s.segment_b))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_hundred_seeds_of_300_segments_put_no_segment_in_more_than_k(k: int) -> None:
    seeds = catalogue()
    chosen, spread = spread_seeds(seeds, 100, per_segment=k, salt="s")
    assert len(chosen) == len({s.id for s in chosen}) == 100
    assert (spread.per_segment, spread.raised) == (k, False)
    assert max(uses(chosen).values()) <= k
    # Domains in turn: each gets its share, to one seed.
    per_domain = Counter(s.domain for s in chosen)
    assert set(per_domain) == set(DOMAINS)
    assert max(per_domain.values()) - min(per_domain.values()) <= 1
    # As evenly as k allows: 34 seeds of a 100-segment domain fit in one use each.
    assert max(uses(chosen).values()) == 1


def test_the_catalogues_order_would_pile_onto_one_segment() -> None:
    """What the spread is for: the first hundred seeds as listed use one segment again and
    again."""
    seeds = sorted(catalogue(), key=lambda s: (s.domain, s.segment_a, s.segment_b))
    first = seeds[:100]
    assert max(uses(first).values()) > 20
    chosen, _ = spread_seeds(seeds, 100, salt="s")
    assert max(uses(chosen).values()) == 1


def test_more_seeds_than_k_allows_raise_k_and_say_so() -> None:
    seeds = catalogue(segments_per_domain=20, density=1.0)
    chosen, spread = spread_seeds(seeds, 60, per_segment=1, salt="s")
    assert len(chosen) == 60
    assert spread.raised
    assert spread.per_segment > 1
    assert max(uses(chosen).values()) <= spread.per_segment
    assert spread.facts() == {"per_segment": spread.per_segment, "salt": "s", "raised": True}


def test_the_same_salt_gives_the_same_run_and_another_salt_another() -> None:
    seeds = catalogue()
    one, _ = spread_seeds(seeds, 100, salt="a")
    again, _ = spread_seeds(list(reversed(seeds)), 100, salt="a")
    other, _ = spread_seeds(seeds, 100, salt="b")
    assert [s.id for s in one] == [s.id for s in again]
    assert [s.id for s in one] != [s.id for s in other]


def test_every_seed_wanted_takes_every_seed_once() -> None:
    seeds = catalogue(segments_per_domain=20, density=0.5)
    chosen, spread = spread_seeds(seeds, None, salt="s")
    assert sorted(s.id for s in chosen) == sorted(s.id for s in seeds)
    assert max(uses(chosen).values()) <= spread.per_segment


def test_per_segment_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="per_segment"):
        spread_seeds(catalogue(10), 5, per_segment=0)


def test_a_workspace_run_spreads_a_300_segment_catalogue_by_default_and_records_how(
    workspace: Path,
) -> None:
    """Default settings, a real catalogue of 300 segments, 100 seeds (``--max-seeds 100``): no
    segment in more than ``curation.seeds_per_segment`` seeds, every domain's share within one
    seed of the others, each domain's segments covered as evenly as that allows, and the run's
    settings say how the seeds were spread."""
    with App(load_settings(workspace)) as app:
        app.catalog.replace_seeds(catalogue())
        chosen, spread = runs.choose_seeds(app, 100)
        recorded = runs.run_settings(app, set(), spread)["seeding"]
        k = app.settings.curation.seeds_per_segment
    assert len(chosen) == len({s.id for s in chosen}) == 100
    assert (spread.per_segment, spread.raised) == (k, False)
    assert recorded == {**spread.facts(), "candidates_per_segment": 16}
    used = uses(chosen)
    assert max(used.values()) <= k
    per_domain = Counter(s.domain for s in chosen)
    assert set(per_domain) == set(DOMAINS)
    assert max(per_domain.values()) - min(per_domain.values()) <= 1
    # 34 seeds need 68 of a domain's 100 segments: as evenly as k allows is once each.
    assert max(used.values()) == 1
    for domain in DOMAINS:
        assert sum(1 for seg in used if seg.startswith(domain)) == 2 * per_domain[domain]


def test_a_workspace_run_takes_the_configured_cap_and_salt(workspace: Path) -> None:
    """``curation.seeds_per_segment`` and ``seed_salt`` shape the run's seeds: another salt,
    another order; the cap holds."""
    one = load_settings(workspace, curation={"seeds_per_segment": 1, "seed_salt": "x"})
    other = load_settings(workspace, curation={"seeds_per_segment": 1, "seed_salt": "y"})
    with App(one) as app:
        app.catalog.replace_seeds(catalogue())
        first, spread = runs.choose_seeds(app, 60)
    with App(other) as app:
        second, _ = runs.choose_seeds(app, 60)
    assert spread.per_segment == 1
    assert max(uses(first).values()) == 1
    assert [s.id for s in first] != [s.id for s in second]
