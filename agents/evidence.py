"""What a seed's calls carry: its two segments' transcripts, their video clips, and the
transcript test's distractor windows, all read from the index."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Protocol

from pydantic_ai.messages import BinaryContent

from agents.citations import Citation, chunks_covered, parse_citations
from store.catalog import Catalog, SegmentRow, VideoRow
from store.errors import MediaError
from tools.contracts.roles import ChunkText, SegmentEvidence, TranscriptWindow
from tools.evidence.clips import ClipFetcher

# The transcript test's windows are at most 10 minutes of 30-second chunks: the paper's shortest
# segment, so paper-length segments all give windows of one length, and the most chunks a gold
# may cite of one segment (15, the structural gate's default bound) fit in one window.
MAX_WINDOW_CHUNKS = 20


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
        """One clip per segment, as pydantic-ai content with the video metadata providers need
        (:func:`clip_content`)."""
        out: list[BinaryContent] = []
        for row in self.rows:
            cached = self._clips.get((row.id, spec))
            if cached is None:
                video = self.catalog.video(row.video_id)
                cached = clip_content(self.clip_fetcher, video, row.id, row, spec)
                self._clips[(row.id, spec)] = cached
            out.append(cached)
        return out

    def transcript_windows(
        self,
        gold_answer: str = "",
        *,
        others: int = 4,
        max_window_chunks: int = MAX_WINDOW_CHUNKS,
    ) -> tuple[TranscriptWindow, ...]:
        """The two segments' transcripts shuffled among ``others`` windows of another video of
        the same playlist (or, failing that, of the same domain), labelled W1, W2, …

        Every window is the same number of 30-second chunks (so the same length in seconds, but
        for a video's shorter last chunk): the shorter segment's chunk count, at most
        ``max_window_chunks``. A longer segment is cut to that many chunks: the ones the gold
        answer cites of it (``gold_answer``'s citations; with none, its middle) and their
        nearest neighbours, so its window skips between cited spans that lie far apart.
        Distractor windows are runs of consecutive chunks of another video, those nearest the
        relevant windows' length in characters first; when the drawn video has too few, the next
        videos of the pool fill in. The draws and the order come from RNGs seeded by the seed
        id, so a replay of the same QA sees the same prompt, and a seed's relevant windows sit
        at the same positions whatever its QA.
        """
        size = max(1, min(max_window_chunks, *(len(s.chunks) for s in self.segments)))
        citations = parse_citations(gold_answer)
        relevant = [
            _joined(s.chunks[i].text for i in kept_chunks(s, citations, size))
            for s in self.segments
        ]
        target = sum(len(t) for t in relevant) / len(relevant)
        rng = random.Random(self.seed_id)
        texts = [*relevant, *self._distractors(rng, size, others, target)]
        random.Random(f"{self.seed_id}:positions").shuffle(texts)
        return tuple(TranscriptWindow(label=f"W{i}", text=t) for i, t in enumerate(texts, 1))

    def _distractor_pool(self) -> tuple[list[VideoRow], list[VideoRow]]:
        """Indexed videos other than the seed's: those of the first segment's playlist, and the
        rest of its domain."""
        own = {row.video_id for row in self.rows}
        first = self.catalog.video(self.rows[0].video_id)
        if first is None:
            return [], []
        candidates = [v for v in self.catalog.videos(statuses=["indexed"]) if v.id not in own]
        playlist = [v for v in candidates if v.playlist_id == first.playlist_id]
        domain = [
            v for v in candidates if v.playlist_id != first.playlist_id and v.domain == first.domain
        ]
        return playlist, domain

    def _distractors(
        self, rng: random.Random, size: int, others: int, target_chars: float
    ) -> list[str]:
        """``others`` windows of ``size`` chunks from a drawn video of the playlist (of the domain
        when the playlist has no other), then from the playlist's and the domain's other videos
        in a seeded order while too few; in each video, those nearest ``target_chars`` first."""
        playlist, domain = self._distractor_pool()
        rng.shuffle(playlist)
        rng.shuffle(domain)
        chosen: list[str] = []
        for video in (*playlist, *domain):
            chunks = self.catalog.chunks(video.id)
            runs = [
                _joined(c.transcript for c in chunks[start : start + size])
                for start in range(0, len(chunks) - size + 1, size)
            ]
            runs = [r for r in runs if r.strip()]
            rng.shuffle(runs)  # ties in length go by the seed, not by position in the video
            runs.sort(key=lambda text: abs(len(text) - target_chars))
            chosen.extend(runs[: others - len(chosen)])
            if len(chosen) >= others:
                break
        return chosen


def kept_chunks(segment: SegmentEvidence, citations: Sequence[Citation], size: int) -> list[int]:
    """Indexes of the ``size`` chunks of ``segment`` a transcript window keeps, in time order:
    all when it has no more, else the chunks ``citations`` cover (earliest first, when they are
    more than ``size``) and then those nearest them (with no citation of the segment, those
    nearest its middle chunk); a tie in distance goes to the earlier chunk."""
    count = len(segment.chunks)
    if count <= size:
        return list(range(count))
    anchors = sorted(chunks_covered(citations, segment)) or [count // 2]
    nearest = sorted(range(count), key=lambda i: (min(abs(i - a) for a in anchors), i))
    return sorted(nearest[:size])


def _joined(texts: Iterable[str]) -> str:
    return " ".join(t for t in texts if t)


class Span(Protocol):
    """A stretch of one video: a segment's catalogue row, or a span of its evidence."""

    @property
    def video_id(self) -> str: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...


def clip_content(
    fetcher: ClipFetcher, video: VideoRow | None, segment_id: str, span: Span, spec: ClipSpec
) -> BinaryContent:
    """``span`` of ``video`` cut as ``spec`` says, as pydantic-ai content with the metadata every
    adapter reads. Its identifier is ``segment_id``: every adapter and the offline provider look
    clips up by it; the span's times, rate, height and sound are in the metadata (and so in the
    request key), its width and source path too, outside the key."""
    clip = fetcher.fetch_clip(
        span.video_id,
        span.start_s,
        span.end_s,
        fps=spec.fps,
        max_height=spec.max_height,
        audio=spec.audio,
        frames=False,
    )
    path = str(video.path) if video and video.path else ""
    return BinaryContent(
        data=clip.read_bytes(),
        media_type="video/mp4",
        identifier=segment_id,
        vendor_metadata={
            "fps": spec.fps,
            "start_s": span.start_s,
            "end_s": span.end_s,
            "height": spec.max_height,
            "width": _width_at(video, spec.max_height),
            "audio": spec.audio,
            "source": source_key(Path(path)) if path else "?",
            "video_id": span.video_id,
            # The source file, for adapters that upload whole videos once (Gemini's Files API);
            # machine-specific, so left out of the request key.
            "path": path,
        },
    )


def _width_at(video: VideoRow | None, height: int) -> int | None:
    """The width of ``video``'s frames scaled to ``height`` (its aspect ratio kept; None when
    the catalogue does not know its size): what a frame-based adapter sends."""
    if video is None or not video.width or not video.height:
        return None
    shown = min(height, video.height)
    return round(video.width * shown / video.height)
