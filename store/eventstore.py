"""The append-only event store: one ``events`` table, one abstract recorder, two backends.

A stored event is ``(seq, stream, version, type, schema, data, recorded_at)``. ``seq`` is the
global position and follows commit order; ``version`` counts 1, 2, 3 … within a stream, and
UNIQUE(stream, version) is the optimistic-concurrency guard. An append is all or nothing, and so
is a batch over several streams.

SQLite (WAL) is the embedded default and may share the workspace's ``playlisteval.db`` with the
catalogue; PostgreSQL holds the same schema when many workers share one log. Writes go through
SQLAlchemy Core ``executemany`` (DESIGN.md measured the ORM about ten times slower).

**Tamper evidence.** Every event carries ``hash``, a chain over its stream:
``HMAC-SHA256(key, previous hash, stream, version, type, schema, canonical JSON of data)``. The
key lives outside the database (:data:`LOG_KEY_FILE` in the workspace, or the file
``store.key_file`` names), so whoever can write the database but not read the key cannot redo
the chain after an edit. The table ``stream_heads`` holds each stream's last version and hash,
written in the same transaction as the events, so cutting events off a stream's end shows as
well as editing, inserting, deleting or reordering them in the middle. :meth:`EventStore.verify`
checks every stream against both (``playlisteval store verify``). A store opened with no key
(a scratch log, a test) chains with plain SHA-256; a plain log opened with a key is re-chained
under it once (and a log written before any chain existed gets its hashes): evidence from then
on. ``store_meta`` records which key (its fingerprint, never the key) the chain is under, so a
wrong key file is named rather than read as tampering.

**Anchors.** Someone holding both the database and the key can still rewrite and re-chain. An
:class:`Anchor` is a digest of some streams' contents up to a seq, taken when a run ends, a
benchmark is exported or an evaluation finishes, and published with what rests on them (the
export's card, the report). :meth:`EventStore.check_anchor` recomputes it from any copy of the
log (no key needed: it is plain SHA-256 over the events themselves), so a rewrite after the
anchor left the log shows, whoever made it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import orjson
from pydantic import ValidationError
from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    bindparam,
    event,
    func,
    insert,
    inspect,
    or_,
    select,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError
from sqlmodel import Field, SQLModel, create_engine

from store.annotation_events import ANNOTATION_TYPES, decode_annotation
from store.errors import ConfigError, StoreConflict, UndecodableEvent, unreadable_database
from store.events import AnyEvent, Event, decode_event, encode_event
from store.sqlite import immutable_url, read_only, refuse_writes, writable

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
    # The stream's hash chain up to and including this event (see the module docstring).
    hash: str | None = Field(default=None, sa_column=Column("hash", String(64), nullable=True))


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
# store_meta["chain"] once every row has its hash and every stream its head: "1" plain SHA-256,
# "2" keyed (store_meta["key_id"] then names the key's fingerprint).
CHAIN_VERSION = "1"
KEYED_CHAIN_VERSION = "2"
LOG_KEY_FILE = "log_key"  # the workspace's chain key, beside its database (owner-only)
# Statements built once: SQLAlchemy then only looks them up in its compiled cache per append.
_INSERT = insert(EVENTS)
_KEYS = ["seq", "stream", "version", "type", "schema_no", "data", "recorded_at", "hash"]
_MAX_SEQ = select(func.coalesce(func.max(_C.seq), 0))
_COLUMNS = (
    _C.seq,
    _C.stream,
    _C.version,
    _C.type,
    _C.schema_no,
    _C.data,
    _C.recorded_at,
    _C.hash,
)
_UPSERT_HEAD = (
    "INSERT INTO stream_heads (stream, version, hash, seq) VALUES ({}) "
    "ON CONFLICT (stream) DO UPDATE SET version = excluded.version, hash = excluded.hash, "
    "seq = excluded.seq"
)


_SQLITE_MAX_SEQ = "SELECT coalesce(max(seq), 0) FROM events"
_SQLITE_CHAIN = "SELECT value FROM store_meta WHERE key = 'chain'"
_SQLITE_HEAD = "SELECT stream, version, hash FROM stream_heads WHERE stream = ?"
_SQLITE_HEADS = "SELECT stream, version, hash FROM stream_heads WHERE stream IN ({})"


def canonical_json(data: Any) -> str:
    """The one text form of an event's data that its hash is taken over (and that SQLite
    stores): sorted keys, compact, UTF-8 — PostgreSQL's JSONB reorders keys, this does not
    care. orjson writes it several times faster than ``json.dumps(sort_keys=True)``, on every
    append; a value orjson refuses (an integer past 64 bits) falls back to the standard
    library, the same way on every read."""
    try:
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except TypeError:
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(
    previous: str,
    stream: str,
    version: int,
    type_: str,
    schema: int,
    data: str,
    key: bytes | None = None,
) -> str:
    """The hash of one event in its stream's chain (``previous`` is "" for version 1;
    ``data`` is its :func:`canonical_json`): HMAC-SHA256 under ``key``, plain SHA-256 without."""
    blob = f"{previous}\n{stream}\n{version}\n{type_}\n{schema}\n{data}".encode()
    if key is None:
        return hashlib.sha256(blob).hexdigest()
    keyed = _keyed(key).copy()  # the key's pads hashed once, not per event
    keyed.update(blob)
    return keyed.hexdigest()


@functools.lru_cache(maxsize=8)
def _keyed(key: bytes) -> hmac.HMAC:
    return hmac.new(key, digestmod=hashlib.sha256)


def key_id(key: bytes) -> str:
    """A key's fingerprint, safe to store and print (it does not reveal the key)."""
    return hmac.new(key, b"playlisteval log key id", hashlib.sha256).hexdigest()[:16]


def read_log_key(path: Path, *, create: bool = False) -> bytes | None:
    """The chain key in ``path`` (None when absent and not ``create``); made once, readable by
    its owner only, when ``create``. A key too short to be one is refused, not used."""
    path = Path(path).expanduser()
    if create and not path.exists():
        # Written whole under a private name, then linked into place: a process starting at the
        # same moment reads either no key or the whole one, never half of it.
        staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(secrets.token_hex(32).encode())
            try:
                os.link(staged, path)
            except FileExistsError:
                pass  # another process made it first: read theirs
            finally:
                staged.unlink(missing_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the log key {str(path)!r}: {exc}") from exc
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the log key {str(path)!r}: {exc}") from exc
    if len(key) < 32:
        raise ConfigError(
            f"{str(path)!r} holds too short a log key ({len(key)} bytes); restore the key the "
            "log was written with from a backup"
        )
    return key


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

    def event(self) -> AnyEvent:
        """The typed event, upcast to the current schema; :class:`UndecodableEvent` (naming
        where it is) when the stored row is no event this code knows."""
        try:
            return decode_event(self.type, self.schema, self.data)
        except ValueError as exc:  # pydantic's ValidationError, or an unknown schema
            if isinstance(exc, ValidationError) and exc.errors():
                error = exc.errors()[0]
                where = ".".join(str(part) for part in error["loc"])
                why = f"{where}: {error['msg']}" if where else error["msg"]
                if error["type"] == "union_tag_invalid":
                    why = f"no event type {self.type!r} is known"
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
        hash=row[7],
    )


def _check_stream(stream: str, expected_version: int | None) -> None:
    if not isinstance(stream, str) or not stream:
        raise ValueError(f"a stream name must be a non-empty string, got {stream!r}")
    if expected_version is not None and expected_version < 0:
        raise ValueError(
            f"expected_version for stream {stream!r} must be 0 (new stream) or more, "
            f"got {expected_version!r}"
        )


@dataclass(frozen=True)
class ChainProblem:
    """One place where the log is not what was written: the seq (and stream, version) of the
    first event that does not check out, and what is wrong there."""

    seq: int
    stream: str
    version: int
    what: str

    def __str__(self) -> str:
        return f"seq {self.seq} ({self.stream!r} v{self.version}): {self.what}"


class _ChainWalk:
    """One stream's events checked in version order against its chain and head."""

    def __init__(self, stream: str, key: bytes | None) -> None:
        self.stream = stream
        self.key = key
        self.version = 0
        self.seq = 0
        self.hash = ""
        self.broken = False

    def step(self, stored: StoredEvent) -> list[ChainProblem]:
        out: list[ChainProblem] = []

        def problem(what: str) -> None:
            out.append(ChainProblem(stored.seq, stored.stream, stored.version, what))

        if stored.version != self.version + 1:
            missing = stored.version - self.version - 1
            problem(
                f"versions jump from {self.version} to {stored.version}: "
                + (f"{missing} event(s) deleted before it" if missing > 0 else "reordered")
            )
        if stored.seq <= self.seq:
            problem(f"seq {stored.seq} is not after the previous event's seq {self.seq}")
        expected = chain_hash(
            self.hash,
            stored.stream,
            stored.version,
            stored.type,
            stored.schema,
            canonical_json(stored.data),
            self.key,
        )
        if stored.hash is None:
            problem("it has no hash: written around the store (inserted, or its hash removed)")
        elif stored.hash != expected and not self.broken:
            problem(
                "its content does not match its hash chain: it (or an event before it in the "
                "stream) was edited, inserted, deleted or reordered"
            )
            self.broken = True
        try:
            decode_known(stored)
        except Exception as exc:  # pydantic's ValidationError, or an unknown type
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            problem(f"it does not decode as a {stored.type!r} event: {first}")
        self.version, self.seq = stored.version, stored.seq
        self.hash = stored.hash or expected
        return out

    def finish(self, head: tuple[int, str, int] | None) -> list[ChainProblem]:
        where = (self.seq, self.stream, self.version)
        if head is None:
            return [ChainProblem(*where, "the stream has no head: written around the store")]
        version, hash_, seq = head
        if version > self.version:
            return [
                ChainProblem(
                    *where,
                    f"the stream ends at version {self.version} but its head says {version}: "
                    f"{version - self.version} event(s) cut off its end",
                )
            ]
        if version < self.version or hash_ != self.hash:
            return [
                ChainProblem(
                    seq if version <= self.version else self.seq,
                    self.stream,
                    version,
                    f"events past its head (version {version}) or a head that does not match: "
                    "events were added or changed at the stream's end around the store",
                )
            ]
        return []


ANCHOR_FORMAT = 1


@dataclass(frozen=True)
class Anchor:
    """A digest of some streams' events up to a seq (see the module docstring).

    ``streams`` are stream names, or prefixes when they end in ``*``; the digest is SHA-256
    over every event of those streams with seq up to ``through_seq``, in stream and version
    order, each as its stream, version, type, schema and canonical JSON — the content, not the
    keyed chain, so checking it needs no key."""

    streams: tuple[str, ...]
    through_seq: int
    events: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        """The anchor as published (benchmark.json, the report, an anchor file)."""
        return {
            "format": ANCHOR_FORMAT,
            "streams": list(self.streams),
            "through_seq": self.through_seq,
            "events": self.events,
            "digest": self.digest,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "the anchor") -> Anchor:
        """An anchor :meth:`to_json` wrote; :class:`ConfigError` naming ``where`` otherwise."""
        try:
            if data.get("format") != ANCHOR_FORMAT:
                raise ValueError(f"format {data.get('format')!r} is not {ANCHOR_FORMAT}")
            streams = tuple(str(name) for name in data["streams"])
            through, events, digest = data["through_seq"], data["events"], data["digest"]
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (through, events)):
                raise ValueError("through_seq and events must be integers")
            # A log position is a database integer (64-bit): a larger one is no anchor of it.
            if not all(0 <= v < 2**63 for v in (through, events)):
                raise ValueError("through_seq and events must be between 0 and 2**63 - 1")
            if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
                raise ValueError("digest must be 64 hex digits")
            if not streams or not all(streams):
                raise ValueError("it names no stream")
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where} is not a PlaylistEval anchor: {exc}") from exc
        return cls(streams, through, events, digest)

    def __str__(self) -> str:
        return f"{self.digest[:16]} ({self.events} events through seq {self.through_seq})"


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
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._key = key
        self.read_only: bool = getattr(self, "read_only", False)
        # Set when the log's chain is keyed but this store was opened without its key: it reads,
        # but it can neither check the chain nor extend it.
        self._needs_key: str | None = None

    def _where(self) -> str:
        return repr(str(getattr(self, "path", self._engine.url.render_as_string())))

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
        names = list(dict.fromkeys(stream for stream, _e, _v in batch))
        chain = self._chain_now(conn)
        if chain != self._writes_chain():
            # Another process re-chained the log under a key since this store opened it (or
            # the other way round): appending now would break the chain where nothing changed.
            raise ConfigError(
                f"the log's hash chain changed since this store opened it (it is now "
                f"{'keyed' if chain == KEYED_CHAIN_VERSION else 'plain'}): open it again"
                + (" with the log key" if chain == KEYED_CHAIN_VERSION else "")
            )
        heads = self._heads(conn, names)
        # seq is assigned here, under the write lock, rather than by the database's sequence:
        # appenders are serialised, so max + 1 is both gap-free and in commit order.
        seq = self._max_seq(conn)
        now = self._clock()
        stored: list[StoredEvent] = []
        texts: list[str] = []  # each event's canonical JSON: hashed, and stored as is
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
                previous = chain_hash(previous, stream, version, type_, schema, text, self._key)
                stored.append(StoredEvent(seq, stream, version, type_, schema, data, now, previous))
                texts.append(text)
            heads[stream] = (version, previous)
        if stored:
            self._insert_rows(conn, stored, texts)
            last = {e.stream: e for e in stored}
            self._write_heads(conn, list(last.values()))
        return stored

    def _writes_chain(self) -> str:
        return CHAIN_VERSION if self._key is None else KEYED_CHAIN_VERSION

    def _chain_now(self, conn: Connection) -> str | None:
        """``store_meta``'s chain version, read under the write lock."""
        query = select(STORE_META.c.value).where(STORE_META.c.key == "chain")
        return conn.execute(query).scalar_one_or_none()

    def _max_seq(self, conn: Connection) -> int:
        """The highest seq written (0 for an empty log), under the write lock."""
        return int(conn.execute(_MAX_SEQ).scalar_one())

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
                }
                for e in stored
            ],
        )

    # -- the schema and its migration ------------------------------------------------------

    def _ensure_schema(self) -> None:
        """Create the tables, and bring a log written before the hash chain up to it: add the
        ``hash`` column, hash every row in stream order, write every stream's head (once, under
        the write lock, so two processes opening an old log migrate it once)."""
        engine = self._engine
        if self.read_only:
            with engine.connect() as conn:
                meta = dict(conn.execute(select(STORE_META.c.key, STORE_META.c.value)).all())
            if meta.get("chain") != KEYED_CHAIN_VERSION:
                self._key = None  # a plainly chained log is checked as it was chained
            self._chain_current(meta)
            return
        SQLModel.metadata.create_all(engine, tables=[EVENTS])
        _META.create_all(engine)
        with engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("events")}
        if "hash" not in columns:
            with engine.begin() as conn:
                conn.exec_driver_sql("ALTER TABLE events ADD COLUMN hash VARCHAR(64)")
        with engine.connect() as conn:
            meta = dict(conn.execute(select(STORE_META.c.key, STORE_META.c.value)).all())
        if self._chain_current(meta):
            return
        with self._write_connection() as conn:
            try:
                self._begin_write(conn)
                meta = dict(conn.execute(select(STORE_META.c.key, STORE_META.c.value)).all())
                if not self._chain_current(meta):
                    self._backfill(conn, self._key)
                    conn.execute(
                        STORE_META.delete().where(STORE_META.c.key.in_(["chain", "key_id"]))
                    )
                    rows = [{"key": "chain", "value": CHAIN_VERSION}]
                    if self._key is not None:
                        rows = [
                            {"key": "chain", "value": KEYED_CHAIN_VERSION},
                            {"key": "key_id", "value": key_id(self._key)},
                        ]
                    conn.execute(insert(STORE_META), rows)
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

    def _chain_current(self, meta: dict[str, str]) -> bool:
        """Whether the log's chain is the one this store writes (no backfill to do). A keyed
        log opened without a key is left as it is (read only, see ``_needs_key``); opened with
        another key, it is refused: re-chaining it would hide every edit made since."""
        chain, stored_id = meta.get("chain"), meta.get("key_id")
        if chain == KEYED_CHAIN_VERSION:
            if self._key is None:
                self._needs_key = stored_id or "?"
                return True
            if stored_id != key_id(self._key):
                raise ConfigError(
                    f"this log's hash chain is under key {stored_id}, and the key given is "
                    f"{key_id(self._key)}: restore the log key the workspace was written with "
                    "(the workspace's log_key file, or the file store.key_file names)"
                )
            return True
        return chain == CHAIN_VERSION and self._key is None

    @staticmethod
    def _backfill(conn: Connection, key: bytes | None) -> None:
        """Hash every row of an old (or plainly chained) log in stream order under ``key`` and
        write the streams' heads."""
        query = select(_C.seq, _C.stream, _C.version, _C.type, _C.schema_no, _C.data).order_by(
            _C.stream, _C.version
        )
        previous, current, heads = "", None, {}
        updates: list[dict[str, Any]] = []
        for seq, stream, version, type_, schema, data in conn.execute(query):
            if stream != current:
                previous, current = "", stream
            previous = chain_hash(
                previous, stream, version, type_, schema, canonical_json(data), key
            )
            updates.append({"s": seq, "h": previous})
            heads[stream] = {"stream": stream, "version": version, "hash": previous, "seq": seq}
        if updates:
            conn.execute(
                update(EVENTS).where(_C.seq == bindparam("s")).values(hash=bindparam("h")),
                updates,
            )
        conn.execute(HEADS.delete())
        if heads:
            conn.execute(insert(HEADS), list(heads.values()))

    # -- verifying -------------------------------------------------------------------------

    def verify(self, stream_prefix: str | None = None) -> list[ChainProblem]:
        """Check the log against its hash chains and heads; ``[]`` when nothing was changed.

        Every stream (starting with ``stream_prefix`` when given) is read in version order: its
        versions must run 1, 2, 3 … with seq rising, each row's hash must be the chain's, each
        event must decode into its class, and its last event must be its head. Problems come
        sorted by seq, so the first one is where the log stops being what was written.
        """
        if self._needs_key is not None:
            raise ConfigError(
                f"this log's hash chain is keyed (key {self._needs_key}) and it was opened "
                "without its key, so it cannot be checked: open it through the workspace (or "
                "set store.key_file)"
            )
        problems: list[ChainProblem] = []
        with self._engine.connect() as conn:
            query = select(*_COLUMNS).order_by(_C.stream, _C.version)
            heads_query = select(_H.stream, _H.version, _H.hash, _H.seq)
            if stream_prefix:
                query = query.where(_C.stream.startswith(stream_prefix, autoescape=True))
                heads_query = heads_query.where(
                    _H.stream.startswith(stream_prefix, autoescape=True)
                )
            heads = {
                str(r[0]): (int(r[1]), str(r[2]), int(r[3])) for r in conn.execute(heads_query)
            }
            seen: set[str] = set()
            state: _ChainWalk | None = None
            for row in conn.execution_options(yield_per=2000).execute(query):
                stored = _stored(row)
                if state is None or state.stream != stored.stream:
                    if state is not None:
                        problems.extend(state.finish(heads.get(state.stream)))
                    state = _ChainWalk(stored.stream, self._key)
                    seen.add(stored.stream)
                problems.extend(state.step(stored))
            if state is not None:
                problems.extend(state.finish(heads.get(state.stream)))
        for stream, (version, _hash, seq) in heads.items():
            if stream not in seen:
                problems.append(
                    ChainProblem(
                        seq, stream, version, f"the stream's {version} events are all missing"
                    )
                )
        return sorted(problems, key=lambda p: (p.seq, p.stream))

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

    @staticmethod
    def _stream_clause(streams: Sequence[str]) -> Any:
        return or_(
            *(
                _C.stream.startswith(name[:-1], autoescape=True)
                if name.endswith("*")
                else _C.stream == name
                for name in streams
            )
        )

    def _later(self, streams: Sequence[str], through_seq: int) -> int:
        query = select(func.count()).where(self._stream_clause(streams), _C.seq > through_seq)
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def _digest(self, streams: Sequence[str], through_seq: int) -> tuple[int, str]:
        query = (
            select(_C.stream, _C.version, _C.type, _C.schema_no, _C.data)
            .where(self._stream_clause(streams), _C.seq <= through_seq)
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

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], datetime] = _utc_now,
        key: bytes | None = None,
    ) -> None:
        """``key`` chains the log; without one, the workspace's key beside the file (its
        :data:`LOG_KEY_FILE`) when there is one, else plain SHA-256 (a scratch log)."""
        file = Path(path).expanduser()
        # An archived workspace (read-only file or folder) is read as it is: SQLite's immutable
        # mode needs no -wal or -shm file, which a read-only folder could not hold; appending
        # then says why it cannot.
        self.read_only = read_only(file)
        if not self.read_only:
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(
                    f"cannot create the folder for the event store {str(file)!r}: {exc}"
                ) from exc
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
        super().__init__(engine, clock=clock, key=key)
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

    # Appends talk to sqlite3 directly, inside the transaction SQLAlchemy opened: each
    # statement through SQLAlchemy's execution context costs more than the statement itself,
    # and an append is five of them (bench/events.py measures the store against raw sqlite3).

    @staticmethod
    def _raw(conn: Connection) -> Any:
        return conn.connection.driver_connection

    def _max_seq(self, conn: Connection) -> int:
        (seq,) = self._raw(conn).execute(_SQLITE_MAX_SEQ).fetchone()
        return int(seq)

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
                (e.seq, e.stream, e.version, e.type, e.schema, text, when, e.hash)
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
            super().__init__(engine, clock=clock, key=key)
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


def open_event_store(
    url_or_path: str | Path, *, schema: str | None = None, key: bytes | None = None
) -> EventStore:
    """Open (and create) the event store, its chain under ``key`` (see the module docstring).

    A filesystem path or ``sqlite:///`` URL gives SQLite; ``postgresql://`` or
    ``postgresql+psycopg://`` gives PostgreSQL, inside ``schema`` when one is named.
    """
    text = str(url_or_path)
    if isinstance(url_or_path, Path) or "://" not in text:
        return SqliteEventStore(text, key=key)
    if text.startswith("sqlite:///"):
        path = text[len("sqlite:///") :]
        if not path or path == ":memory:":
            raise ConfigError(
                f"the event store needs a SQLite file, not {text!r}; give a path to a .db file"
            )
        return SqliteEventStore(path, key=key)
    if text.startswith(("postgresql://", "postgresql+psycopg://")):
        return PostgresEventStore(text, schema=schema, key=key)
    raise ConfigError(
        f"unknown event store {text!r}; give a file path, sqlite:///PATH or "
        "postgresql+psycopg://USER@HOST:PORT/DB"
    )
