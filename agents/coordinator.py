"""The per-seed coordinator's pure core: the seed's state is a fold of its events, and
``decide(state)`` says what to do next. No I/O, no clock, no randomness: the async shell
(``agents.curation``) moves messages, and replay re-runs exactly.

The loop is the paper's (3.3): a rejection's reason and output are fed back to the generator;
feedback accumulates per seed; a Phase II rejection regenerates only the distractors (QA fixed) up
to two more times; after three Phase II rejections Phase I restarts on the same segment pair with
the whole history; at most T attempts per seed and phase, then the seed is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from policies.attempts import LoopPolicy as LoopPolicy  # the loop's policy, handed on
from store.events import (
    AnyEvent,
    AttemptStarted,
    DistractorsProposed,
    GatePassed,
    GateRejected,
    GateRequested,
    ItemAccepted,
    QAProposed,
    SeedDiscarded,
    SeedStarted,
    SeedStopped,
)

Status = Literal["new", "running", "accepted", "discarded", "stopped"]


@dataclass(frozen=True)
class FeedbackItem:
    """One rejection as the generator will be told of it."""

    phase: int
    gate: str
    reason: str
    rejected_output: str


@dataclass(frozen=True)
class SeedState:
    """Everything the coordinator knows of one seed: the fold of its events."""

    seed_id: str = ""
    domain: str = ""
    segment_a: str = ""
    segment_b: str = ""
    status: Status = "new"
    phase: int = 1
    attempts: tuple[int, int] = (0, 0)  # Phase I, Phase II attempts so far (all cycles)
    phase2_rejections: int = 0  # in the current Phase I cycle
    qa: dict[str, Any] | None = None
    distractors: dict[str, Any] | None = None
    output_rejected: bool = False
    gates_passed: tuple[str, ...] = ()
    awaiting: tuple[Any, ...] | None = (
        None  # ("generate", phase, attempt) | ("gate", phase, gate, attempt)
    )
    feedback: tuple[FeedbackItem, ...] = ()
    stop_reason: str = ""
    events: int = field(default=0, compare=False)

    @property
    def terminal(self) -> bool:
        """Accepted, discarded or stopped: nothing more to do in this run."""
        return self.status in ("accepted", "discarded", "stopped")


# -- commands ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Generate:
    """Ask a generator for attempt ``attempt`` of ``phase``, told of every earlier rejection."""

    phase: int
    attempt: int
    feedback: tuple[FeedbackItem, ...]


@dataclass(frozen=True)
class Verify:
    """Ask a verifier for one gate's verdict on the current output."""

    phase: int
    gate: str
    attempt: int


@dataclass(frozen=True)
class Accept:
    """Every gate passed: the seed becomes a benchmark item."""

    qa: dict[str, Any]
    distractors: dict[str, Any]


@dataclass(frozen=True)
class Discard:
    """The seed used up its attempts."""

    reasons: tuple[str, ...]


Command = Generate | Verify | Accept | Discard


# -- the fold ------------------------------------------------------------------------------------


def _with_attempt(attempts: tuple[int, int], phase: int, attempt: int) -> tuple[int, int]:
    return (attempt, attempts[1]) if phase == 1 else (attempts[0], attempt)


def apply(state: SeedState, event: AnyEvent) -> SeedState:
    """The state after one more event (events that do not move the loop leave it as it is)."""
    state = replace(state, events=state.events + 1)
    match event:
        case SeedStarted():
            # Also marks a stopped seed taken up again (a resumed run); what it awaited stays.
            return replace(
                state,
                seed_id=event.seed_id,
                domain=event.domain,
                segment_a=event.segment_a,
                segment_b=event.segment_b,
                status="running",
                stop_reason="",
            )
        case AttemptStarted(phase=phase, attempt=attempt):
            fresh_cycle = phase == 1
            return replace(
                state,
                phase=phase,
                attempts=_with_attempt(state.attempts, phase, attempt),
                qa=None if fresh_cycle else state.qa,
                distractors=None,
                phase2_rejections=0 if fresh_cycle else state.phase2_rejections,
                output_rejected=False,
                gates_passed=(),
                awaiting=("generate", phase, attempt),
            )
        case QAProposed(qa=qa):
            return replace(state, qa=qa, awaiting=None)
        case DistractorsProposed(distractors=distractors):
            return replace(state, distractors=distractors, awaiting=None)
        case GateRequested(phase=phase, gate=gate, attempt=attempt):
            return replace(state, awaiting=("gate", phase, gate, attempt))
        case GatePassed(gate=gate):
            return replace(state, gates_passed=(*state.gates_passed, gate), awaiting=None)
        case GateRejected(phase=phase, gate=gate, reason=reason, rejected_output=output):
            item = FeedbackItem(phase=phase, gate=gate, reason=reason, rejected_output=output)
            return replace(
                state,
                feedback=(*state.feedback, item),
                output_rejected=True,
                awaiting=None,
                phase2_rejections=state.phase2_rejections + (1 if phase == 2 else 0),
            )
        case ItemAccepted():
            return replace(state, status="accepted", awaiting=None)
        case SeedDiscarded():
            return replace(state, status="discarded", awaiting=None)
        case SeedStopped(reason=reason, detail=detail):
            return replace(state, status="stopped", stop_reason=f"{reason}: {detail}")
        case _:
            return state


def fold(events: list[AnyEvent], state: SeedState | None = None) -> SeedState:
    """Fold a seed's events into its state."""
    current = state or SeedState()
    for event in events:
        current = apply(current, event)
    return current


# -- the decision ----------------------------------------------------------------------------------


def _discard(state: SeedState, why: str) -> Discard:
    reasons = tuple(f"phase {f.phase} {f.gate}: {f.reason}" for f in state.feedback)
    return Discard(reasons=(why, *reasons))


def _next_attempt(state: SeedState, phase: int, policy: LoopPolicy) -> Command:
    done = state.attempts[phase - 1]
    if done >= policy.max_attempts:
        return _discard(
            state, f"phase {phase} used its {policy.max_attempts} attempts without passing"
        )
    return Generate(phase=phase, attempt=done + 1, feedback=state.feedback)


def decide(state: SeedState, policy: LoopPolicy) -> list[Command]:
    """What the seed needs next; empty while it waits for a reply or once it is terminal."""
    if state.status != "running" or state.awaiting is not None:
        return []
    phase = state.phase
    current = state.qa if phase == 1 else state.distractors
    if current is None and not state.output_rejected:
        return [_next_attempt(state, phase, policy)]
    if state.output_rejected:
        if phase == 1:
            return [_next_attempt(state, 1, policy)]
        if state.attempts[1] >= policy.max_attempts:
            # No Phase II attempt is left: a new QA could never get its distractors.
            return [_next_attempt(state, 2, policy)]
        if state.phase2_rejections >= policy.phase2_rejections_before_restart:
            # The QA itself seems to be the problem: a new one, same segments, whole history.
            return [_next_attempt(state, 1, policy)]
        return [_next_attempt(state, 2, policy)]
    for gate in policy.gate_names(phase):
        if gate not in state.gates_passed:
            return [Verify(phase=phase, gate=gate, attempt=state.attempts[phase - 1])]
    if phase == 1:
        return [_next_attempt(state, 2, policy)]
    assert state.qa is not None
    assert state.distractors is not None
    return [Accept(qa=state.qa, distractors=state.distractors)]


def pending(state: SeedState) -> Command | None:
    """The request a seed was waiting on when its run stopped (to deliver again on resume)."""
    if state.status != "running" or state.awaiting is None:
        return None
    if state.awaiting[0] == "generate":
        _, phase, attempt = state.awaiting
        return Generate(phase=phase, attempt=attempt, feedback=_feedback_before(state))
    _, phase, gate, attempt = state.awaiting
    return Verify(phase=phase, gate=gate, attempt=attempt)


def _feedback_before(state: SeedState) -> tuple[FeedbackItem, ...]:
    # AttemptStarted comes after the rejections it reacts to, so the feedback in the state when
    # the request was made is all of it (no rejection can arrive while a generator works).
    return state.feedback
