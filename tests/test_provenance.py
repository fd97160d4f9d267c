"""Provenance of an exported benchmark: the card and every record say what made and judged the
pairs — the models that answered, or the offline provider in their place — as the log records it
(each run's ``RunStarted.offline``, every recorded call's model and offline flag), never as the
settings say at export time.

The "live" run here is curated and judged through pydantic-ai ``FunctionModel``s standing in for
the providers at the model edge (they answer as the offline provider would, but the calls are
made and recorded as live ones), so no network is needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.deps import CallDeps
from agents.pairs import load_selection, select_pairs
from playlisteval import runs
from playlisteval.app import App, model_factory
from playlisteval.export import export_benchmark
from playlisteval.settings import load_settings
from store.events import CallRecorded, pairs_stream, seed_stream
from tests.workspaces import copy_workspace

OFFLINE_RUN = "offline-run"
LIVE_RUN = "live-run"
JUDGES = ("qwen3-vl-30b-a3b", "internvl3.5-8b")
# Used by neither run: configured at export time, it must not be named.
OTHER_MODEL = "export-time-model"
EXPORT_TIME = {
    "curation": {"offline": False},
    "models": {"phase1_generator": OTHER_MODEL, "difficulty_judges": [OTHER_MODEL]},
}
PARTS = ("generator", "distractor_generator", "checked_by", "judges")


def live_stand_ins(app: App) -> Callable[[str], Model]:
    """Models answered at the model edge: the offline provider's answer, returned as a live
    provider's response of the model asked for."""
    offline = model_factory(app.settings, app)

    def make(model_id: str) -> Model:
        inner = offline(model_id)

        async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            response = await inner.request(messages, None, info.model_request_parameters)
            return replace(response, model_name=model_id)

        return FunctionModel(answer, model_name=model_id)

    return make


@dataclass(frozen=True)
class Workspace:
    """A workspace with an offline run and a live run, each through the difficulty gate."""

    home: Path


@pytest.fixture(scope="module")
def workspace(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    home = copy_workspace(demo_home, tmp_path_factory.mktemp("provenance") / "ws")
    with App(load_settings(home)) as app:
        offline = runs.curate(app, budget_usd=None, max_seeds=2, run_id=OFFLINE_RUN)
        assert offline.accepted, "the offline run accepted no item"
        runs.select_pairs(app, OFFLINE_RUN, per_domain=90)

        stand_ins = live_stand_ins(app)
        curator = app.curator()
        curator.model_for = stand_ins
        curator.config = replace(curator.config, offline=False)
        seeds, _ = runs.choose_seeds(app, 2)
        live = anyio.run(lambda: curator.curate(LIVE_RUN, seeds, budget_micros=None))
        assert live.accepted, "the live run accepted no item"
        deps = CallDeps(
            store=app.events,
            catalog=app.catalog,
            clips=app.clips(),
            model_for=stand_ins,
            prices=app.prices(),
        )
        anyio.run(
            lambda: select_pairs(deps, run_id=LIVE_RUN, judges=JUDGES, per_domain=90, offline=False)
        )
        for run_id in (OFFLINE_RUN, LIVE_RUN):
            assert load_selection(app.events, run_id), f"run {run_id} kept no pair"
    return Workspace(home)


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "pairs.jsonl").read_text("utf-8").splitlines()]


def _answered(app: App, stream: str, offline: bool) -> dict[str, set[str]]:
    """Role → the models (as records name them) that answered the stream's calls, from the log."""
    found: dict[str, set[str]] = {}
    for stored in app.events.read_stream(stream):
        event = stored.event()
        if isinstance(event, CallRecorded):
            assert event.offline is offline
            label = f"offline:{event.model}" if offline else event.model
            found.setdefault(event.role, set()).add(label)
    return found


def _first_line(card: str) -> str:
    """The card's first line of text, after its YAML metadata block (the Hub shows the text)."""
    assert card.startswith("---\n"), "the card opens with its Hugging Face metadata"
    return card.split("\n---\n", 1)[1].lstrip("\n").splitlines()[0]


def _provenance_section(card: str) -> str:
    return card.split("## Provenance", 1)[1].split("\n## ", 1)[0]


def test_an_offline_benchmark_says_so_first_and_in_every_record_whatever_export_settings_say(
    workspace: Workspace, tmp_path: Path
) -> None:
    # Exported by a workspace now set to live models, with other models configured.
    with App(load_settings(workspace.home, **EXPORT_TIME)) as app:
        assert not app.settings.curation.offline
        summary = runs.export(app, tmp_path / "bench", OFFLINE_RUN)
        records = _records(summary.path)
        by_seed = {
            r["meta"]["seed_id"]: _answered(
                app, seed_stream(OFFLINE_RUN, r["meta"]["seed_id"]), offline=True
            )
            for r in records
        }
        judged = _answered(app, pairs_stream(OFFLINE_RUN), offline=True)
    card = (summary.path / "README.md").read_text("utf-8")
    text = (summary.path / "pairs.jsonl").read_text("utf-8")

    assert _first_line(card).startswith("> OFFLINE HARNESS — made by the offline provider")
    assert "checked by the offline harness" in card
    assert "verified gold" not in card
    assert records
    for record in records:
        provenance = record["provenance"]
        assert provenance["offline"] is True
        assert provenance["run_offline"] is True
        answered = by_seed[record["meta"]["seed_id"]]
        assert set(provenance["generator"]) == answered["phase1_generator"]
        assert set(provenance["distractor_generator"]) == answered["phase2_generator"]
        assert provenance["judges"] == sorted(judged["pair_judge"])
        assert all(label.startswith("offline:") for part in PARTS for label in provenance[part])
        verdicts = record["models"]["difficulty_judges"]
        assert {v["judge"] for v in verdicts} == {f"offline:{j}" for j in JUDGES}
    # The models configured at export time are named nowhere the pairs' makers are.
    assert OTHER_MODEL not in text
    assert OTHER_MODEL not in _provenance_section(card)
    benchmark = json.loads((summary.path / "benchmark.json").read_text())
    assert "offline" not in benchmark["settings"]["selection"]
    assert "difficulty_judges" not in benchmark["settings"]["selection"]
    assert benchmark["provenance"]["offline_pairs"] == len(records)
    assert benchmark["provenance"]["runs"][OFFLINE_RUN]["offline"] is True


def test_a_live_benchmark_names_the_models_that_answered_not_the_configured_ones(
    workspace: Workspace, tmp_path: Path
) -> None:
    with App(load_settings(workspace.home, **EXPORT_TIME)) as app:
        summary = export_benchmark(app, tmp_path / "bench", load_selection(app.events, LIVE_RUN))
        records = _records(summary.path)
        judged = _answered(app, pairs_stream(LIVE_RUN), offline=False)
        generators = {
            label
            for r in records
            for label in _answered(app, seed_stream(LIVE_RUN, r["meta"]["seed_id"]), False)[
                "phase1_generator"
            ]
        }
    card = (summary.path / "README.md").read_text("utf-8")

    assert _first_line(card) == "# PlaylistEval benchmark"
    assert "OFFLINE" not in card
    assert "offline harness" not in card
    assert records
    for record in records:
        provenance = record["provenance"]
        assert provenance["offline"] is False
        assert provenance["run_offline"] is False
        assert not any(label.startswith("offline:") for part in PARTS for label in provenance[part])
        assert provenance["judges"] == sorted(judged["pair_judge"]) == sorted(JUDGES)
        assert {v["judge"] for v in record["models"]["difficulty_judges"]} == set(JUDGES)
    assert {g for r in records for g in r["provenance"]["generator"]} == generators
    assert OTHER_MODEL not in generators
    assert OTHER_MODEL not in (summary.path / "pairs.jsonl").read_text("utf-8")
    section = _provenance_section(card)
    assert "curated live" in section
    assert all(f"`{g}`" in section for g in generators)


def test_a_benchmark_of_an_offline_and_a_live_run_says_which_pairs_are_offline(
    workspace: Workspace, tmp_path: Path
) -> None:
    with App(load_settings(workspace.home)) as app:
        offline = load_selection(app.events, OFFLINE_RUN)
        live = load_selection(app.events, LIVE_RUN)
        summary = export_benchmark(app, tmp_path / "bench", [*offline, *live])
    card = (summary.path / "README.md").read_text("utf-8")
    records = _records(summary.path)

    first = _first_line(card)
    assert first.startswith(f"> PARTLY OFFLINE — {len(offline)} of {len(records)} pairs")
    assert "The pairs come from 2 runs: 1 curated offline, 1 live." in card
    assert "by the offline harness in the offline ones" in card
    for record in records:
        assert record["provenance"]["offline"] is (record["meta"]["run_id"] == OFFLINE_RUN)
