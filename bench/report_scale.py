"""The judge-evaluation report at paper scale: time per judgment at two sizes.

Synthesizes the evaluation folders a paper-scale campaign would hand to ``playlisteval report``:
7 domains of 3 playlists each, two judges (one evaluation folder each, as two sessions would
write them), uniform frames and three retrievers (bm25, text, hybrid) at haystacks of 1, 10 and
100 hours built, every pair in both answer orders: 48 judgments per pair. Each record is a real
:class:`policies.judging.JudgmentRecord` (gold and ranked retrieved spans, what was shown) and
each folder has the ``evaluation.json`` evaluation writes. Beside them, a real SQLite event store
holds the difficulty gate's verdicts on every pair (two gate judges, both orders, through
:func:`agents.pairs.decide`), so the report draws its Figure 3 too.

The report is written at two sizes (about 5,000 and 50,000 judgments, the same conditions and
playlists, ten times the pairs), best of ``--repeat`` runs each; the clock runs over
:func:`playlisteval.report.write_report` only (every table, figure and page), and separately over
the computing core (reading the records and the figures' data, nothing drawn). Prints each time,
the time per judgment and the ratio large / small of the time per judgment: about 1 or below
(fixed costs such as drawing the figures are spread over more judgments) means linear; a
quadratic step would show as a ratio near 10.

Run: ``.venv/bin/python bench/report_scale.py [--small 5000] [--large 50000] [--repeat 1]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.pairs import decide
from bench._machine import machine
from playlisteval.report import figure_specs, load_records, write_report
from policies.judging import (
    ORDERS,
    PICKED_BY_VERDICT,
    Condition,
    JudgmentRecord,
    Shown,
    SpanRecord,
    Verdict,
)
from policies.pairs import PAPER_GATE, JudgeVerdict, judge_fails, picks_preferred
from store.events import Event, PairCandidate, PairJudged, pairs_stream
from store.eventstore import open_event_store

DOMAINS = ("cooking", "documentary", "education", "gaming", "history", "news", "podcast")
PLAYLISTS_PER_DOMAIN = 3
JUDGES = ("judge-alpha", "judge-beta")
GATE_JUDGES = ("qwen3-vl-30b-a3b", "internvl3.5-8b")
HOURS = (1.0, 10.0, 100.0)
RETRIEVERS = ("bm25", "text", "hybrid")
PER_PAIR = len(JUDGES) * (1 + len(RETRIEVERS)) * len(HOURS) * 2  # judgments per pair


@dataclass(frozen=True)
class Synthetic:
    """What :func:`synthesize` wrote: the evaluation folders, the event store, the counts."""

    eval_dirs: tuple[Path, ...]
    events_path: Path
    judgments: int
    pairs: int


def _conditions() -> list[Condition]:
    found: list[Condition] = []
    for hours in HOURS:
        found.append(Condition("uniform", None, "frames+transcript", hours, 32))
        found += [Condition("retrieved", r, "frames+transcript", hours, 32) for r in RETRIEVERS]
    return found


def _pairs(count: int, rng: random.Random) -> list[tuple[str, str, str, int, int]]:
    """``count`` pairs as (pair id, domain, playlist, chosen rating, rejected rating)."""
    ratings = [(c, r) for c in range(5, 1, -1) for r in range(c - 1, 0, -1)]
    out = []
    for n in range(count):
        domain = DOMAINS[n % len(DOMAINS)]
        playlist = f"PL-{domain}-{(n // len(DOMAINS)) % PLAYLISTS_PER_DOMAIN}"
        chosen, rejected = ratings[rng.randrange(len(ratings))]
        out.append((f"pair-{n:07d}", domain, playlist, chosen, rejected))
    return out


def _evaluation_json(evaluation_id: str, judge: str, conditions: list[Condition]) -> str:
    return json.dumps(
        {
            "evaluation_id": evaluation_id,
            "benchmark_sha256": "0" * 64,
            "judges": [judge],
            "conditions": [{"condition_id": c.condition_id, **c.to_json()} for c in conditions],
            "started": "2026-12-01T09:00:00+00:00",
            "sessions": [
                {"at": "2026-12-01T09:00:00+00:00", "code_version": "bench", "offline": True}
            ],
        }
    )


def _record_lines(
    judge: str, pairs: list[tuple[str, str, str, int, int]], rng: random.Random
) -> list[str]:
    lines = []
    skill = {"judge-alpha": 0.72, "judge-beta": 0.61}[judge]
    for c in _conditions():
        lift = 0.0 if c.frames == "uniform" else 0.05
        lift -= 0.03 * HOURS.index(c.hours)
        for pair_id, domain, playlist, chosen, rejected in pairs:
            gold = (SpanRecord("v-a", 600.0, 1200.0), SpanRecord("v-b", 0.0, 900.0))
            retrieved: tuple[SpanRecord, ...] = ()
            if c.frames == "retrieved":
                retrieved = tuple(
                    SpanRecord(
                        rng.choice(("v-a", "v-b", "v-c")),
                        start,
                        start + 600.0,
                        round(1.0 - k / 10, 2),
                    )
                    for k, start in enumerate(rng.choice((0.0, 600.0, 1800.0)) for _ in range(10))
                )
            for order in ORDERS:
                right = rng.random() < skill + lift + 0.04 * (chosen - rejected)
                verdict: Verdict
                if rng.random() < 0.03:
                    verdict = "tie"
                elif right:
                    verdict = "A" if order == "chosen_first" else "B"
                else:
                    verdict = "B" if order == "chosen_first" else "A"
                record = JudgmentRecord(
                    pair_id=pair_id,
                    judge=judge,
                    condition=c,
                    order=order,
                    verdict=verdict,
                    picked=PICKED_BY_VERDICT[verdict],
                    raw_output=f"[[{verdict}]]",
                    domain=domain,
                    gap=chosen - rejected,
                    playlist_id=playlist,
                    length_hours=c.hours,
                    call_key=f"{judge}/{c.condition_id}/{pair_id}/{order}",
                    retrieved_spans=retrieved,
                    gold_spans=gold,
                    shown=Shown(frames=32, resolution=360, transcript_chars=4000),
                )
                lines.append(record.to_line())
    return lines


def _gate_events(events_path: Path, pairs: list[tuple[str, str, str, int, int]]) -> None:
    """The difficulty gate's verdicts on every pair in one run's pairs stream."""
    rng = random.Random(7)
    batch: list[Event] = []
    for pair_id, domain, _playlist, chosen, rejected in pairs:
        batch.append(
            PairCandidate(
                pair_id=pair_id,
                seed_id=f"seed-{pair_id}",
                domain=domain,
                chosen_rating=chosen,
                rejected_rating=rejected,
            )
        )
        verdicts = []
        for judge in GATE_JUDGES:
            choices = {}
            for order in ORDERS:
                right = rng.random() < 0.4 + 0.12 * (chosen - rejected)
                choice = (
                    ("A" if order == "chosen_first" else "B")
                    if right
                    else ("B" if order == "chosen_first" else "A")
                )
                choices[order] = choice
                batch.append(
                    PairJudged(
                        pair_id=pair_id,
                        judge=judge,
                        order=order,
                        choice=choice,
                        correct=picks_preferred(choice, order),
                    )
                )
            verdicts.append(
                JudgeVerdict(
                    judge,
                    choices["chosen_first"],
                    choices["rejected_first"],
                    judge_fails(choices["chosen_first"], choices["rejected_first"], PAPER_GATE),
                )
            )
        batch.append(decide(pair_id, verdicts, PAPER_GATE))
    store = open_event_store(events_path)
    try:
        store.append(pairs_stream("bench-run"), batch, expected_version=0)
    finally:
        store.close()


def synthesize(root: Path, judgments: int, seed: int = 0) -> Synthetic:
    """Evaluation folders of about ``judgments`` judgments (a multiple of 48) under ``root``."""
    rng = random.Random(seed)
    pairs = _pairs(max(1, round(judgments / PER_PAIR)), rng)
    conditions = _conditions()
    dirs = []
    for judge in JUDGES:
        directory = root / f"eval-{judge}"
        directory.mkdir(parents=True)
        lines = _record_lines(judge, pairs, rng)
        (directory / "judgments.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (directory / "evaluation.json").write_text(
            _evaluation_json(f"bench-{judge}", judge, conditions), encoding="utf-8"
        )
        dirs.append(directory)
    events_path = root / "events.db"
    _gate_events(events_path, pairs)
    return Synthetic(tuple(dirs), events_path, len(pairs) * PER_PAIR, len(pairs))


def _timed(data: Synthetic, out: Path, repeat: int) -> tuple[float, float]:
    """Best of ``repeat``: (whole report, computing core) in seconds."""
    whole = core = float("inf")
    for attempt in range(repeat):
        events = open_event_store(data.events_path)
        try:
            start = time.perf_counter()
            write_report(list(data.eval_dirs), out / f"report-{attempt}", events=events)
            whole = min(whole, time.perf_counter() - start)
        finally:
            events.close()
        start = time.perf_counter()
        figure_specs(load_records(list(data.eval_dirs)))
        core = min(core, time.perf_counter() - start)
    return whole, core


def main() -> None:
    """Write the report at two sizes; print the times and the per-judgment ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=5000)
    parser.add_argument("--large", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(machine())
    results = []
    with tempfile.TemporaryDirectory(prefix="report-scale-") as tmp:
        for size in (args.small, args.large):
            root = Path(tmp) / str(size)
            data = synthesize(root, size)
            whole, core = _timed(data, root, args.repeat)
            results.append((data, whole, core))
            print(
                f"{data.judgments:>7,} judgments ({data.pairs:,} pairs): write_report "
                f"{whole:7.2f} s ({whole / data.judgments * 1e6:6.1f} µs/judgment); computing "
                f"core {core:6.2f} s ({core / data.judgments * 1e6:6.1f} µs/judgment)"
            )
    (small, small_whole, small_core), (large, large_whole, large_core) = results
    per = (large_whole / large.judgments) / (small_whole / small.judgments)
    per_core = (large_core / large.judgments) / (small_core / small.judgments)
    print(
        f"time per judgment, large / small: write_report {per:.2f}, computing core "
        f"{per_core:.2f} (1.0 = linear; <= 1.3 is the target)"
    )


if __name__ == "__main__":
    main()
