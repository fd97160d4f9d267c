"""What every command shares: the ``--home`` option, opening the workspace, the exit codes and
how an error becomes one line.

Light on purpose (imported when the CLI starts): the settings, the composition root and the
store are imported when a command opens the workspace, not before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from playlisteval.cli.interrupt import interruptible
from playlisteval.cli.output import err_console
from store.errors import (
    ConfigError,
    DiskFull,
    PlaylistEvalError,
    RunDefinitionMismatch,
    StoreUnreadable,
    UndecodableEvent,
    disk_full,
)

if TYPE_CHECKING:
    from playlisteval.app import App
    from playlisteval.settings import Settings

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Workspace folder (database, Qdrant data, media, exports). "
        "Default: $PLAYLISTEVAL_HOME or ~/.playlisteval.",
        envvar="PLAYLISTEVAL_HOME",
    ),
]

# Exit codes: what a script can tell apart.
EXIT_FIX = 2  # a setting, a value or the workspace needs fixing: the line says what
EXIT_BUSY = 3  # another live process holds what this command would write to
EXIT_TAMPERED = 4  # the log does not check out (replay or `store verify` found a difference)
EXIT_UNREADABLE = 5  # a database file is corrupt or not a database: `doctor` says more
EXIT_NOTHING_JUDGED = 6  # an evaluation judged no pair at all: the line gives the first reason
EXIT_DISK = 7  # a write found no room (disk or quota full, file-size limit): what came before stays
EXIT_DEFINITION = 8  # today's code or settings cannot honour a run's recorded definition
EXIT_BILL_DIFFERS = 9  # `budget reconcile`: the provider's bill and the ledger differ
EXIT_MIXED_BENCHMARKS = 10  # `report`: evaluations of different benchmarks, no --across-benchmarks
# 11-15: `export --push-to-hub` refused (playlisteval.hub: no token, token refused, repo holds
# something else, Hub unreachable, any other Hub error); the export folder stays.
EXIT_UNKNOWN_JUDGE = 16  # `eval --judge ID`: no provider can serve ID (the closest ids are named)
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


def fail(exc: PlaylistEvalError, more: int = 0) -> typer.Exit:
    """Print ``exc`` as one line (saying how many ``more`` errors came with it) and return the
    exit that fits it."""
    from store.coordination import LeaseHeld

    also = f" (and {more} more like it)" if more else ""
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}{also}")
    if isinstance(exc, LeaseHeld):
        return typer.Exit(EXIT_BUSY)
    if isinstance(exc, UndecodableEvent):
        return typer.Exit(EXIT_TAMPERED)
    if isinstance(exc, DiskFull):
        return typer.Exit(EXIT_DISK)
    if isinstance(exc, RunDefinitionMismatch):
        return typer.Exit(EXIT_DEFINITION)
    return typer.Exit(EXIT_UNREADABLE if isinstance(exc, StoreUnreadable) else EXIT_FIX)


_GO_ON: list[str] = []  # the command that takes the interrupted work further (see go_on_with)


def go_on_with(command: str) -> None:
    """Say which command takes this command's work further if it is interrupted from here on,
    when that is not the same command again (``curate`` opens a new run each time: the one it
    opened goes on with ``curate --run RUN``)."""
    _GO_ON[:] = [command]


def interrupted() -> typer.Exit:
    """Ctrl-C inside a command: what was done is kept (every call and record is in the log or
    its file before it counts), and the line names the command that goes on from there: the
    same command again, unless the command said otherwise (:func:`go_on_with`)."""
    how = (
        f"`{_GO_ON[-1]}` goes on from there"
        if _GO_ON
        else "run the same command again to go on from there"
    )
    err_console.print(f"interrupted: what was done is kept; {how}")
    return typer.Exit(EXIT_INTERRUPTED)


def leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The errors of a (nested) exception group, in order."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def require_workspace(settings: Settings) -> None:
    """A command that reads a workspace refuses one that was never started, rather than make
    an empty one where a mistyped ``--home`` points (a catalogue on a server stands in)."""
    from playlisteval.workspace import Workspace

    workspace = Workspace(Path(settings.home))
    if settings.store.catalog_url or workspace.started() or workspace.blocked_by_file():
        return  # a file in the way is App's to explain
    raise ConfigError(
        f"no workspace at {str(workspace.root)!r}: start one there with `playlisteval add "
        f"SOURCE --home {workspace.root}` (or `playlisteval demo --home {workspace.root}`), or "
        "give the --home of an existing workspace"
    )


@contextmanager
def open_app(
    home: Path | None, *, create: bool = False, server: bool = False, **overrides: Any
) -> Iterator[App]:
    """An App for the workspace; project errors become a one-line message and exit code 2
    (3 when another process holds the run). Unless ``create``, a workspace that was never
    started is refused (exit 2), not made. One Ctrl-C while it is open interrupts the command
    (exit 130), in or out of an event loop (:func:`playlisteval.cli.interrupt.interruptible`),
    except in a ``server``, which Ctrl-C stops by design (its own handler shuts it down)."""
    from playlisteval.app import App
    from playlisteval.settings import load_settings

    _GO_ON.clear()  # a command says its own (a test runs many in one process)
    try:
        with nullcontext() if server else interruptible():
            settings = load_settings(home, **overrides)
            if not create:
                require_workspace(settings)
            with App(settings) as opened:
                yield opened
    except PlaylistEvalError as exc:
        raise fail(disk_full(exc) or exc) from exc
    except KeyboardInterrupt:
        raise interrupted() from None
    except BaseExceptionGroup as group:
        # Concurrent work (seeds, judgments) fails as a group: when every error in it is one of
        # ours, the first is the line to print, not the group's traceback. A full disk fails
        # every writer at once, whatever each was doing: that is the line then.
        found = leaves(group)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in found):
            raise interrupted() from None
        no_room = [f for f in map(disk_full, found) if f is not None]
        if no_room:
            raise fail(no_room[0]) from group
        known = [e for e in found if isinstance(e, PlaylistEvalError)]
        if not known or len(known) != len(found):
            raise
        raise fail(known[0], more=len(known) - 1) from group
    except typer.Exit:
        raise  # already said
    except Exception as exc:
        # A write that found no room surfaces from SQLite, SQLAlchemy, pyarrow or a plain
        # file: one line and EXIT_DISK; anything else is a bug and keeps its traceback.
        written = disk_full(exc)
        if written is None:
            raise
        raise fail(written) from exc


def checked(check: Callable[[], object]) -> None:
    """Run an input check before anything is opened or written; its error is one line."""
    try:
        check()
    except PlaylistEvalError as exc:
        raise fail(exc) from exc


def check_money(
    budget: float | None = None, per_seed: float | None = None, concurrency: int | None = None
) -> None:
    """``--budget``, ``--per-seed`` and ``--concurrency`` checked before anything opens."""
    from policies.budget import cap_micros, check_concurrency

    checked(lambda: cap_micros(budget, "--budget"))
    checked(lambda: cap_micros(per_seed, "--per-seed"))
    checked(lambda: check_concurrency(concurrency))


def check_count(value: int | None, least: int, flag: str) -> None:
    """A count option below ``least`` is one line and exit 2 before anything opens
    (``--max-seeds 0`` must not mean every seed, nor ``--show -3`` all but three)."""

    def check() -> None:
        if value is not None and value < least:
            raise ConfigError(f"{flag} must be at least {least}, got {value!r}")

    checked(check)


def use_home(home: Path | None) -> None:
    """``--home`` given before a subcommand (``playlisteval --home WS status``, ``playlisteval
    store --home WS verify``) is the workspace of the command that follows, unless that command
    is given its own ``--home``."""
    if home is not None:
        os.environ["PLAYLISTEVAL_HOME"] = str(home)
