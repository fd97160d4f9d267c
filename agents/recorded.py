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
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
from pydantic_ai.exceptions import (
    ContentFilterError,
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelRequestTimeout,
    ModelServerError,
    ModelUnavailableError,
    UnexpectedModelBehavior,
)
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
from pydantic_ai.models.batch import Batch, BatchRequest
from pydantic_ai.settings import ModelSettings

from agents.batching import Batcher, batch_from_json, batch_to_json
from policies.budget import Budget, BudgetExhausted, Reservation
from policies.prices import PriceTable, Usage
from policies.ratelimits import RetryPolicy, Sleep, Traffic
from policies.tokens import (
    CallShape,
    estimate_input_tokens,
    worst_case_micros,
)
from store.answers import AnsweredBy
from store.errors import ProviderError, ReplayDivergence
from store.events import (
    CallBatched,
    CallFailed,
    CallRecorded,
    CallRefused,
    CallReserved,
    CallRetried,
    Event,
)
from store.eventstore import StoredEvent
from tools.providers.base import (
    CallWrapper,
    ClipInfo,
    ModelCall,
    clip_info,
    frame_times,
    shown_height,
)

Mode = Literal["live", "strict", "counterfactual"]
DEFAULT_MAX_OUTPUT_TOKENS = 8192


def _part_key(part: object) -> Any:
    if isinstance(part, str):
        return part
    if isinstance(part, BinaryContent):
        # The identifier is the clip's content key (source file, span, fps, height, audio):
        # stable across processes, unlike re-encoded bytes. The source's path is the machine's
        # and the width follows from the source and the height: neither is part of the key.
        return {
            "media": part.media_type,
            "id": part.identifier,
            "meta": {
                k: v for k, v in (part.vendor_metadata or {}).items() if k not in _UNKEYED_META
            },
        }
    return repr(part)


_UNKEYED_META = frozenset({"path", "width"})


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
    schema: list[Any] = [
        [tool.name, tool.parameters_json_schema]
        for tool in (*params.output_tools, *params.function_tools)
    ]
    if params.output_object is not None:
        schema.append(["object", params.output_object.json_schema])
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


def call_clips(messages: list[ModelMessage]) -> list[ClipInfo]:
    """The video clips a call attaches, in order."""
    out: list[ClipInfo] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            content = getattr(part, "content", "")
            if isinstance(content, str):
                continue
            out.extend(info for item in content if (info := clip_info(item)) is not None)
    return out


def call_shape(
    model: str, messages: list[ModelMessage], settings: ModelSettings | None
) -> CallShape:
    """What a call carries, for the budget's worst case and the offline usage. Video is counted
    as the provider samples it natively: each clip at its own rate (frame-based providers are
    counted by :meth:`CallRecorder._effective`, as their adapter sends them)."""
    chars = 0
    transcript_chars = 0
    video_seconds = 0.0
    audio_seconds = 0.0
    frames = 0
    fps = 0.5
    height = 0
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            content = getattr(part, "content", "")
            items = [content] if isinstance(content, str) else list(content)
            for item in items:
                if isinstance(item, str):
                    chars += len(item)
                    transcript_chars += _transcript_chars(item)
                elif isinstance(item, BinaryContent) and item.media_type.startswith("audio/"):
                    meta = item.vendor_metadata or {}
                    seconds = float(meta.get("end_s", 0.0)) - float(meta.get("start_s", 0.0))
                    audio_seconds += max(seconds, 0.0)
                elif (info := clip_info(item)) is not None:
                    video_seconds += info.duration_s
                    frames += info.native_frames
                    fps = info.fps
                    height = max(height, info.height)
                    if info.audio:
                        audio_seconds += info.duration_s
    max_output = int((settings or {}).get("max_tokens") or DEFAULT_MAX_OUTPUT_TOKENS)
    return CallShape(
        model=model,
        text_chars=chars,
        video_seconds=video_seconds,
        video_fps=fps,
        video_height=height or 720,
        audio_seconds=audio_seconds,
        max_output_tokens=max_output,
        transcript_chars=min(transcript_chars, chars),
        video_frames=frames if video_seconds > 0 else None,
    )


_TRANSCRIPTS_RE = re.compile(r"^## Transcripts\n(.*?)(?=^## |^<context>|\Z)", re.S | re.M)


def _transcript_chars(text: str) -> int:
    """Characters of segment transcript a prompt carries: its transcripts section, twice (the
    ``<context>`` JSON repeats every chunk's text)."""
    found = _TRANSCRIPTS_RE.search(text)
    return 2 * len(found.group(1)) if found else 0


def response_output_chars(response: ModelResponse) -> int:
    """Characters the model wrote (text and tool-call arguments)."""
    total = 0
    for part in response.parts:
        if isinstance(part, TextPart):
            total += len(part.content)
        elif isinstance(part, ToolCallPart):
            total += len(part.args_as_json_str())
    return total


Recorded = CallRecorded | CallFailed


@dataclass
class RecordedCalls:
    """Responses from earlier runs' logs, by request key, in the order they were recorded
    (with the seq each was stored at, when known: strict replay names it in what it reports)."""

    by_key: dict[str, list[tuple[Recorded, int]]] = field(default_factory=lambda: defaultdict(list))

    @staticmethod
    def _answer(event: Event) -> bool:
        # A refusal is the model's answer to that request, and a replay gives it again.
        return isinstance(event, CallRecorded) or (
            isinstance(event, CallFailed) and event.outcome == "refusal"
        )

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> RecordedCalls:
        """Index every recorded call (first-hand or replayed) of a log, refusals included."""
        index = cls()
        for event in events:
            if cls._answer(event):
                assert isinstance(event, CallRecorded | CallFailed)
                index.by_key[event.key].append((event, 0))
        return index

    @classmethod
    def from_stored(cls, stored: Iterable[StoredEvent]) -> RecordedCalls:
        """The same from stored events, keeping their seqs."""
        index = cls()
        for row in stored:
            if row.type not in ("CallRecorded", "CallFailed"):
                continue
            event = row.event()
            if cls._answer(event):
                assert isinstance(event, CallRecorded | CallFailed)
                index.by_key[event.key].append((event, row.seq))
        return index

    def add(self, events: Iterable[Event]) -> None:
        """Index more of a log (a seed a worker just claimed)."""
        for key, calls in RecordedCalls.from_events(events).by_key.items():
            self.by_key[key].extend(calls)

    def get(self, key: str, occurrence: int) -> Recorded | None:
        """The ``occurrence``-th recorded response to this key, if the log holds one."""
        found = self.hit(key, occurrence)
        return None if found is None else found[0]

    def hit(self, key: str, occurrence: int) -> tuple[Recorded, int] | None:
        """That response with the seq it was stored at (0 when not known)."""
        found = self.by_key.get(key, [])
        return found[occurrence] if occurrence < len(found) else None


@dataclass(frozen=True)
class ServedMismatch:
    """Strict replay served a recorded call whose record disagrees with what the call would
    have recorded: the record's seq and what differs (a cost, a usage count)."""

    seq: int
    seed_id: str
    key: str
    what: str


class ModelRefused(Exception):
    """The provider declined to answer (a content filter, a refusal): the call's outcome, not a
    failure of the provider. The caller treats it like unusable output."""


@dataclass(frozen=True)
class Failure:
    """What went wrong with one attempt, and whether another attempt may help."""

    kind: str
    transient: bool
    status: int | None
    retry_after_s: float | None
    message: str
    # Whether the attempt may have been processed, and billed, though no answer says what it
    # cost (:func:`may_have_billed`): then it counts against the cap at its reservation.
    billed: bool = False


#: Failure kinds whose request reached the service and whose outcome is unknown: it may have
#: been processed and billed. A timeout after the request was written and a connection dropped
#: after the body went out leave the server running the request (an HTTP client's timeout
#: does not cancel it server-side: the OpenAI and Gemini APIs bill the tokens a request
#: processed, and a non-streaming request that timed out on the client was processed all the
#: same); a 5xx may come after the model ran; a 2xx whose body could not be read, or a reply
#: that broke the SDK's expectations, came from a model that ran. Proven free: a 429 or a quota
#: refusal (the service refuses before processing: OpenAI's error-code guide, Gemini's
#: RESOURCE_EXHAUSTED, DashScope's Throttling codes) and any other 4xx (a request refused as
#: it stands: auth, not found, too long).
UNKNOWN_OUTCOMES = frozenset({"timeout", "connection", "server", "malformed", "unexpected"})

#: Exception class names (anywhere in the chain) of a connection that never opened: httpx's
#: ``ConnectError``/``ConnectTimeout`` (which the OpenAI, Gemini and DashScope SDKs' clients
#: raise, or wrap, before a byte of the request is sent) and the OS's refusal.
_NEVER_SENT = frozenset({"ConnectError", "ConnectTimeout", "ConnectionRefusedError"})


def may_have_billed(kind: str, exc: BaseException) -> bool:
    """Whether a failed attempt of ``kind`` (raised as ``exc``) may have been processed and
    billed by the service: see :data:`UNKNOWN_OUTCOMES`; a connection that never opened
    sent nothing."""
    if kind not in UNKNOWN_OUTCOMES:
        return False
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in _NEVER_SENT:
            return False
        current = current.__cause__ or current.__context__
    return True


def classify_failure(exc: BaseException) -> Failure:
    """Sort an exception from a model request (pydantic-ai's categories, whatever the SDK), and
    say whether it may have been billed (:func:`may_have_billed`)."""
    found = _classify(exc)
    return replace(found, billed=may_have_billed(found.kind, exc))


def _classify(exc: BaseException) -> Failure:
    message = f"{type(exc).__name__}: {exc}"
    status = exc.status_code if isinstance(exc, ModelHTTPError) else None
    retry_after = exc.retry_after if isinstance(exc, ModelAPIError) else None
    if isinstance(exc, ContentFilterError):
        return Failure("refusal", False, status, None, message)
    if isinstance(exc, ModelQuotaExceededError):
        # The account's quota or credit is spent (OpenAI insufficient_quota, a Gemini daily
        # RESOURCE_EXHAUSTED, DashScope Arrearage or AllocationQuota.FreeTierOnly; its plain
        # Throttling.AllocationQuota is a per-minute rate limit, retried): waiting will not help,
        # so it is not retried like a rate limit; the seed is parked with the provider's words.
        return Failure("quota", False, status, None, message)
    if isinstance(exc, ModelRateLimitError) or status == 429:
        return Failure("rate_limit", True, status or 429, retry_after, message)
    if isinstance(exc, ModelConnectionError | ModelRequestTimeout | TimeoutError):
        kind = (
            "timeout"
            if "imeout" in type(exc).__name__ or isinstance(exc, TimeoutError)
            else ("connection")
        )
        return Failure(kind, True, status, retry_after, message)
    if isinstance(exc, ModelServerError | ModelUnavailableError) or (status or 0) >= 500:
        return Failure("server", True, status, retry_after, message)
    if isinstance(exc, ModelHTTPError | ModelRequestRejectedError):
        # Other 4xx: the request itself is wrong (auth, not found, too long); retrying will not
        # help, and the seed is parked with the provider's message.
        return Failure("rejected", False, status, None, message)
    if isinstance(exc, ModelAPIError | ValueError):
        # An answer that could not be read (a malformed body): the next attempt may be whole.
        return Failure("malformed", True, status, retry_after, message)
    if isinstance(exc, UnexpectedModelBehavior):
        return Failure("unexpected", False, status, None, message)
    return Failure("error", False, status, None, message)


@dataclass(frozen=True)
class CallContext:
    """Who is calling: the seed, the phase and gate, the role, and the priced model id."""

    seed_id: str
    role: str
    model: str  # the configured live model id: what the call is priced as
    phase: int | None = None
    gate: str | None = None
    template: str = ""  # content hash of the prompt template the request was rendered from

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


# Roles whose prompt is transcript windows: a rehearsal at another segment length scales their
# whole text (other roles scale only their transcripts section; see ``Pricing.scale``).
WINDOW_ROLES = frozenset({"transcript_answerer"})


@dataclass(frozen=True)
class Pricing:
    """How the recorder prices what it records.

    ``scale`` multiplies the video, audio and transcript a call carries when it is priced offline
    (a rehearsal of paper-length segments on a short demo playlist). ``batch_text`` prices offline
    text-only calls to batch-capable models at batch rates (a rehearsal of ``--batch``).
    """

    scale: float = 1.0
    batch_text: bool = False
    window_scale: float | None = None  # the transcript test's windows (capped): None = scale

    @property
    def windows(self) -> float:
        """How much longer the transcript test's windows are priced (they stop growing at
        their cap, while segments go on)."""
        return self.scale if self.window_scale is None else self.window_scale


@dataclass
class _Call:
    """One call on its way: what is sent to which model, for whom, and where its events go."""

    wrapped: Model
    context: CallContext
    append: Append
    messages: list[ModelMessage]
    settings: ModelSettings | None
    params: ModelRequestParameters
    key: str
    shape: CallShape
    call_id: str = ""
    in_batch: bool = False  # submitted in a batch job (CallBatched is in the log)

    def fields(self) -> dict[str, Any]:
        """What every event about this call says about it."""
        return self.context.fields(self.call_id, self.key)

    async def send(self) -> ModelResponse:
        """One request to the provider."""
        return await self.wrapped.request(self.messages, self.settings, self.params)

    def batch_request(self, custom_id: str) -> BatchRequest:
        """The call as one request of a batch job."""
        return BatchRequest(
            custom_id=custom_id,
            messages=self.messages,
            model_settings=self.settings,
            model_request_parameters=self.params,
        )


class CallRecorder:
    """Shared by every call of a run: the budget, the prices, the recorded index, the mode, and
    how calls travel to each model (retries, rate limits, caching)."""

    def __init__(
        self,
        *,
        budget: Budget,
        prices: PriceTable,
        recorded: RecordedCalls | None = None,
        mode: Mode = "live",
        offline: bool = False,
        traffic: Callable[[str], Traffic | None] | None = None,
        sleep: Sleep | None = None,
        pricing: Pricing | None = None,
        batcher: Batcher | None = None,
        prices_at: Callable[[int], PriceTable] | None = None,
    ) -> None:
        self.batcher = batcher
        # A replay's prices by the seq a recorded call was logged at: a run resumed under other
        # prices made its later calls under those (RunResumed records them).
        self.prices_at = prices_at
        # (seed, request key) → (call id, batch handle, custom id): calls submitted in a batch
        # job before a restart, collected from that job instead of being sent again.
        self.pending_batches: dict[tuple[str, str], tuple[str, dict[str, Any], str]] = {}
        self.budget = budget
        self.prices = prices
        self.recorded = recorded or RecordedCalls()
        self.mode = mode
        self.offline = offline
        self.traffic = traffic or (lambda _model: None)
        self.pricing = pricing or Pricing()
        self._sleep: Sleep = sleep or anyio.sleep
        self._seen: dict[tuple[str, str], int] = defaultdict(int)
        self._ids: dict[str, int] = defaultdict(int)
        self._cached: set[tuple[str, str]] = set()  # offline cache simulation: (seed, model)
        # The first answer each (seed, request key) got: an identical request later in the seed
        # (a generator repeating a QA makes identical verifier requests) is answered from it.
        self._answered: dict[tuple[str, str], CallRecorded] = {}
        self.live_calls = 0
        self.replayed_calls = 0
        self.retries = 0
        self.missing: list[tuple[str, str, str]] = []  # counterfactual: (seed, role, key)
        self.mismatches: list[ServedMismatch] = []  # strict replay: records that do not add up

    def offline_for(self, model: str) -> bool:
        """Whether the offline provider answers ``model``'s calls: in an offline run, every
        model but a real one run on this machine (its traffic says ``real_local``), which
        answers as itself and is recorded and priced as what it is."""
        if not self.offline:
            return False
        traffic = self.traffic(model)
        return not (traffic is not None and traffic.real_local)

    def answerer(self, model: str) -> AnsweredBy:
        """Who answers ``model``'s calls made now (not served from the log): the offline
        harness, a real local model, or a live provider."""
        if self.offline_for(model):
            return "offline"
        traffic = self.traffic(model)
        return "real-local" if traffic is not None and traffic.real_local else "live"

    def _call_id(self, seed_id: str) -> str:
        self._ids[seed_id] += 1
        return f"{seed_id}:{self._ids[seed_id]}"

    def reset_seed(
        self,
        seed_id: str,
        calls_done: int,
        seen: dict[str, int],
        history: Iterable[Event] = (),
    ) -> None:
        """Resume a seed: its call ids and per-key occurrences continue from its log; offline,
        the context caches its calls wrote (``history``) are still there, as the Gemini adapter
        finds its caches in the log after a restart."""
        self._ids[seed_id] = calls_done
        for key, count in seen.items():
            self._seen[(seed_id, key)] = count
        for event in history:
            if isinstance(event, CallRecorded):
                self._answered.setdefault((seed_id, event.key), event)
            if isinstance(event, CallRecorded) and event.offline and event.usage.get("cache_write"):
                self._cached.add((seed_id, event.model))

    def forget_seed(self, seed_id: str, history: Iterable[Event]) -> None:
        """A long-lived recorder drops what it held for a seed that left this process (its log
        keeps it all): a daemon's memory stays flat over thousands of seeds."""
        self._ids.pop(seed_id, None)
        for key in [k for k in self._seen if k[0] == seed_id]:
            del self._seen[key]
        for key in [k for k in self._answered if k[0] == seed_id]:
            del self._answered[key]
        self._cached = {c for c in self._cached if c[0] != seed_id}
        for event in history:
            if isinstance(event, CallRecorded | CallFailed):
                self.recorded.by_key.pop(event.key, None)
        for key in [k for k in self.pending_batches if k[0] == seed_id]:
            del self.pending_batches[key]

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
        found = self.recorded.hit(key, occurrence)
        shape = self._effective(
            context, call_shape(context.model, messages, settings), call_clips(messages)
        )
        if found is not None:
            return await self._serve(found[0], found[1], context, append, shape)
        earlier = self._answered.get((context.seed_id, key))
        if earlier is not None and self.mode == "live":
            # No request is paid twice: the same request in the same seed gets the answer it
            # got before, recorded as replayed (free); a replay finds that record in its turn.
            return await self._serve(earlier, 0, context, append, shape)
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
        call = _Call(wrapped, context, append, messages, settings, params, key, shape)
        pending = self.pending_batches.pop((context.seed_id, key), None)
        if pending is not None and self.batcher is not None:
            return await self._collect(call, pending)
        return await self._live(call)

    def _batchable(self, model: str, shape: CallShape) -> bool:
        """A live call goes through its provider's batch API: a batcher runs, and the call is
        text-only to a batch-capable family. The same rule as :meth:`_batch` (which prices a
        rehearsal's calls), so a rehearsal prices as batch exactly the calls a live run would
        batch. Video and pictures stay live: DashScope's batch API serves no multimodal model in
        the international region (Model Studio, "Batch inference": Singapore supports qwen-max,
        qwen-plus, qwen-flash, qwen-turbo), and a Gemini batch line carries no context cache
        (it may expire before the job runs; see ``GeminiModel.batch_encode``): at Gemini's
        rates a video cached live costs 1 (written) + 0.1 per call that reads it, against 0.5
        per call in batch, so live caching is the cheaper once three calls read the cache."""
        if self.batcher is None or self.offline_for(model):
            return False
        if shape.video_seconds > 0 or shape.images:
            return False
        traffic = self.traffic(model)
        return traffic is not None and traffic.batchable

    async def _collect(
        self, call: _Call, pending: tuple[str, dict[str, Any], str]
    ) -> ModelResponse:
        """A call submitted in a batch job before a restart: wait for that job's answer. Its
        reservation is still open in the log (and counted as spent) until this records it."""
        assert self.batcher is not None
        call.call_id, handle, custom_id = pending
        context = call.context
        try:
            response = await self.batcher.collect(
                call.wrapped, batch_from_json(handle), call.batch_request(custom_id)
            )
        except Exception as exc:
            failure = classify_failure(exc)
            await call.append(
                CallFailed(**call.fields(), error=f"{failure.kind}: {failure.message[:2000]}")
            )
            raise ProviderError(
                f"{context.role} call to {context.model!r} in batch {handle.get('id')!r} "
                f"failed: {failure.message}"
            ) from exc
        return await self._record(call, response, 1, None)

    async def _serve(
        self,
        hit: CallRecorded | CallFailed,
        seq: int,
        context: CallContext,
        append: Append,
        shape: CallShape,
    ) -> ModelResponse:
        call_id = self._call_id(context.seed_id)
        prices = self.prices_at(seq) if self.prices_at is not None else self.prices
        cost = hit.cost_micros if isinstance(hit, CallRecorded) else hit.charged_micros
        if isinstance(hit, CallRecorded) and hit.replayed and self.mode != "live":
            cost = 0  # it was served from the log in the run too: it cost the run nothing
        if self.mode != "live":
            # A replay reports what the run cost: the recorded actual cost, under its own cap
            # (a counterfactual policy's budget can refuse it). Live runs get it for free.
            reservation = await self._reserve(context, call_id, hit.key, shape, append, prices)
            self.budget.settle(reservation, cost)
            if isinstance(hit, CallRecorded) and not hit.replayed:
                self._check_record(hit, seq, context, shape, prices)
        self.replayed_calls += 1
        if isinstance(hit, CallFailed):
            await append(
                CallFailed(
                    **context.fields(call_id, hit.key),
                    error=hit.error,
                    charged_micros=cost,
                    outcome="refusal",
                )
            )
            raise ModelRefused(hit.error)
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
                usage=hit.usage,
                batch=hit.batch,
                attempts=0,  # served from the log: no request went out
                template=context.template,
                answered_by="log",
            )
        )
        return decode_response(hit.response)

    def _check_record(
        self,
        hit: CallRecorded,
        seq: int,
        context: CallContext,
        shape: CallShape,
        prices: PriceTable,
    ) -> None:
        """Strict replay: price the served answer as the live path would have for this very
        request (its usage from the shape or the response, the run's prices) and note where the
        record says otherwise — an edited cost or usage shows here even with its hash redone."""
        try:
            response = decode_response(hit.response)
            usage, provider_cost, batch = self._usage(context, shape, response, hit.offline)
            cost = (
                provider_cost
                if provider_cost is not None
                else prices.cost_micros(context.model, usage, batch=batch)
            )
        except Exception as exc:  # an edited response may not even decode
            self.mismatches.append(
                ServedMismatch(seq, context.seed_id, hit.key, f"the record cannot be priced: {exc}")
            )
            return
        counts = _usage_counts(usage)
        if cost != hit.cost_micros:
            what = f"it says it cost {hit.cost_micros} micro-USD; its usage prices at {cost}"
        elif counts != hit.usage:
            what = f"its usage {hit.usage!r} is not what the call carried ({counts!r})"
        elif (usage.input_tokens, usage.output_tokens) != (hit.input_tokens, hit.output_tokens):
            what = (
                f"its token counts ({hit.input_tokens} in, {hit.output_tokens} out) are not the "
                f"call's ({usage.input_tokens} in, {usage.output_tokens} out)"
            )
        else:
            return
        self.mismatches.append(ServedMismatch(seq, context.seed_id, hit.key, what))

    def _worst_case(self, model: str, shape: CallShape, prices: PriceTable | None = None) -> int:
        prices = prices or self.prices
        needed = worst_case_micros(prices, shape)
        traffic = self.traffic(model)
        if traffic is not None and traffic.cache_ttl_s and shape.video_seconds > 0:
            # The call may create the seed's context cache: writing it and keeping it for its
            # lifetime come on top of reading it.
            counted = estimate_input_tokens(shape)
            media = counted.input_video_tokens + counted.input_audio_tokens
            needed += prices.cost_micros(
                model,
                Usage(
                    cache_write_tokens=media,
                    cache_write_audio_tokens=counted.input_audio_tokens,
                    cache_storage_token_s=media * traffic.cache_ttl_s,
                ),
            )
        return needed

    async def _reserve(
        self,
        context: CallContext,
        call_id: str,
        key: str,
        shape: CallShape,
        append: Append,
        prices: PriceTable | None = None,
    ) -> Reservation:
        needed = self._worst_case(context.model, shape, prices)
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
                    cap=exc.which,
                )
            )
            raise
        try:
            await append(
                CallReserved(
                    **context.fields(call_id, key),
                    reserved_micros=needed,
                )
            )
        except BaseException:
            # Not in the log (fenced off after a takeover, or the store failed): no request
            # goes out, so nothing is spent and the hold is given back.
            self.budget.settle(reservation, 0)
            raise
        return reservation

    async def _attempts(self, call: _Call, held: _Held) -> tuple[ModelResponse, int]:
        """The request, retried on transient failures; ``(response, attempts)``. An attempt
        that may have been billed (its outcome unknown: :data:`UNKNOWN_OUTCOMES`) is charged
        at its reservation before the retry, and the retry reserves again: refused by a cap,
        the call stops there (``BudgetExhausted``), its attempts' money counted."""
        context = call.context
        traffic = self.traffic(context.model) or Traffic(retry=RetryPolicy(max_retries=0))
        tokens = estimate_input_tokens(call.shape).input_tokens
        attempt = 0
        batched = self._batchable(context.model, call.shape)
        while True:
            attempt += 1
            try:
                if batched and attempt == 1:
                    # A failed batch request is retried live (at list price) like any other.
                    return await self._batched(call), attempt
                if traffic.limiter is not None:
                    async with traffic.limiter.slot(tokens):
                        return await call.send(), attempt
                return await call.send(), attempt
            except (BudgetExhausted, ReplayDivergence):
                raise
            except Exception as exc:
                failure = classify_failure(exc)
                if not failure.transient or attempt > traffic.retry.max_retries:
                    raise _Failed(failure, attempt) from exc
                wait = traffic.retry.wait_s(attempt, failure.retry_after_s, salt=call.call_id)
                if failure.retry_after_s is not None and traffic.limiter is not None:
                    # The provider said when it takes requests again: every caller of the
                    # limiter (every worker, for a fleet-wide one) waits for it, not this one.
                    await traffic.limiter.pause(failure.retry_after_s)
                self.retries += 1
                charged = held.charge_all(self.budget) if failure.billed else 0
                await call.append(
                    CallRetried(
                        **call.fields(),
                        attempt=attempt,
                        kind=failure.kind,
                        status=failure.status,
                        wait_s=round(wait, 3),
                        error=failure.message[:2000],
                        charged_micros=charged,
                    )
                )
                await self._sleep(wait)
                if held.reservation is None:
                    held.reservation = await self._reserve(
                        context, call.call_id, call.key, call.shape, call.append
                    )

    async def _batched(self, call: _Call) -> ModelResponse:
        assert self.batcher is not None

        async def submitted(batch: Batch) -> None:
            call.in_batch = True
            await call.append(
                CallBatched(**call.fields(), custom_id=call.call_id, batch=batch_to_json(batch))
            )

        return await self.batcher.call(call.wrapped, call.batch_request(call.call_id), submitted)

    async def _live(self, call: _Call) -> ModelResponse:
        context = call.context
        call.call_id = self._call_id(context.seed_id)
        held = _Held(await self._reserve(context, call.call_id, call.key, call.shape, call.append))
        try:
            response, attempts = await self._attempts(call, held)
        except anyio.get_cancelled_exc_class():
            # Stopped past the grace period: the request may have reached the provider and been
            # billed, so the reservation is kept as spent. A call out in a batch job stays open
            # in the log (a restart collects its answer from the job); any other is recorded
            # as interrupted, and made again when the seed resumes. (Stopped between two
            # attempts, the last one's charge is in the log already and nothing is held.)
            with anyio.CancelScope(shield=True):
                charged = held.charge_all(self.budget)
                if call.in_batch:
                    raise
                await call.append(
                    CallFailed(
                        **call.fields(),
                        error="interrupted: the worker stopped while the call was in flight",
                        charged_micros=charged,
                        outcome="interrupted",
                    )
                )
            raise
        except _Failed as failed:
            failure = failed.failure
            # An attempt whose outcome is unknown may have been billed: it counts at its
            # reservation; one refused before processing is free (:data:`UNKNOWN_OUTCOMES`).
            charged = held.charge_all(self.budget) if failure.billed else held.free(self.budget)
            refusal = failure.kind == "refusal"
            await call.append(
                CallFailed(
                    **call.fields(),
                    error=f"{failure.kind}: {failure.message[:2000]}",
                    charged_micros=charged,
                    outcome="refusal" if refusal else "error",
                    attempts=failed.attempts,
                )
            )
            if refusal:
                raise ModelRefused(failure.message) from failed.__cause__
            # A connection that failed says where it tried (a server down, a wrong base_url).
            url = call.wrapped.base_url if failure.kind in ("connection", "timeout") else None
            raise ProviderError(
                f"{context.role} call to {context.model!r} failed after {failed.attempts} "
                f"attempt(s): {failure.message}" + (f" (at {url})" if url else "")
            ) from failed.__cause__
        return await self._record(call, response, attempts, held.reservation)

    async def _record(
        self,
        call: _Call,
        response: ModelResponse,
        attempts: int,
        reservation: Reservation | None,
    ) -> ModelResponse:
        context = call.context
        offline = self.offline_for(context.model)
        usage, provider_cost, batch = self._usage(context, call.shape, response, offline)
        cost = (
            provider_cost
            if provider_cost is not None
            else self.prices.cost_micros(context.model, usage, batch=batch)
        )
        if reservation is not None:
            self.budget.settle(reservation, cost)
        recorded = CallRecorded(
            **call.fields(),
            response=encode_response(response),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_input_tokens,
            cost_micros=cost,
            offline=offline,
            usage=_usage_counts(usage),
            batch=batch,
            attempts=attempts,
            provider_cost=provider_cost is not None,
            template=context.template,
            answered_by=self.answerer(context.model),
        )
        await call.append(recorded)
        self._answered.setdefault((context.seed_id, call.key), recorded)
        self.live_calls += 1
        return response

    def _usage(
        self, context: CallContext, shape: CallShape, response: ModelResponse, offline: bool
    ) -> tuple[Usage, int | None, bool]:
        """``(usage, the provider's own cost if it sent one, batch-priced)``; ``offline``: the
        call was answered by the offline provider (priced from its shape)."""
        if offline:
            return self._offline_usage(context, shape, response), None, self._batch(context, shape)
        reported = response.usage
        details = reported.details or {}
        video = details.get("video_prompt_tokens", 0)
        image = details.get("image_prompt_tokens", 0)
        audio = reported.input_audio_tokens or details.get("audio_prompt_tokens", 0)
        text = max(reported.input_tokens - video - image - audio, 0)
        cache = (response.provider_details or {}).get("playlisteval_cache") or {}
        written = int(cache.get("tokens", 0)) if cache.get("created") else 0
        cached = min(reported.cache_read_tokens, reported.input_tokens)
        cached_audio = min(reported.cache_audio_read_tokens, cached, audio)
        usage = Usage(
            input_text_tokens=text,
            input_image_tokens=image,
            input_video_tokens=video,
            input_audio_tokens=audio,
            cached_input_tokens=cached,
            output_tokens=reported.output_tokens,
            cache_write_tokens=written,
            cache_storage_token_s=written * int(cache.get("ttl_s", 0)),
            cached_audio_tokens=cached_audio,
            # The cache holds the clips: its audio share is what this call read of it.
            cache_write_audio_tokens=min(cached_audio, written),
        )
        own = (response.provider_details or {}).get("cost_usd")
        provider_cost = None
        if isinstance(own, int | float) and not isinstance(own, bool) and own >= 0:
            provider_cost = math.ceil(float(own) * 1_000_000)
        batch = bool((response.provider_details or {}).get("batch"))
        return usage, provider_cost, batch

    def _batch(self, context: CallContext, shape: CallShape) -> bool:
        """An offline call is priced at batch rates (a rehearsal of ``--batch``): exactly when
        :meth:`_batchable` would send it live through a batch API — text-only (no video and no
        pictures) to a batch-capable family."""
        if not self.pricing.batch_text:
            return False
        if shape.video_seconds > 0 or shape.images:
            return False
        traffic = self.traffic(context.model)
        return traffic is not None and traffic.batchable

    def frames_that_fit(
        self, model: str, messages: list[ModelMessage], settings: ModelSettings | None
    ) -> tuple[int, int, int] | None:
        """``(frames planned, most frames that fit, tokens without frames)`` of a call to
        ``model`` whose traffic names a context window: the frames as the adapter plans them
        and the tokens as the reservation counts them (:meth:`_effective`, its family's rule),
        with room left for the answer's ``max_tokens``. None: no window known, or no frames."""
        traffic = self.traffic(model)
        if traffic is None or traffic.context_window is None or traffic.video_fps is None:
            return None
        clips = call_clips(messages)
        if not clips:
            return None
        context = CallContext(seed_id="", role="", model=model)
        shape = self._effective(context, call_shape(model, messages, settings), clips)
        planned = shape.video_frames or 0
        base = estimate_input_tokens(replace(shape, video_frames=0)).input_tokens
        per_frame = estimate_input_tokens(replace(shape, video_frames=1)).input_tokens - base
        room = traffic.context_window - shape.max_output_tokens - base
        fits = room // per_frame if per_frame > 0 else planned
        return planned, max(fits, 0), base

    def _effective(
        self, context: CallContext, shape: CallShape, clips: list[ClipInfo]
    ) -> CallShape:
        """What the call will carry to the provider: frames as its adapter samples and caps them
        (:func:`tools.providers.base.frame_times`, the same plan the adapter sends), counted
        by its family's token rule, and (offline rehearsals) segments scaled to another
        length."""
        scale = self.pricing.scale if self.offline_for(context.model) else 1.0
        if scale != 1.0:
            # Longer segments carry longer transcripts; the instructions stay as they are. The
            # transcript test's windows are all transcript, and grow only up to their cap.
            windows = context.role in WINDOW_ROLES
            transcript = shape.text_chars if windows else shape.transcript_chars
            grown = self.pricing.windows if windows else scale
            clips = [replace(c, end_s=c.start_s + c.duration_s * scale) for c in clips]
            shape = replace(
                shape,
                video_seconds=shape.video_seconds * scale,
                audio_seconds=shape.audio_seconds * scale,
                text_chars=shape.text_chars + math.ceil(transcript * (grown - 1)),
                video_frames=(
                    sum(max(1, math.ceil(c.duration_s * c.fps)) for c in clips) if clips else None
                ),
            )
        traffic = self.traffic(context.model)
        if traffic is not None and traffic.token_rule is not None:
            shape = replace(shape, token_rule=traffic.token_rule)
        if traffic is not None and clips and traffic.video_fps is not None:
            plan = frame_times(
                clips, traffic.video_fps, traffic.max_frames or 0, traffic.min_frames_per_clip
            )
            shape = replace(shape, video_frames=sum(len(times) for times in plan))
        if traffic is not None and clips and traffic.frame_height is not None:
            # A clip whose frames the caller fixed goes at its own height (shown_height).
            height = max(shown_height(c, traffic.frame_height) for c in clips)
            shape = replace(shape, video_height=min(shape.video_height, height))
        if clips:
            # The frames' width where every clip has one picture shape (InternVL's tiles follow
            # the aspect ratio); with none known, or several, the token rule takes its dearest.
            aspects = {
                round(c.width / c.height, 3) if c.width and c.height else None for c in clips
            }
            aspect = aspects.pop() if len(aspects) == 1 else None
            shape = replace(
                shape,
                video_clips=len(clips),
                video_width=round(shape.video_height * aspect) if aspect else None,
            )
        return shape

    def _offline_usage(
        self, context: CallContext, shape: CallShape, response: ModelResponse
    ) -> Usage:
        # Offline answers are priced as the configured live model would be: its token rules
        # (the expected count, not the reservation's worst case) for what the call carries,
        # and what the answer would take to write.
        counted = estimate_input_tokens(shape, expected=True)
        output = min(math.ceil(response_output_chars(response) / 4), shape.max_output_tokens)
        cached = written = storage = audio = 0
        traffic = self.traffic(context.model)
        media = counted.input_video_tokens + counted.input_audio_tokens
        if traffic is not None and traffic.cache_ttl_s and media:
            # As the Gemini adapter does it: the first call with these clips writes the seed's
            # cache (and keeps it for its lifetime), and every call reads the clips from it.
            # A seed sends the same two clips to every video call of a model: one cache each.
            clips = (context.seed_id, context.model)
            if clips not in self._cached:
                self._cached.add(clips)
                written, storage = media, media * traffic.cache_ttl_s
            cached, audio = media, counted.input_audio_tokens
        # The input as the token rules counted it, with the answer and the cache added.
        return replace(
            counted,
            cached_input_tokens=cached,
            output_tokens=output,
            cache_write_tokens=written,
            cache_storage_token_s=storage,
            cached_audio_tokens=audio,
            cache_write_audio_tokens=audio if written else 0,
        )


@dataclass
class _Held:
    """The reservation a live call's current attempt is made under (None between an attempt
    charged as may-have-been-billed and the next one's reservation)."""

    reservation: Reservation | None

    def charge_all(self, budget: Budget) -> int:
        """Keep the whole reservation as spent (the attempt may have been billed); returns it."""
        if self.reservation is None:
            return 0
        charged = self.reservation.micros
        budget.release(self.reservation, charged)
        self.reservation = None
        return charged

    def free(self, budget: Budget) -> int:
        """Give the reservation back (the attempt cost nothing); returns 0."""
        if self.reservation is not None:
            budget.release(self.reservation, 0)
            self.reservation = None
        return 0


class _Failed(Exception):
    def __init__(self, failure: Failure, attempts: int) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.attempts = attempts


def _usage_counts(usage: Usage) -> dict[str, int]:
    counts = {
        "text": usage.input_text_tokens,
        "image": usage.input_image_tokens,
        "video": usage.input_video_tokens,
        "audio": usage.input_audio_tokens,
        "cached": usage.cached_input_tokens,
        "output": usage.output_tokens,
        "cache_write": usage.cache_write_tokens,
        "cache_storage_token_s": usage.cache_storage_token_s,
        "cached_audio": usage.cached_audio_tokens,
        "cache_write_audio": usage.cache_write_audio_tokens,
    }
    return {k: v for k, v in counts.items() if v}


class NoCallModel(CallWrapper):
    """Stands in for every model during a strict replay: any request is an error."""

    async def answer(self, call: ModelCall) -> ModelResponse:
        """Never answers."""
        raise ReplayDivergence(
            f"strict replay tried to call {self.wrapped.model_name!r}: replay makes no model call"
        )


class RecordedModel(CallWrapper):
    """A pydantic-ai model whose every request goes through a :class:`CallRecorder`."""

    def __init__(
        self, wrapped: Model, recorder: CallRecorder, context: CallContext, append: Append
    ) -> None:
        super().__init__(wrapped)
        self.recorder = recorder
        self.context = context
        self.append = append
        self.last_response: ModelResponse | None = None

    async def answer(self, call: ModelCall) -> ModelResponse:
        """Served from the record, or made live under the budget."""
        self.last_response = await self.recorder.call(
            self.wrapped,
            self.context,
            self.append,
            call.messages,
            call.settings,
            call.parameters,
        )
        return self.last_response
