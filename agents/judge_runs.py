"""Judging under a capped stream: the one shell the judge evaluation and the difficulty gate share.

Both judge pairs with model calls of their own stream (``eval-<evaluation id>``,
``pairs-<run id>``), under a cap that stream records (a ``CapSet`` when it changes), and both
must survive a crash or a cap reached half-way without paying for anything twice. What they
share is this: the cap set before the first job, a recorder resumed from the stream's history
(its spend counted against the cap by the one ledger, its recorded answers served again for
free, its call ids going on), one fenced group-commit writer (a second writer on the stream
fails with :class:`~store.errors.StoreConflict` instead of paying twice unseen), every event
scrubbed of secrets, a bounded number of jobs in flight, and a job that cannot be finished —
the cap reached, a provider's or a clip's failure — kept as a failure while the others go on.

What a job is, what it writes besides its calls and what a failure means to the caller stays
with the caller: :func:`agents.evaluation.evaluate` writes one judgment record per job and
hands the failures back; :func:`agents.pairs.select_pairs` decides a pair per job and raises
the first failure once every other pair is in the log.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from agents.curation import GroupCommit, resumed_recorder, scrubbed
from agents.deps import CallDeps
from agents.workers import ModelRunner
from policies.budget import BudgetExhausted
from store.errors import MediaError, ProviderError
from store.events import AnyEvent, CallFailed, CallId, CallRecorded, CallReserved, CapSet, Event
from store.ledger import current_cap

__all__ = [
    "JUDGING_ERRORS",
    "CappedStream",
    "JudgeCalls",
    "JudgedStream",
    "judge_under_cap",
]

#: What stops one job and not the others: the cap reached, a provider's failure, a clip that
#: cannot be cut. The job is left undone (a later pass does it); anything else ends the pass.
JUDGING_ERRORS: tuple[type[Exception], ...] = (BudgetExhausted, ProviderError, MediaError)

J = TypeVar("J")  # one job: what the caller's judge function takes


@dataclass(frozen=True)
class CappedStream:
    """One stream of judge calls and how they are made.

    ``budget_micros`` caps what the stream's calls cost, earlier calls included (None: no cap);
    ``command`` is who sets it (the ``CapSet`` says so); with the ``deps``' campaign every call
    also reserves in its accounts, as holds of ``lease``. ``offline`` marks the calls as the
    offline provider's; ``secrets`` are scrubbed from every event; at most ``concurrency`` jobs
    are in flight.
    """

    stream: str
    budget_micros: int | None
    command: str
    offline: bool = False
    lease: str | None = None
    secrets: Sequence[str] = ()
    concurrency: int = 8


@dataclass(frozen=True)
class JudgeCalls:
    """What a job is handed: the runner its calls go through, the append its events (calls and
    the caller's own) go through, and each call owner's latest request key so far."""

    runner: ModelRunner
    append: Callable[[Event], Awaitable[None]]
    keys: Mapping[str, str]


@dataclass(frozen=True)
class JudgedStream:
    """What one pass over a stream did: calls made live and served from the log, and the jobs'
    failures (:data:`JUDGING_ERRORS`) in the order they were met."""

    live_calls: int = 0
    replayed_calls: int = 0
    failures: list[Exception] = field(default_factory=list)


async def judge_under_cap(
    deps: CallDeps,
    capped: CappedStream,
    history: Sequence[AnyEvent],
    jobs: Sequence[J],
    judge: Callable[[JudgeCalls, J], Awaitable[None]],
    *,
    opening: Sequence[Event] = (),
    not_judged: Callable[[J, Exception], None] | None = None,
    committed: Callable[[str, Event], None] | None = None,
) -> JudgedStream:
    """Run ``judge`` on every job of ``jobs`` under ``capped``'s cap, ``history`` being what
    the stream held when the caller read it.

    First, in one append fenced at that version: a ``CapSet`` when there is work (jobs, or
    ``opening`` events) and the stream's cap is not ``capped.budget_micros`` yet, then
    ``opening`` (the caller's events that come before any call). Then the jobs, at most
    ``capped.concurrency`` at once, each through one :class:`JudgeCalls`; a job that raises one
    of :data:`JUDGING_ERRORS` is told to ``not_judged`` and kept in the result's failures, and
    the others go on. ``committed`` hears every event once it is durable. Any other error ends
    the pass and is raised as itself (not wrapped in an exception group) when it is the only one.
    """
    store = deps.store
    first: list[Event] = []
    if (jobs or opening) and current_cap(history) != capped.budget_micros:
        first.append(CapSet(cap_micros=capped.budget_micros, command=capped.command))
    first.extend(opening)
    if first:
        store.append(capped.stream, first, expected_version=len(history))
    if not jobs:
        return JudgedStream()
    history = [*history, *first]  # type: ignore[list-item]  # each is one of AnyEvent
    recorder = resumed_recorder(
        history,
        budget_micros=capped.budget_micros,
        prices=deps.prices,
        offline=capped.offline,
        traffic=deps.traffic,
        campaign=deps.campaign,
        hold_prefix=capped.stream,
        lease=capped.lease,
    )
    writer = GroupCommit(store, committed or (lambda _stream, _event: None))
    writer.fence(capped.stream, len(history))
    secrets = list(capped.secrets)
    keys: dict[str, str] = {}  # call owner → request key of its latest call

    async def append(event: Event) -> None:
        if isinstance(event, CallRecorded | CallReserved | CallFailed):
            keys[CallId.owner_of(event.call_id)] = event.key
        await writer.append(capped.stream, scrubbed(event, secrets))

    calls = JudgeCalls(ModelRunner(recorder=recorder, model_for=deps.model_for), append, keys)
    failures: list[Exception] = []
    limiter = anyio.CapacityLimiter(max(capped.concurrency, 1))

    async def one(job: J) -> None:
        async with limiter:
            try:
                await judge(calls, job)
            except JUDGING_ERRORS as exc:
                failures.append(exc)
                if not_judged is not None:
                    not_judged(job, exc)

    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(writer.run)
            try:
                async with anyio.create_task_group() as group:
                    for job in jobs:
                        group.start_soon(one, job)
            finally:
                writer.close()
    except BaseExceptionGroup as grouped:
        # Task groups wrap what a task raised; one error surfaces as itself.
        leaves = _leaves(grouped)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    return JudgedStream(recorder.live_calls, recorder.replayed_calls, failures)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
