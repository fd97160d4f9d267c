"""Money that cannot leak, checked the way a week-long campaign breaks it: seeded random
interleavings of real commands, ``kill -9`` at random moments, resumes with and without
``--budget``, two resumes at once, two ``pairs`` at once and an evaluation, on SQLite and on the
real PostgreSQL (``tests/money_harness.py``; ``bench/money.py`` runs more trials). And every
reader of the log — the ledger, ``audit``, ``RunFinished``, strict replay, the metrics, the
projections, the export — reports the same spend after a crash and a resume."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from playlisteval import runs
from playlisteval.app import App
from playlisteval.metrics import LogMetrics
from playlisteval.settings import load_settings
from store.events import RunFinished, run_stream, seed_stream
from store.ledger import stream_spend
from tests.money_harness import Harness, prepare_base, run_trials, summary
from tests.workspaces import copy_workspace

# Trials the suite runs on SQLite (PostgreSQL's: test_money_invariants_pg.py); bench/money.py
# runs the rest of the 200+ (its default).
TRIALS = 2


@pytest.fixture(scope="module")
def base(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_base(demo_home, tmp_path_factory.mktemp("money") / "base", 3)


@pytest.mark.slow
def test_random_kills_resumes_and_concurrent_commands_keep_every_money_invariant(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trials = run_trials(base, tmp_path, "sqlite", TRIALS)
    with capsys.disabled():
        print("\n" + summary(trials, "sqlite"))
    assert not [(t.number, v) for t in trials for v in t.violations]
    assert sum(t.kills for t in trials) > 0, "the trials should kill some commands"


def test_every_reader_reports_the_same_spend_after_a_crash_and_a_resume(
    base: Path, tmp_path: Path
) -> None:
    home = copy_workspace(base, tmp_path / "ws")
    settings_file = home / "playlisteval.toml"
    plain = settings_file.read_text()
    # Slow answers while the command is to be killed, so a reservation is open when it is.
    settings_file.write_text(plain + "\n[curation]\nconcurrency = 3\noffline_latency_s = 1.0\n")
    harness = Harness(base, tmp_path)
    child = harness.start(home, "curate", "--budget", "5", "--max-seeds", "3")
    # Kill it mid-call: once a reservation is in the log with no answer yet.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.process.is_alive():
        with App(load_settings(home)) as app:
            reserved = len(app.events.read_all(types=["CallReserved"]))
            answered = len(app.events.read_all(types=["CallRecorded", "CallFailed"]))
        if reserved >= 3 and reserved > answered:
            break
        time.sleep(0.05)
    child.kill()
    settings_file.write_text(plain + "\n[curation]\nconcurrency = 3\noffline_latency_s = 0.05\n")
    with App(load_settings(home)) as app:
        (run_id,) = [s[len("run-") :] for s in app.events.streams("run-")]
        crashed = stream_spend(app.events, seed_stream(run_id, ""))
        assert crashed.open_micros > 0, "the kill should leave reservations with no answer"
        runs.resume(app, run_id)
        ledger = stream_spend(app.events, seed_stream(run_id, ""))
        assert ledger.open_micros >= crashed.open_micros  # the orphans stay counted, once
        finished = [
            e
            for e in (s.event() for s in app.events.read_stream(run_stream(run_id)))
            if isinstance(e, RunFinished)
        ]
        audit = runs.audit(app, run_id)
        replay = runs.replay_strict(app, run_id)
        assert replay.verdict is not None
        assert replay.verdict.ok, replay.verdict.problems()
        exported = runs.export(app, tmp_path / "bench", run_id)
        card = json.loads((exported.path / "benchmark.json").read_text())
        metrics = LogMetrics(app.events)
        metrics.catch_up()
        projections = app.projections()
        projections.catch_up()
        pairs = stream_spend(app.events, f"pairs-{run_id}")
        readers = {
            "ledger": ledger.spent_micros,
            "RunFinished": finished[-1].spent_micros,
            "audit": audit.spent_micros,
            "audit by model": sum(audit.by_model.values()),
            "replay (what the run paid)": replay.original_cost_micros,
            "metrics (curation + judges)": metrics.snapshot().spend_micros - pairs.spent_micros,
            "projections": projections.spend(run_id)[run_id],
            "projections by seed": sum(s.spent_micros for s in projections.seed_statuses(run_id)),
            "benchmark.json": card["cost_micros"],
        }
    assert len(set(readers.values())) == 1, readers
