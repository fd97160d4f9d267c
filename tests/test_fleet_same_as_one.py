"""The fleet gives the benchmark one process gives: the same seeds curated once by one
``Curator`` on its own SQLite log and once by four ``playlisteval worker`` processes on
PostgreSQL, which a seeded RNG kills (``kill -9``) and restarts at random moments, end with the
same accepted questions, the same discarded seeds and the same preference pairs (the offline
provider is deterministic), spend at most the cap, and pay no call twice.

The helpers of the fleet's own test (``tests/test_fleet.py``) build the workspace, the seeds and
the workers; the offline provider holds every call ``offline_latency_s`` so that a kill can land
while a call is in flight.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
import pytest

from agents.fleet import TOTAL_ACCOUNT, start_run
from agents.pairs import accepted_items
from playlisteval import runs
from playlisteval.app import App, curation_config
from playlisteval.settings import load_settings
from store.catalog import SeedRow
from store.events import seed_stream, usd_to_micros
from store.eventstore import StoredEvent
from store.ledger import spend
from tests.test_fleet import by_stream, fleet_home, many_seeds, start_worker, unconsumed_calls
from tests.workspaces import copy_workspace

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SEEDS = 16
WORKERS = 4
KILLS = 3
LATENCY_S = 0.3  # the fleet's calls: long enough in flight for a kill to land in one
RUN_ID = "same-run"
# The curation's cap, well above what the seeds cost (about 0.06 USD each, plus what killed
# workers leave reserved): a seed the cap parks is parked by whichever seeds happen to reserve
# first, an order the fleet does not keep, so the two benchmarks could differ for that reason
# alone. A cap is still set, and both sides are checked against it.
CAP_USD = 3.0
# The difficulty judges' calls are priced as the paid models they stand for (about 0.6 USD a
# seed): the fleet's campaign cap is raised to this before its pairs are selected.
PAIRS_CAP_USD = 100.0


# -- what a run produced ---------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a run made of its seeds: per accepted seed its question and answers by rating (5:
    the gold answer), the discarded seeds, and the preference pairs the difficulty gate kept as
    ``(seed, prompt, chosen, rejected, gap)``."""

    accepted: dict[str, tuple[str, tuple[tuple[int, str], ...]]]
    discarded: frozenset[str]
    pairs: frozenset[tuple[str, str, str, str, int]]
    paid_keys: dict[str, Counter[str]] = field(compare=False)


def outcome_of(app: App, run_id: str) -> Outcome:
    """Read run ``run_id``'s benchmark from its log, its pairs selected first (the judges
    answering at once: their latency is no part of what is compared)."""
    app.settings.curation.offline_latency_s = 0.0
    app.settings.curation.concurrency = 8
    _, selected = runs.select_pairs(app, run_id)
    items = {item.seed_id: item for item in accepted_items(app.events, run_id)}
    pairs = frozenset(
        (
            pair.seed_id,
            items[pair.seed_id].question,
            items[pair.seed_id].answers[pair.chosen_rating],
            items[pair.seed_id].answers[pair.rejected_rating],
            pair.gap,
        )
        for pair in selected
    )
    prefix = seed_stream(run_id, "")
    streams = by_stream(app.events.read_all(stream_prefix=prefix))
    discarded = frozenset(
        name[len(prefix) :]
        for name, events in streams.items()
        if any(s.type == "SeedDiscarded" for s in events)
    )
    paid = {
        name[len(prefix) :]: Counter(
            s.data["key"] for s in events if s.type == "CallRecorded" and not s.data["replayed"]
        )
        for name, events in streams.items()
    }
    return Outcome(
        accepted={
            seed: (item.question, tuple(sorted(item.answers.items())))
            for seed, item in items.items()
        },
        discarded=discarded,
        pairs=pairs,
        paid_keys=paid,
    )


def paid_twice(streams: dict[str, list[StoredEvent]]) -> dict[str, list[str]]:
    """Per stream, the keys of calls paid (recorded, not served again from the log) more than
    once."""
    twice: dict[str, list[str]] = {}
    for name, events in streams.items():
        paid = Counter(
            s.data["key"] for s in events if s.type == "CallRecorded" and not s.data["replayed"]
        )
        if repeated := sorted(key for key, n in paid.items() if n > 1):
            twice[name] = repeated
    return twice


def open_reservations(streams: dict[str, list[StoredEvent]]) -> dict[str, list[str]]:
    """Per stream, the call ids reserved and neither recorded nor failed."""
    left: dict[str, list[str]] = {}
    for name, events in streams.items():
        settled = {s.data["call_id"] for s in events if s.type in ("CallRecorded", "CallFailed")}
        if unsettled := [
            s.data["call_id"]
            for s in events
            if s.type == "CallReserved" and s.data["call_id"] not in settled
        ]:
            left[name] = unsettled
    return left


# -- one process ------------------------------------------------------------------------------


def curate_in_one_process(home: Path) -> tuple[Outcome, int]:
    """Curate the seeds in this process, on the workspace's own SQLite log, four at a time as
    each worker does, its calls answered at once (the offline provider's answers do not depend
    on when they come); the benchmark and what the run spent."""
    with App(load_settings(home, curation={"concurrency": 4})) as app:
        seeds = many_seeds(app, SEEDS)
        report = anyio.run(
            lambda: app.curator().curate(RUN_ID, seeds, budget_micros=usd_to_micros(CAP_USD))
        )
        assert not report.stopped, f"one process stopped seeds: {report.stopped}"
        streams = by_stream(app.events.read_all(stream_prefix=seed_stream(RUN_ID, "")))
        assert paid_twice(streams) == {}
        assert open_reservations(streams) == {}
        return outcome_of(app, RUN_ID), report.spent_micros


# -- the fleet, killed and restarted ---------------------------------------------------------


@dataclass
class Fleet:
    """The worker processes of one run: the live ones by name, every one ever started, and what
    each kill left behind."""

    home: Path
    logs: Path
    live: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)
    names: Iterator[int] = field(default_factory=lambda: iter(range(WORKERS, 10_000)))
    kills: list[str] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)
    held_at_kill: set[str] = field(default_factory=set)  # item ids
    mid_call: int = 0  # kills that caught a call in flight
    log_of: dict[str, Path] = field(default_factory=dict)  # the live worker's log, by name

    def start(self, name: str) -> None:
        """Start worker ``name`` (its log in a folder of its own incarnation)."""
        logs = self.logs / f"{len(self.started):02d}"
        logs.mkdir()
        process = start_worker(self.home, name, logs)
        self.live[name] = process
        self.started.append(process)
        self.log_of[name] = logs / f"{name}.log"

    def kill(self, app: App, name: str) -> None:
        """``kill -9`` worker ``name``; what it held is noted (just before and just after the
        kill: a lease of a dead worker can be taken over at once)."""

        def held() -> set[str]:
            return {i.id for i in app.queue().items() if i.owner == name and i.state == "leased"}

        before = held()
        process = self.live.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        self.held_at_kill |= before | held()
        self.kills.append(name)

    def stop_mid_call(self, app: App, timeout: float) -> str | None:
        """A live worker stopped (SIGSTOP) while one of its seeds has a call in flight; looked
        at again once stopped, and let go if it moved on. None when none was caught in
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for item in app.queue().items(kind="seed"):
                if item.state != "leased" or item.owner not in self.live:
                    continue
                stream = seed_stream(RUN_ID, item.id.removeprefix("seed:"))
                if not unconsumed_calls(app.events.read_stream(stream))[1]:
                    continue
                self.live[item.owner].send_signal(signal.SIGSTOP)
                if unconsumed_calls(app.events.read_stream(stream))[1]:
                    return item.owner
                self.live[item.owner].send_signal(signal.SIGCONT)
            time.sleep(0.03)
        return None

    def end(self) -> None:
        """Kill every worker process still running (after a failure)."""
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 240.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.1)


def calls_reached(app: App, count: int) -> bool:
    """Whether the run has recorded ``count`` calls."""
    recorded = app.events.read_all(
        stream_prefix=seed_stream(RUN_ID, ""), types=["CallRecorded"], omit=("response",)
    )
    return len(recorded) >= count


def curate_with_a_killed_fleet(app: App, fleet: Fleet, rng: random.Random, calls: int) -> None:
    """Queue the seeds, start the workers, kill one at each of ``KILLS`` random moments (the
    first while a call is in flight) and restart one, under its name or a new one; then wait
    for the queue to empty and every worker to exit."""
    seeds: list[SeedRow] = many_seeds(app, SEEDS)
    app.set_budget_caps()
    queued = start_run(
        app.events,
        app.queue(),
        RUN_ID,
        seeds,
        budget_micros=usd_to_micros(CAP_USD),
        per_seed_micros=None,
        config=curation_config(app.settings),
    )
    assert queued == SEEDS
    for n in range(WORKERS):
        fleet.start(f"w{n}")
    # The moments: after a random number of the calls one process recorded, in order.
    moments = sorted(rng.sample(range(calls // 10, calls * 7 // 10), KILLS))
    # Restarted under the killed worker's name or a new one: each at least once.
    same_name = [True, False, *(rng.random() < 0.5 for _ in range(KILLS - 2))]
    rng.shuffle(same_name)
    for n, moment in enumerate(moments):
        wait_until(partial(calls_reached, app, moment), f"the fleet recording {moment} calls")
        victim = fleet.stop_mid_call(app, timeout=20) if n == 0 else None
        fleet.mid_call += victim is not None
        fleet.kill(app, victim or rng.choice(sorted(fleet.live)))
        name = fleet.kills[-1] if same_name[n] else f"w{next(fleet.names)}"
        fleet.start(name)
        fleet.restarts.append(name)
    for name, process in fleet.live.items():
        assert process.wait(timeout=300) == 0, fleet.log_of[name].read_text()[-3000:]


# -- the test ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rng_seed", [2407])
def test_four_killed_and_restarted_workers_curate_what_one_process_curates(
    rng_seed: int, demo_home: Path, pg_schema: str, tmp_path: Path
) -> None:
    said = f"(RNG seed {rng_seed})"
    rng = random.Random(rng_seed)
    cap = usd_to_micros(CAP_USD)
    one, one_spent = curate_in_one_process(copy_workspace(demo_home, tmp_path / "one"))
    assert one.accepted, f"no seed accepted: nothing to compare {said}"
    assert one.discarded, f"no seed discarded: nothing to compare {said}"
    assert one.pairs, f"no pair kept: nothing to compare {said}"
    assert one_spent <= cap

    home = fleet_home(
        copy_workspace(demo_home, tmp_path / "fleet"), pg_schema, cap_usd=CAP_USD, latency=LATENCY_S
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    calls = sum(sum(keys.values()) for keys in one.paid_keys.values())
    with App(load_settings(home)) as app:
        fleet = Fleet(home, logs)
        try:
            curate_with_a_killed_fleet(app, fleet, rng, calls)
        finally:
            fleet.end()
        said = f"(RNG seed {rng_seed}; kills {fleet.kills}, restarts {fleet.restarts})"
        items = app.queue().items(kind="seed")
        assert Counter(i.state for i in items) == {"done": SEEDS}, said
        assert fleet.mid_call >= 1, f"no kill caught a call in flight {said}"
        everything = app.events.read_all()
        total = app.accounts().account(TOTAL_ACCOUNT)
        holds = app.accounts().holds()
        app.settings.budget.cap_usd = PAIRS_CAP_USD
        app.set_budget_caps()
        many = outcome_of(app, RUN_ID)

    # The same benchmark.
    assert many.discarded == one.discarded, said
    assert many.accepted == one.accepted, said
    assert many.pairs == one.pairs, said

    # No call paid twice: within each seed a request's call is paid once, and the same calls
    # are paid as by one process (a call a killed worker had recorded is served again from the
    # log; one it had in flight is made again, its first reservation counted as spent).
    streams = by_stream(everything)
    assert paid_twice(streams) == {}, said
    assert many.paid_keys == one.paid_keys, said
    # Every reservation settled, but those a killed worker left open in the seeds it held.
    held = {seed_stream(RUN_ID, i.removeprefix("seed:")) for i in fleet.held_at_kill}
    left_open = open_reservations(streams)
    assert set(left_open) <= held, said
    assert left_open, f"the kill mid-call left no open reservation {said}"

    # Spend under the cap, in the log (open reservations counted as spent) and in the account.
    spent = spend(s for s in everything if s.stream.startswith(seed_stream(RUN_ID, "")))
    assert spent.open_micros > 0, said
    assert spent.spent_micros <= cap, said
    assert total is not None
    assert total.spent_micros <= cap, said
    assert total.reserved_micros == 0, said
    assert holds == 0, said
