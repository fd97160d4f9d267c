"""One Ctrl-C interrupts a command, wherever it lands, event loop or not.

Python 3.11's ``asyncio.Runner`` (what ``anyio.run`` runs on) takes SIGINT over while its loop
runs and turns the first press into one cancellation of the loop's main task. That is
edge-triggered: work that absorbs a single ``CancelledError`` goes on, and a curation run
completed and said so with exit 0 after the person had pressed Ctrl-C (step 19).

While :func:`interruptible` is in force the process has a SIGINT handler of its own; the runner
takes SIGINT over only from Python's default handler, so it leaves this one alone, and a press:

- outside an event loop raises ``KeyboardInterrupt`` where the main thread is, as Python does;
- inside one raises it from a callback of the loop, between two steps of its tasks (never in
  the middle of one): the loop stops there, whatever its tasks would make of a cancellation.
  The runner then cancels each task left once, so shielded clean-up (a call in flight
  recorded as interrupted, models released) still runs, and the ``KeyboardInterrupt`` comes
  out of ``anyio.run``;
- a second press raises at once, wherever it lands, for when that clean-up is too slow.

A press that some code swallowed is raised when the block ends: a command never reports work
as complete that the person interrupted. The commands' event loops run in
:mod:`playlisteval.runs`, not here, so this works on the signal rather than on an anyio cancel
scope around each loop's body.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType


@dataclass
class Presses:
    """How many times Ctrl-C was pressed while :func:`interruptible` was in force."""

    count: int = 0


def _stop_the_loop() -> None:
    """A loop callback: the ``KeyboardInterrupt`` leaves the loop between two task steps."""
    raise KeyboardInterrupt


@contextmanager
def interruptible() -> Iterator[Presses]:
    """While the block runs, one Ctrl-C interrupts it with ``KeyboardInterrupt`` (see the
    module's docstring); the handler in force before is put back after. Off the main thread,
    where no signal handler can be set, it changes nothing."""
    presses = Presses()
    if threading.current_thread() is not threading.main_thread():
        yield presses
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        presses.count += 1
        if presses.count == 1:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop runs on this thread: the plain interrupt
                pass
            else:
                # Thread-safe for the wake-up: the loop may be waiting in select().
                loop.call_soon_threadsafe(_stop_the_loop)
                return
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield presses
    finally:
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)
    if presses.count:
        raise KeyboardInterrupt  # pressed, and the block went on to its end regardless
