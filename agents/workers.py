"""The agents behind the bus: generators (Phase I QA, Phase II distractors) and the verifier
that runs every gate of DESIGN.md. Each model call goes through the recorded-call wrapper."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import ContentFilterError, UnexpectedModelBehavior
from pydantic_ai.messages import BinaryContent, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from agents.bus import Envelope
from agents.coordinator import FeedbackItem
from agents.evidence import ClipSpec, SeedEvidence
from agents.prompts import render_prompt
from agents.recorded import CallContext, CallRecorder, ModelRefused, RecordedModel
from agents.structural import phase1_structural, phase2_structural
from store.events import (
    AttemptStarted,
    DistractorsProposed,
    Event,
    GatePassed,
    GateRejected,
    GateRequested,
    QAProposed,
)
from tools.roles import (
    QA,
    AnyContext,
    DistractorSet,
    Feedback,
    FreeAnswer,
    LabelledAnswer,
    MatchContext,
    MatchVerdict,
    ParametricContext,
    Phase1Context,
    Phase2Context,
    Ranking,
    RankingContext,
    SufficiencyContext,
    SufficiencyVerdict,
    TranscriptTestContext,
)

T = TypeVar("T", bound=BaseModel)

MAX_OUTPUT_TOKENS = {
    "phase1_generator": 4096,
    "phase2_generator": 8192,
    "transcript_answerer": 2048,
    "transcript_matcher": 512,
    "parametric_answerer": 2048,
    "parametric_verifier": 512,
    "sufficiency": 2048,
    "textual_ranker": 512,
    "visual_ranker": 512,
    "pair_judge": 512,
}
REJECTED_OUTPUT_CHARS = 4000  # what of a rejected output goes back into the next prompt


class MalformedOutput(Exception):
    """The model answered, but not in the role's output type; ``raw`` is what it wrote."""

    def __init__(self, role: str, model: str, raw: str, detail: str) -> None:
        super().__init__(f"{role} ({model}) returned malformed output: {detail}")
        self.raw = raw


@dataclass(frozen=True)
class RoleModels:
    """Which configured model plays each role (ids are priced by the price table)."""

    phase1_generator: str = "gemini-3-flash"
    phase2_generator: str = "gemini-3-flash"
    transcript_answerer: str = "gemini-3-flash"
    transcript_matcher: str = "gpt-5.4-mini"
    parametric_pairs: tuple[tuple[str, str], ...] = (
        ("gemini-3-flash", "gpt-5.4"),
        ("gpt-5.4-mini", "gemini-3.1-pro"),
    )
    sufficiency: str = "qwen-3.7-plus"
    textual_rankers: tuple[str, ...] = ("gemini-3.1-pro", "gpt-5.4")
    visual_ranker: str = "qwen-3.7-plus"

    def all_models(self) -> set[str]:
        """Every model id a run may call."""
        ids = {
            self.phase1_generator,
            self.phase2_generator,
            self.transcript_answerer,
            self.transcript_matcher,
            self.sufficiency,
            self.visual_ranker,
            *self.textual_rankers,
        }
        for answerer, verifier in self.parametric_pairs:
            ids |= {answerer, verifier}
        return ids


def _raw_text(response: ModelResponse | None) -> str:
    if response is None:
        return ""
    out: list[str] = []
    for part in response.parts:
        if isinstance(part, TextPart):
            out.append(part.content)
        elif isinstance(part, ToolCallPart):
            out.append(part.args_as_json_str())
    return "\n".join(out)


@dataclass
class SeedCall:
    """What a handler needs about the seed it works for (passed as the envelope's context):
    its evidence, where its events go, and the loop's current output and feedback."""

    seed_id: str
    evidence: SeedEvidence
    append: Callable[[Event], Awaitable[None]]
    qa: dict[str, Any] | None = None
    distractors: dict[str, Any] | None = None
    feedback: tuple[FeedbackItem, ...] = ()


@dataclass
class ModelRunner:
    """Runs one role call: prompt + attachments → the role's output type, through the recorder."""

    recorder: CallRecorder
    model_for: Callable[[str], Model]
    # One pydantic-ai Agent per output type: building one (its output schema) costs more than
    # a call's own bookkeeping; the model is given per run.
    _agents: dict[type[BaseModel], Agent[None, Any]] = field(default_factory=dict)

    async def run(
        self,
        seed: SeedCall,
        role: str,
        model_id: str,
        context: AnyContext,
        output_type: type[T],
        *,
        phase: int | None,
        gate: str | None,
        attachments: Sequence[BinaryContent] = (),
        extra_settings: ModelSettings | None = None,
    ) -> T:
        """One structured call; malformed output raises :class:`MalformedOutput`.
        ``extra_settings`` join the role's (e.g. a thinking budget)."""
        recorded = RecordedModel(
            self.model_for(model_id),
            self.recorder,
            CallContext(seed_id=seed.seed_id, role=role, model=model_id, phase=phase, gate=gate),
            seed.append,
        )
        agent = self._agents.get(output_type)
        if agent is None:
            agent = self._agents[output_type] = Agent(None, output_type=output_type, retries=0)
        prompt: list[Any] = [render_prompt(context), *attachments]
        settings = ModelSettings(max_tokens=MAX_OUTPUT_TOKENS.get(role, 2048), temperature=0.0)
        if extra_settings:
            settings = ModelSettings(**{**settings, **extra_settings})
        try:
            result = await agent.run(prompt, model=recorded, model_settings=settings)
        except (ModelRefused, ContentFilterError) as exc:
            refused = f"the model refused to answer: {exc}"
            raise MalformedOutput(role, model_id, "", refused) from exc
        except UnexpectedModelBehavior as exc:
            last = recorded.last_response
            detail = str(exc)
            if last is not None and last.finish_reason == "length":
                detail = (
                    f"output cut off at the {settings.get('max_tokens')}-token limit before it "
                    f"was complete ({detail})"
                )
            raise MalformedOutput(role, model_id, _raw_text(last), detail) from exc
        output: T = result.output
        return output


def _feedback(items: Sequence[FeedbackItem]) -> tuple[Feedback, ...]:
    return tuple(
        Feedback(
            phase=1 if f.phase == 1 else 2,
            gate=f.gate,
            reason=f.reason,
            rejected_output=f.rejected_output,
        )
        for f in items
    )


def _qa_text(qa: QA) -> str:
    return f"Question: {qa.question}\n\nGold answer:\n{qa.gold_answer}"


def _clip(text: str) -> str:
    if len(text) <= REJECTED_OUTPUT_CHARS:
        return text
    return (
        text[:REJECTED_OUTPUT_CHARS] + f"\n[… {len(text) - REJECTED_OUTPUT_CHARS} more characters]"
    )


@dataclass(frozen=True)
class GenerationLimits:
    """The paper's numbers the generators are told (and the structural gate checks)."""

    min_paragraphs: int = 3
    max_paragraphs: int = 5
    min_cited_chunks: int = 2
    max_cited_chunks: int = 15
    generator_clip: ClipSpec = field(default_factory=lambda: ClipSpec(audio=True))
    # The sufficiency and visual-detectability model (Qwen) takes no audio: narration is text.
    verifier_clip: ClipSpec = field(default_factory=lambda: ClipSpec(audio=False))


@dataclass
class _RoleAgent:
    """What every agent holds: how to call models, who plays each role, the paper's limits."""

    runner: ModelRunner
    models: RoleModels
    limits: GenerationLimits


class GeneratorAgent(_RoleAgent):
    """Answers ``AttemptStarted`` with a proposal, or a rejection when the output is malformed."""

    async def handle(self, envelope: Envelope) -> Event:
        """Generate for one attempt."""
        request = envelope.message
        seed: SeedCall = envelope.context
        assert isinstance(request, AttemptStarted)
        items = seed.feedback
        phase, attempt = request.phase, request.attempt
        segments = seed.evidence.segments
        videos = seed.evidence.videos(self.limits.generator_clip)
        try:
            if phase == 1:
                qa = await self.runner.run(
                    seed,
                    "phase1_generator",
                    self.models.phase1_generator,
                    Phase1Context(
                        segments=segments,
                        min_paragraphs=self.limits.min_paragraphs,
                        max_paragraphs=self.limits.max_paragraphs,
                        min_cited_chunks=self.limits.min_cited_chunks,
                        max_cited_chunks=self.limits.max_cited_chunks,
                        feedback=_feedback(items),
                    ),
                    QA,
                    phase=1,
                    gate="generator",
                    attachments=videos,
                )
                return QAProposed(attempt=attempt, qa=qa.model_dump(mode="json"))
            qa = QA.model_validate(seed.qa)
            distractors = await self.runner.run(
                seed,
                "phase2_generator",
                self.models.phase2_generator,
                Phase2Context(
                    question=qa.question,
                    gold_answer=qa.gold_answer,
                    segments=segments,
                    feedback=_feedback(items),
                ),
                DistractorSet,
                phase=2,
                gate="generator",
                attachments=videos,
            )
            return DistractorsProposed(
                attempt=attempt, distractors=distractors.model_dump(mode="json")
            )
        except MalformedOutput as exc:
            return GateRejected(
                phase=1 if phase == 1 else 2,
                gate="output",
                attempt=attempt,
                reason=str(exc),
                rejected_output=_clip(exc.raw),
            )


def _shuffled(labelled: list[tuple[str, str]], salt: str) -> list[tuple[str, str]]:
    """Deterministic shuffle (replay must see the same order)."""
    rng = random.Random(hashlib.sha256(salt.encode()).hexdigest())
    out = list(labelled)
    rng.shuffle(out)
    return out


GateCheck = Callable[["SeedCall", GateRequested], Awaitable[tuple[bool, str, str]]]


class VerifierAgent(_RoleAgent):
    """Answers ``GateRequested`` with ``GatePassed`` or ``GateRejected``, for every gate."""

    def checks(self) -> dict[tuple[str, int], GateCheck]:
        """Each gate's check by ``(name, phase)``: the names of ``policies.attempts``'s gates,
        looked up in one table rather than found by method name."""
        return {
            ("structural", 1): self._gate_structural_1,
            ("transcript_test", 1): self._gate_transcript_test_1,
            ("parametric_test", 1): self._gate_parametric_test_1,
            ("sufficiency", 1): self._gate_sufficiency_1,
            ("structural", 2): self._gate_structural_2,
            ("textual_undetectability", 2): self._gate_textual_undetectability_2,
            ("visual_detectability", 2): self._gate_visual_detectability_2,
        }

    async def handle(self, envelope: Envelope) -> Event:
        """Run one gate on the seed's current output."""
        request = envelope.message
        assert isinstance(request, GateRequested)
        seed: SeedCall = envelope.context
        gate = request.gate
        check = self.checks().get((gate, request.phase))
        if check is None:
            raise ValueError(f"no gate {gate!r} in phase {request.phase}")
        try:
            passed, detail, output = await check(seed, request)
        except MalformedOutput as exc:
            # A verifier that cannot answer in form cannot vouch for the output.
            passed, detail, output = False, f"verifier output unusable: {exc}", ""
        if passed:
            return GatePassed(
                phase=request.phase, gate=gate, attempt=request.attempt, detail=detail
            )
        return GateRejected(
            phase=request.phase,
            gate=gate,
            attempt=request.attempt,
            reason=detail,
            rejected_output=_clip(output),
        )

    # -- Phase I ----------------------------------------------------------------------------

    @staticmethod
    def _qa(seed: SeedCall) -> QA:
        return QA.model_validate(seed.qa)

    async def _gate_structural_1(
        self, seed: SeedCall, request: GateRequested
    ) -> tuple[bool, str, str]:
        qa = self._qa(seed)
        result = phase1_structural(
            qa,
            seed.evidence.segments,
            min_paragraphs=self.limits.min_paragraphs,
            min_chunks=self.limits.min_cited_chunks,
            max_chunks=self.limits.max_cited_chunks,
        )
        return result.passed, result.reason, _qa_text(qa)

    async def _gate_transcript_test_1(
        self, seed: SeedCall, request: GateRequested
    ) -> tuple[bool, str, str]:
        qa = self._qa(seed)
        answer = await self.runner.run(
            seed,
            "transcript_answerer",
            self.models.transcript_answerer,
            TranscriptTestContext(question=qa.question, windows=seed.evidence.transcript_windows()),
            FreeAnswer,
            phase=1,
            gate="transcript_test",
        )
        verdict = await self.runner.run(
            seed,
            "transcript_matcher",
            self.models.transcript_matcher,
            MatchContext(
                role="transcript_matcher",
                question=qa.question,
                gold_answer=qa.gold_answer,
                candidate=answer.answer,
            ),
            MatchVerdict,
            phase=1,
            gate="transcript_test",
        )
        if verdict.matches_gold:
            return (
                False,
                "answerable from the transcripts alone: an answer written from the narration "
                f"matched the gold ({verdict.reason}). Ground the answer in what is seen, "
                "not said.",
                _qa_text(qa),
            )
        return True, f"transcript-only answer does not match: {verdict.reason}", ""

    async def _gate_parametric_test_1(
        self, seed: SeedCall, request: GateRequested
    ) -> tuple[bool, str, str]:
        qa = self._qa(seed)
        recovered: list[str] = []
        for answerer, verifier in self.models.parametric_pairs:
            answer = await self.runner.run(
                seed,
                "parametric_answerer",
                answerer,
                ParametricContext(question=qa.question),
                FreeAnswer,
                phase=1,
                gate="parametric_test",
            )
            verdict = await self.runner.run(
                seed,
                "parametric_verifier",
                verifier,
                MatchContext(
                    role="parametric_verifier",
                    question=qa.question,
                    gold_answer=qa.gold_answer,
                    candidate=answer.answer,
                ),
                MatchVerdict,
                phase=1,
                gate="parametric_test",
            )
            if not verdict.matches_gold:
                # Rejected only if every pair recovers the gold: one miss settles it (and saves
                # the remaining calls).
                return True, f"{answerer}→{verifier} did not recover the gold: {verdict.reason}", ""
            recovered.append(f"{answerer}→{verifier}: {verdict.reason}")
        return (
            False,
            "answerable from model memory alone (every generator–verifier pair recovered the "
            "gold): " + "; ".join(recovered),
            _qa_text(qa),
        )

    async def _gate_sufficiency_1(
        self, seed: SeedCall, request: GateRequested
    ) -> tuple[bool, str, str]:
        qa = self._qa(seed)
        verdict = await self.runner.run(
            seed,
            "sufficiency",
            self.models.sufficiency,
            SufficiencyContext(
                question=qa.question, gold_answer=qa.gold_answer, segments=seed.evidence.segments
            ),
            SufficiencyVerdict,
            phase=1,
            gate="sufficiency",
            attachments=seed.evidence.videos(self.limits.verifier_clip),
        )
        if verdict.answerable and not verdict.unsupported_claims:
            return True, verdict.reason, ""
        unsupported = "; ".join(repr(c) for c in verdict.unsupported_claims[:5])
        why = "not answerable from the video" if not verdict.answerable else "claims not supported"
        return (
            False,
            f"{why}: {verdict.reason}" + (f" Unsupported: {unsupported}" if unsupported else ""),
            _qa_text(qa),
        )

    # -- Phase II ---------------------------------------------------------------------------------

    @staticmethod
    def _set(seed: SeedCall) -> DistractorSet:
        return DistractorSet.model_validate(seed.distractors)

    @staticmethod
    def _set_text(distractors: DistractorSet) -> str:
        return "\n\n".join(f"[rated {a.rating}] {a.answer}" for a in distractors.answers)

    async def _gate_structural_2(
        self, seed: SeedCall, request: GateRequested
    ) -> tuple[bool, str, str]:
        distractors = self._set(seed)
        result = phase2_structural(distractors, self._qa(seed).gold_answer)
        return result.passed, result.reason, self._set_text(distractors)

    async def _gate_textual_undetectability_2(
        self, seed: SeedCall, request: GateRequested
    ) -> tuple[bool, str, str]:
        qa, distractors = self._qa(seed), self._set(seed)
        graded = [("5", qa.gold_answer), *((str(a.rating), a.answer) for a in distractors.answers)]
        order = _shuffled(graded, f"{seed.seed_id}|text|{request.attempt}")
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
        for model in self.models.textual_rankers:
            ranking = await self.runner.run(
                seed,
                "textual_ranker",
                model,
                context,
                Ranking,
                phase=2,
                gate="textual_undetectability",
            )
            if tuple(ranking.order) != intended:
                return True, f"{model} could not recover the order from text alone", ""
            recovered.append(model)
        return (
            False,
            "the intended order gold ≻ 4 ≻ 3 ≻ 2 ≻ 1 is recoverable from the text alone (by "
            + ", ".join(recovered)
            + "): make the errors visual only and keep length, tone and structure identical",
            self._set_text(distractors),
        )

    async def _gate_visual_detectability_2(
        self, seed: SeedCall, request: GateRequested
    ) -> tuple[bool, str, str]:
        qa, distractors = self._qa(seed), self._set(seed)
        by_rating = {str(a.rating): a for a in distractors.answers}
        order = _shuffled(
            [(r, by_rating[r].answer) for r in sorted(by_rating)],
            f"{seed.seed_id}|video|{request.attempt}",
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
            segments=seed.evidence.segments,
        )
        ranking = await self.runner.run(
            seed,
            "visual_ranker",
            self.models.visual_ranker,
            context,
            Ranking,
            phase=2,
            gate="visual_detectability",
            attachments=seed.evidence.videos(self.limits.verifier_clip),
        )
        if tuple(ranking.order) == intended:
            return True, "the video ranks the four answers in the intended order", ""
        return (
            False,
            f"with the video the order is {'>'.join(ranking.order)!r}, not the intended "
            f"{'>'.join(intended)!r} (4 ≻ 3 ≻ 2 ≻ 1): make each severity step visibly larger",
            self._set_text(distractors),
        )
