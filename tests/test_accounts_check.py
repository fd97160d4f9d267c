"""The budget accounts checked against the log's ledger: equal when nothing crashed, equal after
a worker is killed with calls in flight and another finishes its seeds (its holds written off
as spent once, on both sides), and each difference named when a kill falls between the two
writes of a call."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from agents.fleet import start_run
from playlisteval.app import App, curation_config
from playlisteval.cli import EXIT_TAMPERED
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from policies import budget as policies_budget
from store.accounts_check import (
    DAY_PREFIX,
    TOTAL_ACCOUNT,
    AccountsCheck,
    OpenCall,
    check_accounts,
    day_account,
    hold_call,
)
from store.coordination import BUDGET_ACCOUNTS, BudgetAccounts
from store.events import CallFailed, CallRecorded, CallReserved, seed_stream
from store.eventstore import EventStore
from tests.conftest import PG_URL
from tests.test_fleet import many_seeds

STREAM = seed_stream("r", "s1")


def today() -> str:
    return day_account(datetime.now(UTC))


def accounts_of(events: EventStore) -> BudgetAccounts:
    accounts = BudgetAccounts(events.engine)
    accounts.set_cap(TOTAL_ACCOUNT, None)
    accounts.set_cap(today(), None)
    return accounts


def reserved(call: str, micros: int) -> CallReserved:
    return CallReserved(
        call_id=call, key="k" + call, role="judge", model="m", phase=1, gate="blind",
        reserved_micros=micros,
    )  # fmt: skip


def recorded(call: str, cost: int, *, replayed: bool = False) -> CallRecorded:
    return CallRecorded(
        call_id=call, key="k" + call, role="judge", model="m", phase=1, gate="blind",
        response={}, cost_micros=cost, offline=True, replayed=replayed,
    )  # fmt: skip


def failed(call: str, charged: int) -> CallFailed:
    return CallFailed(
        call_id=call, key="k" + call, role="judge", model="m", phase=1, gate="blind",
        error="interrupted", charged_micros=charged, outcome="interrupted",
    )  # fmt: skip


def hold(accounts: BudgetAccounts, call: str, micros: int) -> str:
    """A fleet worker's hold for ``call`` of seed s1 in run r (as agents.fleet names it)."""
    hold_id = f"run-r/{call}@w1"
    accounts.reserve(hold_id, [TOTAL_ACCOUNT, today()], micros, item_id="seed:s1", owner="w1")
    return hold_id


def test_a_paid_a_failed_and_a_replayed_call_leave_the_accounts_equal_to_the_ledger(
    event_store: EventStore,
) -> None:
    accounts = accounts_of(event_store)
    paid, charged = hold(accounts, "s1:1", 900), hold(accounts, "s1:2", 700)
    event_store.append(STREAM, [reserved("s1:1", 900), reserved("s1:2", 700)])
    accounts.settle(paid, 400)
    accounts.settle(charged, 700)
    event_store.append(STREAM, [recorded("s1:1", 400), failed("s1:2", 700)])
    event_store.append(STREAM, [recorded("s1:3", 400, replayed=True)])  # served from the log

    check = check_accounts(event_store)

    assert check.equal, check.lines()
    assert {(a.name, a.account_micros, a.ledger_micros) for a in check.accounts} == {
        (TOTAL_ACCOUNT, 1100, 1100),
        (today(), 1100, 1100),
    }
    assert check.in_flight == check.written_off == ()
    assert check.lines()[0].startswith("the budget accounts agree with the ledger")


def test_a_call_in_flight_is_reserved_on_both_sides_and_listed_as_such(
    event_store: EventStore,
) -> None:
    accounts = accounts_of(event_store)
    hold_id = hold(accounts, "s1:1", 900)
    event_store.append(STREAM, [reserved("s1:1", 900)])

    check = check_accounts(event_store)

    assert check.equal, check.lines()
    assert check.in_flight == (OpenCall(STREAM, "s1:1", 900, hold_id),)
    assert check.written_off == ()


def test_a_dead_workers_hold_written_off_counts_once_on_both_sides(
    event_store: EventStore,
) -> None:
    accounts = accounts_of(event_store)
    hold(accounts, "s1:1", 900)
    event_store.append(STREAM, [reserved("s1:1", 900)])
    # The worker dies with the call in flight; whoever takes the seed over writes it off, and
    # goes on with the next call id (the log keeps the dead one's reservation open).
    assert accounts.write_off("seed:s1") == 900
    redo = hold(accounts, "s1:2", 900)
    event_store.append(STREAM, [reserved("s1:2", 900)])
    accounts.settle(redo, 300)
    event_store.append(STREAM, [recorded("s1:2", 300)])

    check = check_accounts(event_store)

    assert check.equal, check.lines()
    assert check.written_off == (OpenCall(STREAM, "s1:1", 900, None),)
    assert [(a.spent_micros, a.reserved_micros) for a in check.accounts] == [(1200, 0)] * 2


def test_a_kill_between_the_hold_and_its_reservation_is_named(event_store: EventStore) -> None:
    accounts = accounts_of(event_store)
    hold_id = hold(accounts, "s1:1", 900)  # and the worker died before CallReserved

    check = check_accounts(event_store)

    assert not check.equal
    assert {(d.kind, d.name, d.micros) for d in check.differences} == {
        ("account", TOTAL_ACCOUNT, 900),
        ("account", today(), 900),
        ("hold_without_reservation", hold_id, 900),
    }
    assert any(hold_id in line for line in check.lines())


def test_a_kill_between_the_settlement_and_the_answer_is_named(event_store: EventStore) -> None:
    accounts = accounts_of(event_store)
    hold_id = hold(accounts, "s1:1", 900)
    event_store.append(STREAM, [reserved("s1:1", 900)])
    accounts.settle(hold_id, 400)  # and the worker died before CallRecorded

    check = check_accounts(event_store)

    # The accounts settled 400; the log counts the open reservation, 900.
    assert {(d.kind, d.name, d.micros) for d in check.differences} == {
        ("account", TOTAL_ACCOUNT, -500),
        ("account", today(), -500),
    }
    assert check.written_off == (OpenCall(STREAM, "s1:1", 900, None),)


def test_a_hold_of_another_amount_and_a_day_without_an_account_are_named(
    event_store: EventStore,
) -> None:
    accounts = BudgetAccounts(event_store.engine)
    accounts.set_cap(TOTAL_ACCOUNT, None)  # no account for today
    accounts.reserve("pairs-r/p1:1", [TOTAL_ACCOUNT], 800, item_id="pairs-r")
    event_store.append("pairs-r", [reserved("p1:1", 900)])

    check = check_accounts(event_store)

    assert {(d.kind, d.name, d.micros) for d in check.differences} == {
        ("account", TOTAL_ACCOUNT, -100),
        ("hold_amount", "pairs-r/p1:1", -100),
        ("day_without_account", today(), -900),
    }


def test_a_store_without_accounts_has_nothing_to_check(event_store: EventStore) -> None:
    event_store.append(STREAM, [reserved("s1:1", 900)])
    check = check_accounts(event_store)
    assert not check.campaign
    assert check.equal
    assert check.lines() == [
        "no shared budget accounts in this store: nothing to check against the ledger"
    ]


@pytest.mark.parametrize(
    ("hold_id", "call"),
    [
        ("run-r1/s7:3@w2", (seed_stream("r1", "s7"), "s7:3")),
        ("run-r1/s7:3", (seed_stream("r1", "s7"), "s7:3")),
        ("pairs-r1/pair-ab:12", ("pairs-r1", "pair-ab:12")),
        ("eval-e1/pair-ab:chosen_first:1", ("eval-e1", "pair-ab:chosen_first:1")),
        ("no call here", None),
    ],
)
def test_a_hold_names_the_call_it_was_made_for(hold_id: str, call: tuple[str, str] | None) -> None:
    assert hold_call(hold_id) == call


def test_the_account_names_are_the_budgets() -> None:
    moment = datetime(2026, 3, 1, 23, 59, tzinfo=UTC)
    assert day_account(moment) == policies_budget.day_account(moment)
    assert day_account(moment).startswith(DAY_PREFIX)
    assert TOTAL_ACCOUNT == policies_budget.TOTAL_ACCOUNT


# -- a real worker killed with calls in flight -----------------------------------------------


def worker_home(workspace: Path, schema: str | None) -> Path:
    """The demo workspace with a fast-beating worker and a slow offline provider, its store in
    PostgreSQL ``schema`` when one is given."""
    store = f'\n[store]\nurl = "{PG_URL}"\nschema_name = "{schema}"\n' if schema else ""
    settings = workspace / SETTINGS_FILE
    settings.write_text(
        settings.read_text()
        + store
        + "\n[curation]\nconcurrency = 2\noffline_latency_s = 0.3\n"
        + "\n[worker]\nlease_s = 2.0\nheartbeat_s = 0.3\npoll_s = 0.1\nexit_when_idle = true\n"
    )
    return workspace


def start_worker(home: Path, name: str, logs: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PLAYLISTEVAL_HOME": str(home), "PLAYLISTEVAL_LOG_LEVEL": "info"}
    return subprocess.Popen(
        [sys.executable, "-m", "playlisteval", "worker", "--home", str(home), "--name", name],
        stdout=(logs / f"{name}.log").open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
    )


def stop_with_calls_in_flight(app: App, worker: subprocess.Popen[bytes]) -> AccountsCheck:
    """Stop (SIGSTOP) the worker at a moment it has calls in flight; what the check says then.
    A moment between the two writes of a call (a hold and its CallReserved) is let go."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if app.accounts().holds():
            worker.send_signal(signal.SIGSTOP)
            check = check_accounts(app.events)
            if check.in_flight and check.equal:
                return check
            worker.send_signal(signal.SIGCONT)
        assert worker.poll() is None, "the worker ended before a call was in flight"
        time.sleep(0.05)
    raise AssertionError("the worker had no call in flight within 240 s")


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_after_a_worker_is_killed_with_calls_in_flight_and_another_finishes_the_accounts_equal_the_ledger(  # noqa: E501
    workspace: Path, backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    schema = request.getfixturevalue("pg_schema") if backend == "postgres" else None
    home = worker_home(workspace, schema)
    app = App(load_settings(home))
    app.set_budget_caps()
    seeds = many_seeds(app, 2)
    start_run(
        app.events,
        app.queue(),
        "r",
        seeds,
        budget_micros=None,
        per_seed_micros=None,
        config=curation_config(app.settings),
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    victim = start_worker(home, "victim", logs)
    try:
        at_kill = stop_with_calls_in_flight(app, victim)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        # Its holds are open in the accounts, its reservations open in the log: equal.
        assert check_accounts(app.events) == at_kill
        heir = start_worker(home, "heir", logs)
        assert heir.wait(timeout=600) == 0, (logs / "heir.log").read_text()[-3000:]
    finally:
        for process in (victim, locals().get("heir")):
            if isinstance(process, subprocess.Popen) and process.poll() is None:
                process.kill()
                process.wait()

    assert {item.state for item in app.queue().items(kind="seed")} == {"done"}
    after = check_accounts(app.events)
    assert after.equal, after.lines()
    assert after.in_flight == ()
    # Exactly the dead worker's calls in flight were written off, each counted once, by both.
    assert after.written_off == tuple(
        sorted(
            (OpenCall(c.stream, c.call_id, c.micros, None) for c in at_kill.in_flight),
            key=lambda c: (c.stream, c.call_id),
        )
    )
    total = next(a for a in after.accounts if a.name == TOTAL_ACCOUNT)
    assert total.reserved_micros == 0
    assert total.spent_micros == total.ledger_micros > 0

    # `store verify` says so too; and names the account once it no longer matches the ledger.
    verified = CliRunner().invoke(cli_app, ["store", "verify", "--home", str(home)])
    assert verified.exit_code == 0, verified.output
    assert "the budget accounts agree with the ledger" in verified.output
    with app.events.engine.begin() as conn:
        conn.execute(
            update(BUDGET_ACCOUNTS)
            .where(BUDGET_ACCOUNTS.c.name == TOTAL_ACCOUNT)
            .values(spent_micros=BUDGET_ACCOUNTS.c.spent_micros - 1)
        )
    edited = CliRunner().invoke(cli_app, ["store", "verify", "--home", str(home)])
    assert edited.exit_code == EXIT_TAMPERED, edited.output
    assert "the budget accounts differ from the ledger" in edited.output
    assert f"account {TOTAL_ACCOUNT}" in edited.output
    app.close()
