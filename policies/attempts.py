"""The self-correcting loop's policy — its limits and its gates, cheapest first — as data.

Defaults are the paper's (DESIGN.md, "loop" and "Phase I/II gates"): at most T = 6 attempts per
seed and phase; after a Phase II rejection the distractors are regenerated up to 2 more times
with the QA fixed; after 3 Phase II rejections Phase I restarts on the same segment pair. Gates
run cheap first — rules, then text-only calls, then native-video calls (> 90 % of the bill) —
so a bad candidate is rejected before the expensive calls are made.

Everything here is frozen and loads from a plain mapping (a parsed TOML table or settings), so
the policy a run used can be written into its ``RunStarted`` event and read back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, cast

from store.errors import ConfigError

Phase = Literal[1, 2]
GateKind = Literal["rule", "text", "video"]
RejectRule = Literal["any", "all"]

_KIND_COST_RANK: dict[str, int] = {"rule": 0, "text": 1, "video": 2}


@dataclass(frozen=True)
class GateSpec:
    """One gate: its phase, its cost class and the model roles it calls.

    ``roles`` name the model slots the gate calls (``tools.contracts.roles.MODEL_SLOTS``: keys of
    the
    settings' ``[models]`` table; ``agents.gates.register_gate`` refuses one not declared); a
    slot holding several models (the parametric pairs, the textual-undetectability rankers) gives
    the gate several verifiers.
    ``reject_rule`` ``"any"`` rejects when any verifier fails the candidate; ``"all"`` only when
    every verifier recovers the answer from text alone (parametric test, textual
    undetectability).
    """

    name: str
    phase: Phase
    kind: GateKind
    roles: tuple[str, ...] = ()
    reject_rule: RejectRule = "any"

    def __post_init__(self) -> None:
        where = f"gate {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"gate name {self.name!r} must be a non-empty string")
        if self.phase not in (1, 2):
            raise ConfigError(f"{where}: phase={self.phase!r} must be 1 or 2")
        if self.kind not in _KIND_COST_RANK:
            raise ConfigError(
                f"{where}: kind={self.kind!r} is unknown; use one of {list(_KIND_COST_RANK)!r}"
            )
        if self.reject_rule not in ("any", "all"):
            raise ConfigError(f"{where}: reject_rule={self.reject_rule!r} must be 'any' or 'all'")
        if not isinstance(self.roles, tuple) or not all(
            isinstance(r, str) and r for r in self.roles
        ):
            raise ConfigError(f"{where}: roles={self.roles!r} must be a tuple of role names")
        if self.kind == "rule" and self.roles:
            raise ConfigError(f"{where}: a rule gate calls no model, but roles={self.roles!r}")
        if self.kind != "rule" and not self.roles:
            raise ConfigError(f"{where}: a {self.kind!r} gate needs at least one model role")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GateSpec:
        """Build from a mapping; ``roles`` may be any sequence of strings."""
        _reject_unknown("gate", data, {f.name for f in fields(cls)})
        values = dict(data)
        missing = [k for k in ("name", "phase", "kind") if k not in values]
        if missing:
            raise ConfigError(f"gate {values.get('name')!r} lacks {missing!r}")
        roles = values.get("roles", ())
        if isinstance(roles, str) or not isinstance(roles, Sequence):
            raise ConfigError(
                f"gate {values['name']!r}: roles={roles!r} must be a list of role names"
            )
        values["roles"] = tuple(roles)
        return cls(**values)

    def to_mapping(self) -> dict[str, Any]:
        """The plain-data form, as :meth:`from_mapping` reads it."""
        return {**asdict(self), "roles": list(self.roles)}


DEFAULT_GATES: tuple[GateSpec, ...] = (
    GateSpec("structural", 1, "rule"),
    GateSpec("transcript_test", 1, "text", ("transcript_answerer", "transcript_matcher")),
    GateSpec("parametric_test", 1, "text", ("parametric_pairs",), reject_rule="all"),
    GateSpec("sufficiency", 1, "video", ("sufficiency",)),
    GateSpec("structural", 2, "rule"),
    GateSpec("textual_undetectability", 2, "text", ("textual_undetectability",), reject_rule="all"),
    GateSpec("visual_detectability", 2, "video", ("visual_detectability",)),
)


def gates_from_mapping(items: Iterable[Mapping[str, Any]]) -> tuple[GateSpec, ...]:
    """Gates from a list of mappings (a TOML array of tables); (phase, name) must be unique."""
    gates = tuple(GateSpec.from_mapping(item) for item in items)
    _require_unique(gates)
    return gates


def _require_unique(gates: Iterable[GateSpec]) -> None:
    seen: set[tuple[int, str]] = set()
    for gate in gates:
        key = (gate.phase, gate.name)
        if key in seen:
            raise ConfigError(f"gate {gate.name!r} appears twice in phase {gate.phase!r}")
        seen.add(key)


def gate_order(gates: Iterable[GateSpec], phase: Phase) -> list[GateSpec]:
    """The gates of ``phase``, cheapest first (rule, text, video); stable within a kind."""
    if phase not in (1, 2):
        raise ConfigError(f"phase={phase!r} must be 1 or 2")
    # sorted() is stable, so gates of one kind keep the order they were given in.
    return sorted((g for g in gates if g.phase == phase), key=lambda g: _KIND_COST_RANK[g.kind])


def default_gate(name: str, phase: Phase) -> GateSpec:
    """The paper's gate ``name`` of ``phase`` (one of :data:`DEFAULT_GATES`)."""
    for gate in DEFAULT_GATES:
        if (gate.name, gate.phase) == (name, phase):
            return gate
    raise ConfigError(f"the paper has no gate {name!r} in phase {phase!r}")


@dataclass(frozen=True)
class LoopPolicy:
    """The self-correcting loop's one policy: how many tries a seed gets and which gates judge
    its outputs, each phase's run cheapest first (:func:`gate_order`).

    ``gates`` are specs; what runs each one is the gate of that name and phase in the verifier's
    table (``agents.gates``).
    """

    max_attempts: int = 6
    phase2_rejections_before_restart: int = 3
    gates: tuple[GateSpec, ...] = DEFAULT_GATES

    def __post_init__(self) -> None:
        _require_int("max_attempts", self.max_attempts, minimum=1)
        _require_int(
            "phase2_rejections_before_restart", self.phase2_rejections_before_restart, minimum=1
        )
        if not isinstance(self.gates, tuple) or not all(
            isinstance(g, GateSpec) for g in self.gates
        ):
            raise ConfigError(f"loop policy gates={self.gates!r} must be a tuple of GateSpec")
        _require_unique(self.gates)

    def gate_names(self, phase: int) -> tuple[str, ...]:
        """The names of the gates of ``phase``, in the order they run (cheap first)."""
        return tuple(g.name for g in gate_order(self.gates, cast(Phase, phase)))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LoopPolicy:
        """Build from a mapping (e.g. a TOML table); missing keys keep the paper's defaults, and
        ``gates`` is a list of gate tables (:func:`gates_from_mapping`)."""
        _reject_unknown(
            "loop policy", data, {"max_attempts", "phase2_rejections_before_restart", "gates"}
        )
        values = dict(data)
        if "gates" in values:
            values["gates"] = gates_from_mapping(values["gates"])
        return cls(**values)

    def to_mapping(self) -> dict[str, Any]:
        """The plain-data form, as :meth:`from_mapping` reads it."""
        return {
            "max_attempts": self.max_attempts,
            "phase2_rejections_before_restart": self.phase2_rejections_before_restart,
            "gates": [g.to_mapping() for g in self.gates],
        }


def _require_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"loop policy {name}={value!r} must be an integer >= {minimum!r}; "
            "fix it in the settings (generation section)"
        )


def _reject_unknown(what: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{what} must be a table of values, got {cast(object, data)!r}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"unknown {what} field(s) {unknown!r}; allowed: {sorted(allowed)!r}")
