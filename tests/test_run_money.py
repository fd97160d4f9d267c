"""A run keeps its cap, one process writes a run, nothing is paid twice by accident, and money
inputs are checked before anything is written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agents.ownership import WriterLease, pairs_lease, run_lease
from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import EXIT_BUSY, EXIT_FIX
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from store.coordination import LeaseHeld, Leases
from store.events import RunResumed, RunStarted, run_stream, seed_stream, usd_to_micros
from store.ledger import stream_spend


def _cli(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli_app, [*args, "--home", str(home)])


def _run_events(app: App, run_id: str) -> list[Any]:
    return [s.event() for s in app.events.read_stream(run_stream(run_id))]


# -- a run keeps its cap ---------------------------------------------------------------------------


def test_a_resume_without_budget_keeps_the_runs_cap_and_stays_under_it(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        first = runs.curate(app, budget_usd=0.15, max_seeds=4)
        assert first.outcome == "budget"
        assert first.spent_micros > 0  # it got somewhere before the cap stopped it
        again = runs.resume(app, first.run_id)
        resumed = [e for e in _run_events(app, first.run_id) if isinstance(e, RunResumed)]
        assert resumed[-1].budget_micros == usd_to_micros(0.15)
        assert again.spent_micros <= usd_to_micros(0.15)
        assert stream_spend(
            app.events, seed_stream(first.run_id, "")
        ).spent_micros <= usd_to_micros(0.15)


def test_budget_on_resume_is_the_new_total_and_is_refused_below_the_spend(
    workspace: Path,
) -> None:
    with App(load_settings(workspace)) as app:
        first = runs.curate(app, budget_usd=0.15, max_seeds=4)
        before = app.events.last_seq()
    refused = _cli(workspace, "curate", "--run", first.run_id, "--budget", "0.01")
    assert refused.exit_code == EXIT_FIX, refused.output
    assert "total cap" in refused.output
    assert "spent" in refused.output
    with App(load_settings(workspace)) as app:
        assert app.events.last_seq() == before  # nothing written
        runs.resume(app, first.run_id, budget_usd=0.4)
        resumed = [e for e in _run_events(app, first.run_id) if isinstance(e, RunResumed)]
        assert resumed[-1].budget_micros == usd_to_micros(0.4)  # not 0.4 added to the spend
        spent = stream_spend(app.events, seed_stream(first.run_id, "")).spent_micros
        assert spent <= usd_to_micros(0.4)


def test_the_help_says_what_budget_means_on_resume() -> None:
    result = CliRunner().invoke(cli_app, ["curate", "--help"])
    text = " ".join(result.output.split())
    assert "new total cap" in text
    assert "keeps its cap" in text


# -- nothing paid twice by accident ---------------------------------------------------------------


def test_a_plain_curate_takes_only_seeds_no_run_has_taken(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        total = len(app.catalog.seeds())
        first = runs.curate(app, budget_usd=5.0, max_seeds=3)
        second = runs.curate(app, budget_usd=5.0, max_seeds=3)
        firsts = {s for s in _run_events(app, first.run_id)[0].seeds}
        seconds = {s for s in _run_events(app, second.run_id)[0].seeds}
        assert not firsts & seconds
        rest = runs.curate(app, budget_usd=0.0)  # takes every seed left (and stops at once)
        assert len(_run_events(app, rest.run_id)[0].seeds) == total - 6
    done = _cli(workspace, "curate", "--budget", "1")
    assert done.exit_code == EXIT_FIX, done.output
    assert "every active seed is in a run already" in done.output
    assert "--again" in done.output
    with App(load_settings(workspace)) as app:
        again = runs.curate(app, budget_usd=5.0, max_seeds=2, again=True)
        started = _run_events(app, again.run_id)[0]
        assert isinstance(started, RunStarted)
        assert set(started.seeds) <= firsts | seconds | set(_run_events(app, rest.run_id)[0].seeds)


def test_curate_run_with_a_mistyped_id_refuses_and_lists_recent_runs(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        made = runs.curate(app, budget_usd=5.0, max_seeds=1)
        before = app.events.last_seq()
    result = _cli(workspace, "curate", "--run", made.run_id + "x")
    assert result.exit_code == EXIT_FIX
    assert "no run" in result.output
    assert made.run_id in result.output
    with App(load_settings(workspace)) as app:
        assert app.events.last_seq() == before


def test_a_live_command_with_no_cap_refuses_and_names_the_flag(workspace: Path) -> None:
    result = _cli(workspace, "curate", "--live", "--max-seeds", "1")
    assert result.exit_code == EXIT_FIX, result.output
    assert "needs a cap" in result.output
    assert "--budget" in result.output


# -- one writer per run ---------------------------------------------------------------------------


def test_a_second_writer_on_a_run_is_refused_naming_the_holder(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        made = runs.curate(app, budget_usd=0.02, max_seeds=2)
        other = WriterLease.acquire(app.leases(), run_lease(made.run_id), "curate (elsewhere)")
        pairs = WriterLease.acquire(app.leases(), pairs_lease(made.run_id), "pairs (elsewhere)")
        before = app.events.last_seq()
        try:
            busy = _cli(workspace, "curate", "--run", made.run_id)
            assert busy.exit_code == EXIT_BUSY, busy.output
            assert "curate (elsewhere)" in busy.output
            assert f"pid {os.getpid()}" in busy.output
            busy = _cli(workspace, "pairs", "--run", made.run_id)
            assert busy.exit_code == EXIT_BUSY, busy.output
            assert "pairs (elsewhere)" in busy.output
            assert app.events.last_seq() == before
        finally:
            other.release()
            pairs.release()
        resumed = _cli(workspace, "curate", "--run", made.run_id, "--budget", "5")
        assert resumed.exit_code == 0, resumed.output


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_leases_are_taken_over_when_they_lapse_or_their_holder_is_gone(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from store.eventstore import open_event_store
    from tests.conftest import PG_URL

    if backend == "sqlite":
        store = open_event_store(tmp_path / "e.db")
    else:
        store = open_event_store(PG_URL, schema=request.getfixturevalue("pg_schema"))
    try:
        leases = Leases(store.engine)
        alive = leases.acquire("run:r", "a", lease_s=60, info={"pid": os.getpid()})
        with pytest.raises(LeaseHeld, match="another process"):
            leases.acquire("run:r", "b", lease_s=60, info={"pid": 1})
        lapsed = leases.acquire("run:x", "a", lease_s=-1, info={"pid": os.getpid()})
        taken = leases.acquire("run:x", "b", lease_s=60, info={})
        assert taken.took_over == "a"
        assert not leases.renew(lapsed, lease_s=60)  # its holder learns it lost the lease
        assert not leases.release(lapsed)
        # A holder on this machine whose process is gone (kill -9) leaves a row behind.
        dead = 2**22 + 12345
        leases.acquire("run:y", "dead", lease_s=600, info={"pid": dead})
        assert leases.acquire("run:y", "c", lease_s=60, info={}).took_over == "dead"
        assert leases.renew(alive, lease_s=60)
        assert leases.release(alive)
        assert leases.holder("run:r") is None
    finally:
        store.close()


# -- money inputs are checked first ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["curate", "--budget", "nan"], "finite"),
        (["curate", "--budget", "inf"], "finite"),
        (["curate", "--budget", "-1"], "0 or more"),
        (["curate", "--budget", "1e9"], "typo"),
        (["curate", "--budget", "1", "--per-seed", "-0.5"], "--per-seed"),
        (["curate", "--budget", "1", "--concurrency", "0"], "at least 1"),
        (["curate", "--budget", "1", "--concurrency", "-3"], "at least 1"),
        (["pairs", "--budget", "nan"], "finite"),
        (["export", "out", "--budget", "-2"], "0 or more"),
        (["replay", "r", "--budget", "inf"], "finite"),
        (["eval", "--benchmark", "b", "--judge", "offline-first", "--budget", "nan"], "finite"),
    ],
)
def test_bad_money_is_one_line_and_nothing_is_written(
    workspace: Path, args: list[str], needle: str
) -> None:
    with App(load_settings(workspace)) as app:
        before = app.events.last_seq()
    result = _cli(workspace, *args)
    assert result.exit_code == EXIT_FIX, result.output
    assert needle in result.output
    assert "Traceback" not in result.output
    with App(load_settings(workspace)) as app:
        assert app.events.last_seq() == before


def test_a_bad_cap_in_the_settings_is_one_line(workspace: Path) -> None:
    (workspace / "playlisteval.toml").write_text(
        (workspace / "playlisteval.toml").read_text() + "\n[budget]\ncap_usd = -4.0\n"
    )
    result = _cli(workspace, "curate")
    assert result.exit_code == EXIT_FIX
    assert "budget.cap_usd" in result.output
