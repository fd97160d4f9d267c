"""A worker of the fleet: claims seeds (and indexing jobs) from the shared queue and curates them.

Any number of workers, in any number of processes on any number of machines, share one event
store and its queue (``store.coordination``). A worker claims up to ``concurrency`` seeds with
leases, renews them with heartbeats, folds each claimed seed from its log and runs it through
the same loop as a single-process run (``agents.curation``). What keeps the fleet honest:

- **One writer per seed.** Each claimed seed's stream is fenced at the version the worker read:
  if another worker took the seed over (this one looked dead), this one's next append fails
  and it drops the seed. A heartbeat that finds the lease gone cancels the seed at once.
- **One budget.** Reservations go through :class:`~policies.budget.SharedBudget` to the
  database's accounts (the campaign's total and the current UTC day), so the caps hold across
  every worker. A dead worker's open holds are written off as spent by whoever takes its seed
  over, as the log's ledger counts its open reservation.
- **Nothing paid twice.** A claimed seed's recorded calls are served from its log; a call
  recorded by a dead worker before its reply was appended is not made again.
- **Graceful stop.** :meth:`FleetWorker.work` returns once ``stop`` is set: no new claims,
  seeds pause at their next step, calls in flight get ``shutdown_grace_s`` to finish (then are
  cancelled and recorded as interrupted), and the leases go back to the queue at once.
"""

from __future__ import annotations

import ctypes
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import structlog

from agents.curation import open_run, resume_seed, run_end
from agents.deps import CallDeps
from agents.recorded import CallRecorder, RecordedCalls
from agents.run_spec import recorded_spec, run_gates_asked, unhonoured
from agents.seed_driver import CurationConfig, CurationProgress, SeedDriver
from policies.budget import TOTAL_ACCOUNT, Campaign, SharedBudget, day_account
from store.catalog import SeedRow
from store.coordination import BudgetAccounts, Lease, WorkItem, WorkQueue
from store.errors import ConfigError, StoreConflict
from store.events import (
    AnyEvent,
    CallId,
    run_stream,
    run_streams,
    seed_stream,
)
from store.ledger import spend, stream_spend

logger = structlog.get_logger("playlisteval.fleet")

SEED = "seed"
INDEX = "index"
__all__ = ["INDEX", "SEED", "TOTAL_ACCOUNT", "FleetConfig", "FleetWorker", "day_account"]


def seconds_to_next_day(now: datetime | None = None) -> float:
    """Seconds until the next UTC midnight (when a day's budget renews)."""
    now = now or datetime.now(UTC)
    tomorrow = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1.0, (tomorrow - now).total_seconds())


def release_free_memory() -> None:
    """Hand memory that was freed back to the system (glibc's ``malloc_trim``): a process that
    decodes video frames in many threads otherwise keeps each thread's arena at its peak, and a
    days-long worker's resident size creeps up. A no-op where glibc is not the allocator."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return


def default_worker_name() -> str:
    """HOST:PID."""
    return f"{socket.gethostname()}:{os.getpid()}"


def seed_item(run_id: str, seed: SeedRow, *, priority: int = 0) -> WorkItem:
    """The queue item of one seed (one per seed in a campaign: a seed is curated once)."""
    return WorkItem(
        id=f"{SEED}:{seed.id}",
        kind=SEED,
        run_id=run_id,
        priority=priority,
        payload={
            "seed": {
                "id": seed.id,
                "domain": seed.domain,
                "segment_a": seed.segment_a,
                "segment_b": seed.segment_b,
                "cosine": seed.cosine,
            }
        },
    )


def index_item(video_id: str) -> WorkItem:
    """The queue item that indexes one video."""
    return WorkItem(id=f"{INDEX}:{video_id}", kind=INDEX, payload={"video_id": video_id})


@dataclass(frozen=True)
class FleetConfig:
    """How a worker takes part in the fleet."""

    owner: str = field(default_factory=default_worker_name)
    lease_s: float = 60.0
    heartbeat_s: float = 15.0
    poll_s: float = 2.0
    shutdown_grace_s: float = 30.0
    exit_when_idle: bool = False
    # Index jobs at once: one per device the index models use (their model calls also take the
    # device in turn, tools.runtime.devices.device_slot); they leave the other slots to seeds.
    index_jobs: int = 1
    per_seed_micros: int | None = None
    # Caps of the shared accounts this worker creates when they do not exist yet (a new day
    # before the daemon's next tick, workers started before any daemon); existing caps stand.
    total_cap_micros: int | None = None
    day_cap_micros: int | None = None


@dataclass
class WorkerReport:
    """What one worker did before it stopped."""

    owner: str
    seeds_finished: dict[str, str] = field(default_factory=dict)  # item id → result
    seeds_released: list[str] = field(default_factory=list)
    seeds_lost: list[str] = field(default_factory=list)
    indexed: dict[str, str] = field(default_factory=dict)
    live_calls: int = 0
    replayed_calls: int = 0


IndexJob = Callable[[str], str]  # video id → result text (runs in a thread)


class FleetWorker:
    """The curation shell driven by the shared queue instead of a fixed list of seeds: the
    :class:`~agents.seed_driver.SeedDriver` it holds drives each seed it claims, as a
    :class:`~agents.curation.Curator`'s drives a run's."""

    def __init__(
        self,
        deps: CallDeps,
        *,
        config: CurationConfig,
        queue: WorkQueue,
        accounts: BudgetAccounts,
        fleet: FleetConfig,
        index_job: IndexJob | None = None,
        progress: CurationProgress | None = None,
    ) -> None:
        self.deps = deps
        self.driver = SeedDriver(deps, config=config, progress=progress)
        self.queue = queue
        self.accounts = accounts
        self.fleet = fleet
        self.index_job = index_job
        self._active: dict[str, Lease] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._run_of_seed: dict[str, str] = {}
        self._shared: SharedBudget | None = None
        # Runs whose recorded definition this worker's code cannot honour, with why: it never
        # takes their seeds (another worker's code may).
        self.refused_runs: dict[str, str] = {}
        self._wake = anyio.Event()
        self.state = "starting"
        self.campaign = Campaign(
            accounts,
            total_cap_micros=fleet.total_cap_micros,
            day_cap_micros=fleet.day_cap_micros,
            owner=fleet.owner,
        )

    @property
    def config(self) -> CurationConfig:
        """How this worker curates (its driver's)."""
        return self.driver.config

    # -- the loop ----------------------------------------------------------------------------------

    async def work(self, stop: anyio.Event) -> WorkerReport:
        """Claim and curate until ``stop`` is set (or, with ``exit_when_idle``, the queue has
        nothing left for this worker)."""
        fleet = self.fleet
        report = WorkerReport(owner=fleet.owner)
        budget = SharedBudget(
            self.accounts,
            self.campaign.names,
            per_seed_micros=fleet.per_seed_micros,
            # The worker's id in the hold's: a worker that takes a seed over from one that
            # only looked dead numbers its calls from the log, as the other still may.
            hold_id=lambda call_id: (
                f"{run_stream(self._run_of_seed.get(CallId.owner_of(call_id), ''))}/{call_id}"
                f"@{fleet.owner}"
            ),
            item_of=lambda seed_id: f"{SEED}:{seed_id}",
            owner=fleet.owner,
        )
        self._shared = budget
        recorder, bus = self.driver.equip(budget, RecordedCalls(), "live")
        writer = self.driver.writer
        slots = max(self.config.concurrency, 1)
        stopping = False
        self.driver.pause_requested = lambda: stopping
        self.state = "working"  # what every heartbeat from now on reports, until the stop
        await self._beat(self.state)
        logger.info("worker_starts", worker=fleet.owner, concurrency=slots)
        beats = anyio.CancelScope()
        beats_over = anyio.Event()

        async def heartbeats() -> None:
            try:
                with beats:
                    await self._heartbeats()
            finally:
                beats_over.set()

        async with anyio.create_task_group() as outer:
            outer.start_soon(writer.run)
            outer.start_soon(heartbeats)
            try:
                with anyio.CancelScope() as work_scope:
                    async with anyio.create_task_group() as group:
                        await bus.serve(group)
                        await self._claim_loop(group, stop, recorder, report)
                        # Stop: seeds pause at their next step; calls in flight get the grace.
                        stopping = True
                        self.state = "stopping"
                        await self._beat("stopping")
                        with anyio.move_on_after(fleet.shutdown_grace_s):
                            while self._active:
                                await self._wait_change(1.0)
                        if self._active:
                            logger.warning(
                                "worker_grace_over", worker=fleet.owner, seeds=len(self._active)
                            )
                            work_scope.cancel()
                        else:
                            await bus.close()
            finally:
                with anyio.CancelScope(shield=True):
                    released = await anyio.to_thread.run_sync(self.queue.release_owner, fleet.owner)
                    if released:
                        logger.info("leases_released", worker=fleet.owner, items=released)
                    # The heartbeats end first: a beat in flight (a thread, not cancellable)
                    # would otherwise land after "stopped" and say the worker is still stopping.
                    beats.cancel()
                    with anyio.move_on_after(max(5.0, 2 * fleet.heartbeat_s)):
                        await beats_over.wait()
                    self.state = "stopped"
                    await self._beat("stopped")
                writer.close()  # it drains what is queued, then ends
        report.live_calls = recorder.live_calls
        report.replayed_calls = recorder.replayed_calls
        logger.info(
            "worker_stops",
            worker=fleet.owner,
            finished=len(report.seeds_finished),
            released=len(report.seeds_released),
            lost=len(report.seeds_lost),
        )
        return report

    async def _claim_loop(
        self,
        group: anyio.abc.TaskGroup,
        stop: anyio.Event,
        recorder: CallRecorder,
        report: WorkerReport,
    ) -> None:
        fleet = self.fleet
        slots = max(self.config.concurrency, 1)
        kinds = [INDEX, SEED] if self.index_job is not None else [SEED]
        while not stop.is_set():
            free = slots - len(self._active)
            claimed: list[Lease] = []
            indexing = sum(1 for lease in self._active.values() if lease.kind == INDEX)
            index_free = min(free, max(fleet.index_jobs, 1) - indexing)
            if self.index_job is not None and index_free > 0:
                claimed = await self._claim([INDEX], index_free)
            if free - len(claimed) > 0:
                await anyio.to_thread.run_sync(self._learn_runs)
                claimed += await self._claim([SEED], free - len(claimed))
            for lease in claimed:
                self._active[lease.item_id] = lease
                if lease.kind == INDEX:
                    group.start_soon(self._index, lease, report)
                else:
                    group.start_soon(self._one, lease, recorder, report)
            # Idle only when no other worker holds anything either: a dead worker's lease
            # expires into work for someone.
            if (
                not claimed
                and not self._active
                and fleet.exit_when_idle
                and not await anyio.to_thread.run_sync(self.queue.pending, kinds)
            ):
                return
            if claimed and len(self._active) < slots:
                continue  # more may be waiting
            await self._wait_change(fleet.poll_s, stop)

    async def _claim(self, kinds: list[str], limit: int) -> list[Lease]:
        fleet = self.fleet
        return await anyio.to_thread.run_sync(
            partial(
                self.queue.claim,
                fleet.owner,
                kinds,
                limit=limit,
                lease_s=fleet.lease_s,
                exclude=frozenset(self._active),
                exclude_runs=frozenset(self.refused_runs),
            )
        )

    def _learn_runs(self) -> None:
        """Read the recorded definition of each run with claimable seeds that this worker has
        not met yet: one its code can honour is decided under that definition (the driver's
        config for the run), whatever this worker's settings say; one it cannot is refused —
        its seeds are left to other workers, and why is said once, in the log and in the
        worker's heartbeat (``fleet`` shows it)."""
        driver = self.driver
        for run_id in sorted(self.queue.claimable_runs([SEED])):
            if run_id in driver.run_configs or run_id in self.refused_runs:
                continue
            run_log = self.deps.store.read_stream(run_stream(run_id))
            if not run_log:
                continue  # queued before its RunStarted committed: met again next time
            asked = run_gates_asked(self.deps.store, run_id)
            try:
                spec = recorded_spec(run_log, asked)
                problems = unhonoured(spec)
            except ConfigError as exc:
                problems = [str(exc)]
            if problems:
                self.refused_runs[run_id] = problems[0]
                logger.warning(
                    "run_refused",
                    worker=self.fleet.owner,
                    run_id=run_id,
                    reason=problems[0],
                    more=len(problems) - 1,
                )
                continue
            driver.run_configs[run_id] = spec.config(self.config)

    async def _wait_change(self, timeout: float, stop: anyio.Event | None = None) -> None:
        """Sleep until a seed ends, ``stop`` is set, or ``timeout`` passes."""
        self._wake = anyio.Event()
        with anyio.move_on_after(timeout):
            if stop is None:
                await self._wake.wait()
                return
            async with anyio.create_task_group() as waiters:

                async def on(event: anyio.Event) -> None:
                    await event.wait()
                    waiters.cancel_scope.cancel()

                waiters.start_soon(on, self._wake)
                waiters.start_soon(on, stop)

    async def _heartbeats(self) -> None:
        """Renew the held leases every ``heartbeat_s`` (until cancelled); a lease found lost
        cancels its seed at once."""
        fleet = self.fleet
        beats = 0
        while True:
            await anyio.sleep(fleet.heartbeat_s)
            beats += 1
            if beats * fleet.heartbeat_s >= 30.0:
                beats = 0
                await anyio.to_thread.run_sync(release_free_memory)
            leases = list(self._active.values())
            try:
                lost = await anyio.to_thread.run_sync(
                    partial(self.queue.heartbeat, leases, lease_s=fleet.lease_s)
                )
                await self._beat(self.state)
            except Exception as exc:  # the database is away: leases may lapse; say so
                logger.warning("heartbeat_failed", worker=fleet.owner, error=str(exc))
                continue
            for item_id in lost:
                logger.warning("lease_lost", worker=fleet.owner, item=item_id)
                scope = self._scopes.get(item_id)
                if scope is not None:
                    scope.cancel()

    async def _beat(self, state: str) -> None:
        info = {
            "pid": os.getpid(),
            "active": sorted(self._active),
            "concurrency": self.config.concurrency,
            "refused_runs": dict(self.refused_runs),
        }
        try:
            await anyio.to_thread.run_sync(
                lambda: self.queue.worker_beat(self.fleet.owner, state, info)
            )
        except Exception as exc:
            logger.warning("worker_beat_failed", worker=self.fleet.owner, error=str(exc))

    # -- one claimed item -------------------------------------------------------------------------

    async def _one(self, lease: Lease, recorder: CallRecorder, report: WorkerReport) -> None:
        assert lease.run_id is not None
        driver = self.driver
        row = lease.payload["seed"]
        seed = SeedRow(
            id=row["id"],
            domain=row["domain"],
            segment_a=row["segment_a"],
            segment_b=row["segment_b"],
            cosine=row["cosine"],
        )
        run_id = lease.run_id
        stream = seed_stream(run_id, seed.id)
        self._run_of_seed[seed.id] = run_id
        try:
            if lease.previous_owner is not None:
                written_off = await anyio.to_thread.run_sync(self.accounts.write_off, lease.item_id)
                logger.warning(
                    "seed_taken_over",
                    worker=self.fleet.owner,
                    seed_id=seed.id,
                    previous_owner=lease.previous_owner,
                    written_off_micros=written_off,
                )
            stored = await anyio.to_thread.run_sync(self.deps.store.read_stream, stream)
            history: list[AnyEvent] = [s.event() for s in stored]
            self._prepare(recorder, seed.id, history)
            driver.writer.fence(stream, len(stored))
            outcome = "paused"
            with anyio.CancelScope() as scope:
                self._scopes[lease.item_id] = scope
                await driver.drive(run_id, seed, history)
                outcome = driver.outcome(stream)
            if scope.cancelled_caught:
                outcome = "lost"
        except StoreConflict as exc:
            logger.warning(
                "seed_fenced_off", worker=self.fleet.owner, seed_id=seed.id, error=str(exc)
            )
            outcome = "lost"
        except Exception as exc:  # a bad seed never stops the worker: park it with the reason
            logger.exception("seed_failed", worker=self.fleet.owner, seed_id=seed.id)
            outcome = f"failed: {type(exc).__name__}: {exc}"
        finally:
            driver.writer.unfence(stream)
            self._scopes.pop(lease.item_id, None)
            driver.forget(stream)
            self._forget(recorder, seed.id, stream)
        await self._settle_item(lease, outcome, report)

    def _prepare(self, recorder: CallRecorder, seed_id: str, history: Sequence[AnyEvent]) -> None:
        """Fold a claimed seed's log into the shared recorder and budget."""
        recorder.recorded.add(history)
        resume_seed(recorder, seed_id, history)
        spent = spend(history)
        assert self._shared is not None  # work() made it before any seed was claimed
        self._shared.restore_seed(seed_id, spent.spent_micros)

    def _forget(self, recorder: CallRecorder, seed_id: str, stream: str) -> None:
        """Drop what this process held for a seed it no longer works on."""
        history = [stored.event() for stored in self.deps.store.read_stream(stream)]
        recorder.forget_seed(seed_id, history)
        assert self._shared is not None  # work() made it before any seed was claimed
        self._shared.forget_seed(seed_id)
        self._run_of_seed.pop(seed_id, None)

    async def _settle_item(self, lease: Lease, outcome: str, report: WorkerReport) -> None:
        """Mark the item by how its seed ended, then close its run if it was the last."""
        self._active.pop(lease.item_id, None)
        self._wake.set()
        if outcome == "lost":
            report.seeds_lost.append(lease.item_id)
            return
        delay = 0.0
        if outcome in ("accepted", "discarded"):
            state, result = "done", outcome
        elif outcome.startswith("failed:"):
            state, result = "parked", outcome[:500]
        elif outcome == "paused":
            state, result = "queued", "paused"
            report.seeds_released.append(lease.item_id)
        elif outcome.startswith("stopped:budget") and "'day:" in outcome:
            state, result, delay = "queued", outcome[:500], seconds_to_next_day()
        elif outcome.startswith("stopped:provider") and lease.claims <= max(
            self.config.provider_retry_rounds, 0
        ):
            state, result = "queued", outcome[:500]
            delay = self.config.provider_retry_delay_s
        else:
            state, result = "parked", outcome[:500]
        finished = await anyio.to_thread.run_sync(
            lambda: self.queue.finish(lease, state, result, delay_s=delay)  # type: ignore[arg-type]
        )
        if not finished:
            report.seeds_lost.append(lease.item_id)
            return
        if state != "queued":
            report.seeds_finished[lease.item_id] = result
        if lease.run_id is not None and state != "queued":
            await anyio.to_thread.run_sync(self._close_run, lease.run_id)

    def _close_run(self, run_id: str) -> None:
        """Append the run's RunFinished once no item of it is open (one worker wins)."""
        if self.queue.open_items(run_id):
            return
        stream = run_stream(run_id)
        stored = self.deps.store.read_stream(stream)
        if not stored or stored[-1].type == "RunFinished":
            return
        prefix = seed_stream(run_id, "")
        ends = self.deps.store.read_all(
            stream_prefix=prefix,
            types=["SeedStarted", "ItemAccepted", "SeedDiscarded", "SeedStopped"],
        )
        spent = stream_spend(self.deps.store, prefix)
        finished = run_end(
            run_id, ((s.stream[len(prefix) :], s.event()) for s in ends), spent.spent_micros
        )
        anchor = self.deps.store.anchor(run_streams(run_id, pairs=False))
        finished = finished.model_copy(update={"anchor": anchor.to_json()})
        try:
            self.deps.store.append(stream, [finished], expected_version=len(stored))
            logger.info("run_finished", run_id=run_id, spent_micros=spent.spent_micros)
        except StoreConflict:
            return  # another worker closed it

    async def _index(self, lease: Lease, report: WorkerReport) -> None:
        assert self.index_job is not None
        video_id = str(lease.payload["video_id"])
        job = self.index_job
        try:
            result = await anyio.to_thread.run_sync(lambda: job(video_id))
            state = "done"
        except Exception as exc:  # a bad video never stops the worker
            logger.warning("index_failed", video_id=video_id, error=str(exc))
            result, state = f"error: {exc}"[:500], "parked"
        self._active.pop(lease.item_id, None)
        self._wake.set()
        if await anyio.to_thread.run_sync(
            lambda: self.queue.finish(lease, state, result)  # type: ignore[arg-type]
        ):
            report.indexed[video_id] = result


def start_run(
    store: Any,
    queue: WorkQueue,
    run_id: str,
    seeds: Sequence[SeedRow],
    *,
    budget_micros: int | None,
    per_seed_micros: int | None,
    config: Any,
    settings: dict[str, Any] | None = None,
) -> int:
    """Open run ``run_id`` over ``seeds`` in the log and queue its seeds; returns how many were
    new to the queue (a seed already queued in an earlier run is not curated again)."""
    open_run(
        store,
        run_id,
        seeds,
        config,
        budget_micros=budget_micros,
        per_seed_micros=per_seed_micros,
        settings=settings,
    )
    return queue.enqueue([seed_item(run_id, seed, priority=n) for n, seed in enumerate(seeds)])
