"""Who plays each role: the model slots, one declaration each.

A :class:`ModelSlot` is one choice of model(s) a user makes under ``[models]``: its settings key,
the role(s) its models play, its default and its description. The settings' ``[models]`` table
(``playlisteval.settings``), the workers' ``RoleModels`` (``agents.workers``) and what a run
records are all built from this table (:data:`MODEL_SLOTS`); nothing restates a slot.

It is apart from :mod:`tools.contracts.roles` (which hands every name here on) so that reading the
settings
imports no role's offline answerer, prompt or SDK: this module needs nothing but the standard
library. :func:`tools.contracts.roles.register_slot` is how a gate package declares a slot (it
checks the
roles the slot casts are declared, then calls :func:`add_slot`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from store.errors import ConfigError

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

    @property
    def value_type(self) -> Any:
        """The type of its value, as :meth:`normalise` gives it: ``str``, ``tuple[str, ...]``
        or ``tuple[tuple[str, str], ...]``."""
        shapes = {"one": str, "list": tuple[str, ...], "pairs": tuple[tuple[str, str], ...]}
        return shapes[self.shape]

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


def add_slot(slot: ModelSlot[ValueT]) -> ModelSlot[ValueT]:
    """Put ``slot`` in the table; ``ConfigError`` when its key or its ``RoleModels`` name is
    taken. Whether the roles it casts are declared is :func:`tools.contracts.roles.register_slot`'s
    check (the paper's are, ``tests/test_role_declarations.py``)."""
    taken = {s.attribute for s in _SLOTS.values()} | set(_SLOTS)
    if slot.key in taken or slot.attribute in taken:
        raise ConfigError(f"model slot {slot.key!r} is declared twice")
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


for _slot in PAPER_SLOTS:
    add_slot(_slot)
