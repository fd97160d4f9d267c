"""The commands' consoles piped into a file or a CI log: a table wider than 80 columns comes out
whole, no cell cut with "…"; on a terminal, and under ``COLUMNS``, rich's width is kept."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from playlisteval.cli.output import PIPE_WIDTH, CommandConsole

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = 12
CELL = "judge-model-{n:02d}-with-a-long-unbroken-id"

# What a command does: build a rich table and print it with the CLI's console, to stdout.
PRINT_WIDE_TABLE = f"""
from rich.table import Table
from playlisteval.cli.output import console, err_console
table = Table("judge", *(f"condition {{n}}" for n in range({COLUMNS})))
table.add_row("j", *({CELL!r}.format(n=n) for n in range({COLUMNS})))
console.print(table)
err_console.print(table)
"""


def _piped(env_columns: str | None) -> subprocess.CompletedProcess[str]:
    """Run the table through the CLI's consoles with stdout and stderr piped (no terminal)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if env_columns is not None:
        env["COLUMNS"] = env_columns
    return subprocess.run(
        [sys.executable, "-c", PRINT_WIDE_TABLE],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )


def test_a_piped_wide_table_keeps_every_cell_whole() -> None:
    done = _piped(None)
    for stream in (done.stdout, done.stderr):
        assert "…" not in stream
        lines = stream.splitlines()
        row = next(line for line in lines if line.startswith("│ j "))
        for n in range(COLUMNS):
            assert CELL.format(n=n) in row  # on the row's one line, not folded
            assert f"condition {n}" in stream
        assert max(len(line) for line in lines) > 80  # wider than rich's default of 80


def test_columns_still_sets_the_width_of_a_pipe() -> None:
    """Who sets COLUMNS asks for that width: the table is fitted into it."""
    lines = _piped("100").stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert len(lines) > 5  # the cells wrapped onto more lines to fit


def test_a_console_writing_to_no_terminal_is_pipe_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert CommandConsole(file=io.StringIO()).width == PIPE_WIDTH
    assert Console(file=io.StringIO()).width < PIPE_WIDTH  # what rich alone would do


def test_on_a_terminal_the_width_is_riches_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    ours = CommandConsole(file=io.StringIO(), force_terminal=True)
    theirs = Console(file=io.StringIO(), force_terminal=True)
    assert ours.is_terminal
    assert ours.width == theirs.width
    monkeypatch.setenv("COLUMNS", "72")
    assert ours.width == 72


def test_a_width_set_on_the_console_is_kept() -> None:
    """``console.size = ...`` (what rich's own code and tests do) sets the width."""
    console = CommandConsole(file=io.StringIO(), force_terminal=True)
    console.size = (90, 30)
    assert (console.width, console.height) == (90, 30)
