"""``playlisteval smoke``: before a campaign, one minimal call per configured role and model.

The shell of :mod:`agents.smoke`: it opens the workspace, picks the models (live with
``--live``, else the offline provider, and says so), runs the calls under ``--budget`` and
prints one line per role and model — PASS, FAIL or SKIP, its seconds and cost, and the
provider's own words when it did not pass — then the total. Exit 0 when every pair passed, 1
when any failed (as ``doctor`` exits on a failed check), 2 when none failed but the cap skipped
some (raise ``--budget``) or the workspace or a value needs fixing.

``playlisteval/cli/__init__.py`` lists the command with a one-line help and imports this
module (and calls :func:`register`) only when ``smoke`` runs or shows its own help, so the other
commands start without its imports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import anyio
import typer
from pydantic_ai.models import Model
from rich.console import Console
from rich.markup import escape

from agents.smoke import SmokeReport, SmokeResult, run_smoke, smoke_targets
from playlisteval.app import App, curation_config, model_factory, role_models
from playlisteval.cli.shell import EXIT_FIX, HomeOption
from playlisteval.runs import new_run_id
from playlisteval.settings import Settings, load_settings
from policies.budget import cap_micros
from store.errors import PlaylistEvalError
from store.events import micros_to_usd

# Besides ``playlisteval.cli``'s exit codes (EXIT_FIX: a setting, a value or the workspace
# needs fixing):
EXIT_FAILED = 1  # a check failed: the line says which and why (as `doctor`)

DEFAULT_BUDGET_USD = 0.50

console = Console()
err_console = Console(stderr=True)

MARKS = {"pass": "[green]PASS[/]", "fail": "[red]FAIL[/]", "skip": "[yellow]SKIP[/]"}


def _error(message: str) -> typer.Exit:
    """Print ``message`` as one line and return the exit for what needs fixing."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(EXIT_FIX)


def per_model_factory(settings: Settings, app: App) -> Callable[[str], Model]:
    """Model id → its live adapter, made when the smoke first calls it: a missing key or
    endpoint fails that model's pairs with the reason instead of the whole smoke."""
    made: dict[str, Model] = {}

    def model_for(model_id: str) -> Model:
        if model_id not in made:
            made[model_id] = model_factory(settings, app, {model_id})(model_id)
        return made[model_id]

    return model_for


def print_result(result: SmokeResult) -> None:
    """One line per pair (and its message, unwrapped, on the next)."""
    console.print(
        f"{MARKS[result.status]} {escape(result.role)} {escape(result.model)}: "
        f"{result.seconds:.2f} s, {micros_to_usd(result.cost_micros):.4f} USD",
        soft_wrap=True,
    )
    if result.message:
        console.print(f"     {escape(result.message)}", soft_wrap=True, highlight=False)


def print_report(report: SmokeReport) -> None:
    """Every pair's line and the total."""
    for result in report.results:
        print_result(result)
    counts = {s: sum(r.status == s for r in report.results) for s in ("pass", "fail", "skip")}
    cap = "no cap" if report.cap_micros is None else f"{micros_to_usd(report.cap_micros):.2f}"
    # Offline nothing is paid: the spend is what the calls would cost live, still under the cap.
    spent = "priced at" if report.offline else "spent"
    console.print(
        f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped: {spent} "
        f"{micros_to_usd(report.spent_micros):.4f} USD of {cap}; the calls are in stream "
        f"{report.stream}",
        soft_wrap=True,
    )


def exit_code(report: SmokeReport) -> int:
    """0 when every pair passed, 1 when any failed, 2 when the cap skipped some."""
    if any(r.status == "fail" for r in report.results):
        return EXIT_FAILED
    if any(r.status == "skip" for r in report.results):
        return EXIT_FIX
    return 0


def smoke(
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Call the configured providers (their keys needed). Without it every call is "
            "answered by the offline provider, which checks the wiring but no provider.",
        ),
    ] = False,
    budget: Annotated[
        float,
        typer.Option(help="Cap in USD of all the smoke's calls; a call it would pass is skipped."),
    ] = DEFAULT_BUDGET_USD,
    role: Annotated[
        list[str] | None,
        typer.Option("--role", help="Only this role (repeat for more). Default: every role."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """One minimal call per configured role and model (two short clips or a few lines of
    transcript, the role's real output schema), each recorded in the event log: PASS/FAIL/SKIP
    per pair with the provider's own message. Run it with --live before a campaign."""
    try:
        cap = cap_micros(budget, "--budget")
        with App(load_settings(home, curation={"offline": not live})) as app:
            settings = app.settings
            targets = smoke_targets(
                role_models(settings), settings.models.difficulty_judges, role or None
            )
            if not live:
                console.print(
                    "offline: the offline provider answers every call (no provider is called, "
                    "nothing is paid); pass --live to call the configured providers"
                )
            model_for = per_model_factory(settings, app) if live else model_factory(settings)
            deps = app.call_deps(model_for=model_for)
            run_id = new_run_id(salt=str(app.workspace.root))
            report = anyio.run(
                lambda: run_smoke(
                    deps,
                    run_id,
                    targets,
                    budget_micros=cap,
                    limits=curation_config(settings).limits,
                    offline=not live,
                )
            )
    except (PlaylistEvalError, ValueError) as exc:
        raise _error(str(exc)) from exc
    print_report(report)
    code = exit_code(report)
    if code == EXIT_FIX:
        console.print(f"the cap skipped some calls: run again with a --budget above {budget:g}")
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add the ``smoke`` command to ``app`` (the ``playlisteval`` CLI)."""
    app.command("smoke")(smoke)
