"""Every vector index backend keeps the same contract: cosine order, filters, ids, persistence."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from store.errors import ConfigError, IndexBackendError
from tools.index.vectors import (
    Hit,
    QdrantEdgeIndex,
    VectorIndex,
    open_vector_index,
    point_uuid,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVER_URL = os.environ.get("PLAYLISTEVAL_TEST_QDRANT_URL", "")

DIM = 4
# Six chunks from two videos in two domains, vectors at known angles to the query QUERY.
CHUNKS: list[tuple[str, list[float], dict[str, Any]]] = [
    (
        "vidA-c0000",
        [1.0, 0.0, 0.0, 0.0],
        {"video_id": "vidA", "domain": "education", "start_s": 0.0},
    ),
    (
        "vidA-c0001",
        [0.9, 0.1, 0.0, 0.0],
        {"video_id": "vidA", "domain": "education", "start_s": 30.0},
    ),
    (
        "vidA-c0002",
        [0.7, 0.7, 0.0, 0.0],
        {"video_id": "vidA", "domain": "education", "start_s": 60.0},
    ),
    ("vidB-c0000", [0.1, 1.0, 0.0, 0.0], {"video_id": "vidB", "domain": "gaming", "start_s": 0.0}),
    ("vidB-c0001", [0.0, 0.0, 1.0, 0.0], {"video_id": "vidB", "domain": "gaming", "start_s": 30.0}),
    ("vidC-c0000", [-1.0, 0.0, 0.0, 0.0], {"video_id": "vidC", "domain": "news", "start_s": 90.0}),
]
QUERY = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
COSINE_ORDER = ["vidA-c0000", "vidA-c0001", "vidA-c0002", "vidB-c0000", "vidB-c0001", "vidC-c0000"]


def _load(
    index: VectorIndex, name: str, chunks: list[tuple[str, list[float], dict[str, Any]]]
) -> None:
    index.ensure_collection(
        name, DIM, keyword_fields=("video_id", "domain"), float_fields=("start_s",)
    )
    index.upsert(
        name,
        [c[0] for c in chunks],
        np.array([c[1] for c in chunks], dtype=np.float32),
        [c[2] for c in chunks],
    )


class VectorIndexContract:
    """The behaviour every backend must show; subclasses only say which backend to open."""

    backend: ClassVar[str]
    single_process: ClassVar[bool] = True

    def make_index(self, path: Path) -> VectorIndex:
        """Open this backend's index storing under ``path``."""
        return open_vector_index(self.backend, path=path, url=SERVER_URL or None)

    @pytest.fixture
    def name(self) -> str:
        # Unique per test so a shared server never mixes runs.
        return f"chunks_{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def store_path(self, tmp_path: Path) -> Path:
        return tmp_path / "index"

    @pytest.fixture
    def index(self, store_path: Path) -> Iterator[VectorIndex]:
        index = self.make_index(store_path)
        yield index
        index.close()

    @pytest.fixture
    def loaded(self, index: VectorIndex, name: str) -> VectorIndex:
        _load(index, name, CHUNKS)
        return index

    def test_backend_reports_its_name(self, index: VectorIndex) -> None:
        assert index.backend == self.backend

    def test_search_orders_hits_by_cosine_similarity(self, loaded: VectorIndex, name: str) -> None:
        hits = loaded.search(name, QUERY, k=6)
        assert [h.id for h in hits] == COSINE_ORDER
        expected = [np.dot(QUERY, v) / np.linalg.norm(v) for _, v, _ in CHUNKS]
        assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)

    def test_search_returns_hits_with_payloads(self, loaded: VectorIndex, name: str) -> None:
        (hit,) = loaded.search(name, QUERY, k=1)
        assert isinstance(hit, Hit)
        assert (hit.id, hit.payload) == ("vidA-c0000", CHUNKS[0][2])
        assert hit.score == pytest.approx(1.0, abs=1e-5)

    def test_upsert_is_idempotent_by_id(self, loaded: VectorIndex, name: str) -> None:
        _load(loaded, name, CHUNKS)
        loaded.upsert(name, ["vidC-c0000"], np.array([[1.0, 0.0, 0.0, 0.0]]), [{"domain": "x"}])
        assert loaded.count(name) == len(CHUNKS)
        top = loaded.search(name, QUERY, k=2)
        assert {h.id for h in top} == {"vidA-c0000", "vidC-c0000"}
        assert next(h for h in top if h.id == "vidC-c0000").payload == {"domain": "x"}

    @pytest.mark.parametrize(
        ("filters", "expected"),
        [
            ({"domain": "gaming"}, ["vidB-c0000", "vidB-c0001"]),
            (
                {"video_id": ["vidA", "vidC"]},
                ["vidA-c0000", "vidA-c0001", "vidA-c0002", "vidC-c0000"],
            ),
            ({"video_id": []}, []),
            ({"start_s": {"gte": 30, "lt": 90}}, ["vidA-c0001", "vidA-c0002", "vidB-c0001"]),
            ({"start_s": {"gt": 30.0, "lte": 90.0}}, ["vidA-c0002", "vidC-c0000"]),
            ({"domain": "education", "start_s": {"gte": 30}}, ["vidA-c0001", "vidA-c0002"]),
            ({"domain": "gaming", "video_id": ["vidA"]}, []),
            ({"domain": "cooking"}, []),
        ],
        ids=[
            "equality",
            "match-any",
            "match-any-empty",
            "range-gte-lt",
            "range-gt-lte",
            "and",
            "and-none",
            "no-match",
        ],
    )
    def test_filters_select_matching_points(
        self, loaded: VectorIndex, name: str, filters: dict[str, Any], expected: list[str]
    ) -> None:
        hits = loaded.search(name, QUERY, k=10, filters=filters)
        assert [h.id for h in hits] == [i for i in COSINE_ORDER if i in expected]

    @pytest.mark.parametrize(
        ("filters", "expected"),
        [({"rank": 2}, ["b"]), ({"rank": [1, 3]}, ["a", "c"])],
        ids=["int-equality", "int-match-any"],
    )
    def test_int_fields_filter_by_equality(
        self, index: VectorIndex, name: str, filters: dict[str, Any], expected: list[str]
    ) -> None:
        index.ensure_collection(name, DIM)
        payloads = [
            {"rank": 1, "live": True},
            {"rank": 2, "live": False},
            {"rank": 3, "live": True},
        ]
        index.upsert(name, ["a", "b", "c"], np.eye(3, DIM, dtype=np.float32), payloads)
        assert sorted(h.id for h in index.search(name, QUERY, k=10, filters=filters)) == expected

    @pytest.mark.parametrize("k", [7, 100])
    def test_k_larger_than_count_returns_every_point(
        self, loaded: VectorIndex, name: str, k: int
    ) -> None:
        assert [h.id for h in loaded.search(name, QUERY, k=k)] == COSINE_ORDER

    def test_count_follows_upserts_and_deletes(self, index: VectorIndex, name: str) -> None:
        index.ensure_collection(name, DIM)
        assert index.count(name) == 0
        _load(index, name, CHUNKS)
        assert index.count(name) == len(CHUNKS)

    def test_delete_removes_only_the_given_ids(self, loaded: VectorIndex, name: str) -> None:
        loaded.delete(name, ["vidA-c0000", "vidB-c0001", "never-stored"])
        assert loaded.count(name) == len(CHUNKS) - 2
        assert [h.id for h in loaded.search(name, QUERY, k=10)] == [
            i for i in COSINE_ORDER if i not in {"vidA-c0000", "vidB-c0001"}
        ]
        loaded.delete(name, [])
        assert loaded.count(name) == len(CHUNKS) - 2

    def test_has_collection_after_ensure_collection(self, index: VectorIndex, name: str) -> None:
        assert not index.has_collection(name)
        index.ensure_collection(name, DIM, keyword_fields=("domain",))
        index.ensure_collection(
            name, DIM, keyword_fields=("domain", "video_id"), float_fields=("start_s",)
        )
        assert index.has_collection(name)
        assert index.count(name) == 0

    def test_reopen_after_close_keeps_points(
        self, loaded: VectorIndex, name: str, store_path: Path
    ) -> None:
        before = loaded.search(name, QUERY, k=10, filters={"domain": "education"})
        loaded.close()
        with_reopened = self.make_index(store_path)
        try:
            assert with_reopened.has_collection(name)
            assert with_reopened.count(name) == len(CHUNKS)
            after = with_reopened.search(name, QUERY, k=10, filters={"domain": "education"})
            assert [(h.id, h.payload) for h in after] == [(h.id, h.payload) for h in before]
            assert [h.score for h in after] == pytest.approx([h.score for h in before], abs=1e-6)
        finally:
            with_reopened.close()

    def test_points_survive_a_process_killed_right_after_upsert(
        self, tmp_path: Path, name: str, store_path: Path
    ) -> None:
        script = textwrap.dedent(
            f"""
            import os, signal
            import numpy as np
            from tools.index.vectors import open_vector_index
            index = open_vector_index(
                {self.backend!r}, path={str(store_path)!r}, url={SERVER_URL!r} or None
            )
            index.ensure_collection({name!r}, 4, keyword_fields=["domain"])
            index.upsert({name!r}, ["a", "b"], np.eye(2, 4), [{{"domain": "x"}}, {{"domain": "y"}}])
            os.kill(os.getpid(), signal.SIGKILL)
            """
        )
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, timeout=120
        )
        assert done.returncode == -signal.SIGKILL, done.stderr.decode()
        index = self.make_index(store_path)
        try:
            assert index.count(name) == 2
            assert [h.id for h in index.search(name, QUERY, k=5, filters={"domain": "x"})] == ["a"]
        finally:
            index.close()

    @pytest.mark.parametrize("other_dim", [3, 8])
    def test_dimension_mismatch_is_an_index_error(
        self, loaded: VectorIndex, name: str, other_dim: int
    ) -> None:
        wrong = np.ones((1, other_dim), dtype=np.float32)
        with pytest.raises(IndexBackendError, match=name):
            loaded.ensure_collection(name, other_dim)
        with pytest.raises(IndexBackendError, match=name):
            loaded.upsert(name, ["x"], wrong, [{}])
        with pytest.raises(IndexBackendError, match=name):
            loaded.search(name, wrong[0])
        assert loaded.count(name) == len(CHUNKS)

    def test_unknown_collection_is_an_index_error(self, index: VectorIndex) -> None:
        for call in (
            lambda: index.search("missing", QUERY),
            lambda: index.count("missing"),
            lambda: index.delete("missing", ["a"]),
            lambda: index.upsert("missing", ["a"], QUERY[None, :], [{}]),
        ):
            with pytest.raises(IndexBackendError, match="'missing'"):
                call()

    @pytest.mark.parametrize(
        "key",
        [
            "vid123-c0004",
            "7",
            "00000000-0000-0000-0000-000000000001",
            "ünïcode id/with spaces",
            "x" * 300,
        ],
    )
    def test_ids_round_trip(self, index: VectorIndex, name: str, key: str) -> None:
        index.ensure_collection(name, DIM)
        index.upsert(name, [key], QUERY[None, :], [{"n": 1}])
        assert [h.id for h in index.search(name, QUERY, k=3)] == [key]

    def test_payload_round_trips_with_types(self, index: VectorIndex, name: str) -> None:
        payload = {
            "title": "Lecture 3 — entropy",
            "start_s": 30.0,
            "end_s": 59.5,
            "chunk": 4,
            "tags": ["physics", "entropy"],
            "scores": [0.25, 1.5],
            "speakers": {"count": 2, "names": ["ann", "bob"]},
            "reviewed": False,
            "note": None,
        }
        index.ensure_collection(name, DIM)
        index.upsert(name, ["p"], QUERY[None, :], [payload])
        (hit,) = index.search(name, QUERY, k=1)
        assert hit.payload == payload
        assert {k: type(v) for k, v in hit.payload.items()} == {
            k: type(v) for k, v in payload.items()
        }

    def test_numpy_scalars_in_payload_are_stored_as_plain_numbers(
        self, index: VectorIndex, name: str
    ) -> None:
        index.ensure_collection(name, DIM)
        index.upsert(
            name, ["p"], QUERY[None, :], [{"chunk": np.int64(3), "start_s": np.float32(1.5)}]
        )
        assert index.search(name, QUERY, k=1)[0].payload == {"chunk": 3, "start_s": 1.5}

    @pytest.mark.parametrize(
        ("ids", "vectors", "payloads"),
        [
            (["a"], np.ones((2, DIM)), [{}]),
            (["a", "b"], np.ones((2, DIM)), [{}]),
            ([""], np.ones((1, DIM)), [{}]),
            (["a"], np.full((1, DIM), np.nan), [{}]),
            (["a"], np.ones((1, DIM)), [{"blob": object()}]),
            (["a"], np.ones((1, DIM)), [{"score": float("inf")}]),
            (["a"], np.ones((1, DIM)), [{"key": "someone-else"}]),
        ],
        ids=[
            "rows-vs-ids",
            "payloads-vs-ids",
            "empty-id",
            "nan-vector",
            "object-payload",
            "inf-payload",
            "key-clash",
        ],
    )
    def test_bad_upsert_is_an_index_error_and_stores_nothing(
        self,
        index: VectorIndex,
        name: str,
        ids: list[str],
        vectors: np.ndarray,
        payloads: list[dict[str, Any]],
    ) -> None:
        index.ensure_collection(name, DIM)
        with pytest.raises(IndexBackendError, match=name):
            index.upsert(name, ids, vectors, payloads)
        assert index.count(name) == 0

    @pytest.mark.parametrize(
        "filters",
        [
            {"start_s": 30.0},
            {"start_s": {"between": [1, 2]}},
            {"start_s": {}},
            {"start_s": {"gte": "ten"}},
            {"video_id": ["vidA", 3]},
            {"video_id": None},
            {"reviewed": True},
        ],
        ids=[
            "float-equality",
            "unknown-op",
            "empty-range",
            "string-bound",
            "mixed-any",
            "none",
            "bool",
        ],
    )
    def test_unsupported_filter_is_an_index_error(
        self, loaded: VectorIndex, name: str, filters: dict[str, Any]
    ) -> None:
        with pytest.raises(IndexBackendError, match=name):
            loaded.search(name, QUERY, filters=filters)

    @pytest.mark.parametrize("bad_name", ["", "../escape", "a b", "x" * 65])
    def test_unsafe_collection_name_is_an_index_error(
        self, index: VectorIndex, bad_name: str
    ) -> None:
        with pytest.raises(IndexBackendError, match="collection name"):
            index.ensure_collection(bad_name, DIM)

    def test_second_opener_of_the_same_path_is_refused_until_close(
        self, loaded: VectorIndex, name: str, store_path: Path
    ) -> None:
        if not self.single_process:
            pytest.skip(f"{self.backend} serves many clients at once")

        def open_and_touch() -> None:
            second = self.make_index(store_path)
            try:
                second.count(name)  # qdrant-edge opens a shard on first use
            finally:
                second.close()

        with pytest.raises(IndexBackendError, match="close"):
            open_and_touch()
        loaded.close()
        open_and_touch()

    def test_closed_index_refuses_calls(self, loaded: VectorIndex, name: str) -> None:
        loaded.close()
        loaded.close()
        with pytest.raises(IndexBackendError, match="closed"):
            loaded.count(name)


class TestQdrantLocal(VectorIndexContract):
    """qdrant_client local mode (pure Python, SQLite-backed)."""

    backend = "qdrant-local"


class TestQdrantEdge(VectorIndexContract):
    """qdrant-edge shards with the default (tuned) settings."""

    backend = "qdrant-edge"


if SERVER_URL:
    # Defined only where a server is named, so that the whole contract is one skip, not fifty.

    class TestQdrantServer(VectorIndexContract):
        """A real Qdrant server."""

        backend = "qdrant-server"
        single_process = False


def test_qdrant_server_contract_runs_where_a_server_is_named() -> None:
    if not SERVER_URL:
        pytest.skip(
            "no Qdrant server here (none installs offline): set "
            "PLAYLISTEVAL_TEST_QDRANT_URL=http://host:6333 to run the contract against one"
        )
    assert "TestQdrantServer" in globals()


def _clustered(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    centres = rng.normal(size=(8, dim))
    rows = centres[rng.integers(8, size=n)] + 0.3 * rng.normal(size=(n, dim))
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


def test_edge_search_through_the_hnsw_graph_matches_an_exact_scan(tmp_path: Path) -> None:
    """After the automatic optimize, graph search (filtered or not) finds the exact top 10."""
    rng = np.random.default_rng(7)
    vectors, queries = _clustered(rng, 1500, 16), _clustered(rng, 20, 16)
    groups = rng.integers(5, size=len(vectors))
    ids = [f"p{i}" for i in range(len(vectors))]
    payloads = [{"group": f"g{g}"} for g in groups]
    # Tiny thresholds so even 1500 points get an HNSW graph and searches go through it.
    index = QdrantEdgeIndex(
        tmp_path, indexing_threshold_kb=1, full_scan_threshold_kb=1, optimize_every=1000
    )
    try:
        index.ensure_collection("c", 16, keyword_fields=("group",))
        index.upsert("c", ids[:750], vectors[:750], payloads[:750])
        assert index.indexed_vectors("c") == 0
        index.upsert("c", ids[750:], vectors[750:], payloads[750:])
        assert index.indexed_vectors("c") > 0
        recalls = []
        for i, q in enumerate(queries):
            group = i % 5
            rows = np.flatnonzero(groups == group)
            exact = {ids[r] for r in rows[np.argsort(-(vectors[rows] @ q))[:10]]}
            found = {h.id for h in index.search("c", q, k=10, filters={"group": f"g{group}"})}
            recalls.append(len(found & exact) / 10)
            exact_all = {ids[r] for r in np.argsort(-(vectors @ q))[:10]}
            recalls.append(len({h.id for h in index.search("c", q, k=10)} & exact_all) / 10)
        assert np.mean(recalls) >= 0.95
        assert index.count("c") == len(vectors)
    finally:
        index.close()


def test_point_uuid_is_deterministic_and_distinct() -> None:
    assert point_uuid("vid123-c0004") == point_uuid("vid123-c0004")
    assert point_uuid("vid123-c0004") != point_uuid("vid123-c0005")
    assert uuid.UUID(point_uuid("x")).version == 5


@pytest.mark.parametrize(
    ("backend", "kwargs"),
    [
        ("qdrant-edge", {}),
        ("qdrant-local", {}),
        ("qdrant-server", {}),
        ("faiss", {"path": Path("/tmp")}),
    ],
    ids=["edge-no-path", "local-no-path", "server-no-url", "unknown-backend"],
)
def test_open_vector_index_refuses_incomplete_settings(
    backend: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError, match=repr(backend) if backend == "faiss" else "needs"):
        open_vector_index(backend, **kwargs)


def test_unreachable_server_is_an_index_error() -> None:
    with socket.socket() as sock:  # a port that was just free, so nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(IndexBackendError, match="unreachable"):
        open_vector_index("qdrant-server", url=f"http://127.0.0.1:{port}")
