"""The gates of DESIGN.md as objects, and the verifier that runs them.

A gate is one :class:`Gate`: its spec (``policies.attempts.GateSpec``: name, phase, cost kind) and
its check, an async function of a :class:`GateCall` (what it may use, as pydantic-ai's
``RunContext``) returning a :class:`Verdict`. :func:`register_gate` puts it in the table
:data:`GATES`, keyed by ``(name, phase)``; the loop policy lists the specs of the gates a run uses
(:func:`registered_gates` gives all of them, cheapest first by :func:`policies.attempts.gate_order`)
and the verifier finds each one's check in the table, by name, never as a method.

A new gate is one module: a spec and a check under ``@register_gate(spec)``, plus (when it calls a
new role) that role's row in ``tools.roles``, its prompt template and the offline provider's answer.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from agents.bus import Envelope
from agents.structural import phase1_structural, phase2_structural
from agents.workers import (
    GenerationLimits,
    MalformedOutput,
    ModelRunner,
    RoleAgent,
    RoleModels,
    SeedCall,
    clip_output,
    qa_text,
)
from policies.attempts import DEFAULT_GATES, GateSpec, default_gate
from store.errors import ConfigError
from store.events import Event, GatePassed, GateRejected, GateRequested
from tools.roles import (
    PARAMETRIC_ANSWERER,
    PARAMETRIC_VERIFIER,
    QA,
    SUFFICIENCY,
    TEXTUAL_RANKER,
    TRANSCRIPT_ANSWERER,
    TRANSCRIPT_MATCHER,
    VISUAL_RANKER,
    DistractorSet,
    Frozen,
    LabelledAnswer,
    MatchContext,
    ParametricContext,
    RankingContext,
    RoleSpec,
    SufficiencyContext,
    TranscriptTestContext,
)

ContextT = TypeVar("ContextT", bound=Frozen)
OutputT = TypeVar("OutputT", bound=Frozen)


class Verdict(NamedTuple):
    """A gate's answer: passed or not, why, and (on a rejection) the output it rejected, as the
    generator will be shown it."""

    passed: bool
    reason: str
    rejected_output: str = ""


@dataclass(frozen=True)
class GateCall:
    """What a gate's check is given: how to call models, who plays each role, the paper's limits,
    the seed it judges and the request it answers."""

    runner: ModelRunner
    models: RoleModels
    limits: GenerationLimits
    seed: SeedCall
    request: GateRequested

    @property
    def qa(self) -> QA:
        """The seed's current QA."""
        return QA.model_validate(self.seed.qa)

    @property
    def distractors(self) -> DistractorSet:
        """The seed's current distractor set (Phase II)."""
        return DistractorSet.model_validate(self.seed.distractors)

    async def ask(
        self, role: RoleSpec[ContextT, OutputT], model_id: str, context: ContextT
    ) -> OutputT:
        """One call of ``role`` for this gate; a video role gets the segments' verifier clips."""
        videos = self.seed.evidence.videos(self.limits.verifier_clip) if role.video else ()
        return await self.runner.run(
            self.seed,
            role.name,
            model_id,
            context,  # type: ignore[arg-type]  # every role's context is one of AnyContext
            role.output,
            phase=self.request.phase,
            gate=self.request.gate,
            attachments=videos,
        )


GateCheck = Callable[[GateCall], Awaitable[Verdict]]


@dataclass(frozen=True)
class Gate:
    """One gate: what the policy knows of it (its spec) and how it judges (its check)."""

    spec: GateSpec
    check: GateCheck


GATES: dict[tuple[str, int], Gate] = {}
"""Every registered gate by ``(name, phase)``, in the order they were registered."""


def register_gate(spec: GateSpec) -> Callable[[GateCheck], Gate]:
    """Decorator: register ``check`` as the check of gate ``spec`` (one per name and phase)."""

    def register(check: GateCheck) -> Gate:
        key = (spec.name, spec.phase)
        if key in GATES:
            raise ConfigError(f"gate {spec.name!r} of phase {spec.phase!r} is registered twice")
        gate = GATES[key] = Gate(spec, check)
        return gate

    return register


def registered_gates() -> tuple[GateSpec, ...]:
    """The specs of every registered gate, in registration order (a loop policy's ``gates``)."""
    return tuple(gate.spec for gate in GATES.values())


def gates_for(specs: Iterable[GateSpec]) -> dict[tuple[str, int], Gate]:
    """The registered gate of each spec; ``ConfigError`` when one has no check, or its check was
    registered under another spec (the policy and the table must agree)."""
    found: dict[tuple[str, int], Gate] = {}
    for spec in specs:
        gate = GATES.get((spec.name, spec.phase))
        if gate is None:
            raise ConfigError(
                f"the policy's gate {spec.name!r} (phase {spec.phase!r}) has no registered check; "
                f"the registered gates are {sorted(GATES)!r}"
            )
        if gate.spec != spec:
            raise ConfigError(
                f"the policy's gate {spec!r} differs from the registered {gate.spec!r}"
            )
        found[(spec.name, spec.phase)] = gate
    return found


@dataclass
class VerifierAgent(RoleAgent):
    """Answers ``GateRequested`` with ``GatePassed`` or ``GateRejected``, for the policy's gates."""

    gates: tuple[GateSpec, ...] = DEFAULT_GATES
    _table: dict[tuple[str, int], Gate] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._table = gates_for(self.gates)

    def checks(self) -> dict[tuple[str, int], GateCheck]:
        """Each gate's check by ``(name, phase)``."""
        return {key: gate.check for key, gate in self._table.items()}

    async def handle(self, envelope: Envelope) -> Event:
        """Run one gate on the seed's current output."""
        request = envelope.message
        assert isinstance(request, GateRequested)
        gate = self._table.get((request.gate, request.phase))
        if gate is None:
            raise ValueError(f"no gate {request.gate!r} in phase {request.phase}")
        call = GateCall(self.runner, self.models, self.limits, envelope.context, request)
        try:
            verdict = await gate.check(call)
        except MalformedOutput as exc:
            # A verifier that cannot answer in form cannot vouch for the output.
            verdict = Verdict(False, f"verifier output unusable: {exc}")
        if verdict.passed:
            return GatePassed(
                phase=request.phase,
                gate=request.gate,
                attempt=request.attempt,
                detail=verdict.reason,
            )
        return GateRejected(
            phase=request.phase,
            gate=request.gate,
            attempt=request.attempt,
            reason=verdict.reason,
            rejected_output=clip_output(verdict.rejected_output),
        )


# -- Phase I -------------------------------------------------------------------------------------


@register_gate(default_gate("structural", 1))
async def structural_1(call: GateCall) -> Verdict:
    """The gold answer's form: paragraphs, and citations of enough chunks of each segment."""
    qa, limits = call.qa, call.limits
    result = phase1_structural(
        qa,
        call.seed.evidence.segments,
        min_paragraphs=limits.min_paragraphs,
        min_chunks=limits.min_cited_chunks,
        max_chunks=limits.max_cited_chunks,
    )
    return Verdict(result.passed, result.reason, qa_text(qa))


@register_gate(default_gate("transcript_test", 1))
async def transcript_test(call: GateCall) -> Verdict:
    """Rejected when an answer written from the transcripts alone matches the gold."""
    qa = call.qa
    answer = await call.ask(
        TRANSCRIPT_ANSWERER,
        call.models.transcript_answerer,
        TranscriptTestContext(
            question=qa.question, windows=call.seed.evidence.transcript_windows()
        ),
    )
    verdict = await call.ask(
        TRANSCRIPT_MATCHER,
        call.models.transcript_matcher,
        MatchContext(
            role="transcript_matcher",
            question=qa.question,
            gold_answer=qa.gold_answer,
            candidate=answer.answer,
        ),
    )
    if verdict.matches_gold:
        return Verdict(
            False,
            "answerable from the transcripts alone: an answer written from the narration "
            f"matched the gold ({verdict.reason}). Ground the answer in what is seen, "
            "not said.",
            qa_text(qa),
        )
    return Verdict(True, f"transcript-only answer does not match: {verdict.reason}")


@register_gate(default_gate("parametric_test", 1))
async def parametric_test(call: GateCall) -> Verdict:
    """Rejected only when every answerer–verifier pair recovers the gold from memory alone."""
    qa = call.qa
    recovered: list[str] = []
    for answerer, verifier in call.models.parametric_pairs:
        answer = await call.ask(
            PARAMETRIC_ANSWERER, answerer, ParametricContext(question=qa.question)
        )
        verdict = await call.ask(
            PARAMETRIC_VERIFIER,
            verifier,
            MatchContext(
                role="parametric_verifier",
                question=qa.question,
                gold_answer=qa.gold_answer,
                candidate=answer.answer,
            ),
        )
        if not verdict.matches_gold:
            # Rejected only if every pair recovers the gold: one miss settles it (and saves
            # the remaining calls).
            return Verdict(
                True, f"{answerer}→{verifier} did not recover the gold: {verdict.reason}"
            )
        recovered.append(f"{answerer}→{verifier}: {verdict.reason}")
    return Verdict(
        False,
        "answerable from model memory alone (every generator–verifier pair recovered the "
        "gold): " + "; ".join(recovered),
        qa_text(qa),
    )


@register_gate(default_gate("sufficiency", 1))
async def sufficiency(call: GateCall) -> Verdict:
    """A third model family checks that the video answers the question and supports each claim."""
    qa = call.qa
    verdict = await call.ask(
        SUFFICIENCY,
        call.models.sufficiency,
        SufficiencyContext(
            question=qa.question, gold_answer=qa.gold_answer, segments=call.seed.evidence.segments
        ),
    )
    if verdict.answerable and not verdict.unsupported_claims:
        return Verdict(True, verdict.reason)
    unsupported = "; ".join(repr(c) for c in verdict.unsupported_claims[:5])
    why = "not answerable from the video" if not verdict.answerable else "claims not supported"
    return Verdict(
        False,
        f"{why}: {verdict.reason}" + (f" Unsupported: {unsupported}" if unsupported else ""),
        qa_text(qa),
    )


# -- Phase II ------------------------------------------------------------------------------------


def _set_text(distractors: DistractorSet) -> str:
    return "\n\n".join(f"[rated {a.rating}] {a.answer}" for a in distractors.answers)


def _shuffled(labelled: list[tuple[str, str]], salt: str) -> list[tuple[str, str]]:
    """Deterministic shuffle (replay must see the same order)."""
    rng = random.Random(hashlib.sha256(salt.encode()).hexdigest())
    out = list(labelled)
    rng.shuffle(out)
    return out


@register_gate(default_gate("structural", 2))
async def structural_2(call: GateCall) -> Verdict:
    """The distractor set's form: four ratings, causal records, visual-only degradations."""
    distractors = call.distractors
    result = phase2_structural(distractors, call.qa.gold_answer)
    return Verdict(result.passed, result.reason, _set_text(distractors))


@register_gate(default_gate("textual_undetectability", 2))
async def textual_undetectability(call: GateCall) -> Verdict:
    """Rejected only when every text-only ranker recovers the intended order gold ≻ 4 ≻ … ≻ 1."""
    qa, distractors = call.qa, call.distractors
    graded = [("5", qa.gold_answer), *((str(a.rating), a.answer) for a in distractors.answers)]
    order = _shuffled(graded, f"{call.seed.seed_id}|text|{call.request.attempt}")
    labels = {rating: chr(ord("A") + i) for i, (rating, _) in enumerate(order)}
    intended = tuple(labels[r] for r in ("5", "4", "3", "2", "1"))
    rubric = tuple(sorted({d.attribute for a in distractors.answers for d in a.causal_record}))
    context = RankingContext(
        role="textual_ranker",
        question=qa.question,
        answers=tuple(LabelledAnswer(label=labels[r], text=text) for r, text in order),
        rubric=rubric,
    )
    recovered: list[str] = []
    for model in call.models.textual_rankers:
        ranking = await call.ask(TEXTUAL_RANKER, model, context)
        if tuple(ranking.order) != intended:
            return Verdict(True, f"{model} could not recover the order from text alone")
        recovered.append(model)
    return Verdict(
        False,
        "the intended order gold ≻ 4 ≻ 3 ≻ 2 ≻ 1 is recoverable from the text alone (by "
        + ", ".join(recovered)
        + "): make the errors visual only and keep length, tone and structure identical",
        _set_text(distractors),
    )


@register_gate(default_gate("visual_detectability", 2))
async def visual_detectability(call: GateCall) -> Verdict:
    """Passed only when, with the video, the four answers rank in the intended order 4 ≻ … ≻ 1."""
    qa, distractors = call.qa, call.distractors
    by_rating = {str(a.rating): a for a in distractors.answers}
    order = _shuffled(
        [(r, by_rating[r].answer) for r in sorted(by_rating)],
        f"{call.seed.seed_id}|video|{call.request.attempt}",
    )
    labels = {rating: chr(ord("A") + i) for i, (rating, _) in enumerate(order)}
    intended = tuple(labels[r] for r in ("4", "3", "2", "1") if r in labels)
    context = RankingContext(
        role="visual_ranker",
        question=qa.question,
        answers=tuple(
            LabelledAnswer(label=labels[r], text=text, causal_record=by_rating[r].causal_record)
            for r, text in order
        ),
        segments=call.seed.evidence.segments,
    )
    ranking = await call.ask(VISUAL_RANKER, call.models.visual_ranker, context)
    if tuple(ranking.order) == intended:
        return Verdict(True, "the video ranks the four answers in the intended order")
    return Verdict(
        False,
        f"with the video the order is {'>'.join(ranking.order)!r}, not the intended "
        f"{'>'.join(intended)!r} (4 ≻ 3 ≻ 2 ≻ 1): make each severity step visibly larger",
        _set_text(distractors),
    )
