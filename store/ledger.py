"""The one ledger: what a log says was spent, as one pure fold every reader uses.

Every number about money that the project reports or enforces — a run's reservations on resume,
``audit``, ``RunFinished``, strict replay, the daemon's metrics, the UI, the exports, the
projections — comes from :func:`spend` (or :class:`LedgerFold`, its incremental form), so they
cannot disagree. The rules, one per kind of call event:

- ``CallReserved`` opens a reservation for its call id.
- ``CallRecorded`` closes it. A first-hand answer costs its ``cost_micros``; an answer served
  again from the log (``replayed``) costs nothing this time (its recorded cost is kept apart, in
  ``replayed_micros``, for what-if reports).
- ``CallFailed`` closes it and costs its ``charged_micros`` (what the provider may have billed
  for a failed or interrupted call), once.
- ``CallRetried`` with ``charged_micros`` (an attempt whose outcome is unknown: it may have been
  billed) closes it at that cost; the retry opens a new reservation (another ``CallReserved``
  of the same call id). One that cost nothing (a 429) leaves it open for the retry.

What was charged for attempts whose outcome is unknown — sent, and never answered with a cost —
is also kept apart (``uncertain_micros``), for the audit's "may have been billed" line.
- A reservation that nothing closes is money in flight — or, after a crash, money the provider
  may have billed with no answer in the log. It counts as spent, once, until (if ever) its call
  is closed.

So ``spent = settled + open``: the most this log can have cost. Spend is also told by what the
calls carried (the ``media`` dimension, :func:`media_of`): ``video`` for a call whose answer's
usage counts video or image tokens (the native-video calls the paper says make most of the
bill), ``audio`` for sound without pictures, ``text`` for the rest; a reservation or a charged
failure, whose usage the log does not hold, is ``-``. The fold reads events as
``(type, data)`` with ``data`` a plain mapping — a stored event's JSON or a typed event's fields —
so a million stored events fold without being validated into models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from store.events import (
    UPCASTERS,
    CallId,
    CapSet,
    Event,
    Kind,
    RunResumed,
    RunStarted,
    event_type,
    types_of,
    upcast,
)
from store.eventstore import EventStore, StoredEvent

#: The dimensions a ledger breaks spend down by (what every call event says about its call, and
#: ``media``: what a recorded answer's usage says the call carried, :func:`media_of`).
DIMENSIONS = ("phase", "gate", "role", "model", "media")
NONE_KEY = "-"  # the phase or gate of a call that has none; the media of a call not answered
#: The ``media`` keys of answered calls: pictures (video frames or images), sound alone, text.
MEDIA = ("video", "audio", "text")

_Cell = tuple[str, str, str, str, str, str]  # (owner, *DIMENSIONS' keys)


def media_of(usage: Mapping[str, int] | None) -> str:
    """What a recorded call carried, by its usage: ``video`` when it counts video or image
    tokens, ``audio`` when it counts sound and no picture, else ``text``."""
    if not usage:
        return "text"
    if usage.get("video") or usage.get("image"):
        return "video"
    return "audio" if usage.get("audio") else "text"


@dataclass(frozen=True)
class Ledger:
    """What a log has spent, in micro-dollars.

    ``per_owner`` is keyed by the call id's owner (a seed, a pair, a judgment); ``by`` maps each
    of :data:`DIMENSIONS` to its keys (phase ``"1"``/``"2"``/``"-"``, gate, role, model, and
    media ``video``/``audio``/``text``/``"-"``).
    """

    settled_micros: int = 0
    open_micros: int = 0
    replayed_micros: int = 0
    uncertain_micros: int = 0  # charged for attempts that may have been billed (in settled)
    uncertain_attempts: int = 0
    per_owner: Mapping[str, int] = field(default_factory=dict)
    by: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    paid_calls: int = 0
    replayed_calls: int = 0
    failed_calls: int = 0
    open_calls: int = 0

    @property
    def spent_micros(self) -> int:
        """Settled costs plus open reservations: the most this log can have cost."""
        return self.settled_micros + self.open_micros

    @property
    def has_calls(self) -> bool:
        """Whether the log holds any call at all."""
        return bool(self.paid_calls or self.replayed_calls or self.failed_calls or self.open_calls)

    def owner_spent(self, owner: str) -> int:
        """What one owner's calls spent (open reservations included)."""
        return self.per_owner.get(owner, 0)

    def breakdown(self, dimension: str) -> dict[str, int]:
        """Spend by one dimension's keys (``phase``, ``gate``, ``role``, ``model`` or
        ``media``)."""
        if dimension not in DIMENSIONS:
            raise ValueError(f"spend by {dimension!r} is not one of {DIMENSIONS!r}")
        return dict(self.by.get(dimension, {}))


class LedgerFold:
    """The ledger kept up to date one event at a time (metrics, projections, a live run).

    ``apply`` takes the stream (an open reservation is keyed by stream and call id, so two
    streams whose owners share a name cannot close each other's), the event type and its data.
    """

    __slots__ = (
        "_cells",
        "_open",
        "failed",
        "paid",
        "replayed",
        "replayed_micros",
        "uncertain",
        "uncertain_micros",
    )

    def __init__(self) -> None:
        # (owner, phase, gate, role, model, media) → settled micros: one dict update per call
        # event; every breakdown is summed from these cells when asked for.
        self._cells: dict[_Cell, int] = {}
        self._open: dict[tuple[str, str], tuple[int, _Cell]] = {}
        self.replayed_micros = 0
        self.paid = 0
        self.replayed = 0
        self.failed = 0
        self.uncertain = 0
        self.uncertain_micros = 0

    def apply(self, stream: str, type_: str, data: Mapping[str, Any]) -> int:
        """Fold one event in; events that are not about calls are ignored. Returns what the
        event settled, by the ledger's rules: a first-hand answer its cost, an answer served
        from the log 0, a failure what it was charged, anything else 0 (a reservation is
        counted as open, not settled)."""
        if type_ == "CallReserved":
            cell = _cell(data, NONE_KEY)
            self._open[(stream, data["call_id"])] = (int(data["reserved_micros"]), cell)
            return 0
        if type_ == "CallRecorded":
            opened = self._open.pop((stream, data["call_id"]), None)
            cost = int(data["cost_micros"])
            if data.get("replayed", False):
                self.replayed += 1
                self.replayed_micros += cost
                return 0
            self.paid += 1
            # The reservation knew who made the call; the answer knows what it carried.
            media = media_of(data.get("usage"))
            cell = (*opened[1][:-1], media) if opened is not None else _cell(data, media)
            cells = self._cells
            cells[cell] = cells.get(cell, 0) + cost
            return cost
        if type_ == "CallFailed":
            opened = self._open.pop((stream, data["call_id"]), None)
            self.failed += 1
            charged = int(data.get("charged_micros", 0))
            if charged:
                cell = opened[1] if opened is not None else _cell(data, NONE_KEY)
                self._cells[cell] = self._cells.get(cell, 0) + charged
                if data.get("outcome", "error") == "error":
                    self.uncertain += 1
                    self.uncertain_micros += charged
            return charged
        if type_ == "CallRetried":
            charged = int(data.get("charged_micros", 0))
            if not charged:
                return 0  # the attempt cost nothing: the reservation stays for the retry
            opened = self._open.pop((stream, data["call_id"]), None)
            cell = opened[1] if opened is not None else _cell(data, NONE_KEY)
            self._cells[cell] = self._cells.get(cell, 0) + charged
            self.uncertain += 1
            self.uncertain_micros += charged
            return charged
        return 0

    def apply_stored(self, stored: StoredEvent) -> int:
        """Fold one stored event in (its JSON, not validated into a model; old schemas go
        through the upcasters first); returns what it settled (:meth:`apply`)."""
        data = stored.data
        if UPCASTERS and (stored.type, stored.schema) in UPCASTERS:
            data = upcast(stored.type, stored.schema, data)
        return self.apply(stored.stream, stored.type, data)

    def apply_event(self, event: Event, stream: str = "") -> int:
        """Fold one typed event in (its fields are read as they are); returns what it settled
        (:meth:`apply`)."""
        return self.apply(stream, event_type(event), event.__dict__)

    @property
    def spent_micros(self) -> int:
        """Settled plus open, now."""
        return sum(self._cells.values()) + sum(m for m, _ in self._open.values())

    def ledger(self) -> Ledger:
        """The ledger as of the events folded so far."""
        per_owner: dict[str, int] = {}
        by: dict[str, dict[str, int]] = {d: {} for d in DIMENSIONS}
        settled = 0
        cells = list(self._cells.items())
        open_micros = 0
        for micros, cell in self._open.values():
            open_micros += micros
            cells.append((cell, micros))
        for (owner, *keys), micros in cells:
            per_owner[owner] = per_owner.get(owner, 0) + micros
            for dimension, key in zip(DIMENSIONS, keys, strict=True):
                into = by[dimension]
                into[key] = into.get(key, 0) + micros
        settled = sum(self._cells.values())
        return Ledger(
            settled_micros=settled,
            open_micros=open_micros,
            replayed_micros=self.replayed_micros,
            uncertain_micros=self.uncertain_micros,
            uncertain_attempts=self.uncertain,
            per_owner=per_owner,
            by={d: dict(sorted(v.items())) for d, v in by.items()},
            paid_calls=self.paid,
            replayed_calls=self.replayed,
            failed_calls=self.failed,
            open_calls=len(self._open),
        )


def _cell(data: Mapping[str, Any], media: str) -> _Cell:
    phase = data.get("phase")
    return (
        CallId.owner_of(data["call_id"]),
        NONE_KEY if phase is None else str(phase),
        data.get("gate") or NONE_KEY,
        data["role"],
        data["model"],
        media,
    )


def spend(events: Iterable[StoredEvent | Event]) -> Ledger:
    """Fold a log (stored events, or typed events of one stream) into its :class:`Ledger`."""
    fold = LedgerFold()
    apply = fold.apply
    money = ledger_types()
    for event in events:
        if isinstance(event, StoredEvent):
            if event.type in money:
                fold.apply_stored(event)
        else:
            apply("", event_type(event), event.__dict__)
    return fold.ledger()


def stream_spend(store: EventStore, prefix: str) -> Ledger:
    """The ledger of every stream starting with ``prefix`` (a run's seeds: ``seed-<run>-``)."""
    fold = LedgerFold()
    for stored in store.read_all(
        stream_prefix=prefix, types=sorted(ledger_types()), omit=LEDGER_OMITS
    ):
        fold.apply_stored(stored)
    return fold.ledger()


#: What the fold never reads of a call (its response: most of the log's bytes), left in the
#: database when a ledger is read.
LEDGER_OMITS = ("response",)


def ledger_types() -> frozenset[str]:
    """The event types the ledger reads (a reader may fetch only these): every class that
    declares itself money (:class:`store.events.Kind`)."""
    return types_of(Kind.MONEY)


def current_cap(events: Iterable[Event]) -> int | None:
    """The cap a stream's calls are made under now: the last ``RunStarted``/``RunResumed``
    budget of a run's stream, or the last ``CapSet`` of a pairs or evaluation stream (None: no
    cap was ever set, or the last one set none)."""
    cap: int | None = None
    for event in events:
        if isinstance(event, RunStarted | RunResumed):
            cap = event.budget_micros
        elif isinstance(event, CapSet):
            cap = event.cap_micros
    return cap
