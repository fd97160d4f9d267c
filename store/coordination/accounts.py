"""Budget accounts every worker reserves against: the campaign total, each UTC day, …

An account row holds ``cap``, ``spent`` and ``reserved`` micro-dollars. A reservation is one
conditional ``UPDATE … SET reserved = reserved + m WHERE spent + reserved + m <= cap`` per account
it touches (a total and a day, say), in name order, in one transaction with a hold row: either
every account takes it or none does, and ``spent + reserved <= cap`` holds across all workers at
every commit. Settling moves a hold from reserved to spent; a hold left by a dead worker is
written off as spent when its item is taken over (the provider may have billed the call it was
for), the same rule the log's ledger applies to an open reservation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from store.coordination.tables import (
    BUDGET_ACCOUNTS,
    BUDGET_HOLDS,
    create_tables,
    db_now,
    write_transaction,
)
from store.errors import PlaylistEvalError

_A, _H = BUDGET_ACCOUNTS.c, BUDGET_HOLDS.c


class AccountExhausted(PlaylistEvalError):
    """A reservation would take an account past its cap; nothing was reserved anywhere."""

    def __init__(self, account: str, needed_micros: int, left_micros: int, cap_micros: int):
        self.account = account
        self.needed_micros = needed_micros
        self.left_micros = left_micros
        self.cap_micros = cap_micros
        super().__init__(
            f"budget account {account!r} cannot take {needed_micros!r} micro-USD: "
            f"{left_micros!r} of its cap {cap_micros!r} are left (spent plus reserved by every "
            "worker)"
        )


@dataclass(frozen=True)
class AccountRow:
    """One account's state."""

    name: str
    cap_micros: int | None
    spent_micros: int
    reserved_micros: int

    @property
    def left_micros(self) -> int | None:
        """What may still be reserved; ``None`` when uncapped."""
        if self.cap_micros is None:
            return None
        return max(0, self.cap_micros - self.spent_micros - self.reserved_micros)


@dataclass(frozen=True)
class HoldRow:
    """One hold outstanding: ``micros`` reserved on ``accounts`` for a call in flight (or left
    by a worker that died), not settled or written off yet."""

    id: str
    accounts: tuple[str, ...]
    micros: int
    item_id: str | None
    owner: str | None


@dataclass
class BudgetAccounts:
    """Accounts shared by every worker of a database."""

    engine: Engine

    def __post_init__(self) -> None:
        create_tables(self.engine)

    def set_cap(self, name: str, cap_micros: int | None) -> None:
        """Create account ``name`` or change its cap (``None``: uncapped)."""
        with write_transaction(self.engine) as conn:
            changed = conn.execute(
                update(BUDGET_ACCOUNTS).where(_A.name == name).values(cap_micros=cap_micros)
            )
            if changed.rowcount == 0:
                conn.execute(
                    insert(BUDGET_ACCOUNTS).values(
                        name=name, cap_micros=cap_micros, spent_micros=0, reserved_micros=0
                    )
                )

    def ensure(self, name: str, cap_micros: int | None) -> None:
        """Create account ``name`` with ``cap_micros`` unless it exists (its cap is kept)."""
        with write_transaction(self.engine) as conn:
            found = conn.execute(select(_A.name).where(_A.name == name)).first()
            if found is None:
                try:
                    conn.execute(
                        insert(BUDGET_ACCOUNTS).values(
                            name=name, cap_micros=cap_micros, spent_micros=0, reserved_micros=0
                        )
                    )
                except IntegrityError:
                    conn.rollback()  # created by another worker meanwhile: theirs stands

    def reserve(
        self,
        hold_id: str,
        accounts: Sequence[str],
        micros: int,
        *,
        item_id: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Reserve ``micros`` on every account of ``accounts`` or on none of them.

        Raises :class:`AccountExhausted` naming the first account that refused. Accounts that
        do not exist are refused as a configuration error.
        """
        names = sorted(set(accounts))
        with write_transaction(self.engine) as conn:
            now = db_now(conn)
            for name in names:
                # One statement checks and takes: PostgreSQL re-evaluates the WHERE against the
                # latest committed row after waiting for a concurrent reserver's row lock.
                took = conn.execute(
                    update(BUDGET_ACCOUNTS)
                    .where(
                        _A.name == name,
                        or_(
                            _A.cap_micros.is_(None),
                            _A.spent_micros + _A.reserved_micros + micros <= _A.cap_micros,
                        ),
                    )
                    .values(reserved_micros=_A.reserved_micros + micros)
                )
                if took.rowcount != 1:
                    row = conn.execute(select(BUDGET_ACCOUNTS).where(_A.name == name)).first()
                    conn.rollback()
                    if row is None:
                        raise PlaylistEvalError(
                            f"budget account {name!r} does not exist; the daemon creates it "
                            "from budget.cap_usd and budget.per_day_usd"
                        )
                    cap = int(row.cap_micros)
                    left = max(0, cap - int(row.spent_micros) - int(row.reserved_micros))
                    raise AccountExhausted(name, micros, left, cap)
            conn.execute(
                insert(BUDGET_HOLDS).values(
                    id=hold_id,
                    accounts=names,
                    micros=micros,
                    item_id=item_id,
                    owner=owner,
                    created_at=now,
                )
            )

    def settle(self, hold_id: str, actual_micros: int) -> bool:
        """Replace the hold by its actual cost; False when the hold is gone (written off after
        a takeover: the money was counted then)."""
        with write_transaction(self.engine) as conn:
            hold = conn.execute(select(BUDGET_HOLDS).where(_H.id == hold_id)).first()
            if hold is None:
                return False
            conn.execute(delete(BUDGET_HOLDS).where(_H.id == hold_id))
            self._move(conn, list(hold.accounts), int(hold.micros), actual_micros)
            return True

    def write_off(self, item_id: str) -> int:
        """Count every hold of ``item_id`` as spent (its worker died mid-call); returns micros."""
        with write_transaction(self.engine) as conn:
            holds = list(conn.execute(select(BUDGET_HOLDS).where(_H.item_id == item_id)))
            total = 0
            for hold in holds:
                conn.execute(delete(BUDGET_HOLDS).where(_H.id == hold.id))
                self._move(conn, list(hold.accounts), int(hold.micros), int(hold.micros))
                total += int(hold.micros)
            return total

    @staticmethod
    def _move(conn: Connection, accounts: list[str], held: int, actual: int) -> None:
        for name in sorted(accounts):
            conn.execute(
                update(BUDGET_ACCOUNTS)
                .where(_A.name == name)
                .values(
                    reserved_micros=_A.reserved_micros - held, spent_micros=_A.spent_micros + actual
                )
            )

    def account(self, name: str) -> AccountRow | None:
        """One account, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(BUDGET_ACCOUNTS).where(_A.name == name)).first()
        if row is None:
            return None
        return AccountRow(row.name, row.cap_micros, int(row.spent_micros), int(row.reserved_micros))

    def accounts(self) -> list[AccountRow]:
        """Every account, by name."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(BUDGET_ACCOUNTS).order_by(_A.name))
            return [
                AccountRow(r.name, r.cap_micros, int(r.spent_micros), int(r.reserved_micros))
                for r in rows
            ]

    def holds(self) -> int:
        """Holds outstanding (calls in flight somewhere)."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(BUDGET_HOLDS)).scalar_one())

    def snapshot(self) -> tuple[list[AccountRow], list[HoldRow]]:
        """Every account and every hold outstanding (:func:`read_accounts`)."""
        return read_accounts(self.engine)


def read_accounts(engine: Engine) -> tuple[list[AccountRow], list[HoldRow]]:
    """Every account of ``engine``'s database and every hold outstanding, by name, read in one
    transaction (a reservation or a settlement committed meanwhile shows in both or in neither),
    creating nothing: it reads read-only, archived databases too."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        else:
            conn.exec_driver_sql("BEGIN")  # SQLite reads from one snapshot until the end
        try:
            rows = conn.execute(select(BUDGET_ACCOUNTS).order_by(_A.name)).all()
            holds = conn.execute(select(BUDGET_HOLDS).order_by(_H.id)).all()
        finally:
            conn.rollback()
    accounts = [
        AccountRow(r.name, r.cap_micros, int(r.spent_micros), int(r.reserved_micros)) for r in rows
    ]
    return accounts, [
        HoldRow(h.id, tuple(h.accounts), int(h.micros), h.item_id, h.owner) for h in holds
    ]
