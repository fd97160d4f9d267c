"""Judge evaluation of an exported benchmark, composed by the root (``App.evaluation``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
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


_NAME_MAX = 80  # characters of a default folder's name, so a path stays readable
_NAMED_JUDGES = 3  # judges a default folder's name spells out before it counts the rest


def _slug(text: str) -> str:
    """``text`` as a file-name part: letters, digits, dots and dashes; ``+`` between judges."""
    return re.sub(r"[^A-Za-z0-9.+]+", "-", text).strip("-") or "x"


def default_out_dir(
    exports: Path, benchmark: Path, judges: Sequence[str], conditions: Sequence[str] | None
) -> Path:
    """Where an evaluation goes when ``--out`` is not given: a folder under ``exports`` named
    for what it judges, ``eval-<benchmark>-<judge+judge>``, with ``-<n>cond-<hash>`` after it
    when the conditions are not the defaults (the same command always names the same folder,
    so running it again resumes). Past :data:`_NAMED_JUDGES` judges the rest are counted, and a
    name that would pass :data:`_NAME_MAX` characters is cut and told apart by a hash."""
    judges = list(dict.fromkeys(judges))
    named = "+".join(_slug(j) for j in judges[:_NAMED_JUDGES])
    if len(judges) > _NAMED_JUDGES:
        named += f"+{len(judges) - _NAMED_JUDGES}more"
    bench = _slug(Path(benchmark).expanduser().resolve().name)
    name = f"eval-{bench}-{named}"
    chosen = list(conditions or DEFAULT_CONDITIONS)
    what = "|".join([*judges, "#", *chosen])
    if chosen != list(DEFAULT_CONDITIONS):
        digest = hashlib.sha256("|".join(chosen).encode()).hexdigest()[:8]
        name += f"-{len(chosen)}cond-{digest}"
    if len(name) > _NAME_MAX:
        name = (
            name[: _NAME_MAX - 9].rstrip("-+.")
            + "-"
            + hashlib.sha256(what.encode()).hexdigest()[:8]
        )
    return exports / name


def evaluate(
    app: App,
    benchmark: Path,
    judges: list[str],
    out_dir: Path | None = None,
    conditions: list[str] | None = None,
    *,
    budget_usd: float | None = None,
    limit: int | None = None,
    progress: EvaluationProgress | None = None,
    allow_modified: bool = False,
    preparing: Callable[[str], None] | None = None,
) -> EvaluationResult:
    """Judge every pair of an exported benchmark with each judge, under each condition, in both
    answer orders; records go to ``out_dir/judgments.jsonl`` (default: :func:`default_out_dir`
    under the workspace's exports; resumable: recorded calls and records already written are
    not made again). ``offline-first``, ``offline-transcript`` and ``offline-frames`` are
    offline judges of known behaviour; other ids are configured models (live when the settings
    say so: keys and a cap are checked before anything is spent), or, offline, the offline
    provider standing in for them (recorded as ``offline-stand-in(ID)``). An id nothing can
    serve is refused first (:class:`playlisteval.model_catalog.UnknownJudge`). ``limit``
    judges the benchmark's first pairs only; ``progress`` hears of each judgment and
    ``preparing`` of each step before the first (what is being loaded);
    ``allow_modified`` judges records changed after the export (recorded as such)."""
    from playlisteval.model_catalog import check_servable_judges

    def step(what: str) -> None:
        if preparing is not None:
            preparing(what)

    step("checking the judges and their prices")
    check_servable_judges(app.settings, app.prices(), judges)
    if out_dir is None:
        out_dir = default_out_dir(app.workspace.exports, benchmark, judges, conditions)
    from agents.evaluation import eval_stream, evaluation_id_of
    from agents.evaluation import evaluate as run_evaluation
    from policies.judging import parse_condition

    parsed = [parse_condition(c) for c in (conditions or DEFAULT_CONDITIONS)]
    # Everything the evaluation is run with, composed by the composition root (keys, prices
    # and the judges' endpoints checked there, before anything is written). Opening the
    # retrievers loads the embedder and the index: the longest step before the first judgment.
    step("loading the judges' models, the embedder and the index (the retrievers)")
    parts = app.evaluation(judges)
    step("reading the benchmark and the evaluation's log")
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
