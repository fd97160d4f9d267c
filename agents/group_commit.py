"""Events as a run writes them: scrubbed of secrets, then group-committed.

One writer per run (or per fleet worker, or per evaluation) takes the appends of every seed in
flight and commits those that arrive in one turn of the event loop in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio

from store.errors import StoreConflict
from store.events import Event
from store.eventstore import EventStore
from store.redact import has_secret, scrub


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
