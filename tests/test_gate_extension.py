"""A gate is one spec and one check, registered the way the paper's gates are: a gate defined in a
module of its own runs in the real loop, in its cost place, and its rejection reaches the
generator's next prompt. A gate that calls a model of its own is three files — its module (the
role's context, output, prompt, offline answer and model slot, and the check), its prompt
template and its test — found through ``models.gate_packages``."""

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
import agents.gates.table
import tools.contracts.roles
from agents.gates import load_gate_packages, registered_gates
from agents.prompts import role_template
from playlisteval import runs
from playlisteval.app import App, model_factory, role_models
from playlisteval.settings import load_settings
from policies.attempts import GateSpec
from store.errors import ConfigError
from store.events import (
    AttemptStarted,
    CallRecorded,
    GatePassed,
    GateRejected,
    GateRequested,
    RunStarted,
    run_stream,
    seed_stream,
)
from tools.contracts.roles import ROLES, Phase1Context, parse_context

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
def scratch_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The gate table as a copy (the paper's gates found first), and the roles and model slots
    a test declares forgotten after it: no other test sees a toy."""
    load_gate_packages()
    copy = dict(agents.gates.table.GATES)
    monkeypatch.setattr(agents.gates.table, "GATES", copy)
    monkeypatch.setattr(agents.gates, "GATES", copy)
    roles = set(ROLES)
    yield
    for name in set(ROLES) - roles:
        tools.contracts.roles.unregister_role(name)  # and the slots that cast it


@pytest.fixture
def toy_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch_tables: None
) -> Iterator[ModuleType]:
    """The toy gate's module, imported from a folder on ``sys.path`` into the scratch tables."""
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
    assert role_template(role).strip()


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_paper_role_has_an_offline_answer(role: str) -> None:
    assert ROLES[role].offline is not None


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


# -- a gate that calls a model of its own ---------------------------------------------------------

JUDGE_PACKAGE = "toy_judging"
JUDGE_MODEL = "gemini-3.1-pro"  # priced (policies/prices.toml), and no paper role's default
UNCLEAR = "the question does not say which moment of each segment it asks about"
# A namespace package of two files: the gate module (its role, the role's model slot, its offline
# answer and its check) and the role's prompt template beside it. This test is the third file.
JUDGE_SOURCE = f"""
from pathlib import Path
from typing import Literal

from agents.gates import GateCall, Verdict, register_gate
from agents.workers import qa_text
from policies.attempts import GateSpec
from tools.contracts.roles import (
    Frozen, ModelSlot, OfflineCall, RoleContext, RoleSpec, register_role, register_slot,
)

UNCLEAR = {UNCLEAR!r}


class ClarityContext(RoleContext):
    role: Literal["clarity_judge"] = "clarity_judge"
    question: str
    told_before: bool = False


class ClarityVerdict(Frozen):
    clear: bool
    reason: str


def offline_clarity(call: OfflineCall[ClarityContext]) -> ClarityVerdict:
    # Unclear until the generator has been told so once: the loop must carry the rejection.
    if call.context.told_before:
        return ClarityVerdict(clear=True, reason="it names the moments it asks about")
    return ClarityVerdict(clear=False, reason=UNCLEAR)


CLARITY_JUDGE = register_role(
    RoleSpec(
        "clarity_judge",
        ClarityContext,
        ClarityVerdict,
        video=False,
        max_output_tokens=1024,
        prompt=Path(__file__).with_name("clarity_judge.md"),
        offline=offline_clarity,
    )
)
CLARITY_MODEL = register_slot(
    ModelSlot("clarity_judge", ("clarity_judge",), {JUDGE_MODEL!r}, "Judges the question.")
)


@register_gate(GateSpec("clarity", 1, "text", ("clarity_judge",)))
async def clarity(call: GateCall) -> Verdict:
    told = any(f.gate == "clarity" for f in call.seed.feedback)
    verdict = await call.ask(
        CLARITY_JUDGE,
        call.models.model(CLARITY_MODEL.key),
        ClarityContext(question=call.qa.question, told_before=told),
    )
    return Verdict(verdict.clear, verdict.reason, "" if verdict.clear else qa_text(call.qa))
"""
JUDGE_TEMPLATE = "Say whether the question below tells a reader which moment it asks about.\n"


@pytest.fixture
def judge_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch_tables: None
) -> Iterator[str]:
    """The toy judging package on ``sys.path`` (not imported: the settings name it)."""
    folder = tmp_path / "gate-packages" / JUDGE_PACKAGE
    folder.mkdir(parents=True)
    (folder / "clarity.py").write_text(textwrap.dedent(JUDGE_SOURCE))
    (folder / "clarity_judge.md").write_text(JUDGE_TEMPLATE)
    monkeypatch.syspath_prepend(str(folder.parent))
    for name in (JUDGE_PACKAGE, f"{JUDGE_PACKAGE}.clarity"):
        sys.modules.pop(name, None)
    yield JUDGE_PACKAGE
    for name in (JUDGE_PACKAGE, f"{JUDGE_PACKAGE}.clarity"):
        sys.modules.pop(name, None)


def test_a_gate_package_with_a_model_of_its_own_runs_through_the_runner_and_replays(
    workspace: Path, judge_package: str
) -> None:
    settings = load_settings(workspace, models={"gate_packages": [judge_package]})
    # Named in the settings, the package is found: its gate, role and slot are declared.
    assert JUDGE_MODEL in role_models(settings).all_models()
    assert role_template("clarity_judge") == JUDGE_TEMPLATE
    with App(settings) as app:
        assert (
            GateSpec("clarity", 1, "text", ("clarity_judge",)) in app.curator().config.policy.gates
        )
        report = runs.curate(app, budget_usd=None, max_seeds=1)
        started = app.events.read_stream(run_stream(report.run_id))[0].event()
        (seed_id,) = started.seeds if isinstance(started, RunStarted) else ()
        events = [s.event() for s in app.events.read_stream(seed_stream(report.run_id, seed_id))]
        replayed = runs.replay_strict(app, report.run_id)

    assert isinstance(started, RunStarted)
    # The run recorded the slot's model and priced it before it opened.
    assert started.models["clarity_judge"] == JUDGE_MODEL
    assert JUDGE_MODEL in started.settings["prices"]
    # Called through the model runner: a recorded call of the new role, by its slot's model.
    calls = [e for e in events if isinstance(e, CallRecorded) and e.role == "clarity_judge"]
    assert calls, "the clarity judge was never called"
    assert {(c.model, c.gate, c.phase, c.offline) for c in calls} == {
        (JUDGE_MODEL, "clarity", 1, True)
    }
    # Its verdicts counted: rejected once, the reason fed back, then passed on a later attempt.
    rejected = [e for e in events if isinstance(e, GateRejected) and e.gate == "clarity"]
    passed = [e for e in events if isinstance(e, GatePassed) and e.gate == "clarity"]
    assert [r.reason for r in rejected] == [UNCLEAR]
    assert passed, "the clarity gate never passed"
    assert passed[0].attempt > rejected[0].attempt
    retry = next(e for e in events[events.index(rejected[0]) :] if isinstance(e, AttemptStarted))
    assert f"clarity: {UNCLEAR}" in retry.feedback
    # A replay finds the same package's gate and asks the recorded model: nothing is called.
    assert replayed.model_calls == 0
    assert replayed.verdict is not None
    assert replayed.verdict.ok, replayed.verdict.problems()[:3]


def test_a_slot_of_a_gate_package_is_set_under_models_extensions_and_priced_before_a_run(
    workspace: Path, judge_package: str
) -> None:
    settings = load_settings(
        workspace,
        models={"gate_packages": [judge_package], "extensions": {"clarity_judge": "toy-unpriced"}},
    )
    models = role_models(settings)
    assert models.model("clarity_judge") == "toy-unpriced"
    assert models.playing()["clarity_judge"] == ("toy-unpriced",)
    with App(settings) as app, pytest.raises(ConfigError, match="toy-unpriced"):
        runs.curate(app, budget_usd=None, max_seeds=1)


def test_an_extension_model_no_gate_package_declares_is_a_config_error(workspace: Path) -> None:
    settings = load_settings(workspace, models={"extensions": {"clarity_judge": "gpt-5.4"}})
    with pytest.raises(ConfigError, match="no gate package declares a model slot 'clarity_judge'"):
        role_models(settings)


def test_a_gate_package_that_does_not_import_is_a_config_error(workspace: Path) -> None:
    settings = load_settings(workspace, models={"gate_packages": ["no_such_gate_package"]})
    with pytest.raises(ConfigError, match="'no_such_gate_package' does not import"):
        role_models(settings)


def test_a_gate_naming_an_undeclared_model_slot_is_refused(scratch_tables: None) -> None:
    async def check(call: agents.gates.GateCall) -> agents.gates.Verdict:
        raise AssertionError("never run")

    with pytest.raises(ConfigError, match="undeclared model slot"):
        agents.gates.register_gate(GateSpec("toy_text", 1, "text", ("no_such_slot",)))(check)
