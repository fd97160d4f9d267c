"""What a seed's calls carry: its two segments' transcripts, their video clips, and the
transcript test's distractor windows, all read from the index."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from pydantic_ai.messages import BinaryContent

from store.catalog import Catalog, SegmentRow
from store.errors import MediaError
from tools.clips import ClipFetcher
from tools.roles import ChunkText, SegmentEvidence, TranscriptWindow


@dataclass(frozen=True)
class ClipSpec:
    """How segments are shown to a video role."""

    fps: float = 0.5
    max_height: int = 720
    audio: bool = True


def source_key(path: Path) -> str:
    stat = path.stat()
    return _content_key(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=4096)
def _content_key(path: str, size: int, mtime_ns: int) -> str:
    # Identifies a video's content without reading all of it: size, head and tail; cached per
    # (path, size, mtime) so hundreds of seeds on one video read it once.
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(1 << 20))
        if size > 1 << 20:
            handle.seek(-(1 << 20), 2)
            digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


class SeedEvidence:
    """The evidence of one seed, built lazily from the catalogue and cached."""

    def __init__(
        self, catalog: Catalog, clips: ClipFetcher, seed_id: str, segment_a: str, segment_b: str
    ) -> None:
        self.catalog = catalog
        self.clip_fetcher = clips
        self.seed_id = seed_id
        self.segment_ids = (segment_a, segment_b)
        self._clips: dict[tuple[str, ClipSpec], BinaryContent] = {}

    def _segment(self, segment_id: str) -> SegmentRow:
        row = self.catalog.segment(segment_id)
        if row is None:
            raise MediaError(
                f"seed {self.seed_id!r} names segment {segment_id!r}, not in the index"
            )
        return row

    @cached_property
    def rows(self) -> tuple[SegmentRow, SegmentRow]:
        """The two segments' catalogue rows."""
        return self._segment(self.segment_ids[0]), self._segment(self.segment_ids[1])

    @cached_property
    def segments(self) -> tuple[SegmentEvidence, SegmentEvidence]:
        """Both segments with their chunks' transcripts."""
        built: list[SegmentEvidence] = []
        for row in self.rows:
            video = self.catalog.video(row.video_id)
            chunks = self.catalog.chunks(row.video_id)[row.chunk_start : row.chunk_end]
            built.append(
                SegmentEvidence(
                    segment_id=row.id,
                    video_id=row.video_id,
                    title=video.title if video else "",
                    start_s=row.start_s,
                    end_s=row.end_s,
                    chunks=tuple(
                        ChunkText(start_s=c.start_s, end_s=c.end_s, text=c.transcript)
                        for c in chunks
                    ),
                )
            )
        return built[0], built[1]

    def videos(self, spec: ClipSpec) -> list[BinaryContent]:
        """One clip per segment, as pydantic-ai content with the video metadata providers need."""
        out: list[BinaryContent] = []
        for row in self.rows:
            cached = self._clips.get((row.id, spec))
            if cached is None:
                clip = self.clip_fetcher.fetch_clip(
                    row.video_id,
                    row.start_s,
                    row.end_s,
                    fps=spec.fps,
                    max_height=spec.max_height,
                    audio=spec.audio,
                    frames=False,
                )
                video = self.catalog.video(row.video_id)
                source = source_key(Path(video.path)) if video and video.path else "?"
                cached = BinaryContent(
                    data=clip.read_bytes(),
                    media_type="video/mp4",
                    identifier=row.id,
                    vendor_metadata={
                        "fps": spec.fps,
                        "start_s": row.start_s,
                        "end_s": row.end_s,
                        "height": spec.max_height,
                        "audio": spec.audio,
                        "source": source,
                        "video_id": row.video_id,
                        # The source file, for adapters that upload whole videos once (Gemini's
                        # Files API); machine-specific, so left out of the request key.
                        "path": str(video.path) if video and video.path else "",
                    },
                )
                self._clips[(row.id, spec)] = cached
            out.append(cached)
        return out

    def transcript_windows(
        self, per_window_chunks: int = 2, others: int = 4
    ) -> tuple[TranscriptWindow, ...]:
        """The two segments' transcripts shuffled among windows of another video of the same
        playlist (or, failing that, of the same domain), labelled W1, W2, …"""
        relevant = [" ".join(c.text for c in s.chunks if c.text) for s in self.segments]
        own = {row.video_id for row in self.rows}
        first = self.catalog.video(self.rows[0].video_id)
        pool = [
            v
            for v in self.catalog.videos(statuses=["indexed"])
            if v.id not in own and first is not None and v.playlist_id == first.playlist_id
        ] or [
            v
            for v in self.catalog.videos(statuses=["indexed"])
            if v.id not in own and first is not None and v.domain == first.domain
        ]
        rng = random.Random(self.seed_id)
        windows: list[str] = []
        if pool:
            other = pool[rng.randrange(len(pool))]
            chunks = self.catalog.chunks(other.id)
            for start in range(0, len(chunks), per_window_chunks):
                text = " ".join(c.transcript for c in chunks[start : start + per_window_chunks])
                if text.strip():
                    windows.append(text)
            rng.shuffle(windows)
            windows = windows[:others]
        texts = [*relevant, *windows]
        rng.shuffle(texts)
        return tuple(TranscriptWindow(label=f"W{i}", text=t) for i, t in enumerate(texts, 1))
