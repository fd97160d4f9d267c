"""95 % percentile-bootstrap intervals of a mean, resampling whole playlists (or pairs).

A judge's verdicts on pairs of one playlist are not independent draws (the same videos, the same
questioner), so an interval that resamples single verdicts is too narrow. :func:`clustered_interval`
resamples whole clusters with replacement: the playlists when the units span two or more, else the
pairs (both answer orders of a pair stay together). It is seeded, so the same values give the same
interval, and vectorised: one multinomial draw of how often each cluster is taken per resample,
as :mod:`policies.agreement` draws its items.

With few playlists (a demo has three) the percentile interval is rough and tends to be too
narrow; the interval says what it resampled and how many, so a reader can judge.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from store.errors import PlaylistEvalError

BOOTSTRAP_DRAWS = 2000
"""Resamples behind each interval."""
LEVEL = 0.95
"""The intervals' coverage."""


class IntervalError(PlaylistEvalError, ValueError):
    """The values cannot give an interval (lengths differ, no value)."""


@dataclass(frozen=True)
class Interval:
    """A percentile-bootstrap interval ``[low, high]`` of a mean.

    ``resampled`` says which clusters were drawn with replacement (``"playlists"``, or
    ``"pairs"`` when every unit is in one playlist) and ``clusters`` how many there were.
    """

    low: float
    high: float
    resampled: Literal["playlists", "pairs"]
    clusters: int


def cluster_bootstrap(
    values: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = 0,
) -> tuple[float, float] | None:
    """The 95 % percentile interval of the mean of ``values`` over ``draws`` resamples of whole
    clusters (``clusters[i]`` is the cluster of ``values[i]``) with replacement; None with fewer
    than two clusters, where resampling says nothing about the spread."""
    if len(values) != len(clusters):
        raise IntervalError(
            f"each value needs its cluster, got {len(values)!r} values and {len(clusters)!r} "
            "cluster labels"
        )
    index = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    groups = len(index)
    if groups < 2:
        return None
    sums, counts = np.zeros(groups), np.zeros(groups)
    for value, cluster in zip(values, clusters, strict=True):
        sums[index[cluster]] += value
        counts[index[cluster]] += 1
    rng = np.random.default_rng(seed)
    taken = rng.multinomial(groups, np.full(groups, 1.0 / groups), size=draws).astype(float)
    # Every cluster holds at least one value and every resample takes ``groups`` clusters.
    means = (taken @ sums) / (taken @ counts)
    tail = (1.0 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def clustered_interval(
    values: Sequence[float],
    playlists: Sequence[Hashable],
    pairs: Sequence[Hashable],
    *,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = 0,
) -> Interval | None:
    """The 95 % interval of the mean of ``values`` resampling playlists, or pairs when all the
    values come from one playlist; None when there is only one pair too.

    ``playlists[i]`` and ``pairs[i]`` are the playlist and the pair of ``values[i]``.
    """
    if not values:
        raise IntervalError("an interval needs at least one value, got none")
    if len(pairs) != len(values):
        raise IntervalError(
            f"each value needs its pair, got {len(values)!r} values and {len(pairs)!r} pairs"
        )
    found = cluster_bootstrap(values, playlists, draws=draws, seed=seed)
    if found is not None:
        return Interval(found[0], found[1], "playlists", len(set(playlists)))
    found = cluster_bootstrap(values, pairs, draws=draws, seed=seed)
    if found is not None:
        return Interval(found[0], found[1], "pairs", len(set(pairs)))
    return None
