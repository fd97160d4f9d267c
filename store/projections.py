"""Read models rebuilt from the event log: seed statuses, spend, accepted items.

The fold is a functional core: :func:`apply` takes a :class:`ProjectionState` and one stored
event and updates the state, with no I/O, so a test (or the benchmark) folds a list of events
with no database. :class:`Projections` is the shell: it reads the log after its checkpoint, folds,
and writes the changed rows and the new checkpoint in one transaction.

Spend is the one ledger's (:mod:`store.ledger`), per run along five dimensions (run, phase, gate,
role, model): the pure fold keeps a ledger per run in memory; the shell does not persist spend
but folds it from the log when asked, so no table can hold a second opinion on money.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Table,
    bindparam,
    delete,
    inspect,
    select,
    update,
)
from sqlmodel import Field, SQLModel

from store.columns import JsonDocument
from store.events import (
    UPCASTERS,
    AttemptStarted,
    CallFailed,
    CallRecorded,
    CallReserved,
    CallRetried,
    Event,
    GateRejected,
    ItemAccepted,
    RunStarted,
    SeedDiscarded,
    SeedStarted,
    SeedStopped,
    seed_stream,
    type_name,
    upcast,
)
from store.eventstore import EventStore, StoredEvent
from store.ledger import Ledger, LedgerFold, stream_spend

SeedState = Literal["running", "accepted", "discarded", "stopped"]
SpendBy = Literal["run", "phase", "gate", "role", "model"]
SPEND_DIMENSIONS: tuple[SpendBy, ...] = get_args(SpendBy)
_CHECKPOINT = "projections"
_READ_CHUNK = 5000
_NONE_KEY = "-"  # the phase or gate key of a call that has none


# -- tables -----------------------------------------------------------------------------------


class SeedStatusRow(SQLModel, table=True):
    """Where one seed of one run stands."""

    __tablename__ = "proj_seed_status"
    run_id: str = Field(primary_key=True)
    seed_id: str = Field(primary_key=True)
    stream: str = Field(index=True)
    state: str
    attempts_phase1: int = 0
    attempts_phase2: int = 0
    last_reason: str | None = None


class AcceptedRow(SQLModel, table=True):
    """A benchmark item a seed produced."""

    __tablename__ = "proj_accepted"
    run_id: str = Field(primary_key=True)
    seed_id: str = Field(primary_key=True)
    seq: int
    qa: dict[str, Any] = Field(sa_column=Column(JsonDocument()))
    distractors: dict[str, Any] = Field(sa_column=Column(JsonDocument()))


class CheckpointRow(SQLModel, table=True):
    """The last seq folded into the projection tables."""

    __tablename__ = "proj_checkpoint"
    name: str = Field(primary_key=True)
    seq: int = 0


def _table(model: type[SQLModel]) -> Table:
    return cast(Table, model.__table__)  # type: ignore[attr-defined]


SEED_STATUS, ACCEPTED, CHECKPOINT = (
    _table(SeedStatusRow),
    _table(AcceptedRow),
    _table(CheckpointRow),
)
TABLES = [SEED_STATUS, ACCEPTED, CHECKPOINT]


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedStatus:
    """One seed's state in one run."""

    run_id: str
    seed_id: str
    state: SeedState
    attempts_phase1: int
    attempts_phase2: int
    last_reason: str | None
    spent_micros: int


@dataclass(frozen=True)
class AcceptedItem:
    """An accepted benchmark item: question, gold answer and graded distractors."""

    run_id: str
    seed_id: str
    qa: dict[str, Any]
    distractors: dict[str, Any]


# -- the pure fold ----------------------------------------------------------------------------


class _Seed:
    """Mutable fold state of one seed (slots: a million-event fold touches these a lot)."""

    __slots__ = ("p1", "p2", "reason", "run_id", "seed_id", "state", "stream")

    def __init__(self, run_id: str, seed_id: str, stream: str) -> None:
        self.run_id = run_id
        self.seed_id = seed_id
        self.stream = stream
        self.state: SeedState = "running"
        self.p1 = 0
        self.p2 = 0
        self.reason: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> _Seed:
        """The seed as its ``proj_seed_status`` row holds it."""
        seed = cls(row.run_id, row.seed_id, row.stream)
        seed.state = row.state
        seed.p1, seed.p2 = row.attempts_phase1, row.attempts_phase2
        seed.reason = row.last_reason
        return seed

    def status(self, spent_micros: int) -> SeedStatus:
        return SeedStatus(
            self.run_id, self.seed_id, self.state, self.p1, self.p2, self.reason, spent_micros
        )


@dataclass
class ProjectionState:
    """Everything the projections know, as plain data; :func:`apply` updates it in place.

    ``dirty_*`` name what changed since :meth:`clear_dirty`, so the shell writes only those rows.
    """

    seeds: dict[tuple[str, str], _Seed] = field(default_factory=dict)
    by_stream: dict[str, _Seed] = field(default_factory=dict)
    ledgers: dict[str, LedgerFold] = field(default_factory=dict)  # run id → its ledger
    accepted: dict[tuple[str, str], tuple[int, dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict
    )
    runs: set[str] = field(default_factory=set)
    last_seq: int = 0
    dirty_seeds: set[tuple[str, str]] = field(default_factory=set)
    dirty_accepted: set[tuple[str, str]] = field(default_factory=set)

    def clear_dirty(self) -> None:
        """Forget what changed (after it has been written)."""
        self.dirty_seeds.clear()
        self.dirty_accepted.clear()

    def seed_statuses(self, run_id: str | None = None) -> list[SeedStatus]:
        """Seed statuses, sorted by run and seed."""
        ledgers = {run: fold.ledger() for run, fold in self.ledgers.items()}
        out = []
        for key in sorted(self.seeds):
            if run_id is None or key[0] == run_id:
                found = ledgers.get(key[0])
                out.append(self.seeds[key].status(found.owner_spent(key[1]) if found else 0))
        return out

    def spend_by(self, run_id: str | None = None, by: SpendBy = "run") -> dict[str, int]:
        """Micro-dollars per key of one dimension (summed over runs when ``run_id`` is None)."""
        return spend_by(
            {r: f.ledger() for r, f in self.ledgers.items() if run_id is None or r == run_id}, by
        )


def spend_by(ledgers: dict[str, Ledger], by: SpendBy) -> dict[str, int]:
    """Micro-dollars per key of one dimension over runs' ledgers."""
    if by not in SPEND_DIMENSIONS:
        raise ValueError(f"spend by {by!r} is not one of {SPEND_DIMENSIONS!r}")
    out: dict[str, int] = {}
    for run, found in ledgers.items():
        parts = {run: found.spent_micros} if by == "run" else found.breakdown(by)
        for key, micros in parts.items():
            out[key] = out.get(key, 0) + micros
    return dict(sorted(out.items()))


def _seed_of(state: ProjectionState, stream: str) -> _Seed | None:
    seed = state.by_stream.get(stream)
    if seed is not None or not stream.startswith("seed-"):
        return seed
    # A seed stream whose SeedStarted was never seen (it should not happen): the name alone is
    # ambiguous when ids contain "-", so match a known run id, else take the part before "-".
    rest = stream[len("seed-") :]
    run_id, _, seed_id = rest.partition("-")
    for run in state.runs:
        if rest.startswith(run + "-"):
            run_id, seed_id = run, rest[len(run) + 1 :]
            break
    return _start_seed(state, run_id, seed_id, stream)


def _start_seed(state: ProjectionState, run_id: str, seed_id: str, stream: str) -> _Seed:
    key = (run_id, seed_id)
    seed = state.seeds.get(key)
    if seed is None:
        seed = state.seeds[key] = _Seed(run_id, seed_id, stream)
    state.by_stream[stream] = seed
    state.runs.add(run_id)
    state.dirty_seeds.add(key)
    return seed


def _run_of(state: ProjectionState, stream: str) -> str:
    seed = _seed_of(state, stream)
    if seed is not None:
        return seed.run_id
    return stream[len("run-") :] if stream.startswith("run-") else _NONE_KEY


#: A fold of one event type into the projections' state (its stored JSON as ``data``).
Handler = Callable[["ProjectionState", StoredEvent, dict[str, Any]], None]
#: The projections' folds by event type, registered with :func:`on` beside each handler.
_HANDLERS: dict[str, Handler] = {}


def on(*classes: type[Event]) -> Callable[[Handler], Handler]:
    """Register the decorated function as the projections' fold of each of ``classes``: what
    a new event type needs, beside its class, for the projections to know it. The fold reads
    the event's stored JSON (upcast to the current schema), not a validated model, so that a
    rebuild over a million events stays within seconds."""

    def register(handler: Handler) -> Handler:
        for cls in classes:
            _HANDLERS[type_name(cls)] = handler
        return handler

    return register


def forget_fold(cls: type[Event]) -> None:
    """Drop the projections' fold of ``cls`` (for a test that registered one of its own)."""
    _HANDLERS.pop(type_name(cls), None)


@on(SeedStarted)
def _on_seed_started(state: ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    seed = _start_seed(state, data["run_id"], data["seed_id"], ev.stream)
    seed.state = "running"


@on(AttemptStarted)
def _on_attempt(state: ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    seed = _seed_of(state, ev.stream)
    if seed is None:
        return
    attempt = int(data["attempt"])
    if data["phase"] == 1:
        seed.p1 = max(seed.p1, attempt)
    else:
        seed.p2 = max(seed.p2, attempt)
    if seed.state == "stopped":  # a resumed seed is working again
        seed.state = "running"
    state.dirty_seeds.add((seed.run_id, seed.seed_id))


@on(CallReserved, CallRecorded, CallFailed, CallRetried)
def _on_call(state: ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    run_id = _run_of(state, ev.stream)
    fold = state.ledgers.get(run_id)
    if fold is None:
        fold = state.ledgers[run_id] = LedgerFold()
    fold.apply(ev.stream, ev.type, data)


def _update_seed(
    state: ProjectionState,
    stream: str,
    *,
    to: SeedState | None = None,
    reason: str | None = None,
) -> _Seed | None:
    """The seed of ``stream`` moved ``to`` a state and given a last ``reason`` (each when
    given) and marked changed; None when the stream is no seed's."""
    seed = _seed_of(state, stream)
    if seed is None:
        return None
    if to is not None:
        seed.state = to
    if reason is not None:
        seed.reason = reason
    state.dirty_seeds.add((seed.run_id, seed.seed_id))
    return seed


@on(GateRejected)
def _on_rejected(state: ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    _update_seed(state, ev.stream, reason=f"{data['gate']}: {data['reason']}")


@on(ItemAccepted)
def _on_accepted(state: ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    seed = _update_seed(state, ev.stream, to="accepted")
    if seed is not None:
        key = (seed.run_id, seed.seed_id)
        state.accepted[key] = (ev.seq, data["qa"], data["distractors"])
        state.dirty_accepted.add(key)


@on(SeedDiscarded)
def _on_discarded(state: ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    reasons = data.get("reasons") or ()
    _update_seed(state, ev.stream, to="discarded", reason=str(reasons[-1]) if reasons else None)


@on(SeedStopped)
def _on_stopped(state: ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    detail = data.get("detail") or ""
    reason = f"{data['reason']}: {detail}" if detail else str(data["reason"])
    _update_seed(state, ev.stream, to="stopped", reason=reason)


@on(RunStarted)
def _on_run_started(state: ProjectionState, _ev: StoredEvent, data: dict[str, Any]) -> None:
    state.runs.add(data["run_id"])


def apply(state: ProjectionState, ev: StoredEvent) -> ProjectionState:
    """Fold one stored event into ``state`` (in place) and return it. No I/O.

    The event's ``data`` is read as a dict rather than validated into its pydantic class: that
    keeps a million-event rebuild within seconds. Old schemas still go through the upcasters.
    """
    handler = _HANDLERS.get(ev.type)
    if handler is not None:
        data = ev.data
        if UPCASTERS and (ev.type, ev.schema) in UPCASTERS:
            data = upcast(ev.type, ev.schema, data)
        handler(state, ev, data)
    if ev.seq > state.last_seq:
        state.last_seq = ev.seq
    return state


def fold(events: Iterable[StoredEvent], state: ProjectionState | None = None) -> ProjectionState:
    """Fold ``events`` in order into ``state`` (a fresh one when None)."""
    state = ProjectionState() if state is None else state
    for ev in events:
        apply(state, ev)
    return state


# -- the shell --------------------------------------------------------------------------------


class Projections:
    """The projection tables of one database, kept up to date from an event store."""

    def __init__(self, store: EventStore, engine: Engine) -> None:
        self.store = store
        self.engine = engine
        self._drop_old_shape()
        SQLModel.metadata.create_all(engine, tables=TABLES)
        self._state: ProjectionState | None = None

    def _drop_old_shape(self) -> None:
        """Projection tables of the shape before spend left them (a ``spent_micros`` column, a
        ``proj_spend`` table) are dropped: they are read models, rebuilt from the log."""
        names = set(inspect(self.engine).get_table_names())
        columns = (
            {c["name"] for c in inspect(self.engine).get_columns("proj_seed_status")}
            if "proj_seed_status" in names
            else set()
        )
        if "proj_spend" not in names and "spent_micros" not in columns:
            return
        with self.engine.begin() as conn:
            for name in ("proj_spend", "proj_seed_status", "proj_accepted", "proj_checkpoint"):
                if name in names:
                    conn.exec_driver_sql(f"DROP TABLE {name}")

    def catch_up(self) -> int:
        """Fold the events after the checkpoint into the tables; returns how many were read."""
        total = 0
        while True:
            try:
                folded = self._catch_up_chunk()
            except _CheckpointMoved:
                continue  # another process wrote first: reload from the tables and go on
            if folded == 0:
                return total
            total += folded

    def _catch_up_chunk(self) -> int:
        """Fold one chunk of the log and write it with its checkpoint in one transaction."""
        with self.engine.begin() as conn:
            checkpoint = self._checkpoint(conn)
            state = self._state
            if state is None or state.last_seq != checkpoint:
                # First call, or the tables moved on without us: start from what they hold.
                state = self._load(conn, checkpoint)
            chunk = self.store.read_all(checkpoint, _READ_CHUNK)
            if not chunk:
                self._state = state
                return 0
            # The fold mutates the cached state: if the write fails it no longer matches the
            # tables, so drop it until the write has committed.
            self._state = None
            fold(chunk, state)
            self._write(conn, state, checkpoint)
        state.clear_dirty()
        self._state = state
        return len(chunk)

    def rebuild(self) -> int:
        """Empty the projection tables and replay the whole log; returns how many events."""
        with self.engine.begin() as conn:
            for table in TABLES:
                conn.execute(delete(table))
        self._state = None
        return self.catch_up()

    def seed_statuses(self, run_id: str | None = None) -> list[SeedStatus]:
        """Seed statuses as of the last :meth:`catch_up`, sorted by run and seed."""
        query = select(SEED_STATUS)
        if run_id is not None:
            query = query.where(SEED_STATUS.c.run_id == run_id)
        # Sorted here, not by ORDER BY: PostgreSQL's locale collation would order "s-1" and
        # "s1" differently from SQLite.
        with self.engine.connect() as conn:
            rows = sorted(conn.execute(query), key=lambda row: (row.run_id, row.seed_id))
        ledgers = self._ledgers({row.run_id for row in rows})
        return [
            _Seed.from_row(row).status(ledgers[row.run_id].owner_spent(row.seed_id)) for row in rows
        ]

    def spend(self, run_id: str | None = None, by: SpendBy = "run") -> dict[str, int]:
        """Micro-dollars spent per run, phase ("1", "2", "-"), gate, role or model: the one
        ledger over the runs' seed streams, folded from the log now."""
        if by not in SPEND_DIMENSIONS:
            raise ValueError(f"spend by {by!r} is not one of {SPEND_DIMENSIONS!r}")
        if run_id is not None:
            runs = {run_id}
        else:
            with self.engine.connect() as conn:
                known = conn.execute(select(SEED_STATUS.c.run_id).distinct()).scalars()
                runs = {str(r) for r in known}
            runs |= {s[len("run-") :] for s in self.store.streams("run-")}
        found = {run: ledger for run, ledger in self._ledgers(runs).items() if ledger.has_calls}
        return spend_by(found, by)

    def _ledgers(self, runs: Iterable[str]) -> dict[str, Ledger]:
        return {run: stream_spend(self.store, seed_stream(run, "")) for run in runs}

    def accepted(self, run_id: str | None = None) -> list[AcceptedItem]:
        """Accepted items in the order they were accepted."""
        query = select(ACCEPTED).order_by(ACCEPTED.c.seq)
        if run_id is not None:
            query = query.where(ACCEPTED.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [
                AcceptedItem(row.run_id, row.seed_id, row.qa, row.distractors)
                for row in conn.execute(query)
            ]

    # -- persistence ---------------------------------------------------------------------------

    def _checkpoint(self, conn: Connection) -> int:
        seq = conn.execute(
            select(CHECKPOINT.c.seq).where(CHECKPOINT.c.name == _CHECKPOINT)
        ).scalar_one_or_none()
        if seq is None:
            conn.execute(CHECKPOINT.insert(), {"name": _CHECKPOINT, "seq": 0})
            return 0
        return int(seq)

    def _load(self, conn: Connection, checkpoint: int) -> ProjectionState:
        state = ProjectionState(last_seq=checkpoint)
        for row in conn.execute(select(SEED_STATUS)):
            seed = _Seed.from_row(row)
            state.seeds[(row.run_id, row.seed_id)] = seed
            state.by_stream[row.stream] = seed
            state.runs.add(row.run_id)
        for row in conn.execute(select(ACCEPTED)):
            state.accepted[(row.run_id, row.seed_id)] = (row.seq, row.qa, row.distractors)
        return state

    def _write(self, conn: Connection, state: ProjectionState, checkpoint: int) -> None:
        # Only the changed rows: delete then insert is one code path for SQLite and PostgreSQL.
        seeds = [state.seeds[key] for key in state.dirty_seeds]
        if seeds:
            _delete_keys(conn, SEED_STATUS, ("run_id", "seed_id"), state.dirty_seeds)
            conn.execute(
                SEED_STATUS.insert(),
                [
                    {
                        "run_id": s.run_id,
                        "seed_id": s.seed_id,
                        "stream": s.stream,
                        "state": s.state,
                        "attempts_phase1": s.p1,
                        "attempts_phase2": s.p2,
                        "last_reason": s.reason,
                    }
                    for s in seeds
                ],
            )
        if state.dirty_accepted:
            _delete_keys(conn, ACCEPTED, ("run_id", "seed_id"), state.dirty_accepted)
            conn.execute(
                ACCEPTED.insert(),
                [
                    {"run_id": r, "seed_id": s, "seq": seq, "qa": qa, "distractors": dis}
                    for (r, s), (seq, qa, dis) in (
                        (key, state.accepted[key]) for key in state.dirty_accepted
                    )
                ],
            )
        moved = conn.execute(
            update(CHECKPOINT)
            .where(CHECKPOINT.c.name == _CHECKPOINT, CHECKPOINT.c.seq == checkpoint)
            .values(seq=state.last_seq)
        )
        if moved.rowcount != 1:
            # Another catch_up got there first: raising rolls this transaction back.
            raise _CheckpointMoved


class _CheckpointMoved(Exception):
    """Internal: the checkpoint changed under a catch_up."""


def _delete_keys(
    conn: Connection, table: Table, names: tuple[str, ...], keys: Iterable[tuple[str, ...]]
) -> None:
    """Delete the rows with these primary keys, in one executemany."""
    statement = delete(table).where(*[table.c[name] == bindparam(f"k_{name}") for name in names])
    conn.execute(
        statement, [{f"k_{n}": v for n, v in zip(names, key, strict=True)} for key in keys]
    )
