"""Playlist-clustered bootstrap intervals: what they resample, and values a reader can check.

With two clusters a resample takes cluster A twice, B twice, or one of each, so the 2.5 and 97.5
percentiles over 2000 resamples are the two clusters' own means (each drawn twice a quarter of
the time): the interval is known exactly without running a bootstrap by hand.
"""

from __future__ import annotations

import pytest

from policies.bootstrap import (
    Interval,
    IntervalError,
    cluster_bootstrap,
    clustered_interval,
)


def test_two_clusters_give_the_two_cluster_means_whatever_their_sizes() -> None:
    # Playlist A: three judgments, mean 1/3; playlist B: one judgment, 1.0. A resample of one
    # of each weighs every judgment alike, (0 + 0 + 1 + 1) / 4 = 0.5: strictly inside.
    values = [0.0, 0.0, 1.0, 1.0]
    found = cluster_bootstrap(values, ["A", "A", "A", "B"])
    assert found == pytest.approx((1 / 3, 1.0))


def test_the_interval_holds_the_mean_lies_within_the_cluster_means_and_repeats() -> None:
    values = [1, 1, 0, 1, 0, 0, 1, 1, 1, 0.5, 0.5, 1]
    playlists = ["A"] * 4 + ["B"] * 4 + ["C"] * 4
    pairs = [f"p{i // 2}" for i in range(12)]
    first = clustered_interval(values, playlists, pairs)
    assert isinstance(first, Interval)
    assert first.resampled == "playlists"
    assert first.clusters == 3
    mean = sum(values) / len(values)
    means = [sum(values[i : i + 4]) / 4 for i in (0, 4, 8)]
    assert min(means) <= first.low <= mean <= first.high <= max(means)
    assert first.low < first.high
    assert clustered_interval(values, playlists, pairs) == first  # seeded: the same again
    other = clustered_interval(values, playlists, pairs, seed=1)
    assert other is not None
    assert other.low <= mean <= other.high


def test_one_playlist_resamples_pairs_and_one_pair_gives_no_interval() -> None:
    # Both orders of a pair stay together: pairs p0 (1, 1) and p1 (0, 0) -> exactly [0, 1].
    by_pair = clustered_interval([1, 1, 0, 0], ["A"] * 4, ["p0", "p0", "p1", "p1"])
    assert by_pair == Interval(0.0, 1.0, "pairs", 2)
    assert clustered_interval([1, 0], ["A", "A"], ["p0", "p0"]) is None


def test_more_playlists_narrow_the_interval() -> None:
    """The same spread over 4 and over 40 playlists: the mean is surer with more."""

    def width(playlists: int) -> float:
        values = [float(i % 2) for i in range(playlists)]
        found = clustered_interval(values, list(range(playlists)), list(range(playlists)))
        assert found is not None
        return found.high - found.low

    assert width(40) < width(4)


@pytest.mark.parametrize(
    ("values", "playlists", "pairs", "message"),
    [
        ([], [], [], "at least one value"),
        ([1.0, 0.0], ["A"], ["p0", "p1"], "each value needs its cluster"),
        ([1.0, 0.0], ["A", "B"], ["p0"], "each value needs its pair"),
    ],
)
def test_values_without_their_clusters_are_refused(
    values: list[float], playlists: list[str], pairs: list[str], message: str
) -> None:
    with pytest.raises(IntervalError, match=message):
        clustered_interval(values, playlists, pairs)
