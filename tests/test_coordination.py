"""The shared work queue and budget accounts, on a real SQLite file and real PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from store.coordination import AccountExhausted, BudgetAccounts, WorkItem, WorkQueue
from store.errors import PlaylistEvalError
from store.eventstore import EventStore


@pytest.fixture
def store(event_store: EventStore) -> EventStore:
    """The event store (SQLite file or PostgreSQL schema) whose database the test uses."""
    return event_store


def items(n: int, kind: str = "seed", run: str = "r1") -> list[WorkItem]:
    return [
        WorkItem(id=f"{kind}:{run}:{i:03d}", kind=kind, run_id=run, payload={"n": i})
        for i in range(n)
    ]


def test_enqueue_is_idempotent_by_id(store: EventStore) -> None:
    queue = WorkQueue(store.engine)
    assert queue.enqueue(items(5)) == 5
    assert queue.enqueue(items(7)) == 2
    assert queue.counts() == {("seed", "queued"): 7}
    assert [i.id for i in queue.items()] == [f"seed:r1:{i:03d}" for i in range(7)]


def test_a_claimed_item_is_nobody_elses_until_its_lease_expires(store: EventStore) -> None:
    queue = WorkQueue(store.engine)
    queue.enqueue(items(3))
    mine = queue.claim("a", ["seed"], limit=2, lease_s=0.6)
    theirs = queue.claim("b", ["seed"], limit=5, lease_s=0.6)
    assert [lease.item_id for lease in mine] == ["seed:r1:000", "seed:r1:001"]
    assert [lease.item_id for lease in theirs] == ["seed:r1:002"]
    assert queue.claim("c", ["seed"], limit=5, lease_s=0.6) == []
    assert queue.claim("c", ["index"], limit=5, lease_s=0.6) == []
    time.sleep(0.8)
    assert queue.counts() == {("seed", "expired"): 3}
    taken = queue.claim("c", ["seed"], limit=1, lease_s=30)
    assert taken[0].item_id == "seed:r1:000"
    assert taken[0].previous_owner == "a"
    assert taken[0].token == mine[0].token + 1
    assert taken[0].claims == 2
    # The old owner's lease is fenced off: its heartbeat and its completion change nothing.
    assert queue.heartbeat(mine, lease_s=30) == {"seed:r1:000"}
    assert not queue.finish(mine[0], "done", "accepted")
    assert queue.finish(taken[0], "done", "accepted")
    assert {i.id: (i.state, i.owner) for i in queue.items()}["seed:r1:000"] == ("done", "c")
    # a's other lease was renewed by that heartbeat and stays a's; b never beat, so b's goes.
    taken_over = queue.claim("d", ["seed"], limit=5, lease_s=30)
    assert [(lease.item_id, lease.previous_owner) for lease in taken_over] == [("seed:r1:002", "b")]


def test_a_worker_never_takes_over_an_item_it_is_still_working_on(store: EventStore) -> None:
    """A starved event loop can miss heartbeats until the worker's own lease lapses; its claim
    loop must not take the item over from itself (it would run the seed twice in one process),
    and its next heartbeat renews the lapsed lease, since nobody else took it."""
    queue = WorkQueue(store.engine)
    queue.enqueue(items(2))
    held = queue.claim("a", ["seed"], limit=1, lease_s=-1.0)  # lapsed at once
    assert [lease.item_id for lease in held] == ["seed:r1:000"]
    again = queue.claim("a", ["seed"], limit=5, lease_s=30, exclude={"seed:r1:000"})
    assert [(lease.item_id, lease.previous_owner) for lease in again] == [("seed:r1:001", None)]
    assert queue.heartbeat(held, lease_s=30) == set()
    assert queue.claim("b", ["seed"], limit=5, lease_s=30) == []  # renewed: a's again
    assert queue.finish(held[0], "done", "accepted")


def test_requeue_with_a_delay_and_release_on_shutdown(store: EventStore) -> None:
    queue = WorkQueue(store.engine)
    queue.enqueue(items(2))
    first, second = queue.claim("a", ["seed"], limit=2, lease_s=30)
    assert queue.finish(first, "queued", "budget: day", delay_s=3600)
    assert queue.claim("b", ["seed"], limit=5, lease_s=30) == []  # not due for an hour
    assert queue.release_owner("a") == 1  # the second goes back at once
    again = queue.claim("b", ["seed"], limit=5, lease_s=30)
    assert [lease.item_id for lease in again] == [second.item_id]
    assert queue.finish(again[0], "parked", "budget: total")
    assert queue.requeue(kind="seed", state="parked", result_prefix="budget") == 1
    assert [lease.item_id for lease in queue.claim("c", ["seed"], limit=5, lease_s=30)] == [
        second.item_id
    ]
    assert queue.open_items("r1") == 2


def test_concurrent_claimers_never_share_an_item(store: EventStore) -> None:
    queue = WorkQueue(store.engine)
    queue.enqueue(items(120))
    got: list[tuple[str, str]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            while True:
                leases = queue.claim(name, ["seed"], limit=3, lease_s=60)
                if not leases:
                    return
                for lease in leases:
                    assert queue.finish(lease, "done", "ok")
                with lock:
                    got.extend((name, lease.item_id) for lease in leases)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    counted = Counter(item for _, item in got)
    assert len(counted) == 120
    assert set(counted.values()) == {1}
    assert queue.counts() == {("seed", "done"): 120}


def test_worker_beats_are_listed(store: EventStore) -> None:
    queue = WorkQueue(store.engine)
    queue.worker_beat("host:1", "working", {"seeds": 3})
    queue.worker_beat("host:1", "stopping", {"seeds": 1})
    queue.worker_beat("host:2", "idle", {})
    listed = queue.workers()
    assert [(w["name"], w["state"], w["info"]) for w in listed] == [
        ("host:1", "stopping", {"seeds": 1}),
        ("host:2", "idle", {}),
    ]
    assert all(0 <= w["age_s"] < 60 for w in listed)


def test_a_reservation_takes_every_account_or_none(store: EventStore) -> None:
    accounts = BudgetAccounts(store.engine)
    accounts.set_cap("total", 1000)
    accounts.set_cap("day:2026-11-30", 300)
    accounts.reserve("h1", ["total", "day:2026-11-30"], 250, item_id="seed:1")
    with pytest.raises(AccountExhausted) as refused:
        accounts.reserve("h2", ["total", "day:2026-11-30"], 100)
    assert (refused.value.account, refused.value.left_micros) == ("day:2026-11-30", 50)
    # The refused reservation left the total untouched.
    total = accounts.account("total")
    assert total is not None
    assert (total.reserved_micros, total.spent_micros) == (250, 0)
    assert accounts.settle("h1", 120)
    day = accounts.account("day:2026-11-30")
    assert day is not None
    assert (day.spent_micros, day.reserved_micros, day.left_micros) == (120, 0, 180)
    assert not accounts.settle("h1", 120)  # settled once only
    with pytest.raises(PlaylistEvalError, match="does not exist"):
        accounts.reserve("h3", ["nowhere"], 1)


def test_holds_of_a_dead_worker_are_written_off_as_spent(store: EventStore) -> None:
    accounts = BudgetAccounts(store.engine)
    accounts.set_cap("total", None)
    accounts.reserve("a:1", ["total"], 70, item_id="seed:x", owner="dead")
    accounts.reserve("a:2", ["total"], 30, item_id="seed:y", owner="alive")
    assert accounts.write_off("seed:x") == 70
    assert not accounts.settle("a:1", 10)  # the dead worker's late settle changes nothing
    total = accounts.account("total")
    assert total is not None
    assert (total.spent_micros, total.reserved_micros) == (70, 30)
    assert accounts.holds() == 1


def test_many_threads_reserving_never_pass_the_cap(store: EventStore) -> None:
    accounts = BudgetAccounts(store.engine)
    accounts.set_cap("total", 10_000)
    taken: list[int] = []
    lock = threading.Lock()

    def spender(name: str) -> None:
        n = 0
        while True:
            n += 1
            hold = f"{name}:{n}"
            try:
                accounts.reserve(hold, ["total"], 300)
            except AccountExhausted:
                return
            accounts.settle(hold, 290)
            with lock:
                taken.append(290)

    threads = [threading.Thread(target=spender, args=(f"t{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = accounts.account("total")
    assert total is not None
    assert total.spent_micros == sum(taken) <= 10_000
    assert total.reserved_micros == 0
    # It stopped only because no 300 fitted any more.
    assert 10_000 - total.spent_micros < 300
