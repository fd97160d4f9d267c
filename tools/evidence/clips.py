"""The agents' clip tool: cut a span of an indexed video for a provider, cached on disk."""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from store.catalog import Catalog
from store.errors import MediaError
from tools.index import media


@dataclass(frozen=True)
class Clip:
    """A cut span: the mp4 file a provider uploads, and (when asked) its frames for frame-based
    providers."""

    video_id: str
    start_s: float
    end_s: float
    fps: float
    max_height: int
    audio: bool
    path: Path
    frames: tuple[media.Frame, ...]

    def read_bytes(self) -> bytes:
        """The clip's mp4 bytes (for inline upload)."""
        return self.path.read_bytes()


class ClipFetcher:
    """``fetch_clip(video_id, start, end, fps, max_height, audio)`` with an on-disk cache."""

    def __init__(self, catalog: Catalog, cache_dir: Path) -> None:
        self.catalog = catalog
        self.cache_dir = cache_dir

    def fetch_clip(
        self,
        video_id: str,
        start_s: float,
        end_s: float,
        fps: float = 0.5,
        max_height: int = 720,
        audio: bool = True,
        frames: bool = True,
    ) -> Clip:
        """Cut ``[start_s, end_s)`` of a video; the same call again reads the cache."""
        video = self.catalog.video(video_id)
        if video is None or video.path is None:
            raise MediaError(f"no indexed video {video_id!r}; see `playlisteval status`")
        duration = video.duration_s or 0.0
        if not 0.0 <= start_s < end_s or start_s >= duration:
            raise MediaError(
                f"span {start_s!r}–{end_s!r} s is not inside video {video_id!r} "
                f"(0–{duration:.1f} s)"
            )
        end_s = min(end_s, duration)
        key = f"{video_id}|{start_s:.3f}|{end_s:.3f}|{fps:g}|{max_height}|{int(audio)}"
        name = f"{video_id}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.mp4"
        path = self.cache_dir / name
        if not path.exists():
            # Named per process and thread: two cutters of the same clip never share a temp file.
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.part.mp4")
            media.export_clip(
                Path(video.path), tmp, start_s, end_s, fps=fps, max_height=max_height, audio=audio
            )
            tmp.replace(path)  # a half-written clip never sits under the cache name
        sampled = media.sample_frames(path, fps=fps, max_height=max_height) if frames else []
        return Clip(
            video_id=video_id,
            start_s=start_s,
            end_s=end_s,
            fps=fps,
            max_height=max_height,
            audio=audio,
            path=path,
            frames=tuple(sampled),
        )
