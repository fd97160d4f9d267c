"""The live table ``curate`` (and ``replay --resume``, ``demo``) shows while a run works: seeds by
state (queued, in flight, accepted, discarded, stopped), spend against the cap, model calls and
their rate, elapsed time and an ETA.

:class:`LiveCuration` hears every event the run appends (it is the run's
:class:`agents.curation.CurationProgress`) and keeps counts; :meth:`LiveCuration.snapshot` reads
them as plain data at a time of the injected clock, and :func:`render` draws a snapshot. A
``rich.live.Live`` asks for a fresh table several times a second from its own thread, so the
figures move during the run (elapsed time and ETA even between events); a lock keeps the event
thread and the drawing thread from reading half an update.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rich import box
from rich.console import Group
from rich.table import Table

from policies.budget import Budget
from store.answers import answered_by
from store.events import (
    CallFailed,
    CallRecorded,
    CallRefused,
    Event,
    GateRejected,
    ItemAccepted,
    SeedDiscarded,
    SeedStopped,
    micros_to_usd,
)

#: How a seed's end reads in the table (a stop names its reason).
ACCEPTED, DISCARDED = "accepted", "discarded"


def end_label(event: Event) -> str | None:
    """The state a seed's event leaves it in for good, or None when it goes on."""
    if isinstance(event, ItemAccepted):
        return ACCEPTED
    if isinstance(event, SeedDiscarded):
        return DISCARDED
    if isinstance(event, SeedStopped):
        return f"stopped ({event.reason})"
    return None


@dataclass(frozen=True)
class CurationSnapshot:
    """The live table's figures at one instant."""

    total: int
    ended: Mapping[str, int]  # end label → seeds (earlier processes' ends included)
    in_flight: int
    spent_micros: int
    cap_micros: int | None
    calls_made: int
    calls_replayed: int
    calls_failed: int
    calls_refused: int
    rejections: Mapping[str, int]  # "phase N gate" → rejections
    elapsed_s: float
    calls_per_s: float | None
    eta_s: float | None  # None until a seed ended in this process
    offline: bool
    real_local: tuple[str, ...] = ()  # the run's models that are real models run here

    @property
    def done(self) -> int:
        """Seeds that ended (accepted, discarded or stopped)."""
        return sum(self.ended.values())

    @property
    def queued(self) -> int:
        """Seeds not started yet."""
        return max(self.total - self.done - self.in_flight, 0)


@dataclass
class LiveCuration:
    """A run's progress, counted from the events it appends (a ``CurationProgress``).

    ``earlier`` holds the ends of the seeds that ended before this process took the run up (a
    resumed run), so the table counts them done; the rate and the ETA count only what ends
    here."""

    total: int
    offline: bool = False
    earlier: Mapping[str, int] = field(default_factory=dict)
    real_local: tuple[str, ...] = ()
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._started_at = self.clock()
        self._ended: Counter[str] = Counter(self.earlier)
        self._ended_here = 0
        self._active: set[str] = set()
        self._finished: set[str] = set()
        self._rejections: Counter[str] = Counter()
        self._calls = Counter[str]()
        self._spent = 0
        self._cap: int | None = None

    def event(self, stream: str, event: Event, budget: Budget) -> None:
        """Count one event the run appended to ``stream`` (a seed's stream)."""
        with self._lock:
            label = end_label(event)
            if label is not None:
                self._ended[label] += 1
                self._ended_here += 1
                self._active.discard(stream)
                self._finished.add(stream)
            elif stream not in self._finished:
                self._active.add(stream)
            if isinstance(event, GateRejected):
                self._rejections[f"phase {event.phase} {event.gate}"] += 1
            elif isinstance(event, CallRecorded):
                self._calls["replayed" if answered_by(event) == "log" else "made"] += 1
            elif isinstance(event, CallFailed):
                self._calls["failed"] += 1
            elif isinstance(event, CallRefused):
                self._calls["refused"] += 1
            self._spent, self._cap = budget.spent_micros, budget.cap_micros

    def snapshot(self) -> CurationSnapshot:
        """The figures now (by the injected clock)."""
        with self._lock:
            elapsed = max(self.clock() - self._started_at, 0.0)
            done = sum(self._ended.values())
            eta = None
            if self._ended_here and elapsed > 0:
                eta = max(self.total - done, 0) * elapsed / self._ended_here
            made = self._calls["made"]
            return CurationSnapshot(
                total=self.total,
                ended=dict(self._ended),
                in_flight=len(self._active),
                spent_micros=self._spent,
                cap_micros=self._cap,
                calls_made=made,
                calls_replayed=self._calls["replayed"],
                calls_failed=self._calls["failed"],
                calls_refused=self._calls["refused"],
                rejections=dict(self._rejections.most_common()),
                elapsed_s=elapsed,
                calls_per_s=made / elapsed if elapsed > 0 else None,
                eta_s=eta,
                offline=self.offline,
                real_local=self.real_local,
            )

    def render(self) -> Group:
        """The panel for the figures now (what ``Live`` redraws)."""
        return render(self.snapshot())


def clock_text(seconds: float) -> str:
    """``H:MM:SS`` (rounded to the second)."""
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


#: The panel's widest line fits this many columns by design (a terminal's usual 80).
FITS_COLUMNS = 80


def render(snap: CurationSnapshot) -> Group:
    """The live curate panel of one snapshot: the figures, one a row, then the rejections by
    gate in a table of their own.

    It fits :data:`FITS_COLUMNS` by design, so a terminal of that width never wraps it: each
    value is short (the model calls' kinds on rows of their own), and the long labels (a gate's
    name, a stop's reason) sit in the rejections table, away from the longest value (the seeds
    row). No cell ever wraps onto a second line: on a terminal too narrow even for that, a cell
    is cut with "…"."""
    harness = " (offline provider: a harness, not model quality)" if snap.offline else ""
    title = f"Curation{harness}"
    # As wide as its title at least, so the title stays on one line above it.
    table = _figures_table(title, min_width=len(title))
    table.add_row(
        "seeds",
        f"{snap.done} of {snap.total} done · {snap.in_flight} in flight · {snap.queued} queued",
    )
    for label, count in sorted(snap.ended.items()):
        table.add_row(f"  {label}", str(count))
    if snap.real_local:  # their calls are their own answers, the harness's title aside
        table.add_row("real local model", ", ".join(snap.real_local))
    spent = micros_to_usd(snap.spent_micros)
    if snap.cap_micros:
        share = f" ({snap.spent_micros / snap.cap_micros:.0%})"
        table.add_row("spend (USD)", f"{spent:.4f} of {micros_to_usd(snap.cap_micros):.4f}{share}")
    else:
        cap = " (no cap)" if snap.cap_micros is None else " of a 0 cap"
        table.add_row("spend (USD)", f"{spent:.4f}{cap}")
    rate = "" if snap.calls_per_s is None else f" · {snap.calls_per_s:.1f}/s"
    table.add_row("model calls", f"{snap.calls_made} made{rate}")
    for label, count in (
        ("from the log", snap.calls_replayed),
        ("failed", snap.calls_failed),
        ("refused by the cap", snap.calls_refused),
    ):
        if count:
            table.add_row(f"  {label}", str(count))
    eta = "—" if snap.eta_s is None else clock_text(snap.eta_s)
    table.add_row("elapsed · ETA", f"{clock_text(snap.elapsed_s)} · {eta}")
    if not snap.rejections:
        return Group(table)
    rejected = _figures_table(None)
    for gate, count in snap.rejections.items():
        rejected.add_row(f"rejected by {gate}", str(count))
    return Group(table, rejected)


def _figures_table(title: str | None, min_width: int | None = None) -> Table:
    """Two columns, label and figure, neither of which wraps (a label too long is cut)."""
    table = Table(
        title=title, show_header=False, box=box.SIMPLE, pad_edge=False, min_width=min_width
    )
    table.add_column("what", no_wrap=True, overflow="ellipsis")
    table.add_column("value", justify="right", no_wrap=True)
    return table
