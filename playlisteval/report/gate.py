"""The difficulty gate's accuracy by rating gap (the paper's Figure 3), from the gate's own
verdicts in the pairs streams of the runs the judged pairs came from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from playlisteval.report.table_format import Stat
from policies.bootstrap import clustered_interval
from policies.judging import JudgmentRecord
from policies.pairs import order_score
from store.answers import answered_by
from store.events import pairs_stream
from tools.providers.judges import stand_in_name

if TYPE_CHECKING:
    from store.eventstore import EventStore


@dataclass(frozen=True)
class GateVerdict:
    """One difficulty-gate judge's verdict on one candidate pair in one answer order, as a
    run's pairs stream holds it, with the pair's rating gap and its item (seed)."""

    run_id: str
    judge: str
    pair_id: str
    item_id: str
    gap: int
    order: str
    choice: str  # "A" (the answer shown first), "B", "tie" or "invalid"

    @property
    def score(self) -> float:
        """1 when it picks the higher-rated answer, 0 the other, 0.5 a tie or no usable answer
        (as the rest of the report counts them)."""
        return order_score(self.choice, self.order, "half") or 0.0


def gate_verdicts(events: EventStore, pair_ids: Iterable[str]) -> list[GateVerdict]:
    """The difficulty gate's verdicts on every candidate pair (kept or dropped) of the runs
    whose pairs streams hold any of ``pair_ids`` (the pairs an evaluation judged): each judge's
    last verdict per pair and order, folded as pair selection folds them."""
    from agents.pairs import fold_pairs

    wanted = set(pair_ids)
    prefix = pairs_stream("")
    streams: dict[str, list[Any]] = {}
    # Per stream, the models the offline harness answered for: their verdicts are a stand-in's,
    # never reported under the model's own name (tools.providers.judges.stand_in_name).
    harness: dict[str, set[str]] = {}
    types = ["PairCandidate", "PairJudged", "CallRecorded"]
    for stored in events.read_all(stream_prefix=prefix, types=types):
        if stored.type == "CallRecorded":
            if answered_by(stored.data, original=True) == "offline":
                harness.setdefault(stored.stream, set()).add(str(stored.data["model"]))
            continue
        streams.setdefault(stored.stream, []).append(stored.event())
    found: list[GateVerdict] = []
    for stream, stream_events in sorted(streams.items()):
        log = fold_pairs(stream_events)
        if wanted.isdisjoint(log.candidates):
            continue
        stood_in = harness.get(stream, set())
        for (pair_id, judge, order), judged in log.judged.items():
            candidate = log.candidates.get(pair_id)
            if candidate is None:
                continue
            found.append(
                GateVerdict(
                    run_id=stream.removeprefix(prefix),
                    judge=stand_in_name(judge) if judge in stood_in else judge,
                    pair_id=pair_id,
                    item_id=candidate.seed_id,
                    gap=candidate.chosen_rating - candidate.rejected_rating,
                    order=order,
                    choice=judged.choice,
                )
            )
    return found


@dataclass(frozen=True)
class GateRow:
    """One gate judge's accuracy per rating gap and overall, each with its interval and N
    (judgments), and the candidate pairs it judged."""

    judge: str
    by_gap: dict[int, Stat]
    overall: Stat
    pairs: int


def _gate_stat(verdicts: Sequence[GateVerdict]) -> Stat:
    scores = [v.score for v in verdicts]
    interval = clustered_interval(
        scores, [v.item_id for v in verdicts], [(v.run_id, v.pair_id) for v in verdicts]
    )
    return Stat(math.fsum(scores) / len(scores), interval, len(scores))


def gate_rows(verdicts: Iterable[GateVerdict]) -> list[GateRow]:
    """Each gate judge's accuracy by rating gap (Figure 3 of the paper), from its verdicts;
    intervals resample whole items (a question's pairs together)."""
    by_judge: dict[str, list[GateVerdict]] = {}
    for v in verdicts:
        by_judge.setdefault(v.judge, []).append(v)
    rows = []
    for judge, items in sorted(by_judge.items()):
        by_gap: dict[int, list[GateVerdict]] = {}
        for v in items:
            by_gap.setdefault(v.gap, []).append(v)
        rows.append(
            GateRow(
                judge,
                {gap: _gate_stat(by_gap[gap]) for gap in sorted(by_gap)},
                _gate_stat(items),
                len({(v.run_id, v.pair_id) for v in items}),
            )
        )
    return rows


GATE_SCORING = (
    "a verdict for the higher-rated answer counts 1, for the other 0, a tie or an unusable "
    "answer 0.5; gap = chosen rating − rejected rating"
)


@dataclass(frozen=True)
class GateSummary:
    """What the report knows of the difficulty gate: its rows, runs, or why it has none."""

    rows: tuple[GateRow, ...]
    runs: tuple[str, ...]
    why: str


def summarize_gate(events: EventStore | None, records: Sequence[JudgmentRecord]) -> GateSummary:
    """The gate's rows for the pairs of ``records``, or why there are none."""
    if events is None:
        return GateSummary(
            (), (), "no event log was read (give the workspace that curated the benchmark)"
        )
    verdicts = gate_verdicts(events, {r.pair_id for r in records})
    if not verdicts:
        return GateSummary(
            (),
            (),
            "the event log read holds no difficulty-gate verdict on the pairs judged (was the "
            "benchmark curated in another workspace?)",
        )
    runs = tuple(sorted({v.run_id for v in verdicts}))
    return GateSummary(tuple(gate_rows(verdicts)), runs, "")
