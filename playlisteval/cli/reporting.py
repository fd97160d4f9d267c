"""The ``report`` command: evaluations drawn as the paper's tables and figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from playlisteval.cli.output import console, err_console
from playlisteval.cli.shell import EXIT_FIX, EXIT_MIXED_BENCHMARKS, HomeOption
from store.errors import PlaylistEvalError

commands = typer.Typer()


@commands.command()
def report(
    evaluations: Annotated[
        list[Path], typer.Argument(help="Evaluation folders (each with judgments.jsonl).")
    ],
    out: Annotated[
        Path, typer.Option(help="The report folder (report.md, report.html, figures/, tables/).")
    ] = Path("report"),
    merge_duplicates: Annotated[
        bool,
        typer.Option(
            "--merge-duplicates",
            help="Let two evaluation folders that judged the same judge under the same condition "
            "share one leaderboard cell (the cell says so); without it that is refused.",
        ),
    ] = False,
    across_benchmarks: Annotated[
        bool,
        typer.Option(
            "--across-benchmarks",
            help="Report evaluations of different benchmarks together: every table, "
            "leaderboard and figure is drawn once per benchmark, never mixing two in one cell "
            f"or mean. Without it that is refused (exit {EXIT_MIXED_BENCHMARKS}).",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """The evaluation report, fit for a paper: report.md and report.html with the provenance
    (benchmark hash, judges and the provider ids that answered, conditions, dates, code version,
    offline or live: read from the log of the workspace that evaluated, --home), figures as PNG
    and PDF with 95 % intervals (accuracy by condition and against the hours built, retrieved
    against uniform, modality ablation, swap consistency, per domain, recall@k and recall
    against hours, the difficulty gate's accuracy by rating gap), the paper's Table 1 layout, a
    leaderboard across the folders given, and every table as CSV and LaTeX. The pages open
    with the results and end with the provenance. Evaluations of different benchmarks (their
    recorded content hashes differ) are refused unless --across-benchmarks."""
    from playlisteval.report import MixedBenchmarks, write_workspace_report

    try:
        summary = write_workspace_report(
            evaluations,
            out,
            home,
            merge_duplicates=merge_duplicates,
            across_benchmarks=across_benchmarks,
        )
    except MixedBenchmarks as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(EXIT_MIXED_BENCHMARKS) from exc
    except PlaylistEvalError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(EXIT_FIX) from exc
    console.print(f"{summary.judgments} judgments in {summary.runs} runs ({summary.source})")
    if summary.real_local:
        console.print(
            f"[green]real models:[/] {escape(', '.join(summary.real_local))} (real local model, "
            "run on this machine; the report marks them)"
        )
    if summary.source in ("offline", "mixed"):
        console.print(
            "[yellow]offline judges:[/] the offline provider is a harness, not evidence of "
            "model quality (the report says which judges)"
        )
    elif summary.source == "unknown":
        console.print(
            "[yellow]who answered is not known:[/] the evaluation's log was not read; give the "
            "--home of the workspace that evaluated"
        )
    if len(summary.benchmarks) > 1:
        console.print(
            f"{len(summary.benchmarks)} benchmarks, each reported apart: "
            f"{escape('; '.join(summary.benchmarks))}"
        )
    for sentence in summary.omitted:
        console.print(f"  {sentence}")
    console.print(
        f"report: {summary.markdown}\n        {summary.html}\n"
        f"        {len(summary.figure_files)} figure files in {out / 'figures'}, "
        f"{len(summary.table_files)} table files in {out / 'tables'}"
    )
