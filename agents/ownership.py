"""One live writer per run, pair selection and evaluation.

A command that appends to a run's streams (``curate``, ``pairs``, ``eval``, the daemon's
scheduled export) holds the run's named lease (:class:`store.coordination.Leases`) while it
works: a second command on the same run is refused with a line naming the process that holds
it, and a lease left behind by a crash lapses (at once when the dead process ran on this
machine) and is taken over. The lease is renewed from a thread, so a long model call cannot let
it lapse; a holder that loses it anyway (stopped for longer than its lease) cannot write twice
either, because the streams it appends to are fenced at the versions it read.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from store.closing import ClosesOnExit
from store.coordination import LeaseHeld, Leases, NamedLease

logger = structlog.get_logger("playlisteval.ownership")

DEFAULT_LEASE_S = 60.0


def run_lease(run_id: str) -> str:
    """The lease of a curation run's seed streams."""
    return f"run:{run_id}"


def pairs_lease(run_id: str) -> str:
    """The lease of a run's pair selection (the difficulty gate)."""
    return f"pairs:{run_id}"


def eval_lease(evaluation_id: str) -> str:
    """The lease of one evaluation's stream and folder."""
    return f"eval:{evaluation_id}"


#: Held while a command chooses seeds that no run has taken and opens its run with them.
SEEDS_LEASE = "seeds"


def owner_name(command: str) -> str:
    """This process's name as a lease holder: the command, the host and the pid."""
    return f"{command}@{os.uname().nodename}:{os.getpid()}"


@dataclass
class WriterLease(ClosesOnExit):
    """A held lease, renewed from a thread until :meth:`release` (a context manager)."""

    leases: Leases
    lease: NamedLease
    lease_s: float
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    lost: bool = False

    @classmethod
    def acquire(
        cls,
        leases: Leases,
        name: str,
        command: str,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        wait_s: float = 0.0,
    ) -> WriterLease:
        """Take lease ``name`` (waiting up to ``wait_s`` while another live process holds it),
        or raise :class:`~store.coordination.LeaseHeld`."""
        info: dict[str, Any] = {
            "command": command,
            "pid": os.getpid(),
            "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        }
        deadline = time.monotonic() + wait_s
        while True:
            try:
                lease = leases.acquire(name, owner_name(command), lease_s=lease_s, info=info)
                break
            except LeaseHeld:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
        if lease.took_over is not None:
            logger.warning("lease_taken_over", lease=name, previous=lease.took_over)
        held = cls(leases, lease, lease_s)
        held._thread = threading.Thread(target=held._renew, name=f"lease:{name}", daemon=True)
        held._thread.start()
        return held

    @property
    def name(self) -> str:
        """The lease's name."""
        return self.lease.name

    @property
    def took_over(self) -> str | None:
        """The holder whose lapsed lease this one replaced (its holds are to be written off)."""
        return self.lease.took_over

    def _renew(self) -> None:
        every = max(self.lease_s / 3.0, 0.05)
        while not self._stop.wait(every):
            try:
                if not self.leases.renew(self.lease, lease_s=self.lease_s):
                    self.lost = True
                    logger.warning("lease_lost", lease=self.lease.name)
                    return
            except Exception as exc:  # the database is away for a moment: try again
                logger.warning("lease_renew_failed", lease=self.lease.name, error=str(exc))

    def release(self) -> None:
        """Stop renewing and give the lease up."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        try:
            self.leases.release(self.lease)
        except Exception as exc:  # it lapses by itself
            logger.warning("lease_release_failed", lease=self.lease.name, error=str(exc))

    def close(self) -> None:
        """The same as :meth:`release` (what ``with`` calls at the end of the block)."""
        self.release()
