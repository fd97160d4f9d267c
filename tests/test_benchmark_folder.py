"""A benchmark folder is read strictly, by `eval` and by the UI alike, before anything is judged:
a record that is not JSON, holds a NaN or an infinity, has a field of the wrong type or repeats
a pair id is refused with its file and line (also when a limit would judge only the first
pairs), and records edited after the export are refused unless allowed on purpose, which the
evaluation records. The judgments viewer names a line of ``judgments.jsonl`` that is not a
record instead of leaving it out, and a resumed evaluation leaves no such line behind.

Benchmarks are the UI tests' export folders over the demo's videos; the judges are the offline
ones, behind a wrapper that counts every request that reaches a model."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from agents.evaluation import (
    EVALUATION_FILE,
    JUDGMENTS_FILE,
    EvaluationResult,
    evaluate,
    parse_condition,
    read_judgments,
)
from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import EXIT_FIX, EXIT_TAMPERED
from playlisteval.cli import app as cli_app
from playlisteval.report import load_records
from playlisteval.settings import load_settings
from playlisteval.ui.benchmark import load_benchmark
from playlisteval.ui.judgments import load_evaluations
from store.errors import ConfigError
from store.events import CapSet
from tests.test_evaluation import counting_deps
from tests.test_ui import CELLS, write_benchmark
from tests.workspaces import copy_workspace
from tools.evidence.benchmark_folder import content_sha256, read_benchmark_folder

BLIND = "uniform::none:1h:32"  # shows the judge nothing: the cheapest condition to judge
JUDGE = "offline-first"


@pytest.fixture(scope="module")
def home(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the indexed demo workspace, for the module's evaluations."""
    return copy_workspace(demo_home, tmp_path_factory.mktemp("step18") / "ws")


@dataclass
class Judged:
    """Evaluations of benchmark folders in ``home``, counting the requests that reach a model."""

    home: Path
    requests: list[int]

    def run(
        self, bench: Path, out: Path, *, limit: int | None = None, allow_modified: bool = False
    ) -> EvaluationResult:
        with App(load_settings(self.home)) as app:
            return anyio.run(
                lambda: evaluate(
                    counting_deps(app, self.requests),
                    benchmark_dir=bench,
                    judges=[JUDGE],
                    conditions=[parse_condition(BLIND)],
                    out_dir=out,
                    offline=True,
                    limit=limit,
                    allow_modified=allow_modified,
                )
            )


@pytest.fixture
def judged(home: Path) -> Judged:
    return Judged(home=home, requests=[0])


@pytest.fixture
def bench(tmp_path: Path, demo_playlist: Path) -> Path:
    """An export folder of eight pairs over the demo's videos, its hash in benchmark.json."""
    return write_benchmark(tmp_path / "bench", demo_playlist, CELLS)


def lines_of(bench: Path) -> list[str]:
    return (bench / "pairs.jsonl").read_text().splitlines()


def rewrite(bench: Path, lines: list[str], *, rehash: bool = True) -> None:
    """Write ``lines`` as the folder's pairs.jsonl; ``rehash`` keeps benchmark.json in step (so
    only what the records hold is at fault)."""
    data = "".join(line + "\n" for line in lines).encode()
    (bench / "pairs.jsonl").write_bytes(data)
    if rehash:
        info = {"version": "1", "content_sha256": hashlib.sha256(data).hexdigest()}
        (bench / "benchmark.json").write_text(json.dumps(info))


def edited(line: str, change: Callable[[dict[str, Any]], None]) -> str:
    record = json.loads(line)
    change(record)
    return json.dumps(record, sort_keys=True)  # NaN and Infinity written as Python writes them


def set_gap_nan(r: dict[str, Any]) -> None:
    r["gap"] = float("nan")


def set_start_infinite(r: dict[str, Any]) -> None:
    r["evidence"][0]["start_s"] = float("inf")


def set_gap_text(r: dict[str, Any]) -> None:
    r["gap"] = "2"


def set_id_number(r: dict[str, Any]) -> None:
    r["id"] = 7


def drop_playlist(r: dict[str, Any]) -> None:
    del r["playlist_id"]


def assert_nothing_judged(judged: Judged, out: Path) -> None:
    assert judged.requests == [0], "a judge was asked before the folder was checked"
    assert not (out / JUDGMENTS_FILE).exists()
    assert not (out / EVALUATION_FILE).exists()


# -- bad records: refused whole, with their file and line, before any judging --------------------

BAD_RECORDS = [
    pytest.param(lambda line: edited(line, set_gap_nan), "field 'gap' is nan", id="gap NaN"),
    pytest.param(
        lambda line: edited(line, set_start_infinite),
        "field 'evidence[0].start_s' is inf",
        id="start infinite",
    ),
    pytest.param(
        lambda line: re.sub(r'"gap": \d+', '"gap": 1e999', line),
        "field 'gap' is inf",
        id="gap 1e999",
    ),
    pytest.param(
        lambda line: edited(line, set_gap_text), "field 'gap' must be an integer", id="gap text"
    ),
    pytest.param(
        lambda line: edited(line, set_id_number), "field 'id' must be text", id="id a number"
    ),
    pytest.param(lambda line: line[: len(line) // 2], "is not valid JSON", id="half a line"),
]


@pytest.mark.parametrize(("spoil", "says"), BAD_RECORDS)
def test_a_bad_record_is_refused_with_its_line_before_any_judgment(
    judged: Judged,
    bench: Path,
    tmp_path: Path,
    spoil: Callable[[str], str],
    says: str,
) -> None:
    """The third record spoiled (its hash kept in step): the evaluation refuses the folder,
    naming pairs.jsonl and line 3, and no judge is asked, even with a limit of one pair that
    would never reach it; nothing is written. The UI refuses it in the same words."""
    lines = lines_of(bench)
    lines[2] = spoil(lines[2])
    rewrite(bench, lines)
    out = tmp_path / "eval"
    where = f"{str((bench / 'pairs.jsonl').resolve())!r} line 3"
    for limit in (None, 1):
        with pytest.raises(ConfigError) as refused:
            judged.run(bench, out, limit=limit)
        assert str(refused.value).startswith(where), str(refused.value)
        assert says in str(refused.value)
    assert_nothing_judged(judged, out)
    with pytest.raises(ConfigError) as shown:
        load_benchmark(bench)
    assert str(shown.value) == str(refused.value)  # one reader, one message


def test_a_pair_without_its_playlist_is_refused_before_judging_though_the_ui_shows_it(
    judged: Judged, bench: Path, tmp_path: Path
) -> None:
    """A judgment record needs the pair's playlist (the report's clusters): the evaluation
    refuses the record up front; the UI, which never shows it, reads the folder."""
    lines = lines_of(bench)
    lines[4] = edited(lines[4], drop_playlist)
    rewrite(bench, lines)
    with pytest.raises(ConfigError, match=r"line 5: not a benchmark pair record: field "):
        judged.run(bench, tmp_path / "eval")
    assert_nothing_judged(judged, tmp_path / "eval")
    assert len(load_benchmark(bench).pairs) == len(CELLS)


@pytest.mark.parametrize("limit", [None, 1], ids=["whole", "limit 1"])
def test_a_pair_id_twice_is_refused_before_judging_even_beyond_the_limit(
    judged: Judged, bench: Path, tmp_path: Path, limit: int | None
) -> None:
    """The first pair again at the end: refused naming both lines, before any judge is asked
    and whatever the limit (the duplicate lies beyond the first pair), not after the judging
    as a fault of the judgments."""
    lines = lines_of(bench)
    rewrite(bench, [*lines, lines[0]])
    out = tmp_path / "eval"
    with pytest.raises(ConfigError) as refused:
        judged.run(bench, out, limit=limit)
    text = str(refused.value)
    assert f"line {len(lines) + 1}: pair id 'pair-00' appears twice (first on line 1)" in text
    assert "pairs.jsonl" in text
    assert_nothing_judged(judged, out)


def test_eval_on_a_nan_record_is_one_line_and_exit_2_not_a_traceback(
    home: Path, bench: Path, tmp_path: Path
) -> None:
    """`playlisteval eval` on a pairs.jsonl holding NaN, where it printed ``ValueError: cannot
    convert float NaN to integer``: one error line naming the file and line, exit 2, nothing
    judged."""
    lines = lines_of(bench)
    lines[5] = edited(lines[5], set_gap_nan)
    rewrite(bench, lines)
    ws = copy_workspace(home, tmp_path / "ws")
    out = tmp_path / "eval"
    args = ["eval", "--benchmark", str(bench), "--judge", JUDGE, "--condition", BLIND]
    result = CliRunner().invoke(cli_app, [*args, "--out", str(out), "--home", str(ws)])
    assert result.exit_code == EXIT_FIX, result.output
    assert "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "line 6: not a benchmark pair record: field 'gap' is nan" in text
    assert not (out / JUDGMENTS_FILE).exists()


# -- records edited after the export -------------------------------------------------------------


def test_records_edited_after_the_export_are_refused_unless_allowed_and_then_recorded(
    judged: Judged, bench: Path, tmp_path: Path
) -> None:
    """One record's answer edited, benchmark.json left as the export wrote it: the evaluation
    refuses it before any judgment (as the UI does); allowed on purpose, it judges, and its
    result, its evaluation.json and the session say the benchmark was modified, with both
    hashes."""
    exported = json.loads((bench / "benchmark.json").read_text())["content_sha256"]
    lines = lines_of(bench)
    lines[3] = lines[3].replace("Chosen answer 3", "Chosen answer 3, improved")
    rewrite(bench, lines, rehash=False)
    out = tmp_path / "eval"
    with pytest.raises(ConfigError, match=r"does not match the content hash in benchmark\.json"):
        judged.run(bench, out, limit=2)
    assert_nothing_judged(judged, out)
    with pytest.raises(ConfigError, match="does not match the content hash"):
        load_benchmark(bench)

    result = judged.run(bench, out, limit=2, allow_modified=True)
    assert result.benchmark_check == "modified"
    assert result.new_records == 2 * 2  # two pairs, both orders
    meta = json.loads((out / EVALUATION_FILE).read_text())
    actual = content_sha256((bench / "pairs.jsonl").read_bytes())
    assert meta["benchmark_modified"] is True
    assert meta["benchmark_sha256"] == actual != exported
    assert meta["benchmark_json_sha256"] == exported
    assert meta["sessions"][-1]["benchmark"] == "modified"
    assert load_benchmark(bench, allow_modified=True).content_sha256 == actual


def test_an_export_as_written_is_verified_and_recorded_so(
    judged: Judged, bench: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    result = judged.run(bench, out, limit=1)
    assert result.benchmark_check == "verified"
    meta = json.loads((out / EVALUATION_FILE).read_text())
    assert meta["benchmark_modified"] is False
    assert meta["benchmark_json_sha256"] == meta["benchmark_sha256"]
    assert meta["sessions"][-1]["benchmark"] == "verified"
    assert read_benchmark_folder(bench).check == "verified"


def test_a_benchmark_without_its_benchmark_json_is_refused_unless_allowed_and_then_recorded(
    judged: Judged, bench: Path, tmp_path: Path
) -> None:
    """Deleting benchmark.json would hide an edit (the hostile walk: an edited chosen text
    judged with ``benchmark_modified: false``): a benchmark is read whole or not at all, by
    ``eval`` and by the UI; allowed on purpose, it is judged and recorded as unverified."""
    lines = lines_of(bench)
    lines[3] = lines[3].replace("Chosen answer 3", "Chosen answer 3, improved")
    rewrite(bench, lines, rehash=False)
    (bench / "benchmark.json").unlink()
    out = tmp_path / "eval"
    with pytest.raises(ConfigError, match=r"has no benchmark\.json, so its records cannot be"):
        judged.run(bench, out, limit=2)
    assert_nothing_judged(judged, out)
    with pytest.raises(ConfigError, match=r"has no benchmark\.json"):
        load_benchmark(bench)
    refused = CliRunner().invoke(
        cli_app,
        [
            "eval",
            "--benchmark",
            str(bench),
            "--judge",
            JUDGE,
            "--out",
            str(tmp_path / "cli-eval"),
            "--home",
            str(judged.home),
        ],
    )
    assert refused.exit_code == EXIT_FIX, refused.output
    assert "--allow-modified-benchmark" in " ".join(refused.output.split())

    result = judged.run(bench, out, limit=2, allow_modified=True)
    assert result.benchmark_check == "unverified"
    meta = json.loads((out / EVALUATION_FILE).read_text())
    assert meta["benchmark_json_sha256"] is None
    assert meta["sessions"][-1]["benchmark"] == "unverified"


# -- the judgments viewer and judgments.jsonl ----------------------------------------------------


@pytest.fixture
def evaluated(judged: Judged, bench: Path, tmp_path: Path) -> Path:
    """An evaluation folder of the benchmark's first two pairs (four records)."""
    out = tmp_path / "eval"
    judged.run(bench, out, limit=2)
    assert len(read_judgments(out / JUDGMENTS_FILE)) == 4
    return out


def test_the_viewer_names_a_bad_middle_line_of_the_judgments_instead_of_dropping_it(
    evaluated: Path, bench: Path, home: Path
) -> None:
    """A line that is not JSON between two records: the viewer refuses the folder naming the
    file and line (as `report` does), where it showed the other records as if all were there;
    `playlisteval ui` says it in one line, exit 2."""
    path = evaluated / JUDGMENTS_FILE
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:2], "{oops", *lines[2:]]) + "\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}:3: not JSON"):
        load_evaluations([evaluated], load_benchmark(bench))
    with pytest.raises(Exception, match=":3: not JSON"):
        load_records([evaluated])  # the report names the same line
    result = CliRunner().invoke(
        cli_app, ["ui", str(bench), "--evaluation", str(evaluated), "--home", str(home)]
    )
    assert result.exit_code == EXIT_FIX, result.output
    assert "Traceback" not in result.output
    assert f"{JUDGMENTS_FILE}:3:notJSON" in "".join(result.output.split())


def test_a_resumed_evaluation_leaves_no_torn_line_for_its_readers_to_refuse(
    judged: Judged, evaluated: Path, bench: Path
) -> None:
    """A crash cut the last record short: the viewer reads the folder without it; the next
    evaluation cuts the torn line off instead of leaving it between records, so the viewer and
    the report read the folder whole afterwards."""
    path = evaluated / JUDGMENTS_FILE
    text = path.read_text()
    last = text.splitlines()[-1]
    path.write_text(text[: -len(last) - 1] + last[: len(last) // 2])  # the last record torn
    loaded = load_evaluations([evaluated], load_benchmark(bench))
    assert len(next(iter(loaded.values())).records) == 3
    judged.run(bench, evaluated, limit=2)  # judges the torn record again (served from the log)
    assert judged.requests == [4]  # the fixture's four; the torn one was served from the log
    assert path.read_text().endswith("\n")
    assert all(json.loads(line) for line in path.read_text().splitlines())
    assert len(load_records([evaluated])) == 4
    loaded = load_evaluations([evaluated], load_benchmark(bench))
    assert len(next(iter(loaded.values())).records) == 4


def test_an_evaluation_records_its_log_anchor_and_verify_checks_the_log_against_it(
    judged: Judged, bench: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    result = judged.run(bench, out, limit=1)
    anchor = json.loads((out / EVALUATION_FILE).read_text())["anchor"]
    assert anchor["label"] == f"evaluation {result.evaluation_id}"
    assert anchor["streams"] == [f"eval-{result.evaluation_id}"]
    assert anchor["events"] > 0
    home = judged.home
    said = CliRunner().invoke(
        cli_app, ["store", "verify", "--anchor", str(out), "--home", str(home)]
    )
    assert said.exit_code == 0, said.output
    assert f"evaluation {result.evaluation_id} matches its anchor" in " ".join(said.output.split())
    # The evaluation's stream written to after the anchor (a second session, a forger): named.
    with App(load_settings(home)) as app:
        app.events.append(f"eval-{result.evaluation_id}", [CapSet(cap_micros=1, command="eval")])
    said = CliRunner().invoke(
        cli_app, ["store", "verify", "--anchor", str(out), "--home", str(home)]
    )
    assert said.exit_code == EXIT_TAMPERED, said.output
    assert "after the anchor" in " ".join(said.output.split())


# -- the shell around an evaluation (step 19's frictions) ----------------------------------------


def test_a_resumed_evaluations_bar_counts_on_from_what_was_judged(
    home: Path, bench: Path, tmp_path: Path
) -> None:
    """Its bar was 0 of the remainder after an interruption; it counts every judgment of the
    evaluation, those already in its file done. And the next-step hint keeps ``--home``."""
    ws = copy_workspace(home, tmp_path / "ws")
    out = tmp_path / "eval"
    args = ["eval", "--benchmark", str(bench), "--judge", JUDGE, "--condition", BLIND]
    first = CliRunner().invoke(
        cli_app, [*args, "--limit", "1", "--out", str(out), "--home", str(ws)]
    )
    assert first.exit_code == 0, first.output
    said = " ".join(first.output.split())
    assert f"playlisteval report {out} --out REPORT_DIR --home {ws}" in said

    seen: list[tuple[int, int]] = []

    class Bar:
        def started(self, jobs: int, done: int = 0) -> None:
            seen.append((jobs, done))

        def judged(self, made: bool) -> None:
            pass

    with App(load_settings(ws)) as app:
        runs.evaluate(app, bench, [JUDGE], out, [BLIND], limit=2, progress=Bar())
    assert seen == [(2, 2)]  # pair 2 in both orders to judge; pair 1's two judgments done


def test_a_pairs_jsonl_that_is_a_folder_is_one_line(bench: Path) -> None:
    (bench / "pairs.jsonl").unlink()
    (bench / "pairs.jsonl").mkdir()
    with pytest.raises(ConfigError, match=r"pairs\.jsonl' cannot be read"):
        read_benchmark_folder(bench)
