"""The recorded-call wrapper's resilience: retries that honour Retry-After, failures that park a
seed with the provider's message, refusals as recorded (and replayable) outcomes, and usage
with cache writes priced. Models here are pydantic-ai ``FunctionModel``s raising pydantic-ai's
own error categories; the real SDKs against fake servers are in test_provider_contract.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.exceptions import ContentFilterError, ModelHTTPError, ModelQuotaExceededError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from agents.recorded import (
    CallContext,
    CallRecorder,
    ModelRefused,
    RecordedCalls,
    classify_failure,
)
from policies.budget import Budget
from policies.prices import PriceTable, Usage
from policies.ratelimits import RetryPolicy, Traffic
from store.errors import ProviderError
from store.events import CallFailed, CallRecorded, CallReserved, CallRetried, Event
from store.eventstore import open_event_store


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _prompt() -> list[ModelMessage]:
    from pydantic_ai.messages import UserPromptPart

    return [ModelRequest(parts=[UserPromptPart(content="Say hi.")])]


def _scripted(*outcomes: Exception | ModelResponse) -> FunctionModel:
    queue = list(outcomes)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return FunctionModel(respond, model_name="scripted")


def _http(status: int, body: str = "", retry_after: str | None = None) -> ModelHTTPError:
    headers = {"retry-after": retry_after} if retry_after else None
    return ModelHTTPError(status, "gemini-3-flash", body or {"error": status}, headers=headers)


def _run(
    tmp_path: Path, model: FunctionModel, *, recorder: CallRecorder | None = None
) -> tuple[Any, list[Event], CallRecorder, Sleeps]:
    store = open_event_store(tmp_path / "log.db")
    sleeps = Sleeps()
    recorder = recorder or CallRecorder(
        budget=Budget(10_000_000),
        prices=PriceTable.load(),
        traffic=lambda _m: Traffic(retry=RetryPolicy(max_retries=3, backoff_s=2.0)),
        sleep=sleeps,
    )
    events: list[Event] = []

    async def append(event: Event) -> None:
        store.append("seed-r-s", [event])
        events.append(event)

    async def main() -> Any:
        try:
            return await recorder.call(
                model,
                CallContext(seed_id="s", role="transcript_matcher", model="gemini-3-flash"),
                append,
                _prompt(),
                None,
                ModelRequestParameters(),
            )
        except Exception as exc:
            return exc

    result = anyio.run(main)
    stored = [s.event() for s in store.read_stream("seed-r-s")]
    store.close()
    assert [type(e) for e in stored] == [type(e) for e in events]
    return result, events, recorder, sleeps


def _ok(text: str = "hi") -> ModelResponse:
    return ModelResponse(
        parts=[TextPart(text)],
        usage=RequestUsage(input_tokens=100, output_tokens=5),
        model_name="scripted",
    )


def test_429_waits_what_retry_after_asks_then_succeeds(tmp_path: Path) -> None:
    result, events, recorder, sleeps = _run(
        tmp_path, _scripted(_http(429, retry_after="7"), _http(503), _ok())
    )
    assert isinstance(result, ModelResponse)
    retried = [e for e in events if isinstance(e, CallRetried)]
    assert [(r.kind, r.status) for r in retried] == [("rate_limit", 429), ("server", 503)]
    assert sleeps.waits[0] == 7.0
    assert 2.0 <= sleeps.waits[1] <= 4.0  # second attempt's backoff (2 s doubled, jittered)
    recorded = [e for e in events if isinstance(e, CallRecorded)]
    assert len(recorded) == 1
    assert recorded[0].attempts == 3
    # The 429 was refused before processing: free, its reservation kept for the retry. The 503
    # may have come after the model ran: it counts at its reservation, and the retry reserves
    # again.
    reserved = [e for e in events if isinstance(e, CallReserved)]
    assert len(reserved) == 2
    assert [r.charged_micros for r in retried] == [0, reserved[0].reserved_micros]
    assert recorder.budget.spent_micros == reserved[0].reserved_micros + recorded[0].cost_micros


def test_permanent_failure_is_recorded_with_the_providers_message(tmp_path: Path) -> None:
    result, events, recorder, _ = _run(
        tmp_path, _scripted(_http(401, body="API key not valid. Please pass a valid API key."))
    )
    assert isinstance(result, ProviderError)
    assert "API key not valid" in str(result)
    failed = [e for e in events if isinstance(e, CallFailed)]
    assert len(failed) == 1
    assert failed[0].outcome == "error"
    assert "API key not valid" in failed[0].error
    assert not [e for e in events if isinstance(e, CallRetried)]
    assert recorder.budget.spent_micros == 0


def _quota() -> ModelHTTPError:
    """A 429 the provider says is an exhausted quota, as pydantic-ai raises it (OpenAI's
    insufficient_quota; the adapters' own fakes send the real bodies)."""
    return ModelHTTPError.for_category(
        ModelQuotaExceededError,
        status_code=429,
        model_name="gpt-5.4",
        body={
            "error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}
        },
        provider_error_code="insufficient_quota",
    )


def test_an_exhausted_quota_is_not_retried_like_a_rate_limit(tmp_path: Path) -> None:
    """Waiting does not refill a quota: one attempt, no retries, the provider's words kept."""
    result, events, recorder, sleeps = _run(tmp_path, _scripted(_quota(), _ok()))
    assert isinstance(result, ProviderError)
    assert "exceeded your current quota" in str(result)
    assert not [e for e in events if isinstance(e, CallRetried)]
    assert sleeps.waits == []
    failed = [e for e in events if isinstance(e, CallFailed)]
    assert [(f.outcome, f.attempts) for f in failed] == [("error", 1)]
    assert recorder.budget.spent_micros == 0


def test_retries_run_out_then_the_call_fails(tmp_path: Path) -> None:
    result, events, _, sleeps = _run(tmp_path, _scripted(*[_http(500)] * 4))
    assert isinstance(result, ProviderError)
    assert "after 4 attempt(s)" in str(result)
    assert len(sleeps.waits) == 3
    assert [e.attempts for e in events if isinstance(e, CallFailed)] == [4]


def test_a_refusal_is_an_outcome_that_replays(tmp_path: Path) -> None:
    result, events, _, _ = _run(tmp_path, _scripted(ContentFilterError("blocked: SAFETY")))
    assert isinstance(result, ModelRefused)
    failed = [e for e in events if isinstance(e, CallFailed)]
    assert failed[0].outcome == "refusal"
    # A strict replay serves the refusal again, with no model call.
    replay = CallRecorder(
        budget=Budget(None),
        prices=PriceTable.load(),
        recorded=RecordedCalls.from_events(events),
        mode="strict",
    )
    again, replayed, _, _ = _run(tmp_path / "r", _scripted(), recorder=replay)
    assert isinstance(again, ModelRefused)
    assert replay.replayed_calls == 1
    assert replay.live_calls == 0
    assert [type(e) for e in replayed] == [CallReserved, CallFailed]


@pytest.mark.parametrize(
    ("error", "kind", "transient"),
    [
        (_http(429), "rate_limit", True),
        (_quota(), "quota", False),
        (_http(500), "server", True),
        (_http(400), "rejected", False),
        (TimeoutError(), "timeout", True),
        (ContentFilterError("no"), "refusal", False),
        (ValueError("Expecting value: line 1 column 1"), "malformed", True),
    ],
)
def test_failures_are_classified(error: Exception, kind: str, transient: bool) -> None:
    failure = classify_failure(error)
    assert (failure.kind, failure.transient) == (kind, transient)


def test_cache_writes_and_storage_are_priced() -> None:
    prices = PriceTable.load()
    plain = prices.cost_micros("gemini-3-flash", Usage(input_video_tokens=1_000_000))
    cached_read = prices.cost_micros(
        "gemini-3-flash", Usage(input_video_tokens=1_000_000, cached_input_tokens=1_000_000)
    )
    written = prices.cost_micros(
        "gemini-3-flash",
        Usage(
            input_video_tokens=1_000_000,
            cached_input_tokens=1_000_000,
            cache_write_tokens=1_000_000,
            cache_storage_token_s=1_000_000 * 3600,
        ),
    )
    assert plain == 500_000  # 0.50 USD per M input
    assert cached_read == 50_000  # 0.05 USD per M cached
    assert written == 50_000 + 500_000 + 1_000_000  # read + write at input rate + 1 h storage


def test_a_reservation_the_log_fenced_off_is_given_back_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    """A worker whose seed was taken over: its ``CallReserved`` cannot land, so the request
    never goes out and its hold is released, not left open on the shared accounts."""
    from policies.budget import SharedBudget
    from store.coordination import BudgetAccounts
    from store.errors import StoreConflict

    store = open_event_store(tmp_path / "log.db")
    accounts = BudgetAccounts(store.engine)
    accounts.set_cap("total", 10_000_000)
    budget = SharedBudget(accounts, lambda: ["total"], hold_id=lambda call: f"{call}@zombie")
    recorder = CallRecorder(budget=budget, prices=PriceTable.load())
    sent: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(1)
        return _ok()

    async def fenced(event: Event) -> None:
        raise StoreConflict("seed-r-s moved on: another worker took it over")

    async def main() -> None:
        with pytest.raises(StoreConflict):
            await recorder.call(
                FunctionModel(respond, model_name="scripted"),
                CallContext(seed_id="s", role="transcript_matcher", model="gemini-3-flash"),
                fenced,
                _prompt(),
                None,
                ModelRequestParameters(),
            )

    anyio.run(main)
    total = accounts.account("total")
    store.close()
    assert sent == []
    assert accounts.holds() == 0
    assert total is not None
    assert (total.reserved_micros, total.spent_micros) == (0, 0)
    assert budget.outstanding_micros == 0


def test_the_same_request_twice_in_a_seed_is_paid_once(tmp_path: Path) -> None:
    """No request is paid twice: a seed that sends an identical request again (a generator
    repeating its QA makes identical verifier requests) gets the first answer from the log,
    recorded as replayed, free and without a reservation."""
    store = open_event_store(tmp_path / "log.db")
    recorder = CallRecorder(budget=Budget(10_000_000), prices=PriceTable.load())
    model = _scripted(_ok("first"), _ok("second"))
    events: list[Event] = []

    async def append(event: Event) -> None:
        store.append("seed-r-s", [event])
        events.append(event)

    async def main() -> list[ModelResponse]:
        context = CallContext(seed_id="s", role="transcript_matcher", model="gemini-3-flash")
        return [
            await recorder.call(model, context, append, _prompt(), None, ModelRequestParameters())
            for _ in range(2)
        ]

    first, second = anyio.run(main)
    store.close()
    assert first.parts == second.parts
    recorded = [e for e in events if isinstance(e, CallRecorded)]
    assert [r.replayed for r in recorded] == [False, True]
    assert [r.attempts for r in recorded] == [1, 0]
    assert len([e for e in events if isinstance(e, CallReserved)]) == 1
    assert recorder.budget.spent_micros == recorded[0].cost_micros
    assert recorder.live_calls == 1


@pytest.mark.parametrize("role", ["transcript_answerer", "transcript_matcher"])
def test_a_rehearsal_grows_the_transcript_tests_windows_only_up_to_their_cap(
    tmp_path: Path, role: str
) -> None:
    """Priced at paper length, the transcript test's windows grow by their own (capped) factor,
    not the segments'; other roles are priced at the segments' scale either way."""
    from agents.recorded import Pricing

    tokens: dict[float | None, int] = {}
    for window_scale in (None, 10.0):
        store = open_event_store(tmp_path / f"log-{window_scale}.db")
        recorder = CallRecorder(
            budget=Budget(10_000_000),
            prices=PriceTable.load(),
            offline=True,
            pricing=Pricing(scale=20.0, window_scale=window_scale),
        )
        events: list[Event] = []

        async def append(event: Event, store: Any = store, events: list[Event] = events) -> None:
            store.append("seed-r-s", [event])
            events.append(event)

        async def main(recorder: CallRecorder = recorder) -> None:
            await recorder.call(
                _scripted(_ok()),
                CallContext(seed_id="s", role=role, model="gemini-3-flash-preview"),
                append,
                _prompt(),
                None,
                ModelRequestParameters(),
            )

        anyio.run(main)
        store.close()
        [recorded] = [e for e in events if isinstance(e, CallRecorded)]
        tokens[window_scale] = recorded.input_tokens
    if role == "transcript_answerer":
        assert tokens[10.0] < tokens[None]
    else:
        assert tokens[10.0] == tokens[None]


# -- unknown outcomes are money -------------------------------------------------------------------


def _connect_error() -> Exception:
    """A connection that never opened, as pydantic-ai raises one over httpx's ConnectError."""
    import httpx
    from pydantic_ai.exceptions import ModelAPIError

    try:
        raise httpx.ConnectError("connection refused")
    except httpx.ConnectError as inner:
        try:
            raise ModelAPIError("gemini-3-flash", "Connection error.") from inner
        except ModelAPIError as outer:
            return outer


@pytest.mark.parametrize(
    ("error", "billed"),
    [
        (_http(429), False),  # refused before processing
        (_quota(), False),
        (_http(400), False),
        (_http(401), False),
        (_http(500), True),  # the model may have run
        (_http(503), True),
        (TimeoutError(), True),  # the request was written; the server may still answer it
        (ValueError("Expecting value: line 1 column 1"), True),  # a 2xx body, unread
        (_connect_error(), False),  # never sent
    ],
)
def test_an_attempt_may_have_been_billed_only_when_it_was_sent_and_no_answer_says_otherwise(
    error: Exception, billed: bool
) -> None:
    assert classify_failure(error).billed is billed


def test_timed_out_attempts_count_at_their_reservations_and_each_retry_reserves_again(
    tmp_path: Path,
) -> None:
    result, events, recorder, _ = _run(tmp_path, _scripted(TimeoutError(), TimeoutError(), _ok()))
    assert isinstance(result, ModelResponse)
    reserved = [e for e in events if isinstance(e, CallReserved)]
    retried = [e for e in events if isinstance(e, CallRetried)]
    recorded = [e for e in events if isinstance(e, CallRecorded)]
    assert len(reserved) == 3  # one per attempt sent
    assert [r.charged_micros for r in retried] == [r.reserved_micros for r in reserved[:2]]
    expected = sum(r.reserved_micros for r in reserved[:2]) + recorded[0].cost_micros
    assert recorder.budget.spent_micros == expected
    # The one ledger says the same, and names the uncertain part.
    from store.ledger import spend

    ledger = spend(events)
    assert ledger.spent_micros == expected
    assert ledger.open_micros == 0
    assert (ledger.uncertain_attempts, ledger.uncertain_micros) == (
        2,
        sum(r.reserved_micros for r in reserved[:2]),
    )


def test_a_call_whose_every_attempt_timed_out_is_charged_for_each(tmp_path: Path) -> None:
    result, events, recorder, _ = _run(tmp_path, _scripted(*[TimeoutError()] * 4))
    assert isinstance(result, ProviderError)
    reserved = [e for e in events if isinstance(e, CallReserved)]
    assert len(reserved) == 4
    [failed] = [e for e in events if isinstance(e, CallFailed)]
    assert failed.charged_micros == reserved[-1].reserved_micros
    total = sum(r.reserved_micros for r in reserved)
    assert recorder.budget.spent_micros == total
    from store.ledger import spend

    assert spend(events).spent_micros == total


def test_a_retry_the_cap_refuses_stops_the_call_with_its_attempts_counted(tmp_path: Path) -> None:
    """A slow service cannot be paid more than the cap: the retry after a timeout reserves
    again, and the cap refuses it."""
    from policies.budget import BudgetExhausted

    probe, probe_events, _, _ = _run(tmp_path / "probe", _scripted(_ok()))
    assert isinstance(probe, ModelResponse)
    one = next(e for e in probe_events if isinstance(e, CallReserved)).reserved_micros
    sleeps = Sleeps()
    recorder = CallRecorder(
        budget=Budget(one + one // 2),  # room for one attempt's reservation, not two
        prices=PriceTable.load(),
        traffic=lambda _m: Traffic(retry=RetryPolicy(max_retries=5, backoff_s=1.0)),
        sleep=sleeps,
    )
    result, events, recorder, _ = _run(
        tmp_path / "capped", _scripted(*[TimeoutError()] * 6), recorder=recorder
    )
    assert isinstance(result, BudgetExhausted)
    assert len([e for e in events if isinstance(e, CallReserved)]) == 1
    assert recorder.budget.spent_micros == one <= one + one // 2
    from store.ledger import spend

    assert spend(events).spent_micros == one
