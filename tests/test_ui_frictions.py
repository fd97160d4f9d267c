"""Step 19's shell frictions in the UI, as a new user met them: the overlap design told with
fewer invited annotators than it asks for ("to 2 of the 1 invited annotators"), and the audit
pages, which mixed dollars and micro-dollars and did not say when the offline provider made the
run (a harness, never evidence of model quality)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from playlisteval.ui import create_app
from playlisteval.ui.annotations import AnnotationLog, label_rows
from playlisteval.ui.benchmark import load_benchmark
from store.events import RunStarted, run_stream
from store.runlog import run_started
from tests.test_ui import CELLS, SECRET, as_owner, join, label_next, write_benchmark

SAMPLE = 6
# "k of the n invited": k must never exceed n in anything the UI says.
K_OF_N = re.compile(r"(\d+) of the (\d+) invited")
# A money figure as the audit pages show it (tooltips aside): dollars, four decimals.
MONEY = re.compile(r"\d[\d,]*(?:\.\d+)? ?(?:USD|µUSD|\$)")


@pytest.fixture
def bench(tmp_path: Path, demo_playlist: Path) -> Path:
    """The small benchmark of ``tests/test_ui.py``."""
    return write_benchmark(tmp_path / "bench", demo_playlist, CELLS)


@pytest.fixture
def opened(workspace: Path) -> Iterator[App]:
    """The workspace, open."""
    with App(load_settings(workspace)) as app:
        yield app


def _no_k_above_n(text: str) -> None:
    for k, n in K_OF_N.findall(text):
        assert int(k) <= int(n), f"{k} of the {n} invited: {text!r}"


# -- the overlap design, told as it is --------------------------------------------------------


@pytest.mark.parametrize(
    ("invites", "overlap", "said", "unsaid"),
    [
        (
            ["ann"],
            2,
            "6 pairs, each to the 1 invited annotator (overlap 2 needs 2; invite more for "
            "agreement)",
            "agreement between annotators is measured",
        ),
        (
            ["ann", "bob"],
            3,
            "3 of the 6 pairs (50 %) go to all 2 invited annotators each (overlap 3 needs 3; "
            "invite more), the other 3 to one",
            "of the 2 invited",
        ),
        (
            ["ann", "bob", "cy"],
            2,
            "3 of the 6 pairs (50 %) go to 2 of the 3 invited annotators each, the other 3 to one",
            "needs",
        ),
    ],
    ids=["one invitee", "two invitees, overlap 3", "three invitees"],
)
def test_the_design_is_told_with_no_more_annotators_to_a_pair_than_are_invited(
    opened: App, bench: Path, invites: list[str], overlap: int, said: str, unsaid: str
) -> None:
    """What `playlisteval ui` prints and the results and index pages say: with fewer invited
    annotators than the overlap asks for, each pair goes to those there are, and the text says
    how many the overlap needs; never "2 of the 1 invited annotators"."""
    web = create_app(
        opened,
        bench,
        sample_size=SAMPLE,
        secret=SECRET,
        invites=invites,
        overlap=overlap,
        overlap_share=0.5,
    )
    assert web.state.design == said
    results = as_owner(web).get("/results").text
    design = re.search(r'<span id="design">(.*?)</span>', results, re.S)
    assert design is not None
    assert said in design.group(1)
    assert unsaid not in design.group(1)
    index = TestClient(web).get("/").text
    for text in (web.state.design, results, index):
        _no_k_above_n(text)
    assert f"{len(invites)} annotator(s) invited" in index


def test_playlisteval_ui_with_one_invitee_says_each_pair_goes_to_them_alone(
    workspace: Path, bench: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line the new user read: one invitee, the default overlap of 2."""
    monkeypatch.setattr("playlisteval.ui.serve", lambda *_args, **_kwargs: None)
    result = CliRunner().invoke(
        cli_app, ["ui", str(bench), "--invite", "ann", "--home", str(workspace)]
    )
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "each to the 1 invited annotator (overlap 2 needs 2; invite more for agreement)" in flat
    _no_k_above_n(flat)


def test_with_one_invitee_no_pair_is_called_shared_until_a_second_is_invited(
    opened: App, bench: Path
) -> None:
    """With k above the number invited, the design gives each pair to everyone there is: one
    annotator labels the whole sample, and no page or export calls a pair shared (no one else
    labels it). A second invitee makes the planned pairs shared again, each to both."""
    web = create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, invites=["ann"], overlap=2)
    benchmark = load_benchmark(bench)
    log = AnnotationLog(opened.events, benchmark)
    state = log.state()
    assert state.design is not None
    assert state.design.overlap_pair_ids  # planned all the same
    assert state.overlap == frozenset()
    assert sorted(state.assigned("ann")) == sorted(state.pair_ids)
    client = TestClient(web, follow_redirects=False)
    join(client, "ann")
    records = {p.id: {"chosen": p.chosen, "rejected": p.rejected} for p in benchmark.pairs.values()}
    seen_shared = False
    for _ in state.pair_ids:
        seen_shared |= "shared pair" in client.get("/annotate").text
        label_next(client, records, "intended")
    assert not seen_shared
    rows = label_rows(log.state(), benchmark)
    assert len(rows) == SAMPLE
    assert not any(row["overlap"] for row in rows)

    log.invite(["bob"])
    state = log.state()
    assert state.overlap == frozenset(state.design.overlap_pair_ids)
    for pair_id in state.overlap:
        assert pair_id in state.assigned("ann")
        assert pair_id in state.assigned("bob")
    assert {row["pair_id"] for row in label_rows(state, benchmark) if row["overlap"]} == set(
        state.overlap
    )


# -- the audit pages: dollars throughout, and the offline banner --------------------------------


def _visible(page: str) -> str:
    """The page's text as shown: tags (and the tooltips in them) taken off."""
    return re.sub(r"<[^>]+>", " ", page)


def _live_run(app: App, run_id: str, budget_micros: int) -> None:
    """A run the live providers made, as its log begins (no seed worked yet)."""
    app.events.append(
        run_stream(run_id),
        [
            RunStarted(
                run_id=run_id,
                seeds=(),
                budget_micros=budget_micros,
                max_attempts=1,
                concurrency=1,
                offline=False,
            )
        ],
    )


@pytest.fixture
def audit_client(opened: App, bench: Path) -> TestClient:
    """The UI over the workspace, for its audit pages."""
    web = create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, invites=["ann"])
    return as_owner(web)  # the audit pages are the owner's


def test_a_live_run_alone_carries_no_offline_banner_and_its_budget_is_in_dollars(
    opened: App, audit_client: TestClient
) -> None:
    _live_run(opened, "00000000-live", 2_500_000)
    page = audit_client.get("/audit").text
    assert "Run 00000000-live" in page
    assert 'id="offline-banner"' not in page
    assert "OFFLINE HARNESS" not in page
    assert "2.5000 USD" in _visible(page)
    assert "µUSD" not in page


def test_every_money_figure_on_the_audit_pages_is_in_dollars_to_four_decimals(
    opened: App, audit_client: TestClient
) -> None:
    """Total, budget, phases and each seed's spend: one unit (USD), one format; the exact
    figure, to the micro-dollar, only in a tooltip."""
    report = runs.curate(opened, budget_usd=None, max_seeds=2)
    audit = runs.audit(opened, report.run_id)
    assert audit.spent_micros > 0
    page = audit_client.get("/audit").text
    assert "µUSD" not in page
    shown = MONEY.findall(_visible(page))
    assert shown, "no money figure on the audit page"
    for figure in shown:
        assert re.fullmatch(r"\d[\d,]*\.\d{4} USD", figure), figure
    for line in audit.seeds:
        assert line.spent_micros > 0
        cell = re.search(
            rf'{re.escape(line.seed_id)}</a></td><td>[^<]*</td><td class="num"[^>]*>([^<]*)</td>',
            page,
        )
        assert cell is not None, line.seed_id
        assert cell.group(1) == f"{line.spent_micros / 1_000_000:,.4f} USD"
        assert f'title="{line.spent_micros / 1_000_000:,.6f} USD exactly"' in page
    total = f"{audit.spent_micros / 1_000_000:,.4f} USD"
    assert (
        f'<strong class="spent" title="{audit.spent_micros / 1_000_000:,.6f} USD exactly">'
        f"{total}</strong>" in page
    )
    seed = audit.seeds[0].seed_id
    timeline = audit_client.get(f"/audit/{report.run_id}/{seed}").text
    assert "µUSD" not in timeline
    for figure in MONEY.findall(_visible(timeline)):
        assert re.fullmatch(r"\d[\d,]*\.\d{4} USD", figure), figure


def test_the_audit_pages_of_an_offline_run_carry_the_offline_banner(
    opened: App, audit_client: TestClient
) -> None:
    """The offline provider's run is labelled a harness on the audit list (the run flagged, the
    banner counting it among the live ones) and on each of its seeds' timelines."""
    _live_run(opened, "00000000-live", 2_500_000)
    report = runs.curate(opened, budget_usd=None, max_seeds=1)
    assert run_started(opened.events, report.run_id).offline
    page = audit_client.get("/audit").text
    banner = re.search(r'<p class="offline-banner" id="offline-banner">(.*?)</p>', page, re.S)
    assert banner is not None
    assert "1 of these 2 runs" in banner.group(1)
    assert "never evidence of model quality" in banner.group(1)
    offline_run = page[page.index(f'id="run-{report.run_id}"') :]
    assert "flag-offline" in offline_run[: offline_run.index("</h2>")]
    live_run = page[page.index('id="run-00000000-live"') :]
    assert "flag-offline" not in live_run[: live_run.index("</h2>")]
    seed = runs.audit(opened, report.run_id).seeds[0].seed_id
    timeline = audit_client.get(f"/audit/{report.run_id}/{seed}").text
    assert 'id="offline-banner"' in timeline
    assert "OFFLINE HARNESS" in timeline
