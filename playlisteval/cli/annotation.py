"""Human validation: ``ui`` (the browser) and the ``annotations`` group (invites, withdrawals,
label export)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from playlisteval.cli.commands import CommandGroup
from playlisteval.cli.output import console
from playlisteval.cli.shell import HomeOption, open_app, use_home

commands = typer.Typer()

#: The benchmark every command here works on, named first.
BenchmarkArgument = Annotated[Path, typer.Argument(help="An exported benchmark folder.")]

annotations_app = typer.Typer(
    cls=CommandGroup,
    help="Human annotations of a benchmark: invites and label export.",
    no_args_is_help=True,
)


def print_invites(links: dict[str, str], base: str, new: list[str]) -> None:
    """One invite link per annotator (each is that annotator's login: hand it to them alone)."""
    if not links:
        console.print(
            "[yellow]no annotator is invited yet[/]: add --invite NAME for each annotator"
        )
        return
    for name, path in links.items():
        earlier = "" if name in new else " (invited before)"
        console.print(f"invite {escape(name)}: {base}{path}{earlier}", soft_wrap=True)


@commands.command()
def ui(
    benchmark: BenchmarkArgument,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    sample_size: Annotated[
        int | None, typer.Option(help="Pairs in the human sample (default: pairs.human_sample).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed.")] = None,
    evaluation: Annotated[
        list[Path] | None,
        typer.Option(
            help="An evaluation folder of this benchmark (`eval --out`) for the judgments "
            "viewer at /evaluations (repeat)."
        ),
    ] = None,
    invite: Annotated[
        list[str] | None,
        typer.Option(
            help="Invite an annotator by name (repeat): each gets an invite link of their own, "
            "printed here; only an invited annotator can join and label."
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Human validation (blind pairwise labels, agreement and kappa), the judgments viewer and
    the curation audit, in the browser."""
    from playlisteval.ui import create_app, serve

    with open_app(home, server=True) as app_:  # Ctrl-C stops uvicorn: the way to end `ui`
        size = sample_size or app_.settings.pairs.human_sample
        web = create_app(
            app_,
            benchmark,
            sample_size=size,
            sample_seed=app_.settings.pairs.sample_seed if seed is None else seed,
            evaluations=evaluation or (),
            invites=invite or (),
        )
        base = f"http://{host}:{port}"
        console.print(f"serving {benchmark} on {base}/ (Ctrl-C to stop)")
        console.print(f"sample: {web.state.design}")
        console.print(
            f"owner (results and every label; keep it to yourself): {base}{web.state.owner_link}",
            soft_wrap=True,
        )
        print_invites(web.state.invite_links, base, invite or [])
        if evaluation:
            console.print(f"judgments: {base}/evaluations")
        serve(web, host, port)


@annotations_app.callback()
def _annotations(home: HomeOption = None) -> None:
    """Human annotations of a benchmark: invites and label export."""
    use_home(home)


@annotations_app.command("invite")
def annotations_invite(
    benchmark: BenchmarkArgument,
    names: Annotated[list[str], typer.Argument(help="Annotators to invite.")],
    url: Annotated[
        str, typer.Option(help="Where the UI is reached, to print whole links.")
    ] = "http://127.0.0.1:8000",
    home: HomeOption = None,
) -> None:
    """Invite annotators to label a benchmark and print each one's invite link (the same link
    every time: `ui` prints them too)."""
    from playlisteval.ui import invite_annotators

    with open_app(home) as app_:
        links = invite_annotators(app_, benchmark, names)
    print_invites(links, url.rstrip("/"), names)


@annotations_app.command("withdraw")
def annotations_withdraw(
    benchmark: BenchmarkArgument,
    names: Annotated[list[str], typer.Argument(help="Invited annotators to withdraw.")],
    home: HomeOption = None,
) -> None:
    """Withdraw invited annotators (one who never joined, or stopped): the pairs assigned to
    them go to the others, and only theirs move; their answers so far are kept; their invite
    link no longer lets them in. `annotations invite` takes them back."""
    from playlisteval.ui import withdraw_annotators

    with open_app(home) as app_:
        held = withdraw_annotators(app_, benchmark, names)
    for name, pairs in held.items():
        moved = (
            f"the {pairs} sampled pair(s) assigned to them now go to the other annotators"
            if pairs
            else "no sampled pair was theirs"
        )
        console.print(f"withdrew {escape(name)}: {moved}", soft_wrap=True)


@annotations_app.command("export")
def annotations_export(
    benchmark: BenchmarkArgument,
    out: Annotated[
        Path,
        typer.Option(
            help="The file to write: labels.csv, labels.jsonl, or labels.json for a label tool "
            "(its labelling config or dataset settings go beside it)."
        ),
    ],
    format_: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="csv, jsonl, label-studio (tasks + labelling config) or argilla (records + "
            "dataset settings); default: from OUT's suffix (csv or jsonl).",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Write the benchmark's standing human labels (one row per annotator and pair: the letter
    picked, the label it means, the comment, the pair's strata, overlap or not, when) as CSV or
    JSON Lines, or as Label Studio tasks or Argilla 2.x records (one per pair, each answer an
    annotation or response) with the labelling config or dataset settings they answer."""
    from playlisteval.ui import export_labels
    from playlisteval.ui.label_formats import companion_name, tool_format

    with open_app(home) as app_:
        count = export_labels(app_, benchmark, out, format_)
    tool = tool_format(format_)
    if tool is None:
        console.print(f"{count} label(s) written to {out}")
        return
    what = "labelling config" if tool == "label-studio" else "dataset settings"
    companion = out.with_name(companion_name(out.name, tool))
    console.print(f"{count} label(s) written to {out} for {tool}, its {what} to {companion}")
