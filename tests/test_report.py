"""The evaluation report: hand-written judgments → report.md numbers checked by hand, and
report.html opened in headless Debian chromium with the network off, its plots found.

The fixture: four pairs in two playlists (PL-A: p1, p2; PL-B: p3, p4), three in "cooking" and one
in "sports". Judge "first" always picks the first answer. Judge "mixed" at 1 h with uniform frames
gets p1 and p2 right in both orders, picks the first answer on p3 both times and ties on p4; at
10 h it always picks the first answer; with retrieved frames (bm25) it is always right; with
frames only it is always right; with the transcript only it always ties.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from playlisteval.report import ReportError, write_report

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

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

Picker = Callable[[str, str], str | None]  # (pair id, order) -> picked


def _right(pair: str, order: str) -> str | None:
    return "first" if order == "chosen_first" else "second"


def _first(pair: str, order: str) -> str | None:
    return "first"


def _tie(pair: str, order: str) -> str | None:
    return "tie"


def _mixed(pair: str, order: str) -> str | None:
    return {"p1": _right, "p2": _right, "p3": _first, "p4": _tie}[pair](pair, order)


def _condition(frames: str, modality: str, hours: float) -> dict[str, Any]:
    return {
        "frames": frames,
        "retriever": "bm25" if frames == "retrieved" else None,
        "modality": modality,
        "hours": hours,
        "n_frames": 32,
        "thinking_budget": None,
        "resolution": 448,
    }


def _records(judge: str, frames: str, modality: str, hours: float, pick: Picker) -> list[str]:
    condition = _condition(frames, modality, hours)
    retriever = "-bm25" if frames == "retrieved" else ""
    condition_id = f"{frames}{retriever}-{modality}-{hours:g}h-32f-448p"
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
                "retrieved_spans": RETRIEVED if frames == "retrieved" else [],
                "gold_spans": GOLD,
                "seed": 0,
                "domain": domain,
                "gap": gap,
                "playlist_id": playlist,
                "length_hours": hours,
                "call_key": f"{judge}/{condition_id}/{pair}/{order}",
            }
            lines.append(json.dumps(record))
    return lines


def _write_eval(directory: Path, lines: list[str]) -> Path:
    directory.mkdir(parents=True)
    (directory / "judgments.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "evaluation.json").write_text(json.dumps({"judges": [], "conditions": []}))
    return directory


@pytest.fixture
def full_eval(tmp_path: Path) -> list[Path]:
    """Two evaluation directories: the "first" judge in one, the "mixed" judge in the other."""
    first = _records("first", "uniform", "frames+transcript", 1, _first) + _records(
        "first", "uniform", "frames+transcript", 10, _first
    )
    mixed = (
        _records("mixed", "uniform", "frames+transcript", 1, _mixed)
        + _records("mixed", "uniform", "frames+transcript", 10, _first)
        + _records("mixed", "retrieved", "frames+transcript", 1, _right)
        + _records("mixed", "uniform", "frames", 1, _right)
        + _records("mixed", "uniform", "transcript", 1, _tie)
    )
    return [
        _write_eval(tmp_path / "eval-first", first),
        _write_eval(tmp_path / "eval-mixed", mixed),
    ]


def _section(markdown: str, title: str) -> str:
    start = markdown.index(f"## {title}\n")
    end = markdown.find("\n## ", start + 1)
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


def test_table1_gives_the_hand_computed_metrics(full_eval: list[Path], tmp_path: Path) -> None:
    summary = write_report(full_eval, tmp_path / "out")
    assert summary.judgments == 8 * 7
    assert summary.runs == 7
    table = _section(summary.markdown.read_text(), "Judges by condition")
    # accuracy, swap-averaged, consistent, position consistency, position bias, N, pairs, SE
    assert _row(table, "first", U1) == [
        "0.500", "0.500", "0.000", "0.000", "+0.500", "8", "4", "0.000"
    ]  # fmt: skip
    # mixed at 1 h, per judgment (cf, rf): p1 1 1, p2 1 1, p3 1 0, p4 .5 .5 -> 6/8.
    # Pairs: swap-averaged 1 1 .5 .5; consistent 1 1 0 0; position-consistent 1 1 0 1 (tie=tie).
    # Decisive verdicts picking "first": p1 1, p2 1, p3 2 of 6 -> 4/6 - 1/2.
    se = _clustered_se([1, 1, 1, 1, 1, 0, 0.5, 0.5], ["PL-A"] * 4 + ["PL-B"] * 4)
    assert se == pytest.approx(0.25)
    assert _row(table, "mixed", U1) == [
        "0.750", "0.750", "0.500", "0.750", f"{4 / 6 - 0.5:+.3f}", "8", "4", f"{se:.3f}"
    ]  # fmt: skip
    assert _row(table, "mixed", R1) == [
        "1.000", "1.000", "1.000", "1.000", "+0.000", "8", "4", "0.000"
    ]  # fmt: skip
    # Always tie: accuracy 0.5, both orders tie so the pair is position-consistent, and no
    # decisive verdict leaves the position bias undefined.
    assert _row(table, "mixed", "uniform-transcript-1h-32f-448p") == [
        "0.500", "0.500", "0.000", "1.000", "—", "8", "4", "0.000"
    ]  # fmt: skip


def test_strata_modality_paired_test_and_recall(full_eval: list[Path], tmp_path: Path) -> None:
    markdown = write_report(full_eval, tmp_path / "out").markdown.read_text()

    domains = _section(markdown, "Accuracy per domain")
    assert "| judge | condition | cooking | sports | macro |" in domains
    # cooking: p1 1 1, p2 1 1, p3 1 0 -> 5/6; sports: p4 .5 .5.
    assert _row(domains, "mixed", U1) == ["0.833 (N=6)", "0.500 (N=2)", f"{(5 / 6 + 0.5) / 2:.3f}"]
    assert _row(domains, "first", U1) == ["0.500 (N=6)", "0.500 (N=2)", "0.500"]
    gaps = _section(markdown, "Accuracy per rating gap")
    # gap 1: p1 -> 1; gap 2: p2 1 1, p3 1 0, p4 .5 .5 -> 4/6.
    assert _row(gaps, "mixed", U1) == ["1.000 (N=2)", "0.667 (N=6)", f"{(1 + 4 / 6) / 2:.3f}"]

    modality = _section(markdown, "Modality ablation")
    setting = "uniform-1h-32f-448p"  # the one label, as the evaluation names it
    assert _row(modality, "mixed", setting, "frames") == ["1.000", "1.000", "8"]
    assert _row(modality, "mixed", setting, "frames+transcript") == ["0.750", "0.750", "8"]
    assert _row(modality, "mixed", setting, "transcript") == ["0.500", "0.500", "8"]
    assert "| first |" not in modality  # "first" ran under one modality only

    paired = _section(markdown, "Retrieved against uniform frames")
    # Per pair retrieved minus uniform swap-averaged: 0, 0 (PL-A), .5, .5 (PL-B) -> mean .25.
    se = _clustered_se([0, 0, 0.5, 0.5], ["PL-A", "PL-A", "PL-B", "PL-B"])
    z = 0.25 / se
    p = math.erfc(abs(z) / math.sqrt(2))
    # p3 and p4 are consistently right with retrieval only: sign test 2 * (1/2)**2.
    assert _row(paired, "mixed", "bm25") == [
        U1,
        R1,
        "4",
        "+0.250",
        f"{se:.3f}",
        f"{z:+.3f}",
        f"{p:.3g}",
        "2",
        "0",
        "0.5",
    ]
    assert "| first |" not in paired

    recall = _section(markdown, "Retriever recall of the gold evidence")
    # Ranked by score: v1 0-10 (IoU 1 with gold v1), v9, v2 5-15 (IoU 5/15 with gold v2).
    # R@1..10, coverage (10 + 5 of 20 gold seconds), mean best IoU ((1 + 1/3) / 2), N.
    assert _row(recall, "bm25", "1", "0.3") == [
        "0.500", "1.000", "1.000", "1.000", "0.750", f"{(1 + 1 / 3) / 2:.3f}", "4"
    ]  # fmt: skip
    assert _row(recall, "bm25", "1", "0.5") == [
        "0.500", "0.500", "0.500", "0.500", "0.750", "0.667", "4"
    ]  # fmt: skip


def test_every_figure_is_drawn_when_its_data_is_there(
    full_eval: list[Path], tmp_path: Path
) -> None:
    summary = write_report(full_eval, tmp_path / "out")
    assert summary.omitted == ()
    assert summary.figures == FIGURES
    page = summary.html.read_text()
    assert page.count('<svg class="plot"') == len(FIGURES)
    # Accuracy against hours: one line per judge whose condition was run at 1 and 10 hours.
    hours_svg = page[page.index("<title>Accuracy against haystack hours</title>") :]
    hours_svg = hours_svg[: hours_svg.index("</svg>")]
    assert hours_svg.count('class="series"') == 2
    assert "0.750 at 1" in hours_svg
    assert "0.500 at 10" in hours_svg


FIGURES = (
    "Accuracy against haystack hours",
    "Retrieved against uniform frames",
    "Modality ablation",
    "Position consistency across the answer swap",
    "Accuracy per domain",
    "Retriever recall@k at tIoU ≥ 0.5",
)


def test_absent_data_gives_a_sentence_instead_of_a_figure(tmp_path: Path) -> None:
    """One judge at one length, uniform frames only: four charts have nothing to draw."""
    judge = "<img src=x onerror=alert(1)> & co"
    directory = _write_eval(
        tmp_path / "eval", _records(judge, "uniform", "frames+transcript", 1, _mixed)
    )
    summary = write_report([directory], tmp_path / "out")
    assert summary.figures == ("Position consistency across the answer swap", "Accuracy per domain")
    assert [s.split(":")[0] for s in summary.omitted] == [
        "Accuracy against haystack hours",
        "Retrieved against uniform frames",
        "Modality ablation",
        "Retriever recall@k at tIoU ≥ 0.5",
    ]
    page = summary.html.read_text()
    assert page.count('<svg class="plot"') == 2
    assert page.count('<p class="no-figure">') == 4
    assert "more than one haystack length" in page
    assert "<img" not in page  # the judge's name is text, escaped everywhere
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; co" in page
    table = _section(summary.markdown.read_text(), "Judges by condition")
    assert _row(table, judge, U1)[:2] == ["0.750", "0.750"]


def test_a_verdict_recorded_twice_counts_once_and_a_clash_raises(
    full_eval: list[Path], tmp_path: Path
) -> None:
    summary = write_report([*full_eval, full_eval[0]], tmp_path / "out")
    assert summary.judgments == 8 * 7  # the repeated directory adds nothing

    lines = _records("first", "uniform", "frames+transcript", 1, _first)
    clash = json.loads(lines[0])
    clash["picked"], clash["verdict"] = "second", "B"
    directory = _write_eval(tmp_path / "clash", [*lines, json.dumps(clash)])
    with pytest.raises(ReportError, match=r"judged pair 'p1' .* differently at .*:1"):
        write_report([directory], tmp_path / "out2")


def test_missing_and_malformed_judgments_raise_report_errors(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"has no judgments\.jsonl"):
        write_report([tmp_path / "nowhere"], tmp_path / "out")
    directory = _write_eval(tmp_path / "bad", ['{"pair_id": "p1"'])
    with pytest.raises(ReportError, match=r"judgments.jsonl:1: not JSON"):
        write_report([directory], tmp_path / "out")
    record = json.loads(_records("first", "uniform", "frames", 1, _first)[0])
    del record["condition_id"]
    directory = _write_eval(tmp_path / "missing", [json.dumps(record)])
    with pytest.raises(ReportError, match="no 'condition_id' field"):
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
    summary = write_report([_write_eval(tmp_path / "old", [OLD_LINE])], tmp_path / "out")
    table = _section(summary.markdown.read_text(), "Judges by condition")
    assert _row(table, "offline-frames", "retrieved-bm25-frames+transcript-1h-32f")[-3:] == [
        "1",
        "0",
        "—",
    ]


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
    directory = _write_eval(tmp_path / "bad", [json.dumps(record)])
    with pytest.raises(ReportError, match=r"judgments\.jsonl:1: .*" + message):
        write_report([directory], tmp_path / "out")


# --- the page in a real browser --------------------------------------------------------------


@pytest.fixture
def chromium() -> Iterator[Any]:
    """Headless Debian chromium through selenium, its network switched off."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            "needs Debian's chromium and chromium-driver at /usr/bin "
            "(apt-get install chromium chromium-driver)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        yield driver
    finally:
        driver.quit()


def test_report_html_opens_offline_in_chromium_with_its_plots(
    full_eval: list[Path], tmp_path: Path, chromium: Any
) -> None:
    from selenium.webdriver.common.by import By

    summary = write_report(full_eval, tmp_path / "out")
    page = summary.html.read_text()
    # Self-contained: nothing to fetch, no script.
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "url(" not in page
    assert "<script" not in page

    chromium.get(summary.html.resolve().as_uri())
    assert chromium.title == "Judge evaluation report"
    plots = chromium.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert len(plots) == len(FIGURES)
    titles = [
        chromium.execute_script(
            "return arguments[0].querySelector(':scope > title').textContent", p
        )
        for p in plots
    ]
    assert tuple(titles) == FIGURES
    for plot in plots:  # laid out, with marks drawn
        assert plot.size["width"] > 0
        assert plot.size["height"] > 0
        assert plot.find_elements(By.CSS_SELECTOR, "rect.bar, polyline.series")
    bars = chromium.find_elements(By.CSS_SELECTOR, "svg.plot[data-kind='bar'] rect.bar")
    assert bars
    assert all(float(b.get_attribute("height")) >= 0 for b in bars)
    # The page loaded no resource beyond itself (the network is off and nothing was asked for).
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert chromium.find_element(By.TAG_NAME, "h1").text == "Judge evaluation report"


def test_the_report_command_writes_both_files_and_says_where(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from playlisteval.cli import app as cli_app

    run = _write_eval(tmp_path / "eval", _records("first", "uniform", "none", 1.0, _first))
    result = CliRunner().invoke(cli_app, ["report", str(run), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rep" / "report.md").is_file()
    assert (tmp_path / "rep" / "report.html").is_file()
    assert "report.html" in result.output.replace("\n", "")  # rich wraps long paths
    missing = CliRunner().invoke(cli_app, ["report", str(tmp_path / "nothing")])
    assert missing.exit_code == 2
    assert "error" in missing.output
