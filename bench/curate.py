"""Curation benchmarks, each measured side by side with its baseline in one run.

1. Call throughput under concurrency: ``--seeds`` seeds curated at ``--concurrency`` against a
   simulated provider that holds every call ``--latency`` seconds (answers served from a cache of
   the offline provider's, so the stand-in does no CPU work per call). Baseline: the
   concurrency-bound ideal, concurrency / latency calls/s. Measured over the steady window that
   starts when the last seed's first call went out (ramp-up excluded) and spans whole multiples
   of the latency before the provider stops answering: CallRecorded events appended in that
   window, per second. A second figure by Little's law (mean model calls in flight over the same
   window / concurrency) does not depend on where the bursts of a fixed latency fall.
   Target: achieved / ideal ≥ 0.9.
2. Our CPU time per model call: ``ModelRunner.run`` (prompt rendering, RecordedModel →
   CallRecorder: request key, budget reserve and settle, two appends to a real SQLite event store)
   against a bare pydantic-ai ``Agent(FunctionModel(instant), output_type=QA).run(prompt)``, same
   instant model and output type, process CPU time over ``--calls`` calls each.
   Target: difference ≤ 2 ms per call.
3. Event store: append rate over raw sqlite3 ``executemany`` (target ≥ 0.5) and folding one
   million events (target ≤ 10 s), from bench/events.py.

The synthetic demo playlist is indexed once into ``--workdir`` (default ``.bench-cache/curate``)
and reused by later runs.

Run: `.venv/bin/python bench/curate.py [--seeds 500] [--concurrency 500] [--latency 5]
[--duration 40] [--calls 1000] [--workdir DIR] [--only NAME]`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import logging
import os
import pstats
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
import events as events_bench
import structlog
from _machine import machine
from _sim import SimulatedProvider
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.curation import Curator
from agents.deps import CallDeps
from agents.evidence import SeedEvidence
from agents.prompts import render_prompt
from agents.recorded import CallRecorder
from agents.workers import GenerationLimits, ModelRunner, SeedCall
from playlisteval.app import App, curation_config
from playlisteval.settings import SETTINGS_FILE, load_settings
from policies.budget import Budget
from store.catalog import SeedRow, SegmentRow
from store.events import CallRecorded, Event, seed_stream
from store.eventstore import SqliteEventStore
from tools.contracts.roles import QA

# The demo's index settings (playlisteval/cli/demo.py): short segments for short synthetic videos.
BENCH_SETTINGS = """\
# Written by bench/curate.py: the demo's short segments for the short synthetic videos.
[index]
segment_min_minutes = 1.0
segment_target_minutes = 1.0
segment_max_minutes = 2.0
"""
OVERHEAD_MODEL = "gemini-3-flash"


# -- the workspace and its seeds -------------------------------------------------------------------


def open_workspace(root: Path) -> App:
    """The bench workspace, with the synthetic demo playlist indexed (once; later runs reuse it)."""
    from tools.offline.synthetic import make_demo_playlist

    root = root.expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    settings_file = root / SETTINGS_FILE
    if not settings_file.exists():
        settings_file.write_text(BENCH_SETTINGS)
    app = App(load_settings(root))
    if not app.catalog.segments():
        manifest = root / "synthetic-playlist" / "manifest.json"
        if not manifest.exists():
            manifest = make_demo_playlist(manifest.parent)
        indexer = app.indexer()
        indexer.add(str(manifest), domain=None)
        indexer.prepare_media()
        indexer.run()
    return app


def segment_pairs(segments: Sequence[SegmentRow]) -> list[tuple[SegmentRow, SegmentRow]]:
    """Every pair a seed may be: same domain, different videos, in a stable order."""
    pairs: list[tuple[SegmentRow, SegmentRow]] = []
    for a, b in itertools.combinations(sorted(segments, key=lambda s: s.id), 2):
        if a.domain == b.domain and a.video_id != b.video_id:
            pairs.append((a, b))
    return pairs


def bench_seeds(app: App, count: int) -> list[SeedRow]:
    """``count`` seeds over the index's segment pairs (pairs repeat under distinct seed ids),
    made the workspace's active seeds."""
    pairs = segment_pairs(app.catalog.segments())
    if not pairs:
        raise SystemExit("the bench workspace has no segment pairs: delete it and run again")
    rows = [
        SeedRow(
            id=f"bench-{n:04d}",
            domain=a.domain,
            segment_a=a.id,
            segment_b=b.id,
            cosine=0.5,
        )
        for n, (a, b) in zip(range(count), itertools.cycle(pairs), strict=False)
    ]
    app.catalog.replace_seeds(rows)
    return rows


def fresh_store(path: Path) -> SqliteEventStore:
    """An empty SQLite event store at ``path`` (an earlier run's file is removed)."""
    for old in path.parent.glob(path.name + "*"):
        old.unlink()
    return SqliteEventStore(path)


# -- 1. throughput under concurrency ----------------------------------------------------------


class CallClock:
    """Progress hook: the clock time at which each CallRecorded was appended."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.recorded: list[float] = []

    def event(self, stream: str, event: Event, budget: Budget) -> None:
        """Time one more recorded call."""
        if isinstance(event, CallRecorded):
            self.recorded.append(self.clock())


def _curator(
    app: App,
    sim: SimulatedProvider,
    store: SqliteEventStore,
    concurrency: int,
    progress: CallClock | None,
    ramp_s: float = 0.0,
) -> Curator:
    config = replace(curation_config(app.settings, concurrency), ramp_s=ramp_s)
    deps = CallDeps(
        store=store,
        catalog=app.catalog,
        clips=app.clips(),
        model_for=sim.model,
        prices=app.prices(),
    )
    return Curator(deps, config=config, progress=progress)


def in_flight(spans: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """Mean number of calls in flight over ``[lo, hi)``."""
    busy = sum(max(0.0, min(end, hi) - max(start, lo)) for start, end in spans)
    return busy / (hi - lo)


def bench_concurrency(
    app: App,
    seeds: Sequence[SeedRow],
    *,
    latency: float,
    concurrency: int,
    duration: float,
    workdir: Path,
) -> dict[str, float]:
    """Achieved calls/s against concurrency / latency, in the steady window."""
    # Warm the answer cache with one real offline run over the same seeds (no latency): prompts
    # are deterministic per seed (its transcript windows and answer labels are shuffled by seed
    # id), so the timed run finds every answer computed and the stand-in does no CPU work.
    distinct = {seed.id: seed for seed in seeds}
    warm = SimulatedProvider(latency=0.0)
    store = fresh_store(workdir / "warm-events.db")
    start = time.perf_counter()
    anyio.run(
        lambda: _curator(app, warm, store, concurrency, None).curate(
            "bench-warm", list(distinct.values()), budget_micros=None
        )
    )
    warm_s = time.perf_counter() - start
    store.close()

    sim = SimulatedProvider(latency=latency, offline=warm.offline, answers=warm.answers)
    clock = CallClock(sim.clock)
    store = fresh_store(workdir / "events.db")
    # The first wave is spread over one latency period (curation.ramp_s), as a run configured
    # for a provider of that latency would be; the window below starts after it.
    curator = _curator(app, sim, store, concurrency, clock, ramp_s=latency)
    t0 = sim.clock()
    cpu0 = time.process_time()
    sim.deadline = t0 + duration
    report = anyio.run(lambda: curator.curate("bench-throughput", list(seeds), budget_micros=None))
    wall = sim.clock() - t0
    cpu = time.process_time() - cpu0
    store.close()

    first_wave = min(concurrency, len(seeds))
    if len(sim.started) < first_wave:
        raise SystemExit(
            f"only {len(sim.started)} calls started, fewer than the {first_wave} seeds in flight: "
            "raise --duration"
        )
    ramp_end = sorted(sim.started)[first_wave - 1]
    whole = int((sim.deadline - ramp_end) // latency) if latency > 0 else 0
    if whole < 1:
        raise SystemExit(f"no steady window: ramp-up took {ramp_end - t0:.1f} s; raise --duration")
    lo, hi = ramp_end, ramp_end + whole * latency
    in_window = sum(1 for t in clock.recorded if lo <= t < hi)
    achieved = in_window / (hi - lo)
    ideal = first_wave / latency
    return {
        "throughput_seeds": float(len(seeds)),
        "throughput_concurrency": float(first_wave),
        "throughput_latency_s": latency,
        "throughput_warmup_s": warm_s,
        "throughput_wall_s": wall,
        "throughput_cpu_s": cpu,
        "throughput_cpu_ms_per_call": 1000 * cpu / max(report.live_calls, 1),
        "throughput_ramp_s": ramp_end - t0,
        "throughput_window_s": hi - lo,
        "throughput_calls_in_window": float(in_window),
        "throughput_calls_per_s": achieved,
        "throughput_ideal_calls_per_s": ideal,
        "throughput_ratio_vs_ideal": achieved / ideal,
        "throughput_inflight_ratio": in_flight(sim.spans, lo, hi) / first_wave,
        "throughput_live_calls": float(report.live_calls),
        "throughput_answers_computed_in_run": float(sim.computed),
        "throughput_answers_from_cache": float(sim.served),
        "throughput_seeds_accepted": float(len(report.accepted)),
    }


# -- 2. our CPU time per call --------------------------------------------------------------------


def instant_model(qa: QA) -> FunctionModel:
    """Answers every request at once with ``qa`` through the output tool."""
    args = qa.model_dump_json()

    def instant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(tool_name=info.output_tools[0].name, args=args)])

    return FunctionModel(instant, model_name="instant")


SAMPLE_QA = QA(
    question="How does the shape shown early in the first segment differ from the second's?",
    gold_answer="\n\n".join(
        f"Paragraph {i}: a red circle sits in the top-left (v1 @ 00:0{i}–00:1{i})."
        for i in range(3)
    ),
)


def bench_overhead(
    app: App, seed: SeedRow, calls: int, workdir: Path, *, profile: bool = False
) -> dict[str, float]:
    """CPU seconds per call: bare agent run vs ModelRunner.run, same instant model."""
    limits = GenerationLimits()
    evidence = SeedEvidence(app.catalog, app.clips(), seed.id, seed.segment_a, seed.segment_b)
    context = limits.phase1_context(evidence.segments)
    prompt = render_prompt(context)
    model = instant_model(SAMPLE_QA)

    async def bare(n: int) -> None:
        for _ in range(n):
            agent: Agent[None, QA] = Agent(model, output_type=QA, retries=0)
            await agent.run(prompt)

    store = fresh_store(workdir / "overhead-events.db")
    stream = seed_stream("bench-overhead", seed.id)
    recorder = CallRecorder(budget=Budget(10**15), prices=app.prices(), offline=True)
    runner = ModelRunner(recorder=recorder, model_for=lambda _: model)

    async def append(event: Event) -> None:
        store.append(stream, [event])

    made = itertools.count()

    async def ours(n: int) -> None:
        # Each call for a seed of its own: an identical request within one seed is answered
        # from that seed's first record (no reservation, no model call, no event), which is
        # not the path a call takes.
        for _ in range(n):
            call = SeedCall(seed_id=f"{seed.id}-{next(made)}", evidence=evidence, append=append)
            await runner.run(
                call, "phase1_generator", OVERHEAD_MODEL, context, QA, phase=1, gate="generator"
            )

    def cpu(work: Callable[[int], Any], n: int) -> float:
        anyio.run(work, max(n // 20, 5))  # warm caches (schemas, statements) before timing
        start = time.process_time()
        anyio.run(work, n)
        return (time.process_time() - start) / n

    # Interleave the two sides so drift on the machine falls on both.
    bare_s = ours_s = 0.0
    rounds = 2
    for _ in range(rounds):
        bare_s += cpu(bare, calls // rounds) / rounds
        ours_s += cpu(ours, calls // rounds) / rounds
    results = {
        "overhead_calls": float(calls),
        "overhead_bare_cpu_ms_per_call": bare_s * 1e3,
        "overhead_ours_cpu_ms_per_call": ours_s * 1e3,
        "overhead_added_cpu_ms_per_call": (ours_s - bare_s) * 1e3,
        "overhead_events_appended": float(store.last_seq()),
    }
    if profile or (ours_s - bare_s) * 1e3 > 2.0:
        profiler = cProfile.Profile()
        profiler.enable()
        anyio.run(ours, max(calls // 4, 50))
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(20)
        print("\n## profile of ModelRunner.run (top 20 by own time)")
        print(out.getvalue())
    store.close()
    return results


# -- all of it -----------------------------------------------------------------------------------


def run(
    *,
    seeds: int = 500,
    concurrency: int = 500,
    latency: float = 5.0,
    duration: float = 40.0,
    calls: int = 1000,
    workdir: Path = Path(".bench-cache/curate"),
    only: Sequence[str] = ("throughput", "overhead", "events"),
    profile: bool = False,
) -> dict[str, float]:
    """The benchmarks named in ``only``; the figures, keyed by name."""
    results: dict[str, float] = {}
    if "throughput" in only or "overhead" in only:
        with open_workspace(workdir) as app:
            rows = bench_seeds(app, seeds)
            if "throughput" in only:
                results.update(
                    bench_concurrency(
                        app,
                        rows,
                        latency=latency,
                        concurrency=concurrency,
                        duration=duration,
                        workdir=workdir,
                    )
                )
            if "overhead" in only:
                results.update(bench_overhead(app, rows[0], calls, workdir, profile=profile))
    if "events" in only:
        results.update(events_bench.run())
    return results


def main() -> None:
    """Print the machine and every figure."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=500)
    parser.add_argument("--latency", type=float, default=5.0, help="seconds per simulated call")
    parser.add_argument("--duration", type=float, default=40.0, help="seconds the provider answers")
    parser.add_argument("--calls", type=int, default=1000, help="calls per side for the CPU cost")
    parser.add_argument("--workdir", type=Path, default=Path(".bench-cache/curate"))
    parser.add_argument(
        "--only", choices=["throughput", "overhead", "events"], action="append", default=None
    )
    parser.add_argument("--profile", action="store_true", help="profile ModelRunner.run")
    args = parser.parse_args()
    # The loop logs every parked seed when the provider stops answering: keep the figures legible.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    print(f"machine: {machine()}")
    figures = run(
        seeds=args.seeds,
        concurrency=args.concurrency,
        latency=args.latency,
        duration=args.duration,
        calls=args.calls,
        workdir=args.workdir,
        only=args.only or ("throughput", "overhead", "events"),
        profile=args.profile,
    )
    for name, value in figures.items():
        print(f"{name:45s} {value:14,.3f}")


if __name__ == "__main__":
    main()
