"""The Gemini adapter's own error mapping (uploads, caches) raises what pydantic-ai's
``GoogleModel`` raises for the same failure: the category, the status, the wait Gemini asked for,
and for a transport failure the stage it failed at. The adapter tests check it end to end
against the fake Gemini API; these pin the cases the fake does not send."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from google.genai import errors
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelOverloadedError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelServerError,
    ModelTimeoutError,
    ModelUnavailableError,
)

from agents.recorded import classify_failure
from tools.providers.gemini_errors import map_google_error

MODEL = "gemini-3-flash-preview"
REQUEST = httpx2.Request("POST", "https://generativelanguage.googleapis.com/upload/v1beta/files")


def api_error(
    code: int,
    status: str | None,
    message: str = "",
    details: list[dict[str, Any]] | None = None,
    *,
    headers: dict[str, str] | None = None,
    response_status: int | None = None,
) -> errors.APIError:
    body = {"error": {"code": code, "status": status, "message": message, "details": details or []}}
    response = httpx2.Response(response_status or code, headers=headers or {}, json=body)
    return errors.APIError(code, body, response)


DAILY = {"violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}
MINUTE = {"violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]}


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (api_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", [MINUTE]), ModelRateLimitError),
        (api_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", [DAILY]), ModelQuotaExceededError),
        (api_error(400, "FAILED_PRECONDITION", "Please enable billing"), ModelQuotaExceededError),
        (
            api_error(400, "FAILED_PRECONDITION", "User location is not supported"),
            ModelRequestRejectedError,
        ),
        (api_error(503, "UNAVAILABLE", "The model is overloaded."), ModelOverloadedError),
        (api_error(503, "UNAVAILABLE", "Try again later."), ModelUnavailableError),
        (api_error(500, "INTERNAL", "An internal error"), ModelServerError),
        (api_error(504, "DEADLINE_EXCEEDED", "Deadline"), ModelServerError),
        (
            api_error(400, "INVALID_ARGUMENT", "The input token count (9) exceeds the maximum"),
            ModelContextWindowExceededError,
        ),
        (
            api_error(400, "INVALID_ARGUMENT", "Cached content is too small"),
            ModelRequestRejectedError,
        ),
        (
            api_error(
                400, "INVALID_ARGUMENT", "API key not valid", [{"reason": "API_KEY_INVALID"}]
            ),
            ModelAuthenticationError,
        ),
        (api_error(403, "PERMISSION_DENIED", "Denied"), ModelAuthenticationError),
        (api_error(404, "NOT_FOUND", "File not found"), ModelNotFoundError),
        (api_error(418, None, "teapot"), ModelHTTPError),  # no category: a plain HTTP error
    ],
)
def test_an_api_error_becomes_an_http_error_of_its_category(
    error: errors.APIError, category: type[ModelAPIError]
) -> None:
    mapped = map_google_error(error, MODEL)
    assert isinstance(mapped, ModelHTTPError)
    assert mapped.status_code == error.code
    assert mapped.body == error.details
    assert mapped.provider_error_code == error.status
    assert mapped.model_name == MODEL
    assert not mapped.in_stream
    assert isinstance(mapped, category)
    if category is ModelHTTPError:
        assert type(mapped) is ModelHTTPError


def test_the_wait_comes_from_the_header_else_from_retry_info() -> None:
    retry_info = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13.5s"}]
    from_body = map_google_error(api_error(429, "RESOURCE_EXHAUSTED", "q", retry_info), MODEL)
    assert from_body.retry_after == 13.5
    both = api_error(429, "RESOURCE_EXHAUSTED", "q", retry_info, headers={"Retry-After": "4"})
    assert map_google_error(both, MODEL).retry_after == 4.0
    unreadable = [{"retryDelay": "soon"}, {"retryDelay": "-1s"}]
    assert (
        map_google_error(api_error(429, "RESOURCE_EXHAUSTED", "q", unreadable), MODEL).retry_after
        is None
    )


def test_a_daily_quota_is_not_retried_and_a_rate_limit_is() -> None:
    daily = map_google_error(api_error(429, "RESOURCE_EXHAUSTED", "q", [DAILY]), MODEL)
    minute = map_google_error(api_error(429, "RESOURCE_EXHAUSTED", "q", [MINUTE]), MODEL)
    assert (classify_failure(daily).kind, classify_failure(daily).transient) == ("quota", False)
    assert (classify_failure(minute).kind, classify_failure(minute).transient) == (
        "rate_limit",
        True,
    )


def test_an_error_inside_an_open_stream_keeps_its_own_status() -> None:
    mapped = map_google_error(api_error(500, "INTERNAL", "x", response_status=200), MODEL)
    assert isinstance(mapped, ModelServerError)
    assert isinstance(mapped, ModelHTTPError)
    assert mapped.status_code == 500
    assert mapped.in_stream


def test_an_api_error_without_an_error_status_is_a_plain_api_error() -> None:
    mapped = map_google_error(errors.APIError(200, {"error": {"message": "odd"}}, None), MODEL)
    assert type(mapped) is ModelAPIError


@pytest.mark.parametrize(
    ("error", "category", "phase"),
    [
        (httpx2.PoolTimeout("pool", request=REQUEST), ModelTimeoutError, "pool"),
        (httpx2.ConnectTimeout("connect", request=REQUEST), ModelTimeoutError, "connect"),
        (httpx2.ConnectError("refused", request=REQUEST), ModelConnectionError, "connect"),
        (httpx2.WriteError("reset", request=REQUEST), ModelConnectionError, "write"),
        (httpx2.ReadTimeout("", request=REQUEST), ModelTimeoutError, "read"),
        (httpx2.RemoteProtocolError("closed", request=REQUEST), ModelConnectionError, "read"),
        (httpx2.UnsupportedProtocol("ftp", request=REQUEST), ModelConnectionError, None),
    ],
)
def test_a_transport_failure_is_a_connection_error_at_its_stage(
    error: httpx2.TransportError, category: type[ModelConnectionError], phase: str | None
) -> None:
    mapped = map_google_error(error, MODEL)
    assert type(mapped) is category
    assert isinstance(mapped, ModelConnectionError)
    assert mapped.phase == phase
    assert str(mapped) == (str(error) or type(error).__name__)


def test_the_stage_is_found_in_what_a_transport_error_was_raised_from() -> None:
    outer = httpx2.TransportError("wrapped")
    outer.__cause__ = httpx2.ReadError("dropped")
    mapped = map_google_error(outer, MODEL)
    assert isinstance(mapped, ModelConnectionError)
    assert mapped.phase == "read"


@pytest.mark.parametrize(
    ("status", "content", "headers", "category", "body", "retry_after"),
    [
        (
            429,
            b'{"error": {"details": [{"retryDelay": "3s"}]}}',
            {},
            ModelRateLimitError,
            {"error": {"details": [{"retryDelay": "3s"}]}},
            3.0,
        ),
        (503, b"overloaded now", {}, ModelOverloadedError, "overloaded now", None),
        (500, b"", {"Retry-After": "2"}, ModelServerError, None, 2.0),
    ],
)
def test_a_status_the_transport_gave_up_on_is_an_http_error_with_its_body(
    status: int,
    content: bytes,
    headers: dict[str, str],
    category: type[ModelAPIError],
    body: object,
    retry_after: float | None,
) -> None:
    response = httpx2.Response(status, content=content, headers=headers, request=REQUEST)
    error = httpx2.HTTPStatusError("gave up", request=REQUEST, response=response)
    mapped = map_google_error(error, MODEL)
    assert isinstance(mapped, ModelHTTPError)
    assert isinstance(mapped, category)
    assert mapped.status_code == status
    assert mapped.body == body
    assert mapped.retry_after == retry_after
