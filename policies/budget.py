"""A budget that cannot be overshot: reserve the worst case before a call, settle after.

The invariant, for the run and for every seed: ``spent + outstanding <= cap`` after every
:meth:`Budget.reserve`. A reservation is refused — nothing changes — when it would break it.
Settling replaces a reservation by the actual cost; an actual *above* its reservation (a
provider that under-reported before, or an estimate rule that was wrong) is recorded as spent
and logged, because money already spent cannot be refused: the cap check happened at
reservation time.

Pure arithmetic under one :class:`threading.Lock` held only for the arithmetic (no awaits,
no I/O), so threads and asyncio tasks may share one budget. Many worker processes share a
budget through the event store (a row and a transaction), not through this object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Literal

import structlog

from policies.caps import MAX_CAP_USD as MAX_CAP_USD  # handed on: the CLI, settings
from policies.caps import cap_micros as cap_micros
from store.accounts_check import TOTAL_ACCOUNT as TOTAL_ACCOUNT  # handed on: fleet, app
from store.accounts_check import day_account as store_day_account
from store.coordination import AccountExhausted, BudgetAccounts
from store.errors import ConfigError, PlaylistEvalError

_log = structlog.get_logger(__name__)


#: Whose cap a command's own is: a run's, or one of the commands that are no run.
CapOwner = Literal["run", "evaluation", "difficulty gate", "smoke test"]

#: Whose a command's own cap is, by the stream its calls are recorded in (the start of its
#: holds' names): an evaluation's or the difficulty gate's cap is no run's, and a message that
#: says "the run" sends the user to the wrong --budget.
CAP_OWNERS: dict[str, CapOwner] = {
    "eval-": "evaluation",
    "pairs-": "difficulty gate",
    "smoke-": "smoke test",
}

#: How a cap that is not a run's is raised: the command whose --budget is its new total.
_RAISE: dict[CapOwner, str] = {
    "evaluation": "the same `playlisteval eval` and --budget USD, the evaluation's new total "
    "(earlier calls included)",
    "difficulty gate": "`playlisteval pairs --budget USD`, the gate's new total (earlier calls "
    "included)",
    "smoke test": "`playlisteval smoke --budget USD`",
}


def cap_owner(stream: str) -> CapOwner:
    """Whose cap a budget over the calls of ``stream`` holds (:data:`CAP_OWNERS`; a run's
    otherwise)."""
    return next((owner for start, owner in CAP_OWNERS.items() if stream.startswith(start)), "run")


class BudgetExhausted(PlaylistEvalError):
    """A reservation would pass the command's cap (a run's, an evaluation's, the difficulty
    gate's: ``which`` is ``run`` for each, ``cap_of`` says whose), a seed's, or a shared
    account's; the call must not be made."""

    def __init__(
        self,
        *,
        seed_id: str,
        needed_micros: int,
        left_micros: int,
        cap_micros: int,
        which: Literal["run", "seed", "account"],
        account: str | None = None,
        cap_of: CapOwner = "run",
    ) -> None:
        self.seed_id = seed_id
        self.needed_micros = needed_micros
        self.left_micros = left_micros
        self.cap_micros = cap_micros
        self.which = which
        self.account = account
        self.cap_of = cap_of
        if which == "account":
            # A shared account of the daemon and its workers (the total, or one day).
            super().__init__(
                f"budget exhausted for account {account!r}: a call needs {needed_micros!r} "
                f"micro-USD but only {left_micros!r} of its cap {cap_micros!r} are left across "
                "every worker; raise budget.cap_usd / budget.per_day_usd (a day's cap renews "
                "at 00:00 UTC)"
            )
            return
        if which == "run" and cap_of != "run":
            # Not "for the run": store.events' upcaster reads any reason but "for seed " and
            # "for account " as the command's own cap, which this is.
            super().__init__(
                f"budget exhausted for the {cap_of}: a call needs {needed_micros!r} micro-USD "
                f"but only {left_micros!r} of the {cap_of}'s cap {cap_micros!r} are left (spent "
                f"plus reserved); raise it with {_RAISE[cap_of]}"
            )
            return
        scope = "the run" if which == "run" else f"seed {seed_id!r}"
        super().__init__(
            f"budget exhausted for {scope}: a call needs {needed_micros!r} micro-USD but only "
            f"{left_micros!r} of the {which} cap {cap_micros!r} are left (spent plus reserved); "
            f"raise the {which} cap or stop this {'run' if which == 'run' else 'seed'}"
        )


def check_concurrency(
    value: int | None, what: str = "--concurrency", most: int | None = None
) -> int | None:
    """``value`` when it is a whole number of at least 1 and at most ``most`` (the setting
    ``curation.max_concurrency``; ``None`` passes: the default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a whole number of at least 1, got {value!r}")
    if most is not None and value > most:
        raise ConfigError(
            f"{what} {value!r} is above curation.max_concurrency ({most}): each seed in flight "
            "holds a task per role, so more than that only queues; raise the setting if the "
            "providers' rate limits really allow it"
        )
    return value


class ReservationError(PlaylistEvalError):
    """A reservation id was reused, or settled/released when it is not outstanding."""


@dataclass(frozen=True)
class Reservation:
    """Money set aside for one call: its worst case, held until settled or released."""

    reservation_id: str
    seed_id: str
    micros: int


@dataclass(frozen=True)
class BudgetSnapshot:
    """A consistent copy of the budget's state at one moment."""

    cap_micros: int | None
    per_seed_micros: int | None
    spent_micros: int
    outstanding_micros: int
    left_micros: int | None
    seed_spent: Mapping[str, int] = field(default_factory=dict)
    seed_outstanding: Mapping[str, int] = field(default_factory=dict)
    overrun_micros: int = 0  # sum of actual costs above their reservations


class Budget:
    """Run cap and per-seed cap over integer micro-dollars; ``None`` means uncapped.

    ``spent_micros`` and ``seed_spent`` restore a budget from the event log on resume (the sum
    of settled costs); reservations that were outstanding at a crash are the caller's to
    count as spent or drop. ``cap_of`` says whose ``cap_micros`` is, for the refusal's message.
    """

    def __init__(
        self,
        cap_micros: int | None,
        per_seed_micros: int | None = None,
        *,
        spent_micros: int = 0,
        seed_spent: Mapping[str, int] | None = None,
        cap_of: CapOwner = "run",
    ) -> None:
        for name, value in (("cap_micros", cap_micros), ("per_seed_micros", per_seed_micros)):
            if value is not None and value < 0:
                raise ConfigError(f"budget {name}={value!r} must be >= 0 or None (uncapped)")
        if spent_micros < 0 or any(v < 0 for v in (seed_spent or {}).values()):
            raise ConfigError(
                f"budget spent amounts must be >= 0, got spent_micros={spent_micros!r}, "
                f"seed_spent={dict(seed_spent or {})!r}"
            )
        self._cap = cap_micros
        self._per_seed = per_seed_micros
        self._spent = spent_micros
        self._seed_spent: dict[str, int] = dict(seed_spent or {})
        self._outstanding = 0
        self._seed_outstanding: dict[str, int] = {}
        self._open: dict[str, Reservation] = {}
        self._overrun = 0
        self._cap_of: CapOwner = cap_of
        self._lock = threading.Lock()

    @property
    def cap_micros(self) -> int | None:
        """The run cap, or ``None`` when uncapped."""
        return self._cap

    @property
    def per_seed_micros(self) -> int | None:
        """The per-seed cap, or ``None`` when uncapped."""
        return self._per_seed

    @property
    def spent_micros(self) -> int:
        """Actual cost settled so far (including charged failures)."""
        return self._spent

    @property
    def outstanding_micros(self) -> int:
        """Money held by reservations not yet settled or released."""
        return self._outstanding

    @property
    def left_micros(self) -> int | None:
        """What a new reservation may still take under the run cap; ``None`` when uncapped."""
        with self._lock:
            return self._left_run()

    def seed_spent_micros(self, seed_id: str) -> int:
        """Actual cost settled so far for one seed."""
        with self._lock:
            return self._seed_spent.get(seed_id, 0)

    def reserve(self, seed_id: str, micros: int, reservation_id: str) -> Reservation:
        """Hold ``micros`` for one call of ``seed_id``, or raise :class:`BudgetExhausted`.

        A refused reservation changes nothing. ``reservation_id`` must be new (the caller's
        call id), so a settle can never be applied to the wrong reservation.
        """
        if micros < 0:
            raise ReservationError(f"reservation {reservation_id!r}: micros={micros!r} is < 0")
        with self._lock:
            if reservation_id in self._open:
                raise ReservationError(
                    f"reservation id {reservation_id!r} is already outstanding; "
                    "use a fresh call id per reservation"
                )
            refusal = self._refusal(seed_id, micros)
            if refusal is not None:
                raise refusal
            reservation = Reservation(reservation_id, seed_id, micros)
            self._open[reservation_id] = reservation
            self._outstanding += micros
            self._seed_outstanding[seed_id] = self._seed_outstanding.get(seed_id, 0) + micros
        return reservation

    def settle(self, reservation: Reservation, actual_micros: int) -> None:
        """The call answered: release the reservation and add its actual cost.

        An actual above the reservation is still added (the money is spent) and logged as
        ``budget_overrun``; it may leave ``spent`` above the cap, and then every further
        reservation is refused.
        """
        self._finish(reservation, actual_micros, "actual_micros")

    def release(self, reservation: Reservation, charged_micros: int = 0) -> None:
        """The call failed: release the reservation, keeping ``charged_micros`` as spent.

        ``charged_micros`` is what the provider may have billed for the failed call (a timeout
        after the model ran); above the reservation it is kept and logged like a settle's.
        """
        self._finish(reservation, charged_micros, "charged_micros")

    def snapshot(self) -> BudgetSnapshot:
        """A consistent copy of the current state."""
        with self._lock:
            return BudgetSnapshot(
                cap_micros=self._cap,
                per_seed_micros=self._per_seed,
                spent_micros=self._spent,
                outstanding_micros=self._outstanding,
                left_micros=self._left_run(),
                seed_spent=MappingProxyType(dict(self._seed_spent)),
                seed_outstanding=MappingProxyType(
                    {k: v for k, v in self._seed_outstanding.items() if v}
                ),
                overrun_micros=self._overrun,
            )

    # -- arithmetic; callers hold the lock ---------------------------------------------------

    def _left_run(self) -> int | None:
        if self._cap is None:
            return None
        return max(0, self._cap - self._spent - self._outstanding)

    def _left_seed(self, seed_id: str) -> int | None:
        if self._per_seed is None:
            return None
        used = self._seed_spent.get(seed_id, 0) + self._seed_outstanding.get(seed_id, 0)
        return max(0, self._per_seed - used)

    def _refusal(self, seed_id: str, micros: int) -> BudgetExhausted | None:
        """Why ``micros`` more for ``seed_id`` would pass a cap, the run's checked first (None:
        neither cap stands in the way)."""
        caps: tuple[tuple[Literal["run", "seed"], int | None, int | None, CapOwner], ...] = (
            ("run", self._cap, self._left_run(), self._cap_of),
            ("seed", self._per_seed, self._left_seed(seed_id), "run"),
        )
        for which, cap, left, cap_of in caps:
            if cap is not None and left is not None and micros > left:
                return BudgetExhausted(
                    seed_id=seed_id,
                    needed_micros=micros,
                    left_micros=left,
                    cap_micros=cap,
                    which=which,
                    cap_of=cap_of,
                )
        return None

    def _close(self, reservation: Reservation) -> None:
        held = self._open.get(reservation.reservation_id)
        if held != reservation:
            raise ReservationError(
                f"reservation {reservation.reservation_id!r} is not outstanding (already "
                "settled or released, or never made here); settle or release each one once"
            )
        del self._open[reservation.reservation_id]
        self._outstanding -= reservation.micros
        self._seed_outstanding[reservation.seed_id] -= reservation.micros

    def _finish(self, reservation: Reservation, micros: int, what: str) -> None:
        if micros < 0:
            raise ReservationError(
                f"reservation {reservation.reservation_id!r}: {what}={micros!r} must be >= 0"
            )
        over = micros - reservation.micros
        with self._lock:
            self._close(reservation)
            self._spent += micros
            seed = reservation.seed_id
            self._seed_spent[seed] = self._seed_spent.get(seed, 0) + micros
            self._overrun += max(0, over)
        if over > 0:
            # Logged outside the lock: the log's sink may do I/O.
            _log.warning(
                "budget_overrun",
                reservation_id=reservation.reservation_id,
                seed_id=reservation.seed_id,
                reserved_micros=reservation.micros,
                **{what: micros},
            )


class SharedBudget(Budget):
    """A budget whose money is also a campaign's: local caps here, shared accounts there.

    The local caps (a run's or a command's cap, a seed's cap) are checked here, as by
    :class:`Budget` (a seed has one worker at a time, and its spend so far comes from its log);
    the campaign's caps (its total, its day) are accounts in the database that every process
    reserves against in one transaction, so no interleaving of workers and commands can pass
    them. A reservation refused by either changes nothing, here or there. ``item_of`` names
    the lease (a queue item, a run) a hold belongs to: whoever takes that lease over from a dead
    holder writes its holds off as spent.
    """

    def __init__(
        self,
        accounts: BudgetAccounts,
        names: Callable[[], Sequence[str]],
        *,
        cap_micros: int | None = None,
        per_seed_micros: int | None = None,
        spent_micros: int = 0,
        seed_spent: Mapping[str, int] | None = None,
        hold_id: Callable[[str], str] = lambda reservation_id: reservation_id,
        item_of: Callable[[str], str | None] = lambda _seed_id: None,
        owner: str | None = None,
        cap_of: CapOwner = "run",
    ) -> None:
        super().__init__(
            cap_micros,
            per_seed_micros,
            spent_micros=spent_micros,
            seed_spent=seed_spent,
            cap_of=cap_of,
        )
        self.accounts = accounts
        self._names = names
        self._hold_id = hold_id
        self._item_of = item_of
        self._owner = owner
        self._holds: dict[str, str] = {}

    def restore_seed(self, seed_id: str, spent_micros: int) -> None:
        """A seed claimed from the queue: its spend so far, from its log (per-seed cap)."""
        with self._lock:
            self._seed_spent[seed_id] = spent_micros

    def forget_seed(self, seed_id: str) -> None:
        """The seed left this worker: drop its local spend (its log and the accounts keep it)."""
        with self._lock:
            if not self._seed_outstanding.get(seed_id):
                self._seed_spent.pop(seed_id, None)
                self._seed_outstanding.pop(seed_id, None)

    def reserve(self, seed_id: str, micros: int, reservation_id: str) -> Reservation:
        """Check the seed's cap here, then take ``micros`` from every shared account."""
        reservation = super().reserve(seed_id, micros, reservation_id)
        hold = self._hold_id(reservation_id)
        try:
            self.accounts.reserve(
                hold,
                list(self._names()),
                micros,
                item_id=self._item_of(seed_id),
                owner=self._owner,
            )
        except AccountExhausted as exc:
            with self._lock:
                self._close(reservation)
            raise BudgetExhausted(
                seed_id=seed_id,
                needed_micros=micros,
                left_micros=exc.left_micros,
                cap_micros=exc.cap_micros,
                which="account",
                account=exc.account,
            ) from exc
        except BaseException:
            with self._lock:
                self._close(reservation)
            raise
        with self._lock:
            self._holds[reservation_id] = hold
        return reservation

    def _finish(self, reservation: Reservation, micros: int, what: str) -> None:
        super()._finish(reservation, micros, what)
        with self._lock:
            hold = self._holds.pop(reservation.reservation_id, None)
        if hold is not None and not self.accounts.settle(hold, micros):
            # Written off by a worker that took the seed over while this one looked dead: the
            # reservation was counted as spent there, and this seed's appends are fenced off.
            _log.warning("budget_hold_written_off", hold=hold, actual_micros=micros)


def day_account(now: datetime | None = None) -> str:
    """The budget account of the current UTC day (of ``now``'s, when given): the name
    :func:`store.accounts_check.day_account` gives, which the accounts check reads."""
    return store_day_account(now or datetime.now(UTC))


@dataclass
class Campaign:
    """A campaign's shared money: the accounts every paid call of its store also reserves
    against — the total (``budget.cap_usd`` of the daemon and its workers) and the current UTC
    day's (``budget.per_day_usd``) — whatever command makes the call (curation, the difficulty
    gate, an evaluation). A new day's account is made on first use with ``day_cap_micros``."""

    accounts: BudgetAccounts
    total_cap_micros: int | None = None
    day_cap_micros: int | None = None
    owner: str | None = None
    _day: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def names(self) -> tuple[str, str]:
        """The accounts a reservation takes from: the total and today's (made when new)."""
        day = day_account()
        with self._lock:
            if day != self._day:
                self.accounts.ensure(TOTAL_ACCOUNT, self.total_cap_micros)
                self.accounts.ensure(day, self.day_cap_micros)
                self._day = day
        return (TOTAL_ACCOUNT, day)


def make_budget(
    campaign: Campaign | None,
    *,
    cap_micros: int | None,
    per_seed_micros: int | None = None,
    spent_micros: int = 0,
    seed_spent: Mapping[str, int] | None = None,
    hold_prefix: str,
    item: Callable[[str], str | None],
) -> Budget:
    """The budget of one command: its local caps, and the campaign's accounts when there is one.
    ``hold_prefix`` is the stream its calls are recorded in, which says whose its cap is
    (:func:`cap_owner`); with a campaign, its holds are named ``<hold_prefix>/<call id>`` and
    belong to the lease ``item(seed)`` names."""
    if campaign is None:
        return Budget(
            cap_micros,
            per_seed_micros,
            spent_micros=spent_micros,
            seed_spent=seed_spent,
            cap_of=cap_owner(hold_prefix),
        )
    return SharedBudget(
        campaign.accounts,
        campaign.names,
        cap_micros=cap_micros,
        per_seed_micros=per_seed_micros,
        spent_micros=spent_micros,
        seed_spent=seed_spent,
        hold_id=lambda call_id: f"{hold_prefix}/{call_id}",
        item_of=item,
        owner=campaign.owner,
        cap_of=cap_owner(hold_prefix),
    )
