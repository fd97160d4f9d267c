"""The leased work queue: a work item (a seed of a run, a video to index) is claimed by a
worker for a lease.

On PostgreSQL a claim is ``SELECT … FOR UPDATE SKIP LOCKED`` (claimers never wait on each other's
rows), on SQLite it runs under the file's write lock. Every claim increments the item's ``token``
(a fencing token); heartbeats, completion and release only act when owner and token still match,
so a worker whose lease was taken over can no longer change the item. Expiry is judged by the
database's clock, never a worker's, so clock skew between machines cannot shorten a lease.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import ColumnElement, Engine, and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from store.coordination.tables import WORK_ITEMS, WORKERS, create_tables, db_now, write_transaction

ItemState = Literal["queued", "leased", "done", "parked"]
STATES: tuple[ItemState, ...] = ("queued", "leased", "done", "parked")
_W = WORK_ITEMS.c


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


def _claimable(now: float) -> ColumnElement[bool]:
    """Queued and due, or leased with the lease expired (its worker died or hung)."""
    return or_(
        and_(_W.state == "queued", _W.not_before <= now),
        and_(_W.state == "leased", _W.lease_until < now),
    )


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
        with write_transaction(self.engine) as conn:
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
                with write_transaction(self.engine) as conn:
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
        exclude_runs: Collection[str] = (),
    ) -> list[Lease]:
        """Claim up to ``limit`` claimable items of ``kinds`` for ``lease_s`` seconds.

        Claimable: queued and due, or leased with the lease expired (its worker died or hung).
        Items locked by another claimer right now are skipped, not waited for. ``exclude``
        names items the claimer is working on now: its own lease of one may have lapsed (a
        starved event loop missed its heartbeats), and taking it over from itself would run
        the item twice in one process; its next heartbeat renews the lapsed lease instead.
        ``exclude_runs`` names runs whose items the claimer must not take (its code cannot
        honour their recorded definitions); items of no run are never excluded by it.
        """
        if limit <= 0:
            return []
        with write_transaction(self.engine) as conn:
            now = db_now(conn)
            runs = (
                [or_(_W.run_id.is_(None), _W.run_id.notin_(sorted(exclude_runs)))]
                if exclude_runs
                else []
            )
            query = (
                select(
                    _W.id, _W.kind, _W.run_id, _W.payload, _W.owner, _W.token, _W.claims, _W.state
                )
                .where(
                    _W.kind.in_(list(kinds)),
                    _claimable(now),
                    *([_W.id.notin_(sorted(exclude))] if exclude else []),
                    *runs,
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

    def claimable_runs(self, kinds: Sequence[str]) -> set[str]:
        """The runs that have items of ``kinds`` claimable now (what a claimer checks it can
        honour before it claims)."""
        with self.engine.connect() as conn:
            now = db_now(conn)
            rows = conn.execute(
                select(_W.run_id)
                .where(_W.kind.in_(list(kinds)), _W.run_id.is_not(None), _claimable(now))
                .distinct()
            )
            return {str(row[0]) for row in rows}

    def heartbeat(self, leases: Sequence[Lease], *, lease_s: float) -> set[str]:
        """Renew ``leases``; returns the ids of those that are no longer this worker's."""
        lost: set[str] = set()
        if not leases:
            return lost
        with write_transaction(self.engine) as conn:
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
        self, lease: Lease, state: ItemState, result: str | None = None, *, delay_s: float = 0.0
    ) -> bool:
        """End this claim: ``done``/``parked`` for good, or ``queued`` again after ``delay_s``.

        False (and nothing changes) when the lease is no longer this worker's.
        """
        with write_transaction(self.engine) as conn:
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
        with write_transaction(self.engine) as conn:
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
        with write_transaction(self.engine) as conn:
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
        with write_transaction(self.engine) as conn:
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
