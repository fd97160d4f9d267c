"""The curation run: the async shell around the per-seed coordinator.

Per seed: fold its events, ask ``decide`` what is next, send it over the bus to a generator or
the verifier, append the reply, repeat (the :class:`~agents.seed_driver.SeedDriver` a
:class:`Curator` holds does that). A run stopped at any point (a crash, kill -9, the budget)
is picked up by calling :meth:`Curator.curate` again with the same run id: every seed is folded
from its log and goes on, a request that was waiting is delivered again without a second append,
and calls already recorded are served from the log instead of being paid twice.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog
from pydantic_ai.models import Model

from agents.bus import Bus
from agents.deps import CallDeps
from agents.group_commit import GroupCommit, scrubbed
from agents.recorded import CallRecorder, Mode, RecordedCalls
from agents.run_spec import RunSpec
from agents.seed_driver import CurationConfig, CurationProgress, SeedDriver
from policies.budget import Campaign, make_budget
from policies.prices import PriceTable
from policies.ratelimits import Traffic
from store.catalog import SeedRow
from store.errors import ReplayDivergence, StoreConflict
from store.events import (
    AnyEvent,
    AttemptStarted,
    CallBatched,
    CallFailed,
    CallId,
    CallRecorded,
    CallReserved,
    DistractorsProposed,
    GatePassed,
    GateRejected,
    GateRequested,
    QAProposed,
    RunResumed,
    RunStarted,
    run_stream,
    run_streams,
    seed_stream,
)
from store.eventstore import EventStore, StoredEvent
from store.ledger import spend
from store.runlog import run_end as run_end  # the fleet and replay fold a run's end with it

# Moved out (the driver's and the writer's), handed on here for their importers.
__all__ = [
    "CurationConfig",
    "CurationProgress",
    "Curator",
    "GroupCommit",
    "RunReport",
    "open_run",
    "prices_changed",
    "recorded_prices",
    "resume_seed",
    "resumed_recorder",
    "run_end",
    "scrubbed",
]

REPLIES = (QAProposed, DistractorsProposed, GatePassed, GateRejected)
logger = structlog.get_logger("playlisteval.curation")


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
    """Append run ``run_id``'s ``RunStarted``: its seeds, caps, policy and definition (a
    :class:`~agents.run_spec.RunSpec` of ``config``, priced by ``settings["prices"]``; its
    stream must be new, else StoreConflict). One way to open a run, for a single process and
    the fleet."""
    recorded = settings or {}
    spec = RunSpec.today(config, recorded.get("prices"))
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
                settings=recorded,
                parent_run=parent_run,
                spec=spec.to_json(),
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
    spent = spend(history)  # the ledger reads the call events it needs (retries' charges too)
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
    """Runs a fixed list of seeds through the loop with a bounded number in flight; the
    :class:`~agents.seed_driver.SeedDriver` it holds drives each seed."""

    def __init__(
        self,
        deps: CallDeps,
        *,
        config: CurationConfig,
        progress: CurationProgress | None = None,
    ) -> None:
        self.deps = deps
        self.driver = SeedDriver(deps, config=config, progress=progress)
        self.last_recorder: CallRecorder | None = None  # the last run's (a replay reads it)

    @property
    def config(self) -> CurationConfig:
        """How this curator's runs curate (its driver's; may be replaced between runs)."""
        return self.driver.config

    @config.setter
    def config(self, config: CurationConfig) -> None:
        self.driver.config = config

    @property
    def model_for(self) -> Callable[[str], Model]:
        """The model each model id's calls go to (its driver's; may be replaced between runs)."""
        return self.driver.model_for

    @model_for.setter
    def model_for(self, model_for: Callable[[str], Model]) -> None:
        self.driver.model_for = model_for

    # -- a run ----------------------------------------------------------------------------------

    def _run_log(self, run_id: str) -> list[tuple[str, StoredEvent]]:
        prefix = seed_stream(run_id, "")
        return [
            (stored.stream[len(prefix) :], stored)
            for stored in self.deps.store.read_all(stream_prefix=prefix)
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
            self.deps.store,
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
        if not opened and self.deps.store.stream_version(run_stream(run_id)) == 0:
            self.open_run(
                run_id,
                seeds,
                budget_micros=budget_micros,
                per_seed_micros=per_seed_micros,
                parent_run=parent_run,
                settings=settings,
            )
        elif not opened:
            self._resume(run_id, budget_micros, orphan_micros=spent.open_micros)
        logger.info(
            "run_begins",
            run_id=run_id,
            seeds=len(seeds),
            budget_micros=budget_micros,
            already_spent_micros=spent.spent_micros,
            mode=mode,
        )
        budget = make_budget(
            self.deps.campaign if mode == "live" else None,
            cap_micros=budget_micros,
            per_seed_micros=per_seed_micros,
            spent_micros=spent.spent_micros,
            seed_spent=spent.per_owner,
            hold_prefix=run_stream(run_id),
            item=lambda _seed: lease,
        )
        recorder, bus = self.driver.equip(budget, index, mode)
        self.last_recorder = recorder
        by_seed: dict[str, list[AnyEvent]] = {}
        for seed_id, event in events:
            by_seed.setdefault(seed_id, []).append(event)
        for seed_id, seed_events in by_seed.items():
            resume_seed(recorder, seed_id, seed_events)
        for seed in seeds:
            self.driver.writer.fence(seed_stream(run_id, seed.id), versions.get(seed.id, 0))
        await self._drive_all(run_id, seeds, by_seed, bus, mode)
        return self._finish(run_id, seeds, recorder)

    def _resume(self, run_id: str, budget_micros: int | None, *, orphan_micros: int) -> None:
        """Append run ``run_id``'s ``RunResumed`` with today's prices (``orphan_micros``: what
        its open reservations held)."""
        stream = run_stream(run_id)
        store = self.deps.store
        prices = self.deps.prices.snapshot(self.config.models.all_models())
        changed = prices_changed(store.read_stream(stream), prices)
        if changed:
            logger.warning(
                "the prices changed since the run was last priced: its calls from here on "
                "are charged and capped at today's (the resume records them)",
                run_id=run_id,
                models=", ".join(changed),
            )
        store.append(
            stream,
            [
                RunResumed(
                    run_id=run_id,
                    budget_micros=budget_micros,
                    orphan_reservations_micros=orphan_micros,
                    prices=prices,
                )
            ],
        )

    async def _drive_all(
        self,
        run_id: str,
        seeds: Sequence[SeedRow],
        by_seed: dict[str, list[AnyEvent]],
        bus: Bus,
        mode: Mode,
    ) -> None:
        """Drive ``seeds`` (each from its log in ``by_seed``) with at most ``concurrency`` in
        flight, the first wave spread over ``ramp_s``; then, live, the parked ones' retries."""
        driver = self.driver
        workers = max(self.config.concurrency, 1)
        limiter = anyio.CapacityLimiter(workers)

        async def one(seed: SeedRow, history: list[AnyEvent] | None = None) -> None:
            async with limiter:
                past = by_seed.get(seed.id, []) if history is None else history
                try:
                    await driver.drive(run_id, seed, past)
                except StoreConflict as exc:
                    # Another writer appended to this seed's stream since it was read (the
                    # run's lease should have kept it out): stop working on it, write nothing.
                    logger.warning("seed_fenced_off", seed_id=seed.id, error=str(exc))

        writer = driver.writer
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

    def _finish(self, run_id: str, seeds: Sequence[SeedRow], recorder: CallRecorder) -> RunReport:
        """The run's report from its seeds' states and its log, and its ``RunFinished``
        (anchored) appended."""
        report = RunReport(run_id=run_id, outcome="completed", spent_micros=0)
        for seed in seeds:
            state = self.driver.state(seed_stream(run_id, seed.id))
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
        anchor = self.deps.store.anchor(run_streams(run_id, pairs=False))
        self.deps.store.append(
            run_stream(run_id), [finished.model_copy(update={"anchor": anchor.to_json()})]
        )
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
                if (state := self.driver.state(seed_stream(run_id, seed.id))) is not None
                and state.status == "stopped"
                and state.stop_reason.startswith("provider")
            ]
            if not parked:
                return
            logger.info("retrying_parked_seeds", run_id=run_id, seeds=len(parked))
            await (self.deps.sleep or anyio.sleep)(self.config.provider_retry_delay_s)
            async with anyio.create_task_group() as again:
                for seed in parked:
                    stream = seed_stream(run_id, seed.id)
                    history = [s.event() for s in self.deps.store.read_stream(stream)]
                    again.start_soon(one, seed, history)
