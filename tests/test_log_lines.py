"""Warnings for the user are lines for a person on the console, wherever stderr goes (a
terminal, a pipe, a captured stream); JSON goes to the log file, and to stderr only when a
machine asks for it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from playlisteval import logs
from playlisteval.cli import app as cli_app
from playlisteval.daemon import STATE_FILE
from tests.daemon_harness import configure


@pytest.fixture
def log_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "logs" / "playlisteval.jsonl"
    path.parent.mkdir()
    monkeypatch.setenv(logs.LOG_FILE_ENV, str(path))
    yield path
    structlog.reset_defaults()


def test_a_warning_is_a_persons_line_on_stderr_and_json_in_the_log_file(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(level=logging.WARNING)
    log = structlog.get_logger("test")
    log.info("not_shown_at_warning")
    log.warning("tick_step_failed", step="_media", error="no such file: a.mp4")
    err = capsys.readouterr().err
    assert err == "warning: tick step failed (step=_media error='no such file: a.mp4')\n"
    (line,) = log_file.read_text().splitlines()
    record = json.loads(line)
    assert record["event"] == "tick_step_failed"
    assert record["level"] == "warning"
    assert record["step"] == "_media"
    assert "timestamp" in record


def test_json_on_stderr_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json=True)
    structlog.get_logger("test").warning("budget_overrun", seed_id="s1")
    record = json.loads(capsys.readouterr().err)
    assert record["event"] == "budget_overrun"
    structlog.reset_defaults()


def test_a_log_file_that_cannot_be_written_is_said_once_and_the_console_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(file=tmp_path / "no-such-folder" / "x.jsonl")
    log = structlog.get_logger("test")
    log.warning("first")
    log.warning("second")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "warning: first"
    assert lines[1].startswith("warning: cannot write the log file ")
    assert lines[2:] == ["warning: second"]
    structlog.reset_defaults()


def test_a_commands_warning_reaches_a_captured_stderr_as_a_persons_line(
    workspace: Path, log_file: Path
) -> None:
    """`serve` with a daemon.json it cannot read warns and goes on: the captured stderr (no
    terminal) shows the warning as a line, no JSON; the log file has the JSON."""
    (workspace / STATE_FILE).write_text("{not json")
    configure(workspace, "[daemon]\nmetrics_port = 0\ntick_s = 60\n")
    result = CliRunner().invoke(
        cli_app, ["serve", "--home", str(workspace), "--no-work", "--stop-after", "0.5"]
    )
    assert result.exit_code == 0, result.output
    shown = [line for line in result.output.splitlines() if "daemon state unreadable" in line]
    assert len(shown) == 1, result.output
    assert shown[0].startswith("warning: daemon state unreadable (path=")
    assert not any(line.lstrip().startswith("{") for line in result.output.splitlines())
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [r["event"] for r in records if r["level"] == "warning"] == ["daemon_state_unreadable"]
