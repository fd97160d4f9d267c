"""The judge-evaluation harness on the demo: offline judges of known behaviour, evaluated on a
benchmark curated and exported through the product path, give the metrics their behaviour
implies; a rerun costs nothing and gives the same records."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model
from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from agents.deps import CallDeps
from agents.evaluation import (
    JUDGMENTS_FILE,
    OFFLINE_JUDGE_PRICES,
    RETRIEVED_K,
    Condition,
    EvaluationResult,
    eval_stream,
    evaluate,
    judgments_of,
    parse_condition,
    read_judgments,
    retrieval_cases,
)
from playlisteval import runs
from playlisteval.app import App, offline_models
from playlisteval.cli import EXIT_NOTHING_JUDGED
from playlisteval.cli import app as cli_app
from playlisteval.report import load_records, write_report
from playlisteval.settings import load_settings
from policies.judging import (
    JudgeMetrics,
    JudgmentRecord,
    judge_metrics,
    retrieval_metrics,
    split_runs,
)
from policies.prices import PriceTable
from store.errors import ConfigError
from store.version import code_version
from tests.workspaces import copy_workspace
from tools.evidence.retrieval import BM25Retriever
from tools.providers.base import CallWrapper, ModelCall
from tools.providers.judges import OFFLINE_JUDGES, judge_models

RETRIEVED = "retrieved:bm25:frames+transcript:1h:32"
BLIND = "uniform::none:1h:32"
UNIFORM = "uniform::frames:1h:64"
CONDITIONS = (RETRIEVED, BLIND, UNIFORM)


class CountingModel(CallWrapper):
    """Counts the requests that reach the wrapped model (a served recorded call never does)."""

    def __init__(self, wrapped: Model, counter: list[int]) -> None:
        super().__init__(wrapped)
        self.counter = counter

    async def answer(self, call: ModelCall) -> ModelResponse:
        self.counter[0] += 1
        return await super().answer(call)


def counting_deps(app: App, requests: list[int]) -> CallDeps:
    """An evaluation's deps over ``app``: the offline judges at their prices, every request
    that reaches one counted in ``requests``."""
    base = judge_models(offline_models())
    return CallDeps(
        store=app.events,
        catalog=app.catalog,
        clips=app.clips(),
        model_for=lambda m: CountingModel(base(m), requests),
        prices=PriceTable.load(overrides=OFFLINE_JUDGE_PRICES),
    )


@dataclass
class Evaluated:
    """A curated, exported demo benchmark and a way to evaluate it (counting model requests)."""

    home: Path
    bench: Path
    out: Path
    requests: list[int]

    def run(self, conditions: tuple[str, ...] = CONDITIONS) -> EvaluationResult:
        with App(load_settings(self.home)) as app:
            return anyio.run(
                lambda: evaluate(
                    counting_deps(app, self.requests),
                    benchmark_dir=self.bench,
                    judges=OFFLINE_JUDGES,
                    conditions=[parse_condition(c) for c in conditions],
                    out_dir=self.out,
                    retrievers={"bm25": BM25Retriever(app.catalog)},
                    concurrency=8,
                    offline=True,
                )
            )


@pytest.fixture(scope="module")
def evaluated(
    demo_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Evaluated, EvaluationResult]:
    """The demo curated (six seeds), exported through the difficulty gate, evaluated once."""
    root = tmp_path_factory.mktemp("evaluation")
    home = root / "ws"
    copy_workspace(demo_home, home)
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=6)
        runs.export(app, root / "bench", report.run_id)
    harness = Evaluated(home=home, bench=root / "bench", out=root / "eval", requests=[0])
    return harness, harness.run()


def metrics(result: EvaluationResult) -> dict[tuple[str, str], JudgeMetrics]:
    """Every (judge, condition id) run's metrics."""
    return {
        key: judge_metrics(items) for key, items in split_runs(judgments_of(result.records)).items()
    }


def micro(m: JudgeMetrics, name: str) -> float | None:
    table = m.tables[name]
    return None if table is None else table.micro.value


def test_every_pair_is_judged_by_every_judge_under_every_condition_in_both_orders(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    harness, result = evaluated
    bench = [json.loads(line) for line in (harness.bench / "pairs.jsonl").read_text().splitlines()]
    evidence = {p["id"]: p["evidence"] for p in bench}
    pairs = {r.pair_id for r in result.records}
    assert pairs == set(evidence)
    assert len(pairs) >= 4, "the demo benchmark should hold several pairs"
    assert len(result.records) == len(pairs) * len(OFFLINE_JUDGES) * len(CONDITIONS) * 2
    assert result.new_records == len(result.records) == harness.requests[0]
    for record in result.records:
        assert record.verdict in ("A", "B", "tie")
        assert record.call_key
        assert record.length_hours > 0  # the hours the demo allows, recorded
        assert [s.to_json() for s in record.gold_spans] == evidence[record.pair_id]
    assert (harness.out / "evaluation.json").exists()


def test_always_first_judge_scores_half_with_full_position_bias(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    found = [m for (judge, _), m in metrics(evaluated[1]).items() if judge == "offline-first"]
    assert len(found) == len(CONDITIONS)
    for m in found:
        assert micro(m, "accuracy") == pytest.approx(0.5)
        assert micro(m, "position_consistency") == pytest.approx(0.0)
        assert micro(m, "position_bias") == pytest.approx(0.5)
        assert micro(m, "consistent_accuracy") == pytest.approx(0.0)


def test_transcript_reader_is_near_chance_and_frame_reader_clearly_above(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    """The demo's visual facts are never spoken, so the distractors differ from the gold only in
    words the transcripts lack: the transcript reader cannot separate them (ties score 0.5). The
    band 0.35–0.65 is what a coin would give with ±1.5 standard errors on a dozen pairs. The
    frame reader sees the evidence's frames under retrieval (BM25 finds both evidence videos on
    the demo) and catches the changed details: > 0.8, and well above the transcript reader."""
    found = metrics(evaluated[1])
    retrieved = parse_condition(RETRIEVED).condition_id
    transcript = micro(found[("offline-transcript", retrieved)], "accuracy")
    frames = micro(found[("offline-frames", retrieved)], "accuracy")
    assert transcript is not None
    assert 0.35 <= transcript <= 0.65
    assert frames is not None
    assert frames > 0.8
    assert frames - transcript > 0.2


def test_a_blind_condition_shows_no_frames_and_no_transcript(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    """Under modality none the frame reader has nothing to check: every verdict is a tie."""
    blind = parse_condition(BLIND).condition_id
    records = [r for r in evaluated[1].records if r.condition_id == blind]
    assert records
    for record in records:
        assert record.retrieved_spans == ()
        if record.judge != "offline-first":
            assert record.verdict == "tie", record.raw_output


def test_every_record_says_what_its_judge_was_shown_as_its_condition_names(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    """``shown`` in every record: uniform frames are exactly n_frames pictures at the condition's
    height (the demo's 240-pixel sources are never scaled up) and no transcript; blind shows
    nothing; retrieved shows n_frames frames inside the retrieved spans with a transcript of
    only the chunks those frames fall in."""
    harness, result = evaluated
    with App(load_settings(harness.home)) as app:
        chunk_chars = max(
            len(c.transcript) for v in app.catalog.videos() for c in app.catalog.chunks(v.id)
        )
        source_height = {v.height for v in app.catalog.videos()}
    assert source_height == {240}
    for record in result.records:
        shown = record.shown
        assert shown is not None
        condition = record.condition
        if condition.modality == "none":
            assert (shown.frames, shown.transcript_chars, shown.audio_s) == (0, 0, 0.0)
            assert shown.resolution is None
            continue
        assert shown.frames == len(shown.frame_times) == condition.n_frames
        assert shown.resolution == min(condition.resolution, 240)
        if condition.frames == "uniform":
            assert shown.frames == condition.n_frames
            assert shown.transcript_chars == 0  # frames only
        else:
            spans = [(s.video_id, s.start_s, s.end_s) for s in record.retrieved_spans]
            assert all(
                any(v == video and a <= t <= b for v, a, b in spans)
                for video, t in shown.frame_times
            )
            # A transcript of the shown moments: at most one chunk per frame shown.
            assert 0 < shown.transcript_chars <= shown.frames * chunk_chars
    # What is written is what is read back.
    again = {r.key: r.shown for r in read_judgments(harness.out / JUDGMENTS_FILE)}
    assert again == {r.key: r.shown for r in result.records}


@pytest.mark.parametrize("n_frames", [8, 32])
def test_uniform_sampling_attaches_the_transcript_of_the_shown_moments_only(
    evaluated: tuple[Evaluated, EvaluationResult], n_frames: int
) -> None:
    """Uniform frames over the haystack with the transcript: each chunk attached is one a
    shown frame falls in, so the text is bounded by the frame count, not by the hours."""
    from agents.evaluation import build_view

    harness, _ = evaluated
    record = json.loads((harness.bench / "pairs.jsonl").read_text().splitlines()[0])
    condition = parse_condition(f"uniform::frames+transcript:1h:{n_frames}")
    with App(load_settings(harness.home)) as app:
        view = build_view(app.catalog, app.clips(), {}, record, condition)
        every_chunk = [
            c for v in {s.video_id for s in view.segments} for c in app.catalog.chunks(v)
        ]
    assert view.shown.frames == n_frames
    chunks = [c for segment in view.segments for c in segment.chunks]
    assert 0 < len(chunks) <= n_frames
    for chunk in chunks:
        assert any(chunk.start_s <= t < chunk.end_s for _, t in view.shown.frame_times)
    assert view.shown.transcript_chars == sum(len(c.text) for c in chunks)
    if n_frames < len(every_chunk):  # fewer moments than the haystack's chunks: less text
        assert view.shown.transcript_chars < sum(len(c.transcript) for c in every_chunk)


def eval_cli(
    harness: Evaluated,
    home: Path,
    out: Path,
    judge: str,
    *more: str,
    env: dict[str, str | None] | None = None,
) -> Result:
    """``playlisteval eval`` of the harness's benchmark by ``judge`` in workspace ``home``
    (``env``: variables set, or unset where None, for the command)."""
    args = ["eval", "--benchmark", str(harness.bench), "--judge", judge, *more]
    return CliRunner(env=env).invoke(cli_app, [*args, "--out", str(out), "--home", str(home)])


@pytest.mark.parametrize(
    ("key", "more", "says"),
    [
        (None, ("--budget", "1"), "needs an API key: export OPENAI_API_KEY"),
        ("sk-test", (), "a live evaluation needs a cap: pass --budget USD"),
    ],
    ids=["no key", "no cap"],
)
def test_a_live_evaluation_without_its_key_or_a_cap_is_refused_in_one_line(
    evaluated: tuple[Evaluated, EvaluationResult],
    tmp_path: Path,
    key: str | None,
    more: tuple[str, ...],
    says: str,
) -> None:
    """`eval --live` follows curation's rules: a judge's key and a cap before anything is
    spent; refused, it is one line and exit 2, and no judgment is written."""
    harness, _ = evaluated
    home = copy_workspace(harness.home, tmp_path / "ws")
    out = tmp_path / "eval"
    result = eval_cli(harness, home, out, "gpt-5.4", "--live", *more, env={"OPENAI_API_KEY": key})
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert says in " ".join(result.output.split())
    assert read_judgments(out / JUDGMENTS_FILE) == []


def test_eval_limit_judges_the_first_pairs_with_a_progress_bar_and_a_results_table(
    evaluated: tuple[Evaluated, EvaluationResult],
    tmp_path: Path,
) -> None:
    """`--limit 2` judges the benchmark's first two pairs only (both orders, each judge); the
    progress bar counts the judgments with its ETA, and the table at the end gives each judge's
    accuracy and consistency under the condition, marked as the offline harness it is."""
    harness, _ = evaluated
    home = copy_workspace(harness.home, tmp_path / "ws")
    out = tmp_path / "eval"
    judges = ("offline-first", "offline-transcript")
    result = eval_cli(
        harness,
        home,
        out,
        judges[0],
        "--judge",
        judges[1],
        "--condition",
        BLIND,
        "--limit",
        "2",
        env={"PLAYLISTEVAL_PROGRESS": "1"},
    )
    assert result.exit_code == 0, result.output
    first = [
        json.loads(line)["id"]
        for line in (harness.bench / "pairs.jsonl").read_text().splitlines()[:2]
    ]
    records = read_judgments(out / JUDGMENTS_FILE)
    assert sorted({r.pair_id for r in records}) == sorted(first)
    assert len(records) == 2 * 2 * len(judges)
    text = result.output
    bar = next(line for line in text.splitlines() if line.startswith("judgments"))
    assert "8/8" in bar  # the bar, at its end
    assert "ETA" in bar
    table = text[text.index("Judges by condition") :]
    assert "offline provider: a harness, not evidence of model quality" in " ".join(table.split())
    label = parse_condition(BLIND).label()
    rows = [line for line in table.splitlines() if label in line]
    assert len(rows) == len(judges), table
    for judge, row in zip(judges, rows, strict=True):
        assert judge in row
    # The always-first judge: accuracy 0.500, never consistent across the swap.
    first_row = next(r for r in rows if "offline-first" in r).split()
    assert first_row.count("0.500") == 1  # accuracy
    assert first_row.count("0.000") == 2  # consistent accuracy, position consistency


def test_a_limit_below_one_is_refused_before_anything_is_opened(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    harness, _ = evaluated
    result = eval_cli(harness, tmp_path / "ws", tmp_path / "eval", "offline-first", "--limit", "0")
    assert result.exit_code == 2
    assert "--limit" in result.output
    assert not (tmp_path / "ws").exists()


def test_eval_in_another_workspace_is_one_line_not_a_traceback(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    """A benchmark evaluated against a workspace that does not hold its videos: the judgments
    fail together, and the CLI prints the first reason (and how many more) with exit 2."""
    harness, _ = evaluated
    elsewhere = tmp_path / "elsewhere"
    with App(load_settings(elsewhere)) as other:  # a workspace of its own, empty
        assert other.catalog.videos() == []
    result = eval_cli(harness, elsewhere, tmp_path / "eval", "offline-frames")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert "is not in the catalogue: evaluate with the --home" in text
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1


def test_an_evaluation_that_judges_nothing_says_why_and_exits_6(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    """A cap too small for any call: no judgment, one line with the first reason, exit 6."""
    harness, _ = evaluated
    home = copy_workspace(harness.home, tmp_path / "ws")
    result = eval_cli(
        harness, home, tmp_path / "eval", "gpt-5.4", "--condition", UNIFORM, "--budget", "1e-6"
    )
    assert result.exit_code == EXIT_NOTHING_JUDGED, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "nothing could be judged" in " ".join(result.output.split())
    assert "budget exhausted" in " ".join(result.output.split())


def test_a_live_judge_id_in_an_offline_workspace_is_played_by_the_offline_provider(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    """`eval --judge gpt-5.4` with the default (offline) settings judges every pair (the offline
    provider finds each shown span's clip), where it ended with 0 judgments and exit 0."""
    harness, _ = evaluated
    home = copy_workspace(harness.home, tmp_path / "ws")
    result = eval_cli(harness, home, tmp_path / "eval", "gpt-5.4", "--condition", UNIFORM)
    assert result.exit_code == 0, result.output
    records = read_judgments(tmp_path / "eval" / JUDGMENTS_FILE)
    pairs = (harness.bench / "pairs.jsonl").read_text().splitlines()
    assert len(records) == 2 * len(pairs)
    assert "not judged" not in result.output


def test_uniform_frames_without_transcript_separate_the_readers(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    """64 frames spread over the demo's haystack (a few minutes) land in every cited chunk: the
    frame reader still catches the changed details, while the transcript reader, given no
    transcript, can only say tie."""
    uniform = parse_condition(UNIFORM).condition_id
    records = [r for r in evaluated[1].records if r.condition_id == uniform]
    assert records
    assert all(r.retrieved_spans == () for r in records)
    transcript = [r for r in records if r.judge == "offline-transcript"]
    assert transcript
    assert all(r.verdict == "tie" for r in transcript)
    frames = micro(metrics(evaluated[1])[("offline-frames", uniform)], "accuracy")
    assert frames is not None
    assert frames > 0.8


def test_retrieved_conditions_record_spans_and_retrieval_metrics_run(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    result = evaluated[1]
    retrieved = [r for r in result.records if r.condition.frames == "retrieved"]
    for record in retrieved:
        assert 1 <= len(record.retrieved_spans) <= RETRIEVED_K
        for span in record.retrieved_spans:
            assert span.end_s > span.start_s
            assert isinstance(span.score, float)
    cases = retrieval_cases(result.records)
    assert len(cases) == len({r.pair_id for r in retrieved})
    found = retrieval_metrics(cases)
    assert found.cases == len(cases)
    coverage = found.coverage.value
    assert coverage is not None
    assert 0.0 < coverage <= 1.0
    # Recall can only grow with k.
    recall = {k: found.recall[(k, 0.3)].value or 0.0 for k in (1, 3, 5)}
    assert recall[1] <= recall[3] <= recall[5]


def test_a_rerun_makes_no_model_call_and_keeps_the_records(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    harness, first = evaluated
    before = harness.requests[0]
    again = harness.run()
    assert again.new_records == 0
    assert again.live_calls == 0
    assert harness.requests[0] == before
    assert again.records == first.records


def test_without_the_records_file_every_call_is_served_from_the_stream(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    """The recorded calls make an evaluation cached: judging everything again (the records file
    gone) asks no model and gives the same records."""
    harness, first = evaluated
    shutil.move(harness.out / JUDGMENTS_FILE, tmp_path / JUDGMENTS_FILE)
    before = harness.requests[0]
    again = harness.run()
    assert harness.requests[0] == before
    assert again.live_calls == 0
    assert again.replayed_calls == len(first.records)
    assert again.records == first.records
    with App(load_settings(harness.home)) as app:
        assert app.events.stream_version(eval_stream(again.evaluation_id)) > 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "retrieved:bm25:frames+transcript:1h:32",
            "retrieved-bm25-frames+transcript-1h-32f",
        ),
        ("uniform::none:1h:32", "uniform-none-1h-32f"),
        ("uniform::frames:100h:64:think=1024:res=720", "uniform-frames-100h-64f-think1024-720p"),
        ("retrieved:hybrid:audio:0.5:8", "retrieved-hybrid-audio-0.5h-8f"),
    ],
)
def test_compact_conditions_parse_to_stable_ids(text: str, expected: str) -> None:
    condition = parse_condition(text)
    assert condition.condition_id == condition.label() == expected
    assert isinstance(condition, Condition)
    assert set(condition.to_json()) == {
        "frames",
        "retriever",
        "modality",
        "hours",
        "n_frames",
        "thinking_budget",
        "resolution",
    }


@pytest.mark.parametrize(
    "text",
    [
        "retrieved::frames:1h:32",  # retrieved frames need a retriever
        "uniform:bm25:frames:1h:32",  # uniform frames take none
        "sparse::frames:1h:32",
        "uniform::smell:1h:32",
        "uniform::frames:1h",
        "uniform::frames:many:32",
        "uniform::frames:1h:32:speed=2",
        "uniform::frames:0h:32",
    ],
)
def test_bad_conditions_are_refused_with_a_reason(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_condition(text)


def test_the_written_records_are_the_ones_the_report_reads(
    evaluated: tuple[Evaluated, EvaluationResult],
) -> None:
    """Every line evaluation wrote parses with the report's reader into the same record, and
    writing it back gives the line again."""
    harness, result = evaluated
    read = sorted(load_records([harness.out]), key=lambda r: r.key)
    assert read == result.records
    lines = (harness.out / JUDGMENTS_FILE).read_text(encoding="utf-8").splitlines()
    assert sorted(lines) == sorted(r.to_line() for r in result.records)
    assert all(JudgmentRecord.from_line(line).to_line() == line for line in lines)


def test_a_condition_at_360p_has_one_name_in_the_log_the_summary_and_the_report(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    """360 is the default resolution: the condition's label leaves it out everywhere, so the
    evaluation's log, its ``evaluation.json`` and the report's tables name the run alike."""
    harness, _ = evaluated
    condition = parse_condition(f"{BLIND}:res=360")
    assert condition.resolution == 360
    label = condition.label()
    assert label == "uniform-none-1h-32f"
    with capture_logs() as logs:
        again = harness.run((f"{BLIND}:res=360",))
    assert again.new_records == 0  # the same condition as BLIND: nothing to judge again
    begin = [e for e in logs if e["event"] == "evaluation_begin"]
    assert [e["conditions"] for e in begin] == [[label]]
    summary = json.loads((harness.out / "evaluation.json").read_text())
    assert label in {c["condition_id"] for c in summary["conditions"]}
    report = write_report([harness.out], tmp_path / "report").markdown.read_text()
    table = report[report.index("## Judges by condition") :]
    table = table[: table.index("\n## ", 1)]
    rows = {line.split("|")[2].strip() for line in table.splitlines() if line.startswith("| ")}
    assert label in rows
    assert not any("360" in row for row in rows)


ZERO_PRICE = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}


def test_a_thinking_budget_reaches_the_model_as_settings(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.profiles import ModelProfile

    from agents.evaluation import thinking_settings
    from agents.recorded import CallRecorder
    from agents.workers import ModelRunner, SeedCall
    from policies.budget import Budget
    from policies.prices import PriceTable
    from store.events import CallRecorded
    from store.eventstore import open_event_store
    from tools.contracts.roles import PairJudgeContext, PairVerdict

    assert thinking_settings(None) is None
    assert thinking_settings(0) == {"thinking": False}
    medium = thinking_settings(4096)
    assert medium is not None
    assert medium["thinking"] == "medium"
    assert medium["google_thinking_config"] == {"thinking_budget": 4096}  # type: ignore[typeddict-item]

    seen: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.model_settings)
        tool = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(tool, {"choice": "A", "reason": "first"})])

    store = open_event_store(tmp_path / "log.db")

    events: list[Any] = []

    async def append(event: Any) -> None:
        store.append("eval-think", [event])
        events.append(event)

    async def main() -> None:
        recorder = CallRecorder(
            budget=Budget(None),
            prices=PriceTable.load(overrides={"judge-x": ZERO_PRICE}),
        )
        # A model that says it can think (models that cannot drop the setting).
        thinker = FunctionModel(respond, profile=ModelProfile(supports_thinking=True))
        runner = ModelRunner(recorder=recorder, model_for=lambda _m: thinker)
        context = PairJudgeContext(question="Q?", answer_a="a", answer_b="b", segments=())
        for budget in (0, 4096):
            await runner.run(
                SeedCall(seed_id=f"p/{budget}", evidence=None, append=append),  # type: ignore[arg-type]
                "pair_judge",
                "judge-x",
                context,
                PairVerdict,
                phase=None,
                gate="evaluation",
                extra_settings=thinking_settings(budget),
            )

    anyio.run(main)
    store.close()
    # pydantic-ai turns the unified ``thinking`` into each provider's own form (a FunctionModel
    # has none); the Gemini budget arrives as sent, and the two budgets are two distinct calls.
    assert "google_thinking_config" not in seen[0]
    assert seen[1]["google_thinking_config"] == {"thinking_budget": 4096}
    keys = {e.key for e in events if isinstance(e, CallRecorded)}
    assert len(keys) == 2


class MediaSeen(CallWrapper):
    """Notes the media type of every attachment that reaches the wrapped model."""

    def __init__(self, wrapped: Model, seen: list[str]) -> None:
        super().__init__(wrapped)
        self.seen = seen

    async def answer(self, call: ModelCall) -> ModelResponse:
        from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart

        for message in call.messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                        self.seen += [
                            c.media_type for c in part.content if isinstance(c, BinaryContent)
                        ]
        return await super().answer(call)


def test_an_audio_condition_lets_the_judge_hear_but_not_see(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    import shutil as sh

    harness, _ = evaluated
    seen: list[str] = []
    base = judge_models(offline_models())
    with App(load_settings(harness.home)) as app:
        result = anyio.run(
            lambda: evaluate(
                CallDeps(
                    store=app.events,
                    catalog=app.catalog,
                    clips=app.clips(),
                    model_for=lambda m: MediaSeen(base(m), seen),
                    prices=PriceTable.load(overrides=OFFLINE_JUDGE_PRICES),
                ),
                benchmark_dir=harness.bench,
                judges=["offline-frames"],
                conditions=[parse_condition("uniform::audio:1h:8")],
                out_dir=tmp_path / "audio-eval",
                concurrency=4,
                offline=True,
            )
        )
    assert result.records
    assert all(kind == "audio/wav" for kind in seen), set(seen)  # no picture, ever
    if sh.which("espeak-ng"):  # the demo is narrated: its videos have sound
        assert seen
    # The frame reader has nothing to look at: every verdict is a tie.
    assert {r.picked for r in result.records} == {"tie"}


def test_a_torn_last_line_from_a_crash_does_not_swallow_the_next_record(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    """A crash mid-write leaves a line without its end: the next evaluation starts on a line of
    its own, so its first record is not glued to the torn one (and lost with it)."""
    harness, _ = evaluated
    home = copy_workspace(harness.home, tmp_path / "ws")
    out = tmp_path / "eval"
    out.mkdir()
    (out / JUDGMENTS_FILE).write_text('{"pair_id": "torn', encoding="utf-8")
    result = eval_cli(harness, home, out, "offline-first", "--condition", BLIND, "--limit", "1")
    assert result.exit_code == 0, result.output
    assert len(read_judgments(out / JUDGMENTS_FILE)) == 2  # both orders of the first pair


def test_evaluation_json_records_each_sessions_code_and_mode_and_the_report_shows_them(
    evaluated: tuple[Evaluated, EvaluationResult], tmp_path: Path
) -> None:
    """Each call that judges into an evaluation adds a session (when, which code, offline or
    live) to its ``evaluation.json``; the report's provenance names them."""
    harness, _ = evaluated
    out = tmp_path / "eval"
    shutil.copytree(harness.out, out)
    before = json.loads((out / "evaluation.json").read_text())["sessions"]
    assert [s["offline"] for s in before] == [True] * len(before)
    assert {s["code_version"] for s in before} == {code_version()}
    again = replace(harness, out=out).run((BLIND,))
    assert again.new_records == 0  # nothing new to judge: still a session of its own
    after = json.loads((out / "evaluation.json").read_text())["sessions"]
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    provenance = write_report([out], tmp_path / "report").markdown.read_text()
    expected = f"{code_version()}; {len(after)} session(s), offline"
    assert f"| code version (of the evaluation, {out}) | {expected} |" in provenance


def test_the_demo_evaluates_every_retriever_so_its_report_compares_their_recall() -> None:
    """The paper's four retrievers each get a retrieved condition in the demo's evaluation
    (and every condition there parses)."""
    parsed = [parse_condition(c) for c in runs.DEMO_CONDITIONS]
    retrievers = {c.retriever for c in parsed if c.frames == "retrieved"}
    assert retrievers == {"bm25", "text", "multimodal", "hybrid"}
    assert set(runs.DEFAULT_CONDITIONS) <= set(runs.DEMO_CONDITIONS)
