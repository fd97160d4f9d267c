"""The message bus over real anyio streams: append before deliver, correlation, backpressure.

Nothing here sleeps: a test that needs tasks to reach their waiting points waits with
``anyio.wait_all_tasks_blocked()``, and slow handlers are handlers blocked on an ``anyio.Event``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest
from anyio.abc import TaskGroup

from agents.bus import Bus, BusClosed, Envelope
from store.errors import MediaError, PlaylistEvalError
from store.events import Event, GatePassed, GateRequested

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """Run on asyncio, the backend the curation shell uses."""
    return "asyncio"


@dataclass
class Log:
    """The event store's ``append`` as the bus sees it: a list of ``(stream, event)``."""

    entries: list[tuple[str, Event]] = field(default_factory=list)

    async def append(self, stream: str, event: Event) -> None:
        """Record one appended event."""
        self.entries.append((stream, event))


def ask(gate: str = "structural", attempt: int = 1) -> GateRequested:
    """A verifier request."""
    return GateRequested(phase=1, gate=gate, attempt=attempt)


def verdict(request: Event) -> GatePassed:
    """The verdict answering ``request``, carrying its gate and attempt (to check correlation)."""
    assert isinstance(request, GateRequested)
    return GatePassed(phase=1, gate=request.gate, attempt=request.attempt)


@asynccontextmanager
async def serving(bus: Bus) -> AsyncIterator[TaskGroup]:
    """The bus served in a task group, closed when the block ends (so its workers end too)."""
    async with anyio.create_task_group() as group:
        await bus.serve(group)
        try:
            yield group
        finally:
            await bus.close()


@dataclass
class Gatekeeper:
    """A slow verifier: each request waits until ``release`` is set; ``entered`` counts them."""

    release: anyio.Event = field(default_factory=anyio.Event)
    entered: list[Event] = field(default_factory=list)

    async def __call__(self, envelope: Envelope) -> Event:
        """Answer once released."""
        self.entered.append(envelope.message)
        await self.release.wait()
        return verdict(envelope.message)


# -- append before deliver -----------------------------------------------------------------------


async def test_request_is_logged_before_delivery_and_reply_before_request_returns() -> None:
    """The handler finds the request already in the log; the reply is in it when request() ends."""
    log = Log()
    bus = Bus(log.append)
    seen_by_handler: list[list[tuple[str, Event]]] = []
    context = object()

    async def handler(envelope: Envelope) -> Event:
        seen_by_handler.append(list(log.entries))
        assert (envelope.stream, envelope.context) == ("seed-r1-s1", context)
        return verdict(envelope.message)

    bus.register("verifier", handler)
    request = ask()
    async with serving(bus):
        reply = await bus.request("verifier", "seed-r1-s1", request, context=context)
        assert log.entries == [("seed-r1-s1", request), ("seed-r1-s1", reply)]
    assert seen_by_handler == [[("seed-r1-s1", request)]]
    assert reply == verdict(request)


async def test_redelivery_does_not_append_the_request_again() -> None:
    """append_request=False: the request is already in the log; only the reply is appended."""
    log = Log()
    bus = Bus(log.append)
    delivered: list[Event] = []

    async def handler(envelope: Envelope) -> Event:
        delivered.append(envelope.message)
        return verdict(envelope.message)

    bus.register("verifier", handler)
    request = ask("sufficiency", 3)
    async with serving(bus):
        reply = await bus.request("verifier", "s", request, append_request=False)
    assert delivered == [request]
    assert log.entries == [("s", reply)]


# -- correlation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("workers", "requests"), [(1, 20), (4, 60), (16, 60)])
async def test_each_reply_reaches_its_own_requester_under_concurrent_requests(
    workers: int, requests: int
) -> None:
    """Many requesters at once, answered out of order: each gets the reply to its own request."""
    log = Log()
    bus = Bus(log.append, inbox_size=4)

    async def handler(envelope: Envelope) -> Event:
        assert isinstance(envelope.message, GateRequested)
        # Uneven work so replies come back in a different order from the requests.
        for _ in range(envelope.message.attempt % 7):
            await anyio.lowlevel.checkpoint()
        return verdict(envelope.message)

    bus.register("verifier", handler, workers=workers)
    replies: dict[int, Event] = {}

    async def requester(n: int) -> None:
        replies[n] = await bus.request("verifier", f"seed-{n}", ask(f"gate-{n}", n))

    async with serving(bus), anyio.create_task_group() as requesters:
        for n in range(requests):
            requesters.start_soon(requester, n)
    assert replies == {n: verdict(ask(f"gate-{n}", n)) for n in range(requests)}
    # Every stream holds its request then its reply, whatever the interleaving across streams.
    for n in range(requests):
        mine = [event for stream, event in log.entries if stream == f"seed-{n}"]
        assert mine == [ask(f"gate-{n}", n), verdict(ask(f"gate-{n}", n))]


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [MediaError("clip 'v1#0' could not be decoded"), ValueError("malformed verdict")],
    ids=["project error", "other error"],
)
async def test_handler_exception_reaches_the_requester_and_no_reply_is_logged(
    error: Exception,
) -> None:
    """The requester gets the handler's exception; the log holds the request only; the worker
    lives on to answer the next request."""
    log = Log()
    bus = Bus(log.append)

    async def handler(envelope: Envelope) -> Event:
        assert isinstance(envelope.message, GateRequested)
        if envelope.message.gate == "bad":
            raise error
        return verdict(envelope.message)

    bus.register("verifier", handler)
    async with serving(bus):
        with pytest.raises(type(error)) as raised:
            await bus.request("verifier", "s", ask("bad"))
        assert raised.value is error
        assert log.entries == [("s", ask("bad"))]
        assert await bus.request("verifier", "s", ask("good")) == verdict(ask("good"))


@pytest.mark.parametrize("moment", ["before serve", "after close"])
async def test_request_when_the_bus_is_not_serving_raises_bus_closed(moment: str) -> None:
    """No delivery (and nothing logged) before serve() or after close()."""
    log = Log()
    bus = Bus(log.append)
    bus.register("verifier", Gatekeeper())
    if moment == "after close":
        async with serving(bus):
            await anyio.wait_all_tasks_blocked()  # the workers are up and waiting
    with pytest.raises(BusClosed, match="GateRequested"):
        await bus.request("verifier", "s", ask())
    assert issubclass(BusClosed, PlaylistEvalError)
    assert log.entries == []


async def test_request_to_an_unregistered_kind_is_a_clear_project_error() -> None:
    """Asking for an agent nobody registered says which kind and what is registered."""
    bus = Bus(Log().append)
    bus.register("verifier", Gatekeeper())
    caught: list[Exception] = []
    async with serving(bus):
        await anyio.wait_all_tasks_blocked()
        try:
            await bus.request("nope", "s", ask())
        except Exception as exc:  # caught here so the serving group ends cleanly either way
            caught.append(exc)
    [error] = caught
    assert isinstance(error, PlaylistEvalError), repr(error)
    assert "'nope'" in str(error)


async def test_a_cancelled_requester_does_not_stop_the_workers() -> None:
    """A requester that gives up (cancelled) leaves the agent serving the others."""
    log = Log()
    bus = Bus(log.append)
    keeper = Gatekeeper()
    bus.register("verifier", keeper)
    scopes: list[anyio.CancelScope] = []
    async with serving(bus) as group:
        group.start_soon(_request_in_own_scope, scopes, bus)
        await anyio.wait_all_tasks_blocked()
        assert keeper.entered == [ask("given up")]
        scopes[0].cancel()
        await anyio.wait_all_tasks_blocked()
        keeper.release.set()
        await anyio.wait_all_tasks_blocked()
        assert await bus.request("verifier", "s", ask("next")) == verdict(ask("next"))


async def _request_in_own_scope(scopes: list[anyio.CancelScope], bus: Bus) -> None:
    # The request runs in a scope the test can cancel, so only this requester gives up.
    with anyio.CancelScope() as scope:
        scopes.append(scope)
        await bus.request("verifier", "s", ask("given up"))


async def test_closing_right_after_serve_ends_cleanly() -> None:
    """close() straight after serve(), before any worker ran, stops the bus without an error."""
    bus = Bus(Log().append)
    bus.register("verifier", Gatekeeper())
    async with serving(bus):
        pass
    with pytest.raises(BusClosed):
        await bus.request("verifier", "s", ask())


# -- backpressure and worker pools ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("inbox_size", "buffered", "senders_waiting"),
    [(1, 1, 3), (2, 2, 2), (64, 4, 0)],
)
async def test_a_full_inbox_makes_senders_wait(
    inbox_size: int, buffered: int, senders_waiting: int
) -> None:
    """Five requests, one busy worker: the inbox holds ``inbox_size``, the rest of the senders
    wait for room instead of queueing without bound; all are answered once the worker frees."""
    log = Log()
    bus = Bus(log.append, inbox_size=inbox_size)
    keeper = Gatekeeper()
    bus.register("verifier", keeper)
    replies: list[Event] = []

    async def requester(n: int) -> None:
        replies.append(await bus.request("verifier", "s", ask(attempt=n)))

    async with serving(bus), anyio.create_task_group() as requesters:
        for n in range(1, 6):
            requesters.start_soon(requester, n)
        await anyio.wait_all_tasks_blocked()
        # The inbox stream is private; its statistics are the only view of who is waiting.
        stats = bus._inboxes["verifier"].send.statistics()
        assert len(keeper.entered) == 1
        assert (stats.current_buffer_used, stats.tasks_waiting_send) == (
            buffered,
            senders_waiting,
        )
        # Append comes before delivery, so every request is logged even while it waits.
        assert len(log.entries) == 5
        keeper.release.set()
    assert sorted(r.attempt for r in replies if isinstance(r, GatePassed)) == [1, 2, 3, 4, 5]
    assert len(log.entries) == 10


@pytest.mark.parametrize("workers", [1, 3, 8])
async def test_n_workers_handle_n_requests_at_once(workers: int) -> None:
    """With ``workers`` tasks exactly that many requests are in the handler together."""
    bus = Bus(Log().append)
    keeper = Gatekeeper()
    bus.register("verifier", keeper, workers=workers)
    done: list[Event] = []

    async def requester(n: int) -> None:
        done.append(await bus.request("verifier", "s", ask(attempt=n)))

    async with serving(bus), anyio.create_task_group() as requesters:
        for n in range(workers + 2):
            requesters.start_soon(requester, n)
        await anyio.wait_all_tasks_blocked()
        assert len(keeper.entered) == workers
        assert done == []
        keeper.release.set()
    assert len(done) == workers + 2
    assert len(keeper.entered) == workers + 2


async def test_each_kind_has_its_own_inbox_and_workers() -> None:
    """A blocked verifier does not hold up the generator."""
    log = Log()
    bus = Bus(log.append)
    keeper = Gatekeeper()
    bus.register("verifier", keeper)

    async def generator(envelope: Envelope) -> Event:
        return verdict(envelope.message)

    bus.register("generator", generator)
    async with serving(bus) as group:
        group.start_soon(bus.request, "verifier", "a", ask("slow"))
        await anyio.wait_all_tasks_blocked()
        assert keeper.entered == [ask("slow")]
        assert await bus.request("generator", "b", ask("fast")) == verdict(ask("fast"))
        keeper.release.set()
