"""``playlisteval doctor``: prices, keys, seeds and the event log checked, each failure with
what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from playlisteval.cli.output import console
from playlisteval.cli.shell import HomeOption, fail, open_app
from store.errors import PlaylistEvalError

if TYPE_CHECKING:
    from playlisteval.doctor import Check

commands = typer.Typer()


def show(checks: list[Check]) -> None:
    """One line per check, and what to do under each failure."""
    for check in checks:
        mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
        console.print(f"{mark} {escape(check.name)}: {escape(check.detail)}")
        if not check.ok and check.fix:
            console.print(f"      → {escape(check.fix)}")


@commands.command()
def doctor(home: HomeOption = None) -> None:
    """Check prices, keys, seeds and the event log; each failure says what to do."""
    from playlisteval.doctor import database_checks, run_checks
    from playlisteval.settings import load_settings

    try:
        settings = load_settings(home)
    except PlaylistEvalError as exc:
        raise fail(exc) from exc
    databases = database_checks(settings)
    show(databases)
    if not all(c.ok for c in databases):
        # Opening the workspace would only fail on them again: fix these first.
        raise typer.Exit(1)
    with open_app(home, create=True) as app_:
        checks = run_checks(app_)
        show(checks)
        if not all(c.ok for c in checks):
            raise typer.Exit(1)
