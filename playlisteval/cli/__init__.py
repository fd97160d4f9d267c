"""The ``playlisteval`` command: the Typer ``app``, its console-script entry point :func:`main`,
and the groups of commands it is made of, one module each:

- :mod:`~playlisteval.cli.collection`: ``add``, ``index``, ``seeds``, ``search``
- :mod:`~playlisteval.cli.status`: ``status``, ``runs``
- :mod:`~playlisteval.cli.demo`: ``demo`` (and the campaign rehearsal)
- :mod:`~playlisteval.cli.curation`: ``curate``, ``audit``, ``replay``, ``rehearse``
- :mod:`~playlisteval.cli.benchmark`: ``pairs``, ``eval``
- :mod:`~playlisteval.cli.models`: ``models`` (every model id the project knows)
- :mod:`~playlisteval.cli.exporting`: ``export``
- :mod:`~playlisteval.cli.reporting`: ``report``
- :mod:`~playlisteval.cli.annotation`: ``ui`` and the ``annotations`` group
- :mod:`~playlisteval.cli.doctor`: ``doctor``; ``smoke`` lives in :mod:`playlisteval.smoke`
- :mod:`~playlisteval.cli.fleet`: ``worker``, ``serve``, ``enqueue``, ``fleet``
- :mod:`~playlisteval.cli.eventlog`: the ``store`` group

What they share is in :mod:`~playlisteval.cli.shell` (``--home``, opening the workspace, exit
codes), :mod:`~playlisteval.cli.output` (consoles, progress bars),
:mod:`~playlisteval.cli.interrupt` (Ctrl-C), :mod:`~playlisteval.cli.commands` (help as
prose, lazy commands) and :mod:`~playlisteval.cli.options` (the options several commands take
with one meaning, declared once). Importing this package loads none of the workspace's machinery
(settings, store, providers, models): each command imports what it uses when it runs, so
``--help`` starts at once.
"""

from __future__ import annotations

import logging
import os
import sys

import typer
from rich.markup import escape
from typer.core import TyperCommand

from playlisteval.cli import (
    annotation,
    benchmark,
    budget,
    collection,
    curation,
    demo,
    doctor,
    eventlog,
    exporting,
    fleet,
    models,
    reporting,
    status,
)
from playlisteval.cli.collection import LOCAL_RAY
from playlisteval.cli.commands import CommandGroup, LazyCommand
from playlisteval.cli.curation_report import BudgetStops
from playlisteval.cli.output import console, err_console
from playlisteval.cli.shell import (
    EXIT_BILL_DIFFERS,
    EXIT_BUSY,
    EXIT_DEFINITION,
    EXIT_DISK,
    EXIT_FIX,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_JUDGED,
    EXIT_TAMPERED,
    EXIT_UNREADABLE,
    HomeOption,
    interrupted,
    use_home,
)

__all__ = [
    "EXIT_BILL_DIFFERS",
    "EXIT_BUSY",
    "EXIT_DEFINITION",
    "EXIT_DISK",
    "EXIT_FIX",
    "EXIT_INTERRUPTED",
    "EXIT_NOTHING_JUDGED",
    "EXIT_TAMPERED",
    "EXIT_UNREADABLE",
    "OPTIONAL_VALUES",
    "SMOKE_HELP",
    "BudgetStops",
    "app",
    "console",
    "err_console",
    "main",
    "with_optional_values",
]

# Models are loaded from files shipped in packages or given by path; never from a hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pydantic-ai prints a first-run Logfire banner on a terminal; this CLI's output is its own.
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

#: ``smoke``'s line in the command list (the first paragraph of its docstring, which a test
#: holds equal): its module loads the model providers, so it is listed without being imported.
SMOKE_HELP = (
    "One minimal call per configured role and model (two short clips or a few lines of "
    "transcript, the role's real output schema), each recorded in the event log: PASS/FAIL/SKIP "
    "per pair with the provider's own message. Run it with --live before a campaign."
)


def _smoke_command() -> TyperCommand:
    """``smoke`` as :mod:`playlisteval.smoke` defines it (loaded when it runs)."""
    from playlisteval import smoke

    holder = typer.Typer(add_completion=False)
    smoke.register(holder)
    command = typer.main.get_command(holder)
    if not isinstance(command, TyperCommand):  # one command and no callback: that command
        raise TypeError(f"smoke.register made {command!r}, not one command")
    return command


class PlaylistEvalGroup(CommandGroup):
    """The top-level group: ``smoke`` listed, and imported only when it runs."""

    lazy_commands = (lambda: LazyCommand("smoke", SMOKE_HELP, _smoke_command),)


app = typer.Typer(
    cls=PlaylistEvalGroup,
    help="PlaylistEval: trustworthy benchmarks for video-language judges from long playlists.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
#: The modules whose commands make up ``playlisteval``, in the order its help lists them.
COMMAND_MODULES = (
    collection,
    status,
    demo,
    curation,
    benchmark,
    models,
    exporting,
    reporting,
    annotation,
    doctor,
    fleet,
)
for _module in COMMAND_MODULES:
    app.add_typer(_module.commands)  # no name: the commands join the top level
app.add_typer(annotation.annotations_app, name="annotations")
app.add_typer(eventlog.store_app, name="store")
app.add_typer(budget.budget_app, name="budget")


@app.callback()
def _setup(home: HomeOption = None) -> None:
    """Structured logs on stderr: warnings and errors unless PLAYLISTEVAL_LOG_LEVEL says more;
    ``--home`` here is every subcommand's workspace."""
    from playlisteval import logs

    use_home(home)
    level = os.environ.get("PLAYLISTEVAL_LOG_LEVEL", "warning")
    known = ("debug", "info", "warning", "error", "critical")
    if level.lower() not in known:  # a typo must not quietly keep the default
        err_console.print(
            f"[bold red]error:[/] PLAYLISTEVAL_LOG_LEVEL={escape(repr(level))} is no log level; "
            f"use one of {', '.join(known)}"
        )
        raise typer.Exit(EXIT_FIX)
    logs.configure(level=getattr(logging, level.upper()))


# Options whose value may be left out (`index --ray` and `index --ray ADDRESS`): typer's parser
# takes none, so a bare one gets its default value here, before parsing.
OPTIONAL_VALUES = {"--ray": LOCAL_RAY}


def with_optional_values(args: list[str]) -> list[str]:
    """``args`` with each bare optional-value option (last, or followed by another option)
    given its default value."""
    out: list[str] = []
    for n, arg in enumerate(args):
        out.append(arg)
        following = args[n + 1] if n + 1 < len(args) else None
        if arg in OPTIONAL_VALUES and (following is None or following.startswith("-")):
            out.append(OPTIONAL_VALUES[arg])
    return out


def main() -> None:
    """Console-script entry point."""
    try:
        app(args=with_optional_values(sys.argv[1:]))
    except KeyboardInterrupt:
        interrupted()  # says what goes on from there
        sys.exit(EXIT_INTERRUPTED)
