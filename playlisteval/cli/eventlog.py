"""``playlisteval store``: the event log's own commands (``rebuild``, ``verify``, ``rekey``,
``anchor``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from playlisteval.cli.commands import CommandGroup
from playlisteval.cli.output import console, err_console
from playlisteval.cli.shell import EXIT_FIX, EXIT_TAMPERED, HomeOption, open_app, use_home
from store.errors import ConfigError

store_app = typer.Typer(cls=CommandGroup, help="The event log.", no_args_is_help=True)


@store_app.callback()
def _store(home: HomeOption = None) -> None:
    """The event log."""
    use_home(home)


@store_app.command("rebuild")
def store_rebuild(home: HomeOption = None) -> None:
    """Rebuild the projections (seed status, spend, accepted items) from the log."""
    with open_app(home) as app_:
        count = app_.projections().rebuild()
        console.print(f"projections rebuilt from {count} events")


@store_app.command("verify")
def store_verify(
    home: HomeOption = None,
    anchor: Annotated[
        list[Path] | None,
        typer.Option(
            "--anchor",
            help="Also check the log against the anchors published in this export folder, "
            "benchmark.json, report.json or anchor file (repeatable): a rewrite after an anchor "
            "was taken shows, even one made with the log key.",
        ),
    ] = None,
) -> None:
    """Check every event of the log against its keyed chains (each stream's, and the global one
    over seq) and the head kept beside the key (exit 4 naming the first seq that is not what
    was written: edited, inserted, deleted, reordered or cut off the end), against
    published anchors, and (for a fleet's database) the shared budget accounts against the
    ledger of the log's calls: they must say the same spend (exit 4 naming each difference).
    Run it while the fleet is stopped or idle: a call that moves between the two reads shows."""
    from playlisteval import integrity, runs
    from store.accounts_check import check_accounts

    with open_app(home) as app_:
        anchors = [named for path in anchor or [] for named in integrity.read_anchors(path)]
        streams = len(app_.events.streams())
        checked = runs.verify_store(app_)
        found = checked.problems
        problems = [str(p) for p in found]
        first = f"the first {found[0].at}" if found else ""
        head = app_.events.head_path
        moved = integrity.check_anchors(app_.events, anchors)
        accounts = check_accounts(app_.events)
    if not problems and not moved and accounts.equal:
        console.print(
            f"[green]ok[/]: {checked.events} events checked in {streams} streams (through seq "
            f"{checked.last_seq}), every chain intact"
            + (f"; the log's head kept in {escape(str(head))} matches" if head else "")
        )
        for named in anchors:
            label = escape(_cut(named.label))
            console.print(f"[green]ok[/]: {label} matches its anchor {_cut(str(named.anchor))}")
        if accounts.campaign:
            console.print(f"[green]ok[/]: {escape(accounts.lines()[0])}")
        return
    if not accounts.equal:
        err_console.print(
            "[bold red]the budget accounts differ from the ledger[/]: "
            f"{len(accounts.differences)} difference(s)"
        )
        for line in accounts.lines()[:10]:
            err_console.print(f"  {escape(line)}")
    if problems:
        err_console.print(f"[bold red]the log was changed[/]: {len(problems)} problem(s); {first}")
    for line in moved:
        err_console.print(f"[bold red]the log differs from an anchor[/]: {escape(line)}")
    record = [str(p) for p in found if not p.seq]  # the log's chain record, named apart
    for problem in record + [str(p) for p in found if p.seq][: 10 - len(record)]:
        err_console.print(f"  {escape(_cut(problem, 400))}")
    if problems or moved:
        err_console.print(
            "  restore the database from a backup, or replay the runs (`playlisteval replay RUN`) "
            "to see what differs"
            + (
                "; if the log is yours as it stands (an earlier PlaylistEval's, or one written "
                "without the key), `playlisteval store rekey` checks it and brings it under the key"
                if record
                else ""
            )
        )
    else:
        err_console.print(
            "  the log's chains are intact, so the ledger is the record: check the accounts "
            "again with the fleet stopped (a call settling between the two reads shows here), "
            "then look for a worker killed between a hold and its log entry"
        )
    raise typer.Exit(EXIT_TAMPERED)


@store_app.command("rekey")
def store_rekey(
    old_key: Annotated[
        Path | None,
        typer.Option(
            "--old-key",
            help="The key file the log was chained under before (a key replaced since).",
        ),
    ] = None,
    unverified: Annotated[
        bool,
        typer.Option(
            "--unverified",
            help="Chain the log as it stands even where it cannot be checked (a log written "
            "before hash chains existed). Recorded as unverified.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Bring the log under the workspace's key: check it as it is chained now (under the key,
    the --old-key, or plain SHA-256), then re-chain it under the key with its global chain and
    head, recorded as a LogRekeyed event. Nothing else ever re-chains a log: run it after
    moving a workspace to a new key, for a log an earlier PlaylistEval wrote, or for a scratch
    log written without a key. A log that does not check out is left as it is (exit 4)."""
    from store.chain import read_log_key

    with open_app(home) as app_:
        old = None
        if old_key is not None:
            old = read_log_key(old_key)
            if old is None:
                raise ConfigError(f"--old-key {str(old_key)!r}: no such file")
        if not app_.events.check().problems:
            console.print(
                "[green]ok[/]: the log is already chained under the workspace's key and checks "
                "out; nothing to do"
            )
            return
        command = "store rekey" + (" --old-key FILE" if old_key else "")
        done = app_.events.rekey(
            old_key=old,
            unverified=unverified,
            command=command + (" --unverified" if unverified else ""),
        )
    if not done.done:
        err_console.print(
            f"[bold red]nothing re-chained[/]: the log does not check out under any chain it "
            f"could be under ({escape(done.was)}): {len(done.problems)} problem(s), the first "
            f"{done.problems[0].at}"
        )
        for problem in done.problems[:10]:
            err_console.print(f"  {escape(_cut(str(problem)))}")
        err_console.print(
            "  restore the database from a backup; give --old-key if the log was chained under "
            "another key; --unverified chains a log written before hash chains as it stands"
        )
        raise typer.Exit(EXIT_TAMPERED)
    console.print(
        f"[green]re-chained[/]: {done.events} events, checked under {escape(done.was)}, now "
        f"under key {done.key_id}; recorded as seq {done.seq} (LogRekeyed)"
    )


@store_app.command("anchor")
def store_anchor(
    run: Annotated[
        list[str] | None,
        typer.Option("--run", help="Anchor this run's streams (repeatable; default: every run)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the anchors here as JSON (to publish or keep apart)."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """The anchors of runs as the log holds them now: publish them (or keep them away from the
    workspace) and `store verify --anchor FILE` shows any later rewrite of those runs."""
    from playlisteval import integrity
    from playlisteval.overview import list_runs
    from store.runlog import run_started

    with open_app(home) as app_:
        if out is not None:
            _check_anchor_target(out)  # before anything is read: a bad target costs nothing
        run_ids = run or [row.run_id for row in list_runs(app_)]
        if not run_ids:
            raise ConfigError("no run in this workspace's log to anchor")
        for run_id in run_ids:
            run_started(app_.events, run_id)  # an unknown run is one line, not an empty anchor
        # An anchor vouches for the log as it is: never for one whose chains do not check out.
        found = app_.events.verify()
        if found:
            err_console.print(
                f"[bold red]the log was changed[/]: {len(found)} problem(s), the first "
                f"{found[0].at}: {escape(_cut(str(found[0])))}; no anchor is taken of a log "
                "that fails `playlisteval store verify`"
            )
            raise typer.Exit(EXIT_TAMPERED)
        anchors = [integrity.run_anchor(app_, run_id) for run_id in run_ids]
    text = json.dumps({"anchors": [a.to_json() for a in anchors]}, indent=2) + "\n"
    if out is not None:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            err_console.print(
                f"[bold red]error:[/] cannot write the anchors to {escape(str(out))!r}: "
                f"{escape(str(exc.strerror or exc))}"
            )
            raise typer.Exit(EXIT_FIX) from exc
        console.print(f"{len(anchors)} anchor(s) written to {escape(str(out))}")
    else:
        # Raw, never through Rich (which wraps long lines at the terminal's width): the output
        # is JSON to keep or publish.
        sys.stdout.write(text)
        sys.stdout.flush()


def _check_anchor_target(out: Path) -> None:
    """ConfigError when ``--out`` cannot take the anchors' file: a folder, or a missing one."""
    if out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a folder: name the anchor file to write")
    if not out.parent.is_dir():
        raise ConfigError(
            f"--out {str(out)!r}: its folder {str(out.parent)!r} does not exist; create it first"
        )


def _cut(text: str, limit: int = 200) -> str:
    """``text`` cut for display (a label may be any length: the terminal need not wrap it)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
