"""The money harness's seeded random interleavings of real commands and ``kill -9`` on the real
PostgreSQL (the SQLite trials and the readers' agreement: test_money_invariants.py; a file of
its own so that the suite's workers run both backends side by side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.money_harness import prepare_base, run_trials, summary

TRIALS = 2  # bench/money.py runs a hundred and more
pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def base(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_base(demo_home, tmp_path_factory.mktemp("money-pg") / "base", 3)


@pytest.mark.slow
def test_random_kills_resumes_and_concurrent_commands_keep_every_money_invariant_on_postgres(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trials = run_trials(base, tmp_path, "postgres", TRIALS)
    with capsys.disabled():
        print("\n" + summary(trials, "postgres"))
    assert not [(t.number, v) for t in trials for v in t.violations]
    assert sum(t.kills for t in trials) > 0, "the trials should kill some commands"
