"""Event store benchmarks, each against a baseline measured in the same run.

1. Append rate: 100 000 CallRecorded-sized events, 20 seed streams, batches of 5–50 with
   expected versions (as the curation loop appends), through ``SqliteEventStore`` — its hash
   chain and stream heads included — against raw ``sqlite3`` ``executemany`` of the same events
   into an identical table (no chain), one transaction per batch, in the same WAL/NORMAL mode.
   The baseline encodes the events too (pydantic dump + JSON), so the ratio is the store's own
   overhead; a second baseline starts from pre-encoded rows. Target: store / raw ≥ 0.5.
2. Fold rate: 1 000 000 stored events in a realistic mix folded by the one ledger
   (``store.ledger.spend``). Target: ≤ 1 s. Also: the projections' pure ``apply`` into seed
   statuses and spend, and ``verify`` of the appended log's chains.
3. The keyed chain (step 18): the same appends with the log key (HMAC-SHA256) against the
   plain chain, measured in the same run; and ``verify`` and an anchor of the keyed log at two
   sizes (``--events`` and a fifth of it), each as events/s, so a super-linear cost shows as a
   falling rate.

Run: `.venv/bin/python bench/events.py [--events N] [--fold N] [--workdir DIR]`.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from store.chain import read_log_key
from store.events import (
    AttemptStarted,
    CallRecorded,
    CallReserved,
    Event,
    GatePassed,
    GateRejected,
    ItemAccepted,
    SeedStarted,
    encode_event,
    seed_stream,
)
from store.eventstore import SqliteEventStore, StoredEvent
from store.ledger import spend
from store.projections import fold

STREAMS = 20
_DDL = """
CREATE TABLE events (
    seq INTEGER NOT NULL PRIMARY KEY, stream VARCHAR NOT NULL, version INTEGER NOT NULL,
    type VARCHAR NOT NULL, schema INTEGER NOT NULL, data JSON NOT NULL,
    recorded_at DATETIME NOT NULL, CONSTRAINT uq_events_stream_version UNIQUE (stream, version)
);
CREATE INDEX ix_events_type ON events (type);
"""


def call_event(n: int) -> CallRecorded:
    """A CallRecorded the size the loop writes (a short structured response, usage, cost)."""
    return CallRecorded(
        call_id=f"call-{n:08d}",
        key=f"{n:064x}",
        role="judge",
        model="gemini-3-flash",
        phase=1 + n % 2,
        gate=("blind", "text_only", "native_video")[n % 3],
        response={
            "parts": [
                {
                    "part_kind": "tool-call",
                    "tool_name": "final_result",
                    "args": {"verdict": "pass", "reason": "the answer needs the second clip " * 3},
                }
            ],
            "usage": {"input_tokens": 1834, "output_tokens": 96},
            "model_name": "gemini-3-flash",
        },
        input_tokens=1834,
        output_tokens=96,
        cost_micros=412 + n % 97,
        offline=True,
    )


def batches(total: int, seed: int = 7) -> list[tuple[str, list[Event]]]:
    """``total`` events cut into batches of 5–50 over 20 streams."""
    rng = random.Random(seed)
    out: list[tuple[str, list[Event]]] = []
    n = 0
    while n < total:
        size = min(rng.randint(5, 50), total - n)
        out.append(
            (
                seed_stream("bench", f"s{rng.randrange(STREAMS)}"),
                [call_event(n + i) for i in range(size)],
            )
        )
        n += size
    return out


def _raw_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_DDL)
    return conn


def _raw_append(
    conn: sqlite3.Connection, work: list[tuple[str, list[tuple[str, int, str]]]]
) -> None:
    versions: dict[str, int] = {}
    seq = 0
    now = datetime.now(UTC).isoformat()
    insert = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)"
    for stream, rows in work:
        conn.execute("BEGIN IMMEDIATE")
        version = versions.get(stream, 0)
        params = []
        for type_, schema, data in rows:
            seq += 1
            version += 1
            params.append((seq, stream, version, type_, schema, data, now))
        conn.executemany(insert, params)
        conn.execute("COMMIT")
        versions[stream] = version


def bench_append(total: int, workdir: Path) -> dict[str, float]:
    """Events/s through the store and through raw sqlite3, and their ratio."""
    work = batches(total)

    start = time.perf_counter()
    encoded = [
        (stream, [(t, s, json.dumps(d)) for t, s, d in map(encode_event, events)])
        for stream, events in work
    ]
    conn = _raw_connection(workdir / "raw.db")
    _raw_append(conn, encoded)
    raw_s = time.perf_counter() - start
    conn.close()

    conn = _raw_connection(workdir / "raw_rows.db")
    start = time.perf_counter()
    _raw_append(conn, encoded)
    raw_rows_s = time.perf_counter() - start
    conn.close()

    store = SqliteEventStore(workdir / "store.db")
    versions: dict[str, int] = {}
    start = time.perf_counter()
    for stream, events in work:
        stored = store.append(stream, events, expected_version=versions.get(stream, 0))
        versions[stream] = stored[-1].version
    store_s = time.perf_counter() - start
    assert store.last_seq() == total
    start = time.perf_counter()
    problems = store.verify()
    verify_s = time.perf_counter() - start
    assert problems == [], problems[:3]
    store.close()
    return {
        "append_store_events_per_s": total / store_s,
        "append_raw_sqlite3_events_per_s": total / raw_s,
        "append_raw_sqlite3_preencoded_events_per_s": total / raw_rows_s,
        "append_ratio_store_vs_raw": raw_s / store_s,
        "append_ratio_store_vs_raw_preencoded": raw_rows_s / store_s,
        "append_batches": float(len(work)),
        "verify_events_per_s": total / verify_s,
    }


def _append_all(store: SqliteEventStore, work: list[tuple[str, list[Event]]]) -> float:
    versions: dict[str, int] = {}
    start = time.perf_counter()
    for stream, events in work:
        stored = store.append(stream, events, expected_version=versions.get(stream, 0))
        versions[stream] = stored[-1].version
    return time.perf_counter() - start


def bench_keyed(total: int, workdir: Path) -> dict[str, float]:
    """The keyed chain against the plain one (appends; the keyed store with its key file, so its
    head beside the key is advanced on every commit, as in a workspace), then verify and anchor
    at two sizes."""
    out: dict[str, float] = {}
    key_file = workdir / "log_key"
    key = read_log_key(key_file, create=True)
    assert key is not None
    for size in (total // 5, total):
        work = batches(size)
        plain = SqliteEventStore(workdir / f"plain-{size}.db")
        plain_s = _append_all(plain, work)
        plain.close()
        keyed = SqliteEventStore(workdir / f"keyed-{size}.db", key=key, key_file=key_file)
        keyed_s = _append_all(keyed, work)
        start = time.perf_counter()
        problems = keyed.verify()
        verify_s = time.perf_counter() - start
        assert problems == [], problems[:3]
        # The quick check (runs, audit) after 1 % more events: it goes on from the checkpoint
        # the full check left beside the key.
        more = batches(max(size // 100, 1))
        _append_all(keyed, [(f"more-{stream}", events) for stream, events in more])
        start = time.perf_counter()
        quick = keyed.check(quick=True)
        quick_s = time.perf_counter() - start
        assert quick.problems == [], quick.problems[:3]
        assert quick.since > 0
        out[f"keyed_{size}_quick_check_vs_full_time_ratio"] = quick_s / verify_s
        start = time.perf_counter()
        anchor = keyed.anchor(["seed-*"])
        anchor_s = time.perf_counter() - start
        start = time.perf_counter()
        assert keyed.check_anchor(anchor) == []
        check_s = time.perf_counter() - start
        keyed.close()
        out[f"keyed_{size}_append_ratio_keyed_vs_plain"] = plain_s / keyed_s
        out[f"keyed_{size}_verify_events_per_s"] = size / verify_s
        out[f"keyed_{size}_anchor_events_per_s"] = size / anchor_s
        out[f"keyed_{size}_check_anchor_events_per_s"] = size / check_s
    return out


def _paid(
    templates: dict[str, tuple[str, int, dict[str, Any]]], call_id: str
) -> list[tuple[str, int, dict[str, Any]]]:
    """A reservation and its answer, sharing a call id (as the recorder writes them)."""
    (rt, rs, rd), (ct, cs, cd) = templates["reserve"], templates["call"]
    return [(rt, rs, {**rd, "call_id": call_id}), (ct, cs, {**cd, "call_id": call_id})]


def synthetic_log(total: int, seed: int = 11) -> list[StoredEvent]:
    """About ``total`` stored events: seeds going through attempts, gates and paid calls."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    templates: dict[str, tuple[str, int, dict[str, Any]]] = {
        "attempt1": encode_event(AttemptStarted(phase=1, attempt=1)),
        "attempt2": encode_event(AttemptStarted(phase=2, attempt=1)),
        "reserve": encode_event(
            CallReserved(call_id="c", key="k", role="judge", model="m", reserved_micros=900)
        ),
        "call": encode_event(call_event(1)),
        "pass": encode_event(GatePassed(phase=1, gate="blind", attempt=1)),
        "reject": encode_event(
            GateRejected(phase=1, gate="blind", attempt=1, reason="too easy", rejected_output="x")
        ),
    }
    out: list[StoredEvent] = []
    seq = 0
    n_seed = 0
    while seq < total:
        n_seed += 1
        stream = seed_stream(f"run{n_seed % 8}", f"s{n_seed}")
        body: list[tuple[str, int, dict[str, Any]]] = [
            encode_event(
                SeedStarted(
                    run_id=f"run{n_seed % 8}",
                    seed_id=f"s{n_seed}",
                    domain="d",
                    segment_a="a",
                    segment_b="b",
                )
            )
        ]
        ids = (f"s{n_seed}:{k}" for k in range(1, 1000))
        for _ in range(rng.randint(2, 6)):
            body += [templates["attempt1"], *_paid(templates, next(ids))]
            body += [*_paid(templates, next(ids)), templates[rng.choice(["pass", "reject"])]]
        body += [templates["attempt2"], *_paid(templates, next(ids))]
        body.append(
            encode_event(ItemAccepted(seed_id=f"s{n_seed}", qa={"q": "?"}, distractors={"4": "x"}))
        )
        for version, (type_, schema, data) in enumerate(body, start=1):
            seq += 1
            out.append(StoredEvent(seq, stream, version, type_, schema, data, now))
    return out[:total]


def bench_fold(total: int) -> dict[str, float]:
    """Seconds to fold ``total`` events by the ledger, and into statuses and spend."""
    log = synthetic_log(total)
    start = time.perf_counter()
    ledger = spend(log)
    ledger_s = time.perf_counter() - start
    assert ledger.spent_micros > 0
    start = time.perf_counter()
    state = fold(log)
    fold_s = time.perf_counter() - start
    assert state.last_seq == total
    return {
        "fold_events": float(total),
        "ledger_fold_seconds": ledger_s,
        "ledger_fold_events_per_s": total / ledger_s,
        "projection_fold_seconds": fold_s,
        "projection_fold_events_per_s": total / fold_s,
        "fold_seeds": float(len(state.seeds)),
    }


def run(
    events: int = 100_000, fold_events: int = 1_000_000, workdir: Path | None = None
) -> dict[str, float]:
    """Both benchmarks; the figures, keyed by name."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = workdir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.db*"):  # start from empty files on every run
            if old.stem.split(".")[0] in {"raw", "raw_rows", "store"} or old.stem.startswith(
                ("plain-", "keyed-")
            ):
                old.unlink()
        results = bench_append(events, folder)
        results.update(bench_keyed(events, folder))
    results.update(bench_fold(fold_events))
    return results


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--fold", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    for name, value in run(args.events, args.fold, args.workdir).items():
        print(f"{name:45s} {value:14,.2f}")


if __name__ == "__main__":
    main()
