"""The agents' search tool: text queries over the chunk index, with the indexing embedder."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools.contracts.roles import cite
from tools.index.embeddings import Embedder
from tools.index.vectors import VectorIndex


class CitedSpan:
    """A found span of a video that cites itself as the gold answers do: a base for the frozen
    dataclasses that carry ``video_id``, ``start_s`` and ``end_s`` (a search hit, a retrieved
    span), so the citation is written once."""

    video_id: str
    start_s: float
    end_s: float

    def citation(self) -> str:
        """The span as the gold answers cite it: ``(video-id @ MM:SS–MM:SS)``."""
        return cite(self.video_id, self.start_s, self.end_s)


@dataclass(frozen=True)
class SearchHit(CitedSpan):
    """One chunk found by a query."""

    chunk_id: str
    video_id: str
    domain: str
    start_s: float
    end_s: float
    score: float
    transcript: str


class ChunkSearch:
    """``search(query, k, filters)`` over the chunk collection."""

    def __init__(self, vectors: VectorIndex, embedder: Embedder, collection: str) -> None:
        self.vectors = vectors
        self.embedder = embedder
        self.collection = collection

    def search(
        self, query: str, k: int = 10, filters: Mapping[str, Any] | None = None
    ) -> list[SearchHit]:
        """The ``k`` chunks closest to ``query``; ``filters`` as ``VectorIndex.search`` takes."""
        vector = self.embedder.embed_query(query)
        hits = self.vectors.search(self.collection, vector, k=k, filters=filters)
        return [
            SearchHit(
                chunk_id=hit.id,
                video_id=str(hit.payload.get("video_id", "")),
                domain=str(hit.payload.get("domain", "")),
                start_s=float(hit.payload.get("start_s", 0.0)),
                end_s=float(hit.payload.get("end_s", 0.0)),
                score=hit.score,
                transcript=str(hit.payload.get("transcript", "")),
            )
            for hit in hits
        ]
