"""The daemon and the fleet: ``worker``, ``serve``, ``enqueue`` and ``fleet``.

A worker and the daemon stop gracefully on SIGTERM or a first Ctrl-C (the calls in flight
finish); a second one ends the process at once (:func:`until_signalled`).
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.options import ConcurrencyOption
from playlisteval.cli.output import console, err_console, usd
from playlisteval.cli.shell import HomeOption, check_count, checked, open_app

if TYPE_CHECKING:
    import anyio

    from agents.fleet import WorkerReport
    from playlisteval.app import App
    from policies.budget import Budget
    from store.events import Event

commands = typer.Typer()

_T = TypeVar("_T")

#: ``worker`` and ``serve``: a graceful stop that many seconds after the start
#: (:func:`until_signalled`'s ``stop_after_s``).
StopAfterOption = Annotated[
    float | None,
    typer.Option(help="Stop gracefully after this many seconds (soak tests, rehearsals)."),
]


async def until_signalled(
    body: Callable[[anyio.Event], Awaitable[_T]], stop_after_s: float | None = None
) -> _T:
    """Run ``body(stop)``; SIGTERM or Ctrl-C sets ``stop`` (a graceful stop), a second one
    ends the process at once (what is in the log stays; a restart resumes from it). With
    ``stop_after_s``, ``stop`` is also set that many seconds after the start."""
    import anyio

    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        if stop_after_s is not None:

            async def timer() -> None:
                await anyio.sleep(stop_after_s)
                err_console.print(f"{stop_after_s:g} s are over: stopping gracefully")
                stop.set()

            group.start_soon(timer)

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    if stop.is_set():
                        err_console.print("stopping now; run the same command to resume")
                        os._exit(130)
                    err_console.print(
                        f"{signal.Signals(signum).name}: finishing the calls in flight, then "
                        "stopping (send it again to stop at once)"
                    )
                    stop.set()

        group.start_soon(watch)
        result = await body(stop)
        group.cancel_scope.cancel()
    return result


class FleetProgress:
    """One line per seed that ends, for a worker's terminal."""

    def event(self, stream: str, event: Event, budget: Budget) -> None:
        """Print accepted, discarded and stopped seeds."""
        from store.events import ItemAccepted, SeedDiscarded, SeedStopped

        if isinstance(event, ItemAccepted | SeedDiscarded | SeedStopped):
            kind = {
                "ItemAccepted": "[green]accepted[/]",
                "SeedDiscarded": "[yellow]discarded[/]",
                "SeedStopped": "[red]stopped[/]",
            }[type(event).__name__]
            detail = f" ({escape(event.reason)})" if isinstance(event, SeedStopped) else ""
            console.print(f"{escape(stream)} {kind}{detail}")


def print_worker(report: WorkerReport) -> None:
    """What a worker did before it stopped."""
    results = Counter(report.seeds_finished.values())
    done = ", ".join(f"{n} {r}" for r, n in sorted(results.items())) or "none"
    console.print(
        f"worker [bold]{escape(report.owner)}[/] stopped: seeds finished: {escape(done)}; "
        f"released to the queue: {len(report.seeds_released)}; taken over by others: "
        f"{len(report.seeds_lost)}; videos indexed: {len(report.indexed)}; "
        f"{report.live_calls} calls made, {report.replayed_calls} served from the log"
    )


def store_label(app_: App) -> str:
    """Where the event store is, its password hidden."""
    from sqlalchemy.engine import make_url

    url = app_.settings.store.url
    if not url:
        return str(app_.workspace.database)
    return make_url(url).render_as_string(hide_password=True)


@commands.command()
def worker(
    concurrency: ConcurrencyOption = None,
    name: Annotated[
        str | None, typer.Option(help="This worker's name (default: worker.name, else HOST:PID).")
    ] = None,
    exit_when_idle: Annotated[
        bool | None,
        typer.Option(
            "--exit-when-idle/--wait",
            help="Exit once nothing is left to claim (default: worker.exit_when_idle).",
        ),
    ] = None,
    stop_after: StopAfterOption = None,
    home: HomeOption = None,
) -> None:
    """Claim seeds (and, with a Qdrant server, indexing jobs) from the shared queue and curate
    them until SIGTERM. Run any number, on any number of machines, with store.url set."""
    import anyio

    from policies.budget import check_concurrency

    with open_app(home, create=True) as app_:
        checked(lambda: check_concurrency(concurrency, most=app_.settings.curation.max_concurrency))
        index_job = None
        if app_.settings.vectors.backend == "qdrant-server":
            indexer = app_.indexer()
            index_job = indexer.index_video
        fleet = app_.fleet_worker(
            app_.fleet_config(name, exit_when_idle=exit_when_idle),
            concurrency=concurrency,
            index_job=index_job,
            progress=FleetProgress(),
        )
        err_console.print(
            f"worker {fleet.fleet.owner} claiming from {store_label(app_)}; "
            "SIGTERM or Ctrl-C stops it gracefully"
        )
        report = anyio.run(lambda: until_signalled(fleet.work, stop_after))
        print_worker(report)


@commands.command()
def serve(
    playlists: Annotated[
        Path | None,
        typer.Option(help="Manifest of the playlists to curate (default: daemon.playlists_file)."),
    ] = None,
    work: Annotated[
        bool | None,
        typer.Option(
            "--work/--no-work",
            help="Also curate and index in this process (default: daemon.work); --no-work "
            "only schedules, for `playlisteval worker` processes.",
        ),
    ] = None,
    concurrency: ConcurrencyOption = None,
    port: Annotated[
        int | None,
        typer.Option(help="Port of /healthz and /metrics (default: daemon.metrics_port; 0: off)."),
    ] = None,
    stop_after: StopAfterOption = None,
    home: HomeOption = None,
) -> None:
    """The curator daemon: playlists → index → seeds → curation → scheduled exports, under
    budget.cap_usd and budget.per_day_usd, until SIGTERM; a restart resumes exactly."""
    import anyio

    from playlisteval.daemon import Daemon
    from policies.budget import check_concurrency

    with open_app(home, create=True) as app_:
        checked(lambda: check_concurrency(concurrency, most=app_.settings.curation.max_concurrency))
        daemon = Daemon(
            app_, work=work, playlists_file=playlists, concurrency=concurrency, metrics_port=port
        )
        err_console.print(
            f"serving {app_.workspace.root} (store {store_label(app_)}); "
            "SIGTERM or Ctrl-C stops it gracefully"
        )
        anyio.run(lambda: until_signalled(daemon.run, stop_after))
        if daemon.worker_report is not None:
            print_worker(daemon.worker_report)


@commands.command()
def enqueue(
    max_seeds: Annotated[int | None, typer.Option(help="Queue at most this many seeds.")] = None,
    home: HomeOption = None,
) -> None:
    """Open a run over the active seeds never queued before, for `playlisteval worker`s."""
    from playlisteval import runs

    check_count(max_seeds, 1, "--max-seeds")
    with open_app(home) as app_:
        app_.set_budget_caps()
        opened = runs.queue_fresh_seeds(app_, max_seeds or app_.settings.curation.max_seeds)
        if opened is None:
            err_console.print(
                "[bold red]error:[/] no seed left to queue: every active seed is queued already "
                "(see `playlisteval fleet`), or there are none (`playlisteval index`)"
            )
            raise typer.Exit(2)
        run_id, count = opened
        console.print(f"run {run_id}: {count} seeds queued; start `playlisteval worker`s")


@commands.command()
def fleet(home: HomeOption = None) -> None:
    """Workers, the queue, the shared budget and parked items."""
    with open_app(home) as app_:
        queue, accounts = app_.queue(), app_.accounts()
        # True to the queue: the leases a worker holds are the queue's, not what its last
        # heartbeat said, and one silent for three heartbeats is gone, whatever it last said.
        stale_after_s = 3 * app_.settings.worker.heartbeat_s
        items = queue.items()
        leases = Counter(i.owner for i in items if i.state == "leased" and i.owner)
        table = Table(title="workers")
        for column in ("worker", "state", "heartbeat age (s)", "leases held"):
            table.add_column(column)
        for row in queue.workers():
            state = str(row["state"])
            if state != "stopped" and float(row["age_s"]) > stale_after_s:
                state = f"gone ({state})"  # silent; what it said last
            table.add_row(
                escape(row["name"]),
                escape(state),
                f"{row['age_s']:.1f}",
                str(leases.get(row["name"], 0)),
            )
        console.print(table if table.row_count else "no worker has run yet")
        for row in queue.workers():
            refused = row["info"].get("refused_runs") or {}
            for run_id, why in sorted(refused.items()):
                # A worker whose code cannot honour a run's recorded definition leaves its
                # seeds to the others (a rolling upgrade): say so, once per worker and run.
                console.print(
                    f"worker {escape(row['name'])} does not take run {escape(run_id)}'s seeds: "
                    f"{escape(str(why))}"
                )
        counts = queue.counts()
        table = Table(title="queue")
        for column in ("kind", "state", "items"):
            table.add_column(column)
        for (kind, state), n in sorted(counts.items()):
            table.add_row(kind, state, str(n))
        console.print(table if table.row_count else "the queue is empty")
        for account in accounts.accounts():
            cap = "uncapped" if account.cap_micros is None else usd(account.cap_micros)
            console.print(
                f"budget {escape(account.name)}: spent {usd(account.spent_micros)}"
                f" + reserved {usd(account.reserved_micros)} of {cap} USD"
            )
        for item in items:
            if item.state == "parked":
                console.print(f"parked {escape(item.id)}: {escape(item.result or '')}")
