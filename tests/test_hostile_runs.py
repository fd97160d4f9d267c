"""Hostile and careless conditions around runs and exports: a disk that fills while `curate`,
`export` or `add` writes, a run, selection or evaluation another process holds, an export target
that is not one, and the database's side files. Each is one line and a distinct exit code (7 for
a full disk, 3 for another holder, 2 for a value to fix), no traceback, and nothing lost: the log
still verifies, a run cut short by the disk resumes, an earlier export stays byte for byte.

The full disk is simulated honestly without root: ``RLIMIT_FSIZE`` makes every write past the
limit fail with EFBIG, the error a quota or a file-size limit gives, and SQLite, pyarrow and
PyAV report it as they would report ENOSPC (``tests/hostile_table.file_size_limit``). The rows
share the shape of ``tests/hostile_table.py``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agents.ownership import WriterLease, eval_lease, pairs_lease, run_lease
from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import EXIT_BUSY, EXIT_DISK, EXIT_TAMPERED
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from playlisteval.workspace import Workspace
from store.events import RunStarted
from store.eventstore import open_event_store
from tests.hostile_media import tiny_video
from tests.hostile_table import (
    Case,
    Spoil,
    assert_nothing_lost,
    assert_said,
    file_size_limit,
    holdings,
    ids,
    invoke,
    run_cli_case,
)
from tests.workspaces import copy_workspace

RUN = "r"
BENCH = "{home}/exports/bench"


@pytest.fixture(scope="module")
def exported(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo workspace after a two-seed offline run ``r`` and its export (copy it first)."""
    home = copy_workspace(demo_home, tmp_path_factory.mktemp("exported") / "ws")
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=2, run_id=RUN)
        assert report.accepted, "the offline demo run should accept a seed"
        runs.export(app, Workspace(home).exports / "bench", RUN)
    return home


@pytest.fixture
def curated(exported: Path, tmp_path: Path) -> Path:
    """A private copy of :func:`exported`."""
    return copy_workspace(exported, tmp_path / "ws")


@contextmanager
def open_elsewhere(home: Path) -> Iterator[None]:
    """The workspace's database held open by another reader (a UI, a worker), as it often is:
    its WAL side files then already exist and the command only has to write what it writes."""
    store = open_event_store(Workspace(home).database)
    try:
        store.last_seq()
        yield
    finally:
        store.close()


# -- a disk that fills -------------------------------------------------------------------------

ROOM_CURATE = 512 * 1024  # the demo's database and the run's first events fit, the run does not
ROOM_EXPORT = 16 * 1024  # pairs.jsonl fits, pairs.parquet does not

FULL_DISK = [
    Case("the disk fills while curate runs", ("curate", "--budget", "5", "--max-seeds", "2"),
         "cannot write", code=EXIT_DISK, appends=True),
    Case("the disk fills while add lists a folder", ("add", "{src}", "--domain", "d"),
         "cannot write", spoil=lambda home: tiny_video(home.parent / "src" / "v.mp4"),
         code=EXIT_DISK),
]  # fmt: skip
ROOM = {FULL_DISK[0].name: ROOM_CURATE, FULL_DISK[1].name: 8 * 1024}  # add: two WAL pages


@pytest.mark.parametrize("case", FULL_DISK, ids=ids(FULL_DISK))
def test_a_disk_that_fills_mid_command_is_one_line_and_exit_7_and_resumes(
    workspace: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line and exit 7; every event written before is whole; and once there is room again,
    a run the disk stopped is taken up where it stopped and finishes (`curate --run RUN`)."""
    before = holdings(workspace)
    with open_elsewhere(workspace), file_size_limit(ROOM[case.name]):
        result = invoke(workspace, case, monkeypatch)
    assert_said(result, case)
    assert "free space there" in result.output
    assert_nothing_lost(before, holdings(workspace), appends=case.appends)
    verify = CliRunner().invoke(cli_app, ["store", "verify", "--home", str(workspace)])
    assert verify.exit_code == 0, verify.output
    store = open_event_store(Workspace(workspace).database)
    try:
        started = [s.data["run_id"] for s in store.read_all() if isinstance(s.event(), RunStarted)]
    finally:
        store.close()
    assert len(started) == (1 if case.appends else 0)  # curate had opened its run; add none
    for run_id in started:
        resume = ("curate", "--run", run_id, "--budget", "5")
        run_cli_case(workspace, Case("resume", resume, "completed", code=0, appends=True),
                     monkeypatch)  # fmt: skip


def test_a_disk_that_fills_while_export_writes_keeps_the_earlier_export(
    curated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export is staged beside its target: a write that fails leaves the earlier export as
    it was and no staging folder behind."""
    again = Case("the disk fills while export writes", ("export", BENCH, "--run", RUN),
                 "cannot write", code=EXIT_DISK)  # fmt: skip
    before = holdings(curated)
    assert any(name.endswith("pairs.parquet") for name in before.exports)
    with open_elsewhere(curated), file_size_limit(ROOM_EXPORT):
        result = invoke(curated, again, monkeypatch)
    assert_said(result, again)
    assert_nothing_lost(before, holdings(curated))
    assert sorted(p.name for p in Workspace(curated).exports.iterdir()) == ["bench"]


# -- another process holds it ------------------------------------------------------------------

BUSY = "is being worked on by another process"
HELD = [
    Case("a second curate of a run another process holds",
         ("curate", "--run", RUN, "--budget", "5"), BUSY, code=EXIT_BUSY),
    Case("pairs of a run whose selection another process holds",
         ("pairs", "--run", RUN, "--per-domain", "1"), BUSY, code=EXIT_BUSY),
    Case("an evaluation into a folder another process writes",
         ("eval", "--benchmark", BENCH, "--judge", "offline-first", "--out", "{home}/exports/eval"),
         BUSY,
         code=EXIT_BUSY),
]  # fmt: skip
LEASES = {
    HELD[0].name: lambda home: run_lease(RUN),
    HELD[1].name: lambda home: pairs_lease(RUN),
    HELD[2].name: lambda home: eval_lease(str((home / "exports" / "eval").resolve())),
}


@pytest.mark.parametrize("case", HELD, ids=ids(HELD))
def test_what_another_process_holds_is_refused_naming_it(
    curated: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    with App(load_settings(curated)) as app:
        lease = WriterLease.acquire(app.leases(), LEASES[case.name](curated), "elsewhere (test)")
        try:
            result = run_cli_case(curated, case, monkeypatch)
        finally:
            lease.release()
    assert "elsewhere (test)" in result.output


# -- careless targets and side files -----------------------------------------------------------


def _a_file_at(relative: str) -> Spoil:
    def spoil(home: Path) -> None:
        (home / relative).write_text("my notes")

    return spoil


def _notes_in(relative: str) -> Spoil:
    def spoil(home: Path) -> None:
        (home / relative).mkdir(parents=True)
        (home / relative / "notes.txt").write_text("my notes")

    return spoil


def _sql(statement: str) -> Spoil:
    def spoil(home: Path) -> None:
        import sqlite3

        with sqlite3.connect(Workspace(home).database) as conn:
            conn.execute(statement)

    return spoil


def _rewritten_cap_and_record_gone(home: Path) -> None:
    """The walk's keyless rewrite: the cap made 99 USD, the chain record deleted."""
    _sql(
        "UPDATE events SET data = json_set(data, '$.budget_micros', 99000000) "
        "WHERE type = 'RunStarted'"
    )(home)
    _sql("DELETE FROM store_meta")(home)


def _head_file_gone(home: Path) -> None:
    (home / "log_key.head").unlink()


def _garbage_wal(home: Path) -> None:
    (home / "playlisteval.db-wal").write_bytes(b"not a write-ahead log" * 500)


CARELESS = [
    Case("an export over a file", ("export", "{home}/exports/notes.txt", "--run", RUN),
         "exists and is not a folder", spoil=_a_file_at("exports/notes.txt")),
    Case("an export over a folder of other files", ("export", "{home}/exports/mine", "--run", RUN),
         "holds something other than an earlier export", spoil=_notes_in("exports/mine")),
    Case("an export of a run that does not exist", ("export", "{home}/exports/x", "--run", "nope"),
         "no run 'nope'"),
    Case("an audit of a seed the run does not have", ("audit", "--run", RUN, "--seed", "../etc"),
         "'../etc'"),
    Case("a write-ahead log of garbage", ("status",), "videos:", spoil=_garbage_wal, code=0),
    # The hostile walk of step 22 (issue 41): an anchor of nothing, an anchor file that cannot
    # be written, a rehearsal asked to work on nothing at once.
    Case("an anchor of a run that does not exist", ("store", "anchor", "--run", "bogus-run"),
         "no run 'bogus-run'"),
    Case("an anchor written over a folder", ("store", "anchor", "--run", RUN, "--out",
         "{home}/exports"), "is a folder"),
    Case("an anchor written into a missing folder", ("store", "anchor", "--run", RUN, "--out",
         "{home}/nowhere/anchor.json"), "does not exist"),
    Case("a rehearsal with no concurrency", ("demo", "--domains", "2", "--hours-per-domain", "1",
         "--concurrency", "0"), "--concurrency must be at least 1"),
    # The log's trust lives outside the database: what it says never re-chains the log.
    Case("a resume after the chain record was deleted", ("curate", "--run", RUN),
         "nothing written", spoil=_sql("DELETE FROM store_meta")),
]  # fmt: skip

# A log that fails verification is a report (exit 4, its problems listed), not one error line.
TAMPERED = [
    Case("a keyless rewrite with the chain record deleted", ("store", "verify"),
         "no chain record", spoil=_rewritten_cap_and_record_gone, code=EXIT_TAMPERED),
    Case("the chain record said to be plain", ("store", "verify"), "chained plain SHA-256",
         spoil=_sql("UPDATE store_meta SET value = '3' WHERE key = 'chain'"), code=EXIT_TAMPERED),
    Case("the head beside the key removed", ("store", "verify"), "no head is kept beside the key",
         spoil=_head_file_gone, code=EXIT_TAMPERED),
    Case("an anchor of a log that fails verify", ("store", "anchor", "--run", RUN),
         "no anchor is taken", spoil=_sql("DELETE FROM store_meta"), code=EXIT_TAMPERED),
]  # fmt: skip


@pytest.mark.parametrize("case", TAMPERED, ids=ids(TAMPERED))
def test_a_log_rewritten_around_the_store_fails_with_exit_4_and_is_not_rechained(
    curated: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = holdings(curated)
    result = invoke(curated, case, monkeypatch)
    assert result.exit_code == EXIT_TAMPERED, result.output
    assert "Traceback" not in result.output
    assert case.says in " ".join(result.output.split()), result.output
    assert_nothing_lost(before, holdings(curated))
    again = invoke(curated, Case("again", ("store", "verify"), ""), monkeypatch)
    assert again.exit_code == EXIT_TAMPERED, "opening the log must not have blessed it"


@pytest.mark.parametrize("case", CARELESS, ids=ids(CARELESS))
def test_a_careless_target_or_side_file_is_one_line_and_loses_nothing(
    curated: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_cli_case(curated, case, monkeypatch)
