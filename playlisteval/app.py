"""The composition root: builds the parts from the settings and hands them out.

Nothing below ``playlisteval`` reads settings; this module turns them into plain parameters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from playlisteval.settings import Settings
from playlisteval.workspace import Workspace
from store.catalog import Catalog
from store.errors import ConfigError
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


@dataclass
class App:
    """The parts of one workspace, opened lazily and closed together."""

    settings: Settings
    workspace: Workspace = field(init=False)
    _catalog: Catalog | None = field(default=None, init=False)
    _vectors: VectorIndex | None = field(default=None, init=False)
    _embedder: Embedder | None = field(default=None, init=False)

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
