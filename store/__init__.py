"""The bottom layer: the catalogue of what has been indexed, and the project's exceptions."""

from store.catalog import Catalog
from store.errors import (
    ConfigError,
    EmbeddingError,
    IndexBackendError,
    IngestError,
    MediaError,
    PlaylistEvalError,
    ProviderError,
    ReplayDivergence,
    StoreConflict,
    TranscriptError,
    UnsafeSourceError,
)

__all__ = [
    "Catalog",
    "ConfigError",
    "EmbeddingError",
    "IndexBackendError",
    "IngestError",
    "MediaError",
    "PlaylistEvalError",
    "ProviderError",
    "ReplayDivergence",
    "StoreConflict",
    "TranscriptError",
    "UnsafeSourceError",
]
