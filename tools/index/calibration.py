"""Seed thresholds per embedder, and how to calibrate them on a catalogue (pure functions).

The paper's seed band [0.40, 0.90] and duplicate threshold 0.95 were chosen for
Qwen3-VL-Embedding: cosines mean different things in another embedder's space (the offline
embedder's cosine is about 0.64 × a MiniLM text cosine + 0.36 × a colour-statistics cosine), so
each embedder has its own stored band (:data:`SEED_BANDS`), which the ``seeds`` settings override.

:func:`calibrate` keeps the paper's intent, *related but distinct*, in the embedder's own terms:

* **related** — a seed is more alike than nearly all unrelated content: the band starts at the
  95th percentile of the cosines of segment pairs from *different* domains (with one domain there
  is no unrelated baseline, and the stored lower bound stays);
* **distinct** — a seed is not a near-copy: the band ends the paper's margin (0.05) below the
  duplicate threshold, as the paper's 0.90 sits below its 0.95.

It reports the same-domain pairs (of different videos: the candidates for seeds) as a histogram
and quantiles, the share inside the band in force and the suggested one, the share at or above
the duplicate threshold, and warns when a band would make almost no seeds or take almost every
pair (it then filters nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tools.index.seeding import SegmentRef, normalise_rows

__all__ = [
    "SEED_BANDS",
    "Calibration",
    "PairCosines",
    "SeedBand",
    "calibrate",
    "pair_cosines",
    "stored_band",
]

UNRELATED_QUANTILE = 0.95  # the band starts above this share of cross-domain pairs
DISTINCT_MARGIN = 0.05  # the paper's gap between its band's top (0.90) and duplicates (0.95)
FEW_SEEDS = 0.05  # a band keeping less than this share of same-domain pairs makes almost none
MOST_PAIRS = 0.95  # one keeping more than this share filters almost nothing
QUANTILES = (0.05, 0.25, 0.50, 0.75, 0.95)
BIN_WIDTH = 0.05


@dataclass(frozen=True)
class SeedBand:
    """Cosine thresholds of seeding for one embedder, and where they come from."""

    min_cosine: float
    max_cosine: float
    duplicate_cosine: float
    source: str

    def holds(self, cosine: float) -> bool:
        """Whether a pair at ``cosine`` is a seed under this band."""
        return self.min_cosine <= cosine <= self.max_cosine


PAPER_BAND = SeedBand(0.40, 0.90, 0.95, "the paper's, chosen for Qwen3-VL-Embedding")

# The offline embedder's band is what `playlisteval seeds --calibrate` suggests on the demo
# catalogue (3 domains x 3 episodes + a planted copy, segments of 1 minute): the cross-domain
# pairs reach 0.33 at their 95th percentile (0.39 at most) while same-domain pairs of different
# videos lie in 0.46-0.76, and the planted copy scores above 0.95.
SEED_BANDS: dict[str, SeedBand] = {
    "qwen3-vl-embedding": PAPER_BAND,
    "minilm-text+frame-stats": SeedBand(
        0.33, 0.90, 0.95, "`seeds --calibrate` on the demo catalogue (bench/RESULTS.md)"
    ),
}


def stored_band(embedder: str) -> SeedBand:
    """The band stored for ``embedder``; the paper's for an embedder with none of its own."""
    return SEED_BANDS.get(embedder, PAPER_BAND)


@dataclass(frozen=True)
class PairCosines:
    """Cosines of segment pairs of different videos: same domain (the seed candidates) and
    different domains (the unrelated baseline)."""

    same_domain: np.ndarray
    cross_domain: np.ndarray
    domains: int


def pair_cosines(segments: Sequence[SegmentRef], vectors: np.ndarray) -> PairCosines:
    """Every pair of segments from different videos, split by whether their domains match."""
    if len(segments) < 2:
        empty = np.zeros(0, dtype=np.float32)
        return PairCosines(empty, empty, len({s.domain for s in segments}))
    unit = normalise_rows(np.asarray(vectors, dtype=np.float32))
    sims = unit @ unit.T
    videos = np.array([s.video_id for s in segments])
    domains = np.array([s.domain for s in segments])
    upper = np.triu(np.ones_like(sims, dtype=bool), k=1) & (videos[:, None] != videos[None, :])
    same = upper & (domains[:, None] == domains[None, :])
    cross = upper & (domains[:, None] != domains[None, :])
    return PairCosines(sims[same], sims[cross], len(set(domains.tolist())))


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` found, ready to print."""

    pairs: int
    quantiles: dict[float, float]
    histogram: list[tuple[float, float, int]]  # (from, to, same-domain pairs)
    cross_quantiles: dict[float, float]
    current: SeedBand
    in_current: float  # share of same-domain pairs inside the band in force
    duplicates: float  # share at or above the duplicate threshold
    suggested: SeedBand
    in_suggested: float
    warnings: list[str] = field(default_factory=list)


def _share(values: np.ndarray, band: SeedBand) -> float:
    if values.size == 0:
        return 0.0
    return float(np.mean((values >= band.min_cosine) & (values <= band.max_cosine)))


def _histogram(values: np.ndarray) -> list[tuple[float, float, int]]:
    if values.size == 0:
        return []
    # A copy's cosine is 1 give or take float rounding: it belongs in the last bin, not past it.
    values = np.clip(values, -1.0, 1.0)
    low = math.floor(float(values.min()) / BIN_WIDTH + 1e-9) * BIN_WIDTH
    high = max(low + BIN_WIDTH, math.ceil(float(values.max()) / BIN_WIDTH - 1e-9) * BIN_WIDTH)
    edges = np.arange(round((high - low) / BIN_WIDTH) + 1) * BIN_WIDTH + low
    counts, _ = np.histogram(values, bins=edges)
    return [
        (round(float(a), 2), round(float(b), 2), int(n))
        for a, b, n in zip(edges[:-1], edges[1:], counts, strict=True)
    ]


def _warn(label: str, share: float, pairs: int) -> list[str]:
    if pairs == 0:
        return []
    if share < FEW_SEEDS:
        return [f"{label} keeps {share:.1%} of the same-domain pairs: almost no seeds; widen it"]
    if share > MOST_PAIRS:
        return [
            f"{label} keeps {share:.1%} of the same-domain pairs: it filters almost nothing "
            "(fine only when every same-domain pair is truly related and none is a near-copy)"
        ]
    return []


def calibrate(cosines: PairCosines, current: SeedBand) -> Calibration:
    """The distribution of same-domain pair cosines under ``current`` and a suggested band."""
    same, cross = cosines.same_domain, cosines.cross_domain
    warnings: list[str] = []
    lower = current.min_cosine
    if cross.size:
        # Rounded up to a hundredth (the band is quoted to two places); 1e-4 forgives float32.
        lower = math.ceil(float(np.quantile(cross, UNRELATED_QUANTILE)) * 100 - 1e-4) / 100
    else:
        warnings.append(
            f"one domain only: no unrelated pairs to measure, the lower bound stays {lower:.2f}"
        )
    upper = round(current.duplicate_cosine - DISTINCT_MARGIN, 2)
    if same.size and cross.size and float(np.median(same)) <= lower:
        warnings.append(
            "this embedder barely tells the domains apart here: half the same-domain pairs "
            f"score no higher than 95 % of the cross-domain ones ({lower:.2f})"
        )
    if upper <= lower:
        warnings.append(
            f"no band fits between unrelated pairs ({lower:.2f}) and near-copies "
            f"({current.duplicate_cosine:.2f}); the band in force is kept"
        )
        lower, upper = current.min_cosine, current.max_cosine
    suggested = SeedBand(lower, upper, current.duplicate_cosine, "suggested by calibration")
    in_current, in_suggested = _share(same, current), _share(same, suggested)
    same_band = (lower, upper) == (current.min_cosine, current.max_cosine)
    label = "the band in force" + (" (and the suggested one)" if same_band else "")
    warnings += _warn(
        f"{label} [{current.min_cosine:.2f}, {current.max_cosine:.2f}]", in_current, same.size
    )
    if not same_band:
        warnings += _warn(f"the suggested band [{lower:.2f}, {upper:.2f}]", in_suggested, same.size)
    return Calibration(
        pairs=int(same.size),
        quantiles={q: float(np.quantile(same, q)) for q in QUANTILES} if same.size else {},
        histogram=_histogram(same),
        cross_quantiles={q: float(np.quantile(cross, q)) for q in QUANTILES} if cross.size else {},
        current=current,
        in_current=in_current,
        duplicates=float(np.mean(same >= current.duplicate_cosine)) if same.size else 0.0,
        suggested=suggested,
        in_suggested=in_suggested,
        warnings=warnings,
    )
