"""One :class:`SeedDriver` drives seeds through the loop for whoever holds it: the curator, the
fleet worker, or a holder of a test's own. The fleet composes a driver rather than inheriting
the curator (Temporal's ``Worker`` composes its sub-workers the same way)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import anyio
import pytest

from agents.curation import Curator
from agents.deps import CallDeps
from agents.fleet import FleetWorker
from agents.recorded import RecordedCalls
from agents.seed_driver import CurationConfig, SeedDriver
from playlisteval.app import App, curation_config
from playlisteval.settings import load_settings
from policies.budget import Budget
from store.catalog import SeedRow
from store.events import ItemAccepted, SeedDiscarded, SeedStarted, seed_stream

ROOT = Path(__file__).resolve().parent.parent


class OneSeedAtATime:
    """A holder that is neither a curator nor a fleet worker: no run stream, no queue, no cap;
    it equips its driver, serves the bus and the writer, and drives one seed from its log."""

    def __init__(self, deps: CallDeps, config: CurationConfig) -> None:
        self.driver = SeedDriver(deps, config=config)

    async def drive(self, run_id: str, seed: SeedRow) -> str:
        """Drive ``seed`` of ``run_id`` until it ends or pauses; how it ended."""
        driver = self.driver
        _recorder, bus = driver.equip(Budget(None), RecordedCalls(), "live")
        writer = driver.writer
        async with anyio.create_task_group() as group:
            group.start_soon(writer.run)
            await bus.serve(group)
            try:
                await driver.drive(run_id, seed, [])
            finally:
                await bus.close()
                writer.close()
        return driver.outcome(seed_stream(run_id, seed.id))


# What differs between two runs of the same calls: the run's id, and what a recorded model
# response says of its own making (how long it took, when, the tool call ids it made up).
UNLIKE = frozenset({"run_id", "duration", "timestamp", "request_timestamp", "tool_call_id"})


def _alike(data: Any) -> Any:
    """``data`` without the fields in :data:`UNLIKE`, at any depth."""
    if isinstance(data, dict):
        return {k: _alike(v) for k, v in data.items() if k not in UNLIKE}
    if isinstance(data, list):
        return [_alike(v) for v in data]
    return data


def _seed_log(app: App, run_id: str, seed_id: str) -> list[dict[str, Any]]:
    """The seed's events as data, with what differs between runs of the same calls left out."""
    events = [s.event() for s in app.events.read_stream(seed_stream(run_id, seed_id))]
    return [{"type": type(e).__name__, **_alike(e.model_dump(mode="json"))} for e in events]


def test_a_holder_of_its_own_drives_a_seed_to_the_same_events_as_the_curator(
    workspace: Path,
) -> None:
    with App(load_settings(workspace)) as app:
        seed = app.catalog.seeds()[0]
        curated = anyio.run(lambda: app.curator().curate("by-curator", [seed], budget_micros=None))
        holder = OneSeedAtATime(app.call_deps(), curation_config(app.settings, None))
        outcome = anyio.run(lambda: holder.drive("by-holder", seed))
        by_curator = _seed_log(app, "by-curator", seed.id)
        by_holder = _seed_log(app, "by-holder", seed.id)

    assert by_holder == by_curator
    assert by_holder[0]["type"] == SeedStarted.__name__
    assert by_holder[-1]["type"] in (ItemAccepted.__name__, SeedDiscarded.__name__)
    assert outcome in ("accepted", "discarded")
    assert [seed.id] == curated.accepted + curated.discarded
    assert outcome == ("accepted" if curated.accepted else "discarded")


def test_a_pause_asked_for_leaves_the_seed_started_and_paused(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        seed = app.catalog.seeds()[0]
        holder = OneSeedAtATime(app.call_deps(), curation_config(app.settings, None))
        holder.driver.pause_requested = lambda: True
        outcome = anyio.run(lambda: holder.drive("paused", seed))
        log = _seed_log(app, "paused", seed.id)

    assert outcome == "paused"
    assert [e["type"] for e in log] == [SeedStarted.__name__]


def test_a_driver_that_was_never_equipped_has_no_writer_and_says_so(workspace: Path) -> None:
    with App(load_settings(workspace)) as app:
        driver = SeedDriver(app.call_deps(), config=curation_config(app.settings, None))
        with pytest.raises(RuntimeError, match="equip"):
            _ = driver.writer


def test_the_curator_and_the_fleet_worker_each_hold_a_driver_and_neither_inherits_the_other(
    workspace: Path,
) -> None:
    assert not issubclass(FleetWorker, Curator)
    assert not issubclass(Curator, FleetWorker)
    with App(load_settings(workspace)) as app:
        curator = app.curator()
        worker = app.fleet_worker(app.fleet_config("composed"))
        assert isinstance(curator.driver, SeedDriver)
        assert isinstance(worker.driver, SeedDriver)
        assert curator.driver is not worker.driver
        # What a test assigns to the curator is what its driver runs with.
        stand_in = app.call_deps().model_for
        curator.model_for = stand_in
        assert curator.driver.model_for is stand_in


@pytest.mark.parametrize(
    "module", ["agents/curation.py", "agents/fleet.py", "agents/seed_driver.py"]
)
def test_the_loop_modules_touch_no_private_member_of_another_object(module: str) -> None:
    """Only ``self._x``: no ``other._x`` (a driver's, a curator's, a recorder's private)."""
    tree = ast.parse((ROOT / module).read_text())
    reached = sorted(
        f"{ast.unparse(node.value)}.{node.attr} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    )
    assert not reached, reached
