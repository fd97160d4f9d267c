"""One Ctrl-C interrupts a command, wherever it lands, event loop or not.

Python 3.11's ``asyncio.Runner`` (what ``anyio.run`` runs on) takes SIGINT over while its loop
runs and turns the first press into one cancellation of the loop's main task. That is
edge-triggered: work that absorbs a single ``CancelledError`` goes on, and a curation run
completed and said so with exit 0 after the person had pressed Ctrl-C (step 19).

While :func:`interruptible` is in force the process has a SIGINT handler of its own; the runner
takes SIGINT over only from Python's default handler, so it leaves this one alone, and a press:

- outside an event loop raises ``KeyboardInterrupt`` where the main thread is, as Python does;
- inside one raises it from a callback of the loop, between two steps of its tasks (never in
  the middle of one): the loop stops there, whatever its tasks would make of a cancellation,
  and the ``KeyboardInterrupt`` comes out of ``anyio.run``. On its way out the runner cancels
  each task left once, so shielded clean-up (a call in flight recorded as interrupted, the
  models released) runs. A task still running ``grace_s`` seconds after the press has taken
  that cancellation and gone on: it is cancelled again at every turn of the loop until it ends
  (level-triggered, as an anyio cancel scope is), so no work can absorb the press;
- a second press raises at once, wherever it lands, for a person who will not wait.

A press that some code swallowed is raised when the block ends: a command never reports work
as complete that the person interrupted. The commands' event loops run in
:mod:`playlisteval.runs`, not here, so this works on the signal and the loop's tasks rather
than on an anyio cancel scope around each loop's body.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator, Set
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # asyncio is not imported for the CLI's start: a loop that runs has loaded it
    import asyncio

#: Seconds the loop's tasks have, after Ctrl-C, to finish their clean-up on the one
#: cancellation each gets before those still running are cancelled again and again.
GRACE_S = 10.0


@dataclass
class Presses:
    """How many times Ctrl-C was pressed while :func:`interruptible` was in force."""

    count: int = 0


def _stop_the_loop(loop: asyncio.AbstractEventLoop, grace_s: float) -> None:
    """A loop callback: the ``KeyboardInterrupt`` leaves the loop between two task steps; the
    tasks of the moment are cancelled again from ``grace_s`` on, if they are still running."""
    import asyncio

    loop.call_later(grace_s, _cancel_until_done, loop, asyncio.all_tasks(loop))
    raise KeyboardInterrupt


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, if one does (never importing asyncio: a loop
    that runs has loaded it, and a signal handler should not import)."""
    module = sys.modules.get("asyncio")
    if module is None:
        return None
    try:
        loop: asyncio.AbstractEventLoop = module.get_running_loop()
    except RuntimeError:  # no loop runs on this thread
        return None
    return loop


def _cancel_until_done(loop: asyncio.AbstractEventLoop, tasks: Set[asyncio.Task[object]]) -> None:
    """Cancel each of ``tasks`` that is still running, and again at the loop's next turn."""
    running = {task for task in tasks if not task.done()}
    for task in running:
        task.cancel()
    if running:
        loop.call_soon(_cancel_until_done, loop, running)


@contextmanager
def interruptible(grace_s: float = GRACE_S) -> Iterator[Presses]:
    """While the block runs, one Ctrl-C interrupts it with ``KeyboardInterrupt`` (see the
    module's docstring; ``grace_s`` is the clean-up's time in an event loop); the handler in
    force before is put back after. Off the main thread, where no signal handler can be set,
    it changes nothing."""
    presses = Presses()
    if threading.current_thread() is not threading.main_thread():
        yield presses
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        presses.count += 1
        loop = _running_loop() if presses.count == 1 else None
        if loop is not None:
            # Thread-safe for the wake-up: the loop may be waiting in select().
            loop.call_soon_threadsafe(_stop_the_loop, loop, grace_s)
            return
        raise KeyboardInterrupt  # no loop runs on this thread, or a second press

    before = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield presses
    finally:
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)
    if presses.count:
        raise KeyboardInterrupt  # pressed, and the block went on to its end regardless
