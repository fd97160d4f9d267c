"""google-genai and transport errors of the Gemini adapter's own calls (uploads, caches) as
pydantic-ai's categorised exceptions: exactly what :class:`~pydantic_ai.models.google.GoogleModel`
raises for the same failure of a generate call, so the recorded-call wrapper
(:func:`agents.recorded.classify_failure`) sorts both alike.

pydantic-ai keeps its own mapping private (``_map_api_error`` and ``_http_error`` in
``pydantic_ai/models/google.py``, with helpers in ``pydantic_ai/_model_errors.py``, pydantic-ai
2.68): this is that mapping rebuilt on public names only, each helper naming the one it follows.
It leaves out one thing: the "Did you mean …?" model id pydantic-ai suggests for an unknown model
name (from its private list of known names), which only a generate call can meet.
"""

from __future__ import annotations

import json
from typing import Any, cast

import httpx2
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
    TransportPhase,
)

__all__ = ["map_google_error"]

Category = type[
    ModelRateLimitError
    | ModelQuotaExceededError
    | ModelUnavailableError
    | ModelServerError
    | ModelRequestRejectedError
]
"""An error category an HTTP error can belong to (``ModelHTTPError.for_category``)."""

_OVERLOADED_PHRASES = ("overloaded", "over capacity")
# Gemini words a context-window overflow as INVALID_ARGUMENT "The input token count (N) exceeds
# the maximum number of tokens allowed (M)"; a file upload's drops the first clause.
_CONTEXT_WINDOW_PHRASES = ("input token count", "number of tokens allowed")
# Where a transport failure happened, by the httpx2 exception (``_model_errors._HTTPX_PHASES``).
_PHASES: tuple[tuple[type[Exception], TransportPhase], ...] = (
    (httpx2.PoolTimeout, "pool"),
    (httpx2.ConnectTimeout, "connect"),
    (httpx2.ConnectError, "connect"),
    (httpx2.WriteTimeout, "write"),
    (httpx2.WriteError, "write"),
    (httpx2.ReadTimeout, "read"),
    (httpx2.ReadError, "read"),
    (httpx2.RemoteProtocolError, "read"),
)


def map_google_error(
    exc: errors.APIError | httpx2.TransportError | httpx2.HTTPStatusError, model_name: str
) -> ModelAPIError:
    """The pydantic-ai exception to raise in place of ``exc`` (``models/google.py``
    ``_map_api_error``): an HTTP error in its category with the wait Gemini asked for; a
    transport failure as a connection error or a timeout, with the stage it failed at."""
    if isinstance(exc, httpx2.HTTPStatusError):
        # A retrying transport gives up on a status with this; google-genai lets it through.
        error = _transport_status_error(model_name, exc.response)
        error.retry_after = _retry_after(error)
        return error
    if isinstance(exc, httpx2.TransportError):
        # google-genai does not wrap connection errors and timeouts in its own exceptions.
        error_class = (
            ModelTimeoutError if isinstance(exc, httpx2.TimeoutException) else ModelConnectionError
        )
        return error_class(
            model_name=model_name, message=str(exc) or type(exc).__name__, phase=_phase(exc)
        )
    if exc.code >= 400:
        response = cast(Any, exc.response)
        status = exc.status if isinstance(exc.status, str) else None
        # An error chunk inside a stream comes with the stream's own 200 response.
        response_status = getattr(response, "status_code", None)
        error = ModelHTTPError.for_category(
            _status_category(status, exc.message, exc.details)
            or _http_status_category(exc.code, exc.message),
            status_code=exc.code,
            model_name=model_name,
            body=exc.details,
            headers=dict(response.headers) if response is not None else None,
            provider_error_code=status,
            in_stream=isinstance(response_status, int) and response_status < 400,
        )
        error.retry_after = _retry_after(error)
        return error
    return ModelAPIError(model_name=model_name, message=str(exc))


def _says_overloaded(message: object) -> bool:
    """``_model_errors.says_overloaded``."""
    return isinstance(message, str) and any(p in message.lower() for p in _OVERLOADED_PHRASES)


def _http_status_category(status_code: int, message: object) -> Category | None:
    """The category an HTTP status implies on its own (``_model_errors.http_status_category``)."""
    if status_code in (401, 403):
        return ModelAuthenticationError
    if status_code == 404:
        return ModelNotFoundError
    if status_code in (400, 422):
        return ModelRequestRejectedError
    if status_code == 402:
        return ModelQuotaExceededError
    if status_code == 429:
        return ModelRateLimitError
    if status_code == 529:
        return ModelOverloadedError
    if status_code == 503:
        return ModelOverloadedError if _says_overloaded(message) else ModelUnavailableError
    if 500 <= status_code < 600:
        return ModelServerError
    return None


def _status_category(status: str | None, message: object, body: object) -> Category | None:
    """The category of a Google API error status and body (``_model_errors.
    google_status_category``): RESOURCE_EXHAUSTED is a rate limit unless its QuotaFailure names a
    daily quota, which no wait fixes; an invalid API key comes as INVALID_ARGUMENT."""
    details = _details(body)
    # The first ``google.rpc.ErrorInfo`` reason (``_model_errors.google_error_reason``).
    reason = next((d["reason"] for d in details if isinstance(d.get("reason"), str)), None)
    if reason == "API_KEY_INVALID":
        return ModelAuthenticationError
    text = message.lower() if isinstance(message, str) else None
    match status:
        case "RESOURCE_EXHAUSTED":
            return ModelQuotaExceededError if _exceeds_daily_quota(details) else ModelRateLimitError
        case "FAILED_PRECONDITION" if text is not None and "billing" in text:
            return ModelQuotaExceededError
        case "UNAVAILABLE":
            return ModelOverloadedError if _says_overloaded(message) else ModelUnavailableError
        case "INTERNAL":
            return ModelServerError
        case "INVALID_ARGUMENT" if text is not None and any(
            p in text for p in _CONTEXT_WINDOW_PHRASES
        ):
            return ModelContextWindowExceededError
        case "INVALID_ARGUMENT":
            return ModelRequestRejectedError
        case "UNAUTHENTICATED" | "PERMISSION_DENIED":
            return ModelAuthenticationError
        case "NOT_FOUND":
            return ModelNotFoundError
        case _:
            return None


def _details(body: object) -> list[dict[str, Any]]:
    """The ``error.details`` of a Google API error body (``_model_errors.google_error_details``)."""
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, dict)]


def _exceeds_daily_quota(details: list[dict[str, Any]]) -> bool:
    """Whether a ``google.rpc.QuotaFailure`` names a daily quota, which resets at midnight
    Pacific time (``_model_errors.google_exceeds_daily_quota``)."""
    for detail in details:
        violations = detail.get("violations")
        if isinstance(violations, list):
            for violation in violations:
                quota_id = violation.get("quotaId") if isinstance(violation, dict) else None
                if isinstance(quota_id, str) and "PerDay" in quota_id:
                    return True
    return False


def _retry_after(error: ModelHTTPError) -> float | None:
    """The wait from the ``Retry-After`` header the error already read, else from the body's
    ``google.rpc.RetryInfo`` ``retryDelay`` (``"14s"``), where Gemini puts it
    (``_model_errors.google_retry_after``)."""
    if error.retry_after is not None:
        return error.retry_after
    for detail in _details(error.body):
        raw = detail.get("retryDelay")
        if isinstance(raw, str) and raw.endswith("s"):
            try:
                seconds = float(raw[:-1])
            except ValueError:
                continue
            if 0 <= seconds < float("inf"):
                return seconds
    return None


def _phase(exc: BaseException) -> TransportPhase | None:
    """The stage at which a transport error happened, from it or what it was raised from
    (``_model_errors.transport_phase``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for kind, phase in _PHASES:
            if isinstance(current, kind):
                return phase
        current = current.__cause__
    return None


def _transport_status_error(model_name: str, response: httpx2.Response) -> ModelHTTPError:
    """The error for a status the transport raised before google-genai saw the response
    (``_model_errors.transport_status_error``): its body as JSON where it is JSON."""
    try:
        content = response.content
    except RuntimeError:  # ResponseNotRead: the transport closed it unread
        content = b""
    text = content.decode(errors="replace")
    body: object = None
    if content:
        try:
            body = json.loads(content)
        except ValueError:
            body = text
    return ModelHTTPError.for_category(
        _http_status_category(response.status_code, text),
        status_code=response.status_code,
        model_name=model_name,
        body=body,
        headers=dict(response.headers),
    )
