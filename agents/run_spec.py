"""A run's definition, recorded when it starts: what decides what the run does.

A :class:`RunSpec` holds the gate set in the order the loop runs it (each gate's name, phase,
cost kind, model slots and reject rule), each model slot's model(s), each role the run may call
by the content hashes of its prompt template, its context and its output schema, the frame plans
(the generators' and verifiers' clips) and the other limits the generators are told, the loop
policy, the price rows and the code's version. ``RunStarted.spec`` carries its JSON.

Everything that continues a run — strict and counterfactual replay, ``curate --run``, the fleet's
workers and the daemon — builds the run's :class:`~agents.seed_driver.CurationConfig` from this
record (:meth:`RunSpec.config`), never from the code and settings of the day. Before it does,
:func:`unhonoured` says what today's code cannot honour (a recorded gate gone or changed, a role
renamed, a prompt template or schema changed), and the command stops before any call or
reservation, naming the difference and the ways on — as Temporal's replayer raises a
non-determinism error before it runs anything. Changing a run's definition is an explicit step
(``RunUpgraded``), never a silent mix.

A run recorded before definitions were (``RunStarted`` schema 1) gets one rebuilt by
:func:`legacy_spec`: its recorded models, attempts and generation settings, and the paper's gates
plus any registered gate its log asked for; its templates were not recorded, so they are not
compared.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter

from agents.evidence import ClipSpec
from agents.gates import registered_gate, registered_gates
from agents.prompts import template_hash
from agents.seed_driver import CurationConfig
from agents.workers import GenerationLimits, RoleModels
from policies.attempts import DEFAULT_GATES, GateSpec, LoopPolicy, gate_order
from store.errors import ConfigError
from store.events import RunStarted, RunUpgraded, seed_stream
from store.eventstore import EventStore, StoredEvent
from store.version import code_version
from tools.contracts.roles import MODEL_SLOTS, ROLES, curation_slots

SPEC_VERSION = 1


def content_hash(text: str) -> str:
    """A short content hash (SHA-256, 16 hex digits) of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _schema_hash(kind: type[Any]) -> str:
    schema = TypeAdapter(kind).json_schema()
    return content_hash(json.dumps(schema, sort_keys=True))


@dataclass(frozen=True)
class RoleFacts:
    """What a role's requests are made from, by content hash: its prompt template, the context
    it is given and the output schema it answers with."""

    template: str
    context: str
    output: str

    @classmethod
    def of(cls, role: str) -> RoleFacts:
        """Role ``role`` as today's code declares it."""
        spec = ROLES[role]
        return cls(template_hash(role), _schema_hash(spec.context), _schema_hash(spec.output))


def _limits_json(limits: GenerationLimits) -> dict[str, Any]:
    def clip(spec: ClipSpec) -> dict[str, Any]:
        return {"fps": spec.fps, "max_height": spec.max_height, "audio": spec.audio}

    return {
        "min_paragraphs": limits.min_paragraphs,
        "max_paragraphs": limits.max_paragraphs,
        "min_cited_chunks": limits.min_cited_chunks,
        "max_cited_chunks": limits.max_cited_chunks,
        "generator_clip": clip(limits.generator_clip),
        "verifier_clip": clip(limits.verifier_clip),
    }


def _limits_of(data: Mapping[str, Any]) -> GenerationLimits:
    return GenerationLimits(
        min_paragraphs=int(data["min_paragraphs"]),
        max_paragraphs=int(data["max_paragraphs"]),
        min_cited_chunks=int(data["min_cited_chunks"]),
        max_cited_chunks=int(data["max_cited_chunks"]),
        generator_clip=ClipSpec(**data["generator_clip"]),
        verifier_clip=ClipSpec(**data["verifier_clip"]),
    )


def _models_json(models: RoleModels) -> dict[str, Any]:
    """The slot values as plain JSON (lists for tuples), by slot attribute."""
    plain: dict[str, Any] = json.loads(json.dumps(dict(vars(models))))
    return plain


@dataclass(frozen=True)
class RunSpec:
    """A run's definition (see the module docstring). ``roles`` is None for a run recorded
    before definitions were: nothing is known of its templates."""

    gates: tuple[GateSpec, ...]
    max_attempts: int
    phase2_rejections_before_restart: int
    models: dict[str, Any]
    limits: dict[str, Any]
    roles: dict[str, RoleFacts] | None
    prices: dict[str, Any] = field(default_factory=dict)
    version: str = ""

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def today(cls, config: CurationConfig, prices: Mapping[str, Any] | None = None) -> RunSpec:
        """The definition a new run made with ``config`` records: its gates in run order, its
        models, and every role its model slots and generators call as today's code declares
        them."""
        policy = config.policy
        roles = sorted({role for slot in curation_slots() for role in slot.roles})
        return cls(
            gates=_run_order(policy.gates),
            max_attempts=policy.max_attempts,
            phase2_rejections_before_restart=policy.phase2_rejections_before_restart,
            models=_models_json(config.models),
            limits=_limits_json(config.limits),
            roles={role: RoleFacts.of(role) for role in roles if role in ROLES},
            prices=dict(prices or {}),
            version=code_version(),
        )

    def config(self, base: CurationConfig) -> CurationConfig:
        """``base`` (its concurrency, offline mode, ramp and retries: how, not what) deciding as
        this definition says: its gates and loop policy, its models, its limits. Call
        :func:`unhonoured` first: a gate or slot today's code does not know is a ConfigError."""
        policy = LoopPolicy(
            max_attempts=self.max_attempts,
            phase2_rejections_before_restart=self.phase2_rejections_before_restart,
            gates=self.gates,
        )
        return replace(
            base, policy=policy, models=RoleModels.of(self.models), limits=_limits_of(self.limits)
        )

    # -- the record ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The plain-data form ``RunStarted.spec`` and ``RunUpgraded.spec`` carry."""
        return {
            "spec_version": SPEC_VERSION,
            "gates": [g.to_mapping() for g in self.gates],
            "max_attempts": self.max_attempts,
            "phase2_rejections_before_restart": self.phase2_rejections_before_restart,
            "models": self.models,
            "limits": self.limits,
            "roles": None
            if self.roles is None
            else {
                name: {"template": f.template, "context": f.context, "output": f.output}
                for name, f in sorted(self.roles.items())
            },
            "prices": self.prices,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSpec:
        """A recorded definition; ConfigError when it is of a version this code cannot read."""
        version = data.get("spec_version")
        if version != SPEC_VERSION:
            raise ConfigError(
                f"the run's definition is of version {version!r}; this code reads version "
                f"{SPEC_VERSION}: run a newer playlisteval"
            )
        roles = data.get("roles")
        return cls(
            gates=tuple(GateSpec.from_mapping(g) for g in data["gates"]),
            max_attempts=int(data["max_attempts"]),
            phase2_rejections_before_restart=int(data["phase2_rejections_before_restart"]),
            models=dict(data["models"]),
            limits=dict(data["limits"]),
            roles=None
            if roles is None
            else {name: RoleFacts(**facts) for name, facts in roles.items()},
            prices=dict(data.get("prices") or {}),
            version=str(data.get("version", "")),
        )

    @property
    def digest(self) -> str:
        """A short hash of what decides (prices and version left out): equal digests, equal
        decisions."""
        decisive = {k: v for k, v in self.to_json().items() if k not in ("prices", "version")}
        return content_hash(json.dumps(decisive, sort_keys=True))

    # -- comparing -----------------------------------------------------------------------------

    def differences(self, other: RunSpec) -> list[str]:
        """How ``other`` (today's) decides differently from this (the recorded), one line each:
        gates added, gone, changed or reordered, loop numbers, models, limits, roles' templates
        and schemas. Prices are not among them: a resume records the prices in force from it."""
        out: list[str] = []
        mine = {(g.name, g.phase): g for g in self.gates}
        theirs = {(g.name, g.phase): g for g in other.gates}
        for key in theirs.keys() - mine.keys():
            out.append(f"today's code adds gate {key[0]!r} (phase {key[1]}), which it did not run")
        for key in mine.keys() - theirs.keys():
            out.append(f"its gate {key[0]!r} (phase {key[1]}) is not among today's gates")
        for key in mine.keys() & theirs.keys():
            if mine[key] != theirs[key]:
                out.append(
                    f"its gate {key[0]!r} (phase {key[1]}) was {mine[key]!r}; today it is "
                    f"{theirs[key]!r}"
                )
        if not out and [g.name for g in self.gates] != [g.name for g in other.gates]:
            out.append("today's code runs its gates in another order")
        loop = (
            ("max_attempts", self.max_attempts, other.max_attempts),
            (
                "phase2_rejections_before_restart",
                self.phase2_rejections_before_restart,
                other.phase2_rejections_before_restart,
            ),
        )
        for name, was, now in loop:
            if was != now:
                out.append(f"generation.{name} was {was!r}; today it is {now!r}")
        for slot in sorted(set(self.models) | set(other.models)):
            model_was, model_now = self.models.get(slot), other.models.get(slot)
            if model_was != model_now:
                out.append(f"model slot {slot!r} was {model_was!r}; today it is {model_now!r}")
        for name in sorted(set(self.limits) | set(other.limits)):
            limit_was, limit_now = self.limits.get(name), other.limits.get(name)
            if limit_was != limit_now:
                out.append(
                    f"generation limit {name!r} was {limit_was!r}; today it is {limit_now!r}"
                )
        if self.roles is not None and other.roles is not None:
            out += _role_differences(self.roles, other.roles)
        return out


def _run_order(gates: Iterable[GateSpec]) -> tuple[GateSpec, ...]:
    """The gates in the order the loop runs them: phase I's cheapest first, then phase II's."""
    listed = tuple(gates)
    return tuple(gate_order(listed, 1)) + tuple(gate_order(listed, 2))


def _role_differences(
    recorded: Mapping[str, RoleFacts], today: Mapping[str, RoleFacts]
) -> list[str]:
    out: list[str] = []
    for role in sorted(recorded):
        was = recorded[role]
        now = today.get(role)
        if now is None:
            out.append(_role_gone(role))
            continue
        for what, label in (
            ("template", "prompt template"),
            ("context", "context schema"),
            ("output", "output schema"),
        ):
            if getattr(was, what) != getattr(now, what):
                out.append(
                    f"role {role!r}'s {label} changed since the run was recorded (recorded "
                    f"{getattr(was, what)}, today {getattr(now, what)})"
                )
    return out


def _role_gone(role: str) -> str:
    return (
        f"its role {role!r} is not declared today (renamed, or its gate package is not loaded: "
        "models.gate_packages)"
    )


def unhonoured(spec: RunSpec) -> list[str]:
    """What today's code cannot honour of ``spec``, one line each (empty: it can run it as
    recorded): a recorded gate with no registered check or registered under another spec, a
    model slot no longer declared, a role no longer declared or whose template, context or
    output schema changed. Gates and roles today's code adds do not matter: the run does not
    use them."""
    out: list[str] = []
    for gate in spec.gates:
        found = registered_gate(gate.name, gate.phase)
        if found is None:
            out.append(
                f"its gate {gate.name!r} (phase {gate.phase}) is not registered today (removed, "
                "renamed, or its gate package is not loaded: models.gate_packages)"
            )
        elif found.spec != gate:
            out.append(
                f"its gate {gate.name!r} (phase {gate.phase}) was {gate!r}; today's code "
                f"registers {found.spec!r}"
            )
    slots = {slot.attribute for slot in MODEL_SLOTS.values()}
    for name in sorted(set(spec.models) - slots):
        out.append(
            f"its model slot {name!r} is not declared today (renamed, or its gate package is not "
            "loaded: models.gate_packages)"
        )
    if spec.roles is not None:
        today = {role: RoleFacts.of(role) for role in spec.roles if role in ROLES}
        out += _role_differences(spec.roles, today)
    return out


def legacy_spec(started: RunStarted, asked: Iterable[tuple[str, int]] = ()) -> RunSpec:
    """A definition for a run recorded before definitions were: its recorded models, attempts
    and generation settings, today's defaults for what it did not record, and the paper's gates
    plus each registered gate its log asked for (``asked``: the ``(gate, phase)`` of its
    ``GateRequested`` events), in today's registration order. Its templates are unknown."""
    asked = set(asked)
    gates = tuple(g for g in registered_gates() if g in DEFAULT_GATES or (g.name, g.phase) in asked)
    generation = started.settings.get("generation") or {}
    base = CurationConfig(policy=LoopPolicy(gates=gates))
    limits = _limits_json(base.limits)
    for name in ("min_paragraphs", "max_paragraphs"):
        limits[name] = generation.get(f"gold_{name}", limits[name])
    for name in ("min_cited_chunks", "max_cited_chunks"):
        limits[name] = generation.get(f"{name}_per_segment", limits[name])
    clip = limits["generator_clip"]
    for key, setting in (("fps", "video_fps"), ("max_height", "video_max_height")):
        clip[key] = generation.get(setting, clip[key])
    clip["audio"] = generation.get("video_audio", clip["audio"])
    defaults = _models_json(RoleModels())
    return RunSpec(
        gates=_run_order(gates),
        max_attempts=started.max_attempts,
        phase2_rejections_before_restart=int(generation.get("phase2_rejections_before_restart", 3)),
        models={**defaults, **started.models},
        limits=limits,
        roles=None,
        prices=dict(started.settings.get("prices") or {}),
        version="",
    )


def gates_asked(events: Iterable[StoredEvent]) -> set[tuple[str, int]]:
    """The ``(gate, phase)`` pairs a run's seed events asked for (``GateRequested``): what
    rebuilds the gate set of a run recorded before definitions were."""
    return {
        (str(e.data["gate"]), int(e.data["phase"])) for e in events if e.type == "GateRequested"
    }


def run_gates_asked(store: EventStore, run_id: str) -> set[tuple[str, int]]:
    """:func:`gates_asked` of run ``run_id``'s seeds, read from ``store``."""
    return gates_asked(
        store.read_all(stream_prefix=seed_stream(run_id, ""), types=["GateRequested"])
    )


def recorded_spec(run_log: Sequence[StoredEvent], asked: Iterable[tuple[str, int]] = ()) -> RunSpec:
    """The definition in force at the end of a run's stream ``run_log``: its last
    ``RunUpgraded``'s, else its ``RunStarted``'s (a legacy run's rebuilt, ``asked`` naming the
    gates its log asked for)."""
    return specs_in_force(run_log, asked)[-1][1]


def specs_in_force(
    run_log: Sequence[StoredEvent], asked: Iterable[tuple[str, int]] = ()
) -> list[tuple[int, RunSpec]]:
    """Each definition the run was decided under, with the seq from which it was in force:
    its start's, then each upgrade's."""
    out: list[tuple[int, RunSpec]] = []
    for stored in run_log:
        event = stored.event()
        if isinstance(event, RunStarted):
            spec = (
                RunSpec.from_json(event.spec)
                if event.spec is not None
                else legacy_spec(event, asked)
            )
            out.append((stored.seq, spec))
        elif isinstance(event, RunUpgraded):
            out.append((stored.seq, RunSpec.from_json(event.spec)))
    if not out:
        raise ConfigError("the run's stream does not begin with RunStarted: see store verify")
    return out
