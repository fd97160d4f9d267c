"""The daemon's metrics: the log fold, the Prometheus collector and the HTTP endpoint."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from playlisteval.metrics import LogMetrics, LogSnapshot, MetricsServer, daemon_registry, fold_log
from store.coordination import BudgetAccounts, WorkItem, WorkQueue
from store.events import (
    AttemptStarted,
    CallFailed,
    CallRecorded,
    CallRefused,
    CallReserved,
    CallRetried,
    Event,
    GatePassed,
    GateRejected,
    ItemAccepted,
    RunFinished,
    RunStarted,
    SeedDiscarded,
    SeedStarted,
    SeedStopped,
    run_stream,
    seed_stream,
)
from store.eventstore import EventStore, open_event_store
from store.ledger import stream_spend

RUN = "r1"
GEMINI, MINI, GPT, QWEN = "gemini-3-flash", "gpt-5.4-mini", "gpt-5.4", "qwen-3.7-plus"


@pytest.fixture
def store(event_store: EventStore) -> EventStore:
    """The event store (SQLite file or PostgreSQL schema) whose database the test uses."""
    return event_store


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[EventStore]:
    """An event store on a SQLite file."""
    opened = open_event_store(tmp_path / "events.db")
    yield opened
    opened.close()


# -- a run's log -----------------------------------------------------------------------------


def call(seed: str, n: int, model: str, role: str, gate: str | None) -> dict[str, Any]:
    """The fields every event about call ``n`` of ``seed`` shares."""
    return {
        "call_id": f"{seed}:{n}",
        "key": f"k-{seed}-{n}",
        "role": role,
        "model": model,
        "phase": 1,
        "gate": gate,
    }


def reserved(fields: dict[str, Any], micros: int) -> CallReserved:
    return CallReserved(**fields, reserved_micros=micros)


def recorded(fields: dict[str, Any], cost: int, *, replayed: bool = False) -> CallRecorded:
    return CallRecorded(**fields, response={}, cost_micros=cost, offline=True, replayed=replayed)


def failed(
    fields: dict[str, Any],
    error: str,
    outcome: Literal["error", "refusal", "interrupted"],
    charged: int = 0,
) -> CallFailed:
    return CallFailed(**fields, error=error, outcome=outcome, charged_micros=charged)


def retried(fields: dict[str, Any], attempt: int, kind: str) -> CallRetried:
    return CallRetried(**fields, attempt=attempt, kind=kind, wait_s=0.5, error=f"{kind} body")


def passed(phase: Literal[1, 2], gate: str, attempt: int) -> GatePassed:
    return GatePassed(phase=phase, gate=gate, attempt=attempt)


def rejected(phase: Literal[1, 2], gate: str, attempt: int) -> GateRejected:
    return GateRejected(
        phase=phase, gate=gate, attempt=attempt, reason="too easy", rejected_output="{}"
    )


def started(seed: str) -> list[Event]:
    return [
        SeedStarted(run_id=RUN, seed_id=seed, domain="cooking", segment_a="a", segment_b="b"),
        AttemptStarted(phase=1, attempt=1),
    ]


def seed_log() -> list[tuple[str, list[Event]]]:
    """Six seeds of one run, in appending order: ``(seed id, events)``; "" is the run stream.

    s1 accepted after a retried, a recorded and a replayed call; s2 stopped by a provider
    timeout; s3 refused by the budget; s4 running with a reservation never settled; s5
    discarded after a refusal; s6 interrupted mid-call, then resumed into a provider error.
    """
    s1a = call("s1", 1, GEMINI, "generator", None)
    s1b = call("s1", 2, MINI, "matcher", "transcript")
    s1c = call("s1", 3, GEMINI, "generator", None)
    s2a = call("s2", 1, GEMINI, "generator", None)
    s4a = call("s4", 1, QWEN, "sufficiency", "sufficiency")
    s5a = call("s5", 1, GEMINI, "generator", None)
    s6a = call("s6", 1, GEMINI, "generator", None)
    s6b = call("s6", 2, GPT, "answerer", "parametric")
    return [
        (
            "",
            [
                RunStarted(
                    run_id=RUN,
                    seeds=("s1", "s2", "s3", "s4", "s5", "s6"),
                    budget_micros=5_000_000,
                    max_attempts=6,
                    concurrency=2,
                    offline=True,
                )
            ],
        ),
        ("s1", [*started("s1"), reserved(s1a, 500_000)]),
        ("s1", [retried(s1a, 1, "rate_limit"), retried(s1a, 2, "server")]),
        ("s2", [*started("s2"), reserved(s2a, 500_000), retried(s2a, 1, "timeout")]),
        ("s1", [recorded(s1a, 300_000), passed(1, "structural", 1), reserved(s1b, 100_000)]),
        (
            "s2",
            [
                failed(s2a, "timeout: read timed out", "error"),
                SeedStopped(seed_id="s2", reason="provider"),
            ],
        ),
        ("s1", [recorded(s1b, 40_000), rejected(1, "transcript", 1)]),
        (
            "s3",
            [
                *started("s3"),
                CallRefused(
                    key="k-s3",
                    role="generator",
                    model=GEMINI,
                    needed_micros=500_000,
                    reason="cap",
                    cap="run",
                ),
                SeedStopped(seed_id="s3", reason="budget"),
            ],
        ),
        ("s4", [*started("s4"), reserved(s4a, 200_000)]),
        ("s1", [AttemptStarted(phase=1, attempt=2), reserved(s1c, 500_000)]),
        ("s1", [recorded(s1c, 250_000, replayed=True), passed(1, "structural", 2)]),
        ("s5", [*started("s5"), reserved(s5a, 500_000)]),
        ("s5", [failed(s5a, "refusal: declined", "refusal"), rejected(1, "structural", 1)]),
        ("s5", [SeedDiscarded(seed_id="s5", reasons=("structural: refused",))]),
        ("s1", [passed(1, "transcript", 2), passed(2, "visual", 1)]),
        ("s1", [ItemAccepted(seed_id="s1", qa={"q": 1}, distractors={"d": 1})]),
        ("s6", [*started("s6"), reserved(s6a, 500_000)]),
        (
            "s6",
            [
                failed(s6a, "interrupted: the worker stopped", "interrupted", 500_000),
                SeedStopped(seed_id="s6", reason="interrupted"),
            ],
        ),
        ("s6", [AttemptStarted(phase=1, attempt=2), reserved(s6b, 80_000)]),
        ("s6", [failed(s6b, "http_status: 500 Internal Server Error", "error", 10_000)]),
    ]


def stream_of(seed: str) -> str:
    return run_stream(RUN) if seed == "" else seed_stream(RUN, seed)


def append(store: EventStore, batches: list[tuple[str, list[Event]]]) -> None:
    for seed, events in batches:
        store.append(stream_of(seed), events)


EXPECTED = {
    "calls": {
        (GEMINI, "generator", "recorded"): 1,
        (GEMINI, "generator", "replayed"): 1,
        (GEMINI, "generator", "error"): 1,
        (GEMINI, "generator", "refused"): 1,
        (GEMINI, "generator", "refusal"): 1,
        (GEMINI, "generator", "interrupted"): 1,
        (MINI, "matcher", "recorded"): 1,
        (GPT, "answerer", "error"): 1,
    },
    "spend_micros": 1_050_000,  # the 200_000 reserved with no answer is spent, and shown apart
    "spend_by_model": {GEMINI: 800_000, MINI: 40_000, GPT: 10_000, QWEN: 200_000},
    "reserved_micros": 200_000,
    "in_flight": 1,
    "retries": {"rate_limit": 1, "server": 1, "timeout": 1},
    "provider_errors": {"timeout": 1, "http_status": 1},
    "gates": {
        ("1", "structural", "passed"): 2,
        ("1", "structural", "rejected"): 1,
        ("1", "transcript", "passed"): 1,
        ("1", "transcript", "rejected"): 1,
        ("2", "visual", "passed"): 1,
    },
    "seeds": {
        "accepted": 1,
        "discarded": 1,
        "running": 2,
        "stopped:budget": 1,
        "stopped:provider": 1,
    },
}


def assert_expected(snap: LogSnapshot) -> None:
    """The scenario's hand-counted numbers."""
    for name, value in EXPECTED.items():
        assert getattr(snap, name) == value, name


# -- the fold ---------------------------------------------------------------------------------


def test_the_fold_counts_calls_spend_retries_errors_gates_and_seeds(
    sqlite_store: EventStore,
) -> None:
    append(sqlite_store, seed_log())
    everything = sqlite_store.read_all()
    snap = fold_log(everything)
    assert_expected(snap)
    assert snap.last_seq == everything[-1].seq
    assert snap.events == len(everything)
    assert snap.gate_pass_ratio() == {
        ("1", "structural"): 2 / 3,
        ("1", "transcript"): 1 / 2,
        ("2", "visual"): 1.0,
    }


def test_incremental_catch_up_in_small_chunks_equals_one_fold(sqlite_store: EventStore) -> None:
    """Appending between catch-ups and reading three events at a time changes nothing."""
    batches = seed_log()
    metrics = LogMetrics(sqlite_store, chunk=3)
    assert metrics.catch_up() == 0
    read = 0
    for start in range(0, len(batches), 4):
        append(sqlite_store, batches[start : start + 4])
        read += metrics.catch_up()
        everything = sqlite_store.read_all()
        assert read == len(everything)
        assert metrics.snapshot() == fold_log(everything)
    assert metrics.catch_up() == 0
    assert_expected(metrics.snapshot())


def test_concurrent_catch_ups_fold_each_event_once(sqlite_store: EventStore) -> None:
    """The daemon and the HTTP thread may catch up at once while the log grows."""
    batches = seed_log()
    metrics = LogMetrics(sqlite_store, chunk=2)
    errors: list[BaseException] = []
    done = threading.Event()

    def follow() -> None:
        try:
            while not done.is_set():
                metrics.catch_up()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=follow) for _ in range(3)]
    for thread in threads:
        thread.start()
    append(sqlite_store, batches)
    done.set()
    for thread in threads:
        thread.join()
    metrics.catch_up()
    assert errors == []
    everything = sqlite_store.read_all()
    assert metrics.snapshot() == fold_log(everything)
    assert metrics.snapshot().events == len(everything)


def test_spend_is_the_ledger_with_its_orphan_reservations_shown_apart(
    sqlite_store: EventStore,
) -> None:
    append(sqlite_store, seed_log())
    spent = stream_spend(sqlite_store, seed_stream(RUN, ""))
    metrics = LogMetrics(sqlite_store)
    metrics.catch_up()
    snap = metrics.snapshot()
    assert spent.open_micros == 200_000
    assert snap.spend_micros == spent.spent_micros
    assert snap.reserved_micros == spent.open_micros
    assert sum(snap.spend_by_model.values()) == snap.spend_micros


# -- the collector over HTTP ------------------------------------------------------------------


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """GET /metrics and parse it as Prometheus does."""
    reply = httpx.get(f"{url}/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def of(samples: Samples, name: str) -> dict[tuple[str, ...], float]:
    """The samples of one name, keyed by their label values in label-name order."""
    return {
        tuple(value for _label, value in labels): v
        for (sample, labels), v in samples.items()
        if sample == name
    }


def shared_work(store: EventStore) -> tuple[WorkQueue, BudgetAccounts]:
    """A queue with items in every state, three workers and three budget accounts."""
    queue = WorkQueue(store.engine)
    queue.enqueue([WorkItem(id=f"seed:{i}", kind="seed", payload={}) for i in range(6)])
    queue.enqueue([WorkItem(id=f"index:{i}", kind="index", payload={}) for i in range(2)])
    first, second, _third = queue.claim("w1", ["seed"], limit=3, lease_s=300)
    assert queue.finish(first, "done", "accepted")
    assert queue.finish(second, "parked", "provider")
    # A lease that ended a second before it began: expired at once, as a dead worker's.
    assert len(queue.claim("w2", ["seed"], limit=1, lease_s=-1)) == 1
    queue.worker_beat("host:1", "working", {"seeds": 1})
    queue.worker_beat("host:2", "idle", {})
    queue.worker_beat("host:3", "working", {"seeds": 2})
    accounts = BudgetAccounts(store.engine)
    accounts.set_cap("total", 5_000_000)
    accounts.set_cap("day:2026-01-01", 1_000_000)
    accounts.set_cap("all", None)
    accounts.reserve("h1", ["total", "day:2026-01-01"], 300_000)
    accounts.reserve("h2", ["total", "all"], 200_000)
    assert accounts.settle("h2", 150_000)
    return queue, accounts


def test_a_scrape_reports_the_log_the_queue_and_the_accounts(store: EventStore) -> None:
    batches = seed_log()
    append(store, batches[:-1])
    queue, accounts = shared_work(store)
    metrics = LogMetrics(store, chunk=4)
    registry = daemon_registry(metrics, queue, accounts)
    with MetricsServer(registry, lambda: {"status": "ok"}) as server:
        first = scrape(server.url)
        append(
            store,
            [
                batches[-1],
                (
                    "",
                    [
                        RunFinished(
                            run_id=RUN,
                            outcome="completed",
                            spent_micros=1_050_000,
                            accepted=1,
                            discarded=1,
                            stopped=2,
                        )
                    ],
                ),
            ],
        )
        samples = scrape(server.url)
    snap = metrics.snapshot()
    assert_expected(snap)
    assert snap == fold_log(store.read_all())
    # The collector caught up with the log on each scrape.
    assert of(first, "playlisteval_log_seq")[()] < of(samples, "playlisteval_log_seq")[()]
    assert of(samples, "playlisteval_log_seq") == {(): snap.last_seq}

    usd = {(m,): micros / 1_000_000 for m, micros in snap.spend_by_model.items()}
    assert of(samples, "playlisteval_spend_usd_total") == usd
    assert of(samples, "playlisteval_reserved_usd") == {(): 0.2}
    assert of(samples, "playlisteval_calls_in_flight") == {(): 1}
    assert of(samples, "playlisteval_calls_total") == {
        (model, outcome, role): n for (model, role, outcome), n in snap.calls.items()
    }
    assert of(samples, "playlisteval_gate_verdicts_total") == {
        (gate, phase, verdict): n for (phase, gate, verdict), n in snap.gates.items()
    }
    assert of(samples, "playlisteval_gate_pass_ratio") == {
        (gate, phase): ratio for (phase, gate), ratio in snap.gate_pass_ratio().items()
    }
    assert of(samples, "playlisteval_seeds") == {(s,): n for s, n in snap.seeds.items()}
    assert of(samples, "playlisteval_provider_errors_total") == {
        (k,): n for k, n in snap.provider_errors.items()
    }
    assert of(samples, "playlisteval_call_retries_total") == {
        (k,): n for k, n in snap.retries.items()
    }

    queued = {
        ("seed", "queued"): 2,
        ("seed", "leased"): 1,
        ("seed", "done"): 1,
        ("seed", "parked"): 1,
        ("seed", "expired"): 1,
        ("index", "queued"): 2,
    }
    assert queue.counts() == queued
    states = ("queued", "leased", "done", "parked", "expired")
    assert of(samples, "playlisteval_queue_items") == {
        (kind, state): queued.get((kind, state), 0)
        for kind in ("seed", "index")
        for state in states
    }
    assert of(samples, "playlisteval_workers") == {("working",): 2, ("idle",): 1}
    ages = of(samples, "playlisteval_worker_heartbeat_age_seconds")
    assert set(ages) == {("host:1",), ("host:2",), ("host:3",)}
    assert all(age >= 0 for age in ages.values())

    # The uncapped account has no cap sample.
    assert of(samples, "playlisteval_budget_cap_usd") == {("day:2026-01-01",): 1.0, ("total",): 5.0}
    assert of(samples, "playlisteval_budget_spent_usd") == {
        ("all",): 0.15,
        ("day:2026-01-01",): 0.0,
        ("total",): 0.15,
    }
    assert of(samples, "playlisteval_budget_reserved_usd") == {
        ("all",): 0.0,
        ("day:2026-01-01",): 0.3,
        ("total",): 0.3,
    }
    assert of(samples, "playlisteval_budget_holds") == {(): 1}


def test_a_collector_without_queue_or_accounts_reports_the_log_only(
    sqlite_store: EventStore,
) -> None:
    append(sqlite_store, seed_log())
    registry = daemon_registry(LogMetrics(sqlite_store))
    with MetricsServer(registry, lambda: {"status": "ok"}) as server:
        names = {name for name, _labels in scrape(server.url)}
    assert "playlisteval_calls_total" in names
    assert not any(name.startswith(("playlisteval_queue", "playlisteval_budget")) for name in names)


# -- health and routing -----------------------------------------------------------------------


def broken_health() -> dict[str, Any]:
    raise RuntimeError("event store unreachable")


@pytest.mark.parametrize(
    ("health", "status", "body"),
    [
        (lambda: {"status": "ok", "workers": 2}, 200, {"status": "ok", "workers": 2}),
        (
            lambda: {"status": "degraded", "why": "no worker beat"},
            503,
            {"status": "degraded", "why": "no worker beat"},
        ),
        (broken_health, 503, {"status": "error", "error": "RuntimeError: event store unreachable"}),
    ],
    ids=["ok", "degraded", "raises"],
)
def test_healthz_answers_200_only_when_the_status_is_ok(
    health: Any, status: int, body: dict[str, Any]
) -> None:
    with MetricsServer(CollectorRegistry(), health) as server:
        reply = httpx.get(f"{server.url}/healthz")
    assert reply.status_code == status
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == body


def test_unknown_paths_are_404_and_close_frees_the_port() -> None:
    server = MetricsServer(CollectorRegistry(), lambda: {"status": "ok"})
    assert server.port > 0
    assert httpx.get(f"{server.url}/nope").status_code == 404
    assert httpx.get(f"{server.url}/metrics?x=1").status_code == 200
    server.close()
    server.close()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/metrics")
