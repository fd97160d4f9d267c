"""Indexing on Ray Data (``playlisteval index --ray``): the GPU stage spread over machines.

The stages are those of :class:`tools.index.indexer.Indexer`, run by an existing engine instead of
our
threads. Videos are rows; a CPU **task** per video fetches it from its source into the node's
scratch folder (yt-dlp or a URL; a path is read in place, so it must be visible on the nodes),
probes it and decodes its chunks, ``index.embed_batch_size`` a row (the local indexer's batches,
so the models see exactly what they see there); **actor pools** hold the models, one replica per
GPU share (``index.ray_gpus_per_actor``), ASR first, then the embedder; the driver stores what
comes out (Qdrant first, then the catalogue), builds each finished video's segments, and then
drops near-duplicates and computes seeds as the local indexer does. Ray Data streams the rows
with backpressure, retries a task whose worker died and restarts a dead actor; the driver keeps
the chunks it has stored by id, so a batch computed twice is stored once, and a rerun computes
only what is missing.

Models are built inside the actors, from picklable factories (:class:`RayModels`): the driver
never loads them, and needs no GPU.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import structlog

from store.catalog import (
    FAILED,
    INDEXED,
    LISTED,
    READY,
    Catalog,
    VideoRow,
)
from store.errors import (
    ConfigError,
    EmbeddingError,
    IngestError,
    MediaError,
    PlaylistEvalError,
    TranscriptError,
)
from tools.index import ingest, media
from tools.index.captions import parse_captions
from tools.index.embeddings import Embedder
from tools.index.indexer import (
    BatchTranscript,
    DecodeSpec,
    IndexConfig,
    IndexProgress,
    IndexStore,
    IndexSummary,
    audio_reader,
    chunks_to_do,
    decode_batches,
    download_listed,
    embed_batch,
    transcribe_batch,
)
from tools.index.ocr import ScreenTextReader, with_screen_text
from tools.index.transcripts import Transcriber, caption_preference
from tools.index.vectors import VectorIndex

__all__ = [
    "AudioNeed",
    "RayIndexError",
    "RayIndexer",
    "RayModels",
    "RayOptions",
    "connect",
]

log = structlog.get_logger("playlisteval.index.ray")

AudioNeed = Literal["always", "without-captions", "never"]
# Row kinds on the stream: a video's probe (first), a batch of its chunks, or its failure.
VIDEO, BATCH, ERROR = "video", "batch", "error"


class RayIndexError(PlaylistEvalError):
    """The Ray run itself stopped (a cluster that cannot be reached, a model that cannot load in
    its actor); the chunks stored before it are kept."""


@dataclass(frozen=True)
class RayModels:
    """How the actors build the index models (never the driver) and what decoding needs to know
    of them beforehand: the embedder's frame height and when the transcriber reads audio."""

    embedder: Callable[[], Embedder]
    transcriber: Callable[[], Transcriber]
    frame_height: int | None
    audio: AudioNeed


@dataclass(frozen=True)
class RayOptions:
    """Where and how the stages run (``index.ray_*`` settings)."""

    address: str | None = None  # None: RAY_ADDRESS, else a local cluster started here
    num_cpus: int | None = None  # of a local cluster started here (None: every core)
    decode_cpus: float = 0.5
    actor_cpus: float = 0.5
    gpus_per_actor: float = 0.5  # on a GPU cluster: 0.5 puts one ASR and one embedder per GPU
    actors: int = 0  # per model; 0: as many as the cluster's GPUs hold (1 on CPUs)
    use_gpus: bool = True  # False: the models stay on CPUs even where GPUs are (index.device)
    require_gpus: bool = False  # index.device names a GPU: a cluster without one is an error
    scratch: str | None = None  # per node; None: the node's temporary folder
    connect_timeout_s: float = 15.0  # to reach a named cluster's address, before Ray is asked


def connect(options: RayOptions) -> bool:
    """Join the cluster ``options`` names (``RAY_ADDRESS`` when it names none), or start a local
    one; a session already open in this process is used as it is. Returns whether a local
    cluster was started here (the caller shuts it down)."""
    try:
        import ray
    except ImportError as exc:  # not installed, or broken: the local indexer needs none of it
        raise RayIndexError(
            f"Ray does not import here ({type(exc).__name__}: {exc}); install the `ray` extra "
            "(`pip install -e .[ray]`), or index on this machine without --ray"
        ) from exc

    if ray.is_initialized():
        return False
    address = options.address or os.environ.get("RAY_ADDRESS") or None
    common: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
    try:
        if address:
            reachable(address, options.connect_timeout_s)
            ray.init(address=address, **common)
            return False
        ray.init(num_cpus=options.num_cpus, **common)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = address or "a local cluster"
        raise RayIndexError(
            f"cannot start or reach the Ray cluster at {where}: {exc}; start one with "
            "`ray start --head` and pass its address to `index --ray ADDRESS` (or RAY_ADDRESS)"
        ) from exc
    return True


def reachable(address: str, timeout_s: float) -> None:
    """RayIndexError, within ``timeout_s``, when nothing answers at a cluster address of the form
    ``HOST:PORT`` or ``ray://HOST:PORT`` (``ray.init`` itself retries an unreachable address for
    minutes); ``auto`` and other forms are left to Ray."""
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        raise RayIndexError(
            f"cannot reach the Ray cluster at {address!r} within {timeout_s:g} s "
            f"({exc.strerror or exc}); start one with `ray start --head` and pass its address to "
            "`index --ray ADDRESS` (or RAY_ADDRESS), or raise index.ray_connect_timeout_s"
        ) from exc


# -- what travels between the stages -----------------------------------------------------------


@dataclass(frozen=True)
class VideoJob:
    """One input row: a video as listed (where its file is, or where to fetch it) and the
    chunks of it already stored."""

    entry: ingest.VideoEntry
    done: frozenset[int]


@dataclass(frozen=True)
class VideoMeta:
    """A video as the task probed it, and how many chunks it has and has left."""

    info: media.MediaInfo
    chunks: int
    todo: int


@dataclass
class ChunkBatch:
    """A batch of one video's chunks, filled in stage by stage (frames and audio dropped once
    used, so what reaches the driver is small)."""

    video_id: str
    idx: list[int]
    spans: list[tuple[float, float]]
    frames: list[list[np.ndarray]] | None
    audio: dict[int, np.ndarray] | None
    captions: tuple[tuple[str, str], ...]  # (file name, text): no shared filesystem needed
    path: str
    rate: int
    transcript: BatchTranscript | None = None
    vectors: np.ndarray | None = None
    embedder: str = ""


def _row(video_id: str, kind: str, value: object) -> dict[str, Any]:
    return {"video_id": video_id, "kind": kind, "data": pickle.dumps(value, protocol=5)}


def _error(video_id: str, stage: str, error: BaseException | str) -> dict[str, Any]:
    return _row(video_id, ERROR, (stage, str(error)))


# -- stage 1: fetch and decode, a CPU task per video --------------------------------------------


def _usable_captions(paths: Sequence[Path]) -> bool:
    for path in caption_preference(paths):
        try:
            parse_captions(path)
        except TranscriptError:
            continue
        return True
    return False


def _fetch(job: VideoJob, config: IndexConfig, scratch: Path) -> tuple[Path, list[Path], bool]:
    """The video's file on this node and its caption files; whether it was downloaded here."""
    entry = job.entry
    if entry.path is not None and entry.path.exists():
        return entry.path, [p for p in entry.caption_paths if p.exists()], False
    if entry.url is None:
        raise MediaError(f"file {str(entry.path)!r} is missing")
    got = download_listed(entry, scratch / entry.video_id, config)
    if got.path is None:
        raise IngestError(f"the download of {entry.video_id!r} left no file")
    return got.path, list(got.caption_paths), True


def decode_video(
    row: dict[str, Any], *, config: IndexConfig, spec: DecodeSpec, audio: AudioNeed, scratch: str
) -> Iterator[dict[str, Any]]:
    """A video's rows: its probe, then its missing chunks' frames (and audio) batch by batch;
    a failure is a row with its stage and reason, never an exception (the others go on)."""
    job: VideoJob = pickle.loads(row["data"])
    video_id = job.entry.video_id
    folder = Path(scratch or tempfile.gettempdir()) / "playlisteval-scratch"
    try:
        path, captions, downloaded = _fetch(job, config, folder)
    except MediaError as exc:
        yield _error(video_id, "media", exc)
        return
    except IngestError as exc:
        yield _error(video_id, "download", exc)
        return
    try:
        try:
            info = media.probe(path)
            media.check_indexable(info)  # a still picture under a video's name, as locally
        except MediaError as exc:
            yield _error(video_id, "probe", exc)
            return
        grid, todo = chunks_to_do(info.duration_s, config.chunk_s, job.done)
        meta = VideoMeta(info, len(grid), len(todo))
        yield _row(video_id, VIDEO, meta)
        want_audio = audio == "always" or (
            audio == "without-captions" and not _usable_captions(captions)
        )
        texts = tuple((p.name, p.read_text(encoding="utf-8", errors="replace")) for p in captions)
        try:
            for decoded in decode_batches(path, grid, todo, spec, want_audio=want_audio):
                batch = ChunkBatch(
                    video_id=video_id,
                    idx=[idx for idx, _ in decoded.chunks],
                    spans=[grid[idx] for idx, _ in decoded.chunks],
                    frames=[frames for _, frames in decoded.chunks],
                    audio=decoded.audio,
                    captions=texts,
                    path=str(path),
                    rate=spec.audio_rate,
                )
                yield _row(video_id, BATCH, batch)
        except (MediaError, OSError) as exc:
            yield _error(video_id, "index", exc)
    finally:
        if downloaded:
            shutil.rmtree(folder / video_id, ignore_errors=True)


# -- stages 2 and 3: the models, in actor pools ----------------------------------------------------


class TranscribeStage:
    """An ASR actor: the transcriber built once, on its own GPU share."""

    def __init__(self, models: RayModels) -> None:
        self.transcriber = models.transcriber()
        self.captions_dir = Path(tempfile.mkdtemp(prefix="playlisteval-captions-"))

    def _caption_files(self, batch: ChunkBatch) -> list[Path]:
        folder = self.captions_dir / batch.video_id
        paths = [folder / name for name, _ in batch.captions]
        if batch.captions and not folder.exists():
            folder.mkdir(parents=True)
            for (_, text), path in zip(batch.captions, paths, strict=True):
                path.write_text(text, encoding="utf-8")
        return paths

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        """Transcribe a batch row; other rows pass through."""
        if row["kind"] != BATCH:
            return row
        batch: ChunkBatch = pickle.loads(row["data"])
        spans = dict(zip(batch.spans, batch.idx, strict=True))
        audio = audio_reader(Path(batch.path), batch.audio, spans, batch.rate)
        try:
            batch.transcript = transcribe_batch(
                self.transcriber, batch.spans, self._caption_files(batch), audio, batch.rate
            )
        except (TranscriptError, MediaError) as exc:
            return _error(batch.video_id, "index", exc)
        batch.audio = None
        return _row(batch.video_id, BATCH, batch)


class EmbedStage:
    """An embedding actor: the embedder built once, on its own GPU share; with ``ocr`` it reads
    the on-screen text of each chunk's frames and embeds it beside the transcript, as the local
    indexer does (``index.ocr``; :mod:`tools.index.ocr`), the stored transcript staying what was
    said."""

    def __init__(self, models: RayModels, ocr: bool = False) -> None:
        self.embedder = models.embedder()
        self.screen_text = ScreenTextReader() if ocr else None

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        """Embed a transcribed batch row; other rows pass through."""
        if row["kind"] != BATCH:
            return row
        batch: ChunkBatch = pickle.loads(row["data"])
        assert batch.frames is not None
        assert batch.transcript is not None
        texts = batch.transcript.texts
        if self.screen_text is not None:
            reader = self.screen_text
            shown = [reader.read_chunk(frames) for frames in batch.frames]
            texts = [with_screen_text(t, s) for t, s in zip(texts, shown, strict=True)]
        try:
            vectors = embed_batch(self.embedder, batch.frames, texts)
        except EmbeddingError as exc:
            return _error(batch.video_id, "index", exc)
        batch.vectors = np.asarray(vectors, dtype=np.float32)
        batch.embedder = self.embedder.name
        batch.frames = None
        return _row(batch.video_id, BATCH, batch)


# -- the driver -------------------------------------------------------------------------------


@dataclass
class _Video:
    """What the driver knows of one video during the run."""

    row: VideoRow
    planned: int  # chunks counted in the progress bar's total at the start
    meta: VideoMeta | None = None
    stored: set[int] = field(default_factory=set)
    over: bool = False


class RayIndexer(IndexStore):
    """Computes chunks on a Ray cluster; stores them, and does the rest, as the local indexer."""

    def __init__(
        self,
        catalog: Catalog,
        vectors: VectorIndex,
        models: RayModels,
        config: IndexConfig,
        media_dir: Path,
        options: RayOptions | None = None,
        progress: IndexProgress | None = None,
    ) -> None:
        super().__init__(catalog, vectors, config, media_dir, progress)
        self.models = models
        self.options = options or RayOptions()
        self._collections = False

    def decode_spec(self) -> DecodeSpec:
        """How the tasks decode (frames at the embedder's height, as the local indexer)."""
        return self._decode_spec(self.models.frame_height)

    def _jobs(self, summary: IndexSummary) -> list[VideoJob]:
        jobs: list[VideoJob] = []
        for video in self.catalog.videos(statuses=[LISTED, READY]):
            if video.path is None and video.url is None:
                error = self._fail(video, "media", "the video has neither a file nor a URL")
                summary.videos_failed.append((video.id, error))
                continue
            done = frozenset(self.catalog.done_chunks(video.id))
            jobs.append(VideoJob(self.entry_of(video), done))
        return jobs

    def _pools(self) -> tuple[int, float]:
        """Actors per model and the GPU share each takes (0 on CPUs)."""
        import ray

        found = float(ray.cluster_resources().get("GPU", 0.0))
        if self.options.require_gpus and not found:
            raise ConfigError(
                "index.device asks for a GPU, but the Ray cluster has none; set index.device = "
                "'auto' (or 'cpu'), or add GPU nodes to the cluster"
            )
        gpus = found if self.options.use_gpus else 0.0
        share = self.options.gpus_per_actor if gpus else 0.0
        if self.options.actors:
            return self.options.actors, share
        if not gpus:
            return 1, 0.0
        return max(1, int(gpus // (2 * share))), share

    def dataset(self, jobs: Sequence[VideoJob]) -> Any:
        """The Ray Data pipeline over ``jobs`` (lazy: nothing runs until it is iterated)."""
        import ray.data

        # Ray Data's own INFO lines ("execution finished in …") under our progress bars: off.
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # the CLI draws its own bars
        context.print_on_execution_start = False
        context.enable_auto_log_stats = False
        actors, gpus = self._pools()
        options = self.options
        items = [_row(job.entry.video_id, "job", job) for job in jobs]
        dataset = ray.data.from_items(items, override_num_blocks=len(items)).flat_map(
            decode_video,
            fn_kwargs={
                "config": self.config,
                "spec": self.decode_spec(),
                "audio": self.models.audio,
                "scratch": options.scratch or "",
            },
            num_cpus=options.decode_cpus,
        )
        stages: tuple[tuple[type, dict[str, Any]], ...] = (
            (TranscribeStage, {"models": self.models}),
            (EmbedStage, {"models": self.models, "ocr": self.config.ocr}),
        )
        for stage, kwargs in stages:  # ASR, then the embedder: a pool each
            dataset = dataset.map(
                stage,
                fn_constructor_kwargs=kwargs,
                compute=ray.data.ActorPoolStrategy(size=actors),
                num_cpus=options.actor_cpus,
                num_gpus=gpus,
            )
        return dataset

    def index_ready(self) -> IndexSummary:
        """Index every listed or ready video on the cluster (fetched there, not here)."""
        summary = IndexSummary()
        jobs = self._jobs(summary)
        videos: dict[str, _Video] = {}
        for job in jobs:
            entry = job.entry
            row = self.catalog.video(entry.video_id)
            assert row is not None
            planned = 0
            if entry.duration_s is not None:
                planned = len(chunks_to_do(entry.duration_s, self.config.chunk_s, job.done)[1])
            videos[entry.video_id] = _Video(row, planned)
        self.progress.begin(sum(v.planned for v in videos.values()), len(videos))
        try:
            if jobs:
                started = connect(self.options)
                try:
                    self._drain(self.dataset(jobs), videos, summary)
                finally:
                    if started:
                        import ray

                        ray.shutdown()
            for video in videos.values():
                if not video.over:
                    stored = len(video.stored)
                    left = video.meta.todo if video.meta else "?"
                    self._failed(
                        video,
                        "index",
                        f"the Ray run ended with {stored} of {left} chunks stored; run "
                        "`playlisteval index --ray` again to finish it",
                        summary,
                    )
        finally:
            self.progress.end()
        return summary

    def _drain(self, dataset: Any, videos: dict[str, _Video], summary: IndexSummary) -> None:
        try:
            for row in dataset.iter_rows():
                video = videos.get(str(row["video_id"]))
                if video is None or video.over:
                    continue  # a failed video's batches still in flight
                value = pickle.loads(row["data"])
                if row["kind"] == VIDEO:
                    self._probed(video, value, summary)
                elif row["kind"] == BATCH:
                    self._stored(video, value, summary)
                else:
                    stage, reason = value
                    self._failed(video, stage, reason, summary)
        except PlaylistEvalError:
            raise
        except Exception as exc:  # Ray's own errors: the run stops, what is stored stays
            raise RayIndexError(
                f"the Ray run stopped: {type(exc).__name__}: {str(exc).splitlines()[0]}; the "
                "chunks stored so far are kept, run the command again to go on"
            ) from exc

    def _probed(self, video: _Video, meta: VideoMeta, summary: IndexSummary) -> None:
        video.meta = meta
        self._record_probe(video.row, meta.info, status=READY, reason=None)
        video.row = self.catalog.video(video.row.id) or video.row
        if meta.todo != video.planned:
            self.progress.expect(meta.todo - video.planned)
        self.progress.video_started(video.row, meta.todo)
        self._finish_if_complete(video, summary)

    def _stored(self, video: _Video, batch: ChunkBatch, summary: IndexSummary) -> None:
        assert batch.vectors is not None
        assert batch.transcript is not None
        new = [n for n, idx in enumerate(batch.idx) if idx not in video.stored]
        if new:  # a batch computed again after a worker died is stored once
            if not self._collections:
                self._ensure_collections(int(batch.vectors.shape[1]))
                self._collections = True
            transcript = replace(batch.transcript, texts=[batch.transcript.texts[n] for n in new])
            self._write_batch(
                video.row,
                [batch.idx[n] for n in new],
                [batch.spans[n] for n in new],
                transcript,
                batch.vectors[new],
                batch.embedder,
                bool(batch.captions),
            )
            video.stored.update(batch.idx[n] for n in new)
            summary.chunks_computed += len(new)
        self._finish_if_complete(video, summary)

    def _finish_if_complete(self, video: _Video, summary: IndexSummary) -> None:
        meta = video.meta
        if meta is None or len(video.stored) < meta.todo:
            return
        grid = media.chunk_grid(meta.info.duration_s, self.config.chunk_s)
        try:
            self._build_segments(video.row, grid)
        except MediaError as exc:
            self._failed(video, "index", str(exc), summary)
            return
        self.catalog.update_video(video.row.id, status=INDEXED, reason=None)
        video.over = True
        summary.videos_indexed += 1
        self.progress.video_finished(video.row, None)

    def _failed(self, video: _Video, stage: str, reason: str, summary: IndexSummary) -> None:
        video.over = True
        fresh = self.catalog.video(video.row.id) or video.row
        if fresh.status == FAILED:
            return
        error = self._fail(fresh, stage, reason)
        summary.videos_failed.append((fresh.id, error))
        self.progress.video_finished(fresh, error)
