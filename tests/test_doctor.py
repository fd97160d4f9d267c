"""``playlisteval doctor`` says what is missing and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.doctor import run_checks
from playlisteval.settings import load_settings


def test_a_ready_workspace_passes_every_check(workspace: Path) -> None:
    result = CliRunner().invoke(cli_app, ["doctor", "--home", str(workspace)])
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output
    assert "price of gemini-3-flash" in result.output


def test_an_unpriced_model_and_a_missing_key_fail_with_what_to_do(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with App(load_settings(workspace, models={"sufficiency": "mystery-vl-9000"})) as app:
        checks = {c.name: c for c in run_checks(app)}
    assert not checks["price of mystery-vl-9000"].ok
    assert "price_overrides" in checks["price of mystery-vl-9000"].fix

    with App(load_settings(workspace, curation={"offline": False})) as app:
        checks = {c.name: c for c in run_checks(app)}
    assert not checks["openai key"].ok
    assert checks["openai key"].fix.startswith("export OPENAI_API_KEY=")


def test_an_empty_workspace_says_to_index_first(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli_app, ["doctor", "--home", str(tmp_path / "empty")])
    assert result.exit_code == 1
    assert "playlisteval index" in " ".join(result.output.split())
