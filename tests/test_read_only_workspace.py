"""An archived workspace — a folder this user may read but not write — still answers the
commands that only read (status, runs, audit, store verify), and a command that would write is
refused with a line that says the workspace is read-only, not SQLite's "unable to open database
file". The commands run as root with every capability dropped: root may write any file, but
without CAP_DAC_OVERRIDE the kernel checks file permissions for it as for any user, so the
workspace's cleared write bits are the real ones. (They ran as user nobody, which failed to
import anything wherever nobody may not read the checkout: a clone inside /root.)"""

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

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="drops root's capabilities for the commands, which needs root and setpriv (with "
    "them, root may write any file, so a read-only folder would not be one)",
)

# Root with no capability: an empty bounding set, so the command exec'd gains none either.
WITHOUT_CAPABILITIES = ("setpriv", "--inh-caps=-all", "--bounding-set=-all", "--")


def _without_capabilities(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run by this Python, as root with no capability, beside the workspace ``home``."""
    env = {**os.environ, "HOME": str(home.parent), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [*WITHOUT_CAPABILITIES, sys.executable, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        timeout=600,
    )


def _playlisteval(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``playlisteval ARGS --home HOME``, as root with no capability."""
    return _without_capabilities(home, "-m", "playlisteval", *args, "--home", str(home))


@pytest.fixture
def archived(workspace: Path) -> Iterator[tuple[Path, str]]:
    """A run's workspace, copied into a folder, both with their write bits cleared."""
    with App(load_settings(workspace)) as app:
        run_id = runs.curate(app, budget_usd=5.0, max_seeds=2).run_id
    base = Path(tempfile.mkdtemp(prefix="playlisteval-archived-"))
    try:
        home = copy_workspace(workspace, base / "ws")
        subprocess.run(["chmod", "-R", "a-w", str(base)], check=True)
        probe = "import os, playlisteval; print(os.access(os.getcwd(), os.W_OK))"
        checked = _without_capabilities(home, "-c", probe)
        if checked.returncode != 0:  # setpriv refused (a confined root), or Python cannot read
            pytest.skip(f"cannot run the commands without capabilities: {checked.stderr[-300:]}")
        assert checked.stdout.split() == ["False"], "root kept its capabilities"
        yield home, run_id
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_reading_commands_work_on_an_archived_workspace(archived: tuple[Path, str]) -> None:
    home, run_id = archived
    for args in (("status",), ("runs",), ("audit", "--run", run_id), ("store", "verify")):
        done = _playlisteval(home, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, args
    assert run_id in _playlisteval(home, "runs").stdout
    assert "every chain intact" in _playlisteval(home, "store", "verify").stdout


def test_a_writing_command_says_the_workspace_is_read_only(archived: tuple[Path, str]) -> None:
    home, _run_id = archived
    done = _playlisteval(home, "curate", "--budget", "1", "--max-seeds", "1")
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert "is read-only" in said
    assert "unable to open database file" not in said
    assert "Traceback" not in said
