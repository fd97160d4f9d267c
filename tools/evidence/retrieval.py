"""Retrievers for retrieval judges: find the evidence spans for a question inside a haystack.

A judge that retrieves gets a question and a *haystack*, a set of videos of one playlist or
domain (:func:`build_haystack`), and asks a retriever for the top-k spans to look at. Every
retriever ranks the haystack's 30-second chunks and then turns the best chunks into
segment-level spans (:func:`spans_from_hits`): a window of ``window_s`` seconds around each good
chunk (by default the median segment length of the index), overlapping or touching windows of one
video merged into one span that keeps its best chunk's score.

* :class:`BM25Retriever`: Okapi BM25 (k1 1.5, b 0.75) over the chunk transcripts of the catalogue.
* :class:`TextEmbeddingRetriever`: the question through the embedder's text side
  (:meth:`tools.index.embeddings.Embedder.embed_query`) against the chunk vectors of the index,
  through
  :class:`tools.evidence.search.ChunkSearch`.
* :class:`MultimodalRetriever`: the question against the multimodal chunk vectors (frames and
  transcript fused). With the offline embedder it coincides with the text retriever; see there.
* :class:`HybridRetriever`: reciprocal-rank fusion (k 60) of BM25 and an embedding retriever.

The names evaluation conditions give them (``bm25``, ``text``, ``multimodal``, ``hybrid``) are one
table, :data:`RETRIEVERS`; a :class:`RetrieverSet` builds them from it over one catalogue and
index, for ``playlisteval eval`` and the UI's rebuilt prompts alike.

Everything that decides (tokenizing, BM25 scores, fusion, windows, haystack choice) is a pure
function over plain data; the retrievers only read the catalogue and the vector index.
"""

from __future__ import annotations

import random
import re
import statistics
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

import bm25s
import numpy as np
import numpy.typing as npt

from store.catalog import DUPLICATE, INDEXED, Catalog, VideoRow
from store.errors import ConfigError
from tools.evidence.search import ChunkSearch, CitedSpan

__all__ = [
    "RETRIEVERS",
    "BM25Index",
    "BM25Retriever",
    "ChunkHit",
    "Haystack",
    "HybridRetriever",
    "MultimodalRetriever",
    "RetrievedSpan",
    "Retriever",
    "RetrieverFactory",
    "RetrieverSet",
    "TextEmbeddingRetriever",
    "build_haystack",
    "chunk_id",
    "index_segment_length",
    "reciprocal_rank_fusion",
    "spans_from_hits",
    "tokenize",
]

RRF_K = 60
# Chunks fetched per wanted span before the first aggregation; doubled while spans are missing.
_HITS_PER_SPAN = 8
# Haystacks whose BM25 index a retriever keeps (a run asks many questions of few haystacks).
_BM25_CACHE = 8

FloatArray = npt.NDArray[np.float64]


# ---------------------------------------------------------------------------------------------
# Plain results


@dataclass(frozen=True)
class ChunkHit:
    """One ranked chunk: where it is and how well it matched (higher is better)."""

    chunk_id: str
    video_id: str
    start_s: float
    end_s: float
    score: float


@dataclass(frozen=True)
class RetrievedSpan(CitedSpan):
    """A segment-level span handed to a judge: ``[start_s, end_s)`` of ``video_id``."""

    video_id: str
    start_s: float
    end_s: float
    score: float


def chunk_id(video_id: str, idx: int) -> str:
    """A chunk's id as the index stores it (``tools.index.indexer.chunk_point_id``)."""
    return f"{video_id}-c{idx:05d}"


# ---------------------------------------------------------------------------------------------
# BM25

_APOSTROPHES = re.compile(r"['’]")
_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased words with punctuation stripped: ``"Don't STOP—now!"`` → dont, stop, now.

    Apostrophes vanish inside a word (so *don't* matches *dont*); every other punctuation mark or
    symbol separates words, so *3D-printer* is *3d* and *printer*.
    """
    return _WORD.findall(_APOSTROPHES.sub("", text.casefold()))


class BM25Index:
    """Okapi BM25 over tokenized documents: ``bm25s`` with Lucene's variant.

    ``score(d, q) = Σ_t idf(t) · tf / (tf + k1·(1 − b + b·|d| / avgdl))`` summed over the distinct
    terms ``t`` of the query, with Lucene's ``idf(t) = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))``,
    which stays positive for terms in more than half of the documents (the classic Robertson idf
    goes negative there and would punish a chunk for containing a common word). This is
    Lucene 8's form, without the constant ``(k1 + 1)`` of the numerator: the ranking is the
    textbook one (our own implementation, checked against this one before it was removed,
    differed only by that factor and float32 rounding).
    """

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75):
        """Index ``documents`` (each a list of tokens); ``k1`` and ``b`` as in the formula."""
        if k1 < 0 or not 0 <= b <= 1:
            raise ConfigError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}")
        self.k1, self.b = k1, b
        self.size = len(documents)
        self._terms: set[str] = {term for doc in documents for term in doc}
        self._bm25: bm25s.BM25 | None = None
        if self._terms:
            self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
            self._bm25.index([list(doc) for doc in documents], show_progress=False)

    def scores(self, query: Sequence[str]) -> FloatArray:
        """One score per document, in document order (0 where no query term occurs)."""
        terms = [t for t in dict.fromkeys(query) if t in self._terms]
        if self._bm25 is None or not terms:
            return np.zeros(self.size, dtype=np.float64)
        return np.asarray(self._bm25.get_scores(terms), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Fusion and spans


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = RRF_K
) -> list[tuple[str, float]]:
    """Fuse ranked lists of ids: ``score(id) = Σ 1 / (k + rank)``, rank counted from 1.

    An id missing from a list gets nothing from it; a repeated id counts at its first rank.
    Best first; equal scores in id order, so the result never depends on dict order.
    """
    if k < 0:
        raise ConfigError(f"reciprocal-rank fusion needs k >= 0, got {k!r}; the usual k is 60")
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(dict.fromkeys(ranking), start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def _window(hit: ChunkHit, window_s: float, duration_s: float | None) -> tuple[float, float]:
    """``window_s`` seconds centred on the chunk, shifted to lie inside the video; never
    narrower than the chunk itself."""
    if window_s <= hit.end_s - hit.start_s:
        return hit.start_s, hit.end_s
    last = None if duration_s is None else max(duration_s, hit.end_s)
    centre = (hit.start_s + hit.end_s) / 2.0
    start, end = centre - window_s / 2.0, centre + window_s / 2.0
    if last is not None and end > last:
        start, end = start - (end - last), last
    if start < 0.0:
        start, end = 0.0, end - start
        if last is not None:
            end = min(end, last)
    return start, end


def spans_from_hits(
    hits: Sequence[ChunkHit],
    k: int,
    window_s: float,
    durations: Mapping[str, float | None],
) -> list[RetrievedSpan]:
    """The ``k`` best spans from chunk hits ranked best first.

    Each hit becomes a window of ``window_s`` seconds around its chunk, kept inside
    ``[0, duration]`` (``durations`` by video id; unknown means no upper bound). Hits are taken
    best first: a window that overlaps or touches spans of its video merges with them (the span
    keeps its best chunk's score), any other window opens a new span. Taking stops once ``k``
    spans are open, so a span only ever holds chunks ranked above the k-th span's best one and
    weak hits cannot stretch it. Spans come best first, equal scores by video id and start.
    """
    if k <= 0:
        return []
    spans: list[tuple[str, float, float, float]] = []
    for hit in hits:
        start, end = _window(hit, window_s, durations.get(hit.video_id))
        score = hit.score
        apart: list[tuple[str, float, float, float]] = []
        for span in spans:
            video_id, other_start, other_end, other_score = span
            if video_id == hit.video_id and other_start <= end and start <= other_end:
                start, end = min(start, other_start), max(end, other_end)
                score = max(score, other_score)
            else:
                apart.append(span)
        spans = [*apart, (hit.video_id, start, end, score)]
        if len(spans) >= k:
            break
    ordered = sorted(spans, key=lambda s: (-s[3], s[0], s[1]))
    return [RetrievedSpan(v, start, end, score) for v, start, end, score in ordered]


def index_segment_length(catalog: Catalog) -> float | None:
    """The median length in seconds of the catalogue's segments (None when there are none)."""
    lengths = [s.end_s - s.start_s for s in catalog.segments()]
    return float(statistics.median(lengths)) if lengths else None


# ---------------------------------------------------------------------------------------------
# Retrievers


class Retriever(ABC):
    """Ranks a haystack's chunks for a question and hands back segment-level spans.

    Subclasses say how chunks are ranked (:meth:`rank_chunks`); :meth:`retrieve` turns the
    ranking into spans with :func:`spans_from_hits`. ``window_s=None`` takes the median segment
    length of the index (:func:`index_segment_length`), or the chunk itself when there are no
    segments yet.
    """

    name: str

    def __init__(self, catalog: Catalog, window_s: float | None = None) -> None:
        """Read video durations (and the default window) from ``catalog``."""
        if window_s is not None and not window_s >= 0:
            raise ConfigError(f"window_s={window_s!r} must be a number of seconds >= 0")
        self.catalog = catalog
        self._window_s = window_s
        self._durations: dict[str, float | None] = {}

    @property
    def window_s(self) -> float:
        """Length of the window put around each good chunk, in seconds."""
        if self._window_s is None:
            self._window_s = index_segment_length(self.catalog) or 0.0
        return self._window_s

    @abstractmethod
    def rank_chunks(self, question: str, haystack: Collection[str], limit: int) -> list[ChunkHit]:
        """Up to ``limit`` chunks of the haystack's videos, best first."""

    def retrieve(self, question: str, haystack: Collection[str], k: int = 5) -> list[RetrievedSpan]:
        """The ``k`` best spans for ``question`` inside the videos ``haystack``, best first."""
        if k <= 0 or not haystack:
            return []
        limit = _HITS_PER_SPAN * k
        while True:
            hits = self.rank_chunks(question, haystack, limit)
            spans = spans_from_hits(hits, k, self.window_s, self._durations_of(hits))
            # Fewer hits than asked for means the ranking is exhausted: no deeper look helps.
            if len(spans) >= k or len(hits) < limit:
                return spans
            limit *= 2

    def _durations_of(self, hits: Sequence[ChunkHit]) -> dict[str, float | None]:
        for video_id in {hit.video_id for hit in hits} - set(self._durations):
            video = self.catalog.video(video_id)
            self._durations[video_id] = video.duration_s if video is not None else None
        return self._durations


@dataclass(frozen=True)
class _Chunks:
    """The chunks of one video as BM25 sees them."""

    hits: tuple[ChunkHit, ...]  # score 0: a template for the ranked hit
    tokens: tuple[tuple[str, ...], ...]


class BM25Retriever(Retriever):
    """BM25 (k1 1.5, b 0.75) over the chunk transcripts of the haystack's videos.

    Document frequencies and the mean length are those of the haystack, the collection a judge
    searches. Transcripts come from the catalogue; videos dropped as near-duplicates are skipped,
    as the indexer removed them from the vector index too, so every retriever sees the same
    chunks. Chunks with no query word (score 0) are never returned. A video's transcripts are
    read once per retriever and the index of each of the last few haystacks is kept, so make a
    new retriever after re-indexing.
    """

    name = "bm25"

    def __init__(
        self,
        catalog: Catalog,
        window_s: float | None = None,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        """BM25 over ``catalog``'s transcripts with the given parameters."""
        super().__init__(catalog, window_s)
        BM25Index([], k1=k1, b=b)  # refuses bad parameters now rather than at the first query
        self.k1, self.b = k1, b
        self._videos: dict[str, _Chunks] = {}
        self._indexes: dict[frozenset[str], tuple[list[ChunkHit], BM25Index]] = {}

    def _video_chunks(self, video_id: str) -> _Chunks:
        cached = self._videos.get(video_id)
        if cached is None:
            video = self.catalog.video(video_id)
            rows = (
                [] if video is None or video.status == DUPLICATE else self.catalog.chunks(video_id)
            )
            cached = _Chunks(
                hits=tuple(
                    ChunkHit(chunk_id(video_id, r.idx), video_id, r.start_s, r.end_s, 0.0)
                    for r in rows
                ),
                tokens=tuple(tuple(tokenize(r.transcript)) for r in rows),
            )
            self._videos[video_id] = cached
        return cached

    def _index(self, haystack: Collection[str]) -> tuple[list[ChunkHit], BM25Index]:
        key = frozenset(haystack)
        cached = self._indexes.get(key)
        if cached is None:
            chunks: list[ChunkHit] = []
            documents: list[Sequence[str]] = []
            for video_id in sorted(key):
                video = self._video_chunks(video_id)
                chunks.extend(video.hits)
                documents.extend(video.tokens)
            cached = chunks, BM25Index(documents, k1=self.k1, b=self.b)
            if len(self._indexes) >= _BM25_CACHE:
                self._indexes.pop(next(iter(self._indexes)))
            self._indexes[key] = cached
        return cached

    def rank_chunks(self, question: str, haystack: Collection[str], limit: int) -> list[ChunkHit]:
        """The haystack's chunks by BM25 score, best first; ties in chunk order."""
        chunks, index = self._index(haystack)
        scores = index.scores(tokenize(question))
        order = np.argsort(-scores, kind="stable")[: max(limit, 0)]
        ranked: list[ChunkHit] = []
        for row in order:
            if scores[row] <= 0.0:
                break  # no query word in this chunk or any after it
            chunk = chunks[row]
            ranked.append(
                ChunkHit(
                    chunk.chunk_id, chunk.video_id, chunk.start_s, chunk.end_s, float(scores[row])
                )
            )
        return ranked


class TextEmbeddingRetriever(Retriever):
    """The question embedded with the embedder's text side, against the index's chunk vectors.

    ``search`` is :class:`tools.evidence.search.ChunkSearch` over the chunk collection; the
    haystack is a
    ``video_id`` filter on it. Scores are cosines. With the offline ``minilm-text+frame-stats``
    embedder a query is ``(MiniLM text vector, zeros)``, so its cosine with a chunk is
    ``w_text`` × the transcript cosine: a pure transcript ranking for every chunk with frames.
    """

    name = "text-embedding"

    def __init__(self, catalog: Catalog, search: ChunkSearch, window_s: float | None = None):
        """Search ``search``'s chunk collection; durations and window from ``catalog``."""
        super().__init__(catalog, window_s)
        self.search = search

    def rank_chunks(self, question: str, haystack: Collection[str], limit: int) -> list[ChunkHit]:
        """The haystack's chunks by cosine with the question, best first."""
        if limit <= 0 or not haystack:
            return []
        found = self.search.search(question, k=limit, filters={"video_id": sorted(haystack)})
        return [ChunkHit(h.chunk_id, h.video_id, h.start_s, h.end_s, h.score) for h in found]


class MultimodalRetriever(TextEmbeddingRetriever):
    """The question against the multimodal chunk vectors (frames and transcript in one vector).

    The index holds one vector per chunk, and it is the multimodal one: ``minilm-text+frame-stats``
    fuses the transcript's MiniLM vector with frame statistics, Qwen3-VL-Embedding embeds frames
    and transcript together. A question is text, so it goes through ``embed_query`` exactly as in
    :class:`TextEmbeddingRetriever`. **With the offline embedder the two retrievers coincide**:
    same collection, same query vector, same spans (the query has no frame part, so the frame
    statistics never move a score). They differ only when ``search`` is given a different
    collection or embedder, e.g. a workspace indexed with Qwen3-VL-Embedding, whose chunk vectors
    are not a transcript vector plus something else.
    """

    name = "multimodal-embedding"


class HybridRetriever(Retriever):
    """Reciprocal-rank fusion (k 60) of a lexical and an embedding ranking of the chunks.

    Each side ranks ``depth`` chunks (or more when more are asked for); a chunk's score is
    ``Σ 1 / (k + rank)`` over the sides that found it (:func:`reciprocal_rank_fusion`).
    """

    name = "hybrid"

    def __init__(
        self,
        lexical: Retriever,
        embedding: Retriever,
        *,
        rrf_k: int = RRF_K,
        depth: int = 100,
        window_s: float | None = None,
    ) -> None:
        """Fuse ``lexical`` (BM25) and ``embedding``; the catalogue is the lexical side's."""
        super().__init__(lexical.catalog, window_s)
        if rrf_k < 0 or depth < 1:
            raise ConfigError(f"rrf_k={rrf_k!r} must be >= 0 and depth={depth!r} at least 1")
        self.lexical, self.embedding = lexical, embedding
        self.rrf_k, self.depth = rrf_k, depth

    def rank_chunks(self, question: str, haystack: Collection[str], limit: int) -> list[ChunkHit]:
        """The fused ranking, best first; scores are RRF sums."""
        if limit <= 0:
            return []
        depth = max(limit, self.depth)
        sides = [
            self.lexical.rank_chunks(question, haystack, depth),
            self.embedding.rank_chunks(question, haystack, depth),
        ]
        where = {hit.chunk_id: hit for side in sides for hit in side}
        fused = reciprocal_rank_fusion([[h.chunk_id for h in side] for side in sides], self.rrf_k)
        return [
            ChunkHit(key, where[key].video_id, where[key].start_s, where[key].end_s, score)
            for key, score in fused[:limit]
        ]


# ---------------------------------------------------------------------------------------------
# The retrievers by name


RetrieverFactory = Callable[["RetrieverSet"], Retriever]
"""Builds one named retriever from a :class:`RetrieverSet`: its ``catalog``, its ``search()``
and the set's other retrievers (the hybrid fuses two of them)."""

#: The retrievers an evaluation condition may name (``retrieved:<name>:…``), each built over the
#: catalogue and the index's chunk search; the hybrid fuses the set's own BM25 and text ones.
RETRIEVERS: Mapping[str, RetrieverFactory] = {
    "bm25": lambda made: BM25Retriever(made.catalog),
    "text": lambda made: TextEmbeddingRetriever(made.catalog, made.search()),
    "multimodal": lambda made: MultimodalRetriever(made.catalog, made.search()),
    "hybrid": lambda made: HybridRetriever(made["bm25"], made["text"]),
}


class RetrieverSet(Mapping[str, Retriever]):
    """Every retriever of :data:`RETRIEVERS` over one catalogue and index, by name.

    Each is built when first asked for and then kept, so the hybrid shares the BM25 and text
    retrievers (and their caches) the set hands out under those names, and a set that is never
    asked for an embedding retriever never calls ``search`` (which opens the index and its
    embedder). Building is guarded by a lock: view threads may ask at once.
    """

    def __init__(self, catalog: Catalog, search: Callable[[], ChunkSearch]) -> None:
        """Retrievers over ``catalog``; ``search`` makes the index's chunk search (called once,
        when an embedding retriever is first built)."""
        self.catalog: Catalog = catalog
        self._make_search = search
        self._search: ChunkSearch | None = None
        self._built: dict[str, Retriever] = {}
        self._lock = threading.RLock()  # reentrant: the hybrid builds its sides inside

    def search(self) -> ChunkSearch:
        """The index's chunk search, made on first use."""
        with self._lock:
            if self._search is None:
                self._search = self._make_search()
            return self._search

    def retriever(self, name: str) -> Retriever:
        """The retriever ``name``, built now if it was not yet; :class:`ConfigError` naming the
        known retrievers for a name that is none of them."""
        factory = RETRIEVERS.get(name)
        if factory is None:
            raise ConfigError(
                f"no retriever is called {name!r}; the retrievers are {sorted(RETRIEVERS)!r}"
            )
        with self._lock:
            if name not in self._built:
                self._built[name] = factory(self)
            return self._built[name]

    def __getitem__(self, name: str) -> Retriever:
        """The retriever ``name`` (``KeyError`` for an unknown name, as a mapping's lookup)."""
        if name not in RETRIEVERS:
            raise KeyError(name)
        return self.retriever(name)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a retriever's name (nothing is built to tell)."""
        return name in RETRIEVERS

    def __iter__(self) -> Iterator[str]:
        """The retrievers' names."""
        return iter(RETRIEVERS)

    def __len__(self) -> int:
        """How many retrievers there are."""
        return len(RETRIEVERS)


# ---------------------------------------------------------------------------------------------
# Haystacks


@dataclass(frozen=True)
class Haystack:
    """The videos a judge searches, and how many hours they hold.

    ``hours`` is what was reached: less than ``hours_requested`` when the playlists and domains
    of the evidence hold no more video, more when the evidence videos alone already pass it.
    ``exhausted`` says that every eligible video is in, so a larger ``hours`` changes nothing.
    """

    video_ids: tuple[str, ...]  # sorted
    evidence_video_ids: tuple[str, ...]  # sorted
    hours_requested: float
    hours: float
    exhausted: bool
    seed: int


def build_haystack(
    catalog: Catalog, evidence_video_ids: Collection[str], hours: float, seed: int
) -> Haystack:
    """Videos of the evidence's playlists and domains totalling about ``hours``, evidence included.

    The evidence videos are always in. The other indexed videos are taken in a fixed order:
    those of the evidence's playlists first, then the rest of the evidence's domains, each group
    shuffled by ``seed`` (from id order, so the catalogue's row order never matters). They are
    added while the next one brings the total closer to ``hours`` than stopping would, so the
    result is within half a video of the target unless the data runs out. Because it is a
    prefix of one order, a larger ``hours`` with the same seed gives a superset.
    """
    if not evidence_video_ids:
        raise ConfigError("build_haystack needs at least one evidence video id")
    if not hours >= 0:
        raise ConfigError(f"hours={hours!r} must be a number >= 0")
    evidence: list[VideoRow] = []
    for video_id in sorted(set(evidence_video_ids)):
        video = catalog.video(video_id)
        if video is None:
            raise ConfigError(
                f"evidence video {video_id!r} is not in the catalogue: evaluate with the --home "
                "of the workspace the benchmark was made from (or add and index its playlist)"
            )
        evidence.append(video)
    playlists = {v.playlist_id for v in evidence}
    domains = {v.domain for v in evidence}
    taken = {v.id for v in evidence}
    same_playlist: list[VideoRow] = []
    same_domain: list[VideoRow] = []
    for video in sorted(catalog.videos(statuses=[INDEXED]), key=lambda v: v.id):
        if video.id in taken or video.domain not in domains or not video.duration_s:
            continue
        (same_playlist if video.playlist_id in playlists else same_domain).append(video)
    rng = random.Random(seed)
    rng.shuffle(same_playlist)
    rng.shuffle(same_domain)

    target_s = hours * 3600.0
    total_s = sum(v.duration_s or 0.0 for v in evidence)
    candidates = same_playlist + same_domain
    chosen = 0
    for video in candidates:
        length = video.duration_s or 0.0
        if total_s + length / 2.0 >= target_s:
            break
        total_s += length
        chosen += 1
    video_ids = sorted(taken | {v.id for v in candidates[:chosen]})
    return Haystack(
        video_ids=tuple(video_ids),
        evidence_video_ids=tuple(sorted(taken)),
        hours_requested=hours,
        hours=total_s / 3600.0,
        exhausted=chosen == len(candidates),
        seed=seed,
    )
