"""The shell as a person meets it (step 19's frictions): Ctrl-C says how to go on, and a
command's last word is its summary, with what it cost."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import EXIT_INTERRUPTED
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from store.runlog import run_ids


def _events(home: Path, kind: str) -> int:
    """How many events of type ``kind`` the workspace's log holds."""
    try:
        with sqlite3.connect(home / "playlisteval.db") as db:
            query = "SELECT count(*) FROM events WHERE type = ?"
            return int(db.execute(query, (kind,)).fetchone()[0])
    except sqlite3.Error:  # not made yet
        return 0


def test_ctrl_c_in_a_command_says_what_was_kept_and_how_to_go_on(workspace: Path) -> None:
    """It ended with click's bare "Aborted!" (the rerun resumed, but nothing said so); and a
    Ctrl-C that reached the event loop only cancelled its main task once, which the curation
    could absorb: the run then completed with exit 0. One press now ends the command."""
    command = [sys.executable, "-m", "playlisteval", "curate", "--budget", "5", "--max-seeds", "6"]
    env = {**os.environ, "PLAYLISTEVAL_CURATION__CONCURRENCY": "1"}
    process = subprocess.Popen(
        [*command, "--home", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # A recorded model call: the event loop runs, the seeds are at work (the window where one
    # SIGINT used to be absorbed). The deadline only keeps a broken run from hanging the suite.
    deadline = time.monotonic() + 300
    while (
        _events(workspace, "CallRecorded") < 1
        and process.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGINT)  # once, as a person presses Ctrl-C
    out, err = process.communicate(timeout=300)
    assert process.returncode == EXIT_INTERRUPTED, (out, err)
    assert "interrupted: what was done is kept" in err
    # The same `curate` would open another run and pay again: the line names the one that
    # resumes this run, which then goes on with it.
    said = " ".join(err.split())
    match = re.search(r"`playlisteval curate --run (\S+) --home (\S+)` goes on from there", said)
    assert match, err
    assert "Traceback" not in err
    assert "Aborted" not in out + err
    assert _events(workspace, "RunFinished") == 0, "the run went on to its end"
    with App(load_settings(workspace)) as app:
        assert run_ids(app.events) == [match.group(1)]
    resumed = CliRunner().invoke(
        cli_app, ["curate", "--run", match.group(1), "--home", match.group(2)]
    )
    assert resumed.exit_code == 0, resumed.output
    assert _events(workspace, "RunFinished") == 1
    with App(load_settings(workspace)) as app:
        assert run_ids(app.events) == [match.group(1)]  # no second run opened


def test_pairs_ends_with_its_summary_and_what_the_judges_cost(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        run_id = runs.curate(app, budget_usd=5.0, max_seeds=4).run_id
    said = CliRunner().invoke(cli_app, ["pairs", "--run", run_id, "--home", str(workspace)])
    assert said.exit_code == 0, said.output
    last = said.output.strip().splitlines()[-1]
    assert last.startswith(f"run {run_id}: "), said.output
    assert "the difficulty judges' calls cost" in last
    assert last.endswith("USD in all")


def test_eval_help_shows_the_whole_condition_format_in_80_columns() -> None:
    """The option's help cut the format off with an ellipsis ("frames:retriever:…")."""
    said = CliRunner().invoke(cli_app, ["eval", "--help"], env={"COLUMNS": "80"})
    assert said.exit_code == 0, said.output
    assert "frames:retriever:modality:hours:n_frames[:think=N][:res=N]" in said.output
    for example in ("uniform::frames+transcript:10h:32", "retrieved:bm25:transcript:100h:32"):
        assert example in said.output
    for line in said.output.splitlines():
        assert "frames:retriever:…" not in line
        assert len(line) <= 80, line


def test_rehearse_after_every_seed_was_curated_rehearses_not_asks_for_index(
    workspace: Path,
) -> None:
    """It said "no seeds to rehearse on: run `playlisteval index` first" once every seed was in
    a run, though a rehearsal writes to a scratch log and may use any of them."""
    with App(load_settings(workspace)) as app:
        every = len(app.catalog.seeds())
        runs.curate(app, budget_usd=5.0)
        assert not runs.choose_seeds(app, None)[0]  # every active seed is in a run now
        before = app.events.last_seq()
        rehearsal = runs.rehearse(app, seeds=2, paper=False)
        assert app.events.last_seq() == before  # the workspace's log untouched
    assert every >= 2
    assert rehearsal.seeds == 2


def test_the_eval_table_fits_80_columns_with_judges_and_conditions_whole(
    workspace: Path, tmp_path: Path
) -> None:
    """It was ~115 columns wide: every line now fits, each judge on one line, the figures in
    their own columns."""
    with App(load_settings(workspace)) as app:
        run_id = runs.curate(app, budget_usd=5.0, max_seeds=4).run_id
        bench = runs.export(app, tmp_path / "bench", run_id).path
    judges = ["offline-first", "offline-transcript"]
    said = CliRunner().invoke(
        cli_app,
        [
            *("eval", "--benchmark", str(bench), "--out", str(tmp_path / "eval"), "--limit", "2"),
            *(arg for judge in judges for arg in ("--judge", judge)),
            *("--condition", "uniform::none:1h:32", "--home", str(workspace)),
        ],
        env={"COLUMNS": "80"},
    )
    assert said.exit_code == 0, said.output
    start = said.output.index("Judges by condition")
    table = said.output[start : said.output.index("judgments in", start)]  # the hints after it
    for line in table.splitlines():  # are whole lines to copy, as long as their paths
        assert len(line) <= 80, line
    rows = [line for line in table.splitlines() if "uniform-none-1h-32f" in line]
    assert sorted(row.split()[0] for row in rows) == judges
    assert all("±" in row for row in rows)


def test_the_audit_of_an_offline_run_says_it_is_a_harness(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        run_id = runs.curate(app, budget_usd=5.0, max_seeds=2).run_id
    said = CliRunner().invoke(cli_app, ["audit", "--run", run_id, "--home", str(workspace)])
    assert said.exit_code == 0, said.output
    first = said.output.strip().splitlines()[0]
    assert "offline provider" in first
    assert "never evidence of model quality" in " ".join(said.output.split())
    facts = CliRunner().invoke(
        cli_app, ["audit", "--run", run_id, "--json", "--home", str(workspace)]
    )
    assert json.loads(facts.stdout)["offline"] is True


def test_a_rehearsal_with_no_concurrency_is_refused_before_anything_is_generated(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    said = CliRunner().invoke(
        cli_app,
        [
            "demo",
            "--domains",
            "2",
            "--hours-per-domain",
            "1",
            "--concurrency",
            "0",
            "--home",
            str(home),
        ],
    )
    assert said.exit_code == 2, said.output
    assert "--concurrency must be at least 1, got 0" in " ".join(said.output.split())
    assert not home.exists() or not any(home.rglob("*.mp4"))  # no collection was made
