"""Strict replay: re-derive a run from its recorded answers and compare it with its log.

The model's answers are the only inputs a run takes from outside; everything else in the log is
derived from them — every attempt and the feedback it was given, every proposal, gate verdict
and rejection reason, every accepted item with its text, every call's cost, the run's end. The
:class:`Replayer` re-runs the run through the real curation loop with no model behind it (a
call the log does not hold stops its seed, it is never made), each recorded answer served
once more and priced again as the live path would have priced it, with the prices the run
recorded. Then it compares:

- the hash chains and heads of the run's streams (:meth:`store.eventstore.EventStore.verify`);
- each seed's decisions, event by event and field by field, with the seed's log (a seed the
  log leaves unfinished — its cap, a crash — may be replayed as far as its log goes);
- each served record's cost, usage and token counts with what its answer prices at;
- each ``RunFinished`` (and ``RunResumed``) with what the log before it says.

Any difference is reported with the seq of the first event in the log that disagrees: a log
edited in the database — its text, a cost, a verdict, an event deleted or inserted — does not
replay. Modelled on Temporal's ``Replayer``, which re-runs a workflow history with no
activities and raises on nondeterminism.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from pydantic_ai.models import Model

from agents.curation import CurationConfig, Curator, RunReport, recorded_prices, run_end
from agents.deps import CallDeps
from agents.recorded import RecordedCalls
from agents.run_spec import gates_asked, specs_in_force, unhonoured
from agents.workers import RoleModels
from policies.prices import PriceTable
from policies.ratelimits import Traffic
from store.catalog import Catalog, SeedRow
from store.chain import ChainProblem
from store.errors import ConfigError, RunDefinitionMismatch
from store.events import (
    Kind,
    RunFinished,
    RunResumed,
    RunStarted,
    pairs_stream,
    run_stream,
    seed_stream,
    types_of,
)
from store.eventstore import EventStore, StoredEvent, scratch_event_store
from store.ledger import LedgerFold
from tools.evidence.clips import ClipFetcher

_RUN_END_FIELDS = ("outcome", "spent_micros", "accepted", "discarded", "stopped")


@dataclass(frozen=True)
class Difference:
    """Where the log and its replay part: the log's seq (and stream), and how."""

    seq: int
    stream: str
    what: str

    def __str__(self) -> str:
        return f"seq {self.seq} ({self.stream!r}): {self.what}"


@dataclass
class ReplayVerdict:
    """What a strict replay found: chain problems, differences, and the replayed run."""

    run_id: str
    report: RunReport
    chain: list[ChainProblem] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    seeds: int = 0
    decisions: int = 0
    served_checked: int = 0
    replayed_beyond: dict[str, int] = field(default_factory=dict)  # seed → decisions past log

    @property
    def ok(self) -> bool:
        """Nothing differs."""
        return not self.chain and not self.differences

    def problems(self) -> list[str]:
        """Every problem, first seq first."""
        found: list[tuple[int, str]] = [(p.seq, str(p)) for p in self.chain]
        found += [(d.seq, str(d)) for d in self.differences]
        return [text for _, text in sorted(found)]

    @property
    def first_seq(self) -> int | None:
        """The seq of the first event that is not what it should be."""
        seqs = [p.seq for p in self.chain] + [d.seq for d in self.differences]
        return min(seqs) if seqs else None


def run_prices(started: RunStarted, fallback: PriceTable) -> PriceTable:
    """The prices the run recorded (a run before prices were recorded: ``fallback``)."""
    snapshot = started.settings.get("prices")
    return PriceTable.from_snapshot(snapshot) if snapshot else fallback


def price_schedule(
    run_log: Sequence[StoredEvent], fallback: PriceTable
) -> Callable[[int], PriceTable]:
    """The prices in force at each seq of the run: its start's, then each resume's that
    recorded them (:func:`agents.curation.recorded_prices`); ``fallback`` for a run that
    recorded none."""
    tables = [(seq, PriceTable.from_snapshot(rows)) for seq, rows in recorded_prices(run_log)]
    if not tables:
        return lambda _seq: fallback

    def at(seq: int) -> PriceTable:
        found = tables[0][1]
        for since, table in tables:
            if since < seq:
                found = table
        return found

    return at


def run_traffic(
    started: RunStarted, fallback: Callable[[str], Traffic | None]
) -> Callable[[str], Traffic | None]:
    """How the run's calls travelled, as it recorded it (else ``fallback``)."""
    facts: dict[str, Any] = started.settings.get("traffic") or {}
    if not facts:
        return fallback
    known = {model: Traffic.from_facts(values) for model, values in facts.items()}
    return lambda model: known.get(model)


@dataclass
class Replayer:
    """Re-runs runs of ``store`` from their recorded answers, with no model call."""

    store: EventStore
    catalog: Catalog
    clips: ClipFetcher
    model_for: Callable[[str], Model]  # models that refuse every request (never reached)
    config: CurationConfig
    prices: PriceTable
    traffic: Callable[[str], Traffic | None]

    def replay(
        self,
        run_id: str,
        *,
        budget_micros: int | None = None,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        against_today: bool = False,
    ) -> ReplayVerdict:
        """Replay ``run_id`` under its recorded definition (each one in force, when it was
        upgraded: :func:`agents.run_spec.specs_in_force`); with ``budget_micros`` or
        ``max_attempts`` the replay is a what-if under that policy, and with ``against_today``
        a what-if under today's code and settings instead of its definition (its report is the
        answer, nothing is compared). :class:`~agents.run_spec.RunDefinitionMismatch`, before
        anything runs, when today's code cannot honour the recorded definition."""
        run_log = self.store.read_stream(run_stream(run_id))
        if not run_log:
            raise ConfigError(f"no run {run_id!r} in the log")
        started = run_log[0].event()
        if not isinstance(started, RunStarted):
            raise ConfigError(f"run {run_id!r} does not begin with RunStarted: see store verify")
        prefix = seed_stream(run_id, "")
        seed_log = self.store.read_all(stream_prefix=prefix)
        counterfactual = budget_micros is not None or max_attempts is not None or against_today
        if against_today:
            # Today's code and settings, but the run's own models when they are not set today.
            phases = [(0, replace(self.config, models=RoleModels.recorded(started.models)))]
        else:
            phases = self._recorded_configs(run_id, run_log, seed_log)
        adjusted: list[tuple[int, CurationConfig]] = []
        for since, config in phases:
            if max_attempts is not None:
                config = replace(config, policy=replace(config.policy, max_attempts=max_attempts))
            # A what-if budget is spent in the log's seed order, one seed at a time, so the
            # yield it reports is that of a run that gets through its seeds in order.
            config = replace(config, concurrency=concurrency or (1 if counterfactual else 8))
            adjusted.append((since, config))
        if counterfactual:
            adjusted = adjusted[-1:]  # a what-if runs the whole run under one definition
        seeds = self.catalog.seeds_by_id(started.seeds)
        scratch_log, report, mismatches = self._rerun(
            run_id, seeds, seed_log, adjusted, started, budget_micros, counterfactual, run_log
        )
        verdict = ReplayVerdict(run_id=run_id, report=report, seeds=len(seeds))
        if counterfactual:
            return verdict
        verdict.chain = self._chain(run_id)
        verdict.served_checked = report.replayed_calls
        verdict.differences += [
            Difference(m.seq, seed_stream(run_id, m.seed_id), f"call record: {m.what}")
            for m in mismatches
        ]
        self._compare_seeds(verdict, prefix, seed_log, scratch_log)
        verdict.differences += _check_run_stream(run_id, run_log, seed_log)
        verdict.differences.sort(key=lambda d: d.seq)
        return verdict

    def _recorded_configs(
        self, run_id: str, run_log: Sequence[StoredEvent], seed_log: Sequence[StoredEvent]
    ) -> list[tuple[int, CurationConfig]]:
        """Each definition the run was decided under, as a config, with the seq it was in
        force from; RunDefinitionMismatch when today's code cannot honour one."""
        asked = gates_asked(seed_log)
        out: list[tuple[int, CurationConfig]] = []
        for since, spec in specs_in_force(run_log, asked):
            problems = unhonoured(spec)
            if problems:
                raise RunDefinitionMismatch(
                    run_id,
                    problems,
                    "today's code cannot replay it as recorded: `playlisteval replay "
                    f"{run_id} --against-today` runs it as a counterfactual under today's code "
                    "and settings, or run the replay with the code (and gate packages) that "
                    "recorded it",
                )
            out.append((since, spec.config(self.config)))
        return out

    def _chain(self, run_id: str) -> list[ChainProblem]:
        """The run's streams checked against their chains (and the log's global chain)."""
        streams = [run_stream(run_id), pairs_stream(run_id), seed_stream(run_id, "") + "*"]
        return self.store.check(streams).problems

    def _rerun(
        self,
        run_id: str,
        seeds: Sequence[SeedRow],
        seed_log: list[StoredEvent],
        phases: Sequence[tuple[int, CurationConfig]],
        started: RunStarted,
        budget_micros: int | None,
        counterfactual: bool,
        run_log: Sequence[StoredEvent],
    ) -> tuple[list[StoredEvent], RunReport, list[Any]]:
        """Re-run the run into a scratch log, each definition in turn: under each but the last,
        a seed goes as far as the decisions its log made before the next one came in force
        (an upgrade), then the next definition takes it on from there, as the run did."""
        recorded = RecordedCalls.from_stored(seed_log)
        mismatches: list[Any] = []
        with scratch_event_store("replay") as store:
            curator = Curator(
                CallDeps(
                    store=store,
                    catalog=self.catalog,
                    clips=self.clips,
                    model_for=self.model_for,
                    prices=run_prices(started, self.prices),
                    prices_at=price_schedule(run_log, self.prices),
                    traffic=run_traffic(started, self.traffic),
                ),
                config=phases[0][1],
            )
            for position, (_since, config) in enumerate(phases):
                following = phases[position + 1][0] if position + 1 < len(phases) else None
                curator.config = config
                curator.driver.hold = (
                    None if following is None else _held_at(seed_log, following, store)
                )
                report = anyio.run(
                    lambda: curator.curate(
                        run_id,
                        seeds,
                        budget_micros=budget_micros,
                        per_seed_micros=None if counterfactual else started.per_seed_micros,
                        mode="counterfactual" if counterfactual else "strict",
                        recorded=recorded,
                    )
                )
                assert curator.last_recorder is not None
                mismatches += curator.last_recorder.mismatches
            curator.driver.hold = None
            replayed = store.read_all(stream_prefix=seed_stream(run_id, ""))
        return replayed, report, mismatches

    @staticmethod
    def _compare_seeds(
        verdict: ReplayVerdict,
        prefix: str,
        seed_log: list[StoredEvent],
        scratch_log: list[StoredEvent],
    ) -> None:
        original = _by_stream(seed_log)
        again = _by_stream(scratch_log)
        for stream in sorted(set(original) | set(again)):
            # The events the loop derives from the answers it was given: every class that
            # declares itself a decision (store.events.Kind), known when the replay runs.
            decisions = types_of(Kind.DECISION)
            logged = [e for e in original.get(stream, []) if e.type in decisions]
            derived = [e for e in again.get(stream, []) if e.type in decisions]
            verdict.decisions += len(logged)
            for position, event in enumerate(logged):
                if position >= len(derived):
                    verdict.differences.append(
                        Difference(
                            event.seq,
                            stream,
                            f"the log goes on with a {event.type} the replay never reaches "
                            f"(it stops after {len(derived)} decisions)",
                        )
                    )
                    break
                mine = derived[position]
                if (event.type, event.data) != (mine.type, mine.data):
                    verdict.differences.append(
                        Difference(event.seq, stream, _describe(event, mine))
                    )
                    break
            else:
                extra = len(derived) - len(logged)
                if extra > 0:
                    if logged and logged[-1].type in types_of(Kind.TERMINAL):
                        verdict.differences.append(
                            Difference(
                                logged[-1].seq,
                                stream,
                                f"the seed ended here, yet the replay goes on with "
                                f"{derived[len(logged)].type}",
                            )
                        )
                    else:
                        # The log stops early (a crash between an answer and the decision
                        # it led to): the replay may finish what the run did not get to.
                        verdict.replayed_beyond[stream[len(prefix) :]] = extra


def _held_at(
    seed_log: Sequence[StoredEvent], seq: int, scratch: EventStore
) -> Callable[[str], bool]:
    """Whether a seed's stream in the scratch log has made as many decisions as its log had
    made before ``seq`` (the seq from which the next definition was in force)."""
    decisions = types_of(Kind.DECISION)
    limit: dict[str, int] = {}
    for event in seed_log:
        if event.seq < seq and event.type in decisions:
            limit[event.stream] = limit.get(event.stream, 0) + 1

    def held(stream: str) -> bool:
        made = sum(1 for e in scratch.read_stream(stream) if e.type in decisions)
        return made >= limit.get(stream, 0)

    return held


def _by_stream(events: Iterable[StoredEvent]) -> dict[str, list[StoredEvent]]:
    out: dict[str, list[StoredEvent]] = {}
    for event in events:
        out.setdefault(event.stream, []).append(event)
    return out


def _describe(logged: StoredEvent, derived: StoredEvent) -> str:
    if logged.type != derived.type:
        return f"the log has {logged.type} where the replay derives {derived.type}"
    for key in sorted(set(logged.data) | set(derived.data)):
        if logged.data.get(key) != derived.data.get(key):
            was, now = repr(logged.data.get(key)), repr(derived.data.get(key))
            return (
                f"{logged.type}.{key} in the log is {_short(was)}; the recorded answers "
                f"derive {_short(now)}"
            )
    return f"{logged.type} differs"


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_run_stream(
    run_id: str, run_log: list[StoredEvent], seed_log: list[StoredEvent]
) -> list[Difference]:
    """Each RunFinished and RunResumed against what the seeds' log before it says."""
    out: list[Difference] = []
    stream = run_stream(run_id)
    prefix = seed_stream(run_id, "")
    fold = LedgerFold()
    ends: list[tuple[str, Any]] = []
    position = 0
    for stored in run_log:
        while position < len(seed_log) and seed_log[position].seq < stored.seq:
            row = seed_log[position]
            fold.apply_stored(row)
            if row.type in ("SeedStarted", "ItemAccepted", "SeedDiscarded", "SeedStopped"):
                ends.append((row.stream[len(prefix) :], row.event()))
            position += 1
        event = stored.event()
        if isinstance(event, RunFinished):
            expected = run_end(run_id, ends, fold.spent_micros)
            for name in _RUN_END_FIELDS:
                if getattr(event, name) != getattr(expected, name):
                    out.append(
                        Difference(
                            stored.seq,
                            stream,
                            f"RunFinished.{name} is {getattr(event, name)!r}; the log before "
                            f"it says {getattr(expected, name)!r}",
                        )
                    )
                    break
        elif isinstance(event, RunResumed):
            orphans = fold.ledger().open_micros
            if event.orphan_reservations_micros != orphans:
                out.append(
                    Difference(
                        stored.seq,
                        stream,
                        f"RunResumed.orphan_reservations_micros is "
                        f"{event.orphan_reservations_micros!r}; the log before it leaves "
                        f"{orphans!r} reserved with no answer",
                    )
                )
    return out
