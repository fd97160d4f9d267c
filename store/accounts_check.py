"""The database's budget accounts checked against the log's ledger.

A campaign's money is kept twice, by two parallel rules. The accounts (``budget_accounts``, see
:mod:`store.coordination.accounts`) hold what every worker reserved and settled: the total and
each UTC day's account (``day:YYYY-MM-DD``); a hold left by a dead worker is written off as spent
when its lease is taken over. The log's ledger (:func:`store.ledger.spend`) folds the calls: a
settled call costs what it cost, an open reservation (a call in flight, or one a crash left)
counts as spent once. So, for every account, what it says was spent and reserved should be what
the ledger says was spent by the calls it covers: every call for the total, the calls reserved on
that UTC day for a day.

:func:`check_accounts` reads both and :func:`compare_accounts` (the pure core) says where they
differ, naming each difference; a hold still outstanding is matched to the open reservation of
its call in the log. Two outcomes are accepted and listed apart from the differences:

- *in flight*: a call reserved in the log whose hold is outstanding (reserved on both sides);
- *written off*: a call left open in the log with no hold (its worker died and whoever took its
  lease over wrote the hold off as spent): counted as spent once on both sides.

A kill in the instant between a hold and its ``CallReserved`` (or between a settlement and its
``CallRecorded``) leaves a difference of that call's reservation (or of its reservation less its
cost): the check names it, it does not hide it. So does a call reserved in the last instant of a
UTC day and logged in the next (two days' accounts differ by its amount, in opposite senses).
Read it while no call is under way (a stopped or idle fleet): the accounts and the log are read
one after the other, and a call that moves in between shows as a difference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import inspect

from store.coordination import BUDGET_ACCOUNTS, BUDGET_HOLDS, AccountRow, HoldRow, read_accounts
from store.events import CallId, seed_stream
from store.eventstore import EventStore, StoredEvent
from store.ledger import LedgerFold, ledger_types

TOTAL_ACCOUNT = "total"
"""The campaign's total account (``policies.budget.TOTAL_ACCOUNT`` names the same)."""
DAY_PREFIX = "day:"
"""A UTC day's account is this and the day, ``day:2026-05-01`` (``policies.budget.day_account``)."""

DifferenceKind = Literal[
    "account", "day_without_account", "hold_without_reservation", "hold_amount"
]
# A hold is named "<stream>/<call id>", by a fleet worker "<run stream>/<call id>@<worker>", the
# call recorded in the stream of its seed then (policies.budget.make_budget, agents.fleet).
_HOLD = re.compile(r"^(?P<stream>[^/]+)/(?P<call_id>.+?:\d+)(?:@.*)?$")


def day_account(moment: datetime) -> str:
    """The account of the UTC day of ``moment``."""
    return DAY_PREFIX + moment.astimezone(UTC).strftime("%Y-%m-%d")


def hold_call(hold_id: str) -> tuple[str, str] | None:
    """``(stream, call id)`` of the call a hold was made for, or None when ``hold_id`` names
    none. A run's holds (``run-<id>/<seed>:<n>``) are for calls in the seed's stream."""
    found = _HOLD.match(hold_id)
    if found is None:
        return None
    stream, call_id = found["stream"], found["call_id"]
    if stream.startswith("run-"):
        stream = seed_stream(stream.removeprefix("run-"), CallId.owner_of(call_id))
    return stream, call_id


@dataclass(frozen=True)
class AccountFigures:
    """One account beside the ledger's figures for the calls it covers, in micro-dollars."""

    name: str
    spent_micros: int
    reserved_micros: int
    ledger_settled_micros: int
    ledger_open_micros: int

    @property
    def account_micros(self) -> int:
        """What the account says was spent, reservations included."""
        return self.spent_micros + self.reserved_micros

    @property
    def ledger_micros(self) -> int:
        """What the ledger says those calls spent, open reservations included."""
        return self.ledger_settled_micros + self.ledger_open_micros

    @property
    def difference_micros(self) -> int:
        """The account's figure less the ledger's (0 when they agree)."""
        return self.account_micros - self.ledger_micros


@dataclass(frozen=True)
class Difference:
    """One place where the accounts and the ledger disagree.

    ``kind``: an ``account``'s figure is not the ledger's; the ledger spent on a day that has no
    account (``day_without_account``); a hold outstanding has no open reservation in the log
    (``hold_without_reservation``) or another amount (``hold_amount``). ``name`` is the account
    or the hold; ``micros`` the accounts' figure less the ledger's.
    """

    kind: DifferenceKind
    name: str
    micros: int
    detail: str


@dataclass(frozen=True)
class OpenCall:
    """A call the log holds a reservation for and no answer: ``micros`` reserved in ``stream``,
    its hold outstanding (``hold``) or already written off (None)."""

    stream: str
    call_id: str
    micros: int
    hold: str | None


@dataclass(frozen=True)
class AccountsCheck:
    """The accounts against the ledger: each account's figures, the differences (none when the
    two agree), and the open calls each side counts once (in flight, or written off)."""

    accounts: tuple[AccountFigures, ...]
    differences: tuple[Difference, ...]
    in_flight: tuple[OpenCall, ...]
    written_off: tuple[OpenCall, ...]

    @property
    def campaign(self) -> bool:
        """Whether the store has shared accounts at all (a plain workspace has none)."""
        return bool(self.accounts)

    @property
    def equal(self) -> bool:
        """Whether every account says what the ledger says."""
        return not self.differences

    def lines(self) -> list[str]:
        """What ``store verify`` prints: one line per difference, or one that says they agree."""
        if not self.campaign:
            return ["no shared budget accounts in this store: nothing to check against the ledger"]
        if self.equal:
            return [
                f"the budget accounts agree with the ledger ({len(self.accounts)} accounts, "
                f"{len(self.in_flight)} calls in flight, {len(self.written_off)} holds of dead "
                "workers written off as spent once)"
            ]
        return [f"{d.kind} {d.name}: {d.detail}" for d in self.differences]


def check_accounts(events: EventStore, streams: Sequence[str] | None = None) -> AccountsCheck:
    """The store's budget accounts against the ledger of its calls.

    ``streams`` limits the calls to streams starting with one of these (default: every call of
    the log); the accounts are the campaign's, so leave out no stream whose calls reserved in
    them.
    """
    tables = inspect(events.engine)
    if not all(tables.has_table(t.name) for t in (BUDGET_ACCOUNTS, BUDGET_HOLDS)):
        # A workspace no fleet ever ran on: nothing to compare, and nothing is created (the
        # check runs on read-only, archived workspaces too).
        return compare_accounts([], [], [])
    accounts, holds = read_accounts(events.engine)
    calls = events.read_all(types=sorted(ledger_types()))
    if streams is not None:
        calls = [c for c in calls if c.stream.startswith(tuple(streams))]
    return compare_accounts(accounts, holds, calls)


@dataclass
class _Folds:
    """The ledger of every call, the ledger of each UTC day's calls, and the calls still open."""

    total: LedgerFold
    days: dict[str, LedgerFold]
    open: dict[tuple[str, str], int]


def _fold(calls: Iterable[StoredEvent]) -> _Folds:
    # A call belongs to the day of its reservation, as its hold did (an answer recorded after
    # midnight is still the day it was reserved on).
    folds = _Folds(LedgerFold(), {}, {})
    day_of: dict[tuple[str, str], str] = {}
    money = ledger_types()
    for stored in calls:
        if stored.type not in money:
            continue
        call = (stored.stream, str(stored.data["call_id"]))
        if stored.type == "CallReserved":
            day_of[call] = day_account(stored.recorded_at)
            folds.open[call] = int(stored.data["reserved_micros"])
        else:
            folds.open.pop(call, None)
        day = day_of.get(call) or day_account(stored.recorded_at)
        folds.total.apply_stored(stored)
        folds.days.setdefault(day, LedgerFold()).apply_stored(stored)
    return folds


def _figures(row: AccountRow, fold: LedgerFold | None) -> AccountFigures:
    ledger = fold.ledger() if fold is not None else None
    return AccountFigures(
        name=row.name,
        spent_micros=row.spent_micros,
        reserved_micros=row.reserved_micros,
        ledger_settled_micros=0 if ledger is None else ledger.settled_micros,
        ledger_open_micros=0 if ledger is None else ledger.open_micros,
    )


def _account_differences(
    accounts: Sequence[AccountRow], folds: _Folds
) -> tuple[list[AccountFigures], list[Difference]]:
    figures: list[AccountFigures] = []
    differences: list[Difference] = []
    for row in accounts:
        if row.name == TOTAL_ACCOUNT:
            figures.append(_figures(row, folds.total))
        elif row.name.startswith(DAY_PREFIX):
            figures.append(_figures(row, folds.days.get(row.name)))
    for f in figures:
        if f.difference_micros:
            differences.append(
                Difference(
                    "account",
                    f.name,
                    f.difference_micros,
                    f"the account says {f.account_micros} micro-USD spent and reserved "
                    f"({f.spent_micros} + {f.reserved_micros}), the ledger {f.ledger_micros} "
                    f"({f.ledger_settled_micros} settled + {f.ledger_open_micros} open)",
                )
            )
    named = {row.name for row in accounts}
    for day, fold in sorted(folds.days.items()):
        spent = fold.ledger().spent_micros
        if day not in named and spent:
            differences.append(
                Difference(
                    "day_without_account",
                    day,
                    -spent,
                    f"the ledger spent {spent} micro-USD on calls reserved that day, and the "
                    "store has no account for it",
                )
            )
    return figures, differences


def _hold_differences(
    holds: Sequence[HoldRow], open_calls: dict[tuple[str, str], int]
) -> tuple[list[Difference], list[OpenCall], list[OpenCall]]:
    differences: list[Difference] = []
    in_flight: list[OpenCall] = []
    held: set[tuple[str, str]] = set()
    for hold in holds:
        call = hold_call(hold.id)
        reserved = open_calls.get(call) if call is not None else None
        if call is None or reserved is None:
            differences.append(
                Difference(
                    "hold_without_reservation",
                    hold.id,
                    hold.micros,
                    f"{hold.micros} micro-USD are held for a call the log has no open "
                    "reservation of (a worker stopped between the hold and its CallReserved, "
                    "or between its answer and the settlement)",
                )
            )
            continue
        held.add(call)
        in_flight.append(OpenCall(call[0], call[1], reserved, hold.id))
        if hold.micros != reserved:
            differences.append(
                Difference(
                    "hold_amount",
                    hold.id,
                    hold.micros - reserved,
                    f"the hold is {hold.micros} micro-USD, the call's reservation in the log "
                    f"{reserved}",
                )
            )
    written_off = [
        OpenCall(stream, call_id, micros, None)
        for (stream, call_id), micros in sorted(open_calls.items())
        if (stream, call_id) not in held
    ]
    return differences, in_flight, written_off


def compare_accounts(
    accounts: Sequence[AccountRow], holds: Sequence[HoldRow], calls: Iterable[StoredEvent]
) -> AccountsCheck:
    """The accounts and their holds against the ledger of ``calls`` (stored call events, in
    log order): the total account against every call, each day's account against the calls
    reserved that UTC day, each hold against the open reservation of its call. Accounts of
    other names are not the campaign's and are left out."""
    folds = _fold(calls)
    figures, differences = _account_differences(accounts, folds)
    if not figures:
        return AccountsCheck((), (), (), ())
    hold_differences, in_flight, written_off = _hold_differences(holds, folds.open)
    return AccountsCheck(
        accounts=tuple(figures),
        differences=tuple(differences + hold_differences),
        in_flight=tuple(in_flight),
        written_off=tuple(written_off),
    )


__all__ = [
    "DAY_PREFIX",
    "TOTAL_ACCOUNT",
    "AccountFigures",
    "AccountsCheck",
    "Difference",
    "DifferenceKind",
    "OpenCall",
    "check_accounts",
    "compare_accounts",
    "day_account",
    "hold_call",
]
