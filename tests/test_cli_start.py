"""The CLI starts light: importing it, or asking any command for its help, loads none of the
workspace's machinery (settings, store, model providers, torch); every command still shows its
help. How fast it starts is measured in bench/cli_start.py, not here."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from playlisteval.cli import SMOKE_HELP, app
from playlisteval.cli.commands import prose

ROOT = Path(__file__).resolve().parent.parent

#: Modules that take seconds to import: none of them may load before a command runs.
HEAVY = (
    "torch",
    "pydantic_ai.agent",
    "sqlalchemy",
    "playlisteval.settings",
    "playlisteval.app",
    "store.catalog",
)
#: What only reading a command's options or running the group callback loads: asking a
#: command for its help is answered before either (``CommandGroup.parse_args``).
OPTIONS_READ = ("pydantic", "structlog", "asyncio")


def _loaded_after(code: str, modules: tuple[str, ...] = HEAVY) -> dict[str, bool]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    script = (
        f"import json, sys\n{code}\n"
        f"print(json.dumps({{m: m in sys.modules for m in {list(modules)!r}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_cli_imports_neither_torch_nor_the_agents() -> None:
    script = (
        "import playlisteval.cli, sys; "
        "print('torch' in sys.modules, 'pydantic_ai.agent' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    "args", [["--help"], ["status", "--help"], ["store", "verify", "--help"]], ids=" ".join
)
def test_asking_for_help_loads_no_settings_store_or_models(args: list[str]) -> None:
    """The group callback runs before a subcommand's --help is parsed: it must not open or
    load anything either."""
    code = (
        "from playlisteval.cli import app\n"
        f"try:\n    app({args!r}, prog_name='playlisteval')\n"
        "except SystemExit as done:\n    assert done.code == 0, done.code"
    )
    assert _loaded_after(code) == dict.fromkeys(HEAVY, False)


@pytest.mark.parametrize(
    "args",
    [["--help"], ["status", "--help"], ["store", "verify", "--help"], ["annotations", "--help"]],
    ids=" ".join,
)
def test_a_commands_help_reads_no_option_and_runs_no_callback(args: list[str]) -> None:
    """Help is answered before the group's ``--home`` is read (typer coerces an option through
    pydantic) and before its callback sets the logs up (structlog)."""
    code = (
        "from playlisteval.cli import app\n"
        f"try:\n    app({args!r}, prog_name='playlisteval')\n"
        "except SystemExit as done:\n    assert done.code == 0, done.code"
    )
    assert _loaded_after(code, OPTIONS_READ) == dict.fromkeys(OPTIONS_READ, False)


@pytest.mark.parametrize("path", [["status"], ["store", "verify"], ["annotations", "invite"]])
def test_help_answered_early_is_the_help_typer_gives(path: list[str], tmp_path: Path) -> None:
    """The early answer prints what the full parse prints: a root option before the command
    (``--home``) takes typer's own path, which reads the option, runs the callback, then the
    command's ``--help``."""
    runner = CliRunner()
    early = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"}, prog_name="pe")
    full = runner.invoke(
        app, ["--home", str(tmp_path), *path, "--help"], env={"COLUMNS": "100"}, prog_name="pe"
    )
    assert early.exit_code == full.exit_code == 0, early.output + full.output
    assert f"Usage: pe {' '.join(path)} [OPTIONS]" in early.output
    assert early.output == full.output


def test_an_option_value_that_looks_like_help_is_not_taken_for_it() -> None:
    """Only command names (or arguments) then ``--help`` are answered early: after an option,
    ``--help`` is typer's to read, and here ``--domain`` takes it as its value, so the query
    is missing, as typer says without the early answer."""
    said = CliRunner().invoke(app, ["search", "--domain", "--help"], env={"COLUMNS": "100"})
    assert said.exit_code == 2, said.output
    assert "Missing argument 'query'" in said.output


def _command_paths() -> list[list[str]]:
    """Every command's words (``["status"]``, ``["store", "verify"]``), groups included."""
    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "playlisteval")
def test_every_command_shows_its_help(path: list[str]) -> None:
    said = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert said.exit_code == 0, said.output
    assert "Usage:" in said.output
    assert "Traceback" not in said.output


def test_smoke_is_listed_with_its_own_first_paragraph() -> None:
    """``smoke`` is listed without importing its module; the line it is listed with is the one
    its own help opens with."""
    from playlisteval import smoke

    first = prose(inspect.getdoc(smoke.smoke) or "").split("\n\n")[0]
    assert first == SMOKE_HELP
    said = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "One minimal call per configured role and model" in said.output


def test_smoke_lists_what_it_takes_when_asked() -> None:
    """A tool that reads the command tree (completion, the --home check) sees smoke's own
    options, loaded from its module."""
    smoke = typer.main.get_command(app).commands["smoke"]  # type: ignore[attr-defined]
    assert {"live", "budget", "role", "home"} <= {p.name for p in smoke.params}
