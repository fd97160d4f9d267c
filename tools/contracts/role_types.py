"""What each role is given and what it must answer: the wire contract between agents and models.

Every model call carries one ``*Context`` (a :class:`RoleContext`, rendered into the prompt by
``agents.prompts``, and also embedded as JSON between ``<context>`` tags so that any model — the
offline provider included — reads exactly the same facts) plus, for video roles, one clip per
segment. Every role answers with one of the structured output types below (pydantic-ai
``output_type``). Which context and output belong to which role is declared in
:mod:`tools.contracts.roles` (one ``RoleSpec`` per role), which hands these names on too.

It lives in ``tools`` because both sides of a call need it: the agents that ask and the providers
(``tools.providers``) that answer.
"""

from __future__ import annotations

import re
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from store.modality import Modality

# -- shared pieces ------------------------------------------------------------------------------


def format_timestamp(seconds: float) -> str:
    """``MM:SS`` as citations write it, rounded to the second (minutes may pass 59)."""
    total = round(seconds)
    return f"{total // 60:02d}:{total % 60:02d}"


def cite(video_id: str, start_s: float, end_s: float) -> str:
    """A span as gold answers cite it: ``(video-id @ MM:SS–MM:SS)``."""
    return f"({video_id} @ {format_timestamp(start_s)}–{format_timestamp(end_s)})"


class Frozen(BaseModel):
    """Frozen, strict models: a context or an answer never changes after it is made."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class RoleContext(Frozen):
    """What one call of a role is given: every context names its role first (the JSON block a
    prompt ends with is read back by that name, :func:`tools.contracts.roles.parse_context`)."""

    role: str


class ChunkText(Frozen):
    """One 30-second chunk's transcript."""

    start_s: float
    end_s: float
    text: str


class SegmentEvidence(Frozen):
    """A segment of one video: its span and its chunks' transcripts."""

    segment_id: str
    video_id: str
    title: str = ""
    start_s: float
    end_s: float
    chunks: tuple[ChunkText, ...]


class Feedback(Frozen):
    """An earlier rejection, told to the generator: which gate, why, and what it rejected."""

    phase: Literal[1, 2]
    gate: str
    reason: str
    rejected_output: str


# -- Phase I -------------------------------------------------------------------------------------


class Phase1Context(RoleContext):
    """The QA generator sees both segments (as video) and every earlier rejection."""

    role: Literal["phase1_generator"] = "phase1_generator"
    segments: tuple[SegmentEvidence, SegmentEvidence]
    min_paragraphs: int = 3
    max_paragraphs: int = 5
    min_cited_chunks: int = 2
    max_cited_chunks: int = 15
    feedback: tuple[Feedback, ...] = ()


class VerificationMeta(Frozen):
    """What the generator claims about its own QA, for the verifiers and the audit."""

    visual_facts: tuple[str, ...] = Field(
        default=(), description="Facts only the frames show that the answer relies on."
    )
    knowledge_cell: str = Field(
        default="", description="Bloom knowledge-dimension cell, e.g. 'conceptual × analyze'."
    )
    why_both_segments: str = ""


class QA(Frozen):
    """Phase I output: a question, a 3–5 paragraph gold answer citing (video-id @ MM:SS–MM:SS)."""

    question: str
    gold_answer: str
    verification: VerificationMeta = VerificationMeta()


class TranscriptWindow(Frozen):
    """A labelled window of transcript text (the transcript test shuffles the relevant ones in)."""

    label: str
    text: str


class TranscriptTestContext(RoleContext):
    """The transcript test's answerer: transcripts only, relevant ones hidden among others."""

    role: Literal["transcript_answerer"] = "transcript_answerer"
    question: str
    windows: tuple[TranscriptWindow, ...]


class ParametricContext(RoleContext):
    """The parametric test's answerer: the question alone, answered from memory."""

    role: Literal["parametric_answerer"] = "parametric_answerer"
    question: str


class FreeAnswer(Frozen):
    """An answer in prose (transcript-only or from memory)."""

    answer: str


class MatchContext(RoleContext):
    """A verifier compares a candidate answer with the gold answer."""

    role: Literal["transcript_matcher", "parametric_verifier"]
    question: str
    gold_answer: str
    candidate: str


class MatchVerdict(Frozen):
    """Does the candidate recover the gold answer's substance?"""

    matches_gold: bool
    reason: str


class VideoRate(Frozen):
    """How one segment's video reaches the model called: ``fps`` frames a second over its
    ``seconds`` (``frames`` of them, for a provider that takes video as frames; None for native
    video, which the provider samples at ``fps``). ``asked_fps`` is the rate it would have had
    without the request's frame cap; ``max_frames`` is that cap when it thinned this clip.

    The model runner fills it from the same frame plan the adapter sends
    (``tools.providers.base.frame_times``), so a prompt states the rate the request carries."""

    segment_id: str
    seconds: float
    fps: float
    asked_fps: float
    frames: int | None = None
    max_frames: int | None = None


class _FixedQAContext(RoleContext):
    """What the roles that work on an accepted QA are given: the question, its gold answer and
    the seed's two segments (the sufficiency check and the distractor generator)."""

    question: str
    gold_answer: str
    segments: tuple[SegmentEvidence, SegmentEvidence]


class SufficiencyContext(_FixedQAContext):
    """A third model family checks the QA against each segment's video and transcript;
    ``video_rates`` (filled by the model runner) say at what rate each segment's video is sent."""

    role: Literal["sufficiency"] = "sufficiency"
    video_rates: tuple[VideoRate, ...] = ()


class SufficiencyVerdict(Frozen):
    """Is the question answerable from the video, and is every claim supported?"""

    answerable: bool
    unsupported_claims: tuple[str, ...] = ()
    reason: str


# -- Phase II ------------------------------------------------------------------------------------

VISUAL_KINDS = ("colour", "spatial_layout", "gesture", "props", "on_screen_graphics")
DegradationKind = Literal[
    "colour", "spatial_layout", "gesture", "props", "on_screen_graphics", "spoken", "other"
]


class Degradation(Frozen):
    """One change a wrong answer makes to the gold: which attribute, through which element."""

    attribute: str = Field(description="The question-specific attribute degraded.")
    element: str = Field(description="The element of the answer that carries the change.")
    original: str
    degraded: str
    kind: DegradationKind


class GradedAnswer(Frozen):
    """A wrong answer with its rating (4 best … 1 worst) and its causal record."""

    rating: int = Field(ge=1, le=4)
    answer: str
    causal_record: tuple[Degradation, ...]


class DistractorSet(Frozen):
    """Phase II output: four wrong answers rated 4, 3, 2, 1."""

    answers: tuple[GradedAnswer, ...]


class Phase2Context(_FixedQAContext):
    """The distractor generator sees the segments (as video), the fixed QA and its feedback."""

    role: Literal["phase2_generator"] = "phase2_generator"
    feedback: tuple[Feedback, ...] = ()


class LabelledAnswer(Frozen):
    """An answer shown to a ranker under a neutral label."""

    label: str
    text: str
    causal_record: tuple[Degradation, ...] = ()


class RankingContext(RoleContext):
    """A ranker orders answers best → worst: from text alone (with the attributes as rubric), or
    with the video (each answer with its causal record, to verify against the frames; the
    ``video_rates`` each segment is sent at are filled by the model runner)."""

    role: Literal["textual_ranker", "visual_ranker"]
    question: str
    answers: tuple[LabelledAnswer, ...]
    rubric: tuple[str, ...] = ()
    segments: tuple[SegmentEvidence, ...] = ()
    video_rates: tuple[VideoRate, ...] = ()


class Ranking(Frozen):
    """Labels from best to worst."""

    order: tuple[str, ...]
    reason: str = ""


# -- pair selection ------------------------------------------------------------------------------


JudgeEvidence: TypeAlias = Modality
"""What a pair judge receives of the spans it is shown: an evaluation condition's modality
(:data:`store.modality.Modality`, the one definition ``policies.judging`` uses too)."""


class PairJudgeContext(RoleContext):
    """A judge sees two answers to one question, shown as A and B, and says which is more
    faithful to the evidence: ``receives`` says what it is given of the ``segments`` (video
    and transcript for the difficulty gate; an evaluation condition's modality), and
    ``video_rates`` (filled by the model runner) the rate any video reaches it at."""

    role: Literal["pair_judge"] = "pair_judge"
    question: str
    answer_a: str
    answer_b: str
    segments: tuple[SegmentEvidence, ...]
    receives: JudgeEvidence = "frames+transcript"
    video_rates: tuple[VideoRate, ...] = ()


class PairVerdict(Frozen):
    """Which answer is better: "A", "B", or "tie" when the judge cannot separate them."""

    choice: Literal["A", "B", "tie"]
    reason: str


AnyContext = (
    Phase1Context
    | Phase2Context
    | TranscriptTestContext
    | ParametricContext
    | MatchContext
    | SufficiencyContext
    | RankingContext
    | PairJudgeContext
)
AnyOutput = (
    QA | DistractorSet | FreeAnswer | MatchVerdict | SufficiencyVerdict | Ranking | PairVerdict
)

CONTEXT_OPEN = "<context>"
CONTEXT_CLOSE = "</context>"


_TAG_RE = re.compile(r"<(/?context)", re.I)


def neutralise_tags(text: str) -> str:
    """Untrusted text (a transcript, a title, an answer) with every ``<context`` and
    ``</context`` written ``&lt;context`` / ``&lt;/context``: it can then never open or close
    the prompt's context block, whatever it holds."""
    return _TAG_RE.sub(r"&lt;\1", text)


def embed_context(context: Frozen) -> str:
    """The context as the JSON block a prompt ends with. Every ``<`` inside it is written as
    its JSON escape (backslash, u003c: the same JSON string), so no text inside can close the
    block early or open another."""
    data = context.model_dump_json().replace("<", "\\u003c")
    return f"{CONTEXT_OPEN}{data}{CONTEXT_CLOSE}"
