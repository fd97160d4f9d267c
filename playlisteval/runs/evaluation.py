"""Judge evaluation of an exported benchmark, composed by the root (``App.evaluation``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from agents.ownership import eval_lease
from playlisteval.app import (
    App,
)
from playlisteval.runs.release import then_release

if TYPE_CHECKING:
    from agents.evaluation import EvaluationProgress, EvaluationResult


DEFAULT_CONDITIONS = (
    "uniform::frames+transcript:1h:32",
    "retrieved:hybrid:frames+transcript:1h:32",
)


#: The demo's: the defaults, and the other three retrievers on the transcript (no clips to cut,
#: so cheap), so the demo's report has each retriever's recall side by side.
DEMO_CONDITIONS = (
    *DEFAULT_CONDITIONS,
    "retrieved:bm25:transcript:1h:32",
    "retrieved:text:transcript:1h:32",
    "retrieved:multimodal:transcript:1h:32",
)


def evaluate(
    app: App,
    benchmark: Path,
    judges: list[str],
    out_dir: Path,
    conditions: list[str] | None = None,
    *,
    budget_usd: float | None = None,
    limit: int | None = None,
    progress: EvaluationProgress | None = None,
    allow_modified: bool = False,
) -> EvaluationResult:
    """Judge every pair of an exported benchmark with each judge, under each condition, in both
    answer orders; records go to ``out_dir/judgments.jsonl`` (resumable: recorded calls and
    records already written are not made again). ``offline-first``, ``offline-transcript`` and
    ``offline-frames`` are offline judges of known behaviour; other ids are configured models
    (live when the settings say so: keys and a cap are checked before anything is spent).
    ``limit`` judges the benchmark's first pairs only; ``progress`` hears of each judgment;
    ``allow_modified`` judges records changed after the export (recorded as such)."""
    from agents.evaluation import eval_stream, evaluation_id_of
    from agents.evaluation import evaluate as run_evaluation
    from policies.judging import parse_condition

    parsed = [parse_condition(c) for c in (conditions or DEFAULT_CONDITIONS)]
    # Everything the evaluation is run with, composed by the composition root (keys, prices
    # and the judges' endpoints checked there, before anything is written).
    parts = app.evaluation(judges)
    evaluation_id = evaluation_id_of(benchmark, out_dir, allow_modified=allow_modified)
    with parts.writer(eval_lease(str(out_dir.resolve())), f"eval --out {out_dir}") as held:
        cap = parts.cap(eval_stream(evaluation_id), budget_usd)
        return anyio.run(
            lambda: then_release(
                parts.live_models,
                run_evaluation(
                    parts.deps,
                    benchmark_dir=benchmark,
                    judges=judges,
                    conditions=parsed,
                    out_dir=out_dir,
                    retrievers=parts.retrievers,
                    concurrency=parts.concurrency,
                    budget_micros=cap,
                    offline=parts.offline,
                    lease=held.name,
                    limit=limit,
                    progress=progress,
                    allow_modified=allow_modified,
                ),
            )
        )
