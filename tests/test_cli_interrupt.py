"""One Ctrl-C interrupts a command (``playlisteval.cli.interrupt.interruptible``), even when the
work in its event loop takes a cancellation and goes on.

Each case runs in a fresh interpreter that presses Ctrl-C on itself (SIGINT to its own pid):
the test process's own handling of SIGINT stays out of it. The end-to-end case, ``curate``
interrupted once while its seeds are at work, is in test_cli_frictions.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import os, signal, sys
import anyio
from playlisteval.cli.interrupt import interruptible

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a command's own process
steps = []


def press_ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)


async def work_that_takes_cancellations(stop_after=None):
    # Pieces of work, each of which takes a cancellation as its own end; the work goes on to
    # the next piece: the way a single cancel of the loop's main task was absorbed, and a run
    # completed. A cancellation delivered between two pieces ends it.
    n = 0
    while stop_after is None or n < stop_after:
        if n == 3:
            press_ctrl_c()
        try:
            await anyio.sleep(0)  # a piece of work
        except anyio.get_cancelled_exc_class():
            pass
        steps.append(n)
        n += 1
        await anyio.sleep(0)  # between two pieces


async def work_that_cleans_up():
    # Seeds in a task group: each records, shielded, that it was interrupted (as a call in
    # flight is recorded), then lets the cancellation through.
    async def seed(name):
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)
                steps.append(f"{name} recorded")
            raise

    async with anyio.create_task_group() as seeds:
        for name in ("a", "b"):
            seeds.start_soon(seed, name)
        await anyio.sleep(0.1)
        press_ctrl_c()
"""

CASES = {
    "work that takes cancellations": """
with interruptible(grace_s=0.2):
    anyio.run(work_that_takes_cancellations)
""",
    "work that cleans up": """
with interruptible():
    anyio.run(work_that_cleans_up)
""",
    "asyncio alone": """
anyio.run(work_that_takes_cancellations, 100)
""",
    "outside an event loop": """
with interruptible():
    for n in range(100):
        if n == 3:
            press_ctrl_c()
        steps.append(n)
""",
    "swallowed by the work": """
with interruptible():
    for n in range(100):
        try:
            if n == 3:
                press_ctrl_c()
        except KeyboardInterrupt:
            pass  # some code took it and went on
        steps.append(n)
""",
}


def _outcome(case: str) -> tuple[str, list[str], bool]:
    """How the case ended ("interrupted" or "completed"), the steps it took, and whether
    Python's own SIGINT handler is back in force afterwards."""
    script = (
        PRELUDE
        + "try:\n"
        + "".join(f"    {line}\n" for line in CASES[case].strip().splitlines())
        + "except KeyboardInterrupt:\n    ended = 'interrupted'\nelse:\n    ended = 'completed'\n"
        + "restored = signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        + "print(ended, restored, *steps)"
    )
    # The timeout only keeps a case that never ends from hanging the suite.
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    ended, restored, *steps = done.stdout.split()
    return ended, steps, restored == "True"


def test_one_press_stops_work_that_takes_a_cancellation_and_goes_on() -> None:
    """Cancelled once on the way out of the loop, the work takes it and goes on; after the
    grace it is cancelled at every turn of the loop, and ends (it never would otherwise)."""
    ended, _steps, restored = _outcome("work that takes cancellations")
    assert ended == "interrupted"
    assert restored


def test_one_press_lets_shielded_clean_up_finish() -> None:
    ended, steps, restored = _outcome("work that cleans up")
    assert ended == "interrupted"
    assert sorted(steps) == ["a", "b", "recorded", "recorded"]
    assert restored


def test_asyncio_alone_lets_work_absorb_the_press_and_complete() -> None:
    """The defect interruptible mends: Python 3.11's asyncio cancels the loop's main task once
    on a first Ctrl-C, and work that takes that cancellation runs to its end."""
    ended, steps, restored = _outcome("asyncio alone")
    assert (ended, len(steps), restored) == ("completed", 100, True)


@pytest.mark.parametrize("case", ["outside an event loop", "swallowed by the work"])
def test_one_press_interrupts_outside_a_loop_too(case: str) -> None:
    """Outside a loop the press interrupts where it lands; when the work swallowed it, the
    command is interrupted once the work ends, never reported as complete."""
    ended, steps, restored = _outcome(case)
    assert ended == "interrupted"
    assert len(steps) == (3 if case == "outside an event loop" else 100)
    assert restored
