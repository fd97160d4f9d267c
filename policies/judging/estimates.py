"""Means with their standard errors, and the tests the judge metrics use.

A mean over units carries a plain standard error and one clustered by playlist
(:func:`mean_estimate`); :func:`sign_test_p` and :func:`two_sided_normal_p` give the paired
test's p-values. Pure functions over plain data; stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from policies.judging.records import JudgingError


@dataclass(frozen=True)
class Estimate:
    """A mean over ``n`` units from ``clusters`` playlists, with a plain and a clustered SE.

    ``se`` is the sample standard deviation over ``sqrt(n)`` (``None`` when ``n < 2``);
    ``clustered_se`` is the cluster-robust SE of the mean by playlist (``None`` when fewer than two
    playlists). With one unit per playlist the two coincide.
    """

    value: float
    n: int
    clusters: int
    se: float | None
    clustered_se: float | None


def plain_se(values: Sequence[float]) -> float | None:
    """``sqrt(sum (x - mean)**2 / (n - 1)) / sqrt(n)``; ``None`` for fewer than two values."""
    n = len(values)
    if n == 0:
        raise JudgingError("a standard error needs at least one value, got none")
    if n < 2:
        return None
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1) / n)


def clustered_se(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Cluster-robust SE of the mean: ``sqrt(G/(G-1) * sum_g (sum_{i in g} (x_i - mean))**2) / n``.

    ``clusters[i]`` names the cluster (playlist) of ``values[i]``; ``G`` is the number of distinct
    clusters. ``None`` when ``G < 2`` (one cluster carries no information about its own spread).
    """
    if len(values) != len(clusters):
        raise JudgingError(
            f"each value needs its cluster, got {len(values)!r} values and {len(clusters)!r} "
            "cluster labels"
        )
    n = len(values)
    if n == 0:
        raise JudgingError("a standard error needs at least one value, got none")
    mean = math.fsum(values) / n
    sums: dict[Hashable, list[float]] = {}
    for x, g in zip(values, clusters, strict=True):
        sums.setdefault(g, []).append(x - mean)
    groups = len(sums)
    if groups < 2:
        return None
    total = math.fsum(math.fsum(residuals) ** 2 for residuals in sums.values())
    return math.sqrt(groups / (groups - 1) * total) / n


def mean_estimate(values: Sequence[float], clusters: Sequence[Hashable]) -> Estimate:
    """The mean of ``values`` with its plain and playlist-clustered standard errors.

    Raises :class:`JudgingError` when ``values`` is empty or the lengths differ.
    """
    if not values:
        raise JudgingError("a mean needs at least one value, got none")
    return Estimate(
        value=math.fsum(values) / len(values),
        n=len(values),
        clusters=len(set(clusters)),
        se=plain_se(values),
        clustered_se=clustered_se(values, clusters),
    )


def normal_cdf(x: float) -> float:
    """The standard normal CDF, ``(1 + erf(x / sqrt 2)) / 2``."""
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def two_sided_normal_p(z: float) -> float:
    """``P(|Z| >= |z|)`` for a standard normal ``Z``, via ``erfc`` to keep small p exact."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided sign (McNemar) test: ``min(1, 2 * P(X <= min(b, c)))``, X ~ Bin(b+c, 1/2).

    ``wins`` and ``losses`` are the two discordant counts; with none at all the p-value is 1.
    """
    if wins < 0 or losses < 0:
        raise JudgingError(f"discordant counts must be >= 0, got {wins!r} and {losses!r}")
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
    return min(1.0, 2 * tail / (1 << n))
