"""`runs` says, for each way a run stopped, the command that takes it further, and that
command does: a resumed run keeps its per-seed cap (a new run with a larger one is what
helps), a campaign's cap is raised in the settings, a killed run or a seed a provider failed
is simply picked up again."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from click.testing import Result
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.overview import list_runs
from playlisteval.runs import StopKind
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.runlog import run_ids

RUN = "r-step18"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli_app, list(args))


def advice(home: Path, run_id: str) -> str:
    """What `runs` would say to take ``run_id`` further, as one flat text."""
    with App(load_settings(home)) as app:
        (row,) = [r for r in list_runs(app) if r.run_id == run_id]
        return " ".join(runs.resume_lines(app, row))


def only_run(home: Path) -> str:
    with App(load_settings(home)) as app:
        (run_id,) = run_ids(app.events)
    return run_id


def went_on(result: Result) -> int:
    """How many calls a resumed or new run made (it must have made some)."""
    assert result.exit_code == 0, result.output
    calls = re.search(r"\((\d+) calls made", " ".join(result.output.split()))
    assert calls, result.output
    return int(calls.group(1))


def settings(home: Path, text: str) -> None:
    (home / SETTINGS_FILE).write_text((home / SETTINGS_FILE).read_text() + "\n" + text)


# -- the advice, case by case ---------------------------------------------------------------------


GO_ON = "`playlisteval curate --run R`"
CAP = "stopped by its cap"


@pytest.mark.parametrize(
    ("state", "stops", "says", "not_says"),
    [
        ("unfinished", {}, f"it is unfinished: {GO_ON} picks it up", "USD"),
        ("interrupted", {}, f"it is interrupted: {GO_ON} picks it up", "USD"),
        (CAP, {"run": 2}, "`playlisteval curate --run R --budget USD`", "--again"),
        (CAP, {"seed": 2}, "`playlisteval curate --again --per-seed USD`", "--budget"),
        (CAP, {"day": 1}, f"after 00:00 UTC, when it renews, {GO_ON}", "--budget"),
        (CAP, {"total": 1}, "raise budget.cap_usd", "--budget"),
        ("completed", {"failure": 1}, f"an error: {GO_ON} picks it up", "USD"),
        # The --budget command picks an unfinished run up as well: one command, not two.
        ("unfinished", {"run": 1}, "--run R --budget USD", "picks it up"),
    ],
)
def test_each_stop_is_told_the_command_that_takes_it_further(
    state: str, stops: dict[StopKind, int], says: str, not_says: str
) -> None:
    text = " ".join(runs.resume_advice("R", state, stops, 10_000))
    assert says in text
    assert not_says not in text


def test_a_fleets_run_is_not_told_curate_run_which_refuses_it() -> None:
    (line,) = runs.resume_advice("R", CAP, {"total": 1}, 0, fleet=True)
    assert "`playlisteval fleet` lists the parked ones" in line
    assert GO_ON not in line


@pytest.mark.parametrize("state", ["completed", "running (curate@h:1)", "queued (3 open)"])
def test_a_run_done_or_worked_on_now_is_told_nothing(state: str) -> None:
    assert runs.resume_advice("R", state, {}, 0) == []


# -- the advice against real runs, and the command it names run as named ---------------------------


def test_a_run_its_own_cap_stopped_is_told_budget_and_that_goes_on(workspace: Path) -> None:
    stopped = invoke("curate", "--budget", "0.01", "--max-seeds", "2", "--home", str(workspace))
    assert stopped.exit_code == 0, stopped.output
    run_id = only_run(workspace)
    said = advice(workspace, run_id)
    assert f"`playlisteval curate --run {run_id} --budget USD`" in said
    assert "--per-seed" not in said
    assert went_on(invoke("curate", "--run", run_id, "--budget", "5", "--home", str(workspace)))
    assert advice(workspace, run_id) == ""


def test_a_run_the_per_seed_cap_stopped_is_not_told_budget(workspace: Path) -> None:
    """Its cap is not what stopped it: --budget on it would stop again at once."""
    stopped = invoke(
        "curate", "--budget", "5", "--per-seed", "0.001", "--max-seeds", "2",
        "--home", str(workspace),
    )  # fmt: skip
    assert stopped.exit_code == 0, stopped.output
    run_id = only_run(workspace)
    said = advice(workspace, run_id)
    assert "the per-seed cap stopped 2 seed(s), and a resumed run keeps it" in said
    assert "`playlisteval curate --again --per-seed USD`" in said
    assert "--budget" not in said
    shown = " ".join(invoke("runs", "--home", str(workspace)).output.split())
    assert "curate --again --per-seed USD" in shown  # what `runs` itself prints
    assert f"curate --run {run_id} --budget" not in shown
    again = invoke(
        "curate", "--again", "--per-seed", "5", "--budget", "5", "--max-seeds", "2",
        "--home", str(workspace),
    )  # fmt: skip
    assert went_on(again) >= 2
    assert "stopped by the per-seed cap" not in " ".join(again.output.split())


def test_a_run_the_campaigns_total_stopped_is_told_to_raise_it_and_then_goes_on(
    workspace: Path,
) -> None:
    settings(workspace, "[budget]\ncap_usd = 0.000001\n")
    with App(load_settings(workspace)) as app:
        app.set_budget_caps()  # the campaign's accounts, as `serve` makes them
    stopped = invoke("curate", "--budget", "5", "--max-seeds", "2", "--home", str(workspace))
    assert stopped.exit_code == 0, stopped.output
    run_id = only_run(workspace)
    said = advice(workspace, run_id)
    assert "the campaign's total cap stopped 2 seed(s): raise budget.cap_usd" in said
    assert f"then `playlisteval curate --run {run_id}` takes them further" in said
    assert "--budget" not in said
    text = (workspace / SETTINGS_FILE).read_text().replace("0.000001", "50.0")
    (workspace / SETTINGS_FILE).write_text(text)
    with App(load_settings(workspace)) as app:
        app.set_budget_caps()  # what a running `serve` does at its next tick
    assert went_on(invoke("curate", "--run", run_id, "--home", str(workspace))) >= 2


def test_a_run_the_days_cap_stopped_is_told_to_wait_for_the_next_day(workspace: Path) -> None:
    settings(workspace, "[budget]\nper_day_usd = 0.000001\n")
    with App(load_settings(workspace)) as app:
        app.set_budget_caps()
    stopped = invoke("curate", "--budget", "5", "--max-seeds", "1", "--home", str(workspace))
    assert stopped.exit_code == 0, stopped.output
    run_id = only_run(workspace)
    said = advice(workspace, run_id)
    assert "the campaign's cap for the day stopped 1 seed(s): after 00:00 UTC" in said
    assert "--budget" not in said


def test_a_run_killed_before_its_end_is_picked_up_as_told(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        seeds = app.catalog.seeds()[:2]
        app.curator().open_run(RUN, seeds, budget_micros=5_000_000)  # then the process died
    said = advice(workspace, RUN)
    assert f"{RUN}: it is unfinished: `playlisteval curate --run {RUN}` picks it up" in said
    assert went_on(invoke("curate", "--run", RUN, "--home", str(workspace))) >= 2


def _failing(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    raise RuntimeError("HTTP 503: the provider is down")


def test_seeds_a_provider_failure_stopped_are_told_to_resume_and_then_go_on(
    workspace: Path,
) -> None:
    with App(load_settings(workspace, curation={"provider_retry_rounds": 0})) as app:
        curator = app.curator()
        curator.model_for = lambda _model_id: FunctionModel(_failing, model_name="down")
        seeds = app.catalog.seeds()[:1]
        report = anyio.run(lambda: curator.curate(RUN, seeds, budget_micros=5_000_000))
    assert report.outcome == "completed"
    assert report.stopped
    said = advice(workspace, RUN)
    assert "1 seed(s) stopped on a provider failure or an error" in said
    assert f"`playlisteval curate --run {RUN}` picks it up" in said
    assert went_on(invoke("curate", "--run", RUN, "--home", str(workspace))) >= 1
    assert advice(workspace, RUN) == ""
