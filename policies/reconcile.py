"""The ledger beside a provider's bill: per model and day, each difference named.

The ledger is what the log says the project spent (:mod:`store.ledger`, the one fold); the bill
is what the provider says it charged (:mod:`policies.bills`). Both are put on the same keys — a
day in the bill's zone and one of our model ids — and compared within a tolerance:

- The ledger's side of a key is what the fold settled for calls of that model on that day: a
  first-hand live answer's cost (``recorded``), and a charge for an attempt whose outcome is
  unknown (``uncertain``: it may or may not have been billed). Calls no provider answered
  (the offline harness, a real local model, an answer served from the log) are left out and
  counted apart; so are reservations still open (no day to put them on yet) and calls to other
  providers' models.
- The bill's side is the sum of its lines that name the model (the provider's own name of it
  — our id or the settings' ``model_name`` — with a dated snapshot suffix allowed); a line that
  names none of our models is its own row.

A key whose bill is within ``tolerance`` of the ledger matches; so does one whose bill lies
between the recorded cost and the recorded cost plus the uncertain charges. Anything else is a
difference, named by which side is higher and by how much.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, tzinfo
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Literal

from policies.bills import Bill
from store.answers import answered_by
from store.events import MICROS_PER_USD, micros_to_usd
from store.eventstore import StoredEvent
from store.ledger import LedgerFold, ledger_types

Verdict = Literal[
    "match",
    "within-uncertain",
    "bill-higher",
    "ledger-higher",
    "only-bill",
    "only-ledger",
    "unmapped",
]
#: The verdicts that are differences.
DIFFERENCES: frozenset[Verdict] = frozenset(
    {"bill-higher", "ledger-higher", "only-bill", "only-ledger", "unmapped"}
)

# Words that make a model name another model when they follow it ("gpt-5.4" is not
# "gpt-5.4-mini", "gemini-3-flash" not "gemini-3-flash-lite"): a bill's item matches one of
# our names only where the next word is none of these.
_VARIANT_WORDS = (
    "mini nano lite pro flash plus max turbo preview exp experimental latest vl omni coder "
    "thinking instruct long audio realtime tts live search image embedding chat codex"
)
_VARIANTS = frozenset(_VARIANT_WORDS.split())
_WORD = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")


@dataclass(frozen=True)
class DaySpend:
    """What the ledger settled for one model on one day, in micro-dollars."""

    recorded_micros: int = 0
    uncertain_micros: int = 0

    @property
    def micros(self) -> int:
        """Everything the ledger counts for it."""
        return self.recorded_micros + self.uncertain_micros


@dataclass(frozen=True)
class LedgerDays:
    """The ledger of provider calls per (day, model id), days in one zone, and what was left
    out: calls no provider answered (by who answered) and reservations still open."""

    cells: Mapping[tuple[date, str], DaySpend]
    not_billed: Mapping[str, int] = field(default_factory=dict)
    open_micros: int = 0


def ledger_days(events: Iterable[StoredEvent], zone: tzinfo) -> LedgerDays:
    """Fold the log's call events (in seq order) by the ledger's rules, putting what each event
    settled on the day (in ``zone``) it was recorded and the model it was made to."""
    money = ledger_types()
    calls = [e for e in events if e.type in money]
    # A failure carries no answerer: in a stream the offline harness answered, none of it
    # reached a provider.
    offline = {
        e.stream for e in calls if e.type == "CallRecorded" and answered_by(e.data) == "offline"
    }
    fold = LedgerFold()
    recorded: dict[tuple[date, str], int] = {}
    uncertain: dict[tuple[date, str], int] = {}
    not_billed: dict[str, int] = {}
    for event in calls:
        before = fold.uncertain_micros
        settled = fold.apply_stored(event)
        if not settled:
            continue
        who = answered_by(event.data) if event.type == "CallRecorded" else "live"
        if who == "live" and event.stream in offline:
            who = "offline"
        if who != "live":
            not_billed[who] = not_billed.get(who, 0) + settled
            continue
        key = (event.recorded_at.astimezone(zone).date(), str(event.data["model"]))
        doubt = fold.uncertain_micros - before
        uncertain[key] = uncertain.get(key, 0) + doubt
        recorded[key] = recorded.get(key, 0) + settled - doubt
    cells = {
        key: DaySpend(recorded.get(key, 0), uncertain.get(key, 0))
        for key in sorted(recorded.keys() | uncertain.keys())
    }
    return LedgerDays(cells, not_billed, fold.ledger().open_micros)


@dataclass(frozen=True)
class Row:
    """One model on one day: the ledger beside the bill, and the verdict with its note."""

    day: date
    model: str  # our model id, or the bill's item where it names none of ours
    ledger_micros: int
    uncertain_micros: int
    bill_micros: int
    verdict: Verdict
    note: str

    @property
    def difference_micros(self) -> int:
        """The bill less the ledger."""
        return self.bill_micros - self.ledger_micros

    @property
    def differs(self) -> bool:
        """Whether the row is a difference (not a match)."""
        return self.verdict in DIFFERENCES


@dataclass(frozen=True)
class Reconciliation:
    """The rows of one bill against the ledger, and what neither side compared."""

    bill: Bill
    rows: tuple[Row, ...]
    tolerance_micros: int
    outside_micros: int = 0  # the ledger's with this provider on days the bill does not cover
    other_micros: int = 0  # the ledger's with other providers (and models of no known one)
    not_billed: Mapping[str, int] = field(default_factory=dict)
    open_micros: int = 0

    @property
    def differences(self) -> tuple[Row, ...]:
        """The rows that differ."""
        return tuple(row for row in self.rows if row.differs)

    @property
    def ledger_micros(self) -> int:
        """The ledger's side of the compared rows."""
        return sum(row.ledger_micros for row in self.rows)

    @property
    def bill_micros(self) -> int:
        """The bill's side of the compared rows."""
        return sum(row.bill_micros for row in self.rows)


def reconcile(
    ledger: LedgerDays,
    bill: Bill,
    providers: Mapping[str, tuple[str | None, Sequence[str]]],
    tolerance_micros: int,
) -> Reconciliation:
    """Compare ``ledger`` with ``bill``. ``providers`` says, of each of our model ids, which
    provider family serves it (None: not known) and the names that provider knows it by;
    a ledger model missing from it is of no known provider."""
    ours = {m for m, (family, _names) in providers.items() if family == bill.provider}
    names = {m: providers[m][1] for m in sorted(ours)}
    sides: dict[tuple[date, str], tuple[DaySpend, Decimal, bool]] = {}
    outside = other = 0
    for (day, model), spent in ledger.cells.items():
        if model not in ours:
            other += spent.micros
        elif not bill.covers(day):
            outside += spent.micros
        else:
            sides[(day, model)] = (spent, Decimal(0), True)
    for line in bill.lines:
        named = model_of(line.item, names)
        key = (line.day, named if named is not None else line.item)
        spent, billed, mapped = sides.get(key, (DaySpend(), Decimal(0), named is not None))
        sides[key] = (spent, billed + line.usd, mapped)
    rows = [
        _row(day, model, spent, _micros(billed), mapped, tolerance_micros)
        for (day, model), (spent, billed, mapped) in sorted(sides.items())
    ]
    return Reconciliation(
        bill=bill,
        rows=tuple(row for row in rows if row is not None),
        tolerance_micros=tolerance_micros,
        outside_micros=outside,
        other_micros=other,
        not_billed=dict(ledger.not_billed),
        open_micros=ledger.open_micros,
    )


def model_of(item: str, names: Mapping[str, Sequence[str]]) -> str | None:
    """Which of our models a bill's item names: the model with the longest of its names whose
    words stand together in the item, not followed by a word that makes it another model
    (``gpt-4o`` is named by ``"gpt-4o-2024-08-06, input"``, not by ``"gpt-4o-mini, input"``);
    None when none is."""
    words = _WORD.findall(item.lower())
    best: tuple[int, str] | None = None
    for model, known in names.items():
        for name in (model, *known):
            wanted = _WORD.findall(name.lower())
            if wanted and _stands_in(wanted, words) and (best is None or len(wanted) > best[0]):
                best = (len(wanted), model)
    return best[1] if best else None


def _stands_in(wanted: list[str], words: list[str]) -> bool:
    size = len(wanted)
    for at in range(len(words) - size + 1):
        if words[at : at + size] == wanted:
            following = _after_date(words, at + size)
            if following is None or following not in _VARIANTS:
                return True
    return False


def _after_date(words: list[str], at: int) -> str | None:
    """The word at ``at`` past a snapshot date there (``2024 08 06`` or ``0806``), if any."""
    if words[at : at + 1] and re.fullmatch(r"\d{4}", words[at]):
        at += 3 if all(re.fullmatch(r"\d{2}", w) for w in words[at + 1 : at + 3]) else 1
    return words[at] if at < len(words) else None


def _row(
    day: date,
    model: str,
    spent: DaySpend,
    bill: int,
    mapped: bool,
    tolerance: int,
) -> Row | None:
    ledger, doubt = spent.micros, spent.uncertain_micros

    def row(verdict: Verdict, note: str) -> Row:
        return Row(day, model, ledger, doubt, bill, verdict, note)

    if not ledger:  # the ledger has no call of it that day
        if abs(bill) <= tolerance:
            return None  # a line of nothing (or a rounding) names nothing to compare
        if not mapped:
            return row(
                "unmapped", f"billed {_usd(bill)} USD for {model!r}, which names no model of ours"
            )
        return row("only-bill", f"billed {_usd(bill)} USD with no call of {model} in the ledger")
    if abs(bill - ledger) <= tolerance:
        return row("match", "matches")
    if doubt and ledger - doubt - tolerance <= bill <= ledger + tolerance:
        return row(
            "within-uncertain",
            f"matches within the {_usd(doubt)} USD the ledger says may have been billed",
        )
    if not bill:
        return row(
            "only-ledger", f"the ledger records {_usd(ledger - doubt)} USD the bill does not show"
        )
    if bill > ledger:
        return row("bill-higher", f"billed {_usd(bill - ledger)} USD more than the ledger records")
    return row(
        "ledger-higher", f"the ledger records {_usd(ledger - bill)} USD more than was billed"
    )


def _micros(usd: Decimal) -> int:
    return int((usd * MICROS_PER_USD).to_integral_value(ROUND_HALF_EVEN))


def _usd(micros: int) -> str:
    """USD with four decimals, or six where the micro-dollars need them."""
    return f"{micros_to_usd(micros):.{4 if micros % 100 == 0 else 6}f}"
