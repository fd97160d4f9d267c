"""A budget refusal names whose cap refused: an evaluation's and the difficulty gate's caps are
theirs, not "the run's", and each says which command raises it. The stored refusal keeps the
shape the log's readers (and the schema-1 upcaster) know."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from typer.testing import CliRunner

from agents.curation import resumed_recorder
from agents.evaluation import eval_stream
from agents.smoke import smoke_stream
from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from policies.budget import BudgetExhausted, CapOwner, cap_owner, make_budget
from policies.prices import PriceTable
from store.events import CallRefused, decode_event, pairs_stream, run_stream

RUN = "r-step18"


def refusal(stream: str) -> BudgetExhausted:
    """What a budget over ``stream``'s calls, capped at 10 micro-USD, says to a call of 11."""
    budget = make_budget(None, cap_micros=10, hold_prefix=stream, item=lambda _owner: None)
    with pytest.raises(BudgetExhausted) as caught:
        budget.reserve("owner", 11, "c1")
    return caught.value


@pytest.mark.parametrize(
    ("stream", "whose", "raise_with"),
    [
        (eval_stream("e1"), "the evaluation's cap", "`playlisteval eval` and --budget USD"),
        (pairs_stream(RUN), "the difficulty gate's cap", "`playlisteval pairs --budget USD`"),
        (smoke_stream(RUN), "the smoke test's cap", "`playlisteval smoke --budget USD`"),
    ],
)
def test_a_commands_own_cap_is_named_as_its_own_not_the_runs(
    stream: str, whose: str, raise_with: str
) -> None:
    exc = refusal(stream)
    message = str(exc)
    assert whose in message
    assert raise_with in message
    assert "the run" not in message
    assert "run cap" not in message
    assert exc.which == "run"  # the stored CallRefused.cap: the command's own cap


def test_a_runs_cap_is_still_the_runs() -> None:
    message = str(refusal(run_stream(RUN)))
    assert message.startswith("budget exhausted for the run: ")
    assert "of the run cap 10" in message


@pytest.mark.parametrize(
    ("stream", "owner"),
    [
        (eval_stream("e1"), "evaluation"),
        (pairs_stream(RUN), "difficulty gate"),
        (smoke_stream(RUN), "smoke test"),
        (run_stream(RUN), "run"),
    ],
)
def test_whose_cap_follows_the_stream_the_calls_are_recorded_in(
    stream: str, owner: CapOwner
) -> None:
    assert cap_owner(stream) == owner


@pytest.mark.parametrize(
    ("owner", "which"),
    [
        ("evaluation", "run"),
        ("difficulty gate", "run"),
        ("smoke test", "run"),
        ("run", "seed"),
        ("run", "account"),
    ],
)
def test_a_schema_1_refusal_in_the_new_words_is_read_back_as_the_same_cap(
    owner: CapOwner, which: Literal["run", "seed", "account"]
) -> None:
    """store.events' upcaster tells a seed's and an account's refusal by their reasons'
    prefixes, anything else is the command's own cap: the new words keep that true."""
    reason = str(
        BudgetExhausted(
            seed_id="s1",
            needed_micros=10,
            left_micros=1,
            cap_micros=5,
            which=which,
            account="total" if which == "account" else None,
            cap_of=owner,
        )
    )
    data = {"key": "k", "role": "r", "model": "m", "needed_micros": 10, "reason": reason}
    event = decode_event("CallRefused", 1, data)
    assert isinstance(event, CallRefused)
    assert event.cap == which


def test_an_evaluations_recorder_refuses_in_the_evaluations_name() -> None:
    """The recorder an evaluation is judged through (``resumed_recorder`` over its stream)."""
    recorder = resumed_recorder(
        [],
        budget_micros=10,
        prices=PriceTable.load(),
        offline=True,
        traffic=None,
        hold_prefix=eval_stream("e1"),
    )
    with pytest.raises(BudgetExhausted, match=r"^budget exhausted for the evaluation: "):
        recorder.budget.reserve("pair-1:judge", 11, "c1")


def test_the_difficulty_gate_stopped_by_its_cap_says_it_was_the_gates(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        report = runs.curate(app, budget_usd=5.0, max_seeds=3, run_id=RUN)
    assert report.accepted, "no accepted item to make pairs from"
    result = CliRunner().invoke(
        cli_app, ["pairs", "--run", RUN, "--budget", "0.000001", "--home", str(workspace)]
    )
    flat = " ".join(result.output.split())
    assert result.exit_code != 0, flat
    assert "budget exhausted for the difficulty gate" in flat
    assert "raise it with `playlisteval pairs --budget USD`" in flat
    assert "the run" not in flat.split("budget exhausted", 1)[1]
    with App(load_settings(workspace)) as app:
        refused = [
            e
            for s in app.events.read_stream(pairs_stream(RUN))
            if isinstance(e := s.event(), CallRefused)
        ]
    assert refused
    assert {e.cap for e in refused} == {"run"}
    assert all(e.reason.startswith("budget exhausted for the difficulty gate") for e in refused)
