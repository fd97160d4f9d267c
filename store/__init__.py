"""The bottom layer: the catalogue of what has been indexed, and the project's exceptions.

The names below are handed on from their modules when first asked for (``from store import
Catalog``): importing one submodule (``store.errors``) loads only that one, not the catalogue
and SQLAlchemy behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.lazy import lazy_getattr

if TYPE_CHECKING:
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

#: Each name this package offers → the module it lives in.
_HOMES = {
    "Catalog": "store.catalog",
    "ConfigError": "store.errors",
    "EmbeddingError": "store.errors",
    "IndexBackendError": "store.errors",
    "IngestError": "store.errors",
    "MediaError": "store.errors",
    "PlaylistEvalError": "store.errors",
    "ProviderError": "store.errors",
    "ReplayDivergence": "store.errors",
    "StoreConflict": "store.errors",
    "TranscriptError": "store.errors",
    "UnsafeSourceError": "store.errors",
}

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

__getattr__ = lazy_getattr(__name__, _HOMES)
