"""Human annotations' events: who was invited and joined, which pairs were drawn and how they
are shared among the annotators, what each annotator chose (and took back), and when an
annotator read the labels (which ends their undo).

They live in the workspace's event store, in the stream ``annotations-<hash[:12]>`` of the
benchmark they label (the UI's fold over them is :mod:`playlisteval.ui.annotations`). They are
not in the curation log's union (:data:`store.events.AnyEvent`: no curation fold ever meets
them), but they are the store's own vocabulary all the same, so :meth:`EventStore.verify` decodes
them with :func:`decode_annotation` like every other event it checks.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, TypeAdapter

from store.events import Event


class _Stored(Protocol):
    """What :func:`decode_annotation` reads of a stored event (``store.eventstore.StoredEvent``,
    not imported: the event store imports this module)."""

    @property
    def type(self) -> str: ...
    @property
    def schema(self) -> int: ...
    @property
    def data(self) -> dict[str, Any]: ...


Choice = Literal["A", "B", "cant_tell"]
Shown = Literal["A", "B"]
Label = Literal["intended", "other", "cant_tell"]
# What an annotator read the labels through: the results page or a download (CSV, JSON Lines, or
# Label Studio tasks / Argilla records). Adding a value reads every stored event as before.
Read = Literal["results", "csv", "jsonl", "label-studio", "argilla"]


class AnnotatorInvited(Event):
    """Whoever runs the UI invited an annotator by name (``ui --invite NAME``): only an
    invited annotator can join, through the invite link made for that name."""

    type: Literal["AnnotatorInvited"] = "AnnotatorInvited"
    name: str


class AnnotatorJoined(Event):
    """An invited annotator opened their invite link and joined, the first time."""

    type: Literal["AnnotatorJoined"] = "AnnotatorJoined"
    name: str


class AnnotatorWithdrawn(Event):
    """Whoever runs the UI withdrew an invited annotator (``annotations withdraw``), one who
    never joined or stopped labelling: the pairs assigned to them go to the others
    (:func:`assignees` moves only theirs), their invite link no longer lets them in, and the
    answers they gave stay. Inviting them again undoes it."""

    type: Literal["AnnotatorWithdrawn"] = "AnnotatorWithdrawn"
    name: str


class SampleDrawn(Event):
    """The pairs to be labelled. How they are shared among annotators is the
    :class:`OverlapDesigned` recorded after it (``assignment`` is the field's old default: a
    stream written before designs gave every annotator every pair)."""

    type: Literal["SampleDrawn"] = "SampleDrawn"
    benchmark_sha256: str
    sample_size: int
    seed: int
    pair_ids: tuple[str, ...]
    assignment: Literal["full_overlap"] = "full_overlap"


class OverlapDesigned(Event):
    """How the sample is shared among the invited annotators: each pair of ``overlap_pair_ids``
    (``share`` of the sample, drawn with ``seed``) goes to ``k`` of them, so agreement between
    annotators is measured on those; every other pair to one. Who gets a pair is
    :func:`assignees` of it."""

    type: Literal["OverlapDesigned"] = "OverlapDesigned"
    k: int
    share: float
    seed: int
    overlap_pair_ids: tuple[str, ...]


class AnnotationRecorded(Event):
    """One annotator's answer on one pair: the letter picked, and under which letter the
    intended (chosen) answer was shown to them (an order keyed with the UI's secret, so no one
    can work it out from the names). It stands until the annotator takes it back
    (:class:`AnnotationRetracted`, the UI's undo), which they may do only until they read the
    labels (:class:`AnnotatorReadLabels`)."""

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


class AnnotationRetracted(Event):
    """The annotator took back their latest answer on ``pair_id`` (undo) to answer it again;
    the answer stays in the log, it no longer counts."""

    type: Literal["AnnotationRetracted"] = "AnnotationRetracted"
    annotator: str
    pair_id: str


class AnnotatorReadLabels(Event):
    """An annotator opened the results page or a labels download (``read``) while their latest
    answer could still be taken back. What they read there — the others' answers on the pairs
    they answered, agreement between annotators — could sway a second answer, so from here on
    that answer and every earlier one of theirs stand: undo is refused. Recorded only when it
    closes an undo (a read with nothing left to undo writes nothing)."""

    type: Literal["AnnotatorReadLabels"] = "AnnotatorReadLabels"
    annotator: str
    read: Read


AnnotationEvent = Annotated[
    AnnotatorInvited
    | AnnotatorJoined
    | AnnotatorWithdrawn
    | SampleDrawn
    | OverlapDesigned
    | AnnotationRecorded
    | AnnotationRetracted
    | AnnotatorReadLabels,
    Field(discriminator="type"),
]
ANNOTATION_ADAPTER: TypeAdapter[AnnotationEvent] = TypeAdapter(AnnotationEvent)


def decode_annotation(stored: _Stored) -> AnnotationEvent:
    """A stored event of an annotations stream → its typed event."""
    return ANNOTATION_ADAPTER.validate_python(
        {**stored.data, "type": stored.type, "schema_version": stored.schema}
    )


ANNOTATION_TYPES = frozenset(
    str(cls.model_fields["type"].default)
    for cls in (
        AnnotatorInvited,
        AnnotatorJoined,
        AnnotatorWithdrawn,
        SampleDrawn,
        OverlapDesigned,
        AnnotationRecorded,
        AnnotationRetracted,
        AnnotatorReadLabels,
    )
)
