"""The curation commands: ``curate`` (with its live panel), ``audit``, ``replay`` and
``rehearse``. What they print about a run is in :mod:`playlisteval.cli.curation_report`."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.curation_report import (
    budget_stops,
    print_audit,
    print_report,
    print_timeline,
)
from playlisteval.cli.options import ConcurrencyOption, JsonOption, MaxSeedsOption
from playlisteval.cli.output import console, err_console, usd
from playlisteval.cli.shell import (
    EXIT_FIX,
    EXIT_TAMPERED,
    HomeOption,
    check_count,
    check_money,
    go_on_with,
    open_app,
)

if TYPE_CHECKING:
    from agents.curation import RunReport
    from agents.replay import ReplayVerdict
    from playlisteval.app import App
    from playlisteval.runs import Rehearsal, ReplayReport

commands = typer.Typer()


def earlier_ends(app_: App, run_id: str) -> Counter[str]:
    """The run's seeds that ended for good before now (accepted or discarded: a stopped seed
    is taken up again by a resume), by how they ended (``run_end``'s rule)."""
    from agents.curation import run_end
    from playlisteval.curation_display import ACCEPTED, DISCARDED
    from playlisteval.overview import SEED_ENDS
    from store.events import seed_stream

    prefix = seed_stream(run_id, "")
    seeds = app_.events.read_all(stream_prefix=prefix, types=SEED_ENDS)
    ends = run_end(run_id, ((s.stream, s.event()) for s in seeds), 0)
    return +Counter({ACCEPTED: ends.accepted, DISCARDED: ends.discarded})  # none of a kind: no row


def run_curation(
    app_: App,
    *,
    budget: float | None,
    max_seeds: int | None,
    concurrency: int | None,
    run: str | None,
    per_seed: float | None,
    again: bool = False,
    upgrade: bool = False,
) -> RunReport:
    """Curate a new run (or resume ``run``) under the live panel, then print how it ended."""
    from playlisteval import runs
    from playlisteval.app import real_local_models, role_models
    from playlisteval.curation_display import LiveCuration
    from playlisteval.overview import real_local_models_of
    from policies.budget import check_concurrency
    from store.runlog import run_started

    check_concurrency(concurrency, most=app_.settings.curation.max_concurrency)
    earlier: Counter[str] = Counter()
    if run is not None:
        started = run_started(app_.events, run)
        if not upgrade:
            runs.check_resumable(app_, run)  # refused before the panel draws anything
        total = len(started.seeds)
        offline = started.offline
        earlier = earlier_ends(app_, run)
        real = real_local_models_of(started)
    else:
        total = max_seeds or len(app_.catalog.seeds())
        offline = app_.settings.curation.offline
        models = role_models(app_.settings).all_models()
        # Before the progress display: a model with no price is one line, and no run opens.
        runs.check_prices(app_, models)
        real = tuple(sorted(set(real_local_models(app_.settings)) & set(models)))
    view = LiveCuration(total, offline=offline, earlier=earlier, real_local=real)
    # A new run's id is chosen here, so an interruption can name the command that resumes it
    # (the same `curate` again would open another run and pay again).
    run_id = run if run is not None else runs.new_run_id(salt=str(app_.workspace.root))
    go_on_with(f"playlisteval curate --run {run_id} --home {app_.workspace.root}")
    # Redrawn from the view four times a second (rich's own thread): the figures and the clock
    # move while seeds work, not only when one ends. What is printed meanwhile (a warning, a
    # log line) goes above the table, never into it.
    live = Live(
        get_renderable=view.render,
        console=console,
        transient=False,
        auto_refresh=True,
        refresh_per_second=4,
        redirect_stderr=True,
    )
    try:
        with live:
            if run is not None:
                report = runs.resume(
                    app_,
                    run,
                    budget_usd=budget,
                    concurrency=concurrency,
                    progress=view,
                    upgrade=upgrade,
                )
            else:
                report = runs.curate(
                    app_,
                    budget_usd=budget,
                    max_seeds=max_seeds,
                    concurrency=concurrency,
                    run_id=run_id,
                    per_seed_usd=per_seed,
                    progress=view,
                    again=again,
                )
    except BaseException:
        console.print()  # the error that follows starts on a line of its own, apart from the table
        raise
    console.print()
    stops = budget_stops(app_, report) if report.stopped else None
    print_report(report, stops)
    return report


@commands.command()
def curate(
    budget: Annotated[
        float | None,
        typer.Option(
            help="Cap of the run in USD (default budget.cap_usd). With --run: the run's new "
            "total cap (not money added), refused below what it has spent; without it a "
            "resumed run keeps its cap."
        ),
    ] = None,
    max_seeds: MaxSeedsOption = None,
    concurrency: ConcurrencyOption = None,
    run: Annotated[
        str | None,
        typer.Option(help="Resume this run (its own seeds, its cap unless --budget gives one)."),
    ] = None,
    per_seed: Annotated[float | None, typer.Option(help="Cap per seed in USD.")] = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Take seeds that earlier runs curated too (their calls are paid again); by "
            "default a new run takes only seeds no run has taken.",
        ),
    ] = False,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--offline",
            help="Call the configured providers (keys and a cap needed) or the offline provider "
            "(default: curation.offline, which is true).",
        ),
    ] = None,
    batch: Annotated[
        bool | None,
        typer.Option(
            "--batch/--no-batch",
            help="Send text-only gate calls through the Gemini and OpenAI batch APIs "
            "(half price, answers within hours; default: providers.batch).",
        ),
    ] = None,
    upgrade: Annotated[
        bool,
        typer.Option(
            "--upgrade",
            help="With --run: when today's code or settings define the run otherwise than its "
            "log records (a gate added or gone, a template or a model changed), record the "
            "change and go on under today's definition; without it such a resume is refused "
            "(exit 8) before any call.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Curate seeds into benchmark items under a dollar budget (offline provider by default).
    One process works on a run at a time: a second `curate --run` on it is refused (exit 3).
    A resumed run goes on under the definition its log records (exit 8 when today's differs,
    unless --upgrade)."""
    check_money(budget, per_seed, concurrency)
    check_count(max_seeds, 1, "--max-seeds")
    if upgrade and run is None:
        err_console.print("[bold red]error:[/] --upgrade goes with --run RUN (a run to resume)")
        raise typer.Exit(EXIT_FIX)
    if run is not None and (again or max_seeds is not None or per_seed is not None):
        err_console.print(
            "[bold red]error:[/] --again, --max-seeds and --per-seed shape a new run; a resumed "
            "run keeps its own seeds and per-seed cap"
        )
        raise typer.Exit(EXIT_FIX)
    overrides: dict[str, Any] = {}
    if live is not None:
        overrides["curation"] = {"offline": not live}
    if batch is not None:
        overrides["providers"] = {"batch": batch}
    with open_app(home, **overrides) as app_:
        cap = budget if budget is not None or run is not None else app_.settings.budget.cap_usd
        run_curation(
            app_,
            budget=cap,
            max_seeds=max_seeds,
            concurrency=concurrency,
            run=run,
            per_seed=per_seed if per_seed is not None else app_.settings.budget.per_seed_usd,
            again=again,
            upgrade=upgrade,
        )


@commands.command()
def audit(
    run: Annotated[str | None, typer.Option(help="The run (default: the latest).")] = None,
    seed: Annotated[str | None, typer.Option(help="Show this seed's timeline.")] = None,
    evaluation: Annotated[
        str | None,
        typer.Option(
            "--evaluation",
            help="Audit this evaluation's calls instead (its id, as evaluation.json names it): "
            "spend against its cap, what may have been billed, spend by model.",
        ),
    ] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """A run's timelines, spend by phase/gate/role/model and its rejection reasons (or an
    evaluation's spend, with --evaluation)."""
    from playlisteval import integrity, runs
    from playlisteval.overview import real_local_models_of
    from store.runlog import run_started

    if evaluation is not None:
        _audit_evaluation(evaluation, as_json, home)
        return
    with open_app(home) as app_:
        report = runs.audit(app_, run, seed)
        untrusted = integrity.log_warning(app_, [report.run_id])
        started = run_started(app_.events, report.run_id)
        offline, real = started.offline, real_local_models_of(started)
        if as_json:
            facts = {"log_warning": untrusted, "offline": offline, "real_local": list(real)}
            print(json.dumps({**report.to_json(), **facts}, indent=2))
            return
        if untrusted:
            err_console.print(f"[bold red]warning:[/] {escape(untrusted)}")
        banner = (
            "[bold yellow]offline provider[/]: this run is a harness of the loop, never "
            "evidence of model quality"
        )
        if real:  # their calls are their own answers (marked so on each step)
            banner += f"; but for {escape(', '.join(real))}, a real local model"
        if seed is not None:
            print_timeline(report)  # that seed alone: the run's totals are `audit` without it
            if offline:
                console.print(banner)  # after the timeline, whose first line names the seed
        else:
            if offline:
                console.print(banner)
            print_audit(report)


def _audit_evaluation(evaluation_id: str, as_json: bool, home: HomeOption) -> None:
    from agents.evaluation import eval_stream
    from playlisteval import integrity
    from playlisteval.cli.curation_report import print_spend
    from store.errors import ConfigError
    from store.ledger import current_cap, stream_spend

    with open_app(home) as app_:
        stream = eval_stream(evaluation_id)
        if not app_.events.stream_version(stream):
            raise ConfigError(
                f"no evaluation {evaluation_id!r} in this workspace's log (its id is "
                "evaluation.json's `evaluation_id`)"
            )
        ledger = stream_spend(app_.events, stream)
        cap = current_cap(stored.event() for stored in app_.events.read_stream(stream))
        untrusted = integrity.log_warning(app_)
    if as_json:
        print(
            json.dumps(
                {
                    "evaluation_id": evaluation_id,
                    "spent_micros": ledger.spent_micros,
                    "cap_micros": cap,
                    "uncertain": {
                        "attempts": ledger.uncertain_attempts,
                        "micros": ledger.uncertain_micros,
                    },
                    "by_model": dict(ledger.by.get("model", {})),
                    "log_warning": untrusted,
                },
                indent=2,
            )
        )
        return
    if untrusted:
        err_console.print(f"[bold red]warning:[/] {escape(untrusted)}")
    print_spend(f"evaluation [bold]{escape(evaluation_id)}[/]", ledger, cap)


@commands.command()
def replay(
    run: Annotated[str, typer.Argument(help="The run to replay.")],
    strict: Annotated[
        bool,
        typer.Option(
            help="No model call at all; check the hash chains and compare every derived event "
            "with the log (the default unless --resume)."
        ),
    ] = True,
    resume: Annotated[
        bool,
        typer.Option(help="Serve recorded calls free and go on live (as `curate --run`)."),
    ] = False,
    budget: Annotated[
        float | None,
        typer.Option(
            help="USD: the run's new total cap (--resume) or the what-if cap (a counterfactual "
            "replay)."
        ),
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option(help="Counterfactual attempts per seed and phase.")
    ] = None,
    concurrency: ConcurrencyOption = None,
    against_today: Annotated[
        bool,
        typer.Option(
            "--against-today",
            help="A counterfactual under today's code and settings (its gates, templates, "
            "models) instead of the run's recorded definition: what they would have done with "
            "the answers the log holds; nothing is compared.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Replay a run from its log, under the definition it recorded: audit it strictly (exit 4
    and the first seq that differs when the log is not what its answers derive; exit 8 when
    today's code cannot honour its definition), ask what another policy or today's code would
    have done, or finish its stopped seeds."""
    from playlisteval import runs

    check_money(budget, None, concurrency)
    with open_app(home) as app_:
        if resume:
            if max_attempts is not None or against_today:
                raise typer.BadParameter("--max-attempts and --against-today go with a replay")
            run_curation(
                app_, budget=budget, max_seeds=None, concurrency=concurrency, run=run, per_seed=None
            )
            return
        result = runs.replay_strict(
            app_,
            run,
            budget_usd=budget,
            max_attempts=max_attempts,
            concurrency=concurrency,
            against_today=against_today,
        )
    if result.verdict is None:
        _print_counterfactual(run, result)
        return
    _print_verdict(run, result, result.verdict)


def _print_counterfactual(run: str, result: ReplayReport) -> None:
    """What the run would have done under another policy (``replay --budget/--max-attempts``)."""
    report = result.report
    console.print(
        f"counterfactual replay of {run} (not the run as recorded; nothing is compared with its "
        f"log) under {result.policy}: {result.model_calls} model calls; "
        f"accepted {len(report.accepted)} (the run accepted "
        f"{len(result.original_accepted)}), cost "
        f"{usd(report.spent_micros + report.replayed_micros)} USD (the run "
        f"paid {usd(result.original_cost_micros)})"
    )
    missing = [s for s, why in report.stopped.items() if why.startswith("unrecorded")]
    budget_stopped = [s for s, why in report.stopped.items() if why.startswith("budget")]
    if budget_stopped:
        console.print(f"stopped by the budget: {len(budget_stopped)} seeds")
    if missing:
        console.print(f"would need calls the log does not hold: {len(missing)} seeds")
    extra = set(report.accepted) - set(result.original_accepted)
    if extra:
        console.print(f"accepted only under this policy: {', '.join(sorted(extra))}")


def _print_verdict(run: str, result: ReplayReport, verdict: ReplayVerdict) -> None:
    """A strict replay's verdict: the log replays exactly, or the problems (exit 4)."""
    report = result.report
    console.print(
        f"strict replay of {run}: {result.model_calls} model calls; {verdict.seeds} seeds, "
        f"{verdict.decisions} decisions and {verdict.served_checked} recorded answers "
        f"re-derived; accepted {len(report.accepted)} (the log: "
        f"{len(result.original_accepted)}); the log spent "
        f"{usd(result.original_cost_micros)} USD"
    )
    if verdict.ok:
        console.print("[green]the log replays exactly[/]: hash chains intact, nothing differs")
        return
    problems = verdict.problems()
    err_console.print(
        f"[bold red]the log does not replay[/]: {len(problems)} problem(s); the first is at "
        f"seq {verdict.first_seq}"
    )
    for line in problems[:10]:
        err_console.print(f"  {escape(line)}")
    raise typer.Exit(EXIT_TAMPERED)


@commands.command()
def rehearse(
    seeds: Annotated[int, typer.Option(help="How many seeds to rehearse on.")] = 20,
    concurrency: ConcurrencyOption = None,
    paper: Annotated[
        bool,
        typer.Option(
            "--paper/--as-is",
            help="Price each segment at the paper's length (index.segment_target_minutes) "
            "or at this playlist's own.",
        ),
    ] = True,
    batch: Annotated[
        bool | None,
        typer.Option(
            "--batch/--no-batch",
            help="Price text-only gates at batch rates (default: providers.batch).",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """What curation will cost with the configured models, before any money is spent: the loop
    with the offline provider, every call priced with the live models' token rules, prices,
    context caching and batch rates."""
    from playlisteval import runs

    with open_app(home) as app_:
        result = runs.rehearse(app_, seeds=seeds, concurrency=concurrency, paper=paper, batch=batch)
        _print_rehearsal(result)


def _print_rehearsal(result: Rehearsal) -> None:
    """The rehearsal's audit, what caching and batch rates save, and the cost per question."""
    print_audit(result.audit)
    table = Table(title="what the savings are worth (same calls, priced again)")
    table.add_column("pricing")
    table.add_column("total USD", justify="right")
    table.add_column("per accepted question", justify="right")
    for name, total in result.scenarios.items():
        per = result.per_accepted(name)
        table.add_row(name, usd(total), "n/a" if per is None else usd(per))
    console.print(table)
    per = result.cost_per_accepted_micros
    if result.scale > 1.0:
        console.print(
            f"segments priced as {result.segment_minutes:g}-minute segments (the paper's; "
            f"this playlist's are {result.scale:.1f}× shorter): video, audio and "
            "transcripts scaled, answers not"
        )
    console.print(
        f"rehearsal on {result.seeds} seeds: {result.accepted} accepted, "
        f"{usd(result.audit.spent_micros)} USD in all "
        f"({result.video_share:.0%} on video calls; {result.cached_tokens:,} input tokens "
        f"read from context caches; {result.batch_calls} calls at batch rates); "
        "expected cost per accepted question: "
        + (f"[bold]{usd(per)} USD[/]" if per is not None else "n/a (none accepted)")
    )
    console.print(
        "(offline answers; prices and token counts are the configured live models'. "
        "The paper paid about 1.00 USD per accepted question.)"
    )
