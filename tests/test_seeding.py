"""Segments, near-duplicates and seeds as pure functions over vectors."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tools.index.seeding import (
    SegmentRef,
    find_near_duplicates,
    find_seeds,
    normalise_rows,
    plan_segments,
    seed_id,
    segment_vector,
)


@pytest.mark.parametrize(
    ("n_chunks", "duration", "expected_sizes"),
    [
        (0, 0.0, []),
        (1, 12.0, [1]),  # shorter than a chunk: one chunk, one segment
        (10, 300.0, [10]),  # 5 min < 10 min minimum: the whole video is one segment
        (40, 1200.0, [40]),  # 20 min: exactly one target-length segment
        (60, 1800.0, [30, 30]),  # 30 min: two of 15 rather than one of 30
        (120, 3600.0, [40, 40, 40]),  # 1 h: three of 20 min
        (121, 3605.0, [41, 40, 40]),  # pieces differ by at most one chunk
        (200, 6000.0, [40, 40, 40, 40, 40]),
    ],
)
def test_plan_segments_splits_into_target_length_pieces(
    n_chunks: int, duration: float, expected_sizes: list[int]
) -> None:
    spans = plan_segments(n_chunks, 30.0, min_s=600, target_s=1200, max_s=1800, duration_s=duration)
    assert [s.chunk_end - s.chunk_start for s in spans] == expected_sizes
    assert [s.idx for s in spans] == list(range(len(expected_sizes)))
    if spans:
        assert spans[0].chunk_start == 0
        assert spans[-1].chunk_end == n_chunks
        assert all(a.chunk_end == b.chunk_start for a, b in itertools.pairwise(spans))


def test_plan_segments_keeps_every_piece_within_bounds_when_it_can() -> None:
    for n in range(20, 400, 7):
        spans = plan_segments(n, 30.0, min_s=600, target_s=1200, max_s=1800)
        lengths = [(s.chunk_end - s.chunk_start) * 30.0 for s in spans]
        assert all(600 - 30 <= x <= 1800 + 30 for x in lengths), (n, lengths)


def test_segment_vector_is_the_normalised_mean() -> None:
    chunks = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    got = segment_vector(chunks)
    np.testing.assert_allclose(got, [2**-0.5, 2**-0.5], rtol=1e-6)
    assert got.dtype == np.float32


def _refs(spec: list[tuple[str, str, str]]) -> list[SegmentRef]:
    return [SegmentRef(segment_id=s, video_id=v, domain=d) for s, v, d in spec]


def test_near_duplicates_drop_the_later_video_and_keep_the_earliest_copy() -> None:
    rng = np.random.default_rng(0)
    base = normalise_rows(rng.normal(size=(2, 16)))
    other = normalise_rows(rng.normal(size=(2, 16)))
    refs = _refs(
        [
            ("a-s0", "a", "x"),
            ("a-s1", "a", "x"),
            ("b-s0", "b", "x"),
            ("b-s1", "b", "x"),
            ("c-s0", "c", "x"),  # a copy of a's first segment
            ("d-s0", "d", "y"),  # a copy of c (itself a copy of a): dropped against a, not c
        ]
    )
    vectors = np.vstack([base, other, base[:1], base[:1] + 1e-4])
    findings = find_near_duplicates(["a", "b", "c", "d"], refs, vectors, 0.95)
    assert [(f.video_id, f.kept_video_id) for f in findings] == [("c", "a"), ("d", "a")]
    assert findings[0].segment_id == "c-s0"
    assert findings[0].kept_segment_id == "a-s0"
    assert findings[0].cosine == pytest.approx(1.0, abs=1e-6)


def test_near_duplicates_follow_video_order_not_segment_order() -> None:
    v = normalise_rows(np.array([[1.0, 0.0, 0.0]]))
    refs = _refs([("late-s0", "late", "x"), ("early-s0", "early", "x")])
    findings = find_near_duplicates(["early", "late"], refs, np.vstack([v, v]), 0.95)
    assert [(f.video_id, f.kept_video_id) for f in findings] == [("late", "early")]


def _vec(angle_deg: float) -> np.ndarray:
    a = np.deg2rad(angle_deg)
    return np.array([np.cos(a), np.sin(a)], dtype=np.float32)


def test_seeds_are_same_domain_pairs_of_different_videos_within_the_cosine_band() -> None:
    refs = _refs(
        [
            ("a-s0", "a", "x"),
            ("a-s1", "a", "x"),  # same video as a-s0: never a seed with it
            ("b-s0", "b", "x"),
            ("c-s0", "c", "y"),  # other domain: never a seed with x
        ]
    )
    # cos(a-s0, b-s0) = cos 60° = 0.5 (in band); cos(a-s1, b-s0) = cos 10° = 0.985 (too close)
    vectors = np.vstack([_vec(0), _vec(50), _vec(60), _vec(30)])
    seeds = find_seeds(refs, vectors, min_cosine=0.40, max_cosine=0.90)
    assert [(s.segment_a, s.segment_b) for s in seeds] == [("a-s0", "b-s0")]
    assert seeds[0].cosine == pytest.approx(0.5, abs=1e-6)
    assert seeds[0].seed_id == seed_id("b-s0", "a-s0")
    assert seeds[0].domain == "x"


@pytest.mark.parametrize(
    ("angle", "kept"), [(66.5, False), (66.3, True), (25.9, True), (25.7, False)]
)
def test_seed_band_edges(angle: float, kept: bool) -> None:
    # cos 66.42° = 0.40 and cos 25.84° = 0.90
    refs = _refs([("a-s0", "a", "x"), ("b-s0", "b", "x")])
    seeds = find_seeds(refs, np.vstack([_vec(0), _vec(angle)]), min_cosine=0.40, max_cosine=0.90)
    assert bool(seeds) is kept


def test_seed_order_and_ids_are_deterministic() -> None:
    rng = np.random.default_rng(1)
    refs = _refs([(f"v{i}-s0", f"v{i}", "xy"[i % 2]) for i in range(12)])
    base = rng.normal(size=(1, 8))
    vectors = base + 0.8 * rng.normal(size=(12, 8))
    one = find_seeds(refs, vectors, min_cosine=0.0, max_cosine=0.99)
    two = find_seeds(list(reversed(refs)), vectors[::-1], min_cosine=0.0, max_cosine=0.99)
    assert one == two
    assert one == sorted(one, key=lambda s: (s.domain, s.segment_a, s.segment_b))
    assert len({s.seed_id for s in one}) == len(one)


def test_a_tie_within_float_noise_names_the_first_pair_whatever_the_noise() -> None:
    """A copy ties at cosine 1.0 on every segment; the engines' float noise (1e-7) must not
    decide which pair the finding names: the first within TIE_COSINE does."""
    segments = [
        SegmentRef(segment_id=s, video_id=v, domain="d")
        for s, v in (("a-s0", "a"), ("a-s1", "a"), ("b-s0", "b"), ("b-s1", "b"))
    ]
    base = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    for noise in (0.0, 1e-3, -1e-3):
        copy = base.copy()
        copy[0] = [1.0, noise, 0.0]  # s0's cosine a hair (5e-7) below s1's 1.0: noise
        vectors = np.vstack([base, copy])
        [found] = find_near_duplicates(["a", "b"], segments, vectors, 0.95)
        assert (found.segment_id, found.kept_segment_id) == ("b-s0", "a-s0"), noise


# -- seeds in linear space (issue 43) -----------------------------------------------------------


def _random_domain(n: int, seed: int = 3) -> tuple[list[SegmentRef], np.ndarray]:
    rng = np.random.default_rng(seed)
    refs = _refs([(f"v{i // 2}-s{i % 2}", f"v{i // 2}", "x") for i in range(n)])
    base = rng.normal(size=(1, 16))
    return refs, base + 0.9 * rng.normal(size=(n, 16))


@pytest.mark.parametrize("k", [1, 3, 8])
def test_each_segment_keeps_its_k_most_similar_partners_in_the_band(k: int) -> None:
    refs, vectors = _random_domain(60)
    every = find_seeds(refs, vectors, min_cosine=0.2, max_cosine=0.95)
    kept = find_seeds(refs, vectors, min_cosine=0.2, max_cosine=0.95, per_segment=k)
    assert set(kept) <= set(every)
    for ref in refs:
        partners = sorted(
            (s for s in every if ref.segment_id in (s.segment_a, s.segment_b)),
            key=lambda s: (-s.cosine, s.seed_id),
        )
        mine = {s for s in kept if ref.segment_id in (s.segment_a, s.segment_b)}
        # Its own k best are all kept (others may have chosen it too).
        best = {s.seed_id for s in partners[:k]}
        assert best <= {s.seed_id for s in mine}
        assert all(s in every for s in mine)
    # A pair is kept only when one of its segments ranks the other in its k.
    assert len(kept) <= k * len(refs)


def test_seeds_grow_with_the_segments_not_their_square() -> None:
    small_refs, small = _random_domain(100)
    large_refs, large = _random_domain(400)
    band = {"min_cosine": 0.1, "max_cosine": 0.99}
    every = [len(find_seeds(r, v, **band)) for r, v in ((small_refs, small), (large_refs, large))]
    kept = [
        len(find_seeds(r, v, **band, per_segment=4))
        for r, v in ((small_refs, small), (large_refs, large))
    ]
    assert every[1] / every[0] > 12  # about (400 / 100)² = 16
    assert kept[1] / kept[0] < 4.5  # about 400 / 100 = 4
    assert kept[1] <= 4 * 400


def test_a_k_above_every_segments_partners_keeps_every_pair() -> None:
    refs, vectors = _random_domain(30)
    every = find_seeds(refs, vectors, min_cosine=0.2, max_cosine=0.95)
    assert find_seeds(refs, vectors, min_cosine=0.2, max_cosine=0.95, per_segment=30) == every


def test_at_demo_scale_the_default_k_keeps_every_seed(demo_home: Path) -> None:
    """The demo workspace's seeds, computed with the default candidates a segment (16) and
    with every pair: the same set, so the demo's accepted items are unchanged."""
    from playlisteval.settings import SeedSettings
    from store.catalog import INDEXED, Catalog, vectors_from_bytes

    catalog = Catalog.open(demo_home / "playlisteval.db")
    try:
        order = [v.id for v in catalog.videos(statuses=[INDEXED])]
        rows = catalog.segments(video_ids=order)
        refs = [SegmentRef(r.id, r.video_id, r.domain) for r in rows]
        vectors = vectors_from_bytes([r.vector for r in rows])
        stored = {s.id for s in catalog.seeds()}
    finally:
        catalog.close()
    band = {"min_cosine": 0.33, "max_cosine": 0.90}
    k = SeedSettings().candidates_per_segment
    assert k == 16
    kept = find_seeds(refs, vectors, **band, per_segment=k)
    assert kept == find_seeds(refs, vectors, **band)
    assert {s.seed_id for s in kept} == stored
