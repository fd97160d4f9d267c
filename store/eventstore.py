"""The append-only event store: one ``events`` table, one abstract recorder, two backends.

A stored event is ``(seq, stream, version, type, schema, data, recorded_at)``. ``seq`` is the
global position and follows commit order; ``version`` counts 1, 2, 3 … within a stream, and
UNIQUE(stream, version) is the optimistic-concurrency guard. An append is all or nothing, and so
is a batch over several streams.

SQLite (WAL) is the embedded default and may share the workspace's ``playlisteval.db`` with the
catalogue; PostgreSQL holds the same schema when many workers share one log. Writes go through
SQLAlchemy Core ``executemany`` (DESIGN.md measured the ORM about ten times slower).

**Tamper evidence** lives in :mod:`store.chain`: every event carries ``hash`` (its stream's
chain) and ``link`` (the global chain over seq), both keyed with a key kept outside the database,
and the log's head (last seq and link) is kept beside that key. The table ``stream_heads`` holds
each stream's last version and hash, written in the same transaction as the events.
:meth:`EventStore.check` verifies the log against all of them (``playlisteval store verify``);
nothing in the database decides how its rows are verified: a log whose chain is not the key's is
refused for writing and fails verification until ``store rekey`` (:meth:`EventStore.rekey`)
checks it and brings it under the key, recorded as a ``LogRekeyed`` event. A store opened with
no key at all (a scratch log, a test) chains with plain SHA-256 and keeps no head.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import secrets
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    UniqueConstraint,
    and_,
    bindparam,
    event,
    func,
    insert,
    inspect,
    literal,
    or_,
    select,
    type_coerce,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError
from sqlmodel import Field, SQLModel, create_engine

from store.annotation_events import ANNOTATION_TYPES, decode_annotation
from store.chain import (
    CHAIN_KEYED,
    CHAIN_KEYED_STREAMS,
    CHAIN_PLAIN,
    CHAIN_PLAIN_STREAMS,
    LOG_KEY_FILE,
    LOG_WIDE,
    Anchor,
    ChainProblem,
    Head,
    HeadFile,
    LinkWalk,
    StreamWalk,
    canonical_json,
    chain_hash,
    key_id,
    link_hash,
    read_log_key,
)
from store.columns import JsonDocument
from store.errors import ConfigError, StoreConflict, UndecodableEvent, unreadable_database
from store.events import AnyEvent, Event, decode_event, encode_event
from store.folders import make_folder
from store.sqlite import immutable_url, read_only, refuse_writes, writable

PG_START_HINT = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_READ_CHUNK = 1000  # events per query when following the log
_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    data: dict[str, Any] = Field(sa_column=Column(JsonDocument(), nullable=False))
    recorded_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    # The stream's hash chain up to and including this event (see the module docstring).
    hash: str | None = Field(default=None, sa_column=Column("hash", String(64), nullable=True))
    # The global chain up to and including this event (store.chain.link_hash).
    link: str | None = Field(default=None, sa_column=Column("link", String(64), nullable=True))


EVENTS: Table = cast(Table, EventRow.__table__)  # type: ignore[attr-defined]
_C = EVENTS.c
_META = MetaData()
HEADS = Table(
    "stream_heads",
    _META,
    Column("stream", String, primary_key=True),
    Column("version", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
    Column("seq", BigInteger, nullable=False),
)
STORE_META = Table(
    "store_meta",
    _META,
    Column("key", String, primary_key=True),
    Column("value", String, nullable=False),
)
_H = HEADS.c
# Statements built once: SQLAlchemy then only looks them up in its compiled cache per append.
_INSERT = insert(EVENTS)
_KEYS = ["seq", "stream", "version", "type", "schema_no", "data", "recorded_at", "hash", "link"]
_LAST = select(_C.seq, _C.link).order_by(_C.seq.desc()).limit(1)
_COLUMNS = (
    _C.seq,
    _C.stream,
    _C.version,
    _C.type,
    _C.schema_no,
    _C.data,
    _C.recorded_at,
    _C.hash,
    _C.link,
)
_UPSERT_HEAD = (
    "INSERT INTO stream_heads (stream, version, hash, seq) VALUES ({}) "
    "ON CONFLICT (stream) DO UPDATE SET version = excluded.version, hash = excluded.hash, "
    "seq = excluded.seq"
)


_SQLITE_LAST = "SELECT seq, link FROM events ORDER BY seq DESC LIMIT 1"
_SQLITE_CHAIN = "SELECT value FROM store_meta WHERE key = 'chain'"
_SQLITE_HEAD = "SELECT stream, version, hash FROM stream_heads WHERE stream = ?"
_SQLITE_HEADS = "SELECT stream, version, hash FROM stream_heads WHERE stream IN ({})"


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
    hash: str | None = None  # the stream's chain up to this event (None: not read or not set)
    link: str | None = None  # the global chain up to this event (None: not read or not set)

    def event(self) -> AnyEvent:
        """The typed event, upcast to the current schema; :class:`UndecodableEvent` (naming
        where it is) when the stored row is no event this code knows.

        Its static type is the curation log's union, what the folds that call this match on;
        a type declared beside it (an annotation, a test's own) decodes to its own registered
        class, which those folds pass over."""
        try:
            return cast(AnyEvent, decode_event(self.type, self.schema, self.data))
        except ValueError as exc:  # pydantic's ValidationError, or an unknown schema
            if isinstance(exc, ValidationError) and exc.errors():
                error = exc.errors()[0]
                where = ".".join(str(part) for part in error["loc"])
                why = f"{where}: {error['msg']}" if where else error["msg"]
            else:
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UndecodableEvent(
                f"event seq {self.seq} of {self.stream!r} does not decode as a {self.type!r} "
                f"event ({why}): the log was edited, or written by a newer PlaylistEval; "
                "`playlisteval store verify` lists every such event, and a backup restores "
                "the file"
            ) from exc


def decode_known(stored: StoredEvent) -> object:
    """Any event the project writes, typed: the curation log's (:meth:`StoredEvent.event`) or
    the annotations' (:func:`store.annotation_events.decode_annotation`). What
    :meth:`EventStore.verify` decodes every row with, so no event type the project writes reads
    as tampering."""
    if stored.type in ANNOTATION_TYPES:
        return decode_annotation(stored)
    return stored.event()


def _prefix_end(prefix: str) -> str | None:
    """The least string after every string that starts with ``prefix`` in code-point order
    (None when there is none to name: an empty prefix, or one ending in the last code point)."""
    if not prefix or ord(prefix[-1]) >= 0x10FFFF:
        return None
    after = ord(prefix[-1]) + 1
    if 0xD800 <= after < 0xE000:  # surrogates are no characters UTF-8 can hold: skip them
        after = 0xE000
    return prefix[:-1] + chr(after)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything the store writes is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _event_of(row: Any, data: Any, recorded_at: datetime) -> StoredEvent:
    """A row of :data:`_COLUMNS` as an event, its data and time already read."""
    return StoredEvent(
        seq=row[0],
        stream=row[1],
        version=row[2],
        type=row[3],
        schema=row[4],
        data=data,
        recorded_at=recorded_at,
        hash=row[7],
        link=row[8],
    )


def _stored(row: Any) -> StoredEvent:
    """A row of :data:`_COLUMNS` as SQLAlchemy returns it (data decoded, a datetime)."""
    return _event_of(row, row[5], _as_utc(row[6]))


_SQLITE = sqlite.dialect()
_SQLITE_WHEN = cast(
    Callable[[Any], datetime],
    _C.recorded_at.type.dialect_impl(_SQLITE).result_processor(_SQLITE, None),
)


def _when(text: Any) -> datetime:
    """A timestamp as SQLite holds it (the text SQLAlchemy wrote), in UTC."""
    if isinstance(text, str):
        try:
            return _as_utc(datetime.fromisoformat(text))
        except ValueError:
            pass
    return _as_utc(_SQLITE_WHEN(text))


def _stored_text(row: Any) -> StoredEvent:
    """A row of :data:`_COLUMNS` as sqlite3 returns it (data as JSON text)."""
    data = row[5]
    return _event_of(
        row, json.loads(data) if isinstance(data, str | bytes) else data, _when(row[6])
    )


def _check_stream(stream: str, expected_version: int | None) -> None:
    if not isinstance(stream, str) or not stream:
        raise ValueError(f"a stream name must be a non-empty string, got {stream!r}")
    if expected_version is not None and expected_version < 0:
        raise ValueError(
            f"expected_version for stream {stream!r} must be 0 (new stream) or more, "
            f"got {expected_version!r}"
        )


def _chain_name(chain: str | None) -> str:
    return {
        CHAIN_PLAIN_STREAMS: "plain SHA-256 per stream (an earlier PlaylistEval's scratch log)",
        CHAIN_KEYED_STREAMS: "keyed per stream (an earlier PlaylistEval, before the global chain)",
        CHAIN_PLAIN: "plain SHA-256 (a log written without a key)",
        CHAIN_KEYED: "keyed",
    }.get(chain or "", "nothing: the chain record is missing")


def _not_under_key(chain: str | None, last: int) -> str:
    """Why a log holding events is not under the key, from what its chain record says."""
    if chain == CHAIN_KEYED:
        return "the log's chain record names no log id: it was changed around the store"
    if chain is None:
        return (
            f"the log holds {last} event(s) but no chain record (store_meta): it was removed "
            "around the store, or the log predates hash chains"
        )
    return f"the log's chain record says it is chained {_chain_name(chain)}, not under the key"


def _how_chained(
    rows: Sequence[StoredEvent], key: bytes, old_key: bytes | None, *, only_this_key: bool
) -> tuple[str, list[ChainProblem]]:
    """Under which chain ``rows`` check out (``store rekey``): this key, ``old_key``, or plain
    SHA-256 (only this key when ``only_this_key``) — each stream's chain, and the global chain
    too where every row has a link — and the problems under the closest one when none does."""
    if rows and all(row.hash is None for row in rows):
        return "no chain (written before hash chains)", [
            ChainProblem(rows[0].seq, LOG_WIDE, 0, "no event has a hash: nothing to check")
        ]
    candidates: list[tuple[str, bytes | None]] = [("this key", key)]
    if old_key is not None and not only_this_key:
        candidates.append(("the old key", old_key))
    if not only_this_key:
        candidates.append(("plain SHA-256", None))
    linked = bool(rows) and all(row.link is not None for row in rows)
    best: tuple[str, list[ChainProblem]] | None = None
    for label, candidate in candidates:
        problems: list[ChainProblem] = []
        walks: dict[str, StreamWalk] = {}
        links = LinkWalk(candidate, None)
        for row in rows:
            walk = walks.setdefault(row.stream, StreamWalk(row.stream, candidate))
            problems += walk.step(
                row.seq, row.version, row.type, row.schema, canonical_json(row.data), row.hash
            )
            if linked and not links.broken:
                problems += links.step(row.seq, row.stream, row.version, row.hash, row.link)
            try:
                decode_known(row)
            except Exception as exc:  # pydantic's ValidationError, or an unknown type
                what = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                problems.append(ChainProblem(row.seq, row.stream, row.version, what))
        if not problems:
            return label, []
        if best is None or problems[0].seq > best[1][0].seq:
            best = (label, sorted(problems, key=lambda p: (p.seq, p.stream)))
    assert best is not None
    return f"none that checks out (closest: {best[0]})", best[1]


@dataclass(frozen=True)
class Verification:
    """What :meth:`EventStore.check` found: how many events it checked (of the streams asked
    for), the log's last seq, and the problems (``[]``: the log is what was written)."""

    events: int
    last_seq: int
    problems: list[ChainProblem]
    since: int = 0  # a quick check's checkpoint: the events after it were checked


@dataclass(frozen=True)
class Rekeyed:
    """What :meth:`EventStore.rekey` did: how the log was chained before (``was``), how many
    events it checked, and the problems that stopped it (then nothing was changed)."""

    was: str
    events: int
    problems: list[ChainProblem]
    key_id: str
    seq: int = 0  # the LogRekeyed event's seq (0: nothing recorded)

    @property
    def done(self) -> bool:
        return not self.problems


REKEY_STREAM = "store"  # where LogRekeyed events go
_REKEY_ADVICE = (
    "`playlisteval store verify` shows what differs; if the log is yours as it stands, "
    "`playlisteval store rekey` checks it and chains it under the key (recorded in the log), "
    "otherwise restore the database from a backup"
)


class EventStore(ABC):
    """The recorder: append events to streams, read them back, follow the log.

    Subclasses say how a write transaction takes the write lock (:meth:`_begin_write`); the
    rest is shared so both backends keep the same contract.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = _utc_now,
        key: bytes | None = None,
        key_file: Path | None = None,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._key = key
        # The file beside the key that keeps this log's head (None: a key given without its
        # file, or no key: no head is kept).
        self._head_file = HeadFile(key_file) if key is not None and key_file is not None else None
        self._log_id: str | None = None
        self.read_only: bool = getattr(self, "read_only", False)
        # Set when the log's chain is keyed but this store was opened without its key: it reads,
        # but it can neither check the chain nor extend it.
        self._needs_key: str | None = None
        # Set when the log is not (or no longer) chained under this key the way this code
        # chains it: it reads, fails verification and refuses writes until `store rekey`.
        self._trouble: str | None = None

    def _where(self) -> str:
        return repr(str(getattr(self, "path", self._engine.url.render_as_string())))

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (projections keep their tables in the same database)."""
        return self._engine

    @property
    def head_path(self) -> Path | None:
        """The file this log's head is kept in (None: none is kept)."""
        return None if self._head_file is None else self._head_file.path

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
        self._check_writable()
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
        if stored:
            self._advance_head(stored[-1])
        return stored

    def _check_writable(self) -> None:
        if self.read_only:
            raise ConfigError(
                f"the event log {self._where()} is read-only (an archived workspace): this "
                "command writes to it; run it on a writable copy (`cp -a`), or give this "
                "process write permission"
            )
        if self._needs_key is not None:
            raise ConfigError(
                f"this log's hash chain is keyed (key {self._needs_key}) and it was opened "
                "without its key: open it through the workspace (or set store.key_file)"
            )
        if self._trouble is not None:
            raise ConfigError(f"nothing written: {self._trouble}; {_REKEY_ADVICE}")

    def _advance_head(self, last: StoredEvent) -> None:
        """Move the head beside the key to ``last`` (after its commit: a head behind the log
        after a crash is harmless, one ahead of it would read as a cut)."""
        if self._head_file is None or self._log_id is None or self._key is None:
            return
        head = Head(CHAIN_KEYED, key_id(self._key), last.seq, last.link or "")
        self._head_file.advance(self._log_id, head)

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
        names = list(dict.fromkeys(stream for stream, _e, _v in batch))
        chain = self._chain_now(conn)
        if chain != self._writes_chain():
            # Another process re-chained the log since this store opened it (or its chain record
            # was changed around the store): appending now would break the chain.
            raise ConfigError(
                f"the log's chain record changed since this store opened it (it says "
                f"{_chain_name(chain)}): open it again; {_REKEY_ADVICE}"
            )
        heads = self._heads(conn, names)
        # seq is assigned here, under the write lock, rather than by the database's sequence:
        # appenders are serialised, so max + 1 is both gap-free and in commit order.
        seq, link = self._last(conn)
        self._check_head(seq)
        now = self._clock()
        stored: list[StoredEvent] = []
        texts: list[str] = []  # each event's canonical JSON: hashed, and stored as is
        key = self._key
        for stream, events, expected in batch:
            version, previous = heads.get(stream, (0, ""))
            if expected is not None and expected != version:
                raise StoreConflict(
                    f"stream {stream!r} is at version {version!r}, the writer expected "
                    f"{expected!r}; read the stream again and retry"
                )
            for type_, schema, data in events:
                seq += 1
                version += 1
                text = canonical_json(data)
                previous = chain_hash(previous, stream, version, type_, schema, text, key)
                link = link_hash(link, seq, previous, key)
                stored.append(
                    StoredEvent(seq, stream, version, type_, schema, data, now, previous, link)
                )
                texts.append(text)
            heads[stream] = (version, previous)
        if stored:
            self._insert_rows(conn, stored, texts)
            last = {e.stream: e for e in stored}
            self._write_heads(conn, list(last.values()))
        return stored

    def _check_head(self, last_seq: int) -> None:
        """Refuse to append to a log whose end was cut (its head beside the key is past it)."""
        if self._head_file is None or self._log_id is None:
            return
        head = self._head_file.get(self._log_id)
        if head is not None and head.seq > last_seq:
            raise ConfigError(
                f"nothing written: the log ends at seq {last_seq} but its head beside the key "
                f"({str(self._head_file.path)!r}) says seq {head.seq}: events were cut off its "
                "end; `playlisteval store verify` shows it; restore the database from a backup"
            )

    def _writes_chain(self) -> str:
        return CHAIN_PLAIN if self._key is None else CHAIN_KEYED

    def _chain_now(self, conn: Connection) -> str | None:
        """``store_meta``'s chain version, read under the write lock."""
        query = select(STORE_META.c.value).where(STORE_META.c.key == "chain")
        return conn.execute(query).scalar_one_or_none()

    def _last(self, conn: Connection) -> tuple[int, str]:
        """The last event's seq and link (0 and "" for an empty log), under the write lock."""
        row = conn.execute(_LAST).first()
        return (0, "") if row is None else (int(row[0]), str(row[1] or ""))

    def _heads(self, conn: Connection, names: Sequence[str]) -> dict[str, tuple[int, str]]:
        """``stream → (version, hash)`` of the streams' last events (absent: a new stream)."""
        query = select(_H.stream, _H.version, _H.hash).where(_H.stream.in_(list(names)))
        return {
            str(name): (int(version), str(hash_)) for name, version, hash_ in conn.execute(query)
        }

    def _write_heads(self, conn: Connection, last: Sequence[StoredEvent]) -> None:
        """Move each stream's head to its last appended event (one upsert per stream)."""
        conn.execute(
            sql_text(_UPSERT_HEAD.format(":stream, :version, :hash, :seq")),
            [
                {"stream": e.stream, "version": e.version, "hash": e.hash, "seq": e.seq}
                for e in last
            ],
        )

    def _insert_rows(self, conn: Connection, stored: list[StoredEvent], texts: list[str]) -> None:
        """Insert the rows in one executemany (``texts``: each event's canonical JSON)."""
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
                    "hash": e.hash,
                    "link": e.link,
                }
                for e in stored
            ],
        )

    # -- the schema, and how the log is chained --------------------------------------------

    def _meta(self, conn: Connection) -> dict[str, str]:
        return dict(conn.execute(select(STORE_META.c.key, STORE_META.c.value)).all())

    def _ensure_schema(self) -> None:
        """Create the tables (adding the ``hash`` and ``link`` columns to a log written before
        them) and learn how the log is chained. Nothing read here changes how rows are verified
        when there is a key: a log that is not under it is only flagged (``_trouble``). A new,
        empty log is put under the key; a scratch log with no key is (re)chained plainly."""
        engine = self._engine
        if not self.read_only:
            SQLModel.metadata.create_all(engine, tables=[EVENTS])
            _META.create_all(engine)
            with engine.connect() as conn:
                columns = {c["name"] for c in inspect(conn).get_columns("events")}
            for column in ("hash", "link"):
                if column not in columns:
                    with engine.begin() as conn:
                        conn.exec_driver_sql(f"ALTER TABLE events ADD COLUMN {column} VARCHAR(64)")
        with engine.connect() as conn:
            meta = self._meta(conn)
            last = self._last_seq(conn)
        self._learn(meta, last)
        if self.read_only or not self._needs_setup(meta, last):
            return
        with self._write_connection() as conn:
            try:
                self._begin_write(conn)
                meta, last = self._meta(conn), self._last_seq(conn)
                if self._needs_setup(meta, last):
                    if self._key is None:
                        self._rechain(conn, None)
                    self._write_meta(conn, meta.get("log_id") or secrets.token_hex(8))
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            meta = self._meta(conn)
        head_file, log_id = self._head_file, meta.get("log_id")
        if head_file and log_id and self._key is not None and head_file.get(log_id) is None:
            head_file.put(log_id, Head(CHAIN_KEYED, key_id(self._key), 0, ""))
        self._learn(meta, last)

    def _last_seq(self, conn: Connection) -> int:
        return int(conn.execute(select(func.coalesce(func.max(_C.seq), 0))).scalar_one())

    def _needs_setup(self, meta: dict[str, str], last: int) -> bool:
        """Whether opening may (re)chain the log: a scratch log with no key whose chain is not
        the current plain one, or an empty log with a key not yet recorded for it (whose head,
        if one is kept, says nothing was ever committed: else it was emptied)."""
        if self._key is None:
            return self._needs_key is None and meta.get("chain") != CHAIN_PLAIN
        if last:
            return False
        if meta.get("chain") == CHAIN_KEYED and meta.get("key_id") == key_id(self._key):
            return not meta.get("log_id")
        head = self._head(meta.get("log_id"))
        return head is None or head.seq == 0

    def _head(self, log_id: str | None) -> Head | None:
        if self._head_file is None or not log_id:
            return None
        return self._head_file.get(log_id)

    def _write_meta(self, conn: Connection, log_id: str) -> None:
        conn.execute(STORE_META.delete().where(STORE_META.c.key.in_(["chain", "key_id", "log_id"])))
        rows = [{"key": "chain", "value": self._writes_chain()}, {"key": "log_id", "value": log_id}]
        if self._key is not None:
            rows.append({"key": "key_id", "value": key_id(self._key)})
        conn.execute(insert(STORE_META), rows)

    def _learn(self, meta: dict[str, str], last: int) -> None:
        """What the chain record says, checked against the key and what is kept beside it."""
        chain, stored_id = meta.get("chain"), meta.get("key_id")
        self._log_id = meta.get("log_id")
        if self._key is None:
            if chain in (CHAIN_KEYED, CHAIN_KEYED_STREAMS):
                self._needs_key = stored_id or "?"
            return
        if chain in (CHAIN_KEYED, CHAIN_KEYED_STREAMS) and stored_id != key_id(self._key):
            raise ConfigError(
                f"this log's hash chain is under key {stored_id}, and the key given is "
                f"{key_id(self._key)}: restore the log key the workspace was written with "
                "(the workspace's log_key file, or the file store.key_file names)"
            )
        self._trouble = None
        if not last and not (chain == CHAIN_KEYED and self._log_id):
            return  # an empty log: set up on open (or refused there if its head says it was cut)
        if chain != CHAIN_KEYED or not self._log_id:
            self._trouble = _not_under_key(chain, last)
        elif self._head_file is not None and self._head(self._log_id) is None:
            self._trouble = (
                f"no head is kept beside the key for this log (log {self._log_id}; "
                f"{str(self._head_file.path)!r} has none): the head file was removed, or the log "
                "came from another key's folder"
            )

    def _rechain(self, conn: Connection, key: bytes | None) -> int:
        """Hash every row in stream order and link every row in seq order under ``key``, and
        write the streams' heads; the number of rows."""
        query = select(_C.seq, _C.stream, _C.version, _C.type, _C.schema_no, _C.data).order_by(
            _C.stream, _C.version
        )
        previous, current, heads = "", None, {}
        hashes: dict[int, str] = {}
        for seq, stream, version, type_, schema, data in conn.execute(query):
            if stream != current:
                previous, current = "", stream
            previous = chain_hash(
                previous, stream, version, type_, schema, canonical_json(data), key
            )
            hashes[seq] = previous
            heads[stream] = {"stream": stream, "version": version, "hash": previous, "seq": seq}
        link, updates = "", []
        for seq in sorted(hashes):
            link = link_hash(link, seq, hashes[seq], key)
            updates.append({"s": seq, "h": hashes[seq], "l": link})
        if updates:
            conn.execute(
                update(EVENTS)
                .where(_C.seq == bindparam("s"))
                .values(hash=bindparam("h"), link=bindparam("l")),
                updates,
            )
        conn.execute(HEADS.delete())
        if heads:
            conn.execute(insert(HEADS), list(heads.values()))
        return len(updates)

    # -- verifying -------------------------------------------------------------------------

    def verify(self, stream_prefix: str | None = None) -> list[ChainProblem]:
        """The problems :meth:`check` finds (of the streams starting with ``stream_prefix``)."""
        streams = None if stream_prefix is None else [stream_prefix + "*"]
        return self.check(streams).problems

    def check(self, streams: Sequence[str] | None = None, *, quick: bool = False) -> Verification:
        """Check the log against its chains, the streams' heads and the head beside the key.

        The whole log is walked in seq order through its global chain (seq 1, 2, 3 …, each link
        the chain's, ending at or past the head kept beside the key); the events of ``streams``
        (names, or prefixes ending in ``*``; None: all) are checked against their stream's chain
        (versions 1, 2, 3 … with seq rising, each hash the chain's, each event decoding into its
        class, its last event its stream head). Problems come sorted by seq, so the first one is
        where the log stops being what was written; a problem with the log's chain record as a
        whole comes last. A check of the whole log that finds nothing moves the checkpoint kept
        beside the key to its last event.

        ``quick`` goes on from that checkpoint (``runs``, ``audit``: answers in the time the
        events since take): the event at the checkpoint must still be the one verified there,
        and every event after it is checked as above. What it cannot see — an event before the
        checkpoint edited with its hashes left alone, a stream untouched since cut short — only
        the full check (``store verify``) finds."""
        if self._needs_key is not None:
            raise ConfigError(
                f"this log's hash chain is keyed (key {self._needs_key}) and it was opened "
                "without its key, so it cannot be checked: open it through the workspace (or "
                "set store.key_file)"
            )
        head = self._head(self._log_id)
        since, since_link = 0, ""
        if quick and head is not None and self._trouble is None:
            since, since_link = head.verified_seq, head.verified_link
        with self._engine.connect() as conn:
            # Everything is judged up to the last event the global chain was walked to: a
            # writer appending meanwhile adds events past it, which the next check takes up
            # (the checkpoint is that event's, never a later seq's with this one's link).
            problems, last, last_link = self._link_pass(conn, head, since, since_link)
            count, stream_problems = self._stream_pass(conn, streams, since, last)
        problems += stream_problems
        problems.sort(key=lambda p: (p.seq, p.stream))
        if self._trouble is not None:
            problems.append(ChainProblem(0, LOG_WIDE, 0, self._trouble))
        whole = streams is None
        if not problems and whole and last and self._head_file and self._log_id:
            self._checkpoint(last, last_link)
        return Verification(count, last, problems, since)

    @staticmethod
    def _head_moved_on(conn: Connection, stream: str, upto: int) -> bool:
        """Whether ``stream`` has a head row past ``upto`` (a writer appended after the walk)."""
        found = conn.execute(
            select(_H.seq).where(_H.stream == stream, _H.seq > upto)
        ).scalar_one_or_none()
        return found is not None

    def _checkpoint(self, seq: int, link: str) -> None:
        """Move the checkpoint beside the key, where this process may: a reading command on an
        archived workspace (or a key folder it may not write) checks from the old one."""
        if self.read_only or self._head_file is None or self._log_id is None:
            return
        with contextlib.suppress(ConfigError):
            self._head_file.checkpoint(self._log_id, seq, link)

    def _link_pass(
        self, conn: Connection, head: Head | None, since: int = 0, since_link: str = ""
    ) -> tuple[list[ChainProblem], int, str]:
        """The global chain's problems (from the checkpoint ``since``, whose link was
        ``since_link``, when one is given), and the seq and link of the last event walked."""
        walk = LinkWalk(self._key, head)
        problems: list[ChainProblem] = []
        if since:
            stored = conn.execute(select(_C.link).where(_C.seq == since)).scalar_one_or_none()
            if stored != since_link:
                problems.append(
                    ChainProblem(
                        since,
                        LOG_WIDE,
                        0,
                        "the event at the last verified checkpoint is not the one verified "
                        "there: the log was rewritten since (`store verify` checks it all)",
                    )
                )
            walk.seq, walk.link = since, since_link
            if head is not None and head.seq <= since:
                walk.at_head = head.link  # verified at the checkpoint, at or before it
        query = (
            select(_C.seq, _C.stream, _C.version, _C.hash, _C.link)
            .where(_C.seq > since)
            .order_by(_C.seq)
        )
        for seq, stream, version, hash_, link in conn.execution_options(yield_per=5000).execute(
            query
        ):
            if not walk.broken:
                problems += walk.step(seq, stream, version, hash_, link)
            else:
                walk.seq = seq
        return problems + walk.finish(), walk.seq, walk.link

    def _stream_pass(
        self, conn: Connection, streams: Sequence[str] | None, since: int, upto: int
    ) -> tuple[int, list[ChainProblem]]:
        """Each stream's chain over the events after ``since`` up to ``upto`` (the last one the
        global chain was walked to), each stream's end against its head where that head is
        not past ``upto`` (one that is moved on after the walk: its events come next time)."""
        query = select(*_COLUMNS).where(_C.seq > since, _C.seq <= upto).order_by(_C.seq)
        heads_query = select(_H.stream, _H.version, _H.hash, _H.seq)
        if streams is not None:
            query = query.where(self._stream_clause(streams))
            heads_query = heads_query.where(self._stream_clause(streams, _H.stream))
        walks: dict[str, StreamWalk] = {}
        problems: list[ChainProblem] = []
        count = 0
        for row in conn.execution_options(yield_per=2000).execute(query):
            stored = _stored(row)
            count += 1
            walk = walks.get(stored.stream)
            if walk is None:
                walk = walks[stored.stream] = StreamWalk(stored.stream, self._key)
                if since:  # go on from the stream's last event at the checkpoint
                    before = conn.execute(
                        select(_C.version, _C.hash, _C.seq)
                        .where(_C.stream == stored.stream, _C.seq <= since)
                        .order_by(_C.version.desc())
                        .limit(1)
                    ).first()
                    if before is not None:
                        walk.version, walk.hash, walk.seq = (
                            int(before[0]),
                            str(before[1] or ""),
                            int(before[2]),
                        )
            problems += walk.step(
                stored.seq,
                stored.version,
                stored.type,
                stored.schema,
                canonical_json(stored.data),
                stored.hash,
            )
            try:
                decode_known(stored)
            except Exception as exc:  # pydantic's ValidationError, or an unknown type
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                problems.append(
                    ChainProblem(
                        stored.seq,
                        stored.stream,
                        stored.version,
                        f"it does not decode as a {stored.type!r} event: {first}",
                    )
                )
        # Read after the rows: a head is never behind the events walked, and one past ``upto``
        # belongs to a stream a writer has moved on since (not judged now).
        heads = {
            str(r[0]): (int(r[1]), str(r[2]), int(r[3]))
            for r in conn.execute(heads_query)
            if int(r[3]) <= upto
        }
        for name, walk in walks.items():
            if name in heads or not self._head_moved_on(conn, name, upto):
                problems += walk.finish(heads.get(name))
        for stream, (version, _hash, seq) in heads.items():
            if stream not in walks and not since:  # quick: streams untouched since not read
                problems.append(
                    ChainProblem(
                        seq, stream, version, f"the stream's {version} events are all missing"
                    )
                )
        return count, problems

    # -- bringing a log under the key -------------------------------------------------------

    def rekey(
        self, *, old_key: bytes | None = None, unverified: bool = False, command: str = ""
    ) -> Rekeyed:
        """Check the log as it is chained now and chain it under this store's key, recording a
        ``LogRekeyed`` event (``playlisteval store rekey``).

        The rows must check out under one of: this key, ``old_key`` (a key the log was written
        with before), or plain SHA-256 (a scratch log); their global chain too where every row
        has one, and the log must reach the head kept beside the key. A log whose rows carry no
        chain at all (written before chains existed) is chained as it stands only when
        ``unverified``. When nothing checks out, nothing is changed and the problems found
        under the closest chain come back."""
        from store.events import LogRekeyed

        if self._key is None or self.read_only:
            raise ConfigError(
                "store rekey chains the log under the workspace's key: run it on a writable "
                "workspace whose log key is readable"
            )
        key = self._key
        with self._write_connection() as conn:
            try:
                self._begin_write(conn)
                meta = self._meta(conn)
                log_id = meta.get("log_id") or secrets.token_hex(8)
                rows = [_stored(row) for row in conn.execute(select(*_COLUMNS).order_by(_C.seq))]
                last = rows[-1].seq if rows else 0
                head = self._head(meta.get("log_id"))
                cut = head is not None and head.seq > last
                # A log that lost its chain record while the key already keeps heads was under
                # this key: only this key may vouch for it (a plain chain would bless a rewrite).
                orphan = not meta.get("log_id") and self._head_file and self._head_file.read()
                was, problems = _how_chained(rows, key, old_key, only_this_key=bool(orphan))
                if cut and head is not None:
                    problems.insert(
                        0,
                        ChainProblem(
                            last + 1,
                            LOG_WIDE,
                            0,
                            f"the log ends at seq {last} but its head beside the key says seq "
                            f"{head.seq}: events were cut off its end; restore the database "
                            "from a backup",
                        ),
                    )
                if problems and (cut or not unverified):
                    conn.rollback()
                    return Rekeyed(was, len(rows), problems, key_id(key))
                if problems:
                    was = f"unverified ({was}; {len(problems)} problem(s) accepted)"
                self._rechain(conn, key)
                self._write_meta(conn, log_id)
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        self._needs_key, self._trouble, self._log_id = None, None, log_id
        if self._head_file is not None:
            seq = rows[-1].seq if rows else 0
            link = self._link_at(seq) if seq else ""
            self._head_file.put(log_id, Head(CHAIN_KEYED, key_id(key), seq, link))
        recorded = self.append(
            REKEY_STREAM,
            [
                LogRekeyed(
                    was=was,
                    checked="unverified" not in was,
                    events=len(rows),
                    key_id=key_id(key),
                    command=command,
                )
            ],
        )
        return Rekeyed(was, len(rows), [], key_id(key), recorded[-1].seq)

    def _link_at(self, seq: int) -> str:
        with self._engine.connect() as conn:
            return str(conn.execute(select(_C.link).where(_C.seq == seq)).scalar_one() or "")

    # -- anchoring -------------------------------------------------------------------------

    def anchor(self, streams: Sequence[str], through_seq: int | None = None) -> Anchor:
        """The :class:`Anchor` of ``streams`` (names, or prefixes ending in ``*``) as the log
        holds them now (or up to ``through_seq``)."""
        if through_seq is None:
            through_seq = self.last_seq()
        count, digest = self._digest(streams, through_seq)
        return Anchor(tuple(streams), through_seq, count, digest)

    def check_anchor(self, anchor: Anchor, *, allow_later: bool = False) -> list[str]:
        """What in this log differs from ``anchor`` (``[]``: its streams are as anchored).

        Events appended to the anchored streams after it (seq past ``through_seq``) are a
        difference too — the log is no longer what was anchored, whether a run was resumed
        since or a forger appended — unless ``allow_later``."""
        out: list[str] = []
        count, digest = self._digest(anchor.streams, anchor.through_seq)
        where = f"the log's {', '.join(anchor.streams)} through seq {anchor.through_seq}"
        if digest != anchor.digest:
            if count != anchor.events:
                what = f"{count} events where the anchor counted {anchor.events}"
            else:
                what = f"the same number of events ({count}), but their content differs"
            out.append(
                f"{where} hold {what}: they digest to {digest[:16]}, the anchor says "
                f"{anchor.digest[:16]}; the log was rewritten after the anchor was taken (or "
                "it is another workspace's log)"
            )
        if not allow_later:
            later = self._later(anchor.streams, anchor.through_seq)
            if later:
                out.append(
                    f"{later} event(s) were added to {', '.join(anchor.streams)} after the "
                    f"anchor (past seq {anchor.through_seq}): the log moved on since it was "
                    "taken (a run resumed since: take a new anchor) or was appended to"
                )
        return out

    def _stream_clause(self, streams: Sequence[str], column: Any = _C.stream) -> Any:
        return or_(
            *(
                self._prefix_clause(name[:-1], column) if name.endswith("*") else column == name
                for name in streams
            )
        )

    def _prefix_clause(self, prefix: str, column: Any = _C.stream) -> Any:
        """``column`` starts with ``prefix``. On SQLite also as a range, which its index on
        (stream, version) serves: a LIKE cannot use it (SQLite's LIKE ignores case, the index
        does not), so a run's streams were read by scanning the whole log."""
        starts = column.startswith(prefix, autoescape=True)
        upper = _prefix_end(prefix)
        if self._engine.dialect.name != "sqlite" or upper is None:
            # PostgreSQL's locale collations do not order strings by code point: a range
            # there could leave out a stream that starts with the prefix.
            return starts
        return and_(column >= prefix, column < upper, starts)

    def _later(self, streams: Sequence[str], through_seq: int) -> int:
        query = select(func.count()).where(self._stream_clause(streams), _C.seq > through_seq)
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def _digest(self, streams: Sequence[str], through_seq: int) -> tuple[int, str]:
        # On SQLite by the streams' range, not by seq from the log's start (see read_all).
        seq_column = _C.seq + 0 if self._engine.dialect.name == "sqlite" else _C.seq
        query = (
            select(_C.stream, _C.version, _C.type, _C.schema_no, _C.data)
            .where(self._stream_clause(streams), seq_column <= through_seq)
            .order_by(_C.stream, _C.version)
        )
        digest, count = hashlib.sha256(), 0
        with self._engine.connect() as conn:
            for stream, version, type_, schema, data in conn.execution_options(
                yield_per=2000
            ).execute(query):
                digest.update(
                    f"{stream}\n{version}\n{type_}\n{schema}\n{canonical_json(data)}\n".encode()
                )
                count += 1
        return count, digest.hexdigest()

    # -- reading ---------------------------------------------------------------------------

    def read_stream(self, stream: str, after_version: int = 0) -> list[StoredEvent]:
        """The events of ``stream`` with a version above ``after_version``, in order."""
        query = (
            select(*_COLUMNS)
            .where(_C.stream == stream, _C.version > after_version)
            .order_by(_C.version)
        )
        return self._fetch(query)

    def _fetch(self, query: Select[Any]) -> list[StoredEvent]:
        """The events a query of :data:`_COLUMNS` reads (a backend may read them faster)."""
        with self._engine.connect() as conn:
            return [_stored(row) for row in conn.execute(query)]

    def read_all(
        self,
        after_seq: int = 0,
        limit: int | None = None,
        *,
        stream_prefix: str | None = None,
        types: Sequence[str] | None = None,
        omit: Sequence[str] = (),
    ) -> list[StoredEvent]:
        """Events after ``after_seq`` in seq order, optionally of some streams or types.

        ``omit`` names top-level keys of each event's data left out by the database (a fold
        that reads only some fields, such as the ledger's, need not read every model response):
        such an event no longer decodes into its class, and its ``hash`` is not its data's."""
        seq_column: Any = _C.seq
        type_column: Any = _C.type
        if stream_prefix and self._engine.dialect.name == "sqlite":
            # SQLite keeps no statistics: it would walk the whole log by seq, or every call of
            # the log by the type index, over the streams' range of (stream, version). An
            # expression is no indexed column, so it reads the range and sorts what it found.
            seq_column, type_column = _C.seq + 0, _C.type.concat("")
        query = select(*self._columns(omit)).where(seq_column > after_seq)
        if stream_prefix:
            query = query.where(self._prefix_clause(stream_prefix))
        if types is not None:
            query = query.where(type_column.in_(list(types)))
        query = query.order_by(_C.seq)
        if limit is not None:
            query = query.limit(limit)
        return self._fetch(query)

    def _columns(self, omit: Sequence[str]) -> tuple[Any, ...]:
        """The columns of a read, the data without the keys ``omit`` names."""
        if not omit:
            return _COLUMNS
        for key in omit:
            if not _KEY_NAME.match(key):
                raise ValueError(f"omit names data keys (letters, digits, _), not {key!r}")
        if self._engine.dialect.name == "sqlite":
            data: Any = func.json_remove(_C.data, *(f"$.{key}" for key in omit))
        else:  # PostgreSQL's JSONB: ``data - key``
            data = _C.data
            for key in omit:
                # The key as text: left to infer, SQLAlchemy binds it as the column's JSON type.
                data = data.op("-")(literal(key, String()))
        data = type_coerce(data, _C.data.type).label("data")
        return (*_COLUMNS[:5], data, *_COLUMNS[6:])

    def stream_version(self, stream: str) -> int:
        """The stream's last version; 0 when it has no events."""
        query = select(func.coalesce(func.max(_C.version), 0)).where(_C.stream == stream)
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def streams(self, prefix: str = "") -> list[str]:
        """Names of the streams that start with ``prefix``, sorted."""
        query = select(_C.stream).distinct()
        if prefix:
            query = query.where(self._prefix_clause(prefix))
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

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], datetime] = _utc_now,
        key: bytes | None = None,
        key_file: Path | None = None,
    ) -> None:
        """``key`` chains the log (its head kept beside ``key_file``, the file it was read from);
        without one, the workspace's key beside the database (its :data:`LOG_KEY_FILE`) when
        there is one, else plain SHA-256 (a scratch log)."""
        file = Path(path).expanduser()
        # An archived workspace (read-only file or folder) is read as it is: SQLite's immutable
        # mode needs no -wal or -shm file, which a read-only folder could not hold; appending
        # then says why it cannot.
        self.read_only = read_only(file)
        if not self.read_only:
            make_folder(file.parent, f"the folder for the event store {str(file)!r}")
        # Connections move between threads through the pool, never used by two at once.
        if self.read_only:
            engine = refuse_writes(
                create_engine(immutable_url(file), connect_args={"check_same_thread": False}),
                f"the event log {str(file)!r}",
            )
        else:
            engine = create_engine(f"sqlite:///{file}", connect_args={"check_same_thread": False})
            event.listen(engine, "connect", _sqlite_pragmas)
        if key is None:
            key = read_log_key(file.parent / LOG_KEY_FILE)
            key_file = file.parent / LOG_KEY_FILE
        super().__init__(engine, clock=clock, key=key, key_file=key_file)
        self.path = file
        # Threads of one process queue here instead of spinning in SQLite's busy handler (other
        # processes still wait on the database lock, busy_timeout). The lock also lets one
        # connection serve every append, which saves a pool checkout and reset per append.
        self._lock = threading.Lock()
        self._writer: Connection | None = None
        self._insert_sql = str(_INSERT.compile(dialect=engine.dialect, column_keys=_KEYS))
        try:
            self._ensure_schema()
        except OperationalError as exc:
            self.close()
            if not writable(file):
                raise ConfigError(
                    f"cannot open the event store at {str(file)!r}: {exc.orig}; this process may "
                    "not write its folder (or the file): check its permissions, or work on a "
                    "writable copy"
                ) from exc
            raise ConfigError(
                f"cannot open the event store at {str(file)!r}: {exc.orig}; "
                "check the path is a writable SQLite file"
            ) from exc
        except DatabaseError as exc:  # a corrupt or truncated file, or not SQLite at all
            self.close()
            raise unreadable_database(file, exc.orig) from exc

    def _fetch(self, query: Select[Any]) -> list[StoredEvent]:
        # Reads too go to sqlite3 directly: SQLAlchemy's result processing (a regex per
        # timestamp, a row object per event) cost more than SQLite's reading the rows. The
        # parameters of these reads are strings and integers, which sqlite3 takes as they are.
        compiled = query.compile(
            dialect=self._engine.dialect, compile_kwargs={"render_postcompile": True}
        )
        params = compiled.params
        args = [params[name] for name in compiled.positiontup or ()]
        with self._engine.connect() as conn:
            rows = self._raw(conn).execute(str(compiled), args).fetchall()
        return [_stored_text(row) for row in rows]

    # Appends talk to sqlite3 directly, inside the transaction SQLAlchemy opened: each
    # statement through SQLAlchemy's execution context costs more than the statement itself,
    # and an append is five of them (bench/events.py measures the store against raw sqlite3).

    @staticmethod
    def _raw(conn: Connection) -> Any:
        return conn.connection.driver_connection

    def _last(self, conn: Connection) -> tuple[int, str]:
        row = self._raw(conn).execute(_SQLITE_LAST).fetchone()
        return (0, "") if row is None else (int(row[0]), str(row[1] or ""))

    def _chain_now(self, conn: Connection) -> str | None:
        row = self._raw(conn).execute(_SQLITE_CHAIN).fetchone()
        return None if row is None else str(row[0])

    def _insert_rows(self, conn: Connection, stored: list[StoredEvent], texts: list[str]) -> None:
        # Plain tuples in the exact text form SQLAlchemy's JSON and DateTime types store on
        # SQLite (and read back): no per-row bind processing.
        when = stored[0].recorded_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        self._raw(conn).executemany(
            self._insert_sql,
            [
                (e.seq, e.stream, e.version, e.type, e.schema, text, when, e.hash, e.link)
                for e, text in zip(stored, texts, strict=True)
            ],
        )

    def _heads(self, conn: Connection, names: Sequence[str]) -> dict[str, tuple[int, str]]:
        raw = self._raw(conn)
        if len(names) == 1:
            rows = raw.execute(_SQLITE_HEAD, (names[0],)).fetchall()
        else:
            marks = ", ".join("?" * len(names))
            rows = raw.execute(_SQLITE_HEADS.format(marks), tuple(names)).fetchall()
        return {str(name): (int(version), str(hash_)) for name, version, hash_ in rows}

    def _write_heads(self, conn: Connection, last: Sequence[StoredEvent]) -> None:
        self._raw(conn).executemany(
            _UPSERT_HEAD.format("?, ?, ?, ?"), [(e.stream, e.version, e.hash, e.seq) for e in last]
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
        key: bytes | None = None,
        key_file: Path | None = None,
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
            super().__init__(engine, clock=clock, key=key, key_file=key_file)
            self._ensure_schema()
        except OperationalError as exc:
            engine.dispose()
            raise ConfigError(
                f"cannot reach PostgreSQL at {engine.url.render_as_string()!r}: {exc.orig}; "
                f"start it with `{PG_START_HINT}`"
            ) from exc
        self.schema = schema

    def _begin_write(self, conn: Connection) -> None:
        # Sequence values (and rows) of concurrent transactions can commit out of order, so a
        # follower reading `seq > last` could pass over a seq whose transaction commits later.
        # EXCLUSIVE mode blocks every other appender (but not plain readers) until commit, so
        # seq order is commit order — what pyeventsourcing does for the same reason.
        conn.exec_driver_sql("LOCK TABLE events IN EXCLUSIVE MODE")


@contextmanager
def scratch_event_store(purpose: str) -> Iterator[EventStore]:
    """A throwaway SQLite event store in a temporary folder (a replay's, a rehearsal's),
    closed and removed when the block ends; ``purpose`` names the folder."""
    with tempfile.TemporaryDirectory(prefix=f"playlisteval-{purpose}-") as folder:
        store = open_event_store(Path(folder) / f"{purpose}.db")
        try:
            yield store
        finally:
            store.close()


def open_event_store(
    url_or_path: str | Path,
    *,
    schema: str | None = None,
    key: bytes | None = None,
    key_file: Path | None = None,
) -> EventStore:
    """Open (and create) the event store, its chain under ``key`` (read from ``key_file``,
    beside which its head is kept: see :mod:`store.chain`).

    A filesystem path or ``sqlite:///`` URL gives SQLite; ``postgresql://`` or
    ``postgresql+psycopg://`` gives PostgreSQL, inside ``schema`` when one is named.
    """
    text = str(url_or_path)
    if isinstance(url_or_path, Path) or "://" not in text:
        return SqliteEventStore(text, key=key, key_file=key_file)
    if text.startswith("sqlite:///"):
        path = text[len("sqlite:///") :]
        if not path or path == ":memory:":
            raise ConfigError(
                f"the event store needs a SQLite file, not {text!r}; give a path to a .db file"
            )
        return SqliteEventStore(path, key=key, key_file=key_file)
    if text.startswith(("postgresql://", "postgresql+psycopg://")):
        return PostgresEventStore(text, schema=schema, key=key, key_file=key_file)
    raise ConfigError(
        f"unknown event store {text!r}; give a file path, sqlite:///PATH or "
        "postgresql+psycopg://USER@HOST:PORT/DB"
    )
