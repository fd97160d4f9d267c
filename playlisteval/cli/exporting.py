"""The ``export`` command: a run's benchmark as a folder that `datasets` loads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.options import PairsBudgetOption, PerDomainOption, RunOption
from playlisteval.cli.output import StepBars, console, err_console, step_bars
from playlisteval.cli.shell import HomeOption, check_money, checked, open_app

if TYPE_CHECKING:
    from playlisteval.export import ExportSummary

commands = typer.Typer()
T = TypeVar("T")


def print_export(summary: ExportSummary) -> None:
    """The exported benchmark: pairs per domain and per rating gap, where and its hash."""
    table = Table(title=f"{summary.pairs} preference pairs")
    table.add_column("domain")
    table.add_column("pairs", justify="right")
    for domain, count in sorted(summary.per_domain.items()):
        table.add_row(domain, str(count))
    console.print(table)
    gaps = ", ".join(f"gap {g}: {n}" for g, n in sorted(summary.per_gap.items()))
    console.print(f"by rating gap: {gaps}")
    clips = f", {summary.clips} clips with their frames" if summary.clips else ""
    console.print(f"written to {summary.path} (sha256 {summary.content_sha256[:12]}…{clips})")


@commands.command()
def export(
    directory: Annotated[Path, typer.Argument(help="Where to write the benchmark.")],
    run: RunOption = None,
    per_domain: PerDomainOption = None,
    budget: PairsBudgetOption = None,
    with_clips: Annotated[
        bool,
        typer.Option(
            "--with-clips",
            help="Bundle each evidence span's clip (as the generators were sent it) and the "
            "frames a judge is shown of it into DIRECTORY/clips, so a copy of the folder "
            "shows them anywhere.",
        ),
    ] = False,
    push_to_hub: Annotated[
        str | None,
        typer.Option(
            "--push-to-hub",
            metavar="REPO",
            help="After writing DIRECTORY, upload it as the Hugging Face dataset REPO "
            "(OWNER/NAME; made when missing) on the Hub HF_ENDPOINT names. The local export "
            "is kept whatever the Hub says.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Hugging Face token for --push-to-hub (default: HF_TOKEN, then "
            "the token `hf auth login` saved)."
        ),
    ] = None,
    private: Annotated[
        bool, typer.Option("--private", help="Make the --push-to-hub repo private.")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Export a run's benchmark into the folder DIRECTORY: JSONL and Parquet that `datasets`
    loads, a manifest of videos and clips, a dataset card with Hugging Face metadata, a license
    file, a version and a content hash; every path in it relative to the folder."""
    from playlisteval import hub, runs
    from playlisteval.export import check_export_target

    check_money(budget)
    checked(lambda: check_export_target(directory))  # `export x.parquet`: one line, nothing made
    if push_to_hub is not None:  # a bad repo id or no token: one line before anything is paid
        checked(lambda: hub.check_repo_id(push_to_hub))
        publish(lambda: hub.find_token(token))
    with open_app(home) as app_:
        with step_bars() as bars:
            summary = runs.export(
                app_,
                directory,
                run,
                per_domain=per_domain,
                budget_usd=budget,
                with_clips=with_clips,
                progress=StepBars(bars),
            )
        print_export(summary)
        console.print(
            f"validate it: playlisteval ui {summary.path} --home {app_.workspace.root} "
            "--invite YOUR_NAME",
            soft_wrap=True,
        )
    if push_to_hub is not None:
        folder = summary.path
        done = publish(
            lambda: hub.push_export(folder, push_to_hub, token=token, private=private),
            kept=folder,
        )
        console.print(
            f"on the Hub: {done.url} ({done.files} files, commit {done.commit[:12]}); "
            f'load it with load_dataset("{done.repo_id}", split="test")',
            soft_wrap=True,
        )


def publish(step: Callable[[], T], kept: Path | None = None) -> T:
    """Run a step of a Hub push; its failure is one line and the exit code of its kind
    (:mod:`playlisteval.hub`), saying that the local export ``kept`` is kept."""
    from playlisteval.hub import HubError

    try:
        return step()
    except HubError as exc:
        also = f" (the export in {str(kept)!r} is kept)" if kept else ""
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}{also}", soft_wrap=True)
        raise typer.Exit(exc.exit_code) from exc
