"""What the curation commands print about a run: its end (with what a cap stopped and the
command that goes on), its audit, and a seed's timeline."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from playlisteval.cli.output import console, usd

if TYPE_CHECKING:
    from agents.audit import Audit
    from agents.curation import RunReport
    from playlisteval.app import App
    from store.ledger import Ledger


def print_report(report: RunReport, stops: BudgetStops | None = None) -> None:
    """A run's last word: how it ended, what it spent, and what to run next."""
    console.print(
        f"run [bold]{report.run_id}[/]: {report.outcome}; accepted {len(report.accepted)}, "
        f"discarded {len(report.discarded)}, stopped {len(report.stopped)}; "
        f"spent {usd(report.spent_micros)} USD "
        f"({report.live_calls} calls made, {report.replayed_calls} served from the log)"
    )
    budget_stops = stops.seeds if stops is not None else {}
    for seed_id, reason in sorted(report.stopped.items()):
        if seed_id not in budget_stops:
            console.print(f"[yellow]stopped[/] {seed_id}: {escape(reason)}")
    if stops is not None and stops.seeds:
        for line in stops.lines(report.run_id):
            console.print(line, soft_wrap=True)
    elif report.outcome == "budget":
        console.print(
            f"the cap stopped it: resume with `playlisteval curate --run {report.run_id} "
            "--budget USD`, USD being the run's new total cap (above the "
            f"{usd(report.spent_micros)} spent)",
            soft_wrap=True,
        )


@dataclass(frozen=True)
class BudgetStops:
    """The seeds a cap stopped, what their refused calls needed, and what to resume with."""

    seeds: dict[str, tuple[str, int]]  # seed → (whose cap: run, seed or account; micros needed)
    spent_micros: int
    cap_micros: int | None
    finished: int  # seeds of the run that ended (accepted or discarded)

    def lines(self, run_id: str) -> list[str]:
        """What happened and the command that goes on, with a cap that would."""
        by_cap = Counter(which for which, _ in self.seeds.values())
        out = []
        for which, count in sorted(by_cap.items()):
            largest = max(n for w, n in self.seeds.values() if w == which)
            whose = {
                "run": "the run's cap",
                "seed": "the per-seed cap",
                "account": "a shared account's cap",
            }[which]
            out.append(
                f"[yellow]stopped by {whose}[/]: {count} seed(s); the largest next call "
                f"needed {usd(largest)} USD"
            )
        if by_cap.get("run"):
            suggest = round_up_cents(self.suggested_micros())
            out.append(
                f"resume with: playlisteval curate --run {run_id} --budget {suggest} "
                f"(the run's new total cap; it has spent {usd(self.spent_micros)}"
                + (f" of {usd(self.cap_micros)}" if self.cap_micros else "")
                + f" USD; {suggest} is {self.basis()})"
            )
        if by_cap.get("seed"):
            out.append(
                "a resumed run keeps its per-seed cap: start a new run with a larger --per-seed "
                "(`playlisteval curate --again --per-seed USD`) to take those seeds further"
            )
        return out

    def _per_finished(self) -> int | None:
        return self.spent_micros // self.finished if self.finished else None

    def suggested_micros(self) -> int:
        """A total cap that lets every stopped seed make its next call and, at what this run
        paid per finished seed, finish."""
        run_seeds = [n for w, n in self.seeds.values() if w == "run"]
        per = self._per_finished() or 0
        return self.spent_micros + max(sum(run_seeds), per * len(run_seeds))

    def basis(self) -> str:
        """How :meth:`suggested_micros` was reckoned, in words."""
        per = self._per_finished()
        if per:
            return (
                f"what was spent plus {usd(per)} USD per stopped seed, this run's "
                "cost per finished seed"
            )
        return "what was spent plus each stopped seed's next call"


def round_up_cents(micros: int) -> str:
    """Micro-dollars as USD rounded up to the cent (a cap that is at least as much)."""
    return f"{math.ceil(micros / 10_000) / 100:.2f}"


def budget_stops(app_: App, report: RunReport) -> BudgetStops:
    """Read from the run's log what the calls its cap refused needed."""
    from store.events import CallRefused, seed_stream
    from store.runlog import run_cap

    seeds: dict[str, tuple[str, int]] = {}
    for seed_id, reason in report.stopped.items():
        if not reason.startswith("budget"):
            continue
        refused = [
            e
            for s in app_.events.read_stream(seed_stream(report.run_id, seed_id))
            if isinstance(e := s.event(), CallRefused)
        ]
        if refused:
            seeds[seed_id] = (refused[-1].cap, refused[-1].needed_micros)
    return BudgetStops(
        seeds=seeds,
        spent_micros=report.spent_micros,
        cap_micros=run_cap(app_.events, report.run_id),
        finished=len(report.accepted) + len(report.discarded),
    )


def uncertain_line(micros: int, attempts: int) -> str:
    """The "may have been billed" line: attempts sent whose outcome is unknown, counted at
    their reservations (the most they can have cost)."""
    return (
        f"may have been billed: {usd(micros)} USD for {attempts} attempt(s) sent whose outcome "
        "is unknown (a timeout, a dropped connection, a 5xx), counted at their reservations"
    )


def print_spend(label: str, ledger: Ledger, cap_micros: int | None) -> None:
    """What a stream of calls (an evaluation's, a pair selection's) spent: its total against
    its cap, its "may have been billed" line, and its spend by model."""
    cap = f" of {usd(cap_micros)}" if cap_micros else ""
    console.print(
        f"{label}: spent {usd(ledger.spent_micros)} USD{cap} in {ledger.paid_calls} paid "
        f"call(s), {ledger.failed_calls} failed"
    )
    if ledger.uncertain_attempts:
        console.print(uncertain_line(ledger.uncertain_micros, ledger.uncertain_attempts))
    for model, micros in sorted(ledger.by.get("model", {}).items()):
        console.print(f"  {escape(model)}: {usd(micros)} USD")


def print_audit(report: Audit) -> None:
    """A run's audit: its spend by phase, gate, role and model, and why it rejected (each kind
    of reason shown by its first example, values as logged, and how many were like it)."""
    cap = f" of {usd(report.budget_micros)}" if report.budget_micros else ""
    console.print(
        f"run [bold]{report.run_id}[/] ({report.outcome}): spent "
        f"{usd(report.spent_micros)} USD{cap}"
    )
    if report.uncertain_attempts:
        # Sent, never answered with a cost: counted at their reservations, the most they cost.
        console.print(uncertain_line(report.uncertain_micros, report.uncertain_attempts))
    for title, data in (
        ("spend by phase", report.by_phase),
        ("spend by gate", report.by_gate),
        ("spend by role", report.by_role),
        ("spend by model", report.by_model),
    ):
        table = Table(title=title)
        table.add_column("key")
        table.add_column("USD", justify="right")
        for key, micros in sorted(data.items(), key=lambda kv: -kv[1]):
            table.add_row(key, usd(micros))
        console.print(table)
    hist = Table(title="rejection reasons (the first of each kind, as logged)")
    hist.add_column("gate: reason")
    hist.add_column("count", justify="right")
    hist.add_column("")
    top = max(report.rejections.values(), default=1)
    for kind, count in report.rejections.items():
        example = report.rejection_examples.get(kind, kind)
        alike = f"\n[dim](and {count - 1} more like it)[/]" if count > 1 else ""
        hist.add_row(escape(example) + alike, str(count), "█" * max(1, round(20 * count / top)))
    console.print(hist)
    console.print(
        "accepted after at least one rejection: " + (", ".join(report.retries_accepted) or "none")
    )
    statuses = Counter(t.status for t in report.seeds)
    console.print("seeds: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))


#: How each kind of timeline step is marked.
STEP_MARKS = {
    "attempt": "[bold]",
    "pass": "[green]",
    "reject": "[red]",
    "call failed": "[red]",
    "call refused": "[yellow]",
    "accepted": "[bold green]",
    "discarded": "[yellow]",
    "stopped": "[yellow]",
}


def print_timeline(report: Audit) -> None:
    """The seeds' timelines alone (``audit --seed``): each step in words, the rejected output
    under each rejection."""
    from agents.audit import describe_step

    for line in report.seeds:
        console.print(
            f"run [bold]{escape(report.run_id)}[/], seed [bold]{escape(line.seed_id)}[/]: "
            f"{escape(line.status)}, {usd(line.spent_micros)} USD"
        )
        for step in line.steps:
            mark = STEP_MARKS.get(step["step"], "")
            indent = "" if step["step"] == "attempt" else "  "
            text = escape(describe_step(step))
            console.print(f"{indent}{mark}{text}[/]" if mark else f"{indent}{text}")
            if step["step"] == "reject" and step.get("rejected_output"):
                console.print(
                    "    rejected output: " + escape(step["rejected_output"][:300]),
                    soft_wrap=True,
                )
