"""Secrets never reach a log line or an event: scrub API-key values and key-shaped tokens.

It sits in ``store`` (the bottom layer) so that the log renderer and the event writers use the
same rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

SECRET_ENV_VARS = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_API_KEY",
    "DASHSCOPE_API_KEY",
    "QDRANT_API_KEY",
    "HF_TOKEN",
)
REDACTED = "[redacted]"
_SHAPES = re.compile(
    r"(?i)(bearer\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|(?:api[_-]?key|x-goog-api-key|authorization)[\"']?\s*[:=]\s*[\"']?"
    r"(?:bearer\s+)?[^\s\"',}]{6,}"
    r"|sk-[A-Za-z0-9_-]{16,}"
    r"|AIza[0-9A-Za-z_-]{20,})"
)


# Any variable named like a credential is scrubbed too (a provider's ``api_key_env`` may name
# one of its own, e.g. OPENWEIGHT_API_KEY).
_SECRET_NAME = re.compile(r"(?i)(?:^|_)(?:api_?key|token|secret|password)$")


def secret_values(
    env: Mapping[str, str] | None = None, names: Iterable[str] = SECRET_ENV_VARS
) -> list[str]:
    """The values of the key variables that are set (long enough to be worth scrubbing): the
    named ones and every variable whose name ends like a credential's."""
    source = os.environ if env is None else env
    wanted = set(names) | {n for n in source if _SECRET_NAME.search(n)}
    return sorted({source[n] for n in wanted if len(source.get(n, "")) >= 6}, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value and every key-shaped token replaced."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return _SHAPES.sub(REDACTED, text)


def has_secret(text: str, secrets: Iterable[str]) -> bool:
    """Whether ``text`` holds a secret value or a key-shaped token."""
    return any(value in text for value in secrets) or _SHAPES.search(text) is not None
