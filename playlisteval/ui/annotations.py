"""Human annotations as events: who was invited and joined, which pairs were drawn and how they
are shared among the annotators, what each annotator chose (and took back), and when they read
the labels.

The events (:mod:`store.annotation_events`) live in the workspace's event store, in the stream
``annotations-<hash[:12]>`` of the benchmark they label, and are read back with
:func:`decode_annotation`. Everything the UI knows is a fold over that stream
(:class:`AnnotationState`), so a restarted server has lost nothing.

The undo rule: an annotator may take back only their latest standing answer, and only until they
open the results page or a labels download after giving it (:class:`AnnotatorReadLabels` records
that they did). Nothing before that shows them anything about the pair beyond the pair itself,
and what comes after (the others' answers on it, agreement) could sway a second answer, so from
then on their answers stand. No page or download an annotator may open says which answer was the
intended one: that is for whoever runs the UI (the owner link, the ``annotations export``
command).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from playlisteval.ui.benchmark import Benchmark, draw_sample
from store.annotation_events import (
    AnnotationEvent,
    AnnotationRecorded,
    AnnotationRetracted,
    AnnotatorInvited,
    AnnotatorJoined,
    AnnotatorReadLabels,
    AnnotatorWithdrawn,
    Choice,
    OverlapDesigned,
    Read,
    SampleDrawn,
    Shown,
    decode_annotation,
)
from store.errors import ConfigError, PlaylistEvalError, StoreConflict
from store.events import Event
from store.eventstore import EventStore, StoredEvent

CHOICES: tuple[Choice, ...] = ("A", "B", "cant_tell")
MAX_COMMENT_CHARS = 2000
NAME_RULE = "1–40 letters (of any alphabet), digits, spaces, dots, underscores or hyphens"
MAX_NAME_CHARS = 40
_NAME_PUNCTUATION = frozenset(" ._-")


# -- errors ------------------------------------------------------------------------------------


class AnnotationRefused(PlaylistEvalError):
    """A request the UI turns down; ``status`` is the HTTP status that says why."""

    status = 400


class UnknownPair(AnnotationRefused):
    """The pair id is not in the benchmark."""

    status = 404


class PairNotInSample(AnnotationRefused):
    """The pair exists but was not drawn for labelling."""

    status = 404


class NotAssigned(AnnotationRefused):
    """The pair is in the sample but not in the annotator's share of it: annotators see and
    answer only the pairs assigned to them (:func:`assignees`)."""

    status = 403


class AlreadyLabelled(AnnotationRefused):
    """The annotator already answered this pair; the answer stands unless they undo it."""

    status = 409


class NothingToUndo(AnnotationRefused):
    """The undo names no answer that is the annotator's latest standing one."""

    status = 409


class UndoClosed(AnnotationRefused):
    """The annotator read the results or the labels after giving their latest answer: it
    stands (see the undo rule in this module's docstring)."""

    status = 403


class CommentTooLong(AnnotationRefused):
    """The comment is over :data:`MAX_COMMENT_CHARS`."""

    status = 413


class BadChoice(AnnotationRefused):
    """The choice is not A, B or can't tell."""

    status = 422


class NotInvited(AnnotationRefused):
    """Joining without an invite: a name is not a login, an invite link is."""

    status = 403


class BadName(AnnotationRefused):
    """The annotator name does not follow :data:`NAME_RULE`."""

    status = 422


class ForgedAnnotator(AnnotationRefused):
    """The annotator's cookie or form token is missing or was not signed by this server."""

    status = 403


class LabelsWithheld(AnnotationRefused):
    """Labels, results and exports are for invited annotators who joined and for whoever runs
    the UI (its owner link); this request is neither."""

    status = 403


# -- the pure core ---------------------------------------------------------------------------


def _name_char_allowed(char: str, previous: str) -> bool:
    """Whether ``char`` may follow ``previous`` in a name: a letter of any alphabet, a decimal
    digit, a combining mark on a letter (the vowel signs of Devanagari, say: what NFC leaves
    uncombined), or one of :data:`_NAME_PUNCTUATION`."""
    category = unicodedata.category(char)
    if category.startswith("L") or category == "Nd" or char in _NAME_PUNCTUATION:
        return True
    return category.startswith("M") and unicodedata.category(previous or " ")[0] in "LM"


def check_name(name: str) -> str:
    """The name, stripped and in Unicode's composed form (NFC: ``Zoë`` typed either way is one
    annotator), if it follows :data:`NAME_RULE`; :class:`BadName` otherwise. Controls, slashes,
    quotes, markup and format characters (bidi overrides, zero-width) are never part of one."""
    clean = unicodedata.normalize("NFC", name).strip()
    allowed = all(_name_char_allowed(c, clean[i - 1] if i else "") for i, c in enumerate(clean))
    if not 1 <= len(clean) <= MAX_NAME_CHARS or not allowed:
        raise BadName(f"name {name!r} is not allowed: use {NAME_RULE}")
    return clean


def _digest(annotator: str, pair_id: str) -> bytes:
    return hashlib.sha256(f"{annotator}\x1f{pair_id}".encode()).digest()


def other_letter(letter: Shown) -> Shown:
    """The letter the other answer of a pair is shown under."""
    return "B" if letter == "A" else "A"


def in_letters_of(label: AnnotationRecorded, chosen_as: Shown) -> Choice:
    """``label``'s choice as the letter it names in an order that shows the intended answer as
    ``chosen_as`` (another annotator's answer in the reader's own letters: it says whether they
    picked the same answer as the reader, never which answer was intended)."""
    if label.choice == "cant_tell":
        return "cant_tell"
    return chosen_as if label.label == "intended" else other_letter(chosen_as)


def not_invited(state: AnnotationState, name: str) -> str:
    """Why ``name`` may not join or label: never invited, or withdrawn since."""
    if name in state.withdrawn:
        return (
            f"{name!r} was withdrawn from labelling this benchmark (their pairs went to the "
            "others); whoever runs the UI can invite them again (`playlisteval annotations "
            "invite BENCH NAME`)"
        )
    return (
        f"{name!r} is not invited to label this benchmark; ask whoever runs the UI for an "
        "invite link (`playlisteval ui BENCH --invite NAME`)"
    )


def design_overlap(pair_ids: Sequence[str], k: int, share: float, seed: int) -> OverlapDesigned:
    """The overlap design of a sample: ``ceil(share * len(pair_ids))`` pairs, drawn with
    ``seed``, each to ``k`` annotators. :class:`ConfigError` for ``k < 2`` (agreement needs two)
    or a share outside (0, 1]."""
    if k < 2:
        raise ConfigError(
            f"pairs.human_overlap={k!r}: each overlap pair needs at least 2 annotators"
        )
    if not 0 < share <= 1:
        raise ConfigError(
            f"pairs.human_overlap_share={share!r} must be above 0 and at most 1 (the share of "
            "the sample that several annotators label)"
        )
    count = min(len(pair_ids), math.ceil(round(share * len(pair_ids), 9)))
    chosen = random.Random(seed).sample(sorted(pair_ids), count)
    return OverlapDesigned(k=k, share=share, seed=seed, overlap_pair_ids=tuple(sorted(chosen)))


def assignees(pair_id: str, annotators: Sequence[str], k: int) -> list[str]:
    """The ``k`` of ``annotators`` who label ``pair_id`` (all of them when there are fewer):
    those whose hash with the pair ranks first (rendezvous hashing). Each gets an even share in
    expectation, and inviting one more annotator only moves pairs to them, never between the
    others."""
    return sorted(annotators, key=lambda name: _digest(name, pair_id))[:k]


@dataclass(frozen=True)
class Stamp:
    """Where and when the log recorded an event."""

    seq: int
    at: datetime | None


@dataclass
class AnnotationState:
    """What an annotations stream says so far."""

    version: int = 0
    sample: SampleDrawn | None = None
    design: OverlapDesigned | None = None
    # Invited and not withdrawn, in the order invited: who the sample is shared among.
    invited: list[str] = field(default_factory=list)
    annotators: list[str] = field(default_factory=list)  # who ever joined
    withdrawn: list[str] = field(default_factory=list)  # withdrawn and not invited again
    # Standing answers, oldest first (an answer given again after an undo moves to the end).
    labels: dict[tuple[str, str], AnnotationRecorded] = field(default_factory=dict)
    stamps: dict[tuple[str, str], Stamp] = field(default_factory=dict)
    # The latest answer each (annotator, pair) took back, until it is answered again.
    retracted: dict[tuple[str, str], AnnotationRecorded] = field(default_factory=dict)
    # The stream version each standing answer was recorded at, and each annotator's latest read
    # of the labels (:class:`AnnotatorReadLabels`): an answer older than that read stands.
    versions: dict[tuple[str, str], int] = field(default_factory=dict)
    read_at: dict[str, int] = field(default_factory=dict)
    # How many answers each annotator took back (undo), whether answered again or not.
    undos: dict[str, int] = field(default_factory=dict)

    def apply(self, version: int, event: AnnotationEvent, stamp: Stamp | None = None) -> None:
        """Fold one event in (in stream order)."""
        self.version = version
        if isinstance(event, SampleDrawn):
            if self.sample is None:
                self.sample = event
        elif isinstance(event, OverlapDesigned):
            if self.design is None:
                self.design = event
        elif isinstance(event, AnnotatorInvited):
            if event.name not in self.invited:
                self.invited.append(event.name)
            if event.name in self.withdrawn:
                self.withdrawn.remove(event.name)
        elif isinstance(event, AnnotatorWithdrawn):
            if event.name in self.invited:
                self.invited.remove(event.name)
                self.withdrawn.append(event.name)
        elif isinstance(event, AnnotatorJoined):
            if event.name not in self.annotators:
                self.annotators.append(event.name)
        elif isinstance(event, AnnotatorReadLabels):
            self.read_at[event.annotator] = version
        elif isinstance(event, AnnotationRetracted):
            key = (event.annotator, event.pair_id)
            taken = self.labels.pop(key, None)
            self.stamps.pop(key, None)
            self.versions.pop(key, None)
            if taken is not None:
                self.retracted[key] = taken
                self.undos[event.annotator] = self.undos.get(event.annotator, 0) + 1
        else:
            key = (event.annotator, event.pair_id)
            if key not in self.labels:
                self.labels[key] = event
                self.stamps[key] = stamp or Stamp(seq=0, at=None)
                self.versions[key] = version
                self.retracted.pop(key, None)

    @property
    def pair_ids(self) -> tuple[str, ...]:
        """The sampled pairs (none before the sample is drawn)."""
        return self.sample.pair_ids if self.sample is not None else ()

    @property
    def planned_overlap(self) -> frozenset[str]:
        """The pairs the design gives to several annotators (every pair, for a stream with no
        design), however many are invited."""
        if self.design is None:
            return frozenset(self.pair_ids)
        return frozenset(self.design.overlap_pair_ids)

    @property
    def overlap(self) -> frozenset[str]:
        """The pairs several annotators label now: the planned ones (:attr:`planned_overlap`)
        once two or more annotators are invited, none while fewer are (a pair the design
        shares then goes to the one annotator there is, and no one else)."""
        return self.planned_overlap if len(self.invited) >= 2 else frozenset()

    def pair_annotators(self, pair_id: str) -> list[str]:
        """The invited annotators ``pair_id`` is assigned to."""
        if self.design is None:
            return list(self.invited)  # no design: everyone labels everything
        k = self.design.k if pair_id in self.planned_overlap else 1
        return assignees(pair_id, self.invited, k)

    def assigned(self, annotator: str) -> list[str]:
        """The sampled pairs assigned to ``annotator``, in the order they are shown: the pairs
        the design shares first, even while one annotator is invited (agreement grows from the
        start), each part in the annotator's own shuffled order (no pair is always seen first,
        or tired)."""
        mine = [p for p in self.pair_ids if annotator in self.pair_annotators(p)]
        planned = self.planned_overlap
        return sorted(mine, key=lambda p: (p not in planned, _digest(annotator, p)))

    def check_assigned(self, annotator: str, pair_id: str) -> None:
        """Nothing when ``pair_id`` is in ``annotator``'s share of the sample;
        :class:`PairNotInSample` or :class:`NotAssigned` otherwise."""
        if pair_id not in self.pair_ids:
            raise PairNotInSample(f"pair {pair_id!r} is not in the sample to label")
        if annotator not in self.pair_annotators(pair_id):
            raise NotAssigned(
                f"pair {pair_id!r} is not in {annotator!r}'s share of the sample: each annotator "
                "sees and answers only the pairs assigned to them"
            )

    def remaining(self, annotator: str) -> list[str]:
        """The pairs assigned to ``annotator`` they have not answered, in the order shown."""
        return [p for p in self.assigned(annotator) if (annotator, p) not in self.labels]

    def latest(self, annotator: str) -> AnnotationRecorded | None:
        """The annotator's most recent standing answer (what undo takes back)."""
        for (name, _pair), label in reversed(self.labels.items()):
            if name == annotator:
                return label
        return None

    def undoable(self, annotator: str) -> AnnotationRecorded | None:
        """The answer an undo of ``annotator`` would take back: their latest standing one, if
        they have not read the labels since they gave it; None otherwise (the undo rule)."""
        latest = self.latest(annotator)
        if latest is None:
            return None
        given = self.versions.get((annotator, latest.pair_id), 0)
        return latest if self.read_at.get(annotator, -1) < given else None

    def chosen_as(self, annotator: str, pair_id: str, drawn: Shown) -> Shown:
        """The letter ``annotator`` is shown the intended answer of ``pair_id`` under: the one
        they were shown it under when they answered it before and took the answer back, else
        ``drawn`` (the UI's keyed draw, :meth:`playlisteval.ui.signing.Signer.chosen_shown_as`).
        One (annotator, pair) never sees the two answers swap."""
        taken = self.retracted.get((annotator, pair_id))
        return taken.chosen_shown_as if taken is not None else drawn

    def recorded(self) -> list[AnnotationRecorded]:
        """Every standing answer, in the order recorded."""
        return list(self.labels.values())

    def answered_by(self, annotator: str) -> frozenset[str]:
        """The pairs ``annotator`` holds a standing answer on."""
        return frozenset(pair for (name, pair) in self.labels if name == annotator)


def readable_by(state: AnnotationState, annotator: str | None) -> AnnotationState:
    """The answers of ``state`` that ``annotator`` may read, as a state to fold no further:
    every one for the owner (``None``); for an annotator, on each pair they hold a standing
    answer on, theirs and the others' — so no one reads an answer on a pair before giving
    their own (labels stay blind), and an undo hides the others' again until they answer."""
    if annotator is None:
        return state
    mine = state.answered_by(annotator)
    return replace(
        state,
        labels={key: label for key, label in state.labels.items() if key[1] in mine},
        stamps={key: stamp for key, stamp in state.stamps.items() if key[1] in mine},
        retracted={key: label for key, label in state.retracted.items() if key[0] == annotator},
        versions={key: v for key, v in state.versions.items() if key[1] in mine},
        read_at={name: v for name, v in state.read_at.items() if name == annotator},
        undos={name: n for name, n in state.undos.items() if name == annotator},
    )


def fold(stored: Iterable[StoredEvent], state: AnnotationState | None = None) -> AnnotationState:
    """Fold stored annotation events into ``state`` (a fresh one when None)."""
    state = AnnotationState() if state is None else state
    for item in stored:
        state.apply(item.version, decode_annotation(item), Stamp(item.seq, item.recorded_at))
    return state


# -- the labels, exported ----------------------------------------------------------------------

EXPORT_FORMATS = ("csv", "jsonl")
#: The owner's columns: the whole record.
EXPORT_COLUMNS = (
    "benchmark_sha256",
    "pair_id",
    "annotator",
    "choice",
    "chosen_shown_as",
    "label",
    "comment",
    "domain",
    "gap",
    "overlap",
    "seq",
    "recorded_at",
)
#: What says which answer was the intended one: the owner's alone.
INTENDED_COLUMNS = ("chosen_shown_as", "label")
#: An annotator's columns: the record less :data:`INTENDED_COLUMNS`.
BLIND_COLUMNS = tuple(c for c in EXPORT_COLUMNS if c not in INTENDED_COLUMNS)


def export_columns(reader: str | None) -> tuple[str, ...]:
    """The columns ``reader`` downloads: the whole record for the owner (None), the blind one
    for an annotator."""
    return EXPORT_COLUMNS if reader is None else BLIND_COLUMNS


def label_rows(
    state: AnnotationState, benchmark: Benchmark, reader: str | None = None
) -> list[dict[str, Any]]:
    """One row per standing answer ``reader`` may read (:func:`readable_by`), in the order
    recorded: the letter picked, the comment, the pair's strata, whether it is an overlap pair,
    and where the log holds it. For the owner (``reader`` None) every answer, with under which
    letter the intended answer was shown and the label both imply (intended / other / can't
    tell). For an annotator neither (:data:`BLIND_COLUMNS`), and every choice in the letters
    the reader saw that pair in (:func:`in_letters_of`): nothing says which answer was
    intended."""
    readable = readable_by(state, reader)
    overlap = state.overlap
    rows = []
    for (annotator, pair_id), label in readable.labels.items():
        pair = benchmark.pairs.get(pair_id)
        stamp = readable.stamps.get((annotator, pair_id))
        row = {
            "benchmark_sha256": benchmark.content_sha256,
            "pair_id": pair_id,
            "annotator": annotator,
            "choice": label.choice,
            "chosen_shown_as": label.chosen_shown_as,
            "label": label.label,
            "comment": label.comment,
            "domain": pair.domain if pair else "",
            "gap": pair.gap if pair else None,
            "overlap": pair_id in overlap,
            "seq": stamp.seq if stamp else None,
            "recorded_at": stamp.at.isoformat() if stamp and stamp.at else None,
        }
        if reader is not None:
            # The reader answered this pair (readable_by): their own letters are known.
            row["choice"] = in_letters_of(label, readable.labels[reader, pair_id].chosen_shown_as)
            row = {column: row[column] for column in BLIND_COLUMNS}
        rows.append(row)
    return rows


#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection"): a CSV cell that
#: begins so is written after a single quote, which spreadsheets show as text. JSON Lines keeps
#: every value as given.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def labels_text(
    rows: Sequence[dict[str, Any]], fmt: str, columns: Sequence[str] = EXPORT_COLUMNS
) -> str:
    """``rows`` as CSV (a header of ``columns``, then one line per label; text that a
    spreadsheet would run as a formula is quoted as text) or JSON Lines."""
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if fmt != "csv":
        raise ConfigError(f"no label format {fmt!r}; use one of {list(EXPORT_FORMATS)!r}")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
    return out.getvalue()


# -- the shell ---------------------------------------------------------------------------------

# What to append given the state read under the lock (raising refuses the request).
_Decide = Callable[[AnnotationState], list[Event]]


class AnnotationLog:
    """The annotations of one benchmark, read from and written to the event store.

    Every write first catches up with the stream and appends at the version it read, so two
    servers (or threads) on one workspace can never record two answers for one (annotator, pair).
    """

    def __init__(self, store: EventStore, benchmark: Benchmark) -> None:
        self.store = store
        self.benchmark = benchmark
        self.stream = benchmark.stream
        self._state = AnnotationState()
        self._lock = threading.Lock()

    def state(self) -> AnnotationState:
        """The stream folded up to now."""
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> AnnotationState:
        fold(self.store.read_stream(self.stream, self._state.version), self._state)
        return self._state

    def _append(self, decide: _Decide) -> None:
        """Append what ``decide(state)`` returns, retrying when another writer got there first."""
        with self._lock:
            for _ in range(20):
                state = self._catch_up()
                events = decide(state)
                if not events:
                    return
                try:
                    self.store.append(self.stream, events, expected_version=state.version)
                except StoreConflict:
                    continue
                self._catch_up()
                return
        raise StoreConflict(f"stream {self.stream!r} keeps moving; try the request again")

    def ensure_design(self, k: int, share: float) -> OverlapDesigned:
        """The stream's overlap design, made (:func:`design_overlap`, seeded like the sample)
        and recorded now if it has none yet; a stream whose design has another ``k`` or share
        is a :class:`ConfigError` (labels were given under it)."""

        def decide(state: AnnotationState) -> list[Event]:
            if state.design is not None or state.sample is None:
                return []
            return [design_overlap(state.pair_ids, k, share, state.sample.seed)]

        self._append(decide)
        design = self.state().design
        if design is None:
            raise ConfigError("draw the sample before its overlap design")
        if (design.k, design.share) != (k, share):
            raise ConfigError(
                f"the annotations of this benchmark ({self.stream!r}) share the sample as "
                f"{design.share!r} of its pairs to {design.k!r} annotators each, not {share!r} "
                f"to {k!r}; start the UI with pairs.human_overlap={design.k!r} and "
                f"pairs.human_overlap_share={design.share!r}"
            )
        return design

    def ensure_sample(self, size: int, seed: int) -> SampleDrawn:
        """The stream's sample, drawn and recorded now if it has none yet. A stream already
        holding a sample drawn with another size or seed is a :class:`ConfigError`."""

        def decide(state: AnnotationState) -> list[Event]:
            if state.sample is not None:
                return []
            ids = draw_sample(list(self.benchmark.pairs.values()), size, seed)
            return [
                SampleDrawn(
                    benchmark_sha256=self.benchmark.content_sha256,
                    sample_size=size,
                    seed=seed,
                    pair_ids=ids,
                )
            ]

        self._append(decide)
        sample = self.state().sample
        assert sample is not None
        if (sample.sample_size, sample.seed) != (size, seed):
            raise ConfigError(
                f"the annotations of this benchmark ({self.stream!r}) use a sample of "
                f"{sample.sample_size!r} pairs drawn with seed {sample.seed!r}, not "
                f"{size!r} with seed {seed!r}; start the UI with those values"
            )
        return sample

    def invite(self, names: Iterable[str]) -> list[str]:
        """Invite annotators by name (each once); returns the checked names. A bad name is
        :class:`BadName` and nothing is invited then."""
        clean = list(dict.fromkeys(check_name(name) for name in names))

        def decide(state: AnnotationState) -> list[Event]:
            return [AnnotatorInvited(name=n) for n in clean if n not in state.invited]

        self._append(decide)
        return clean

    def withdraw(self, names: Iterable[str]) -> dict[str, int]:
        """Withdraw invited annotators (each once): their pairs go to the others. Returns, for
        each, how many sampled pairs were theirs. A name not invited (or already withdrawn) is
        :class:`NotInvited`, and no one is withdrawn then."""
        clean = list(dict.fromkeys(check_name(name) for name in names))
        held: dict[str, int] = {}

        def decide(state: AnnotationState) -> list[Event]:
            for name in clean:
                if name not in state.invited:
                    raise NotInvited(not_invited(state, name))
                held[name] = len(state.assigned(name))
            return [AnnotatorWithdrawn(name=n) for n in clean]

        self._append(decide)
        return held

    def join(self, name: str) -> str:
        """Record invited annotator ``name`` as joined (once); returns the name. The caller has
        checked the invite link that names them; a name not invited (never, or withdrawn
        since) is :class:`NotInvited`."""
        clean = check_name(name)

        def decide(state: AnnotationState) -> list[Event]:
            if clean not in state.invited:
                raise NotInvited(not_invited(state, clean))
            return [] if clean in state.annotators else [AnnotatorJoined(name=clean)]

        self._append(decide)
        return clean

    def record(self, annotator: str, pair_id: str, choice: str, comment: str, drawn: Shown) -> None:
        """Record one answer of ``annotator`` on a pair of their share, or raise the
        :class:`AnnotationRefused` that says why not (nothing is written then). ``drawn`` is the
        UI's keyed draw of the letter they are shown the intended answer under
        (:meth:`playlisteval.ui.signing.Signer.chosen_shown_as`); the answer records the letter
        the page showed (:meth:`AnnotationState.chosen_as`)."""
        if choice not in CHOICES:
            raise BadChoice(f"choice {choice!r} is not one of {list(CHOICES)!r}")
        if len(comment) > MAX_COMMENT_CHARS:
            raise CommentTooLong(
                f"the comment has {len(comment)} characters; at most {MAX_COMMENT_CHARS} are kept"
            )
        if pair_id not in self.benchmark.pairs:
            raise UnknownPair(f"there is no pair {pair_id!r} in this benchmark")

        def decide(state: AnnotationState) -> list[Event]:
            if pair_id not in state.pair_ids:
                raise PairNotInSample(f"pair {pair_id!r} is not in the sample to label")
            if annotator not in state.annotators:
                raise ForgedAnnotator(f"no annotator {annotator!r} has joined")
            if annotator not in state.invited:
                raise NotInvited(not_invited(state, annotator))
            # Checked here, on the state read at the version appended at: an invite or a
            # withdrawal that moved the pair meanwhile is seen.
            state.check_assigned(annotator, pair_id)
            if (annotator, pair_id) in state.labels:
                raise AlreadyLabelled(
                    f"{annotator!r} already labelled pair {pair_id!r}; the answer stands (undo "
                    "it with u or Back on the next pair to answer again)"
                )
            try:
                event = AnnotationRecorded(
                    annotator=annotator,
                    pair_id=pair_id,
                    choice=choice,  # checked against CHOICES above
                    chosen_shown_as=state.chosen_as(annotator, pair_id, drawn),
                    comment=comment,
                )
            except ValidationError as exc:
                raise BadChoice(str(exc)) from exc
            return [event]

        self._append(decide)

    def retract(self, annotator: str, pair_id: str) -> None:
        """Take back ``annotator``'s answer on ``pair_id`` (undo), which must be their latest
        standing one: a second undo sent from the same page finds nothing to take back
        (:class:`NothingToUndo`) instead of an older answer. An answer they read the labels
        after is :class:`UndoClosed` (the undo rule: it stands). A pair no longer in their share
        (a later invite moved it) is :class:`NotAssigned`: they could not answer it again."""

        def decide(state: AnnotationState) -> list[Event]:
            latest = state.latest(annotator)
            if latest is None or latest.pair_id != pair_id:
                raise NothingToUndo(
                    f"pair {pair_id!r} is not {annotator!r}'s latest answer (already undone, or "
                    "answered since); reload the page"
                )
            if state.undoable(annotator) is None:
                raise UndoClosed(
                    f"{annotator!r}'s answer on pair {pair_id!r} stands: undo is allowed only "
                    "until you open the results or download the labels, and you opened them "
                    "after giving it"
                )
            state.check_assigned(annotator, pair_id)
            return [AnnotationRetracted(annotator=annotator, pair_id=pair_id)]

        self._append(decide)

    def read_labels(self, annotator: str, read: Read) -> None:
        """Note that ``annotator`` is about to read the labels (``read``: the results page or
        a download), before they are served: it ends their undo (:class:`AnnotatorReadLabels`,
        appended only while an answer of theirs could still be taken back)."""

        def decide(state: AnnotationState) -> list[Event]:
            if state.undoable(annotator) is None:
                return []
            return [AnnotatorReadLabels(annotator=annotator, read=read)]

        self._append(decide)
