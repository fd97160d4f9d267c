"""From accepted items to judged pairs: ``pairs`` and ``eval`` (``export`` and ``report`` live in
:mod:`~playlisteval.cli.exporting` and :mod:`~playlisteval.cli.reporting`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.options import PairsBudgetOption, PerDomainOption, RunOption
from playlisteval.cli.output import (
    JudgingProgress,
    StepBars,
    console,
    err_console,
    step_bars,
    usd,
)
from playlisteval.cli.shell import (
    EXIT_NOTHING_JUDGED,
    EXIT_UNKNOWN_JUDGE,
    HomeOption,
    check_money,
    open_app,
)

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from agents.evaluation import EvaluationResult
    from playlisteval.app import App
    from policies.judging import JudgeMetrics, JudgmentRecord, MetricTable

commands = typer.Typer()


@commands.command()
def pairs(
    run: RunOption = None,
    per_domain: PerDomainOption = None,
    budget: PairsBudgetOption = None,
    home: HomeOption = None,
) -> None:
    """Make preference pairs of a run's accepted items: any two answers, the higher rating
    preferred; keep a pair when a weak difficulty judge fails it; sample per domain by gap."""
    from playlisteval import runs
    from store.events import pairs_stream
    from store.ledger import stream_spend

    check_money(budget)
    with open_app(home) as app_:
        with step_bars() as bars:  # closed before the summary: it is the command's last word
            run_id, chosen = runs.select_pairs(
                app_, run, per_domain=per_domain, budget_usd=budget, progress=StepBars(bars)
            )
        spent = stream_spend(app_.events, pairs_stream(run_id)).spent_micros
        by_domain = Counter(p.domain for p in chosen)
        by_gap = Counter(p.gap for p in chosen)
        console.print(
            f"run {run_id}: {len(chosen)} pairs sampled ("
            + ", ".join(f"{d} {n}" for d, n in sorted(by_domain.items()))
            + "); by gap: "
            + ", ".join(f"{g}: {n}" for g, n in sorted(by_gap.items()))
            + f"; the difficulty judges' calls cost {usd(spent)} USD in all",
            soft_wrap=True,
        )


def judges_table(
    records: list[JudgmentRecord], offline: bool, real_local: Collection[str] = ()
) -> Table:
    """Accuracy (with its playlist-clustered standard error) and swap consistency of every
    judge under every condition. The title calls the offline provider a harness when it
    answered for a judge of the table (an offline judge, or ``offline-stand-in(ID)``: it
    played model ID), and only then (a real local model is a real model, so a
    table of those alone is no harness). Where a judge of ``real_local`` (a real model run on
    this machine) is among them, or the offline provider answered for some judges and not
    others, every judge's cell says who answered it: ``real local model`` or ``offline
    provider`` (or ``live``)."""
    from policies.judging import judge_metrics, split_runs
    from tools.providers.judges import OFFLINE_JUDGES, is_stand_in
    from tools.providers.local_llm import REAL_LOCAL_LABEL

    judges = {r.judge for r in records}
    real = judges & set(real_local)

    def who(judge: str) -> str:
        if judge in real:
            return REAL_LOCAL_LABEL
        harness = offline or judge in OFFLINE_JUDGES or is_stand_in(judge)
        return "offline provider" if harness else "live"

    harness = {j for j in judges if who(j) == "offline provider"}
    mixed = bool(harness) and harness != judges
    title = "Judges by condition"
    if mixed:
        title += " (offline provider rows: a harness, not evidence of model quality)"
    elif harness:
        title += " (offline provider: a harness, not evidence of model quality)"
    labelled = bool(real) or mixed  # each judge's cell says who answered it

    # Fits an 80-column terminal by design: short headers (the caption says what they mean),
    # figures at their own widths, judges whole, and a long condition folded onto more lines of
    # its cell (never cut to "uniform-n…").
    table = Table(
        title=title,
        caption="acc.: accuracy ± its standard error (clustered by playlist); cons.: accuracy "
        "over pairs judged alike in both orders; pos.: the share judged alike in both orders",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        show_edge=False,
    )
    names = [*judges, *(who(j) for j in judges if labelled)]
    table.add_column("judge", no_wrap=True, min_width=max(map(len, names), default=5))
    table.add_column("condition", overflow="fold")
    for name, width in (("pairs", 5), ("acc. ± SE", 13), ("cons.", 5), ("pos.", 5)):
        table.add_column(name, justify="right", no_wrap=True, width=width)

    def value(metrics: JudgeMetrics, name: str) -> MetricTable | None:
        return metrics.tables.get(name)

    def shown(found: MetricTable | None) -> str:
        return "—" if found is None or found.micro.value is None else f"{found.micro.value:.3f}"

    for (judge, condition), items in sorted(split_runs(r.judgment for r in records).items()):
        metrics = judge_metrics(items)
        accuracy = value(metrics, "accuracy")
        se = None if accuracy is None else accuracy.micro.clustered_se or accuracy.micro.se
        table.add_row(
            escape(judge) + (f"\n[dim]{who(judge)}[/]" if labelled else ""),
            escape(condition),
            str(metrics.pairs),
            shown(accuracy) + ("" if se is None else f" ± {se:.3f}"),
            shown(value(metrics, "consistent_accuracy")),
            shown(value(metrics, "position_consistency")),
        )
    return table


@commands.command("eval")
def eval_(
    benchmark: Annotated[Path, typer.Option(help="An exported benchmark folder.")],
    judge: Annotated[
        list[str],
        typer.Option(
            help="A judge model id (repeat; `playlisteval models` lists the known ones); "
            "offline-first, offline-transcript and offline-frames are offline judges of known "
            "behaviour. Offline, any other model is played by the offline provider and "
            "reported as offline-stand-in(ID), never as the model."
        ),
    ],
    condition: Annotated[
        list[str] | None,
        typer.Option(
            help="A condition to judge under (repeat); its form and examples are above. "
            "Default: uniform::frames+transcript:1h:32 and "
            "retrieved:hybrid:frames+transcript:1h:32.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Evaluation folder (resumable). Default: the workspace's "
            "exports/eval-BENCHMARK-JUDGES, named for what it judges (with -Ncond-HASH when "
            "the conditions are not the defaults); the report names the evaluation by it."
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            help="Total cap of this evaluation's calls (USD), earlier ones included (default: "
            "the cap it was last given, else budget.eval_usd)."
        ),
    ] = None,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--offline",
            help="Call the configured providers for the judges that are not offline ones (their "
            "keys and a cap needed) or play them with the offline provider (default: "
            "curation.offline, which is true). A real-local judge (a model run on this "
            "machine) answers as itself either way.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(min=1, help="Judge only the benchmark's first N pairs (a smoke run)."),
    ] = None,
    allow_modified_benchmark: Annotated[
        bool,
        typer.Option(
            "--allow-modified-benchmark",
            help="Judge a benchmark whose pairs.jsonl no longer matches the content hash in its "
            "benchmark.json (records edited after the export), or one without benchmark.json "
            "(unverified); evaluation.json and the report record it. Without it that is refused.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Run judges on a benchmark's pairs, in both answer orders, under each condition (frame
    sampling, retriever, modality, haystack length); per-judgment records in OUT/judgments.jsonl,
    and a table of each judge's accuracy and consistency per condition at the end.

    A condition is frames:retriever:modality:hours:n_frames[:think=N][:res=N]
    - frames: uniform or retrieved
    - retriever: bm25, text, multimodal or hybrid (left empty for uniform)
    - modality: frames+transcript, frames, transcript, audio or none
    - hours: the haystack's length (1h, 10h, 100h)
    - n_frames: how many frames the judge is shown
    - think=N: a thinking budget; res=N: a frame resolution

    For example uniform::frames+transcript:10h:32 or retrieved:bm25:transcript:100h:32."""
    check_money(budget)
    overrides: dict[str, Any] = {} if live is None else {"curation": {"offline": not live}}
    # Drawn from the start, before the settings and the models load: each step before the
    # first judgment is a line of its own with its time (the retrievers take the longest).
    bars = step_bars()
    shown = PreparedJudging(bars)
    bars.start()
    try:
        shown.preparing("reading the settings and opening the workspace")
        from playlisteval.model_catalog import UnknownJudge
        from playlisteval.runs.evaluation import evaluate

        with open_app(home, **overrides) as app_:
            try:
                result = evaluate(
                    app_,
                    benchmark,
                    judge,
                    out,
                    condition,
                    budget_usd=budget,
                    limit=limit,
                    progress=shown,
                    allow_modified=allow_modified_benchmark,
                    preparing=shown.preparing,
                )
            except UnknownJudge as exc:
                bars.stop()
                err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
                raise typer.Exit(EXIT_UNKNOWN_JUDGE) from exc
            bars.stop()  # closed before the summary: it is the command's last word
            _print_evaluation(app_, result)
    finally:
        bars.stop()


class PreparedJudging(JudgingProgress):
    """The evaluation's bars with the steps before its first judgment: each step (reading the
    settings, loading the models and the retrievers, reading the benchmark) a line as it begins,
    under them a ``preparing`` bar that counts the time, replaced by the judgments' bar
    (:class:`JudgingProgress`) when judging starts. Where no bar is drawn, nothing is said."""

    def __init__(self, bars: Progress) -> None:
        super().__init__(bars)
        self.step: TaskID | None = None

    def preparing(self, what: str) -> None:
        """A new step before the first judgment."""
        if self.bars.disable:
            return
        self.bars.console.print(f"[dim]{escape(what)} …[/]")
        if self.step is None:  # one bar for all the steps, its time their total
            self.step = self.bars.add_task("preparing", total=None)

    def started(self, jobs: int, done: int = 0) -> None:
        """The judgments' bar, in the place of the preparing one."""
        if self.step is not None:
            self.bars.remove_task(self.step)
            self.step = None
        super().started(jobs, done)


def _print_eval_spend(app_: App, evaluation_id: str) -> None:
    """What the evaluation's calls cost, and what may have been billed (a slow service's
    timed-out attempts count at their reservations)."""
    from agents.evaluation import eval_stream
    from playlisteval.cli.curation_report import uncertain_line
    from store.ledger import stream_spend

    ledger = stream_spend(app_.events, eval_stream(evaluation_id))
    if not ledger.has_calls:
        return
    console.print(
        f"the evaluation's calls cost {usd(ledger.spent_micros)} USD "
        f"(`playlisteval audit --evaluation {evaluation_id}`)"
    )
    if ledger.uncertain_attempts:
        console.print(uncertain_line(ledger.uncertain_micros, ledger.uncertain_attempts))


def _print_evaluation(app_: App, result: EvaluationResult) -> None:
    """The judges' table and where the judgments are; exit 6 when nothing could be judged."""
    if result.benchmark_check == "modified":
        err_console.print(
            "[yellow]modified benchmark:[/] its records differ from the export's content "
            "hash; evaluation.json and the report record it"
        )
    if not result.records:
        # Nothing to report on: say why in one line (the first failure), not exit 0.
        why = str(result.failures[0]) if result.failures else "no pair and judge to judge"
        err_console.print(
            f"[bold red]error:[/] nothing could be judged ({len(result.failures)} "
            f"failure(s)); the first: {escape(why)}"
        )
        raise typer.Exit(EXIT_NOTHING_JUDGED)
    from playlisteval.app import real_local_models

    settings = app_.settings
    console.print(
        judges_table(result.records, settings.curation.offline, real_local_models(settings))
    )
    console.print(
        f"{len(result.records)} judgments in {result.out_dir} ({result.new_records} new, "
        f"{result.live_calls} model calls, {result.replayed_calls} served from the log)"
    )
    for failure in result.failures[:5]:
        err_console.print(f"[yellow]not judged:[/] {escape(str(failure))}")
    _print_eval_spend(app_, result.evaluation_id)
    console.print(
        f"report: playlisteval report {result.out_dir} --out REPORT_DIR "
        f"--home {app_.workspace.root}",
        soft_wrap=True,
    )
