"""Fleet-wide rate limits: every worker together stays under one family's requests and tokens per
minute, and a ``Retry-After`` one worker is given holds them all
(``policies.ratelimits.SharedRateLimiter`` over ``store.coordination.RateWindows``).

The window's arithmetic runs on a fake clock on SQLite and PostgreSQL; the fleet test runs four
real worker processes (``tests/fleet_rate_worker.py``) on PostgreSQL against the OpenAI fake,
which logs when every request arrived.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

import anyio
import anyio.lowlevel
import pytest
from sqlalchemy import Engine, create_engine

from policies.ratelimits import RateLimiter, SharedRateLimiter
from store.coordination import RateWindows
from store.errors import ConfigError
from store.eventstore import open_event_store
from tests import fakes_openai
from tests.conftest import PG_URL
from tests.fakes_openai import openai_harness
from tests.fakes_providers import FakeProviderServer

ROOT = Path(__file__).resolve().parent.parent


class FakeTime:
    """A clock that moves only when someone sleeps on it (or a test sets it)."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await anyio.lowlevel.checkpoint()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """The coordination database of an event store on a SQLite file or in a fresh PostgreSQL
    schema."""
    if request.param == "sqlite":
        store = open_event_store(tmp_path / "events.db")
    else:
        store = open_event_store(PG_URL, schema=request.getfixturevalue("pg_schema"))
    yield store.engine
    store.close()


def busiest_window(times: Sequence[float], window_s: float = 60.0) -> int:
    """The most of ``times`` any half-open window ``[t, t + window_s)`` holds."""
    ordered = sorted(times)
    return max((sum(1 for u in ordered if t <= u < t + window_s) for t in ordered), default=0)


def admitted_at(
    limiter: RateLimiter | SharedRateLimiter, clock: FakeTime, wishes: Sequence[float]
) -> list[float]:
    """When each of a caller's requests is let through, asking at the times ``wishes`` (or as
    soon as the previous one went, when that is later)."""
    admitted: list[float] = []

    async def main() -> None:
        for wish in wishes:
            clock.now = max(clock.now, wish)
            async with limiter.slot():
                admitted.append(clock.now)

    anyio.run(main)
    return admitted


WISHES = [1_000.0 + 10 * n for n in range(10)]  # a request every 10 s, for 100 s


def test_no_window_holds_more_than_rpm_requests(engine: Engine) -> None:
    clock = FakeTime()
    limiter = SharedRateLimiter(engine, "openai", rpm=3, sleep=clock.sleep, clock=clock)
    admitted = admitted_at(limiter, clock, WISHES)
    # The 4th waits for the 1st to leave the window (60 s after it), and so on.
    assert admitted == [1000, 1010, 1020, 1060, 1070, 1080, 1120, 1130, 1140, 1180]
    assert busiest_window(admitted) == 3
    assert limiter.waited_s == pytest.approx(150)  # from each wish (or the one before) to its turn


def test_a_token_bucket_lets_through_more_than_rpm_in_a_minute_which_is_why_a_log() -> None:
    clock = FakeTime()
    bucket = RateLimiter(rpm=3, clock=clock, sleep=clock.sleep)
    admitted = admitted_at(bucket, clock, [1_000.0, 1_000.0, 1_000.0, *WISHES[1:]])
    assert busiest_window(admitted) > 3  # a full bucket at once, then its refill


def test_tokens_per_window_and_a_request_larger_than_a_window_waits_for_an_empty_one(
    engine: Engine,
) -> None:
    clock = FakeTime()
    limiter = SharedRateLimiter(engine, "openai", tpm=100, sleep=clock.sleep, clock=clock)
    admitted: list[float] = []

    async def main() -> None:
        for tokens in (60, 50, 500, 1):
            async with limiter.slot(tokens):
                admitted.append(clock.now)

    anyio.run(main)
    # 50 more than 100 with the 60 in: until the 60 leave; 500 counts as a whole window (100)
    # and waits for the 50 to leave; then 1 waits for those 100.
    assert admitted == [1000, 1060, 1120, 1180]


def test_a_pause_holds_every_worker_of_the_key_and_only_that_key(engine: Engine) -> None:
    clock = FakeTime()
    worker_a, worker_b = (
        SharedRateLimiter(engine, "openai", rpm=100, sleep=clock.sleep, clock=clock)
        for _ in range(2)
    )
    other = SharedRateLimiter(engine, "gemini", rpm=100, sleep=clock.sleep, clock=clock)
    times: dict[str, float] = {}

    async def main() -> None:
        await worker_a.pause(7)
        await worker_a.pause(2)  # a shorter pause does not cut the longer one short
        async with other.slot():
            times["gemini"] = clock.now
        async with worker_b.slot():
            times["openai"] = clock.now

    anyio.run(main)
    assert times == {"gemini": 1000, "openai": 1007}
    assert worker_b.waited_s == 7
    assert worker_a.windows.paused_until("openai") == 1007


def test_the_log_keeps_only_the_window(engine: Engine) -> None:
    clock = FakeTime()
    limiter = SharedRateLimiter(engine, "openai", rpm=2, sleep=clock.sleep, clock=clock)
    admitted_at(limiter, clock, [1_000.0 + 45 * n for n in range(8)])
    logged = RateWindows(engine).logged("openai")
    assert 1 <= len(logged) <= 2
    assert all(at > clock.now - 60 for at in logged)


def test_on_the_databases_clock_the_third_of_two_per_half_second_waits(engine: Engine) -> None:
    limiter = SharedRateLimiter(engine, "openai", rpm=2, window_s=0.5)
    went: list[float] = []

    async def main() -> None:
        for _ in range(3):
            async with limiter.slot():
                went.append(time.monotonic())

    anyio.run(main)
    assert went[2] - went[0] >= 0.45  # the 1st left the window before the 3rd went
    assert limiter.waited_s > 0.3


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"rpm": 0}, "rate limits must be > 0"),
        ({"tpm": -5}, "rate limits must be > 0"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1"),
        ({"window_s": 0.0}, "window_s must be > 0"),
    ],
)
def test_bad_limits_are_refused(limits: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SharedRateLimiter(create_engine("sqlite://"), "openai", **limits)  # type: ignore[arg-type]


# -- the fleet ------------------------------------------------------------------------------------

WORKERS = 4
TASKS = 2  # callers per worker (and its in-flight cap)
RPM = 60
LATENCY_S = 0.5  # each answer takes this long: a worker sends 4 a second at most
RUN_S = 12.0  # 4 workers × 4 a second want ~190 requests; the minute allows 60
FAULT_AFTER = 8  # the 429 answers a request after this many
RETRY_AFTER_S = 3  # what the fake's 429 asks for (its usual 7 s would take half the run)
GRACE_S = 1.0  # what was let through before the 429's worker stored its pause arrives by then


def _launch(schema: str, base_url: str, log: IO[str]) -> subprocess.Popen[str]:
    """The workers (``tests/fleet_rate_worker.py`` forks them from one launcher)."""
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.fleet_rate_worker", "--workers", str(WORKERS)),
            *("--store", PG_URL, "--schema", schema, "--base-url", base_url),
            *("--rpm", str(RPM), "--tasks", str(TASKS), "--seconds", str(RUN_S)),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )


def _wait_ready(launcher: subprocess.Popen[str], log: Path, timeout: float = 90.0) -> None:
    """Until every worker said it is set up."""
    assert launcher.stdout is not None
    give_up = time.monotonic() + timeout
    for _ in range(WORKERS):
        ready, _, _ = select.select([launcher.stdout], [], [], give_up - time.monotonic())
        line = launcher.stdout.readline() if ready else ""
        assert line.strip() == "ready", log.read_text()[-3000:]


def _run_fleet(schema: str, log: Path) -> tuple[FakeProviderServer, str]:
    """Run the workers against the fake; schedule one 429 once they are under way."""
    with openai_harness() as harness:
        server = harness.server
        server.rpm = RPM  # the fake refuses what a provider would (the limiter must avoid it)
        server.latency_s = LATENCY_S
        with log.open("w") as errors:
            launcher = _launch(schema, server.base_url, errors)
        try:
            _wait_ready(launcher, log)
            assert launcher.stdin is not None
            launcher.stdin.write("go\n")
            launcher.stdin.flush()
            give_up = time.monotonic() + RUN_S
            while server.model_requests < FAULT_AFTER and time.monotonic() < give_up:
                time.sleep(0.005)
            server.fail_next("429")
            out = launcher.communicate(timeout=RUN_S + 60)[0]
        finally:
            if launcher.poll() is None:
                launcher.kill()
        assert launcher.returncode == 0, log.read_text()[-3000:]
        return server, out


@pytest.mark.postgres
@pytest.mark.slow
def test_four_worker_processes_keep_one_rpm_and_all_honour_one_retry_after(
    pg_schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 worker processes on PostgreSQL against a fake with rpm 60: in no 60-s window does the
    fake see more than 60 requests; after a 429 with Retry-After, no worker sends before it
    (but what was let through before the worker that got it could say so)."""
    monkeypatch.setattr(fakes_openai, "RETRY_AFTER_S", RETRY_AFTER_S)
    store = open_event_store(PG_URL, schema=pg_schema)  # the schema and tables, before the race
    try:
        RateWindows(store.engine).ensure("openai")
        server, out = _run_fleet(pg_schema, tmp_path / "workers.log")
    finally:
        store.close()
    reports = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(reports) == WORKERS, out
    arrivals = list(server.arrivals)
    times = [a.at for a in arrivals]

    assert len(times) >= 50, reports  # the limit bound: each worker wanted far more than 15
    assert busiest_window(times) <= RPM, reports
    refused = [a for a in arrivals if a.fault == "429"]
    assert len(refused) == 1, reports  # the scheduled one; the fake's own limit never had to
    answered = refused[0].at + LATENCY_S
    before_retry_after = [
        round(a.at - answered, 3) for a in arrivals if answered < a.at < answered + RETRY_AFTER_S
    ]
    # Let through before the pause was stored: at most one per caller still sending (the one
    # that got the 429 waits), all within moments of the 429; nothing later until it expires.
    assert len(before_retry_after) <= WORKERS * TASKS - 1, before_retry_after
    assert all(delay < GRACE_S for delay in before_retry_after), before_retry_after
    assert any(a.at >= answered + RETRY_AFTER_S for a in arrivals)  # and then they went on
    assert sum(r["retries"] for r in reports) == 1, reports
