"""The gates of DESIGN.md as objects, and the verifier that runs them.

A gate is one :class:`Gate`: its spec (``policies.attempts.GateSpec``: name, phase, cost kind) and
its check, an async function of a :class:`GateCall` (what it may use, as pydantic-ai's
``RunContext``) returning a :class:`Verdict`. :func:`register_gate` puts it in the table
:data:`GATES`, keyed by ``(name, phase)``; the loop policy lists the specs of the gates a run uses
(:func:`registered_gates` gives all of them, cheapest first by :func:`policies.attempts.gate_order`)
and the verifier finds each one's check in the table, by name, never as a method.

A new gate is one module: a spec and a check under ``@register_gate(spec)``, plus (when it calls a
new role) that role's row in ``tools.roles``, its prompt template and the offline provider's answer.

Verdicts are combined as the paper has it: a role call whose answer is unusable (malformed, cut
off, refused) is made again (:data:`VERIFIER_RETRIES`), then its model gives no verdict
(:class:`NoVerdict`); the gates with several verifiers (parametric test, textual
undetectability) decide on those that answered and say so in the event, and a gate that no
verifier answered does not pass the output (:func:`_undecided`). What a rejection tells the
generator is in its own terms: its answers whole, its ratings, never the shuffled labels.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from agents.bus import Envelope
from agents.prompts import retry_note
from agents.structural import phase1_structural, phase2_structural
from agents.workers import (
    REJECTED_ANSWER_CHARS,
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


VERIFIER_RETRIES = 1
"""How many more times a gate's role call is made when its answer is unusable (malformed, cut
off, refused) before that model counts as giving no verdict: two calls at most. Each retry is a
new request through the runner — its prompt ends with a note of what was wrong before
(:func:`agents.prompts.retry_note`), so the recorder does not answer it from the first
record — reserved, recorded and paid like any other call, and served from the log on replay."""


_HOW = {"malformed": "malformed", "truncated": "cut off", "refused": "refused"}


class NoVerdict(Exception):
    """A model gave a gate no usable answer in ``1 + VERIFIER_RETRIES`` calls: who, in which
    role, and what was wrong each time (``failures``, in order)."""

    def __init__(self, role: str, model: str, failures: Sequence[MalformedOutput]) -> None:
        self.role = role
        self.model = model
        self.failures = tuple(failures)
        last = self.failures[-1].detail if self.failures else ""
        super().__init__(f"{self.summary}; the last time: {last[:300]}")

    @property
    def summary(self) -> str:
        """``"gpt-5.4: no verdict (malformed twice)"``: the model and how it failed."""
        kinds = {_HOW[f.kind] for f in self.failures}
        how = " or ".join(sorted(kinds)) or "no answer"
        times = {1: "once", 2: "twice"}.get(len(self.failures), f"{len(self.failures)} times")
        return f"{self.model}: no verdict ({how} {times})"


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

    def output_text(self) -> str:
        """The output this gate judges, as a rejection feeds it back to the generator."""
        return qa_text(self.qa) if self.request.phase == 1 else _set_text(self.distractors)

    async def ask(
        self, role: RoleSpec[ContextT, OutputT], model_id: str, context: ContextT
    ) -> OutputT:
        """One call of ``role`` for this gate (a video role gets the segments' verifier clips,
        and its context the rate the model is sent them at: the runner fills it), made again
        up to :data:`VERIFIER_RETRIES` times while its answer is unusable; :class:`NoVerdict`
        when it never was."""
        videos = self.seed.evidence.videos(self.limits.verifier_clip) if role.video else ()
        failures: list[MalformedOutput] = []
        for _ in range(1 + VERIFIER_RETRIES):
            try:
                output: OutputT = await self.runner.run(
                    self.seed,
                    role.name,
                    model_id,
                    context,  # type: ignore[arg-type]  # every role's context is one of AnyContext
                    role.output,
                    phase=self.request.phase,
                    gate=self.request.gate,
                    attachments=videos,
                    note=retry_note([f.kind for f in failures]) if failures else "",
                )
            except MalformedOutput as exc:
                failures.append(exc)
                continue
            return output
        raise NoVerdict(role.name, model_id, failures)


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
        """Run one gate on the seed's current output.

        A gate whose only verifier gives no verdict (:class:`NoVerdict`, after its retries) does
        not pass the output: a pass needs a verifier to vouch for it. It is rejected with a
        reason that says so — that nothing was found wrong with it — so the generator may submit
        it again; the attempt counts, as any rejection, which bounds what a verifier that never
        answers can cost. (The gates with several verifiers decide on those that answered; see
        :func:`parametric_test`.)"""
        request = envelope.message
        assert isinstance(request, GateRequested)
        gate = self._table.get((request.gate, request.phase))
        if gate is None:
            raise ValueError(f"no gate {request.gate!r} in phase {request.phase}")
        call = GateCall(self.runner, self.models, self.limits, envelope.context, request)
        try:
            verdict = await gate.check(call)
        except NoVerdict as exc:
            last = exc.failures[-1].detail if exc.failures else ""
            verdict = _undecided(request.gate, [exc.summary], call, last)
        except MalformedOutput as exc:
            # A gate that calls the runner itself (not through ``GateCall.ask``): no retries.
            verdict = _undecided(request.gate, [f"{exc.model}: no verdict"], call, exc.detail)
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


def _undecided(gate: str, silent: Sequence[str], call: GateCall, last: str = "") -> Verdict:
    """The verdict of a gate none of whose verifiers answered (``silent`` names each): not a
    pass, since nobody vouches for the output, and told to the generator as what it is — no
    judgment of the output (``last``: the last thing wrong with a verifier's answer)."""
    why = f" (the last answer: {last[:300]})" if last else ""
    return Verdict(
        False,
        f"no verdict: none of the {gate} gate's verifiers gave a usable answer "
        f"({'; '.join(silent)}), so it cannot pass the output; nothing was found wrong with "
        f"it{why}",
        call.output_text(),
    )


def _noted(text: str, silent: Sequence[str]) -> str:
    """``text`` with the verifiers that gave no verdict named after it."""
    return text + "".join(f"; {s}" for s in silent)


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
            question=qa.question, windows=call.seed.evidence.transcript_windows(qa.gold_answer)
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
    """Rejected only when every answerer–verifier pair recovers the gold from memory alone.

    As the paper has it, the QA is rejected only when all the pairs recover the gold; one pair
    that does not settles it (a pass, and the remaining calls are saved). A pair whose answerer
    or verifier gives no usable answer, after its retries (:data:`VERIFIER_RETRIES`), gives no
    verdict and the pairs that answered decide: rejected when every one of them recovered the
    gold, and the reason says how many answered and who gave no verdict. When no pair answered
    the gate cannot decide, and the QA is not passed on a vacuous "nobody recovered it": it is
    rejected as undecided (``_undecided``: no judgment of the QA, the attempt counts as any
    rejection does, so a verifier that never answers costs at most the seed's attempts)."""
    qa = call.qa
    recovered: list[str] = []
    silent: list[str] = []
    for answerer, verifier in call.models.parametric_pairs:
        pair = f"{answerer}→{verifier}"
        try:
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
        except NoVerdict as exc:
            silent.append(f"{pair}: {exc.summary}")
            continue
        if not verdict.matches_gold:
            return Verdict(
                True,
                _noted(f"{pair} did not recover the gold: {verdict.reason}", silent),
            )
        recovered.append(f"{pair}: {verdict.reason}")
    if not recovered:
        return _undecided("parametric_test", silent, call)
    n = len(recovered)
    return Verdict(
        False,
        _noted(
            f"rejected: {n} of {n} answerer–verifier pairs that answered recovered the gold "
            "(the test rejects when every pair that answers does)",
            silent,
        )
        + ". Answerable from model memory alone: "
        + "; ".join(recovered)
        + ". Ground the answer in what is seen, not in what a model knows.",
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
    """A distractor set as a rejection feeds it back: every answer whole, under its rating
    (an answer is cut only past the structural gate's own length limit)."""
    return "\n\n".join(
        f"--- your answer rated {a.rating} ---\n{clip_output(a.answer, REJECTED_ANSWER_CHARS)}"
        for a in distractors.answers
    )


def _shuffled(labelled: list[tuple[str, str]], salt: str) -> list[tuple[str, str]]:
    """Deterministic shuffle (replay must see the same order)."""
    rng = random.Random(hashlib.sha256(salt.encode()).hexdigest())
    out = list(labelled)
    rng.shuffle(out)
    return out


def _in_ratings(order: Sequence[str], rating_of: Mapping[str, str]) -> str:
    """A ranker's order of shuffled labels told in the generator's own terms: the ratings of the
    answers (``gold`` for the gold answer), never the labels it never saw. A label the ranker
    made up shows as ``?``; answers it left out are named after the order."""

    def name(label: str) -> str:
        rating = rating_of.get(label)
        return "?" if rating is None else ("gold" if rating == "5" else rating)

    text = " > ".join(name(label) for label in order) or "nothing"
    missing = [name(label) for label in rating_of if label not in order]
    if missing:
        text += f" (leaving out {', '.join(missing)})"
    return text


@register_gate(default_gate("structural", 2))
async def structural_2(call: GateCall) -> Verdict:
    """The distractor set's form: four ratings, causal records, visual-only degradations."""
    distractors = call.distractors
    result = phase2_structural(distractors, call.qa.gold_answer)
    return Verdict(result.passed, result.reason, _set_text(distractors))


@register_gate(default_gate("textual_undetectability", 2))
async def textual_undetectability(call: GateCall) -> Verdict:
    """Rejected only when every text-only ranker recovers the intended order gold ≻ 4 ≻ … ≻ 1.

    As the paper has it, the set is rejected only when all the rankers recover the order; one
    that does not settles it (a pass, the rest are not asked). A ranker that gives no usable
    answer, after its retries, gives no verdict and those that answered decide, as in
    :func:`parametric_test`; when none answered the set is rejected as undecided. Orders are
    told in ratings, never in the shuffled labels the generator never saw."""
    qa, distractors = call.qa, call.distractors
    graded = [("5", qa.gold_answer), *((str(a.rating), a.answer) for a in distractors.answers)]
    order = _shuffled(graded, f"{call.seed.seed_id}|text|{call.request.attempt}")
    labels = {rating: chr(ord("A") + i) for i, (rating, _) in enumerate(order)}
    rating_of = {label: rating for rating, label in labels.items()}
    intended = tuple(labels[r] for r in ("5", "4", "3", "2", "1"))
    rubric = tuple(sorted({d.attribute for a in distractors.answers for d in a.causal_record}))
    context = RankingContext(
        role="textual_ranker",
        question=qa.question,
        answers=tuple(LabelledAnswer(label=labels[r], text=text) for r, text in order),
        rubric=rubric,
    )
    recovered: list[str] = []
    silent: list[str] = []
    for model in call.models.textual_rankers:
        try:
            ranking = await call.ask(TEXTUAL_RANKER, model, context)
        except NoVerdict as exc:
            silent.append(exc.summary)
            continue
        if tuple(ranking.order) != intended:
            return Verdict(
                True,
                _noted(
                    f"{model} could not recover the order from text alone (it ranked "
                    f"{_in_ratings(ranking.order, rating_of)})",
                    silent,
                ),
            )
        recovered.append(model)
    if not recovered:
        return _undecided("textual_undetectability", silent, call)
    n = len(recovered)
    return Verdict(
        False,
        _noted(
            f"rejected: {n} of {n} text-only rankers that answered ({', '.join(recovered)}) "
            "recovered the intended order gold > 4 > 3 > 2 > 1 from the text alone (the test "
            "rejects when every ranker that answers does)",
            silent,
        )
        + ": make the errors visual only and keep length, tone and structure identical",
        _set_text(distractors),
    )


@register_gate(default_gate("visual_detectability", 2))
async def visual_detectability(call: GateCall) -> Verdict:
    """Passed only when, with the video, the four answers rank in the intended order 4 ≻ … ≻ 1.

    Its one ranker's order is told to the generator in ratings (the shuffled labels the ranker
    saw mean nothing to it); a ranker that gives no verdict fails the gate (see
    :meth:`VerifierAgent.handle`)."""
    qa, distractors = call.qa, call.distractors
    by_rating = {str(a.rating): a for a in distractors.answers}
    order = _shuffled(
        [(r, by_rating[r].answer) for r in sorted(by_rating)],
        f"{call.seed.seed_id}|video|{call.request.attempt}",
    )
    labels = {rating: chr(ord("A") + i) for i, (rating, _) in enumerate(order)}
    rating_of = {label: rating for rating, label in labels.items()}
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
        "with the video the ranker ordered your answers rated "
        f"{_in_ratings(ranking.order, rating_of)}; the intended order is "
        f"{_in_ratings(intended, rating_of)}: make each severity step visibly larger",
        _set_text(distractors),
    )
