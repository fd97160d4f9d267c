"""The in-process message bus: typed requests and replies between agents over anyio streams.

A message is appended to the event store before it is delivered, so the log *is* the
conversation. Each agent kind has one bounded inbox (backpressure when it is full) served by a
pool of worker tasks; a request carries a one-shot reply stream, which is its correlation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from store.errors import PlaylistEvalError
from store.events import Event

Append = Callable[[str, Event], Awaitable[None]]
Handler = Callable[["Envelope"], Awaitable[Event]]


class BusClosed(PlaylistEvalError):
    """A request was made before the bus started serving or after it stopped."""


class UnknownAgent(PlaylistEvalError):
    """A request names a kind of agent that nobody registered."""


@dataclass
class Envelope:
    """A request on its way to an agent: the seed's stream, the message and where to reply."""

    stream: str
    message: Event
    context: Any
    reply_to: MemoryObjectSendStream[Event | BaseException]


@dataclass
class _Inbox:
    send: MemoryObjectSendStream[Envelope]
    receive: MemoryObjectReceiveStream[Envelope]
    handler: Handler
    workers: int


@dataclass
class Bus:
    """Routes requests to agents by kind; appends every message before delivering it."""

    append: Append
    inbox_size: int = 64
    _inboxes: dict[str, _Inbox] = field(default_factory=dict)
    _open: bool = False

    def register(self, kind: str, handler: Handler, *, workers: int = 1) -> None:
        """An agent that answers requests of ``kind`` with ``workers`` concurrent tasks."""
        if self._open:
            raise BusClosed(f"register {kind!r} before serve(): its workers would never start")
        send, receive = anyio.create_memory_object_stream[Envelope](self.inbox_size)
        self._inboxes[kind] = _Inbox(send, receive, handler, workers)

    async def serve(self, group: TaskGroup) -> None:
        """Start every agent's workers in ``group``; they stop when :meth:`close` is called."""
        self._open = True
        for inbox in self._inboxes.values():
            for _ in range(inbox.workers):
                # Cloned now, not in the task: a close() before the worker first runs must end
                # it cleanly rather than fail the group.
                group.start_soon(self._work, inbox, inbox.receive.clone())

    async def _work(self, inbox: _Inbox, receive: MemoryObjectReceiveStream[Envelope]) -> None:
        async with receive:
            async for envelope in receive:
                try:
                    reply: Event | BaseException = await inbox.handler(envelope)
                except Exception as exc:  # the requester decides what a failure means
                    reply = exc
                # A cancelled requester has closed its end: nobody waits for this reply.
                async with envelope.reply_to:
                    with contextlib.suppress(anyio.BrokenResourceError):
                        await envelope.reply_to.send(reply)

    async def request(
        self,
        kind: str,
        stream: str,
        message: Event,
        *,
        context: Any = None,
        append_request: bool = True,
    ) -> Event:
        """Append ``message`` to ``stream``, deliver it, wait for the reply, append the reply.

        ``append_request=False`` re-delivers a request that is already in the log (resuming a
        seed whose run stopped while it waited).
        """
        if not self._open:
            raise BusClosed(
                f"the bus is not serving; cannot deliver {type(message).__name__} "
                "(call serve() first, and nothing after close())"
            )
        inbox = self._inboxes.get(kind)
        if inbox is None:
            raise UnknownAgent(f"no agent serves {kind!r}; registered: {sorted(self._inboxes)!r}")
        if append_request:
            await self.append(stream, message)
        reply_send, reply_receive = anyio.create_memory_object_stream[Event | BaseException](1)
        await inbox.send.send(Envelope(stream, message, context, reply_send))
        async with reply_receive:
            reply = await reply_receive.receive()
        if isinstance(reply, BaseException):
            raise reply
        await self.append(stream, reply)
        return reply

    async def close(self) -> None:
        """Stop accepting requests; workers finish what they hold and end."""
        self._open = False
        for inbox in self._inboxes.values():
            await inbox.send.aclose()
            await inbox.receive.aclose()
