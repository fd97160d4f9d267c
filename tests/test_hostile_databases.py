"""A damaged database file: every command says so in one line with a distinct exit code, and
``doctor`` diagnoses it (SQLite's integrity check) instead of failing itself. Real files, the
real CLI; the damaged file is never changed by any of it."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval.cli import EXIT_TAMPERED, EXIT_UNREADABLE
from playlisteval.cli import app as cli_app
from playlisteval.doctor import database_checks, server_reachable
from playlisteval.settings import load_settings
from playlisteval.workspace import Workspace
from tests.conftest import PG_URL
from tests.workspaces import copy_workspace


def _truncated(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def _garbage(db: Path) -> None:
    db.write_bytes(b"this is not a database, it is a shopping list\n" * 200)


def _torn_header(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\x00" * (4096 - 100)  # the schema page's b-tree header wiped
    db.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": _truncated,
    "not a database": _garbage,
    "torn schema page": _torn_header,
}


@pytest.fixture
def damaged(workspace: Path, request: pytest.FixtureRequest) -> Path:
    db = Workspace(workspace).database
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    DAMAGE[request.param](db)
    return workspace


@pytest.mark.parametrize("damaged", sorted(DAMAGE), indirect=True)
@pytest.mark.parametrize(
    "command", [["status"], ["seeds"], ["audit"], ["curate", "--budget", "1"], ["fleet"]]
)
def test_a_damaged_database_is_one_line_and_exit_5_for_every_command(
    damaged: Path, command: list[str]
) -> None:
    db = Workspace(damaged).database
    before = db.read_bytes()
    result = CliRunner().invoke(cli_app, [*command, "--home", str(damaged)])
    assert result.exit_code == EXIT_UNREADABLE, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    line = " ".join(result.output.split())
    assert "is not a readable database" in line
    assert "playlisteval doctor" in line
    assert db.read_bytes() == before  # nothing written over what a backup could still save


@pytest.mark.parametrize("damaged", sorted(DAMAGE), indirect=True)
def test_doctor_diagnoses_a_damaged_database_and_says_how_to_recover(damaged: Path) -> None:
    result = CliRunner().invoke(cli_app, ["doctor", "--home", str(damaged)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert "FAIL database" in text
    assert "SQLite integrity check" in text
    assert "restore the file from a backup" in text
    assert "store verify" in text


def test_doctor_passes_a_sound_database_and_an_absent_one(workspace: Path, tmp_path: Path) -> None:
    [sound] = database_checks(load_settings(workspace))
    assert sound.ok
    assert sound.detail == "SQLite integrity check: ok"
    [absent] = database_checks(load_settings(tmp_path / "fresh"))
    assert absent.ok
    assert "not created yet" in absent.detail


def test_a_database_restored_from_a_copy_works_again(workspace: Path, tmp_path: Path) -> None:
    """What the message advises: put a good copy back and the workspace is whole again."""
    db = Workspace(workspace).database
    backup = tmp_path / "backup.db"
    shutil.copyfile(db, backup)
    _truncated(db)
    assert CliRunner().invoke(cli_app, ["status", "--home", str(workspace)]).exit_code == 5
    shutil.copyfile(backup, db)
    result = CliRunner().invoke(cli_app, ["status", "--home", str(workspace)])
    assert result.exit_code == 0, result.output


def test_an_unreachable_server_database_is_one_failed_check() -> None:
    check = server_reachable("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert not check.ok
    assert check.detail.startswith("cannot connect")
    assert "start the server" in check.fix


def test_the_real_postgresql_is_reachable() -> None:
    check = server_reachable(PG_URL)
    assert check.ok, check.detail


# -- an edited event ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def curated_home(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo workspace after a one-seed offline run (copy it before spoiling it)."""
    from playlisteval import runs
    from playlisteval.app import App

    home = copy_workspace(demo_home, tmp_path_factory.mktemp("edited") / "ws")
    with App(load_settings(home)) as app:
        runs.curate(app, budget_usd=None, max_seeds=1, run_id="r")
    return home


EDITS = {
    "type renamed": "UPDATE events SET type = 'GateZapped' WHERE seq = :seq",
    "a field removed": "UPDATE events SET data = json_remove(data, '$.gate') WHERE seq = :seq",
    "a field of the wrong type": (
        "UPDATE events SET data = json_set(data, '$.attempt', 'x') WHERE seq = :seq"
    ),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_event_is_one_line_naming_it_and_exit_4(
    curated_home: Path, tmp_path: Path, edit: str
) -> None:
    home = copy_workspace(curated_home, tmp_path / "ws")
    db = Workspace(home).database
    with sqlite3.connect(db) as conn:
        [(seq,)] = conn.execute(
            "SELECT seq FROM events WHERE type = 'GateRequested' ORDER BY seq LIMIT 1"
        ).fetchall()
        conn.execute(EDITS[edit], {"seq": seq})
    runner = CliRunner()
    audit = runner.invoke(cli_app, ["audit", "--run", "r", "--home", str(home)])
    assert audit.exit_code == EXIT_TAMPERED, audit.output
    assert "Traceback" not in audit.output
    line = " ".join(audit.output.split())
    assert f"event seq {seq} of" in line
    assert "store verify" in line
    verify = runner.invoke(cli_app, ["store", "verify", "--home", str(home)])
    assert verify.exit_code == EXIT_TAMPERED, verify.output
    assert f"seq {seq}" in " ".join(verify.output.split())
