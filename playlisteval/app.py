"""The composition root: builds the parts from the settings and hands them out.

Nothing below ``playlisteval`` reads settings; this module turns them into plain parameters.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic_ai.models import Model

from agents.coordinator import LoopPolicy
from agents.curation import CurationConfig, CurationProgress, Curator
from agents.workers import GenerationLimits, RoleModels
from playlisteval.settings import Settings
from playlisteval.workspace import Workspace
from policies.attempts import DEFAULT_GATES, gate_order
from policies.prices import PriceTable
from store.catalog import Catalog
from store.errors import ConfigError
from store.eventstore import EventStore, open_event_store
from store.projections import Projections
from tools.clips import ClipFetcher
from tools.embeddings import Embedder, make_embedder
from tools.indexer import IndexConfig, Indexer, IndexProgress
from tools.search import ChunkSearch
from tools.transcripts import Transcriber, make_transcriber
from tools.vectors import VectorIndex, open_vector_index


def index_config(settings: Settings) -> IndexConfig:
    """The pipeline's numbers, from the settings."""
    idx, seeds = settings.index, settings.seeds
    return IndexConfig(
        chunk_s=idx.chunk_seconds,
        segment_min_s=idx.segment_min_minutes * 60.0,
        segment_target_s=idx.segment_target_minutes * 60.0,
        segment_max_s=idx.segment_max_minutes * 60.0,
        frame_fps=idx.frame_fps,
        frame_max_height=idx.frame_max_height,
        audio_rate=idx.audio_rate,
        duplicate_cosine=seeds.duplicate_cosine,
        seed_min_cosine=seeds.seed_min_cosine,
        seed_max_cosine=seeds.seed_max_cosine,
        batch_chunks=idx.embed_batch_size,
        collection_prefix=settings.vectors.collection_prefix,
        max_download_height=settings.ingest.max_height,
        subtitle_langs=tuple(settings.ingest.subtitle_langs),
    )


def build_embedder(settings: Settings) -> Embedder:
    """The configured chunk embedder."""
    idx = settings.index
    if idx.embedder == "qwen3-vl-embedding":
        return make_embedder(idx.embedder, model=idx.qwen_embedding_model)
    return make_embedder(idx.embedder)


def build_transcriber(settings: Settings) -> Transcriber:
    """The configured transcript backend (``auto``: captions, else the local backend)."""
    idx = settings.index
    options: dict[str, Any] = {}

    def local(name: str) -> Transcriber:
        if name == "faster-whisper":
            if idx.whisper_model_dir is None:
                raise ConfigError(
                    "index.transcriber 'faster-whisper' needs index.whisper_model_dir: "
                    "a CTranslate2 Whisper model folder"
                )
            return make_transcriber(name, model_dir=idx.whisper_model_dir)
        if name == "qwen3-asr":
            return make_transcriber(name, model=idx.qwen_asr_model)
        return make_transcriber(name, **options)

    if idx.transcriber == "auto":
        return make_transcriber("auto", fallback=local(idx.local_transcriber))
    return local(idx.transcriber)


def open_vectors(settings: Settings, workspace: Workspace) -> VectorIndex:
    """The configured Qdrant backend."""
    vec = settings.vectors
    if vec.backend == "qdrant-server":
        if not vec.url:
            raise ConfigError("vectors.backend 'qdrant-server' needs vectors.url")
        return open_vector_index(vec.backend, url=vec.url, api_key=os.environ.get(vec.api_key_env))
    return open_vector_index(vec.backend, path=workspace.vectors / vec.backend)


def loop_policy(settings: Settings) -> LoopPolicy:
    """The loop's numbers and gate order (cheap first) from the settings and the policy data."""
    gen = settings.generation
    return LoopPolicy(
        max_attempts=gen.max_attempts,
        phase2_rejections_before_restart=gen.phase2_rejections_before_restart,
        phase1_gates=tuple(g.name for g in gate_order(DEFAULT_GATES, 1)),
        phase2_gates=tuple(g.name for g in gate_order(DEFAULT_GATES, 2)),
    )


def role_models(settings: Settings) -> RoleModels:
    """Which model plays each role."""
    m = settings.models
    return RoleModels(
        phase1_generator=m.phase1_generator,
        phase2_generator=m.phase2_generator,
        transcript_answerer=m.transcript_answerer,
        transcript_matcher=m.transcript_matcher,
        parametric_pairs=tuple((a, v) for a, v in m.parametric_pairs),
        sufficiency=m.sufficiency,
        textual_rankers=tuple(m.textual_undetectability),
        visual_ranker=m.visual_detectability,
    )


def curation_config(settings: Settings, concurrency: int | None = None) -> CurationConfig:
    """How runs curate, from the settings."""
    gen = settings.generation
    return CurationConfig(
        policy=loop_policy(settings),
        models=role_models(settings),
        limits=GenerationLimits(
            min_paragraphs=gen.gold_min_paragraphs,
            max_paragraphs=gen.gold_max_paragraphs,
            min_cited_chunks=gen.min_cited_chunks_per_segment,
            max_cited_chunks=gen.max_cited_chunks_per_segment,
        ),
        concurrency=concurrency or settings.curation.concurrency,
        offline=settings.curation.offline,
        ramp_s=settings.curation.ramp_s,
    )


def offline_models() -> Callable[[str], Model]:
    """Model id → the offline provider answering as that model (priced as it)."""
    from tools.providers import OfflineProvider

    return OfflineProvider().model


def model_factory(settings: Settings) -> Callable[[str], Model]:
    """Model id → the pydantic-ai model that answers as it."""
    if not settings.curation.offline:
        raise ConfigError(
            "live providers (Gemini, OpenAI, DashScope) arrive with step 3; set "
            "curation.offline = true (the default) to curate with the offline provider"
        )
    return offline_models()


@dataclass
class App:
    """The parts of one workspace, opened lazily and closed together."""

    settings: Settings
    workspace: Workspace = field(init=False)
    _catalog: Catalog | None = field(default=None, init=False)
    _vectors: VectorIndex | None = field(default=None, init=False)
    _embedder: Embedder | None = field(default=None, init=False)
    _events: EventStore | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.workspace = Workspace(Path(self.settings.home)).create()

    @property
    def catalog(self) -> Catalog:
        """The workspace's catalogue."""
        if self._catalog is None:
            self._catalog = Catalog.open(self.workspace.database)
        return self._catalog

    @property
    def vectors(self) -> VectorIndex:
        """The vector index."""
        if self._vectors is None:
            self._vectors = open_vectors(self.settings, self.workspace)
        return self._vectors

    @property
    def embedder(self) -> Embedder:
        """The chunk embedder (loaded on first use)."""
        if self._embedder is None:
            self._embedder = build_embedder(self.settings)
        return self._embedder

    @property
    def events(self) -> EventStore:
        """The event log: PostgreSQL when configured, else the workspace's SQLite file."""
        if self._events is None:
            self._events = open_event_store(self.settings.store.url or self.workspace.database)
        return self._events

    def prices(self) -> PriceTable:
        """The price table with the settings' overrides."""
        budget = self.settings.budget
        return PriceTable.load(overrides=budget.price_overrides, extra_file=budget.price_file)

    def projections(self) -> Projections:
        """Read models over the log."""
        return Projections(self.events, self.events.engine)

    def curator(
        self, progress: CurationProgress | None = None, concurrency: int | None = None
    ) -> Curator:
        """The curation shell over this workspace."""
        return Curator(
            store=self.events,
            catalog=self.catalog,
            clips=self.clips(),
            model_for=model_factory(self.settings),
            prices=self.prices(),
            config=curation_config(self.settings, concurrency),
            progress=progress,
        )

    def indexer(self, progress: IndexProgress | None = None) -> Indexer:
        """The pipeline over this workspace."""
        return Indexer(
            catalog=self.catalog,
            vectors=self.vectors,
            embedder=self.embedder,
            transcriber=build_transcriber(self.settings),
            config=index_config(self.settings),
            media_dir=self.workspace.media,
            progress=progress,
        )

    def search(self) -> ChunkSearch:
        """The agents' search tool."""
        return ChunkSearch(
            self.vectors, self.embedder, index_config(self.settings).chunk_collection
        )

    def clips(self) -> ClipFetcher:
        """The agents' clip tool."""
        return ClipFetcher(self.catalog, self.workspace.clips)

    def close(self) -> None:
        """Close what was opened."""
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._vectors is not None:
            self._vectors.close()
            self._vectors = None
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None

    def __enter__(self) -> App:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
