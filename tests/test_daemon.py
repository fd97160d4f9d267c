"""The curator daemon as its users run it: ``playlisteval serve`` processes, signals, restarts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from playlisteval.app import App
from playlisteval.settings import load_settings
from policies.budget import TOTAL_ACCOUNT
from store.events import usd_to_micros
from store.ledger import spend
from tests.daemon_harness import configure, free_port, serve, stop, wait_for

# Caps the curation and the scheduled export's difficulty gate share. The gate's InternVL judge
# is priced at the tiles it bills (a 4:3 demo frame: 13 tiles, 3,328 tokens; the offline
# harness fits no served window), so a few dollars would stop the first export half-judged.
CAP_USD = 25.0
DAY_USD = 20.0


def test_serve_indexes_a_playlists_file_curates_and_exports_on_schedule(
    demo_playlist: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    configure(
        home,
        "[index]\nsegment_min_minutes = 1.0\nsegment_target_minutes = 1.0\n"
        "segment_max_minutes = 2.0\n"
        f'[daemon]\nplaylists_file = "{demo_playlist}"\ntick_s = 0.5\nmax_seeds_per_run = 6\n'
        f"export_every_s = 1\nmetrics_port = {port}\n"
        "[worker]\nheartbeat_s = 1.0\nlease_s = 10.0\npoll_s = 0.2\n"
        f"[budget]\ncap_usd = {CAP_USD}\nper_day_usd = {DAY_USD}\n",
    )
    log = tmp_path / "serve.log"
    process = serve(home, log)
    exports = home / "exports" / "daemon"
    try:
        wait_for(
            lambda: exports.exists() and any(exports.glob("*/benchmark.json")),
            600,
            "no scheduled export",
            log,
        )
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        stop(process, log)

    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    with App(load_settings(home)) as app:
        index_items = app.queue().items(kind="index")
        seed_items = app.queue().items(kind="seed")
        videos = app.catalog.videos()
        # Every video of the playlists file went through an indexing job of the queue.
        indexed = {v.id for v in videos if v.status == "indexed"}
        assert indexed
        assert {i.id.removeprefix("index:") for i in index_items} >= indexed
        assert all(i.state == "done" for i in index_items)
        # Runs of at most six seeds, one at a time, each seed queued once; the first run's
        # benchmark exported.
        log_events = app.events.read_all()
        accounts = {a.name: a for a in app.accounts().accounts()}
    # The judges of the scheduled export paid out of the same accounts as the curation: what
    # the accounts hold is what the whole log (seeds and pair selections) spent, within caps.
    judges = spend(s for s in log_events if s.stream.startswith("pairs-"))
    assert judges.paid_calls > 0
    everything = spend(log_events)
    total = accounts[TOTAL_ACCOUNT]
    days = [a for name, a in accounts.items() if name.startswith("day:")]
    assert total.spent_micros + total.reserved_micros == everything.spent_micros
    assert sum(d.spent_micros + d.reserved_micros for d in days) == everything.spent_micros
    assert total.spent_micros + total.reserved_micros <= usd_to_micros(CAP_USD)
    assert all(d.spent_micros + d.reserved_micros <= usd_to_micros(DAY_USD) for d in days)
    finished = [s.data["run_id"] for s in log_events if s.type == "RunFinished"]
    first = finished[0]
    by_run = Counter(i.run_id for i in seed_items)
    assert 0 < by_run[first] <= 6
    assert all(n <= 6 for n in by_run.values())
    assert all(i.state == "done" for i in seed_items if i.run_id == first)
    assert len({i.id for i in seed_items}) == len(seed_items)
    assert (exports / first / "pairs.jsonl").exists()
    state = json.loads((home / "daemon.json").read_text())
    # The first run's export came first; a later run may finish and be exported before the stop.
    assert state["exported_runs"][0] == first
    assert all((exports / run / "pairs.jsonl").exists() for run in state["exported_runs"])
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    seq = int(families["playlisteval_log_seq"].samples[0].value)
    seeds_gauge = {s.labels["state"]: s.value for s in families["playlisteval_seeds"].samples}
    accepted = sum(1 for s in log_events if s.type == "ItemAccepted" and s.seq <= seq)
    assert seeds_gauge["accepted"] == accepted
