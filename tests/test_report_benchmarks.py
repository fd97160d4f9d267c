"""Comparisons that cannot mislead: a report refuses evaluations of two benchmarks unless asked to
report them apart (and then no cell, mean or figure mixes them), opens with its results and ends
with its provenance, and names each evaluation by what it judged, never two alike.

The evaluations are hand-written judgment files (the shape of ``tests/test_report.py``): judge
"first" always picks the first answer (accuracy 0.5: right in one order of each pair), and
"right" always picks the correct one (accuracy 1.0).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from playlisteval.cli import app as cli_app
from playlisteval.cli.shell import EXIT_MIXED_BENCHMARKS
from playlisteval.report import (
    OFFLINE_NOTE,
    MixedBenchmarks,
    ReportError,
    evaluation_labels,
    figure_specs,
    load_records,
    write_report,
)
from playlisteval.report.drawing import draw, text_overlaps
from tests.test_report import judgment_lines, pick_first, pick_right, write_evaluation

SHA_A, SHA_B = "a1" * 32, "b2" * 32
HASHED_A = f"sha256 {SHA_A[:12]}…"  # how a label names benchmark A, which records no name
UNIFORM = "uniform-frames-1h-32f-448p"
RETRIEVED = "retrieved-bm25-frames-1h-32f-448p"


def _meta(sha: str | None, judges: list[str], conditions: list[str], **more: Any) -> dict[str, Any]:
    """An evaluation.json as `eval` writes it (the fields the report reads)."""
    meta: dict[str, Any] = {
        "evaluation_id": f"ev-{sha[:4] if sha else 'none'}-{'-'.join(judges)}",
        "judges": judges,
        "conditions": [{"condition_id": c} for c in conditions],
        "started": "2026-12-01T09:00:00+00:00",
        **more,
    }
    if sha is not None:
        meta["benchmark_sha256"] = sha
    return meta


def _evaluation(folder: Path, sha: str | None, judge: str, pick: Any, **more: Any) -> Path:
    """An evaluation of ``judge`` with uniform and retrieved frames, on benchmark ``sha``."""
    lines = judgment_lines(judge, "uniform", "frames", 1, pick) + judgment_lines(
        judge, "retrieved", "frames", 1, pick
    )
    return write_evaluation(folder, lines, _meta(sha, [judge], [UNIFORM, RETRIEVED], **more))


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


# --- evaluations of two benchmarks -------------------------------------------------------------


def test_evaluations_of_two_benchmarks_are_refused_naming_which_judged_which(
    tmp_path: Path,
) -> None:
    one = _evaluation(tmp_path / "a" / "evaluation", SHA_A, "first", pick_first)
    two = _evaluation(tmp_path / "b" / "evaluation", SHA_B, "first", pick_right)
    with pytest.raises(MixedBenchmarks) as refused:
        write_report([one, two], tmp_path / "out")
    said = str(refused.value)
    assert f"'{one}' judged benchmark sha256 {SHA_A[:12]}…" in said
    assert f"'{two}' judged benchmark sha256 {SHA_B[:12]}…" in said
    assert "--across-benchmarks" in said
    assert isinstance(refused.value, ReportError)  # a caller catching ReportError still does
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_folder_that_records_no_benchmark_hash_is_not_taken_for_the_others(
    tmp_path: Path,
) -> None:
    """Without a recorded hash the report cannot know the benchmark was the same: refused."""
    known = _evaluation(tmp_path / "known", SHA_A, "first", pick_first)
    unknown = _evaluation(tmp_path / "unknown", None, "right", pick_right)
    with pytest.raises(
        MixedBenchmarks,
        match=rf"'{re.escape(str(unknown))}' judged a benchmark "
        r"whose hash its evaluation\.json does not record",
    ):
        write_report([known, unknown], tmp_path / "out")


def test_the_report_command_refuses_two_benchmarks_with_one_line_and_its_own_exit_code(
    tmp_path: Path,
) -> None:
    one = _evaluation(tmp_path / "a" / "evaluation", SHA_A, "first", pick_first)
    two = _evaluation(tmp_path / "b" / "evaluation", SHA_B, "first", pick_right)
    out = tmp_path / "rep"
    refused = CliRunner().invoke(
        cli_app, ["report", str(one), str(two), "--out", str(out), "--home", str(tmp_path / "ws")]
    )
    assert refused.exit_code == EXIT_MIXED_BENCHMARKS, refused.output
    assert EXIT_MIXED_BENCHMARKS not in (0, 1, 2)  # apart from success, a crash, a fix
    assert "Traceback" not in refused.output
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, refused.stderr
    flat = " ".join(refused.stderr.split())
    assert f"{one}' judged benchmark sha256 {SHA_A[:12]}" in flat
    assert f"{two}' judged benchmark sha256 {SHA_B[:12]}" in flat
    assert not out.exists()
    assert not (tmp_path / "ws").exists()  # refused before any workspace was opened

    grouped = CliRunner().invoke(
        cli_app,
        ["report", str(one), str(two), "--out", str(out), "--across-benchmarks"],
        env={"PLAYLISTEVAL_HOME": str(tmp_path / "ws")},
    )
    assert grouped.exit_code == 0, grouped.output
    assert "2 benchmarks, each reported apart" in " ".join(grouped.output.split())


def test_across_benchmarks_every_table_and_figure_is_one_benchmarks_own(tmp_path: Path) -> None:
    """The same judge under the same condition on two benchmarks: two cells (0.5 and 1.0),
    never one of 0.75; every table and figure file and title names its benchmark."""
    one = _evaluation(tmp_path / "a" / "evaluation", SHA_A, "first", pick_first)
    two = _evaluation(tmp_path / "b" / "evaluation", SHA_B, "first", pick_right)
    out = tmp_path / "out"
    summary = write_report([one, two], out, across_benchmarks=True)
    assert summary.judgments == len(load_records([one])) + len(load_records([two]))
    assert summary.benchmarks == (
        f"benchmark sha256 {SHA_A[:12]}…",
        f"benchmark sha256 {SHA_B[:12]}…",
    )
    tables = out / "tables"
    for sha, expected in ((SHA_A, 0.5), (SHA_B, 1.0)):
        prefix = f"bench-{sha[:12]}-"
        [row] = _csv(tables / f"{prefix}leaderboard.csv")
        assert float(row[UNIFORM]) == pytest.approx(expected)
        assert float(row[RETRIEVED]) == pytest.approx(expected)
        by_condition = _csv(tables / f"{prefix}judges-by-condition.csv")
        assert {float(r["accuracy"]) for r in by_condition} == {expected}
        assert sum(int(r["N"]) for r in by_condition) == summary.judgments // 2
    # No table file stands for both benchmarks, and every one names the benchmark it holds.
    assert all(p.name.startswith("bench-") for p in tables.iterdir())
    figures = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert figures, "no figure drawn"
    assert all(
        stem.startswith(f"bench-{SHA_A[:12]}-") or stem.startswith(f"bench-{SHA_B[:12]}-")
        for stem in figures
    )
    assert len(summary.figures) == len(figures)
    for title in summary.figures:
        assert re.search(r" — benchmark sha256 [0-9a-f]{12}…$", title), title
    markdown = summary.markdown.read_text()
    for heading in re.findall(r"^## (.+)$", markdown, flags=re.M):
        assert "benchmark sha256" in heading, heading  # every section is one benchmark's


def test_a_figure_titled_with_its_benchmark_keeps_its_texts_apart(tmp_path: Path) -> None:
    """A figure of a report over several benchmarks names it on a second title line; nothing
    in the drawing touches anything else."""
    folder = _evaluation(tmp_path / "a", SHA_A, "first", pick_first)
    specs = figure_specs(load_records([folder]))
    assert specs
    for spec in specs:
        titled = replace(spec, title=f"{spec.title}\nbenchmark sha256 {SHA_A[:12]}…")
        assert text_overlaps(draw(titled, OFFLINE_NOTE)) == [], spec.title


# --- results first, provenance last -------------------------------------------------------------


def _headings(text: str, pattern: str) -> list[str]:
    return re.findall(pattern, text, flags=re.M)


def test_the_pages_open_with_the_results_and_end_with_the_provenance(tmp_path: Path) -> None:
    one = _evaluation(tmp_path / "a", SHA_A, "offline-first", pick_first)
    summary = write_report([one], tmp_path / "out")
    markdown = summary.markdown.read_text()
    sections = _headings(markdown, r"^## (.+)$")
    assert sections[0].startswith("Table 1 layout")
    assert sections[1] == "Leaderboard across evaluations"
    assert sections[2] == "Figures"
    assert sections[-1] == "Provenance"
    assert sections.count("Provenance") == 1
    # Before the first result: the one line of provenance, naming the harness and the hash.
    opening = markdown[: markdown.index("\n## ")]
    assert "Provenance (in full at the end): the offline harness answered" in opening
    assert f"benchmark sha256 {SHA_A}" in opening
    assert "| benchmark of" not in opening  # the table itself is at the end

    page = summary.html.read_text()
    ids = re.findall(r'<h2 id="([^"]+)"', page)
    assert ids[0].startswith("table1")
    assert ids[1] == "leaderboard"
    assert ids[-1] == "provenance"
    assert page.index("<h2>Figures</h2>") < page.index('id="judges-by-condition"')
    assert page.index('class="provenance-line"') < page.index('id="table1')


# --- naming evaluations -------------------------------------------------------------------------


def test_evaluations_are_named_by_what_they_judged_never_two_alike(tmp_path: Path) -> None:
    """Every folder is called "evaluation" (eval's old default): the name says nothing, so the
    label is what each judged — benchmark and conditions, then the judges where those tell two
    apart —, and two that judged alike are told apart by their paths."""
    by_first = _evaluation(tmp_path / "x" / "evaluation", SHA_A, "first", pick_first)
    by_right = _evaluation(tmp_path / "y" / "evaluation", SHA_A, "right", pick_right)
    again = _evaluation(tmp_path / "z" / "evaluation", SHA_A, "right", pick_right)
    named = _evaluation(
        tmp_path / "w" / "evaluation", SHA_A, "first", pick_first, benchmark_name="cooking-v2"
    )
    bare = write_evaluation(tmp_path / "bare-eval", [], {"benchmark_sha256": SHA_A})
    labels = evaluation_labels([by_first, by_right, again, named, bare])
    assert labels[by_first] == f"{HASHED_A}: first × 2 conditions"
    assert labels[by_right] == f"{HASHED_A}: right × 2 conditions ({by_right})"
    assert labels[again] == f"{HASHED_A}: right × 2 conditions ({again})"
    assert labels[named] == "cooking-v2: 2 conditions"  # nothing else judged cooking-v2 so
    assert labels[bare] == "bare-eval"  # nothing recorded: the folder's name
    assert len(set(labels.values())) == len(labels)
    assert "evaluation" not in labels.values()


def test_an_evaluation_alone_is_named_by_its_benchmark_and_conditions(tmp_path: Path) -> None:
    named = _evaluation(tmp_path / "e", SHA_A, "first", pick_first, benchmark_name="cooking-v2")
    assert evaluation_labels([named]) == {named: "cooking-v2: 2 conditions"}


def test_many_judges_and_one_condition_read_short_and_folder_names_part_twins(
    tmp_path: Path,
) -> None:
    judges = ["j1", "j2", "j3", "j4", "j5"]
    wide = write_evaluation(tmp_path / "wide", [], _meta(SHA_A, judges, [UNIFORM]))
    twin_a = write_evaluation(tmp_path / "run-a", [], _meta(SHA_A, ["j1"], [UNIFORM]))
    twin_b = write_evaluation(tmp_path / "run-b", [], _meta(SHA_A, ["j1"], [UNIFORM]))
    labels = evaluation_labels([wide, twin_a, twin_b])
    assert labels[wide] == f"{HASHED_A}: j1, j2, j3 +2 more × {UNIFORM}"
    assert labels[twin_a] == f"{HASHED_A}: j1 × {UNIFORM} (run-a)"
    assert labels[twin_b] == f"{HASHED_A}: j1 × {UNIFORM} (run-b)"


def test_the_leaderboard_cells_name_the_evaluation_not_its_default_folder(
    tmp_path: Path,
) -> None:
    by_first = _evaluation(tmp_path / "x" / "evaluation", SHA_A, "first", pick_first)
    by_right = _evaluation(tmp_path / "y" / "evaluation", SHA_A, "right", pick_right)
    summary = write_report([by_first, by_right], tmp_path / "out")
    rows = {r["judge"]: r for r in _csv(tmp_path / "out" / "tables" / "leaderboard.csv")}
    assert rows["first"][f"{UNIFORM} evaluation"] == f"{HASHED_A}: first × 2 conditions"
    assert rows["right"][f"{UNIFORM} evaluation"] == f"{HASHED_A}: right × 2 conditions"
    markdown = summary.markdown.read_text()
    assert "(evaluation)" not in markdown
    note = " ".join(markdown.split())
    assert f"{HASHED_A}: first × 2 conditions: folder {by_first}, evaluation ev-a1a1-first" in note
