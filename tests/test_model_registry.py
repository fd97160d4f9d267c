"""The models the project knows (``playlisteval models``), and what ``eval`` does with a judge id:
an id nothing can serve is refused with the closest known ids and the workspace's TOML to add; a
model the offline provider plays is never reported under that model's name; an evaluation's
folder is named for what it judged; and eval says what it prepares before its first judgment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.cli.shell import EXIT_UNKNOWN_JUDGE
from playlisteval.model_catalog import closest_ids
from playlisteval.runs.evaluation import DEFAULT_CONDITIONS, default_out_dir
from playlisteval.settings import SETTINGS_FILE, load_settings
from tests.workspaces import copy_workspace
from tools.contracts.roles import MODEL_SLOTS
from tools.providers.judges import (
    OFFLINE_JUDGES,
    PAPER_JUDGE_COUNT,
    PAPER_JUDGES,
    stand_in_name,
    stood_in_for,
)

STAND_IN = "gpt-5.4-mini"  # priced (policies/prices.toml), played by the offline provider here
CONDITION = "uniform::none:1h:32"  # no clip to cut: the judgments are cheap


@dataclass(frozen=True)
class Judged:
    """A workspace with an exported benchmark, and one offline eval of it through the CLI."""

    home: Path
    bench: Path
    output: str
    exit_code: int


@pytest.fixture(scope="module")
def judged(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Judged:
    home = copy_workspace(demo_home, tmp_path_factory.mktemp("registry") / "ws")
    with App(load_settings(home)) as app:
        run_id = runs.curate(app, budget_usd=5.0, max_seeds=4).run_id
        bench = runs.export(app, home / "bench", run_id).path
    said = CliRunner().invoke(
        cli_app,
        [
            *("eval", "--benchmark", str(bench), "--limit", "1", "--condition", CONDITION),
            *("--judge", STAND_IN, "--judge", "offline-first", "--home", str(home)),
        ],
        env={"COLUMNS": "120"},
    )
    return Judged(home, bench, said.output, said.exit_code)


def _models_json(home: Path) -> dict[str, object]:
    said = CliRunner().invoke(cli_app, ["models", "--json", "--home", str(home)])
    assert said.exit_code == 0, said.output
    found: dict[str, object] = json.loads(said.output)
    return found


def test_models_lists_the_paper_judges_every_slot_default_and_the_offline_judges(
    tmp_path: Path,
) -> None:
    found = _models_json(tmp_path / "ws")
    models = {m["model_id"]: m for m in found["models"]}  # type: ignore[attr-defined]
    for judge in PAPER_JUDGES:
        assert models[judge]["paper_judge"] is True
        assert "evaluation judge" in models[judge]["fills"]
    assert found["paper_judges"] == {"named": list(PAPER_JUDGES), "evaluated": PAPER_JUDGE_COUNT}
    slots = {s["key"]: s for s in found["slots"]}  # type: ignore[attr-defined]
    assert set(slots) == set(MODEL_SLOTS)
    for key, slot in MODEL_SLOTS.items():
        defaults = slot.models(slot.default)
        assert slots[key]["default"] == list(defaults)
        for model_id in defaults:  # each slot's default is listed, marked as that slot's
            assert key in models[model_id]["default_of"], (model_id, key)
    for judge in OFFLINE_JUDGES:
        assert models[judge]["runs"] == "offline harness"
    # Where each runs, read from the families: the difficulty judges on a vLLM server.
    assert models["qwen3-vl-30b-a3b"]["runs"] == "vLLM server"
    assert models["gpt-5.4"]["runs"] == "service"
    assert models["gpt-5.4"]["input_per_mtok"] == "2.50"  # prices.toml's row


def test_models_marks_a_slot_the_settings_change_and_a_configured_model(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / SETTINGS_FILE).write_text(
        '[models]\ntranscript_matcher = "my-judge"\n\n'
        '[providers.models."my-judge"]\nfamily = "openai-compatible"\n'
        'base_url = "http://localhost:8000/v1"\ncontext_window = 32768\n\n'
        '[budget.price_overrides."my-judge"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n'
    )
    found = _models_json(home)
    models = {m["model_id"]: m for m in found["models"]}  # type: ignore[attr-defined]
    mine = models["my-judge"]
    assert mine["fills"] == ["transcript_matcher"]
    assert mine["default_of"] == []
    assert mine["runs"] == "vLLM server"
    assert mine["context_window"] == 32768
    # The slot's default is still listed as its default, no longer filling it.
    assert "transcript_matcher" not in models["gpt-5.4-mini"]["fills"]
    assert "transcript_matcher" in models["gpt-5.4-mini"]["default_of"]


def test_eval_refuses_a_judge_nothing_serves_with_the_closest_ids_and_the_workspace_toml(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    with App(load_settings(home)) as app:
        assert app.catalog is not None  # a started workspace: its catalogue file
    said = CliRunner().invoke(
        cli_app,
        [
            "eval",
            "--benchmark",
            str(tmp_path / "b"),
            "--judge",
            "gpt-5.4-minni",
            "--home",
            str(home),
        ],
    )
    assert said.exit_code == EXIT_UNKNOWN_JUDGE, said.output
    assert "closest known ids: gpt-5.4-mini" in said.output
    assert str(home.resolve() / SETTINGS_FILE) in said.output
    assert '[providers.models."gpt-5.4-minni"]' in said.output
    assert "prices.toml" not in said.output  # never a file inside the installed package
    assert "Traceback" not in said.output
    assert not (home / "exports").exists() or not list((home / "exports").iterdir())


def test_eval_refuses_not_a_model_naming_some_known_ids(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    with App(load_settings(home)) as app:
        assert app.catalog is not None
    said = CliRunner().invoke(
        cli_app,
        ["eval", "--benchmark", str(tmp_path / "b"), "--judge", "not-a-model", "--home", str(home)],
    )
    assert said.exit_code == EXIT_UNKNOWN_JUDGE, said.output
    named = said.output.split("closest known ids: ", 1)[1].split(" (all of them", 1)[0]
    assert len(named.split(", ")) == 3


def test_closest_ids_name_the_nearest_even_when_none_is_close() -> None:
    known = ["gpt-5.4", "gpt-5.4-mini", "offline-frames", "qwen-3.7-plus"]
    assert closest_ids("gpt-5.4-minni", known)[0] == "gpt-5.4-mini"
    assert closest_ids("GPT-5.4", known)[0] == "gpt-5.4"
    assert len(closest_ids("zzzz", known, n=2)) == 2


def test_no_output_names_the_offline_stand_in_as_the_real_model(judged: Judged) -> None:
    """The offline provider played gpt-5.4-mini: the table, the judgments, evaluation.json
    and the hints name it offline-stand-in(gpt-5.4-mini), never gpt-5.4-mini alone."""
    assert judged.exit_code == 0, judged.output
    name = stand_in_name(STAND_IN)
    rows = [line.split()[0] for line in judged.output.splitlines() if "uniform-none" in line]
    assert sorted(rows) == sorted(["offline-first", name])
    out = default_out_dir(
        judged.home / "exports", judged.bench, [STAND_IN, "offline-first"], [CONDITION]
    )
    records = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert {r["judge"] for r in records} == {name, "offline-first"}
    meta = json.loads((out / "evaluation.json").read_text())
    assert meta["judges"] == [name, "offline-first"]
    assert meta["stand_ins"] == {name: STAND_IN}
    answered = meta["sessions"][-1]["answered_by"]
    assert set(answered) == {name, "offline-first"}
    assert all(who.startswith("offline provider") for who in answered.values())


def test_the_default_folder_is_named_for_the_benchmark_judges_and_conditions(
    judged: Judged,
) -> None:
    out = default_out_dir(
        judged.home / "exports", judged.bench, [STAND_IN, "offline-first"], [CONDITION]
    )
    assert out.parent == judged.home / "exports"
    assert out.name.startswith(f"eval-bench-{STAND_IN}+offline-first-1cond-")
    meta = json.loads((out / "evaluation.json").read_text())
    assert meta["name"] == out.name  # what the report labels the evaluation by
    assert meta["benchmark_name"] == "bench"
    assert str(out) in judged.output  # the summary and the report hint name it
    assert not (judged.home / "evaluation").exists()


def test_a_default_folder_name_is_stable_and_tells_other_conditions_apart(tmp_path: Path) -> None:
    exports, bench = tmp_path / "exports", tmp_path / "my bench"
    plain = default_out_dir(exports, bench, ["offline-first"], None)
    assert plain.name == "eval-my-bench-offline-first"
    assert default_out_dir(exports, bench, ["offline-first"], list(DEFAULT_CONDITIONS)) == plain
    other = default_out_dir(exports, bench, ["offline-first"], [CONDITION])
    assert other != plain
    assert other == default_out_dir(exports, bench, ["offline-first"], [CONDITION])
    many = default_out_dir(exports, bench, [f"judge-{n}" for n in range(6)], None)
    assert many.name == "eval-my-bench-judge-0+judge-1+judge-2+3more"
    long = default_out_dir(exports, bench, ["x" * 70, "y" * 70], None)
    assert len(long.name) <= 80
    assert long != default_out_dir(exports, bench, ["x" * 70, "z" * 70], None)


def test_stand_in_names_round_trip() -> None:
    assert stood_in_for(stand_in_name("gpt-4o")) == "gpt-4o"
    assert stood_in_for("gpt-4o") is None
    assert stood_in_for("offline-first") is None


class _Heard:
    """What an evaluation told its watcher, in order."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def preparing(self, what: str) -> None:
        self.said.append(f"preparing {what}")

    def started(self, jobs: int, done: int = 0) -> None:
        self.said.append("started")

    def judged(self, made: bool) -> None:
        self.said.append("judged")


def test_eval_says_each_preparation_step_before_the_first_judgment(judged: Judged) -> None:
    heard = _Heard()
    with App(load_settings(judged.home)) as app:
        runs.evaluate(
            app,
            judged.bench,
            ["offline-transcript"],
            conditions=[CONDITION],
            limit=1,
            progress=heard,
            preparing=heard.preparing,
        )
    first = heard.said.index("started")
    steps = heard.said[:first]
    assert len(steps) >= 3
    assert all(s.startswith("preparing ") for s in steps)
    assert any("embedder" in s for s in steps)  # the longest step is named for what it loads
    assert "judged" in heard.said[first:]
