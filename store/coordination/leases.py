"""Named leases: one live writer per run, pair selection or evaluation, held as a row in the
coordination tables and taken over only when it lapsed (by the database's clock) or its holder,
on this machine, is gone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from store.coordination.tables import LEASES, create_tables, db_now, write_transaction
from store.errors import PlaylistEvalError


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
        with write_transaction(self.engine) as conn:
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
        with write_transaction(self.engine) as conn:
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
        with write_transaction(self.engine) as conn:
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
