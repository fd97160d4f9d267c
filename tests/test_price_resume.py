"""Prices are recorded with the run, at its start and at every resume: a run resumed after the
price table changed is charged and capped at the new prices from then on, says so, and its
untouched log still replays strictly (each call priced with what was in force when it was made),
rather than reading as tampering."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import structlog
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.events import RunResumed, RunStarted, run_stream


def _doubled(prices: dict[str, dict[str, Any]]) -> str:
    """Price overrides (TOML) doubling every rate the run recorded."""
    lines: list[str] = []
    for model, row in sorted(prices.items()):
        lines.append(f'[budget.price_overrides."{model}"]')
        for name, value in sorted(row.items()):
            if name.endswith("_per_mtok") or name.endswith("_per_mtok_hour"):
                lines.append(f"{name} = {float(Decimal(str(value)) * 2)}")
    return "\n".join(lines) + "\n"


def test_a_resume_under_new_prices_records_them_and_the_untouched_log_replays_clean(
    workspace: Path,
) -> None:
    with App(load_settings(workspace)) as app:
        first = runs.curate(app, budget_usd=0.15, max_seeds=4)
        assert first.outcome == "budget"  # stopped by its cap: the resume has calls to make
        started = app.events.read_stream(run_stream(first.run_id))[0].event()
        assert isinstance(started, RunStarted)
        was = started.settings["prices"]
    settings = workspace / SETTINGS_FILE
    settings.write_text(settings.read_text() + _doubled(was))
    with App(load_settings(workspace)) as app, structlog.testing.capture_logs() as logs:
        again = runs.resume(app, first.run_id, budget_usd=0.6)
        resumed = [
            e
            for e in (s.event() for s in app.events.read_stream(run_stream(first.run_id)))
            if isinstance(e, RunResumed)
        ]
    assert again.spent_micros > first.spent_micros  # calls were made under the new prices
    assert resumed[-1].prices is not None
    assert resumed[-1].prices != was
    for model in was:
        assert Decimal(str(resumed[-1].prices[model]["input_per_mtok"])) == 2 * Decimal(
            str(was[model]["input_per_mtok"])
        )
    changed = [log for log in logs if "prices changed" in log["event"]]
    assert changed, logs
    assert all(model in changed[0]["models"] for model in was)
    replayed = CliRunner().invoke(cli_app, ["replay", first.run_id, "--home", str(workspace)])
    assert replayed.exit_code == 0, replayed.output


def test_a_resume_under_the_same_prices_says_nothing_of_prices(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        first = runs.curate(app, budget_usd=0.15, max_seeds=4)
        with structlog.testing.capture_logs() as logs:
            runs.resume(app, first.run_id, budget_usd=0.3)
    assert not [log for log in logs if "prices changed" in log["event"]]
