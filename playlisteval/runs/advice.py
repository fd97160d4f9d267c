"""What would take a stopped run further: why its seeds stopped, and the commands that
resume them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from playlisteval.app import (
    App,
)
from store.events import (
    CallRefused,
    SeedStopped,
    micros_to_usd,
    seed_stream,
)
from store.eventstore import EventStore

if TYPE_CHECKING:
    from playlisteval.overview import RunRow


#: Why a run's seeds stand stopped, as far as what takes them further goes: whose cap refused
#: their next call (the run's, the per-seed cap, the campaign's for the day or in all), or a
#: failure (a provider's, the evidence's) that a resume simply tries again.
StopKind = Literal["run", "seed", "day", "total", "failure"]


_SEED_ENDS = ["SeedStarted", "ItemAccepted", "SeedDiscarded", "SeedStopped"]


def stop_kinds(store: EventStore, run_id: str) -> Counter[StopKind]:
    """How many of run ``run_id``'s seeds stand stopped, by :data:`StopKind` (each seed by its
    last end; a budget stop by whose cap its last refused call names)."""
    prefix = seed_stream(run_id, "")
    ends = {s.stream: s.event() for s in store.read_all(stream_prefix=prefix, types=_SEED_ENDS)}
    refused = {
        s.stream: s.event() for s in store.read_all(stream_prefix=prefix, types=["CallRefused"])
    }
    kinds: Counter[StopKind] = Counter()
    for stream, end in ends.items():
        if isinstance(end, SeedStopped):
            kinds[_stop_kind(end, refused.get(stream))] += 1
    return kinds


def _stop_kind(stopped: SeedStopped, refusal: object) -> StopKind:
    if stopped.reason != "budget":
        return "failure"
    if not isinstance(refusal, CallRefused):
        return "run"  # a log from before refusals said whose cap: the run's, as it was then
    if refusal.cap == "account":
        return "day" if "account 'day:" in refusal.reason else "total"
    return refusal.cap


def resume_advice(
    run_id: str,
    state: str,
    stops: Mapping[StopKind, int],
    spent_micros: int,
    *,
    fleet: bool = False,
) -> list[str]:
    """The commands that would take run ``run_id`` further, one line for each way it stopped
    (``state`` as ``playlisteval runs`` shows it; ``stops`` from :func:`stop_kinds`; ``fleet``:
    its seeds are in the shared queue). A resumed run keeps its per-seed cap, and a campaign's
    cap is no --budget's, so each names what works for it; empty when nothing waits."""
    if state.startswith(("running", "queued")):
        return []  # someone is on it
    if fleet:
        if not any(stops.values()):
            return []
        return [
            f"{run_id} is the fleet's (its seeds are in the shared queue), which `curate --run` "
            "does not take: `playlisteval worker`s take up its queued seeds, and "
            "`playlisteval fleet` lists the parked ones"
        ]
    go_on = f"`playlisteval curate --run {run_id}`"
    lines = []
    if stops.get("run"):
        lines.append(
            f"{run_id}: its cap stopped {stops['run']} seed(s): `playlisteval curate --run "
            f"{run_id} --budget USD` takes it further, USD being its new total cap (above the "
            f"{micros_to_usd(spent_micros):.4f} USD spent)"
        )
    if stops.get("seed"):
        lines.append(
            f"{run_id}: the per-seed cap stopped {stops['seed']} seed(s), and a resumed run "
            "keeps it: `playlisteval curate --again --per-seed USD` curates seeds again in a new "
            "run with a larger one"
        )
    if stops.get("day"):
        lines.append(
            f"{run_id}: the campaign's cap for the day stopped {stops['day']} seed(s): after "
            f"00:00 UTC, when it renews, {go_on} takes them further"
        )
    if stops.get("total"):
        lines.append(
            f"{run_id}: the campaign's total cap stopped {stops['total']} seed(s): raise "
            "budget.cap_usd (a running `playlisteval serve` applies it at its next tick), then "
            f"{go_on} takes them further"
        )
    why = [f"it is {state}"] if state in ("unfinished", "interrupted") else []
    if stops.get("failure"):
        why.append(f"{stops['failure']} seed(s) stopped on a provider failure or an error")
    if why and not stops.get("run"):  # the --budget command above picks those up as well
        lines.append(f"{run_id}: {' and '.join(why)}: {go_on} picks it up")
    return lines


def resume_lines(app: App, row: RunRow) -> list[str]:
    """:func:`resume_advice` for a run as ``playlisteval runs`` lists it, from the log and the
    queue."""
    if row.state.startswith(("running", "queued")):
        return []
    return resume_advice(
        row.run_id,
        row.state,
        stop_kinds(app.events, row.run_id),
        row.spent_micros,
        fleet=bool(app.queue().items(run_id=row.run_id)),
    )
