"""The daemon's metrics and health endpoint.

:func:`fold_log` is the pure core: it folds stored events into a :class:`LogSnapshot` (calls,
spend, retries, provider errors, gate verdicts, seed states). :class:`LogMetrics` keeps that fold
up to date from the event store, reading only what was appended since its last call.
:class:`DaemonCollector` turns it, the work queue and the budget accounts into Prometheus metric
families, and :class:`MetricsServer` serves ``/metrics`` and ``/healthz`` from a thread.

Spend is the one ledger's (:mod:`store.ledger`): settled costs plus reservations with no answer
yet, which are also reported on their own (calls in flight, or left by a crash).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from store.closing import ClosesOnExit
from store.coordination import STATES, BudgetAccounts, WorkQueue
from store.events import MICROS_PER_USD, UPCASTERS, upcast
from store.eventstore import EventStore, StoredEvent
from store.ledger import LedgerFold

_log = structlog.get_logger(__name__)
_READ_CHUNK = 5000
_SEED_EVENTS = frozenset(
    {"SeedStarted", "AttemptStarted", "ItemAccepted", "SeedDiscarded", "SeedStopped"}
)


@dataclass(frozen=True)
class LogSnapshot:
    """What the log says so far, as plain counts (micro-dollars for money)."""

    last_seq: int
    events: int
    calls: dict[tuple[str, str, str], int]  # (model, role, outcome)
    spend_micros: int  # the ledger's spent: settled plus reserved
    spend_by_model: dict[str, int]
    reserved_micros: int  # of which reservations not settled: in flight, or left by a crash
    in_flight: int  # how many such reservations
    retries: dict[str, int]  # CallRetried by kind
    provider_errors: dict[str, int]  # CallFailed with outcome "error", by kind
    gates: dict[tuple[str, str, str], int]  # (phase, gate, "passed" | "rejected")
    seeds: dict[str, int]  # seed streams by latest state

    def gate_pass_ratio(self) -> dict[tuple[str, str], float]:
        """Passed over all verdicts, per (phase, gate)."""
        totals: dict[tuple[str, str], list[int]] = {}
        for (phase, gate, verdict), n in self.gates.items():
            counts = totals.setdefault((phase, gate), [0, 0])
            counts[0 if verdict == "passed" else 1] += n
        return {key: passed / (passed + rejected) for key, (passed, rejected) in totals.items()}


def _bump(counts: dict[Any, int], key: Any, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def _sorted(counts: dict[Any, int]) -> dict[Any, int]:
    return dict(sorted(counts.items()))


class _LogFold:
    """Mutable fold state behind :func:`fold_log` and :class:`LogMetrics`."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.events = 0
        self.calls: dict[tuple[str, str, str], int] = {}
        self.ledger = LedgerFold()
        self.retries: dict[str, int] = {}
        self.provider_errors: dict[str, int] = {}
        self.gates: dict[tuple[str, str, str], int] = {}
        self.seed_state: dict[str, str] = {}  # seed stream → state

    def apply(self, ev: StoredEvent) -> None:
        """Fold one stored event in."""
        self.events += 1
        self.last_seq = max(self.last_seq, ev.seq)
        data = ev.data
        # Read as dicts (not validated models): cheap, and tolerant of outcomes added later.
        if UPCASTERS and (ev.type, ev.schema) in UPCASTERS:
            data = upcast(ev.type, ev.schema, data)
        kind = ev.type
        self.ledger.apply(ev.stream, kind, data)
        if kind == "CallRecorded":
            replayed = bool(data.get("replayed", False))
            _bump(self.calls, (data["model"], data["role"], "replayed" if replayed else "recorded"))
        elif kind == "CallFailed":
            outcome = str(data.get("outcome", "error"))
            _bump(self.calls, (data["model"], data["role"], outcome))
            if outcome == "error":
                error = str(data.get("error", ""))
                _bump(self.provider_errors, error.split(": ", 1)[0] if ": " in error else "other")
        elif kind == "CallRefused":
            _bump(self.calls, (data["model"], data["role"], "refused"))
        elif kind == "CallRetried":
            _bump(self.retries, str(data["kind"]))
        elif kind in ("GatePassed", "GateRejected"):
            verdict = "passed" if kind == "GatePassed" else "rejected"
            _bump(self.gates, (str(data["phase"]), str(data["gate"]), verdict))
        elif kind in _SEED_EVENTS:
            self._seed(ev.stream, kind, data)

    def _seed(self, stream: str, kind: str, data: dict[str, Any]) -> None:
        current = self.seed_state.get(stream)
        if kind == "SeedStarted":
            self.seed_state[stream] = "running"
        elif kind == "AttemptStarted":
            # A stopped seed that starts an attempt again was resumed.
            if current is None or current.startswith("stopped"):
                self.seed_state[stream] = "running"
        elif kind == "ItemAccepted":
            self.seed_state[stream] = "accepted"
        elif kind == "SeedDiscarded":
            self.seed_state[stream] = "discarded"
        else:
            self.seed_state[stream] = f"stopped:{data['reason']}"

    def snapshot(self) -> LogSnapshot:
        """A frozen copy of the counts."""
        seeds: dict[str, int] = {}
        for state in self.seed_state.values():
            _bump(seeds, state)
        spent = self.ledger.ledger()
        return LogSnapshot(
            last_seq=self.last_seq,
            events=self.events,
            calls=_sorted(self.calls),
            spend_micros=spent.spent_micros,
            spend_by_model=spent.breakdown("model"),
            reserved_micros=spent.open_micros,
            in_flight=spent.open_calls,
            retries=_sorted(self.retries),
            provider_errors=_sorted(self.provider_errors),
            gates=_sorted(self.gates),
            seeds=_sorted(seeds),
        )


def fold_log(events: Iterable[StoredEvent]) -> LogSnapshot:
    """Fold ``events`` (in seq order) into a snapshot. No I/O."""
    state = _LogFold()
    for ev in events:
        state.apply(ev)
    return state.snapshot()


class LogMetrics:
    """The log's counters, kept up to date incrementally; safe to share between threads."""

    def __init__(self, store: EventStore, *, chunk: int = _READ_CHUNK) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1 event, got {chunk!r}")
        self._store = store
        self._chunk = chunk
        self._fold = _LogFold()
        self._lock = threading.Lock()

    def catch_up(self) -> int:
        """Fold the events appended since the last call; returns how many were read."""
        total = 0
        with self._lock:
            while True:
                chunk = self._store.read_all(self._fold.last_seq, self._chunk)
                for ev in chunk:
                    self._fold.apply(ev)
                total += len(chunk)
                if len(chunk) < self._chunk:
                    return total

    def snapshot(self) -> LogSnapshot:
        """The counts as of the last :meth:`catch_up`."""
        with self._lock:
            return self._fold.snapshot()


def _usd(micros: int) -> float:
    return micros / MICROS_PER_USD


class DaemonCollector:
    """Prometheus collector over the log, and the queue and budget accounts when given."""

    def __init__(
        self,
        log: LogMetrics,
        queue: WorkQueue | None = None,
        accounts: BudgetAccounts | None = None,
    ) -> None:
        self.log = log
        self.queue = queue
        self.accounts = accounts

    def collect(self) -> Iterator[Metric]:
        """Catch up with the log, then yield every metric family."""
        self.log.catch_up()
        yield from self._log_families(self.log.snapshot())
        if self.queue is not None:
            yield from self._queue_families(self.queue)
        if self.accounts is not None:
            yield from self._account_families(self.accounts)

    @staticmethod
    def _log_families(snap: LogSnapshot) -> Iterator[Metric]:
        spend = CounterMetricFamily(
            "playlisteval_spend_usd", "Dollars paid for model calls.", labels=["model"]
        )
        for model, micros in snap.spend_by_model.items():
            spend.add_metric([model], _usd(micros))
        yield spend
        yield GaugeMetricFamily(
            "playlisteval_reserved_usd",
            "Dollars reserved for calls not settled yet (in flight, or left by a crash).",
            value=_usd(snap.reserved_micros),
        )
        yield GaugeMetricFamily(
            "playlisteval_calls_in_flight",
            "Reservations not settled yet.",
            value=snap.in_flight,
        )
        calls = CounterMetricFamily(
            "playlisteval_calls", "Model calls by outcome.", labels=["model", "role", "outcome"]
        )
        for labels, n in snap.calls.items():
            calls.add_metric(list(labels), n)
        yield calls
        verdicts = CounterMetricFamily(
            "playlisteval_gate_verdicts", "Gate verdicts.", labels=["phase", "gate", "verdict"]
        )
        for labels, n in snap.gates.items():
            verdicts.add_metric(list(labels), n)
        yield verdicts
        ratio = GaugeMetricFamily(
            "playlisteval_gate_pass_ratio",
            "Share of a gate's verdicts that passed.",
            labels=["phase", "gate"],
        )
        for (phase, gate), value in snap.gate_pass_ratio().items():
            ratio.add_metric([phase, gate], value)
        yield ratio
        seeds = GaugeMetricFamily("playlisteval_seeds", "Seeds by latest state.", labels=["state"])
        for state, n in snap.seeds.items():
            seeds.add_metric([state], n)
        yield seeds
        errors = CounterMetricFamily(
            "playlisteval_provider_errors", "Calls that failed for good, by kind.", labels=["kind"]
        )
        for kind, n in snap.provider_errors.items():
            errors.add_metric([kind], n)
        yield errors
        retries = CounterMetricFamily(
            "playlisteval_call_retries", "Call attempts retried, by kind.", labels=["kind"]
        )
        for kind, n in snap.retries.items():
            retries.add_metric([kind], n)
        yield retries
        yield GaugeMetricFamily(
            "playlisteval_log_seq", "Last event seq folded.", value=snap.last_seq
        )

    @staticmethod
    def _queue_families(queue: WorkQueue) -> Iterator[Metric]:
        counts = queue.counts()
        items = GaugeMetricFamily(
            "playlisteval_queue_items", "Work items by kind and state.", labels=["kind", "state"]
        )
        # Every state of every kind seen, zeros included, so a series does not vanish.
        for kind in sorted({kind for kind, _state in counts}):
            for state in (*STATES, "expired"):
                items.add_metric([kind, state], counts.get((kind, state), 0))
        yield items
        workers = queue.workers()
        by_state: dict[str, int] = {}
        for worker in workers:
            _bump(by_state, str(worker["state"]))
        states = GaugeMetricFamily(
            "playlisteval_workers", "Workers by last reported state.", labels=["state"]
        )
        for state, n in sorted(by_state.items()):
            states.add_metric([state], n)
        yield states
        ages = GaugeMetricFamily(
            "playlisteval_worker_heartbeat_age_seconds",
            "Seconds since each worker's last heartbeat.",
            labels=["worker"],
        )
        for worker in workers:
            ages.add_metric([str(worker["name"])], float(worker["age_s"]))
        yield ages

    @staticmethod
    def _account_families(accounts: BudgetAccounts) -> Iterator[Metric]:
        rows = accounts.accounts()
        cap = GaugeMetricFamily(
            "playlisteval_budget_cap_usd", "Budget account caps.", labels=["account"]
        )
        spent = GaugeMetricFamily(
            "playlisteval_budget_spent_usd", "Budget account spend.", labels=["account"]
        )
        reserved = GaugeMetricFamily(
            "playlisteval_budget_reserved_usd", "Budget account reservations.", labels=["account"]
        )
        for row in rows:
            if row.cap_micros is not None:
                cap.add_metric([row.name], _usd(row.cap_micros))
            spent.add_metric([row.name], _usd(row.spent_micros))
            reserved.add_metric([row.name], _usd(row.reserved_micros))
        yield from (cap, spent, reserved)
        yield GaugeMetricFamily(
            "playlisteval_budget_holds", "Budget holds outstanding.", value=accounts.holds()
        )


def daemon_registry(
    log: LogMetrics, queue: WorkQueue | None = None, accounts: BudgetAccounts | None = None
) -> CollectorRegistry:
    """A private registry holding one :class:`DaemonCollector`."""
    registry = CollectorRegistry()
    registry.register(DaemonCollector(log, queue, accounts))
    return registry


Health = Callable[[], dict[str, Any]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], registry: CollectorRegistry, health: Health
    ) -> None:
        super().__init__(address, _Handler)
        self.registry = registry
        self.health = health

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-reply is not worth a traceback on stderr.
        _log.debug("metrics_http_error", client=str(client_address), exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/metrics":
            try:
                body = generate_latest(self.server.registry)
            except Exception as exc:
                _log.warning("metrics_scrape_failed", error=f"{type(exc).__name__}: {exc}")
                self._reply(500, f"{type(exc).__name__}: {exc}\n".encode(), "text/plain")
                return
            self._reply(200, body, CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            try:
                report = self.server.health()
                status = 200 if report.get("status") == "ok" else 503
            except Exception as exc:
                report = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
                status = 503
            body = json.dumps(report, default=str, sort_keys=True).encode()
            self._reply(status, body, "application/json")
        else:
            self._reply(404, f"no such page {path!r}\n".encode(), "text/plain")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("metrics_http", client=self.address_string(), line=format % args)


class MetricsServer(ClosesOnExit):
    """``/metrics`` and ``/healthz`` over HTTP, served from a daemon thread until closed.

    ``health`` returns a JSON-able dict; ``{"status": "ok", …}`` answers 200, anything else 503.
    Port 0 picks a free port (see :attr:`port`).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Health,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._server = _Server((host, port), registry, health)
        self.host = host
        self.port = int(self._server.server_address[1])
        # A short poll interval keeps close() quick (shutdown waits for the next poll).
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="metrics-http", daemon=True
        )
        self._thread.start()
        self._closed = False

    @property
    def url(self) -> str:
        """Base URL of the server, without a trailing slash."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


__all__ = [
    "DaemonCollector",
    "LogMetrics",
    "LogSnapshot",
    "MetricsServer",
    "daemon_registry",
    "fold_log",
]
