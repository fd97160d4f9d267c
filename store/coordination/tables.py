"""The coordination tables, beside the event store's ``events`` table (same database, same
PostgreSQL schema), the one clock every worker shares (:func:`db_now`) and the write transaction
each of them runs in (:func:`write_transaction`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import (
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
    text,
)

from store.columns import JsonDocument


def _db_time(name: str, *, nullable: bool = False, default: float | None = None) -> Column[float]:
    """A moment on the database's clock (:func:`db_now`), in epoch seconds: every worker reads
    and writes these times by that one clock, never by its own."""
    return Column(name, Float, nullable=nullable, default=default)


_META = MetaData()
WORK_ITEMS = Table(
    "work_items",
    _META,
    Column("id", String, primary_key=True),
    Column("kind", String, nullable=False, index=True),
    Column("run_id", String, nullable=True, index=True),
    Column("payload", JsonDocument(), nullable=False),
    Column("state", String, nullable=False, index=True),
    Column("priority", Integer, nullable=False, default=0),
    _db_time("not_before", default=0.0),
    Column("owner", String, nullable=True),
    Column("token", BigInteger, nullable=False, default=0),
    _db_time("lease_until", nullable=True),
    Column("claims", Integer, nullable=False, default=0),
    Column("result", Text, nullable=True),
    _db_time("created_at"),
    _db_time("updated_at"),
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
    Column("accounts", JsonDocument(), nullable=False),
    Column("micros", BigInteger, nullable=False),
    Column("item_id", String, nullable=True, index=True),
    Column("owner", String, nullable=True),
    _db_time("created_at"),
)
LEASES = Table(
    "leases",
    _META,
    Column("name", String, primary_key=True),
    Column("owner", String, nullable=False),
    Column("token", BigInteger, nullable=False),
    _db_time("lease_until"),
    _db_time("acquired_at"),
    Column("info", JsonDocument(), nullable=False),
)
WORKERS = Table(
    "workers",
    _META,
    Column("name", String, primary_key=True),
    Column("state", String, nullable=False),
    _db_time("started_at"),
    _db_time("heartbeat_at"),
    Column("info", JsonDocument(), nullable=False),
)
RATE_KEYS = Table(
    "rate_keys",
    _META,
    Column("key", String, primary_key=True),
    _db_time("paused_until", default=0.0),
)
RATE_LOG = Table(
    "rate_log",
    _META,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("key", String, nullable=False),
    _db_time("at"),  # when the request was let through
    Column("tokens", BigInteger, nullable=False, default=0),
    Index("ix_rate_log_key_at", "key", "at"),
)
_W, _A, _H = WORK_ITEMS.c, BUDGET_ACCOUNTS.c, BUDGET_HOLDS.c


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
def write_transaction(engine: Engine) -> Iterator[Connection]:
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
