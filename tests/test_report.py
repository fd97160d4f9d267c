"""The evaluation report: hand-written judgments → numbers and intervals checked by hand, and the
demo's report folder (curated, exported and evaluated through the product path, reported by the
CLI) holding figures as PNG and PDF, every table as CSV and LaTeX, and the provenance.

The hand-written fixture: four pairs in two playlists (PL-A: p1, p2; PL-B: p3, p4), three in
"cooking" and one in "sports". Judge "first" always picks the first answer. Judge "mixed" at 1 h
with uniform frames gets p1 and p2 right in both orders, picks the first answer on p3 both times
and ties on p4; at 10 h it always picks the first answer; with retrieved frames (bm25) it is
always right; with frames only it is always right; with the transcript only it always ties.

Its intervals are known exactly: with two playlists a resample takes playlist A twice, B twice or
one of each, so the 95 % percentile interval over 2000 resamples runs from one playlist's mean to
the other's (see tests/test_bootstrap.py). A stratum inside one playlist resamples its pairs.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.report import (
    OFFLINE_NOTE,
    ReportError,
    ReportSummary,
    code_version,
    figure_specs,
    load_records,
    write_report,
)
from playlisteval.report.drawing import BarFigure, LineFigure, draw, text_overlaps
from playlisteval.settings import load_settings
from policies.judging import parse_condition
from store.events import CallRecorded, PairCandidate, PairJudged, pairs_stream
from store.eventstore import open_event_store
from tests.workspaces import copy_workspace
from tools.providers.judges import stand_in_name

PAIRS = {  # pair id: (domain, gap, playlist)
    "p1": ("cooking", 1, "PL-A"),
    "p2": ("cooking", 2, "PL-A"),
    "p3": ("cooking", 2, "PL-B"),
    "p4": ("sports", 2, "PL-B"),
}
GOLD = [
    {"video_id": "v1", "start_s": 0.0, "end_s": 10.0},
    {"video_id": "v2", "start_s": 0.0, "end_s": 10.0},
]
# Recorded out of rank order on purpose: the report ranks by score (v1, v9, v2).
RETRIEVED = [
    {"video_id": "v2", "start_s": 5.0, "end_s": 15.0, "score": 0.4},
    {"video_id": "v1", "start_s": 0.0, "end_s": 10.0, "score": 0.9},
    {"video_id": "v9", "start_s": 0.0, "end_s": 10.0, "score": 0.5},
]
NBSP = "\u00a0"

Picker = Callable[[str, str], str | None]  # (pair id, order) -> picked


def pick_right(pair: str, order: str) -> str | None:
    return "first" if order == "chosen_first" else "second"


def pick_first(pair: str, order: str) -> str | None:
    return "first"


def _tie(pair: str, order: str) -> str | None:
    return "tie"


def _mixed(pair: str, order: str) -> str | None:
    return {"p1": pick_right, "p2": pick_right, "p3": pick_first, "p4": _tie}[pair](pair, order)


def judgment_lines(
    judge: str,
    frames: str,
    modality: str,
    hours: float,
    pick: Picker,
    *,
    built: float | None = None,
    retriever: str = "bm25",
    spans: Callable[[str], list[dict[str, Any]]] = lambda pair: RETRIEVED,
) -> list[str]:
    """The lines an evaluation writes for one judge under one condition: every pair in both
    orders, in a haystack of ``built`` hours (default: the hours asked)."""
    condition = {
        "frames": frames,
        "retriever": retriever if frames == "retrieved" else None,
        "modality": modality,
        "hours": hours,
        "n_frames": 32,
        "thinking_budget": None,
        "resolution": 448,
    }
    named = f"-{retriever}" if frames == "retrieved" else ""
    condition_id = f"{frames}{named}-{modality}-{hours:g}h-32f-448p"
    lines = []
    for pair, (domain, gap, playlist) in PAIRS.items():
        for order in ("chosen_first", "rejected_first"):
            picked = pick(pair, order)
            verdict = {"first": "A", "second": "B", "tie": "tie", None: None}[picked]
            record = {
                "pair_id": pair,
                "judge": judge,
                "condition_id": condition_id,
                "condition": condition,
                "order": order,
                "raw_output": f"[[{verdict}]]",
                "verdict": verdict,
                "picked": picked,
                "retrieved_spans": spans(pair) if frames == "retrieved" else [],
                "gold_spans": GOLD,
                "seed": 0,
                "domain": domain,
                "gap": gap,
                "playlist_id": playlist,
                "length_hours": hours if built is None else built,
                "call_key": f"{judge}/{condition_id}/{pair}/{order}",
            }
            lines.append(json.dumps(record))
    return lines


def write_evaluation(directory: Path, lines: list[str], meta: dict[str, Any] | None = None) -> Path:
    directory.mkdir(parents=True)
    (directory / "judgments.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "evaluation.json").write_text(json.dumps(meta or {"judges": []}))
    return directory


def full_eval_dirs(root: Path) -> list[Path]:
    """Two evaluation directories: the "first" judge in one, the "mixed" judge in the other."""
    first = judgment_lines("first", "uniform", "frames+transcript", 1, pick_first) + judgment_lines(
        "first", "uniform", "frames+transcript", 10, pick_first
    )
    mixed = (
        judgment_lines("mixed", "uniform", "frames+transcript", 1, _mixed)
        + judgment_lines("mixed", "uniform", "frames+transcript", 10, pick_first)
        + judgment_lines("mixed", "retrieved", "frames+transcript", 1, pick_right)
        + judgment_lines("mixed", "uniform", "frames", 1, pick_right)
        + judgment_lines("mixed", "uniform", "transcript", 1, _tie)
    )
    return [
        write_evaluation(root / "eval-first", first),
        write_evaluation(root / "eval-mixed", mixed),
    ]


@pytest.fixture
def full_eval(tmp_path: Path) -> list[Path]:
    """The hand-written evaluations (see the module docstring)."""
    return full_eval_dirs(tmp_path)


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], ReportSummary]:
    """The report of the hand-written evaluations, written once for the tests that read it."""
    root = tmp_path_factory.mktemp("full")
    dirs = full_eval_dirs(root)
    return dirs, write_report(dirs, root / "out")


def _section(markdown: str, title: str) -> str:
    """The ``## title`` section of a markdown page (not a ``###`` figure heading)."""
    start = markdown.index(f"\n## {title}") + 1
    end = markdown.find("\n## ", start)
    return markdown[start : end if end >= 0 else len(markdown)]


def _row(section: str, *leading: str) -> list[str]:
    """The cells of the one table row whose first cells are ``leading``."""
    found = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and tuple(cells[: len(leading)]) == leading:
            found.append(cells[len(leading) :])
    assert len(found) == 1, f"expected one row {leading!r}, found {found!r} in\n{section}"
    return found[0]


def _clustered_se(values: list[float], clusters: list[str]) -> float:
    mean = sum(values) / len(values)
    sums: dict[str, float] = {}
    for x, g in zip(values, clusters, strict=True):
        sums[g] = sums.get(g, 0.0) + (x - mean)
    groups = len(sums)
    return math.sqrt(groups / (groups - 1) * sum(s * s for s in sums.values())) / len(values)


U1 = "uniform-frames+transcript-1h-32f-448p"
R1 = "retrieved-bm25-frames+transcript-1h-32f-448p"
NOT_KNOWN = "not known"  # who answered: no log was read and "first"/"mixed" are no offline judges


def test_table1_gives_the_hand_computed_metrics_and_intervals(
    full_report: tuple[list[Path], ReportSummary],
) -> None:
    _, summary = full_report
    assert summary.judgments == 8 * 7
    assert summary.runs == 7
    table = _section(summary.markdown.read_text(), "Judges by condition")
    # hours built, answered by, accuracy, swap-averaged, consistent, position consistency (each
    # with its interval), position bias, N, pairs, SE. "first" scores 1 then 0 on every pair:
    # both playlists' means are 0.5, and so is every resample.
    assert _row(table, "first", U1) == [
        "1", NOT_KNOWN, "0.500 [0.500, 0.500]", "0.500 [0.500, 0.500]", "0.000 [0.000, 0.000]",
        "0.000 [0.000, 0.000]", "+0.500", "8", "4", "0.000",
    ]  # fmt: skip
    # mixed at 1 h, per judgment (cf, rf): p1 1 1, p2 1 1 (PL-A: mean 1), p3 1 0, p4 .5 .5
    # (PL-B: .5) -> 6/8 in [0.5, 1]. Pairs: swap-averaged 1 1 | .5 .5; consistent 1 1 | 0 0;
    # position-consistent 1 1 | 0 1 (tie = tie). Decisive verdicts picking "first": 4 of 6.
    se = _clustered_se([1, 1, 1, 1, 1, 0, 0.5, 0.5], ["PL-A"] * 4 + ["PL-B"] * 4)
    assert se == pytest.approx(0.25)
    assert _row(table, "mixed", U1) == [
        "1", NOT_KNOWN, "0.750 [0.500, 1.000]", "0.750 [0.500, 1.000]", "0.500 [0.000, 1.000]",
        "0.750 [0.500, 1.000]", f"{4 / 6 - 0.5:+.3f}", "8", "4", f"{se:.3f}",
    ]  # fmt: skip
    assert _row(table, "mixed", R1) == [
        "1", NOT_KNOWN, "1.000 [1.000, 1.000]", "1.000 [1.000, 1.000]", "1.000 [1.000, 1.000]",
        "1.000 [1.000, 1.000]", "+0.000", "8", "4", "0.000",
    ]  # fmt: skip
    # Always tie: accuracy 0.5, both orders tie so the pair is position-consistent, and no
    # decisive verdict leaves the position bias undefined.
    assert _row(table, "mixed", "uniform-transcript-1h-32f-448p") == [
        "1", NOT_KNOWN, "0.500 [0.500, 0.500]", "0.500 [0.500, 0.500]", "0.000 [0.000, 0.000]",
        "1.000 [1.000, 1.000]", "—", "8", "4", "0.000",
    ]  # fmt: skip


def test_strata_modality_paired_test_and_recall(
    full_report: tuple[list[Path], ReportSummary],
) -> None:
    markdown = full_report[1].markdown.read_text()

    domains = _section(markdown, "Accuracy per domain")
    assert "| judge | condition | cooking | sports | macro |" in domains
    # cooking: p1 1 1, p2 1 1 (PL-A), p3 1 0 (PL-B) -> 5/6 in [0.5, 1]; sports: p4 .5 .5, one
    # pair in one playlist: nothing to resample.
    assert _row(domains, "mixed", U1) == [
        "0.833 [0.500, 1.000] (N=6)", "0.500 (N=2)", f"{(5 / 6 + 0.5) / 2:.3f}"
    ]  # fmt: skip
    assert _row(domains, "first", U1) == [
        "0.500 [0.500, 0.500] (N=6)", "0.500 (N=2)", "0.500"
    ]  # fmt: skip
    gaps = _section(markdown, "Accuracy per rating gap")
    # gap 1: p1 -> 1 (one pair); gap 2: p2 1 1 (PL-A), p3 1 0, p4 .5 .5 (PL-B) -> 4/6.
    assert _row(gaps, "mixed", U1) == [
        "1.000 (N=2)", "0.667 [0.500, 1.000] (N=6)", f"{(1 + 4 / 6) / 2:.3f}"
    ]  # fmt: skip

    modality = _section(markdown, "Modality ablation")
    setting = "uniform-1h-32f-448p"  # the one label, as the evaluation names it
    assert _row(modality, "mixed", setting, "frames") == [
        "1.000 [1.000, 1.000]", "1.000 [1.000, 1.000]", "8"
    ]  # fmt: skip
    assert _row(modality, "mixed", setting, "frames+transcript") == [
        "0.750 [0.500, 1.000]", "0.750 [0.500, 1.000]", "8"
    ]  # fmt: skip
    assert _row(modality, "mixed", setting, "transcript") == [
        "0.500 [0.500, 0.500]", "0.500 [0.500, 0.500]", "8"
    ]  # fmt: skip
    assert "| first |" not in modality  # "first" ran under one modality only

    paired = _section(markdown, "Retrieved against uniform frames")
    # Per pair retrieved minus uniform swap-averaged: 0, 0 (PL-A), .5, .5 (PL-B) -> mean .25
    # in [0, 0.5].
    se = _clustered_se([0, 0, 0.5, 0.5], ["PL-A", "PL-A", "PL-B", "PL-B"])
    z = 0.25 / se
    p = math.erfc(abs(z) / math.sqrt(2))
    # p3 and p4 are consistently right with retrieval only: sign test 2 * (1/2)**2.
    assert _row(paired, "mixed", "bm25") == [
        U1, R1, "4", "+0.250 [+0.000, +0.500]", f"{se:.3f}", f"{z:+.3f}", f"{p:.3g}", "2", "0",
        "0.5",
    ]  # fmt: skip
    assert "| first |" not in paired

    recall = _section(markdown, "Retriever recall of the gold evidence")
    # Ranked by score: v1 0-10 (IoU 1 with gold v1), v9, v2 5-15 (IoU 5/15 with gold v2).
    # R@1..10, coverage (10 + 5 of 20 gold seconds), mean best IoU ((1 + 1/3) / 2), N, twins.
    assert _row(recall, "bm25", "1", "1", "0.3") == [
        "0.500", "1.000", "1.000", "1.000", "0.750", f"{(1 + 1 / 3) / 2:.3f}", "4", "—"
    ]  # fmt: skip
    assert _row(recall, "bm25", "1", "1", "0.5") == [
        "0.500", "0.500", "0.500", "0.500", "0.750", "0.667", "4", "—"
    ]  # fmt: skip
    assert "same ranked spans" not in markdown  # one retriever: nothing coincides


FIGURES = (
    "Accuracy by condition",
    "Accuracy against haystack hours",
    "Retrieved against uniform frames",
    "Modality ablation",
    "Position consistency across the answer swap",
    "Accuracy per domain",
    "Retriever recall@k at tIoU ≥ 0.5",
)


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (after checking the signature)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _figure_files_are_real(summary: Any) -> None:
    assert len(summary.figure_files) == 2 * len(summary.figures)
    for path in summary.figure_files:
        if path.suffix == ".png":
            width, height = _png_size(path)
            assert width > 300
            assert height > 200
        else:
            assert path.suffix == ".pdf"
            data = path.read_bytes()
            assert data.startswith(b"%PDF-")
            assert b"%%EOF" in data[-64:]


def test_every_figure_is_drawn_when_its_data_is_there(
    full_report: tuple[list[Path], ReportSummary],
) -> None:
    full_eval, summary = full_report
    out = summary.html.parent
    # Retrieval ran at one length only, and no log of the difficulty gate was given.
    assert summary.omitted == (
        "Retriever recall against haystack hours: not drawn, no retriever searched haystacks "
        "of two or more lengths built.",
        "Difficulty-gate accuracy by rating gap: not drawn, no event log was read (give the "
        "workspace that curated the benchmark).",
    )
    assert summary.figures == FIGURES
    _figure_files_are_real(summary)
    page, markdown = summary.html.read_text(), summary.markdown.read_text()
    for path in summary.figure_files:
        name = path.relative_to(out).as_posix()
        assert name in markdown
        assert (f'<img src="{name}"' in page) == (path.suffix == ".png")
        assert (f'href="{name}"' in page) == (path.suffix == ".pdf")
    specs = {spec.title: spec for spec in figure_specs(load_records(full_eval))}
    hours = specs["Accuracy against haystack hours"]
    assert isinstance(hours, LineFigure)
    # One line per judge whose condition ran at 1 and at 10 hours, at the hours built.
    lines = {s.label: [(p.x, p.y) for p in s.points] for s in hours.series}
    assert lines == {
        "first · uniform-frames+transcript-32f-448p": [(1.0, 0.5), (10.0, 0.5)],
        "mixed · uniform-frames+transcript-32f-448p": [(1.0, 0.75), (10.0, 0.5)],
    }
    mixed_1h = next(p for p in hours.series[1].points if p.x == 1.0)
    assert (mixed_1h.low, mixed_1h.high) == (0.5, 1.0)  # the interval rides along
    recall = specs["Retriever recall@k at tIoU ≥ 0.5"]
    assert isinstance(recall, LineFigure)
    # Three spans retrieved per pair: k = 1 and 3 drawn (5 and 10 would repeat k = 3).
    assert [(p.x, p.y) for p in recall.series[0].points] == [(1.0, 0.5), (3.0, 0.5)]


def test_no_two_texts_of_any_figure_collide(
    full_report: tuple[list[Path], ReportSummary],
) -> None:
    """Tick labels, value labels, legends and titles are measured on the drawn canvas."""
    for spec in figure_specs(load_records(full_report[0])):
        assert text_overlaps(draw(spec, OFFLINE_NOTE)) == [], spec.title


def test_a_condition_is_named_by_the_hours_its_haystack_holds(tmp_path: Path) -> None:
    """Asked for 1 h and 10 h over a playlist of 0.1 h: both built 0.1 h, and say so."""
    lines = judgment_lines("first", "uniform", "frames", 1, pick_right, built=0.1) + judgment_lines(
        "first", "uniform", "frames", 10, pick_first, built=0.1
    )
    directory = write_evaluation(tmp_path / "eval", lines)
    summary = write_report([directory], tmp_path / "out")
    table = _section(summary.markdown.read_text(), "Judges by condition")
    assert _row(table, "first", "uniform-frames-1h-32f-448p")[0] == "0.1"
    assert _row(table, "first", "uniform-frames-10h-32f-448p")[0] == "0.1"
    [sentence] = [s for s in summary.omitted if s.startswith("Accuracy against haystack hours")]
    assert "asked for 1 and 10 h, but every haystack built holds 0.1 h" in sentence
    [accuracy] = [s for s in figure_specs(load_records([directory])) if isinstance(s, BarFigure)][
        :1
    ]
    labels = [group.label for group in accuracy.groups]
    assert labels == [
        f"uniform-frames-32f-448p · 0.1{NBSP}h{NBSP}(1{NBSP}h{NBSP}asked)",
        f"uniform-frames-32f-448p · 0.1{NBSP}h{NBSP}(10{NBSP}h{NBSP}asked)",
    ]
    provenance = _section(summary.markdown.read_text(), "Provenance")
    assert "| condition uniform-frames-10h-32f-448p | 10 h asked, 0.1 h built |" in provenance


def _twins(pair: str) -> list[dict[str, Any]]:
    return RETRIEVED


def _other(pair: str) -> list[dict[str, Any]]:
    """bm25's spans: the same as the twins' except on p4."""
    return RETRIEVED if pair != "p4" else RETRIEVED[:1]


def test_retrievers_with_the_same_spans_for_every_pair_are_named_as_one(tmp_path: Path) -> None:
    lines = judgment_lines("mixed", "uniform", "frames", 1, pick_first)
    for retriever, spans in (("text", _twins), ("multimodal", _twins), ("bm25", _other)):
        lines += judgment_lines(
            "mixed", "retrieved", "frames", 1, pick_right, retriever=retriever, spans=spans
        )
    directory = write_evaluation(tmp_path / "eval", lines)
    markdown = write_report([directory], tmp_path / "out").markdown.read_text()
    recall = _section(markdown, "Retriever recall of the gold evidence")
    sentence = (
        "multimodal and text returned the same ranked spans for every one of the 4 pairs at 1 h "
        "asked: their recall, and the accuracy of judges shown their spans, are one "
        "measurement, not two."
    )
    assert sentence in recall
    assert _row(recall, "text", "1", "1", "0.5")[-1] == "multimodal"
    assert _row(recall, "multimodal", "1", "1", "0.5")[-1] == "text"
    assert _row(recall, "bm25", "1", "1", "0.5")[-1] == "—"  # p4 differs
    specs = {s.title: s for s in figure_specs(load_records([directory]))}
    compared = specs["Retrieved against uniform frames"]
    assert isinstance(compared, BarFigure)
    assert [b.series for b in compared.groups[0].bars] == [
        "uniform",
        "retrieved: bm25",
        "retrieved: multimodal = text",  # one bar for the two
    ]
    recall_figure = specs["Retriever recall@k at tIoU ≥ 0.5"]
    assert isinstance(recall_figure, LineFigure)
    assert [s.label for s in recall_figure.series] == ["bm25 · 1 h", "multimodal = text · 1 h"]


def test_absent_data_gives_a_sentence_instead_of_a_figure(tmp_path: Path) -> None:
    """One judge at one length, uniform frames only: four figures have nothing to draw."""
    judge = "<img src=x onerror=alert(1)> & co_1 %"
    directory = write_evaluation(
        tmp_path / "eval", judgment_lines(judge, "uniform", "frames+transcript", 1, _mixed)
    )
    summary = write_report([directory], tmp_path / "out")
    assert summary.figures == (
        "Accuracy by condition",
        "Position consistency across the answer swap",
        "Accuracy per domain",
    )
    assert [s.split(":")[0] for s in summary.omitted] == [
        "Accuracy against haystack hours",
        "Retrieved against uniform frames",
        "Modality ablation",
        "Retriever recall@k at tIoU ≥ 0.5",
        "Retriever recall against haystack hours",
        "Difficulty-gate accuracy by rating gap",
    ]
    page = summary.html.read_text()
    assert page.count("<img ") == 3
    assert page.count('<p class="no-figure">') == 6
    assert "more than one haystack length" in page
    assert "<img src=x" not in page  # the judge's name is text, escaped everywhere
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; co_1 %" in page
    table = _section(summary.markdown.read_text(), "Judges by condition")
    assert _row(table, judge, U1)[2:4] == ["0.750 [0.500, 1.000]", "0.750 [0.500, 1.000]"]
    tex = (tmp_path / "out" / "tables" / "judges-by-condition.tex").read_text()
    assert r"<img src=x onerror=alert(1)> \& co\_1 \%" in tex
    rows = list(
        csv.reader(io.StringIO((tmp_path / "out/tables/judges-by-condition.csv").read_text()))
    )
    assert rows[1][0] == judge  # quoted by the CSV writer, read back as written


def test_a_verdict_recorded_twice_counts_once_and_a_clash_raises(
    full_eval: list[Path], tmp_path: Path
) -> None:
    assert len(load_records([*full_eval, full_eval[0]])) == 8 * 7  # the repeat adds nothing

    lines = judgment_lines("first", "uniform", "frames+transcript", 1, pick_first)
    clash = json.loads(lines[0])
    clash["picked"], clash["verdict"] = "second", "B"
    directory = write_evaluation(tmp_path / "clash", [*lines, json.dumps(clash)])
    with pytest.raises(ReportError, match=r"judged pair 'p1' .* differently at .*:1"):
        write_report([directory], tmp_path / "out2")


def test_missing_and_malformed_judgments_raise_report_errors(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"has no judgments\.jsonl"):
        write_report([tmp_path / "nowhere"], tmp_path / "out")
    directory = write_evaluation(tmp_path / "bad", ['{"pair_id": "p1"'])
    with pytest.raises(ReportError, match=r"judgments.jsonl:1: not JSON"):
        write_report([directory], tmp_path / "out")
    record = json.loads(judgment_lines("first", "uniform", "frames", 1, pick_first)[0])
    del record["condition_id"]
    directory = write_evaluation(tmp_path / "missing", [json.dumps(record)])
    with pytest.raises(ReportError, match="no 'condition_id' field"):
        write_report([directory], tmp_path / "out")
    good = judgment_lines("first", "uniform", "frames", 1, pick_first)
    directory = write_evaluation(tmp_path / "torn-meta", good)
    (directory / "evaluation.json").write_text('{"evaluation_id": ')
    with pytest.raises(ReportError, match=r"evaluation\.json is not JSON"):
        write_report([directory], tmp_path / "out")


# A line exactly as `eval` wrote it before the record had one type (keys sorted, the default
# resolution of 360 left out of the condition id): the report must go on reading such files.
OLD_LINE = (
    '{"call_key": "8f3c", "condition": {"frames": "retrieved", "hours": 1.0, "modality": '
    '"frames+transcript", "n_frames": 32, "resolution": 360, "retriever": "bm25", '
    '"thinking_budget": null}, "condition_id": "retrieved-bm25-frames+transcript-1h-32f", '
    '"domain": "cooking", "gap": 1, "gold_spans": [{"end_s": 10.0, "start_s": 0.0, "video_id": '
    '"v1"}], "judge": "offline-frames", "length_hours": 0.052, "order": "chosen_first", '
    '"pair_id": "p1", "picked": "first", "playlist_id": "PL-A", "raw_output": '
    '"{\\"choice\\":\\"A\\",\\"reason\\":\\"same\\"}", "retrieved_spans": '
    '[{"end_s": 12.0, "score": 0.25, "start_s": 2.0, "video_id": "v1"}, {"end_s": 5.0, '
    '"score": 0.75, "start_s": 0.0, "video_id": "v2"}], "seed": 1234, "verdict": "A"}'
)


def test_a_judgments_file_written_before_is_read_and_named_by_the_one_label(
    tmp_path: Path,
) -> None:
    from policies.judging import JudgmentRecord, Span

    record = JudgmentRecord.from_line(OLD_LINE)
    assert record.to_line() == OLD_LINE  # nothing lost or renamed
    assert record.condition.resolution == 360
    assert record.condition_id == record.condition.label()
    assert record.ranked == (Span(0.0, 5.0, "v2"), Span(2.0, 12.0, "v1"))  # best score first
    assert record.judgment.correct
    summary = write_report([write_evaluation(tmp_path / "old", [OLD_LINE])], tmp_path / "out")
    markdown = summary.markdown.read_text()
    table = _section(markdown, "Judges by condition")
    row = _row(table, "offline-frames", "retrieved-bm25-frames+transcript-1h-32f")
    assert row[0] == "0.052"  # the hours built, not the 1 h asked
    assert row[-3:] == ["1", "0", "—"]
    shown = _section(markdown, "What the judges were shown")
    # Written before judgments said what they were shown: the table says so, it invents nothing.
    assert _row(shown, "offline-frames", "retrieved-bm25-frames+transcript-1h-32f") == [
        "0 / 1", "—", "—", "—", "—", "—"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"condition_id": "uniform-frames+transcript-1h-32f"}, r"labelled 'retrieved-bm25-"),
        ({"gap": "1"}, r"'gap' must be an integer, got '1'"),
        ({"verdict": "B"}, r"verdict 'B' but picked 'first'"),
        ({"condition": {"frames": "sparse"}}, r"has no 'retriever'|frame sampling 'sparse'"),
        ({"gold_spans": [{"video_id": "v1", "start_s": 5.0, "end_s": 5.0}]}, r"bad span"),
        ({"length_hours": float("nan")}, r"'length_hours' must be a finite number"),
    ],
)
def test_a_record_that_breaks_the_shape_is_refused_with_its_line_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    record = json.loads(OLD_LINE)
    for key, value in change.items():
        record[key] = {**record[key], **value} if key == "condition" else value
    directory = write_evaluation(tmp_path / "bad", [json.dumps(record)])
    with pytest.raises(ReportError, match=r"judgments\.jsonl:1: .*" + message):
        write_report([directory], tmp_path / "out")


def test_without_the_log_the_provenance_says_what_it_does_not_know(tmp_path: Path) -> None:
    meta = {
        "evaluation_id": "e1",
        "benchmark_sha256": "ab" * 32,
        "started": "2026-01-02T03:04:05+00:00",
    }
    lines = judgment_lines("offline-first", "uniform", "frames", 1, pick_first) + judgment_lines(
        "gpt-5.4", "uniform", "frames", 1, pick_right
    )
    directory = write_evaluation(tmp_path / "eval", lines, meta)
    summary = write_report([directory], tmp_path / "out")
    assert summary.source == "unknown"  # gpt-5.4 may have been live or the offline provider
    provenance = _section(summary.markdown.read_text(), "Provenance")
    assert f"| benchmark of {directory} | sha256 {'ab' * 32} (of pairs.jsonl) |" in provenance
    assert f"| evaluation {directory} | id e1 |" in provenance
    assert "| judge offline-first | offline provider; answered as not in the log read |" in (
        provenance
    )
    assert "| judge gpt-5.4 | not known; answered as not in the log read |" in provenance
    assert "Whether gpt-5.4 answered live or through the offline provider is not known" in (
        provenance
    )
    assert f"| evaluation started ({directory}) | 2026-01-02 03:04:05 UTC |" in provenance
    assert "| first judgment |" not in provenance  # no log, no call times
    assert f"| code version (of the report) | {code_version()} |" in provenance
    assert "| log | not read (no workspace given) |" in provenance
    assert "percentile bootstraps over 2000 resamples" in provenance


def _answered(key: str, model: str, *, offline: bool, provider: str | None) -> CallRecorded:
    """A judgment call as the evaluation's log records it, answered as ``model``."""
    response = {"kind": "response", "parts": [], "model_name": model, "provider_name": provider}
    return CallRecorded(
        call_id=f"{key}:1",
        key=key,
        role="pair_judge",
        model="gpt-5.4",
        gate="evaluation",
        response=response,
        cost_micros=0 if offline else 120,
        offline=offline,
    )


@pytest.mark.parametrize(
    ("offline_pairs", "source", "mode"),
    [
        (set(), "live", "live"),
        ({"p4"}, "mixed", "partly offline provider, partly live"),
    ],
)
def test_who_answered_is_read_from_the_evaluations_log(
    tmp_path: Path, offline_pairs: set[str], source: str, mode: str
) -> None:
    """A live judge's provider id comes from its recorded responses; a judge some of whose
    calls the offline provider answered is called mixed, and the report is labelled."""
    lines = judgment_lines("gpt-5.4", "uniform", "frames", 1, pick_right)
    directory = write_evaluation(tmp_path / "eval", lines, {"evaluation_id": "e1"})
    events = open_event_store(tmp_path / "events.db")
    try:
        for line in lines:
            record = json.loads(line)
            offline = record["pair_id"] in offline_pairs
            answer = _answered(
                record["call_key"],
                "offline:gpt-5.4" if offline else "gpt-5.4-2026-03-05",
                offline=offline,
                provider=None if offline else "openai",
            )
            events.append("eval-e1", [answer])
        summary = write_report([directory], tmp_path / "out", events=events)
    finally:
        events.close()
    assert summary.source == source
    markdown = summary.markdown.read_text()
    provenance = _section(markdown, "Provenance")
    who = (
        "openai:gpt-5.4-2026-03-05"
        if source == "live"
        else "offline:gpt-5.4, openai:gpt-5.4-2026-03-05"
    )
    assert f"| judge gpt-5.4 | {mode}; answered as {who} |" in provenance
    assert "| first judgment |" in provenance
    assert "the calls of 8 of 8 judgments are in it" in provenance
    table = _section(markdown, "Judges by condition")
    assert _row(table, "gpt-5.4", "uniform-frames-1h-32f-448p")[1] == who
    tex = (tmp_path / "out" / "tables" / "judges-by-condition.tex").read_text()
    assert ("not evidence of model quality" in tex) == (source == "mixed")


# --- the demo's report folder ----------------------------------------------------------------

DEMO_CONDITIONS = (
    "uniform::frames+transcript:1h:8",
    "uniform::frames+transcript:10h:8",
    "retrieved:bm25:frames+transcript:1h:8",
    "retrieved:text:frames+transcript:1h:8",
    "retrieved:multimodal:frames+transcript:1h:8",
)
DEMO_JUDGES = ("offline-first", "offline-frames")


@dataclass(frozen=True)
class DemoReport:
    """A benchmark curated from the demo workspace, evaluated, and reported by the CLI."""

    home: Path
    bench: Path
    eval_dir: Path
    out: Path
    output: str


@pytest.fixture(scope="module")
def demo_report(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> DemoReport:
    root = tmp_path_factory.mktemp("report")
    home = copy_workspace(demo_home, root / "ws")
    with App(load_settings(home)) as app:
        curated = runs.curate(app, budget_usd=None, max_seeds=3)
        runs.export(app, root / "bench", curated.run_id)
        runs.evaluate(app, root / "bench", list(DEMO_JUDGES), root / "eval", list(DEMO_CONDITIONS))
    out = root / "report"
    result = CliRunner().invoke(
        cli_app, ["report", str(root / "eval"), "--out", str(out), "--home", str(home)]
    )
    assert result.exit_code == 0, result.output
    return DemoReport(home, root / "bench", root / "eval", out, result.output)


TABLES = (
    "provenance",
    "judges-by-condition",
    "shown",
    "accuracy-per-domain",
    "accuracy-per-gap",
    "modality-ablation",
    "retrieved-vs-uniform",
    "retriever-recall",
    "table1-1h",
    "leaderboard",
    "recall-vs-hours",
    "gate-accuracy-by-gap",
)


def test_the_demo_report_folder_holds_figures_tables_and_the_pages(
    demo_report: DemoReport,
) -> None:
    out = demo_report.out
    markdown, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    pngs = sorted((out / "figures").glob("*.png"))
    assert pngs, "no figure was drawn"
    assert sorted(p.stem for p in (out / "figures").glob("*.pdf")) == [p.stem for p in pngs]
    for png in pngs:
        name = png.relative_to(out).as_posix()
        assert f"]({name})" in markdown
        assert f'<img src="{name}"' in page
        assert f"({png.with_suffix('.pdf').relative_to(out).as_posix()})" in markdown
        width, height = _png_size(png)
        assert width > 300
        assert height > 200
        assert png.with_suffix(".pdf").read_bytes().startswith(b"%PDF-")
    for slug in TABLES:
        assert f"(tables/{slug}.csv)" in markdown
        assert f"(tables/{slug}.tex)" in markdown
        assert f'href="tables/{slug}.csv"' in page
        assert f'href="tables/{slug}.tex"' in page
        rows = list(csv.reader(io.StringIO((out / "tables" / f"{slug}.csv").read_text())))
        assert rows, slug
        assert all(len(r) == len(rows[0]) for r in rows), slug
        tex = (out / "tables" / f"{slug}.tex").read_text()
        _check_latex(tex, slug)
    assert "report.html" in demo_report.output.replace("\n", "")  # rich wraps long paths
    assert "(offline)" in demo_report.output


def _check_latex(tex: str, slug: str) -> None:
    """A booktabs table whose rows all have the header's number of cells, braces balanced and
    no special character left bare (a bare ``_`` or ``%`` would break or cut the line)."""
    for rule in ("\\toprule", "\\midrule", "\\bottomrule"):
        assert rule in tex, slug
    body = tex[tex.index("\\toprule") : tex.index("\\bottomrule")]
    rows = [line for line in body.splitlines() if line.endswith("\\\\")]
    header, *rest = [len(re.split(r"(?<!\\)&", row)) for row in rows]
    spans = [int(n) for n in re.findall(r"\\multicolumn\{(\d+)\}", body)]
    if spans:  # an empty table: its header and one line that spans it
        assert spans == [header], slug
    else:
        assert set(rest) == {header}, f"{slug}: a header of {header} cells, rows of {set(rest)}"
    assert tex.count("{") - tex.count("\\{") == tex.count("}") - tex.count("\\}"), slug
    assert not re.search(r"(?<!\\)[_%#]", tex.split("\n", 1)[1]), slug  # past the % comment


def _csv_rows(out: Path, slug: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((out / "tables" / f"{slug}.csv").read_text())))


def test_every_accuracy_has_its_interval_in_the_tables(demo_report: DemoReport) -> None:
    rows = _csv_rows(demo_report.out, "judges-by-condition")
    records = load_records([demo_report.eval_dir])
    assert len(rows) == len(DEMO_JUDGES) * len(DEMO_CONDITIONS)
    playlists = {r.playlist_id for r in records}
    for row in rows:
        for name in ("accuracy", "swap-averaged"):
            value, low, high = (float(row[f"{name}{s}"]) for s in ("", " 95% low", " 95% high"))
            assert low <= value <= high, row
        mine = [r for r in records if (r.judge, r.condition_id) == (row["judge"], row["condition"])]
        scores = [
            1.0 if r.judgment.correct else 0.5 if not r.judgment.answered else 0.0 for r in mine
        ]
        assert float(row["accuracy"]) == pytest.approx(sum(scores) / len(scores))
        assert row["haystack h (built)"] == f"{mine[0].length_hours:.3g}"
        assert row["answered by"] == f"offline:{row['judge']}"
    assert len(playlists) >= 2, "the demo's pairs should span playlists for the intervals"


def test_the_provenance_names_the_benchmark_judges_conditions_dates_and_code(
    demo_report: DemoReport,
) -> None:
    markdown = (demo_report.out / "report.md").read_text()
    provenance = _section(markdown, "Provenance")
    sha = hashlib.sha256((demo_report.bench / "pairs.jsonl").read_bytes()).hexdigest()
    assert json.loads((demo_report.bench / "benchmark.json").read_text())["content_sha256"] == sha
    assert f"sha256 {sha} (of pairs.jsonl)" in provenance
    for judge in DEMO_JUDGES:
        assert f"| judge {judge} | offline provider; answered as offline:{judge} |" in provenance
    records = load_records([demo_report.eval_dir])
    built = {r.condition_id: r.length_hours for r in records}
    assert set(built) == {parse_condition(text).label() for text in DEMO_CONDITIONS}
    for condition_id, hours in built.items():
        asked = next(r.condition.hours for r in records if r.condition_id == condition_id)
        assert f"| condition {condition_id} | {asked:g} h asked, {hours:.3g} h built |" in (
            provenance
        )
    for row in ("first judgment", "last judgment", "report written", "evaluation started"):
        assert re.search(rf"\| {row}[^|]* \| \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC \|", provenance)
    assert f"| code version (of the report) | {code_version()} |" in provenance
    assert (
        f"| log | read from {demo_report.home / 'playlisteval.db'}; the calls of "
        f"{len(records)} of {len(records)} judgments are in it |"
    ) in provenance
    assert code_version() == _expected_code_version()


def _expected_code_version() -> str:
    """What the report should call this checkout: git's description, else the version."""
    root = Path(__file__).resolve().parent.parent
    if (root / ".git").exists():
        described = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--tags"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if described:
            return f"git {described}"
    import importlib.metadata

    return f"playlisteval {importlib.metadata.version('playlisteval')}"


def test_an_offline_evaluation_says_so_on_every_page_and_caption(demo_report: DemoReport) -> None:
    out = demo_report.out
    assert "**Offline evaluation. " + OFFLINE_NOTE + "**" in (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert f'<p class="offline">Offline evaluation. {OFFLINE_NOTE}</p>' in page
    for tex in (out / "tables").glob("*.tex"):
        assert "not evidence of model quality" in tex.read_text(), tex.name


def test_retrievers_that_coincide_in_the_demo_are_named_beside_their_recall(
    demo_report: DemoReport,
) -> None:
    """Whatever the demo's embedder does: the sentence is there exactly when two retrievers
    returned the same spans for every pair."""
    records = load_records([demo_report.eval_dir])
    spans: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.condition.retriever:
            spans.setdefault(r.condition.retriever, {})[r.pair_id] = r.ranked
    same = spans["text"] == spans["multimodal"]
    recall = _section((demo_report.out / "report.md").read_text(), "Retriever recall")
    said = "multimodal and text returned the same ranked spans for every one of the"
    assert (said in recall) == same
    assert (spans["bm25"] == spans["text"]) == ("bm25 and" in recall)


def test_the_demo_figures_are_legible(demo_report: DemoReport) -> None:
    with App(load_settings(demo_report.home)) as app:
        specs = figure_specs(load_records([demo_report.eval_dir]), app.events)
    assert {s.slug for s in specs} == {p.stem for p in (demo_report.out / "figures").glob("*.png")}
    assert "gate-accuracy-by-gap" in {s.slug for s in specs}
    for spec in specs:
        assert text_overlaps(draw(spec, OFFLINE_NOTE)) == [], spec.title


def test_the_demo_gate_table_holds_the_gates_own_verdicts_by_gap(demo_report: DemoReport) -> None:
    """The difficulty gate judged the demo run's candidate pairs through pair selection; the
    report's Figure 3 table is those verdicts' accuracy per gate judge and gap (ties 0.5)."""
    [run_id] = {json.loads(line)["meta"]["run_id"] for line in _lines(demo_report.bench)}
    with App(load_settings(demo_report.home)) as app:
        events = [s.event() for s in app.events.read_stream(pairs_stream(run_id))]
    gaps = {
        e.pair_id: e.chosen_rating - e.rejected_rating
        for e in events
        if isinstance(e, PairCandidate)
    }
    last = {(e.pair_id, e.judge, e.order): e for e in events if isinstance(e, PairJudged)}
    scores: dict[tuple[str, int], list[float]] = {}
    for (pair, judge, order), verdict in last.items():
        preferred = "A" if order == "chosen_first" else "B"
        score = 0.5 if verdict.choice in ("tie", "invalid") else float(verdict.choice == preferred)
        scores.setdefault((judge, gaps[pair]), []).append(score)
    assert scores, "the demo's gate judged no pair"
    rows = {r["gate judge"]: r for r in _csv_rows(demo_report.out, "gate-accuracy-by-gap")}
    # The demo's gate judges are the offline harness standing in for the models: named so.
    assert set(rows) == {stand_in_name(judge) for judge, _ in scores}
    for (judge, gap), values in scores.items():
        row = rows[stand_in_name(judge)]
        assert float(row[f"gap {gap}"]) == pytest.approx(sum(values) / len(values))
        assert row[f"gap {gap} N"] == str(len(values))


def _lines(bench: Path) -> list[str]:
    return [line for line in (bench / "pairs.jsonl").read_text().splitlines() if line.strip()]


def test_the_report_command_writes_the_folder_and_says_where(tmp_path: Path) -> None:
    run = write_evaluation(
        tmp_path / "eval", judgment_lines("first", "uniform", "none", 1.0, pick_first)
    )
    result = CliRunner().invoke(cli_app, ["report", str(run), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rep" / "report.md").is_file()
    assert (tmp_path / "rep" / "report.html").is_file()
    assert (tmp_path / "rep" / "tables" / "judges-by-condition.tex").is_file()
    output = result.output.replace("\n", "")  # rich wraps long paths
    assert "report.html" in output
    assert "(unknown)" in output  # no workspace here: who answered is not known
    provenance = _section((tmp_path / "rep" / "report.md").read_text(), "Provenance")
    assert "| log | not read: no workspace at " in provenance
    assert not (tmp_path / "home").exists()  # the default workspace was not made
    missing = CliRunner().invoke(cli_app, ["report", str(tmp_path / "nothing")])
    assert missing.exit_code == 2
    assert "error" in missing.output


def test_table1_marks_each_columns_best_in_bold_and_second_underlined_in_every_format() -> None:
    """As the paper prints Table 1: per column and side (retrieved, uniform), the best value in
    bold, the second underlined, ties (at the shown precision) sharing the mark; markup never
    escaped into text, nor text left unescaped."""
    from playlisteval.report.table_format import Column, Table, Versus

    table = Table(
        "table1-1h",
        "Table 1",
        (Column("judge"), Column("cooking", "versus"), Column("overall", "versus")),
        [
            ("judge_a", Versus(0.712, 0.500), Versus(0.60, 0.55)),
            ("judge_b & co", Versus(0.650, 0.635), Versus(0.60, 0.50)),
            ("judge_c", Versus(0.700, None), Versus(0.40, 0.45)),
        ],
        ranked=True,
    )
    markdown = table.markdown()
    assert "| judge_a | **71.2** / <u>50.0</u> | **60.0** / **55.0** |" in markdown
    assert "| judge_b & co | 65.0 / **63.5** | **60.0** / <u>50.0</u> |" in markdown
    assert "| judge_c | <u>70.0</u> / — | <u>40.0</u> / 45.0 |" in markdown
    page = table.html()
    assert "<td><b>71.2</b> / <u>50.0</u></td>" in page
    assert "<td>judge_b &amp; co</td>" in page
    assert "<td><u>70.0</u> / —</td>" in page
    tex = table.latex()
    first = "judge\\_a & \\textbf{71.2} / \\underline{50.0} & \\textbf{60.0} / \\textbf{55.0}"
    assert first + " \\\\" in tex
    assert "judge\\_c & \\underline{70.0} / --- & \\underline{40.0} / 45.0 \\\\" in tex
    _check_latex(tex, "table1-1h")
    unranked = Table(table.slug, table.title, table.columns, table.rows)
    assert "**" not in unranked.markdown()
    assert "<b>" not in unranked.html()
