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
    Column("accounts", JsonDocument(), nullable=False),
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
    Column("info", JsonDocument(), nullable=False),
)
WORKERS = Table(
    "workers",
    _META,
    Column("name", String, primary_key=True),
    Column("state", String, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("info", JsonDocument(), nullable=False),
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
