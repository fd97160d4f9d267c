"""The curation loop end to end: real SQLite event store, real index, the offline provider."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.workers import REJECTED_ANSWER_CHARS
from playlisteval import runs
from playlisteval.app import App, model_factory
from playlisteval.settings import load_settings
from store.catalog import SeedRow
from store.events import (
    AttemptStarted,
    CallRecorded,
    GateRejected,
    ItemAccepted,
    RunFinished,
    SeedDiscarded,
    run_stream,
    seed_stream,
    usd_to_micros,
)
from store.ledger import Ledger, spend
from tests.workspaces import copy_workspace
from tools.contracts.roles import parse_context

DEMO_SEEDS = 18
DEMO_BUDGET = 5.0


@pytest.fixture(scope="module")
def demo_run(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One curation run of the demo's seeds, made once for the replay tests."""

    home = tmp_path_factory.mktemp("run") / "ws"
    copy_workspace(demo_home, home)
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=DEMO_BUDGET, max_seeds=DEMO_SEEDS)
    return home, report.run_id


def ledger(pairs: list[tuple[str, Any]]) -> Ledger:
    """The one ledger over a run's ``(seed, event)`` pairs."""
    return spend(e for _, e in pairs)


def _log(app: App, run_id: str) -> list[tuple[str, Any]]:
    prefix = seed_stream(run_id, "")
    return [(s.stream[len(prefix) :], s.event()) for s in app.events.read_all(stream_prefix=prefix)]


def test_demo_run_feeds_rejections_back_into_accepted_retries_and_discards(
    demo_run: tuple[Path, str],
) -> None:
    home, run_id = demo_run
    with App(load_settings(home)) as app:
        audit = runs.audit(app, run_id)
        assert audit.outcome == "completed"
        assert audit.retries_accepted, "no seed was accepted after a rejection"
        statuses = Counter(t.status for t in audit.seeds)
        assert statuses["discarded"] >= 1
        assert statuses["accepted"] >= 1
        assert audit.spent_micros <= usd_to_micros(DEMO_BUDGET)
        # The rejection really went back into the next attempt's prompt.
        log = _log(app, run_id)
        seed = audit.retries_accepted[0]
        events = [e for s, e in log if s == seed]
        first_rejection = next(e for e in events if isinstance(e, GateRejected))
        later = events[events.index(first_rejection) :]
        retry = next(e for e in later if isinstance(e, AttemptStarted))
        assert any(first_rejection.reason in line for line in retry.feedback)
        assert isinstance(events[-1], ItemAccepted)
        discarded = next(t for t in audit.seeds if t.status == "discarded")
        reasons = next(s["reasons"] for s in discarded.steps if s["step"] == "discarded")
        assert "attempts" in reasons[0]
        assert len(reasons) > 1


def test_every_call_is_priced_as_the_configured_live_model(demo_run: tuple[Path, str]) -> None:
    home, run_id = demo_run
    with App(load_settings(home)) as app:
        calls = [e for _, e in _log(app, run_id) if isinstance(e, CallRecorded)]
        assert calls
        # A request repeated within a seed is answered from its first record (replayed, free).
        paid = [c for c in calls if not c.replayed]
        assert all(c.offline and c.cost_micros > 0 for c in paid)
        assert all(c.attempts == 0 for c in calls if c.replayed)
        assert len({(c.call_id.split(":")[0], c.key) for c in paid}) == len(paid)
        configured = app.curator().config.models.all_models()
        assert {c.model for c in calls} <= configured
        assert sum(c.cost_micros for c in paid) == ledger(_log(app, run_id)).spent_micros


def test_strict_replay_makes_no_call_and_reproduces_items_and_costs(
    demo_run: tuple[Path, str],
) -> None:
    home, run_id = demo_run
    with App(load_settings(home)) as app:
        result = runs.replay_strict(app, run_id)
        assert result.model_calls == 0
        assert result.report.live_calls == 0
        assert sorted(result.report.accepted) == sorted(result.original_accepted)
        # Served from the log, the calls cost nothing now; what they cost then is kept apart.
        assert result.report.spent_micros == 0
        assert result.report.replayed_micros == result.original_cost_micros
        assert result.report.replayed_calls > 0
        assert result.verdict is not None
        assert result.verdict.ok, result.verdict.problems()
        assert result.verdict.decisions > 0


def test_strict_replay_at_half_budget_reports_a_subset_for_at_most_half(
    demo_run: tuple[Path, str],
) -> None:
    home, run_id = demo_run
    with App(load_settings(home)) as app:
        full = runs.replay_strict(app, run_id)
        half_usd = full.original_cost_micros / 2 / 1_000_000
        half = runs.replay_strict(app, run_id, budget_usd=half_usd)
        assert half.model_calls == 0
        assert set(half.report.accepted) < set(full.original_accepted)
        assert half.report.accepted, "half the money should still buy some items"
        what_if = half.report.spent_micros + half.report.replayed_micros
        assert 0 < what_if <= usd_to_micros(half_usd)
        assert any(why.startswith("budget") for why in half.report.stopped.values())


def test_strict_replay_follows_the_runs_recorded_definition_not_todays_settings(
    demo_run: tuple[Path, str],
) -> None:
    home, run_id = demo_run
    # Other settings today: the generator would be asked for other paragraph counts. The run's
    # definition recorded the counts it used, so a strict replay is still exact.
    with App(load_settings(home, generation={"gold_max_paragraphs": 4})) as app:
        result = runs.replay_strict(app, run_id)
    assert result.model_calls == 0
    assert result.verdict is not None
    assert result.verdict.ok, result.verdict.problems()[:3]


def test_a_replay_against_today_runs_the_counterfactual_under_todays_settings(
    demo_run: tuple[Path, str],
) -> None:
    home, run_id = demo_run
    with App(load_settings(home, generation={"gold_max_paragraphs": 4})) as app:
        result = runs.replay_strict(app, run_id, against_today=True)
    assert result.model_calls == 0
    assert result.verdict is None  # a counterfactual: nothing is compared
    assert "today's code and settings" in result.policy
    # The generator's requests differ today, so the log holds none of their answers.
    missing = [s for s, why in result.report.stopped.items() if why.startswith("unrecorded")]
    assert missing, result.report.stopped


def test_strict_replay_asks_for_the_models_the_run_recorded_not_todays_defaults(
    demo_run: tuple[Path, str],
) -> None:
    """A run replays as it was made even after the configured models change (a log recorded
    under older default ids stays replayable)."""
    home, run_id = demo_run
    with App(load_settings(home, models={"sufficiency": "gpt-5.4"})) as app:
        result = runs.replay_strict(app, run_id)
    assert result.model_calls == 0
    assert result.verdict is not None
    assert result.verdict.ok, result.verdict.problems()[:3]


def test_counterfactual_fewer_attempts_accepts_a_subset_without_calls(
    demo_run: tuple[Path, str],
) -> None:
    home, run_id = demo_run
    with App(load_settings(home)) as app:
        one = runs.replay_strict(app, run_id, max_attempts=1)
        assert one.model_calls == 0
        assert set(one.report.accepted) <= set(one.original_accepted)
        assert len(one.report.accepted) < len(one.original_accepted)


# -- malformed model output -----------------------------------------------------------------------


def _phase1_breaker(kind: str, inner: Model) -> Model:
    """A generator that writes ``kind`` of bad output; every other role stays offline."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[-1].parts[-1].content[0])  # type: ignore[union-attr,index]
        context = parse_context(prompt)
        if context.role != "phase1_generator":
            return await inner.request(messages, None, info.model_request_parameters)
        seg = context.segments[0]  # type: ignore[union-attr]
        good_cite = f"({seg.video_id} @ 00:00–00:30)"
        args = {
            "bad-json": '{"question": "what is',
            "schema": '{"question": 3, "gold": []}',
            "outside": json.dumps(
                {
                    "question": "q?",
                    "gold_answer": "\n\n".join([f"A claim ({seg.video_id} @ 59:00–59:30)."] * 3),
                }
            ),
            "empty": json.dumps({"question": "", "gold_answer": ""}),
            "huge": json.dumps(
                {"question": "q?", "gold_answer": ("word " * 20_000 + good_cite + "\n\n") * 1}
            ),
        }[kind]
        tool = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(tool_name=tool, args=args)])

    return FunctionModel(answer, model_name=f"breaker:{kind}")


@pytest.mark.parametrize(
    ("kind", "gate", "needle"),
    [
        ("bad-json", "output", "malformed output"),
        ("schema", "output", "malformed output"),
        ("outside", "structural", "outside"),
        ("empty", "structural", "empty"),
        ("huge", "structural", "characters"),
    ],
)
def test_malformed_generator_output_is_a_recorded_rejection(
    workspace: Path, kind: str, gate: str, needle: str
) -> None:
    with App(load_settings(workspace, generation={"max_attempts": 2})) as app:
        offline = model_factory(app.settings)
        curator = app.curator()
        curator.model_for = lambda model_id: _phase1_breaker(kind, offline(model_id))
        seed = app.catalog.seeds()[0]
        report = anyio.run(lambda: curator.curate("bad", [seed], budget_micros=None))
        assert report.discarded == [seed.id]
        events = [e for _, e in _log(app, "bad")]
        rejections = [e for e in events if isinstance(e, GateRejected)]
        assert len(rejections) == 2
        assert all(r.gate == gate for r in rejections)
        assert needle in rejections[0].reason.lower()
        # A 100 kB answer is not echoed whole: it is cut at the structural gate's own limit.
        assert len(rejections[0].rejected_output) <= REJECTED_ANSWER_CHARS + 200
        assert isinstance(events[-1], SeedDiscarded)


# -- budget: forty seeds in flight -------------------------------------------------------------


def _many_seeds(app: App, n: int) -> list[SeedRow]:
    segments = [s.id for s in app.catalog.segments()]
    pairs = [(a, b) for i, a in enumerate(segments) for b in segments[i + 1 :]]
    # More seeds than distinct pairs: a pair may come back under another seed id.
    rows = [
        SeedRow(id=f"bulk-{i:04d}", domain="bulk", segment_a=a, segment_b=b, cosine=0.5)
        for i, (a, b) in ((i, pairs[i % len(pairs)]) for i in range(n))
    ]
    app.catalog.replace_seeds([*app.catalog.seeds(), *rows])
    return rows


SEEDS = 40  # all in flight at once


@pytest.mark.slow
def test_forty_seeds_in_flight_never_pass_the_cap_and_finish_on_resume(workspace: Path) -> None:
    with App(load_settings(workspace, curation={"concurrency": SEEDS})) as app:
        seeds = _many_seeds(app, SEEDS)
        assert len(seeds) == SEEDS
        curator = app.curator()
        cap = usd_to_micros(1.0)  # about half of what the seeds cost (about 2 USD)
        report = anyio.run(lambda: curator.curate("big", seeds, budget_micros=cap))
        assert report.spent_micros <= cap
        assert report.outcome == "budget"
        stopped = {s: why for s, why in report.stopped.items()}
        assert stopped, "the cap should stop some seeds"
        assert all(why.startswith("budget") for why in stopped.values())
        assert len(report.accepted) + len(report.discarded) + len(stopped) == SEEDS
        spent_log = ledger(_log(app, "big")).spent_micros
        assert spent_log <= cap
        finished = [e for e in (s.event() for s in app.events.read_stream(run_stream("big")))]
        assert isinstance(finished[-1], RunFinished)
        assert finished[-1].outcome == "budget"

        resumed = runs.resume(app, "big", budget_usd=40.0)  # the run's new total cap
        assert not resumed.stopped
        assert len(resumed.accepted) + len(resumed.discarded) == SEEDS
        assert set(report.accepted) <= set(resumed.accepted)


def test_cli_audit_replay_and_rebuild_read_the_run(demo_run: tuple[Path, str]) -> None:
    from typer.testing import CliRunner

    from playlisteval.cli import app as cli_app

    home, run_id = demo_run
    runner = CliRunner()
    result = runner.invoke(cli_app, ["audit", "--run", run_id, "--json", "--home", str(home)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["run_id"] == run_id
    assert data["accepted_after_rejection"]
    assert sum(data["spend"]["model"].values()) == data["spent_micros"]
    seed = data["accepted_after_rejection"][0]
    result = runner.invoke(cli_app, ["audit", "--run", run_id, "--seed", seed, "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "reject" in result.output
    assert "rejected output" in result.output
    result = runner.invoke(cli_app, ["replay", run_id, "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "0 model calls" in " ".join(result.output.split())
    result = runner.invoke(cli_app, ["store", "rebuild", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "rebuilt from" in result.output
    with App(load_settings(home)) as app:
        statuses = app.projections().seed_statuses(run_id)
        assert Counter(s.state for s in statuses) == Counter(
            t.status for t in runs.audit(app, run_id).seeds
        )
    result = runner.invoke(cli_app, ["replay", "no-such-run", "--home", str(home)])
    assert result.exit_code == 2
    assert "no run 'no-such-run'" in result.output


def test_rehearsal_prices_the_loop_without_touching_the_workspace_log(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        before = app.events.last_seq()
        result = runs.rehearse(app, seeds=4, concurrency=4)
        assert app.events.last_seq() == before
        assert result.seeds == 4
        assert result.accepted >= 1
        spent = result.audit.spent_micros
        assert spent > 0
        assert result.cost_per_accepted_micros == spent // result.accepted
        for split in (result.audit.by_phase, result.audit.by_gate, result.audit.by_model):
            assert sum(split.values()) == spent
        configured = app.curator().config.models.all_models()
        assert set(result.audit.by_model) <= configured


def test_a_shielded_append_after_the_writer_was_cancelled_is_committed(tmp_path: Path) -> None:
    """A run cancelled with calls in flight records them as interrupted from shielded cleanup,
    after the group-commit writer was cancelled with the run: that append must reach the log,
    not wait forever for a writer that is gone (the hang once seen in test_batch_mode)."""
    from agents.curation import GroupCommit
    from store.events import RunStarted
    from store.eventstore import open_event_store

    store = open_event_store(tmp_path / "events.db")
    committed: list[str] = []
    writer = GroupCommit(store, lambda stream, _event: committed.append(stream))
    event = RunStarted(
        run_id="r", seeds=("s",), budget_micros=None, max_attempts=6, concurrency=1, offline=True
    )

    async def main() -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(writer.run)
                await anyio.sleep(0.01)
                scope.cancel()
                await anyio.sleep(1)  # cancelled here, with the writer
        with anyio.CancelScope(shield=True), anyio.fail_after(5):
            await writer.append("run-r", event)

    anyio.run(main)
    assert committed == ["run-r"]
    assert [s.type for s in store.read_stream("run-r")] == ["RunStarted"]
    store.close()
