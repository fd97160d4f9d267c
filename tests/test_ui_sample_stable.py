"""A seeded validation sample is the same pairs in every release: the same benchmark, size and
seed give these ids, whichever water filling shares the sample out and however the remainder
that does not divide evenly is placed (the seed's shuffle of the open cells decides it)."""

from __future__ import annotations

import pytest

from playlisteval.ui.benchmark import BenchmarkPair, draw_sample

# Three domains of uneven size and gaps, so both the domains' and the gaps' shares leave
# remainders for the seed to place.
CELLS = (
    [("a", 1)] * 10
    + [("a", 2)] * 10
    + [("a", 3)] * 1
    + [("b", 1)] * 2
    + [("b", 4)] * 30
    + [("c", 2)] * 3
    + [("c", 5)] * 4
)
PAIRS = [BenchmarkPair(f"p{i:03d}", "q", "c", "r", d, g, ()) for i, (d, g) in enumerate(CELLS)]


@pytest.mark.parametrize(
    ("size", "seed", "ids"),
    [
        (4, 1, ("p020", "p022", "p038", "p053")),
        (5, 7, ("p001", "p020", "p021", "p055", "p057")),
        (5, 8, ("p020", "p021", "p025", "p053", "p057")),
        (
            11,
            7,
            (
                "p000",
                "p001",
                "p018",
                "p020",
                "p021",
                "p022",
                "p024",
                "p053",
                "p054",
                "p056",
                "p059",
            ),
        ),
        (
            20,
            3,
            (
                "p001",
                "p007",
                "p009",
                "p010",
                "p019",
                "p020",
                "p021",
                "p022",
                "p029",
                "p038",
                "p040",
                "p045",
                "p049",
                "p053",
                "p054",
                "p055",
                "p056",
                "p057",
                "p058",
                "p059",
            ),
        ),
    ],
)
def test_a_seeded_sample_is_the_same_pairs_in_every_release(
    size: int, seed: int, ids: tuple[str, ...]
) -> None:
    assert draw_sample(PAIRS, size, seed) == ids
