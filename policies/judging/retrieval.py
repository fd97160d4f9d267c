"""Retrieval metrics: temporal IoU, recall@k of the gold evidence at tIoU thresholds, evidence
coverage and mean best IoU (:func:`retrieval_metrics`), each a mean over queries clustered by
playlist. Pure functions over plain data; stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policies.judging.estimates import Estimate, mean_estimate
from policies.judging.records import JudgingError, RetrievalCase, Span

IOU_THRESHOLDS: tuple[float, float, float] = (0.3, 0.5, 0.7)
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)


def temporal_iou(a: Span, b: Span) -> float:
    """Intersection over union of two spans' time (0 for disjoint, touching or other-video)."""
    if a.video_id != b.video_id:
        return 0.0
    intersection = max(0.0, min(a.end, b.end) - max(a.start, b.start))
    union = a.seconds + b.seconds - intersection
    return intersection / union


def _union_seconds(spans: Iterable[Span]) -> dict[str, list[tuple[float, float]]]:
    """Merge spans per video into disjoint, sorted intervals."""
    merged: dict[str, list[tuple[float, float]]] = {}
    for span in sorted(spans, key=lambda s: (s.video_id, s.start, s.end)):
        intervals = merged.setdefault(span.video_id, [])
        if intervals and span.start <= intervals[-1][1]:
            intervals[-1] = (intervals[-1][0], max(intervals[-1][1], span.end))
        else:
            intervals.append((span.start, span.end))
    return merged


def evidence_coverage(gold: Sequence[Span], retrieved: Sequence[Span]) -> float:
    """Share of the gold spans' seconds (their union) covered by the union of retrieved spans."""
    if not gold:
        raise JudgingError("evidence coverage needs at least one gold span, got none")
    gold_union, got = _union_seconds(gold), _union_seconds(retrieved)
    total = covered = 0.0
    for video, intervals in gold_union.items():
        for start, end in intervals:
            total += end - start
            for r_start, r_end in got.get(video, []):
                covered += max(0.0, min(end, r_end) - max(start, r_start))
    return covered / total


def recall_at_k(gold: Sequence[Span], ranked: Sequence[Span], k: int, threshold: float) -> float:
    """Share of gold spans matched (tIoU >= ``threshold``) by any of the top ``k`` retrieved."""
    if not gold:
        raise JudgingError("recall needs at least one gold span, got none")
    if k < 1:
        raise JudgingError(f"recall@k needs k >= 1, got k={k!r}")
    top = ranked[:k]
    matched = sum(1 for g in gold if any(temporal_iou(g, r) >= threshold for r in top))
    return matched / len(gold)


def best_iou(gold: Sequence[Span], retrieved: Sequence[Span]) -> float:
    """Mean over gold spans of the best tIoU any retrieved span reaches (0 with none retrieved)."""
    if not gold:
        raise JudgingError("best IoU needs at least one gold span, got none")
    return math.fsum(max((temporal_iou(g, r) for r in retrieved), default=0.0) for g in gold) / len(
        gold
    )


@dataclass(frozen=True)
class RetrievalMetrics:
    """Retriever quality over ``cases`` queries, each a mean over queries clustered by playlist.

    ``recall[(k, threshold)]`` is recall@k at that tIoU; ``coverage`` and ``mean_best_iou`` use
    every retrieved span of a case.
    """

    cases: int
    recall: dict[tuple[int, float], Estimate]
    coverage: Estimate
    mean_best_iou: Estimate


def retrieval_metrics(
    cases: Iterable[RetrievalCase],
    ks: Sequence[int] = DEFAULT_KS,
    thresholds: Sequence[float] = IOU_THRESHOLDS,
) -> RetrievalMetrics:
    """Recall@k at each tIoU threshold, evidence coverage and mean best IoU over the cases.

    Raises :class:`JudgingError` for no cases or a case without gold spans.
    """
    items = list(cases)
    if not items:
        raise JudgingError("retrieval_metrics needs at least one case, got none")
    for case in items:
        if not case.gold:
            raise JudgingError(f"retrieval case {case.pair_id!r} has no gold spans")
    clusters = [case.playlist_id for case in items]
    recall = {
        (k, t): mean_estimate([recall_at_k(c.gold, c.retrieved, k, t) for c in items], clusters)
        for k in ks
        for t in thresholds
    }
    return RetrievalMetrics(
        cases=len(items),
        recall=recall,
        coverage=mean_estimate([evidence_coverage(c.gold, c.retrieved) for c in items], clusters),
        mean_best_iou=mean_estimate([best_iou(c.gold, c.retrieved) for c in items], clusters),
    )
