"""Structured logs: structlog, secrets scrubbed before any output; a person's line on the
console, JSON in the log file.

The scrubber is a pure processor over the event dict (structlog's way): it replaces the value of
every configured API-key variable found anywhere in a log line, plus anything shaped like a key
or an auth header, so no key reaches a log line whatever a library put in an error message.
Only the last link, :class:`Outputs`, writes: ``warning: tick step failed (step=_media …)`` on
stderr, where the command's own lines go (a JSON object there reads as a crash), and the event as
one JSON line in the log file (``PLAYLISTEVAL_LOG_FILE``), for whatever reads logs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import structlog

from store.redact import scrub, secret_values

#: Where the JSON lines go besides the console (appended); unset: nowhere.
LOG_FILE_ENV = "PLAYLISTEVAL_LOG_FILE"


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


def person_line(event_dict: Mapping[str, Any]) -> str:
    """One event as a line for a person: ``LEVEL: what happened (key=value …)``, no timestamp
    (the terminal is now); a traceback, when there is one, on the lines after it."""
    fields = {k: v for k, v in event_dict.items() if k not in ("event", "level", "timestamp")}
    trace = fields.pop("exception", None)
    what = str(event_dict.get("event", "")).replace("_", " ")
    shown = " ".join(f"{k}={_shown(v)}" for k, v in fields.items())
    line = f"{event_dict.get('level', 'info')}: {what}" + (f" ({shown})" if shown else "")
    return line + (f"\n{trace}" if trace else "")


def _shown(value: Any) -> str:
    text = str(value)
    return repr(text) if not text or any(c.isspace() for c in text) else text


class Outputs:
    """structlog's logger, the one link that writes: each event as a person's line on stderr
    (JSON there when ``json``), and as a JSON line appended to ``file`` when there is one.
    stderr is looked up per line: whoever swaps ``sys.stderr`` (a test, a daemon) is honoured."""

    def __init__(self, *, json: bool, file: Path | None) -> None:
        self.json = json
        self.file = file
        self._file_failed = False

    def write(self, **event_dict: Any) -> None:
        """Write one event to the console and the log file."""
        rendered = structlog.processors.JSONRenderer()(None, "", dict(event_dict))
        as_json = rendered if isinstance(rendered, str) else rendered.decode()
        console = as_json if self.json else person_line(event_dict)
        print(console, file=sys.stderr, flush=True)
        if self.file is None or self._file_failed:
            return
        try:
            with self.file.open("a", encoding="utf-8") as out:
                out.write(f"{as_json}\n")
        except OSError as exc:
            self._file_failed = True  # said once; the console still has every line
            print(
                f"warning: cannot write the log file {str(self.file)!r} ({exc.strerror or exc}); "
                f"logging to the console only (check {LOG_FILE_ENV})",
                file=sys.stderr,
                flush=True,
            )

    msg = debug = info = warning = warn = error = critical = fatal = exception = write


def configure(
    *, json: bool | None = None, level: int = logging.INFO, file: Path | str | None = None
) -> None:
    """Set structlog up once per process: a person's line per event on stderr (JSON with
    ``json=True``, for a machine that reads stderr), and JSON lines appended to ``file``
    (default ``$PLAYLISTEVAL_LOG_FILE``; unset: no file)."""
    where = file if file is not None else os.environ.get(LOG_FILE_ENV) or None
    outputs = Outputs(json=bool(json), file=None if where is None else Path(where).expanduser())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            scrub_secrets,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *_: outputs,
        cache_logger_on_first_use=False,
    )
