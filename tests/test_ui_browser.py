"""The validation UI in a real browser: uvicorn on a loopback port, headless Debian chromium
driven by Selenium. Two annotators label the whole sample; the results page must show the
agreement and Cohen's kappa this test computes by hand from the labels it chose."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from playlisteval.app import App
from playlisteval.settings import load_settings
from playlisteval.ui import create_app
from tests.test_ui import CELLS, write_benchmark

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="needs selenium (pip install selenium)"
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SAMPLE = 6
# What each annotator answers on pair-00 … pair-07 of the benchmark (the sample is 6 of them):
# I the intended answer, O the other one, C can't tell.
PLAN = {"ann": "IIIOCIIO", "bob": "IIOOIICO"}
COMMENT = "<script>alert(1)</script> unclear"
links: dict[str, str] = {}  # each annotator's invite link, filled by the server fixture


@pytest.fixture
def server(workspace: Path, tmp_path: Path, demo_playlist: Path) -> Iterator[tuple[str, Path]]:
    """The UI served by uvicorn in a thread on a free loopback port."""
    bench = write_benchmark(tmp_path / "bench", demo_playlist, CELLS)
    with App(load_settings(workspace)) as app:
        web = create_app(app, bench, sample_size=SAMPLE, sample_seed=0, invites=list(PLAN))
        links.update(web.state.invite_links)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        uv = uvicorn.Server(uvicorn.Config(web, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not uv.started:  # readiness wait, not a timing assertion
            assert thread.is_alive(), "uvicorn stopped while starting"
            assert time.monotonic() < deadline, "uvicorn did not start within 30 s"
            time.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}", bench
        finally:
            uv.should_exit = True
            thread.join(timeout=10)
            sock.close()


def _browser() -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    return webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)


@pytest.fixture
def browsers() -> Iterator[dict[str, Any]]:
    """One headless chromium per annotator (each with its own cookies)."""
    opened: dict[str, Any] = {}
    try:
        for name in PLAN:
            opened[name] = _browser()
        yield opened
    finally:
        for driver in opened.values():
            driver.quit()


def _kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa by its definition: (p_o - p_e) / (1 - p_e), p_e from the two marginals."""
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    count_a, count_b = Counter(a), Counter(b)
    p_e = sum(count_a[c] * count_b[c] for c in set(a) | set(b)) / (n * n)
    return (p_o - p_e) / (1 - p_e)


def _answer(driver: Any, record: dict[str, Any], label: str, comment: str) -> None:
    """Pick the letter under which ``label``'s answer is shown, comment, submit."""
    shown_a = driver.find_element(By.ID, "answer-A").text
    shown_b = driver.find_element(By.ID, "answer-B").text
    assert {shown_a, shown_b} == {record["chosen"], record["rejected"]}
    chosen = "A" if shown_a == record["chosen"] else "B"
    choice = {"I": chosen, "O": "B" if chosen == "A" else "A", "C": "cant_tell"}[label]
    driver.find_element(By.ID, f"choice-{choice}").click()
    if comment:
        driver.find_element(By.ID, "comment").send_keys(comment)
    driver.find_element(By.ID, "submit").click()


def _cell(driver: Any, stratum: str, column: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, f'tr[data-stratum="{stratum}"] td.{column}')


def test_two_annotators_in_chromium_get_the_hand_computed_agreement_and_kappa(
    server: tuple[str, Path], browsers: dict[str, Any]
) -> None:
    base, bench = server
    lines = (bench / "pairs.jsonl").read_text().splitlines()
    records = {r["id"]: r for r in map(json.loads, lines)}
    plan = {
        name: {f"pair-{i:02d}": label for i, label in enumerate(row)} for name, row in PLAN.items()
    }
    for name, driver in browsers.items():
        driver.get(base + links[name])
        driver.find_element(By.ID, "start").click()
        WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith("/annotate"))

    seen: dict[str, list[str]] = {name: [] for name in PLAN}
    # The annotators take turns, one pair each, as two people working at once would.
    for turn in range(SAMPLE):
        for name, driver in browsers.items():
            pair_id = driver.find_element(By.NAME, "pair_id").get_attribute("value")
            record = records[pair_id]
            assert driver.find_element(By.ID, "question").text == record["prompt"]
            videos = driver.find_elements(By.TAG_NAME, "video")
            assert [v.get_attribute("src") for v in videos] == [
                f"{base}/media/{e['video_id']}#t={e['start_s']:g},{e['end_s']:g}"
                for e in record["evidence"]
            ]
            if turn == 0:
                # The clip plays from the server (range requests) at its media-fragment start.
                first = videos[0]
                WebDriverWait(driver, 20).until(
                    lambda d, v=first: d.execute_script("return arguments[0].readyState", v) >= 1
                )
                start = driver.execute_script("return arguments[0].currentTime", first)
                assert start == pytest.approx(record["evidence"][0]["start_s"])
            seen[name].append(pair_id)
            comment = COMMENT if (name, turn) == ("bob", 2) else ""
            _answer(driver, record, plan[name][pair_id], comment)
    for driver in browsers.values():
        assert driver.find_element(By.ID, "done").text == "All done"
    assert sorted(seen["ann"]) == sorted(seen["bob"])
    assert seen["ann"] != seen["bob"]  # same pairs, each annotator in an order of their own
    sample = sorted(seen["ann"])
    assert len(sample) == SAMPLE

    driver = browsers["ann"]
    driver.find_element(By.ID, "results-link").click()
    ann = [plan["ann"][p] for p in sample]
    bob = [plan["bob"][p] for p in sample]
    agreed = sum(label == "I" for label in ann + bob)
    overall = _cell(driver, "overall", "agreement")
    assert float(overall.get_attribute("data-value")) == pytest.approx(agreed / (2 * SAMPLE))
    assert overall.text.startswith(f"{agreed / (2 * SAMPLE) * 100:.1f} %")
    kappa = _kappa(ann, bob)
    cell = _cell(driver, "overall", "kappa")
    assert float(cell.get_attribute("data-value")) == pytest.approx(kappa)
    assert cell.text == f"{kappa:.3f}"
    for domain in sorted({records[p]["domain"] for p in sample}):
        pairs = [p for p in sample if records[p]["domain"] == domain]
        labels = [plan[n][p] for n in PLAN for p in pairs]
        cell = _cell(driver, f"domain {domain}", "agreement")
        assert float(cell.get_attribute("data-value")) == pytest.approx(
            labels.count("I") / len(labels)
        )
        assert _cell(driver, f"domain {domain}", "items").text == str(len(pairs))
    comment = driver.find_element(By.CSS_SELECTOR, "#comments td.comment")
    assert comment.text == COMMENT  # shown as text, not run as a script
