"""How hard a provider may be pushed, and how a failed attempt is retried.

:class:`RateLimiter` holds a provider family to its requests-per-minute and input-tokens-per-minute
limits and a cap on requests in flight (token buckets that refill continuously, waiters served in
arrival order). :class:`RetryPolicy` says how long to wait before the next attempt: what the
provider asked for in ``Retry-After`` when it asked, else an exponential backoff with jitter that
is a function of the call (so a replay of the arithmetic is exact and concurrent callers spread).
Clock and sleep are injectable: tests drive them without waiting on a wall clock.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from store.errors import ConfigError

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of transient failures (429, 5xx, timeouts, dropped connections, bad bodies)."""

    max_retries: int = 6
    backoff_s: float = 2.0
    max_backoff_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_s <= 0 or self.max_backoff_s <= 0:
            raise ConfigError(
                f"retry policy {self!r}: max_retries must be >= 0, backoff_s and max_backoff_s > 0"
            )

    def wait_s(self, attempt: int, retry_after_s: float | None, salt: str = "") -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based).

        A provider's ``Retry-After`` is honoured as asked (never less, and not capped: the
        provider knows when it will take requests again); otherwise the wait doubles each attempt
        from ``backoff_s`` up to ``max_backoff_s``, with 50–100 % jitter drawn from ``salt``.
        """
        if retry_after_s is not None and retry_after_s >= 0:
            return float(retry_after_s)
        base = min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)
        digest = hashlib.sha256(f"{salt}|{attempt}".encode()).digest()
        jitter = 0.5 + (int.from_bytes(digest[:4], "big") / 2**32) / 2
        return float(base * jitter)


class RateLimiter:
    """Requests per minute, input tokens per minute and requests in flight for one provider."""

    def __init__(
        self,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        max_concurrency: int = 16,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        if (rpm is not None and rpm <= 0) or (tpm is not None and tpm <= 0):
            raise ConfigError(f"rate limits must be > 0 (rpm={rpm!r}, tpm={tpm!r})")
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency!r}")
        self.rpm = rpm
        self.tpm = tpm
        self.max_concurrency = max_concurrency
        self._clock = clock
        self._sleep = sleep
        self._requests = float(rpm or 0)
        self._tokens = float(tpm or 0)
        self._last = clock()
        self._slots = anyio.Semaphore(max_concurrency)
        self._turn = anyio.Lock()  # one waiter at a time takes from the buckets: FIFO
        self.waited_s = 0.0  # total time callers spent waiting for the buckets

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(now - self._last, 0.0)
        self._last = now
        if self.rpm is not None:
            self._requests = min(self.rpm, self._requests + elapsed * self.rpm / 60)
        if self.tpm is not None:
            self._tokens = min(self.tpm, self._tokens + elapsed * self.tpm / 60)

    async def _take(self, tokens: int) -> None:
        # A request larger than a whole minute's tokens waits for a full bucket, then goes.
        wanted = min(tokens, self.tpm) if self.tpm is not None else 0
        async with self._turn:
            while True:
                self._refill()
                short_r = 1 - self._requests if self.rpm is not None else 0.0
                short_t = wanted - self._tokens if self.tpm is not None else 0.0
                if short_r <= 1e-9 and short_t <= 1e-9:
                    if self.rpm is not None:
                        self._requests -= 1
                    if self.tpm is not None:
                        self._tokens -= wanted
                    return
                waits = []
                if self.rpm is not None and short_r > 0:
                    waits.append(short_r * 60 / self.rpm)
                if self.tpm is not None and short_t > 0:
                    waits.append(short_t * 60 / self.tpm)
                wait = max(waits)
                self.waited_s += wait
                await self._sleep(wait)

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one of the in-flight slots and take one request and ``tokens`` from the buckets."""
        async with self._slots:
            await self._take(tokens)
            yield


@dataclass(frozen=True)
class Traffic:
    """How calls to one model travel: its retries, its family's limiter, whether its videos go
    into an explicit context cache (and for how long), and whether its text-only calls may go
    through a batch API."""

    retry: RetryPolicy = RetryPolicy()
    limiter: RateLimiter | None = None
    cache_ttl_s: int | None = None
    batchable: bool = False
    # Providers that take video as frames: the height and the most frames per request their
    # adapter sends (the call is counted as what is sent, not as the clip).
    frame_height: int | None = None
    max_frames: int | None = None
    # ... the highest rate a clip is sampled at, and the fewest frames a clip becomes.
    video_fps: float | None = None
    min_frames_per_clip: int = 1
    # The token rule its family counts by (``policies.tokens``), where the model id alone would
    # not pick it; None: the id's prefix does.
    token_rule: str | None = None

    def facts(self) -> dict[str, Any]:
        """What shapes a call's price (no limiter, no retries), as plain data for a run's log.

        ``token_rule`` appears only when set, so the facts of a model whose id names its rule
        are what they were before families carried one (old logs replay unchanged)."""
        facts: dict[str, Any] = {
            "cache_ttl_s": self.cache_ttl_s,
            "batchable": self.batchable,
            "frame_height": self.frame_height,
            "max_frames": self.max_frames,
            "video_fps": self.video_fps,
            "min_frames_per_clip": self.min_frames_per_clip,
        }
        if self.token_rule is not None:
            facts["token_rule"] = self.token_rule
        return facts

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any]) -> Traffic:
        """A replay's traffic from a run's recorded :meth:`facts` (never retries, no limiter)."""
        known = {k: facts[k] for k in (*cls().facts(), "token_rule") if k in facts}
        return cls(retry=RetryPolicy(max_retries=0), **known)
