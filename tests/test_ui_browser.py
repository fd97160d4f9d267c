"""The annotation UI in a real browser, by keyboard only: uvicorn on a loopback port, headless
Debian chromium driven by Selenium at a 1366x768 viewport, one browser for the module (each
annotator in turn, cookies cleared between them).

Two invited annotators label a sample of six pairs whose answers are three paragraphs apart by
one word, under an overlap design that gives half of the pairs to both: the differing word is
highlighted, the answers and Submit sit above the fold, 1/2/3 pick, Enter submits, u takes the
last answer back and the pair is answered again, a citation seeks the evidence player to its
span, the labels download as CSV holding what was answered (in the reader's letters, never which
answer was intended), and the results page shows Cohen's kappa over the shared pairs as this test
computes it by hand, with N and an interval.
Screenshots of each page go to /tmp/playlisteval-screenshots."""

from __future__ import annotations

import csv
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
from playlisteval.ui.annotations import AnnotationLog
from playlisteval.ui.benchmark import load_benchmark
from tests.test_ui import CELLS, write_benchmark

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path("/tmp/playlisteval-screenshots")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="needs selenium (pip install selenium)"
)
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SAMPLE = 6
ANNOTATORS = ("ann", "bob")
# What each annotator answers, by pair (pair-00 … pair-07; the sample is six of them): I the
# intended answer, O the other one, C can't tell. Each answers only the pairs assigned to them.
PLAN = {"ann": "IIOCIOIC", "bob": "IOOCIIIO"}
WIDTH, HEIGHT = 1366, 768
LID = ("red", "green")  # the one word the chosen and the rejected answer differ in


def _answers(index: int, video: str) -> tuple[str, str]:
    """Three paragraphs, cited as gold answers are, the rejected one a word apart."""

    def text(colour: str) -> str:
        return (
            f"In the first segment the cook lifts the lid of the large pot "
            f"({video} @ 00:12–00:47): the lid is {colour}, and steam rises while a wooden "
            "spoon rests across the rim. The burner under the pot is on its highest setting "
            "and the handle points towards the left of the frame.\n\n"
            f"In the second segment the sauce is poured into a wide white bowl ({video} @ "
            "01:00–01:30), the same spoon scraping the last of it from the pot; a sprig of "
            "basil lies on the board beside the bowl and a cloth hangs from the oven door.\n\n"
            f"So between the two segments the pot goes from simmering to empty, question "
            f"{index}'s change, while the spoon and the basil stay where they were."
        )

    return text(LID[0]), text(LID[1])


@pytest.fixture(scope="module")
def served(
    demo_home: Path, demo_playlist: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, Path, dict[str, str]]]:
    """The UI over a copy of the demo workspace, served by uvicorn on a free loopback port:
    (base URL, benchmark, workspace, invite links)."""
    from tests.workspaces import copy_workspace

    root = tmp_path_factory.mktemp("browser")
    home = copy_workspace(demo_home, root / "ws")
    bench = write_benchmark(root / "bench", demo_playlist, CELLS, answers=_answers)
    with App(load_settings(home)) as app:
        web = create_app(
            app,
            bench,
            sample_size=SAMPLE,
            invites=ANNOTATORS,
            overlap=2,
            overlap_share=0.5,
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        uv = uvicorn.Server(uvicorn.Config(web, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not uv.started:  # readiness wait, not a timing assertion
            assert thread.is_alive(), "uvicorn stopped while starting"
            assert time.monotonic() < deadline, "uvicorn did not start within 30 s"
            time.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}", bench, home, web.state.invite_links
        finally:
            uv.should_exit = True
            thread.join(timeout=10)
            sock.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    """One headless chromium for the module, its viewport 1366x768, downloads into a folder."""
    downloads = tmp_path_factory.mktemp("downloads")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    driver.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    SCREENSHOTS.mkdir(exist_ok=True)
    try:
        yield driver, downloads
    finally:
        driver.quit()


def _keys(driver: Any, *keys: str) -> None:
    """Type ``keys`` into whatever has the focus, as a person at the keyboard does."""
    chain = webdriver.ActionChains(driver)
    for key in keys:
        chain.send_keys(key)
    chain.perform()


def _pair_id(driver: Any) -> str:
    return str(
        driver.find_element(By.CSS_SELECTOR, "#answer-form input[name=pair_id]").get_attribute(
            "value"
        )
    )


def _next_page(driver: Any, before: str) -> None:
    """Wait for the page after ``before`` (a pair id, or the done page)."""
    # The page may be replaced between finding the field and reading it: look again then.
    WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: (
            d.find_elements(By.ID, "done")
            or (d.find_elements(By.ID, "answer-form") and _pair_id(d) != before)
        )
    )


def _letter(driver: Any, label: str) -> str:
    """The key that picks ``label`` (I intended, O other, C can't tell) on the shown pair: the
    intended answer is the one with the lid of the chosen colour."""
    marked_a = driver.find_element(By.CSS_SELECTOR, "#answer-A mark.diff").text
    intended = "1" if marked_a == LID[0] else "2"
    other = "2" if intended == "1" else "1"
    return {"I": intended, "O": other, "C": "3"}[label]


def _shot(driver: Any, name: str) -> None:
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def _kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa by its definition: (p_o - p_e) / (1 - p_e), p_e from the two marginals."""
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    count_a, count_b = Counter(a), Counter(b)
    p_e = sum(count_a[c] * count_b[c] for c in set(a) | set(b)) / (n * n)
    return (p_o - p_e) / (1 - p_e)


def _join(driver: Any, base: str, link: str) -> None:
    driver.delete_all_cookies()
    driver.get(base + link)
    # The Start button takes the focus (autofocus) once the page is shown: Enter starts. A loaded
    # machine may apply it a moment after the load event, so wait for it (a bound, not a speed).
    WebDriverWait(driver, 20).until(
        lambda d: d.switch_to.active_element.get_attribute("id") == "start"
    )
    assert driver.switch_to.active_element.get_attribute("id") == "start"
    _keys(driver, Keys.ENTER)
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "answer-form"))


def test_a_full_annotation_flow_by_keyboard_then_the_labels_download(
    served: tuple[str, Path, Path, dict[str, str]], browser: tuple[Any, Path]
) -> None:
    base, bench, home, links = served
    driver, downloads = browser
    plan = {
        name: {f"pair-{i:02d}": label for i, label in enumerate(row)} for name, row in PLAN.items()
    }

    # ann: the first pair, above the fold at 1366x768, its one differing word highlighted.
    driver.get(base + links["ann"])
    _shot(driver, "join")
    _join(driver, base, links["ann"])
    height = driver.execute_script("return window.innerHeight")
    assert height == HEIGHT
    for element in ("answer-A", "answer-B", "submit", "choice-cant_tell"):
        box = driver.execute_script(
            "return arguments[0].getBoundingClientRect()", driver.find_element(By.ID, element)
        )
        assert box["top"] >= 0, element
        assert box["bottom"] <= height, f"{element} ends at {box['bottom']}, below the fold"
    marks = {
        letter: [
            m.text for m in driver.find_elements(By.CSS_SELECTOR, f"#answer-{letter} mark.diff")
        ]
        for letter in "AB"
    }
    assert sorted(marks["A"] + marks["B"]) == sorted(LID)  # one word each, nothing else
    assert driver.find_element(By.ID, "guidelines").get_attribute("open") is not None
    _shot(driver, "annotate-first")

    # The citation to the second evidence span seeks the player there.
    cite = driver.find_elements(By.CSS_SELECTOR, "#answer-A a.cite")[1]
    assert cite.get_attribute("data-start") == "60"
    cite.click()
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script(
            "const p = document.getElementById('player');"
            "return p.readyState >= 1 && p.currentTime === 60 && !p.seeking"
        )
    )
    assert driver.find_element(By.ID, "now-showing").text.endswith("@ 01:00–01:30")
    # The focus back on the page (a click on the body's middle could land on a citation).
    driver.execute_script("document.activeElement.blur()")

    # Label the first pair wrongly on purpose, go on, take it back with u, answer it again.
    first = _pair_id(driver)
    wrong = {"1": "2", "2": "1", "3": "1"}[_letter(driver, plan["ann"][first])]
    _keys(driver, wrong)
    assert driver.find_element(By.ID, f"choice-{'A' if wrong == '1' else 'B'}").is_selected()
    _keys(driver, Keys.ENTER)
    _next_page(driver, first)
    assert driver.find_element(By.ID, "position").text == "2"
    _keys(driver, "u")
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "before"))
    assert _pair_id(driver) == first
    assert driver.find_element(By.ID, "position").text == "1"
    _shot(driver, "annotate-after-undo")
    _keys(driver, _letter(driver, plan["ann"][first]), Keys.ENTER)
    _next_page(driver, first)

    labelled: dict[str, dict[str, str]] = {"ann": {first: plan["ann"][first]}, "bob": {}}
    for name in ANNOTATORS:
        if name == "bob":
            _join(driver, base, links["bob"])
        while not driver.find_elements(By.ID, "done"):
            pair = _pair_id(driver)
            _keys(driver, "3")  # changing one's mind before Enter is free
            _keys(driver, _letter(driver, plan[name][pair]), Keys.ENTER)
            labelled[name][pair] = plan[name][pair]
            _next_page(driver, pair)
        _shot(driver, f"done-{name}")

    with App(load_settings(home)) as app:
        state = AnnotationLog(app.events, load_benchmark(bench)).state()
    for name in ANNOTATORS:
        assert set(labelled[name]) == set(state.assigned(name))
        names = {"I": "intended", "O": "other", "C": "cant_tell"}
        assert {p: names[v] for p, v in labelled[name].items()} == {
            p: state.labels[(name, p)].label for p in labelled[name]
        }
    shared = sorted(set(labelled["ann"]) & set(labelled["bob"]))
    assert shared == sorted(state.overlap)  # both labelled the shared half, no more

    driver.get(base + "/")
    assert driver.find_element(By.ID, "signed-in").text == "bob"
    _shot(driver, "start")
    driver.get(base + "/results")
    kappa = _kappa([labelled["ann"][p] for p in shared], [labelled["bob"][p] for p in shared])
    cell = driver.find_element(By.CSS_SELECTOR, 'tr[data-stratum="overall"] td.kappa')
    assert float(cell.get_attribute("data-value")) == pytest.approx(kappa)
    assert cell.get_attribute("data-n") == str(len(shared))
    assert cell.text == f"{kappa:.3f} (N < 10: no interval)"  # three shared pairs say little
    _shot(driver, "results")
    driver.find_element(By.ID, "download-csv").click()
    deadline = time.monotonic() + 30
    while not list(downloads.glob("labels-*.csv")):  # the download's arrival, not a timing test
        assert time.monotonic() < deadline, "the CSV did not download within 30 s"
        time.sleep(0.1)
    rows = list(csv.DictReader(next(downloads.glob("labels-*.csv")).open(encoding="utf-8")))
    assert rows
    assert not {"label", "chosen_shown_as"} & set(rows[0])  # bob is not told the intended one
    got = {(r["annotator"], r["pair_id"]): r["choice"] for r in rows}
    # bob reads his own labels and, on the pairs he answered, ann's: labels stay blind
    assert set(got) == {(n, p) for n in ANNOTATORS for p in labelled[n] if p in labelled["bob"]}
    for pair in shared:  # ann's choice in bob's letters: the same letter when they agreed
        same = labelled["ann"][pair] == labelled["bob"][pair]
        assert (got["ann", pair] == got["bob", pair]) == same, pair
    for (name, pair), choice in got.items():
        assert (choice == "cant_tell") == (labelled[name][pair] == "C"), (name, pair)
    assert set(labelled["ann"]) - set(labelled["bob"])  # so some of hers were not his to read
