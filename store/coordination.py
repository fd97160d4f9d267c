"""Work shared by many processes through the event store's database: a leased work queue and
budget accounts that every worker reserves against.

Both live next to the ``events`` table (same database, same PostgreSQL schema), so one
PostgreSQL server coordinates any number of ``playlisteval worker`` processes on any number of
machines, and one SQLite file does the same for the processes of one machine.

**Queue.** A work item (a seed of a run, a video to index) is claimed by a worker for a lease:
on PostgreSQL with ``SELECT … FOR UPDATE SKIP LOCKED`` (claimers never wait on each other's
rows), on SQLite under the file's write lock. Every claim increments the item's ``token`` (a
fencing token); heartbeats, completion and release only act when owner and token still match,
so a worker whose lease was taken over can no longer change the item. Expiry is judged by the
database's clock, never a worker's, so clock skew between machines cannot shorten a lease.

**Budget accounts.** An account row holds ``cap``, ``spent`` and ``reserved`` micro-dollars. A
reservation is one conditional ``UPDATE … SET reserved = reserved + m WHERE spent + reserved + m
<= cap`` per account it touches (a total and a day, say), in name order, in one transaction with
a hold row: either every account takes it or none does, and ``spent + reserved <= cap`` holds
across all workers at every commit. Settling moves a hold from reserved to spent; a hold left by
a dead worker is written off as spent when its item is taken over (the provider may have billed
the call it was for), the same rule the log's ledger applies to an open reservation.

**Rate windows.** A provider's per-minute limits, shared by every worker: a row per key (a
provider family, or a family and model) holds ``paused_until`` (a ``Retry-After`` one worker
saw), and a log holds each admitted request's time and tokens for the last window. Admission is
one transaction under the key's row lock (``FOR UPDATE`` on PostgreSQL, the write lock on
SQLite): prune what left the window, count what is in it, log the request if it fits, else say
how long until it would (see ``policies.ratelimits.SharedRateLimiter``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Connection,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError

from store.errors import PlaylistEvalError

ItemState = Literal["queued", "leased", "done", "parked"]
STATES: tuple[ItemState, ...] = ("queued", "leased", "done", "parked")

_META = MetaData()
WORK_ITEMS = Table(
    "work_items",
    _META,
    Column("id", String, primary_key=True),
    Column("kind", String, nullable=False, index=True),
    Column("run_id", String, nullable=True, index=True),
    Column("payload", JSON().with_variant(JSONB(), "postgresql"), nullable=False),
    Column("state", String, nullable=False, index=True),
    Column("priority", Integer, nullable=False, default=0),
    Column("not_before", Float, nullable=False, default=0.0),  # db epoch seconds
    Column("owner", String, nullable=True),
    Column("token", BigInteger, nullable=False, default=0),
    Column("lease_until", Float, nullable=True),
    Column("claims", Integer, nullable=False, default=0),
    Column("result", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)
BUDGET_ACCOUNTS = Table(
    "budget_accounts",
    _META,
    Column("name", String, primary_key=True),
    Column("cap_micros", BigInteger, nullable=True),
    Column("spent_micros", BigInteger, nullable=False, default=0),
    Column("reserved_micros", BigInteger, nullable=False, default=0),
)
BUDGET_HOLDS = Table(
    "budget_holds",
    _META,
    Column("id", String, primary_key=True),
    Column("accounts", JSON().with_variant(JSONB(), "postgresql"), nullable=False),
    Column("micros", BigInteger, nullable=False),
    Column("item_id", String, nullable=True, index=True),
    Column("owner", String, nullable=True),
    Column("created_at", Float, nullable=False),
)
LEASES = Table(
    "leases",
    _META,
    Column("name", String, primary_key=True),
    Column("owner", String, nullable=False),
    Column("token", BigInteger, nullable=False),
    Column("lease_until", Float, nullable=False),  # db epoch seconds
    Column("acquired_at", Float, nullable=False),
    Column("info", JSON().with_variant(JSONB(), "postgresql"), nullable=False),
)
WORKERS = Table(
    "workers",
    _META,
    Column("name", String, primary_key=True),
    Column("state", String, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("info", JSON().with_variant(JSONB(), "postgresql"), nullable=False),
)
RATE_KEYS = Table(
    "rate_keys",
    _META,
    Column("key", String, primary_key=True),
    Column("paused_until", Float, nullable=False, default=0.0),  # db epoch seconds
)
RATE_LOG = Table(
    "rate_log",
    _META,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("key", String, nullable=False),
    Column("at", Float, nullable=False),  # db epoch seconds the request was let through
    Column("tokens", BigInteger, nullable=False, default=0),
    Index("ix_rate_log_key_at", "key", "at"),
)
_W, _A, _H = WORK_ITEMS.c, BUDGET_ACCOUNTS.c, BUDGET_HOLDS.c
_K, _R = RATE_KEYS.c, RATE_LOG.c


def create_tables(engine: Engine) -> None:
    """Create the coordination tables if they are missing (idempotent)."""
    _META.create_all(engine)


def db_now(conn: Connection) -> float:
    """The database server's clock, in epoch seconds: the one clock every worker shares."""
    if conn.dialect.name == "postgresql":
        query = text("SELECT extract(epoch FROM clock_timestamp())")
    else:
        query = text("SELECT (julianday('now') - 2440587.5) * 86400.0")
    return float(conn.execute(query).scalar_one())


@contextmanager
def _write(engine: Engine) -> Iterator[Connection]:
    """One write transaction; on SQLite it takes the write lock up front (no upgrade later)."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


# -- the work queue --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkItem:
    """Something to do once: ``kind`` says what, ``payload`` what a worker needs for it."""

    id: str
    kind: str
    payload: dict[str, Any]
    run_id: str | None = None
    priority: int = 0  # lower first
    not_before: float = 0.0


@dataclass(frozen=True)
class Lease:
    """A claimed item: valid while ``owner`` and ``token`` still match the row."""

    item_id: str
    kind: str
    run_id: str | None
    payload: dict[str, Any]
    owner: str
    token: int
    claims: int  # how many times the item has been claimed, this one included
    previous_owner: str | None  # set when this claim took over an expired lease


@dataclass(frozen=True)
class ItemRow:
    """One item as the queue holds it (status pages, tests)."""

    id: str
    kind: str
    run_id: str | None
    state: str
    owner: str | None
    token: int
    claims: int
    result: str | None
    lease_until: float | None


class WorkQueue:
    """The leased work queue over one database (the event store's engine)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        create_tables(engine)

    def now(self) -> float:
        """The database's clock (epoch seconds)."""
        with self.engine.connect() as conn:
            return db_now(conn)

    def enqueue(self, items: Sequence[WorkItem]) -> int:
        """Add items that are not in the queue yet (by id); returns how many were new."""
        if not items:
            return 0
        with _write(self.engine) as conn:
            now = db_now(conn)
            ids = [item.id for item in items]
            known: set[str] = set()
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                known.update(conn.execute(select(_W.id).where(_W.id.in_(part))).scalars())
            rows = [
                {
                    "id": item.id,
                    "kind": item.kind,
                    "run_id": item.run_id,
                    "payload": item.payload,
                    "state": "queued",
                    "priority": item.priority,
                    "not_before": item.not_before,
                    "owner": None,
                    "token": 0,
                    "lease_until": None,
                    "claims": 0,
                    "result": None,
                    "created_at": now,
                    "updated_at": now,
                }
                for item in items
                if item.id not in known
            ]
            if rows:
                try:
                    conn.execute(insert(WORK_ITEMS), rows)
                except IntegrityError:
                    # Another process queued some of them between our read and our insert
                    # (PostgreSQL's read committed): insert one by one, skipping those.
                    conn.rollback()
                    return self._enqueue_each(rows)
        return len(rows)

    def _enqueue_each(self, rows: list[dict[str, Any]]) -> int:
        added = 0
        for row in rows:
            try:
                with _write(self.engine) as conn:
                    conn.execute(insert(WORK_ITEMS), [row])
                added += 1
            except IntegrityError:
                continue
        return added

    def claim(
        self,
        owner: str,
        kinds: Sequence[str],
        *,
        limit: int,
        lease_s: float,
        exclude: Collection[str] = (),
    ) -> list[Lease]:
        """Claim up to ``limit`` claimable items of ``kinds`` for ``lease_s`` seconds.

        Claimable: queued and due, or leased with the lease expired (its worker died or hung).
        Items locked by another claimer right now are skipped, not waited for. ``exclude``
        names items the claimer is working on now: its own lease of one may have lapsed (a
        starved event loop missed its heartbeats), and taking it over from itself would run
        the item twice in one process; its next heartbeat renews the lapsed lease instead.
        """
        if limit <= 0:
            return []
        with _write(self.engine) as conn:
            now = db_now(conn)
            query = (
                select(
                    _W.id, _W.kind, _W.run_id, _W.payload, _W.owner, _W.token, _W.claims, _W.state
                )
                .where(
                    _W.kind.in_(list(kinds)),
                    or_(
                        and_(_W.state == "queued", _W.not_before <= now),
                        and_(_W.state == "leased", _W.lease_until < now),
                    ),
                    *([_W.id.notin_(sorted(exclude))] if exclude else []),
                )
                .order_by(_W.priority, _W.created_at, _W.id)
                .limit(limit)
            )
            if conn.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            found = list(conn.execute(query))
            leases: list[Lease] = []
            for item_id, kind, run_id, payload, old_owner, token, claims, state in found:
                conn.execute(
                    update(WORK_ITEMS)
                    .where(_W.id == item_id)
                    .values(
                        state="leased",
                        owner=owner,
                        token=token + 1,
                        claims=claims + 1,
                        lease_until=now + lease_s,
                        updated_at=now,
                    )
                )
                leases.append(
                    Lease(
                        item_id=item_id,
                        kind=kind,
                        run_id=run_id,
                        payload=dict(payload),
                        owner=owner,
                        token=token + 1,
                        claims=claims + 1,
                        previous_owner=old_owner if state == "leased" else None,
                    )
                )
        return leases

    def heartbeat(self, leases: Sequence[Lease], *, lease_s: float) -> set[str]:
        """Renew ``leases``; returns the ids of those that are no longer this worker's."""
        lost: set[str] = set()
        if not leases:
            return lost
        with _write(self.engine) as conn:
            now = db_now(conn)
            for lease in leases:
                result = conn.execute(
                    update(WORK_ITEMS)
                    .where(*self._held(lease))
                    .values(lease_until=now + lease_s, updated_at=now)
                )
                if result.rowcount != 1:
                    lost.add(lease.item_id)
        return lost

    @staticmethod
    def _held(lease: Lease) -> tuple[Any, ...]:
        return (
            _W.id == lease.item_id,
            _W.owner == lease.owner,
            _W.token == lease.token,
            _W.state == "leased",
        )

    def finish(
        self,
        lease: Lease,
        state: ItemState,
        result: str | None = None,
        *,
        delay_s: float = 0.0,
    ) -> bool:
        """End this claim: ``done``/``parked`` for good, or ``queued`` again after ``delay_s``.

        False (and nothing changes) when the lease is no longer this worker's.
        """
        with _write(self.engine) as conn:
            now = db_now(conn)
            values: dict[str, Any] = {
                "state": state,
                "result": result,
                "lease_until": None,
                "updated_at": now,
            }
            if state == "queued":
                values["not_before"] = now + delay_s
                values["owner"] = None
            changed = conn.execute(update(WORK_ITEMS).where(*self._held(lease)).values(**values))
            return changed.rowcount == 1

    def release_owner(self, owner: str) -> int:
        """Put every item ``owner`` holds back in the queue, due now (a clean shutdown)."""
        with _write(self.engine) as conn:
            now = db_now(conn)
            result = conn.execute(
                update(WORK_ITEMS)
                .where(_W.owner == owner, _W.state == "leased")
                .values(
                    state="queued", owner=None, lease_until=None, not_before=now, updated_at=now
                )
            )
            return int(result.rowcount)

    def requeue(self, *, kind: str, state: ItemState, result_prefix: str | None = None) -> int:
        """Queue again the items of ``kind`` in ``state`` (whose result starts with
        ``result_prefix``): seeds parked by the budget once the cap is raised, say."""
        with _write(self.engine) as conn:
            now = db_now(conn)
            query = update(WORK_ITEMS).where(_W.kind == kind, _W.state == state)
            if result_prefix is not None:
                query = query.where(_W.result.startswith(result_prefix, autoescape=True))
            changed = conn.execute(
                query.values(state="queued", owner=None, not_before=now, updated_at=now)
            )
            return int(changed.rowcount)

    def counts(self) -> dict[tuple[str, str], int]:
        """Items per ``(kind, state)``; a leased item whose lease expired counts as ``expired``."""
        with self.engine.connect() as conn:
            now = db_now(conn)
            expired = and_(_W.state == "leased", _W.lease_until < now)
            rows = conn.execute(
                select(_W.kind, _W.state, expired.label("expired"), func.count()).group_by(
                    _W.kind, _W.state, expired
                )
            )
            out: dict[tuple[str, str], int] = {}
            for kind, state, is_expired, n in rows:
                key = (kind, "expired" if is_expired else state)
                out[key] = out.get(key, 0) + int(n)
            return out

    def items(self, *, kind: str | None = None, run_id: str | None = None) -> list[ItemRow]:
        """Every item (of a kind, of a run), in queue order."""
        query = select(
            _W.id,
            _W.kind,
            _W.run_id,
            _W.state,
            _W.owner,
            _W.token,
            _W.claims,
            _W.result,
            _W.lease_until,
        ).order_by(_W.priority, _W.created_at, _W.id)
        if kind is not None:
            query = query.where(_W.kind == kind)
        if run_id is not None:
            query = query.where(_W.run_id == run_id)
        with self.engine.connect() as conn:
            return [ItemRow(*row) for row in conn.execute(query)]

    def pending(self, kinds: Sequence[str]) -> int:
        """Items of ``kinds`` that are leased (by anyone, expired or not) or queued and due:
        work that exists now or will once a lease lapses."""
        with self.engine.connect() as conn:
            now = db_now(conn)
            query = select(func.count()).where(
                _W.kind.in_(list(kinds)),
                or_(_W.state == "leased", and_(_W.state == "queued", _W.not_before <= now)),
            )
            return int(conn.execute(query).scalar_one())

    def open_items(self, run_id: str) -> int:
        """Items of a run that are still queued or leased."""
        query = select(func.count()).where(_W.run_id == run_id, _W.state.in_(["queued", "leased"]))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    # -- who is working ------------------------------------------------------------------------

    def worker_beat(self, name: str, state: str, info: dict[str, Any]) -> None:
        """Record that worker ``name`` is alive (and what it is doing)."""
        with _write(self.engine) as conn:
            now = db_now(conn)
            changed = conn.execute(
                update(WORKERS)
                .where(WORKERS.c.name == name)
                .values(state=state, heartbeat_at=now, info=info)
            )
            if changed.rowcount == 0:
                conn.execute(
                    insert(WORKERS).values(
                        name=name, state=state, started_at=now, heartbeat_at=now, info=info
                    )
                )

    def workers(self) -> list[dict[str, Any]]:
        """Every worker seen: name, state, seconds since its last heartbeat, its info."""
        with self.engine.connect() as conn:
            now = db_now(conn)
            rows = conn.execute(select(WORKERS).order_by(WORKERS.c.name))
            return [
                {
                    "name": r.name,
                    "state": r.state,
                    "age_s": round(now - r.heartbeat_at, 3),
                    "started_at": r.started_at,
                    "info": dict(r.info),
                }
                for r in rows
            ]


# -- one writer: named leases ------------------------------------------------------------------


class LeaseHeld(PlaylistEvalError):
    """Another live process holds the lease: what it is, who holds it, until when."""

    def __init__(self, name: str, holder: str, info: dict[str, Any], seconds_left: float):
        self.name = name
        self.holder = holder
        self.info = info
        self.seconds_left = seconds_left
        what = info.get("command") or "a command"
        since = info.get("since")
        super().__init__(
            f"{name!r} is being worked on by another process: {what} (pid {info.get('pid')!r} "
            f"on {info.get('host')!r}{f', since {since}' if since else ''}); wait for it to "
            f"finish, or stop it (its lease lapses {max(seconds_left, 0.0):.0f} s after it "
            "stops, at once if it ran on this machine and is gone)"
        )


@dataclass(frozen=True)
class NamedLease:
    """A held lease: valid while ``owner`` and ``token`` still match its row."""

    name: str
    owner: str
    token: int
    took_over: str | None  # the owner whose lapsed lease this one replaced


def _alive_here(info: dict[str, Any], host: str) -> bool | None:
    """Whether the process a lease names is alive, when it ran on this machine (None: it ran
    elsewhere, so only its lease's expiry can tell)."""
    pid = info.get("pid")
    if info.get("host") != host or not isinstance(pid, int):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Leases:
    """Named leases over one database: one live writer per run, pair selection or evaluation.

    A lease is a row (name, owner, token, expiry by the database's clock). :meth:`acquire`
    takes it when it is free, lapsed, or held by a process of this machine that is gone (a
    ``kill -9`` leaves its row behind); otherwise it raises :class:`LeaseHeld` naming the
    holder. Each take increments ``token``; :meth:`renew` and :meth:`release` act only while
    owner and token still match, so a holder that lost its lease learns it and changes nothing.
    """

    def __init__(self, engine: Engine, *, host: str | None = None) -> None:
        self.engine = engine
        self.host = host or socket.gethostname()
        create_tables(engine)

    def acquire(self, name: str, owner: str, *, lease_s: float, info: dict[str, Any]) -> NamedLease:
        """Take lease ``name`` for ``lease_s`` seconds, or raise :class:`LeaseHeld`."""
        for _ in range(3):
            try:
                return self._acquire(name, owner, lease_s, info)
            except IntegrityError:
                continue  # another process inserted the row between our read and our insert
        raise LeaseHeld(name, "?", {}, lease_s)

    def _acquire(self, name: str, owner: str, lease_s: float, info: dict[str, Any]) -> NamedLease:
        with _write(self.engine) as conn:
            now = db_now(conn)
            query = select(LEASES).where(LEASES.c.name == name)
            if conn.dialect.name == "postgresql":
                query = query.with_for_update()
            row = conn.execute(query).first()
            values = {
                "owner": owner,
                "lease_until": now + lease_s,
                "acquired_at": now,
                "info": {**info, "host": self.host},
            }
            if row is None:
                conn.execute(insert(LEASES).values(name=name, token=1, **values))
                return NamedLease(name, owner, 1, None)
            holder_info = dict(row.info or {})
            lapsed = row.lease_until < now or _alive_here(holder_info, self.host) is False
            if row.owner != owner and not lapsed:
                raise LeaseHeld(name, row.owner, holder_info, row.lease_until - now)
            token = int(row.token) + 1
            conn.execute(update(LEASES).where(LEASES.c.name == name).values(token=token, **values))
            return NamedLease(name, owner, token, None if row.owner == owner else row.owner)

    def renew(self, lease: NamedLease, *, lease_s: float) -> bool:
        """Extend the lease; False when it is no longer this holder's (taken over)."""
        with _write(self.engine) as conn:
            now = db_now(conn)
            changed = conn.execute(
                update(LEASES)
                .where(
                    LEASES.c.name == lease.name,
                    LEASES.c.owner == lease.owner,
                    LEASES.c.token == lease.token,
                )
                .values(lease_until=now + lease_s)
            )
            return changed.rowcount == 1

    def release(self, lease: NamedLease) -> bool:
        """Give the lease up (False when it was taken over meanwhile)."""
        with _write(self.engine) as conn:
            changed = conn.execute(
                delete(LEASES).where(
                    LEASES.c.name == lease.name,
                    LEASES.c.owner == lease.owner,
                    LEASES.c.token == lease.token,
                )
            )
            return changed.rowcount == 1

    def holder(self, name: str) -> dict[str, Any] | None:
        """Who holds ``name`` now (owner, seconds left, info), or None when it is free."""
        with self.engine.connect() as conn:
            now = db_now(conn)
            row = conn.execute(select(LEASES).where(LEASES.c.name == name)).first()
        if row is None or row.lease_until < now:
            return None
        return {"owner": row.owner, "seconds_left": row.lease_until - now, "info": dict(row.info)}


# -- budget accounts -------------------------------------------------------------------------------


class AccountExhausted(PlaylistEvalError):
    """A reservation would take an account past its cap; nothing was reserved anywhere."""

    def __init__(self, account: str, needed_micros: int, left_micros: int, cap_micros: int):
        self.account = account
        self.needed_micros = needed_micros
        self.left_micros = left_micros
        self.cap_micros = cap_micros
        super().__init__(
            f"budget account {account!r} cannot take {needed_micros!r} micro-USD: "
            f"{left_micros!r} of its cap {cap_micros!r} are left (spent plus reserved by every "
            "worker)"
        )


@dataclass(frozen=True)
class AccountRow:
    """One account's state."""

    name: str
    cap_micros: int | None
    spent_micros: int
    reserved_micros: int

    @property
    def left_micros(self) -> int | None:
        """What may still be reserved; ``None`` when uncapped."""
        if self.cap_micros is None:
            return None
        return max(0, self.cap_micros - self.spent_micros - self.reserved_micros)


@dataclass
class BudgetAccounts:
    """Accounts shared by every worker of a database."""

    engine: Engine

    def __post_init__(self) -> None:
        create_tables(self.engine)

    def set_cap(self, name: str, cap_micros: int | None) -> None:
        """Create account ``name`` or change its cap (``None``: uncapped)."""
        with _write(self.engine) as conn:
            changed = conn.execute(
                update(BUDGET_ACCOUNTS).where(_A.name == name).values(cap_micros=cap_micros)
            )
            if changed.rowcount == 0:
                conn.execute(
                    insert(BUDGET_ACCOUNTS).values(
                        name=name, cap_micros=cap_micros, spent_micros=0, reserved_micros=0
                    )
                )

    def ensure(self, name: str, cap_micros: int | None) -> None:
        """Create account ``name`` with ``cap_micros`` unless it exists (its cap is kept)."""
        with _write(self.engine) as conn:
            found = conn.execute(select(_A.name).where(_A.name == name)).first()
            if found is None:
                try:
                    conn.execute(
                        insert(BUDGET_ACCOUNTS).values(
                            name=name, cap_micros=cap_micros, spent_micros=0, reserved_micros=0
                        )
                    )
                except IntegrityError:
                    conn.rollback()  # created by another worker meanwhile: theirs stands

    def reserve(
        self,
        hold_id: str,
        accounts: Sequence[str],
        micros: int,
        *,
        item_id: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Reserve ``micros`` on every account of ``accounts`` or on none of them.

        Raises :class:`AccountExhausted` naming the first account that refused. Accounts that
        do not exist are refused as a configuration error.
        """
        names = sorted(set(accounts))
        with _write(self.engine) as conn:
            now = db_now(conn)
            for name in names:
                # One statement checks and takes: PostgreSQL re-evaluates the WHERE against the
                # latest committed row after waiting for a concurrent reserver's row lock.
                took = conn.execute(
                    update(BUDGET_ACCOUNTS)
                    .where(
                        _A.name == name,
                        or_(
                            _A.cap_micros.is_(None),
                            _A.spent_micros + _A.reserved_micros + micros <= _A.cap_micros,
                        ),
                    )
                    .values(reserved_micros=_A.reserved_micros + micros)
                )
                if took.rowcount != 1:
                    row = conn.execute(select(BUDGET_ACCOUNTS).where(_A.name == name)).first()
                    conn.rollback()
                    if row is None:
                        raise PlaylistEvalError(
                            f"budget account {name!r} does not exist; the daemon creates it "
                            "from budget.cap_usd and budget.per_day_usd"
                        )
                    cap = int(row.cap_micros)
                    left = max(0, cap - int(row.spent_micros) - int(row.reserved_micros))
                    raise AccountExhausted(name, micros, left, cap)
            conn.execute(
                insert(BUDGET_HOLDS).values(
                    id=hold_id,
                    accounts=names,
                    micros=micros,
                    item_id=item_id,
                    owner=owner,
                    created_at=now,
                )
            )

    def settle(self, hold_id: str, actual_micros: int) -> bool:
        """Replace the hold by its actual cost; False when the hold is gone (written off after
        a takeover: the money was counted then)."""
        with _write(self.engine) as conn:
            hold = conn.execute(select(BUDGET_HOLDS).where(_H.id == hold_id)).first()
            if hold is None:
                return False
            conn.execute(delete(BUDGET_HOLDS).where(_H.id == hold_id))
            self._move(conn, list(hold.accounts), int(hold.micros), actual_micros)
            return True

    def write_off(self, item_id: str) -> int:
        """Count every hold of ``item_id`` as spent (its worker died mid-call); returns micros."""
        with _write(self.engine) as conn:
            holds = list(conn.execute(select(BUDGET_HOLDS).where(_H.item_id == item_id)))
            total = 0
            for hold in holds:
                conn.execute(delete(BUDGET_HOLDS).where(_H.id == hold.id))
                self._move(conn, list(hold.accounts), int(hold.micros), int(hold.micros))
                total += int(hold.micros)
            return total

    @staticmethod
    def _move(conn: Connection, accounts: list[str], held: int, actual: int) -> None:
        for name in sorted(accounts):
            conn.execute(
                update(BUDGET_ACCOUNTS)
                .where(_A.name == name)
                .values(
                    reserved_micros=_A.reserved_micros - held,
                    spent_micros=_A.spent_micros + actual,
                )
            )

    def account(self, name: str) -> AccountRow | None:
        """One account, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(BUDGET_ACCOUNTS).where(_A.name == name)).first()
        if row is None:
            return None
        return AccountRow(row.name, row.cap_micros, int(row.spent_micros), int(row.reserved_micros))

    def accounts(self) -> list[AccountRow]:
        """Every account, by name."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(BUDGET_ACCOUNTS).order_by(_A.name))
            return [
                AccountRow(r.name, r.cap_micros, int(r.spent_micros), int(r.reserved_micros))
                for r in rows
            ]

    def holds(self) -> int:
        """Holds outstanding (calls in flight somewhere)."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(BUDGET_HOLDS)).scalar_one())


# -- rate windows ----------------------------------------------------------------------------------


def window_wait(
    now: float,
    log: Sequence[tuple[float, int]],
    *,
    rpm: int | None,
    tpm: int | None,
    tokens: int,
    window_s: float,
) -> float:
    """Seconds from ``now`` until one more request of ``tokens`` fits the window; 0 when it
    fits now. ``log`` holds the ``(time, tokens)`` of the requests still in the window (times
    after ``now - window_s``), oldest first: each leaves it ``window_s`` after its time."""
    over_r = rpm is not None and len(log) + 1 > rpm
    excess_t = sum(t for _, t in log) + tokens - tpm if tpm is not None else 0
    if not over_r and excess_t <= 0:
        return 0.0
    leaves = [now]
    if rpm is not None and over_r:
        leaves.append(log[len(log) - rpm][0] + window_s)  # once that many of the oldest left
    for at, spent in log:
        if excess_t <= 0:
            break
        excess_t -= spent
        leaves.append(at + window_s)
    return max(max(leaves) - now, 1e-6)  # never 0: it does not fit now


class RateWindows:
    """Sliding-window request and token logs per key, and the key's pause, for every worker
    of a database. ``clock`` replaces the database's clock (tests)."""

    def __init__(self, engine: Engine, *, clock: Callable[[], float] | None = None) -> None:
        self.engine = engine
        self._clock = clock
        self._known: set[str] = set()  # keys whose row this instance has made sure of
        create_tables(engine)

    def _now(self, conn: Connection) -> float:
        return self._clock() if self._clock is not None else db_now(conn)

    def ensure(self, key: str) -> None:
        """Create ``key``'s row unless it exists (it is what takers lock)."""
        with _write(self.engine) as conn:
            if conn.execute(select(_K.key).where(_K.key == key)).first() is None:
                try:
                    conn.execute(insert(RATE_KEYS).values(key=key, paused_until=0.0))
                except IntegrityError:
                    conn.rollback()  # created by another worker meanwhile

    def take(
        self,
        key: str,
        *,
        rpm: int | None,
        tpm: int | None,
        tokens: int = 0,
        window_s: float = 60.0,
    ) -> float:
        """Let one request of ``tokens`` through under ``key``'s limits, or say how long to wait.

        Returns 0 when the request was logged (it may go now), else the seconds until it may
        fit: the key's pause, or until enough of the window's requests leave it. Nothing is
        logged then; the caller asks again after waiting (another worker may get there first).
        """
        if tpm is not None:
            tokens = min(tokens, tpm)  # more than a window's tokens: waits for an empty window
        for _ in range(2):
            self._ensure_once(key)
            with _write(self.engine) as conn:
                query = select(_K.paused_until).where(_K.key == key)
                if conn.dialect.name == "postgresql":
                    query = query.with_for_update()  # takers of one key queue on its row
                paused_until = conn.execute(query).scalar_one_or_none()
                if paused_until is None:  # its row was deleted under us: make it again
                    self._known.discard(key)
                    continue
                now = self._now(conn)
                if paused_until > now:
                    return float(paused_until - now)
                if rpm is None and tpm is None:
                    return 0.0
                conn.execute(delete(RATE_LOG).where(_R.key == key, _R.at <= now - window_s))
                query = select(_R.at, _R.tokens).where(_R.key == key).order_by(_R.at, _R.id)
                log = [(float(at), int(spent)) for at, spent in conn.execute(query)]
                wait = window_wait(now, log, rpm=rpm, tpm=tpm, tokens=tokens, window_s=window_s)
                if wait == 0:
                    conn.execute(insert(RATE_LOG).values(key=key, at=now, tokens=tokens))
                return wait
        raise PlaylistEvalError(f"rate key {key!r} keeps vanishing from {RATE_KEYS.name!r}")

    def _ensure_once(self, key: str) -> None:
        if key not in self._known:
            self.ensure(key)
            self._known.add(key)

    def pause(self, key: str, seconds: float) -> float:
        """No request under ``key`` is let through for ``seconds`` from now (a pause already
        reaching further stands); returns when the pause ends (database time)."""
        self._ensure_once(key)
        with _write(self.engine) as conn:
            until = self._now(conn) + max(seconds, 0.0)
            conn.execute(
                update(RATE_KEYS)
                .where(_K.key == key, _K.paused_until < until)
                .values(paused_until=until)
            )
            return until

    def paused_until(self, key: str) -> float:
        """When ``key``'s pause ends (database time; in the past when it is not paused)."""
        with self.engine.connect() as conn:
            found = conn.execute(select(_K.paused_until).where(_K.key == key)).scalar_one_or_none()
        return float(found or 0.0)

    def logged(self, key: str) -> list[float]:
        """The times of the requests ``key``'s log still holds, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(_R.at).where(_R.key == key).order_by(_R.at, _R.id))
            return [float(at) for (at,) in rows]


__all__ = [
    "RATE_KEYS",
    "RATE_LOG",
    "STATES",
    "AccountExhausted",
    "AccountRow",
    "BudgetAccounts",
    "ItemRow",
    "ItemState",
    "Lease",
    "LeaseHeld",
    "Leases",
    "NamedLease",
    "RateWindows",
    "WorkItem",
    "WorkQueue",
    "create_tables",
    "db_now",
    "window_wait",
]
