"""The roles of the wire contract and the model slots that cast them: one declaration each.

A role is one :class:`RoleSpec`: the context it is given and the output type it answers with
(:mod:`tools.contracts.role_types`, whose names this module hands on), whether the segments' clips
go with
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
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeVar, get_args, get_origin

from store.errors import ConfigError
from tools.contracts.model_slots import (
    DIFFICULTY_JUDGES_SLOT,
    MODEL_SLOTS,
    PAPER_SLOTS,
    PARAMETRIC_PAIRS_SLOT,
    PHASE1_GENERATOR_SLOT,
    PHASE2_GENERATOR_SLOT,
    SUFFICIENCY_SLOT,
    TEXTUAL_UNDETECTABILITY_SLOT,
    TRANSCRIPT_ANSWERER_SLOT,
    TRANSCRIPT_MATCHER_SLOT,
    VISUAL_DETECTABILITY_SLOT,
    ModelSlot,
    SlotShape,
    SlotValue,
    ValueT,
    add_slot,
    curation_slots,
    extension_slots,
    unregister_slot,
)
from tools.contracts.role_types import (
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
from tools.offline.offline_answers import (
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

if TYPE_CHECKING:  # a Literal of level names: importing pydantic-ai costs a second
    from pydantic_ai.settings import ThinkingEffort

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
    for slot in [s for s in MODEL_SLOTS.values() if name in s.roles]:
        unregister_slot(slot.key)
    _ROLES.pop(name, None)


def role_spec(name: str) -> RoleSpec[Any, Any]:
    """The row of role ``name``; ``ValueError`` naming the known roles when there is none."""
    spec = ROLES.get(name)
    if spec is None:
        raise ValueError(f"unknown role {name!r}; the roles are {sorted(ROLES)!r}")
    return spec


# -- model slots ---------------------------------------------------------------------------------


def register_slot(slot: ModelSlot[ValueT]) -> ModelSlot[ValueT]:
    """Declare model slot ``slot`` (a gate module's own); ``ConfigError`` when its key or its
    ``RoleModels`` name is taken, or it casts a role that is not declared."""
    unknown = [role for role in slot.roles if role not in _ROLES]
    if unknown:
        raise ConfigError(
            f"model slot {slot.key!r} casts undeclared role(s) {unknown!r}: register_role first"
        )
    return add_slot(slot)


for _role in _PAPER_ROLES:
    register_role(_role)
# The table holds them already (tools.contracts.model_slots): their roles must exist.
for _slot in PAPER_SLOTS:
    if _missing := [role for role in _slot.roles if role not in _ROLES]:
        raise ConfigError(f"model slot {_slot.key!r} casts undeclared role(s) {_missing!r}")


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
