"""The benchmark export: selected pairs → a folder that ``datasets.load_dataset`` reads.

One record per pair, the same in ``pairs.jsonl`` and ``pairs.parquet``: RewardBench-style core
fields (``id``, ``prompt``, ``chosen``, ``rejected``, ``subset``) plus where the pair comes from
(playlist, domain, ratings, videos, evidence spans, transcripts, bundled clips), the difficulty
judges' verdicts, its causal records and curation cost, and its provenance: which models (or the
offline provider) answered the calls that made, checked and judged it, read from the call events
in the log — never from the settings at export time. Beside them: ``manifest.json`` (videos and
clips), ``README.md`` (the dataset card: Hugging Face metadata in YAML front matter — license,
task categories, size, and the ``configs`` that point ``datasets`` and the Hub viewer at the
Parquet file — then a first line that says so when the offline provider made the benchmark),
``LICENSE.md`` and ``benchmark.json`` (version, content hash, counts, the gap distribution
through the difficulty gate, provenance, settings, cost, and per domain its target hours and
the videos backfilled from reserve after near-duplicates were dropped).

The export is portable: no record holds an absolute path. A video's ``path`` is relative to the
export folder (it still points at the workspace's copy, which does not travel: videos keep their
owners' terms); with ``with_clips`` each evidence span's clip — cut as the run's generators were
sent it — and the frames a difficulty judge was shown of it lie in ``clips/`` inside the export,
so a copy of the folder moved anywhere loads and shows them.

The export is a pure function of the log, the catalogue, the pairs and where it is written
(the relative paths): records are sorted by id and every JSON object has sorted keys, so the same
input gives byte-identical files. It is written
into a temporary folder beside the target and renamed into place, so a failed export never leaves
half a benchmark.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from agents.evidence import ClipSpec
from agents.pairs import JUDGE_CLIP, JUDGE_ROLE, fold_pairs
from playlisteval.app import App
from policies.pairs import GOLD_RATING, SelectedPair
from store.answers import answered_by
from store.catalog import Catalog, ChunkRow, SegmentRow, VideoRow
from store.errors import ConfigError
from store.events import (
    CallId,
    CallRecorded,
    ItemAccepted,
    micros_to_usd,
    pairs_stream,
    seed_stream,
)
from store.eventstore import StoredEvent
from store.ledger import spend, stream_spend
from store.runlog import run_started
from tools.evidence import benchmark_folder
from tools.providers.specs.local_llm import FAMILY_NAME as REAL_LOCAL_FAMILY

BENCHMARK_VERSION = "1"
FILES = (
    "pairs.jsonl",
    "pairs.parquet",
    "manifest.json",
    "README.md",
    "LICENSE.md",
    "benchmark.json",
)
#: The folder of an export's bundled clips and frames (``with_clips``).
CLIPS_DIR = "clips"
#: Names that read as a data file, not a folder: an export target named so is refused (an export
#: is a folder of files; ``export bench.parquet`` must not make a folder called that).
FILE_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv", ".arrow", ".zip", ".gz", ".tar")

_VIDEO = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("path", pa.string()),
        pa.field("url", pa.string()),
        pa.field("duration_s", pa.float64()),
    ]
)
#: A span of a video; a bundled clip and a transcript window are each a span and more.
_SPAN = pa.struct(
    [
        pa.field("video_id", pa.string()),
        pa.field("start_s", pa.float64()),
        pa.field("end_s", pa.float64()),
    ]
)
_CLIP = pa.struct([*_SPAN, pa.field("path", pa.string()), pa.field("frames", pa.string())])
_TRANSCRIPT = pa.struct([*_SPAN, pa.field("text", pa.string())])
_JUDGE = pa.struct(
    [
        pa.field("judge", pa.string()),
        pa.field("verdict_chosen_first", pa.string()),
        pa.field("verdict_rejected_first", pa.string()),
        pa.field("failed", pa.bool_()),
    ]
)
_META = pa.struct(
    [
        pa.field("seed_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("cost_micros", pa.int64()),
        pa.field("chosen_causal_record", pa.string()),
        pa.field("rejected_causal_record", pa.string()),
    ]
)
_PROVENANCE = pa.struct(
    [
        pa.field("offline", pa.bool_()),
        pa.field("run_offline", pa.bool_()),
        pa.field("generator", pa.list_(pa.string())),
        pa.field("distractor_generator", pa.list_(pa.string())),
        pa.field("checked_by", pa.list_(pa.string())),
        pa.field("judges", pa.list_(pa.string())),
    ]
)

#: The Parquet schema of one record; the JSONL lines carry the same fields and types. Explicit, so
#: an empty list or a missing value never leaves a column's type to inference.
RECORD_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("chosen", pa.string(), nullable=False),
        pa.field("rejected", pa.string(), nullable=False),
        pa.field("subset", pa.string(), nullable=False),
        pa.field("playlist_id", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("chosen_rating", pa.int64(), nullable=False),
        pa.field("rejected_rating", pa.int64(), nullable=False),
        pa.field("gap", pa.int64(), nullable=False),
        pa.field("videos", pa.list_(_VIDEO), nullable=False),
        pa.field("evidence", pa.list_(_SPAN), nullable=False),
        pa.field("transcripts", pa.list_(_TRANSCRIPT), nullable=False),
        pa.field("clips", pa.list_(_CLIP), nullable=False),
        pa.field(
            "models",
            pa.struct([pa.field("difficulty_judges", pa.list_(_JUDGE))]),
            nullable=False,
        ),
        pa.field("meta", _META, nullable=False),
        pa.field("provenance", _PROVENANCE, nullable=False),
    ]
)

#: The Hub's Video feature as Arrow stores it (``datasets.Video.pa_type``, datasets 4.x
#: ``features/video.py``): the file's bytes and its path, in this order.
_VIDEO_FILE = pa.struct([pa.field("bytes", pa.binary()), pa.field("path", pa.string())])
#: A bundled clip in pairs.parquet (``with_clips``): the JSONL's entry plus ``video``, the clip
#: itself (bytes embedded, ``path`` relative to the folder) as a ``datasets.Video``.
_CLIP_WITH_VIDEO = pa.struct([*_CLIP, pa.field("video", _VIDEO_FILE)])


def _value(dtype: str) -> dict[str, str]:
    return {"dtype": dtype, "_type": "Value"}


#: How ``datasets`` is told that ``clips[].video`` is a Video: the features it reads from the
#: Parquet schema's ``huggingface`` metadata (``Features.from_arrow_schema``, datasets 4.x
#: ``features/features.py``; the same place ``push_to_hub`` writes them). Only ``clips`` is
#: named: every other column's type comes from its Arrow type, as without clips. ``List`` is
#: datasets 4's name for a list feature.
CLIPS_FEATURES: dict[str, Any] = {
    "clips": {
        "feature": {
            "video_id": _value("string"),
            "start_s": _value("float64"),
            "end_s": _value("float64"),
            "path": _value("string"),
            "frames": _value("string"),
            "video": {"_type": "Video"},
        },
        "_type": "List",
    }
}


def parquet_schema(with_clips: bool) -> pa.Schema:
    """The schema pairs.parquet is written with: :data:`RECORD_SCHEMA`, or with clips bundled
    each clip entry holding its ``video`` and the metadata that makes it a ``datasets.Video``.
    ``clips`` is nullable then, as ``datasets`` uses a column's declared feature only when its
    Arrow field equals the feature's own, and a feature's field is nullable."""
    if not with_clips:
        return RECORD_SCHEMA
    at = RECORD_SCHEMA.get_field_index("clips")
    schema = RECORD_SCHEMA.set(at, pa.field("clips", pa.list_(_CLIP_WITH_VIDEO)))
    metadata = {"info": {"features": CLIPS_FEATURES}}
    # Not sorted: a struct feature's key order is its Arrow field order, which must match.
    return schema.with_metadata({"huggingface": json.dumps(metadata)})


def parquet_rows(records: Sequence[Mapping[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """The records as pairs.parquet holds them with clips bundled in ``folder``: each clip
    entry also holds ``video``, the clip file's bytes and its path relative to the folder (the
    Hub's way for media in Parquet: relative paths do not resolve from a repo, bytes do)."""
    read: dict[str, bytes] = {}

    def with_video(clip: Mapping[str, Any]) -> dict[str, Any]:
        path = clip["path"]
        if path not in read:
            read[path] = (folder / path).read_bytes()
        return {**clip, "video": {"bytes": read[path], "path": path}}

    return [{**r, "clips": [with_video(c) for c in r["clips"]]} for r in records]


#: Selection settings that only the log can tell truly (who judged, offline or not): an export
#: names them from the log's events, never from what the settings say at export time.
LOG_FACTS = frozenset({"offline", "difficulty_judges"})
#: The curation roles whose models wrote an item; every other curation role checked it.
GENERATOR_ROLES = {"phase1_generator": "generator", "phase2_generator": "distractor_generator"}
OFFLINE_BANNER = (
    "> OFFLINE HARNESS — made by the offline provider; not evidence of model quality. Every "
    "question, answer, check and judge verdict below came from the offline provider "
    "(`offline:<model>`), priced as the named models; none of those models was called."
)


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: where, how many pairs, their spread and the content hash."""

    path: Path
    pairs: int
    per_domain: dict[str, int]
    per_gap: dict[int, int]
    content_sha256: str
    cost_micros: int
    hours: float
    clips: int = 0  # evidence clips bundled (``with_clips``), each with its frames


class ExportProgress(Protocol):
    """What an export tells whoever watches it (the CLI's progress bars): each step's size,
    then each unit of it done."""

    def begin(self, label: str, total: int) -> None:
        """A step of ``total`` units starts (``items read``, ``clips bundled``)."""
        ...

    def advance(self) -> None:
        """One more unit of the current step is done."""
        ...


#: How a record marks a model run on this machine (the ``real-local`` family): its id after it.
REAL_LOCAL_PREFIX = f"{REAL_LOCAL_FAMILY}:"


def model_label(model: str, offline: bool, real_local: bool = False) -> str:
    """How a record names what answered a call: the model id; ``offline:<id>`` when the
    offline provider answered in its place; ``real-local:<id>`` when a real model run on this
    machine answered (a real local model, never the offline harness, whatever the run's mode)."""
    if real_local:
        return f"{REAL_LOCAL_PREFIX}{model}"
    return f"offline:{model}" if offline else model


@dataclass(frozen=True)
class _Call:
    """One answered model call, as the log records it: the role, the model id, offline or not,
    and whether a real local model answered it."""

    role: str
    model: str
    offline: bool
    real_local: bool = False

    @classmethod
    def of(cls, event: CallRecorded) -> _Call:
        """The call ``event`` records."""
        who = answered_by(event, original=True)
        return cls(event.role, event.model, who == "offline", who == "real-local")

    @property
    def label(self) -> str:
        """The model as a record names it (:func:`model_label`)."""
        return model_label(self.model, self.offline, self.real_local)


def _answered(stored: Iterable[StoredEvent]) -> list[CallRecorded]:
    """The recorded answers among ``stored`` (a failed or refused call answered nothing)."""
    return [
        e for s in stored if s.type == "CallRecorded" and isinstance(e := s.event(), CallRecorded)
    ]


@dataclass(frozen=True)
class _Item:
    """What one accepted seed contributes to every pair drawn from it."""

    question: str
    answers: dict[int, tuple[str, str]]  # rating → (answer text, causal record as JSON text)
    playlist_id: str
    videos: tuple[dict[str, Any], ...]
    evidence: tuple[dict[str, Any], ...]
    transcripts: tuple[dict[str, Any], ...]
    cost_micros: int
    run_offline: bool  # the run's RunStarted.offline
    calls: tuple[_Call, ...]  # every answered call of the seed in the run


def _json_text(value: Any) -> str:
    """Canonical JSON: sorted keys, no ASCII escaping, so equal values give equal bytes."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _accepted_item(
    app: App, run_id: str, seed_id: str
) -> tuple[ItemAccepted, int, tuple[_Call, ...]]:
    """The seed's accepted item in the run, what its calls cost and who answered them;
    ConfigError when there is no item."""
    item: ItemAccepted | None = None
    stream = app.events.read_stream(seed_stream(run_id, seed_id))
    for stored in stream:
        if stored.type == "ItemAccepted":
            event = stored.event()
            assert isinstance(event, ItemAccepted)
            item = event
    cost = spend(stream).spent_micros
    if item is None:
        raise ConfigError(
            f"seed {seed_id!r} has no accepted item in run {run_id!r}: only pairs of accepted "
            "items can be exported (check the run with `playlisteval audit`)"
        )
    calls = tuple(_Call.of(e) for e in _answered(stream))
    return item, cost, calls


def _answers(item: ItemAccepted, seed_id: str) -> dict[int, tuple[str, str]]:
    """Rating → (text, causal record): the gold answer (5) and the four graded distractors."""
    question = item.qa.get("question")
    gold = item.qa.get("gold_answer")
    if not isinstance(question, str) or not isinstance(gold, str):
        raise ConfigError(f"seed {seed_id!r}: its accepted item has no question or gold answer")
    answers: dict[int, tuple[str, str]] = {GOLD_RATING: (gold, _json_text([]))}
    for graded in item.distractors.get("answers", ()):
        rating = int(graded["rating"])
        answers[rating] = (str(graded["answer"]), _json_text(graded.get("causal_record", [])))
    return answers


def _segment_text(chunks: Sequence[ChunkRow], segment: SegmentRow) -> str:
    """The segment's transcript: its chunks' transcripts in time order, one per line."""
    inside = [c for c in chunks if segment.chunk_start <= c.idx < segment.chunk_end]
    return "\n".join(c.transcript.strip() for c in inside if c.transcript.strip())


def portable_path(path: str | Path, root: Path) -> str:
    """``path`` as the export at ``root`` names it: relative to the export folder, with ``/``
    separators (no absolute path leaves the machine in a record)."""
    return Path(os.path.relpath(Path(path).absolute(), root)).as_posix()


def _video_entry(video: VideoRow, root: Path) -> dict[str, Any]:
    """A video as the record and the manifest list it: id, path relative to the export folder
    ``root`` (the workspace's copy, which does not travel with the export), URL ("" when
    local)."""
    return {
        "id": video.id,
        "path": portable_path(video.path, root) if video.path else "",
        "url": video.url or "",
        "duration_s": float(video.duration_s or 0.0),
    }


def _load_item(app: App, run_id: str, seed_id: str, run_offline: bool, root: Path) -> _Item:
    """Read one accepted seed: its item and calls from the log, its segments from the
    catalogue (video paths relative to the export folder ``root``)."""
    accepted, cost, calls = _accepted_item(app, run_id, seed_id)
    seeds = app.catalog.seeds_by_id([seed_id])
    if not seeds:
        raise ConfigError(f"seed {seed_id!r} is not in the catalogue: was the workspace re-seeded?")
    seed = seeds[0]
    videos: dict[str, dict[str, Any]] = {}
    evidence: list[dict[str, Any]] = []
    transcripts: list[dict[str, Any]] = []
    playlist_id = ""
    for segment_id in (seed.segment_a, seed.segment_b):
        segment = app.catalog.segment(segment_id)
        if segment is None:
            raise ConfigError(f"seed {seed_id!r}: segment {segment_id!r} is not in the catalogue")
        video = app.catalog.video(segment.video_id)
        if video is None:
            raise ConfigError(f"segment {segment_id!r}: video {segment.video_id!r} is unknown")
        playlist_id = playlist_id or video.playlist_id
        videos.setdefault(video.id, _video_entry(video, root))
        span = {
            "video_id": video.id,
            "start_s": float(segment.start_s),
            "end_s": float(segment.end_s),
        }
        evidence.append(span)
        text = _segment_text(app.catalog.chunks(video.id), segment)
        transcripts.append({**span, "text": text})
    return _Item(
        question=str(accepted.qa.get("question", "")),
        answers=_answers(accepted, seed_id),
        playlist_id=playlist_id,
        videos=tuple(videos.values()),
        evidence=tuple(evidence),
        transcripts=tuple(transcripts),
        cost_micros=cost,
        run_offline=run_offline,
        calls=calls,
    )


def _judge_calls(app: App, run_id: str) -> dict[str, tuple[_Call, ...]]:
    """Pair id → the difficulty judges' answered calls on it (the run's pairs stream)."""
    found: dict[str, list[_Call]] = {}
    for event in _answered(app.events.read_stream(pairs_stream(run_id))):
        if event.role == JUDGE_ROLE:
            owner = CallId.owner_of(event.call_id)
            found.setdefault(owner, []).append(_Call.of(event))
    return {pair_id: tuple(calls) for pair_id, calls in found.items()}


def _provenance(pair: SelectedPair, item: _Item, judge_calls: Sequence[_Call]) -> dict[str, Any]:
    """Who made, checked and judged one pair, as the log says: the labels of the models that
    answered the seed's calls by role, and of the judges that answered the pair's (a verdict
    whose call the log lacks names its judge as given)."""

    def labels(calls: Iterable[_Call]) -> list[str]:
        return sorted({c.label for c in calls})

    made = {
        field: labels(c for c in item.calls if c.role == role)
        for role, field in GENERATOR_ROLES.items()
    }
    checks = [c for c in item.calls if c.role not in GENERATOR_ROLES]
    return {
        "offline": item.run_offline or any(c.offline for c in (*item.calls, *judge_calls)),
        "run_offline": item.run_offline,
        **made,
        "checked_by": labels(checks),
        "judges": sorted(
            {c.label for c in judge_calls}
            | {_judge_label(v.judge, judge_calls) for v in pair.judges}
        ),
    }


def _judge_label(judge: str, calls: Sequence[_Call]) -> str:
    """A verdict's judge as what answered it: ``offline:<id>`` when the offline provider did,
    ``real-local:<id>`` when a real local model did (the id as given when the log holds no
    call of it on the pair)."""
    own = [c for c in calls if c.model == judge]
    return model_label(
        judge, any(c.offline for c in own), bool(own) and all(c.real_local for c in own)
    )


def clip_name(video_id: str, start_s: float, end_s: float) -> str:
    """The file stem of an evidence span's bundled clip (and its frames' folder): the video id
    made safe for any file system, and the span in milliseconds; a short hash keeps two ids
    that sanitise alike apart."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", video_id)[:80]
    if safe != video_id:
        safe += "-" + hashlib.sha1(video_id.encode()).hexdigest()[:8]
    return f"{safe}_{round(start_s * 1000):09d}-{round(end_s * 1000):09d}"


def _clip_entries(item: _Item, with_clips: bool) -> list[dict[str, Any]]:
    """The record's clips: one per evidence span, its bundled clip and frames folder relative
    to the export folder, or "" for both when clips are not bundled (the entries stay, so the
    JSON's types are the Parquet's even then)."""
    out = []
    for span in item.evidence:
        name = clip_name(span["video_id"], span["start_s"], span["end_s"])
        path, frames = (
            (f"{CLIPS_DIR}/{name}.mp4", f"{CLIPS_DIR}/{name}") if with_clips else ("", "")
        )
        out.append({**span, "path": path, "frames": frames})
    return out


def _record(
    pair: SelectedPair, item: _Item, judge_calls: Sequence[_Call], with_clips: bool = False
) -> dict[str, Any]:
    """One export record (see :data:`RECORD_SCHEMA`)."""
    for rating in (pair.chosen_rating, pair.rejected_rating):
        if rating not in item.answers:
            raise ConfigError(
                f"pair {pair.pair_id!r}: seed {pair.seed_id!r} has no answer rated {rating!r} "
                f"(it has {sorted(item.answers)})"
            )
    if pair.chosen_rating <= pair.rejected_rating:
        raise ConfigError(
            f"pair {pair.pair_id!r}: chosen rating {pair.chosen_rating!r} is not above "
            f"rejected rating {pair.rejected_rating!r}"
        )
    chosen, chosen_record = item.answers[pair.chosen_rating]
    rejected, rejected_record = item.answers[pair.rejected_rating]
    return {
        "id": pair.pair_id,
        "prompt": item.question,
        "chosen": chosen,
        "rejected": rejected,
        "subset": pair.domain,
        "playlist_id": item.playlist_id,
        "domain": pair.domain,
        "chosen_rating": pair.chosen_rating,
        "rejected_rating": pair.rejected_rating,
        "gap": pair.gap,
        "videos": [dict(v) for v in item.videos],
        "evidence": [dict(s) for s in item.evidence],
        "transcripts": [dict(t) for t in item.transcripts],
        "clips": _clip_entries(item, with_clips),
        "models": {
            "difficulty_judges": [
                {
                    "judge": _judge_label(v.judge, judge_calls),
                    "verdict_chosen_first": v.verdict_chosen_first,
                    "verdict_rejected_first": v.verdict_rejected_first,
                    "failed": v.failed,
                }
                for v in pair.judges
            ]
        },
        "meta": {
            "seed_id": pair.seed_id,
            "run_id": pair.run_id,
            "cost_micros": item.cost_micros,
            "chosen_causal_record": chosen_record,
            "rejected_causal_record": rejected_record,
        },
        "provenance": _provenance(pair, item, judge_calls),
    }


def build_records(
    app: App,
    pairs: Sequence[SelectedPair],
    root: Path,
    *,
    with_clips: bool = False,
    progress: ExportProgress | None = None,
) -> list[dict[str, Any]]:
    """The export records of ``pairs`` for an export at ``root``, sorted by id; ConfigError
    names the first bad pair. Paths in them are relative to ``root``; ``with_clips`` lists each
    evidence span's bundled clip and frames (cut by :func:`export_benchmark`).

    Each record's provenance and its verdicts' judges come from the log: the run's
    ``RunStarted.offline``, and the model and offline flag of every recorded answer of the
    seed's curation and of the pair's difficulty judges."""
    items: dict[tuple[str, str], _Item] = {}
    offline: dict[str, bool] = {}
    judges: dict[str, dict[str, tuple[_Call, ...]]] = {}
    records: dict[str, dict[str, Any]] = {}
    if progress is not None:
        progress.begin("items read", len({(p.run_id, p.seed_id) for p in pairs}))
    for pair in pairs:
        if pair.pair_id in records:
            raise ConfigError(f"pair {pair.pair_id!r} is listed twice")
        if pair.run_id not in offline:
            offline[pair.run_id] = run_started(app.events, pair.run_id).offline
            judges[pair.run_id] = _judge_calls(app, pair.run_id)
        key = (pair.run_id, pair.seed_id)
        if key not in items:
            items[key] = _load_item(app, pair.run_id, pair.seed_id, offline[pair.run_id], root)
            if progress is not None:
                progress.advance()
        calls = judges[pair.run_id].get(pair.pair_id, ())
        records[pair.pair_id] = _record(pair, items[key], calls, with_clips)
    return [records[pair_id] for pair_id in sorted(records)]


def jsonl_bytes(records: Iterable[Mapping[str, Any]]) -> bytes:
    """The JSONL file's bytes: one canonical JSON object per line."""
    return "".join(_json_text(r) + "\n" for r in records).encode("utf-8")


def _run_costs(app: App, run_ids: Iterable[str]) -> int:
    """What the runs paid for their calls, every seed included (accepted or not)."""
    return sum(stream_spend(app.events, seed_stream(r, "")).spent_micros for r in set(run_ids))


def _selection_costs(app: App, run_ids: Iterable[str]) -> int:
    """What the difficulty judges' calls of the runs' pair selections paid."""
    return sum(spend(app.events.read_stream(pairs_stream(r))).spent_micros for r in set(run_ids))


def _manifest(
    records: Sequence[Mapping[str, Any]], bundle: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every video once (sorted by id), every pair's clips (with the bundled clip's path and
    frames folder, "" when none is bundled) and, with clips bundled, how they were cut and
    every frame's time and file."""
    videos: dict[str, Mapping[str, Any]] = {}
    clips: list[dict[str, Any]] = []
    for record in records:
        for video in record["videos"]:
            videos.setdefault(video["id"], video)
        bundled = {(c["video_id"], c["start_s"], c["end_s"]): c for c in record["clips"]}
        for span in record["evidence"]:
            found = bundled.get((span["video_id"], span["start_s"], span["end_s"]), {})
            clips.append(
                {
                    "pair_id": record["id"],
                    **span,
                    "path": found.get("path", ""),
                    "frames": found.get("frames", ""),
                }
            )
    return {
        "videos": [dict(videos[v]) for v in sorted(videos)],
        "clips": clips,
        "bundle": dict(bundle) if bundle is not None else None,
    }


def _generator_clip(app: App, run_id: str) -> ClipSpec:
    """How the run's generators were sent each segment (its ``RunStarted`` settings; today's
    settings for a run that recorded none)."""
    recorded = run_started(app.events, run_id).settings.get("generation", {})
    now = app.settings.generation
    return ClipSpec(
        fps=float(recorded.get("video_fps", now.video_fps)),
        max_height=int(recorded.get("video_max_height", now.video_max_height)),
        audio=bool(recorded.get("video_audio", now.video_audio)),
    )


def _bundle_clips(
    app: App,
    records: Sequence[Mapping[str, Any]],
    folder: Path,
    progress: ExportProgress | None = None,
) -> dict[str, Any]:
    """Cut every evidence span the records list under ``clips`` into ``folder`` (the staged
    export): the clip as the run's generators were sent it (``NAME.mp4``) and, in ``NAME/``,
    the frames a difficulty judge is shown of it (:data:`agents.pairs.JUDGE_CLIP`) as JPEG
    files named by their time in the video in milliseconds. Clips come from the workspace's
    clip cache (cut there first when missing). Returns the manifest's ``bundle``."""
    spans: dict[tuple[str, float, float], str] = {}
    for record in records:
        for clip in (c for c in record["clips"] if c["path"]):
            spans.setdefault(
                (clip["video_id"], clip["start_s"], clip["end_s"]), record["meta"]["run_id"]
            )
    if progress is not None:
        progress.begin("clips bundled", len(spans))
    fetcher = app.clips()
    specs = {run_id: _generator_clip(app, run_id) for run_id in sorted(set(spans.values()))}
    bundled = []
    for (video_id, start_s, end_s), run_id in sorted(spans.items()):
        name = clip_name(video_id, start_s, end_s)
        spec = specs[run_id]
        cut = fetcher.fetch_clip(
            video_id, start_s, end_s, spec.fps, spec.max_height, spec.audio, frames=False
        )
        (folder / name).mkdir(parents=True)
        shutil.copyfile(cut.path, folder / f"{name}.mp4")
        shown = fetcher.fetch_clip(
            video_id,
            start_s,
            end_s,
            JUDGE_CLIP.fps,
            JUDGE_CLIP.max_height,
            JUDGE_CLIP.audio,
            frames=True,
        )
        frames = []
        for frame in shown.frames:
            at = start_s + frame.t  # a clip's frame times count from the clip's start
            file = f"{round(at * 1000):09d}.jpg"
            Image.fromarray(frame.image).save(folder / name / file, format="JPEG", quality=90)
            frames.append({"t_s": round(at, 3), "path": f"{CLIPS_DIR}/{name}/{file}"})
        bundled.append(
            {
                "video_id": video_id,
                "start_s": start_s,
                "end_s": end_s,
                "path": f"{CLIPS_DIR}/{name}.mp4",
                "clip": {"fps": spec.fps, "max_height": spec.max_height, "audio": spec.audio},
                "frames": frames,
            }
        )
        if progress is not None:
            progress.advance()
    return {
        "frames_shown_as": {
            "fps": JUDGE_CLIP.fps,
            "max_height": JUDGE_CLIP.max_height,
            "format": "jpeg",
            "who": "the difficulty judges (and the visual verifiers): frames, no audio",
        },
        "clips": bundled,
    }


def _counts(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Pairs overall, per domain, per gap and per domain × gap (keys as strings, for JSON)."""
    per_domain = Counter(str(r["domain"]) for r in records)
    per_gap = Counter(int(r["gap"]) for r in records)
    cells = Counter((str(r["domain"]), int(r["gap"])) for r in records)
    return {
        "pairs": len(records),
        "items": len({(r["meta"]["run_id"], r["meta"]["seed_id"]) for r in records}),
        "per_domain": {d: per_domain[d] for d in sorted(per_domain)},
        "per_gap": {str(g): per_gap[g] for g in sorted(per_gap)},
        "per_domain_gap": {
            d: {str(g): cells[(d, g)] for g in sorted(per_gap) if cells[(d, g)]}
            for d in sorted(per_domain)
        },
    }


def dataset_backfill(catalog: Catalog, domains: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per domain of the benchmark, what the catalogue records of its size: its target hours
    (None when none was given), its hours in seeding and whether that falls short of the
    target, and the videos backfilled from reserve after near-duplicates were dropped — how
    many, their hours, and which dropped video each stood in for (None: none named)."""
    stands = {row.domain: row for row in catalog.domain_hours()}
    found: dict[str, dict[str, Any]] = {}
    for domain in sorted(set(domains)):
        rows = catalog.backfills(domain)
        hours = sum(
            ((video.duration_s or 0.0) if (video := catalog.video(r.video_id)) else 0.0)
            for r in rows
        )
        stand = stands.get(domain)
        target = stand.hours_target if stand is not None else None
        in_seeding = stand.hours_in_seeding if stand is not None else 0.0
        found[domain] = {
            "target_hours": target,
            "hours_in_seeding": round(in_seeding, 6),
            "short": target is not None and in_seeding < target - 1e-9,
            "backfilled_videos": len(rows),
            "backfilled_hours": round(hours / 3600.0, 6),
            "backfilled_for": {r.video_id: r.replaces for r in rows},
        }
    return found


def _backfill_lines(backfill: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The card's word on the videos behind each domain: near-duplicates dropped, and the
    newer videos of its playlists that filled the gap up to its target."""
    if not backfill:
        return []
    lines = [
        "## Videos per domain",
        "",
        "Near-duplicate videos were dropped before seeding; a domain left below its target hours "
        "took the next videos of its playlists, held in reserve, in their place (backfilled).",
        "",
        "| domain | target (h) | in seeding (h) | backfilled videos | backfilled hours |",
        "| --- | --- | --- | --- | --- |",
    ]
    for domain, said in sorted(backfill.items()):
        target = said["target_hours"]
        goal = "none" if target is None else f"{target:g}"
        short = " (short: reserve used up)" if said["short"] else ""
        lines.append(
            f"| {domain} | {goal} | {said['hours_in_seeding']:.2f}{short} | "
            f"{said['backfilled_videos']} | {said['backfilled_hours']:.2f} |"
        )
    return [*lines, ""]


def _gate_gaps(
    app: App, run_ids: Iterable[str], records: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, int]]:
    """Pairs per rating gap at each step (keys as strings, for JSON): the runs' candidate pairs,
    those the difficulty gate kept (its last decision in each run's pairs stream), and the pairs
    exported here."""
    candidates: Counter[int] = Counter()
    kept: Counter[int] = Counter()
    for run_id in sorted(set(run_ids)):
        log = fold_pairs(s.event() for s in app.events.read_stream(pairs_stream(run_id)))
        for pair_id, candidate in log.candidates.items():
            gap = candidate.chosen_rating - candidate.rejected_rating
            candidates[gap] += 1
            kept[gap] += pair_id in log.kept
    exported = Counter(int(r["gap"]) for r in records)
    gaps = sorted({*candidates, *exported})
    return {
        step: {str(g): counter[g] for g in gaps}
        for step, counter in (("candidates", candidates), ("kept", kept), ("exported", exported))
    }


_ROLE_FIELDS = ("generator", "distractor_generator", "checked_by", "judges")


def _provenance_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The records' provenance per run: offline or not, how many pairs (and how many of them the
    offline provider had a hand in), and every model label by part."""
    runs: dict[str, dict[str, Any]] = {}
    for record in records:
        prov = record["provenance"]
        run = runs.setdefault(
            record["meta"]["run_id"],
            {"offline": prov["run_offline"], "pairs": 0, "offline_pairs": 0}
            | {name: set() for name in _ROLE_FIELDS},
        )
        run["pairs"] += 1
        run["offline_pairs"] += bool(prov["offline"])
        for name in _ROLE_FIELDS:
            run[name].update(prov[name])
    for run in runs.values():
        for name in _ROLE_FIELDS:
            run[name] = sorted(run[name])
    return {
        "pairs": len(records),
        "offline_pairs": sum(bool(r["provenance"]["offline"]) for r in records),
        "runs": {run_id: runs[run_id] for run_id in sorted(runs)},
    }


def _banner(provenance: Mapping[str, Any]) -> list[str]:
    """The card's first lines when the offline provider had a hand in the benchmark."""
    runs = provenance["runs"].values()
    offline, total = provenance["offline_pairs"], provenance["pairs"]
    if total and offline == total and all(run["offline"] for run in runs):
        return [OFFLINE_BANNER, ""]
    if offline:
        return [
            f"> PARTLY OFFLINE — {offline} of {total} pairs were curated or judged by the offline "
            "provider (see Provenance); those pairs are not evidence of model quality.",
            "",
        ]
    return []


def _gold_wording(provenance: Mapping[str, Any]) -> str:
    """What checked the gold answers, as it happened: the offline harness, the models, or both."""
    runs = list(provenance["runs"].values())
    if runs and all(run["offline"] for run in runs):
        return (
            "a gold answer (rating 5), checked by the offline harness rather than verified by "
            "a model,"
        )
    if any(run["offline"] for run in runs):
        return (
            "a gold answer (rating 5), checked by the models listed under Provenance in the live "
            "runs and by the offline harness in the offline ones,"
        )
    return "a gold answer (rating 5) that passed the checks of the models listed under Provenance,"


def _provenance_lines(provenance: Mapping[str, Any]) -> list[str]:
    """The card's Provenance section: per run, who made, checked and judged its pairs."""
    runs = provenance["runs"]
    offline_runs = sum(1 for run in runs.values() if run["offline"])
    lines = [
        "## Provenance",
        "",
        "Read from the log — each run's `RunStarted` event and every recorded model call — not "
        "from the settings at export time. `offline:<model>` means the offline provider answered "
        "in that model's place (priced as it); a plain id means that model was called.",
        "",
    ]
    if len(runs) > 1:
        lines += [
            f"The pairs come from {len(runs)} runs: {offline_runs} curated offline, "
            f"{len(runs) - offline_runs} live.",
            "",
        ]

    def named(labels: Sequence[str]) -> str:
        return ", ".join(f"`{label}`" for label in labels) or "none recorded"

    for run_id, run in runs.items():
        how = "curated by the offline provider" if run["offline"] else "curated live"
        lines += [
            f"- run `{run_id}`: {how}; {run['pairs']} pairs, {run['offline_pairs']} of them "
            "made or judged in part by the offline provider",
            f"  - question and gold answer: {named(run['generator'])}",
            f"  - distractors: {named(run['distractor_generator'])}",
            f"  - checks of the item: {named(run['checked_by'])}",
            f"  - difficulty judges: {named(run['judges'])}",
        ]
    return [*lines, ""]


def _gate_lines(gate: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The card's table of pairs per rating gap through the difficulty gate."""

    def share(step: str, gap: str) -> str:
        total = sum(gate[step].values())
        n = gate[step][gap]
        return f"{n} ({100 * n / total:.0f} %)" if total else str(n)

    rows = [
        f"| {gap} | {share('candidates', gap)} | {share('kept', gap)} | {share('exported', gap)} |"
        for gap in gate["exported"]
    ]
    return [
        "## Rating gaps through the difficulty gate",
        "",
        "Candidate pairs of the runs' accepted items, the pairs the gate kept (a weak judge "
        "failed them), and the pairs exported here (sampled per domain; the selection settings "
        "say how).",
        "",
        "| gap | candidates | kept | exported |",
        "| ---: | ---: | ---: | ---: |",
        *rows,
        "",
    ]


#: The Hub's size buckets (``size_categories``), smallest first: (upper bound, label).
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
)
#: Hub task categories (huggingface.js ``packages/tasks/src/pipelines.ts``, both shown on
#: dataset pages): questions about videos, answered in text, and judged.
TASK_CATEGORIES = ("video-text-to-text", "visual-question-answering")
LICENSE_TEXT = (
    "The questions, answers, ratings and annotations are the benchmark's. The videos, their "
    "transcripts and captions are not: each video keeps its own license and terms of use, set by "
    "its owner. Check them before you redistribute or train on the videos; the export points to "
    "them (a path relative to this folder, or a URL), quotes their transcripts for evaluation "
    "and, when made with `--with-clips`, bundles the short clips and frames its pairs cite."
)


def size_category(count: int) -> str:
    """The Hub's ``size_categories`` label for ``count`` rows."""
    return next((label for bound, label in SIZE_CATEGORIES if count < bound), "n>10M")


def front_matter(benchmark: Mapping[str, Any]) -> str:
    """The card's YAML metadata block, as the Hub and ``datasets`` read it: license (``other``,
    named, with LICENSE.md), task categories, tags (``offline-harness`` when the offline
    provider made any pair), size, and ``configs``: ``default`` over pairs.parquet, one ``test``
    split (a benchmark is for evaluation). pairs.jsonl holds the same records but gets no config
    of its own: ``datasets`` picks one reader for a whole folder from the first config's files
    (4.x, ``LocalDatasetModuleFactory``), so a JSON config beside a Parquet one is read as
    Parquet and fails. Values are written as JSON strings, which YAML reads as they are."""
    provenance = benchmark["provenance"]
    tags = ["preference-pairs", "reward-modeling", "llm-as-a-judge", "long-video", "playlisteval"]
    if provenance["offline_pairs"]:
        tags.append("offline-harness")

    def item(value: str, indent: str = "") -> str:
        return f"{indent}- {json.dumps(value)}"

    def config(name: str, path: str) -> list[str]:
        return [
            f"- config_name: {name}",
            "  data_files:",
            "  - split: test",
            f"    path: {json.dumps(path)}",
        ]

    lines = [
        "---",
        'pretty_name: "PlaylistEval benchmark"',
        "license: other",
        'license_name: "playlisteval-benchmark"',
        'license_link: "LICENSE.md"',
        "task_categories:",
        *(item(t) for t in TASK_CATEGORIES),
        "tags:",
        *(item(t) for t in tags),
        "size_categories:",
        item(size_category(int(benchmark["counts"]["pairs"]))),
        "configs:",
        *config("default", "pairs.parquet"),
        "---",
        "",
    ]
    return "\n".join(lines)


def _anchor_lines(anchors: Sequence[Mapping[str, Any]]) -> list[str]:
    """The card's word on the log the benchmark rests on: each run's anchor digest, which
    ``playlisteval store verify --anchor <this folder>`` checks any copy of the log against."""
    return [
        f"- log anchor of {a['label']}: `{a['digest']}` ({a['events']} events through seq "
        f"{a['through_seq']}; `playlisteval store verify --anchor <this folder>` checks a copy "
        "of the log against it)"
        for a in anchors
    ]


def _domain_gap_lines(counts: Mapping[str, Any]) -> list[str]:
    """The card's table of pairs per domain and gap, with the totals."""
    gaps = [int(g) for g in counts["per_gap"]]
    header = "| domain | " + " | ".join(f"gap {g}" for g in gaps) + " | total |"
    rule = "| --- | " + " | ".join("---:" for _ in gaps) + " | ---: |"
    rows = [
        f"| {d} | "
        + " | ".join(str(counts["per_domain_gap"][d].get(str(g), 0)) for g in gaps)
        + f" | {n} |"
        for d, n in counts["per_domain"].items()
    ]
    total = (
        "| **total** | "
        + " | ".join(str(counts["per_gap"][str(g)]) for g in gaps)
        + f" | {counts['pairs']} |"
    )
    return [header, rule, *rows, total]


#: The dataset card's "Fields" table: (field, type, meaning) of each record.
_CARD_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("id", "string", "stable pair id: `pair-` + sha1(seed id, chosen rating, rejected rating)"),
    ("prompt", "string", "the question; it needs both segments' videos to answer"),
    ("chosen", "string", "the preferred answer (higher rating)"),
    ("rejected", "string", "the other answer (lower rating)"),
    ("subset", "string", "the domain (RewardBench-style subset)"),
    ("playlist_id", "string", "the playlist the first segment's video belongs to"),
    ("domain", "string", "the playlist's domain"),
    (
        "chosen_rating",
        "int64",
        "5 = the gold answer (checked as `provenance` says), 4..1 = graded distractors",
    ),
    ("rejected_rating", "int64", "lower than chosen_rating"),
    ("gap", "int64", "chosen_rating − rejected_rating (1..4)"),
    ("videos", "list of {id, path, url, duration_s}", "the videos (url empty when local)"),
    ("evidence", "list of {video_id, start_s, end_s}", "the two segments the question spans"),
    ("transcripts", "list of {video_id, start_s, end_s, text}", "each segment's transcript"),
    (
        "clips",
        "list of {video_id, start_s, end_s, path, frames}",
        "each segment's bundled clip and the folder of the frames a judge is shown of it, "
        "relative to this folder (empty without `--with-clips`); with them, pairs.parquet "
        "adds `video`, the clip as a `datasets` `Video`",
    ),
    (
        "models",
        "{difficulty_judges: list of {judge, verdict_chosen_first, verdict_rejected_first, "
        "failed}}",
        "the weak judges of the difficulty gate, in both answer orders, named as what "
        "answered (`offline:<model>` for the offline provider); `failed`: the gate counted "
        "the pair as failed by that judge",
    ),
    (
        "meta",
        "{seed_id, run_id, cost_micros, chosen_causal_record, rejected_causal_record}",
        "the curation cost of the item (micro-USD) and each answer's causal record (JSON "
        "text: the degradations that make it worse than the gold)",
    ),
    (
        "provenance",
        "{offline, run_offline, generator, distractor_generator, checked_by, judges}",
        "what made the pair, from the log: `offline` when the offline provider answered any "
        "of its calls (or its run was curated offline: `run_offline`), and the models that "
        "answered each part (`offline:<model>` for the offline provider)",
    ),
)


def _clips_lines(bundle: Mapping[str, Any] | None) -> list[str]:
    """The card's section on the bundled clips (none without ``--with-clips``)."""
    if not bundle:
        return []
    return [
        "## Clips",
        "",
        f"`clips/` holds {len(bundle['clips'])} clips, one per evidence span: `NAME.mp4` is "
        "the span as the curation's generators were sent it, and `NAME/` the frames the "
        "difficulty judges were shown of it (JPEG, named by their time in the video in "
        "milliseconds). Each record's `clips` and `manifest.json` point to them by paths "
        "relative to this folder, so a copy of the folder works anywhere.",
        "",
        "In pairs.parquet (the card's config, and so the Hub) each `clips` entry also has "
        "`video`: the clip itself, its bytes embedded, as the `datasets` `Video` feature "
        "(datasets 4 or later; decoding it needs `torchcodec`). pairs.jsonl keeps the paths "
        "only.",
        "",
    ]


def _contents_lines(benchmark: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    """The card's "Contents": pairs, videos and hours, the cost, the version and hash."""
    counts = benchmark["counts"]
    cost_micros = benchmark["cost_micros"]
    items_cost_micros = benchmark["items_cost_micros"]
    selection_cost_micros = benchmark["selection_cost_micros"]
    hours = sum(float(v["duration_s"]) for v in manifest["videos"]) / 3600.0
    return [
        "## Contents",
        "",
        f"- pairs: {counts['pairs']} from {counts['items']} items",
        f"- videos: {len(manifest['videos'])}, {hours:.2f} hours",
        f"- curation cost of the runs: {micros_to_usd(cost_micros):.6f} USD "
        f"({cost_micros} micro-USD; the items exported here: {items_cost_micros} micro-USD)",
        f"- difficulty gate (the judges' calls): {micros_to_usd(selection_cost_micros):.6f} USD "
        f"({selection_cost_micros} micro-USD)",
        f"- version: {BENCHMARK_VERSION}, content sha256 (of pairs.jsonl): "
        f"`{benchmark['content_sha256']}`",
        *_anchor_lines(benchmark.get("anchors") or []),
        "",
    ]


_LOADING_LINES = (
    "## Loading",
    "",
    "```python",
    "from datasets import load_dataset",
    "",
    "# this folder, or its Hub repo (OWNER/NAME): pairs.parquet, as the card's configs say",
    'pairs = load_dataset("path/to/this/folder", split="test")',
    "# each file on its own, run in this folder: the same one split, `test`",
    'pairs = load_dataset("json", data_files={"test": "pairs.jsonl"}, split="test")',
    'pairs = load_dataset("parquet", data_files={"test": "pairs.parquet"}, split="test")',
    "```",
    "",
    "A benchmark is for evaluation: every way above gives the one split `test` (a bare "
    '`data_files="pairs.jsonl"` would name it `train`).',
    "",
    "Paths in the records (`videos[].path`, `clips`) are relative to this folder, as strings. "
    "A video's path leads to the copy in the workspace that made the export; the videos do "
    "not travel with it (see License). Made with `--with-clips`, pairs.parquet also holds each "
    "bundled clip itself (see Clips).",
    "",
    "`manifest.json` lists every video once and every pair's clips; `benchmark.json` holds "
    "the version, the content hash, the counts, the gaps through the gate, the provenance, "
    "the settings and the cost.",
    "",
)


def _card(benchmark: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    """The dataset card (README.md of the export), from what ``benchmark.json`` holds.

    It opens with the Hub metadata (:func:`front_matter`); its first line of text is the offline
    banner when the offline provider made the whole benchmark (a partly-offline note when it
    made some pairs), so a reader cannot take it for evidence of the named models' quality."""
    provenance = benchmark["provenance"]
    lines = [
        front_matter(benchmark),
        *_banner(provenance),
        "# PlaylistEval benchmark",
        "",
        "Preference pairs over questions that need two segments of different videos of one "
        f"playlist to answer. Each accepted item has {_gold_wording(provenance)} and four "
        "graded distractors (ratings 4..1); a pair is two of the five answers, the higher rating "
        "preferred, kept when a weak judge fails it.",
        "",
        *_contents_lines(benchmark, manifest),
        "## Pairs per domain and gap",
        "",
        *_domain_gap_lines(benchmark["counts"]),
        "",
        *_backfill_lines(benchmark.get("backfill") or {}),
        *_gate_lines(benchmark["gate"]),
        *_provenance_lines(provenance),
        *_LOADING_LINES,
        *_clips_lines(manifest.get("bundle")),
        "## Fields",
        "",
        "| field | type | meaning |",
        "| --- | --- | --- |",
        *(f"| `{name}` | {kind} | {what} |" for name, kind, what in _CARD_FIELDS),
        "",
        "## Generation settings",
        "",
        "Each run's settings as its `RunStarted` recorded them (`runs`), and the selection's "
        "as given at export time (`selection`).",
        "",
        "```json",
        json.dumps(benchmark["settings"], sort_keys=True, ensure_ascii=False, indent=2),
        "```",
        "",
        "## License",
        "",
        LICENSE_TEXT + " The same words are in `LICENSE.md`, which the metadata names (its "
        "own license).",
        "",
    ]
    return "\n".join(lines)


def _sweep_leftovers(out_dir: Path) -> list[Path]:
    """What a killed export left beside ``out_dir``: its staging folders (``.NAME.new-*``) go;
    an earlier export moved aside (``.NAME.old-*``) is put back when ``out_dir`` is missing (the
    kill came between the two renames), any other is removed. Returns what was removed."""
    parent = out_dir.parent
    if not parent.is_dir():
        return []
    removed: list[Path] = []
    olds = sorted(parent.glob(f".{out_dir.name}.old-*"), key=lambda p: p.stat().st_mtime)
    if olds and not out_dir.exists() and not out_dir.is_symlink():
        os.rename(olds.pop(), out_dir)
    for left in [*parent.glob(f".{out_dir.name}.new-*"), *olds]:
        if left.is_dir() and not left.is_symlink():
            shutil.rmtree(left, ignore_errors=True)
            removed.append(left)
    return removed


def _replace_dir(staged: Path, out_dir: Path) -> None:
    """Move the staged export into place; an earlier export there is replaced, anything else
    is refused. The old export is moved aside first and put back if the move fails."""
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise ConfigError(f"export target {str(out_dir)!r} exists and is not a folder")
    backup: Path | None = None
    if out_dir.exists():
        backup = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        backup.rmdir()
        os.rename(out_dir, backup)
    try:
        os.rename(staged, out_dir)
    except OSError:
        if backup is not None:
            os.rename(backup, out_dir)
        raise
    if backup is not None:
        shutil.rmtree(backup)


def check_export_target(out_dir: Path) -> None:
    """Refuse a target an export must not be written to, before anything is judged or paid:
    a name that reads as a data file (an export is a folder; ``export bench.parquet`` would
    make a folder called that), anything but a folder where it points, or a folder of
    something other than an earlier export (a mistyped path must not wipe someone's work).
    Only an empty folder or an earlier export may be replaced."""
    out_dir = Path(out_dir).absolute()
    suffix = next((s for s in FILE_SUFFIXES if out_dir.name.lower().endswith(s)), None)
    if suffix is not None and not (out_dir / "benchmark.json").is_file():
        stem = out_dir.name[: -len(suffix)] or "benchmark"
        raise ConfigError(
            f"export target {str(out_dir)!r} names a {suffix} file, but an export is a folder "
            f"(pairs.jsonl, pairs.parquet, README.md, …): give a folder, e.g. "
            f"{str(out_dir.with_name(stem))!r}"
        )
    if not out_dir.exists():
        return
    if out_dir.is_symlink() or not out_dir.is_dir():
        raise ConfigError(f"export target {str(out_dir)!r} exists and is not a folder")
    if any(out_dir.iterdir()) and not (out_dir / "benchmark.json").is_file():
        raise ConfigError(
            f"export target {str(out_dir)!r} is a folder that holds something other than an "
            "earlier export (no benchmark.json): choose an empty or new folder"
        )


def _run_settings(app: App, run_ids: Iterable[str]) -> dict[str, Any]:
    """Each run's generation settings as it recorded them when it started."""
    return {run_id: run_started(app.events, run_id).settings for run_id in sorted(run_ids)}


def export_benchmark(
    app: App,
    out_dir: Path,
    pairs: Sequence[SelectedPair],
    *,
    settings: dict[str, Any] | None = None,
    with_clips: bool = False,
    progress: ExportProgress | None = None,
) -> ExportSummary:
    """Write the benchmark of ``pairs`` to ``out_dir`` (replaced atomically when it holds an
    earlier export) and say what was written. ``with_clips`` bundles each evidence span's clip
    and the frames a judge is shown of it under ``clips/``; ``progress`` hears each step.

    ``settings`` are the selection's own settings (judges, pairs per domain, sampling seed); they
    go into ``benchmark.json`` and the dataset card beside each run's recorded generation
    settings. They say nothing of who made the pairs: the provenance (and whether the card opens
    with the offline banner) is read from the log alone, and a caller's ``offline`` and
    ``difficulty_judges`` (:data:`LOG_FACTS`) are left out of them, since what the settings say
    at export time need not be what made the pairs. ConfigError when a pair's seed has no
    accepted item, a rating is missing, or the target is a file name or a folder of something
    else (:func:`check_export_target`). No record holds an absolute path.
    """
    from playlisteval import integrity

    out_dir = Path(out_dir).absolute()
    check_export_target(out_dir)
    run_ids = sorted({pair.run_id for pair in pairs})
    untrusted = integrity.log_warning(app, run_ids, quick=False)
    if untrusted:
        raise ConfigError(f"nothing exported: {untrusted}")
    records = build_records(app, pairs, out_dir, with_clips=with_clips, progress=progress)
    run_ids = sorted({r["meta"]["run_id"] for r in records})
    selection = {k: v for k, v in (settings or {}).items() if k not in LOG_FACTS}
    all_settings = {"runs": _run_settings(app, run_ids), "selection": selection}
    try:
        settings_text = json.dumps(all_settings, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"export settings must be plain JSON values: {exc}") from exc
    all_settings = json.loads(settings_text)

    jsonl = jsonl_bytes(records)
    content_sha256 = benchmark_folder.content_sha256(jsonl)
    counts = _counts(records)
    cost_micros = _run_costs(app, run_ids)
    selection_cost = _selection_costs(app, run_ids)
    item_costs = {
        (r["meta"]["run_id"], r["meta"]["seed_id"]): r["meta"]["cost_micros"] for r in records
    }
    items_cost = sum(item_costs.values())
    hours = sum(float(v["duration_s"]) for v in _manifest(records)["videos"]) / 3600.0
    benchmark = {
        "version": BENCHMARK_VERSION,
        "content_sha256": content_sha256,
        "counts": counts,
        "gate": _gate_gaps(app, run_ids, records),
        "provenance": _provenance_summary(records),
        "settings": all_settings,
        "cost_micros": cost_micros,
        "items_cost_micros": items_cost,
        "selection_cost_micros": selection_cost,
        "hours": round(hours, 6),
        "backfill": dataset_backfill(app.catalog, counts["per_domain"]),
        # The log the benchmark rests on, as it stood when exported (see playlisteval.integrity).
        "anchors": [integrity.run_anchor(app, run_id).to_json() for run_id in run_ids],
    }

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(out_dir)
    staged = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    try:
        bundle = _bundle_clips(app, records, staged / CLIPS_DIR, progress) if with_clips else None
        manifest = _manifest(records, bundle)
        (staged / "pairs.jsonl").write_bytes(jsonl)
        rows = parquet_rows(records, staged) if with_clips else records
        table = pa.Table.from_pylist(rows, schema=parquet_schema(with_clips))
        pq.write_table(table, staged / "pairs.parquet")
        (staged / "manifest.json").write_text(_pretty(manifest), encoding="utf-8")
        (staged / "README.md").write_text(_card(benchmark, manifest), encoding="utf-8")
        (staged / "LICENSE.md").write_text(
            f"# License of this PlaylistEval benchmark\n\n{LICENSE_TEXT}\n", encoding="utf-8"
        )
        (staged / "benchmark.json").write_text(_pretty(benchmark), encoding="utf-8")
        os.chmod(staged, 0o755)  # mkdtemp makes it private; an export is meant to be shared
        _replace_dir(staged, out_dir)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return ExportSummary(
        path=out_dir,
        pairs=len(records),
        per_domain=dict(counts["per_domain"]),
        per_gap={int(g): n for g, n in counts["per_gap"].items()},
        content_sha256=content_sha256,
        cost_micros=cost_micros,
        hours=hours,
        clips=len(bundle["clips"]) if bundle else 0,
    )


def _pretty(value: Any) -> str:
    """Indented canonical JSON with a final newline."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2) + "\n"
