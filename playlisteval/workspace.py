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

    def started(self) -> bool:
        """Whether a workspace was started here: its catalogue file exists (``add`` or
        ``demo`` writes it; a folder holding only a settings file is not one yet)."""
        return self.database.is_file()

    def blocked_by_file(self) -> bool:
        """Whether the root, or the nearest of its ancestors that exists, is a file: then no
        workspace can be made there, and opening it says why (a ``--home`` typo is not that)."""
        for path in (self.root, *self.root.parents):
            if path.exists():
                return not path.is_dir()
        return False

    def create(self) -> Workspace:
        """Make the folders; harmless when they exist."""
        for path in (self.root, self.vectors, self.media, self.clips, self.exports):
            path.mkdir(parents=True, exist_ok=True)
        return self
