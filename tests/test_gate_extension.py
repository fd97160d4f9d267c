"""A gate is one spec and one check, registered the way the paper's gates are: a gate defined in a
module of its own runs in the real loop, in its cost place, and its rejection reaches the
generator's next prompt."""

from __future__ import annotations

import ast
import importlib
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agents.gates
from agents.gates import registered_gates
from agents.prompts import template
from playlisteval.app import App, model_factory
from playlisteval.settings import load_settings
from policies.attempts import GateSpec
from store.errors import ConfigError
from store.events import AttemptStarted, GateRejected, GateRequested, seed_stream
from tools.roles import ROLES, Phase1Context, parse_context

ROOT = Path(__file__).resolve().parent.parent
TOY_MODULE = "toy_gate_extension"
TOY_REASON = "the toy gate wants the question read once more (a toy rule, rejecting once)"

# A rule gate (no model): it rejects a seed's QA until its own rejection is in the seed's
# feedback, then passes, so the loop must carry the reason into the next attempt.
TOY_SOURCE = f"""
from agents.gates import GateCall, Verdict, register_gate
from agents.workers import qa_text
from policies.attempts import GateSpec

CALLS: list[tuple[str, int]] = []
REASON = {TOY_REASON!r}


@register_gate(GateSpec("toy_rule", 1, "rule"))
async def toy_rule(call: GateCall) -> Verdict:
    CALLS.append((call.seed.seed_id, call.request.attempt))
    if any(f.gate == "toy_rule" for f in call.seed.feedback):
        return Verdict(True, "told once is enough")
    return Verdict(False, REASON, qa_text(call.qa))
"""


@pytest.fixture
def toy_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The toy gate's module, imported from a folder on ``sys.path``; it registers into a copy of
    the gate table, so no other test sees it."""
    monkeypatch.setattr(agents.gates, "GATES", dict(agents.gates.GATES))
    folder = tmp_path / "extension"
    folder.mkdir()
    (folder / f"{TOY_MODULE}.py").write_text(textwrap.dedent(TOY_SOURCE))
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(TOY_MODULE, None)
    yield importlib.import_module(TOY_MODULE)
    sys.modules.pop(TOY_MODULE, None)


def _phase1_prompts(inner: Model, prompts: list[str]) -> Model:
    """The offline model, keeping every Phase I generator prompt it is sent."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[-1].parts[-1].content[0])  # type: ignore[union-attr,index]
        if isinstance(parse_context(prompt), Phase1Context):
            prompts.append(prompt)
        return await inner.request(messages, None, info.model_request_parameters)

    return FunctionModel(answer, model_name=inner.model_name)


def test_a_registered_gate_runs_in_the_loop_and_its_reason_reaches_the_next_prompt(
    workspace: Path, toy_gate: ModuleType
) -> None:
    assert registered_gates()[-1] == GateSpec("toy_rule", 1, "rule")
    with App(load_settings(workspace)) as app:
        offline = model_factory(app.settings)
        prompts: list[str] = []
        curator = app.curator()
        curator.model_for = lambda model_id: _phase1_prompts(offline(model_id), prompts)
        # What the run's policy lists is what runs: here every registered gate.
        policy = replace(curator.config.policy, gates=registered_gates())
        curator.config = replace(curator.config, policy=policy)
        seed = app.catalog.seeds()[0]
        anyio.run(lambda: curator.curate("toy", [seed], budget_micros=None))
        events = [s.event() for s in app.events.read_stream(seed_stream("toy", seed.id))]

    assert toy_gate.CALLS, "the toy gate was never called"
    # Rule gates run first, in the order they were registered: structural, then the toy.
    phase1 = ("structural", "toy_rule", "transcript_test", "parametric_test", "sufficiency")
    asked: list[list[str]] = []
    for event in events:
        if isinstance(event, AttemptStarted) and event.phase == 1:
            asked.append([])
        elif isinstance(event, GateRequested) and event.phase == 1:
            asked[-1].append(event.gate)
    assert any("toy_rule" in gates for gates in asked)
    assert all(tuple(gates) == phase1[: len(gates)] for gates in asked), asked

    rejection = next(e for e in events if isinstance(e, GateRejected) and e.gate == "toy_rule")
    assert rejection.reason == TOY_REASON
    assert rejection.rejected_output.startswith("Question: ")
    retry = next(e for e in events[events.index(rejection) :] if isinstance(e, AttemptStarted))
    assert f"toy_rule: {TOY_REASON}" in retry.feedback
    # The prompt of the attempt after the rejection tells the generator of it.
    told = [p for p in prompts if f"gate toy_rule: {TOY_REASON}" in p]
    assert told, "no Phase I prompt carried the toy gate's rejection"
    assert len(told) == len(prompts) - prompts.index(told[0])  # and every later prompt too


def test_a_gate_registered_twice_is_a_config_error(toy_gate: ModuleType) -> None:
    with pytest.raises(ConfigError, match="registered twice"):
        agents.gates.register_gate(GateSpec("toy_rule", 1, "rule"))(toy_gate.toy_rule.check)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_role_has_its_prompt_template(role: str) -> None:
    assert template(role).strip()


def _computed_getattr_dispatch(source: str) -> list[str]:
    """``getattr`` calls that find code by a computed name: a name built at run time (an
    f-string, a concatenation, a ``.format``), one looked up on ``self``, or one called at once."""
    found: list[str] = []
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
        ):
            continue
        target, name = node.args[0], node.args[1]
        if isinstance(name, ast.Constant):
            continue
        built = isinstance(name, ast.JoinedStr | ast.BinOp | ast.Call)
        on_self = isinstance(target, ast.Name) and target.id in ("self", "cls")
        if built or on_self or id(node) in called:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_agent_finds_code_by_a_computed_attribute_name() -> None:
    """Gates, roles and handlers are looked up in tables, never as ``getattr(self, f"…{name}")``."""
    offending = {
        str(path.relative_to(ROOT)): hits
        for path in sorted((ROOT / "agents").rglob("*.py"))
        if (hits := _computed_getattr_dispatch(path.read_text()))
    }
    assert not offending, offending


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('check = getattr(self, f"_gate_{gate}_{phase}")', True),  # the old gate dispatch
        ('check = getattr(self, "_gate_" + gate)', True),
        ("check = getattr(verifier, name)(seed, request)", True),
        ("value = getattr(self, name)", True),
        ("same = getattr(event, name) == getattr(expected, name)", False),  # reading fields
        ('gold = getattr(context, "gold_answer", None)', False),
    ],
)
def test_the_dispatch_check_tells_dispatch_from_reading_a_field(source: str, caught: bool) -> None:
    assert bool(_computed_getattr_dispatch(source)) is caught
