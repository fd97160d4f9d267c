"""An archived workspace — a folder this user may read but not write — still answers the
commands that only read (status, runs, audit, store verify), and a command that would write is
refused with a line that says the workspace is read-only, not SQLite's "unable to open database
file". Run as another user (root may write any file), so the permissions are the real ones."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from playlisteval import runs
from playlisteval.app import App
from playlisteval.settings import load_settings
from tests.workspaces import copy_workspace

NOBODY = 65534
pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs the commands as another user, which needs root and setpriv (as its owner, "
    "root may write any file, so a read-only folder would not be one)",
)


def _as_nobody(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        *("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"),
        *(sys.executable, "-m", "playlisteval", *args, "--home", str(home)),
    ]
    env = {**os.environ, "HOME": str(home.parent), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=home.parent, timeout=600
    )


@pytest.fixture
def archived(workspace: Path) -> Iterator[tuple[Path, str]]:
    """A run's workspace, copied where another user may read it and may not write it."""
    with App(load_settings(workspace)) as app:
        run_id = runs.curate(app, budget_usd=5.0, max_seeds=2).run_id
    base = Path(tempfile.mkdtemp(prefix="playlisteval-archived-"))
    try:
        os.chmod(base, 0o755)
        home = copy_workspace(workspace, base / "ws")
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(home)], check=True)
        subprocess.run(["chmod", "-R", "a-w", str(home)], check=True)
        yield home, run_id
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_reading_commands_work_on_an_archived_workspace(archived: tuple[Path, str]) -> None:
    home, run_id = archived
    for args in (("status",), ("runs",), ("audit", "--run", run_id), ("store", "verify")):
        done = _as_nobody(home, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, args
    assert run_id in _as_nobody(home, "runs").stdout
    assert "every chain intact" in _as_nobody(home, "store", "verify").stdout


def test_a_writing_command_says_the_workspace_is_read_only(archived: tuple[Path, str]) -> None:
    home, _run_id = archived
    done = _as_nobody(home, "curate", "--budget", "1", "--max-seeds", "1")
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert "is read-only" in said
    assert "unable to open database file" not in said
    assert "Traceback" not in said
