"""The roles of the wire contract and the model slots that cast them: one declaration each.

A role is one :class:`RoleSpec`: the context it is given and the output type it answers with
(:mod:`tools.role_types`, whose names this module hands on), whether the segments' clips go with
its prompt, its output-token cap and thinking level, its prompt template, and the offline
provider's answerer for it. Who plays it is one :class:`ModelSlot`: the settings key under
``[models]``, the role(s) it casts, its default model(s) and its description. The settings'
``[models]`` table, the workers' ``RoleModels`` (and every model a run may call), the composition
root, the model runner, the prompts and the offline provider all read these two tables
(:data:`ROLES`, :data:`MODEL_SLOTS`); nothing restates them.

The paper's roles and slots are declared below; a gate module of a gate package declares its own
with :func:`register_role` and :func:`register_slot` (see ``agents.gates``).

It lives in ``tools`` because both sides of a call need it: the agents that ask and the providers
(``tools.providers``) that answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeAlias, TypeVar, get_args, get_origin

from pydantic_ai.settings import ThinkingEffort

from store.errors import ConfigError
from tools.offline_answers import (
    OfflineCall,
    match_answer,
    pair_judge_answer,
    parametric_answer,
    phase1_answer,
    phase2_answer,
    sufficiency_answer,
    textual_rank_answer,
    transcript_answer,
    visual_rank_answer,
)
from tools.role_types import (
    CONTEXT_CLOSE,
    CONTEXT_OPEN,
    QA,
    VISUAL_KINDS,
    AnyContext,
    AnyOutput,
    ChunkText,
    Degradation,
    DegradationKind,
    DistractorSet,
    Feedback,
    FreeAnswer,
    Frozen,
    GradedAnswer,
    JudgeEvidence,
    LabelledAnswer,
    MatchContext,
    MatchVerdict,
    PairJudgeContext,
    PairVerdict,
    ParametricContext,
    Phase1Context,
    Phase2Context,
    Ranking,
    RankingContext,
    RoleContext,
    RoleName,
    SegmentEvidence,
    SufficiencyContext,
    SufficiencyVerdict,
    TranscriptTestContext,
    TranscriptWindow,
    VerificationMeta,
    VideoRate,
    cite,
    embed_context,
    format_timestamp,
    neutralise_tags,
)

__all__ = [
    "CONTEXT_CLOSE",
    "CONTEXT_OPEN",
    "DIFFICULTY_JUDGES_SLOT",
    "MODEL_SLOTS",
    "PAIR_JUDGE",
    "PAPER_SLOTS",
    "PARAMETRIC_ANSWERER",
    "PARAMETRIC_PAIRS_SLOT",
    "PARAMETRIC_VERIFIER",
    "PHASE1_GENERATOR",
    "PHASE1_GENERATOR_SLOT",
    "PHASE2_GENERATOR",
    "PHASE2_GENERATOR_SLOT",
    "QA",
    "ROLES",
    "SUFFICIENCY",
    "SUFFICIENCY_SLOT",
    "TEXTUAL_RANKER",
    "TEXTUAL_UNDETECTABILITY_SLOT",
    "TRANSCRIPT_ANSWERER",
    "TRANSCRIPT_ANSWERER_SLOT",
    "TRANSCRIPT_MATCHER",
    "TRANSCRIPT_MATCHER_SLOT",
    "VISUAL_DETECTABILITY_SLOT",
    "VISUAL_KINDS",
    "VISUAL_RANKER",
    "AnyContext",
    "AnyOutput",
    "ChunkText",
    "Degradation",
    "DegradationKind",
    "DistractorSet",
    "Feedback",
    "FreeAnswer",
    "Frozen",
    "GradedAnswer",
    "JudgeEvidence",
    "LabelledAnswer",
    "MatchContext",
    "MatchVerdict",
    "ModelSlot",
    "OfflineAnswerer",
    "OfflineCall",
    "PairJudgeContext",
    "PairVerdict",
    "ParametricContext",
    "Phase1Context",
    "Phase2Context",
    "Ranking",
    "RankingContext",
    "RoleContext",
    "RoleName",
    "RoleSpec",
    "SegmentEvidence",
    "SlotShape",
    "SlotValue",
    "SufficiencyContext",
    "SufficiencyVerdict",
    "TranscriptTestContext",
    "TranscriptWindow",
    "VerificationMeta",
    "VideoRate",
    "cite",
    "curation_slots",
    "embed_context",
    "extension_slots",
    "format_timestamp",
    "neutralise_tags",
    "parse_context",
    "register_role",
    "register_slot",
    "role_spec",
    "unregister_role",
    "unregister_slot",
]

ContextT = TypeVar("ContextT", bound=RoleContext)
OutputT = TypeVar("OutputT", bound=Frozen)

OfflineAnswerer: TypeAlias = Callable[[OfflineCall[ContextT]], OutputT]
"""How the offline provider answers a role: a deterministic function of one call."""


# -- roles ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoleSpec(Generic[ContextT, OutputT]):
    """One role of the wire contract, in one row: the context it is given, the output type it
    answers with, whether the segments' clips go with the prompt, how long its answer may be,
    how hard the model thinks before it answers, its prompt template and the offline answer.

    ``thinking`` is pydantic-ai's unified level (Gemini 3 ``thinkingLevel``, OpenAI reasoning
    effort; a model that cannot think is sent none). Thinking tokens are output tokens: Gemini 3
    counts them against ``maxOutputTokens`` (python-genai issue #2062: with the default
    ``high`` level a 1,024-token cap ends in MAX_TOKENS before any answer), and so does OpenAI's
    ``max_output_tokens``. So the short verdicts think ``low`` and every cap leaves room for
    thinking as well as the answer.

    ``prompt`` is the template file (``None``: ``agents/prompts/<name>.md``, the paper's), read by
    ``agents.prompts``; ``offline`` answers the role in the offline provider (``None``: the
    offline provider refuses the role). Who plays the role is its :class:`ModelSlot`.
    """

    name: str
    context: type[ContextT]
    output: type[OutputT]
    video: bool
    max_output_tokens: int
    thinking: ThinkingEffort = "low"
    prompt: Path | None = None
    offline: OfflineAnswerer[ContextT, OutputT] | None = None

    def __post_init__(self) -> None:
        field = self.context.model_fields.get("role")
        if field is None:  # pragma: no cover - every RoleContext has one
            raise ConfigError(f"role {self.name!r}: its context has no 'role' field")
        named = get_args(field.annotation) if get_origin(field.annotation) is Literal else ()
        if named and self.name not in named:
            # parse_context reads a prompt's context back by its role: it must validate.
            raise ConfigError(
                f"role {self.name!r}: its context {self.context.__name__}.role takes only "
                f"{list(named)!r}; add {self.name!r} to that Literal"
            )


PHASE1_GENERATOR = RoleSpec(
    "phase1_generator",
    Phase1Context,
    QA,
    video=True,
    max_output_tokens=16384,
    thinking="high",
    offline=phase1_answer,
)
PHASE2_GENERATOR = RoleSpec(
    "phase2_generator",
    Phase2Context,
    DistractorSet,
    video=True,
    max_output_tokens=24576,
    thinking="high",
    offline=phase2_answer,
)
TRANSCRIPT_ANSWERER = RoleSpec(
    "transcript_answerer",
    TranscriptTestContext,
    FreeAnswer,
    video=False,
    max_output_tokens=4096,
    thinking="low",
    offline=transcript_answer,
)
TRANSCRIPT_MATCHER = RoleSpec(
    "transcript_matcher",
    MatchContext,
    MatchVerdict,
    video=False,
    max_output_tokens=2048,
    thinking="low",
    offline=match_answer,
)
PARAMETRIC_ANSWERER = RoleSpec(
    "parametric_answerer",
    ParametricContext,
    FreeAnswer,
    video=False,
    max_output_tokens=4096,
    thinking="low",
    offline=parametric_answer,
)
PARAMETRIC_VERIFIER = RoleSpec(
    "parametric_verifier",
    MatchContext,
    MatchVerdict,
    video=False,
    max_output_tokens=2048,
    thinking="low",
    offline=match_answer,
)
SUFFICIENCY = RoleSpec(
    "sufficiency",
    SufficiencyContext,
    SufficiencyVerdict,
    video=True,
    max_output_tokens=4096,
    thinking="low",
    offline=sufficiency_answer,
)
TEXTUAL_RANKER = RoleSpec(
    "textual_ranker",
    RankingContext,
    Ranking,
    video=False,
    max_output_tokens=2048,
    thinking="low",
    offline=textual_rank_answer,
)
VISUAL_RANKER = RoleSpec(
    "visual_ranker",
    RankingContext,
    Ranking,
    video=True,
    max_output_tokens=2048,
    thinking="low",
    offline=visual_rank_answer,
)
PAIR_JUDGE = RoleSpec(
    "pair_judge",
    PairJudgeContext,
    PairVerdict,
    video=True,
    max_output_tokens=2048,
    thinking="low",
    offline=pair_judge_answer,
)

_PAPER_ROLES: tuple[RoleSpec[Any, Any], ...] = (
    PHASE1_GENERATOR,
    PHASE2_GENERATOR,
    TRANSCRIPT_ANSWERER,
    TRANSCRIPT_MATCHER,
    PARAMETRIC_ANSWERER,
    PARAMETRIC_VERIFIER,
    SUFFICIENCY,
    TEXTUAL_RANKER,
    VISUAL_RANKER,
    PAIR_JUDGE,
)
_ROLES: dict[str, RoleSpec[Any, Any]] = {}
ROLES: Mapping[str, RoleSpec[Any, Any]] = MappingProxyType(_ROLES)
"""Every declared role by name: the paper's, then those gate packages declared."""


def register_role(spec: RoleSpec[ContextT, OutputT]) -> RoleSpec[ContextT, OutputT]:
    """Declare role ``spec`` (a gate module's own role); ``ConfigError`` when its name is taken."""
    if spec.name in _ROLES:
        raise ConfigError(f"role {spec.name!r} is declared twice")
    _ROLES[spec.name] = spec
    return spec


def unregister_role(name: str) -> None:
    """Forget role ``name`` and the slots that cast it (a gate package unloaded, a test's toy).
    The paper's roles stay: ``ConfigError``."""
    if any(spec.name == name for spec in _PAPER_ROLES):
        raise ConfigError(f"role {name!r} is the paper's; it cannot be forgotten")
    for slot in [s for s in _SLOTS.values() if name in s.roles]:
        unregister_slot(slot.key)
    _ROLES.pop(name, None)


def role_spec(name: str) -> RoleSpec[Any, Any]:
    """The row of role ``name``; ``ValueError`` naming the known roles when there is none."""
    spec = ROLES.get(name)
    if spec is None:
        raise ValueError(f"unknown role {name!r}; the roles are {sorted(ROLES)!r}")
    return spec


# -- model slots ---------------------------------------------------------------------------------

SlotShape = Literal["one", "list", "pairs"]
SlotValue: TypeAlias = str | tuple[str, ...] | tuple[tuple[str, str], ...]
ValueT = TypeVar("ValueT", str, tuple[str, ...], tuple[tuple[str, str], ...])


@dataclass(frozen=True)
class ModelSlot(Generic[ValueT]):
    """One choice of model(s) a user makes under ``[models]``: its settings ``key``, the
    ``roles`` its models play, its ``default`` and ``description`` (the settings reference's).

    Its shape follows the default: one model id (``"gpt-5.4"``), a list of them (every one plays
    the role: ``("gemini-3.1-pro-preview", "gpt-5.4")``), or pairs casting two roles together
    (``(("gemini-3-flash-preview", "gpt-5.4"),)`` as ``roles=(answerer, verifier)``).
    ``field`` is its name in the workers' ``RoleModels`` when that is not ``key`` (the paper's
    ``textual_rankers`` for ``textual_undetectability``); ``curation`` says whether a curation
    run calls it (the difficulty judges are the pair selection's).
    """

    key: str
    roles: tuple[str, ...]
    default: ValueT
    description: str
    field: str = ""
    curation: bool = True

    def __post_init__(self) -> None:
        want = 2 if self.shape == "pairs" else 1
        if len(self.roles) != want:
            raise ConfigError(
                f"model slot {self.key!r}: a {self.shape!r} slot casts {want} role(s), "
                f"not {self.roles!r}"
            )
        self.normalise(self.default)

    @property
    def shape(self) -> SlotShape:
        """``one``, ``list`` or ``pairs``, as the default is."""
        if isinstance(self.default, str):
            return "one"
        if self.default and not isinstance(self.default[0], str):
            return "pairs"
        return "list"

    @property
    def attribute(self) -> str:
        """Its name in the workers' ``RoleModels`` (and in a run's ``RunStarted.models``)."""
        return self.field or self.key

    def normalise(self, value: object) -> SlotValue:
        """``value`` (from TOML, JSON or a log: lists for tuples) in this slot's shape;
        ``ConfigError`` naming the slot when it has another."""
        shape = self.shape
        if shape == "one" and isinstance(value, str):
            return value
        if shape != "one" and isinstance(value, list | tuple):
            if shape == "list" and all(isinstance(v, str) for v in value):
                return tuple(value)
            if shape == "pairs" and all(
                isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(v, str) for v in p)
                for p in value
            ):
                return tuple((str(p[0]), str(p[1])) for p in value)
        wanted = {"one": "a model id", "list": "a list of model ids", "pairs": "a list of pairs"}
        raise ConfigError(f"models.{self.key}: {value!r} is not {wanted[shape]}")

    def models(self, value: SlotValue) -> tuple[str, ...]:
        """Every model id ``value`` (this slot's) names, in order."""
        if isinstance(value, str):
            return (value,)
        return tuple(m for item in value for m in ((item,) if isinstance(item, str) else item))

    def playing(self, value: SlotValue, role: str) -> tuple[str, ...]:
        """The model ids of ``value`` that play ``role`` (a pair's first or second)."""
        if role not in self.roles:
            return ()
        if self.shape != "pairs":
            return self.models(value)
        at = self.roles.index(role)
        return tuple(pair[at] for pair in value if not isinstance(pair, str))


PHASE1_GENERATOR_SLOT = ModelSlot(
    "phase1_generator",
    ("phase1_generator",),
    "gemini-3-flash-preview",
    "Phase I: writes the question and cited gold answer from both segments' video.",
)
PHASE2_GENERATOR_SLOT = ModelSlot(
    "phase2_generator",
    ("phase2_generator",),
    "gemini-3-flash-preview",
    "Phase II: writes the graded visual-only distractors and their causal records.",
)
TRANSCRIPT_ANSWERER_SLOT = ModelSlot(
    "transcript_answerer",
    ("transcript_answerer",),
    "gemini-3-flash-preview",
    "Transcript test: answers from transcripts alone, the relevant ones shuffled among windows "
    "of another video.",
)
TRANSCRIPT_MATCHER_SLOT = ModelSlot(
    "transcript_matcher",
    ("transcript_matcher",),
    "gpt-5.4-mini",
    "Transcript test: judges whether that answer matches the gold.",
)
PARAMETRIC_PAIRS_SLOT = ModelSlot(
    "parametric_pairs",
    ("parametric_answerer", "parametric_verifier"),
    (("gemini-3-flash-preview", "gpt-5.4"), ("gpt-5.4-mini", "gemini-3.1-pro-preview")),
    "Parametric test: [answerer, verifier] pairs answering from memory; the QA is rejected only "
    "if every pair recovers the gold.",
)
SUFFICIENCY_SLOT = ModelSlot(
    "sufficiency",
    ("sufficiency",),
    "qwen-3.7-plus",
    "Video sufficiency: checks every claim against each segment's frames and transcript.",
)
TEXTUAL_UNDETECTABILITY_SLOT = ModelSlot(
    "textual_undetectability",
    ("textual_ranker",),
    ("gemini-3.1-pro-preview", "gpt-5.4"),
    "Rank gold and distractors from text alone; the set is rejected only if all of them recover "
    "the order.",
    field="textual_rankers",
)
VISUAL_DETECTABILITY_SLOT = ModelSlot(
    "visual_detectability",
    ("visual_ranker",),
    "qwen-3.7-plus",
    "Ranks the distractors with the video; the set passes only on the exact order.",
    field="visual_ranker",
)
DIFFICULTY_JUDGES_SLOT = ModelSlot(
    "difficulty_judges",
    ("pair_judge",),
    ("qwen3-vl-30b-a3b", "internvl3.5-8b"),
    "Weak judges of the difficulty gate: a pair is kept only if at least one of them gets it "
    "wrong.",
    curation=False,
)

PAPER_SLOTS: tuple[ModelSlot[Any], ...] = (
    PHASE1_GENERATOR_SLOT,
    PHASE2_GENERATOR_SLOT,
    TRANSCRIPT_ANSWERER_SLOT,
    TRANSCRIPT_MATCHER_SLOT,
    PARAMETRIC_PAIRS_SLOT,
    SUFFICIENCY_SLOT,
    TEXTUAL_UNDETECTABILITY_SLOT,
    VISUAL_DETECTABILITY_SLOT,
    DIFFICULTY_JUDGES_SLOT,
)
"""The paper's slots (DESIGN.md's default model per role), in the settings' order."""

_SLOTS: dict[str, ModelSlot[Any]] = {}
MODEL_SLOTS: Mapping[str, ModelSlot[Any]] = MappingProxyType(_SLOTS)
"""Every declared model slot by settings key: the paper's, then those gate packages declared."""


def register_slot(slot: ModelSlot[ValueT]) -> ModelSlot[ValueT]:
    """Declare model slot ``slot`` (a gate module's own); ``ConfigError`` when its key or its
    ``RoleModels`` name is taken, or it casts a role that is not declared."""
    taken = {s.attribute for s in _SLOTS.values()} | set(_SLOTS)
    if slot.key in taken or slot.attribute in taken:
        raise ConfigError(f"model slot {slot.key!r} is declared twice")
    unknown = [role for role in slot.roles if role not in _ROLES]
    if unknown:
        raise ConfigError(
            f"model slot {slot.key!r} casts undeclared role(s) {unknown!r}: register_role first"
        )
    _SLOTS[slot.key] = slot
    return slot


def unregister_slot(key: str) -> None:
    """Forget model slot ``key``; the paper's slots stay (``ConfigError``)."""
    if any(slot.key == key for slot in PAPER_SLOTS):
        raise ConfigError(f"model slot {key!r} is the paper's; it cannot be forgotten")
    _SLOTS.pop(key, None)


def curation_slots() -> tuple[ModelSlot[Any], ...]:
    """The slots a curation run calls, the paper's first: what ``RoleModels`` holds."""
    return tuple(slot for slot in _SLOTS.values() if slot.curation)


def extension_slots() -> tuple[ModelSlot[Any], ...]:
    """The slots gate packages declared (none of the paper's), in the order they were."""
    return tuple(slot for slot in _SLOTS.values() if slot not in PAPER_SLOTS)


for _role in _PAPER_ROLES:
    register_role(_role)
for _slot in PAPER_SLOTS:
    register_slot(_slot)


# -- reading a prompt back -----------------------------------------------------------------------

_CONTEXT_RE = re.compile(re.escape(CONTEXT_OPEN) + r"(.*?)" + re.escape(CONTEXT_CLOSE), re.S)


def parse_context(prompt: str) -> RoleContext:
    """The context a prompt carries, of its role's declared type; ``ValueError`` when there is
    none, it names no declared role, or it is malformed."""
    blocks = _CONTEXT_RE.findall(prompt)
    if not blocks:
        raise ValueError("the prompt holds no <context> block")
    # The prompt's own block is its last: untrusted text before it is neutralised
    # (:func:`neutralise_tags`), and nothing but a retry's fixed note comes after it.
    data = json.loads(blocks[-1])
    role = ROLES.get(str(data.get("role")))
    if role is None:
        raise ValueError(f"unknown role {data.get('role')!r} in the <context> block")
    context: RoleContext = role.context.model_validate(data)
    return context
