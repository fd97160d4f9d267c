"""Golden logs recorded by an earlier version still replay strictly on today's code, and the
deliberately divergent one is caught where it diverges (see ``tests/golden_logs.py``, which
also says how to record them again when a change to keys, prompts or events is meant)."""

from __future__ import annotations

from pathlib import Path

import pytest

from playlisteval import runs
from playlisteval.app import App
from playlisteval.settings import load_settings
from tests import golden_logs
from tests.workspaces import copy_workspace

REGENERATE = (
    "if the change is meant, record today's log again with `.venv/bin/python -m "
    "tests.golden_logs`; a log of an earlier schema must replay as it is (an upcaster)"
)


@pytest.fixture
def home(demo_playlist: Path, demo_home: Path, tmp_path: Path) -> Path:
    # Request keys hash the videos' content: on other bytes no recorded answer is found, and
    # the replay would only say it stopped early. Say why first.
    differ = golden_logs.inputs_differ(demo_playlist)
    assert differ is None, differ
    return copy_workspace(demo_home, tmp_path / "ws")


@pytest.mark.parametrize("log", golden_logs.EXACT, ids=lambda path: path.name)
def test_each_golden_run_replays_exactly_on_todays_code(home: Path, log: Path) -> None:
    with App(load_settings(home)) as app:
        run_id = golden_logs.load(app.events, log)
        result = runs.replay_strict(app, run_id)
    assert result.model_calls == 0
    assert result.verdict is not None
    assert result.verdict.ok, (
        f"the golden log no longer replays: {result.verdict.problems()[:3]}; {REGENERATE}"
    )
    assert result.verdict.decisions > 20
    assert sorted(result.report.accepted) == sorted(result.original_accepted)


def test_the_divergent_golden_run_is_caught_where_its_answer_was_changed(home: Path) -> None:
    changed_line = next(
        n
        for n, (good, bad) in enumerate(
            zip(
                golden_logs.records(golden_logs.SMALL),
                golden_logs.records(golden_logs.DIVERGENT),
                strict=True,
            )
        )
        if good != bad
    )
    with App(load_settings(home)) as app:
        run_id = golden_logs.load(app.events, golden_logs.DIVERGENT)
        result = runs.replay_strict(app, run_id)
    assert result.verdict is not None
    assert not result.verdict.ok
    assert result.verdict.chain == []  # loaded through the store: its chains are whole
    # The changed answer is the 0-based line (seqs count from 1): nothing before it differs; the
    # answer itself no longer prices as recorded, and the verdict it led to is not the log's.
    first = result.verdict.differences[0]
    assert first.seq >= changed_line + 1
    whats = " ".join(d.what for d in result.verdict.differences)
    assert "the log has GatePassed where the replay derives GateRejected" in whats


def test_the_golden_logs_span_the_run_starts_schemas() -> None:
    """One golden log per generation of a run's start: before its definition was recorded
    (schema 1, rebuilt on replay) and with it (schema 2)."""
    starts = {
        log.name: next(r for r in golden_logs.records(log) if r["type"] == "RunStarted")
        for log in golden_logs.EXACT
    }
    assert starts["small-run.jsonl"]["schema"] == 1
    assert "spec" not in starts["small-run.jsonl"]["data"]
    assert starts["spec-run.jsonl"]["schema"] == 2
    spec = starts["spec-run.jsonl"]["data"]["spec"]
    assert [g["name"] for g in spec["gates"]][:4] == [
        "structural",
        "transcript_test",
        "parametric_test",
        "sufficiency",
    ]
    assert spec["roles"]["phase1_generator"]["template"]
