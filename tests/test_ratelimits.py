"""Rate limits and retry waits, on a virtual clock (no wall-clock waits or thresholds)."""

from __future__ import annotations

import anyio
import pytest

from policies.ratelimits import RateLimiter, RetryPolicy
from store.errors import ConfigError


class VirtualClock:
    """A clock that moves only when a waiter sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await anyio.lowlevel.checkpoint()


def test_retry_after_is_honoured_exactly_and_backoff_doubles_with_bounded_jitter() -> None:
    policy = RetryPolicy(max_retries=5, backoff_s=2.0, max_backoff_s=10.0)
    assert policy.wait_s(1, 7.0) == 7.0
    assert policy.wait_s(3, 300.0) == 300.0  # the provider knows best: not capped
    waits = [policy.wait_s(n, None, salt="call-1") for n in range(1, 6)]
    for n, wait in enumerate(waits, 1):
        base = min(2.0 * 2 ** (n - 1), 10.0)
        assert base / 2 <= wait <= base
    assert waits == [policy.wait_s(n, None, salt="call-1") for n in range(1, 6)]
    assert waits != [policy.wait_s(n, None, salt="call-2") for n in range(1, 6)]


def test_bad_policies_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ConfigError):
        RateLimiter(rpm=0)
    with pytest.raises(ConfigError):
        RateLimiter(max_concurrency=0)


def test_requests_per_minute_spread_a_burst_over_the_minute() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(rpm=60, clock=clock, sleep=clock.sleep)
    started: list[float] = []

    async def one() -> None:
        async with limiter.slot():
            started.append(clock.now)

    async def main() -> None:
        for _ in range(70):
            await one()

    anyio.run(main)
    # 60 go at once (a full bucket), then one per second.
    assert started[:60] == [0.0] * 60
    assert started[60:] == pytest.approx([float(i) for i in range(1, 11)])


def test_tokens_per_minute_hold_big_requests_back() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(tpm=1000, clock=clock, sleep=clock.sleep)
    started: list[float] = []

    async def main() -> None:
        for _ in range(3):
            async with limiter.slot(600):
                started.append(clock.now)
        async with limiter.slot(5000):  # more than a minute's worth: waits for a full bucket
            started.append(clock.now)

    anyio.run(main)
    assert started[0] == 0.0
    assert started[1] == pytest.approx(12.0)  # 200 more tokens at 1000/min
    assert started[2] == pytest.approx(48.0)
    assert started[3] == pytest.approx(48.0 + 60.0)
    assert limiter.waited_s == pytest.approx(108.0)


def test_concurrency_cap_holds_requests_in_flight() -> None:
    limiter = RateLimiter(max_concurrency=3)
    in_flight = 0
    peak = 0

    async def one() -> None:
        nonlocal in_flight, peak
        async with limiter.slot():
            in_flight += 1
            peak = max(peak, in_flight)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            in_flight -= 1

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(one)

    anyio.run(main)
    assert peak == 3
