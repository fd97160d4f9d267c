"""The append-only event store: one ``events`` table, one abstract recorder, two backends.

A stored event is ``(seq, stream, version, type, schema, data, recorded_at)``. ``seq`` is the
global position and follows commit order; ``version`` counts 1, 2, 3 … within a stream, and
UNIQUE(stream, version) is the optimistic-concurrency guard. An append is all or nothing, and so
is a batch over several streams.

SQLite (WAL) is the embedded default and may share the workspace's ``playlisteval.db`` with the
catalogue; PostgreSQL holds the same schema when many workers share one log. Writes go through
SQLAlchemy Core ``executemany`` (DESIGN.md measured the ORM about ten times slower).
"""

from __future__ import annotations

import json
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    Table,
    UniqueConstraint,
    bindparam,
    event,
    func,
    insert,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Field, SQLModel, create_engine

from store.errors import ConfigError, StoreConflict
from store.events import AnyEvent, Event, decode_event, encode_event

PG_START_HINT = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_READ_CHUNK = 1000  # events per query when following the log


class EventRow(SQLModel, table=True):
    """The ``events`` table. Rows are only ever inserted."""

    __tablename__ = "events"
    # The unique index on (stream, version) also serves every lookup by stream (it leads with
    # stream), so stream needs no index of its own: one index fewer to maintain on each insert.
    __table_args__ = (UniqueConstraint("stream", "version", name="uq_events_stream_version"),)
    seq: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    stream: str
    version: int
    type: str = Field(index=True)
    schema_no: int = Field(sa_column=Column("schema", Integer, nullable=False, key="schema_no"))
    data: dict[str, Any] = Field(
        sa_column=Column(JSON().with_variant(JSONB(), "postgresql"), nullable=False)
    )
    recorded_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


EVENTS: Table = cast(Table, EventRow.__table__)  # type: ignore[attr-defined]
_C = EVENTS.c
# Statements built once: SQLAlchemy then only looks them up in its compiled cache per append.
_INSERT = insert(EVENTS)
_KEYS = ["seq", "stream", "version", "type", "schema_no", "data", "recorded_at"]
_MAX_SEQ = select(func.coalesce(func.max(_C.seq), 0))
_STREAM_VERSIONS = (
    select(_C.stream, func.max(_C.version))
    .where(_C.stream.in_(bindparam("names", expanding=True)))
    .group_by(_C.stream)
)
_COLUMNS = (_C.seq, _C.stream, _C.version, _C.type, _C.schema_no, _C.data, _C.recorded_at)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event as the log holds it."""

    seq: int  # global position, strictly increasing in commit order
    stream: str
    version: int  # 1, 2, 3 … within the stream
    type: str
    schema: int
    data: dict[str, Any]
    recorded_at: datetime  # UTC, set by the store

    def event(self) -> AnyEvent:
        """The typed event, upcast to the current schema."""
        return decode_event(self.type, self.schema, self.data)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything the store writes is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _stored(row: Any) -> StoredEvent:
    return StoredEvent(
        seq=row[0],
        stream=row[1],
        version=row[2],
        type=row[3],
        schema=row[4],
        data=row[5],
        recorded_at=_as_utc(row[6]),
    )


def _check_stream(stream: str, expected_version: int | None) -> None:
    if not isinstance(stream, str) or not stream:
        raise ValueError(f"a stream name must be a non-empty string, got {stream!r}")
    if expected_version is not None and expected_version < 0:
        raise ValueError(
            f"expected_version for stream {stream!r} must be 0 (new stream) or more, "
            f"got {expected_version!r}"
        )


class EventStore(ABC):
    """The recorder: append events to streams, read them back, follow the log.

    Subclasses say how a write transaction takes the write lock (:meth:`_begin_write`); the
    rest is shared so both backends keep the same contract.
    """

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._engine = engine
        self._clock = clock

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (projections keep their tables in the same database)."""
        return self._engine

    # -- writing ---------------------------------------------------------------------------

    @abstractmethod
    def _begin_write(self, conn: Connection) -> None:
        """Open the write transaction holding the lock that serialises appenders."""

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> list[StoredEvent]:
        """Append ``events`` to ``stream``, all or nothing.

        ``expected_version`` is the version the writer last saw (0 for a new stream); if the
        stream has moved on, :class:`StoreConflict` is raised and nothing is written. ``None``
        appends at the end whatever the version.
        """
        return self.append_batch([(stream, events, expected_version)])

    def append_batch(
        self, batch: Sequence[tuple[str, Sequence[Event], int | None]]
    ) -> list[StoredEvent]:
        """Append to several streams in one transaction: a conflict on any writes none."""
        for stream, _events, expected in batch:
            _check_stream(stream, expected)
        encoded = [
            (stream, [encode_event(e) for e in events], expected)
            for stream, events, expected in batch
        ]
        if not encoded:
            return []
        with self._write_connection() as conn:
            try:
                self._begin_write(conn)
                stored = self._insert(conn, encoded)
                conn.commit()
            except IntegrityError as exc:
                conn.rollback()
                streams = sorted({stream for stream, _e, _v in batch})
                raise StoreConflict(
                    f"another writer appended to {streams!r} at the same versions; "
                    "read the stream again and retry"
                ) from exc
            except BaseException:
                conn.rollback()
                raise
        return stored

    @contextmanager
    def _write_connection(self) -> Iterator[Connection]:
        """A connection for one append (from the pool unless the backend keeps its own)."""
        with self._engine.connect() as conn:
            yield conn

    def _insert(
        self,
        conn: Connection,
        batch: list[tuple[str, list[tuple[str, int, dict[str, Any]]], int | None]],
    ) -> list[StoredEvent]:
        names = list({stream for stream, _e, _v in batch})
        current: dict[str, int] = dict.fromkeys(names, 0)
        found = conn.execute(
            select(_C.stream, func.max(_C.version)).where(_C.stream.in_(names)).group_by(_C.stream)
        )
        for name, version in found:
            current[name] = int(version)
        # seq is assigned here, under the write lock, rather than by the database's sequence:
        # appenders are serialised, so max + 1 is both gap-free and in commit order.
        seq = int(conn.execute(_MAX_SEQ).scalar_one())
        now = self._clock()
        stored: list[StoredEvent] = []
        for stream, events, expected in batch:
            version = current[stream]
            if expected is not None and expected != version:
                raise StoreConflict(
                    f"stream {stream!r} is at version {version!r}, the writer expected "
                    f"{expected!r}; read the stream again and retry"
                )
            for type_, schema, data in events:
                seq += 1
                version += 1
                stored.append(StoredEvent(seq, stream, version, type_, schema, data, now))
            current[stream] = version
        if stored:
            self._insert_rows(conn, stored)
        return stored

    def _insert_rows(self, conn: Connection, stored: list[StoredEvent]) -> None:
        """Insert the rows in one executemany."""
        conn.execute(
            _INSERT,
            [
                {
                    "seq": e.seq,
                    "stream": e.stream,
                    "version": e.version,
                    "type": e.type,
                    "schema_no": e.schema,
                    "data": e.data,
                    "recorded_at": e.recorded_at,
                }
                for e in stored
            ],
        )

    # -- reading ---------------------------------------------------------------------------

    def read_stream(self, stream: str, after_version: int = 0) -> list[StoredEvent]:
        """The events of ``stream`` with a version above ``after_version``, in order."""
        query = (
            select(*_COLUMNS)
            .where(_C.stream == stream, _C.version > after_version)
            .order_by(_C.version)
        )
        with self._engine.connect() as conn:
            return [_stored(row) for row in conn.execute(query)]

    def read_all(
        self,
        after_seq: int = 0,
        limit: int | None = None,
        *,
        stream_prefix: str | None = None,
        types: Sequence[str] | None = None,
    ) -> list[StoredEvent]:
        """Events after ``after_seq`` in seq order, optionally of some streams or types."""
        query = select(*_COLUMNS).where(_C.seq > after_seq)
        if stream_prefix:
            query = query.where(_C.stream.startswith(stream_prefix, autoescape=True))
        if types is not None:
            query = query.where(_C.type.in_(list(types)))
        query = query.order_by(_C.seq)
        if limit is not None:
            query = query.limit(limit)
        with self._engine.connect() as conn:
            return [_stored(row) for row in conn.execute(query)]

    def stream_version(self, stream: str) -> int:
        """The stream's last version; 0 when it has no events."""
        query = select(func.coalesce(func.max(_C.version), 0)).where(_C.stream == stream)
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def streams(self, prefix: str = "") -> list[str]:
        """Names of the streams that start with ``prefix``, sorted."""
        query = select(_C.stream).distinct()
        if prefix:
            query = query.where(_C.stream.startswith(prefix, autoescape=True))
        # Sorted here: PostgreSQL's locale collation would not sort like SQLite.
        with self._engine.connect() as conn:
            return sorted(str(name) for name in conn.execute(query).scalars())

    def last_seq(self) -> int:
        """The highest committed seq; 0 for an empty log."""
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.coalesce(func.max(_C.seq), 0))).scalar_one())

    def follow(
        self,
        after_seq: int = 0,
        *,
        poll_s: float = 0.05,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent]:
        """Yield every event after ``after_seq`` in seq order, waiting for new ones.

        It ends once ``stop()`` is true and everything committed before that has been yielded
        (with no ``stop`` it follows until the caller stops iterating). Because seq follows
        commit order on both backends, reading ``seq > last`` never skips a late commit.
        """
        last = after_seq
        while True:
            # Ask before reading, so events committed before stop() turned true still come out.
            stopping = stop is not None and stop()
            chunk = self.read_all(last, _READ_CHUNK)
            for stored in chunk:
                last = stored.seq
                yield stored
            if chunk:
                continue
            if stopping:
                return
            time.sleep(poll_s)

    def close(self) -> None:
        """Release the database connections."""
        self._engine.dispose()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets followers and projections read while a writer appends; NORMAL sync survives a
    # process kill (the crash the curation loop must survive) without an fsync per append.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class SqliteEventStore(EventStore):
    """The embedded store: one SQLite file in WAL mode (it may be the catalogue's file)."""

    def __init__(self, path: str | Path, *, clock: Callable[[], datetime] = _utc_now) -> None:
        file = Path(path).expanduser()
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the folder for the event store {str(file)!r}: {exc}"
            ) from exc
        # Connections move between threads through the pool, never used by two at once.
        engine = create_engine(f"sqlite:///{file}", connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        try:
            SQLModel.metadata.create_all(engine, tables=[EVENTS])
        except OperationalError as exc:
            engine.dispose()
            raise ConfigError(
                f"cannot open the event store at {str(file)!r}: {exc.orig}; "
                "check the path is a writable SQLite file"
            ) from exc
        super().__init__(engine, clock=clock)
        self.path = file
        # Threads of one process queue here instead of spinning in SQLite's busy handler (other
        # processes still wait on the database lock, busy_timeout). The lock also lets one
        # connection serve every append, which saves a pool checkout and reset per append.
        self._lock = threading.Lock()
        self._writer: Connection | None = None
        self._insert_sql = str(_INSERT.compile(dialect=engine.dialect, column_keys=_KEYS))

    def _insert_rows(self, conn: Connection, stored: list[StoredEvent]) -> None:
        # Still one Core executemany, but of plain tuples in the exact text form SQLAlchemy's
        # JSON and DateTime types store on SQLite (and read back): skipping their per-row bind
        # processing is most of the store's overhead over raw sqlite3 (bench/events.py).
        when = stored[0].recorded_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        dumps = json.dumps
        conn.exec_driver_sql(
            self._insert_sql,
            [(e.seq, e.stream, e.version, e.type, e.schema, dumps(e.data), when) for e in stored],
        )

    @contextmanager
    def _write_connection(self) -> Iterator[Connection]:
        with self._lock:
            if self._writer is None or self._writer.closed:
                self._writer = self._engine.connect()
            yield self._writer

    def close(self) -> None:
        """Release the database connections."""
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        super().close()

    def _begin_write(self, conn: Connection) -> None:
        # IMMEDIATE takes the write lock now, so the version check, the seq and the insert all
        # happen with no other writer in between (a deferred BEGIN would upgrade later and could
        # fail with SQLITE_BUSY mid-transaction).
        conn.exec_driver_sql("BEGIN IMMEDIATE")


class PostgresEventStore(EventStore):
    """The shared store on PostgreSQL (psycopg 3), optionally inside its own schema."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://") :]
        connect_args: dict[str, Any] = {}
        if schema is not None:
            if not _SCHEMA_NAME.match(schema):
                raise ConfigError(
                    f"PostgreSQL schema name {schema!r} is not a plain identifier; "
                    "use letters, digits and underscores"
                )
            connect_args["options"] = f"-csearch_path={schema}"
        try:
            engine = create_engine(url, connect_args=connect_args, pool_size=10)
        except Exception as exc:  # SQLAlchemy raises several types for a bad URL
            raise ConfigError(f"cannot use the event store URL {url!r}: {exc}") from exc
        try:
            with engine.begin() as conn:
                if schema is not None:
                    conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            SQLModel.metadata.create_all(engine, tables=[EVENTS])
        except OperationalError as exc:
            engine.dispose()
            raise ConfigError(
                f"cannot reach PostgreSQL at {engine.url.render_as_string()!r}: {exc.orig}; "
                f"start it with `{PG_START_HINT}`"
            ) from exc
        super().__init__(engine, clock=clock)
        self.schema = schema

    def _begin_write(self, conn: Connection) -> None:
        # Sequence values (and rows) of concurrent transactions can commit out of order, so a
        # follower reading `seq > last` could pass over a seq whose transaction commits later.
        # EXCLUSIVE mode blocks every other appender (but not plain readers) until commit, so
        # seq order is commit order — what pyeventsourcing does for the same reason.
        conn.exec_driver_sql("LOCK TABLE events IN EXCLUSIVE MODE")


def open_event_store(url_or_path: str | Path, *, schema: str | None = None) -> EventStore:
    """Open (and create) the event store.

    A filesystem path or ``sqlite:///`` URL gives SQLite; ``postgresql://`` or
    ``postgresql+psycopg://`` gives PostgreSQL, inside ``schema`` when one is named.
    """
    text = str(url_or_path)
    if isinstance(url_or_path, Path) or "://" not in text:
        return SqliteEventStore(text)
    if text.startswith("sqlite:///"):
        path = text[len("sqlite:///") :]
        if not path or path == ":memory:":
            raise ConfigError(
                f"the event store needs a SQLite file, not {text!r}; give a path to a .db file"
            )
        return SqliteEventStore(path)
    if text.startswith(("postgresql://", "postgresql+psycopg://")):
        return PostgresEventStore(text, schema=schema)
    raise ConfigError(
        f"unknown event store {text!r}; give a file path, sqlite:///PATH or "
        "postgresql+psycopg://USER@HOST:PORT/DB"
    )
