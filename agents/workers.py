"""The generators behind the bus (Phase I QA, Phase II distractors) and what every agent uses: the
model runner, through which each model call goes (the recorded-call wrapper), the model of each
role and the paper's limits. The verifier and its gates are in :mod:`agents.gates`."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, make_dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
from pydantic import BaseModel, ValidationError
from pydantic_ai import Agent
from pydantic_ai.exceptions import ContentFilterError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.test import TestModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings, merge_model_settings

from agents.bus import Envelope
from agents.coordinator import FeedbackItem
from agents.evidence import ClipSpec, SeedEvidence
from agents.prompts import render_prompt, template_hash
from agents.recorded import CallContext, CallRecorder, ModelRefused, RecordedModel
from policies.ratelimits import Traffic
from store.errors import ConfigError, ProviderError
from store.events import AttemptStarted, DistractorsProposed, Event, GateRejected, QAProposed
from tools.contracts.roles import (
    PAPER_SLOTS,
    PHASE1_GENERATOR,
    PHASE1_GENERATOR_SLOT,
    PHASE2_GENERATOR,
    PHASE2_GENERATOR_SLOT,
    QA,
    ROLES,
    Feedback,
    ModelSlot,
    PairJudgeContext,
    Phase1Context,
    Phase2Context,
    RoleContext,
    SegmentEvidence,
    SlotValue,
    VideoRate,
    curation_slots,
    role_spec,
)
from tools.providers.base import CallWrapper, ModelCall, clip_info, frame_times

T = TypeVar("T", bound=BaseModel)

# What of a rejected output goes back into the next prompt. The generator must see all of what
# was rejected to fix it: every answer the structural gates let through (at most their
# ``max_answer_chars``, 20,000 characters an answer) goes back whole, and so a whole Phase II set
# of four such answers with its headers. Only what those gates would reject for its length
# anyway is cut (a 100 kB answer is not echoed whole).
REJECTED_ANSWER_CHARS = 20_000
REJECTED_OUTPUT_CHARS = 4 * REJECTED_ANSWER_CHARS + 4_000


Unusable = Literal["malformed", "truncated", "refused"]


class MalformedOutput(Exception):
    """The model answered, but not in the role's output type: ``kind`` says how (``malformed``,
    ``truncated`` at the output-token cap, or ``refused``); ``raw`` is what it wrote, ``detail``
    what was wrong with it."""

    def __init__(
        self, role: str, model: str, raw: str, detail: str, *, kind: Unusable = "malformed"
    ) -> None:
        what = "refused to answer" if kind == "refused" else "returned malformed output"
        super().__init__(f"{role} ({model}) {what}: {detail}")
        self.role = role
        self.model = model
        self.raw = raw
        self.detail = detail
        self.kind: Unusable = kind


class RoleModels:
    """Which configured model plays each role: one value per curation model slot
    (:func:`tools.contracts.roles.curation_slots`), under the slot's ``attribute``; ids are priced
    by the
    price table.

    Its fields are made from the slot declarations (nothing here restates a slot): this class
    is a frozen dataclass with a field per paper slot, its default the slot's own, and where gate
    packages declared slots of their own an instance is of a subclass that adds a field for each
    (made once per set of slots, :func:`_class_for`). So ``vars(models)`` — what a run records in
    ``RunStarted.models`` — holds every slot, ``dataclasses.replace`` keeps them, and
    :meth:`value`, :meth:`model`, :meth:`models_of` and :meth:`all_models` read any of them. A
    slot declared after an instance was made plays its default there.
    """

    if TYPE_CHECKING:
        # The fields are made from the slots below the class: to a type checker an instance
        # takes any slot's value by its attribute, and each reads as Any.
        def __init__(self, **values: Any) -> None: ...

    def __new__(cls, **values: Any) -> RoleModels:
        del values  # the dataclass's __init__ takes them
        made = _class_for(curation_slots()) if cls is RoleModels else cls
        return super().__new__(made)

    def __getattr__(self, name: str) -> Any:
        # Reached only for a name the instance has no field for: a slot declared since.
        for slot in curation_slots():
            if slot.attribute == name:
                return slot.default
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # A subclass made for gate packages' slots is found by its slots, not by its name.
        return (RoleModels.of, (dict(vars(self)),))

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> RoleModels:
        """The models ``values`` name by slot attribute (lists for tuples, as TOML or a log has
        them), every other slot at its default; ``ConfigError`` for a name that is no curation
        slot's, or a value of the wrong shape."""
        slots = {slot.attribute: slot for slot in curation_slots()}
        unknown = sorted(set(values) - set(slots))
        if unknown:
            raise ConfigError(
                f"no model slot {unknown[0]!r}; the slots are {', '.join(slots)} (a gate "
                "package's slot is known once its package is loaded: models.gate_packages)"
            )
        return RoleModels(**{n: slots[n].normalise(value) for n, value in values.items()})

    def value(self, slot: str) -> SlotValue:
        """The model(s) of slot ``slot`` (its settings key or its attribute); ``ConfigError``
        naming the slots when it is no curation slot."""
        found = _curation_slot(slot)
        # A slot declared after this instance was made plays its default here too.
        value: SlotValue = vars(self).get(found.attribute, found.default)
        return value

    def model(self, slot: str) -> str:
        """The one model of a one-model slot (a gate package's judge, say)."""
        value = self.value(slot)
        if not isinstance(value, str):
            raise ConfigError(f"model slot {slot!r} holds several models: use models_of")
        return value

    def models_of(self, slot: str) -> tuple[str, ...]:
        """Every model id of slot ``slot``, in order (both of each pair)."""
        return _curation_slot(slot).models(self.value(slot))

    def all_models(self) -> set[str]:
        """Every model id a run may call."""
        return {m for slot in curation_slots() for m in slot.models(self.value(slot.key))}

    def playing(self) -> dict[str, tuple[str, ...]]:
        """Role → the models that play it, in :data:`tools.contracts.roles.ROLES` order (a role two
        slots cast lists both's; a model twice, once)."""
        cast: dict[str, list[str]] = {}
        for slot in curation_slots():
            for role in slot.roles:
                for model in slot.playing(self.value(slot.key), role):
                    if model not in cast.setdefault(role, []):
                        cast[role].append(model)
        return {role: tuple(cast[role]) for role in ROLES if role in cast}

    @classmethod
    def recorded(cls, facts: Mapping[str, Any]) -> RoleModels:
        """The role models a run recorded in ``RunStarted.models`` (its fields' values, lists
        for tuples): what a replay of that run must ask for, whatever today's defaults are.
        A role the log does not name keeps today's default; a name it has that is no longer a
        role is ignored."""
        known = {slot.attribute for slot in curation_slots()}
        return cls.of({name: value for name, value in facts.items() if name in known})


def _slot_fields(slots: Sequence[ModelSlot[Any]]) -> list[tuple[str, Any, Any]]:
    """A dataclass field per slot: its attribute, its value's type, its default."""
    return [(slot.attribute, slot.value_type, field(default=slot.default)) for slot in slots]


# RoleModels' fields: the paper's curation slots, in their declared order, each defaulting to
# the slot's own (the dataclass decorator reads the annotations and the class attributes).
_PAPER_CURATION = [slot for slot in PAPER_SLOTS if slot.curation]
RoleModels.__annotations__ = {slot.attribute: slot.value_type for slot in _PAPER_CURATION}
for _slot in _PAPER_CURATION:
    setattr(RoleModels, _slot.attribute, _slot.default)
dataclass(frozen=True)(RoleModels)

_MADE: dict[tuple[ModelSlot[Any], ...], type[RoleModels]] = {}


def _class_for(slots: Sequence[ModelSlot[Any]]) -> type[RoleModels]:
    """The class of a ``RoleModels`` for the curation slots ``slots``: :class:`RoleModels`
    itself while they are the paper's, else its subclass with a field per other slot."""
    more = tuple(slot for slot in slots if slot not in PAPER_SLOTS)
    if not more:
        return RoleModels
    made = _MADE.get(more)
    if made is None:
        made = make_dataclass(
            "RoleModels",
            _slot_fields(more),
            bases=(RoleModels,),
            frozen=True,
            namespace={"__module__": __name__, "__doc__": RoleModels.__doc__},
        )
        _MADE[more] = made
    return made


def _curation_slot(name: str) -> ModelSlot[Any]:
    """The curation slot whose settings key or attribute is ``name``."""
    for slot in curation_slots():
        if name in (slot.key, slot.attribute):
            return slot
    known = ", ".join(slot.key for slot in curation_slots())
    raise ConfigError(f"no curation model slot {name!r}; the slots are {known}")


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
    # Who plays each role and the limits, as the seed's run defines them (None: the agent's
    # own): a fleet worker drives seeds of runs recorded under different definitions.
    models: RoleModels | None = None
    limits: GenerationLimits | None = None


@dataclass
class ModelRunner:
    """Runs one role call: prompt + attachments → the role's output type, through the recorder.

    A call is one model request, made directly (:meth:`Model.request` of the recorded model,
    as ``pydantic_ai.direct.model_request`` does), not a pydantic-ai ``Agent`` run: an agent run
    (its graph, capabilities and hooks) costs several milliseconds of CPU a call, which at
    evaluation concurrency is most of what the event loop does. What the request carries is what
    an agent run would hand the model, to the byte of its request key: the same user prompt
    part, the model's own :meth:`Model.prepare_messages`, the run settings over the model's, and
    the request parameters an agent builds for the output type (taken once per output type from
    an agent run against a model that answers nothing: :func:`_output_parameters`). The
    answer is read as the agent would in the one shape a well-behaved model gives (the output
    tool called once, or one JSON text in the native and prompted modes); any other answer is
    read by an agent run served that very response (:class:`_Answered`, no second call), so
    malformed, truncated and refused outputs fail exactly as before.
    ``tests/test_direct_runner.py`` holds both against an agent run, family by family."""

    recorder: CallRecorder
    model_for: Callable[[str], Model]
    # Per output type: the agent that reads an unusual answer (building one, its output schema,
    # costs more than a call's own bookkeeping), and the request parameters an agent sends.
    _agents: dict[type[BaseModel], Agent[None, Any]] = field(default_factory=dict)
    _parameters: dict[type[BaseModel], ModelRequestParameters] = field(default_factory=dict)
    _seeing: anyio.Lock = field(default_factory=anyio.Lock)

    async def run(
        self,
        seed: SeedCall,
        role: str,
        model_id: str,
        context: RoleContext,
        output_type: type[T],
        *,
        phase: int | None,
        gate: str | None,
        attachments: Sequence[BinaryContent] = (),
        extra_settings: ModelSettings | None = None,
        note: str = "",
    ) -> T:
        """One structured call of ``role`` (its row in ``tools.contracts.roles.ROLES`` gives the
        output type
        ``output_type`` must be, whether it may take clips, and its output-token cap); malformed
        output raises :class:`MalformedOutput`. ``extra_settings`` join the role's (e.g. a
        thinking budget); ``note`` ends the prompt (a retry's word on what was wrong before).
        A context that says at what rate its video is sent (sufficiency, the rankers) is told
        the rate this model's request carries (:meth:`video_rates`)."""
        spec = role_spec(role)
        if output_type is not spec.output:
            raise ValueError(
                f"role {role!r} answers with {spec.output.__name__}, not {output_type.__name__}"
            )
        if attachments and not spec.video:
            raise ValueError(f"role {role!r} is not a video role: it takes no attachments")
        context, attachments = self.fit(
            model_id, role, context, attachments, extra_settings=extra_settings, note=note
        )
        recorded = RecordedModel(
            self.model_for(model_id),
            self.recorder,
            CallContext(
                seed_id=seed.seed_id,
                role=role,
                model=model_id,
                phase=phase,
                gate=gate,
                template=template_hash(role),
            ),
            seed.append,
        )
        text = render_prompt(context) + (f"\n\n{note}" if note else "")
        prompt: list[Any] = [text, *attachments]
        settings = role_settings(role, extra_settings)
        parameters = await self._output_parameters(output_type)
        # The run settings over the model's own, as an agent merges them.
        sent = merge_model_settings(recorded.settings, settings)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(content=prompt)])]
        try:
            response = await recorded.request(
                recorded.prepare_messages(messages, parameters), sent, replace(parameters)
            )
        except ModelRefused as exc:
            raise MalformedOutput(role, model_id, "", str(exc), kind="refused") from exc
        output = read_output(recorded, sent, parameters, response, output_type)
        if output is not None:
            return output
        return await self._read_unusual(
            recorded, role, model_id, prompt, settings, output_type, response
        )

    async def _output_parameters(self, output_type: type[BaseModel]) -> ModelRequestParameters:
        found = self._parameters.get(output_type)
        if found is None:
            async with self._seeing:  # the first calls of a run all start at once: seen once
                found = self._parameters.get(output_type)
                if found is None:
                    found = await _output_parameters(self._agent(output_type))
                    self._parameters[output_type] = found
        return found

    def _agent(self, output_type: type[BaseModel]) -> Agent[None, Any]:
        agent = self._agents.get(output_type)
        if agent is None:
            agent = self._agents[output_type] = Agent(None, output_type=output_type, retries=0)
        return agent

    async def _read_unusual(
        self,
        recorded: RecordedModel,
        role: str,
        model_id: str,
        prompt: list[Any],
        settings: ModelSettings,
        output_type: type[T],
        response: ModelResponse,
    ) -> T:
        """An answer not in the one well-behaved shape, read by an agent run that is served
        ``response`` (already paid for and recorded) instead of calling the model again: its
        output, or the :class:`MalformedOutput` the agent's reading amounts to."""
        served = _Answered(recorded.wrapped, response)
        try:
            result = await self._agent(output_type).run(
                prompt, model=served, model_settings=settings
            )
        except ContentFilterError as exc:
            raise MalformedOutput(role, model_id, "", str(exc), kind="refused") from exc
        except UnexpectedModelBehavior as exc:
            detail = str(exc)
            kind: Unusable = "malformed"
            if response.finish_reason == "length":
                kind = "truncated"
                detail = (
                    f"output cut off at the {settings.get('max_tokens')}-token limit before it "
                    f"was complete ({detail})"
                )
            raise MalformedOutput(role, model_id, _raw_text(response), detail, kind=kind) from exc
        output: T = result.output
        return output

    def video_rates(
        self, model_id: str, attachments: Sequence[BinaryContent]
    ) -> tuple[VideoRate, ...]:
        """The rate each clip of ``attachments`` reaches ``model_id`` at, as its adapter plans
        it (:func:`video_rates` with the model's traffic, the recorder's own)."""
        return video_rates(attachments, self.recorder.traffic(model_id))

    def sent_frames(
        self, model_id: str, attachments: Sequence[BinaryContent]
    ) -> list[tuple[str, float]] | None:
        """The frames a request of ``attachments`` to ``model_id`` carries, as (video id,
        seconds into the video): the plan its adapter sends (:func:`frame_times`, after any
        fit). None for native video (the clip is sent as cut) or a model of unknown traffic."""
        traffic = self.recorder.traffic(model_id)
        if traffic is None or traffic.video_fps is None:
            return None
        clips = [info for part in attachments if (info := clip_info(part)) is not None]
        plan = frame_times(
            clips, traffic.video_fps, traffic.max_frames or 0, traffic.min_frames_per_clip
        )
        return [
            (clip.video_id, round(clip.start_s + t, 3))
            for clip, times in zip(clips, plan, strict=True)
            for t in times
        ]

    def fit(
        self,
        model_id: str,
        role: str,
        context: RoleContext,
        attachments: Sequence[BinaryContent],
        *,
        extra_settings: ModelSettings | None = None,
        note: str = "",
    ) -> tuple[RoleContext, Sequence[BinaryContent]]:
        """``context`` told the rate its video reaches ``model_id`` at, and ``attachments``
        fitted to the model's context window: where the frames planned would not leave room
        in it for the prompt and the answer (tokens counted as the reservation counts them),
        each clip names the fewer frames the request may carry (``max_frames`` in its
        metadata, which the frame plan, the adapter and the budget all read) and the prompt
        states the rate that leaves. Deterministic, so a caller may fit first to record what
        a call shows. Raises :class:`ProviderError` before anything is spent when not even a
        frame a clip fits, naming the window."""
        shown = self._with_video_rates(context, model_id, attachments)
        traffic = self.recorder.traffic(model_id)
        if not attachments or traffic is None or traffic.context_window is None:
            return shown, attachments  # no window to fit: no prompt rendered here for it
        settings = role_settings(role, extra_settings)
        fitted = list(attachments)
        cap: int | None = None
        for _ in range(4):  # the rate note changes the prompt's length a little: settle it
            text = render_prompt(shown) + (f"\n\n{note}" if note else "")
            messages: list[ModelMessage] = [
                ModelRequest(parts=[UserPromptPart(content=[text, *fitted])])
            ]
            found = self.recorder.frames_that_fit(model_id, messages, settings)
            if found is None or found[0] <= found[1]:
                return shown, fitted
            _planned, fits, base = found
            clips = sum(1 for part in fitted if clip_info(part) is not None)
            floor = clips * max(traffic.min_frames_per_clip, 1)
            if fits < floor:
                window = traffic.context_window
                raise ProviderError(
                    f"a {role} request to {model_id!r} does not fit its context window of "
                    f"{window:,} tokens: its prompt is ~{base:,} tokens and its answer may take "
                    f"{settings.get('max_tokens'):,}, leaving room for {fits} frame(s) where "
                    f"{clips} clip(s) need {floor} at least; raise "
                    f"providers.models.{model_id!r}.context_window where the server allows "
                    "(vLLM's --max-model-len), or lower frame_height"
                )
            cap = min(fits, cap - 1) if cap is not None and fits >= cap else fits
            fitted = [_with_frame_cap(part, cap) for part in attachments]
            cleared = _without_rates(context)
            shown = self._with_video_rates(cleared, model_id, fitted)
        return shown, fitted

    def _with_video_rates(
        self, context: RoleContext, model_id: str, attachments: Sequence[BinaryContent]
    ) -> RoleContext:
        # A context that says at what rate its video is sent (its prompt states it: it has
        # ``video_rates``) is told the rate this model's request carries, whoever built it (a
        # gate, a smoke call), unless it was told one already.
        told = getattr(context, "video_rates", None)
        if told is None or told:
            return context
        if isinstance(context, PairJudgeContext) and context.receives not in (
            "frames",
            "frames+transcript",
        ):
            return context  # a judge given sound or text only is told no video rate
        rates = self.video_rates(model_id, attachments)
        return context.model_copy(update={"video_rates": rates}) if rates else context


def role_settings(role: str, extra: ModelSettings | None = None) -> ModelSettings:
    """The model settings a call of ``role`` is made with: its output-token cap, temperature
    0 and its thinking, then ``extra`` (a condition's thinking budget) over them."""
    spec = role_spec(role)
    settings = ModelSettings(
        max_tokens=spec.max_output_tokens, temperature=0.0, thinking=spec.thinking
    )
    if extra:
        settings = ModelSettings(**{**settings, **extra})
    return settings


def _with_frame_cap(part: BinaryContent, cap: int) -> BinaryContent:
    """``part`` (a clip) naming the most frames its request may carry; others unchanged."""
    if clip_info(part) is None:
        return part
    # Built anew: ``dataclasses.replace`` would lose the identifier (an init-only name).
    return BinaryContent(
        data=part.data,
        media_type=part.media_type,
        identifier=part.identifier,
        vendor_metadata={**(part.vendor_metadata or {}), "max_frames": cap},
    )


def _without_rates(context: RoleContext) -> RoleContext:
    """``context`` with no video rate filled in (so it is told the fitted ones)."""
    if "video_rates" in type(context).model_fields:
        return context.model_copy(update={"video_rates": ()})
    return context


class _ParametersSeen(Exception):
    """Ends the agent run that shows which request parameters an agent sends."""


class _SeeParameters(CallWrapper):
    """Keeps the request parameters an agent run hands its model, and stops the run there."""

    def __init__(self) -> None:
        super().__init__(TestModel())
        self.seen: ModelRequestParameters | None = None

    async def answer(self, call: ModelCall) -> ModelResponse:
        """Keeps the call's parameters; never answers."""
        self.seen = call.parameters
        raise _ParametersSeen


async def _output_parameters(agent: Agent[None, Any]) -> ModelRequestParameters:
    """The request parameters ``agent`` sends for its output type (the output tool, the
    output object, the output mode left to the model): one run against a model that keeps them
    and answers nothing. They do not depend on the model for a run's first request (pydantic-ai
    resolves the ``auto`` output mode inside the model's own ``prepare_request``)."""
    seer = _SeeParameters()
    with contextlib.suppress(_ParametersSeen):
        await agent.run("", model=seer)
    if seer.seen is None:  # pragma: no cover - an agent run always makes its first request
        raise RuntimeError("the agent run made no model request")
    return seer.seen


class _Answered(CallWrapper):
    """A model that answers with a response already received (and recorded): calls nothing."""

    def __init__(self, wrapped: Model, response: ModelResponse) -> None:
        super().__init__(wrapped)
        self.response = response

    async def answer(self, call: ModelCall) -> ModelResponse:
        """The response given at construction."""
        return self.response


_OUTPUT_MODES: dict[tuple[str, type[BaseModel], str], tuple[str, frozenset[str]]] = {}


def _output_mode(
    model: Model,
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    output_type: type[BaseModel],
) -> tuple[str, frozenset[str]]:
    """The output mode ``model`` resolves ``parameters`` to under ``settings`` (tool, native or
    prompted, as its profile and the thinking setting decide) and the output tools it then
    sends: the model's own :meth:`Model.prepare_request`, once per adapter class, model name
    and provider, output type (``parameters`` are its) and settings (its warnings about
    settings the model ignores are the request's own to give)."""
    base = model
    while isinstance(base, WrapperModel):  # the adapter itself, not the wrappers around it
        base = base.wrapped
    key = (
        f"{type(base).__module__}.{type(base).__qualname__}:{base.model_name}:{base.system}",
        output_type,
        json.dumps(dict(settings or {}), sort_keys=True, default=str),
    )
    found = _OUTPUT_MODES.get(key)
    if found is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _settings, prepared = model.prepare_request(settings, parameters)
        found = _OUTPUT_MODES[key] = (
            prepared.output_mode,
            frozenset(tool.name for tool in prepared.output_tools),
        )
    return found


def read_output(
    model: Model,
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    response: ModelResponse,
    output_type: type[T],
) -> T | None:
    """The output an agent run reads from ``response`` when the answer has the one shape a
    well-behaved model gives: in the tool mode, the output tool called once and no text; in the
    native and prompted modes, one text that is a JSON object, no tool call. ``None`` for any
    other answer, or one that does not validate: an agent's own reading decides those
    (markdown fences, several texts, a refusal, a cut-off answer, the error message)."""
    if any(not isinstance(p, TextPart | ToolCallPart | ThinkingPart) for p in response.parts):
        return None
    mode, tools = _output_mode(model, settings, parameters, output_type)
    texts = [p.content for p in response.parts if isinstance(p, TextPart) and p.content]
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    try:
        if mode == "tool" and not texts and len(calls) == 1 and calls[0].tool_name in tools:
            args = calls[0].args
            if isinstance(args, str):
                return output_type.model_validate_json(args or "{}")
            return output_type.model_validate(args or {})
        # A text not opening with "{": pydantic-ai looks for markdown fences in it.
        if mode in ("native", "prompted") and not calls and len(texts) == 1 and texts[0][:1] == "{":
            return output_type.model_validate_json(texts[0])
    except ValidationError:
        return None
    return None


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


def video_rates(
    attachments: Sequence[BinaryContent], traffic: Traffic | None
) -> tuple[VideoRate, ...]:
    """The rate each clip of ``attachments`` is sent at, for a model whose calls travel as
    ``traffic`` says: for a frame-based provider (``traffic.video_fps`` set) the frames of
    :func:`tools.providers.base.frame_times` — the plan its adapter sends and the budget
    reserves — over the clip's seconds, thinned when the request's ``max_frames`` cannot hold
    them all; for native video (Gemini) or a model of unknown traffic, the clip's own rate."""
    clips = [info for part in attachments if (info := clip_info(part)) is not None]
    if not clips:
        return ()
    if traffic is None or traffic.video_fps is None:
        return tuple(
            VideoRate(segment_id=c.segment_id, seconds=c.duration_s, fps=c.fps, asked_fps=c.fps)
            for c in clips
        )
    fps, floor = traffic.video_fps, traffic.min_frames_per_clip
    cap = traffic.max_frames or 0
    plan = frame_times(clips, fps, cap, floor)
    unthinned = frame_times(clips, fps, 0, floor)
    out: list[VideoRate] = []
    for clip, times, wanted in zip(clips, plan, unthinned, strict=True):
        asked = clip.fps if clip.fixed else min(clip.fps, fps) if clip.fps > 0 else fps
        frames = len(times)
        # Frames the caller fixed are spaced at the clip's own rate; else spread over its span.
        spread = frames / clip.duration_s if clip.duration_s > 0 else asked
        out.append(
            VideoRate(
                segment_id=clip.segment_id,
                seconds=clip.duration_s,
                fps=clip.fps if clip.fixed else spread,
                asked_fps=asked,
                frames=frames,
                max_frames=cap if frames < len(wanted) else None,
            )
        )
    return tuple(out)


def clip_output(text: str, limit: int = REJECTED_OUTPUT_CHARS) -> str:
    """What of a rejected output goes back into the next prompt: all of it up to ``limit``
    characters (room for a whole Phase II set the structural gate passes), then a note of
    how much more there was."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit:,} more characters]"


def qa_text(qa: QA) -> str:
    """A QA as a rejected output is fed back: its question and its whole gold answer (cut only
    past the structural gate's own length limit)."""
    gold = clip_output(qa.gold_answer, REJECTED_ANSWER_CHARS)
    return f"Question: {qa.question}\n\nGold answer:\n{gold}"


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

    def phase1_context(
        self,
        segments: tuple[SegmentEvidence, SegmentEvidence],
        feedback: tuple[Feedback, ...] = (),
    ) -> Phase1Context:
        """The QA generator's context for ``segments``: these limits, and the earlier
        rejections it is shown (``feedback``)."""
        return Phase1Context(
            segments=segments,
            min_paragraphs=self.min_paragraphs,
            max_paragraphs=self.max_paragraphs,
            min_cited_chunks=self.min_cited_chunks,
            max_cited_chunks=self.max_cited_chunks,
            feedback=feedback,
        )


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
        models, limits = seed.models or self.models, seed.limits or self.limits
        videos = seed.evidence.videos(limits.generator_clip)
        try:
            if phase == 1:
                qa = await self.runner.run(
                    seed,
                    PHASE1_GENERATOR.name,
                    models.model(PHASE1_GENERATOR_SLOT.key),
                    limits.phase1_context(segments, _feedback(items)),
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
                models.model(PHASE2_GENERATOR_SLOT.key),
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
