"""What a judge's verdicts are recorded as: the records every reader of an evaluation shares.

:class:`Judgment` is one verdict as the metrics read it; :class:`Condition` is what a judge was
shown (one :meth:`Condition.label` names it everywhere, :func:`parse_condition` reads the
command line's ``frames:retriever:modality:hours:n_frames`` form); :class:`JudgmentRecord` is one
line of ``judgments.jsonl``, which evaluation writes and the report reads back with a strict
parse, with its :class:`SpanRecord` spans and what it was :class:`Shown`. :class:`Span` and
:class:`RetrievalCase` are the retrieval metrics' inputs. Plain data; no I/O, stdlib only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from store.errors import ConfigError, PlaylistEvalError
from store.modality import Modality

Order: TypeAlias = Literal["chosen_first", "rejected_first"]
Picked: TypeAlias = Literal["first", "second", "tie"] | None
Verdict: TypeAlias = Literal["A", "B", "tie"] | None
FrameSampling: TypeAlias = Literal["uniform", "retrieved"]
ORDERS: tuple[Order, Order] = ("chosen_first", "rejected_first")
PICKS: tuple[Picked, ...] = ("first", "second", "tie", None)
PICKED_BY_VERDICT: dict[str, Picked] = {"A": "first", "B": "second", "tie": "tie"}
"""The position a judge's verdict (answer ``A`` shown first, ``B`` second, or ``tie``) picks."""
DEFAULT_RESOLUTION = 360
"""Clip height in pixels when a condition names none; a label leaves it out."""
CONDITION_FIELDS: tuple[str, ...] = (
    "frames",
    "retriever",
    "modality",
    "hours",
    "n_frames",
    "thinking_budget",
    "resolution",
)

PairKey: TypeAlias = tuple[str, float]
"""``(pair_id, length_hours)``: a pair as judged inside one haystack length."""


class JudgingError(PlaylistEvalError, ValueError):
    """The judgments cannot give the asked-for metric (empty, mixed runs, clashing records)."""


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgment:
    """One verdict of one judge under one condition on one pair in one answer order.

    ``picked`` is the position the verdict chose (``"first"``, ``"second"``, ``"tie"``) or
    ``None`` when the output could not be parsed. ``domain``, ``gap`` (rating steps between the
    answers), ``length_hours`` (the haystack) and ``playlist_id`` are the pair's strata and cluster.
    """

    pair_id: str
    judge: str
    condition: str
    order: Order
    picked: Picked
    domain: str
    gap: int
    length_hours: float
    playlist_id: str

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has order {self.order!r}; "
                f"expected one of {ORDERS!r}"
            )
        if self.picked not in PICKS:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} picked {self.picked!r}; expected one of "
                f"{PICKS!r} (None for an unparseable verdict)"
            )

    @property
    def correct(self) -> bool:
        """True when the verdict picks the preferred answer (a tie or unparseable one does not)."""
        preferred = "first" if self.order == "chosen_first" else "second"
        return self.picked == preferred

    @property
    def answered(self) -> bool:
        """True when the verdict picks a position (neither a tie nor unparseable)."""
        return self.picked in ("first", "second")

    @property
    def answer(self) -> Literal["chosen", "rejected", "tie"] | None:
        """The answer the verdict names, independent of the order it was shown in."""
        if self.picked == "tie":
            return "tie"
        if self.picked is None:
            return None
        return "chosen" if self.correct else "rejected"

    @property
    def key(self) -> PairKey:
        """The pair this judgment belongs to: ``(pair_id, length_hours)``."""
        return (self.pair_id, self.length_hours)


# --- spans -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A time span ``[start, end)`` in seconds inside one video (``video_id``).

    Spans in different videos never overlap; pass one ``video_id`` for all spans (the default)
    when times are offsets into the whole haystack.
    """

    start: float
    end: float
    video_id: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start) and math.isfinite(self.end)):
            raise JudgingError(f"span bounds must be finite, got {self.start!r}..{self.end!r}")
        if self.end <= self.start:
            raise JudgingError(
                f"a span must end after it starts, got {self.start!r}..{self.end!r} in "
                f"{self.video_id!r}"
            )

    @property
    def seconds(self) -> float:
        """The span's length in seconds."""
        return self.end - self.start


@dataclass(frozen=True)
class RetrievalCase:
    """One query's gold evidence (a pair's two segments) and the retriever's ranked spans."""

    pair_id: str
    playlist_id: str
    gold: tuple[Span, ...]
    retrieved: tuple[Span, ...]


# --- conditions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """What a judge is shown: how frames are sampled, from where, which modalities, how much.

    ``hours`` is the haystack asked for; ``n_frames`` the frames spread over the haystack
    (uniform) or over the retrieved spans; ``resolution`` the clips' height in pixels;
    ``thinking_budget`` is recorded with each judgment (None: the provider's default). Raises
    :class:`store.errors.ConfigError` for a combination no evaluation can run.
    """

    frames: FrameSampling
    retriever: str | None
    modality: Modality
    hours: float
    n_frames: int
    thinking_budget: int | None = None
    resolution: int = DEFAULT_RESOLUTION

    def __post_init__(self) -> None:
        if self.frames not in get_args(FrameSampling):
            raise ConfigError(f"frame sampling {self.frames!r} is not uniform or retrieved")
        if self.modality not in get_args(Modality):
            raise ConfigError(f"modality {self.modality!r} is not one of {get_args(Modality)!r}")
        if (self.frames == "retrieved") != bool(self.retriever):
            raise ConfigError(
                f"a retriever goes with retrieved frames only (frames={self.frames!r}, "
                f"retriever={self.retriever!r})"
            )
        if not self.hours > 0 or self.n_frames < 0 or self.resolution <= 0:
            raise ConfigError(
                f"hours={self.hours!r} must be > 0, n_frames={self.n_frames!r} >= 0 and "
                f"resolution={self.resolution!r} > 0"
            )

    @property
    def shows_frames(self) -> bool:
        """Whether clips are attached (frames, or the audio of clips)."""
        return self.modality in ("frames+transcript", "frames", "audio") and self.n_frames > 0

    @property
    def shows_transcript(self) -> bool:
        """Whether the shown spans' transcripts go into the prompt."""
        return self.modality in ("frames+transcript", "transcript")

    def label(self, *without: str) -> str:
        """The condition's one name, e.g. ``retrieved-bm25-frames+transcript-1h-32f``.

        Fields named in ``without`` are left out (a chart's series differ only there). The
        retriever, a thinking budget and a resolution other than :data:`DEFAULT_RESOLUTION`
        (as ``720p``) appear only when set.
        """
        unknown = [name for name in without if name not in CONDITION_FIELDS]
        if unknown:
            raise JudgingError(
                f"unknown condition fields {unknown!r}; expected {CONDITION_FIELDS!r}"
            )
        parts: list[str] = []
        if "frames" not in without:
            parts.append(self.frames)
        if "retriever" not in without and self.retriever:
            parts.append(self.retriever)
        if "modality" not in without:
            parts.append(self.modality)
        if "hours" not in without:
            parts.append(f"{self.hours:g}h")
        if "n_frames" not in without:
            parts.append(f"{self.n_frames}f")
        if "thinking_budget" not in without and self.thinking_budget is not None:
            parts.append(f"think{self.thinking_budget}")
        if "resolution" not in without and self.resolution != DEFAULT_RESOLUTION:
            parts.append(f"{self.resolution}p")
        return "-".join(parts)

    @property
    def condition_id(self) -> str:
        """The condition's label with every field: the id its judgments are recorded under."""
        return self.label()

    def without(self, *names: str) -> tuple[tuple[str, Any], ...]:
        """The condition's fields except ``names``: conditions equal on it differ only there."""
        return tuple((name, getattr(self, name)) for name in CONDITION_FIELDS if name not in names)

    def to_json(self) -> dict[str, Any]:
        """The condition as each judgment record holds it."""
        return {name: getattr(self, name) for name in CONDITION_FIELDS}

    @classmethod
    def from_json(cls, raw: object) -> Condition:
        """The condition a judgment record holds; raises :class:`JudgingError` naming the fault.

        ``retriever`` and ``thinking_budget`` may be absent (none); the other fields must be there.
        """
        if not isinstance(raw, Mapping):
            raise JudgingError(f"condition must be an object, got {raw!r}")
        thinking = raw.get("thinking_budget")
        try:
            return cls(
                frames=_text(raw, "frames", "condition"),  # type: ignore[arg-type]  # checked
                retriever=_text(raw, "retriever", "condition", optional=True) or None,
                modality=_text(raw, "modality", "condition"),  # type: ignore[arg-type]  # checked
                hours=_number(raw, "hours", "condition"),
                n_frames=_integer(raw, "n_frames", "condition"),
                thinking_budget=None
                if thinking is None
                else _integer(raw, "thinking_budget", "condition"),
                resolution=_integer(raw, "resolution", "condition"),
            )
        except ConfigError as error:
            raise JudgingError(f"bad condition {dict(raw)!r}: {error}") from error


def parse_condition(text: str) -> Condition:
    """``frames:retriever:modality:hours:n_frames[:think=N][:res=N]`` → a :class:`Condition`.

    ``hours`` may end in ``h`` (``1h``, ``0.5``); the retriever is empty for uniform frames, e.g.
    ``retrieved:bm25:frames+transcript:1h:32`` or ``uniform::none:1h:32``. Raises
    :class:`store.errors.ConfigError` naming what is wrong.
    """
    parts = text.strip().split(":")
    if len(parts) < 5:
        raise ConfigError(
            f"condition {text!r} needs frames:retriever:modality:hours:n_frames, e.g. "
            "'retrieved:bm25:frames+transcript:1h:32' or 'uniform::none:1h:32'"
        )
    frames, retriever, modality, hours, n_frames = parts[:5]
    options: dict[str, int] = {}
    for extra in parts[5:]:
        name, _, value = extra.partition("=")
        if name not in ("think", "res") or not value.isdigit():
            raise ConfigError(f"condition {text!r}: unknown option {extra!r} (think=N or res=N)")
        options[name] = int(value)
    try:
        hours_value = float(hours.removesuffix("h"))
        frames_value = int(n_frames.removesuffix("f"))
    except ValueError as exc:
        raise ConfigError(f"condition {text!r}: hours and n_frames must be numbers") from exc
    if frames not in get_args(FrameSampling) or modality not in get_args(Modality):
        raise ConfigError(
            f"condition {text!r}: frames must be one of {get_args(FrameSampling)!r} and "
            f"modality one of {get_args(Modality)!r}"
        )
    return Condition(
        frames=frames,  # type: ignore[arg-type]  # checked just above
        retriever=retriever or None,
        modality=modality,  # type: ignore[arg-type]
        hours=hours_value,
        n_frames=frames_value,
        thinking_budget=options.get("think"),
        resolution=options.get("res", DEFAULT_RESOLUTION),
    )


# --- judgment records ------------------------------------------------------------------------


def _field(raw: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in raw:
        raise JudgingError(f"the {what} has no {key!r} field; was it written by `eval`?")
    return raw[key]


def _text(raw: Mapping[str, Any], key: str, what: str, *, optional: bool = False) -> str:
    """A string field ('' for an absent or null optional one)."""
    value = raw.get(key) if optional else _field(raw, key, what)
    if optional and value is None:
        return ""
    if not isinstance(value, str):
        raise JudgingError(f"the {what}'s {key!r} must be a string, got {value!r}")
    return value


def _integer(raw: Mapping[str, Any], key: str, what: str) -> int:
    value = _field(raw, key, what)
    if isinstance(value, bool) or not isinstance(value, int):
        raise JudgingError(f"the {what}'s {key!r} must be an integer, got {value!r}")
    return value


def _number(raw: Mapping[str, Any], key: str, what: str) -> float:
    value = _field(raw, key, what)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JudgingError(f"the {what}'s {key!r} must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class SpanRecord:
    """A span as a judgment record holds it; ``score`` is the retriever's (none for gold)."""

    video_id: str
    start_s: float
    end_s: float
    score: float | None = None

    @property
    def span(self) -> Span:
        """The span for the retrieval metrics (raises :class:`JudgingError` if it is empty)."""
        return Span(self.start_s, self.end_s, self.video_id)

    def to_json(self) -> dict[str, Any]:
        """The span as the record's JSON holds it (``score`` only when there is one)."""
        out: dict[str, Any] = {
            "video_id": self.video_id,
            "start_s": self.start_s,
            "end_s": self.end_s,
        }
        if self.score is not None:
            out["score"] = self.score
        return out

    @classmethod
    def from_json(cls, raw: object) -> SpanRecord:
        """A recorded span; ``video_id`` may be absent (one haystack-wide timeline)."""
        if not isinstance(raw, Mapping):
            raise JudgingError(f"a span must be an object, got {raw!r}")
        score = raw.get("score")
        return cls(
            video_id=_text(raw, "video_id", "span", optional=True),
            start_s=_number(raw, "start_s", "span"),
            end_s=_number(raw, "end_s", "span"),
            score=None if score is None else _number(raw, "score", "span"),
        )


def _span_records(raw: object, key: str) -> tuple[SpanRecord, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise JudgingError(f"{key!r} must be a list of spans, got {raw!r}")
    try:
        spans = tuple(SpanRecord.from_json(s) for s in raw)
        for span in spans:
            span.span  # noqa: B018  # an empty or reversed span is refused here, not in a metric
    except JudgingError as error:
        raise JudgingError(f"bad span in {key!r} {raw!r}: {error}") from error
    return spans


@dataclass(frozen=True)
class Shown:
    """What one judgment's judge was given, so anyone can check it against the condition:
    ``frames`` pictures (or frames of video) at ``frame_times`` (video id, seconds into it),
    ``resolution`` their height in pixels (None when no picture was shown),
    ``transcript_chars`` characters of transcript from the windows ``transcript_spans``, and
    ``audio_s`` seconds of sound from the windows ``audio_spans`` (records written before the
    spans were recorded read with none)."""

    frames: int = 0
    frame_times: tuple[tuple[str, float], ...] = ()
    resolution: int | None = None
    transcript_chars: int = 0
    audio_s: float = 0.0
    transcript_spans: tuple[SpanRecord, ...] = ()
    audio_spans: tuple[SpanRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """As ``judgments.jsonl`` holds it."""
        return {
            "frames": self.frames,
            "frame_times": [[video, t] for video, t in self.frame_times],
            "resolution": self.resolution,
            "transcript_chars": self.transcript_chars,
            "audio_s": self.audio_s,
            "transcript_spans": [s.to_json() for s in self.transcript_spans],
            "audio_spans": [s.to_json() for s in self.audio_spans],
        }

    @classmethod
    def from_json(cls, raw: object) -> Shown:
        """A recorded ``shown``; raises :class:`JudgingError` naming the faulty field."""
        if not isinstance(raw, Mapping):
            raise JudgingError(f"shown must be an object, got {raw!r}")
        times = raw.get("frame_times") or []
        if not isinstance(times, list) or not all(
            isinstance(t, list) and len(t) == 2 and isinstance(t[1], int | float) for t in times
        ):
            raise JudgingError(f"shown.frame_times must be [video id, seconds] pairs: {times!r}")
        resolution = raw.get("resolution")
        return cls(
            frames=_integer(raw, "frames", "shown"),
            frame_times=tuple((str(video), float(t)) for video, t in times),
            resolution=None if resolution is None else _integer(raw, "resolution", "shown"),
            transcript_chars=_integer(raw, "transcript_chars", "shown"),
            audio_s=_number(raw, "audio_s", "shown"),
            transcript_spans=_span_records(raw.get("transcript_spans"), "shown.transcript_spans"),
            audio_spans=_span_records(raw.get("audio_spans"), "shown.audio_spans"),
        )


@dataclass(frozen=True)
class JudgmentRecord:
    """One line of ``judgments.jsonl``: one judge's verdict on one pair in one answer order.

    Evaluation writes it (:meth:`to_json`) and the report reads it back (:meth:`from_json`,
    :meth:`from_line`). ``verdict`` is the judge's own answer (``A`` shown first, ``B`` second,
    ``tie``, or ``None`` when unparseable) and ``picked`` the position it names;
    ``retrieved_spans`` are the retriever's, best first as recorded; ``gold_spans`` the pair's
    evidence; ``length_hours`` the haystack built; ``call_key`` the recorded call's request key.
    """

    pair_id: str
    judge: str
    condition: Condition
    order: Order
    verdict: Verdict
    picked: Picked
    raw_output: str
    domain: str
    gap: int
    playlist_id: str
    length_hours: float
    seed: int = 0
    call_key: str = ""
    retrieved_spans: tuple[SpanRecord, ...] = ()
    gold_spans: tuple[SpanRecord, ...] = ()
    shown: Shown | None = None  # what the judge was given (None in records written before)

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has order {self.order!r}; "
                f"expected one of {ORDERS!r}"
            )
        if self.verdict is not None and self.verdict not in tuple(PICKED_BY_VERDICT):
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has verdict {self.verdict!r}; expected one "
                f"of {tuple(PICKED_BY_VERDICT)!r} or None"
            )
        expected = None if self.verdict is None else PICKED_BY_VERDICT[self.verdict]
        if self.picked != expected:
            raise JudgingError(
                f"judgment of pair {self.pair_id!r} has verdict {self.verdict!r} but picked "
                f"{self.picked!r}; verdict {self.verdict!r} picks {expected!r}"
            )

    @property
    def condition_id(self) -> str:
        """The condition's label: the name the record is filed under."""
        return self.condition.label()

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(pair id, judge, condition id, order)``: one verdict per key in an evaluation."""
        return (self.pair_id, self.judge, self.condition_id, self.order)

    @property
    def judgment(self) -> Judgment:
        """The record as a :class:`Judgment` for the metrics (its condition: the condition id)."""
        return Judgment(
            pair_id=self.pair_id,
            judge=self.judge,
            condition=self.condition_id,
            order=self.order,
            picked=self.picked,
            domain=self.domain,
            gap=self.gap,
            length_hours=self.length_hours,
            playlist_id=self.playlist_id,
        )

    @property
    def gold(self) -> tuple[Span, ...]:
        """The pair's evidence spans."""
        return tuple(s.span for s in self.gold_spans)

    @property
    def ranked(self) -> tuple[Span, ...]:
        """The retrieved spans highest score first; equal scores keep their recorded order."""
        ordered = sorted(self.retrieved_spans, key=lambda s: -(s.score or 0.0))
        return tuple(s.span for s in ordered)

    def retrieval_case(self) -> RetrievalCase:
        """The record's gold evidence against its ranked retrieved spans."""
        return RetrievalCase(
            pair_id=self.pair_id,
            playlist_id=self.playlist_id,
            gold=self.gold,
            retrieved=self.ranked,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as one line of ``judgments.jsonl`` holds it."""
        return {
            "pair_id": self.pair_id,
            "judge": self.judge,
            "condition_id": self.condition_id,
            "condition": self.condition.to_json(),
            "order": self.order,
            "raw_output": self.raw_output,
            "verdict": self.verdict,
            "picked": self.picked,
            "retrieved_spans": [s.to_json() for s in self.retrieved_spans],
            "gold_spans": [s.to_json() for s in self.gold_spans],
            "seed": self.seed,
            "domain": self.domain,
            "gap": self.gap,
            "playlist_id": self.playlist_id,
            "length_hours": self.length_hours,
            "call_key": self.call_key,
            **({} if self.shown is None else {"shown": self.shown.to_json()}),
        }

    def to_line(self) -> str:
        """The record as one line of ``judgments.jsonl`` (keys sorted, no newline)."""
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, raw: object) -> JudgmentRecord:
        """Parse one record strictly; raises :class:`JudgingError` naming the faulty field.

        Records written before read the same: ``picked`` absent is an unparseable verdict,
        ``verdict`` absent is the one ``picked`` implies, and ``raw_output``, ``seed``,
        ``call_key`` and the span lists may be absent. ``condition_id`` must be the label of
        the record's condition.
        """
        if not isinstance(raw, Mapping):
            raise JudgingError(f"expected a JSON object, got {raw!r}")
        condition = Condition.from_json(_field(raw, "condition", "record"))
        condition_id = _text(raw, "condition_id", "record")
        if condition_id != condition.label():
            raise JudgingError(
                f"the record is filed under condition {condition_id!r} but its condition "
                f"{condition.to_json()!r} is labelled {condition.label()!r}; fix the record"
            )
        order, picked = _field(raw, "order", "record"), raw.get("picked")
        if order not in ORDERS or picked not in PICKS:
            raise JudgingError(
                f"order {order!r} / picked {picked!r}; expected one of {ORDERS!r} and {PICKS!r}"
            )
        verdict = raw["verdict"] if "verdict" in raw else _VERDICT_BY_PICKED[picked]
        seed = raw.get("seed")
        return cls(
            pair_id=_text(raw, "pair_id", "record"),
            judge=_text(raw, "judge", "record"),
            condition=condition,
            order=order,
            verdict=verdict,
            picked=picked,
            raw_output=_text(raw, "raw_output", "record", optional=True),
            domain=_text(raw, "domain", "record"),
            gap=_integer(raw, "gap", "record"),
            playlist_id=_text(raw, "playlist_id", "record"),
            length_hours=_number(raw, "length_hours", "record"),
            seed=0 if seed is None else _integer(raw, "seed", "record"),
            call_key=_text(raw, "call_key", "record", optional=True),
            retrieved_spans=_span_records(raw.get("retrieved_spans"), "retrieved_spans"),
            gold_spans=_span_records(raw.get("gold_spans"), "gold_spans"),
            shown=None if raw.get("shown") is None else Shown.from_json(raw["shown"]),
        )

    @classmethod
    def from_line(cls, line: str) -> JudgmentRecord:
        """Parse one ``judgments.jsonl`` line; raises :class:`JudgingError`, also for non-JSON."""
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as error:
            raise JudgingError(f"not JSON ({error}); fix or delete the line") from error
        return cls.from_json(raw)


_VERDICT_BY_PICKED: dict[Picked, Verdict] = {"first": "A", "second": "B", "tie": "tie", None: None}
