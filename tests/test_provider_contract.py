"""One contract for every provider: for the live ones the real SDK (google-genai, openai,
dashscope) drives our adapter against a local fake server that speaks the provider's wire format;
the offline provider and the local ``transformers`` family (a tiny random Qwen3-VL) run in this
process (``tests/local_harness.py``). Every call goes through the recorded-call wrapper exactly as
a curation run makes it.

Each provider must put the clips, the transcript and the output schema on the wire; parse the
structured answer; report usage that settles as the price table's cost; and turn each way a
real API fails — 429 with Retry-After, 500, a timeout, a malformed body, output cut at the token
limit, a refusal — into a recorded outcome in the event log, never a crash. A provider with no
network meets every clause that does not happen on a wire; ``NOT_APPLICABLE`` says which it does
not meet and why, one line each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.models import Model

from agents.recorded import CallRecorder, call_clips, call_shape
from agents.workers import MalformedOutput, ModelRunner, SeedCall
from policies.budget import Budget
from policies.prices import PriceTable, Usage
from policies.ratelimits import RetryPolicy, Traffic
from policies.tokens import worst_case_micros
from store.errors import ProviderError
from store.events import (
    PROVIDER_RESOURCES_STREAM,
    CallFailed,
    CallRecorded,
    CallReserved,
    CallRetried,
    Event,
    ProviderResourceCreated,
)
from store.eventstore import open_event_store
from tests.fakes_dashscope import dashscope_harness
from tests.fakes_gemini import gemini_harness
from tests.fakes_openai import openai_compatible_harness, openai_harness
from tests.fakes_providers import RETRY_AFTER_S, Fault, Harness
from tests.local_harness import (
    MAX_FRAMES,
    LocalHarness,
    LocalRequest,
    ProviderHarness,
    offline_harness,
    transformers_harness,
)
from tests.provider_clips import DemoClips
from tools.contracts.roles import (
    AnyContext,
    FreeAnswer,
    ParametricContext,
    SufficiencyContext,
    SufficiencyVerdict,
    cite,
)
from tools.offline.vision import COLOURS, decode_clip, describe_frames
from tools.providers.base import frame_times
from tools.providers.resources import EventResourceLedger

# These tests drive the adapters against local fake servers (see conftest).
pytestmark = pytest.mark.usefixtures("allow_model_requests")

PROVIDERS: dict[str, tuple[Callable[..., AbstractContextManager[Any]], str]] = {
    "gemini": (gemini_harness, "gemini-3-flash-preview"),
    "openai": (openai_harness, "gpt-5.4-mini"),
    "openai-compatible": (openai_compatible_harness, "qwen3-vl-30b-a3b"),
    "dashscope": (dashscope_harness, "qwen-3.7-plus"),
}
# The providers with no network edge: they run in this process.
LOCAL_PROVIDERS: dict[str, tuple[Callable[..., AbstractContextManager[Any]], str]] = {
    # answering as the model it stands in for
    "offline": (offline_harness, "gemini-3-flash-preview"),
    "transformers": (transformers_harness, "qwen3-vl-30b-a3b"),
}
LOCAL = tuple(sorted(LOCAL_PROVIDERS))
# A loaded machine (three suite workers on two cores, the fakes in this process) can take more
# than a second to answer a request that is not faulted: the client waits 3 s, and a "timeout"
# fault holds its answer longer than that (FakeProviderServer.timeout_sleep_s).
CLIENT_TIMEOUT_S = 3.0
FAULT_HOLD_S = 3.5

_FRAMES_ELSEWHERE = "tests/test_frames_reserved.py holds its frames against its reservation"
_ON_THE_WIRE = "happens on a network (HTTP status, timeout, body); it runs in this process"
# Clause → the providers that do not meet it, each with its one-line reason; every other
# provider of PROVIDERS and LOCAL_PROVIDERS must meet it.
NOT_APPLICABLE: dict[str, dict[str, str]] = {
    "clips, transcript and schema reach the model": {},
    "a text role sends no media": {},
    "usage settles as the price table's cost": {},
    "the log holds reserved, then recorded": {},
    "transient failures are retried": {
        name: f"a transient failure {_ON_THE_WIRE}" for name in LOCAL
    },
    "failures past the retries park the call": {
        name: f"a provider's failing status {_ON_THE_WIRE}" for name in LOCAL
    },
    "truncated output is a rejection": {
        "offline": "it writes its whole answer: it has no token limit to cut it at",
        "transformers": "its tiny model stops after one token; local_vlm tests the cut-off",
    },
    "a refusal is a rejection": {
        "offline": "it never refuses: it has no content filter",
        "transformers": "a local model has no content filter to refuse with",
    },
    "a failure inside the model is a recorded CallFailed": {
        name: "its model runs behind the network: the failing-status clauses cover it"
        for name in PROVIDERS
    },
    "frames sent are the frames reserved": {
        "gemini": "native video: Gemini samples the clip at its fps, there is no frame plan",
        **{name: _FRAMES_ELSEWHERE for name in ("openai", "openai-compatible", "dashscope")},
        "offline": "it decodes the clips itself; its call is priced as its stand-in's clips",
    },
    "a video verdict is judged against the frames": {
        **{
            name: "its fake answers as the offline row does from the frames it decoded"
            for name in PROVIDERS
        },
        "transformers": "a random tiny model reads nothing: its frames are the frame-plan clause",
    },
}


def contract(clause: str) -> pytest.MarkDecorator:
    """Run a test for every provider the clause applies to: all but those
    ``NOT_APPLICABLE[clause]`` names (with why, there: the table is the record, not skips)."""
    exempt = NOT_APPLICABLE[clause]
    unknown = set(exempt) - set(PROVIDERS) - set(LOCAL_PROVIDERS)
    assert not unknown, f"NOT_APPLICABLE[{clause!r}] names no provider {sorted(unknown)!r}"
    rows = [name for name in sorted(PROVIDERS) + sorted(LOCAL_PROVIDERS) if name not in exempt]
    assert rows, f"no provider meets {clause!r}"
    return pytest.mark.parametrize("provider", rows, indirect=True)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> DemoClips:
    return DemoClips(tmp_path_factory.mktemp("contract-clips"))


@dataclass
class Provider:
    """One provider under contract: its running fake (or local harness) and the model id it
    serves."""

    name: str
    harness: ProviderHarness
    model_id: str

    @property
    def local(self) -> LocalHarness | None:
        """Its harness when it runs in this process (no network edge)."""
        return self.harness if isinstance(self.harness, LocalHarness) else None


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    """The provider a ``contract(...)`` row names, running for the test."""
    start, model_id = {**PROVIDERS, **LOCAL_PROVIDERS}[request.param]
    with start() as harness:
        server = getattr(harness, "server", None)  # the local providers have no network
        if server is not None:
            server.timeout_sleep_s = FAULT_HOLD_S
        yield Provider(request.param, harness, model_id)


class Sleeps:
    """The recorder's sleep: records the waits it was asked for, without waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@dataclass
class Outcome:
    """What one role call produced: its result (or the error it raised), the events it
    appended (read back from the SQLite log), and the waits it asked for."""

    result: Any
    events: list[Event]
    waits: list[float]
    prices: PriceTable

    def of(self, kind: type[Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def role_call(
    tmp_path: Path,
    provider: Provider,
    context: AnyContext,
    output_type: type[Any],
    *,
    attachments: list[Any] | None = None,
    faults: tuple[Fault, ...] = (),
    traffic_cache_ttl_s: int | None = None,
    calls: int = 1,
    **config: Any,
) -> Outcome:
    """``calls`` role calls as a curation run makes them: ModelRunner → RecordedModel →
    CallRecorder → our adapter → the real SDK → the fake, events into a real SQLite log."""
    store = open_event_store(tmp_path / f"{provider.name}.db")
    prices = PriceTable.load()
    sleeps = Sleeps()
    resources = EventResourceLedger(store)
    traffic = Traffic(
        retry=RetryPolicy(max_retries=3, backoff_s=0.5), cache_ttl_s=traffic_cache_ttl_s
    )
    local = provider.local
    if local is not None:
        traffic = local.traffic(traffic)
    recorder = CallRecorder(
        budget=Budget(50_000_000),
        prices=prices,
        # A curation run on the offline provider prices each call as its stand-in's.
        offline=local is not None and local.offline_recorder,
        traffic=lambda _m: traffic,
        sleep=sleeps,
    )
    models: dict[str, Model] = {}

    def model_for(model_id: str) -> Model:
        if model_id not in models:
            models[model_id] = _build(provider, model_id, resources, config)
        return models[model_id]

    async def append(event: Event) -> None:
        store.append("seed-contract-s1", [event])

    async def main() -> Any:
        runner = ModelRunner(recorder=recorder, model_for=model_for)
        seed = SeedCall(seed_id="s1", evidence=None, append=append)  # type: ignore[arg-type]
        if faults:
            assert isinstance(provider.harness, Harness), "faults are injected on a wire"
            provider.harness.server.fail_next(*faults)
        result: Any = None
        for n in range(calls):
            # Each call asks another question: an identical request in a seed would be
            # answered from its first record, not sent.
            asked = context
            if n and hasattr(context, "question"):
                asked = context.model_copy(update={"question": f"{context.question} ({n + 1})"})
            try:
                result = await runner.run(
                    seed,
                    context.role,
                    provider.model_id,
                    asked,
                    output_type,
                    phase=1,
                    gate="contract",
                    attachments=attachments or (),
                )
            except Exception as exc:
                result = exc
        return result

    result = anyio.run(main)
    events: list[Event] = [s.event() for s in store.read_stream("seed-contract-s1")]
    events += [s.event() for s in store.read_stream(PROVIDER_RESOURCES_STREAM)]
    store.close()
    return Outcome(result, events, sleeps.waits, prices)


def _build(provider: Provider, model_id: str, resources: Any, config: dict[str, Any]) -> Model:
    # Context caching is its own test (below); here each call stands alone.
    options = {"timeout_s": CLIENT_TIMEOUT_S, "context_cache": False, **config}
    if provider.name == "gemini":
        harness: Any = provider.harness
        harness.resources = resources
    model: Model = provider.harness.model(model_id, **options)
    return model


def _sufficiency(clips: DemoClips) -> SufficiencyContext:
    return SufficiencyContext(
        question="What shapes appear on screen in the two episodes, and where?",
        gold_answer="Shapes appear on a coloured background in both episodes.",
        segments=clips.segments,
    )


_TEXT_ROLE = ParametricContext(question="Why does bread dough rise when it is left to rest?")


def _check_answer(outcome: Outcome, provider: Provider, output_type: type[Any]) -> Any:
    """The role's output, parsed; or, from a model that writes garbage (the tiny random one),
    a recorded MalformedOutput rejection — the garbage was paid for and is kept. ``None`` then."""
    local = provider.local
    if local is not None and not local.writes_json:
        assert isinstance(outcome.result, MalformedOutput), outcome.result
        [recorded] = outcome.of(CallRecorded)
        assert recorded.response["finish_reason"] == "stop"
        assert outcome.result.raw  # what it wrote, for the feedback
        return None
    assert isinstance(outcome.result, output_type), outcome.result
    return outcome.result


def _call_events(outcome: Outcome) -> list[str]:
    """The kinds of the call events in the log, in order."""
    kinds = (CallReserved, CallRetried, CallRecorded, CallFailed)
    return [type(e).__name__ for e in outcome.events if isinstance(e, kinds)]


def _expected_usage(reported: dict[str, int]) -> Usage:
    """The usage a provider's report settles as: its modality split where it gives one, the
    rest text; cached tokens as reported."""
    media_tokens = reported.get("image", 0) + reported.get("video", 0) + reported.get("audio", 0)
    return Usage(
        input_text_tokens=reported["input_tokens"] - media_tokens,
        input_image_tokens=reported.get("image", 0),
        input_video_tokens=reported.get("video", 0),
        input_audio_tokens=reported.get("audio", 0),
        cached_input_tokens=reported.get("cached_tokens", 0),
        output_tokens=reported["output_tokens"],
    )


class TestProviderContract:
    """Every provider, the same contract."""

    @contract("clips, transcript and schema reach the model")
    def test_video_role_puts_clips_transcript_and_schema_on_the_wire(
        self, tmp_path: Path, provider: Provider, clips: DemoClips
    ) -> None:
        outcome = role_call(
            tmp_path, provider, _sufficiency(clips), SufficiencyVerdict, attachments=clips.clips
        )
        _check_answer(outcome, provider, SufficiencyVerdict)
        request = provider.harness.model_requests()[-1]
        media = provider.harness.media(request)
        if provider.name == "offline":  # it decodes the clips itself
            assert [m["kind"] for m in media] == ["video", "video"]
            assert [m["segment_id"] for m in media] == [s.segment_id for s in clips.segments]
            assert all(m["fps"] == 0.5 for m in media)
        elif provider.name == "gemini":
            assert [m["kind"] for m in media] == ["video", "video"]
            assert all(m["fps"] == 0.5 for m in media)
        elif provider.name == "dashscope":
            assert [m["kind"] for m in media] == ["video", "video"]
            assert all(m["frames"] >= 4 for m in media)
        elif provider.name == "openai-compatible":  # vLLM takes a Qwen-VL judge's clips as video
            assert [m["kind"] for m in media] == ["video", "video"]
            assert all(m["frames"] >= 1 for m in media)
        else:
            assert len(media) >= 2
            assert {m["kind"] for m in media} == {"image"}
        text = provider.harness.prompt_text(request)
        for segment in clips.segments:
            assert segment.chunks[0].text in text  # the transcript travels as text
            assert segment.video_id in text  # each clip is labelled with its video
        schema = provider.harness.output_schema(request)
        assert schema is not None
        assert "answerable" in str(schema)

    @contract("a text role sends no media")
    def test_text_role_sends_no_media_and_parses_its_answer(
        self, tmp_path: Path, provider: Provider
    ) -> None:
        outcome = role_call(tmp_path, provider, _TEXT_ROLE, FreeAnswer)
        answer = _check_answer(outcome, provider, FreeAnswer)
        assert answer is None or answer.answer
        request = provider.harness.model_requests()[-1]
        assert provider.harness.media(request) == []
        assert _TEXT_ROLE.question in provider.harness.prompt_text(request)

    @contract("usage settles as the price table's cost")
    def test_usage_settles_as_the_price_tables_cost(
        self, tmp_path: Path, provider: Provider, clips: DemoClips
    ) -> None:
        outcome = role_call(
            tmp_path, provider, _sufficiency(clips), SufficiencyVerdict, attachments=clips.clips
        )
        [recorded] = outcome.of(CallRecorded)
        assert recorded.model == provider.model_id
        local = provider.local
        if local is not None and local.offline_recorder:
            # Priced as the model it stands in for would be: the usage that model would report
            # for what the call carried (its clips as that model counts them).
            assert recorded.offline
            expected = outcome.prices.as_usage(recorded.usage)
            assert expected.input_video_tokens > 0
            assert recorded.input_tokens == expected.input_tokens
            assert recorded.output_tokens == expected.output_tokens
        else:
            assert not recorded.offline
            reported = provider.harness.last_usage()
            expected = _expected_usage(reported)
            assert recorded.input_tokens == reported["input_tokens"]
            assert recorded.output_tokens == reported["output_tokens"]
        assert recorded.cost_micros == outcome.prices.cost_micros(provider.model_id, expected)
        assert recorded.cost_micros > 0
        [reserved] = outcome.of(CallReserved)
        assert reserved.reserved_micros >= recorded.cost_micros  # the worst case held

    @contract("the log holds reserved, then recorded")
    def test_a_call_is_reserved_then_recorded_under_one_call_id(
        self, tmp_path: Path, provider: Provider
    ) -> None:
        outcome = role_call(tmp_path, provider, _TEXT_ROLE, FreeAnswer)
        assert _call_events(outcome) == ["CallReserved", "CallRecorded"]
        [reserved], [recorded] = outcome.of(CallReserved), outcome.of(CallRecorded)
        assert (recorded.call_id, recorded.key) == (reserved.call_id, reserved.key)
        assert (recorded.role, recorded.model) == ("parametric_answerer", provider.model_id)
        assert recorded.attempts == 1

    @contract("a failure inside the model is a recorded CallFailed")
    def test_a_failure_inside_the_model_is_a_recorded_call_failed(
        self,
        tmp_path: Path,
        provider: Provider,
        clips: DemoClips,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        assert provider.local is not None
        message = provider.local.fail_inside(monkeypatch)
        outcome = role_call(
            tmp_path, provider, _sufficiency(clips), SufficiencyVerdict, attachments=clips.clips
        )
        assert isinstance(outcome.result, ProviderError), outcome.result
        assert message in str(outcome.result)
        assert _call_events(outcome) == ["CallReserved", "CallFailed"]
        [failed] = outcome.of(CallFailed)
        assert failed.outcome == "error"
        assert failed.attempts == 1  # not a transient failure: no retry
        assert message in failed.error

    @contract("frames sent are the frames reserved")
    def test_frames_sent_follow_the_frame_plan_the_budget_reserved(
        self, tmp_path: Path, provider: Provider, clips: DemoClips
    ) -> None:
        outcome = role_call(
            tmp_path, provider, _sufficiency(clips), SufficiencyVerdict, attachments=clips.clips
        )
        assert provider.local is not None
        traffic = provider.local.traffic(Traffic())
        [request] = provider.harness.model_requests()
        assert isinstance(request, LocalRequest)
        sent = provider.harness.media(request)
        assert {m["kind"] for m in sent} == {"image"}
        assert traffic.video_fps is not None
        assert traffic.frame_height is not None
        clip_infos = call_clips(request.messages)
        plan = frame_times(clip_infos, traffic.video_fps, MAX_FRAMES, traffic.min_frames_per_clip)
        assert len(sent) == sum(len(times) for times in plan)
        native = sum(len(t) for t in frame_times(clip_infos, traffic.video_fps, 0))
        assert len(sent) <= MAX_FRAMES < native  # thinned to the cap, as planned
        assert all(max(size) <= 64 for size in (m["size"] for m in sent))
        [recorded] = outcome.of(CallRecorded)
        assert recorded.response["provider_details"]["images"] == len(sent)
        shape = call_shape(provider.model_id, request.messages, request.settings)
        shape = replace(
            shape,
            video_frames=len(sent),
            video_height=min(shape.video_height, traffic.frame_height),
            token_rule=traffic.token_rule,
        )
        [reserved] = outcome.of(CallReserved)
        assert reserved.reserved_micros == worst_case_micros(outcome.prices, shape)

    @contract("a video verdict is judged against the frames")
    def test_a_video_verdict_is_judged_against_the_frames_of_the_clips(
        self, tmp_path: Path, provider: Provider, clips: DemoClips
    ) -> None:
        """Two claims on one span, one naming a colour its frames show and one a colour they
        never show: only the footage can tell them apart."""
        segment, clip = clips.segments[0], clips.clips[0]
        facts = describe_frames(decode_clip(clip.data, 0.5), segment.start_s)
        seen = sorted({f.colour for f in facts if segment.start_s <= f.t_s < segment.end_s})
        absent = next(c for c in COLOURS if c not in seen)
        span = cite(segment.video_id, segment.start_s, segment.end_s)
        shown, unseen = f"Something {seen[0]} is on screen {span}.", f"A {absent} glow {span}."
        context = SufficiencyContext(
            question="What colours are on screen?",
            gold_answer=f"{shown} {unseen}",
            segments=clips.segments,
        )
        outcome = role_call(
            tmp_path, provider, context, SufficiencyVerdict, attachments=clips.clips
        )
        verdict = _check_answer(outcome, provider, SufficiencyVerdict)
        assert verdict.answerable
        assert verdict.unsupported_claims == (unseen,)
        assert absent in verdict.reason

    @pytest.mark.parametrize("fault", ["429", "500", "timeout", "malformed"])
    @contract("transient failures are retried")
    def test_transient_failures_are_retried_and_recorded(
        self, tmp_path: Path, provider: Provider, fault: Fault
    ) -> None:
        outcome = role_call(tmp_path, provider, _TEXT_ROLE, FreeAnswer, faults=(fault,))
        assert isinstance(outcome.result, FreeAnswer), outcome.result
        [retried] = outcome.of(CallRetried)
        kind = {"429": "rate_limit", "500": "server", "timeout": "timeout"}.get(fault, "malformed")
        assert retried.kind == kind
        if fault == "429":
            assert retried.status == 429
            assert outcome.waits == [float(RETRY_AFTER_S)]  # Retry-After honoured
        if fault == "500":
            assert retried.status == 500
        [recorded] = outcome.of(CallRecorded)
        assert recorded.attempts == 2
        assert len(provider.harness.model_requests()) == 2  # SDK retries are off: ours only

    @contract("failures past the retries park the call")
    def test_failures_past_the_retries_park_the_call_with_the_providers_message(
        self, tmp_path: Path, provider: Provider
    ) -> None:
        outcome = role_call(tmp_path, provider, _TEXT_ROLE, FreeAnswer, faults=("500",) * 4)
        assert isinstance(outcome.result, ProviderError)
        [failed] = outcome.of(CallFailed)
        assert failed.outcome == "error"
        assert failed.attempts == 4
        assert "500" in failed.error or "server" in failed.error.lower()
        assert not outcome.of(CallRecorded)

    @contract("truncated output is a rejection")
    def test_truncated_output_is_a_recorded_rejection(
        self, tmp_path: Path, provider: Provider
    ) -> None:
        outcome = role_call(tmp_path, provider, _TEXT_ROLE, FreeAnswer, faults=("truncated",))
        assert isinstance(outcome.result, MalformedOutput)
        assert "cut off" in str(outcome.result) or "token limit" in str(outcome.result).lower()
        [recorded] = outcome.of(CallRecorded)  # the partial answer was paid for, and is kept
        assert recorded.response["finish_reason"] == "length"
        assert not outcome.of(CallRetried)

    @contract("a refusal is a rejection")
    def test_a_refusal_is_a_recorded_rejection(self, tmp_path: Path, provider: Provider) -> None:
        outcome = role_call(tmp_path, provider, _TEXT_ROLE, FreeAnswer, faults=("refusal",))
        assert isinstance(outcome.result, MalformedOutput)
        assert "refused" in str(outcome.result)
        refusals = [e for e in outcome.of(CallFailed) if e.outcome == "refusal"]
        filtered = [
            e for e in outcome.of(CallRecorded) if e.response["finish_reason"] == "content_filter"
        ]
        assert len(refusals) + len(filtered) == 1
        assert not outcome.of(CallRetried)


def test_gemini_context_cache_shows_in_the_records_at_the_cached_rate(
    tmp_path: Path, clips: DemoClips
) -> None:
    """Two video calls of one seed: the first writes the cache (priced as a write and its
    storage), both read the clips from it at the cached rate; the cache is in the log."""
    with gemini_harness() as harness:
        provider = Provider("gemini", harness, "gemini-3-flash-preview")
        outcome = role_call(
            tmp_path,
            provider,
            _sufficiency(clips),
            SufficiencyVerdict,
            attachments=clips.clips,
            traffic_cache_ttl_s=600,
            calls=2,
            cache_min_tokens=1,
            cache_ttl_s=600,
            context_cache=True,
        )
    first, second = outcome.of(CallRecorded)
    [cache] = [e for e in outcome.of(ProviderResourceCreated) if e.kind == "cache"]
    assert cache.tokens > 0
    assert first.usage["cache_write"] == cache.tokens
    assert first.usage["cache_storage_token_s"] == cache.tokens * 600
    assert "cache_write" not in second.usage
    for call in (first, second):
        assert call.cached_tokens == cache.tokens
    prices = outcome.prices
    read = prices.as_usage(second.usage)
    assert second.cost_micros == prices.cost_micros("gemini-3-flash-preview", read)
    uncached = prices.cost_micros(
        "gemini-3-flash-preview",
        Usage(
            input_text_tokens=read.input_text_tokens,
            input_video_tokens=read.input_video_tokens,
            input_audio_tokens=read.input_audio_tokens,
            output_tokens=read.output_tokens,
        ),
    )
    assert second.cost_micros < uncached
