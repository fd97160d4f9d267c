"""Rate windows: a provider's per-minute limits, shared by every worker.

A row per key (a provider family, or a family and model) holds ``paused_until`` (a
``Retry-After`` one worker saw), and a log holds each admitted request's time and tokens for the
last window. Admission is one transaction under the key's row lock (``FOR UPDATE`` on
PostgreSQL, the write lock on SQLite): prune what left the window, count what is in it, log the
request if it fits, else say how long until it would (see
``policies.ratelimits.SharedRateLimiter``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from store.coordination.tables import RATE_KEYS, RATE_LOG, create_tables, db_now, write_transaction
from store.errors import PlaylistEvalError

_K, _R = RATE_KEYS.c, RATE_LOG.c


def window_wait(
    now: float,
    log: Sequence[tuple[float, int]],
    *,
    rpm: int | None,
    tpm: int | None,
    tokens: int,
    window_s: float,
) -> float:
    """Seconds from ``now`` until one more request of ``tokens`` fits the window; 0 when it
    fits now. ``log`` holds the ``(time, tokens)`` of the requests still in the window (times
    after ``now - window_s``), oldest first: each leaves it ``window_s`` after its time."""
    over_r = rpm is not None and len(log) + 1 > rpm
    excess_t = sum(t for _, t in log) + tokens - tpm if tpm is not None else 0
    if not over_r and excess_t <= 0:
        return 0.0
    leaves = [now]
    if rpm is not None and over_r:
        leaves.append(log[len(log) - rpm][0] + window_s)  # once that many of the oldest left
    for at, spent in log:
        if excess_t <= 0:
            break
        excess_t -= spent
        leaves.append(at + window_s)
    return max(max(leaves) - now, 1e-6)  # never 0: it does not fit now


class RateWindows:
    """Sliding-window request and token logs per key, and the key's pause, for every worker
    of a database. ``clock`` replaces the database's clock (tests)."""

    def __init__(self, engine: Engine, *, clock: Callable[[], float] | None = None) -> None:
        self.engine = engine
        self._clock = clock
        self._known: set[str] = set()  # keys whose row this instance has made sure of
        create_tables(engine)

    def _now(self, conn: Connection) -> float:
        return self._clock() if self._clock is not None else db_now(conn)

    def ensure(self, key: str) -> None:
        """Create ``key``'s row unless it exists (it is what takers lock)."""
        with write_transaction(self.engine) as conn:
            if conn.execute(select(_K.key).where(_K.key == key)).first() is None:
                try:
                    conn.execute(insert(RATE_KEYS).values(key=key, paused_until=0.0))
                except IntegrityError:
                    conn.rollback()  # created by another worker meanwhile

    def take(
        self, key: str, *, rpm: int | None, tpm: int | None, tokens: int = 0, window_s: float = 60.0
    ) -> float:
        """Let one request of ``tokens`` through under ``key``'s limits, or say how long to wait.

        Returns 0 when the request was logged (it may go now), else the seconds until it may
        fit: the key's pause, or until enough of the window's requests leave it. Nothing is
        logged then; the caller asks again after waiting (another worker may get there first).
        """
        if tpm is not None:
            tokens = min(tokens, tpm)  # more than a window's tokens: waits for an empty window
        for _ in range(2):
            self._ensure_once(key)
            with write_transaction(self.engine) as conn:
                query = select(_K.paused_until).where(_K.key == key)
                if conn.dialect.name == "postgresql":
                    query = query.with_for_update()  # takers of one key queue on its row
                paused_until = conn.execute(query).scalar_one_or_none()
                if paused_until is None:  # its row was deleted under us: make it again
                    self._known.discard(key)
                    continue
                now = self._now(conn)
                if paused_until > now:
                    return float(paused_until - now)
                if rpm is None and tpm is None:
                    return 0.0
                conn.execute(delete(RATE_LOG).where(_R.key == key, _R.at <= now - window_s))
                query = select(_R.at, _R.tokens).where(_R.key == key).order_by(_R.at, _R.id)
                log = [(float(at), int(spent)) for at, spent in conn.execute(query)]
                wait = window_wait(now, log, rpm=rpm, tpm=tpm, tokens=tokens, window_s=window_s)
                if wait == 0:
                    conn.execute(insert(RATE_LOG).values(key=key, at=now, tokens=tokens))
                return wait
        raise PlaylistEvalError(f"rate key {key!r} keeps vanishing from {RATE_KEYS.name!r}")

    def _ensure_once(self, key: str) -> None:
        if key not in self._known:
            self.ensure(key)
            self._known.add(key)

    def pause(self, key: str, seconds: float) -> float:
        """No request under ``key`` is let through for ``seconds`` from now (a pause already
        reaching further stands); returns when the pause ends (database time)."""
        self._ensure_once(key)
        with write_transaction(self.engine) as conn:
            until = self._now(conn) + max(seconds, 0.0)
            conn.execute(
                update(RATE_KEYS)
                .where(_K.key == key, _K.paused_until < until)
                .values(paused_until=until)
            )
            return until

    def paused_until(self, key: str) -> float:
        """When ``key``'s pause ends (database time; in the past when it is not paused)."""
        with self.engine.connect() as conn:
            found = conn.execute(select(_K.paused_until).where(_K.key == key)).scalar_one_or_none()
        return float(found or 0.0)

    def logged(self, key: str) -> list[float]:
        """The times of the requests ``key``'s log still holds, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(_R.at).where(_R.key == key).order_by(_R.at, _R.id))
            return [float(at) for (at,) in rows]
