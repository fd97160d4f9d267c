"""Recorded calls: the one wrapper every model call passes through.

For each call it computes the request key — a hash of the role, the model, the messages, the
attachments' content keys, the output schema and the settings — then either serves a recorded
response (replay: free, and marked as replayed) or reserves the worst case against the budget,
makes the call, settles the actual cost and records response, usage and cost as events in the
seed's stream. In strict mode a call that the log does not hold raises ``ReplayDivergence``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from policies.budget import Budget, BudgetExhausted, Reservation
from policies.prices import PriceTable, Usage
from policies.tokens import CallShape, estimate_input_tokens, worst_case_micros
from store.errors import ProviderError, ReplayDivergence
from store.events import CallFailed, CallRecorded, CallRefused, CallReserved, Event

Mode = Literal["live", "strict", "counterfactual"]
DEFAULT_MAX_OUTPUT_TOKENS = 8192


def _part_key(part: object) -> Any:
    if isinstance(part, str):
        return part
    if isinstance(part, BinaryContent):
        # The identifier is the clip's content key (source file, span, fps, height, audio):
        # stable across processes, unlike re-encoded bytes.
        return {
            "media": part.media_type,
            "id": part.identifier,
            "meta": part.vendor_metadata or {},
        }
    return repr(part)


def request_key(
    role: str,
    model: str,
    messages: list[ModelMessage],
    params: ModelRequestParameters,
    settings: ModelSettings | None,
) -> str:
    """The hash that identifies a call for replay."""
    parts: list[Any] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    content = part.content
                    items = [content] if isinstance(content, str) else list(content)
                    parts.append(["user", [_part_key(p) for p in items]])
                elif isinstance(part, SystemPromptPart):
                    parts.append(["system", part.content])
                else:
                    parts.append([part.part_kind, repr(getattr(part, "content", ""))])
        else:
            parts.append(["response", ModelMessagesTypeAdapter.dump_python([message], mode="json")])
    schema = [
        [tool.name, tool.parameters_json_schema]
        for tool in (*params.output_tools, *params.function_tools)
    ]
    payload = {
        "role": role,
        "model": model,
        "messages": parts,
        "output": schema,
        "settings": dict(settings or {}),
    }
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def encode_response(response: ModelResponse) -> Any:
    """A response as JSON for the log."""
    return ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]


def decode_response(data: Any) -> ModelResponse:
    """A logged response back as pydantic-ai's object."""
    message = ModelMessagesTypeAdapter.validate_python([data])[0]
    assert isinstance(message, ModelResponse)
    return message


def call_shape(
    model: str, messages: list[ModelMessage], settings: ModelSettings | None
) -> CallShape:
    """What a call carries, for the budget's worst case and the offline usage."""
    chars = 0
    video_seconds = 0.0
    audio_seconds = 0.0
    fps = 0.5
    height = 720
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            content = getattr(part, "content", "")
            items = [content] if isinstance(content, str) else list(content)
            for item in items:
                if isinstance(item, str):
                    chars += len(item)
                elif isinstance(item, BinaryContent) and item.media_type.startswith("video/"):
                    meta = item.vendor_metadata or {}
                    seconds = float(meta.get("end_s", 0.0)) - float(meta.get("start_s", 0.0))
                    video_seconds += max(seconds, 0.0)
                    fps = float(meta.get("fps", fps))
                    height = int(meta.get("height", height))
                    if meta.get("audio"):
                        audio_seconds += max(seconds, 0.0)
    max_output = int((settings or {}).get("max_tokens") or DEFAULT_MAX_OUTPUT_TOKENS)
    return CallShape(
        model=model,
        text_chars=chars,
        video_seconds=video_seconds,
        video_fps=fps,
        video_height=height,
        audio_seconds=audio_seconds,
        max_output_tokens=max_output,
    )


def response_output_chars(response: ModelResponse) -> int:
    """Characters the model wrote (text and tool-call arguments)."""
    total = 0
    for part in response.parts:
        if isinstance(part, TextPart):
            total += len(part.content)
        elif isinstance(part, ToolCallPart):
            total += len(part.args_as_json_str())
    return total


@dataclass
class RecordedCalls:
    """Responses from earlier runs' logs, by request key, in the order they were recorded."""

    by_key: dict[str, list[CallRecorded]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> RecordedCalls:
        """Index every recorded call (first-hand or replayed) of a log."""
        index = cls()
        for event in events:
            if isinstance(event, CallRecorded):
                index.by_key[event.key].append(event)
        return index

    def get(self, key: str, occurrence: int) -> CallRecorded | None:
        """The ``occurrence``-th recorded response to this key, if the log holds one."""
        found = self.by_key.get(key, [])
        return found[occurrence] if occurrence < len(found) else None


@dataclass(frozen=True)
class CallContext:
    """Who is calling: the seed, the phase and gate, the role, and the priced model id."""

    seed_id: str
    role: str
    model: str  # the configured live model id: what the call is priced as
    phase: int | None = None
    gate: str | None = None

    def fields(self, call_id: str, key: str) -> dict[str, Any]:
        """What every call event says about the call."""
        return {
            "call_id": call_id,
            "key": key,
            "role": self.role,
            "model": self.model,
            "phase": self.phase,
            "gate": self.gate,
        }


Append = Callable[[Event], Awaitable[None]]


class CallRecorder:
    """Shared by every call of a run: the budget, the prices, the recorded index, the mode."""

    def __init__(
        self,
        *,
        budget: Budget,
        prices: PriceTable,
        recorded: RecordedCalls | None = None,
        mode: Mode = "live",
        offline: bool = False,
    ) -> None:
        self.budget = budget
        self.prices = prices
        self.recorded = recorded or RecordedCalls()
        self.mode = mode
        self.offline = offline
        self._seen: dict[tuple[str, str], int] = defaultdict(int)
        self._ids: dict[str, int] = defaultdict(int)
        self.live_calls = 0
        self.replayed_calls = 0
        self.missing: list[tuple[str, str, str]] = []  # counterfactual: (seed, role, key)

    def _call_id(self, seed_id: str) -> str:
        self._ids[seed_id] += 1
        return f"{seed_id}:{self._ids[seed_id]}"

    def reset_seed(self, seed_id: str, calls_done: int, seen: dict[str, int]) -> None:
        """Resume a seed: its call ids and per-key occurrences continue from its log."""
        self._ids[seed_id] = calls_done
        for key, count in seen.items():
            self._seen[(seed_id, key)] = count

    async def call(
        self,
        wrapped: Model,
        context: CallContext,
        append: Append,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        params: ModelRequestParameters,
    ) -> ModelResponse:
        """Serve from the record, or reserve → call → settle → record."""
        key = request_key(context.role, context.model, messages, params, settings)
        occurrence = self._seen[(context.seed_id, key)]
        self._seen[(context.seed_id, key)] += 1
        hit = self.recorded.get(key, occurrence)
        shape = call_shape(context.model, messages, settings)
        if hit is not None:
            return await self._serve(hit, context, append, shape)
        if self.mode == "strict":
            raise ReplayDivergence(
                f"seed {context.seed_id!r} asks for a {context.role} call to {context.model!r} "
                f"(key {key[:12]}…) that the log does not hold: code and history disagree"
            )
        if self.mode == "counterfactual":
            self.missing.append((context.seed_id, context.role, key))
            raise ReplayDivergence(
                f"seed {context.seed_id!r} would need a {context.role} call not in the log"
            )
        return await self._live(wrapped, context, append, messages, settings, params, key, shape)

    async def _serve(
        self, hit: CallRecorded, context: CallContext, append: Append, shape: CallShape
    ) -> ModelResponse:
        call_id = self._call_id(context.seed_id)
        cost = hit.cost_micros
        if self.mode != "live":
            # A replay reports what the run cost: the recorded actual cost, under its own cap
            # (a counterfactual policy's budget can refuse it). Live runs get it for free.
            reservation = await self._reserve(context, call_id, hit.key, shape, append)
            self.budget.settle(reservation, cost)
        await append(
            CallRecorded(
                **context.fields(call_id, hit.key),
                response=hit.response,
                input_tokens=hit.input_tokens,
                output_tokens=hit.output_tokens,
                cached_tokens=hit.cached_tokens,
                cost_micros=cost,
                offline=hit.offline,
                replayed=True,
            )
        )
        self.replayed_calls += 1
        return decode_response(hit.response)

    async def _reserve(
        self, context: CallContext, call_id: str, key: str, shape: CallShape, append: Append
    ) -> Reservation:
        needed = worst_case_micros(self.prices, shape)
        try:
            reservation = self.budget.reserve(context.seed_id, needed, call_id)
        except BudgetExhausted as exc:
            await append(
                CallRefused(
                    key=key,
                    role=context.role,
                    model=context.model,
                    needed_micros=needed,
                    reason=str(exc),
                )
            )
            raise
        await append(
            CallReserved(
                **context.fields(call_id, key),
                reserved_micros=needed,
            )
        )
        return reservation

    async def _live(
        self,
        wrapped: Model,
        context: CallContext,
        append: Append,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        params: ModelRequestParameters,
        key: str,
        shape: CallShape,
    ) -> ModelResponse:
        call_id = self._call_id(context.seed_id)
        reservation = await self._reserve(context, call_id, key, shape, append)
        try:
            response = await wrapped.request(messages, settings, params)
        except Exception as exc:
            self.budget.release(reservation, 0)
            await append(
                CallFailed(
                    **context.fields(call_id, key),
                    error=f"{type(exc).__name__}: {exc}",
                )
            )
            raise ProviderError(
                f"{context.role} call to {context.model!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        usage = self._usage(shape, response)
        cost = self.prices.cost_micros(context.model, usage)
        self.budget.settle(reservation, cost)
        await append(
            CallRecorded(
                **context.fields(call_id, key),
                response=encode_response(response),
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_input_tokens,
                cost_micros=cost,
                offline=self.offline,
            )
        )
        self.live_calls += 1
        return response

    def _usage(self, shape: CallShape, response: ModelResponse) -> Usage:
        if self.offline:
            # Offline answers are priced as the configured live model would be: its token rules
            # for what the call carried, and what the answer would take to write.
            counted = estimate_input_tokens(shape)
            output = math.ceil(response_output_chars(response) / 4)
            return Usage(
                input_text_tokens=counted.input_text_tokens,
                input_image_tokens=counted.input_image_tokens,
                input_video_tokens=counted.input_video_tokens,
                input_audio_tokens=counted.input_audio_tokens,
                output_tokens=min(output, shape.max_output_tokens),
            )
        reported: RequestUsage = response.usage
        return Usage(
            input_text_tokens=max(reported.input_tokens - reported.cache_read_tokens, 0),
            cached_input_tokens=reported.cache_read_tokens,
            output_tokens=reported.output_tokens,
        )


class NoCallModel(WrapperModel):
    """Stands in for every model during a strict replay: any request is an error."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Never answers."""
        raise ReplayDivergence(
            f"strict replay tried to call {self.wrapped.model_name!r}: replay makes no model call"
        )


class RecordedModel(WrapperModel):
    """A pydantic-ai model whose every request goes through a :class:`CallRecorder`."""

    def __init__(
        self, wrapped: Model, recorder: CallRecorder, context: CallContext, append: Append
    ) -> None:
        super().__init__(wrapped)
        self.recorder = recorder
        self.context = context
        self.append = append
        self.last_response: ModelResponse | None = None

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Served from the record, or made live under the budget."""
        self.last_response = await self.recorder.call(
            self.wrapped,
            self.context,
            self.append,
            messages,
            model_settings,
            model_request_parameters,
        )
        return self.last_response
