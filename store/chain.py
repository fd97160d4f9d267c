"""The log's tamper evidence, apart from storage: the chains, the head kept beside the key, anchors.

Three things make an edit to the database show, and none of them is read from the database:

* **Each stream's chain.** Every event's ``hash`` is ``HMAC-SHA256(key, previous hash, stream,
  version, type, schema, canonical JSON of data)`` (:func:`chain_hash`): editing, inserting,
  reordering or deleting inside a stream breaks it.
* **The global chain.** Every event's ``link`` is ``HMAC-SHA256(key, previous link, seq,
  hash)`` over the global sequence (:func:`link_hash`), so no event can vanish from the middle of
  the log — nor can the log be renumbered — even where its own stream still checks out.
* **The head beside the key.** The last seq and its link are kept in a file next to the key
  (:class:`HeadFile`, ``log_key.head``), advanced after each commit, with the chain kind and the
  key's fingerprint. Cutting events off the end of the log shows as a head past its last event.

The key (:data:`LOG_KEY_FILE`, or the file ``store.key_file`` names) never enters the database,
so whoever can write the database but not the key's folder can neither re-chain an edit nor move
the head. What the database's own ``store_meta`` says is checked against the head file, never
trusted to decide how rows are verified. A log whose chain is not this key's (an earlier
PlaylistEval's per-stream chain, a scratch log written without a key, a log from before chains)
is brought under it only by an explicit, verified and recorded ``playlisteval store rekey``.

**What a key holder can still do.** Whoever holds the key and can write its folder can rewrite
the log, re-chain it and move the head: nothing kept beside the key can tell. An
:class:`Anchor` — a digest of some streams up to a seq, published with what rests on them (an
export's ``benchmark.json``, a report, ``store anchor``) — catches that rewrite from any copy of
the log: it is plain SHA-256 over the events' contents, so checking it needs no key.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from store.errors import ConfigError

LOG_KEY_FILE = "log_key"  # the workspace's chain key, beside its database (owner-only)
HEAD_SUFFIX = ".head"  # the head file: the key file's name and this

# store_meta["chain"]: how the log's rows are chained. "1" and "2" are earlier PlaylistEvals'
# per-stream chains (plain SHA-256, keyed); "3" and "4" add the global chain (plain, keyed).
CHAIN_PLAIN_STREAMS = "1"
CHAIN_KEYED_STREAMS = "2"
CHAIN_PLAIN = "3"
CHAIN_KEYED = "4"
HEAD_FORMAT = 1


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


@functools.lru_cache(maxsize=8)
def _keyed(key: bytes) -> hmac.HMAC:
    return hmac.new(key, digestmod=hashlib.sha256)


def _digest(blob: bytes, key: bytes | None) -> str:
    if key is None:
        return hashlib.sha256(blob).hexdigest()
    keyed = _keyed(key).copy()  # the key's pads hashed once, not per event
    keyed.update(blob)
    return keyed.hexdigest()


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
    return _digest(f"{previous}\n{stream}\n{version}\n{type_}\n{schema}\n{data}".encode(), key)


def link_hash(previous: str, seq: int, hash_: str, key: bytes | None = None) -> str:
    """One event's link in the global chain (``previous`` is "" for seq 1): its seq and its
    stream hash, which covers its content, chained in seq order."""
    return _digest(f"{previous}\n{seq}\n{hash_}".encode(), key)


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
    except IsADirectoryError as exc:
        raise ConfigError(f"the log key {str(path)!r} is a folder, not a key file") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read the log key {str(path)!r}: {exc}") from exc
    if len(key) < 32:
        raise ConfigError(
            f"{str(path)!r} holds too short a log key ({len(key)} bytes); restore the key the "
            "log was written with from a backup"
        )
    return key


def head_path(key_path: Path) -> Path:
    """Where the head of the logs chained under the key in ``key_path`` is kept."""
    return key_path.with_name(key_path.name + HEAD_SUFFIX)


@dataclass(frozen=True, slots=True)
class Head:
    """A log's head as kept beside its key: the chain kind and key it is under, the last seq
    committed and that event's link; and the checkpoint, the seq (and its link) through which
    a check last found the whole log as written, from which the next quick check goes on."""

    chain: str
    key_id: str
    seq: int
    link: str
    verified_seq: int = 0
    verified_link: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "chain": self.chain,
            "key_id": self.key_id,
            "seq": self.seq,
            "link": self.link,
        }
        if self.verified_seq:
            out |= {"verified_seq": self.verified_seq, "verified_link": self.verified_link}
        return out


class HeadFile:
    """The heads of the logs chained under one key, in a file beside it (owner-only).

    It holds ``{"format": 1, "logs": {log_id: head}}`` — one key may chain several logs (a
    fleet's PostgreSQL schemas). Writers hold an exclusive ``flock`` on the key file while they
    read and replace it, so two processes committing one after the other never move a head back;
    a head only ever advances (:meth:`advance`) except through ``store rekey`` (:meth:`put`).
    The file is replaced whole (write, then rename), so a reader sees the old head or the new."""

    def __init__(self, key_path: Path) -> None:
        self.key_path = key_path
        self.path = head_path(key_path)

    def read(self) -> dict[str, Head]:
        """Every log's head (empty when the file is missing); :class:`ConfigError` naming the
        file when it is not what this class writes."""
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"cannot read the log's head {str(self.path)!r}: {exc}") from exc
        try:
            data = json.loads(text)
            if data.get("format") != HEAD_FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            out = {}
            for log_id, head in data["logs"].items():
                seq = head["seq"]
                if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 2**63:
                    raise ValueError(f"seq {seq!r}")
                verified = head.get("verified_seq", 0)
                if not isinstance(verified, int) or isinstance(verified, bool) or verified < 0:
                    raise ValueError(f"verified_seq {verified!r}")
                out[str(log_id)] = Head(
                    str(head["chain"]),
                    str(head["key_id"]),
                    seq,
                    str(head["link"]),
                    verified,
                    str(head.get("verified_link", "")),
                )
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            raise ConfigError(
                f"the log's head {str(self.path)!r} is not what PlaylistEval writes ({exc}); "
                "restore it from the backup of the key's folder"
            ) from exc
        return out

    def get(self, log_id: str) -> Head | None:
        return self.read().get(log_id)

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Head]]:
        try:
            fd = os.open(self.key_path, os.O_RDONLY)
        except OSError as exc:
            raise ConfigError(f"cannot open the log key {str(self.key_path)!r}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self.read()
        finally:
            os.close(fd)  # closing releases the lock

    def _write(self, heads: dict[str, Head]) -> None:
        text = json.dumps(
            {"format": HEAD_FORMAT, "logs": {k: v.to_json() for k, v in sorted(heads.items())}},
            indent=1,
        )
        staged = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(staged, self.path)
        except OSError as exc:
            staged.unlink(missing_ok=True)
            raise ConfigError(
                f"cannot write the log's head {str(self.path)!r}: {exc.strerror or exc}; the "
                "events are committed, and `playlisteval store verify` shows the log as it is"
            ) from exc

    def advance(self, log_id: str, head: Head) -> None:
        """Move ``log_id``'s head to ``head`` unless it is already there or past it."""
        with self._locked() as heads:
            current = heads.get(log_id)
            if current is not None and current.seq >= head.seq:
                return
            if current is not None:  # the checkpoint stays where a check put it
                head = replace(
                    head, verified_seq=current.verified_seq, verified_link=current.verified_link
                )
            heads[log_id] = head
            self._write(heads)

    def checkpoint(self, log_id: str, seq: int, link: str) -> None:
        """Record that the log was found as written through ``seq`` (whose link is ``link``);
        a checkpoint only moves forward, and only for a log whose head is kept here."""
        with self._locked() as heads:
            current = heads.get(log_id)
            if current is None or seq <= current.verified_seq:
                return
            heads[log_id] = replace(current, verified_seq=seq, verified_link=link)
            self._write(heads)

    def put(self, log_id: str, head: Head) -> None:
        """Set ``log_id``'s head whatever it was (``store rekey``, a new log)."""
        with self._locked() as heads:
            heads[log_id] = head
            self._write(heads)


@dataclass(frozen=True)
class ChainProblem:
    """One place where the log is not what was written: the seq (and stream, version) of the
    first event that does not check out, and what is wrong there. A problem with the log as a
    whole (its chain record, its head) has the stream ``"(log)"``."""

    seq: int
    stream: str
    version: int
    what: str

    @property
    def at(self) -> str:
        """Where it is, for a sentence: "at seq N", or "in the log's chain record"."""
        return f"at seq {self.seq}" if self.seq else "in the log's chain record"

    def __str__(self) -> str:
        if self.stream == LOG_WIDE and not self.seq:
            return self.what
        if self.stream == LOG_WIDE:
            return f"seq {self.seq}: {self.what}"
        return f"seq {self.seq} ({self.stream!r} v{self.version}): {self.what}"


LOG_WIDE = "(log)"


class StreamWalk:
    """One stream's events checked in version order against its chain and head."""

    def __init__(self, stream: str, key: bytes | None) -> None:
        self.stream = stream
        self.key = key
        self.version = 0
        self.seq = 0
        self.hash = ""
        self.broken = False

    def step(
        self, seq: int, version: int, type_: str, schema: int, text: str, hash_: str | None
    ) -> list[ChainProblem]:
        """Check one event (``text``: its data's :func:`canonical_json`)."""
        out: list[ChainProblem] = []

        def problem(what: str) -> None:
            out.append(ChainProblem(seq, self.stream, version, what))

        if version != self.version + 1:
            missing = version - self.version - 1
            problem(
                f"versions jump from {self.version} to {version}: "
                + (f"{missing} event(s) deleted before it" if missing > 0 else "reordered")
            )
        if seq <= self.seq:
            problem(f"seq {seq} is not after the previous event's seq {self.seq}")
        expected = chain_hash(self.hash, self.stream, version, type_, schema, text, self.key)
        if hash_ is None:
            problem("it has no hash: written around the store (inserted, or its hash removed)")
        elif hash_ != expected and not self.broken:
            problem(
                "its content does not match its hash chain: it (or an event before it in the "
                "stream) was edited, inserted, deleted or reordered"
            )
            self.broken = True
        self.version, self.seq = version, seq
        self.hash = hash_ or expected
        return out

    def finish(self, head: tuple[int, str, int] | None) -> list[ChainProblem]:
        """Check the stream's end against its row in ``stream_heads``."""
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


class LinkWalk:
    """The global chain checked in seq order: seq 1, 2, 3 … each link the chain's."""

    def __init__(self, key: bytes | None, head: Head | None) -> None:
        self.key = key
        self.head = head
        self.seq = 0
        self.link = ""
        self.broken = False
        self.at_head: str | None = None  # the link stored at the head's seq

    def step(
        self, seq: int, stream: str, version: int, hash_: str | None, link: str | None
    ) -> list[ChainProblem]:
        out: list[ChainProblem] = []
        if seq != self.seq + 1 and not self.broken:
            gap = seq - self.seq - 1
            out.append(
                ChainProblem(
                    self.seq + 1 if gap > 0 else seq,
                    LOG_WIDE if gap > 0 else stream,
                    0 if gap > 0 else version,
                    f"seq {self.seq + 1}"
                    + (f"–{seq - 1}" if gap > 1 else "")
                    + f" missing: {gap} event(s) deleted from the log"
                    if gap > 0
                    else f"seq {seq} out of order after seq {self.seq}",
                )
            )
            self.broken = True
        expected = link_hash(self.link, seq, hash_ or "", self.key)
        if link != expected and not self.broken:
            out.append(
                ChainProblem(
                    seq,
                    stream,
                    version,
                    "it does not match the log's global chain: an event before it was deleted, "
                    "inserted or renumbered, or it was"
                    + (" written around the store" if link is None else " edited"),
                )
            )
            self.broken = True
        if self.head is not None and seq == self.head.seq:
            self.at_head = link
        self.seq, self.link = seq, link or expected
        return out

    def finish(self) -> list[ChainProblem]:
        """Check the log's end against its head beside the key (when one is kept)."""
        head, last_seq = self.head, self.seq
        if head is None:
            return []
        if head.seq > last_seq:
            return [
                ChainProblem(
                    last_seq + 1,
                    LOG_WIDE,
                    0,
                    f"the log ends at seq {last_seq} but its head beside the key says seq "
                    f"{head.seq}: {head.seq - last_seq} event(s) cut off its end",
                )
            ]
        if head.seq and self.at_head != head.link:
            return [
                ChainProblem(
                    head.seq,
                    LOG_WIDE,
                    0,
                    "the event at the head kept beside the key is not the one committed there: "
                    "the log was rewritten",
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
