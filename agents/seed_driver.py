"""Driving seeds through the loop: the part a single-process run and a fleet worker share.

A :class:`SeedDriver` folds a seed's log, asks ``decide`` what is next, sends each attempt over
the bus to a generator or the verifier, appends what comes back (scrubbed, group-committed),
keeps the seeds' states as their events commit and tells a :class:`CurationProgress` of each.
Its holders say which seeds, when and under which budget: :class:`agents.curation.Curator`
over a fixed list of seeds, :class:`agents.fleet.FleetWorker` over the seeds it claims from the
shared queue — each holds a driver, as Temporal's ``Worker`` holds its sub-workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from pydantic_ai.models import Model

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
from agents.group_commit import GroupCommit, scrubbed
from agents.recorded import CallRecorder, Mode, RecordedCalls
from agents.workers import GenerationLimits, GeneratorAgent, ModelRunner, RoleModels, SeedCall
from policies.budget import Budget, BudgetExhausted
from store.catalog import SeedRow
from store.errors import MediaError, ProviderError, ReplayDivergence
from store.events import (
    AnyEvent,
    AttemptStarted,
    Event,
    GateRequested,
    ItemAccepted,
    SeedDiscarded,
    SeedStarted,
    SeedStopped,
    seed_stream,
)
from store.redact import secret_values

# The loop's log lines keep the curation logger's name they had before the driver was split out.
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


class CurationProgress(Protocol):
    """Told of every event a run appends (the CLI draws live progress from it)."""

    def event(self, stream: str, event: Event, budget: Budget) -> None:
        """One more event in ``stream``."""


class SeedDriver:
    """Drives seeds through the loop: one per curator or fleet worker, equipped once per run
    (or per worker's life) with the budget its calls reserve in.

    ``config`` and ``model_for`` are read when :meth:`equip` builds the machinery, so a holder
    may change them between runs. ``pause_requested`` is asked between a seed's steps: true
    makes seeds return where they are (a shutdown); their logs say where to go on.
    """

    def __init__(
        self,
        deps: CallDeps,
        *,
        config: CurationConfig,
        progress: CurationProgress | None = None,
    ) -> None:
        self.deps = deps
        self.config = config
        # A run's own definition where it is not ``config``'s (a fleet worker's runs).
        self.run_configs: dict[str, CurationConfig] = {}
        self.model_for: Callable[[str], Model] = deps.model_for
        self.progress = progress
        self.pause_requested: Callable[[], bool] = lambda: False
        # Asked of each seed's stream between its steps: true leaves that seed where it is (a
        # replay of an upgraded run stops each seed where its definition changed).
        self.hold: Callable[[str], bool] | None = None
        self.budget: Budget | None = None
        self._states: dict[str, SeedState] = {}
        self._secrets = sorted({*secret_values(), *deps.secrets}, key=len, reverse=True)
        self._writer: GroupCommit | None = None
        self._bus: Bus | None = None

    # -- equipping -------------------------------------------------------------------------------

    def equip(
        self, budget: Budget, recorded: RecordedCalls, mode: Mode
    ) -> tuple[CallRecorder, Bus]:
        """Make the recorder every call goes through (reserving in ``budget``, serving
        ``recorded``), the bus to the agents (a generator and a verifier worker per seed in
        flight) and a new event writer; returns the recorder and the bus, which the holder
        serves and closes. The writer (:attr:`writer`) is the holder's to run and close."""
        deps, config = self.deps, self.config
        self.budget = budget
        recorder = CallRecorder(
            budget=budget,
            prices=deps.prices,
            recorded=recorded,
            mode=mode,
            offline=config.offline,
            traffic=deps.traffic,
            pricing=deps.pricing,
            sleep=deps.sleep,
            batcher=deps.batcher,
            prices_at=deps.prices_at,
        )
        runner = ModelRunner(recorder=recorder, model_for=self.model_for)
        generator = GeneratorAgent(runner, config.models, config.limits)
        verifier = VerifierAgent(runner, config.models, config.limits, gates=config.policy.gates)
        slots = max(config.concurrency, 1)
        bus = Bus(append=self.append, inbox_size=slots)
        bus.register("generator", generator.handle, workers=slots)
        bus.register("verifier", verifier.handle, workers=slots)
        self._bus = bus
        self._writer = GroupCommit(deps.store, self._committed)
        return recorder, bus

    @property
    def writer(self) -> GroupCommit:
        """The event writer of the current run (its holder runs it, fences and closes it)."""
        if self._writer is None:
            raise RuntimeError("the seed driver has no event writer yet: call equip() first")
        return self._writer

    # -- appending -------------------------------------------------------------------------------

    async def append(self, stream: str, event: Event) -> None:
        """Append ``event`` to ``stream`` with any secret scrubbed; returns once it is durable."""
        await self.writer.append(stream, scrubbed(event, self._secrets))

    def _committed(self, stream: str, event: Event) -> None:
        if stream in self._states:
            self._states[stream] = apply(self._states[stream], event)  # type: ignore[arg-type]
        if self.progress is not None and self.budget is not None:
            self.progress.event(stream, event, self.budget)

    def config_for(self, run_id: str) -> CurationConfig:
        """How run ``run_id``'s seeds are decided: its own definition when one was given
        (:attr:`run_configs`), else :attr:`config`."""
        return self.run_configs.get(run_id, self.config)

    # -- a seed's state ----------------------------------------------------------------------------

    def state(self, stream: str) -> SeedState | None:
        """The state of the seed driven in ``stream`` (None: not driven, or forgotten)."""
        return self._states.get(stream)

    def outcome(self, stream: str) -> str:
        """How the seed in ``stream`` ended: ``accepted``, ``discarded``, ``stopped:<reason>``,
        or ``paused`` when it has not ended (or is not driven here)."""
        state = self._states.get(stream)
        if state is None:
            return "paused"
        if state.status in ("accepted", "discarded"):
            return state.status
        if state.status == "stopped":
            return "stopped:" + state.stop_reason
        return "paused"

    def forget(self, stream: str) -> None:
        """Drop the state of a seed this driver no longer works on."""
        self._states.pop(stream, None)

    # -- a seed ------------------------------------------------------------------------------------

    async def drive(self, run_id: str, seed: SeedRow, history: list[AnyEvent]) -> None:
        """Drive ``seed`` of run ``run_id`` from its log ``history`` until it is accepted,
        discarded, stopped (budget, provider, evidence, unrecorded: a ``SeedStopped`` says why)
        or paused; a request whose reply never came is delivered again without a second append.
        """
        stream = seed_stream(run_id, seed.id)
        self._states[stream] = fold(history)

        async def append(event: Event) -> None:
            await self.append(stream, event)

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
        deps = self.deps
        config = self.config_for(run_id)
        call = SeedCall(
            seed_id=seed.id,
            evidence=SeedEvidence(
                deps.catalog, deps.clips, seed.id, seed.segment_a, seed.segment_b
            ),
            append=append,
            models=config.models,
            limits=config.limits,
        )
        try:
            await self._steps(stream, call, config.policy)
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

    async def _steps(self, stream: str, call: SeedCall, policy: LoopPolicy) -> None:
        """The waiting request again, then what ``decide`` says under ``policy``, until it says
        nothing more or a pause is asked for."""
        redeliver = pending(self._states[stream])
        if redeliver is not None:
            await self._execute(redeliver, stream, call, append_request=False)
        while True:
            commands = decide(self._states[stream], policy)
            if not commands:
                return
            for command in commands:
                if self.pause_requested() or (self.hold is not None and self.hold(stream)):
                    return
                await self._execute(command, stream, call, append_request=True)

    async def _execute(
        self, command: Command, stream: str, call: SeedCall, *, append_request: bool
    ) -> None:
        bus = self._bus
        assert bus is not None  # equip() made it before any seed is driven
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
            await self.append(
                stream,
                ItemAccepted(seed_id=call.seed_id, qa=command.qa, distractors=command.distractors),
            )
        elif isinstance(command, Discard):
            await self.append(stream, SeedDiscarded(seed_id=call.seed_id, reasons=command.reasons))
