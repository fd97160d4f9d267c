"""An event type is its class and the fold that uses it: the class declares what it is (its
:class:`store.events.Kind`), and decoding, ``store verify``, strict replay, the audit and the
projections find it there, with no table of type names to extend anywhere else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from typer.testing import CliRunner

from agents.audit import audit_run
from agents.replay import ReplayVerdict
from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from store import projections
from store.events import (
    Event,
    ItemAccepted,
    Kind,
    event_class,
    forget_event_type,
    seed_stream,
    types_of,
)
from store.eventstore import StoredEvent
from store.ledger import ledger_types


class SeedNoted(Event):
    """A test's own decision: the loop noted something about its seed."""

    type: Literal["SeedNoted"] = "SeedNoted"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.DECISION})
    note: str


class SeedBookmarked(Event):
    """A test's own control record: not a decision, so replay leaves it out of its compare."""

    type: Literal["SeedBookmarked"] = "SeedBookmarked"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CONTROL})
    mark: str


def _noted(state: projections.ProjectionState, ev: StoredEvent, data: dict[str, Any]) -> None:
    seed = state.by_stream.get(ev.stream)
    if seed is not None:
        seed.reason = f"noted: {data['note']}"
        state.dirty_seeds.add((seed.run_id, seed.seed_id))


@pytest.fixture
def declared() -> Iterator[None]:
    """The two classes known and the fold registered for this test only."""
    projections.on(SeedNoted)(_noted)
    yield
    projections.forget_fold(SeedNoted)
    forget_event_type("SeedNoted")
    forget_event_type("SeedBookmarked")


def _verdict(app: App, run_id: str) -> ReplayVerdict:
    verdict = runs.replay_strict(app, run_id).verdict
    assert verdict is not None
    return verdict


def _verify(home: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app, ["store", "verify", "--home", str(home)])
    return result.exit_code, result.output


def test_the_tables_of_types_are_derived_from_the_classes() -> None:
    assert {"AttemptStarted", "GateRejected", "ItemAccepted", "SeedDiscarded"} <= types_of(
        Kind.DECISION
    )
    assert types_of(Kind.DECISION, Kind.TERMINAL) == {"ItemAccepted", "SeedDiscarded"}
    assert ledger_types() == {"CallReserved", "CallRecorded", "CallFailed", "CallRetried"}
    assert event_class("ItemAccepted") is ItemAccepted
    assert event_class("NoSuchEvent") is None


def test_a_declared_event_type_is_known_to_verify_replay_audit_and_projections(
    workspace: Path, declared: None
) -> None:
    with App(load_settings(workspace)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=1)
        run_id = report.run_id
        (seed_id,) = report.accepted or report.discarded
        stream = seed_stream(run_id, seed_id)
        assert _verdict(app, run_id).ok
        assert "SeedNoted" in types_of(Kind.DECISION)
        assert "SeedBookmarked" not in types_of(Kind.DECISION)
        app.events.append(stream, [SeedBookmarked(mark="look again")])
        # A control record is no decision: the strict replay still matches the log exactly.
        assert _verdict(app, run_id).ok
        app.events.append(stream, [SeedNoted(note="the second segment is darker")])
        replayed = _verdict(app, run_id)
        audit = audit_run(app.events, run_id, seed_id)
        state = projections.fold(app.events.read_all())

    # store verify decodes both by their classes: nothing reads as tampering.
    code, out = _verify(workspace)
    assert code == 0, out
    # Replay counts the new decision as one: the loop, run again, did not derive it.
    assert not replayed.ok
    assert any("SeedNoted" in str(d) for d in replayed.differences), replayed.differences
    # The audit's timeline shows it, in its class's words.
    steps = audit.seeds[0].steps
    assert steps[-1] == {"step": "SeedNoted", "note": "the second segment is darker"}
    # The projections ran its fold.
    assert state.by_stream[stream].reason == "noted: the second segment is darker"


def test_an_event_whose_class_is_gone_reads_as_unknown(workspace: Path, declared: None) -> None:
    """The class is what makes a type known: forgotten, the same row fails verification."""
    with App(load_settings(workspace)) as app:
        app.events.append("scratch", [SeedBookmarked(mark="x")])
    forget_event_type("SeedBookmarked")
    code, out = _verify(workspace)
    assert code != 0
    assert "SeedBookmarked" in out
