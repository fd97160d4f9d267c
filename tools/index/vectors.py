"""The vector index behind one interface: Qdrant embedded (local or edge) or a Qdrant server.

Every backend speaks :class:`VectorIndex`. Our ids are strings (``"vid123-c0004"``); Qdrant only
takes unsigned integers or UUIDs, so each id is mapped to a deterministic UUIDv5 and the original
is kept in the payload under ``"key"`` (reserved: :class:`Hit` hands it back as ``Hit.id``).

Backends:

* ``qdrant-edge`` (:class:`QdrantEdgeIndex`): ``qdrant_edge.EdgeShard``, one shard directory per
  collection under a root folder. In-process Rust engine with HNSW and payload indexes; the
  recommended embedded default (see ``bench/vector_search.py``).
* ``qdrant-local`` (:class:`QdrantClientIndex.local`): ``qdrant_client`` local mode, pure Python,
  brute force and no payload indexes; fine for tests and small collections.
* ``qdrant-server`` (:class:`QdrantClientIndex.server`): a Qdrant server, for many workers.

Both embedded backends are single-process: an open index holds a lock on its folder (qdrant-local
through portalocker, qdrant-edge through its write-ahead log), so always call :meth:`close` (or use
the index as a context manager) before another process opens the same path.

Errors from any engine are re-raised as :class:`store.errors.IndexBackendError` naming the
collection and the reason.
"""

from __future__ import annotations

import json
import math
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import qdrant_edge as qe

if TYPE_CHECKING:
    # Imported where used: qdrant_client takes ~0.6 s to import, and only the qdrant-local and
    # qdrant-server backends need it (every CLI start and worker process paid it before).
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

from store.closing import ClosesOnExit
from store.errors import ConfigError, IndexBackendError, PlaylistEvalError
from store.folders import make_folder

__all__ = [
    "BACKENDS",
    "KEY_FIELD",
    "Hit",
    "QdrantClientIndex",
    "QdrantEdgeIndex",
    "VectorIndex",
    "open_vector_index",
    "point_uuid",
]

BACKENDS = ("qdrant-edge", "qdrant-local", "qdrant-server")
KEY_FIELD = "key"

# A fixed namespace makes the id -> UUID mapping identical across processes and backends.
_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://playlisteval/vectors")
# Collection names become directory names for qdrant-edge, so keep them to a safe alphabet.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RANGE_OPS = frozenset({"gt", "gte", "lt", "lte"})
# Server requests stay well under Qdrant's 32 MiB request limit at 384-d.
_SERVER_BATCH = 1024


@dataclass(frozen=True)
class Hit:
    """One search result: our string id, its cosine similarity and its payload (without "key")."""

    id: str
    score: float
    payload: dict[str, Any]


def point_uuid(key: str) -> str:
    """Map one of our string ids to the deterministic UUID Qdrant stores it under."""
    return str(uuid.uuid5(_ID_NAMESPACE, key))


# --------------------------------------------------------------------------------------------
# Validation and translation shared by the backends (pure functions over plain data).
# --------------------------------------------------------------------------------------------


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise IndexBackendError(
            f"collection name {name!r} is not allowed: use 1-64 letters, digits, '_' or '-'"
        )


def _jsonable(value: Any, where: str) -> Any:
    """Return ``value`` as plain JSON types (numpy scalars unwrapped, tuples as lists)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise IndexBackendError(f"payload value {value!r} at {where} is not a finite number")
        return value
    if isinstance(value, np.generic):
        return _jsonable(value.item(), where)
    if isinstance(value, list | tuple):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise IndexBackendError(f"payload key {k!r} at {where} is not a str")
            out[k] = _jsonable(v, f"{where}.{k}")
        return out
    raise IndexBackendError(
        f"payload value {value!r} at {where} is not JSON (str, int, float, bool, list, dict)"
    )


def _prepare_points(
    name: str,
    ids: Sequence[str],
    vectors: np.ndarray,
    payloads: Sequence[Mapping[str, Any]],
    dim: int | None,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Validate an upsert batch; return float32 vectors and payloads with "key" filled in."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != len(ids) or len(payloads) != len(ids):
        raise IndexBackendError(
            f"collection {name!r}: upsert needs one vector row and one payload per id, got "
            f"{len(ids)} ids, vectors of shape {np.shape(vectors)!r} and {len(payloads)} payloads"
        )
    if dim is not None and arr.shape[0] and arr.shape[1] != dim:
        raise IndexBackendError(
            f"collection {name!r} holds {dim}-d vectors, got {arr.shape[1]}-d: embed with the "
            "model the collection was built with, or index into a new collection"
        )
    if not np.isfinite(arr).all():
        raise IndexBackendError(f"collection {name!r}: vectors contain NaN or infinity")
    out: list[dict[str, Any]] = []
    for key, payload in zip(ids, payloads, strict=True):
        if not isinstance(key, str) or not key:
            raise IndexBackendError(f"collection {name!r}: id {key!r} must be a non-empty str")
        try:
            clean = _jsonable(payload, f"id {key!r}")
        except IndexBackendError as exc:
            raise IndexBackendError(f"collection {name!r}: {exc}") from None
        if not isinstance(clean, dict):
            raise IndexBackendError(f"collection {name!r}: payload for {key!r} must be a dict")
        if clean.get(KEY_FIELD, key) != key:
            raise IndexBackendError(
                f"collection {name!r}: payload field {KEY_FIELD!r} is reserved for the id, "
                f"got {clean[KEY_FIELD]!r} for id {key!r}"
            )
        clean[KEY_FIELD] = key
        out.append(clean)
    return arr, out


def _query_vector(name: str, vector: np.ndarray, dim: int | None) -> list[float]:
    arr = np.asarray(vector, dtype=np.float32).reshape(-1)
    if dim is not None and arr.shape[0] != dim:
        raise IndexBackendError(
            f"collection {name!r} holds {dim}-d vectors, got a {arr.shape[0]}-d query: embed "
            "the query with the model the collection was built with"
        )
    if not np.isfinite(arr).all():
        raise IndexBackendError(f"collection {name!r}: query vector contains NaN or infinity")
    return [float(x) for x in arr]


@dataclass(frozen=True)
class _Cond:
    """One parsed filter condition; exactly one of match/any_of/bounds is set."""

    field: str
    match: str | int | None = None
    any_of: tuple[str | int, ...] | None = None
    bounds: tuple[tuple[str, float], ...] | None = None


def _parse_filters(name: str, filters: Mapping[str, Any] | None) -> list[_Cond]:
    """Turn the filter mapping into conditions, refusing shapes Qdrant cannot answer."""
    conds: list[_Cond] = []
    for field, spec in (filters or {}).items():
        if isinstance(spec, bool):
            # qdrant-edge-py 0.9 turns MatchValue(True) into the integer 1, which never matches
            # a stored bool; refuse it everywhere so every backend answers the same.
            raise IndexBackendError(
                f"collection {name!r}: filter {field!r}: {spec!r}: bool equality is not "
                "supported; store the flag as a str or int and filter on that"
            )
        if isinstance(spec, str | int):
            conds.append(_Cond(field, match=spec))
        elif isinstance(spec, list | tuple | set | frozenset):
            values = tuple(spec)
            kinds = {type(v) for v in values}
            if not (kinds <= {str} or kinds <= {int}):
                raise IndexBackendError(
                    f"collection {name!r}: filter {field!r}: {spec!r} must list only str or "
                    "only int values"
                )
            conds.append(_Cond(field, any_of=values))
        elif isinstance(spec, Mapping):
            bad = set(spec) - _RANGE_OPS
            if not spec or bad:
                raise IndexBackendError(
                    f"collection {name!r}: range filter {field!r}: {dict(spec)!r} may only use "
                    f"{sorted(_RANGE_OPS)}"
                )
            bounds: list[tuple[str, float]] = []
            for op, bound in spec.items():
                if isinstance(bound, bool) or not isinstance(bound, int | float):
                    raise IndexBackendError(
                        f"collection {name!r}: range filter {field!r}.{op} = {bound!r} "
                        "must be a number"
                    )
                bounds.append((op, float(bound)))
            conds.append(_Cond(field, bounds=tuple(bounds)))
        else:
            raise IndexBackendError(
                f"collection {name!r}: filter {field!r}: {spec!r} is not supported; use a str, "
                "int or bool for equality, a list for match-any, or {'gte': ..} for a range "
                "(floats only match through a range)"
            )
    return conds


def _any_values(values: tuple[str | int, ...]) -> list[str] | list[int]:
    """Return match-any values as the homogeneous list both Qdrant APIs want."""
    if all(isinstance(v, str) for v in values):
        return [str(v) for v in values]
    return [int(v) for v in values]


def _to_hit(payload: Mapping[str, Any] | None, score: float, point_id: object) -> Hit:
    body = dict(payload or {})
    key = body.pop(KEY_FIELD, None)
    return Hit(id=str(key) if key is not None else str(point_id), score=float(score), payload=body)


@contextmanager
def _engine_errors(name: str, what: str) -> Iterator[None]:
    """Re-raise anything an engine throws as IndexBackendError naming the collection."""
    try:
        yield
    except PlaylistEvalError:
        raise
    except Exception as exc:  # engines raise bare Exception/ValueError/RuntimeError/httpx errors
        raise IndexBackendError(f"collection {name!r}: {what} failed: {exc}") from exc


class VectorIndex(ClosesOnExit, ABC):
    """What every vector index backend offers; all distances are cosine.

    Filters map a payload field to a condition, all conditions must hold (AND):
    ``{"domain": "education"}`` equality (str or int), ``{"video_id": ["a", "b"]}`` match
    any, ``{"start_s": {"gte": 10, "lt": 60}}`` numeric range.

    The public methods check names, dims, vectors, payloads and filters here, the same for
    every backend, and re-raise engine errors as :class:`IndexBackendError`; a backend only
    speaks to its engine, through the ``_``-prefixed hooks.
    """

    backend: str

    def ensure_collection(
        self,
        name: str,
        dim: int,
        keyword_fields: Sequence[str] = (),
        float_fields: Sequence[str] = (),
    ) -> None:
        """Create the collection if missing (idempotent), refuse an existing one of another
        dim, and index the given payload fields."""
        _check_name(name)
        if dim <= 0:
            raise IndexBackendError(f"collection {name!r}: dim {dim!r} must be positive")
        have = self._create(name, dim)
        if have != dim:
            raise IndexBackendError(
                f"collection {name!r} exists with {have}-d vectors, asked for {dim}-d: use "
                "another collection name for a different embedder"
            )
        with _engine_errors(name, "payload index"):
            self._index_fields(name, keyword_fields, float_fields)

    def upsert(
        self,
        name: str,
        ids: Sequence[str],
        vectors: np.ndarray,
        payloads: Sequence[Mapping[str, Any]],
    ) -> None:
        """Insert or replace points by id; durable once it returns."""
        arr, bodies = _prepare_points(name, ids, vectors, payloads, self._dim(name))
        if not ids:
            return
        with _engine_errors(name, "upsert"):
            self._write(name, ids, arr, bodies)

    def search(
        self,
        name: str,
        vector: np.ndarray,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Return up to ``k`` hits, best cosine similarity first."""
        query = _query_vector(name, vector, self._dim(name))
        conds = _parse_filters(name, filters)
        if k <= 0 or any(c.any_of == () for c in conds):
            return []
        with _engine_errors(name, "search"):
            return self._nearest(name, query, k, conds)

    def count(self, name: str) -> int:
        """Return the exact number of points in the collection."""
        self._dim(name)
        with _engine_errors(name, "count"):
            return self._count(name)

    def delete(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id; unknown ids are ignored."""
        self._dim(name)
        if not ids:
            return
        with _engine_errors(name, "delete"):
            self._remove(name, [point_uuid(key) for key in ids])

    @abstractmethod
    def has_collection(self, name: str) -> bool:
        """Say whether the collection exists."""

    @abstractmethod
    def close(self) -> None:
        """Release files and locks; idempotent."""

    # -- what a backend says to its engine (names are checked before these are called) --------

    @abstractmethod
    def _dim(self, name: str) -> int:
        """The dimension of an existing collection; ``IndexBackendError`` when there is none
        or the index is closed."""

    @abstractmethod
    def _create(self, name: str, dim: int) -> int:
        """Create the collection at ``dim`` unless it exists; return its stored dimension."""

    @abstractmethod
    def _index_fields(
        self, name: str, keyword_fields: Sequence[str], float_fields: Sequence[str]
    ) -> None:
        """Add the payload indexes the collection lacks (a backend may have none)."""

    @abstractmethod
    def _write(
        self, name: str, ids: Sequence[str], arr: np.ndarray, bodies: list[dict[str, Any]]
    ) -> None:
        """Store checked points (one float32 row and one payload per id)."""

    @abstractmethod
    def _nearest(self, name: str, query: list[float], k: int, conds: list[_Cond]) -> list[Hit]:
        """The ``k`` nearest points that meet every condition, best first."""

    @abstractmethod
    def _count(self, name: str) -> int:
        """The exact number of points."""

    @abstractmethod
    def _remove(self, name: str, point_ids: list[str]) -> None:
        """Delete points by their Qdrant ids."""


# --------------------------------------------------------------------------------------------
# qdrant_client: local mode and server
# --------------------------------------------------------------------------------------------


def _client_filter(conds: list[_Cond]) -> qm.Filter | None:
    from qdrant_client import models as qm

    if not conds:
        return None
    must: list[qm.Condition] = []
    for c in conds:
        if c.match is not None:
            must.append(qm.FieldCondition(key=c.field, match=qm.MatchValue(value=c.match)))
        elif c.any_of is not None:
            must.append(
                qm.FieldCondition(key=c.field, match=qm.MatchAny(any=_any_values(c.any_of)))
            )
        elif c.bounds is not None:
            must.append(qm.FieldCondition(key=c.field, range=qm.Range(**dict(c.bounds))))
    return qm.Filter(must=must)


class QdrantClientIndex(VectorIndex):
    """A :class:`VectorIndex` over ``qdrant_client``: local mode or a server.

    Build it with :meth:`local` (backend ``"qdrant-local"``) or :meth:`server` (backend
    ``"qdrant-server"``). Local mode keeps points in SQLite under the folder, writes each upsert
    before returning, and locks the folder against other processes until :meth:`close`.
    """

    def __init__(self, client: QdrantClient, backend: str) -> None:
        """Wrap an open client; prefer :meth:`local` or :meth:`server`."""
        self.backend = backend
        self._client: QdrantClient | None = client
        self._dims: dict[str, int] = {}

    @classmethod
    def local(cls, path: Path) -> QdrantClientIndex:
        """Open (or create) a qdrant-local index under ``path``; one process at a time."""
        from qdrant_client import QdrantClient

        path = Path(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
            client = QdrantClient(path=str(path))
        except (RuntimeError, OSError) as exc:
            raise IndexBackendError(
                f"cannot open qdrant-local index at {str(path)!r}: {exc} (close the other "
                "process's index, or use qdrant-server for several processes)"
            ) from exc
        return cls(client, "qdrant-local")

    @classmethod
    def server(cls, url: str, api_key: str | None = None, timeout_s: int = 30) -> QdrantClientIndex:
        """Connect to a Qdrant server at ``url``; the connection is checked right away."""
        from qdrant_client import QdrantClient

        try:
            client = QdrantClient(
                url=url, api_key=api_key, timeout=timeout_s, check_compatibility=False
            )
            client.get_collections()
        except Exception as exc:
            raise IndexBackendError(
                f"Qdrant server at {url!r} is unreachable or refused us: {exc} "
                "(check the URL, the API key and that the server runs)"
            ) from exc
        return cls(client, "qdrant-server")

    def _open(self) -> QdrantClient:
        if self._client is None:
            raise IndexBackendError(f"{self.backend} index is closed: open a new one")
        return self._client

    def _dim(self, name: str) -> int:
        """Return the collection's dimension, refusing unknown collections with a hint."""
        from qdrant_client import models as qm

        _check_name(name)
        if name in self._dims:
            return self._dims[name]
        client = self._open()
        with _engine_errors(name, "lookup"):
            if not client.collection_exists(name):
                raise IndexBackendError(
                    f"the index has no collection {name!r}: nothing is indexed yet (run "
                    f"`playlisteval index`; from code, call ensure_collection({name!r}, dim))"
                )
            params = client.get_collection(name).config.params.vectors
        size = params.size if isinstance(params, qm.VectorParams) else None
        if size is None:
            raise IndexBackendError(f"collection {name!r} has no single unnamed dense vector")
        self._dims[name] = size
        return size

    def _create(self, name: str, dim: int) -> int:
        """Create the cosine collection if missing; return its dimension."""
        from qdrant_client import models as qm

        client = self._open()
        with _engine_errors(name, "create"):
            if not client.collection_exists(name):
                client.create_collection(
                    name, vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.COSINE)
                )
        return self._dim(name)

    def _index_fields(
        self, name: str, keyword_fields: Sequence[str], float_fields: Sequence[str]
    ) -> None:
        """Index payload fields on a server; local mode ignores payload indexes (and warns)."""
        from qdrant_client import models as qm

        if self.backend != "qdrant-server":
            return
        client = self._open()
        fields = [(f, qm.PayloadSchemaType.KEYWORD) for f in keyword_fields]
        fields += [(f, qm.PayloadSchemaType.FLOAT) for f in float_fields]
        for field, schema in fields:
            client.create_payload_index(name, field, field_schema=schema, wait=True)

    def _write(
        self, name: str, ids: Sequence[str], arr: np.ndarray, bodies: list[dict[str, Any]]
    ) -> None:
        """Upsert in batches, waiting for the server so the write is applied on return."""
        from qdrant_client import models as qm

        client = self._open()
        points = [
            qm.PointStruct(id=point_uuid(key), vector=row.tolist(), payload=body)
            for key, row, body in zip(ids, arr, bodies, strict=True)
        ]
        for start in range(0, len(points), _SERVER_BATCH):
            client.upsert(name, points=points[start : start + _SERVER_BATCH], wait=True)

    def _nearest(self, name: str, query: list[float], k: int, conds: list[_Cond]) -> list[Hit]:
        points = (
            self._open()
            .query_points(
                name, query=query, limit=k, query_filter=_client_filter(conds), with_payload=True
            )
            .points
        )
        return [_to_hit(p.payload, p.score, p.id) for p in points]

    def _count(self, name: str) -> int:
        return int(self._open().count(name, exact=True).count)

    def _remove(self, name: str, point_ids: list[str]) -> None:
        from qdrant_client import models as qm

        selector = qm.PointIdsList(points=list(point_ids))
        self._open().delete(name, points_selector=selector, wait=True)

    def has_collection(self, name: str) -> bool:
        """Say whether the collection exists."""
        _check_name(name)
        with _engine_errors(name, "lookup"):
            return bool(self._open().collection_exists(name))

    def close(self) -> None:
        """Release the client (and local mode's folder lock); idempotent."""
        if self._client is not None:
            client, self._client = self._client, None
            client.close()


# --------------------------------------------------------------------------------------------
# qdrant-edge
# --------------------------------------------------------------------------------------------


def _edge_filter(conds: list[_Cond]) -> qe.Filter | None:
    if not conds:
        return None
    must: list[Any] = []
    for c in conds:
        if c.match is not None:
            must.append(qe.FieldCondition(c.field, match=qe.MatchValue(c.match)))
        elif c.any_of is not None:
            must.append(qe.FieldCondition(c.field, match=qe.MatchAny(_any_values(c.any_of))))
        elif c.bounds is not None:
            must.append(qe.FieldCondition(c.field, range=qe.RangeFloat(**dict(c.bounds))))
    return qe.Filter(must=must)


class QdrantEdgeIndex(VectorIndex):
    """A :class:`VectorIndex` over qdrant-edge: one ``EdgeShard`` directory per collection.

    New points land in an appendable segment that is searched exactly. :meth:`optimize`, run
    automatically once ``optimize_every`` points were written since this index was opened or
    last optimized, builds HNSW-indexed segments (blocking; ~50 s for the first 100k 384-d
    points on 2 cores). Filtered queries whose payload-index estimate stays under
    ``full_scan_threshold_kb`` of vectors are scored exactly over the matching points; larger
    ones use the HNSW graph, which gets extra links per indexed keyword value, so keep a keyword
    index on fields you filter by (``ensure_collection(keyword_fields=...)``).

    The defaults were tuned with ``bench/vector_search.py`` (100k MiniLM-like chunks, filter on
    one of 7 domains): m=16, ef_construct=100, hnsw_ef=128 gave recall@10 1.000 at p50 0.7 ms,
    against 2.5 ms (exact) before optimize and ~7 ms for a numpy scan. HNSW settings apply to
    collections created by this object; ``hnsw_ef`` and ``exact`` apply to every search.

    Every upsert is written to the shard's write-ahead log before it returns, so a process
    killed afterwards finds its points on reopen; ``flush_on_upsert`` (default on) also flushes
    the segments to disk before returning: measured 9.5 ms instead of 4.2 ms for one video's
    120 chunks, small next to transcribing it. The WAL locks the directory: only one process may
    hold a collection at a time, so call :meth:`close`.
    """

    backend = "qdrant-edge"

    def __init__(
        self,
        root: Path,
        *,
        hnsw_m: int = 16,
        hnsw_ef_construct: int = 100,
        hnsw_ef: int = 128,
        full_scan_threshold_kb: int = 10_000,
        indexing_threshold_kb: int | None = None,
        optimize_every: int | None = 50_000,
        flush_on_upsert: bool = True,
        exact: bool = False,
    ) -> None:
        """Open (creating if needed) the root folder; shards open lazily per collection."""
        self._root = Path(root)
        make_folder(self._root, f"qdrant-edge root {str(self._root)!r}", IndexBackendError)
        self._hnsw = qe.HnswIndexConfig(
            m=hnsw_m, ef_construct=hnsw_ef_construct, full_scan_threshold=full_scan_threshold_kb
        )
        # None keeps Qdrant's default threshold (segments under it stay plain and exact).
        self._optimizers = (
            qe.EdgeOptimizersConfig(indexing_threshold=indexing_threshold_kb)
            if indexing_threshold_kb is not None
            else None
        )
        self._params = qe.SearchParams(hnsw_ef=hnsw_ef, exact=exact)
        self._optimize_every = optimize_every
        self._flush_on_upsert = flush_on_upsert
        self._shards: dict[str, qe.EdgeShard] = {}
        self._dims: dict[str, int] = {}
        self._unoptimized: dict[str, int] = {}
        self._closed = False
        # Shards open lazily, and a shard's WAL takes one opener: two threads of one process
        # (a worker's index jobs) opening the same one at once must not both try.
        self._opening = threading.RLock()

    def _dir(self, name: str) -> Path:
        _check_name(name)
        return self._root / name

    def _shard(self, name: str) -> qe.EdgeShard:
        """Return the open shard for ``name``, loading it from disk on first use."""
        if self._closed:
            raise IndexBackendError("qdrant-edge index is closed: open a new one")
        shard = self._shards.get(name)
        if shard is not None:
            return shard
        with self._opening:
            return self._shards.get(name) or self._load(name)

    def _load(self, name: str) -> qe.EdgeShard:
        path = self._dir(name)
        if not (path / "edge_config.json").is_file():
            raise IndexBackendError(
                f"the index under {str(self._root)!r} has no collection {name!r}: nothing is "
                "indexed yet (run `playlisteval index`; from code, call "
                f"ensure_collection({name!r}, dim))"
            )
        with _engine_errors(name, "open (is another process holding it? close() it first)"):
            shard = qe.EdgeShard.load(str(path))
        self._shards[name] = shard
        self._dims[name] = self._stored_dim(name, path)
        return shard

    @staticmethod
    def _stored_dim(name: str, path: Path) -> int:
        try:
            config = json.loads((path / "edge_config.json").read_text())
            return int(config["vectors"][""]["size"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexBackendError(
                f"collection {name!r}: unreadable edge_config.json under {str(path)!r}: {exc}"
            ) from exc

    def _dim(self, name: str) -> int:
        self._shard(name)
        return self._dims[name]

    def _create(self, name: str, dim: int) -> int:
        """Create the shard if missing; return its dimension."""
        path = self._dir(name)
        if self._closed:
            raise IndexBackendError("qdrant-edge index is closed: open a new one")
        with self._opening:
            if name not in self._shards and not (path / "edge_config.json").is_file():
                config = qe.EdgeConfig(
                    vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
                    hnsw_config=self._hnsw,
                    optimizers=self._optimizers,
                )
                with _engine_errors(name, "create"):
                    self._shards[name] = qe.EdgeShard.create(str(path), config)
                self._dims[name] = dim
            return self._dim(name)

    def _index_fields(
        self, name: str, keyword_fields: Sequence[str], float_fields: Sequence[str]
    ) -> None:
        shard = self._shard(name)
        have = set(shard.info().payload_schema)
        for field in keyword_fields:
            if field not in have:
                shard.update(
                    qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword)
                )
        for field in float_fields:
            if field not in have:
                shard.update(
                    qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Float)
                )

    def _write(
        self, name: str, ids: Sequence[str], arr: np.ndarray, bodies: list[dict[str, Any]]
    ) -> None:
        """Write to the WAL (and flush if configured); optimize once enough points waited."""
        shard = self._shard(name)
        points = [
            qe.Point(point_uuid(key), row.tolist(), body)
            for key, row, body in zip(ids, arr, bodies, strict=True)
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
        if self._flush_on_upsert:
            shard.flush()
        pending = self._unoptimized.get(name, 0) + len(points)
        self._unoptimized[name] = pending
        if self._optimize_every is not None and pending >= self._optimize_every:
            self.optimize(name)

    def optimize(self, name: str) -> bool:
        """Build HNSW/payload-indexed segments now (blocking); True if anything changed."""
        shard = self._shard(name)
        with _engine_errors(name, "optimize"):
            changed = bool(shard.optimize())
            shard.flush()
        self._unoptimized[name] = 0
        return changed

    def indexed_vectors(self, name: str) -> int:
        """How many of the collection's vectors sit in HNSW-indexed segments (diagnostics)."""
        shard = self._shard(name)
        with _engine_errors(name, "info"):
            return int(shard.info().indexed_vectors_count)

    def _nearest(self, name: str, query: list[float], k: int, conds: list[_Cond]) -> list[Hit]:
        request = qe.QueryRequest(
            query=qe.Query.Nearest(query),
            limit=k,
            filter=_edge_filter(conds),
            params=self._params,
            with_payload=True,
        )
        points = self._shard(name).query(request)
        return [_to_hit(p.payload, p.score, p.id) for p in points]

    def _count(self, name: str) -> int:
        return int(self._shard(name).count(qe.CountRequest(exact=True)))

    def _remove(self, name: str, point_ids: list[str]) -> None:
        shard = self._shard(name)
        shard.update(qe.UpdateOperation.delete_points(list(point_ids)))
        if self._flush_on_upsert:
            shard.flush()

    def has_collection(self, name: str) -> bool:
        """Say whether the collection's shard exists under the root."""
        return name in self._shards or (self._dir(name) / "edge_config.json").is_file()

    def close(self) -> None:
        """Flush and close every open shard, releasing their locks; idempotent."""
        if self._closed:
            return
        self._closed = True
        shards, self._shards = self._shards, {}
        errors: list[str] = []
        for name, shard in shards.items():
            try:
                shard.flush()
                shard.close()
            except Exception as exc:  # keep closing the others, then report
                errors.append(f"{name!r}: {exc}")
        if errors:
            raise IndexBackendError(f"qdrant-edge close failed for {', '.join(errors)}")


def open_vector_index(
    backend: str,
    *,
    path: Path | None = None,
    url: str | None = None,
    api_key: str | None = None,
) -> VectorIndex:
    """Open the named backend: qdrant-edge/qdrant-local need ``path``, qdrant-server ``url``.

    The caller owns the index and must :meth:`~VectorIndex.close` it (the embedded backends lock
    their folder until then).
    """
    if backend in ("qdrant-edge", "qdrant-local"):
        if path is None:
            raise ConfigError(f"vector backend {backend!r} needs a path to store its data in")
        if backend == "qdrant-edge":
            return QdrantEdgeIndex(path)
        return QdrantClientIndex.local(path)
    if backend == "qdrant-server":
        if not url:
            raise ConfigError("vector backend 'qdrant-server' needs a url, e.g. http://host:6333")
        return QdrantClientIndex.server(url, api_key=api_key)
    raise ConfigError(f"unknown vector backend {backend!r}: choose one of {list(BACKENDS)!r}")
