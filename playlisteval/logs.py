"""Structured logs: structlog, JSON when not on a terminal, secrets scrubbed before any output.

The scrubber is a pure processor over the event dict (structlog's way): it replaces the value of
every configured API-key variable found anywhere in a log line, plus anything shaped like a key
or an auth header, so no key reaches a log line whatever a library put in an error message.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog

from store.redact import scrub, secret_values


def _scrub_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, Mapping):
        return {k: _scrub_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub_value(v, secrets) for v in value)
    if isinstance(value, BaseException):
        return scrub(f"{type(value).__name__}: {value}", secrets)
    return value


def scrub_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: no key or auth header survives into the rendered line."""
    secrets = secret_values()
    for key in list(event_dict):
        event_dict[key] = _scrub_value(event_dict[key], secrets)
    return event_dict


def configure(*, json: bool | None = None, level: int = logging.INFO) -> None:
    """Set structlog up once per process: JSON lines unless stderr is a terminal."""
    as_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            scrub_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Looked up per logger, not once: whoever swaps sys.stderr (a test, a daemon) is honoured.
        logger_factory=lambda *_: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
