"""One `serve` daemon per workspace: a second is refused in one line naming the first (pid,
host, since when), in another process or in the same one; a holder that died blocks nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import EXIT_BUSY
from playlisteval.cli import app as cli_app
from playlisteval.daemon import LOCK_FILE, Daemon, DaemonRunning, serve_lock
from playlisteval.settings import load_settings
from tests.daemon_harness import configure, free_port

LOCK_HOLDER = """\
import sys, time
from pathlib import Path
from playlisteval.daemon import serve_lock
with serve_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def hold_in_another_process(root: Path) -> subprocess.Popen[str]:
    """A process that holds the workspace's serve lock until it is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(root)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_lock_in_the_same_process_is_refused_naming_the_first(tmp_path: Path) -> None:
    with serve_lock(tmp_path), pytest.raises(DaemonRunning) as caught, serve_lock(tmp_path):
        pass
    message = str(caught.value)
    assert f"pid {os.getpid()}" in message
    assert f"on {os.uname().nodename!r}" in message
    assert "since 20" in message
    assert "\n" not in message
    with serve_lock(tmp_path):  # given back when the first ended
        pass


def test_a_lock_held_by_another_process_is_refused_until_that_process_dies(
    tmp_path: Path,
) -> None:
    holder = hold_in_another_process(tmp_path)
    try:
        with pytest.raises(DaemonRunning, match=rf"pid {holder.pid} on "), serve_lock(tmp_path):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)  # no clean-up of its own: its file still names it
        holder.wait(timeout=30)
    assert str(holder.pid) in (tmp_path / LOCK_FILE).read_text()
    with serve_lock(tmp_path):
        assert str(os.getpid()) in (tmp_path / LOCK_FILE).read_text()


def test_two_daemons_on_one_workspace_the_second_refuses(workspace: Path) -> None:
    """In one process: the second daemon's run raises before it schedules anything."""

    async def both(first: Daemon, second: Daemon) -> None:
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(first.run, stop)
            with anyio.fail_after(120):
                while first.ticks == 0:  # it ticks once it holds the workspace
                    await anyio.sleep(0.05)
            try:
                with pytest.raises(DaemonRunning, match=rf"pid {os.getpid()}"):
                    await second.run(stop)
            finally:
                stop.set()

    with App(load_settings(workspace)) as app:
        first = Daemon(app, work=False, metrics_port=0)
        second = Daemon(app, work=False, metrics_port=0)
        anyio.run(both, first, second)
        assert first.ticks >= 1
        assert second.ticks == 0


def test_serve_refuses_a_workspace_another_serve_holds_in_one_line(workspace: Path) -> None:
    configure(workspace, f"[daemon]\nmetrics_port = {free_port()}\ntick_s = 60\nwork = false\n")
    holder = hold_in_another_process(workspace)
    try:
        result = CliRunner().invoke(
            cli_app, ["serve", "--home", str(workspace), "--no-work", "--stop-after", "5"]
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert result.exit_code == EXIT_BUSY, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    flat = " ".join(result.output.split())
    assert f"another `playlisteval serve` runs on the workspace {str(workspace)!r}" in flat
    assert f"pid {holder.pid}" in flat
    assert "Traceback" not in result.output
