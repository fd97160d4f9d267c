"""The curation run: the async shell around the per-seed coordinator.

Per seed: fold its events, ask ``decide`` what is next, send it over the bus to a generator or
the verifier, append the reply, repeat. A run stopped at any point (a crash, kill -9, the budget)
is picked up by calling :meth:`Curator.curate` again with the same run id: every seed is folded
from its log and goes on, a request that was waiting is delivered again without a second append,
and calls already recorded are served from the log instead of being paid twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import structlog

from agents.bus import Bus
from agents.coordinator import (
    Accept,
    Command,
    Discard,
    Generate,
    LoopPolicy,
    SeedState,
    Verify,
    apply,
    decide,
    fold,
    pending,
)
from agents.deps import CallDeps
from agents.evidence import SeedEvidence
from agents.gates import VerifierAgent, registered_gates
from agents.recorded import CallRecorder, Mode, RecordedCalls
from agents.workers import GenerationLimits, GeneratorAgent, ModelRunner, RoleModels, SeedCall
from policies.budget import Budget, BudgetExhausted, Campaign, make_budget
from policies.prices import PriceTable
from policies.ratelimits import Traffic
from store.catalog import SeedRow
from store.errors import MediaError, ProviderError, ReplayDivergence, StoreConflict
from store.events import (
    AnyEvent,
    AttemptStarted,
    CallBatched,
    CallFailed,
    CallId,
    CallRecorded,
    CallReserved,
    DistractorsProposed,
    Event,
    GatePassed,
    GateRejected,
    GateRequested,
    ItemAccepted,
    QAProposed,
    RunFinished,
    RunResumed,
    RunStarted,
    SeedDiscarded,
    SeedStarted,
    SeedStopped,
    run_stream,
    run_streams,
    seed_stream,
)
from store.eventstore import EventStore, StoredEvent
from store.ledger import spend
from store.redact import has_secret, scrub, secret_values

REPLIES = (QAProposed, DistractorsProposed, GatePassed, GateRejected)
logger = structlog.get_logger("playlisteval.curation")


@dataclass(frozen=True)
class CurationConfig:
    """How a run curates: the loop's policy (by default with every registered gate), the model per
    role, the generators' limits."""

    policy: LoopPolicy = field(default_factory=lambda: LoopPolicy(gates=registered_gates()))
    models: RoleModels = field(default_factory=RoleModels)
    limits: GenerationLimits = field(default_factory=GenerationLimits)
    concurrency: int = 8
    offline: bool = True
    # Spread the first wave of seeds over this many seconds: N seeds started at one instant
    # hit the provider (and this process) with N requests at once, and with similar latencies
    # they stay bunched in waves that queue behind each other.
    ramp_s: float = 0.0
    # Seeds parked by a provider failure are tried again this many times in the same run.
    provider_retry_rounds: int = 1
    provider_retry_delay_s: float = 60.0


@dataclass
class RunReport:
    """How a run ended."""

    run_id: str
    outcome: str
    spent_micros: int
    accepted: list[str] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    stopped: dict[str, str] = field(default_factory=dict)
    live_calls: int = 0
    replayed_calls: int = 0
    unrecorded: list[str] = field(default_factory=list)
    # What the calls served from another run's log cost when they were made (a replay's
    # what-if figure: they cost nothing this time, so they are not in ``spent_micros``).
    replayed_micros: int = 0


class CurationProgress(Protocol):
    """Told of every event a run appends (the CLI draws live progress from it)."""

    def event(self, stream: str, event: Event, budget: Budget) -> None:
        """One more event in ``stream``."""


def run_end(run_id: str, events: Iterable[tuple[str, AnyEvent]], spent_micros: int) -> RunFinished:
    """The run's end as its seeds' logs say it: how many were accepted, discarded and stopped
    (each seed by its last state), ``budget`` when a cap stopped one, and what the ledger says it
    spent. One rule for the single-process run, the fleet and strict replay."""
    last: dict[str, AnyEvent] = {}
    for seed_id, event in events:
        if isinstance(event, ItemAccepted | SeedDiscarded | SeedStopped | SeedStarted):
            last[seed_id] = event
    ends = list(last.values())
    budget = any(isinstance(e, SeedStopped) and e.reason == "budget" for e in ends)
    return RunFinished(
        run_id=run_id,
        outcome="budget" if budget else "completed",
        spent_micros=spent_micros,
        accepted=sum(isinstance(e, ItemAccepted) for e in ends),
        discarded=sum(isinstance(e, SeedDiscarded) for e in ends),
        stopped=sum(isinstance(e, SeedStopped) for e in ends),
    )


def recorded_prices(run_log: Iterable[StoredEvent]) -> list[tuple[int, dict[str, Any]]]:
    """The price rows a run recorded, each with the seq from which they were in force: its
    start's (``RunStarted.settings["prices"]``), then each resume's that recorded them."""
    out: list[tuple[int, dict[str, Any]]] = []
    for stored in run_log:
        event = stored.event()
        if isinstance(event, RunStarted) and event.settings.get("prices"):
            out.append((stored.seq, dict(event.settings["prices"])))
        elif isinstance(event, RunResumed) and event.prices is not None:
            out.append((stored.seq, dict(event.prices)))
    return out


def prices_changed(run_log: Iterable[StoredEvent], prices: dict[str, Any]) -> list[str]:
    """The models whose price rows differ between the last ones the run recorded and
    ``prices`` (a snapshot), sorted; ``[]`` when nothing changed or nothing was recorded."""
    recorded = recorded_prices(run_log)
    if not recorded:
        return []
    last = recorded[-1][1]
    return sorted(m for m in set(last) | set(prices) if last.get(m) != prices.get(m))


def open_run(
    store: EventStore,
    run_id: str,
    seeds: Sequence[SeedRow],
    config: CurationConfig,
    *,
    budget_micros: int | None,
    per_seed_micros: int | None = None,
    parent_run: str | None = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Append run ``run_id``'s ``RunStarted``: its seeds, caps and policy (its stream must be
    new, else StoreConflict). One way to open a run, for a single process and the fleet."""
    store.append(
        run_stream(run_id),
        [
            RunStarted(
                run_id=run_id,
                seeds=tuple(s.id for s in seeds),
                budget_micros=budget_micros,
                per_seed_micros=per_seed_micros,
                max_attempts=config.policy.max_attempts,
                concurrency=config.concurrency,
                offline=config.offline,
                models=dict(config.models.__dict__),
                settings=settings or {},
                parent_run=parent_run,
            )
        ],
        expected_version=0,
    )


def resumed_recorder(
    history: Sequence[AnyEvent],
    *,
    budget_micros: int | None,
    prices: PriceTable,
    offline: bool,
    traffic: Callable[[str], Traffic | None] | None,
    campaign: Campaign | None = None,
    hold_prefix: str = "",
    lease: str | None = None,
) -> CallRecorder:
    """A live recorder over one stream whose calls belong to owners ``<owner>:<n>`` (a pair's
    judgments, an evaluation's): its spend and recorded answers come from ``history``, call ids go
    on from it, and every request key starts at its first recorded answer, so a call recorded
    before a crash (its result never written) is served again rather than paid twice. With a
    ``campaign``, every reservation also takes from its accounts (holds of ``lease``)."""
    calls = [e for e in history if isinstance(e, CallReserved | CallRecorded | CallFailed)]
    spent = spend(calls)
    recorder = CallRecorder(
        budget=make_budget(
            campaign,
            cap_micros=budget_micros,
            spent_micros=spent.spent_micros,
            seed_spent=spent.per_owner,
            hold_prefix=hold_prefix,
            item=lambda _owner: lease,
        ),
        prices=prices,
        recorded=RecordedCalls.from_events(history),
        mode="live",
        offline=offline,
        traffic=traffic,
    )
    done: dict[str, int] = {}
    for event in calls:
        call = CallId.parse(event.call_id)
        done[call.owner] = max(done.get(call.owner, 0), call.n)
    for owner, count in done.items():
        recorder.reset_seed(owner, count, {})
    return recorder


def _consumed_calls(events: Sequence[AnyEvent]) -> tuple[int, dict[str, int]]:
    """Call ids used so far and, per request key, how many recorded calls a reply consumed.

    Calls recorded after the last request whose reply never came are not consumed: re-delivering
    that request serves them again from the log, so they are not paid twice.
    """
    calls = 0
    consumed: dict[str, int] = {}
    since_request: list[str] = []
    for event in events:
        if isinstance(event, CallReserved | CallRecorded | CallFailed):
            calls = max(calls, CallId.parse(event.call_id).n)
        if isinstance(event, CallRecorded):
            since_request.append(event.key)
        elif isinstance(event, AttemptStarted | GateRequested):
            since_request = []
        elif isinstance(event, REPLIES):
            for key in since_request:
                consumed[key] = consumed.get(key, 0) + 1
            since_request = []
    return calls, consumed


def resume_seed(recorder: CallRecorder, seed_id: str, history: Sequence[AnyEvent]) -> None:
    """Fold a seed's log into ``recorder``: its call ids go on, the calls recorded for a request
    whose reply never came are served again, batch jobs it submitted are collected."""
    calls, consumed = _consumed_calls(history)
    recorder.reset_seed(seed_id, calls, consumed, history)
    for key, waiting in _pending_batches(history).items():
        recorder.pending_batches[(seed_id, key)] = waiting


def _pending_batches(events: Sequence[AnyEvent]) -> dict[str, tuple[str, dict[str, Any], str]]:
    """Calls submitted in a batch job whose answer the log does not hold yet, by request key."""
    pending: dict[str, tuple[str, dict[str, Any], str]] = {}
    for event in events:
        if isinstance(event, CallBatched):
            pending[event.call_id] = (event.key, event.batch, event.custom_id)
        elif isinstance(event, CallRecorded | CallFailed):
            pending.pop(event.call_id, None)
    return {key: (call_id, batch, custom) for call_id, (key, batch, custom) in pending.items()}


class GroupCommit:
    """Appends from many seeds that arrive in one turn of the event loop are written in one
    transaction; each ``append`` returns only once its event is durable.

    Hundreds of seeds in flight each append several events per model call: one transaction per
    event would spend the single event loop's time on commits. Order within a stream is kept
    (a seed waits for each append before its next).
    """

    def __init__(self, store: EventStore, on_commit: Callable[[str, Event], None]) -> None:
        self.store = store
        self.on_commit = on_commit
        self._queue: list[tuple[str, Event, anyio.Event, list[BaseException]]] = []
        self._wake = anyio.Event()
        self._closed = False
        self._stopped = False  # the writer task has ended (closed, or cancelled with its run)
        self._fenced: dict[str, int] = {}

    def fence(self, stream: str, version: int) -> None:
        """From now on appends to ``stream`` must follow ``version`` (the last this process
        read): if another writer appended in between (a worker that took the seed over while
        this one looked dead), they fail with :class:`StoreConflict` and write nothing."""
        self._fenced[stream] = version

    def unfence(self, stream: str) -> None:
        """Appends to ``stream`` go at the end again, whatever its version."""
        self._fenced.pop(stream, None)

    async def append(self, stream: str, event: Event) -> None:
        """Queue ``event`` for ``stream`` and wait until it is committed."""
        if self._closed:
            raise RuntimeError("the run's event writer is closed")
        done = anyio.Event()
        failure: list[BaseException] = []
        entry = (stream, event, done, failure)
        if self._stopped:
            # The writer was cancelled with its run, and this append comes from shielded
            # cleanup (a call in flight recorded as interrupted): nobody would commit it later.
            self._commit([entry])
        else:
            self._queue.append(entry)
            self._wake.set()
            await done.wait()
        if failure:
            raise failure[0]

    async def run(self) -> None:
        """The writer task: commit whatever is queued, batch after batch, until closed."""
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                # No extra turn to gather more: appends queued while this batch was waiting form
                # the next batch, which is what keeps batches large under load. The commit runs
                # on the event loop: in a worker thread the append's own Python work (events to
                # JSON, hash chain) fights the loop for the GIL, and judging throughput fell
                # from 45.8 to 38 c64/c1 (bench/eval.py, 2026-12-02).
                batch, self._queue = self._queue, []
                if batch:
                    self._commit(batch)
                if self._closed and not self._queue:
                    return
        finally:
            # Cancelled (or closed): what is still queued is committed now, and any later append
            # commits itself, so no waiter is left waiting on a writer that is gone.
            self._stopped = True
            batch, self._queue = self._queue, []
            if batch:
                self._commit(batch)

    def _commit(self, batch: list[tuple[str, Event, anyio.Event, list[BaseException]]]) -> None:
        by_stream: dict[str, list[Event]] = {}
        for stream, event, _, _ in batch:
            by_stream.setdefault(stream, []).append(event)
        try:
            self._append(by_stream)
        except StoreConflict as exc:
            if len(by_stream) == 1:
                self._fail(batch, exc)
                return
            # One fenced stream moved on: the others must not fail with it.
            for stream in by_stream:
                self._commit([entry for entry in batch if entry[0] == stream])
            return
        except Exception as exc:  # every waiter learns that its event is not in the log
            self._fail(batch, exc)
            return
        for stream, event, done, _ in batch:
            self.on_commit(stream, event)
            done.set()

    def _append(self, by_stream: dict[str, list[Event]]) -> None:
        self.store.append_batch(
            [(stream, events, self._fenced.get(stream)) for stream, events in by_stream.items()]
        )
        for stream, events in by_stream.items():
            if stream in self._fenced:
                self._fenced[stream] += len(events)

    @staticmethod
    def _fail(
        batch: list[tuple[str, Event, anyio.Event, list[BaseException]]], exc: BaseException
    ) -> None:
        for _, _, done, failure in batch:
            failure.append(exc)
            done.set()

    def close(self) -> None:
        """No more appends; the writer ends once the queue is empty."""
        self._closed = True
        self._wake.set()


def scrubbed(event: Event, secrets: list[str]) -> Event:
    """The event with any API key or auth header in its text replaced (provider errors quote
    requests, and a request may carry a key)."""
    text = event.model_dump_json()
    if not has_secret(text, secrets):
        return event
    clean = json.loads(scrub(text, secrets))
    return type(event).model_validate(clean)


def _first_of(group: BaseExceptionGroup[Any], kind: type[BaseException]) -> BaseException | None:
    for exc in group.exceptions:
        if isinstance(exc, kind):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_of(exc, kind)
            if found is not None:
                return found
    return None


class Curator:
    """Runs seeds through the loop with a bounded number in flight."""

    def __init__(
        self,
        deps: CallDeps,
        *,
        config: CurationConfig,
        progress: CurationProgress | None = None,
    ) -> None:
        self.deps = deps
        self.batcher = deps.batcher
        self.campaign = deps.campaign
        self.traffic = deps.traffic
        self.pricing = deps.pricing
        self.sleep = deps.sleep
        self.store = deps.store
        self.catalog = deps.catalog
        self.clips = deps.clips
        self.model_for = deps.model_for
        self.prices = deps.prices
        self.config = config
        self.progress = progress
        self._states: dict[str, SeedState] = {}
        self._budget: Budget | None = None
        self._secrets = sorted({*secret_values(), *deps.secrets}, key=len, reverse=True)
        self._writer: GroupCommit | None = None
        self.last_recorder: CallRecorder | None = None  # the last run's (a replay reads it)
        # Asked between a seed's steps: true makes seeds return where they are (a shutdown);
        # their logs say where to go on.
        self.pause_requested: Callable[[], bool] = lambda: False

    # -- appending -----------------------------------------------------------------------------

    async def _append(self, stream: str, event: Event) -> None:
        assert self._writer is not None
        await self._writer.append(stream, scrubbed(event, self._secrets))

    def _committed(self, stream: str, event: Event) -> None:
        if stream in self._states:
            self._states[stream] = apply(self._states[stream], event)  # type: ignore[arg-type]
        if self.progress is not None and self._budget is not None:
            self.progress.event(stream, event, self._budget)

    def _machinery(
        self, budget: Budget, recorded: RecordedCalls, mode: Mode
    ) -> tuple[CallRecorder, Bus]:
        """The recorder every call of this shell goes through, and the bus to its agents (a
        generator and a verifier worker per seed in flight)."""
        recorder = CallRecorder(
            budget=budget,
            prices=self.prices,
            recorded=recorded,
            mode=mode,
            offline=self.config.offline,
            traffic=self.traffic,
            pricing=self.pricing,
            sleep=self.sleep,
            batcher=self.batcher,
            prices_at=self.deps.prices_at,
        )
        runner = ModelRunner(recorder=recorder, model_for=self.model_for)
        generator = GeneratorAgent(runner, self.config.models, self.config.limits)
        verifier = VerifierAgent(
            runner, self.config.models, self.config.limits, gates=self.config.policy.gates
        )
        slots = max(self.config.concurrency, 1)
        bus = Bus(append=self._append, inbox_size=slots)
        bus.register("generator", generator.handle, workers=slots)
        bus.register("verifier", verifier.handle, workers=slots)
        return recorder, bus

    # -- a run ----------------------------------------------------------------------------------

    def _run_log(self, run_id: str) -> list[tuple[str, StoredEvent]]:
        prefix = seed_stream(run_id, "")
        return [
            (stored.stream[len(prefix) :], stored)
            for stored in self.store.read_all(stream_prefix=prefix)
        ]

    def open_run(
        self,
        run_id: str,
        seeds: Sequence[SeedRow],
        *,
        budget_micros: int | None,
        per_seed_micros: int | None = None,
        parent_run: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        """Append the run's ``RunStarted`` (its stream must be new: StoreConflict otherwise)."""
        open_run(
            self.store,
            run_id,
            seeds,
            self.config,
            budget_micros=budget_micros,
            per_seed_micros=per_seed_micros,
            parent_run=parent_run,
            settings=settings,
        )

    async def curate(
        self,
        run_id: str,
        seeds: Sequence[SeedRow],
        *,
        budget_micros: int | None,
        per_seed_micros: int | None = None,
        mode: Mode = "live",
        recorded: RecordedCalls | None = None,
        parent_run: str | None = None,
        settings: dict[str, Any] | None = None,
        opened: bool = False,
        lease: str | None = None,
    ) -> RunReport:
        """Curate ``seeds`` in run ``run_id``: a new run (its ``RunStarted`` appended here, or
        already by :meth:`open_run` when ``opened``), or a resumed one (``RunResumed``).

        ``lease`` names the run lease this process holds: campaign holds belong to it, so
        whoever takes it over from a dead holder writes them off. Every seed stream is fenced at
        the version read, so a second writer (which the lease should have kept out) cannot
        append to it unseen.
        """
        stream = run_stream(run_id)
        log = self._run_log(run_id)
        events = [(seed_id, stored.event()) for seed_id, stored in log]
        versions: dict[str, int] = {}
        for seed_id, stored in log:
            versions[seed_id] = stored.version
        spent = spend(e for _, e in events)
        # A replay serves another run's log; a resumed run serves its own (the calls recorded
        # before it stopped whose replies never came).
        index = (
            recorded
            if recorded is not None
            else RecordedCalls.from_stored(stored for _, stored in log)
        )
        if not opened and self.store.stream_version(stream) == 0:
            self.open_run(
                run_id,
                seeds,
                budget_micros=budget_micros,
                per_seed_micros=per_seed_micros,
                parent_run=parent_run,
                settings=settings,
            )
        elif not opened:
            prices = self.prices.snapshot(self.config.models.all_models())
            changed = prices_changed(self.store.read_stream(stream), prices)
            if changed:
                logger.warning(
                    "the prices changed since the run was last priced: its calls from here on "
                    "are charged and capped at today's (the resume records them)",
                    run_id=run_id,
                    models=", ".join(changed),
                )
            self.store.append(
                stream,
                [
                    RunResumed(
                        run_id=run_id,
                        budget_micros=budget_micros,
                        orphan_reservations_micros=spent.open_micros,
                        prices=prices,
                    )
                ],
            )
        logger.info(
            "run_begins",
            run_id=run_id,
            seeds=len(seeds),
            budget_micros=budget_micros,
            already_spent_micros=spent.spent_micros,
            mode=mode,
        )
        budget = make_budget(
            self.campaign if mode == "live" else None,
            cap_micros=budget_micros,
            per_seed_micros=per_seed_micros,
            spent_micros=spent.spent_micros,
            seed_spent=spent.per_owner,
            hold_prefix=stream,
            item=lambda _seed: lease,
        )
        self._budget = budget
        recorder, bus = self._machinery(budget, index, mode)
        self.last_recorder = recorder
        by_seed: dict[str, list[AnyEvent]] = {}
        for seed_id, event in events:
            by_seed.setdefault(seed_id, []).append(event)
        for seed_id, seed_events in by_seed.items():
            resume_seed(recorder, seed_id, seed_events)
        workers = max(self.config.concurrency, 1)
        limiter = anyio.CapacityLimiter(workers)
        report = RunReport(run_id=run_id, outcome="completed", spent_micros=0)

        async def one(seed: SeedRow, history: list[AnyEvent] | None = None) -> None:
            async with limiter:
                past = by_seed.get(seed.id, []) if history is None else history
                try:
                    await self._seed(run_id, seed, bus, past, mode, report)
                except StoreConflict as exc:
                    # Another writer appended to this seed's stream since it was read (the
                    # run's lease should have kept it out): stop working on it, write nothing.
                    logger.warning("seed_fenced_off", seed_id=seed.id, error=str(exc))

        self._writer = writer = GroupCommit(self.store, self._committed)
        for seed in seeds:
            writer.fence(seed_stream(run_id, seed.id), versions.get(seed.id, 0))
        try:
            async with anyio.create_task_group() as outer:
                outer.start_soon(writer.run)
                await bus.serve(outer)
                try:
                    async with anyio.create_task_group() as seeds_group:
                        gap = self.config.ramp_s / workers if self.config.ramp_s > 0 else 0.0
                        for position, seed in enumerate(seeds):
                            if gap and 0 < position < workers:
                                await anyio.sleep(gap)
                            seeds_group.start_soon(one, seed)
                    if mode == "live":
                        await self._retry_parked(run_id, seeds, one)
                finally:
                    await bus.close()
                    writer.close()
        except BaseExceptionGroup as group:
            # Task groups wrap what a seed raised; a divergence (strict replay) is the one
            # error a run stops for on purpose, so it surfaces as itself.
            divergence = _first_of(group, ReplayDivergence)
            if divergence is not None:
                raise divergence from None
            raise

        for seed in seeds:
            state = self._states.get(seed_stream(run_id, seed.id))
            if state is None:
                continue
            if state.status == "accepted":
                report.accepted.append(seed.id)
            elif state.status == "discarded":
                report.discarded.append(seed.id)
            elif state.status == "stopped":
                report.stopped[seed.id] = state.stop_reason
        # What the run spent is what its log says, by the one ledger every reader uses.
        end_log = self._run_log(run_id)
        final = spend(stored for _, stored in end_log)
        finished = run_end(run_id, ((sid, st.event()) for sid, st in end_log), final.spent_micros)
        report.spent_micros = final.spent_micros
        report.replayed_micros = final.replayed_micros
        report.live_calls = recorder.live_calls
        report.replayed_calls = recorder.replayed_calls
        report.unrecorded = [f"{s}:{r}" for s, r, _ in recorder.missing]
        report.outcome = finished.outcome
        logger.info(
            "run_ends",
            run_id=run_id,
            outcome=report.outcome,
            spent_micros=report.spent_micros,
            accepted=len(report.accepted),
            discarded=len(report.discarded),
            stopped=len(report.stopped),
        )
        anchor = self.store.anchor(run_streams(run_id, pairs=False))
        self.store.append(stream, [finished.model_copy(update={"anchor": anchor.to_json()})])
        return report

    async def _retry_parked(
        self,
        run_id: str,
        seeds: Sequence[SeedRow],
        one: Callable[[SeedRow, list[AnyEvent] | None], Coroutine[Any, Any, None]],
    ) -> None:
        """Seeds a provider failure parked get ``provider_retry_rounds`` more tries in this run,
        each after ``provider_retry_delay_s`` (an outage often passes); the rest stay parked."""
        for _ in range(self.config.provider_retry_rounds):
            parked = [
                seed
                for seed in seeds
                if (state := self._states.get(seed_stream(run_id, seed.id))) is not None
                and state.status == "stopped"
                and state.stop_reason.startswith("provider")
            ]
            if not parked:
                return
            logger.info("retrying_parked_seeds", run_id=run_id, seeds=len(parked))
            await (self.sleep or anyio.sleep)(self.config.provider_retry_delay_s)
            async with anyio.create_task_group() as again:
                for seed in parked:
                    stream = seed_stream(run_id, seed.id)
                    history = [s.event() for s in self.store.read_stream(stream)]
                    again.start_soon(one, seed, history)

    # -- a seed -----------------------------------------------------------------------------------

    async def _seed(
        self,
        run_id: str,
        seed: SeedRow,
        bus: Bus,
        history: list[AnyEvent],
        mode: Mode,
        report: RunReport,
    ) -> None:
        stream = seed_stream(run_id, seed.id)
        self._states[stream] = fold(history)

        async def append(event: Event) -> None:
            await self._append(stream, event)

        state = self._states[stream]
        if state.status in ("accepted", "discarded"):
            return
        if state.status in ("new", "stopped"):
            # A stopped seed (budget, provider) starts again where it stopped.
            await append(
                SeedStarted(
                    run_id=run_id,
                    seed_id=seed.id,
                    domain=seed.domain,
                    segment_a=seed.segment_a,
                    segment_b=seed.segment_b,
                )
            )
            state = self._states[stream]
        call = SeedCall(
            seed_id=seed.id,
            evidence=SeedEvidence(
                self.catalog, self.clips, seed.id, seed.segment_a, seed.segment_b
            ),
            append=append,
        )
        redeliver = pending(state)
        try:
            if redeliver is not None:
                await self._execute(redeliver, stream, call, bus, append_request=False)
            while True:
                commands = decide(self._states[stream], self.config.policy)
                if not commands:
                    return
                for command in commands:
                    if self.pause_requested():
                        return
                    await self._execute(command, stream, call, bus, append_request=True)
        except BudgetExhausted as exc:
            await append(SeedStopped(seed_id=seed.id, reason="budget", detail=str(exc)))
        except ProviderError as exc:
            logger.warning("seed_parked", seed_id=seed.id, reason="provider", error=str(exc))
            await append(SeedStopped(seed_id=seed.id, reason="provider", detail=str(exc)))
        except MediaError as exc:
            logger.warning("seed_parked", seed_id=seed.id, reason="evidence", error=str(exc))
            await append(SeedStopped(seed_id=seed.id, reason="error", detail=str(exc)))
        except ReplayDivergence as exc:
            # A replay that needs a call the log does not hold stops the seed there; whether
            # that is where the log stops too is the replayer's to judge.
            await append(SeedStopped(seed_id=seed.id, reason="unrecorded", detail=str(exc)))

    async def _execute(
        self, command: Command, stream: str, call: SeedCall, bus: Bus, *, append_request: bool
    ) -> None:
        state = self._states[stream]
        call.qa, call.distractors, call.feedback = state.qa, state.distractors, state.feedback
        if isinstance(command, Generate):
            message: Event = AttemptStarted(
                phase=1 if command.phase == 1 else 2,
                attempt=command.attempt,
                feedback=tuple(f"{f.gate}: {f.reason}" for f in command.feedback),
            )
            if command.phase == 1:
                call.qa = None
            await bus.request(
                "generator", stream, message, context=call, append_request=append_request
            )
        elif isinstance(command, Verify):
            message = GateRequested(
                phase=1 if command.phase == 1 else 2, gate=command.gate, attempt=command.attempt
            )
            await bus.request(
                "verifier", stream, message, context=call, append_request=append_request
            )
        elif isinstance(command, Accept):
            await self._append(
                stream,
                ItemAccepted(seed_id=call.seed_id, qa=command.qa, distractors=command.distractors),
            )
        elif isinstance(command, Discard):
            await self._append(stream, SeedDiscarded(seed_id=call.seed_id, reasons=command.reasons))
