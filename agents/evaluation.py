"""Judge evaluation: run pairwise judges on an exported benchmark under chosen conditions.

For every pair × judge × condition × both answer orders, :func:`evaluate` builds what the judge
sees — a haystack of videos around the pair's evidence (:func:`tools.retrieval.build_haystack`),
frames sampled uniformly over it or inside the spans a retriever finds, and the modalities the
condition names — asks the judge through the recorded-call path (:class:`ModelRunner` and
:class:`CallRecorder`, events in the store stream ``eval-<evaluation id>``), and appends one
record per judgment (a :class:`policies.judging.JudgmentRecord`) to ``<out>/judgments.jsonl``.
Running it again skips the judgments already in the file, and a call recorded in the stream is
served from it for free, so an evaluation is resumable and cached.

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
import wave
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import numpy as np
import structlog
from pydantic_ai.messages import BinaryContent
from pydantic_ai.settings import ModelSettings

from agents.curation import GroupCommit, resumed_recorder, scrubbed
from agents.deps import CallDeps
from agents.evidence import SeedEvidence, source_key
from agents.workers import MalformedOutput, ModelRunner, SeedCall
from policies.budget import BudgetExhausted
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
from store.catalog import Catalog
from store.errors import ConfigError, MediaError, ProviderError
from store.events import (
    AnyEvent,
    CallFailed,
    CallId,
    CallRecorded,
    CallReserved,
    CapSet,
    Event,
)
from store.ledger import current_cap
from tools import media
from tools.clips import ClipFetcher
from tools.retrieval import Retriever, build_haystack
from tools.roles import ChunkText, JudgeEvidence, PairJudgeContext, PairVerdict, SegmentEvidence

__all__ = [
    "OFFLINE_JUDGE_PRICES",
    "Condition",
    "EvaluationResult",
    "JudgmentRecord",
    "eval_stream",
    "evaluate",
    "judgments_of",
    "parse_condition",
    "read_judgments",
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


def eval_stream(evaluation_id: str) -> str:
    """Stream of one evaluation's model calls."""
    return f"eval-{evaluation_id}"


# -- what a judge sees ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Shown:
    """One span put in front of the judge, and the rate its frames are sampled at."""

    video_id: str
    start_s: float
    end_s: float
    fps: float

    @property
    def times(self) -> tuple[float, ...]:
        """The instants (seconds into the video) its frames show: as
        :func:`tools.providers.base.frame_times` samples a clip of this span at ``fps``."""
        length = self.end_s - self.start_s
        if length <= 0 or self.fps <= 0:
            return ()
        count = max(1, math.ceil(round(length * self.fps, 6)))
        step = length / count
        return tuple(round(self.start_s + i * step, 3) for i in range(count))


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


def _uniform_spans(catalog: Catalog, video_ids: Sequence[str], n_frames: int) -> list[_Shown]:
    """``n_frames`` instants spread evenly over the videos laid end to end (at the middle of
    equal slices), as one span per video from its first instant, sampled at their spacing."""
    lengths: list[tuple[str, float]] = []
    for video_id in video_ids:
        video = catalog.video(video_id)
        lengths.append((video_id, float(video.duration_s or 0.0) if video else 0.0))
    total = sum(length for _, length in lengths)
    if n_frames <= 0 or total <= 0:
        return []
    step = total / n_frames
    instants: dict[str, list[float]] = {}
    offset, index = 0.0, 0
    for video_id, length in lengths:
        while index < n_frames and (index + 0.5) * step < offset + length:
            instants.setdefault(video_id, []).append((index + 0.5) * step - offset)
            index += 1
        offset += length
    out: list[_Shown] = []
    for video_id, length in lengths:
        times = instants.get(video_id)
        if not times:
            continue
        start, end = round(times[0], 3), round(min(length, times[-1] + step), 3)
        if end > start:
            out.append(_Shown(video_id, start, end, 1.0 / step))
    return out


def _clip(
    catalog: Catalog, clips: ClipFetcher, shown: _Shown, height: int, audio: bool
) -> BinaryContent:
    """A shown span as pydantic-ai content with the metadata providers (and the key) need."""
    fps = round(shown.fps, 6)
    clip = clips.fetch_clip(
        shown.video_id,
        shown.start_s,
        shown.end_s,
        fps=fps,
        max_height=height,
        audio=audio,
        frames=False,
    )
    video = catalog.video(shown.video_id)
    source = source_key(Path(video.path)) if video and video.path else "?"
    identifier = f"{shown.video_id}@{shown.start_s:g}-{shown.end_s:g}@{fps:g}fps@{height}p"
    return BinaryContent(
        data=clip.read_bytes(),
        media_type="video/mp4",
        identifier=identifier,
        vendor_metadata={
            "fps": fps,
            "start_s": shown.start_s,
            "end_s": shown.end_s,
            "height": height,
            "audio": audio,
            "source": source,
            "video_id": shown.video_id,
            # An audio condition is meant to be heard, not watched: readers of frames skip it.
            "modality": "audio" if audio else "video",
            "path": str(video.path) if video and video.path else "",
        },
    )


AUDIO_RATE = 16_000


def _audio(catalog: Catalog, shown: _Shown) -> BinaryContent | None:
    """A shown span's sound alone, as 16-bit mono WAV (the ``audio`` modality: heard, not
    watched); ``None`` when the video has no audio track."""
    video = catalog.video(shown.video_id)
    if video is None or not video.path:
        return None
    samples = media.extract_audio(Path(video.path), shown.start_s, shown.end_s, AUDIO_RATE)
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
        identifier=f"{shown.video_id}@{shown.start_s:g}-{shown.end_s:g}@audio",
        vendor_metadata={
            "start_s": shown.start_s,
            "end_s": shown.end_s,
            "video_id": shown.video_id,
            "source": source_key(Path(video.path)),
            "modality": "audio",
        },
    )


def _segment(catalog: Catalog, shown: _Shown, with_text: bool) -> SegmentEvidence:
    """A shown span as the judge's prompt lists it: with, when the condition gives text, the
    transcript of the moments it shows — the chunk each shown instant falls in — never the
    whole span (under uniform sampling one span runs from a video's first instant to its end)."""
    video = catalog.video(shown.video_id)
    times = shown.times or (shown.start_s,)
    chunks = (
        tuple(
            ChunkText(start_s=c.start_s, end_s=c.end_s, text=c.transcript)
            for c in catalog.chunks(shown.video_id)
            if any(c.start_s <= t < c.end_s for t in times)
        )
        if with_text
        else ()
    )
    return SegmentEvidence(
        segment_id=f"{shown.video_id}@{shown.start_s:g}-{shown.end_s:g}",
        video_id=shown.video_id,
        title=video.title if video else "",
        start_s=shown.start_s,
        end_s=shown.end_s,
        chunks=chunks,
    )


def build_view(
    catalog: Catalog,
    clips: ClipFetcher,
    retrievers: Mapping[str, Retriever],
    record: Mapping[str, Any],
    condition: Condition,
) -> _View:
    """What a judge sees of benchmark record ``record`` under ``condition``."""
    seed = pair_seed(str(record["id"]))
    evidence = {str(e["video_id"]) for e in record["evidence"]}
    haystack = build_haystack(catalog, evidence, condition.hours, seed)
    retrieved: tuple[SpanRecord, ...] = ()
    if condition.frames == "retrieved":
        name = condition.retriever or ""
        retriever = retrievers.get(name)
        if retriever is None:
            raise ConfigError(
                f"condition {condition.condition_id!r} asks for retriever {name!r}; "
                f"available: {sorted(retrievers)!r}"
            )
        spans = retriever.retrieve(str(record["prompt"]), haystack.video_ids, k=RETRIEVED_K)
        retrieved = tuple(SpanRecord(s.video_id, s.start_s, s.end_s, s.score) for s in spans)
        seconds = sum(s.end_s - s.start_s for s in spans)
        fps = condition.n_frames / seconds if seconds > 0 else 0.0
        shown = [_Shown(s.video_id, s.start_s, s.end_s, fps) for s in spans if s.end_s > s.start_s]
    else:
        shown = _uniform_spans(catalog, haystack.video_ids, max(condition.n_frames, 1))
    attached: tuple[BinaryContent, ...] = ()
    if condition.modality == "audio":
        # The sound of each shown span alone: no picture reaches the judge.
        attached = tuple(a for s in shown if (a := _audio(catalog, s)) is not None)
    elif condition.shows_frames:
        attached = tuple(
            _clip(catalog, clips, s, condition.resolution, False) for s in shown if s.fps > 0
        )
    segments = (
        ()
        if condition.modality == "none"
        else tuple(_segment(catalog, s, condition.shows_transcript) for s in shown)
    )
    pictures = condition.modality != "audio" and bool(attached)
    frame_times = tuple((s.video_id, t) for s in shown if s.fps > 0 and pictures for t in s.times)
    audio_s = sum(
        float((a.vendor_metadata or {}).get("end_s", 0.0))
        - float((a.vendor_metadata or {}).get("start_s", 0.0))
        for a in attached
        if condition.modality == "audio"
    )
    return _View(
        segments=segments,
        clips=attached,
        hours=round(haystack.hours, 3),
        seed=seed,
        retrieved=retrieved,
        shown=Shown(
            frames=len(frame_times),
            frame_times=frame_times,
            resolution=condition.resolution if frame_times else None,
            transcript_chars=sum(len(c.text) for g in segments for c in g.chunks),
            audio_s=round(float(audio_s), 3),
        ),
    )


# -- records -------------------------------------------------------------------------------------


def read_judgments(path: Path) -> list[JudgmentRecord]:
    """The records of a ``judgments.jsonl`` (a torn line, from a crash, is left out).

    A line that is JSON but not a judgment record raises :class:`store.errors.ConfigError`.
    """
    if not path.exists():
        return []
    out: list[JudgmentRecord] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue
        try:
            out.append(JudgmentRecord.from_json(raw))
        except JudgingError as error:
            raise ConfigError(f"{path}:{number}: {error}; fix or delete the line") from error
    return out


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


def _benchmark(benchmark_dir: Path) -> tuple[list[dict[str, Any]], str]:
    pairs_file = benchmark_dir / "pairs.jsonl"
    if not pairs_file.exists():
        raise ConfigError(f"{benchmark_dir} holds no pairs.jsonl: export a benchmark there first")
    data = pairs_file.read_bytes()
    records = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    return records, hashlib.sha256(data).hexdigest()


def evaluation_id_of(benchmark_dir: Path, out_dir: Path) -> str:
    """The id an evaluation of ``benchmark_dir`` into ``out_dir`` has (its stream is
    ``eval-<id>``): the one its ``evaluation.json`` holds, else one made of the benchmark's
    content hash and the folder."""
    _records, sha = _benchmark(benchmark_dir)
    path = out_dir / EVALUATION_FILE
    old: dict[str, Any] = json.loads(path.read_text("utf-8")) if path.exists() else {}
    found = old.get("evaluation_id")
    return (
        str(found)
        if found
        else hashlib.sha256(f"{sha}|{out_dir.resolve()}".encode()).hexdigest()[:16]
    )


def _evaluation_json(
    out_dir: Path, sha: str, judges: Sequence[str], conditions: Sequence[Condition], now: datetime
) -> dict[str, Any]:
    """The evaluation's description: kept (judges and conditions added) when it exists."""
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
        "benchmark_sha256": sha,
        "judges": list(dict.fromkeys([*old.get("judges", []), *judges])),
        "conditions": list(known.values()),
        "started": old.get("started") or now.isoformat(),
    }


async def evaluate(
    deps: CallDeps,
    *,
    benchmark_dir: Path,
    judges: Sequence[str],
    conditions: Sequence[Condition],
    out_dir: Path,
    retrievers: Mapping[str, Retriever] | None = None,
    concurrency: int = 8,
    budget_micros: int | None = None,
    offline: bool = False,
    now: datetime | None = None,
    lease: str | None = None,
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
    its error kept in ``failures``; a later call goes on from there.
    """
    store, catalog, clips, model_for, prices = (
        deps.store,
        deps.catalog,
        deps.clips,
        deps.model_for,
        deps.prices,
    )
    judges = tuple(dict.fromkeys(judges))
    if not judges or not conditions:
        raise ConfigError("an evaluation needs at least one judge and one condition")
    for judge in judges:
        prices.price(judge)  # an unpriced judge is refused before anything is spent
    records, sha = _benchmark(benchmark_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = _evaluation_json(out_dir, sha, judges, conditions, now or datetime.now(tz=UTC))
    (out_dir / EVALUATION_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    evaluation_id = str(meta["evaluation_id"])
    judgments_path = out_dir / JUDGMENTS_FILE
    done = {r.key for r in read_judgments(judgments_path)}

    stream = eval_stream(evaluation_id)
    history: list[AnyEvent] = [s.event() for s in store.read_stream(stream)]
    recorder = resumed_recorder(
        history,
        budget_micros=budget_micros,
        prices=prices,
        offline=offline,
        traffic=deps.traffic,
        campaign=deps.campaign,
        hold_prefix=stream,
        lease=lease,
    )
    runner = ModelRunner(recorder=recorder, model_for=model_for)
    writer = GroupCommit(store, lambda _stream, _event: None)
    writer.fence(stream, len(history))
    secret_list = sorted(set(deps.secrets), key=len, reverse=True)
    keys: dict[str, str] = {}  # call owner → request key of its latest call

    async def append(event: Event) -> None:
        if isinstance(event, CallRecorded | CallReserved | CallFailed):
            keys[CallId.owner_of(event.call_id)] = event.key
        await writer.append(stream, scrubbed(event, secret_list))

    views: dict[tuple[str, str], _View] = {}
    jobs: list[tuple[dict[str, Any], str, Condition, Order]] = []
    for record in records:
        for condition in conditions:
            for judge in judges:
                for order in ORDERS:
                    if (str(record["id"]), judge, condition.condition_id, order) not in done:
                        jobs.append((record, judge, condition, order))
    failures: list[Exception] = []
    new: list[JudgmentRecord] = []
    limiter = anyio.CapacityLimiter(max(concurrency, 1))
    file_lock = anyio.Lock()

    def view_of(record: Mapping[str, Any], condition: Condition) -> _View:
        key = (str(record["id"]), condition.condition_id)
        if key not in views:
            views[key] = build_view(catalog, clips, retrievers or {}, record, condition)
        return views[key]

    async def one(record: dict[str, Any], judge: str, condition: Condition, order: Order) -> None:
        async with limiter:
            try:
                view = view_of(record, condition)
                unread = SeedEvidence(catalog, clips, str(record["id"]), "", "")
                out = await _judge_once(
                    runner, unread, append, keys, record, judge, condition, order, view
                )
            except (BudgetExhausted, ProviderError, MediaError) as exc:
                # Each at info: the caller reports the failures (the CLI the first few, and
                # one line when nothing was judged), a warning per pair would flood stderr.
                logger.info("judgment_not_made", pair_id=record["id"], judge=judge, error=str(exc))
                failures.append(exc)
                return
            async with file_lock:
                with judgments_path.open("a", encoding="utf-8") as handle:
                    handle.write(out.to_line() + "\n")
                new.append(out)

    logger.info(
        "evaluation_begin",
        evaluation_id=evaluation_id,
        conditions=[c.label() for c in conditions],
        jobs=len(jobs),
        done=len(done),
    )
    async with anyio.create_task_group() as outer:
        outer.start_soon(writer.run)
        if jobs and current_cap(history) != budget_micros:
            await writer.append(stream, CapSet(cap_micros=budget_micros, command="eval"))
        try:
            async with anyio.create_task_group() as group:
                for job in jobs:
                    group.start_soon(one, *job)
        finally:
            writer.close()
    every = read_judgments(judgments_path)
    every.sort(key=lambda r: r.key)
    logger.info(
        "evaluation_end",
        evaluation_id=evaluation_id,
        new=len(new),
        live_calls=recorder.live_calls,
        replayed=recorder.replayed_calls,
        failures=len(failures),
    )
    return EvaluationResult(
        evaluation_id=evaluation_id,
        out_dir=out_dir,
        records=every,
        new_records=len(new),
        live_calls=recorder.live_calls,
        replayed_calls=recorder.replayed_calls,
        failures=failures,
    )


def thinking_settings(budget: int | None) -> ModelSettings | None:
    """A condition's thinking budget as model settings: pydantic-ai's provider-neutral
    ``thinking`` (0 turns it off; otherwise the effort level the budget amounts to) and, for
    Gemini, the exact ``thinking_budget`` in tokens. ``None``: the provider's default."""
    if budget is None:
        return None
    if budget <= 0:
        return ModelSettings(thinking=False)
    level: Literal["low", "medium", "high"] = (
        "low" if budget <= 2048 else "medium" if budget <= 8192 else "high"
    )
    settings: ModelSettings = {"thinking": level}
    # Read by pydantic-ai's Google model only; other models ignore a setting they do not know.
    settings["google_thinking_config"] = {"thinking_budget": budget}  # type: ignore[typeddict-unknown-key]
    return settings


def _receives(condition: Condition, view: _View) -> JudgeEvidence:
    """What the judge is actually given under ``condition`` (no clip may have been cut, no
    transcript may cover the spans): what its prompt then says it receives."""
    clips = bool(view.clips)
    text = any(segment.chunks for segment in view.segments)
    if condition.modality == "none":
        return "none"
    if condition.modality == "audio":
        return "audio" if clips else "none"
    if clips:
        return "frames+transcript" if text else "frames"
    return "transcript" if text else "none"


async def _judge_once(
    runner: ModelRunner,
    evidence: SeedEvidence,
    append: Callable[[Event], Any],
    keys: Mapping[str, str],
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
    call = SeedCall(seed_id=owner, evidence=evidence, append=append)
    verdict: Verdict
    try:
        out = await runner.run(
            call,
            JUDGE_ROLE,
            judge,
            context,
            PairVerdict,
            phase=None,
            gate=GATE,
            attachments=view.clips,
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
        call_key=keys.get(owner, ""),
        retrieved_spans=view.retrieved,
        shown=view.shown,
        gold_spans=tuple(
            SpanRecord(str(e["video_id"]), float(e["start_s"]), float(e["end_s"]))
            for e in record["evidence"]
        ),
    )
