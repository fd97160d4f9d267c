"""Judges evaluated on preference pairs: the records an evaluation keeps, and their metrics.

A pairwise judge sees one pair twice, once with the preferred answer first (``"chosen_first"``)
and once with it second (``"rejected_first"``). Each :class:`Judgment` records which *position* it
picked (``"first"``, ``"second"``, ``"tie"``, or ``None`` when the verdict could not be parsed).

The package is four rooms:

* :mod:`policies.judging.records`: the record schemas every reader of an evaluation shares — the
  :class:`Condition` a judge was shown (:func:`parse_condition`, :meth:`Condition.label`), the
  :class:`JudgmentRecord` (one line of ``judgments.jsonl``) with its :class:`SpanRecord` spans
  and what it was :class:`Shown`, and the :class:`Judgment`, :class:`Span` and
  :class:`RetrievalCase` the metrics read;
* :mod:`policies.judging.estimates`: means with plain and playlist-clustered standard errors
  (:func:`mean_estimate`) and the p-values of the paired test;
* :mod:`policies.judging.metrics`: accuracy (strict, answered-only, swap-averaged, consistent),
  position consistency and bias, each micro and per domain, gap and length
  (:func:`judge_metrics`), and the paired test between two runs (:func:`paired_test`);
* :mod:`policies.judging.retrieval`: temporal IoU, recall@k, evidence coverage and mean best IoU
  (:func:`retrieval_metrics`).

Every public name is handed on here, so ``from policies.judging import …`` reads as before.
Pure functions over plain data; no I/O, stdlib only.
"""

from policies.judging.estimates import (
    Estimate,
    clustered_se,
    mean_estimate,
    normal_cdf,
    plain_se,
    sign_test_p,
    two_sided_normal_p,
)
from policies.judging.metrics import (
    METRICS,
    Breakdown,
    JudgedPair,
    JudgeMetrics,
    MetricTable,
    PairedTest,
    Stratum,
    accuracy,
    answered_accuracy,
    consistent_accuracy,
    judge_metrics,
    judged_pairs,
    metric_table,
    paired_test,
    position_bias,
    position_consistency,
    split_runs,
    strict_accuracy,
    swap_averaged_accuracy,
)
from policies.judging.records import (
    CONDITION_FIELDS,
    DEFAULT_RESOLUTION,
    ORDERS,
    PICKED_BY_VERDICT,
    PICKS,
    Condition,
    FrameSampling,
    JudgingError,
    Judgment,
    JudgmentRecord,
    Order,
    PairKey,
    Picked,
    RetrievalCase,
    Shown,
    Span,
    SpanRecord,
    Verdict,
    parse_condition,
)
from policies.judging.retrieval import (
    DEFAULT_KS,
    IOU_THRESHOLDS,
    RetrievalMetrics,
    best_iou,
    evidence_coverage,
    recall_at_k,
    retrieval_metrics,
    temporal_iou,
)

__all__ = [
    "CONDITION_FIELDS",
    "DEFAULT_KS",
    "DEFAULT_RESOLUTION",
    "IOU_THRESHOLDS",
    "METRICS",
    "ORDERS",
    "PICKED_BY_VERDICT",
    "PICKS",
    "Breakdown",
    "Condition",
    "Estimate",
    "FrameSampling",
    "JudgeMetrics",
    "JudgedPair",
    "JudgingError",
    "Judgment",
    "JudgmentRecord",
    "MetricTable",
    "Order",
    "PairKey",
    "PairedTest",
    "Picked",
    "RetrievalCase",
    "RetrievalMetrics",
    "Shown",
    "Span",
    "SpanRecord",
    "Stratum",
    "Verdict",
    "accuracy",
    "answered_accuracy",
    "best_iou",
    "clustered_se",
    "consistent_accuracy",
    "evidence_coverage",
    "judge_metrics",
    "judged_pairs",
    "mean_estimate",
    "metric_table",
    "normal_cdf",
    "paired_test",
    "parse_condition",
    "plain_se",
    "position_bias",
    "position_consistency",
    "recall_at_k",
    "retrieval_metrics",
    "sign_test_p",
    "split_runs",
    "strict_accuracy",
    "swap_averaged_accuracy",
    "temporal_iou",
    "two_sided_normal_p",
]
