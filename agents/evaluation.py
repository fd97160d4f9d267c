"""Judge evaluation: run pairwise judges on an exported benchmark under chosen conditions.

For every pair × judge × condition × both answer orders, :func:`evaluate` builds what the judge
sees — a haystack of videos around the pair's evidence
(:func:`tools.evidence.retrieval.build_haystack`),
frames sampled uniformly over it or inside the spans a retriever finds, and the modalities the
condition names — asks the judge through the recorded-call path (:class:`ModelRunner` and
:class:`CallRecorder`, events in the store stream ``eval-<evaluation id>``), and appends one
record per judgment (a :class:`policies.judging.JudgmentRecord`) to ``<out>/judgments.jsonl``.
Running it again skips the judgments already in the file, and a call recorded in the stream is
served from it for free, so an evaluation is resumable and cached.

Each judgment is shown exactly what its condition names, whichever provider family judges:
``n_frames`` instants spread evenly over the haystack (or over the retrieved spans) become clips
whose ``frame_times`` fix those frames, cut at the condition's resolution (never above the
source's); Gemini samples each clip at its own rate over its span (exactly those frames), and
the frame-based families send exactly those frames at the clip's height
(:func:`tools.providers.base.frame_times`), as the budget reserves. The transcript (and, for
the audio modality, the sound) is that of a stated window around each shown instant
(:data:`TRANSCRIPT_WINDOW_S`: the chunk it falls in), never the videos the instants fall in.
Every record's :class:`policies.judging.Shown` says what its request carried.

A judge the offline provider answers for without being one of the offline judges (an offline
evaluation of ``gpt-5.4``) is recorded as ``offline-stand-in(gpt-5.4)`` (:func:`recorded_names`)
in ``judgments.jsonl``, ``evaluation.json`` and everything read from them: its calls are the
harness's, priced as the model's, and no output may present them as the model's own.

A condition is written compactly as ``frames:retriever:modality:hours:n_frames`` with optional
``:think=N`` and ``:res=N`` after it, e.g. ``retrieved:bm25:frames+transcript:1h:32`` or
``uniform::none:1h:32`` (see :func:`policies.judging.parse_condition`); a condition's one name
is :meth:`policies.judging.Condition.label`.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import threading
import wave
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

import anyio
import anyio.to_thread
import numpy as np
import structlog
from pydantic_ai.messages import BinaryContent
from pydantic_ai.settings import ModelSettings

from agents.deps import CallDeps
from agents.evidence import SeedEvidence, source_key
from agents.judge_runs import CappedStream, JudgeCalls, judge_under_cap
from agents.workers import MalformedOutput, SeedCall
from policies.judging import (
    ORDERS,
    PICKED_BY_VERDICT,
    Condition,
    JudgingError,
    Judgment,
    JudgmentRecord,
    Order,
    RetrievalCase,
    Shown,
    SpanRecord,
    Verdict,
    parse_condition,
)
from policies.ratelimits import Traffic
from store.catalog import Catalog, ChunkRow, VideoRow
from store.errors import ConfigError, MediaError
from store.events import AnyEvent
from store.eventstore import EventStore
from store.version import code_version
from tools.contracts.roles import (
    ChunkText,
    JudgeEvidence,
    PairJudgeContext,
    PairVerdict,
    SegmentEvidence,
    role_spec,
)
from tools.evidence.benchmark_folder import BenchmarkFolder, HashCheck, read_benchmark_folder
from tools.evidence.clips import ClipFetcher
from tools.evidence.retrieval import RetrievedSpan, build_haystack
from tools.index import media
from tools.providers.judges import OFFLINE_JUDGES, stand_in_name, stood_in_for
from tools.providers.local_llm import REAL_LOCAL_LABEL

__all__ = [
    "OFFLINE_JUDGE_PRICES",
    "Condition",
    "EvaluationResult",
    "JudgmentRecord",
    "eval_stream",
    "evaluate",
    "judgments_of",
    "parse_condition",
    "read_benchmark",
    "read_judgments",
    "recorded_names",
    "retrieval_cases",
]

JUDGE_ROLE = "pair_judge"
GATE = "evaluation"
RETRIEVED_K = 5  # segments a retriever hands the judge
JUDGMENTS_FILE = "judgments.jsonl"
EVALUATION_FILE = "evaluation.json"

#: Price rows (settings overrides) for the offline judges of ``tools.providers.judges``: they cost
#: nothing, and the recorder refuses a model it cannot price.
OFFLINE_JUDGE_PRICES: dict[str, dict[str, float]] = {
    judge: {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
    for judge in ("offline-first", "offline-transcript", "offline-frames")
}

logger = structlog.get_logger("playlisteval.evaluation")


#: How ``evaluation.json``'s sessions name who answered a judge (``answered_by``).
OFFLINE_PROVIDER_LABEL = "offline provider (a harness, not evidence of model quality)"
LIVE_PROVIDER_LABEL = "live provider"


def answered_by(
    judges: Iterable[str], offline: bool, traffic: Callable[[str], Traffic | None] | None
) -> dict[str, str]:
    """Judge → who answers its calls in a session: a real local model wherever its traffic
    says so (:data:`tools.providers.local_llm.REAL_LOCAL_LABEL`, in offline sessions too),
    else the offline provider (an offline judge, or any judge of an offline session), else a
    live provider."""
    found: dict[str, str] = {}
    for judge in judges:
        travels = traffic(judge) if traffic is not None else None
        if travels is not None and travels.real_local:
            found[judge] = REAL_LOCAL_LABEL
        elif offline or judge in OFFLINE_JUDGES:
            found[judge] = OFFLINE_PROVIDER_LABEL
        else:
            found[judge] = LIVE_PROVIDER_LABEL
    return found


def recorded_names(judges: Iterable[str], answered: Mapping[str, str]) -> dict[str, str]:
    """Judge → the name its judgments are recorded under: its own, unless the offline provider
    answers for a model that is not one of the offline judges (``answered``, from
    :func:`answered_by`): then :func:`tools.providers.judges.stand_in_name`, so no output names
    the harness as the real model (``offline-stand-in(gpt-5.4)``)."""
    return {
        judge: (
            stand_in_name(judge)
            if answered.get(judge) == OFFLINE_PROVIDER_LABEL and judge not in OFFLINE_JUDGES
            else judge
        )
        for judge in judges
    }


def eval_stream(evaluation_id: str) -> str:
    """Stream of one evaluation's model calls."""
    return f"eval-{evaluation_id}"


# -- what a judge sees ---------------------------------------------------------------------------

FRAME_GROUP_GAP_S = 30.0
"""Frames of one span spaced at most this far apart travel as one clip (one native video, one
frame list); sparser ones each as a clip of its own. A clip is decoded from its first frame to
its last, so a sparse one would cost the decoding of everything between (an hour of video
for one frame of a 100-hour haystack)."""
LONE_FRAME_STEP_S = 2.0
"""A frame on its own is a clip of half this many seconds from its instant at ``1 / this`` fps
(one second at 0.5 fps): exactly one frame, to a native-video model as to a frame-based one."""
TRANSCRIPT_WINDOW_S = 30.0
"""The transcript (and, for the audio modality, the sound) a judge gets of each shown moment: the
indexed chunk its instant falls in (30 s), or this many seconds centred on it where the video
has no chunk there. Never more: under uniform sampling of 100 hours, 32 frames bring at most
32 such windows, not the videos they fall in."""


class SpanSource(Protocol):
    """What a retrieved condition asks for spans (a :class:`tools.evidence.retrieval.Retriever`)."""

    def retrieve(self, question: str, haystack: Collection[str], k: int = 5) -> list[RetrievedSpan]:
        """The ``k`` best spans for ``question`` inside the videos ``haystack``, best first."""
        ...


@dataclass(frozen=True)
class _Shown:
    """One clip put in front of the judge: ``times`` (seconds into the video) evenly spaced
    ``1 / fps`` apart from ``start_s``, the span ending half a step after the last, so a model
    sampling the span at ``fps`` takes exactly these frames."""

    video_id: str
    start_s: float
    end_s: float
    fps: float
    times: tuple[float, ...]

    @property
    def segment_id(self) -> str:
        """The span's name in the judge's prompt."""
        return f"{self.video_id}@{self.start_s:g}-{self.end_s:g}"


@dataclass(frozen=True)
class _View:
    """What every judge sees of one pair under one condition (the same in both orders)."""

    segments: tuple[SegmentEvidence, ...]
    clips: tuple[BinaryContent, ...]
    hours: float
    seed: int
    retrieved: tuple[SpanRecord, ...]
    shown: Shown


def pair_seed(pair_id: str) -> int:
    """The haystack seed of a pair: stable across runs and machines."""
    return int(hashlib.sha256(pair_id.encode("utf-8")).hexdigest()[:8], 16)


def spread_instants(pieces: Sequence[tuple[str, float, float]], n: int) -> list[tuple[int, float]]:
    """``n`` instants at the middles of ``n`` equal slices of ``pieces`` (video id, start, end)
    laid end to end, each as (piece index, seconds into its video): uniform sampling of a
    haystack (its videos whole) or of the spans a retriever found."""
    lengths = [max(end - start, 0.0) for _, start, end in pieces]
    total = sum(lengths)
    if n <= 0 or total <= 0:
        return []
    step = total / n
    out: list[tuple[int, float]] = []
    offset = 0.0
    for index, ((_, start, _end), length) in enumerate(zip(pieces, lengths, strict=True)):
        while len(out) < n and (len(out) + 0.5) * step < offset + length:
            out.append((index, start + (len(out) + 0.5) * step - offset))
        offset += length
    return out


def _floor_ms(seconds: float) -> float:
    """Seconds rounded down to the millisecond (a recorded instant never passes the true one)."""
    return math.floor(seconds * 1000.0 + 1e-6) / 1000.0


def plan_clips(pieces: Sequence[tuple[str, float, float]], n: int) -> list[_Shown]:
    """The clips that show ``n`` frames spread over ``pieces`` (:func:`spread_instants`): the
    frames of a piece in one clip when they are at most :data:`FRAME_GROUP_GAP_S` apart, else
    one clip per frame (:data:`LONE_FRAME_STEP_S`)."""
    instants = spread_instants(pieces, n)
    total = sum(max(end - start, 0.0) for _, start, end in pieces)
    step = total / n if n > 0 else 0.0
    out: list[_Shown] = []
    for index, (video_id, _start, piece_end) in enumerate(pieces):
        times = [t for i, t in instants if i == index]
        if not times:
            continue
        grouped = len(times) > 1 and step <= FRAME_GROUP_GAP_S
        runs, spacing = ([times], step) if grouped else ([[t] for t in times], LONE_FRAME_STEP_S)
        for run in runs:
            start = _floor_ms(run[0])
            shown = tuple(round(start + i * spacing, 3) for i in range(len(run)))
            end = max(_floor_ms(min(run[-1] + spacing / 2, piece_end)), shown[-1] + 0.001)
            out.append(_Shown(video_id, start, round(end, 3), 1.0 / spacing, shown))
    return out


def _clip(catalog: Catalog, clips: ClipFetcher, shown: _Shown, height: int) -> BinaryContent:
    """A shown span as pydantic-ai content with the metadata providers (and the key) need: its
    frames fixed (``frame_times``), so every provider family shows exactly these, at ``height``
    (the clip's own, never above its source's)."""
    clip = clips.fetch_clip(
        shown.video_id,
        shown.start_s,
        shown.end_s,
        fps=shown.fps,
        max_height=height,
        audio=False,
        frames=False,
    )
    video = catalog.video(shown.video_id)
    source = source_key(Path(video.path)) if video and video.path else "?"
    return BinaryContent(
        data=clip.read_bytes(),
        media_type="video/mp4",
        identifier=shown.segment_id,  # the span the prompt lists: its clip, by name
        vendor_metadata={
            "fps": shown.fps,
            "start_s": shown.start_s,
            "end_s": shown.end_s,
            "frame_times": list(shown.times),
            "height": height,
            "width": round(video.width * height / video.height)
            if video and video.width and video.height
            else None,
            "audio": False,
            "source": source,
            "video_id": shown.video_id,
            "modality": "video",
            "path": str(video.path) if video and video.path else "",
        },
    )


AUDIO_RATE = 16_000


def _audio(catalog: Catalog, window: SegmentEvidence) -> BinaryContent | None:
    """A window's sound alone, as 16-bit mono WAV (the ``audio`` modality: heard, not
    watched); ``None`` when the video has no audio track."""
    video = catalog.video(window.video_id)
    if video is None or not video.path:
        return None
    samples = media.extract_audio(Path(video.path), window.start_s, window.end_s, AUDIO_RATE)
    if samples.size == 0:
        return None
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(AUDIO_RATE)
        wav.writeframes(pcm)
    return BinaryContent(
        data=buffer.getvalue(),
        media_type="audio/wav",
        identifier=f"{window.segment_id}@audio",
        vendor_metadata={
            "start_s": window.start_s,
            "end_s": window.end_s,
            "video_id": window.video_id,
            "source": source_key(Path(video.path)),
            "modality": "audio",
        },
    )


class ReadCatalog(Catalog):
    """The catalogue as an evaluation reads it: each video, each video's chunks and each list of
    videos read from the database once. Nothing an evaluation reads changes while it runs, and
    every view reads the same few dozen rows again and again (a query costs more than the
    planning that uses it). Writes go to the catalogue as ever."""

    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog.engine)
        self._video: dict[str, VideoRow | None] = {}
        self._chunks: dict[str, list[ChunkRow]] = {}
        self._videos: dict[tuple[tuple[str, ...] | None, str | None], list[VideoRow]] = {}
        self._texts: dict[str, list[ChunkText]] = {}

    def video(self, video_id: str) -> VideoRow | None:
        """One video, or None (read once)."""
        if video_id not in self._video:
            self._video[video_id] = super().video(video_id)
        return self._video[video_id]

    def chunks(self, video_id: str) -> list[ChunkRow]:
        """A video's chunks in time order (read once)."""
        if video_id not in self._chunks:
            self._chunks[video_id] = super().chunks(video_id)
        return self._chunks[video_id]

    def chunk_texts(self, video_id: str) -> list[ChunkText]:
        """A video's chunks as transcript windows, in time order: their times and words only
        (read once; the vectors a judge never sees are not read)."""
        if video_id not in self._texts:
            rows = self.chunk_transcripts(video_id)
            self._texts[video_id] = [ChunkText(start_s=a, end_s=b, text=t) for a, b, t in rows]
        return self._texts[video_id]

    def videos(
        self, *, statuses: Iterable[str] | None = None, domain: str | None = None
    ) -> list[VideoRow]:
        """Videos in seeding order (each selection read once)."""
        key = (None if statuses is None else tuple(sorted(statuses)), domain)
        if key not in self._videos:
            self._videos[key] = super().videos(statuses=statuses, domain=domain)
        return list(self._videos[key])


class _Windows:
    """The transcript window of each shown moment (:data:`TRANSCRIPT_WINDOW_S`), each handed
    out once: a chunk two clips' frames fall in is listed with the first."""

    def __init__(self, catalog: ReadCatalog) -> None:
        self.catalog = catalog
        self._given: set[tuple[str, float]] = set()

    def around(self, video_id: str, times: Iterable[float]) -> tuple[ChunkText, ...]:
        """The windows of ``times`` not handed out yet, in time order."""
        chunks = self.catalog.chunk_texts(video_id)
        found: dict[float, ChunkText] = {}
        for t in times:
            window = next((c for c in chunks if c.start_s <= t < c.end_s), None)
            if window is None:  # no chunk there: a window of the stated length, no speech
                video = self.catalog.video(video_id)
                half = TRANSCRIPT_WINDOW_S / 2
                duration = float(video.duration_s) if video and video.duration_s else t + half
                window = ChunkText(
                    start_s=round(max(0.0, t - half), 3),
                    end_s=round(min(duration, t + half), 3),
                    text="",
                )
            if (video_id, window.start_s) not in self._given:
                self._given.add((video_id, window.start_s))
                found[window.start_s] = window
        return tuple(found[k] for k in sorted(found))


def _merged(video_id: str, title: str, windows: Sequence[ChunkText]) -> list[SegmentEvidence]:
    """Touching windows of one video as one listed span each (the transcript and audio
    modalities list the windows themselves)."""
    runs: list[list[ChunkText]] = []
    for window in sorted(windows, key=lambda w: w.start_s):
        if runs and window.start_s <= runs[-1][-1].end_s + 1e-6:
            runs[-1].append(window)
        else:
            runs.append([window])
    return [
        SegmentEvidence(
            segment_id=f"{video_id}@{run[0].start_s:g}-{run[-1].end_s:g}",
            video_id=video_id,
            title=title,
            start_s=run[0].start_s,
            end_s=run[-1].end_s,
            chunks=tuple(run),
        )
        for run in runs
    ]


def _pieces(
    catalog: Catalog,
    retrievers: Mapping[str, SpanSource],
    record: Mapping[str, Any],
    condition: Condition,
    video_ids: Sequence[str],
) -> tuple[list[tuple[str, float, float]], tuple[SpanRecord, ...]]:
    """What the condition's frames are spread over: the haystack's videos whole (uniform), or
    the spans its retriever finds (retrieved, which are recorded)."""
    if condition.frames != "retrieved":
        pieces = []
        for video_id in video_ids:
            video = catalog.video(video_id)
            length = float(video.duration_s or 0.0) if video else 0.0
            if length > 0:
                pieces.append((video_id, 0.0, length))
        return pieces, ()
    name = condition.retriever or ""
    retriever = retrievers.get(name)
    if retriever is None:
        raise ConfigError(
            f"condition {condition.condition_id!r} asks for retriever {name!r}; "
            f"available: {sorted(retrievers)!r}"
        )
    spans = retriever.retrieve(str(record["prompt"]), video_ids, k=RETRIEVED_K)
    retrieved = tuple(SpanRecord(s.video_id, s.start_s, s.end_s, s.score) for s in spans)
    return [(s.video_id, s.start_s, s.end_s) for s in spans if s.end_s > s.start_s], retrieved


def build_view(
    catalog: Catalog,
    clips: ClipFetcher,
    retrievers: Mapping[str, SpanSource],
    record: Mapping[str, Any],
    condition: Condition,
) -> _View:
    """What a judge sees of benchmark record ``record`` under ``condition``: ``n_frames``
    instants spread over the haystack (or the retrieved spans), shown as frames at the
    condition's resolution when its modality has pictures, with the transcript (or the sound) of
    the window around each instant when it has text (or sound); and the :class:`Shown` that says
    so, as every provider family's request then carries it."""
    catalog = catalog if isinstance(catalog, ReadCatalog) else ReadCatalog(catalog)
    seed = pair_seed(str(record["id"]))
    evidence = {str(e["video_id"]) for e in record["evidence"]}
    haystack = build_haystack(catalog, evidence, condition.hours, seed)
    pieces, retrieved = _pieces(catalog, retrievers, record, condition, haystack.video_ids)
    planned = plan_clips(pieces, max(condition.n_frames, 1))
    windows = _Windows(catalog)
    titles = {s.video_id: (v.title if (v := catalog.video(s.video_id)) else "") for s in planned}
    attached: tuple[BinaryContent, ...] = ()
    segments: list[SegmentEvidence] = []
    pictures = condition.shows_frames and condition.modality != "audio"
    height = condition.resolution
    if pictures:
        heights = [catalog.video(s.video_id) for s in planned]
        height = max(
            (min(condition.resolution, v.height or condition.resolution) for v in heights if v),
            default=condition.resolution,
        )
        attached = tuple(_clip(catalog, clips, s, height) for s in planned)
        for s in planned:
            chunks = windows.around(s.video_id, s.times) if condition.shows_transcript else ()
            segments.append(
                SegmentEvidence(
                    segment_id=s.segment_id,
                    video_id=s.video_id,
                    title=titles[s.video_id],
                    start_s=s.start_s,
                    end_s=s.end_s,
                    chunks=chunks,
                )
            )
    elif condition.modality in ("transcript", "audio"):
        by_video: dict[str, list[ChunkText]] = {}
        for s in planned:
            by_video.setdefault(s.video_id, []).extend(windows.around(s.video_id, s.times))
        for video_id, found in by_video.items():
            segments.extend(_merged(video_id, titles[video_id], found))
        if condition.modality == "audio":
            sounds = (_audio(catalog, w) for w in segments) if condition.shows_frames else ()
            attached = tuple(a for a in sounds if a is not None)
            # Heard, not read: the windows are listed without their words.
            segments = [w.model_copy(update={"chunks": ()}) for w in segments]
    frame_times = tuple((s.video_id, t) for s in planned for t in s.times) if attached else ()
    audio_s = sum(
        float((a.vendor_metadata or {})["end_s"]) - float((a.vendor_metadata or {})["start_s"])
        for a in attached
        if condition.modality == "audio"
    )
    spans = tuple(SpanRecord(w.video_id, w.start_s, w.end_s) for w in segments)
    return _View(
        segments=tuple(segments),
        clips=attached,
        hours=round(haystack.hours, 3),
        seed=seed,
        retrieved=retrieved,
        shown=Shown(
            frames=len(frame_times) if pictures else 0,
            frame_times=frame_times if pictures else (),
            resolution=height if pictures and attached else None,
            transcript_chars=sum(len(c.text) for g in segments for c in g.chunks),
            audio_s=round(float(audio_s), 3),
            transcript_spans=tuple(
                SpanRecord(g.video_id, c.start_s, c.end_s) for g in segments for c in g.chunks
            ),
            audio_spans=spans if condition.modality == "audio" and attached else (),
        ),
    )


# -- records -------------------------------------------------------------------------------------


def read_judgments(path: Path) -> list[JudgmentRecord]:
    """The records of a ``judgments.jsonl``, in file order; blank lines are skipped.

    A last line without its line end that is not JSON (a write cut short by a crash) is left
    out; any other line that is not a judgment record, JSON or not, raises
    :class:`store.errors.ConfigError` naming the file and the line.
    """
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {error.start}); restore it or evaluate into a new "
            "folder"
        ) from error
    lines = text.splitlines()
    out: list[JudgmentRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines) and not text.endswith("\n"):
                continue  # torn by a crash: the evaluation cuts it off when it goes on
            raise ConfigError(
                f"{path}:{number}: not JSON ({error.msg}, column {error.colno}); fix or delete "
                "the line"
            ) from error
        try:
            out.append(JudgmentRecord.from_json(raw))
        except JudgingError as error:
            raise ConfigError(f"{path}:{number}: {error}; fix or delete the line") from error
    return out


def _end_torn_line(path: Path) -> None:
    """Make ``path`` end with a whole line before records are appended to it. A last line
    without its line end (a write cut short by a crash) is ended when it is a whole record, and
    cut off when it is not (:func:`read_judgments` left it out, and its call, in the stream, is
    served from there): the next record starts on a line of its own, and no unreadable line is
    left in the middle of the file for every later reader to refuse."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        size = handle.seek(0, 2)
        if size == 0:
            return
        handle.seek(-1, 2)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        start = data.rfind(b"\n") + 1
        try:
            json.loads(data[start:])
        except (UnicodeDecodeError, json.JSONDecodeError):
            handle.truncate(start)
        else:
            handle.write(b"\n")


def judgments_of(records: Iterable[JudgmentRecord]) -> list[Judgment]:
    """Judgment records as :class:`policies.judging.Judgment` (condition = its condition id)."""
    return [r.judgment for r in records]


def retrieval_cases(records: Iterable[JudgmentRecord]) -> list[RetrievalCase]:
    """One retrieval case per (pair, condition, haystack) of retrieved-frame records."""
    cases: dict[tuple[str, str, float], RetrievalCase] = {}
    for r in records:
        if r.condition.frames != "retrieved":
            continue
        cases.setdefault((r.pair_id, r.condition_id, r.length_hours), r.retrieval_case())
    return list(cases.values())


# -- the run -------------------------------------------------------------------------------------


@dataclass
class EvaluationResult:
    """An evaluation's records (every one in the file, sorted) and what this call did."""

    evaluation_id: str
    out_dir: Path
    records: list[JudgmentRecord]
    new_records: int
    live_calls: int
    replayed_calls: int
    failures: list[Exception] = field(default_factory=list)
    benchmark_check: HashCheck = "verified"  # how the benchmark's records matched its hash


def read_benchmark(benchmark_dir: Path, *, allow_modified: bool = False) -> BenchmarkFolder:
    """The benchmark folder, read and checked whole before anything is judged
    (:func:`tools.evidence.benchmark_folder.read_benchmark_folder`; a judgment record needs each
    pair's
    ``playlist_id`` too): :class:`ConfigError` names the first bad record's file and line, or
    records changed after the export unless ``allow_modified``."""
    return read_benchmark_folder(
        benchmark_dir, allow_modified=allow_modified, required_text=("playlist_id",)
    )


def evaluation_id_of(benchmark_dir: Path, out_dir: Path, *, allow_modified: bool = False) -> str:
    """The id an evaluation of ``benchmark_dir`` into ``out_dir`` has (its stream is
    ``eval-<id>``): the one its ``evaluation.json`` holds, else one made of the benchmark's
    content hash and the folder. The benchmark is checked as :func:`read_benchmark` does."""
    sha = read_benchmark(benchmark_dir, allow_modified=allow_modified).content_sha256
    path = out_dir / EVALUATION_FILE
    old: dict[str, Any] = json.loads(path.read_text("utf-8")) if path.exists() else {}
    found = old.get("evaluation_id")
    return (
        str(found)
        if found
        else hashlib.sha256(f"{sha}|{out_dir.resolve()}".encode()).hexdigest()[:16]
    )


def _benchmark_backfill(folder: Path) -> dict[str, Any] | None:
    """The judged benchmark's record of videos backfilled per domain (``benchmark.json``'s
    ``backfill``); None when it has none."""
    try:
        info = json.loads((folder / "benchmark.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    found = info.get("backfill") if isinstance(info, dict) else None
    return found if isinstance(found, dict) else None


def _evaluation_json(
    out_dir: Path,
    benchmark: BenchmarkFolder,
    judges: Sequence[str],
    conditions: Sequence[Condition],
    now: datetime,
    offline: bool,
    answered: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The evaluation's description: kept (judges and conditions added) when it exists, and one
    more entry in ``sessions`` (when, which code, offline or live, who answered each judge —
    ``answered``, :func:`answered_by` — and how the benchmark's records matched its
    ``benchmark.json``) for each call that judges into it, so its figures can be traced to the
    code, the mode and the records that made them. ``benchmark_modified``
    stays true once a session judged records changed after their export (allowed on purpose),
    and ``benchmark_json_sha256`` is the hash ``benchmark.json`` gave last (None without it).
    ``judges`` are the names the judgments are recorded under (:func:`recorded_names`), and
    ``stand_ins`` maps each stand-in's name to the model it played."""
    sha = benchmark.content_sha256
    path = out_dir / EVALUATION_FILE
    old: dict[str, Any] = json.loads(path.read_text("utf-8")) if path.exists() else {}
    if old and old.get("benchmark_sha256") != sha:
        raise ConfigError(
            f"{out_dir} evaluates another benchmark (sha256 {old.get('benchmark_sha256')!r}, "
            f"this one {sha!r}); pick a new output folder"
        )
    evaluation_id = (
        old.get("evaluation_id")
        or hashlib.sha256(f"{sha}|{out_dir.resolve()}".encode()).hexdigest()[:16]
    )
    known = {c["condition_id"]: c for c in old.get("conditions", [])}
    for condition in conditions:
        known.setdefault(
            condition.condition_id, {"condition_id": condition.condition_id, **condition.to_json()}
        )
    return {
        "evaluation_id": evaluation_id,
        # What the report names the evaluation by: the folder's name as it was first written
        # (a default folder is named for the benchmark and judges), and the benchmark's.
        "name": old.get("name") or out_dir.resolve().name,
        "benchmark_name": old.get("benchmark_name") or benchmark.path.name,
        "benchmark_sha256": sha,
        # The judged benchmark's videos backfilled per domain (benchmark.json's `backfill`),
        # for the report's dataset line.
        "benchmark_backfill": old.get("benchmark_backfill") or _benchmark_backfill(benchmark.path),
        "judges": list(dict.fromkeys([*old.get("judges", []), *judges])),
        "stand_ins": {
            **old.get("stand_ins", {}),
            **{j: m for j in judges if (m := stood_in_for(j)) is not None},
        },
        "conditions": list(known.values()),
        "started": old.get("started") or now.isoformat(),
        "benchmark_json_sha256": benchmark.recorded_sha256,
        "benchmark_modified": bool(old.get("benchmark_modified")) or benchmark.check == "modified",
        "sessions": [
            *old.get("sessions", []),
            {
                "at": now.isoformat(),
                "code_version": code_version(),
                "offline": offline,
                "benchmark": benchmark.check,
                **({"answered_by": dict(answered)} if answered is not None else {}),
            },
        ],
    }


class EvaluationProgress(Protocol):
    """What an evaluation tells whoever watches it (the CLI's progress bar)."""

    def started(self, jobs: int, done: int = 0) -> None:
        """``jobs`` judgments are to be made, besides ``done`` of this evaluation already in
        its file (a resumed evaluation's bar counts on from them)."""
        ...

    def judged(self, made: bool) -> None:
        """One judgment was made (``made``) or could not be."""
        ...


async def evaluate(
    deps: CallDeps,
    *,
    benchmark_dir: Path,
    judges: Sequence[str],
    conditions: Sequence[Condition],
    out_dir: Path,
    retrievers: Mapping[str, SpanSource] | None = None,
    concurrency: int = 8,
    budget_micros: int | None = None,
    offline: bool = False,
    now: datetime | None = None,
    lease: str | None = None,
    limit: int | None = None,
    progress: EvaluationProgress | None = None,
    allow_modified: bool = False,
) -> EvaluationResult:
    """Judge every benchmark pair with every judge under every condition, in both orders.

    ``retrievers`` maps the names conditions use (``bm25``, ``text``, ``multimodal``,
    ``hybrid``) to retrievers over the index. ``budget_micros`` caps what this evaluation's calls
    cost, earlier calls of it included (a ``CapSet`` in its stream when it changes); with a
    ``campaign`` every call also reserves in its accounts, as holds of the caller's ``lease``.
    The stream is fenced at the version read, so a second writer cannot pay twice unseen.
    Records already in ``<out_dir>/judgments.jsonl`` are not
    judged again; a call already in the stream ``eval-<evaluation id>`` is served from it.
    A pair that cannot be judged (budget, provider or media error) is left out of the file and
    its error kept in ``failures``; a later call goes on from there. ``limit`` judges only the
    benchmark's first ``limit`` pairs (a smoke run); ``progress`` hears of every judgment.

    The whole benchmark folder is read and checked before anything is written or judged
    (:func:`read_benchmark`): a bad record (not JSON, a NaN, a wrong type, a pair id twice)
    is refused with its file and line, whatever ``limit`` says, and so are records changed after
    the export unless ``allow_modified``, which ``evaluation.json`` and the result then record.

    What a judge is shown (frames, transcript, sound) is built in worker threads, once per pair
    and condition, so the event loop keeps every call in flight meanwhile. A condition that
    shows more frames than a judge's requests may carry is refused before anything is spent.
    The calls are made by the shell the difficulty gate uses too
    (:func:`agents.judge_runs.judge_under_cap`).
    """
    judges = _checked_judges(deps, judges, conditions, limit)
    benchmark = read_benchmark(benchmark_dir, allow_modified=allow_modified)
    records = benchmark.records[:limit] if limit is not None else benchmark.records
    judgments_path = out_dir / JUDGMENTS_FILE
    earlier = read_judgments(judgments_path)
    done = {r.key for r in earlier}
    now = now or datetime.now(tz=UTC)
    answered = answered_by(judges, offline, deps.traffic)
    names = recorded_names(judges, answered)
    meta = _evaluation_json(
        out_dir,
        benchmark,
        [names[j] for j in judges],
        conditions,
        now,
        offline,
        {names[j]: who for j, who in answered.items()},
    )
    _begin_evaluation(out_dir, benchmark, meta)
    evaluation_id = str(meta["evaluation_id"])
    stream = eval_stream(evaluation_id)
    history: list[AnyEvent] = [s.event() for s in deps.store.read_stream(stream)]
    jobs = _jobs(records, conditions, names, done)
    views = _Views(deps.catalog, deps.clips, retrievers or {})
    logger.info(
        "evaluation_begin",
        evaluation_id=evaluation_id,
        conditions=[c.label() for c in conditions],
        jobs=len(jobs),
        done=len(done),
    )
    if progress is not None:
        planned = len(records) * len(conditions) * len(judges) * len(ORDERS)
        progress.started(len(jobs), done=planned - len(jobs))
    secrets = sorted(set(deps.secrets), key=len, reverse=True)
    capped = CappedStream(stream, budget_micros, "eval", offline, lease, secrets, concurrency)
    _end_torn_line(judgments_path)
    with judgments_path.open("a", encoding="utf-8") as records_file:
        judging = _Judging(deps, views, records_file, progress, names)
        judged = await judge_under_cap(
            deps, capped, history, jobs, judging.judge, not_judged=judging.not_judged
        )
    _seal(deps.store, stream, meta, out_dir)
    logger.info(
        "evaluation_end",
        evaluation_id=evaluation_id,
        new=len(judging.new),
        live_calls=judged.live_calls,
        replayed=judged.replayed_calls,
        failures=len(judged.failures),
    )
    return EvaluationResult(
        evaluation_id=evaluation_id,
        out_dir=out_dir,
        # One writer at a time (the caller's lease): the file holds what was read and added.
        records=sorted([*earlier, *judging.new], key=lambda r: r.key),
        new_records=len(judging.new),
        live_calls=judged.live_calls,
        replayed_calls=judged.replayed_calls,
        failures=judged.failures,
        benchmark_check=benchmark.check,
    )


def _jobs(
    records: Sequence[Mapping[str, Any]],
    conditions: Sequence[Condition],
    names: Mapping[str, str],
    done: Collection[tuple[str, str, str, str]],
) -> list[_Job]:
    """Every judgment of ``records`` not ``done`` yet (by the name each judge of ``names`` is
    recorded under): pair by pair, condition by condition, judge by judge, in both orders."""
    return [
        (record, judge, condition, order)
        for record in records
        for condition in conditions
        for judge, name in names.items()
        for order in ORDERS
        if (str(record["id"]), name, condition.condition_id, order) not in done
    ]


def _checked_judges(
    deps: CallDeps, judges: Sequence[str], conditions: Sequence[Condition], limit: int | None
) -> tuple[str, ...]:
    """The judges, each once, after refusing what cannot be evaluated before anything is spent:
    no judge or no condition, an unpriced judge, a limit below one, a condition that shows a
    judge more frames than its requests may carry."""
    judges = tuple(dict.fromkeys(judges))
    if not judges or not conditions:
        raise ConfigError("an evaluation needs at least one judge and one condition")
    for judge in judges:
        deps.prices.price(judge)  # an unpriced judge is refused before anything is spent
    if limit is not None and limit < 1:
        raise ConfigError(f"limit={limit!r}: judge at least one pair (or give no limit)")
    _check_frame_caps(judges, conditions, deps.traffic)
    return judges


def _begin_evaluation(out_dir: Path, benchmark: BenchmarkFolder, meta: dict[str, Any]) -> None:
    """Write the evaluation's description ``meta``, with this session in it
    (:func:`_evaluation_json`), and say so when the benchmark's records changed after their
    export."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / EVALUATION_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    if benchmark.check == "modified":
        logger.warning(
            "benchmark_modified",
            benchmark=str(benchmark.path),
            benchmark_json_sha256=benchmark.recorded_sha256,
            content_sha256=benchmark.content_sha256,
        )


def _seal(store: EventStore, stream: str, meta: dict[str, Any], out_dir: Path) -> None:
    """Record in ``evaluation.json`` the log this evaluation rests on, as it ends: the report
    names it, and ``store verify --anchor <out_dir>`` checks any copy of the log against it."""
    evaluation_id = meta["evaluation_id"]
    meta["anchor"] = {"label": f"evaluation {evaluation_id}", **store.anchor([stream]).to_json()}
    staged = out_dir / f".{EVALUATION_FILE}.partial"
    staged.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    os.replace(staged, out_dir / EVALUATION_FILE)


_Job = tuple[Mapping[str, Any], str, Condition, Order]  # (record, judge, condition, order)


class _Judging:
    """An evaluation's jobs for the judging shell: each judgment made from its pair's view and
    appended to ``judgments.jsonl`` as one whole line, each outcome told to ``progress``."""

    def __init__(
        self,
        deps: CallDeps,
        views: _Views,
        records_file: TextIO,
        progress: EvaluationProgress | None,
        names: Mapping[str, str],
    ) -> None:
        self.catalog, self.clips, self.views = deps.catalog, deps.clips, views
        self.records_file, self.progress, self.names = records_file, progress, names
        self.new: list[JudgmentRecord] = []

    async def judge(self, calls: JudgeCalls, job: _Job) -> None:
        """One judgment: the view (built once per pair and condition), the call, the record."""
        record, judge, condition, order = job
        view = await self.views.get(record, condition)
        unread = SeedEvidence(self.catalog, self.clips, str(record["id"]), "", "")
        out = await _judge_once(calls, unread, record, judge, condition, order, view)
        out = replace(out, judge=self.names.get(judge, judge))
        # Whole lines, each handed to the OS at once: a crash leaves at most a torn last line,
        # which reading skips (no await between: no other judgment writes in between).
        self.records_file.write(out.to_line() + "\n")
        self.records_file.flush()
        self.new.append(out)
        if self.progress is not None:
            self.progress.judged(True)

    def not_judged(self, job: _Job, exc: Exception) -> None:
        """A judgment that could not be made (the shell keeps the error in the failures)."""
        record, judge, _condition, _order = job
        # At info: the caller reports the failures (the CLI the first few, and one line when
        # nothing was judged), a warning per pair would flood stderr.
        logger.info("judgment_not_made", pair_id=record["id"], judge=judge, error=str(exc))
        if self.progress is not None:
            self.progress.judged(False)


VIEW_THREADS = 4
"""Worker threads building views at once: clip cutting and audio decoding (most of the work)
run in libav and SQLite, outside the GIL."""


class _Views:
    """Each (pair, condition)'s view, built once in a worker thread (:func:`build_view`); a view
    that cannot be built fails every judgment of it with the same error, built once too."""

    def __init__(
        self, catalog: Catalog, clips: ClipFetcher, retrievers: Mapping[str, SpanSource]
    ) -> None:
        self.catalog = ReadCatalog(catalog)
        # The cutter reads each clip's video row through the same once-read catalogue: a query
        # per clip cut was 6 % of a rehearsal's evaluation (py-spy).
        self.clips = ClipFetcher(self.catalog, clips.cache_dir)
        # Retrievers keep caches that are not made for threads: one query at a time; and the
        # conditions of a pair that differ only in frames ask the same question of the same
        # haystack, answered once.
        retrieval = threading.Lock()
        self.retrievers = {name: _Shared(r, retrieval) for name, r in retrievers.items()}
        self.threads = anyio.CapacityLimiter(VIEW_THREADS)
        self._built: dict[tuple[str, str], _View | Exception] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}

    async def get(self, record: Mapping[str, Any], condition: Condition) -> _View:
        """The view of ``record`` under ``condition`` (its build error raised again)."""
        key = (str(record["id"]), condition.condition_id)
        async with self._locks.setdefault(key, anyio.Lock()):
            if key not in self._built:
                try:
                    self._built[key] = await anyio.to_thread.run_sync(
                        build_view,
                        self.catalog,
                        self.clips,
                        self.retrievers,
                        record,
                        condition,
                        limiter=self.threads,
                    )
                except (MediaError, ConfigError) as exc:
                    self._built[key] = exc
        found = self._built[key]
        if isinstance(found, Exception):
            raise found
        return found


@dataclass(frozen=True)
class _Shared:
    """A span source shared by the view threads: asked under a lock shared with the others,
    each (question, haystack, k) once."""

    source: SpanSource
    lock: threading.Lock
    answers: dict[tuple[str, frozenset[str], int], list[RetrievedSpan]] = field(
        default_factory=dict
    )

    def retrieve(self, question: str, haystack: Collection[str], k: int = 5) -> list[RetrievedSpan]:
        """The source's spans, one query at a time, each asked once."""
        key = (question, frozenset(haystack), k)
        with self.lock:
            if key not in self.answers:
                self.answers[key] = self.source.retrieve(question, haystack, k)
            return list(self.answers[key])


def _check_frame_caps(
    judges: Sequence[str],
    conditions: Sequence[Condition],
    traffic: Callable[[str], Traffic | None] | None,
) -> None:
    """Refuse, before anything is spent, a condition that shows a judge more frames than its
    requests may carry as pictures (its ``max_frames``, never above its family's
    ``max_pictures``: DashScope takes 250 Base64 images a request): thinned, it would no
    longer be the condition."""
    if traffic is None:
        return
    for judge in judges:
        found = traffic(judge)
        cap = (found.max_fixed_frames or found.max_frames) if found is not None else None
        if not cap:
            continue
        for condition in conditions:
            pictures = condition.shows_frames and condition.modality != "audio"
            if pictures and condition.n_frames > cap:
                raise ConfigError(
                    f"condition {condition.condition_id!r} shows {condition.n_frames} frames, "
                    f"but judge {judge!r} takes at most {cap} a request: lower n_frames, or "
                    f"raise providers.models.{judge!r}.max_frames where its provider allows"
                )


def thinking_settings(budget: int | None, role: str = JUDGE_ROLE) -> ModelSettings | None:
    """A condition's thinking budget as model settings: pydantic-ai's provider-neutral
    ``thinking`` (0 turns it off; otherwise the effort level the budget amounts to) and, for
    Gemini, the exact ``thinking_budget`` in tokens. ``None``: the provider's default.

    The output cap grows by the budget: Gemini and OpenAI's reasoning models count the
    thinking against it (OpenAI's ``max_output_tokens`` bounds "visible output tokens and
    reasoning tokens"; Gemini's ``maxOutputTokens`` covers the thoughts too), so ``role``'s own
    answer cap is left for the answer after the thinking."""
    if budget is None:
        return None
    if budget <= 0:
        return ModelSettings(thinking=False)
    level: Literal["low", "medium", "high"] = (
        "low" if budget <= 2048 else "medium" if budget <= 8192 else "high"
    )
    settings: ModelSettings = {
        "thinking": level,
        "max_tokens": budget + role_spec(role).max_output_tokens,
    }
    # Read by pydantic-ai's Google model only; other models ignore a setting they do not know.
    settings["google_thinking_config"] = {"thinking_budget": budget}  # type: ignore[typeddict-unknown-key]
    return settings


def _receives(condition: Condition, view: _View) -> JudgeEvidence:
    """What the judge is actually given under ``condition`` (no clip may have been cut, no
    transcript may cover the spans): what its prompt then says it receives."""
    return receives_of(
        condition, bool(view.clips), any(segment.chunks for segment in view.segments)
    )


def _as_sent(shown: Shown, sent: Sequence[tuple[str, float]] | None) -> Shown:
    """``shown`` saying the frames the request carries where they are fewer than planned (a
    fit to the judge's window or request limits thinned them)."""
    if sent is None or not shown.frames or len(sent) >= shown.frames:
        return shown
    return replace(shown, frames=len(sent), frame_times=tuple(sent))


def receives_of(condition: Condition, clips: bool, text: bool) -> JudgeEvidence:
    """What a judge's prompt says it receives under ``condition``, given whether clips (or
    sound) were attached and whether any transcript text was."""
    if condition.modality == "none":
        return "none"
    if condition.modality == "audio":
        return "audio" if clips else "none"
    if clips:
        return "frames+transcript" if text else "frames"
    return "transcript" if text else "none"


async def _judge_once(
    calls: JudgeCalls,
    evidence: SeedEvidence,
    record: Mapping[str, Any],
    judge: str,
    condition: Condition,
    order: Order,
    view: _View,
) -> JudgmentRecord:
    """One judge on one pair under one condition in one order: the judgment record."""
    chosen, rejected = str(record["chosen"]), str(record["rejected"])
    first, second = (chosen, rejected) if order == "chosen_first" else (rejected, chosen)
    context = PairJudgeContext(
        question=str(record["prompt"]),
        answer_a=first,
        answer_b=second,
        segments=view.segments,
        receives=_receives(condition, view),
    )
    pair_id = str(record["id"])
    owner = f"{pair_id}/{judge}/{condition.condition_id}/{order}"
    # ModelRunner reads only the call's id and where its events go; the evidence stays unread.
    call = SeedCall(seed_id=owner, evidence=evidence, append=calls.append)
    # Fitted here to record what the judge is shown: a condition's fixed frames thinned to
    # what the judge's window and request limits hold are recorded as sent, not as planned.
    fitted, attachments = calls.runner.fit(judge, JUDGE_ROLE, context, view.clips)
    shown = _as_sent(view.shown, calls.runner.sent_frames(judge, attachments))
    verdict: Verdict
    try:
        out = await calls.runner.run(
            call,
            JUDGE_ROLE,
            judge,
            fitted,
            PairVerdict,
            phase=None,
            gate=GATE,
            attachments=attachments,
            extra_settings=thinking_settings(condition.thinking_budget),
        )
        raw, verdict = out.model_dump_json(), out.choice
    except MalformedOutput as exc:
        raw, verdict = exc.raw or str(exc), None
    return JudgmentRecord(
        pair_id=pair_id,
        judge=judge,
        condition=condition,
        order=order,
        verdict=verdict,
        picked=None if verdict is None else PICKED_BY_VERDICT[verdict],
        raw_output=raw,
        domain=str(record["domain"]),
        gap=int(record["gap"]),
        playlist_id=str(record["playlist_id"]),
        length_hours=view.hours,
        seed=view.seed,
        call_key=calls.keys.get(owner, ""),
        retrieved_spans=view.retrieved,
        shown=shown,
        gold_spans=tuple(
            SpanRecord(str(e["video_id"]), float(e["start_s"]), float(e["end_s"]))
            for e in record["evidence"]
        ),
    )
