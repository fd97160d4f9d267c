"""The curator daemon, ``playlisteval serve``: playlists in, a benchmark out, for days.

Every ``daemon.tick_s`` it reads the playlists file again when it changed (and picks up videos
that ``playlisteval add`` put in the catalogue), downloads and probes what is new, queues each
ready video as an indexing job, computes seeds once the indexing jobs are done, opens a run over
at most ``daemon.max_seeds_per_run`` seeds that were never queued (once the previous run's seeds
are all claimed), and exports the newest finished run's benchmark on schedule.
The work itself (indexing jobs and seeds) is claimed from the shared queue by the daemon's own
worker (``daemon.work``) and by any number of ``playlisteval worker`` processes.

One daemon serves a workspace: it holds ``<home>/serve.lock`` while it runs, and a second
``serve`` there is refused with a line naming the first (pid, host, since when).

SIGTERM (or Ctrl-C) stops it gracefully: no new claims, seeds pause at their next step, calls in
flight get ``worker.shutdown_grace_s`` to finish, leases go back to the queue. A restart folds
every seed from the log and goes on; nothing recorded is paid again.

``/healthz`` and ``/metrics`` (Prometheus) are served on ``daemon.metrics_host:metrics_port``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
import structlog

from agents.fleet import (
    INDEX,
    SEED,
    FleetWorker,
    WorkerReport,
    index_item,
    release_free_memory,
)
from playlisteval import runs
from playlisteval.app import App
from playlisteval.metrics import LogMetrics, MetricsServer, daemon_registry
from store.catalog import INDEXED, READY
from store.coordination import LeaseHeld
from store.errors import PlaylistEvalError
from store.events import RunFinished, run_stream
from tools.index.indexer import Indexer

logger = structlog.get_logger("playlisteval.daemon")


def rss_bytes() -> int | None:
    """This process's resident memory (Linux ``/proc``; None elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


STATE_FILE = "daemon.json"
LOCK_FILE = "serve.lock"


class DaemonRunning(LeaseHeld):
    """Another ``serve`` holds the workspace (a :class:`LeaseHeld`: the command exits 3, busy);
    the message names it by pid, host and start."""

    def __init__(self, root: Path, info: dict[str, Any]) -> None:
        super().__init__(str(root), "serve", info, 0.0)
        since = info.get("since")
        self.args = (
            f"another `playlisteval serve` runs on the workspace {str(root)!r} (pid "
            f"{info.get('pid')!r} on {info.get('host')!r}{f', since {since}' if since else ''}); "
            "one daemon serves a workspace: stop that one first (SIGTERM stops it gracefully)",
        )


@contextlib.contextmanager
def serve_lock(root: Path) -> Iterator[None]:
    """Hold the workspace's ``serve.lock`` while the block runs, or raise
    :class:`DaemonRunning` naming its holder.

    An exclusive ``flock``: the kernel drops it when its holder dies however it dies, so a
    holder that is gone never blocks (the pid it left in the file is read only while someone
    holds the lock, never trusted on its own); it belongs to the open file, not the process, so
    a second daemon in the same process is refused too.
    Two schedulers on one workspace would both write ``daemon.json`` and open runs over the
    same fresh seeds."""
    path = root / LOCK_FILE
    with path.open("a+", encoding="utf-8") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DaemonRunning(root, _holder(file)) from None
        try:
            file.seek(0)
            file.truncate()
            since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            info = {"pid": os.getpid(), "host": os.uname().nodename, "since": since}
            file.write(json.dumps(info) + "\n")
            file.flush()
            yield
        finally:
            file.seek(0)
            file.truncate()
            fcntl.flock(file, fcntl.LOCK_UN)


def _holder(file: IO[str]) -> dict[str, Any]:
    """What the lock's holder wrote of itself (nothing yet: it is writing it right now)."""
    file.seek(0)
    try:
        found = json.loads(file.read() or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


@dataclass
class DaemonState:
    """What the daemon remembers between restarts (``<home>/daemon.json``); the log and the
    queue hold everything else."""

    playlists_mtime: float | None = None
    seeded_videos: list[str] = field(default_factory=list)
    last_export_at: float = 0.0
    exported_runs: list[str] = field(default_factory=list)


@dataclass
class TickSummary:
    """What one tick did."""

    videos_added: int = 0
    index_jobs_queued: int = 0
    seeds_computed: bool = False
    run_started: str | None = None
    seeds_queued: int = 0
    exported: str | None = None
    errors: list[str] = field(default_factory=list)


class Daemon:
    """The scheduler, its optional in-process worker and its metrics endpoint."""

    def __init__(
        self,
        app: App,
        *,
        work: bool | None = None,
        playlists_file: Path | None = None,
        concurrency: int | None = None,
        worker_name: str | None = None,
        metrics_port: int | None = None,
        on_tick: Callable[[int, TickSummary], None] | None = None,
    ) -> None:
        self.app = app
        # Told of every tick (its number and what it did), in a worker thread: `serve` prints
        # one status line per tick from it.
        self.on_tick = on_tick
        settings = app.settings.daemon
        self.work = settings.work if work is None else work
        file = playlists_file or settings.playlists_file
        if file is not None and not Path(file).is_absolute():
            file = app.workspace.root / file
        self.playlists_file = None if file is None else Path(file)
        self.concurrency = concurrency
        self.worker_name = worker_name
        self.metrics_port = settings.metrics_port if metrics_port is None else metrics_port
        self.state_path = app.workspace.root / STATE_FILE
        self.state = self._load_state()
        self._index_lock = threading.Lock()
        self._indexer: Indexer | None = None
        self.ticks = 0
        self.last_tick_at: float | None = None
        self.last_tick: TickSummary | None = None
        self.worker: FleetWorker | None = None
        self.worker_report: WorkerReport | None = None
        self.metrics = LogMetrics(app.events)
        self.server: MetricsServer | None = None

    # -- state ------------------------------------------------------------------------------------

    def _load_state(self) -> DaemonState:
        if not self.state_path.exists():
            return DaemonState()
        try:
            return DaemonState(**json.loads(self.state_path.read_text()))
        except (ValueError, TypeError) as exc:
            logger.warning("daemon_state_unreadable", path=str(self.state_path), error=str(exc))
            return DaemonState()

    def _save_state(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.state), indent=2))
        tmp.replace(self.state_path)

    # -- running ----------------------------------------------------------------------------------

    async def run(self, stop: anyio.Event) -> None:
        """Serve until ``stop`` is set, then stop gracefully; :class:`DaemonRunning` when
        another daemon serves the workspace."""
        with serve_lock(self.app.workspace.root):
            await self._serve(stop)

    async def _serve(self, stop: anyio.Event) -> None:
        app = self.app
        await anyio.to_thread.run_sync(app.set_budget_caps)
        if self.metrics_port:
            registry = daemon_registry(self.metrics, app.queue(), app.accounts())
            self.server = MetricsServer(
                registry,
                self.health,
                host=app.settings.daemon.metrics_host,
                port=self.metrics_port,
            )
            logger.info("metrics_serving", url=self.server.url)
        if self.work:
            self.worker = app.fleet_worker(
                app.fleet_config(self.worker_name),
                concurrency=self.concurrency,
                index_job=self.index_job,
            )
        logger.info("daemon_starts", work=self.work, playlists=str(self.playlists_file))
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._ticks, stop)
                if self.worker is not None:
                    worker = self.worker

                    async def work() -> None:
                        self.worker_report = await worker.work(stop)

                    group.start_soon(work)
        finally:
            if self.server is not None:
                self.server.close()
        logger.info("daemon_stops", ticks=self.ticks)

    async def _ticks(self, stop: anyio.Event) -> None:
        tick_s = self.app.settings.daemon.tick_s
        while not stop.is_set():
            summary = await anyio.to_thread.run_sync(self.tick)
            self.last_tick = summary
            self.last_tick_at = time.time()
            self.ticks += 1
            if self.on_tick is not None:
                await anyio.to_thread.run_sync(self.on_tick, self.ticks, summary)
            with anyio.move_on_after(tick_s):
                await stop.wait()

    def index_job(self, video_id: str) -> str:
        """One indexing job (a worker thread): index one video under the index lock (the
        embedded Qdrant engines take one writer)."""
        with self._index_lock:
            return self._the_indexer().index_video(video_id)

    def _the_indexer(self) -> Indexer:
        if self._indexer is None:
            self._indexer = self.app.indexer()
        return self._indexer

    def tick(self) -> TickSummary:
        """One round of scheduling. A failing step is logged and recorded in the summary; the
        others still run, and the next tick tries again."""
        summary = TickSummary()
        for step in (self._caps, self._playlists, self._media, self._seeds, self._runs):
            try:
                step(summary)
            except (PlaylistEvalError, OSError, ValueError) as exc:
                logger.warning("tick_step_failed", step=step.__name__, error=str(exc))
                summary.errors.append(f"{step.__name__.strip('_')}: {exc}")
        try:
            self._export(summary)
        except (PlaylistEvalError, OSError, ValueError) as exc:
            logger.warning("scheduled_export_failed", error=str(exc))
            summary.errors.append(f"export: {exc}")
        self._save_state()
        release_free_memory()
        if summary.run_started or summary.index_jobs_queued or summary.exported:
            logger.info("tick", **{k: v for k, v in asdict(summary).items() if v})
        return summary

    def _caps(self, _summary: TickSummary) -> None:
        self.app.set_budget_caps()  # today's account exists before the day's first call

    def _playlists(self, summary: TickSummary) -> None:
        file = self.playlists_file
        if file is None:
            return
        if not file.exists():
            raise PlaylistEvalError(
                f"the playlists file {str(file)!r} does not exist; create it (a manifest as for "
                "`playlisteval add`) or set daemon.playlists_file"
            )
        mtime = file.stat().st_mtime
        if mtime == self.state.playlists_mtime:
            return
        with self._index_lock:
            added = self._the_indexer().add(str(file), domain=None)
        summary.videos_added = added.videos
        self.state.playlists_mtime = mtime

    def _media(self, summary: TickSummary) -> None:
        with self._index_lock:
            self._the_indexer().prepare_media()
        ready = self.app.catalog.videos(statuses=[READY])
        summary.index_jobs_queued = self.app.queue().enqueue([index_item(v.id) for v in ready])

    def _seeds(self, summary: TickSummary) -> None:
        counts = self.app.queue().counts()
        open_index = sum(
            n
            for (kind, state), n in counts.items()
            if kind == INDEX and state not in ("done", "parked")
        )
        if open_index:
            return
        indexed = sorted(v.id for v in self.app.catalog.videos(statuses=[INDEXED]))
        if indexed == self.state.seeded_videos:
            return
        with self._index_lock:
            indexer = self._the_indexer()
            indexer.dedupe()
            indexer.backfill()  # a domain a duplicate left short takes its next videos
            indexer.compute_seeds()
        self.state.seeded_videos = indexed
        summary.seeds_computed = True

    def _runs(self, summary: TickSummary) -> None:
        queue = self.app.queue()
        if any(item.state in ("queued", "leased") for item in queue.items(kind=SEED)):
            return  # one run at a time: the next opens once this one's seeds are all claimed
        opened = runs.queue_fresh_seeds(
            self.app, self.app.settings.daemon.max_seeds_per_run, concurrency=self.concurrency
        )
        if opened is not None:
            summary.run_started, summary.seeds_queued = opened

    def _export(self, summary: TickSummary) -> None:
        settings = self.app.settings.daemon
        every = settings.export_every_s
        now = time.time()
        if every <= 0 or now - self.state.last_export_at < every:
            return
        finished = self._finished_runs()
        todo = [r for r in finished if r not in self.state.exported_runs]
        if not todo:
            return
        run_id = todo[-1]
        out = (settings.export_dir or self.app.workspace.exports / "daemon") / run_id
        runs.export(self.app, Path(out), run_id)
        self.state.exported_runs.append(run_id)
        self.state.last_export_at = now
        summary.exported = str(out)

    def _finished_runs(self) -> list[str]:
        """Runs with a RunFinished and at least one accepted item, oldest first."""
        found: list[tuple[int, str]] = []
        store = self.app.events
        for stored in store.read_all(types=["RunFinished"]):
            event = stored.event()
            if isinstance(event, RunFinished) and event.accepted > 0:
                found.append((stored.seq, event.run_id))
        return [run for _, run in sorted(found) if store.stream_version(run_stream(run))]

    # -- health -----------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``ok`` while ticks happen on time and the store answers; ``degraded`` otherwise."""
        tick_s = self.app.settings.daemon.tick_s
        age = None if self.last_tick_at is None else time.time() - self.last_tick_at
        problems: list[str] = []
        try:
            counts = self.app.queue().counts()
        except Exception as exc:  # the database is away
            counts = {}
            problems.append(f"store: {exc}")
        if age is not None and age > 3 * tick_s + 60:
            problems.append(f"no tick for {age:.0f} s")
        if self.last_tick is not None and self.last_tick.errors:
            problems.extend(self.last_tick.errors)
        return {
            "status": "ok" if not problems else "degraded",
            "pid": os.getpid(),
            "rss_bytes": rss_bytes(),
            "ticks": self.ticks,
            "last_tick_age_s": None if age is None else round(age, 3),
            "worker": None if self.worker is None else self.worker.state,
            "queue": {f"{kind}:{state}": n for (kind, state), n in sorted(counts.items())},
            "problems": problems,
        }
