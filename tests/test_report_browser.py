"""The report page in a real browser: headless Debian chromium driven by Selenium, its network
switched off. Every figure the page shows must load from the report's own folder (an image the
browser could not decode has ``naturalWidth`` 0), and nothing else may load at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from playlisteval.report import write_report
from tests.test_report import FIGURES, full_eval_dirs

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


@pytest.fixture
def chromium() -> Iterator[Any]:
    """Headless chromium with its network emulated offline."""
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


LOADED = """
return [...document.images].map(
    i => [i.getAttribute('src'), i.complete, i.naturalWidth, i.naturalHeight]);
"""


def test_every_figure_of_the_report_loads_in_chromium_from_the_report_folder(
    tmp_path: Path, chromium: Any
) -> None:
    out = tmp_path / "out"
    summary = write_report(full_eval_dirs(tmp_path), out)
    assert summary.figures == FIGURES
    page = summary.html.read_text()
    assert "<script" not in page
    assert "default-src 'none'" in page  # nothing but its own images may load

    chromium.get(summary.html.resolve().as_uri())
    assert chromium.title == "Judge evaluation report"
    assert chromium.find_element(By.TAG_NAME, "h1").text == "Judge evaluation report"
    images = chromium.execute_script(LOADED)
    assert [src for src, *_ in images] == [
        p.relative_to(out).as_posix() for p in summary.figure_files if p.suffix == ".png"
    ]
    for src, complete, width, height in images:
        assert complete, src
        assert width > 0, f"{src} did not load (naturalWidth 0)"
        assert height > 0, src
    captions = [c.text for c in chromium.find_elements(By.TAG_NAME, "figcaption")]
    assert len(captions) == len(FIGURES)
    for caption, title in zip(captions, FIGURES, strict=True):
        assert caption.startswith(f"{title}. "), caption
    # The images came from the report's own folder; nothing was fetched from elsewhere (a
    # network resource would be listed; local files are not).
    sources = chromium.execute_script("return [...document.images].map(i => i.currentSrc)")
    folder = out.resolve().as_uri()
    assert sources == [f"{folder}/{src}" for src, *_ in images]
    assert chromium.execute_script("return performance.getEntriesByType('resource').length") == 0
    tables = chromium.find_elements(By.CSS_SELECTOR, "h2 + p + table, h2 + table")
    assert tables  # the tables are laid out too
