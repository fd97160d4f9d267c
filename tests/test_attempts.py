"""The loop policy and the gate order, as data with the paper's defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from policies.attempts import (
    DEFAULT_GATES,
    GateSpec,
    LoopPolicy,
    gate_order,
    gates_from_mapping,
)
from store.errors import ConfigError


def test_defaults_are_the_papers_numbers_and_gates() -> None:
    policy = LoopPolicy()
    assert (policy.max_attempts, policy.phase2_rejections_before_restart) == (6, 3)
    assert policy.gates == DEFAULT_GATES


@pytest.mark.parametrize(
    ("phase", "names"),
    [
        (1, ["structural", "transcript_test", "parametric_test", "sufficiency"]),
        (2, ["structural", "textual_undetectability", "visual_detectability"]),
    ],
)
def test_default_gates_run_in_the_papers_order(phase: int, names: list[str]) -> None:
    assert [g.name for g in gate_order(DEFAULT_GATES, phase)] == names  # type: ignore[arg-type]
    assert LoopPolicy().gate_names(phase) == tuple(names)


@pytest.mark.parametrize(
    ("name", "phase", "reject_rule"),
    [
        ("parametric_test", 1, "all"),  # reject only if both generator-verifier pairs recover
        ("textual_undetectability", 2, "all"),  # reject only if both rankers recover the order
        ("transcript_test", 1, "any"),
        ("sufficiency", 1, "any"),
        ("visual_detectability", 2, "any"),
    ],
)
def test_default_gate_reject_rules(name: str, phase: int, reject_rule: str) -> None:
    (gate,) = [g for g in DEFAULT_GATES if g.name == name and g.phase == phase]
    assert gate.reject_rule == reject_rule


def test_gate_order_is_cheap_first_and_stable_within_a_kind() -> None:
    gates = [
        GateSpec("v1", 1, "video", ("sufficiency",)),
        GateSpec("t1", 1, "text", ("a",)),
        GateSpec("r1", 1, "rule"),
        GateSpec("t2", 1, "text", ("b",)),
        GateSpec("other-phase", 2, "rule"),
        GateSpec("r2", 1, "rule"),
    ]
    assert [g.name for g in gate_order(gates, 1)] == ["r1", "r2", "t1", "t2", "v1"]


def test_policy_loads_from_a_toml_table(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        "[attempts]\nmax_attempts = 4\n\n"
        '[[gates]]\nname = "structural"\nphase = 1\nkind = "rule"\n\n'
        '[[gates]]\nname = "sufficiency"\nphase = 1\nkind = "video"\nroles = ["sufficiency"]\n'
    )
    data = tomllib.loads(path.read_text())
    assert LoopPolicy.from_mapping(data["attempts"]) == LoopPolicy(max_attempts=4)
    gates = gates_from_mapping(data["gates"])
    assert gates[1] == GateSpec("sufficiency", 1, "video", ("sufficiency",), "any")
    policy = LoopPolicy.from_mapping({**data["attempts"], "gates": data["gates"]})
    assert policy.gates == gates
    assert policy.gate_names(1) == ("structural", "sufficiency")
    assert policy.gate_names(2) == ()


def test_policy_and_gates_round_trip_through_plain_data() -> None:
    policy = LoopPolicy(max_attempts=3, phase2_rejections_before_restart=1)
    assert LoopPolicy.from_mapping(policy.to_mapping()) == policy
    assert gates_from_mapping(g.to_mapping() for g in DEFAULT_GATES) == DEFAULT_GATES


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"max_attempts": 0}, "max_attempts=0"),
        ({"max_attempts": -3}, "max_attempts=-3"),
        ({"max_attempts": "6"}, "'6'"),
        ({"max_attempts": True}, "True"),
        ({"phase2_rejections_before_restart": 0}, "phase2_rejections_before_restart=0"),
        ({"max_tries": 5}, "max_tries"),
        ({"gates": [{"name": "g", "phase": 1, "kind": "rule"}] * 2}, "twice"),
    ],
)
def test_invalid_loop_policy_is_a_config_error(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        LoopPolicy.from_mapping(data)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"name": "g", "phase": 1, "kind": "audio", "roles": ["x"]}, "kind='audio'"),
        ({"name": "g", "phase": 3, "kind": "rule"}, "phase=3"),
        ({"name": "g", "phase": 1, "kind": "text", "roles": ["x"], "reject_rule": "most"}, "most"),
        ({"name": "g", "phase": 1, "kind": "text"}, "at least one model role"),
        ({"name": "g", "phase": 1, "kind": "rule", "roles": ["x"]}, "calls no model"),
        ({"name": "g", "phase": 1, "kind": "text", "roles": "x"}, "list of role names"),
        ({"name": "", "phase": 1, "kind": "rule"}, "non-empty"),
        ({"phase": 1, "kind": "rule"}, "lacks"),
        ({"name": "g", "phase": 1, "kind": "rule", "cost": 3}, "cost"),
    ],
)
def test_invalid_gate_is_a_config_error(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        GateSpec.from_mapping(data)


def test_duplicate_gate_in_one_phase_is_a_config_error() -> None:
    gate = {"name": "structural", "phase": 1, "kind": "rule"}
    with pytest.raises(ConfigError, match="twice"):
        gates_from_mapping([gate, gate])


def test_gate_order_rejects_an_unknown_phase() -> None:
    with pytest.raises(ConfigError, match="phase=3"):
        gate_order(DEFAULT_GATES, 3)  # type: ignore[arg-type]


def test_every_gate_of_the_paper_is_registered_with_its_spec() -> None:
    """The verifier's table and the policy's gates are one table: the registered gates are the
    paper's, in its order, and a verifier built on them has one check per (gate, phase)."""
    from agents.gates import VerifierAgent, registered_gates
    from agents.workers import GenerationLimits, ModelRunner, RoleModels

    assert registered_gates() == DEFAULT_GATES
    verifier = VerifierAgent(
        ModelRunner(recorder=None, model_for=lambda _m: None),  # type: ignore[arg-type]
        RoleModels(),
        GenerationLimits(),
    )
    assert set(verifier.checks()) == {(g.name, g.phase) for g in DEFAULT_GATES}


@pytest.mark.parametrize(
    ("gate", "fragment"),
    [
        (GateSpec("nowhere", 1, "rule"), "no registered check"),
        (GateSpec("structural", 1, "text", ("a",)), "differs from the registered"),
    ],
)
def test_a_policy_gate_the_table_cannot_run_is_a_config_error(
    gate: GateSpec, fragment: str
) -> None:
    from agents.gates import VerifierAgent
    from agents.workers import GenerationLimits, ModelRunner, RoleModels

    with pytest.raises(ConfigError, match=fragment):
        VerifierAgent(
            ModelRunner(recorder=None, model_for=lambda _m: None),  # type: ignore[arg-type]
            RoleModels(),
            GenerationLimits(),
            gates=(gate,),
        )
