"""A run is its own record: its definition (gates in order, each role's model, template and
schemas, frame plans, loop policy, prices) is recorded when it starts, and replay, resume and the
fleet build the run from it, not from the code and settings of the day. Code that cannot honour
a recorded run stops before any call and names the difference; changing a run's definition is an
explicit, recorded step (``curate --run R --upgrade``).

The gate packages here are the documented extension point (``models.gate_packages``): a module of
a package on the Python path, found through the settings."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agents.gates
import agents.gates.table
import agents.prompts
import tools.contracts.roles
from agents.gates import load_gate_packages
from agents.run_spec import RunSpec, recorded_spec, unhonoured
from playlisteval import runs
from playlisteval.app import App, curation_config
from playlisteval.cli import EXIT_DEFINITION
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.errors import RunDefinitionMismatch
from store.events import (
    CallRecorded,
    GateRequested,
    RunStarted,
    RunUpgraded,
    run_stream,
    seed_stream,
)
from tools.contracts.roles import ROLES

SECOND_LOOK = "second_look"
# A rule gate in a package of its own: it passes every QA (its verdict is in the log), so a run
# that has it asks it once per Phase I attempt.
SECOND_LOOK_SOURCE = f"""
from agents.gates import GateCall, Verdict, register_gate
from policies.attempts import GateSpec


@register_gate(GateSpec({SECOND_LOOK!r}, 1, "rule"))
async def second_look(call: GateCall) -> Verdict:
    return Verdict(True, "looked again: nothing more to say")
"""

JUDGE_MODEL = "gemini-3.1-pro"  # priced, and no paper role's default
# A gate that calls a model of its own: its role, the role's slot and template; ``{role}`` is
# the role's name (renamed by a later version of the package).
JUDGE_SOURCE = """
from pathlib import Path
from typing import Literal

from agents.gates import GateCall, Verdict, register_gate
from agents.workers import qa_text
from policies.attempts import GateSpec
from tools.contracts.roles import (
    Frozen, ModelSlot, OfflineCall, RoleContext, RoleSpec, register_role, register_slot,
)


class ClarityContext(RoleContext):
    role: Literal["{role}"] = "{role}"
    question: str


class ClarityVerdict(Frozen):
    clear: bool
    reason: str


def offline_clarity(call: OfflineCall[ClarityContext]) -> ClarityVerdict:
    return ClarityVerdict(clear=True, reason="it names the moments it asks about")


ROLE = register_role(
    RoleSpec(
        "{role}",
        ClarityContext,
        ClarityVerdict,
        video=False,
        max_output_tokens=1024,
        prompt=Path(__file__).with_name("clarity.md"),
        offline=offline_clarity,
    )
)
SLOT = register_slot(ModelSlot("clarity_judge", ("{role}",), "{model}", "Judges the question."))


@register_gate(GateSpec("clarity", 1, "text", ("clarity_judge",)))
async def clarity(call: GateCall) -> Verdict:
    verdict = await call.ask(
        ROLE, call.models.model(SLOT.key), ClarityContext(question=call.qa.question)
    )
    return Verdict(verdict.clear, verdict.reason, "" if verdict.clear else qa_text(call.qa))
"""
JUDGE_TEMPLATE = "Say whether the question below tells a reader which moment it asks about.\n"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def scratch_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The gate table as a copy, and the roles and slots a test declares forgotten after it."""
    load_gate_packages()
    copy = dict(agents.gates.table.GATES)
    monkeypatch.setattr(agents.gates.table, "GATES", copy)
    monkeypatch.setattr(agents.gates, "GATES", copy)
    roles = set(ROLES)
    loaded = set(agents.gates.table._LOADED)
    yield
    for name in set(ROLES) - roles:
        tools.contracts.roles.unregister_role(name)
    agents.gates.table._LOADED.intersection_update(loaded)


def write_package(root: Path, name: str, modules: dict[str, str]) -> Path:
    """A gate package ``name`` of ``modules`` (file name → text) under ``root``."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for file, text in modules.items():
        (folder / file).write_text(textwrap.dedent(text))
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        sys.modules.pop(module)
    return folder


@pytest.fixture
def packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch_tables: None
) -> Iterator[Path]:
    """A folder on ``sys.path`` for gate packages; each package's modules forgotten after."""
    root = tmp_path / "gate-packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for module in [m for m in sys.modules if m.startswith("toy_")]:
        sys.modules.pop(module)


def judge_modules(role: str = "clarity_judge") -> dict[str, str]:
    source = JUDGE_SOURCE.replace("{role}", role).replace("{model}", JUDGE_MODEL)
    return {"clarity.py": source, "clarity.md": JUDGE_TEMPLATE}


def add_settings(home: Path, text: str) -> None:
    settings = home / SETTINGS_FILE
    settings.write_text(settings.read_text() + "\n" + text)


def seed_events(app: App, run_id: str) -> list[object]:
    return [s.event() for s in app.events.read_all(stream_prefix=seed_stream(run_id, ""))]


# -- a gate package added after a run --------------------------------------------------------------


def test_a_gate_added_after_a_run_neither_breaks_its_replay_nor_slips_into_its_resume(
    workspace: Path, packages: Path
) -> None:
    home = workspace
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=2)
    run_id = report.run_id
    # The user adds a gate package to the workspace (docs/development.md, extension points).
    write_package(packages, "toy_second", {"looks.py": SECOND_LOOK_SOURCE})
    add_settings(home, '[models]\ngate_packages = ["toy_second"]\n')

    # A strict replay follows the run's record: exact, no call, the new gate never asked.
    code, out = invoke("replay", run_id, "--home", str(home))
    assert code == 0, out
    assert "the log replays exactly" in out
    assert "0 model calls" in out

    # The counterfactual under today's code runs the new gate, and says it is one.
    code, out = invoke("replay", run_id, "--against-today", "--home", str(home))
    assert code == 0, out
    assert "counterfactual replay" in out
    assert "today's code and settings" in out
    assert "not the run as recorded" in out

    # A resume would decide under a mix of two definitions: refused before anything is written.
    with App(load_settings(home)) as app:
        before = app.events.read_all()
    code, out = invoke("curate", "--run", run_id, "--home", str(home))
    assert code == EXIT_DEFINITION, out
    text = " ".join(out.split())
    assert f"today's code adds gate '{SECOND_LOOK}' (phase 1)" in text
    assert f"curate --run {run_id} --upgrade" in text
    with App(load_settings(home)) as app:
        assert app.events.read_all() == before  # no reservation, no event: nothing

        # --upgrade records the change, then goes on under today's definition.
        runs.resume(app, run_id, upgrade=True)
        upgraded = [
            e
            for s in app.events.read_stream(run_stream(run_id))
            if isinstance(e := s.event(), RunUpgraded)
        ]
        assert len(upgraded) == 1
        assert any(SECOND_LOOK in line for line in upgraded[0].differences)
        assert (
            recorded_spec(app.events.read_stream(run_stream(run_id))).gates
            == RunSpec.from_json(upgraded[0].spec).gates
        )
        # A resume after the upgrade goes on without a word: the run's definition is today's.
        runs.resume(app, run_id)


def test_an_upgraded_run_is_decided_under_each_definition_in_turn_and_replays_exactly(
    workspace: Path, packages: Path
) -> None:
    home = workspace
    with App(load_settings(home)) as app:
        # A cap that stops the run part-way (offline calls are priced as the live models).
        report = runs.curate(app, budget_usd=0.1, max_seeds=3)
        assert report.outcome == "budget", report
        run_id = report.run_id
        asked_before = {e.gate for e in seed_events(app, run_id) if isinstance(e, GateRequested)}
    assert SECOND_LOOK not in asked_before
    write_package(packages, "toy_second", {"looks.py": SECOND_LOOK_SOURCE})
    add_settings(home, '[models]\ngate_packages = ["toy_second"]\n')
    with App(load_settings(home)) as app:
        runs.resume(app, run_id, budget_usd=20.0, upgrade=True)
        events = seed_events(app, run_id)
        # After the upgrade the new gate judged the seeds' Phase I outputs.
        assert any(isinstance(e, GateRequested) and e.gate == SECOND_LOOK for e in events)
        replayed = runs.replay_strict(app, run_id)
    assert replayed.model_calls == 0
    assert replayed.verdict is not None
    # The part before the upgrade re-derives without the new gate, the part after with it.
    assert replayed.verdict.ok, replayed.verdict.problems()[:3]
    assert sorted(replayed.report.accepted) == sorted(replayed.original_accepted)


# -- what today's code cannot honour: three messages -----------------------------------------------


@pytest.fixture
def judged_run(workspace: Path, packages: Path) -> tuple[Path, str]:
    """A finished run of one seed with the judging package's gate (a role of its own)."""
    write_package(packages, "toy_judging", judge_modules())
    add_settings(workspace, '[models]\ngate_packages = ["toy_judging"]\n')
    with App(load_settings(workspace)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=1)
        calls = [e for e in seed_events(app, report.run_id) if isinstance(e, CallRecorded)]
    judge_calls = [c for c in calls if c.role == "clarity_judge"]
    assert judge_calls
    # Each call records the template it was rendered from, as the run's definition holds it.
    with App(load_settings(workspace)) as app:
        first = app.events.read_stream(run_stream(report.run_id))[0].event()
    assert isinstance(first, RunStarted)
    assert first.spec is not None
    spec = RunSpec.from_json(first.spec)
    assert spec.roles is not None
    assert {c.template for c in judge_calls} == {spec.roles["clarity_judge"].template}
    assert all(c.template for c in calls)
    return workspace, report.run_id


def _refused(home: Path, run_id: str) -> str:
    """The line a strict replay and a resume of the run stop with (the same difference)."""
    with App(load_settings(home)) as app:
        before = app.events.read_all()
        with pytest.raises(RunDefinitionMismatch) as replay_error:
            runs.replay_strict(app, run_id)
        with pytest.raises(RunDefinitionMismatch) as resume_error:
            runs.resume(app, run_id)
        after = app.events.read_all()
    assert after == before  # stopped before any call, reservation or event
    code, out = invoke("replay", run_id, "--home", str(home))
    assert code == EXIT_DEFINITION, out
    assert "--against-today" in out
    assert resume_error.value.differences[0] in " ".join(str(resume_error.value).split())
    return str(replay_error.value)


def test_a_changed_prompt_template_stops_replay_and_resume_before_any_call(
    judged_run: tuple[Path, str], packages: Path
) -> None:
    home, run_id = judged_run
    (packages / "toy_judging" / "clarity.md").write_text(JUDGE_TEMPLATE + "Be brief.\n")
    agents.prompts._template_file.cache_clear()
    message = _refused(home, run_id)
    assert "role 'clarity_judge''s prompt template changed since the run was recorded" in message


def test_a_changed_paper_template_is_named_too(
    judged_run: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, run_id = judged_run
    original = agents.prompts.template

    def edited(name: str) -> str:
        text = original(name)
        return text + "\nAnswer in one word.\n" if name == "transcript_matcher" else text

    monkeypatch.setattr(agents.prompts, "template", edited)
    message = _refused(home, run_id)
    assert "role 'transcript_matcher''s prompt template changed" in message


def test_a_renamed_role_stops_replay_and_resume_before_any_call(
    judged_run: tuple[Path, str], packages: Path
) -> None:
    home, run_id = judged_run
    # The package's next version calls its role otherwise; its gate and slot keep their names.
    tools.contracts.roles.unregister_role("clarity_judge")
    agents.gates.table.GATES.pop(("clarity", 1))
    agents.gates.table._LOADED.clear()
    write_package(packages, "toy_judging", judge_modules(role="clarity_checker"))
    load_gate_packages(["toy_judging"])
    message = _refused(home, run_id)
    assert "its role 'clarity_judge' is not declared today" in message


def test_a_gate_gone_stops_replay_and_resume_before_any_call(
    judged_run: tuple[Path, str],
) -> None:
    home, run_id = judged_run
    tools.contracts.roles.unregister_role("clarity_judge")
    agents.gates.table.GATES.pop(("clarity", 1))
    settings = home / SETTINGS_FILE
    settings.write_text(settings.read_text().replace('"toy_judging"', ""))
    message = _refused(home, run_id)
    assert "its gate 'clarity' (phase 1) is not registered today" in message


def test_todays_definition_of_a_run_honours_itself(tmp_path: Path) -> None:
    spec = RunSpec.today(curation_config(load_settings(tmp_path)))
    assert unhonoured(spec) == []
    assert spec.differences(RunSpec.from_json(spec.to_json())) == []
    assert RunSpec.from_json(spec.to_json()).digest == spec.digest


# -- seeded random interleavings: stops, upgrades and resumes never break a run's replay -----------


@pytest.mark.parametrize(
    ("store", "seed"),
    # Seeds chosen for variety: no upgrade (2), an upgrade at the second resume (10), at the
    # first (7, on PostgreSQL).
    [("sqlite", 2), ("sqlite", 10), pytest.param("postgres", 7, marks=pytest.mark.postgres)],
)
def test_random_stops_upgrades_and_resumes_keep_the_run_replayable_and_under_its_caps(
    workspace: Path, packages: Path, pg_schema: str, store: str, seed: int
) -> None:
    """A run stopped by random caps, resumed under random larger ones, upgraded once to a
    definition with one more gate at a random point (or not at all): after every step, its
    spend is within the cap it had, nothing is decided twice, and a strict replay re-derives
    the whole log exactly (each part under the definition it was decided by)."""
    import random

    from tests.conftest import PG_URL

    rng = random.Random(seed)
    if store == "postgres":
        add_settings(workspace, f'[store]\nurl = "{PG_URL}"\nschema_name = "{pg_schema}"\n')
    write_package(packages, "toy_second", {"looks.py": SECOND_LOOK_SOURCE})
    upgrade_at = rng.choice([None, 1, 2])
    cap = round(rng.uniform(0.03, 0.08), 3)
    upgraded = False
    with App(load_settings(workspace)) as app:
        report = runs.curate(app, budget_usd=cap, max_seeds=3)
        run_id = report.run_id
    for step in range(1, 6):
        if report.outcome == "completed":
            break
        assert report.spent_micros <= round(cap * 1_000_000)
        upgrade = step == upgrade_at
        if upgrade:
            add_settings(workspace, '[models]\ngate_packages = ["toy_second"]\n')
            upgraded = True
        cap = round(cap + rng.uniform(0.03, 0.12), 3)
        with App(load_settings(workspace)) as app:
            report = runs.resume(app, run_id, budget_usd=cap, upgrade=upgrade)
            replayed = runs.replay_strict(app, run_id)
        assert report.spent_micros <= round(cap * 1_000_000)
        assert replayed.model_calls == 0
        assert replayed.verdict is not None
        assert replayed.verdict.ok, (step, replayed.verdict.problems()[:3])
    with App(load_settings(workspace)) as app:
        report = runs.resume(app, run_id, budget_usd=cap + 10.0)
        replayed = runs.replay_strict(app, run_id)
        events = seed_events(app, run_id)
        run_log = app.events.read_stream(run_stream(run_id))
    assert report.outcome == "completed"
    assert replayed.verdict is not None
    assert replayed.verdict.ok, replayed.verdict.problems()[:3]
    # Each seed ended once; the new gate was asked only if, and after, the run was upgraded.
    ends = [e for e in events if type(e).__name__ in ("ItemAccepted", "SeedDiscarded")]
    assert len(ends) == 3
    upgrades = [s for s in run_log if s.type == "RunUpgraded"]
    asked = any(isinstance(e, GateRequested) and e.gate == SECOND_LOOK for e in events)
    assert len(upgrades) == (1 if upgraded else 0)
    if not upgraded:
        assert not asked
