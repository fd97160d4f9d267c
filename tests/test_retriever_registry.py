"""One retriever registry (``tools.evidence.retrieval.RETRIEVERS``): a name a condition gives is
built
from it alike by ``playlisteval eval`` and by the judgments viewer's rebuilt prompts; an unknown
name is refused with the known ones; each retriever is built once, the hybrid from the set's
own BM25 and text retrievers, and the index's search only opened for an embedding one."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from playlisteval import runs
from playlisteval.app import App
from playlisteval.settings import load_settings
from playlisteval.ui.benchmark import load_benchmark
from playlisteval.ui.judgments import PromptRebuilder, load_evaluations
from store.errors import ConfigError
from tests.test_ui import CELLS, write_benchmark
from tools.evidence.retrieval import (
    RETRIEVERS,
    BM25Retriever,
    ChunkHit,
    HybridRetriever,
    MultimodalRetriever,
    Retriever,
    RetrieverSet,
    TextEmbeddingRetriever,
    chunk_id,
)
from tools.evidence.search import ChunkSearch


def test_the_registry_names_the_four_retrievers_conditions_use() -> None:
    assert sorted(RETRIEVERS) == ["bm25", "hybrid", "multimodal", "text"]


def test_an_unknown_retriever_is_refused_with_the_known_ones(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        found = RetrieverSet(app.catalog, app.search)
        with pytest.raises(ConfigError) as refused:
            found.retriever("bm52")
        assert "bm52" not in found
        assert found.get("bm52") is None  # a mapping's lookup: None, nothing built
    message = str(refused.value)
    assert "'bm52'" in message
    assert "['bm25', 'hybrid', 'multimodal', 'text']" in message


def test_each_retriever_is_built_once_and_the_hybrid_fuses_the_sets_own(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        opened: list[ChunkSearch] = []

        def search() -> ChunkSearch:
            opened.append(app.search())
            return opened[-1]

        found = RetrieverSet(app.catalog, search)
        bm25 = found["bm25"]
        assert isinstance(bm25, BM25Retriever)
        assert opened == []  # BM25 reads transcripts only: the index is not opened
        hybrid = found["hybrid"]
        assert isinstance(hybrid, HybridRetriever)
        assert hybrid.lexical is bm25
        assert hybrid.embedding is found["text"]
        assert isinstance(found["text"], TextEmbeddingRetriever)
        assert isinstance(found["multimodal"], MultimodalRetriever)
        assert found["bm25"] is bm25
        assert len(opened) == 1  # one search for every embedding retriever
        assert found.search() is opened[0]


class FirstChunks(Retriever):
    """A retriever of a test's own: the first chunk of each haystack video, score 1."""

    name = "first-chunks"

    def rank_chunks(self, question: str, haystack: Collection[str], limit: int) -> list[ChunkHit]:
        """Each video's first 30 seconds, in video order."""
        return [ChunkHit(chunk_id(v, 0), v, 0.0, 30.0, 1.0) for v in sorted(haystack)][:limit]


def test_eval_and_the_viewer_build_a_conditions_retriever_from_the_one_registry(
    workspace: Path, demo_playlist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retriever added to the registry alone: `playlisteval eval` records its spans, and the
    viewer rebuilds each judgment's request with it, exactly as the log holds it."""
    monkeypatch.setitem(RETRIEVERS, "first", lambda made: FirstChunks(made.catalog, 30.0))
    bench = write_benchmark(tmp_path / "bench", demo_playlist, CELLS[:1])
    out = tmp_path / "eval"
    condition = "retrieved:first:frames+transcript:1h:4"
    with App(load_settings(workspace)) as app:
        result = runs.evaluate(app, bench, ["offline-frames"], out, [condition])
        assert not result.failures, result.failures
        assert len(result.records) == 2
        for record in result.records:
            assert record.retrieved_spans
            assert {(s.start_s, s.end_s, s.score) for s in record.retrieved_spans} == {
                (0.0, 30.0, 1.0)
            }
        benchmark = load_benchmark(bench)
        (evaluation,) = load_evaluations([out], benchmark).values()
        rebuilder = PromptRebuilder(app)
        pair = benchmark.pairs[result.records[0].pair_id]
        for record in result.records:
            view = rebuilder.order_view(evaluation, pair, record)
            assert view.error == ""
            assert view.prompt is not None
            assert view.prompt.matches, view.prompt.note
