"""Careless and hostile input at the command line: each case is one clear line, a distinct exit
code, no traceback, and nothing lost or half-written (the event log is as it was). The real CLI
on a copy of the demo workspace; the table grows with every input the CLI accepts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval.cli import EXIT_FIX
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE
from playlisteval.workspace import Workspace
from store.eventstore import open_event_store


def _settings_text(text: str) -> Callable[[Path], None]:
    def write(home: Path) -> None:
        (home / SETTINGS_FILE).write_text(text, encoding="utf-8")

    return write


def _settings_bytes(data: bytes) -> Callable[[Path], None]:
    def write(home: Path) -> None:
        (home / SETTINGS_FILE).write_bytes(data)

    return write


def _keep(home: Path) -> None:
    """The workspace as it is."""


@dataclass(frozen=True)
class Case:
    """One careless input: how the workspace is spoiled, the command, what the line says."""

    name: str
    spoil: Callable[[Path], None]
    command: list[str]
    says: str
    env: dict[str, str] = field(default_factory=dict)
    code: int = EXIT_FIX


CASES = [
    Case(
        "settings file that is not TOML",
        _settings_text("[generation\nmax_attempts = 6\n"),
        ["status"],
        "is not valid TOML",
    ),
    Case(
        "settings file that is not UTF-8",
        _settings_bytes(b"\xff\xfe[generation]\n"),
        ["status"],
        "is not UTF-8 text",
    ),
    Case(
        "a setting that does not exist",
        _settings_text("[generation]\ndistractors = 4\n"),
        ["status"],
        "generation.distractors: no such setting",
    ),
    Case(
        "a section that does not exist",
        _settings_text("[genration]\nmax_attempts = 6\n"),
        ["status"],
        "no such setting",
    ),
    Case(
        "a setting of the wrong type",
        _settings_text('[generation]\nmax_attempts = "six"\n'),
        ["status"],
        "generation.max_attempts",
    ),
    Case(
        "seeds_per_segment below one",
        _settings_text("[curation]\nseeds_per_segment = 0\n"),
        ["status"],
        "curation.seeds_per_segment",
    ),
    Case(
        "a table variable that is not JSON",
        _keep,
        ["status"],
        "takes JSON",
        env={"PLAYLISTEVAL_BUDGET__PRICE_OVERRIDES": "{x"},
    ),
    Case(
        "a setting variable of the wrong type",
        _keep,
        ["status"],
        "curation.concurrency",
        env={"PLAYLISTEVAL_CURATION__CONCURRENCY": "many"},
    ),
    Case(
        "a model with no price, at curate",
        _keep,
        ["curate", "--budget", "1", "--max-seeds", "2"],
        "no price known for model 'mystery-vl-9000'",
        env={"PLAYLISTEVAL_MODELS__SUFFICIENCY": "mystery-vl-9000"},
    ),
    Case(
        "a model with no price, at enqueue",
        _keep,
        ["enqueue", "--max-seeds", "2"],
        "no price known for model 'mystery-vl-9000'",
        env={"PLAYLISTEVAL_MODELS__SUFFICIENCY": "mystery-vl-9000"},
    ),
    Case("a negative --per-domain", _keep, ["pairs", "--per-domain", "-5"], "--per-domain"),
    Case(
        "--concurrency 0",
        _keep,
        ["curate", "--budget", "1", "--concurrency", "0"],
        "--concurrency",
    ),
    Case(
        "--concurrency 1000000",
        _keep,
        ["curate", "--budget", "1", "--concurrency", "1000000"],
        "above curation.max_concurrency",
    ),
    Case(
        "a worker's --concurrency past the bound",
        _keep,
        ["worker", "--concurrency", "100000"],
        "above curation.max_concurrency",
    ),
    Case(
        "a rehearsal's --concurrency past the bound",
        _keep,
        ["rehearse", "--concurrency", "100000"],
        "above curation.max_concurrency",
    ),
    Case(
        "concurrency above max_concurrency in the settings",
        _settings_text("[curation]\nconcurrency = 300\nmax_concurrency = 100\n"),
        ["status"],
        "above max_concurrency",
    ),
    Case("a negative --budget", _keep, ["curate", "--budget", "-1"], "--budget"),
    Case(
        "an unknown run to resume",
        _keep,
        ["curate", "--run", "no-such-run", "--budget", "1"],
        "no-such-run",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_careless_input_is_one_line_and_loses_nothing(
    workspace: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Workspace(workspace).database
    store = open_event_store(database)
    before = store.last_seq()
    store.close()
    case.spoil(workspace)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli_app, [*case.command, "--home", str(workspace)])
    assert result.exit_code == case.code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert case.says in text, text
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    store = open_event_store(database)
    try:
        assert store.last_seq() == before  # no run half-opened, nothing appended
    finally:
        store.close()
