"""Human annotations as events: who joined, which pairs were drawn, what each annotator chose.

The events live in the workspace's event store, in the stream ``annotations-<hash[:12]>`` of
the benchmark they label. They subclass :class:`store.events.Event`, so
:meth:`EventStore.append` stores them like any other event; they are not in the curation log's
union (:data:`store.events.AnyEvent`), so they are read back with :func:`decode_annotation`
rather than :meth:`StoredEvent.event`. Everything the UI knows is a fold over that stream
(:class:`AnnotationState`), so a restarted server has lost nothing.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError

from playlisteval.ui.benchmark import Benchmark, draw_sample
from store.errors import ConfigError, PlaylistEvalError, StoreConflict
from store.events import Event
from store.eventstore import EventStore, StoredEvent

Choice = Literal["A", "B", "cant_tell"]
Shown = Literal["A", "B"]
Label = Literal["intended", "other", "cant_tell"]

CHOICES: tuple[Choice, ...] = ("A", "B", "cant_tell")
MAX_COMMENT_CHARS = 2000
NAME_RULE = "1–40 letters, digits, spaces, dots, underscores or hyphens"
_NAME = re.compile(r"[A-Za-z0-9 ._-]{1,40}")


class AnnotatorInvited(Event):
    """Whoever runs the UI invited an annotator by name (``ui --invite NAME``): only an
    invited annotator can join, through the invite link made for that name."""

    type: Literal["AnnotatorInvited"] = "AnnotatorInvited"
    name: str


class AnnotatorJoined(Event):
    """An invited annotator opened their invite link and joined, the first time."""

    type: Literal["AnnotatorJoined"] = "AnnotatorJoined"
    name: str


class SampleDrawn(Event):
    """The pairs to be labelled. Every annotator labels all of them (full overlap), so agreement
    between annotators is measured on every pair."""

    type: Literal["SampleDrawn"] = "SampleDrawn"
    benchmark_sha256: str
    sample_size: int
    seed: int
    pair_ids: tuple[str, ...]
    assignment: Literal["full_overlap"] = "full_overlap"


class AnnotationRecorded(Event):
    """One annotator's answer on one pair: the letter picked, and under which letter the
    intended (chosen) answer was shown to them."""

    type: Literal["AnnotationRecorded"] = "AnnotationRecorded"
    annotator: str
    pair_id: str
    choice: Choice
    chosen_shown_as: Shown
    comment: str = ""

    @property
    def label(self) -> Label:
        """The choice in terms both annotators share, whatever order they saw."""
        if self.choice == "cant_tell":
            return "cant_tell"
        return "intended" if self.choice == self.chosen_shown_as else "other"


AnnotationEvent = Annotated[
    AnnotatorInvited | AnnotatorJoined | SampleDrawn | AnnotationRecorded,
    Field(discriminator="type"),
]
ANNOTATION_ADAPTER: TypeAdapter[AnnotationEvent] = TypeAdapter(AnnotationEvent)


def decode_annotation(stored: StoredEvent) -> AnnotationEvent:
    """A stored event of an annotations stream → its typed event."""
    return ANNOTATION_ADAPTER.validate_python(
        {**stored.data, "type": stored.type, "schema_version": stored.schema}
    )


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


class AlreadyLabelled(AnnotationRefused):
    """The annotator already answered this pair; the first answer stands."""

    status = 409


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


# -- the pure core ---------------------------------------------------------------------------


def check_name(name: str) -> str:
    """The name, stripped, if it follows :data:`NAME_RULE`; :class:`BadName` otherwise."""
    clean = name.strip()
    if not _NAME.fullmatch(clean):
        raise BadName(f"name {name!r} is not allowed: use {NAME_RULE}")
    return clean


def _digest(annotator: str, pair_id: str) -> bytes:
    return hashlib.sha256(f"{annotator}\x1f{pair_id}".encode()).digest()


def chosen_shown_as(annotator: str, pair_id: str) -> Shown:
    """The letter under which ``annotator`` sees the intended answer of ``pair_id``: random
    across pairs and annotators, but always the same for one (annotator, pair)."""
    return "A" if _digest(annotator, pair_id)[0] % 2 == 0 else "B"


@dataclass
class AnnotationState:
    """What an annotations stream says so far."""

    version: int = 0
    sample: SampleDrawn | None = None
    invited: list[str] = field(default_factory=list)
    annotators: list[str] = field(default_factory=list)
    labels: dict[tuple[str, str], AnnotationRecorded] = field(default_factory=dict)

    def apply(self, version: int, event: AnnotationEvent) -> None:
        """Fold one event in (in stream order)."""
        self.version = version
        if isinstance(event, SampleDrawn):
            if self.sample is None:
                self.sample = event
        elif isinstance(event, AnnotatorInvited):
            if event.name not in self.invited:
                self.invited.append(event.name)
        elif isinstance(event, AnnotatorJoined):
            if event.name not in self.annotators:
                self.annotators.append(event.name)
        else:
            self.labels.setdefault((event.annotator, event.pair_id), event)

    @property
    def pair_ids(self) -> tuple[str, ...]:
        """The sampled pairs (none before the sample is drawn)."""
        return self.sample.pair_ids if self.sample is not None else ()

    def remaining(self, annotator: str) -> list[str]:
        """The sampled pairs ``annotator`` has not labelled, in that annotator's own order
        (shuffled per annotator so no pair is always seen first or tired)."""
        todo = [p for p in self.pair_ids if (annotator, p) not in self.labels]
        return sorted(todo, key=lambda p: _digest(annotator, p))

    def recorded(self) -> list[AnnotationRecorded]:
        """Every annotation, in the order recorded."""
        return list(self.labels.values())


def fold(stored: Iterable[StoredEvent], state: AnnotationState | None = None) -> AnnotationState:
    """Fold stored annotation events into ``state`` (a fresh one when None)."""
    state = AnnotationState() if state is None else state
    for item in stored:
        state.apply(item.version, decode_annotation(item))
    return state


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

    def join(self, name: str) -> str:
        """Record invited annotator ``name`` as joined (once); returns the name. The caller has
        checked the invite link that names them; a name never invited is :class:`NotInvited`."""
        clean = check_name(name)

        def decide(state: AnnotationState) -> list[Event]:
            if clean not in state.invited:
                raise NotInvited(
                    f"{clean!r} is not invited to label this benchmark; ask whoever runs the UI "
                    "for an invite link (`playlisteval ui BENCH --invite NAME`)"
                )
            return [] if clean in state.annotators else [AnnotatorJoined(name=clean)]

        self._append(decide)
        return clean

    def record(self, annotator: str, pair_id: str, choice: str, comment: str) -> None:
        """Record one answer, or raise the :class:`AnnotationRefused` that says why not
        (nothing is written then)."""
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
            if (annotator, pair_id) in state.labels:
                raise AlreadyLabelled(
                    f"{annotator!r} already labelled pair {pair_id!r}; the first answer stands"
                )
            try:
                event = AnnotationRecorded(
                    annotator=annotator,
                    pair_id=pair_id,
                    choice=choice,  # checked against CHOICES above
                    chosen_shown_as=chosen_shown_as(annotator, pair_id),
                    comment=comment,
                )
            except ValidationError as exc:
                raise BadChoice(str(exc)) from exc
            return [event]

        self._append(decide)
