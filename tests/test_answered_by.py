"""Who answered a recorded call is one field, read by one fold: a live provider, the offline
harness, a real local model, or the log. Logs written before the field was recorded are read
from what they did record."""

from __future__ import annotations

from pathlib import Path

import pytest

from playlisteval import runs
from playlisteval.app import App
from playlisteval.settings import load_settings
from store.answers import LABELS, answered_by, who_answered
from store.events import CallRecorded, decode_event, seed_stream
from tests import golden_logs

REAL_LOCAL_RESPONSE = {"provider_name": "real-local", "parts": []}


@pytest.mark.parametrize(
    ("data", "who", "original"),
    [
        ({"answered_by": "live"}, "live", "live"),
        ({"answered_by": "log", "offline": True}, "log", "offline"),
        ({"replayed": True, "offline": False}, "log", "live"),  # a log from before the field
        ({"offline": True}, "offline", "offline"),
        ({"offline": False}, "live", "live"),
        ({"offline": False, "response": REAL_LOCAL_RESPONSE}, "real-local", "real-local"),
        (
            {"replayed": True, "offline": False, "response": REAL_LOCAL_RESPONSE},
            "log",
            "real-local",
        ),
    ],
)
def test_who_answered_is_read_from_the_field_or_from_what_an_older_log_recorded(
    data: dict[str, object], who: str, original: str
) -> None:
    assert answered_by(data) == who
    assert answered_by(data, original=True) == original


def test_the_harness_is_labelled_as_one() -> None:
    assert "not evidence of model quality" in LABELS["offline"]


def test_an_offline_run_records_the_harness_and_its_replay_the_log(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=1)
        calls = [
            e
            for s in app.events.read_all(stream_prefix=seed_stream(report.run_id, ""))
            if isinstance(e := s.event(), CallRecorded)
        ]
    assert calls
    assert {c.answered_by for c in calls} == {"offline"}
    assert who_answered(calls) == {"offline": len(calls)}


def test_the_golden_log_from_before_the_field_reads_as_the_harness() -> None:
    calls = [
        decode_event(r["type"], r["schema"], r["data"])
        for r in golden_logs.records(golden_logs.SMALL)
        if r["type"] == "CallRecorded"
    ]
    assert calls
    assert all(isinstance(c, CallRecorded) and c.answered_by == "" for c in calls)
    # Answered by the harness, some of them served again from the run's own log.
    assert set(who_answered(calls)) <= {"offline", "log"}
    assert {answered_by(c, original=True) for c in calls} == {"offline"}
