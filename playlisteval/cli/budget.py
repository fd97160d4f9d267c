"""``playlisteval budget``: the money commands (``reconcile``: the ledger beside a provider's
bill)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.commands import CommandGroup
from playlisteval.cli.options import JsonOption
from playlisteval.cli.output import console, err_console, usd
from playlisteval.cli.shell import EXIT_BILL_DIFFERS, HomeOption, fail, open_app, use_home
from store.errors import ConfigError, PlaylistEvalError

if TYPE_CHECKING:
    from policies.reconcile import Reconciliation

MAX_TOLERANCE_USD = 1000
# Who answered the calls no provider billed (store.answers' names for them), in a line.
ANSWERERS = {"offline": "the offline harness", "real-local": "a local model", "log": "the log"}

budget_app = typer.Typer(
    cls=CommandGroup,
    help="Money: the ledger beside what the providers billed.",
    no_args_is_help=True,
)


@budget_app.callback()
def _budget(home: HomeOption = None) -> None:
    """Money: the ledger beside what the providers billed."""
    use_home(home)


@budget_app.command("reconcile")
def budget_reconcile(
    bill_file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="The provider's usage export: OpenAI's Costs API JSON (group_by=line_item), a "
            "Google Cloud Billing CSV, or an Alibaba Cloud Bill Details CSV (DashScope).",
        ),
    ],
    provider: Annotated[
        str | None,
        typer.Option(
            help="Whose bill it is: openai, gemini or dashscope (default: told from the file's "
            "shape)."
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(help="Only this curation run's calls (its seeds' and its pair selection's)."),
    ] = None,
    tolerance_usd: Annotated[
        float,
        typer.Option(help="A model's day matches when ledger and bill differ by at most this."),
    ] = 0.01,
    bill_tz: Annotated[
        str | None,
        typer.Option(
            help="The time zone the CSV bill's days are counted in (default: Cloud Billing's "
            "US Pacific time, Alibaba Cloud's UTC+8; OpenAI's days are UTC)."
        ),
    ] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show, per model and day, the ledger beside a provider's bill, naming each difference
    (exit 9 when there is one, 0 when every day matches within --tolerance-usd).

    The ledger's side is what the log says was spent on live calls to the bill's provider on
    that day (counted in the bill's time zone): answers at their recorded cost, and attempts
    whose outcome is unknown at what they were charged (a bill between the two matches). Offline
    and local answers, open reservations, other providers' models and days the bill does not
    cover are left out and summed below the table. A bill line naming no model of ours is a
    difference of its own."""
    from playlisteval.reconciliation import read_bill, reconcile_bill
    from policies.bills import PROVIDERS
    from store.events import usd_to_micros

    try:
        if not math.isfinite(tolerance_usd) or not 0 <= tolerance_usd <= MAX_TOLERANCE_USD:
            raise ConfigError(
                f"--tolerance-usd must be between 0 and {MAX_TOLERANCE_USD}, got {tolerance_usd!r}"
            )
        known = next((p for p in PROVIDERS if p == provider), None)
        if provider is not None and known is None:
            raise ConfigError(f"--provider {provider!r} is none of {', '.join(PROVIDERS)}")
        bill = read_bill(bill_file, known, bill_tz)
    except PlaylistEvalError as exc:
        raise fail(exc) from exc  # before anything opens: one line, exit 2
    with open_app(home) as app_:
        found = reconcile_bill(app_, bill, tolerance_micros=usd_to_micros(tolerance_usd), run=run)
    if as_json:
        print(json.dumps(_as_json(found), indent=2))
    else:
        _print(found)
    if found.differences:
        raise typer.Exit(EXIT_BILL_DIFFERS)


def _print(found: Reconciliation) -> None:
    """The table of rows and the summary under it."""
    bill = found.bill
    table = Table(
        title=f"{escape(bill.source)} ({bill.provider}, days in {bill.zone})",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("day", no_wrap=True)
    table.add_column("model")
    for name in ("ledger USD", "bill USD", "difference"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("note")
    for row in found.rows:
        mark = "red" if row.differs else "green"
        ledger = usd(row.ledger_micros)
        if row.uncertain_micros:
            ledger += f" ({usd(row.uncertain_micros)} uncertain)"
        table.add_row(
            row.day.isoformat(),
            escape(row.model),
            ledger,
            usd(row.bill_micros),
            f"{'+' if row.difference_micros > 0 else ''}{usd(row.difference_micros)}",
            f"[{mark}]{escape(row.note)}[/]",
        )
    if found.rows:
        console.print(table)
    count = len(found.differences)
    verdict = (
        f"[bold red]{count} difference(s)[/]" if count else "[green]the bill matches the ledger[/]"
    )
    console.print(
        f"{verdict} in {len(found.rows)} model-day(s) from {bill.first_day} to {bill.last_day} "
        f"(tolerance {usd(found.tolerance_micros)} USD): ledger {usd(found.ledger_micros)} USD, "
        f"bill {usd(found.bill_micros)} USD"
    )
    for line in _left_out(found):
        console.print(f"  not compared: {escape(line)}")
    if count:
        err_console.print(
            f"the bill and the ledger differ on {count} model-day(s); each is named in the table"
        )


def _left_out(found: Reconciliation) -> list[str]:
    """What neither side compared, one line each."""
    lines = []
    if found.outside_micros:
        lines.append(
            f"{usd(found.outside_micros)} USD in the ledger on days the bill does not cover"
        )
    if found.other_micros:
        lines.append(f"{usd(found.other_micros)} USD in the ledger for other providers' models")
    for who, micros in sorted(found.not_billed.items()):
        by = ANSWERERS.get(who, who)
        lines.append(f"{usd(micros)} USD in the ledger answered by {by}, never billed")
    if found.open_micros:
        lines.append(f"{usd(found.open_micros)} USD reserved by calls still open (no day yet)")
    if found.bill.skipped:
        lines.append(f"{found.bill.skipped} bill row(s) of other services or products")
    return lines


def _as_json(found: Reconciliation) -> dict[str, Any]:
    """The reconciliation as plain data (USD as numbers)."""
    from store.events import micros_to_usd

    bill = found.bill
    return {
        "file": bill.source,
        "provider": bill.provider,
        "zone": str(bill.zone),
        "first_day": bill.first_day.isoformat(),
        "last_day": bill.last_day.isoformat(),
        "tolerance_usd": micros_to_usd(found.tolerance_micros),
        "matches": not found.differences,
        "differences": len(found.differences),
        "ledger_usd": micros_to_usd(found.ledger_micros),
        "bill_usd": micros_to_usd(found.bill_micros),
        "rows": [
            {
                "day": row.day.isoformat(),
                "model": row.model,
                "ledger_usd": micros_to_usd(row.ledger_micros),
                "uncertain_usd": micros_to_usd(row.uncertain_micros),
                "bill_usd": micros_to_usd(row.bill_micros),
                "difference_usd": micros_to_usd(row.difference_micros),
                "verdict": row.verdict,
                "note": row.note,
            }
            for row in found.rows
        ],
        "not_compared": _left_out(found),
    }
