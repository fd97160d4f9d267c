"""The generators behind the bus (Phase I QA, Phase II distractors) and what every agent uses: the
model runner, through which each model call goes (the recorded-call wrapper), the model of each
role and the paper's limits. The verifier and its gates are in :mod:`agents.gates`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
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
from store.events import AttemptStarted, DistractorsProposed, Event, GateRejected, QAProposed
from tools.roles import (
    PHASE1_GENERATOR,
    PHASE2_GENERATOR,
    QA,
    AnyContext,
    Feedback,
    Phase1Context,
    Phase2Context,
    role_spec,
)

T = TypeVar("T", bound=BaseModel)

REJECTED_OUTPUT_CHARS = 4000  # what of a rejected output goes back into the next prompt


class MalformedOutput(Exception):
    """The model answered, but not in the role's output type; ``raw`` is what it wrote."""

    def __init__(self, role: str, model: str, raw: str, detail: str) -> None:
        super().__init__(f"{role} ({model}) returned malformed output: {detail}")
        self.raw = raw


@dataclass(frozen=True)
class RoleModels:
    """Which configured model plays each role (ids are priced by the price table)."""

    phase1_generator: str = "gemini-3-flash-preview"
    phase2_generator: str = "gemini-3-flash-preview"
    transcript_answerer: str = "gemini-3-flash-preview"
    transcript_matcher: str = "gpt-5.4-mini"
    parametric_pairs: tuple[tuple[str, str], ...] = (
        ("gemini-3-flash-preview", "gpt-5.4"),
        ("gpt-5.4-mini", "gemini-3.1-pro-preview"),
    )
    sufficiency: str = "qwen-3.7-plus"
    textual_rankers: tuple[str, ...] = ("gemini-3.1-pro-preview", "gpt-5.4")
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

    @classmethod
    def recorded(cls, facts: Mapping[str, Any]) -> RoleModels:
        """The role models a run recorded in ``RunStarted.models`` (its fields' values, lists
        for tuples): what a replay of that run must ask for, whatever today's defaults are.
        A role the log does not name keeps today's default; a name it has that is no longer a
        role is ignored."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in facts.items():
            if name not in known:
                continue
            if name == "parametric_pairs":
                values[name] = tuple((str(a), str(v)) for a, v in value)
            elif isinstance(value, list | tuple):
                values[name] = tuple(str(v) for v in value)
            else:
                values[name] = str(value)
        return cls(**values)


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
        """One structured call of ``role`` (its row in ``tools.roles.ROLES`` gives the output type
        ``output_type`` must be, whether it may take clips, and its output-token cap); malformed
        output raises :class:`MalformedOutput`. ``extra_settings`` join the role's (e.g. a
        thinking budget)."""
        spec = role_spec(role)
        if output_type is not spec.output:
            raise ValueError(
                f"role {role!r} answers with {spec.output.__name__}, not {output_type.__name__}"
            )
        if attachments and not spec.video:
            raise ValueError(f"role {role!r} is not a video role: it takes no attachments")
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
        settings = ModelSettings(
            max_tokens=spec.max_output_tokens, temperature=0.0, thinking=spec.thinking
        )
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


def qa_text(qa: QA) -> str:
    """A QA as a rejected output is fed back: its question and gold answer."""
    return f"Question: {qa.question}\n\nGold answer:\n{qa.gold_answer}"


def clip_output(text: str) -> str:
    """What of a rejected output goes back into the next prompt (the first few thousand
    characters: a 100 kB answer is not echoed whole)."""
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
class RoleAgent:
    """What every agent holds: how to call models, who plays each role, the paper's limits."""

    runner: ModelRunner
    models: RoleModels
    limits: GenerationLimits


class GeneratorAgent(RoleAgent):
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
                    PHASE1_GENERATOR.name,
                    self.models.phase1_generator,
                    Phase1Context(
                        segments=segments,
                        min_paragraphs=self.limits.min_paragraphs,
                        max_paragraphs=self.limits.max_paragraphs,
                        min_cited_chunks=self.limits.min_cited_chunks,
                        max_cited_chunks=self.limits.max_cited_chunks,
                        feedback=_feedback(items),
                    ),
                    PHASE1_GENERATOR.output,
                    phase=1,
                    gate="generator",
                    attachments=videos,
                )
                return QAProposed(attempt=attempt, qa=qa.model_dump(mode="json"))
            qa = QA.model_validate(seed.qa)
            distractors = await self.runner.run(
                seed,
                PHASE2_GENERATOR.name,
                self.models.phase2_generator,
                Phase2Context(
                    question=qa.question,
                    gold_answer=qa.gold_answer,
                    segments=segments,
                    feedback=_feedback(items),
                ),
                PHASE2_GENERATOR.output,
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
                rejected_output=clip_output(exc.raw),
            )
