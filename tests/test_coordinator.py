"""The per-seed coordinator's pure core: ``decide`` over folded, hand-written event sequences.

No I/O anywhere: each test writes the events the async shell would append, folds them, and checks
what ``decide`` (and ``pending``) say next. The loop rules are the paper's section 3.3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.coordinator import (
    Accept,
    Command,
    Discard,
    FeedbackItem,
    Generate,
    LoopPolicy,
    SeedState,
    Verify,
    apply,
    decide,
    fold,
    pending,
)
from policies.attempts import GateSpec
from store.events import (
    AnyEvent,
    AttemptStarted,
    CallReserved,
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

DEFAULT = LoopPolicy()
T = DEFAULT.max_attempts
PHASE1_GATES = DEFAULT.gate_names(1)
PHASE2_GATES = DEFAULT.gate_names(2)

# -- event builders (what the shell appends) -----------------------------------------------------


def started() -> SeedStarted:
    """The seed enters the loop."""
    return SeedStarted(
        run_id="r1", seed_id="s1", domain="cooking", segment_a="v1#0", segment_b="v7#3"
    )


def qa_of(attempt: int) -> dict[str, Any]:
    """A recognisable QA for one Phase I attempt."""
    return {"question": f"q{attempt}", "answer": f"a{attempt}"}


def distractors_of(attempt: int) -> dict[str, Any]:
    """Recognisable distractors for one Phase II attempt."""
    return {"rated": [f"d{attempt}-{grade}" for grade in (4, 3, 2, 1)]}


def proposed(phase: int, attempt: int) -> list[AnyEvent]:
    """A generator attempt that produced well-formed output."""
    output: AnyEvent = (
        QAProposed(attempt=attempt, qa=qa_of(attempt))
        if phase == 1
        else DistractorsProposed(attempt=attempt, distractors=distractors_of(attempt))
    )
    return [AttemptStarted(phase=_phase(phase), attempt=attempt), output]


def passed(phase: int, gates: tuple[str, ...], attempt: int) -> list[AnyEvent]:
    """Each of ``gates`` requested and passed, in order."""
    events: list[AnyEvent] = []
    for gate in gates:
        events.append(GateRequested(phase=_phase(phase), gate=gate, attempt=attempt))
        events.append(GatePassed(phase=_phase(phase), gate=gate, attempt=attempt))
    return events


def rejected(phase: int, gate: str, attempt: int) -> list[AnyEvent]:
    """``gate`` requested and rejecting the current output, with a reason naming it."""
    return [
        GateRequested(phase=_phase(phase), gate=gate, attempt=attempt),
        rejection(phase, gate, attempt),
    ]


def rejection(phase: int, gate: str, attempt: int) -> GateRejected:
    """The rejection event itself (a generator's malformed output has no request before it)."""
    return GateRejected(
        phase=_phase(phase),
        gate=gate,
        attempt=attempt,
        reason=f"{gate} failed on p{phase}a{attempt}",
        rejected_output=f"output p{phase}a{attempt}",
    )


def item(phase: int, gate: str, attempt: int) -> FeedbackItem:
    """The feedback the generator is told of ``rejection(phase, gate, attempt)``."""
    return FeedbackItem(
        phase=phase,
        gate=gate,
        reason=f"{gate} failed on p{phase}a{attempt}",
        rejected_output=f"output p{phase}a{attempt}",
    )


def _phase(phase: int) -> Any:
    # The events type phase as Literal[1, 2]; the tables hold plain ints.
    return 1 if phase == 1 else 2


def phase1_passed(attempt: int = 1, policy: LoopPolicy = DEFAULT) -> list[AnyEvent]:
    """Phase I attempt ``attempt`` proposed and through every gate."""
    return [*proposed(1, attempt), *passed(1, policy.gate_names(1), attempt)]


# -- the happy path -------------------------------------------------------------------------------


def test_happy_path_runs_every_gate_in_policy_order_then_accepts_the_qa_and_distractors() -> None:
    """SeedStarted → Generate(1,1) → Phase I gates → Generate(2,1) → Phase II gates → Accept."""
    steps: list[tuple[list[AnyEvent], list[Command]]] = [
        ([started()], [Generate(phase=1, attempt=1, feedback=())]),
        ([AttemptStarted(phase=1, attempt=1)], []),
        ([QAProposed(attempt=1, qa=qa_of(1))], [Verify(phase=1, gate=PHASE1_GATES[0], attempt=1)]),
    ]
    for done, following in zip(PHASE1_GATES, (*PHASE1_GATES[1:], None), strict=True):
        steps.append(([GateRequested(phase=1, gate=done, attempt=1)], []))
        after: list[Command] = (
            [Verify(phase=1, gate=following, attempt=1)]
            if following
            else [Generate(phase=2, attempt=1, feedback=())]
        )
        steps.append(([GatePassed(phase=1, gate=done, attempt=1)], after))
    steps.append(([AttemptStarted(phase=2, attempt=1)], []))
    steps.append(
        (
            [DistractorsProposed(attempt=1, distractors=distractors_of(1))],
            [Verify(phase=2, gate=PHASE2_GATES[0], attempt=1)],
        )
    )
    for done, following in zip(PHASE2_GATES, (*PHASE2_GATES[1:], None), strict=True):
        steps.append(([GateRequested(phase=2, gate=done, attempt=1)], []))
        end: list[Command] = (
            [Verify(phase=2, gate=following, attempt=1)]
            if following
            else [Accept(qa=qa_of(1), distractors=distractors_of(1))]
        )
        steps.append(([GatePassed(phase=2, gate=done, attempt=1)], end))

    state = SeedState()
    for events, expected in steps:
        state = fold(events, state)
        assert decide(state, DEFAULT) == expected, events
    state = apply(state, ItemAccepted(seed_id="s1", qa=qa_of(1), distractors=distractors_of(1)))
    assert state.status == "accepted"
    assert decide(state, DEFAULT) == []


def test_a_seed_that_never_started_decides_nothing() -> None:
    """Before SeedStarted there is nothing to do (status "new")."""
    assert decide(SeedState(), DEFAULT) == []
    assert pending(SeedState()) is None


def test_events_outside_the_loop_only_count() -> None:
    """Call bookkeeping events do not move the loop; the fold is deterministic for replay."""
    events: list[AnyEvent] = [
        started(),
        AttemptStarted(phase=1, attempt=1),
        CallReserved(call_id="c1", key="k", role="generator", model="m", reserved_micros=5),
    ]
    with_call = fold(events)
    without = fold(events[:2])
    assert with_call == without  # ``events`` is not compared
    assert (with_call.events, without.events) == (3, 2)
    assert fold(events) == with_call


# -- rejections and feedback --------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(PHASE1_GATES)), ids=PHASE1_GATES)
def test_phase1_rejection_regenerates_the_qa_told_of_the_gate_reason_and_output(
    index: int,
) -> None:
    """A Phase I gate's rejection → Generate(1, 2) whose feedback is that rejection."""
    gate = PHASE1_GATES[index]
    state = fold(
        [started(), *proposed(1, 1), *passed(1, PHASE1_GATES[:index], 1), *rejected(1, gate, 1)]
    )
    assert decide(state, DEFAULT) == [Generate(phase=1, attempt=2, feedback=(item(1, gate, 1),))]
    # The new attempt starts clean: no QA, no gates passed, no rejection pending.
    state = fold([AttemptStarted(phase=1, attempt=2)], state)
    assert (state.qa, state.gates_passed, state.output_rejected) == (None, (), False)


def test_feedback_accumulates_across_phases() -> None:
    """Every rejection so far, Phase I and II, in order, reaches the next generator."""
    state = fold(
        [
            started(),
            *proposed(1, 1),
            *rejected(1, "transcript_test", 1),
            *phase1_passed(2),
            *proposed(2, 1),
            *rejected(2, "textual_undetectability", 1),
            *proposed(2, 2),
            *passed(2, ("structural",), 2),
            *rejected(2, "visual_detectability", 2),
        ]
    )
    history = (
        item(1, "transcript_test", 1),
        item(2, "textual_undetectability", 1),
        item(2, "visual_detectability", 2),
    )
    assert state.feedback == history
    assert decide(state, DEFAULT) == [Generate(phase=2, attempt=3, feedback=history)]


@pytest.mark.parametrize("rejections", [1, 2])
def test_phase2_rejection_regenerates_only_the_distractors_keeping_the_qa(rejections: int) -> None:
    """Phase II rejected once or twice → Generate(2, n+1); the verified QA stays as it was."""
    events: list[AnyEvent] = [started(), *phase1_passed()]
    for attempt in range(1, rejections + 1):
        events += [*proposed(2, attempt), *rejected(2, "structural", attempt)]
    state = fold(events)
    assert state.phase2_rejections == rejections
    feedback = tuple(item(2, "structural", n) for n in range(1, rejections + 1))
    assert decide(state, DEFAULT) == [Generate(phase=2, attempt=rejections + 1, feedback=feedback)]
    state = fold([AttemptStarted(phase=2, attempt=rejections + 1)], state)
    assert state.qa == qa_of(1)
    assert (state.distractors, state.gates_passed, state.phase) == (None, (), 2)


def test_third_phase2_rejection_restarts_phase1_with_the_whole_history() -> None:
    """After three Phase II rejections a new QA is asked for, on the same segments, told of all."""
    events: list[AnyEvent] = [started(), *proposed(1, 1), *rejected(1, "sufficiency", 1)]
    events += phase1_passed(2)
    for attempt in (1, 2, 3):
        events += [*proposed(2, attempt), *rejected(2, "visual_detectability", attempt)]
    state = fold(events)
    history = (item(1, "sufficiency", 1), *(item(2, "visual_detectability", n) for n in (1, 2, 3)))
    assert decide(state, DEFAULT) == [Generate(phase=1, attempt=3, feedback=history)]

    state = fold([AttemptStarted(phase=1, attempt=3)], state)
    assert (state.phase, state.phase2_rejections, state.qa) == (1, 0, None)
    assert (state.segment_a, state.segment_b) == ("v1#0", "v7#3")
    assert state.feedback == history
    # Phase II attempts count over every cycle of the seed: the next one is the fourth.
    state = fold([QAProposed(attempt=3, qa=qa_of(3)), *passed(1, PHASE1_GATES, 3)], state)
    assert decide(state, DEFAULT) == [Generate(phase=2, attempt=4, feedback=history)]


@pytest.mark.parametrize("phase", [1, 2])
def test_malformed_generator_output_counts_as_an_attempt(phase: int) -> None:
    """A generator "output" rejection (no gate asked) uses the attempt and is fed back."""
    events: list[AnyEvent] = [started()]
    if phase == 2:
        events += phase1_passed()
    events += [AttemptStarted(phase=_phase(phase), attempt=1), rejection(phase, "output", 1)]
    state = fold(events)
    assert state.attempts[phase - 1] == 1
    assert decide(state, DEFAULT) == [
        Generate(phase=phase, attempt=2, feedback=(item(phase, "output", 1),))
    ]


def test_malformed_output_every_time_uses_up_the_attempts_and_discards() -> None:
    """T malformed Phase I outputs in a row → Discard listing each of them."""
    events: list[AnyEvent] = [started()]
    for attempt in range(1, T + 1):
        events += [AttemptStarted(phase=1, attempt=attempt), rejection(1, "output", attempt)]
    [command] = decide(fold(events), DEFAULT)
    assert isinstance(command, Discard)
    assert command.reasons[1:] == tuple(
        f"phase 1 output: output failed on p1a{n}" for n in range(1, T + 1)
    )


# -- running out of attempts ----------------------------------------------------------------------


def test_phase1_exhaustion_discards_with_every_rejection_as_a_reason() -> None:
    """T Phase I rejections → Discard: why, then each rejection's phase, gate and reason."""
    gates = [PHASE1_GATES[n % len(PHASE1_GATES)] for n in range(T)]
    events: list[AnyEvent] = [started()]
    for attempt, gate in enumerate(gates, start=1):
        events += [*proposed(1, attempt), *rejected(1, gate, attempt)]
    state = fold(events)
    assert state.attempts == (T, 0)
    [command] = decide(state, DEFAULT)
    assert isinstance(command, Discard)
    assert command.reasons[0] == f"phase 1 used its {T} attempts without passing"
    assert command.reasons[1:] == tuple(
        f"phase 1 {gate}: {gate} failed on p1a{n}" for n, gate in enumerate(gates, start=1)
    )
    state = apply(state, SeedDiscarded(seed_id="s1", reasons=command.reasons))
    assert (state.status, decide(state, DEFAULT)) == ("discarded", [])


Verdict = Callable[[int, str, int], bool]


def steps(
    policy: LoopPolicy, rejects: Verdict, limit: int = 200
) -> Iterator[tuple[Command | None, SeedState]]:
    """Run ``decide`` to the end as the shell would, yielding each command with the state that
    decided it, then ``(None, final state)``. ``rejects(phase, gate, attempt)`` says which gate
    verdicts (and, for gate "output", which generator outputs) are rejections."""
    state = fold([started()])
    for _ in range(limit):
        next_commands = decide(state, policy)
        if not next_commands:
            yield None, state
            return
        [command] = next_commands
        yield command, state
        events: list[AnyEvent]
        match command:
            case Generate(phase=phase, attempt=attempt):
                if rejects(phase, "output", attempt):
                    events = [
                        AttemptStarted(phase=_phase(phase), attempt=attempt),
                        rejection(phase, "output", attempt),
                    ]
                else:
                    events = proposed(phase, attempt)
            case Verify(phase=phase, gate=gate, attempt=attempt):
                verdict = rejects(phase, gate, attempt)
                events = (
                    rejected(phase, gate, attempt) if verdict else passed(phase, (gate,), attempt)
                )
            case Accept(qa=qa, distractors=distractors):
                events = [ItemAccepted(seed_id="s1", qa=qa, distractors=distractors)]
            case Discard(reasons=reasons):
                events = [SeedDiscarded(seed_id="s1", reasons=reasons)]
        state = fold(events, state)
    raise AssertionError(f"no end after {limit} commands")


def simulate(policy: LoopPolicy, rejects: Verdict) -> tuple[list[Command], SeedState]:
    """Every command of a whole run of the loop, and the seed's final state."""
    commands: list[Command] = []
    for command, state in steps(policy, rejects):
        if command is None:
            return commands, state
        commands.append(command)
    raise AssertionError("unreachable: steps ends with (None, state)")


def always_rejects_phase2(phase: int, gate: str, attempt: int) -> bool:
    """Phase I always passes, Phase II's first gate always rejects."""
    return phase == 2 and gate == "structural"


@pytest.mark.parametrize(
    ("max_attempts", "phase2_generates"),
    [
        (2, [(2, 1), (2, 2)]),  # out of Phase II attempts before any restart
        (4, [(2, 1), (2, 2), (2, 3), (2, 4)]),  # restart once, then the fourth runs out
        (5, [(2, 1), (2, 2), (2, 3), (2, 4), (2, 5)]),
    ],
)
def test_phase2_exhaustion_discards(
    max_attempts: int, phase2_generates: list[tuple[int, int]]
) -> None:
    """When Phase II has used its T attempts the seed is discarded, not regenerated."""
    policy = LoopPolicy(max_attempts=max_attempts)
    commands, state = simulate(policy, always_rejects_phase2)
    generates = [(c.phase, c.attempt) for c in commands if isinstance(c, Generate)]
    assert [g for g in generates if g[0] == 2] == phase2_generates
    assert isinstance(commands[-1], Discard)
    assert commands[-1].reasons[0] == (f"phase 2 used its {max_attempts} attempts without passing")
    assert state.status == "discarded"
    assert state.attempts[1] == max_attempts


def test_phase2_exhaustion_on_a_third_rejection_discards_instead_of_restarting_phase1() -> None:
    """Default policy: Phase II attempts 4, 5, 6 rejected → Discard, not a new Phase I cycle."""
    commands, state = simulate(DEFAULT, always_rejects_phase2)
    assert [(c.phase, c.attempt) for c in commands if isinstance(c, Generate)] == [
        (1, 1),
        *((2, n) for n in (1, 2, 3)),
        (1, 2),
        *((2, n) for n in (4, 5, 6)),
    ]
    assert isinstance(commands[-1], Discard)
    assert state.attempts == (2, T)


# -- waiting, stopping, resuming ----------------------------------------------------------------

AWAITING: list[tuple[str, list[AnyEvent], Command]] = [
    (
        "first generate",
        [started(), AttemptStarted(phase=1, attempt=1)],
        Generate(phase=1, attempt=1, feedback=()),
    ),
    (
        "phase1 gate",
        [started(), *proposed(1, 1), GateRequested(phase=1, gate="transcript_test", attempt=1)],
        Verify(phase=1, gate="transcript_test", attempt=1),
    ),
    (
        "regenerate after a rejection",
        [
            started(),
            *proposed(1, 1),
            *rejected(1, "structural", 1),
            AttemptStarted(phase=1, attempt=2),
        ],
        Generate(phase=1, attempt=2, feedback=(item(1, "structural", 1),)),
    ),
    (
        "phase2 generate",
        [started(), *phase1_passed(), AttemptStarted(phase=2, attempt=1)],
        Generate(phase=2, attempt=1, feedback=()),
    ),
    (
        "phase2 gate",
        [
            started(),
            *phase1_passed(),
            *proposed(2, 1),
            GateRequested(phase=2, gate="visual_detectability", attempt=1),
        ],
        Verify(phase=2, gate="visual_detectability", attempt=1),
    ),
]


@pytest.mark.parametrize(
    ("events", "expected"), [(e, r) for _, e, r in AWAITING], ids=[n for n, _, _ in AWAITING]
)
def test_awaiting_a_reply_decides_nothing_and_pending_is_the_request(
    events: list[AnyEvent], expected: Command
) -> None:
    """While a request is out, decide waits; ``pending`` names the same request to re-deliver."""
    state = fold(events)
    assert decide(state, DEFAULT) == []
    assert pending(state) == expected


def test_pending_is_none_between_requests() -> None:
    """Nothing awaited (a reply just arrived): nothing to re-deliver."""
    assert pending(fold([started(), *proposed(1, 1)])) is None


TERMINAL: list[tuple[AnyEvent, str]] = [
    (ItemAccepted(seed_id="s1", qa=qa_of(1), distractors=distractors_of(1)), "accepted"),
    (SeedDiscarded(seed_id="s1", reasons=("why",)), "discarded"),
    (SeedStopped(seed_id="s1", reason="budget", detail="cap reached"), "stopped"),
]


@pytest.mark.parametrize(("last", "status"), TERMINAL, ids=[s for _, s in TERMINAL])
@pytest.mark.parametrize(
    "before",
    [
        pytest.param([started()], id="idle"),
        pytest.param([started(), AttemptStarted(phase=1, attempt=1)], id="awaiting"),
    ],
)
def test_terminal_states_decide_nothing(
    before: list[AnyEvent], last: AnyEvent, status: str
) -> None:
    """Accepted, discarded and stopped seeds ask for nothing and have nothing pending."""
    state = fold([*before, last])
    assert state.status == status
    assert state.terminal
    assert decide(state, DEFAULT) == []
    assert pending(state) is None


def test_seed_started_after_a_stop_reopens_the_seed_with_its_request_still_pending() -> None:
    """A stopped seed resumed (SeedStarted again) waits on the same request, to re-deliver it."""
    stop = SeedStopped(seed_id="s1", reason="provider", detail="HTTP 500")
    before = [started(), *proposed(1, 1), GateRequested(phase=1, gate="sufficiency", attempt=1)]
    stopped = fold([*before, stop])
    assert stopped.stop_reason == "provider: HTTP 500"

    resumed = fold([started()], stopped)
    assert (resumed.status, resumed.stop_reason) == ("running", "")
    assert decide(resumed, DEFAULT) == []
    assert pending(resumed) == Verify(phase=1, gate="sufficiency", attempt=1)
    # The reply to the re-delivered request moves the loop on as if nothing had happened.
    resumed = fold([GatePassed(phase=1, gate="sufficiency", attempt=1)], resumed)
    assert decide(resumed, DEFAULT) == [Verify(phase=1, gate="structural", attempt=1)]


def test_seed_stopped_between_requests_resumes_with_the_next_decision() -> None:
    """Stopped with nothing out (the budget refused the next call): resuming decides it again."""
    before = [started(), *proposed(1, 1), *rejected(1, "parametric_test", 1)]
    state = fold([*before, SeedStopped(seed_id="s1", reason="budget"), started()])
    assert pending(state) is None
    assert decide(state, DEFAULT) == decide(fold(before), DEFAULT)


# -- a custom policy -----------------------------------------------------------------------------


def test_custom_policy_gate_order_and_attempts_are_honoured() -> None:
    """max_attempts=2 and a gate list of its own: its gates run, cheapest first, then Discard."""
    policy = LoopPolicy(
        max_attempts=2,
        gates=(
            GateSpec("sufficiency", 1, "video", ("sufficiency",)),
            GateSpec("visual_detectability", 2, "video", ("visual_detectability",)),
            GateSpec("structural", 1, "rule"),
        ),
    )
    seen: list[tuple[int, str]] = []

    def rejects_sufficiency(phase: int, gate: str, attempt: int) -> bool:
        if gate != "output":
            seen.append((phase, gate))
        return gate == "sufficiency" and attempt == 1

    commands, _ = simulate(policy, rejects_sufficiency)
    assert seen == [
        (1, "structural"),
        (1, "sufficiency"),
        (1, "structural"),
        (1, "sufficiency"),
        (2, "visual_detectability"),
    ]
    assert commands[-1] == Accept(qa=qa_of(2), distractors=distractors_of(1))

    commands, _ = simulate(policy, lambda phase, gate, attempt: gate == "structural")
    assert [c.attempt for c in commands if isinstance(c, Generate)] == [1, 2]
    assert isinstance(commands[-1], Discard)
    assert commands[-1].reasons[0] == "phase 1 used its 2 attempts without passing"


# -- a property over every sequence of verdicts ---------------------------------------------------

# Each attempt is one Generate and at most one Verify per gate; then Accept or Discard.
BOUND = T * (1 + len(PHASE1_GATES)) + T * (1 + len(PHASE2_GATES)) + 1


@settings(max_examples=300, deadline=None)
@given(data=st.data(), reject_rate=st.sampled_from([0.0, 0.1, 0.3, 0.6, 1.0]))
def test_every_verdict_sequence_ends_in_accept_or_discard_within_bounds(
    data: st.DataObject, reject_rate: float
) -> None:
    """Whatever the gates say, the seed ends, attempts per phase stay ≤ T and every Generate is
    told of every rejection so far."""
    rejections: list[FeedbackItem] = []

    def rejects(phase: int, gate: str, attempt: int) -> bool:
        verdict = data.draw(st.floats(0, 1, exclude_max=True)) < reject_rate
        if verdict:
            rejections.append(item(phase, gate, attempt))
        return verdict

    commands: list[Command] = []
    for command, state in steps(DEFAULT, rejects, limit=BOUND + 1):
        assert max(state.attempts) <= T
        assert state.feedback == tuple(rejections)
        if command is None:
            break
        commands.append(command)
        assert len(commands) <= BOUND
        match command:
            case Generate(feedback=feedback, attempt=attempt):
                assert feedback == tuple(rejections)
                assert 1 <= attempt <= T
            case Discard(reasons=reasons):
                assert reasons[1:] == tuple(
                    f"phase {f.phase} {f.gate}: {f.reason}" for f in rejections
                )
            case Accept(qa=qa, distractors=distractors):
                assert (qa, distractors) == (state.qa, state.distractors)
    assert state.status in ("accepted", "discarded")
    assert isinstance(commands[-1], Accept | Discard)
