"""Who answered a recorded call, in one field and one fold every reader uses.

A ``CallRecorded`` says who answered it in ``answered_by``: a ``live`` provider, the ``offline``
harness (never evidence of model quality), a ``real-local`` model run on this machine, or the
``log`` (served again from an earlier record, free). Logs written before the field was recorded
are read by :func:`answered_by` from what they did record: ``replayed``, the response's provider
(a real local model names itself in it) and ``offline``. The audit, the report, the export's
provenance, the UI and the curate panel read it here, never from the flags themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

AnsweredBy = Literal["live", "offline", "real-local", "log"]
ANSWERERS: tuple[AnsweredBy, ...] = get_args(AnsweredBy)

REAL_LOCAL_PROVIDER = "real-local"
"""The provider name a real local model's responses carry (its family's name)."""

LABELS: Mapping[AnsweredBy, str] = {
    "live": "live provider",
    "offline": "offline provider (a harness, not evidence of model quality)",
    "real-local": "real local model (run on this machine)",
    "log": "served from the log (free)",
}


def real_local_response(response: Mapping[str, Any] | None) -> bool:
    """Whether a recorded response (its stored JSON) was answered by a real local model."""
    if not response:
        return False
    details = response.get("provider_details") or {}
    return response.get("provider_name") == REAL_LOCAL_PROVIDER or bool(
        isinstance(details, Mapping) and details.get("real_local_model")
    )


def answered_by(data: Any, *, original: bool = False) -> AnsweredBy:
    """Who answered a recorded call (a ``CallRecorded`` event or its stored data); with
    ``original``, who first answered one served from the log (its provenance)."""
    fields: Mapping[str, Any] = data if isinstance(data, Mapping) else vars(data)
    recorded = fields.get("answered_by") or ""
    if recorded in ANSWERERS and not (original and recorded == "log"):
        return recorded
    if fields.get("replayed") and not original:
        return "log"
    if real_local_response(fields.get("response")):
        return "real-local"
    return "offline" if fields.get("offline") else "live"


def who_answered(calls: Iterable[Any]) -> Counter[AnsweredBy]:
    """How many of ``calls`` (``CallRecorded`` events or their data) each answerer answered."""
    return Counter(answered_by(call) for call in calls)
