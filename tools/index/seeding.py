"""From chunk vectors to segments, near-duplicates and seeds: pure functions over arrays.

The paper (Automatic Indexing; 3.1): chunk embeddings are averaged over 10–30-minute segments;
segments of different videos above cosine 0.95 are near-duplicates and the later video leaves;
a seed is two same-domain segments of different videos with cosine in [0.40, 0.90].
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SegmentSpan:
    """Chunks ``[chunk_start, chunk_end)`` of one video form one segment."""

    idx: int
    chunk_start: int
    chunk_end: int


def plan_segments(
    n_chunks: int,
    chunk_s: float,
    *,
    min_s: float,
    target_s: float,
    max_s: float,
    duration_s: float | None = None,
) -> list[SegmentSpan]:
    """Split a video's chunks into consecutive segments of about ``target_s`` seconds.

    The count is the one closest to ``duration / target_s`` whose pieces all fit in
    [``min_s``, ``max_s``]; pieces differ by at most one chunk. A video shorter than ``min_s`` is
    one segment: it is still evidence, just shorter than the paper's segments.
    """
    if n_chunks <= 0:
        return []
    duration = duration_s if duration_s is not None else n_chunks * chunk_s
    fewest = max(1, math.ceil(duration / max_s - 1e-9))
    most = max(fewest, math.floor(duration / min_s + 1e-9))
    count = min(max(round(duration / target_s), fewest), most, n_chunks)
    count = max(count, 1)
    base, extra = divmod(n_chunks, count)
    spans: list[SegmentSpan] = []
    start = 0
    for i in range(count):
        size = base + (1 if i < extra else 0)
        spans.append(SegmentSpan(idx=i, chunk_start=start, chunk_end=start + size))
        start += size
    return spans


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(matrix / np.where(norms == 0, 1.0, norms), dtype=np.float32)


def segment_vector(chunk_vectors: np.ndarray) -> np.ndarray:
    """Normalised mean of a segment's chunk vectors."""
    mean = chunk_vectors.astype(np.float64).mean(axis=0, keepdims=True)
    unit: np.ndarray = normalise_rows(mean)[0]
    return unit


@dataclass(frozen=True)
class SegmentRef:
    """What seeding needs to know of a segment."""

    segment_id: str
    video_id: str
    domain: str


@dataclass(frozen=True)
class DuplicateFinding:
    """``video_id`` repeats ``kept_video_id``: its best-matching segment pair and their cosine."""

    video_id: str
    kept_video_id: str
    segment_id: str
    kept_segment_id: str
    cosine: float


TIE_COSINE = 1e-5  # cosines this close are the same figure (float noise between batchings)


def find_near_duplicates(
    video_order: Sequence[str],
    segments: Sequence[SegmentRef],
    vectors: np.ndarray,
    threshold: float,
) -> list[DuplicateFinding]:
    """Walk videos in order; a video with any segment above ``threshold`` against a segment of a
    video already kept is a duplicate (the earlier one stays), and is itself not kept.

    Greedy in order so that of a set of copies exactly the earliest survives, and a video is
    never dropped because of a copy that was dropped itself.
    """
    by_video: dict[str, list[int]] = {}
    for i, seg in enumerate(segments):
        by_video.setdefault(seg.video_id, []).append(i)
    unit = normalise_rows(vectors) if len(segments) else vectors
    kept_rows: list[int] = []
    findings: list[DuplicateFinding] = []
    for video_id in video_order:
        rows = by_video.get(video_id, [])
        if not rows:
            continue
        if kept_rows:
            sims = unit[rows] @ unit[kept_rows].T
            # The pair that names the finding: the first (in segment order) within TIE_COSINE
            # of the best. Vectors embedded in other batches (the Ray engine, a resumed run)
            # differ by float noise, and copies tie at 1.0: noise must not pick another pair.
            near = np.flatnonzero(sims.ravel() >= float(sims.max()) - TIE_COSINE)
            best = np.unravel_index(int(near[0]), sims.shape)
            top = float(sims[best])
            if float(sims.max()) > threshold:
                mine, theirs = segments[rows[best[0]]], segments[kept_rows[best[1]]]
                findings.append(
                    DuplicateFinding(
                        video_id=video_id,
                        kept_video_id=theirs.video_id,
                        segment_id=mine.segment_id,
                        kept_segment_id=theirs.segment_id,
                        cosine=top,
                    )
                )
                continue
        kept_rows.extend(rows)
    return findings


@dataclass(frozen=True)
class SeedPair:
    """Two segments of one domain, from different videos, with their cosine."""

    seed_id: str
    domain: str
    segment_a: str
    segment_b: str
    cosine: float


def seed_id(segment_a: str, segment_b: str) -> str:
    """Stable id of an unordered segment pair."""
    a, b = sorted((segment_a, segment_b))
    return "seed-" + hashlib.sha1(f"{a}|{b}".encode()).hexdigest()[:16]


def _top_partners(ok: np.ndarray, sims: np.ndarray, ids: Sequence[str], k: int) -> np.ndarray:
    """``ok`` kept where the column is among the row's ``k`` most similar allowed partners (or
    the row among the column's): a symmetric mask of at most ``k`` a row's own choices."""
    order = sorted(range(len(ids)), key=lambda i: ids[i])
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    keep = np.zeros_like(ok)
    for i in range(len(ids)):
        allowed = np.nonzero(ok[i])[0]
        if len(allowed) > k:
            # Highest cosine first, then the partner's segment id (lexsort: last key first).
            allowed = allowed[np.lexsort((rank[allowed], -sims[i, allowed]))[:k]]
        keep[i, allowed] = True
    out: np.ndarray = keep | keep.T
    return out


def find_seeds(
    segments: Sequence[SegmentRef],
    vectors: np.ndarray,
    *,
    min_cosine: float,
    max_cosine: float,
    per_segment: int | None = None,
) -> list[SeedPair]:
    """Every same-domain pair of segments from different videos with cosine in the range —
    or, with ``per_segment`` (k), the pairs among each segment's k most similar partners in
    the range (a pair is kept when either segment ranks the other in its k), so the seeds grow
    with the segments (at most k a segment), not with their square. A run takes each segment
    into a few seeds only (``curation.seeds_per_segment``), so a k above that loses it
    nothing it would use but choice.

    Deterministic: sorted by domain, then by the pair's segment ids (a < b); ties in a
    segment's ranking are broken by the partner's segment id.
    """
    if not segments:
        return []
    unit = normalise_rows(vectors)
    by_domain: dict[str, list[int]] = {}
    for i, seg in enumerate(segments):
        by_domain.setdefault(seg.domain, []).append(i)
    seeds: list[SeedPair] = []
    for domain in sorted(by_domain):
        rows = by_domain[domain]
        sims = unit[rows] @ unit[rows].T
        videos = np.array([segments[r].video_id for r in rows])
        ok = (sims >= min_cosine) & (sims <= max_cosine) & (videos[:, None] != videos[None, :])
        if per_segment is not None:
            ok = _top_partners(ok, sims, [segments[r].segment_id for r in rows], per_segment)
        upper = np.triu(ok, k=1)
        for i, j in zip(*np.nonzero(upper), strict=True):
            a, b = segments[rows[int(i)]].segment_id, segments[rows[int(j)]].segment_id
            a, b = sorted((a, b))
            seeds.append(
                SeedPair(
                    seed_id=seed_id(a, b),
                    domain=domain,
                    segment_a=a,
                    segment_b=b,
                    cosine=float(sims[i, j]),
                )
            )
    seeds.sort(key=lambda s: (s.domain, s.segment_a, s.segment_b))
    return seeds
