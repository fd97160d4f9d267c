"""Work shared by many processes through the event store's database: a leased work queue, named
leases, budget accounts that every worker reserves against, and shared rate windows.

All live next to the ``events`` table (same database, same PostgreSQL schema), so one
PostgreSQL server coordinates any number of ``playlisteval worker`` processes on any number of
machines, and one SQLite file does the same for the processes of one machine. Each has its room:

* :mod:`store.coordination.tables`: the tables, the database's clock (:func:`db_now`: expiry is
  judged by it, never by a worker's) and the write transaction;
* :mod:`store.coordination.queue`: the leased work queue (:class:`WorkQueue`), claimed with
  ``FOR UPDATE SKIP LOCKED`` and fenced by a token per claim;
* :mod:`store.coordination.leases`: one live writer per run (:class:`Leases`);
* :mod:`store.coordination.accounts`: the money accounts (:class:`BudgetAccounts`): a
  reservation takes every account it touches or none, and ``spent + reserved <= cap`` holds
  across all workers at every commit;
* :mod:`store.coordination.rates`: a provider's per-minute limits (:class:`RateWindows`).

Every public name is handed on here, so ``from store.coordination import …`` reads as before.
"""

from store.coordination.accounts import (
    AccountExhausted,
    AccountRow,
    BudgetAccounts,
    HoldRow,
    read_accounts,
)
from store.coordination.leases import LeaseHeld, Leases, NamedLease
from store.coordination.queue import STATES, ItemRow, ItemState, Lease, WorkItem, WorkQueue
from store.coordination.rates import RateWindows, window_wait
from store.coordination.tables import (
    BUDGET_ACCOUNTS,
    BUDGET_HOLDS,
    LEASES,
    RATE_KEYS,
    RATE_LOG,
    WORK_ITEMS,
    WORKERS,
    create_tables,
    db_now,
    write_transaction,
)

__all__ = [
    "BUDGET_ACCOUNTS",
    "BUDGET_HOLDS",
    "LEASES",
    "RATE_KEYS",
    "RATE_LOG",
    "STATES",
    "WORKERS",
    "WORK_ITEMS",
    "AccountExhausted",
    "AccountRow",
    "BudgetAccounts",
    "HoldRow",
    "ItemRow",
    "ItemState",
    "Lease",
    "LeaseHeld",
    "Leases",
    "NamedLease",
    "RateWindows",
    "WorkItem",
    "WorkQueue",
    "create_tables",
    "db_now",
    "read_accounts",
    "window_wait",
    "write_transaction",
]
