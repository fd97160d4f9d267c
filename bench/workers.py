"""Fleet throughput: 1, 2 and 4 ``playlisteval worker`` processes against one PostgreSQL store.

Each worker count gets a fresh PostgreSQL schema (dropped afterwards) holding the event store
and the queue; the catalogue, media and clip cache stay in one shared bench workspace (workers
on one machine share them). ``--seeds`` seeds are queued as one run, then ``n`` worker
processes start together, each with ``--concurrency`` seeds in flight, against the offline
provider holding every call ``--latency`` seconds (``curation.offline_latency_s``: a
latency-bound stand-in for a live provider).

Throughput is read from the event store itself: CallRecorded events per second by their
``recorded_at``, in a steady window that starts one latency period after the last worker to
start recorded its first call (ramp-up excluded) and lasts ``--duration`` seconds. Beside it:
the same by Little's law (mean calls in flight over mean call duration, which does not depend
on where the bursts of a fixed latency fall), seeds finished (accepted or discarded) per second
in the same window, the CPU per call and the cores used by the worker processes, by the
PostgreSQL backends serving them and by the whole machine (``/proc``, sampled at the window's
ends), and the ideal, ``n × concurrency / latency`` calls/s.

Baseline: one worker, measured in the same run. Target: throughput(4) / throughput(1) ≥ 3.2.
Before the timed runs one warm pass (one worker, no latency, one seed per distinct segment
pair) cuts every clip into the workspace's clip cache, so no timed run cuts clips.

Run: `.venv/bin/python bench/workers.py [--workers 1,2,4] [--latency 2] [--concurrency 8]
[--duration 30] [--seeds 600] [--pg-url URL] [--root DIR]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine
from curate import bench_seeds, open_workspace, segment_pairs
from sqlalchemy import create_engine, text

from agents.fleet import start_run
from playlisteval.app import App, curation_config
from store.catalog import SeedRow
from store.coordination import WorkQueue
from store.eventstore import EventStore, open_event_store

REPO = Path(__file__).resolve().parent.parent
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TARGET = 3.2
STARTUP_TIMEOUT_S = 180.0  # worker processes importing on a busy 2-core machine
POLL_S = 0.2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# Each seed's calls, in the order its loop makes them, joined to the worker holding the seed.
FIRST_CALL_BY_OWNER = text(
    """
    SELECT w.owner, min(e.recorded_at)
    FROM events e JOIN work_items w
      ON e.stream = 'seed-' || w.run_id || '-' || substring(w.id FROM 6)
    WHERE e.type = 'CallRecorded' AND w.owner IS NOT NULL
    GROUP BY w.owner
    """
)
# Each call's span, from its reservation (just before it goes out) to its record, clipped to
# the window: their sum over the window's length is the mean number of calls in flight.
CALLS_IN_FLIGHT = text(
    """
    WITH spans AS (
      SELECT r.recorded_at AS t0, c.recorded_at AS t1
      FROM events c JOIN events r
        ON r.stream = c.stream AND r.type = 'CallReserved'
        AND r.data ->> 'call_id' = c.data ->> 'call_id'
      WHERE c.type = 'CallRecorded' AND c.recorded_at > :lo AND r.recorded_at < :hi
    )
    SELECT
      sum(extract(epoch FROM least(t1, :hi) - greatest(t0, :lo))),
      avg(extract(epoch FROM t1 - t0)) FILTER (WHERE t1 >= :lo AND t1 < :hi)
    FROM spans
    """
)
EVENTS_BETWEEN = text(
    "SELECT count(*) FROM events WHERE type = ANY(:types) AND recorded_at >= :lo "
    "AND recorded_at < :hi"
)
BACKENDS_OF = text("SELECT pid FROM pg_stat_activity WHERE application_name = :name")
NEVER_CLAIMED = text("SELECT count(*) FROM work_items WHERE kind = 'seed' AND claims = 0")
PARKED = text("SELECT id, result FROM work_items WHERE state = 'parked' ORDER BY id LIMIT 5")


class BenchError(Exception):
    """The run could not measure what it set out to (a worker failed, the queue ran dry…)."""


# -- CPU from /proc ------------------------------------------------------------------------------


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads); 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def machine_busy_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, over all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values) - idle) / CLOCK_TICKS, sum(values) / CLOCK_TICKS


@dataclass(frozen=True)
class CpuSample:
    """CPU counters at one instant: per process (the workers, and the PostgreSQL backends
    serving them) and for the whole machine."""

    at: datetime
    workers: dict[int, float]
    backends: dict[int, float]
    machine_busy_s: float
    machine_total_s: float

    @classmethod
    def take(cls, worker_pids: Sequence[int], backend_pids: Sequence[int]) -> CpuSample:
        """Read the counters now."""
        busy, total = machine_busy_s()
        return cls(
            at=datetime.now(UTC),
            workers={pid: process_cpu_s(pid) for pid in worker_pids},
            backends={pid: process_cpu_s(pid) for pid in backend_pids},
            machine_busy_s=busy,
            machine_total_s=total,
        )

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        """CPU seconds the processes alive at ``after`` used since ``before`` (one that started
        in between counts from zero)."""
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


# -- one schema, its seeds and its workers -------------------------------------------------------


@contextmanager
def new_schema(pg_url: str, prefix: str) -> Iterator[str]:
    """A new PostgreSQL schema's name (``prefix`` and a random suffix); the schema and
    everything in it dropped afterwards."""
    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    try:
        yield schema
    finally:
        engine = create_engine(pg_url)
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()


@contextmanager
def fresh_schema(app: App, pg_url: str, label: str) -> Iterator[tuple[str, EventStore]]:
    """A new PostgreSQL schema with the event store (and queue) in it, chained under the
    workspace's log key as its workers' is; dropped afterwards."""
    with new_schema(pg_url, f"bench_workers_{label}") as schema:
        store = open_event_store(pg_url, schema=schema, key=app.log_key())
        try:
            yield schema, store
        finally:
            store.engine.dispose()


def queue_seeds(app: App, store: EventStore, run_id: str, seeds: Sequence[SeedRow]) -> None:
    """Open run ``run_id`` over ``seeds`` and queue them for the workers."""
    queued = start_run(
        store,
        WorkQueue(store.engine),
        run_id,
        seeds,
        budget_micros=None,
        per_seed_micros=None,
        config=curation_config(app.settings),
    )
    if queued != len(seeds):
        raise BenchError(f"queued {queued} of {len(seeds)} seeds: seed ids must be unique")


@dataclass
class Fleet:
    """Worker processes started together over one schema."""

    processes: list[subprocess.Popen[bytes]]
    names: list[str]
    logs: list[Path]

    @classmethod
    def start(
        cls,
        *,
        count: int,
        root: Path,
        pg_url: str,
        schema: str,
        latency: float,
        concurrency: int,
        stop_after: float,
        exit_when_idle: bool = False,
    ) -> Fleet:
        """``count`` ``playlisteval worker`` processes on the shared workspace ``root``, their
        store and queue in ``schema``."""
        env = dict(os.environ)
        env.update(
            {
                "PLAYLISTEVAL_STORE__URL": pg_url,
                "PLAYLISTEVAL_STORE__SCHEMA_NAME": schema,
                "PLAYLISTEVAL_CURATION__OFFLINE": "true",
                "PLAYLISTEVAL_CURATION__OFFLINE_LATENCY_S": repr(latency),
                "PLAYLISTEVAL_CURATION__CONCURRENCY": str(concurrency),
                "PGAPPNAME": schema,  # libpq: marks the PostgreSQL backends serving them
            }
        )
        log_dir = root / "worker-logs"
        log_dir.mkdir(exist_ok=True)
        processes, names, logs = [], [], []
        for k in range(1, count + 1):
            name = f"w{k}"
            log = log_dir / f"{schema}-{name}.log"
            command = [
                sys.executable,
                "-m",
                "playlisteval",
                "worker",
                "--home",
                str(root),
                "--name",
                name,
                "--stop-after",
                f"{stop_after:.0f}",
            ]
            if exit_when_idle:
                command.append("--exit-when-idle")
            with log.open("wb") as out:
                processes.append(
                    subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=out)
                )
            names.append(name)
            logs.append(log)
        return cls(processes, names, logs)

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids."""
        return [p.pid for p in self.processes]

    def check_alive(self) -> None:
        """Raise when a worker has already exited."""
        for process, log in zip(self.processes, self.logs, strict=True):
            if process.poll() is not None:
                raise BenchError(
                    f"worker exited early with status {process.returncode}; its log {log}:\n"
                    + tail(log)
                )

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM every worker (a graceful stop) and wait; raise when one failed."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        self.wait(timeout)

    def wait(self, timeout: float) -> None:
        """Wait for every worker to exit; raise when one failed or hangs."""
        deadline = time.monotonic() + timeout
        for process, log in zip(self.processes, self.logs, strict=True):
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise BenchError(
                    f"worker did not stop within {timeout:g} s; its log {log}"
                ) from None
            if process.returncode != 0:
                raise BenchError(
                    f"worker exited with status {process.returncode}; its log {log}:\n" + tail(log)
                )

    def kill(self) -> None:
        """End any worker still running (after an error)."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- the warm pass and the timed runs ----------------------------------------------------------


def warm_clips(app: App, root: Path, pg_url: str, concurrency: int) -> float:
    """One worker, no latency, one seed per distinct segment pair, until the queue is empty:
    every clip a timed run needs is cut into the clip cache. Returns the seconds it took."""
    pairs = segment_pairs(app.catalog.segments())
    rows = bench_seeds(app, len(pairs))
    start = time.perf_counter()
    with fresh_schema(app, pg_url, "warm") as (schema, store):
        queue_seeds(app, store, "bench-workers-warm", rows)
        fleet = Fleet.start(
            count=1,
            root=root,
            pg_url=pg_url,
            schema=schema,
            latency=0.0,
            concurrency=concurrency,
            stop_after=600,
            exit_when_idle=True,
        )
        try:
            fleet.wait(620)
        finally:
            fleet.kill()
        with store.engine.connect() as conn:
            parked = conn.execute(PARKED).all()
        if parked:
            raise BenchError(
                f"the warm pass parked seeds (first ones: {parked!r}); see {fleet.logs[0]}"
            )
    return time.perf_counter() - start


@dataclass(frozen=True)
class Figures:
    """One worker count's measurement."""

    workers: int
    ideal_calls_per_s: float
    calls_per_s: float
    little_calls_per_s: float
    seeds_per_s: float
    ramp_s: float
    worker_cpu_ms_per_call: float
    postgres_cpu_ms_per_call: float
    worker_cores: float
    postgres_cores: float
    machine_busy: float  # fraction of all cores, any process

    @property
    def of_ideal(self) -> float:
        """Achieved over ideal."""
        return self.calls_per_s / self.ideal_calls_per_s


def little_calls_per_s(store: EventStore, lo: datetime, hi: datetime) -> float:
    """Calls/s by Little's law: mean calls in flight over ``[lo, hi)`` / mean call duration.
    Unlike a count, it does not depend on where the bursts of a fixed latency fall."""
    with store.engine.connect() as conn:
        busy, duration = conn.execute(CALLS_IN_FLIGHT, {"lo": lo, "hi": hi}).one()
    if not busy or not duration:
        return 0.0
    return float(busy) / (hi - lo).total_seconds() / float(duration)


def count_events(store: EventStore, types: Sequence[str], lo: datetime, hi: datetime) -> int:
    """Events of ``types`` recorded in ``[lo, hi)``."""
    with store.engine.connect() as conn:
        return int(
            conn.execute(EVENTS_BETWEEN, {"types": list(types), "lo": lo, "hi": hi}).scalar_one()
        )


def measure(
    app: App,
    root: Path,
    *,
    workers: int,
    seeds: Sequence[SeedRow],
    pg_url: str,
    latency: float,
    concurrency: int,
    duration: float,
) -> Figures:
    """Start ``workers`` processes over a fresh schema and measure the steady window."""
    with fresh_schema(app, pg_url, f"{workers}w") as (schema, store):
        queue_seeds(app, store, f"bench-workers-{workers}", seeds)
        started = datetime.now(UTC)
        fleet = Fleet.start(
            count=workers,
            root=root,
            pg_url=pg_url,
            schema=schema,
            latency=latency,
            concurrency=concurrency,
            # A bound only: the bench stops the workers itself once the window is over.
            stop_after=STARTUP_TIMEOUT_S + latency + duration + 60,
        )
        try:
            first = first_calls(store, fleet, workers)
            lo = max(first.values()) + _seconds(latency)
            hi = lo + _seconds(duration)
            sample_lo: CpuSample | None = None
            while (now := datetime.now(UTC)) < hi:
                fleet.check_alive()
                if sample_lo is None and now >= lo:
                    sample_lo = take_sample(store, fleet, schema)
                time.sleep(POLL_S)
            sample_hi = take_sample(store, fleet, schema)
            fleet.stop()
        finally:
            fleet.kill()
        if sample_lo is None:
            raise BenchError(f"the window of {workers} workers passed unseen; lower the load")
        calls = count_events(store, ["CallRecorded"], lo, hi)
        finished = count_events(store, ["ItemAccepted", "SeedDiscarded"], lo, hi)
        sampled = (sample_hi.at - sample_lo.at).total_seconds()
        sampled_calls = count_events(store, ["CallRecorded"], sample_lo.at, sample_hi.at)
        with store.engine.connect() as conn:
            never_claimed = int(conn.execute(NEVER_CLAIMED).scalar_one())
        if never_claimed == 0:
            raise BenchError(
                f"{workers} workers claimed every one of the {len(seeds)} seeds: the queue may "
                "have run dry during the window; raise --seeds"
            )
        if calls == 0 or sampled_calls == 0:
            raise BenchError(f"{workers} workers recorded no call in the window; see their logs")
        worker_s = CpuSample.used(sample_lo.workers, sample_hi.workers)
        backend_s = CpuSample.used(sample_lo.backends, sample_hi.backends)
        busy = sample_hi.machine_busy_s - sample_lo.machine_busy_s
        total = sample_hi.machine_total_s - sample_lo.machine_total_s
        return Figures(
            workers=workers,
            ideal_calls_per_s=workers * concurrency / latency,
            calls_per_s=calls / duration,
            little_calls_per_s=little_calls_per_s(store, lo, hi),
            seeds_per_s=finished / duration,
            ramp_s=(lo - started).total_seconds(),
            worker_cpu_ms_per_call=1e3 * worker_s / sampled_calls,
            postgres_cpu_ms_per_call=1e3 * backend_s / sampled_calls,
            worker_cores=worker_s / sampled,
            postgres_cores=backend_s / sampled,
            machine_busy=busy / total if total > 0 else 0.0,
        )


def take_sample(store: EventStore, fleet: Fleet, schema: str) -> CpuSample:
    """The CPU counters of the workers and of the PostgreSQL backends serving them (their
    connections carry the schema's name as application name)."""
    with store.engine.connect() as conn:
        backends = conn.execute(BACKENDS_OF, {"name": schema}).scalars().all()
    return CpuSample.take(fleet.pids, [int(pid) for pid in backends])


def _seconds(s: float) -> timedelta:
    return timedelta(seconds=s)


def first_calls(store: EventStore, fleet: Fleet, workers: int) -> dict[str, datetime]:
    """Wait until every worker has recorded its first call; when each did."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        fleet.check_alive()
        with store.engine.connect() as conn:
            found = {str(owner): at for owner, at in conn.execute(FIRST_CALL_BY_OWNER).all()}
        if all(name in found for name in fleet.names):
            return {name: found[name] for name in fleet.names}
        if time.monotonic() > deadline:
            missing = [name for name in fleet.names if name not in found]
            raise BenchError(
                f"workers {missing} recorded no call within {STARTUP_TIMEOUT_S:g} s of starting "
                f"({workers} started); see {fleet.logs[0].parent}"
            )
        time.sleep(POLL_S)


# -- all of it ---------------------------------------------------------------------------------


def run(
    *,
    workers: Sequence[int],
    latency: float,
    concurrency: int,
    duration: float,
    seeds: int,
    pg_url: str,
    root: Path,
) -> list[Figures]:
    """The warm pass, then one measurement per worker count."""
    root = root.expanduser().resolve()
    shutil.rmtree(root / "worker-logs", ignore_errors=True)  # an earlier run's
    with open_workspace(root) as app:
        warm_s = warm_clips(app, root, pg_url, concurrency)
        print(f"warm pass (every clip cut once): {warm_s:.1f} s", flush=True)
        rows = bench_seeds(app, seeds)
        results = []
        for n in workers:
            figures = measure(
                app,
                root,
                workers=n,
                seeds=rows,
                pg_url=pg_url,
                latency=latency,
                concurrency=concurrency,
                duration=duration,
            )
            print(
                f"{n} worker(s): {figures.calls_per_s:.2f} calls/s "
                f"(ramp {figures.ramp_s:.1f} s before the window)",
                flush=True,
            )
            results.append(figures)
    return results


def report(results: Sequence[Figures], *, latency: float, concurrency: int) -> None:
    """The table, the ratios to one worker and whether the target was reached."""
    cores = os.cpu_count() or 1
    columns = [
        ("workers", 7),
        ("calls/s", 8),
        ("Little", 6),
        ("ideal", 7),
        ("/ideal", 6),
        ("ratio", 6),
        ("seeds/s", 7),
        ("worker ms/call", 14),
        ("pg ms/call", 10),
        ("worker cores", 12),
        ("pg cores", 8),
        ("machine busy", 12),
    ]
    print(f"\nlatency {latency:g} s, {concurrency} seeds in flight per worker, {cores} cores")
    print(" ".join(f"{name:>{width}}" for name, width in columns))
    base = next((f for f in results if f.workers == 1), None)
    for f in results:
        values = [
            f"{f.workers}",
            f"{f.calls_per_s:.2f}",
            f"{f.little_calls_per_s:.2f}",
            f"{f.ideal_calls_per_s:.2f}",
            f"{f.of_ideal:.2f}",
            f"{f.calls_per_s / base.calls_per_s:.2f}" if base else "—",
            f"{f.seeds_per_s:.2f}",
            f"{f.worker_cpu_ms_per_call:.1f}",
            f"{f.postgres_cpu_ms_per_call:.1f}",
            f"{f.worker_cores:.2f}",
            f"{f.postgres_cores:.2f}",
            f"{f.machine_busy:.0%}",
        ]
        print(" ".join(f"{v:>{width}}" for v, (_, width) in zip(values, columns, strict=True)))
    four = next((f for f in results if f.workers == 4), None)
    if base is None or four is None:
        print("\nno ratio at 4 workers (measure 1 and 4 for the target)")
        return
    ratio = four.calls_per_s / base.calls_per_s
    reached = "reached" if ratio >= TARGET else "NOT reached"
    little = four.little_calls_per_s / base.little_calls_per_s if base.little_calls_per_s else 0.0
    print(
        f"\nthroughput(4) / throughput(1) = {ratio:.2f}: target ≥ {TARGET} {reached} "
        f"(by Little's law: {little:.2f})"
    )
    print(
        f"4 workers used {four.worker_cores:.2f} of the {cores} cores "
        f"({four.worker_cores / cores:.0%}); PostgreSQL {four.postgres_cores:.2f}; "
        f"the machine was {four.machine_busy:.0%} busy"
    )


def main() -> None:
    """Print the machine, each worker count's figures and the ratios to one worker."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per simulated call")
    parser.add_argument("--concurrency", type=int, default=8, help="seeds in flight per worker")
    parser.add_argument("--duration", type=float, default=30.0, help="measured window (s)")
    parser.add_argument("--seeds", type=int, default=600, help="seeds queued per worker count")
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--root", type=Path, default=Path("/tmp/playlisteval-bench-workers"))
    args = parser.parse_args()
    counts = [int(part) for part in args.workers.split(",") if part.strip()]
    if not counts or min(counts) < 1 or args.latency <= 0 or args.duration <= 0:
        parser.error("--workers needs counts ≥ 1; --latency and --duration must be positive")
    print(f"machine: {machine()}", flush=True)
    try:
        results = run(
            workers=counts,
            latency=args.latency,
            concurrency=args.concurrency,
            duration=args.duration,
            seeds=args.seeds,
            pg_url=args.pg_url,
            root=args.root,
        )
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc
    report(results, latency=args.latency, concurrency=args.concurrency)


if __name__ == "__main__":
    main()
