"""The workspace: one folder that holds everything a run writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Workspace:
    """Paths inside a workspace folder (``--home``)."""

    root: Path

    @property
    def database(self) -> Path:
        """The SQLite catalogue (and, later, the event store)."""
        return self.root / "playlisteval.db"

    @property
    def vectors(self) -> Path:
        """Embedded Qdrant data."""
        return self.root / "qdrant"

    @property
    def media(self) -> Path:
        """Downloaded videos, subtitles and the clip cache."""
        return self.root / "media"

    @property
    def clips(self) -> Path:
        """Clips cut for providers, cached on disk."""
        return self.root / "media" / "clips"

    @property
    def exports(self) -> Path:
        """Exported benchmarks."""
        return self.root / "exports"

    def create(self) -> Workspace:
        """Make the folders; harmless when they exist."""
        for path in (self.root, self.vectors, self.media, self.clips, self.exports):
            path.mkdir(parents=True, exist_ok=True)
        return self
