"""Judge-evaluation benchmarks: judging throughput under concurrency, retrieval latency at 100 h.

1. Judgments per second: the demo benchmark (indexed, curated and exported once into
   ``--workdir``) evaluated by the offline judges under eight retrieved conditions, each call
   held ``--latency`` seconds by the stand-in provider (the time a real judge holds a request),
   at concurrency 1 and 64, each in a fresh evaluation (so every call is live). A warm-up
   evaluation first cuts every clip into the disk cache, so both runs do the same work. The
   clock runs over the evaluation itself (views, calls, records), in a workspace already open
   (opening it is not judging). Two setups: transcript only (no clips: what is left is our own
   bookkeeping and retrieval) and frames+transcript with the frame reader, which decodes every
   clip in-process (work a remote provider would do; pydantic-ai runs the offline judges in
   worker threads). What a judge sees is built in worker threads too (agents/evaluation.py),
   off the event loop that keeps the calls in flight. Prints judgments/s and pairs/s (both
   orders) and the ratio c64 / c1; the ideal ratio is 64 when nothing but the latency counts.
2. Retrieval latency per query at a 100-hour haystack: a synthetic index of 100 one-hour videos
   (12,000 thirty-second chunks of generated transcript, 7 domains), queried by BM25 (the
   retrievers' own ``BM25Index`` and ``spans_from_hits``) and by an exact scan of 12,000 unit
   vectors of 384 dimensions (what the text-embedding retriever ranks on a haystack). Prints
   p50 / p99 per query and the ratio BM25 / vector scan. And the check that let bm25s replace
   our own BM25 (issue 13): on every query of this haystack, bm25s's top 10 against the former
   implementation's (restored here from git, ``5172a74^:tools/evidence/retrieval.py``), in order.

Run: ``.venv/bin/python bench/eval.py [--latency 0.2] [--workdir DIR]
[--only throughput|retrieval]``.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._demo import demo_benchmark
from bench._machine import machine

CACHE = Path(__file__).resolve().parents[1] / ".bench-cache"
# (label, condition, judges): with frames, the frame reader decodes every clip in-process (the
# work a remote provider would do); the transcript condition leaves only our own bookkeeping.
# Eight frame counts per setup make eight conditions: enough judgments on the small demo
# benchmark that the fixed cost of opening an evaluation does not hide the rate.
FRAME_COUNTS = tuple(range(24, 40, 2))
SETUPS = (
    (
        "transcript",
        tuple(f"retrieved:bm25:transcript:1h:{n}" for n in FRAME_COUNTS),
        ("offline-first", "offline-transcript"),
    ),
    (
        "frames+transcript",
        tuple(f"retrieved:bm25:frames+transcript:1h:{n}" for n in FRAME_COUNTS),
        ("offline-first", "offline-transcript", "offline-frames"),
    ),
)
DOMAINS = ("education", "gaming", "news", "cooking", "sports", "music", "tech")
WORDS = {
    "education": "entropy calculus derivative integral photosynthesis algebra theorem lecture",
    "gaming": "boss level speedrun loot raid respawn controller quest dungeon checkpoint",
    "news": "election parliament inflation minister protest summit verdict court economy",
    "cooking": "garlic onion simmer dough oven butter recipe knead broth spices skillet",
    "sports": "goal striker penalty quarterback touchdown dribble referee tournament coach",
    "music": "chord melody guitar drums chorus verse tempo album synth bassline lyrics",
    "tech": "smartphone processor battery laptop kernel compiler database server chip camera",
}
FILLER = ("so", "then", "we", "look", "at", "this", "and", "here", "you", "can", "see", "how")


def _evaluate(
    home: Path,
    bench: Path,
    out: Path,
    concurrency: int,
    latency: float,
    conditions: tuple[str, ...],
    judges: tuple[str, ...],
) -> tuple[int, float]:
    """One fresh evaluation: the judgments it made and the seconds it took (the evaluation
    alone, the workspace already open)."""
    from pydantic_ai.models import Model

    from agents.deps import CallDeps
    from agents.evaluation import OFFLINE_JUDGE_PRICES, evaluate, parse_condition
    from playlisteval.app import App, offline_models
    from playlisteval.settings import load_settings
    from policies.prices import PriceTable
    from tools.evidence.retrieval import BM25Retriever
    from tools.providers.judges import judge_models
    from tools.providers.offline import LatencyModel

    base = judge_models(offline_models())
    model_for: Callable[[str], Model] = lambda m: LatencyModel(base(m), latency)  # noqa: E731
    shutil.rmtree(out, ignore_errors=True)
    with App(load_settings(home)) as app:
        deps = CallDeps(
            store=app.events,
            catalog=app.catalog,
            clips=app.clips(),
            model_for=model_for,
            prices=PriceTable.load(overrides=OFFLINE_JUDGE_PRICES),
        )
        parsed = [parse_condition(c) for c in conditions]
        retrievers = {"bm25": BM25Retriever(app.catalog)}

        async def timed() -> tuple[int, float]:
            t0 = time.perf_counter()
            result = await evaluate(
                deps,
                benchmark_dir=bench,
                judges=judges,
                conditions=parsed,
                out_dir=out,
                retrievers=retrievers,
                concurrency=concurrency,
                offline=True,
            )
            return result.new_records, time.perf_counter() - t0

        return anyio.run(timed)


def throughput(workdir: Path, latency: float) -> None:
    """Judgments per second at concurrency 1 and 64, and their ratio, per setup."""
    home, bench = demo_benchmark(workdir)
    runs_dir = workdir / "evals"
    for label, conditions, judges in SETUPS:
        _evaluate(home, bench, runs_dir / f"warm-up-{label}", 64, 0.0, conditions, judges)
        rates: dict[int, float] = {}
        judged = 0
        for concurrency in (1, 64):
            # A new output folder is a new evaluation id, so no call is served from a record.
            out = runs_dir / f"{label}-c{concurrency}-{time.time_ns()}"
            judged, seconds = _evaluate(home, bench, out, concurrency, latency, conditions, judges)
            rates[concurrency] = judged / seconds
        print(f"## judging throughput, {label} ({judged} judgments, {latency} s per call)")
        for concurrency, rate in rates.items():
            print(f"concurrency {concurrency:>2}: {rate:8.1f} judgments/s  {rate / 2:8.1f} pairs/s")
        ideal = 64
        ratio = rates[64] / rates[1]
        print(f"ratio c64/c1: {ratio:.1f} (ideal {ideal}; achieved/ideal {ratio / ideal:.2f})")


def retrieval(seed: int = 0, queries: int = 200) -> None:
    """Per-query latency of BM25 and an exact vector scan over a 100-hour haystack."""
    from tools.evidence.retrieval import BM25Index, ChunkHit, spans_from_hits, tokenize

    rng = np.random.default_rng(seed)
    n_videos, per_video = 100, 120  # 100 h of 30-second chunks
    texts: list[str] = []
    meta: list[tuple[str, float, float]] = []
    for v in range(n_videos):
        words = WORDS[DOMAINS[v % len(DOMAINS)]].split()
        for c in range(per_video):
            picked = list(rng.choice(words, size=4)) + list(rng.choice(FILLER, size=20))
            rng.shuffle(picked)
            texts.append(" ".join(str(w) for w in picked))
            meta.append((f"video-{v:03d}", c * 30.0, c * 30.0 + 30.0))
    t0 = time.perf_counter()
    index = BM25Index([tokenize(t) for t in texts])
    build_s = time.perf_counter() - t0
    vectors = rng.standard_normal((len(texts), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    durations: dict[str, float | None] = {f"video-{v:03d}": 3600.0 for v in range(n_videos)}
    k, limit = 5, 40

    def spans(scores: np.ndarray) -> int:
        top = np.argpartition(-scores, limit)[:limit]
        top = top[np.argsort(-scores[top], kind="stable")]
        hits = [ChunkHit(str(i), meta[i][0], meta[i][1], meta[i][2], float(scores[i])) for i in top]
        return len(spans_from_hits(hits, k, 120.0, durations))

    former = FormerBM25([tokenize(t) for t in texts])
    same_top10 = tie_only = 0
    bm25_s: list[float] = []
    scan_s: list[float] = []
    for q in range(queries):
        words = WORDS[DOMAINS[q % len(DOMAINS)]].split()
        question = "where do they talk about " + " and ".join(rng.choice(words, size=2))
        t0 = time.perf_counter()
        scores = index.scores(tokenize(question))
        spans(scores)
        bm25_s.append(time.perf_counter() - t0)
        theirs = former.scores(tokenize(question))
        ours_top, their_top = top10(scores), top10(theirs)
        if ours_top == their_top:
            same_top10 += 1
        elif np.allclose(np.sort(scores[ours_top]), np.sort(theirs[their_top]), atol=1e-9):
            tie_only += 1  # the same scores, equal ones in another order
        query = rng.standard_normal(384).astype(np.float32)
        query /= np.linalg.norm(query)
        t0 = time.perf_counter()
        spans((vectors @ query).astype(np.float64))
        scan_s.append(time.perf_counter() - t0)

    def ms(values: list[float], q: float) -> float:
        return float(np.percentile(values, q)) * 1000.0

    print(f"## retrieval at a 100-hour haystack ({len(texts)} chunks, {queries} queries)")
    print(f"BM25 index build: {build_s * 1000:.0f} ms")
    print(f"BM25 per query:        p50 {ms(bm25_s, 50):6.2f} ms  p99 {ms(bm25_s, 99):6.2f} ms")
    print(f"vector scan per query: p50 {ms(scan_s, 50):6.2f} ms  p99 {ms(scan_s, 99):6.2f} ms")
    print(f"ratio BM25/vector scan (p50): {ms(bm25_s, 50) / ms(scan_s, 50):.2f}")
    print(
        f"bm25s vs the former BM25, top 10 in order: {same_top10}/{queries} queries identical, "
        f"{tie_only} differ only among equal scores, {queries - same_top10 - tie_only} differ"
    )


def top10(scores: np.ndarray) -> list[int]:
    """The ten best documents with a positive score, best first (stable on ties)."""
    return [int(i) for i in np.argsort(-scores, kind="stable")[:10] if scores[i] > 0]


class FormerBM25:
    """The BM25 we kept before bm25s (Okapi, Lucene's idf, k1 = 1.5, b = 0.75), verbatim in
    substance from ``git show 5172a74^:tools/evidence/retrieval.py``: the reference bm25s is checked
    against on this haystack."""

    def __init__(self, documents: list[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.size = k1, len(documents)
        lengths = np.array([len(doc) for doc in documents], dtype=np.float64)
        self.norm = k1 * (1.0 - b + b * lengths / lengths.mean())
        rows: dict[str, list[int]] = {}
        freqs: dict[str, list[int]] = {}
        for row, doc in enumerate(documents):
            for term, tf in Counter(doc).items():
                rows.setdefault(term, []).append(row)
                freqs.setdefault(term, []).append(tf)
        self.postings = {t: (np.array(rows[t]), np.array(freqs[t], dtype=np.float64)) for t in rows}

    def scores(self, query: list[str]) -> np.ndarray:
        """One score per document (0 where no query term occurs)."""
        total = np.zeros(self.size, dtype=np.float64)
        for term in dict.fromkeys(query):
            if term not in self.postings:
                continue
            rows, tf = self.postings[term]
            idf = math.log(1.0 + (self.size - len(rows) + 0.5) / (len(rows) + 0.5))
            total[rows] += idf * tf * (self.k1 + 1.0) / (tf + self.norm[rows])
        return total


def main() -> None:
    """Parse the arguments and run the benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds each call is held")
    parser.add_argument("--workdir", type=Path, default=CACHE / "eval")
    parser.add_argument("--only", choices=("throughput", "retrieval"))
    args = parser.parse_args()
    print(machine())
    if args.only in (None, "retrieval"):
        retrieval()
    if args.only in (None, "throughput"):
        throughput(args.workdir, args.latency)


if __name__ == "__main__":
    main()
