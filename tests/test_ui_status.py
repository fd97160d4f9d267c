"""The UI's daemon status page over a real workspace whose event store is a SQLite file or a
PostgreSQL schema: workers (stale ones flagged), queue depths, budget accounts and holds, the
log's counters, parked items escaped, and the empty state before any daemon ran."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from playlisteval.app import App
from playlisteval.settings import load_settings
from playlisteval.ui import create_app
from store.coordination import WORKERS, WorkItem
from store.events import (
    AttemptStarted,
    CallFailed,
    CallRecorded,
    CallReserved,
    Event,
    GatePassed,
    GateRejected,
    ItemAccepted,
    SeedStarted,
    SeedStopped,
    seed_stream,
)
from tests.conftest import PG_URL
from tests.test_ui import CELLS, SAMPLE, SECRET, as_owner, write_benchmark

RUN = "r1"
# Far above the few seconds between a heartbeat and the page that reads it, far below the hour
# a stale worker's heartbeat is moved back by.
STALE_AFTER_S = 600.0
MOVED_BACK_S = 3600.0


@pytest.fixture(params=["sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, workspace: Path) -> Iterator[App]:
    """The workspace, open, its event store (and so its coordination tables) on the workspace's
    SQLite file or in a fresh PostgreSQL schema dropped afterwards."""
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        overrides["store"] = {"url": PG_URL, "schema_name": request.getfixturevalue("pg_schema")}
    with App(load_settings(workspace, **overrides)) as app:
        yield app


@pytest.fixture
def client(opened: App, tmp_path: Path, demo_playlist: Path) -> TestClient:
    """The UI over the workspace and a small benchmark."""
    bench = write_benchmark(tmp_path / "bench", demo_playlist, CELLS)
    web = create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, stale_after_s=STALE_AFTER_S)
    return TestClient(web, follow_redirects=False)


def row(page: str, attribute: str, value: str) -> list[str]:
    """The text of each cell of the table row marked ``attribute="value"``."""
    match = re.search(rf'<tr[^>]* {attribute}="{re.escape(value)}">(.*?)</tr>', page, re.S)
    assert match, f"no row {attribute}={value!r} in the page"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", match.group(1), re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells]


def call(seed: str, n: int) -> dict[str, str | int | None]:
    """The fields every event about call ``n`` of ``seed`` shares."""
    return {
        "call_id": f"{seed}:{n}",
        "key": f"k-{seed}-{n}",
        "role": "generator",
        "model": "gemini-3-flash",
        "phase": 1,
        "gate": None,
    }


def started(seed: str) -> list[Event]:
    return [
        SeedStarted(run_id=RUN, seed_id=seed, domain="cooking", segment_a="a", segment_b="b"),
        AttemptStarted(phase=1, attempt=1),
    ]


def append_log(app: App) -> None:
    """Seed s1 accepted after one recorded call (0.30 USD) and gates passed 2, rejected 1;
    seed s2 stopped by a provider timeout (charged 0.01 USD)."""
    s1, s2 = call("s1", 1), call("s2", 1)
    app.events.append(
        seed_stream(RUN, "s1"),
        [
            *started("s1"),
            CallReserved(**s1, reserved_micros=500_000),
            CallRecorded(**s1, response={}, cost_micros=300_000, offline=True),
            GatePassed(phase=1, gate="structural", attempt=1),
            GateRejected(phase=1, gate="transcript", attempt=1, reason="r", rejected_output="o"),
            GatePassed(phase=1, gate="structural", attempt=2),
            ItemAccepted(seed_id="s1", qa={"q": 1}, distractors={"d": 1}),
        ],
    )
    app.events.append(
        seed_stream(RUN, "s2"),
        [
            *started("s2"),
            CallReserved(**s2, reserved_micros=500_000),
            CallFailed(
                **s2, error="timeout: read timed out", outcome="error", charged_micros=10_000
            ),
            SeedStopped(seed_id="s2", reason="provider"),
        ],
    )


def test_before_any_daemon_ran_the_page_says_so(client: TestClient) -> None:
    assert 'href="/status"' in as_owner(client.app).get("/audit").text
    response = client.get("/status")
    assert response.status_code == 200
    page = response.text
    assert "No worker has run yet." in page
    assert "The queue is empty." in page
    assert "No budget account yet" in page
    assert "Nothing is parked." in page
    assert '<strong id="holds">0</strong>' in page
    assert "No seed yet." in page
    assert "No model call yet." in page
    assert "No gate verdict yet." in page
    assert "No provider error." in page


def test_the_page_shows_workers_queue_accounts_parked_items_and_the_log(
    client: TestClient, opened: App
) -> None:
    queue, accounts = opened.queue(), opened.accounts()
    seeds = [WorkItem(id=f"seed:{RUN}:{i}", kind="seed", run_id=RUN, payload={}) for i in range(5)]
    videos = [WorkItem(id=f"index:v{i}", kind="index", payload={}) for i in range(2)]
    assert queue.enqueue([*seeds, *videos]) == 7
    done, parked, held = queue.claim("w-a", ["seed"], limit=3, lease_s=600.0)
    assert queue.finish(done, "done", "accepted")
    assert queue.finish(parked, "parked", "<script>alert('x')</script> provider failed")
    # w-b's lease on a video lapsed a minute ago (it hung): the video counts as expired.
    (lapsed,) = queue.claim("w-b", ["index"], limit=1, lease_s=-60.0)
    queue.worker_beat("w-a", "working", {"pid": 1, "active": [held.item_id]})
    queue.worker_beat("w-b", "working", {"pid": 2, "active": [lapsed.item_id]})
    queue.worker_beat("w-c", "stopped", {"pid": 3, "active": []})
    with opened.events.engine.begin() as conn:
        conn.execute(
            update(WORKERS)
            .where(WORKERS.c.name.in_(["w-b", "w-c"]))
            .values(heartbeat_at=WORKERS.c.heartbeat_at - MOVED_BACK_S)
        )
    accounts.set_cap("total", 5_000_000)
    accounts.set_cap("all-time", None)
    accounts.reserve("h1", ["total", "all-time"], 200_000, item_id=held.item_id, owner="w-a")
    accounts.reserve("h2", ["total", "all-time"], 300_000, item_id=done.item_id, owner="w-a")
    assert accounts.settle("h2", 120_000)

    # Read once before the log holds any seed: the page's fold then only catches up.
    assert "No seed yet." in client.get("/status").text
    append_log(opened)
    page = client.get("/status").text

    assert "No worker has run yet." not in page
    w_a, w_b = row(page, "data-worker", "w-a"), row(page, "data-worker", "w-b")
    assert (w_a[:2], w_a[3]) == (["w-a", "working"], held.item_id)
    assert (w_b[:2], w_b[3]) == (["w-b", "working (stale)"], lapsed.item_id)
    assert float(w_b[2].removesuffix(" s")) >= MOVED_BACK_S
    assert row(page, "data-worker", "w-c")[1] == "stopped"  # silent because it said it stopped
    assert re.findall(r'<tr class="worker stale" data-worker="([^"]+)"', page) == ["w-b"]

    # Columns: queued, leased, expired, done, parked.
    assert row(page, "data-kind", "seed") == ["seed", "2", "1", "0", "1", "1"]
    assert row(page, "data-kind", "index") == ["index", "1", "0", "1", "0", "0"]

    assert row(page, "data-account", "total") == [
        "total",
        "5.0000 USD",
        "0.1200 USD",
        "0.2000 USD",
        "4.6800 USD",
    ]
    assert row(page, "data-account", "all-time") == [
        "all-time",
        "uncapped",
        "0.1200 USD",
        "0.2000 USD",
        "uncapped",
    ]
    assert '<strong id="holds">1</strong>' in page

    parked_table = re.search(r'<table id="parked">(.*?)</table>', page, re.S)
    assert parked_table
    assert parked.item_id in parked_table.group(1)
    assert RUN in parked_table.group(1)
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; provider failed" in page
    assert "<script>" not in page

    assert row(page, "data-state", "accepted") == ["accepted", "1"]
    assert row(page, "data-state", "stopped:provider") == ["stopped:provider", "1"]
    assert row(page, "data-outcome", "recorded") == ["recorded", "1"]
    assert row(page, "data-outcome", "error") == ["error", "1"]
    assert '<strong id="spend">0.3100 USD</strong>' in page
    assert '<span id="unsettled">0.0000 USD</span>' in page
    assert row(page, "data-gate", "1/structural") == ["1", "structural", "2", "0", "100 %"]
    assert row(page, "data-gate", "1/transcript") == ["1", "transcript", "0", "1", "0 %"]
    assert row(page, "data-error", "timeout") == ["timeout", "1"]

    # The fold caught up once: a second load counts the same events once, not twice.
    assert row(client.get("/status").text, "data-outcome", "recorded") == ["recorded", "1"]
