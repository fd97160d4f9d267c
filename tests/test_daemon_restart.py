"""The daemon stopped by SIGTERM mid-curation and restarted ends as if never interrupted (its own
file, so that the suite's workers can run it beside the other daemon tests)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from playlisteval.app import App
from playlisteval.settings import load_settings
from tests.daemon_harness import (
    configure,
    events_of,
    final_state,
    has_event,
    serve,
    stop,
    wait_for,
)
from tests.workspaces import copy_workspace


def test_sigterm_mid_curation_then_restart_ends_as_an_uninterrupted_run(
    workspace: Path, tmp_path: Path
) -> None:

    settings = (
        "[daemon]\ntick_s = 0.5\nmax_seeds_per_run = 6\nexport_every_s = 0\nmetrics_port = 0\n"
        "[curation]\nconcurrency = 4\noffline_latency_s = 0.1\n"
        "[worker]\nheartbeat_s = 1.0\nlease_s = 10.0\npoll_s = 0.2\nshutdown_grace_s = 60\n"
    )
    # Six active seeds, already computed (as a daemon that seeded earlier leaves them).
    with App(load_settings(workspace)) as app:
        app.catalog.replace_seeds(app.catalog.seeds()[:6])
        indexed = sorted(v.id for v in app.catalog.videos(statuses=["indexed"]))
    (workspace / "daemon.json").write_text(json.dumps({"seeded_videos": indexed}))
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    copy_workspace(workspace, straight)
    copy_workspace(workspace, interrupted)
    for home in (straight, interrupted):
        configure(home, settings)

    log = tmp_path / "straight.log"
    process = serve(straight, log)
    try:
        wait_for(lambda: has_event(straight, "RunFinished"), 600, "no finished run", log)
    finally:
        stop(process, log)

    log = tmp_path / "interrupted.log"
    process = serve(interrupted, log)
    try:
        wait_for(
            lambda: (
                sum(s.type == "ItemAccepted" for s in events_of(interrupted)) >= 2
                if has_event(interrupted, "ItemAccepted")
                else False
            ),
            600,
            "no seed accepted",
            log,
        )
    finally:
        stop(process, log)
    at_stop = events_of(interrupted)
    assert not any(s.type == "RunFinished" for s in at_stop), "SIGTERM came too late to test"
    # Graceful: the calls in flight finished (none interrupted, no reservation left open), and
    # the seeds' leases went back to the queue.
    reserved = {s.data["call_id"] for s in at_stop if s.type == "CallReserved"}
    # (A request repeated within a seed is answered from its first record: no reservation.)
    settled = {
        s.data["call_id"]
        for s in at_stop
        if s.type == "CallFailed" or (s.type == "CallRecorded" and not s.data["replayed"])
    }
    assert reserved == settled
    with App(load_settings(interrupted)) as app:
        leased = [i for i in app.queue().items() if i.state == "leased"]
        assert leased == []
        assert any(i.state == "queued" for i in app.queue().items(kind="seed"))

    process = serve(interrupted, log)
    try:
        wait_for(lambda: has_event(interrupted, "RunFinished"), 600, "no finished run", log)
    finally:
        stop(process, log)

    expected, got = final_state(straight), final_state(interrupted)
    assert len(expected) == 6
    assert Counter(s["status"] for s in got.values()) == Counter(
        s["status"] for s in expected.values()
    )
    # Seed by seed: the same outcome, the same accepted item, the same calls paid for.
    assert got == expected
