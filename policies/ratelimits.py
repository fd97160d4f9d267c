"""How hard a provider may be pushed, and how a failed attempt is retried.

:class:`RateLimiter` holds a provider family to its requests-per-minute and input-tokens-per-minute
limits and a cap on requests in flight (token buckets that refill continuously, waiters served in
arrival order). :class:`RetryPolicy` says how long to wait before the next attempt: what the
provider asked for in ``Retry-After`` when it asked, else an exponential backoff with jitter that
is a function of the call (so a replay of the arithmetic is exact and concurrent callers spread).
Clock and sleep are injectable: tests drive them without waiting on a wall clock.

:class:`SharedRateLimiter` holds every worker of a fleet together to one family's limits and
pauses them all on one worker's ``Retry-After``. Its state is one row per key and a log of the
last window's requests in the coordination database (``store.coordination.RateWindows``), not a
share of the limit per live worker: shares need to know who is alive, strand capacity with idle
workers and are wrong while workers come and go, and a pause would still have to travel; the
database already orders the fleet, costs one round trip per request (nothing beside a model
call), and judges time by its own clock, so skewed machines agree. A sliding-window log, not a
bucket: a bucket of ``rpm`` refilled continuously lets ~2 × ``rpm`` through in one 60-s window (a
full bucket at once, then a minute of refill); the log says "no ``window_s`` holds more than
``rpm`` requests or ``tpm`` tokens" exactly, as providers count. It is judged when a request is
let through; the provider counts on arrival, later by the network's jitter (a strict provider
wants ``window_s`` a little over 60). Requests in flight stay a per-process cap.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from sqlalchemy import Engine

from store.coordination import RateWindows
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


class _SlotLimiter:
    """What both limiters do alike: hold the process's cap on requests in flight, let one caller
    of this process at a time wait for the limits (in arrival order), and add up how long callers
    waited. A subclass says how a request is let through (:meth:`_take`)."""

    def __init__(
        self, *, rpm: int | None, tpm: int | None, max_concurrency: int, sleep: Sleep
    ) -> None:
        if (rpm is not None and rpm <= 0) or (tpm is not None and tpm <= 0):
            raise ConfigError(f"rate limits must be > 0 (rpm={rpm!r}, tpm={tpm!r})")
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency!r}")
        self.rpm = rpm
        self.tpm = tpm
        self.max_concurrency = max_concurrency
        self._sleep = sleep
        self._slots = anyio.Semaphore(max_concurrency)
        self._turn = anyio.Lock()  # one caller of this process at a time waits for the limits
        self.waited_s = 0.0  # total time callers of this process spent waiting for the limits

    async def _take(self, tokens: int) -> None:
        """Return once one request and ``tokens`` input tokens may go (under ``_turn``)."""
        raise NotImplementedError

    async def _wait(self, seconds: float) -> None:
        self.waited_s += seconds
        await self._sleep(seconds)

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one of this process's in-flight slots and let one request and ``tokens`` input
        tokens through the limits."""
        async with self._slots:
            await self._take(tokens)
            yield


class RateLimiter(_SlotLimiter):
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
        super().__init__(rpm=rpm, tpm=tpm, max_concurrency=max_concurrency, sleep=sleep)
        self._clock = clock
        self._requests = float(rpm or 0)
        self._tokens = float(tpm or 0)
        self._last = clock()
        self._paused_until = float("-inf")  # a provider's Retry-After: nobody sends before it

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
                paused = self._paused_until - self._clock()
                if paused > 0:
                    await self._wait(paused)
                    continue
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
                await self._wait(max(waits))

    async def pause(self, seconds: float) -> None:
        """The provider asked for no request in the next ``seconds`` (a 429's ``Retry-After``):
        no caller takes from the buckets before then."""
        self._paused_until = max(self._paused_until, self._clock() + max(seconds, 0.0))


class SharedRateLimiter(_SlotLimiter):
    """:class:`RateLimiter`'s limits for a whole fleet: requests and input tokens per
    ``window_s`` under ``key`` (a provider family, or family and model) counted across every
    process of the coordination database ``engine``, and a pause any of them sets held by all.

    Requests in flight stay capped per process (``max_concurrency``). Database calls run in a
    worker thread; between tries a caller sleeps (``sleep``) as long as the database says it
    must. ``clock`` replaces the database's clock (tests); times are the database's otherwise.
    """

    def __init__(
        self,
        engine: Engine,
        key: str,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        max_concurrency: int = 16,
        window_s: float = 60.0,
        sleep: Sleep = anyio.sleep,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(rpm=rpm, tpm=tpm, max_concurrency=max_concurrency, sleep=sleep)
        if window_s <= 0:
            raise ConfigError(f"window_s must be > 0, got {window_s!r}")
        self.key = key
        self.window_s = window_s
        self.windows = RateWindows(engine, clock=clock)
        self.windows.ensure(key)

    def _try(self, tokens: int) -> float:
        return self.windows.take(
            self.key, rpm=self.rpm, tpm=self.tpm, tokens=tokens, window_s=self.window_s
        )

    async def _take(self, tokens: int) -> None:
        async with self._turn:
            while True:
                wait = await anyio.to_thread.run_sync(self._try, tokens)
                if wait <= 0:
                    return
                await self._wait(wait)

    async def pause(self, seconds: float) -> None:
        """The provider asked for no request in the next ``seconds``: no worker of the fleet
        is let through under this key before then."""
        await anyio.to_thread.run_sync(self.windows.pause, self.key, seconds)


class Limiter(Protocol):
    """What a call's traffic needs of a limiter: :class:`RateLimiter` (one process) or
    :class:`SharedRateLimiter` (a fleet)."""

    rpm: int | None
    tpm: int | None
    max_concurrency: int
    waited_s: float

    def slot(self, tokens: int = 0) -> AbstractAsyncContextManager[None]:
        """Wait for a place, hold it for the ``async with`` block."""
        ...

    async def pause(self, seconds: float) -> None:
        """Nobody is let through for ``seconds``."""
        ...


@dataclass(frozen=True)
class Traffic:
    """How calls to one model travel: its retries, its family's limiter, whether its videos go
    into an explicit context cache (and for how long), and whether its text-only calls may go
    through a batch API."""

    retry: RetryPolicy = RetryPolicy()
    limiter: Limiter | None = None
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
    # Tokens the served model takes in one request, prompt and answer together (vLLM's
    # ``max_model_len``): a request's frames are fitted to it (``agents.workers``). None: no
    # limit known.
    context_window: int | None = None
    # The most frames a request may show where the caller fixed them (they go as pictures):
    # an evaluation condition showing more is refused. None: ``max_frames``. Not a price fact.
    max_fixed_frames: int | None = None
    # A real model run on this machine answers (the ``real-local`` family): its calls are its
    # own even in an offline run, recorded as not offline and counted from its own usage.
    real_local: bool = False

    def facts(self) -> dict[str, Any]:
        """What shapes a call's price (no limiter, no retries), as plain data for a run's log.

        ``token_rule``, ``context_window`` and ``real_local`` appear only when set, so the facts
        of a model whose id names its rule are what they were before families carried one (old
        logs replay unchanged)."""
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
        if self.context_window is not None:
            facts["context_window"] = self.context_window
        if self.real_local:
            facts["real_local"] = True
        return facts

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any]) -> Traffic:
        """A replay's traffic from a run's recorded :meth:`facts` (never retries, no limiter)."""
        optional = ("token_rule", "context_window", "real_local")
        known = {k: facts[k] for k in (*cls().facts(), *optional) if k in facts}
        return cls(retry=RetryPolicy(max_retries=0), **known)
