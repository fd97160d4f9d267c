"""The indexing pipeline: playlists on disk → chunks, transcripts, vectors, segments → seeds.

Every stage writes its results before the next starts, so a run killed at any point resumes
where it stopped: a chunk is stored (Qdrant first, then the catalogue) in batches, and a chunk
already in the catalogue is never computed again. A bad video fails alone, with its reason
recorded, and the rest of the playlist goes on.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import structlog

from store.catalog import (
    DUPLICATE,
    FAILED,
    INDEXED,
    LISTED,
    READY,
    RESERVE,
    BackfillRow,
    Catalog,
    ChunkRow,
    DuplicateRow,
    IndexRecordRow,
    PlaylistRow,
    SeedRow,
    SegmentRow,
    VideoRow,
    vector_to_bytes,
    vectors_from_bytes,
)
from store.closing import ClosesOnExit
from store.errors import (
    ConfigError,
    EmbeddingError,
    IngestError,
    MediaError,
    PlaylistEvalError,
    TranscriptError,
)
from tools.index import ingest, media
from tools.index.calibration import Calibration, SeedBand, calibrate, pair_cosines
from tools.index.embeddings import ChunkContent, Embedder, embedder_label
from tools.index.index_records import RedoPlan, old_defaults_record, plan_redo
from tools.index.ocr import ScreenTextReader, with_screen_text
from tools.index.seeding import (
    SegmentRef,
    find_near_duplicates,
    find_seeds,
    plan_segments,
    segment_vector,
)
from tools.index.transcripts import (
    AutoTranscriber,
    DeferredWhisper,
    Transcriber,
    TranscriptPlan,
    TranscriptRequest,
    plan_transcript,
    reads_audio,
    transcriber_for,
)
from tools.index.vectors import VectorIndex
from tools.runtime.devices import device_slot

CHUNK_KEYWORD_FIELDS = ("video_id", "playlist_id", "domain")
log = structlog.get_logger("playlisteval.index")
CHUNK_FLOAT_FIELDS = ("start_s", "end_s")


@dataclass(frozen=True)
class IndexConfig:
    """The numbers the pipeline needs (from the settings object)."""

    chunk_s: float = 30.0
    segment_min_s: float = 600.0
    segment_target_s: float = 1200.0
    segment_max_s: float = 1800.0
    frame_fps: float = 0.5
    frame_max_height: int = 720
    audio_rate: int = 16_000
    duplicate_cosine: float = 0.95
    seed_min_cosine: float = 0.40
    seed_max_cosine: float = 0.90
    seed_candidates_per_segment: int | None = None  # None: every pair in the band
    batch_chunks: int = 16
    # Threads decoding frames and audio ahead of the models (0: decode in the caller's thread).
    decode_workers: int = 2
    collection_prefix: str = "playlisteval"
    max_download_height: int = 720
    subtitle_langs: tuple[str, ...] = ("en",)
    # Read on-screen text from each chunk's frames and embed it beside the transcript
    # (``index.ocr``; tools/index/ocr.py). The stored transcript stays what was said.
    ocr: bool = False

    @property
    def chunk_collection(self) -> str:
        """Qdrant collection of chunk vectors."""
        return f"{self.collection_prefix}_chunks"

    @property
    def segment_collection(self) -> str:
        """Qdrant collection of segment vectors."""
        return f"{self.collection_prefix}_segments"


def chunk_point_id(video_id: str, idx: int) -> str:
    """Id of a chunk in the catalogue and the index."""
    return f"{video_id}-c{idx:05d}"


def segment_point_id(video_id: str, idx: int) -> str:
    """Id of a segment in the catalogue and the index."""
    return f"{video_id}-s{idx:03d}"


def download_listed(
    entry: ingest.VideoEntry,
    folder: Path,
    config: IndexConfig,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> ingest.VideoEntry:
    """Fetch a listed video whose file is not on this machine into ``folder``, at the height and
    with the subtitles ``config`` asks for: the one download both engines make (into the media
    folder here, into a node's scratch folder on Ray)."""
    return ingest.download_video(
        entry,
        folder,
        max_height=config.max_download_height,
        subtitle_langs=config.subtitle_langs,
        progress=progress,
    )


class IndexProgress(Protocol):
    """What the pipeline tells whoever shows progress (the CLI draws rich bars)."""

    def begin(self, total_chunks: int, videos: int) -> None:
        """Indexing starts: this many chunks over this many videos are left to do."""

    def video_started(self, video: VideoRow, chunks: int) -> None:
        """A video with ``chunks`` chunks left starts."""

    def expect(self, chunks: int) -> None:
        """``chunks`` more chunks turned out to be left than :meth:`begin` said (a video whose
        length was known only once it was probed, on a Ray worker)."""

    def advance(self, chunks: int, video: VideoRow | None = None) -> None:
        """``chunks`` more chunks are done (of ``video``, when several are under way at once)."""

    def video_finished(self, video: VideoRow, error: str | None) -> None:
        """A video ended, with an error message when it failed."""

    def end(self) -> None:
        """Indexing is over."""


class SilentProgress:
    """Progress that shows nothing (tests, scripts)."""

    def begin(self, total_chunks: int, videos: int) -> None:
        """Nothing to show."""

    def video_started(self, video: VideoRow, chunks: int) -> None:
        """Nothing to show."""

    def expect(self, chunks: int) -> None:
        """Nothing to show."""

    def advance(self, chunks: int, video: VideoRow | None = None) -> None:
        """Nothing to show."""

    def video_finished(self, video: VideoRow, error: str | None) -> None:
        """Nothing to show."""

    def end(self) -> None:
        """Nothing to show."""


@dataclass
class AddSummary:
    """What ``add`` took in."""

    playlists: list[PlaylistRow] = field(default_factory=list)
    videos: int = 0
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (ref, reason)
    reserve: list[tuple[str, str]] = field(default_factory=list)
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # (video, from, to)


@dataclass
class IndexSummary:
    """What one ``index`` run did and where the workspace stands."""

    videos_indexed: int = 0
    videos_failed: list[tuple[str, str]] = field(default_factory=list)
    chunks_computed: int = 0
    chunks_total: int = 0
    segments_total: int = 0
    duplicates: list[DuplicateRow] = field(default_factory=list)
    seeds_per_domain: dict[str, int] = field(default_factory=dict)
    hours_indexed: float = 0.0
    redo: RedoReport = field(default_factory=lambda: RedoReport())
    backfill: list[DomainBackfill] = field(default_factory=list)


# Statuses whose hours count towards a domain's target, and those that leave a gap in it.
IN_SEEDING = (LISTED, READY, INDEXED)
DROPPED = (DUPLICATE, FAILED)
TARGET_SLACK_S = 1e-6  # a domain this close to its target has met it (float sums)


@dataclass(frozen=True)
class DomainBackfill:
    """Where one domain with a target stands after ``index``: its target and hours in
    seeding, the videos this run took from its reserve (``brought``, with why), how many were
    backfilled in all (runs before included) and how many reserve videos are left."""

    domain: str
    target_hours: float
    hours_in_seeding: float
    brought: tuple[BackfillRow, ...]
    total: int
    reserve_left: int

    @property
    def hours_brought(self) -> float:
        """Hours of the videos this run brought in, as probed."""
        return sum(row.hours for row in self.brought)

    @property
    def short(self) -> bool:
        """The domain is below its target (and, after a backfill, its reserve is used up)."""
        return self.hours_in_seeding * 3600.0 < self.target_hours * 3600.0 - TARGET_SLACK_S


def _gap_reason(dropped: VideoRow | None, domain: str, have_s: float, target: float) -> str:
    """Why a video is backfilled, in words: the dropped video whose gap it fills and how far
    the domain stood from its target."""
    stood = f"{domain!r} had {have_s / 3600.0:.2f} h in seeding of its {target:g} h target"
    if dropped is None:
        return stood
    if dropped.status == DUPLICATE:
        kept = dropped.duplicate_of
        return f"for {dropped.id!r}, dropped as a near-duplicate of {kept!r}: {stood}"
    why = dropped.reason or "no reason recorded"
    return f"for {dropped.id!r}, which failed ({why}): {stood}"


def plan_backfill(
    domain: str, videos: Sequence[VideoRow], target_hours: float, done: Sequence[BackfillRow]
) -> list[BackfillRow]:
    """The reserve videos ``domain`` takes next to get back to ``target_hours`` (pure).

    ``videos`` are the domain's in seeding order (playlists by when they were added, then
    playlist position), so the reserve is taken in playlist order: the newer videos. Each one
    taken names the first dropped video (near-duplicate or failed) whose hours earlier
    backfills (``done``) do not yet cover; none when every gap is covered. A reserve video of
    unknown duration is taken alone: how long it is is known once it is probed."""
    limit = target_hours * 3600.0
    have = sum(v.duration_s or 0.0 for v in videos if v.status in IN_SEEDING)
    length = {v.id: v.duration_s or 0.0 for v in videos}
    covered: dict[str, float] = {}
    for row in done:
        if row.replaces is not None:
            covered[row.replaces] = covered.get(row.replaces, 0.0) + length.get(
                row.video_id, row.hours * 3600.0
            )
    gaps = [v for v in videos if v.status in DROPPED]
    picks: list[BackfillRow] = []
    for video in (v for v in videos if v.status == RESERVE):
        if have >= limit - TARGET_SLACK_S:
            break
        dropped = next(
            (g for g in gaps if g.id not in covered or covered[g.id] < length[g.id] - 1e-6),
            None,
        )
        picks.append(
            BackfillRow(
                video_id=video.id,
                domain=domain,
                replaces=None if dropped is None else dropped.id,
                reason=_gap_reason(dropped, domain, have, target_hours),
                hours=(video.duration_s or 0.0) / 3600.0,
            )
        )
        if dropped is not None:
            covered[dropped.id] = covered.get(dropped.id, 0.0) + (video.duration_s or 0.0)
        if video.duration_s is None:
            break
        have += video.duration_s
    return picks


@dataclass
class RedoReport:
    """What ``index`` redid because the settings changed (or ``--redo`` asked): the videos per
    stage redone, the chunks transcribed and embedded again, the videos that had no record."""

    videos: dict[str, list[str]] = field(default_factory=dict)  # kind → video ids
    changes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # video id → changes
    chunks_retranscribed: int = 0
    chunks_reembedded: int = 0
    unrecorded: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class DecodedBatch:
    """Up to ``batch_chunks`` chunks of one video, decoded: each chunk's frames, and its audio
    when the transcriber will read it (``None`` otherwise: read on demand, if at all)."""

    chunks: list[tuple[int, list[np.ndarray]]]
    audio: dict[int, np.ndarray] | None


_QUEUE_POLL_S = 0.2  # how often a decoder blocked on a full queue checks whether to stop


class DecodeAhead(ClosesOnExit):
    """Decodes videos' batches in worker threads while the caller runs the models.

    Videos are decoded in the order given, up to ``workers`` at a time, each at most
    ``ahead`` batches in front of the caller, who takes them video by video, batch by batch
    (:meth:`batches`). So decoding overlaps inference (neither waits for the other unless it is
    the slower one), memory stays bounded, and the chunks of a video are stored in order, which
    resume relies on. With ``workers=0`` every batch is decoded in the caller's thread.
    """

    def __init__(
        self,
        jobs: Sequence[Callable[[], Iterator[DecodedBatch]]],
        workers: int,
        ahead: int = 1,
    ) -> None:
        self._jobs = jobs
        self._workers = workers
        self._stop = threading.Event()
        self._cancelled: set[int] = set()
        self._queues: list[queue.Queue[tuple[str, Any]]] = [
            queue.Queue(maxsize=max(1, ahead)) for _ in jobs
        ]
        self._pool: ThreadPoolExecutor | None = None
        if workers > 0 and jobs:
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="decode")
            for number in range(len(jobs)):
                self._pool.submit(self._run, number)

    def _put(self, number: int, item: tuple[str, Any]) -> bool:
        while not (self._stop.is_set() or number in self._cancelled):
            try:
                self._queues[number].put(item, timeout=_QUEUE_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, number: int) -> None:
        if self._stop.is_set() or number in self._cancelled:
            return
        try:
            for batch in self._jobs[number]():
                if not self._put(number, ("batch", batch)):
                    return
        except BaseException as exc:  # handed to the caller, who decides what it means
            self._put(number, ("error", exc))
            return
        self._put(number, ("end", None))

    def batches(self, number: int) -> Iterator[DecodedBatch]:
        """Job ``number``'s batches in order; a decoding error is raised here, in the caller."""
        if self._pool is None:
            yield from self._jobs[number]()
            return
        while True:
            kind, value = self._queues[number].get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value

    def cancel(self, number: int) -> None:
        """Stop decoding job ``number`` (its video failed): its decoder ends at its next batch."""
        self._cancelled.add(number)

    def close(self) -> None:
        """Stop every decoder and wait for the threads to end."""
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def frame_height_for(preferred: int | None, configured: int) -> int:
    """The height frames are decoded at: the embedder's preference when it has one, never above
    the configured height. An embedder that reads only colour statistics asks for small frames:
    decoding at 720p and throwing the detail away would cost most of the indexing time."""
    return min(configured, int(preferred)) if preferred else configured


def batch_audio(
    path: Path,
    grid: Sequence[tuple[float, float]],
    chunks: Sequence[tuple[int, list[np.ndarray]]],
    rate: int,
) -> dict[int, np.ndarray]:
    """Each chunk's samples, read in one pass over the batch's span (one open and one seek,
    not one per chunk); sliced so that chunk ``i`` gets exactly its own ``[start, end)``."""
    first, last = grid[chunks[0][0]][0], grid[chunks[-1][0]][1]
    samples = media.extract_audio(path, first, last, rate=rate)
    out: dict[int, np.ndarray] = {}
    for idx, _ in chunks:
        start, end = grid[idx]
        lo, hi = round((start - first) * rate), round((end - first) * rate)
        out[idx] = samples[lo:hi].copy()
    return out


@dataclass(frozen=True)
class DecodeSpec:
    """How a video's chunks are decoded: the same numbers on this machine and on a Ray worker."""

    chunk_s: float
    frame_fps: float
    frame_height: int
    batch_chunks: int
    audio_rate: int


def frames_by_chunk(
    path: Path, grid: Sequence[tuple[float, float]], first: int, spec: DecodeSpec
) -> Iterator[tuple[int, list[np.ndarray]]]:
    """Frames of chunks ``first``, ``first + 1``, … as each chunk completes."""
    current = first
    bucket: list[np.ndarray] = []
    for frame in media.iter_frames(
        path, fps=spec.frame_fps, max_height=spec.frame_height, start_s=grid[first][0]
    ):
        idx = min(int(frame.t // spec.chunk_s), len(grid) - 1)
        while idx > current:
            yield current, bucket
            current, bucket = current + 1, []
        bucket.append(frame.image)
    while current < len(grid):
        yield current, bucket
        current, bucket = current + 1, []


def decode_batches(
    path: Path,
    grid: Sequence[tuple[float, float]],
    todo: Sequence[int],
    spec: DecodeSpec,
    *,
    want_audio: bool,
) -> Iterator[DecodedBatch]:
    """The ``todo`` chunks' frames, ``spec.batch_chunks`` chunks a batch, with each batch's
    audio when the transcriber will read it: what a decoder thread (or a Ray task) runs."""
    if not todo:
        return
    wanted = set(todo)
    pending: list[tuple[int, list[np.ndarray]]] = []
    for idx, frames in frames_by_chunk(path, grid, min(todo), spec):
        if idx in wanted:
            pending.append((idx, frames))
        if len(pending) >= spec.batch_chunks:
            audio = batch_audio(path, grid, pending, spec.audio_rate) if want_audio else None
            yield DecodedBatch(pending, audio)
            pending = []
    if pending:
        audio = batch_audio(path, grid, pending, spec.audio_rate) if want_audio else None
        yield DecodedBatch(pending, audio)


def chunks_to_do(
    duration_s: float, chunk_s: float, done: Collection[int]
) -> tuple[list[tuple[float, float]], list[int]]:
    """A video's chunk grid and the chunks of it not yet stored."""
    grid = media.chunk_grid(duration_s, chunk_s)
    return grid, [i for i in range(len(grid)) if i not in done]


def audio_reader(
    path: Path,
    prefetched: dict[int, np.ndarray] | None,
    spans: Mapping[tuple[float, float], int],
    rate: int,
) -> Callable[[float, float], np.ndarray]:
    """A batch's audio for the transcriber: each chunk's decoded ahead when it was, else read
    from the file on demand (a media error there is the transcriber's to raise)."""
    ahead = prefetched or {}

    def audio(start: float, end: float) -> np.ndarray:
        found = ahead.get(spans.get((start, end), -1))
        if found is not None:
            return found
        return media.extract_audio(path, start, end, rate=rate)

    return audio


@dataclass(frozen=True)
class BatchTranscript:
    """A batch's transcripts, the backend that wrote them, and why it fell back (if it did)."""

    texts: list[str]
    source: str
    note: str


def transcribe_batch(
    transcriber: Transcriber,
    spans: Sequence[tuple[float, float]],
    captions: Sequence[Path],
    audio: Callable[[float, float], np.ndarray],
    rate: int,
) -> BatchTranscript:
    """Transcribe one batch of chunks (the same call on this machine and in a Ray actor)."""
    request = TranscriptRequest(grid=spans, caption_paths=captions, audio=audio, rate=rate)
    texts = transcriber.transcribe(request)
    outcome = getattr(transcriber, "last_outcome", None)
    source = outcome.backend if outcome is not None else transcriber.name
    note = outcome.note if outcome is not None else ""
    return BatchTranscript(list(texts), str(source), note or "")


def embed_batch(
    embedder: Embedder, frames: Sequence[list[np.ndarray]], texts: Sequence[str]
) -> np.ndarray:
    """One vector per chunk of a batch, from its frames and transcript."""
    contents = [
        ChunkContent(frames=f, transcript=text) for f, text in zip(frames, texts, strict=True)
    ]
    return embedder.embed_chunks(contents)


def segments_in_seeding(catalog: Catalog) -> tuple[list[str], list[SegmentRef], np.ndarray]:
    """The videos that take part in seeding (indexed, and near-duplicates, whose decision is
    recomputed each time) in seeding order, their segments and the segments' vectors."""
    order = [v.id for v in catalog.videos(statuses=[INDEXED, DUPLICATE])]
    rows = catalog.segments(video_ids=order)
    refs = [SegmentRef(r.id, r.video_id, r.domain) for r in rows]
    return order, refs, vectors_from_bytes([r.vector for r in rows])


def seed_calibration(catalog: Catalog, current: SeedBand) -> Calibration:
    """How the catalogue's same-domain segment pairs fall under the band ``current``, and the
    band :func:`tools.index.calibration.calibrate` suggests (``seeds --calibrate``)."""
    _order, refs, vectors = segments_in_seeding(catalog)
    return calibrate(pair_cosines(refs, vectors), current)


class IndexStore:
    """The indexing work that needs no model: listing and media into the catalogue, storing
    what the models computed (Qdrant first, then the catalogue), segments, near-duplicates and
    seeds. Two engines compute the chunks: :class:`Indexer` on this machine, and
    :class:`tools.index.ray_index.RayIndexer` on a Ray cluster; both store them through here."""

    def __init__(
        self,
        catalog: Catalog,
        vectors: VectorIndex,
        config: IndexConfig,
        media_dir: Path,
        progress: IndexProgress | None = None,
    ) -> None:
        self.catalog = catalog
        self.vectors = vectors
        self.config = config
        self.media_dir = media_dir
        self.progress: IndexProgress = progress or SilentProgress()
        self._noted: set[str] = set()

    # -- add ------------------------------------------------------------------------------

    def add(
        self,
        source: str,
        *,
        domain: str | None,
        allowed_roots: Sequence[Path] = (),
        target_hours: float | None = None,
        move: bool = False,
    ) -> AddSummary:
        """List a source into the catalogue; drops and their reasons are recorded.

        A video's id is its source's: the same file name in two folders (or one id from two
        manifests) names two videos, the later one's id extended with a hash of where it is.
        A video already listed in another playlist or domain is refused (ConfigError, nothing
        written) unless ``move``: then it moves, and an indexed one takes its segments, its
        search-index payloads and the seeds along (recomputed)."""
        summary = AddSummary()
        listings = ingest.list_source(source, domain=domain, allowed_roots=allowed_roots)
        placed = [[self._placed(entry) for entry in listing.videos] for listing in listings]
        elsewhere = [
            (entry, existing, listing)
            for listing, entries in zip(listings, placed, strict=True)
            for (entry, existing) in entries
            if existing is not None
            and (existing.playlist_id, existing.domain) != (listing.playlist_id, listing.domain)
        ]
        if elsewhere and not move:
            first, held, target = elsewhere[0]
            assert held is not None
            more = f" (and {len(elsewhere) - 1} more)" if len(elsewhere) > 1 else ""
            raise ConfigError(
                f"{first.title!r} is already in playlist {held.playlist_id!r} (domain "
                f"{held.domain!r}){more}; add with --move to move it to playlist "
                f"{target.playlist_id!r} (domain {target.domain!r}), or leave it out of "
                "this source"
            )
        repointed = False
        for listing, entries in zip(listings, placed, strict=True):
            playlist = self.catalog.upsert_playlist(
                PlaylistRow(
                    id=listing.playlist_id,
                    title=listing.title,
                    domain=listing.domain,
                    source=listing.source,
                    reordered=listing.reordered,
                )
            )
            summary.playlists.append(playlist)
            for dropped in listing.dropped:
                reason = f"{dropped.title or dropped.ref}: {dropped.reason}"
                self.catalog.record_problem("listing", dropped.ref, reason, listing.playlist_id)
                summary.dropped.append((dropped.ref, dropped.reason))
            for entry, existing in entries:
                row = self.catalog.upsert_video(
                    VideoRow(
                        id=entry.video_id,
                        playlist_id=listing.playlist_id,
                        domain=listing.domain,
                        position=entry.position,
                        title=entry.title,
                        url=entry.url,
                        path=str(entry.path) if entry.path else None,
                        captions=json.dumps([str(p) for p in entry.caption_paths]),
                        duration_s=entry.duration_s,
                    )
                )
                summary.videos += 1
                was = (existing.playlist_id, existing.domain) if existing is not None else None
                if was is not None and was != (listing.playlist_id, listing.domain):
                    summary.moved.append(
                        (row.id, f"{was[0]} ({was[1]})", f"{row.playlist_id} ({row.domain})")
                    )
                    if was[1] != row.domain and row.status in (INDEXED, DUPLICATE):
                        self._repoint(row)
                        repointed = True
        if repointed:  # seeds pair segments of one domain: a video changed domains
            self.dedupe()
            self.compute_seeds()
        if target_hours is not None:
            for listing in listings:
                summary.reserve.extend(self.apply_target_hours(listing.domain, target_hours))
        return summary

    def _placed(self, entry: ingest.VideoEntry) -> tuple[ingest.VideoEntry, VideoRow | None]:
        """``entry`` with the id its source owns in the catalogue, and the row already there."""
        where = str(entry.path) if entry.path is not None else str(entry.url)
        video_id = entry.video_id
        for attempt in range(8):
            existing = self.catalog.video(video_id)
            if existing is None or where in (existing.path, existing.url):
                return replace(entry, video_id=video_id), existing
            # Another source has this id (``ep1.mp4`` in two folders): one of this source's.
            digest = hashlib.sha1(f"{where}#{attempt}".encode()).hexdigest()[:8]
            video_id = f"{entry.video_id}-{digest}"
        raise ConfigError(f"no free video id for {where!r} (tried {entry.video_id!r} and 7 more)")

    def _repoint(self, video: VideoRow) -> None:
        """An indexed video moved to another domain: its segments and its points in the search
        index say so (the vectors stay; nothing is computed again)."""
        segments = self.catalog.segments(video_ids=[video.id])
        # New rows, not copies: a copied table row carries its session state and is not added.
        moved = [SegmentRow(**{**row.model_dump(), "domain": video.domain}) for row in segments]
        self.catalog.replace_segments(video.id, moved)
        if video.status == INDEXED:  # a near-duplicate has no points to repoint
            chunks = self.catalog.chunks(video.id)
            self._upsert_chunks(video, chunks)
            self._upsert_segments(video, moved, chunks)

    def apply_target_hours(self, domain: str, hours: float) -> list[tuple[str, str]]:
        """Keep a domain at about ``hours`` (the target is recorded in the catalogue): videos
        past the target (in seeding order) go to reserve, reserve videos come back while the
        domain is short. Durations come from the listing or a probe; a video of unknown
        duration counts as zero until probed."""
        if not (isinstance(hours, int | float) and math.isfinite(hours) and hours > 0):
            raise ConfigError(f"target hours must be a positive number, got {hours!r}")
        # Recorded, so that `index` can backfill the gaps near-duplicates leave (:meth:`backfill`).
        self.catalog.set_domain_target(domain, float(hours))
        moved: list[tuple[str, str]] = []
        total = 0.0
        limit = hours * 3600.0
        for video in self.catalog.videos(domain=domain):
            if video.status in (FAILED, DUPLICATE):
                continue
            if video.duration_s is None and video.path:
                self._probe_into_catalog(video)
                video = self.catalog.video(video.id) or video
                if video.status == FAILED:
                    continue
            if total >= limit:
                if video.status != RESERVE:
                    reason = f"beyond the domain's target of {hours:g} h"
                    self.catalog.update_video(video.id, status=RESERVE, reason=reason)
                    moved.append((video.id, reason))
                continue
            if video.status == RESERVE:
                self.catalog.update_video(video.id, status=LISTED, reason=None)
            total += video.duration_s or 0.0
        return moved

    # -- media --------------------------------------------------------------------------------

    def entry_of(self, video: VideoRow) -> ingest.VideoEntry:
        """``video`` as its listing's entry: where its file is, or where to fetch it from."""
        return ingest.VideoEntry(
            video_id=video.id,
            title=video.title,
            position=video.position,
            path=Path(video.path) if video.path is not None else None,
            url=video.url,
            caption_paths=tuple(self.catalog.captions_of(video)),
            duration_s=video.duration_s,
        )

    def _fail(self, video: VideoRow, stage: str, error: PlaylistEvalError | str) -> str:
        reason = str(error)
        log.warning("video_failed", video_id=video.id, stage=stage, reason=reason)
        self.catalog.update_video(video.id, status=FAILED, reason=f"{stage}: {reason}")
        self.catalog.record_problem(stage, video.id, reason, video.playlist_id)
        return reason

    def _probe_into_catalog(self, video: VideoRow) -> bool:
        """Record what a probe finds of ``video`` (:meth:`_record_probe`), or fail it with the
        reason it cannot be indexed (not a video, a single still picture)."""
        assert video.path is not None
        try:
            info = media.probe(Path(video.path))
            media.check_indexable(info)
        except MediaError as exc:
            self._fail(video, "probe", exc)
            return False
        self._record_probe(video, info)
        return True

    def _record_probe(self, video: VideoRow, info: media.MediaInfo, **fields: Any) -> None:
        """Keep what a probe learnt of ``video``, with any other ``fields`` of it set at once
        (probed here or in a Ray task). Sound that outlasts the picture is left out of the
        video's duration, and that is recorded as a problem the video goes on with (``status``
        lists it)."""
        note = info.sound_past_picture
        if note is not None:
            log.warning("sound_past_picture", video_id=video.id, reason=note)
            self.catalog.record_problem("probe", video.id, note, video.playlist_id)
        self.catalog.update_video(
            video.id,
            duration_s=info.duration_s,
            width=info.width,
            height=info.height,
            fps=info.fps,
            has_audio=info.has_audio,
            **fields,
        )

    def retry_failed(self) -> list[str]:
        """Every failed video listed again (``index --retry-failed``), so the next
        :meth:`prepare_media` and :meth:`run` take it up from the start of what it lacks (its
        chunks done stay done); the recorded problems stay as history. Returns their ids."""
        again = [v.id for v in self.catalog.videos(statuses=[FAILED])]
        for video_id in again:
            self.catalog.update_video(video_id, status=LISTED, reason=None)
        return again

    def prepare_media(
        self, download_progress: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        """Download what is only listed, then probe it; failures are recorded per video."""
        for video in self.catalog.videos(statuses=[LISTED]):
            if video.path is None or not Path(video.path).exists():
                if video.url is None:
                    self._fail(video, "media", f"file {video.path!r} is missing")
                    continue
                try:
                    got = download_listed(
                        self.entry_of(video), self.media_dir, self.config, download_progress
                    )
                except IngestError as exc:
                    self._fail(video, "download", exc)
                    continue
                self.catalog.update_video(
                    video.id,
                    path=str(got.path),
                    captions=json.dumps([str(p) for p in got.caption_paths]),
                )
                video = self.catalog.video(video.id) or video
            if self._probe_into_catalog(video):
                self.catalog.update_video(video.id, status=READY, reason=None)

    def run(self, redo: str | None = None) -> IndexSummary:
        """Redo what changed settings made stale (``redo``: what ``index --redo`` forces,
        :func:`tools.index.index_records.plan_redo`), index every ready video, drop near-duplicates,
        backfill the domains they left below their target (:meth:`backfill`), then compute
        seeds."""
        report = self.redo_stale(redo)
        summary = self.index_ready()
        summary.redo = report
        summary.videos_failed[:0] = report.failed
        summary.duplicates = self.dedupe()
        summary.backfill = self.backfill(summary)
        summary.seeds_per_domain = self.compute_seeds()
        return self.totals(summary)

    def backfill(self, summary: IndexSummary | None = None) -> list[DomainBackfill]:
        """Fill the gaps near-duplicates (and failures) left: a domain below its recorded
        target takes the next videos of its playlists from reserve (:func:`plan_backfill`),
        each recorded with the dropped video it stands in for and why, then fetches, probes
        and indexes them and drops near-duplicates again (a newer video may repeat an older
        one), until every domain meets its target or has no reserve left.

        Resumable: a video taken is recorded and listed again in one transaction, so a run
        killed at any point leaves it to the next ``index`` to fetch and index (its stored
        chunks kept), and the next backfill counts it. What this indexes and drops is added
        to ``summary``. Returns where each domain with a target stands."""
        targets = self.catalog.domain_targets()
        brought: dict[str, list[BackfillRow]] = {}
        while picks := self._take_from_reserve(targets):
            for row in picks:
                log.info("backfill", video_id=row.video_id, domain=row.domain, reason=row.reason)
                brought.setdefault(row.domain, []).append(row)
            self.prepare_media()
            more = self.index_ready()
            duplicates = self.dedupe()
            if summary is not None:
                summary.videos_indexed += more.videos_indexed
                summary.chunks_computed += more.chunks_computed
                summary.videos_failed.extend(more.videos_failed)
                summary.duplicates = duplicates
        return [
            self._stands(domain, hours, brought.get(domain, []))
            for domain, hours in sorted(targets.items())
        ]

    def _take_from_reserve(self, targets: Mapping[str, float]) -> list[BackfillRow]:
        """Record (and list again) the reserve videos each domain below its target takes."""
        taken: list[BackfillRow] = []
        for domain, hours in sorted(targets.items()):
            videos = self.catalog.videos(domain=domain)
            for row in plan_backfill(domain, videos, hours, self.catalog.backfills(domain)):
                taken.append(self.catalog.record_backfill(row))
        return taken

    def _stands(self, domain: str, target: float, brought: Sequence[BackfillRow]) -> DomainBackfill:
        """Where ``domain`` stands against its target, with this run's backfills."""
        videos = self.catalog.videos(domain=domain)
        durations = {v.id: (v.duration_s or 0.0) / 3600.0 for v in videos}
        return DomainBackfill(
            domain=domain,
            target_hours=target,
            hours_in_seeding=sum(durations[v.id] for v in videos if v.status in IN_SEEDING),
            # As probed: a video of unknown duration when taken was probed since.
            brought=tuple(
                BackfillRow(**{**r.model_dump(), "hours": durations.get(r.video_id, r.hours)})
                for r in brought
            ),
            total=len(self.catalog.backfills(domain)),
            reserve_left=sum(1 for v in videos if v.status == RESERVE),
        )

    def index_ready(self) -> IndexSummary:
        """Index every ready video (chunks, transcripts, embeddings, segments): the engine's."""
        raise NotImplementedError

    def redo_stale(self, force: str | None = None) -> RedoReport:
        """Redo what changed settings made stale: an engine that keeps records does
        (:class:`Indexer`); this one keeps none, so there is nothing to compare."""
        if force is not None:
            raise ConfigError(
                "index --redo runs on this machine's engine (index.engine = 'local'); "
                "run it without --ray"
            )
        return RedoReport()

    def transcript_plan(self, video: VideoRow) -> TranscriptPlan | None:
        """Where ``video``'s transcripts will come from, where the engine knows (None here)."""
        return None

    def speech_note(self) -> str | None:
        """One line when speech-to-text was meant to run and cannot (None here)."""
        return None

    def totals(self, summary: IndexSummary) -> IndexSummary:
        """``summary`` with the catalogue's totals filled in (chunks, segments, hours)."""
        summary.chunks_total = self.catalog.chunk_count()
        indexed = self.catalog.videos(statuses=[INDEXED])
        summary.segments_total = len(self.catalog.segments(video_ids=[v.id for v in indexed]))
        summary.hours_indexed = sum((v.duration_s or 0.0) for v in indexed) / 3600.0
        return summary

    def _decode_spec(self, preferred_height: int | None) -> DecodeSpec:
        """How videos are decoded, frames at the embedder's ``preferred_height`` if it has one."""
        return DecodeSpec(
            chunk_s=self.config.chunk_s,
            frame_fps=self.config.frame_fps,
            frame_height=frame_height_for(preferred_height, self.config.frame_max_height),
            batch_chunks=self.config.batch_chunks,
            audio_rate=self.config.audio_rate,
        )

    # -- storing chunks -------------------------------------------------------------------------

    def _ensure_collections(self, dim: int) -> None:
        for name in (self.config.chunk_collection, self.config.segment_collection):
            self.vectors.ensure_collection(
                name,
                dim,
                keyword_fields=CHUNK_KEYWORD_FIELDS,
                float_fields=CHUNK_FLOAT_FIELDS,
            )

    def _write_batch(
        self,
        video: VideoRow,
        indices: Sequence[int],
        spans: Sequence[tuple[float, float]],
        transcript: BatchTranscript,
        vectors: np.ndarray,
        embedder: str,
        captions: bool,
    ) -> None:
        """Store one batch of computed chunks (``indices`` of the video, their ``spans``, texts
        and vectors, in that order): Qdrant first, catalogue second, so a chunk the
        catalogue holds is in the index for sure, and one that is only in the index is simply
        upserted again on resume (point ids are the chunks' own: a batch stored twice changes
        nothing)."""
        if transcript.note and captions and video.id not in self._noted:
            # Captions were there but unreadable: worth a recorded reason, once per video.
            self._noted.add(video.id)
            self.catalog.record_problem("transcript", video.id, transcript.note, video.playlist_id)
        rows = [
            ChunkRow(
                video_id=video.id,
                idx=idx,
                start_s=span[0],
                end_s=span[1],
                transcript=text,
                vector=vector_to_bytes(vector),
            )
            for idx, span, text, vector in zip(
                indices, spans, transcript.texts, vectors, strict=True
            )
        ]
        self._put_chunks(video, rows, vectors, transcript.source, embedder)
        self.progress.advance(len(rows), video)

    def _put_chunks(
        self,
        video: VideoRow,
        rows: Sequence[ChunkRow],
        vectors: np.ndarray,
        transcript_source: str,
        embedder: str,
    ) -> None:
        self._upsert_chunks(video, rows, vectors)
        self.catalog.add_chunks(rows)
        self.catalog.update_video(video.id, transcript_source=transcript_source, embedder=embedder)

    def _upsert_chunks(
        self, video: VideoRow, rows: Sequence[ChunkRow], vectors: np.ndarray | None = None
    ) -> None:
        if not rows:
            return
        self.vectors.upsert(
            self.config.chunk_collection,
            [chunk_point_id(video.id, r.idx) for r in rows],
            vectors if vectors is not None else vectors_from_bytes([r.vector for r in rows]),
            [
                {
                    "video_id": video.id,
                    "playlist_id": video.playlist_id,
                    "domain": video.domain,
                    "chunk_idx": r.idx,
                    "start_s": r.start_s,
                    "end_s": r.end_s,
                    "transcript": r.transcript,
                }
                for r in rows
            ],
        )

    def _upsert_segments(
        self, video: VideoRow, rows: Sequence[SegmentRow], chunks: Sequence[ChunkRow]
    ) -> None:
        if not rows:
            return
        self.vectors.upsert(
            self.config.segment_collection,
            [r.id for r in rows],
            vectors_from_bytes([r.vector for r in rows]),
            [
                {
                    "video_id": video.id,
                    "playlist_id": video.playlist_id,
                    "domain": video.domain,
                    "segment_idx": r.idx,
                    "start_s": r.start_s,
                    "end_s": r.end_s,
                    "transcript": " ".join(
                        c.transcript for c in chunks[r.chunk_start : r.chunk_end]
                    ),
                }
                for r in rows
            ],
        )

    # -- segments, duplicates, seeds -----------------------------------------------------

    def _build_segments(self, video: VideoRow, grid: Sequence[tuple[float, float]]) -> None:
        chunks = self.catalog.chunks(video.id)
        if len(chunks) != len(grid):
            raise MediaError(
                f"video {video.id!r} has {len(chunks)} stored chunks of {len(grid)}; "
                "run `playlisteval index` again to finish it"
            )
        vectors = vectors_from_bytes([c.vector for c in chunks])
        spans = plan_segments(
            len(chunks),
            self.config.chunk_s,
            min_s=self.config.segment_min_s,
            target_s=self.config.segment_target_s,
            max_s=self.config.segment_max_s,
            duration_s=video.duration_s,
        )
        rows = [
            SegmentRow(
                id=segment_point_id(video.id, span.idx),
                video_id=video.id,
                domain=video.domain,
                idx=span.idx,
                chunk_start=span.chunk_start,
                chunk_end=span.chunk_end,
                start_s=chunks[span.chunk_start].start_s,
                end_s=chunks[span.chunk_end - 1].end_s,
                vector=vector_to_bytes(segment_vector(vectors[span.chunk_start : span.chunk_end])),
            )
            for span in spans
        ]
        self._upsert_segments(video, rows, chunks)
        self.catalog.replace_segments(video.id, rows)
        length = rows[-1].end_s - rows[0].start_s if rows else 0.0
        if rows and length < self.config.segment_min_s:
            # Still evidence, one segment of its own length: said, so a playlist of short clips
            # is not taken for the paper's 10–30-minute segments.
            note = (
                f"{length / 60:.1f} min long, shorter than a segment "
                f"({self.config.segment_min_s / 60:g}–{self.config.segment_max_s / 60:g} min): "
                "indexed as one segment of its own length"
            )
            log.warning("video_shorter_than_a_segment", video_id=video.id, note=note)
            self.catalog.record_problem("segments", video.id, note, video.playlist_id)

    def _segments_in_seeding(self) -> tuple[list[str], list[SegmentRef], np.ndarray]:
        return segments_in_seeding(self.catalog)

    def dedupe(self) -> list[DuplicateRow]:
        """Drop near-duplicate videos (the later one of a pair), recording each decision.

        Recomputed over every indexed video each time, in seeding order, so the outcome does not
        depend on the order in which videos happened to be indexed.
        """
        order, refs, vectors = self._segments_in_seeding()
        findings = find_near_duplicates(order, refs, vectors, self.config.duplicate_cosine)
        dropped = {f.video_id for f in findings}
        for video in self.catalog.videos(statuses=[DUPLICATE]):
            if video.id not in dropped:  # its original left the run: it is back in seeding
                self.catalog.update_video(video.id, status=INDEXED, reason=None, duplicate_of=None)
                chunks = self.catalog.chunks(video.id)
                self._upsert_chunks(video, chunks)
                self._upsert_segments(video, self.catalog.segments(video_ids=[video.id]), chunks)
        for video_id in dropped:
            # Out of the search index too, or an agent would find the copy; the catalogue keeps
            # its vectors, so a reversed decision re-inserts them without recomputing.
            self.vectors.delete(
                self.config.chunk_collection,
                [chunk_point_id(video_id, c.idx) for c in self.catalog.chunks(video_id)],
            )
            self.vectors.delete(
                self.config.segment_collection,
                [s.id for s in self.catalog.segments(video_ids=[video_id])],
            )
        rows = [DuplicateRow(**asdict(f)) for f in findings]  # a finding is a row's columns
        for row in rows:
            self.catalog.record_duplicate(row)
        return rows

    def compute_seeds(self) -> dict[str, int]:
        """Persist the seed pairs of every domain; returns counts per domain."""
        order = [v.id for v in self.catalog.videos(statuses=[INDEXED])]
        rows = self.catalog.segments(video_ids=order)
        refs = [SegmentRef(r.id, r.video_id, r.domain) for r in rows]
        pairs = find_seeds(
            refs,
            vectors_from_bytes([r.vector for r in rows]),
            min_cosine=self.config.seed_min_cosine,
            max_cosine=self.config.seed_max_cosine,
            per_segment=self.config.seed_candidates_per_segment,
        )
        self.catalog.replace_seeds(
            [
                SeedRow(
                    id=p.seed_id,
                    domain=p.domain,
                    segment_a=p.segment_a,
                    segment_b=p.segment_b,
                    cosine=p.cosine,
                )
                for p in pairs
            ]
        )
        counts: dict[str, int] = {d: 0 for d in sorted({v.domain for v in self.catalog.videos()})}
        for p in pairs:
            counts[p.domain] = counts.get(p.domain, 0) + 1
        return counts


class Indexer(IndexStore):
    """Computes chunks on this machine: frames and audio decoded in threads ahead of the
    transcriber and the embedder, which run in the caller's thread, one batch at a time."""

    def __init__(
        self,
        catalog: Catalog,
        vectors: VectorIndex,
        embedder: Embedder,
        transcriber: Transcriber,
        config: IndexConfig,
        media_dir: Path,
        progress: IndexProgress | None = None,
    ) -> None:
        super().__init__(catalog, vectors, config, media_dir, progress)
        self.embedder = embedder
        self.transcriber = transcriber
        self.screen_text = ScreenTextReader() if config.ocr else None

    def decode_spec(self) -> DecodeSpec:
        """How this indexer's videos are decoded (frames at the embedder's height)."""
        return self._decode_spec(getattr(self.embedder, "frame_height", None))

    def index_ready(self) -> IndexSummary:
        """Index every ready video (chunks, transcripts, embeddings, segments), nothing after:
        :meth:`run` without near-duplicates and seeds, for a caller that times each stage."""
        summary = IndexSummary()
        ready = self.catalog.videos(statuses=[READY])
        plans: list[tuple[VideoRow, list[tuple[float, float]], list[int]]] = []
        for video in ready:
            done = self.catalog.done_chunks(video.id)
            plans.append((video, *chunks_to_do(video.duration_s or 0.0, self.config.chunk_s, done)))
        self._ensure_collections(self.embedder.dim)
        self.progress.begin(sum(len(todo) for _, _, todo in plans), len(plans))
        jobs = [self._decode_job(video, grid, todo) for video, grid, todo in plans]
        try:
            with DecodeAhead(jobs, self.config.decode_workers) as feed:
                for number, (video, grid, todo) in enumerate(plans):
                    self.progress.video_started(video, len(todo))
                    error: str | None = None
                    try:
                        computed = self._index_chunks(video, grid, feed.batches(number))
                        summary.chunks_computed += computed
                        self._build_segments(video, grid)
                        self.catalog.update_video(video.id, status=INDEXED, reason=None)
                        self.catalog.set_index_record(self.made_with(video))
                        summary.videos_indexed += 1
                    except (MediaError, TranscriptError, EmbeddingError) as exc:
                        feed.cancel(number)
                        error = self._fail(video, "index", exc)
                        summary.videos_failed.append((video.id, error))
                    self.progress.video_finished(video, error)
        finally:
            self.progress.end()
        return summary

    def index_video(self, video_id: str) -> str:
        """Index one ready video (chunks, transcripts, embeddings, segments): the job a worker
        claims from the shared queue. Dedupe and seeds come after, once for all videos
        (:meth:`dedupe`, :meth:`compute_seeds`). Returns what happened, in words."""
        video = self.catalog.video(video_id)
        if video is None:
            return f"skipped: video {video_id!r} is not in the catalogue"
        if video.status == INDEXED:
            return "already indexed"
        if video.status != READY:
            return f"skipped: video {video_id!r} is {video.status!r}, not ready"
        done = self.catalog.done_chunks(video.id)
        grid, todo = chunks_to_do(video.duration_s or 0.0, self.config.chunk_s, done)
        self._ensure_collections(self.embedder.dim)
        try:
            with DecodeAhead(
                [self._decode_job(video, grid, todo)], self.config.decode_workers
            ) as feed:
                computed = self._index_chunks(video, grid, feed.batches(0))
            self._build_segments(video, grid)
        except (MediaError, TranscriptError, EmbeddingError) as exc:
            return "failed: " + self._fail(video, "index", exc)
        self.catalog.update_video(video.id, status=INDEXED, reason=None)
        self.catalog.set_index_record(self.made_with(video))
        return f"indexed: {computed} chunks computed"

    def _decode_job(
        self, video: VideoRow, grid: Sequence[tuple[float, float]], todo: Sequence[int]
    ) -> Callable[[], Iterator[DecodedBatch]]:
        """What a decoder thread runs for ``video``: its ``todo`` chunks' frames, batch by
        batch, with each batch's audio when the transcriber will read it."""
        captions = self.catalog.captions_of(video)
        want_audio = reads_audio(self._transcriber_of(video, captions), captions)
        spec = self.decode_spec()

        def batches() -> Iterator[DecodedBatch]:
            if not todo:
                return
            assert video.path is not None
            yield from decode_batches(Path(video.path), grid, todo, spec, want_audio=want_audio)

        return batches

    def _index_chunks(
        self, video: VideoRow, grid: Sequence[tuple[float, float]], batches: Iterator[DecodedBatch]
    ) -> int:
        assert video.path is not None
        path = Path(video.path)
        captions = self.catalog.captions_of(video)
        rate = self.config.audio_rate
        computed = 0
        for decoded in batches:
            spans = {grid[idx]: idx for idx, _ in decoded.chunks}
            audio = audio_reader(path, decoded.audio, spans, rate)
            computed += self._store_batch(video, grid, decoded.chunks, captions, audio)
        return computed

    def _store_batch(
        self,
        video: VideoRow,
        grid: Sequence[tuple[float, float]],
        batch: Sequence[tuple[int, list[np.ndarray]]],
        captions: Sequence[Path],
        audio: Callable[[float, float], np.ndarray],
    ) -> int:
        spans = [grid[idx] for idx, _ in batch]
        transcriber = self._transcriber_of(video, captions)
        with device_slot(transcriber):
            transcript = transcribe_batch(
                transcriber, spans, captions, audio, self.config.audio_rate
            )
        vectors = self._embed(batch, transcript.texts)
        indices = [idx for idx, _ in batch]
        self._write_batch(
            video, indices, spans, transcript, vectors, self.embedder.name, bool(captions)
        )
        return len(batch)

    def _embed(
        self, batch: Sequence[tuple[int, list[np.ndarray]]], texts: Sequence[str]
    ) -> np.ndarray:
        """The vectors of a batch of chunks from their frames and transcripts (with the text on
        screen beside the transcript when ``index.ocr`` is on)."""
        texts = list(texts)
        if self.screen_text is not None:
            reader = self.screen_text
            shown = [reader.read_chunk(frames) for _, frames in batch]
            texts = [with_screen_text(t, s) for t, s in zip(texts, shown, strict=True)]
        with device_slot(self.embedder):
            return embed_batch(self.embedder, [frames for _, frames in batch], texts)

    # -- what an index is made with, and redoing what changed settings made stale -------------

    def _transcriber_of(self, video: VideoRow, captions: Sequence[Path]) -> Transcriber:
        return transcriber_for(self.transcriber, captions, video.has_audio)

    def transcript_plan(self, video: VideoRow) -> TranscriptPlan:
        """Where ``video``'s transcripts come from under these settings, and why for none."""
        return plan_transcript(self.transcriber, self.catalog.captions_of(video), video.has_audio)

    def speech_note(self) -> str | None:
        """One line when ``auto``'s faster-whisper cannot run here: what it lacks and how to
        turn speech-to-text on; None when it can run (or another backend is configured)."""
        fallback = self.transcriber
        if isinstance(fallback, AutoTranscriber):
            fallback = fallback.fallback
        if not isinstance(fallback, DeferredWhisper) or not fallback.unavailable:
            return None
        return (
            f"speech-to-text is off: {fallback.model_label} cannot run here "
            f"({fallback.unavailable}); videos without captions are indexed by their frames "
            "alone. To hear them, install the `asr` extra (pip install -e '.[asr]') or set "
            "index.whisper_model to a CTranslate2 Whisper folder; to silence this, set "
            'index.local_transcriber = "none"'
        )

    def made_with(self, video: VideoRow) -> IndexRecordRow:
        """What ``video``'s index is made with under these settings, stage by stage."""
        spec = self.decode_spec()
        cfg = self.config
        return IndexRecordRow(
            video_id=video.id,
            chunks=f"{cfg.chunk_s:g} s chunks",
            transcripts=self.transcript_plan(video).source,
            embeddings=f"{embedder_label(self.embedder)}; frames {spec.frame_fps:g} fps at "
            f"{spec.frame_height}p; ocr {'on' if cfg.ocr else 'off'}",
            segments=f"segments {cfg.segment_min_s / 60:g}-{cfg.segment_target_s / 60:g}-"
            f"{cfg.segment_max_s / 60:g} min",
        )

    def redo_plans(
        self, force: str | None = None, report: RedoReport | None = None
    ) -> list[tuple[VideoRow, RedoPlan, IndexRecordRow]]:
        """The indexed videos (near-duplicates too) whose index the settings made stale, or
        all of them for ``force``, with what each needs; a video with no record is taken as
        made with the old defaults (:func:`tools.index.index_records.old_defaults_record`) and noted
        in ``report``."""
        records = self.catalog.index_records()
        found: list[tuple[VideoRow, RedoPlan, IndexRecordRow]] = []
        for video in self.catalog.videos(statuses=[INDEXED, DUPLICATE]):
            now = self.made_with(video)
            recorded = records.get(video.id)
            if recorded is None:
                grid = media.chunk_grid(video.duration_s or 0.0, self.config.chunk_s)
                stored = self.catalog.chunk_transcripts(video.id)
                fits = len(stored) == len(grid) and (not grid or stored[0][:2] == grid[0])
                recorded = old_defaults_record(video, now, fits)
                if report is not None:
                    report.unrecorded.append(video.id)
            plan = plan_redo(recorded, now, force)
            if plan is not None:
                found.append((video, plan, recorded))
        return found

    def redo_stale(self, force: str | None = None) -> RedoReport:
        """Redo, video by video, what the settings made stale since each was indexed (or what
        ``force`` asks), keeping everything else; each video's redo is recorded before it
        starts and cleared when it is done, so a run killed midway takes it up again."""
        report = RedoReport()
        for video, plan, recorded in self.redo_plans(force, report):
            report.videos.setdefault(plan.kind, []).append(video.id)
            report.changes[video.id] = plan.changes
            try:
                retranscribed, reembedded = self._redo_video(video, plan, recorded)
            except (MediaError, TranscriptError, EmbeddingError) as exc:
                report.failed.append((video.id, self._fail(video, "redo", exc)))
                continue
            report.chunks_retranscribed += retranscribed
            report.chunks_reembedded += reembedded
        return report

    def _redo_video(
        self, video: VideoRow, plan: RedoPlan, recorded: IndexRecordRow
    ) -> tuple[int, int]:
        """Redo one video's stale stages; (chunks transcribed again, chunks embedded again)."""
        grid = media.chunk_grid(video.duration_s or 0.0, self.config.chunk_s)
        stored = self.catalog.chunks(video.id)
        pending = "all" if plan.reembed_all and plan.kind == "transcripts" else plan.kind
        self.catalog.set_index_record(IndexRecordRow(**{**recorded.model_dump(), "redo": pending}))
        if plan.kind == "chunks" or len(stored) != len(grid):
            self._start_over(video, stored)  # index_ready makes it again, and records it
            return 0, 0
        self._ensure_collections(self.embedder.dim)
        texts = [c.transcript for c in stored]
        source = video.transcript_source or "none"
        retranscribed, todo = 0, list(range(len(grid))) if plan.reembed_all else []
        if plan.kind == "transcripts":
            new, source = self._retranscribe(video, grid)
            retranscribed = len(grid)
            changed = [i for i, (a, b) in enumerate(zip(texts, new, strict=True)) if a != b]
            todo = todo or changed
            texts = new
        elif plan.kind == "embeddings":
            todo = list(range(len(grid)))
        reembedded = self._reembed(video, grid, todo, texts, source)
        self.catalog.update_video(video.id, transcript_source=source)
        self._build_segments(video, grid)
        self.catalog.set_index_record(self.made_with(video))
        return retranscribed, reembedded

    def _start_over(self, video: VideoRow, stored: Sequence[ChunkRow]) -> None:
        """Forget a video's chunks and segments, here and in the search index, and list it
        ready again: its chunk grid changed, so every chunk is made anew."""
        segments = self.catalog.segments(video_ids=[video.id])
        for name, ids in (
            (self.config.chunk_collection, [chunk_point_id(video.id, c.idx) for c in stored]),
            (self.config.segment_collection, [s.id for s in segments]),
        ):
            if ids and self.vectors.has_collection(name):
                self.vectors.delete(name, ids)
        self.catalog.delete_chunks(video.id)
        self.catalog.update_video(video.id, status=READY, reason=None, duplicate_of=None)

    def _retranscribe(
        self, video: VideoRow, grid: Sequence[tuple[float, float]]
    ) -> tuple[list[str], str]:
        """Every chunk's transcript again (no frames decoded), and the backend that wrote it."""
        assert video.path is not None
        path, rate = Path(video.path), self.config.audio_rate
        captions = self.catalog.captions_of(video)
        transcriber = self._transcriber_of(video, captions)
        want_audio = reads_audio(transcriber, captions)
        texts: list[str] = []
        source = transcriber.name
        step = max(1, self.config.batch_chunks)
        for first in range(0, len(grid), step):
            batch: list[tuple[int, list[np.ndarray]]] = [
                (idx, []) for idx in range(first, min(first + step, len(grid)))
            ]
            spans = [grid[idx] for idx, _ in batch]
            ahead = batch_audio(path, grid, batch, rate) if want_audio else None
            audio = audio_reader(path, ahead, {grid[idx]: idx for idx, _ in batch}, rate)
            with device_slot(transcriber):
                done = transcribe_batch(transcriber, spans, captions, audio, rate)
            texts.extend(done.texts)
            source = done.source
        return texts, source

    def _reembed(
        self,
        video: VideoRow,
        grid: Sequence[tuple[float, float]],
        todo: Sequence[int],
        texts: Sequence[str],
        source: str,
    ) -> int:
        """Embed the ``todo`` chunks again from their frames and ``texts`` and store them (the
        others keep their rows and points as they are); how many were embedded."""
        if not todo:
            return 0
        assert video.path is not None
        done = 0
        spec = self.decode_spec()
        for decoded in decode_batches(Path(video.path), grid, todo, spec, want_audio=False):
            indices = [idx for idx, _ in decoded.chunks]
            vectors = self._embed(decoded.chunks, [texts[idx] for idx in indices])
            rows = [
                ChunkRow(
                    video_id=video.id,
                    idx=idx,
                    start_s=grid[idx][0],
                    end_s=grid[idx][1],
                    transcript=texts[idx],
                    vector=vector_to_bytes(vector),
                )
                for idx, vector in zip(indices, vectors, strict=True)
            ]
            self._put_chunks(video, rows, vectors, source, self.embedder.name)
            done += len(rows)
        return done
