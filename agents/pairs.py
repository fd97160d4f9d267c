"""Pair selection: candidate pairs from a run's accepted items, the difficulty gate, the sample.

Every two of an accepted item's five answers make a candidate pair, the higher rating preferred.
Each difficulty judge sees every candidate pair twice, once in each answer order, with both
segments' videos; a pair is kept when at least one judge fails it under the gate's rule
(:class:`policies.pairs.GateRule`: by default, not right in both orders, a tie saying nothing).
The kept pairs are sampled per domain, by default in their own proportions of rating gaps
(:func:`policies.pairs.sample_pairs`).

Every decision is an event in the stream ``pairs-<run_id>``: the candidates, each judge's call
(reserved, recorded and priced like the curation's calls) and verdict, the gate's keep or drop,
and the sample. Running the selection again reads that stream first: a verdict already in it is
never asked for again, and a call recorded before a crash is served from the log. A decision is a
pure function of the recorded verdicts and the rule: when the rule changes, the pairs it decides
otherwise get a new keep or drop (the last one counts), without asking any judge again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import structlog

from agents.deps import CallDeps
from agents.evidence import ClipSpec, SeedEvidence
from agents.judge_runs import CappedStream, JudgeCalls, judge_under_cap
from agents.workers import MalformedOutput, SeedCall
from policies.pairs import (
    PAPER_GATE,
    GateRule,
    JudgeVerdict,
    Sampling,
    SelectedPair,
    candidate_pairs,
    failing_judges,
    gate_reason,
    judge_fails,
    picks_preferred,
    sample_pairs,
)
from store.errors import ConfigError
from store.events import (
    AnyEvent,
    CallFailed,
    CallId,
    CallRecorded,
    CallReserved,
    Event,
    ItemAccepted,
    PairCandidate,
    PairDropped,
    PairJudged,
    PairKept,
    PairsSampled,
    SeedStarted,
    pairs_stream,
    seed_stream,
)
from store.eventstore import EventStore
from store.redact import secret_values
from tools.contracts.roles import QA, DistractorSet, PairJudgeContext, PairVerdict

Order = Literal["chosen_first", "rejected_first"]
ORDERS: tuple[Order, Order] = ("chosen_first", "rejected_first")
JUDGE_ROLE = "pair_judge"
GATE = "difficulty"
# The judges see what the visual verifiers see: frames at 0.5 fps, no audio (open-weight VLMs).
JUDGE_CLIP = ClipSpec(audio=False)

logger = structlog.get_logger("playlisteval.pairs")


class PairsProgress(Protocol):
    """What a pair selection tells whoever watches it (the CLI's progress bar)."""

    def begin(self, label: str, total: int) -> None:
        """``total`` undecided pairs are to be judged (those the log decides are not counted)."""
        ...

    def advance(self) -> None:
        """One more pair was decided (kept or dropped) and is in the log."""
        ...


@dataclass(frozen=True)
class AcceptedItem:
    """One accepted item of a run: its seed's segments, the question and the five answers."""

    seed_id: str
    domain: str
    segment_a: str
    segment_b: str
    question: str
    answers: dict[int, str]  # rating (5 = gold) → answer text


def accepted_items(store: EventStore, run_id: str) -> list[AcceptedItem]:
    """The run's accepted items, read from its seeds' streams, in the order they were accepted."""
    started: dict[str, SeedStarted] = {}
    items: list[AcceptedItem] = []
    for stored in store.read_all(
        stream_prefix=seed_stream(run_id, ""), types=["SeedStarted", "ItemAccepted"]
    ):
        event = stored.event()
        if isinstance(event, SeedStarted):
            started[event.seed_id] = event
        elif isinstance(event, ItemAccepted) and event.seed_id in started:
            seed = started[event.seed_id]
            qa = QA.model_validate(event.qa)
            distractors = DistractorSet.model_validate(event.distractors)
            answers = {5: qa.gold_answer} | {a.rating: a.answer for a in distractors.answers}
            items.append(
                AcceptedItem(
                    seed_id=seed.seed_id,
                    domain=seed.domain,
                    segment_a=seed.segment_a,
                    segment_b=seed.segment_b,
                    question=qa.question,
                    answers=answers,
                )
            )
    return items


@dataclass
class PairsLog:
    """The pairs stream folded: what is decided, what each judge answered, the last sample."""

    candidates: dict[str, PairCandidate] = field(default_factory=dict)
    judged: dict[tuple[str, str, str], PairJudged] = field(default_factory=dict)
    kept: dict[str, PairKept] = field(default_factory=dict)
    dropped: dict[str, PairDropped] = field(default_factory=dict)
    sampled: PairsSampled | None = None
    calls: dict[str, int] = field(default_factory=dict)  # pair id → calls numbered so far

    def decided(self, pair_id: str) -> bool:
        """Whether the gate has kept or dropped the pair."""
        return pair_id in self.kept or pair_id in self.dropped

    def verdicts(self, pair_id: str) -> tuple[JudgeVerdict, ...]:
        """Each judge that answered the pair in both orders, by judge id; ``failed`` as the
        gate's last decision on the pair says (the judges its ``PairKept`` names)."""
        judges = sorted({judge for pid, judge, _ in self.judged if pid == pair_id})
        kept = self.kept.get(pair_id)
        failed_by = set(kept.failed_by) if kept is not None else set()
        out: list[JudgeVerdict] = []
        for judge in judges:
            first = self.judged.get((pair_id, judge, "chosen_first"))
            second = self.judged.get((pair_id, judge, "rejected_first"))
            if first is None or second is None:
                continue
            out.append(
                JudgeVerdict(
                    judge=judge,
                    verdict_chosen_first=first.choice,
                    verdict_rejected_first=second.choice,
                    failed=judge in failed_by,
                )
            )
        return tuple(out)

    def selected(self, run_id: str, pair_id: str) -> SelectedPair:
        """The pair as a :class:`SelectedPair`: its candidate's fields, the run and its
        verdicts."""
        fields = self.candidates[pair_id].model_dump(exclude={"type", "schema_version"})
        return SelectedPair(run_id=run_id, judges=self.verdicts(pair_id), **fields)


def fold_pairs(events: Iterable[AnyEvent], log: PairsLog | None = None) -> PairsLog:
    """Fold events of a pairs stream into a :class:`PairsLog` (a new one unless given)."""
    log = log if log is not None else PairsLog()
    for event in events:
        if isinstance(event, PairCandidate):
            log.candidates.setdefault(event.pair_id, event)
        elif isinstance(event, PairJudged):
            log.judged[(event.pair_id, event.judge, event.order)] = event
        elif isinstance(event, PairKept):  # the last decision on a pair counts
            log.kept[event.pair_id] = event
            log.dropped.pop(event.pair_id, None)
        elif isinstance(event, PairDropped):
            log.dropped[event.pair_id] = event
            log.kept.pop(event.pair_id, None)
        elif isinstance(event, PairsSampled):
            log.sampled = event
        elif isinstance(event, CallReserved | CallRecorded | CallFailed):
            call = CallId.parse(event.call_id)
            log.calls[call.owner] = max(log.calls.get(call.owner, 0), call.n)
    return log


def load_selection(store: EventStore, run_id: str) -> list[SelectedPair]:
    """The run's last sampled selection, rebuilt from its pairs stream ([] before any)."""
    log = fold_pairs(s.event() for s in store.read_stream(pairs_stream(run_id)))
    if log.sampled is None:
        return []
    return [log.selected(run_id, pair_id) for pair_id in log.sampled.pair_ids]


def decide(
    pair_id: str, verdicts: Sequence[JudgeVerdict], rule: GateRule
) -> PairKept | PairDropped:
    """The gate's decision on a pair from its judges' verdicts: kept when one fails it."""
    failed_by = failing_judges(verdicts, rule)
    if failed_by:
        return PairKept(pair_id=pair_id, failed_by=failed_by, rule=rule.label())
    return PairDropped(pair_id=pair_id, reason=gate_reason(verdicts, rule), rule=rule.label())


def redecisions(log: PairsLog, rule: GateRule) -> list[PairKept | PairDropped]:
    """The decided pairs that ``rule`` decides otherwise than the log does, decided anew from
    their recorded verdicts (a dropped pair's reason alone is not a difference)."""
    changed: list[PairKept | PairDropped] = []
    for pair_id in log.candidates:
        verdicts = log.verdicts(pair_id)
        if not log.decided(pair_id) or not verdicts:
            continue
        decision = decide(pair_id, verdicts, rule)
        recorded = log.kept.get(pair_id)
        if isinstance(decision, PairKept):
            same = recorded is not None and set(recorded.failed_by) == set(decision.failed_by)
        else:
            same = recorded is None
        if not same:
            changed.append(decision)
    return changed


async def select_pairs(
    deps: CallDeps,
    *,
    run_id: str,
    judges: Sequence[str],
    per_domain: int = 90,
    sample_seed: int = 0,
    rule: GateRule = PAPER_GATE,
    sampling: Sampling = "proportional",
    budget_micros: int | None = None,
    concurrency: int = 8,
    offline: bool = False,
    lease: str | None = None,
    command: str = "pairs",
    progress: PairsProgress | None = None,
) -> list[SelectedPair]:
    """Build, judge, keep and sample the pairs of run ``run_id``; return the sampled pairs.

    ``judges`` are model ids (priced by ``prices``, made by ``model_for``); each judges every
    undecided candidate pair in both orders, and ``rule`` says when a judge fails a pair (the gate
    keeps a pair one judge fails); ``sampling`` how the per-domain sample splits across rating
    gaps (:func:`policies.pairs.sample_pairs`). ``budget_micros`` caps what the judges' calls cost
    in this run's pair selection, earlier calls of it included (recorded as a ``CapSet`` by
    ``command`` when it changes); with a ``campaign`` every call also reserves in its accounts,
    as holds of the ``lease`` the caller holds. Every append is fenced at the version read: a
    second writer on the stream fails with :class:`StoreConflict` instead of paying twice.
    ``offline`` marks the calls as made by the offline provider (priced from their shape, as a
    curation run's). Running it again judges only what the stream does not decide yet, decides
    anew (from the recorded verdicts, asking no judge) the pairs ``rule`` decides otherwise than
    the stream, and appends a new ``PairsSampled`` only when the sample differs from the last one.
    A pair's judges stay the ones that judged it, even when ``judges`` change. ``progress``
    hears how many pairs are to be judged and each one decided.

    The judging itself is the shell the evaluation uses too (:func:`agents.judge_runs.
    judge_under_cap`). Raises :class:`BudgetExhausted`, :class:`ProviderError` or
    :class:`MediaError` (the first one met) after every pair that could be judged is in the log;
    a later call goes on from there.
    """
    judges = tuple(dict.fromkeys(judges))
    if not judges:
        raise ConfigError("the difficulty gate needs at least one judge model; none was given")
    for judge in judges:
        deps.prices.price(judge)  # an unpriced judge is refused before anything is spent
    stream = pairs_stream(run_id)
    history = [s.event() for s in deps.store.read_stream(stream)]
    log = fold_pairs(history)
    items = accepted_items(deps.store, run_id)
    new = _new_candidates(run_id, items, log)
    fold_pairs(new, log)
    todo = [pid for pid in log.candidates if not log.decided(pid)]
    logger.info(
        "pairs_begin",
        run_id=run_id,
        items=len(items),
        candidates=len(log.candidates),
        to_judge=len(todo),
        judges=list(judges),
    )
    if progress is not None:
        progress.begin("pairs judged", len(todo))
    gate = _Gate(deps, judges, items, log, rule)
    capped = CappedStream(
        stream=stream,
        budget_micros=budget_micros,
        command=command,
        offline=offline,
        lease=lease,
        secrets=sorted({*secret_values(), *deps.secrets}, key=len, reverse=True),
        concurrency=concurrency,
    )

    def committed(_stream: str, event: Event) -> None:
        if progress is not None and isinstance(event, PairKept | PairDropped):
            progress.advance()

    judged = await judge_under_cap(
        deps,
        capped,
        history,
        todo,
        gate.judge_pair,
        opening=new,
        not_judged=_not_judged,
        committed=committed,
    )
    if judged.failures:
        raise judged.failures[0]
    return _decide_and_sample(deps.store, run_id, rule, per_domain, sample_seed, sampling)


def _new_candidates(
    run_id: str, items: Sequence[AcceptedItem], log: PairsLog
) -> list[PairCandidate]:
    """The candidate pairs of ``items`` the log does not hold yet, each as the event of its
    :class:`SelectedPair` (the fields they share; the run and the verdicts are not recorded)."""
    return [
        PairCandidate.model_validate(pair, from_attributes=True)
        for item in items
        for pair in candidate_pairs(item.seed_id, run_id, item.domain, sorted(item.answers))
        if pair.pair_id not in log.candidates
    ]


def _not_judged(pair_id: str, exc: Exception) -> None:
    # The pair stays undecided; the other pairs go on, and a later call resumes this one.
    logger.warning("pair_not_judged", pair_id=pair_id, error=str(exc))


def _decide_and_sample(
    store: EventStore,
    run_id: str,
    rule: GateRule,
    per_domain: int,
    sample_seed: int,
    sampling: Sampling,
) -> list[SelectedPair]:
    """Decide anew the pairs ``rule`` decides otherwise than the log, draw the sample from the
    kept pairs and append it when it differs from the last one; the sample."""
    stream = pairs_stream(run_id)
    stored = store.read_stream(stream)
    log = fold_pairs(s.event() for s in stored)
    changed = redecisions(log, rule)
    if changed:
        store.append(stream, changed, expected_version=len(stored))
        stored = store.read_stream(stream)
        log = fold_pairs(s.event() for s in stored)
        logger.info("pairs_redecided", run_id=run_id, pairs=len(changed), rule=str(rule))
    kept = [log.selected(run_id, pid) for pid in log.candidates if pid in log.kept]
    sample = sample_pairs(kept, per_domain, sample_seed, sampling)
    ids = tuple(pair.pair_id for pair in sample)
    last = log.sampled
    if last is None or (last.per_domain, last.seed, last.pair_ids, last.sampling) != (
        per_domain,
        sample_seed,
        ids,
        sampling,
    ):
        store.append(
            stream,
            [
                PairsSampled(
                    per_domain=per_domain, seed=sample_seed, pair_ids=ids, sampling=sampling
                )
            ],
            expected_version=len(stored),
        )
    logger.info(
        "pairs_end",
        run_id=run_id,
        candidates=len(log.candidates),
        kept=len(log.kept),
        dropped=len(log.dropped),
        sampled=len(sample),
    )
    return sample


class _Gate:
    """What the judging of one pair selection's pairs shares: the judges, the accepted items
    and their evidence (read lazily), the log folded so far and the gate's rule."""

    def __init__(
        self,
        deps: CallDeps,
        judges: tuple[str, ...],
        items: Sequence[AcceptedItem],
        log: PairsLog,
        rule: GateRule,
    ) -> None:
        self.judges, self.log, self.rule = judges, log, rule
        self.items = {item.seed_id: item for item in items}
        self.evidence = {
            seed_id: SeedEvidence(deps.catalog, deps.clips, seed_id, item.segment_a, item.segment_b)
            for seed_id, item in self.items.items()
        }

    async def judge_pair(self, calls: JudgeCalls, pair_id: str) -> None:
        """Every judge on one pair in both orders (what the log lacks), then keep or drop it;
        a judging error leaves the pair undecided (the shell keeps the error)."""
        candidate = self.log.candidates[pair_id]
        item = self.items.get(candidate.seed_id)
        if item is None:  # a candidate of an item the run no longer shows: nothing to judge with
            return
        verdicts: dict[tuple[str, str], PairJudged] = {
            (judge, order): found
            for (pid, judge, order), found in self.log.judged.items()
            if pid == pair_id
        }
        for judge in self.judges:
            for order in ORDERS:
                if (judge, order) not in verdicts:
                    judged = await _judge_once(self, calls, candidate, item, judge, order)
                    await calls.append(judged)
                    verdicts[(judge, order)] = judged
        answered = [
            JudgeVerdict(
                judge=judge,
                verdict_chosen_first=verdicts[(judge, "chosen_first")].choice,
                verdict_rejected_first=verdicts[(judge, "rejected_first")].choice,
                failed=judge_fails(
                    verdicts[(judge, "chosen_first")].choice,
                    verdicts[(judge, "rejected_first")].choice,
                    self.rule,
                ),
            )
            for judge in self.judges
        ]
        await calls.append(decide(pair_id, answered, self.rule))


async def _judge_once(
    gate: _Gate,
    calls: JudgeCalls,
    candidate: PairCandidate,
    item: AcceptedItem,
    judge: str,
    order: Order,
) -> PairJudged:
    """One judge on one pair in one order, through the recorded-call path."""
    chosen = item.answers[candidate.chosen_rating]
    rejected = item.answers[candidate.rejected_rating]
    first, second = (chosen, rejected) if order == "chosen_first" else (rejected, chosen)
    evidence = gate.evidence[item.seed_id]
    # A real model run on this machine (its traffic says ``real_local``) reads text only: it is
    # shown the spans' transcript and no clips, and its prompt says so (a clip would be
    # refused, and "video" would misstate what it judged). Every other judge as before.
    traffic = calls.runner.recorder.traffic(judge)
    text_only = traffic is not None and traffic.real_local
    asked = PairJudgeContext(
        question=item.question,
        answer_a=first,
        answer_b=second,
        segments=evidence.segments,
        receives="transcript" if text_only else "frames+transcript",
    )
    clips = [] if text_only else evidence.videos(JUDGE_CLIP)
    call = SeedCall(seed_id=candidate.pair_id, evidence=evidence, append=calls.append)
    # Fitted here to record what the judge is shown (the run fits them the same way again).
    context, attachments = calls.runner.fit(judge, JUDGE_ROLE, asked, clips)
    shown = [
        {"segment_id": rate.segment_id, "frames": rate.frames, "fps": round(rate.fps, 4)}
        for rate in getattr(context, "video_rates", ())
    ]
    choice: Literal["A", "B", "tie", "invalid"]
    try:
        verdict = await calls.runner.run(
            call,
            JUDGE_ROLE,
            judge,
            context,
            PairVerdict,
            phase=None,
            gate=GATE,
            attachments=attachments,
        )
        choice, reason = verdict.choice, verdict.reason
    except MalformedOutput as exc:
        # No usable answer: the gate's rule says how it counts (as a tie does).
        choice, reason = "invalid", str(exc)
    return PairJudged(
        pair_id=candidate.pair_id,
        judge=judge,
        order=order,
        choice=choice,
        correct=picks_preferred(choice, order),
        reason=reason[:2000],
        video=shown,
    )
