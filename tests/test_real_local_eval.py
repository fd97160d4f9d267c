"""The real-local judge wherever a judge is: ``eval --judge ID`` (live, and in the default
offline mode, where it still answers as itself), the difficulty gate (``[models]
difficulty_judges``) and the textual ranker (``[models] textual_undetectability``). A tiny random
Qwen2 written as GGUF by the test is the model. Its calls are recorded as a real model's (not
offline), priced at zero with no price row written for it, with both orders' label scores; every
output that says who answered — the CLI's judges and runs tables, ``evaluation.json``'s
sessions, the report, the audit — says "real local model" on its rows and never the offline
harness's label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from agents.audit import describe_step
from agents.evaluation import OFFLINE_PROVIDER_LABEL, JudgmentRecord, eval_stream
from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import EXIT_NOTHING_JUDGED
from playlisteval.cli import app as cli_app
from playlisteval.cli.status import runs_table
from playlisteval.overview import list_runs
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.events import pairs_stream
from tests.tiny_gguf import whole_header_random_body, write_tiny_gguf
from tests.workspaces import copy_workspace
from tools.providers.local_llm import FAMILY_NAME, REAL_LOCAL_LABEL, TIE_BAND, debiased_choice

pytestmark = pytest.mark.slow

JUDGE = "tiny-real-judge"
CONDITION = "retrieved:bm25:transcript:1h:4"
# Weights wide enough that the transcript moves the tiny model's label scores (tests/tiny_gguf.py).
READING = 0.2


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model as one GGUF file."""
    return write_tiny_gguf(
        tmp_path_factory.mktemp("model") / "tiny.gguf", initializer_range=READING
    )


@pytest.fixture(scope="module")
def benchmark(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo curated (three seeds) and exported: (workspace, benchmark folder)."""
    root = tmp_path_factory.mktemp("real-local-eval")
    home = copy_workspace(demo_home, root / "ws")
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=3)
        runs.export(app, root / "bench", report.run_id)
    return home, root / "bench"


def _served(gguf: Path) -> dict[str, Any]:
    """Settings that serve JUDGE by the real-local family from ``gguf`` (and no price row)."""
    return {"providers": {"models": {JUDGE: {"family": FAMILY_NAME, "local_path": str(gguf)}}}}


def _calls(app: App, stream: str, model: str = JUDGE) -> list[dict[str, Any]]:
    return [
        e.data
        for e in app.events.read_stream(stream)
        if e.type == "CallRecorded" and e.data["model"] == model
    ]


def _assert_real_local_calls(recorded: list[dict[str, Any]]) -> None:
    """Each call a real model's: not offline, at zero cost, its family and label named."""
    assert recorded
    for event in recorded:
        assert event["offline"] is False
        assert event["cost_micros"] == 0
        assert event["input_tokens"] > 50
        response = event["response"]
        assert response["provider_name"] == FAMILY_NAME
        details = response["provider_details"]
        assert details["real_local_model"] is True
        assert details["label"] == REAL_LOCAL_LABEL


@pytest.mark.usefixtures("allow_model_requests")
def test_a_live_evaluation_of_the_real_local_judge_decides_by_both_orders_at_zero_price(
    benchmark: tuple[Path, Path], gguf: Path, tmp_path: Path
) -> None:
    home, bench = benchmark
    settings = load_settings(home, curation={"offline": False}, **_served(gguf))
    out = tmp_path / "eval"
    with App(settings) as app:
        # No --budget: a real local model costs nothing, so it needs no cap.
        result = runs.evaluate(app, bench, [JUDGE, "offline-first"], out, [CONDITION], limit=2)
        evaluation_id = json.loads((out / "evaluation.json").read_text())["evaluation_id"]
        recorded = _calls(app, eval_stream(evaluation_id))
    mine = [r for r in result.records if r.judge == JUDGE]
    assert len(mine) == 4  # two pairs, both orders
    assert {r.order for r in mine} == {"chosen_first", "rejected_first"}
    sessions = json.loads((out / "evaluation.json").read_text())["sessions"]
    assert [s["offline"] for s in sessions] == [False]
    assert len(recorded) == 4
    _assert_real_local_calls(recorded)
    for record in mine:  # each verdict is its call's debiased margin, in that order
        (event,) = [e for e in recorded if e["key"] == record.call_key]
        scores = event["response"]["provider_details"]["label_scores"]
        assert set(scores) == {"shown", "swapped", "margin", "tie_band"}
        assert scores["margin"] == pytest.approx(
            scores["shown"]["margin"] - scores["swapped"]["margin"]
        )
        assert record.verdict == debiased_choice(scores["margin"], TIE_BAND)
    by_pair: dict[str, set[str]] = {}
    for record in mine:  # consistent by construction: the two orders pick the same answer
        first = "chosen" if record.order == "chosen_first" else "rejected"
        second = "rejected" if first == "chosen" else "chosen"
        picked = {"A": first, "B": second, "tie": "tie"}[str(record.verdict)]
        by_pair.setdefault(record.pair_id, set()).add(picked)
    assert all(len(picked) == 1 for picked in by_pair.values()), by_pair
    lines = (out / "judgments.jsonl").read_text().splitlines()
    assert all("offline" not in line for line in lines if f'"{JUDGE}"' in line)


def _table_rows(output: str, judge: str) -> list[str]:
    """The line of ``judge``'s row in a rich table and the line under it (its label)."""
    lines = output.splitlines()
    found = [i for i, line in enumerate(lines) if line.lstrip().startswith(judge)]
    assert found, output
    return [lines[i] + "\n" + lines[i + 1] for i in found]


@pytest.fixture(scope="module")
def offline_evaluation(
    benchmark: tuple[Path, Path], gguf: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, str]:
    """``playlisteval eval`` in the default (offline) mode with the real-local judge beside
    an offline judge, two pairs: (workspace, evaluation folder, the command's output)."""
    root = tmp_path_factory.mktemp("offline-eval")
    home = copy_workspace(benchmark[0], root / "ws")
    with (home / SETTINGS_FILE).open("a") as settings:
        settings.write(f'\n[providers.models."{JUDGE}"]\nfamily = "{FAMILY_NAME}"\n')
        settings.write(f'local_path = "{gguf}"\n')
    out = root / "eval"
    import pydantic_ai.models

    allowed = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = True
    try:
        result = CliRunner().invoke(
            cli_app,
            [
                "eval",
                "--benchmark",
                str(benchmark[1]),
                "--judge",
                JUDGE,
                "--judge",
                "offline-first",
                "--condition",
                CONDITION,
                "--limit",
                "2",
                "--out",
                str(out),
                "--home",
                str(home),
            ],
            env={"COLUMNS": "80"},
        )
    finally:
        pydantic_ai.models.ALLOW_MODEL_REQUESTS = allowed
    assert result.exit_code == 0, result.output
    return home, out, result.output


def test_eval_in_the_default_offline_mode_asks_the_real_local_model_itself(
    offline_evaluation: tuple[Path, Path, str],
) -> None:
    home, out, _output = offline_evaluation
    meta = json.loads((out / "evaluation.json").read_text())
    with App(load_settings(home)) as app:
        assert app.settings.curation.offline
        recorded = _calls(app, eval_stream(meta["evaluation_id"]))
        played = _calls(app, eval_stream(meta["evaluation_id"]), "offline-first")
    assert len(recorded) == 4
    _assert_real_local_calls(recorded)
    assert all("label_scores" in e["response"]["provider_details"] for e in recorded)
    assert played
    assert all(e["offline"] for e in played)  # the harness beside it, as ever
    (session,) = meta["sessions"]
    assert session["offline"] is True
    assert session["answered_by"] == {
        JUDGE: REAL_LOCAL_LABEL,
        "offline-first": OFFLINE_PROVIDER_LABEL,
    }


def test_the_eval_judges_table_labels_the_real_model_and_never_as_the_harness(
    offline_evaluation: tuple[Path, Path, str],
) -> None:
    _home, _out, output = offline_evaluation
    (mine,) = _table_rows(output, JUDGE)
    assert REAL_LOCAL_LABEL in mine
    assert "offline" not in mine
    (harness,) = _table_rows(output, "offline-first")
    assert "offline provider" in harness.split("\n")[1]
    assert "offline provider rows: a harness" in output


def _eval_output(
    benchmark: tuple[Path, Path], tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> Result:
    """``playlisteval eval`` in the default (offline) mode, the real-local JUDGE served from
    ``gguf`` and the only judge, one pair, on a copy of the benchmark's workspace; consoles wide
    enough that no path is folded."""
    from playlisteval import cli

    for console in (cli.console, cli.err_console):
        monkeypatch.setattr(console, "_width", 1000)
    home = copy_workspace(benchmark[0], tmp_path / "ws")
    with (home / SETTINGS_FILE).open("a") as settings:
        settings.write(f'\n[providers.models."{JUDGE}"]\nfamily = "{FAMILY_NAME}"\n')
        settings.write(f'local_path = "{gguf}"\n')
    return CliRunner().invoke(
        cli_app,
        [
            *("eval", "--benchmark", str(benchmark[1]), "--judge", JUDGE),
            *("--condition", CONDITION, "--limit", "1", "--out", str(tmp_path / "eval")),
            *("--home", str(home)),
        ],
    )


@pytest.mark.usefixtures("allow_model_requests")
def test_a_table_of_real_local_judges_alone_is_not_called_the_offline_harness(
    benchmark: tuple[Path, Path], gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The offline provider is a harness; a real local model is a real model. An offline-mode
    evaluation of the real-local judge alone is titled as any table of real judges, and its
    row still says who answered."""
    result = _eval_output(benchmark, tmp_path, gguf, monkeypatch)
    assert result.exit_code == 0, result.output
    (title,) = [line for line in result.output.splitlines() if "Judges by condition" in line]
    assert title.strip() == "Judges by condition"
    assert "harness" not in result.output
    (mine,) = _table_rows(result.output, JUDGE)
    assert REAL_LOCAL_LABEL in mine


def test_the_judges_table_calls_only_the_offline_providers_rows_a_harness(
    offline_evaluation: tuple[Path, Path, str],
) -> None:
    """The title names the harness where the offline provider answered for a judge of the
    table: all of them, some of them (its rows then say so), or none."""
    from agents.evaluation import JUDGMENTS_FILE, read_judgments
    from playlisteval.cli.benchmark import judges_table

    _home, out, _output = offline_evaluation
    records = read_judgments(out / JUDGMENTS_FILE)
    real = [r for r in records if r.judge == JUDGE]
    played = [r for r in records if r.judge != JUDGE]
    assert real
    assert played

    def title(chosen: list[JudgmentRecord], offline: bool = True) -> str:
        return str(judges_table(chosen, offline, [JUDGE]).title)

    assert title(real) == "Judges by condition"
    assert title(records) == (
        "Judges by condition (offline provider rows: a harness, not evidence of model quality)"
    )
    assert title(played) == (
        "Judges by condition (offline provider: a harness, not evidence of model quality)"
    )
    # Live, an offline judge beside the real one is still the harness's row, and only its.
    assert title(records, offline=False) == title(records)


@pytest.mark.usefixtures("allow_model_requests")
def test_a_gguf_whose_body_is_not_a_model_is_one_line_naming_the_file(
    benchmark: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge's GGUF with a whole header and a random body failed each call with a bare
    IndexError: the line names the file and says it is not a readable GGUF model (exit 6:
    nothing could be judged)."""
    broken = whole_header_random_body(tmp_path / "broken.gguf")
    result = _eval_output(benchmark, tmp_path, broken, monkeypatch)
    said = " ".join(result.output.split())
    assert result.exit_code == EXIT_NOTHING_JUDGED, said
    assert "Traceback" not in said
    assert sum(line.startswith("error:") for line in result.stderr.splitlines()) == 1
    assert f"not a readable GGUF model: {str(broken)!r} (IndexError: " in said


def test_the_report_marks_the_real_model_and_never_as_the_harness(
    offline_evaluation: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, out, _output = offline_evaluation
    result = CliRunner().invoke(
        cli_app, ["report", str(out), "--out", str(tmp_path / "report"), "--home", str(home)]
    )
    assert result.exit_code == 0, result.output
    assert f"real models: {JUDGE}" in " ".join(result.output.split())
    page = (tmp_path / "report" / "report.md").read_text()
    rows = [
        line
        for line in page.splitlines()
        if line.startswith("|") and JUDGE in line and not line.startswith("| source |")
    ]
    assert len(rows) >= 3  # provenance, Table 1, leaderboard (and the paper's tables)
    assert all("offline" not in row for row in rows), rows
    assert any(f"judge {JUDGE} | {REAL_LOCAL_LABEL}; answered as real-local:" in r for r in rows)
    assert any(f"{REAL_LOCAL_LABEL} (real-local:{JUDGE})" in r for r in rows)  # Table 1
    assert any(f"| {JUDGE} ({REAL_LOCAL_LABEL}) |" in r for r in rows)  # the leaderboard
    harness = [r for r in page.splitlines() if r.startswith("| judge offline-first")]
    assert harness
    assert "offline provider" in harness[0]
    banner = next(line for line in page.splitlines() if line.startswith("**Mixed evaluation"))
    assert "offline-first answered offline" in banner
    assert "Judges marked offline provider are a deterministic harness" in banner
    assert f"Real models: {JUDGE} ({REAL_LOCAL_LABEL}, run on this machine)" in banner
    assert "offline with a real local model" in page  # the session's mode in the provenance
    html = (tmp_path / "report" / "report.html").read_text()
    assert f"Real models: {JUDGE}" in html


def test_the_judgment_viewer_marks_the_real_model_and_never_as_the_harness(
    benchmark: tuple[Path, Path], offline_evaluation: tuple[Path, Path, str]
) -> None:
    """The UI's judgments page flags the real model's rows "real local model" and the harness's
    "offline"; a real-model verdict's own page says who answered, with no harness banner."""
    from fastapi.testclient import TestClient

    from agents.evaluation import JUDGMENTS_FILE, read_judgments
    from playlisteval.ui.app import create_app

    home, out, _output = offline_evaluation
    records = read_judgments(out / JUDGMENTS_FILE)
    with App(load_settings(home)) as app:
        web = create_app(app, benchmark[1], sample_size=3, secret=b"k" * 32, evaluations=[out])
        client = TestClient(web, follow_redirects=False)
        assert client.get(web.state.owner_link).status_code == 303  # the viewer is the owner's
        page = client.get(f"/evaluations/{out.name}").text
        mine = next(r for r in records if r.judge == JUDGE)
        params = {"judge": JUDGE, "condition": mine.condition_id}
        verdict = client.get(f"/evaluations/{out.name}/pair/{mine.pair_id}", params=params).text
    rows = page.split('<tr class="group')[1:]
    own = [row.split("</tr>")[0] for row in rows if f'data-judge="{JUDGE}"' in row]
    harness = [row.split("</tr>")[0] for row in rows if 'data-judge="offline-first"' in row]
    assert own
    assert harness
    assert all(">real local model</span>" in row and "flag-offline" not in row for row in own)
    assert all("flag-offline" in row and "real local model" not in row for row in harness)
    assert verdict.count("REAL LOCAL MODEL — answered by a real model") == 2  # both orders
    assert "OFFLINE HARNESS" not in verdict


@pytest.mark.usefixtures("allow_model_requests")
def test_the_textual_ranker_and_the_difficulty_gate_ask_the_real_local_model_offline(
    demo_home: Path, gguf: Path, tmp_path: Path
) -> None:
    """An offline run whose textual ranker and difficulty judge are the real-local id: each is
    asked through the curation (``playlisteval curate``, whose panel names the real model) and
    the pair selection, and answers as itself; the audit's banner names it too."""
    home = copy_workspace(demo_home, tmp_path / "ws")
    with (home / SETTINGS_FILE).open("a") as settings:
        settings.write(f'\n[models]\ntextual_undetectability = ["{JUDGE}"]\n')
        settings.write(f'difficulty_judges = ["{JUDGE}"]\n')
        settings.write(f'\n[providers.models."{JUDGE}"]\nfamily = "{FAMILY_NAME}"\n')
        settings.write(f'local_path = "{gguf}"\n')
    cli = CliRunner()
    curated = cli.invoke(cli_app, ["curate", "--max-seeds", "2", "--home", str(home)])
    assert curated.exit_code == 0, curated.output
    panel = [line for line in curated.output.splitlines() if "real local model" in line]
    assert panel, curated.output
    assert panel[0].rstrip(" │").endswith(JUDGE)
    with App(load_settings(home)) as app:
        assert app.settings.curation.offline
        curated_run = list_runs(app)[-1].run_id
        run, _chosen = runs.select_pairs(app, curated_run)
        seeds = app.events.streams("seed-")
        ranked = [e for s in seeds for e in _calls(app, s) if e["role"] == "textual_ranker"]
        judged = _calls(app, pairs_stream(run))
        shown = [
            e.data["video"]
            for e in app.events.read_stream(pairs_stream(run))
            if e.type == "PairJudged" and e.data["judge"] == JUDGE
        ]
        audit = runs.audit(app, run)
        (row,) = [r for r in list_runs(app) if r.run_id == run]
        runs.export(app, tmp_path / "bench", run)
    records = [
        json.loads(line) for line in (tmp_path / "bench" / "pairs.jsonl").read_text().splitlines()
    ]
    _assert_real_local_calls(ranked)
    for event in ranked:
        details = event["response"]["provider_details"]
        assert len(details["label_scores"]) == 20  # 5 answers: both orders of 10 pairs
        assert len(details["debiased_margins"]) == 10
    _assert_real_local_calls(judged)
    assert len(judged) % 2 == 0  # each candidate pair in both orders
    assert len(shown) == len(judged)
    assert all(video == [] for video in shown)  # the transcript only: it reads no clips
    steps = [
        describe_step(step)
        for timeline in audit.seeds
        for step in timeline.steps
        if step.get("model") == JUDGE
    ]
    assert steps
    assert all(f"→ {REAL_LOCAL_LABEL} {JUDGE}:" in s and "offline" not in s for s in steps)
    # The export names the real model as one (real-local:<id>), never the harness's offline:<id>.
    assert records
    labels = [(r["provenance"]["checked_by"], r["provenance"]["judges"]) for r in records]
    for checked_by, judges in labels:
        assert f"real-local:{JUDGE}" in checked_by
        assert f"offline:{JUDGE}" not in checked_by + judges
        assert JUDGE not in checked_by + judges  # never a bare id, as if a live model answered
    assert any(f"real-local:{JUDGE}" in judges for _checked, judges in labels)
    assert row.mode == "offline + real local model"
    said = cli.invoke(cli_app, ["audit", "--run", run, "--home", str(home)])
    assert said.exit_code == 0, said.output
    assert (
        f"harness of the loop, never evidence of model quality; but for {JUDGE}, a real local model"
        in " ".join(said.output.split())
    )
    facts = json.loads(
        cli.invoke(cli_app, ["audit", "--run", run, "--json", "--home", str(home)]).output
    )
    assert facts["offline"] is True
    assert facts["real_local"] == [JUDGE]
    assert row.real_local == (JUDGE,)
    from rich.console import Console

    console = Console(width=80, record=True)
    console.print(runs_table([row]))
    shown = console.export_text()
    assert "offline +" in shown
    assert "real local" in shown
