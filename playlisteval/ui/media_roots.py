"""What the UI may serve of the videos a benchmark's manifest names: nothing outside the
benchmark's folder, the workspace's media and its catalogued videos.
"""

from __future__ import annotations

from pathlib import Path

from playlisteval.app import App


class MediaRoots:
    """What the media route may serve, whatever a benchmark's manifest says: files inside the
    benchmark's own folder, the workspace's media folder or ``ingest.allowed_roots``, and the
    files of the workspace's catalogued videos — each compared after resolving (symlinks
    followed), so neither ``..`` nor a link leads out."""

    def __init__(self, app: App, benchmark_root: Path) -> None:
        self._app = app
        roots = [benchmark_root, app.workspace.media, *app.settings.ingest.allowed_roots]
        self._roots = [Path(root).expanduser().resolve() for root in roots]
        self._videos: set[Path] = set()

    def _catalogued(self) -> set[Path]:
        found: set[Path] = set()
        for video in self._app.catalog.videos():
            if video.path:
                try:
                    found.add(Path(video.path).resolve(strict=True))
                except (OSError, RuntimeError, ValueError):  # ValueError: a NUL in the path
                    continue
        return found

    def allows(self, real: Path) -> bool:
        """Whether the resolved file ``real`` may be served."""
        if any(real.is_relative_to(root) for root in self._roots) or real in self._videos:
            return True
        self._videos = self._catalogued()  # videos added since the last look
        return real in self._videos
