"""What a person sees at a real terminal: ``curate`` run in a pseudo-terminal (Python's ``pty``)
draws a live table whose figures move while seeds work, with no third-party banner; and what
`runs`, `status` and `audit` print of the run it made afterwards."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agents.audit import audit_run
from playlisteval import cli
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from store.runlog import run_ids
from tests.workspaces import copy_workspace

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\r")
SEEDS = re.compile(r"seeds\s+(\d+) of (\d+) done · (\d+) in flight · (\d+) queued")
SPEND = re.compile(r"spend \(USD\)\s+(\d+\.\d+) of (\d+\.\d+)")
# Enough to end a hung child, never a speed target: the run takes seconds.
SAFETY_NET_S = 600


def run_in_terminal(argv: list[str], env: Mapping[str, str], cols: int = 110) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as its stdin, stdout and stderr (so rich draws as it
    does for a person) and return its exit code and everything it wrote, ANSI codes removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, cols, 0, 0))
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=dict(env), start_new_session=True
    )
    os.close(slave)
    out = bytearray()
    started = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer of the terminal has closed it
                    break
                if not data:
                    break
                out.extend(data)
            elif time.monotonic() - started > SAFETY_NET_S:
                os.killpg(proc.pid, signal.SIGKILL)
                raise AssertionError(f"{argv!r} still runs after {SAFETY_NET_S} s: {bytes(out)!r}")
    finally:
        os.close(master)
    return proc.wait(), ANSI.sub("", out.decode("utf-8", "replace"))


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's console draws 400 columns wide: a table row stays on one line to read back."""
    monkeypatch.setattr(cli.console, "_width", 400)


@pytest.fixture(scope="module")
def curated_in_terminal(
    demo_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, int, str]:
    """A copy of the indexed demo, curated by ``playlisteval curate`` in a pseudo-terminal, with
    the offline provider holding each call a little so the run lasts a few seconds: the
    workspace, the exit code and what the terminal showed."""
    home = copy_workspace(demo_home, tmp_path_factory.mktemp("terminal") / "ws")
    env = {
        k: v
        for k, v in os.environ.items()
        # pydantic-ai shows its banner to neither a test run nor CI: this run is a person's.
        if k not in ("PYTEST_VERSION", "CI", "PYDANTIC_AI_NO_BANNER", "PLAYLISTEVAL_PROGRESS")
        and not k.startswith("PYTEST_")
    }
    env |= {
        "PLAYLISTEVAL_HOME": str(home),
        "PLAYLISTEVAL_CURATION__OFFLINE_LATENCY_S": "0.2",
        "TERM": "xterm-256color",
    }
    argv = [sys.executable, "-m", "playlisteval", "curate", "--budget", "2", "--max-seeds", "4"]
    code, shown = run_in_terminal(argv, env)
    return home, code, shown


def test_the_live_curate_table_changes_while_the_run_works(
    curated_in_terminal: tuple[Path, int, str],
) -> None:
    """The table is redrawn during the run, not only at its end: between the first drawing
    (nothing done, nothing spent) and the last (every seed done, the run's spend), the terminal
    showed figures in between, seeds in flight among them."""
    _home, code, shown = curated_in_terminal
    assert code == 0, shown[-3000:]
    seeds = [tuple(map(int, m)) for m in SEEDS.findall(shown)]
    spends = [float(m[0]) for m in SPEND.findall(shown)]
    assert seeds, shown[-3000:]
    assert spends, shown[-3000:]
    # The first drawing: nothing done yet, every seed in flight or queued (with a concurrency
    # above the four seeds, all four may be in flight by the first refresh).
    assert seeds[0][:2] == (0, 4)
    assert seeds[0][2] + seeds[0][3] == 4
    assert seeds[-1][:3] == (4, 4, 0)
    assert spends[0] == 0.0
    assert spends[-1] > 0
    assert any(in_flight > 0 for _done, _total, in_flight, _queued in seeds)
    between = [s for s in spends if 0.0 < s < spends[-1]]
    assert between, f"no spend figure was drawn while the run worked: {sorted(set(spends))}"
    assert len(set(seeds)) >= 3, f"the seeds figures never moved mid-run: {sorted(set(seeds))}"
    # The table says what answered: the offline provider, a harness.
    assert "offline provider: a harness" in shown


def test_no_third_party_banner_reaches_the_terminal(
    curated_in_terminal: tuple[Path, int, str],
) -> None:
    """pydantic-ai's first-run banner (Logfire) shows on a terminal unless switched off: the
    CLI switches it off, so the person sees the CLI's own output only."""
    _home, _code, shown = curated_in_terminal
    for banner_words in ("Logfire", "observability", "PYDANTIC_AI_NO_BANNER"):
        assert banner_words not in shown


def test_the_run_report_follows_the_table_on_a_line_of_its_own(
    curated_in_terminal: tuple[Path, int, str],
) -> None:
    home, _code, shown = curated_in_terminal
    with App(load_settings(home)) as app:
        (run_id,) = run_ids(app.events)
    lines = shown.splitlines()
    report = next(i for i, line in enumerate(lines) if line.startswith(f"run {run_id}:"))
    assert lines[report - 1].strip() == ""  # a blank line between the table and the report


def test_runs_lists_the_run_as_the_log_tells_it(
    curated_in_terminal: tuple[Path, int, str], wide: None
) -> None:
    home = curated_in_terminal[0]
    result = CliRunner().invoke(cli_app, ["runs", "--home", str(home)])
    assert result.exit_code == 0, result.output
    with App(load_settings(home)) as app:
        (run_id,) = run_ids(app.events)
        audit = audit_run(app.events, run_id)
    accepted = sum(1 for line in audit.seeds if line.status == "accepted")
    (row,) = [line for line in result.output.splitlines() if line.startswith(run_id)]
    assert "completed" in row
    assert f"{accepted} of 4" in row
    assert f"{audit.spent_micros / 1e6:.4f} / 2.0000" in row
    assert row.split()[-1] == "offline"
    assert "curate --run" not in result.output  # a completed run has nothing to resume


def test_audit_seed_shows_that_seed_alone_in_words(
    curated_in_terminal: tuple[Path, int, str], wide: None
) -> None:
    """``audit --seed`` prints the seed's timeline, not the run's tables first; attempts read
    as words, not JSON."""
    home = curated_in_terminal[0]
    with App(load_settings(home)) as app:
        (run_id,) = run_ids(app.events)
        seed_id = audit_run(app.events, run_id).seeds[0].seed_id
    result = CliRunner().invoke(cli_app, ["audit", "--seed", seed_id, "--home", str(home)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"run {run_id}, seed {seed_id}: ")
    assert lines[1] == "phase 1, attempt 1: question and gold answer"
    assert "spend by phase" not in result.output
    assert "rejection reasons" not in result.output
    assert '{"phase"' not in result.output


def test_the_rejection_histogram_shows_reasons_with_their_values(
    curated_in_terminal: tuple[Path, int, str], wide: None
) -> None:
    """Each kind of rejection is shown by its first reason as logged, never as a template of
    ellipses."""
    home = curated_in_terminal[0]
    with App(load_settings(home)) as app:
        (run_id,) = run_ids(app.events)
        audit = audit_run(app.events, run_id)
    assert audit.rejections, "the offline provider errs on some of these seeds, by design"
    result = CliRunner().invoke(cli_app, ["audit", "--home", str(home)])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.replace("│", " ").split())
    for kind, example in audit.rejection_examples.items():
        assert kind in audit.rejections
        assert " ".join(example.split()) in flat
    assert "… …" not in flat
