"""One fleet worker in this process, on a real SQLite store: stops, takeovers, caps, jobs."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from sqlalchemy import delete, update
from sqlmodel import col

from agents.fleet import (
    TOTAL_ACCOUNT,
    FleetWorker,
    WorkerReport,
    day_account,
    index_item,
    seconds_to_next_day,
    start_run,
)
from playlisteval.app import App, curation_config
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.catalog import INDEXED, READY, ChunkRow
from store.coordination import WORK_ITEMS
from store.events import CallFailed, CallReserved, SeedStarted, seed_stream, usd_to_micros
from store.ledger import spend
from tests.test_fleet import many_seeds


def open_app(workspace: Path, extra: str = "") -> App:
    """The demo workspace with a fast-beating worker and a slow simulated provider."""
    settings = workspace / SETTINGS_FILE
    settings.write_text(
        settings.read_text()
        + "\n[worker]\nlease_s = 2.0\nheartbeat_s = 0.3\npoll_s = 0.1\n"
        + "shutdown_grace_s = 0.0\nexit_when_idle = true\n"
        + extra
    )
    return App(load_settings(workspace))


def queue_run(app: App, count: int, run_id: str = "r") -> None:
    app.set_budget_caps()
    start_run(
        app.events,
        app.queue(),
        run_id,
        many_seeds(app, count),
        budget_micros=None,
        per_seed_micros=None,
        config=curation_config(app.settings),
    )


async def work_until(
    worker: FleetWorker, condition: Callable[[], bool], *, poll_s: float = 0.05
) -> WorkerReport:
    """Run ``worker`` and set its stop event once ``condition()`` holds."""
    stop = anyio.Event()
    reports: list[WorkerReport] = []

    async def run() -> None:
        reports.append(await worker.work(stop))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(300):
            while not await anyio.to_thread.run_sync(condition):
                await anyio.sleep(poll_s)
        stop.set()
    return reports[0]


def test_a_stop_past_the_grace_records_calls_in_flight_as_interrupted_and_a_restart_finishes(
    workspace: Path,
) -> None:
    app = open_app(workspace, "\n[curation]\nconcurrency = 2\noffline_latency_s = 30.0\n")
    queue_run(app, 2)
    worker = app.fleet_worker(app.fleet_config("first"))
    report = anyio.run(
        work_until,
        worker,
        lambda: len(app.events.read_all(types=["CallReserved"])) >= 2,
    )
    assert report.seeds_finished == {}
    log = app.events.read_all()
    interrupted = [s.event() for s in log if s.type == "CallFailed"]
    reserved = {
        e.call_id: e.reserved_micros
        for e in (s.event() for s in log)
        if isinstance(e, CallReserved)
    }
    # Both calls in flight were cut at the stop (no grace): recorded as interrupted, charged
    # at their reservation, in the log and in the shared account alike.
    assert len(interrupted) == 2
    for event in interrupted:
        assert isinstance(event, CallFailed)
        assert event.outcome == "interrupted"
        assert event.charged_micros == reserved[event.call_id]
    total = app.accounts().account(TOTAL_ACCOUNT)
    assert total is not None
    assert total.spent_micros == sum(reserved.values())
    assert total.reserved_micros == 0
    # The leases went back to the queue at once.
    assert {i.state for i in app.queue().items()} == {"queued"}

    app.settings.curation.offline_latency_s = 0.0
    fast = app.fleet_worker(app.fleet_config("second"))
    report = anyio.run(lambda: fast.work(anyio.Event()))
    assert len(report.seeds_finished) == 2
    everything = app.events.read_all()
    prefix = seed_stream("r", "")
    spent = spend(s for s in everything if s.stream.startswith(prefix))
    total = app.accounts().account(TOTAL_ACCOUNT)
    assert total is not None
    assert spent.open_micros == 0
    assert total.spent_micros == spent.spent_micros
    # Each seed started once: the restart went on from its log.
    assert sum(isinstance(s.event(), SeedStarted) for s in everything) == 2
    app.close()


def test_a_worker_whose_lease_was_taken_stops_writing_to_that_seed(workspace: Path) -> None:
    app = open_app(workspace, "\n[curation]\nconcurrency = 1\noffline_latency_s = 0.3\n")
    queue_run(app, 1)
    worker = app.fleet_worker(app.fleet_config("slow"))
    stream = seed_stream("r", "fleet-0000")
    stolen: list[int] = []

    def steal_after_first_call() -> bool:
        if not stolen and app.events.read_all(types=["CallRecorded"]):
            # Another worker took the seed over (as after an expired lease).
            with app.events.engine.begin() as conn:
                conn.execute(
                    update(WORK_ITEMS)
                    .where(WORK_ITEMS.c.id == "seed:fleet-0000")
                    .values(owner="thief", token=WORK_ITEMS.c.token + 1)
                )
            stolen.append(app.events.stream_version(stream))
        # Stop once the worker has let go of it.
        return bool(stolen) and not worker._active

    report = anyio.run(work_until, worker, steal_after_first_call)
    assert report.seeds_lost == ["seed:fleet-0000"]
    assert report.seeds_finished == {}
    # The thief's lease stands: the robbed worker neither finished the seed nor touched its
    # item, and stopped at its next heartbeat (what it appended before then the thief's first
    # append would have fenced off, as the next test shows).
    item = next(i for i in app.queue().items() if i.id == "seed:fleet-0000")
    assert (item.owner, item.state, item.result) == ("thief", "leased", None)
    after = app.events.read_stream(stream, after_version=stolen[0])
    assert not any(s.type in ("ItemAccepted", "SeedDiscarded", "SeedStopped") for s in after)
    app.close()


def test_a_seed_whose_log_moved_on_is_fenced_off(workspace: Path) -> None:
    app = open_app(workspace, "\n[curation]\nconcurrency = 1\noffline_latency_s = 0.3\n")
    queue_run(app, 1)
    worker = app.fleet_worker(app.fleet_config("fenced"))
    stream = seed_stream("r", "fleet-0000")
    moved: list[int] = []

    def append_behind_its_back() -> bool:
        if not moved and app.events.read_all(types=["CallReserved"]):
            # A second writer (a worker that took it over) appends to the seed's stream.
            stored = app.events.append(
                stream,
                [
                    SeedStarted(
                        run_id="r", seed_id="fleet-0000", domain="x", segment_a="a", segment_b="b"
                    )
                ],
            )
            moved.append(stored[0].version)
        return bool(moved) and not worker._active

    report = anyio.run(work_until, worker, append_behind_its_back)
    assert report.seeds_lost == ["seed:fleet-0000"]
    # Nothing of the fenced worker landed after the other writer's event.
    after = app.events.read_stream(stream, after_version=moved[0])
    assert after == []
    app.close()


def test_the_day_cap_sends_seeds_to_tomorrow_and_the_total_cap_parks_them(
    workspace: Path,
) -> None:
    app = open_app(workspace, "\n[budget]\nper_day_usd = 0.05\ncap_usd = 100.0\n")
    queue_run(app, 4)
    report = anyio.run(lambda: app.fleet_worker(app.fleet_config("w")).work(anyio.Event()))
    day = app.accounts().account(day_account())
    assert day is not None
    assert day.spent_micros <= usd_to_micros(0.05)
    items = {i.id: i for i in app.queue().items()}
    waiting = [i for i in items.values() if i.state == "queued"]
    assert waiting, "the day's cap stopped no seed"
    assert all("'day:" in str(i.result) for i in waiting)
    # They are due at the next UTC midnight, not before.
    with app.events.engine.connect() as conn:
        due = dict(
            conn.execute(
                WORK_ITEMS.select().with_only_columns(WORK_ITEMS.c.id, WORK_ITEMS.c.not_before)
            ).all()
        )
    now = app.queue().now()
    for item in waiting:
        assert due[item.id] - now == pytest.approx(seconds_to_next_day(), abs=60)
    assert {i.state for i in items.values()} <= {"done", "queued"}
    assert len(report.seeds_finished) == sum(i.state == "done" for i in items.values())

    # The total: a cap below what one call needs parks every seed that is left.
    app.accounts().set_cap(day_account(), None)
    app.accounts().set_cap(TOTAL_ACCOUNT, day.spent_micros + 1)
    app.queue().requeue(kind="seed", state="queued")
    anyio.run(lambda: app.fleet_worker(app.fleet_config("w2")).work(anyio.Event()))
    parked = [i for i in app.queue().items() if i.state == "parked"]
    assert parked
    assert all("'total'" in str(i.result) for i in parked)
    total = app.accounts().account(TOTAL_ACCOUNT)
    assert total is not None
    assert total.spent_micros <= day.spent_micros + 1
    app.close()


def test_indexing_jobs_are_claimed_from_the_queue(workspace: Path) -> None:
    app = open_app(workspace)
    app.queue().enqueue([index_item("v1"), index_item("v2"), index_item("bad")])
    done: list[str] = []

    def job(video_id: str) -> str:
        if video_id == "bad":
            raise ValueError("no such file")
        done.append(video_id)
        return f"indexed {video_id}"

    worker = app.fleet_worker(app.fleet_config("ix"), index_job=job)
    report = anyio.run(lambda: worker.work(anyio.Event()))
    assert sorted(done) == ["v1", "v2"]
    assert report.indexed == {"v1": "indexed v1", "v2": "indexed v2", "bad": "error: no such file"}
    states = {i.id: (i.state, i.result) for i in app.queue().items()}
    assert states == {
        "index:v1": ("done", "indexed v1"),
        "index:v2": ("done", "indexed v2"),
        "index:bad": ("parked", "error: no such file"),
    }
    app.close()


def test_a_working_worker_reports_working_in_every_heartbeat(workspace: Path) -> None:
    """The worker table (what /healthz, `fleet` and the status page show) says "working" while
    the worker curates, beat after beat; "stopped" once it has stopped."""
    app = open_app(workspace, "\n[curation]\nconcurrency = 1\noffline_latency_s = 0.2\n")
    queue_run(app, 2)
    worker = app.fleet_worker(app.fleet_config("busy"))
    seen: list[tuple[str, float]] = []

    def beat_while_curating() -> bool:
        [row] = [w for w in app.queue().workers() if w["name"] == worker.fleet.owner] or [None]
        if row is not None and worker._active:
            seen.append((row["state"], row["age_s"]))
        # Enough looks to span several heartbeats (0.3 s apart) mid-curation.
        return len(seen) >= 12

    anyio.run(work_until, worker, beat_while_curating)
    assert {state for state, _ in seen} == {"working"}
    [row] = [w for w in app.queue().workers() if w["name"] == worker.fleet.owner]
    assert row["state"] == "stopped"
    app.close()


def test_fleet_lists_a_silent_worker_as_gone_and_the_leases_the_queue_says_it_holds(
    workspace: Path,
) -> None:
    """A worker killed after it said "stopping" (a double SIGTERM) beats no more: `fleet` says
    it is gone, and counts the leases the queue still gives it, not its last heartbeat's list."""
    from typer.testing import CliRunner

    from playlisteval.cli import app as cli_app
    from store.coordination import WORKERS

    app = open_app(workspace)
    queue_run(app, 2)
    queue = app.queue()
    [lease] = queue.claim("dead-host:1", kinds=["seed"], limit=1, lease_s=600)
    queue.worker_beat("dead-host:1", "stopping", {"active": [lease.item_id, "seed:long-gone"]})
    queue.worker_beat("live-host:2", "working", {"active": []})
    with app.events.engine.begin() as conn:
        conn.execute(
            update(WORKERS)
            .where(WORKERS.c.name == "dead-host:1")
            .values(heartbeat_at=WORKERS.c.heartbeat_at - 3600)
        )
    app.close()
    result = CliRunner().invoke(cli_app, ["fleet", "--home", str(workspace)])
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if "│" in line}
    assert "gone (stopping)" in rows["dead-host:1"]
    assert rows["dead-host:1"].split("│")[4].strip() == "1"  # the queue's one lease, not two
    assert "working" in rows["live-host:2"]


class DeviceRecorder:
    """Index models standing in for GPU models that share one device: each call is recorded
    (which job, when), and calls overlapping on the device are counted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy: dict[str, int] = {}
        self.peak = 0
        self.calls = 0

    @contextmanager
    def on(self, device: str) -> Iterator[None]:
        with self.lock:
            self.busy[device] = self.busy.get(device, 0) + 1
            self.peak = max(self.peak, self.busy[device])
            self.calls += 1
        try:
            time.sleep(0.02)  # a model call long enough for another job's to land inside it
            yield
        finally:
            with self.lock:
                self.busy[device] -= 1


class OnDevice:
    """A real index model (MiniLM, the captions reader) said to run on ``device``."""

    def __init__(self, model: Any, device: str, recorder: DeviceRecorder) -> None:
        self._model, self.device, self._recorder = model, device, recorder
        self.name = model.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def embed_chunks(self, chunks: Any) -> Any:
        with self._recorder.on(self.device):
            return self._model.embed_chunks(chunks)

    def transcribe(self, request: Any) -> Any:
        with self._recorder.on(self.device):
            return self._model.transcribe(request)


def _index_jobs_on_one_device(
    app: App, count: int
) -> tuple[DeviceRecorder, list[tuple[float, float]]]:
    """Put ``count`` indexed videos back to ready (their chunks gone), queue them, and let one
    worker index them with both models on one device; returns the recorder and each job's span."""
    recorder = DeviceRecorder()
    videos = [v.id for v in app.catalog.videos(statuses=[INDEXED])][:count]
    with app.catalog.engine.begin() as conn:
        conn.execute(delete(ChunkRow).where(col(ChunkRow.video_id).in_(videos)))
    for video_id in videos:
        app.catalog.update_video(video_id, status=READY)
    indexer = app.indexer()
    indexer.embedder = OnDevice(indexer.embedder, "cuda:0", recorder)  # type: ignore[assignment]
    indexer.transcriber = OnDevice(indexer.transcriber, "cuda:0", recorder)  # type: ignore[assignment]
    spans: list[tuple[float, float]] = []

    def job(video_id: str) -> str:
        started = time.monotonic()
        try:
            return indexer.index_video(video_id)
        finally:
            spans.append((started, time.monotonic()))

    app.queue().enqueue([index_item(v) for v in videos])
    worker = app.fleet_worker(app.fleet_config("ix"), index_job=job)
    report = anyio.run(lambda: worker.work(anyio.Event()))
    assert sorted(report.indexed) == sorted(videos)
    assert all(r.startswith("indexed: ") for r in report.indexed.values()), report.indexed
    assert {app.catalog.video(v).status for v in videos} == {INDEXED}  # type: ignore[union-attr]
    return recorder, spans


def _overlap(spans: list[tuple[float, float]]) -> bool:
    ordered = sorted(spans)
    return any(b[0] < a[1] for a, b in itertools.pairwise(ordered))


def test_one_worker_runs_one_index_job_at_a_time_by_default(workspace: Path) -> None:
    """Eight seed slots, three index jobs: one at a time (one device), never eight at once."""
    app = open_app(workspace)
    recorder, spans = _index_jobs_on_one_device(app, 3)
    assert len(spans) == 3
    assert not _overlap(spans)
    assert recorder.peak == 1
    app.close()


def test_index_jobs_in_one_worker_never_run_a_model_on_the_same_device_at_once(
    workspace: Path,
) -> None:
    """With two index jobs at once (worker.index_jobs = 2), the jobs do run together, decoding
    side by side, yet their model calls on the one device take turns."""
    app = open_app(workspace, "index_jobs = 2\n")
    recorder, spans = _index_jobs_on_one_device(app, 3)
    assert _overlap(spans), "the two jobs never ran at once: the test would prove nothing"
    assert recorder.calls >= 6  # ASR and embedding, at least one batch per video
    assert recorder.peak == 1
    app.close()
