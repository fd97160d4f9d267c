"""The fleet gives the benchmark one process gives, at a campaign-like size.

A campaign collection (``--domains`` × ``--hours-per-domain`` hours, generated and indexed as
``playlisteval demo --domains N --hours-per-domain H`` does, once per ``--root``) gives
``--seeds`` seeds (chosen as ``curate`` chooses them). They are curated twice, each side on a
fresh PostgreSQL schema of its own (dropped afterwards), with the same settings, cap and offline
provider holding each call ``--latency`` seconds:

1. one process: the ``Curator`` a ``playlisteval curate`` drives, ``--concurrency`` seeds in
   flight;
2. the fleet: the run queued as ``enqueue`` queues it, ``--workers`` ``playlisteval worker``
   processes of ``--concurrency`` seeds each, of which a seeded RNG (``--rng-seed``) kills one
   (``kill -9``) ``--kills`` times, at random moments (the first, and about half the others, while
   a call of the worker is in flight), each time starting one again under the dead one's name or
   a new one, until every seed is done.

Then the pairs step (the difficulty gate and the per-domain sample) runs on both logs, and the
two benchmarks are compared: per seed the accepted question and its five answers, the discarded
seeds, the pairs as (seed, prompt, chosen, rejected, gap), and the calls paid per seed. Also
counted: calls paid twice within a seed (must be 0), reservations left open outside the seeds a
killed worker held (must be 0), and the fleet's spend against the cap in its log (open
reservations counted as spent) and in its campaign account. A difference is printed seed by
seed, with the first decision event where the two logs part.

The cap (``--cap-usd``, default 1 USD a seed) is well above what the seeds cost: a seed the
cap parks is parked by whichever seeds reserved first, an order the fleet does not keep. The
difficulty judges' calls reserve in the fleet's campaign account too: its cap is raised before
its pairs are selected (the curation's spend is read first).

Run: `.venv/bin/python bench/fleet_same.py [--seeds 120] [--workers 4] [--kills 6]
[--latency 0.1] [--concurrency 4] [--rng-seed 1] [--domains 2] [--hours-per-domain 3]
[--cap-usd USD] [--pg-url URL] [--root DIR]`.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
from _machine import machine
from workers import PG_URL, REPO, new_schema

from agents.fleet import TOTAL_ACCOUNT, start_run
from agents.pairs import accepted_items
from playlisteval import runs
from playlisteval.app import App, curation_config
from playlisteval.runs.curation import choose_seeds
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.accounts_check import check_accounts
from store.catalog import SeedRow
from store.events import Kind, seed_stream, types_of, usd_to_micros
from store.eventstore import StoredEvent
from store.ledger import spend

RUN_ID = "fleet-same"
PAIRS_CAP_USD = 90_000.0  # the fleet's campaign cap while its pairs are judged (most allowed)
POLL_S = 0.2
WORKER = [sys.executable, "-m", "playlisteval", "worker"]
WORKER_EXIT_S = 900.0
# The workspace's settings: the rehearsal's (``playlisteval demo --domains …``).
WORKSPACE_SETTINGS = '[index]\ntranscriber = "captions"\n'
# What a seed's loop decided (the calls around the decisions are compared apart, as keys).
DECISIONS = types_of(Kind.DECISION)


class BenchError(Exception):
    """The comparison could not be made (a worker failed, the fleet stalled…)."""


# -- the workspace -----------------------------------------------------------------------------


def campaign_workspace(root: Path, domains: int, hours: float) -> Path:
    """The generated collection indexed and its seeds computed under ``root``, as ``playlisteval
    demo --domains … --hours-per-domain …`` does before it curates; made once, then reused."""
    from tools.offline.campaign import CampaignSpec, make_campaign

    home = root / f"workspace-{domains}x{hours:g}h"
    home.mkdir(parents=True, exist_ok=True)
    settings = home / SETTINGS_FILE
    if not settings.exists():
        settings.write_text(WORKSPACE_SETTINGS)
    with App(load_settings(home)) as app:
        if app.catalog.seeds():
            return home
        started = time.perf_counter()
        collection = home / "collection"
        manifest = make_campaign(collection, CampaignSpec(domains=domains, hours_per_domain=hours))
        indexer = app.indexer()
        indexer.add(str(manifest), domain=None, allowed_roots=[collection])
        indexer.prepare_media()
        done = indexer.index_ready()
        done.duplicates = indexer.dedupe()
        indexer.backfill(done)
        seeds = indexer.compute_seeds()
        print(
            f"workspace made in {time.perf_counter() - started:.0f} s: "
            f"{sum(seeds.values())} seeds over {len(app.catalog.segments())} segments",
            flush=True,
        )
    return home


def bench_seeds(home: Path, count: int) -> list[SeedRow]:
    """``count`` of the workspace's seeds, spread over domains and segments as ``curate``
    spreads them."""
    with App(load_settings(home)) as app:
        seeds, _spread = choose_seeds(app, count, again=True)
    if len(seeds) < count:
        raise BenchError(
            f"the workspace offers {len(seeds)} seeds, not {count}: lower --seeds or raise "
            "--hours-per-domain"
        )
    return seeds


@dataclass(frozen=True)
class Setup:
    """What both sides share: the workspace, the seeds, the settings that differ from the
    workspace's and the cap."""

    home: Path
    seeds: list[SeedRow]
    pg_url: str
    latency: float
    concurrency: int
    cap_micros: int

    def overrides(self, schema: str) -> dict[str, dict[str, Any]]:
        """The settings of a side whose store is PostgreSQL schema ``schema``."""
        return {
            "store": {"url": self.pg_url, "schema_name": schema},
            "curation": {
                "offline": True,
                "offline_latency_s": self.latency,
                "concurrency": self.concurrency,
            },
            "worker": {"lease_s": 10.0, "heartbeat_s": 1.0, "poll_s": 0.3, "exit_when_idle": True},
            "budget": {"cap_usd": self.cap_micros / 1e6},
        }

    def environment(self, schema: str) -> dict[str, str]:
        """The same settings as a worker process's environment."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLAYLISTEVAL_")}
        env["PLAYLISTEVAL_HOME"] = str(self.home)
        for section, values in self.overrides(schema).items():
            for name, value in values.items():
                text = str(value).lower() if isinstance(value, bool) else str(value)
                env[f"PLAYLISTEVAL_{section.upper()}__{name.upper()}"] = text
        return env

    def app(self, schema: str) -> App:
        """The workspace with its store in ``schema``."""
        return App(load_settings(self.home, **self.overrides(schema)))


# -- what a side produced -----------------------------------------------------------------------

Pair = tuple[str, str, str, str, int]  # seed, prompt, chosen, rejected, gap


@dataclass
class Side:
    """One side's benchmark and figures."""

    accepted: dict[str, tuple[str, tuple[tuple[int, str], ...]]] = field(default_factory=dict)
    discarded: set[str] = field(default_factory=set)
    other: dict[str, str] = field(default_factory=dict)  # seed → how it ended otherwise
    pairs: set[Pair] = field(default_factory=set)
    paid: dict[str, Counter[str]] = field(default_factory=dict)  # seed → paid call keys
    decisions: dict[str, list[str]] = field(default_factory=dict)  # seed → its decision events
    paid_twice: int = 0
    open_outside_kills: int = 0
    open_calls: int = 0
    log_spent_micros: int = 0
    account_spent_micros: int | None = None
    accounts_check: list[str] = field(default_factory=list)  # where account and log differ
    curate_s: float = 0.0
    pairs_s: float = 0.0


def decision(stored: StoredEvent) -> str:
    """One decision event as a line to compare (its type and what it decided)."""
    data = {k: v for k, v in stored.data.items() if k not in ("at", "recorded_at")}
    return f"{stored.type} {sorted(data.items())!r}"[:400]


def read_curation(app: App, side: Side, killed: Collection[str] = ()) -> None:
    """Fill ``side`` from the run's seed streams: endings, paid calls, decisions, spend."""
    prefix = seed_stream(RUN_ID, "")
    streams: dict[str, list[StoredEvent]] = {}
    for stored in app.events.read_all(stream_prefix=prefix):
        streams.setdefault(stored.stream[len(prefix) :], []).append(stored)
    for seed, events in streams.items():
        endings = [s.type for s in events if s.type in ("ItemAccepted", "SeedDiscarded")]
        if endings == ["SeedDiscarded"]:
            side.discarded.add(seed)
        elif endings != ["ItemAccepted"]:
            side.other[seed] = ",".join(endings) or "unfinished"
        paid = Counter(
            s.data["key"] for s in events if s.type == "CallRecorded" and not s.data["replayed"]
        )
        side.paid[seed] = paid
        side.paid_twice += sum(n - 1 for n in paid.values())
        side.decisions[seed] = [decision(s) for s in events if s.type in DECISIONS]
        settled = {s.data["call_id"] for s in events if s.type in ("CallRecorded", "CallFailed")}
        left = [s for s in events if s.type == "CallReserved" and s.data["call_id"] not in settled]
        side.open_calls += len(left)
        if seed not in killed:
            side.open_outside_kills += len(left)
    side.log_spent_micros = spend(s for events in streams.values() for s in events).spent_micros
    total = app.accounts().account(TOTAL_ACCOUNT)
    side.account_spent_micros = None if total is None else total.spent_micros
    if total is not None:
        check = check_accounts(app.events, [prefix])
        side.accounts_check = check.lines() if check.differences else []


def read_benchmark(app: App, side: Side) -> None:
    """Select the run's pairs (the judges answering at once) and read its accepted items."""
    app.settings.curation.offline_latency_s = 0.0
    app.settings.curation.concurrency = 8
    started = time.perf_counter()
    _, selected = runs.select_pairs(app, RUN_ID)
    side.pairs_s = time.perf_counter() - started
    items = {item.seed_id: item for item in accepted_items(app.events, RUN_ID)}
    side.accepted = {
        seed: (item.question, tuple(sorted(item.answers.items()))) for seed, item in items.items()
    }
    side.pairs = {
        (
            pair.seed_id,
            items[pair.seed_id].question,
            items[pair.seed_id].answers[pair.chosen_rating],
            items[pair.seed_id].answers[pair.rejected_rating],
            pair.gap,
        )
        for pair in selected
    }


# -- one process ------------------------------------------------------------------------------


def one_process(setup: Setup) -> Side:
    """Curate the seeds with one ``Curator`` (what ``playlisteval curate`` drives)."""
    side = Side()
    with new_schema(setup.pg_url, "bench_fleet_same_one") as schema, setup.app(schema) as app:
        started = time.perf_counter()
        anyio.run(lambda: app.curator().curate(RUN_ID, setup.seeds, budget_micros=setup.cap_micros))
        side.curate_s = time.perf_counter() - started
        read_curation(app, side)
        read_benchmark(app, side)
    return side


# -- the fleet ----------------------------------------------------------------------------------


@dataclass
class Fleet:
    """Worker processes over one schema: the live ones by name, every one started, the kills."""

    setup: Setup
    schema: str
    logs: Path
    live: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)
    kills: int = 0
    mid_call: int = 0
    same_name: int = 0
    killed_items: set[str] = field(default_factory=set)

    def start(self, name: str) -> None:
        """Start ``playlisteval worker --name name`` (its log numbered by incarnation)."""
        log = self.logs / f"{len(self.started):02d}-{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*WORKER, "--home", str(self.setup.home), "--name", name],
                cwd=REPO,
                env=self.setup.environment(self.schema),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.live[name] = process
        self.started.append(process)

    def kill(self, app: App, name: str) -> None:
        """``kill -9`` worker ``name``, noting the seeds it held just before and just after."""

        def held() -> set[str]:
            return {i.id for i in app.queue().items() if i.owner == name and i.state == "leased"}

        before = held()
        process = self.live.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        self.killed_items |= before | held()
        self.kills += 1

    def stop_mid_call(self, app: App, timeout: float) -> str | None:
        """A live worker stopped (SIGSTOP) while one of its seeds has a call reserved and not
        settled (looked at again once stopped); None when none was caught in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for item in app.queue().items(kind="seed"):
                if item.state != "leased" or item.owner not in self.live:
                    continue
                stream = seed_stream(RUN_ID, item.id.removeprefix("seed:"))
                if not in_flight(app, stream):
                    continue
                self.live[item.owner].send_signal(signal.SIGSTOP)
                if in_flight(app, stream):
                    return item.owner
                self.live[item.owner].send_signal(signal.SIGCONT)
            time.sleep(0.03)
        return None

    def check(self) -> None:
        """Raise when a live worker has exited with an error."""
        for name, process in self.live.items():
            if process.poll() not in (None, 0):
                raise BenchError(f"worker {name} exited with status {process.returncode}")

    def end(self) -> None:
        """Kill every worker process still running (after an error)."""
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait()


def in_flight(app: App, stream: str) -> bool:
    """Whether a call of ``stream`` is reserved and neither recorded nor failed."""
    open_calls: set[str] = set()
    for stored in app.events.read_stream(stream):
        if stored.type == "CallReserved":
            open_calls.add(stored.data["call_id"])
        elif stored.type in ("CallRecorded", "CallFailed"):
            open_calls.discard(stored.data["call_id"])
    return bool(open_calls)


class CallCount:
    """The run's recorded calls so far, read incrementally."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.after = 0
        self.count = 0

    def __call__(self) -> int:
        found = self.app.events.read_all(
            self.after, types=["CallRecorded"], omit=("response",), stream_prefix="seed-"
        )
        if found:
            self.after = found[-1].seq
            self.count += len(found)
        return self.count

    def reached(self, count: int) -> bool:
        """Whether ``count`` calls are recorded."""
        return self() >= count


def wait_until(fleet: Fleet, condition: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll ``condition`` (the workers checked too); BenchError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        fleet.check()
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: not within {timeout:g} s; see {fleet.logs}")
        time.sleep(POLL_S)


def fleet_side(
    setup: Setup, *, workers: int, kills: int, rng: random.Random, calls: int, logs: Path
) -> tuple[Side, Fleet]:
    """Queue the run, start the workers, kill and restart ``kills`` times, wait for the end."""
    side = Side()
    with new_schema(setup.pg_url, "bench_fleet_same_fleet") as schema, setup.app(schema) as app:
        app.set_budget_caps()
        start_run(
            app.events,
            app.queue(),
            RUN_ID,
            setup.seeds,
            budget_micros=setup.cap_micros,
            per_seed_micros=None,
            config=curation_config(app.settings),
        )
        fleet = Fleet(setup, schema, logs)
        names = iter(range(workers, 100_000))
        recorded = CallCount(app)
        started = time.perf_counter()
        try:
            for n in range(workers):
                fleet.start(f"w{n}")
            moments = sorted(rng.sample(range(calls // 10, calls * 8 // 10), kills))
            for n, moment in enumerate(moments):
                wait_until(fleet, partial(recorded.reached, moment), f"{moment} calls", 600)
                victim = None
                if n == 0 or rng.random() < 0.5:
                    victim = fleet.stop_mid_call(app, timeout=20)
                fleet.mid_call += victim is not None
                dead = victim or rng.choice(sorted(fleet.live))
                fleet.kill(app, dead)
                same = rng.random() < 0.5
                fleet.same_name += same
                fleet.start(dead if same else f"w{next(names)}")
            deadline = time.monotonic() + WORKER_EXIT_S
            for name, process in fleet.live.items():
                status = process.wait(timeout=max(deadline - time.monotonic(), 1.0))
                if status != 0:
                    raise BenchError(f"worker {name} exited with status {status}; see {logs}")
        finally:
            fleet.end()
        side.curate_s = time.perf_counter() - started
        undone = [i.id for i in app.queue().items(kind="seed") if i.state != "done"]
        if undone:
            raise BenchError(f"the workers left {len(undone)} seeds not done: {undone[:5]}")
        killed = {item.removeprefix("seed:") for item in fleet.killed_items}
        read_curation(app, side, killed)
        app.settings.budget.cap_usd = PAIRS_CAP_USD
        app.set_budget_caps()
        read_benchmark(app, side)
    return side, fleet


# -- the comparison -----------------------------------------------------------------------------


def differences(one: Side, many: Side) -> list[str]:
    """Each seed whose outcome differs, with the first decision event where the logs part."""
    lines: list[str] = []
    seeds = sorted(set(one.decisions) | set(many.decisions))
    for seed in seeds:
        what = [
            name
            for name, a, b in (
                ("accepted item", one.accepted.get(seed), many.accepted.get(seed)),
                ("discarded", seed in one.discarded, seed in many.discarded),
                ("other ending", one.other.get(seed), many.other.get(seed)),
                ("paid calls", one.paid.get(seed), many.paid.get(seed)),
            )
            if a != b
        ]
        if not what:
            continue
        a, b = one.decisions.get(seed, []), many.decisions.get(seed, [])
        parted = (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
        at = next(parted, min(len(a), len(b)))
        lines.append(
            f"seed {seed}: {', '.join(what)} differ; decision {at}: one process "
            f"{a[at] if at < len(a) else '(end)'!s} / fleet {b[at] if at < len(b) else '(end)'!s}"
        )
    only_one, only_many = one.pairs - many.pairs, many.pairs - one.pairs
    if only_one or only_many:
        lines.append(
            f"pairs: {len(only_one)} only in one process (seeds "
            f"{sorted({p[0] for p in only_one})[:5]}), {len(only_many)} only in the fleet "
            f"(seeds {sorted({p[0] for p in only_many})[:5]})"
        )
    return lines


def paid_calls(side: Side) -> int:
    """The calls a side paid for."""
    return sum(sum(paid.values()) for paid in side.paid.values())


def usd(micros: int | None) -> str:
    return "—" if micros is None else f"{micros / 1e6:.2f}"


def report(setup: Setup, one: Side, many: Side, fleet: Fleet, workers: int) -> list[str]:
    """Print the table; return the differences found."""
    found = differences(one, many)
    cap = setup.cap_micros
    rows = [
        ("seeds", str(len(setup.seeds)), str(len(setup.seeds))),
        ("processes", "1", f"{workers} (+{fleet.kills} restarted)"),
        ("accepted", str(len(one.accepted)), str(len(many.accepted))),
        ("discarded", str(len(one.discarded)), str(len(many.discarded))),
        ("ended otherwise", str(len(one.other)), str(len(many.other))),
        ("pairs sampled", str(len(one.pairs)), str(len(many.pairs))),
        ("calls paid", str(paid_calls(one)), str(paid_calls(many))),
        ("calls paid twice", str(one.paid_twice), str(many.paid_twice)),
        ("reservations left open", str(one.open_calls), str(many.open_calls)),
        ("… outside seeds a kill held", str(one.open_outside_kills), str(many.open_outside_kills)),
        ("spend in log (USD)", usd(one.log_spent_micros), usd(many.log_spent_micros)),
        ("spend in account (USD)", "—", usd(many.account_spent_micros)),
        ("cap (USD)", usd(cap), usd(cap)),
        ("curation wall (s)", f"{one.curate_s:.1f}", f"{many.curate_s:.1f}"),
        ("pairs step wall (s)", f"{one.pairs_s:.1f}", f"{many.pairs_s:.1f}"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'':<{width}}  {'one process':>12}  fleet")
    for name, a, b in rows:
        print(f"{name:<{width}}  {a:>12}  {b}")
    print(
        f"\nkills: {fleet.kills} (mid-call {fleet.mid_call}); restarts: {fleet.kills} "
        f"({fleet.same_name} under the dead worker's name, {fleet.kills - fleet.same_name} new)"
    )
    print(f"wall fleet / one process: {many.curate_s / one.curate_s:.2f}")
    within = many.log_spent_micros <= cap and (many.account_spent_micros or 0) <= cap
    print(f"spend within the cap: {'yes' if within and one.log_spent_micros <= cap else 'NO'}")
    print(
        "fleet's account against its log: "
        + ("they agree" if not many.accounts_check else "; ".join(many.accounts_check))
    )
    print(f"identical benchmark: {'yes' if not found else 'NO'}")
    for line in found:
        print(f"  {line}")
    return found


def main() -> None:
    """Curate the same seeds both ways, print the table; exit 1 when they differ."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=120)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per offline call")
    parser.add_argument("--concurrency", type=int, default=4, help="seeds in flight per process")
    parser.add_argument("--rng-seed", type=int, default=1)
    parser.add_argument("--domains", type=int, default=2)
    parser.add_argument("--hours-per-domain", type=float, default=3.0)
    parser.add_argument("--cap-usd", type=float, default=None, help="default: 1 USD a seed")
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--root", type=Path, default=Path("/tmp/playlisteval-bench-fleet-same"))
    args = parser.parse_args()
    if args.seeds < 1 or args.workers < 1 or args.kills < 1 or args.latency <= 0:
        parser.error("--seeds, --workers and --kills must be at least 1, --latency positive")
    print(f"machine: {machine()}", flush=True)
    root = args.root.expanduser().resolve()
    try:
        home = campaign_workspace(root, args.domains, args.hours_per_domain)
        setup = Setup(
            home=home,
            seeds=bench_seeds(home, args.seeds),
            pg_url=args.pg_url,
            latency=args.latency,
            concurrency=args.concurrency,
            cap_micros=usd_to_micros(args.cap_usd if args.cap_usd else float(args.seeds)),
        )
        one = one_process(setup)
        print(
            f"one process: curated in {one.curate_s:.1f} s, pairs in {one.pairs_s:.1f} s",
            flush=True,
        )
        logs = root / "worker-logs" / time.strftime("%Y%m%d-%H%M%S")
        logs.mkdir(parents=True)
        calls = paid_calls(one)
        many, fleet = fleet_side(
            setup,
            workers=args.workers,
            kills=args.kills,
            rng=random.Random(args.rng_seed),
            calls=calls,
            logs=logs,
        )
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    print(
        f"\n{args.seeds} seeds of {args.domains} x {args.hours_per_domain:g} h, "
        f"{args.workers} workers, latency {args.latency:g} s, {args.concurrency} seeds in "
        f"flight per process, RNG seed {args.rng_seed}"
    )
    if report(setup, one, many, fleet, args.workers):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
