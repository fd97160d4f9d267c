"""The judgments viewer over a real evaluation: two offline judges of known behaviour and a
judge that answers out of schema, evaluated through the product path on a small benchmark. The
filters pick the groups the records say; a group shows each order's shown frames (thumbnails
decoded from the video), the transcript windows, the raw output, the verdict and the prompt,
rebuilt and checked against the evaluation's log by its request key. Then the same page in
headless chromium (one browser for the module), with screenshots under /tmp."""

from __future__ import annotations

import html
import io
import json
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
import uvicorn
from fastapi.testclient import TestClient
from PIL import Image
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from agents.deps import CallDeps
from agents.evaluation import OFFLINE_JUDGE_PRICES, evaluate, parse_condition
from playlisteval.app import App, offline_models
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from playlisteval.ui import create_app
from playlisteval.ui.benchmark import load_benchmark
from playlisteval.ui.judgments import load_evaluations
from policies.judging import JudgmentRecord
from policies.prices import PriceTable
from store.errors import ConfigError
from tests.test_ui import CELLS, SECRET, as_owner, join, write_benchmark
from tests.workspaces import copy_workspace
from tools.evidence.retrieval import BM25Retriever
from tools.providers.judges import judge_models, stand_in_name

RAMBLER = "rambler-1"  # a judge that answers in prose, never in the verdict schema
# Judged in an offline evaluation, a model that is no offline judge is recorded as a stand-in.
RAMBLER_RECORDED = stand_in_name(RAMBLER)
RAMBLE = "Both answers look plausible; I would lean towards the first one, I think."
RETRIEVED = "retrieved:bm25:frames+transcript:1h:8"
TRANSCRIPT = "uniform::transcript:1h:8"
JUDGES = ("offline-first", "offline-frames", RAMBLER)


def _rambling(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(RAMBLE)])


@dataclass(frozen=True)
class Evaluated:
    """A workspace, a benchmark of three pairs and an evaluation folder of it."""

    home: Path
    bench: Path
    out: Path
    records: list[JudgmentRecord]


@pytest.fixture(scope="module")
def evaluated(
    demo_home: Path, demo_playlist: Path, tmp_path_factory: pytest.TempPathFactory
) -> Evaluated:
    root = tmp_path_factory.mktemp("judgments")
    home = copy_workspace(demo_home, root / "ws")
    # The rambler is a configured model like any other: priced in the workspace's settings.
    settings = home / SETTINGS_FILE
    settings.write_text(
        settings.read_text()
        + f'\n[budget.price_overrides."{RAMBLER}"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n'
    )
    bench = write_benchmark(root / "bench", demo_playlist, CELLS[:3])
    out = root / "eval"
    base = judge_models(offline_models())
    rambler = FunctionModel(_rambling, model_name=RAMBLER)

    def model_for(model_id: str) -> Model:
        return rambler if model_id == RAMBLER else base(model_id)

    with App(load_settings(home)) as app:
        result = anyio.run(
            lambda: evaluate(
                CallDeps(
                    store=app.events,
                    catalog=app.catalog,
                    clips=app.clips(),
                    model_for=model_for,
                    prices=PriceTable.load(
                        overrides={
                            **OFFLINE_JUDGE_PRICES,
                            RAMBLER: {"input_per_mtok": 0.0, "output_per_mtok": 0.0},
                        }
                    ),
                ),
                benchmark_dir=bench,
                judges=JUDGES,
                conditions=[parse_condition(c) for c in (RETRIEVED, TRANSCRIPT)],
                out_dir=out,
                retrievers={"bm25": BM25Retriever(app.catalog)},
                offline=True,
            )
        )
    assert not result.failures, result.failures
    assert len(result.records) == 3 * len(JUDGES) * 2 * 2
    return Evaluated(home=home, bench=bench, out=out, records=result.records)


@pytest.fixture(scope="module")
def opened(evaluated: Evaluated) -> Iterator[App]:
    with App(load_settings(evaluated.home)) as app:
        yield app


@pytest.fixture(scope="module")
def client(evaluated: Evaluated, opened: App) -> TestClient:
    web = create_app(
        opened, evaluated.bench, sample_size=3, secret=SECRET, evaluations=[evaluated.out]
    )
    return as_owner(web)  # the viewer is the owner's: it says which answer was intended


def _answer(record: JudgmentRecord) -> str | None:
    """The answer a verdict names, by the test's own reading of verdict and order."""
    if record.verdict is None:
        return None
    if record.verdict == "tie":
        return "tie"
    first = "chosen" if record.order == "chosen_first" else "rejected"
    second = "rejected" if first == "chosen" else "chosen"
    return first if record.verdict == "A" else second


def _expected(records: list[JudgmentRecord]) -> dict[str, set[tuple[str, str, str]]]:
    groups: dict[tuple[str, str, str], list[JudgmentRecord]] = {}
    for r in records:
        groups.setdefault((r.pair_id, r.judge, r.condition_id), []).append(r)
    return {
        "all": set(groups),
        "wrong": {k for k, rs in groups.items() if any(_answer(r) == "rejected" for r in rs)},
        "inconsistent": {
            k for k, rs in groups.items() if len(rs) == 2 and _answer(rs[0]) != _answer(rs[1])
        },
        "unparseable": {k for k, rs in groups.items() if any(r.verdict is None for r in rs)},
    }


def _rows(page: str) -> set[tuple[str, str, str]]:
    return {
        (html.unescape(p), html.unescape(j), html.unescape(c))
        for p, j, c in re.findall(
            r'<tr class="group[^"]*" data-pair="([^"]*)" data-judge="([^"]*)" '
            r'data-condition="([^"]*)">',
            page,
        )
    }


@pytest.mark.parametrize("which", ["all", "wrong", "inconsistent", "unparseable"])
def test_each_filter_lists_the_groups_the_records_say(
    client: TestClient, evaluated: Evaluated, which: str
) -> None:
    expected = _expected(evaluated.records)[which]
    page = client.get(f"/evaluations/eval?show={which}")
    assert page.status_code == 200
    assert _rows(page.text) == expected
    assert f"({len(expected)})" in page.text
    # The known behaviours behind the sets: the always-first judge flips with the order, the
    # rambler never answers in the schema.
    if which == "inconsistent":
        assert {k for k in expected if k[1] == "offline-first"} == {
            k for k in _expected(evaluated.records)["all"] if k[1] == "offline-first"
        }
    if which == "unparseable":
        assert expected
        assert {k[1] for k in expected} == {RAMBLER_RECORDED}


def test_the_filters_combine_with_a_judge_and_a_condition(
    client: TestClient, evaluated: Evaluated
) -> None:
    label = parse_condition(RETRIEVED).label()
    page = client.get(
        f"/evaluations/eval?show=wrong&judge=offline-first&condition={quote(label)}"
    ).text
    expected = {
        k
        for k in _expected(evaluated.records)["wrong"]
        if k[1] == "offline-first" and k[2] == label
    }
    assert expected
    assert _rows(page) == expected
    assert client.get("/evaluations/eval?show=nonsense").status_code == 404
    assert client.get("/evaluations/other").status_code == 404


def _group_page(client: TestClient, record: JudgmentRecord) -> str:
    response = client.get(
        f"/evaluations/eval/pair/{quote(record.pair_id)}",
        params={"judge": record.judge, "condition": record.condition_id},
    )
    assert response.status_code == 200, response.text
    return response.text


def _section(page: str, order: str) -> str:
    match = re.search(rf'<section class="order" id="order-{order}".*?</section>', page, re.S)
    assert match, f"no section for {order!r}"
    return match.group(0)


def _raw_output(section: str) -> str:
    match = re.search(r'<pre class="raw-output">(.*?)</pre>', section, re.S)
    assert match, "no raw output"
    return html.unescape(match.group(1))


def test_a_group_shows_each_orders_frames_transcript_raw_output_verdict_and_prompt(
    client: TestClient, evaluated: Evaluated
) -> None:
    label = parse_condition(RETRIEVED).label()
    mine = [r for r in evaluated.records if r.judge == "offline-frames" and r.condition_id == label]
    pair_id = mine[0].pair_id
    bench = load_benchmark(evaluated.bench)
    pair = bench.pairs[pair_id]
    page = _group_page(client, mine[0])
    for record in (r for r in mine if r.pair_id == pair_id):
        section = _section(page, record.order)
        assert record.shown is not None
        assert record.shown.frames > 0
        shown = re.findall(r'<figure class="frame" data-video="([^"]*)" data-t="([^"]*)">', section)
        assert [(v, float(t)) for v, t in shown] == list(record.shown.frame_times)
        assert _raw_output(section) == record.raw_output
        assert f'class="verdict-letter">{record.verdict}<' in section
        assert f'class="verdict-answer {_answer(record)}">' in section
        assert "Transcript shown" in section  # frames+transcript: the windows it was given
        # The prompt is the request the judge was sent: its key is the record's call key.
        assert 'class="prompt-status matches"' in section
        assert record.call_key[:12] in section
        prompt = html.unescape(re.search(r'<pre class="prompt-text">(.*?)</pre>', section, re.S)[1])
        first, second = (
            (pair.chosen, pair.rejected)
            if record.order == "chosen_first"
            else (pair.rejected, pair.chosen)
        )
        assert f"## Answer A\n{first}" in prompt
        assert f"## Answer B\n{second}" in prompt
        assert pair.prompt in prompt


def test_an_unparseable_judgment_shows_its_raw_output_and_the_prompt_it_was_sent(
    client: TestClient, evaluated: Evaluated
) -> None:
    record = next(r for r in evaluated.records if r.judge == RAMBLER_RECORDED)
    section = _section(_group_page(client, record), record.order)
    assert record.verdict is None
    assert _raw_output(section) == RAMBLE
    assert 'class="verdict-answer unparseable"' in section
    assert 'class="prompt-status matches"' in section


def test_a_prompt_the_log_does_not_hold_is_shown_as_rebuilt_and_not_matching(
    evaluated: Evaluated, opened: App, tmp_path: Path
) -> None:
    """An evaluation folder whose id names no stream in this workspace (copied from elsewhere):
    the prompt is rebuilt all the same, and the page says the log holds no such call."""
    copy = tmp_path / "copied-eval"
    shutil.copytree(evaluated.out, copy)
    info = json.loads((copy / "evaluation.json").read_text())
    info["evaluation_id"] = "0" * 16
    (copy / "evaluation.json").write_text(json.dumps(info))
    web = create_app(opened, evaluated.bench, sample_size=3, secret=SECRET, evaluations=[copy])
    record = next(r for r in evaluated.records if r.judge == "offline-frames")
    page = as_owner(web).get(
        f"/evaluations/copied-eval/pair/{quote(record.pair_id)}",
        params={"judge": record.judge, "condition": record.condition_id},
    )
    assert page.status_code == 200
    section = _section(page.text, record.order)
    assert 'class="prompt-status differs"' in section
    assert "holds no call with this request" in section
    assert "## Answer A" in section  # rebuilt, and shown


def test_judgments_the_offline_provider_answered_are_labelled_a_harness_on_every_page(
    client: TestClient, evaluated: Evaluated
) -> None:
    """The fixture evaluated offline: every recorded call says so, and every page of the viewer
    says those verdicts are a harness's."""
    total = len(evaluated.records)
    assert f"{total} offline" in client.get("/evaluations").text
    page = client.get("/evaluations/eval").text
    assert f"OFFLINE HARNESS — {total} of these {total} judgments" in page
    assert page.count('<span class="flag flag-offline">offline</span>') == len(_rows(page))
    record = evaluated.records[0]
    section = _section(_group_page(client, record), record.order)
    assert "OFFLINE HARNESS — answered by the offline provider" in section


def test_thumbnails_are_the_shown_frames_and_nothing_else(
    client: TestClient, evaluated: Evaluated
) -> None:
    record = next(r for r in evaluated.records if r.shown and r.shown.frame_times)
    assert record.shown is not None
    video, t = record.shown.frame_times[0]
    image = client.get(f"/evaluations/eval/frame/{video}", params={"t": repr(t)})
    assert image.status_code == 200
    assert image.headers["content-type"] == "image/jpeg"
    assert Image.open(io.BytesIO(image.content)).size[1] == 90
    assert (
        client.get(f"/evaluations/eval/frame/{video}", params={"t": t + 0.123}).status_code == 404
    )
    assert client.get("/evaluations/eval/frame/nope", params={"t": repr(t)}).status_code == 404


def test_an_evaluation_of_another_benchmark_is_refused_in_one_line(
    evaluated: Evaluated, demo_playlist: Path, tmp_path: Path
) -> None:
    other = write_benchmark(tmp_path / "other", demo_playlist, CELLS[3:])
    with pytest.raises(ConfigError, match="evaluates another benchmark"):
        load_evaluations([evaluated.out], load_benchmark(other))
    result = CliRunner().invoke(
        cli_app,
        ["ui", str(other), "--evaluation", str(evaluated.out), "--home", str(evaluated.home)],
    )
    assert result.exit_code == 2
    assert "evaluates another benchmark" in " ".join(result.output.split())
    assert "serving" not in result.output  # refused before anything is served
    assert "Traceback" not in result.output
    missing = CliRunner().invoke(
        cli_app,
        ["ui", str(other), "--evaluation", str(tmp_path), "--home", str(evaluated.home)],
    )
    assert missing.exit_code == 2
    assert "holds no evaluation.json" in " ".join(missing.output.split())


# -- in a browser --------------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path("/tmp/playlisteval-screenshots")


@pytest.fixture(scope="module")
def served(client: TestClient) -> Iterator[str]:
    """The same UI served by uvicorn on a free loopback port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(uvicorn.Config(client.app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:  # readiness wait, not a timing assertion
        assert thread.is_alive(), "uvicorn stopped while starting"
        assert time.monotonic() < deadline, "uvicorn did not start within 30 s"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1366,768")
    driver = webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_viewer_in_chromium_filters_and_shows_a_record(
    served: str, browser: Any, evaluated: Evaluated, client: TestClient
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    SCREENSHOTS.mkdir(exist_ok=True)
    expected = _expected(evaluated.records)
    browser.get(served + client.app.state.owner_link)  # the viewer is the owner's
    browser.get(served + "/evaluations")
    browser.save_screenshot(str(SCREENSHOTS / "evaluations.png"))
    browser.find_element(By.LINK_TEXT, "eval").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.group")
    assert len(rows) == len(expected["all"])
    browser.save_screenshot(str(SCREENSHOTS / "judgments-all.png"))
    for which in ("inconsistent", "unparseable", "wrong"):
        browser.find_element(By.ID, f"filter-{which}").click()
        WebDriverWait(browser, 10).until(lambda d, w=which: f"show={w}" in d.current_url)
        rows = browser.find_elements(By.CSS_SELECTOR, "tr.group")
        shown = {
            (
                r.get_attribute("data-pair"),
                r.get_attribute("data-judge"),
                r.get_attribute("data-condition"),
            )
            for r in rows
        }
        assert shown == expected[which], which
        assert all(which in (r.get_attribute("class") or "").split() for r in rows)
    # Open a frames+transcript group of the frame reader from the "all" list.
    browser.find_element(By.ID, "filter-all").click()
    label = parse_condition(RETRIEVED).label()
    row = browser.find_element(
        By.CSS_SELECTOR, f'tr.group[data-judge="offline-frames"][data-condition="{label}"]'
    )
    pair_id = row.get_attribute("data-pair")
    row.find_element(By.CSS_SELECTOR, "a.open").click()
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.order"))
    record = next(
        r
        for r in evaluated.records
        if (r.pair_id, r.judge, r.condition_id, r.order)
        == (pair_id, "offline-frames", label, "chosen_first")
    )
    assert record.shown is not None
    section = browser.find_element(By.ID, "order-chosen_first")
    images = section.find_elements(By.CSS_SELECTOR, "figure.frame img")
    assert len(images) == record.shown.frames
    for image in images:
        browser.execute_script("arguments[0].scrollIntoView()", image)
        WebDriverWait(browser, 20).until(
            lambda d, i=image: (
                d.execute_script("return arguments[0].complete && arguments[0].naturalHeight", i)
                == 90
            )
        )
    assert section.find_element(By.CSS_SELECTOR, "pre.raw-output").text == record.raw_output
    assert section.find_elements(By.CSS_SELECTOR, "details.transcript p.chunk")
    assert "matches" in section.find_element(By.CSS_SELECTOR, ".prompt-status").get_attribute(
        "class"
    )
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(SCREENSHOTS / "judgment.png"))
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1366, min(int(height) + 200, 6000))
    browser.save_screenshot(str(SCREENSHOTS / "judgment-full.png"))
    browser.set_window_size(1366, 768)


@pytest.mark.parametrize("who", ["nobody", "an annotator who joined", "a forged owner cookie"])
def test_every_judgments_route_refuses_anyone_but_the_owner(
    evaluated: Evaluated, opened: App, who: str
) -> None:
    """A judgment says which answer was intended: neither an anonymous browser nor an invited
    annotator may read it, on any route of the viewer (the list, an evaluation, a judgment, a
    frame)."""
    from playlisteval.ui.benchmark import load_benchmark
    from playlisteval.ui.signing import owner_cookie_name

    web = create_app(
        opened,
        evaluated.bench,
        sample_size=3,
        secret=SECRET,
        evaluations=[evaluated.out],
        invites=["alice"],
    )
    browser = TestClient(web, follow_redirects=False)
    if who == "an annotator who joined":
        join(browser, "alice")
    elif who == "a forged owner cookie":
        browser.cookies.set(owner_cookie_name(load_benchmark(evaluated.bench)), "0" * 64)
    record = evaluated.records[0]
    where = [
        ("/evaluations", {}),
        (f"/evaluations/{evaluated.out.name}", {}),
        (
            f"/evaluations/{evaluated.out.name}/pair/{quote(record.pair_id)}",
            {"judge": record.judge, "condition": record.condition_id},
        ),
        (f"/evaluations/{evaluated.out.name}/frame/any-video", {"t": "1.0"}),
    ]
    for path, params in where:
        refused = browser.get(path, params=params)
        assert refused.status_code == 403, (path, refused.text[:300])
        assert "owner link" in refused.text
        assert "Chosen answer" not in refused.text
        assert "Verdict" not in refused.text


def _rows_a_page_reads(
    home: Path, evaluated: Evaluated, record: JudgmentRecord, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """The stored events one judgment page reads from the event store of a UI just started on
    ``home`` (its startup, which indexes each evaluation's log once, not counted), and the
    page. The store is the real SQLite one; its two read methods are only counted."""
    with App(load_settings(home)) as app:
        web = create_app(
            app, evaluated.bench, sample_size=3, secret=SECRET, evaluations=[evaluated.out]
        )
        client = as_owner(web)
        store = app.events
        read = {"rows": 0}
        real_stream, real_all = store.read_stream, store.read_all

        def read_stream(*args: Any, **kwargs: Any) -> Any:
            rows = real_stream(*args, **kwargs)
            read["rows"] += len(rows)
            return rows

        def read_all(*args: Any, **kwargs: Any) -> Any:
            rows = real_all(*args, **kwargs)
            read["rows"] += len(rows)
            return rows

        monkeypatch.setattr(store, "read_stream", read_stream)
        monkeypatch.setattr(store, "read_all", read_all)
        page = _group_page(client, record)
        monkeypatch.undo()
        return read["rows"], page


def test_a_judgment_page_reads_the_same_rows_however_long_the_evaluations_log(
    evaluated: Evaluated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: a judgment's page read the whole evaluation log for each order it rebuilt
    (15 s on a long one). Now it reads the recorded calls of its group by their seqs: a log
    grown by a thousand calls makes the page read not one row more."""
    record = next(r for r in evaluated.records if r.judge == "offline-frames")
    small = copy_workspace(evaluated.home, tmp_path / "small")
    grown = copy_workspace(evaluated.home, tmp_path / "grown")
    with App(load_settings(grown)) as app:
        info = json.loads((evaluated.out / "evaluation.json").read_text())
        stream = f"eval-{info['evaluation_id']}"
        calls = [
            e
            for e in (s.event() for s in app.events.read_stream(stream))
            if e.type == "CallRecorded"
        ]
        before = app.events.stream_version(stream)
        more = [
            c.model_copy(update={"key": f"{c.key}-{i}"})
            for i in range(1000 // len(calls) + 1)
            for c in calls
        ]
        app.events.append(stream, more, expected_version=before)
        assert app.events.stream_version(stream) - before >= 1000
    rows_small, page_small = _rows_a_page_reads(small, evaluated, record, monkeypatch)
    rows_grown, page_grown = _rows_a_page_reads(grown, evaluated, record, monkeypatch)
    orders = sum(1 for r in evaluated.records if r.key[:3] == record.key[:3])
    assert rows_small == rows_grown == orders  # each order's recorded call, by its seq
    for page in (page_small, page_grown):
        assert page.count('class="prompt-status matches"') == orders  # still checked by key
