"""A fleet across two code versions on the real PostgreSQL (a rolling upgrade): one worker runs
today's code, the other the same code plus a gate package. Each run's seeds are decided under
the definition the run recorded; a worker whose code cannot honour a run never takes its seeds
(and says so once, in its log and in ``playlisteval fleet``), and the other worker takes them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agents.gates
import agents.gates.table
import tools.contracts.roles
from agents.fleet import TOTAL_ACCOUNT, start_run
from agents.gates import load_gate_packages
from playlisteval import runs
from playlisteval.app import App, curation_config
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from store.events import GateRequested, seed_stream, usd_to_micros
from store.ledger import spend
from tests.test_fleet import fleet_home, many_seeds
from tools.contracts.roles import ROLES

pytestmark = pytest.mark.postgres

PACKAGE = "toy_fleet_second"
GATE = "second_look"
SOURCE = f"""
from agents.gates import GateCall, Verdict, register_gate
from policies.attempts import GateSpec


@register_gate(GateSpec({GATE!r}, 1, "rule"))
async def second_look(call: GateCall) -> Verdict:
    return Verdict(True, "looked again")
"""
PER_RUN = 6
CAP_USD = 5.0


@pytest.fixture
def package_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The gate package on disk and on this process's path; the gate table as a copy."""
    root = tmp_path / "packages"
    (root / PACKAGE).mkdir(parents=True)
    (root / PACKAGE / "looks.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(root))
    load_gate_packages()
    copy = dict(agents.gates.table.GATES)
    monkeypatch.setattr(agents.gates.table, "GATES", copy)
    monkeypatch.setattr(agents.gates, "GATES", copy)
    loaded = set(agents.gates.table._LOADED)
    roles = set(ROLES)
    yield root
    for name in set(ROLES) - roles:
        tools.contracts.roles.unregister_role(name)
    agents.gates.table._LOADED.intersection_update(loaded)
    for module in [m for m in sys.modules if m.startswith(PACKAGE)]:
        sys.modules.pop(module)


def start(home: Path, name: str, logs: Path, extra: dict[str, str]) -> subprocess.Popen[bytes]:
    """A ``playlisteval worker`` process with ``extra`` in its environment."""
    env = {
        **os.environ,
        "PLAYLISTEVAL_HOME": str(home),
        "PLAYLISTEVAL_LOG_LEVEL": "info",
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "playlisteval", "worker", "--home", str(home), "--name", name],
        stdout=(logs / f"{name}.log").open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
    )


def test_two_code_versions_each_decide_only_the_runs_they_can_honour(
    workspace: Path, pg_schema: str, tmp_path: Path, package_root: Path
) -> None:
    home = fleet_home(workspace, pg_schema, cap_usd=CAP_USD, latency=0.02)
    cap = usd_to_micros(CAP_USD)
    with App(load_settings(home)) as app:
        seeds = many_seeds(app, 2 * PER_RUN)
        app.catalog.replace_seeds(seeds)  # in the catalogue too: a replay reads them there
        app.set_budget_caps()
        # Run "old" is opened by today's code; run "new" by the code with the gate package.
        start_run(
            app.events,
            app.queue(),
            "old",
            seeds[:PER_RUN],
            budget_micros=cap,
            per_seed_micros=None,
            config=curation_config(app.settings),
        )
    with App(load_settings(home, models={"gate_packages": [PACKAGE]})) as app:
        newer = curation_config(app.settings)
        assert GATE in newer.policy.gate_names(1)
        start_run(
            app.events,
            app.queue(),
            "new",
            seeds[PER_RUN:],
            budget_micros=cap,
            per_seed_micros=None,
            config=newer,
        )

    logs = tmp_path / "logs"
    logs.mkdir()
    upgraded = {
        "PYTHONPATH": os.pathsep.join([str(package_root), os.environ.get("PYTHONPATH", "")]),
        "PLAYLISTEVAL_MODELS__GATE_PACKAGES": f'["{PACKAGE}"]',
    }
    workers = {
        "w-old": start(home, "w-old", logs, {}),
        "w-new": start(home, "w-new", logs, upgraded),
    }
    try:
        for name, process in workers.items():
            assert process.wait(timeout=600) == 0, (logs / f"{name}.log").read_text()[-3000:]
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    old_log = (logs / "w-old.log").read_text()
    with App(load_settings(home, models={"gate_packages": [PACKAGE]})) as app:
        items = {item.id: item for item in app.queue().items(kind="seed")}
        workers_seen = {row["name"]: row for row in app.queue().workers()}
        everything = app.events.read_all()
        replays = {run_id: runs.replay_strict(app, run_id) for run_id in ("old", "new")}
        total = app.accounts().account(TOTAL_ACCOUNT)

    # Every seed ended; the new run's seeds were all taken by the worker that can honour it.
    assert len(items) == 2 * PER_RUN
    assert {item.state for item in items.values()} == {"done"}
    new_items = [i for i in items.values() if i.run_id == "new"]
    assert len(new_items) == PER_RUN
    assert {(i.owner, i.claims) for i in new_items} == {("w-new", 1)}
    # The old code said once why it left them, in its log and in its heartbeat.
    assert old_log.count("run refused") == 1
    assert f"'{GATE}'" in old_log
    assert "new" in workers_seen["w-old"]["info"]["refused_runs"]
    assert workers_seen["w-new"]["info"]["refused_runs"] == {}
    fleet_out = " ".join(CliRunner().invoke(cli_app, ["fleet", "--home", str(home)]).output.split())
    assert "worker w-old does not take run new's seeds" in fleet_out

    # Each seed was decided under its own run's definition, whichever worker decided it: the new
    # gate judged every Phase I output of the new run and none of the old run.
    for item in items.values():
        stream = seed_stream(str(item.run_id), item.id.removeprefix("seed:"))
        asked = [
            e.gate
            for s in everything
            if s.stream == stream and isinstance(e := s.event(), GateRequested) and e.phase == 1
        ]
        if item.run_id == "new":
            assert GATE in asked, (item.id, asked)
        else:
            assert GATE not in asked, (item.id, asked)

    # Spend under the cap, in the log and in the shared account.
    spent = spend(s for s in everything if s.stream.startswith("seed-"))
    assert 0 < spent.spent_micros <= cap
    assert total is not None
    assert total.spent_micros <= cap
    # And both runs replay exactly, each under its own definition.
    for run_id, replayed in replays.items():
        assert replayed.model_calls == 0, run_id
        assert replayed.verdict is not None
        assert replayed.verdict.ok, (run_id, replayed.verdict.problems()[:3])
