"""The real-local judge through the product's evaluation path (``playlisteval.runs.evaluate``,
what ``playlisteval eval --live`` runs): a tiny random Qwen2 written as GGUF by the test judges
the demo benchmark's transcript-only condition in both orders, beside an offline judge. Its
calls are recorded as live, priced at zero, with their label scores; its rows and its session
are never the offline harness's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.evaluation import eval_stream
from playlisteval import runs
from playlisteval.app import App
from playlisteval.settings import load_settings
from tests.tiny_gguf import write_tiny_gguf
from tests.workspaces import copy_workspace
from tools.providers.local_llm import FAMILY_NAME, REAL_LOCAL_LABEL, free_price_rows

pytestmark = pytest.mark.slow

JUDGE = "tiny-real-judge"
CONDITION = "retrieved:bm25:transcript:1h:4"


@pytest.fixture(scope="module")
def benchmark(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo curated (three seeds) and exported: (workspace, benchmark folder)."""
    root = tmp_path_factory.mktemp("real-local-eval")
    home = copy_workspace(demo_home, root / "ws")
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=3)
        runs.export(app, root / "bench", report.run_id)
    return home, root / "bench"


@pytest.mark.usefixtures("allow_model_requests")
def test_a_live_evaluation_of_the_real_local_judge_is_recorded_as_a_real_model(
    benchmark: tuple[Path, Path], tmp_path: Path
) -> None:
    home, bench = benchmark
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    settings = load_settings(
        home,
        curation={"offline": False},
        providers={"models": {JUDGE: {"family": FAMILY_NAME, "local_path": str(gguf)}}},
        budget={"price_overrides": free_price_rows([JUDGE])},
    )
    out = tmp_path / "eval"
    with App(settings) as app:
        result = runs.evaluate(
            app, bench, [JUDGE, "offline-first"], out, [CONDITION], budget_usd=1.0, limit=2
        )
        evaluation_id = json.loads((out / "evaluation.json").read_text())["evaluation_id"]
        events = [
            e.data | {"type": e.type} for e in app.events.read_stream(eval_stream(evaluation_id))
        ]
    mine = [r for r in result.records if r.judge == JUDGE]
    assert len(mine) == 4  # two pairs, both orders
    assert {r.order for r in mine} == {"chosen_first", "rejected_first"}
    assert all(r.verdict in ("A", "B", "tie") for r in mine)
    sessions = json.loads((out / "evaluation.json").read_text())["sessions"]
    assert [s["offline"] for s in sessions] == [False]
    recorded = [e for e in events if e["type"] == "CallRecorded" and e["model"] == JUDGE]
    assert len(recorded) == 4
    for event in recorded:
        assert event["offline"] is False
        assert event["cost_micros"] == 0
        assert event["input_tokens"] > 50
        response = event["response"]
        assert response["provider_name"] == FAMILY_NAME
        details = response["provider_details"]
        assert details["real_local_model"] is True
        assert details["label"] == REAL_LOCAL_LABEL
        assert set(details["label_scores"]) == {"A", "B", "margin"}
    for record in mine:  # each verdict is its call's scores, in that order
        (event,) = [e for e in recorded if e["key"] == record.call_key]
        scores = event["response"]["provider_details"]["label_scores"]
        assert record.verdict == ("A" if scores["A"] > scores["B"] else "B")
    lines = (out / "judgments.jsonl").read_text().splitlines()
    assert all("offline" not in line for line in lines if f'"{JUDGE}"' in line)
