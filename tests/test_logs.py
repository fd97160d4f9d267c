"""No API key or auth header reaches a log line or an event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import structlog
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from playlisteval import logs
from playlisteval.app import App
from playlisteval.settings import load_settings
from store.events import CallFailed, SeedStopped, seed_stream
from store.redact import REDACTED, has_secret, scrub, secret_values

KEYS = {
    "GEMINI_API_KEY": "gem-KEY-5f1d9c0e7a2b",
    "OPENAI_API_KEY": "sk-proj-DISTINCTIVE0123456789abcdef",
    "DASHSCOPE_API_KEY": "dash-KEY-77aa99bb",
}


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    return KEYS


@pytest.mark.parametrize(
    ("text", "leaks"),
    [
        ("Authorization: Bearer abcdefghijklmnop1234", "abcdefghijklmnop1234"),
        ('{"api_key": "zzzzzzzzzzzz"}', "zzzzzzzzzzzz"),
        ("x-goog-api-key=AIzaSyA1234567890abcdefghijk", "AIzaSyA1234567890abcdefghijk"),
        ("key sk-abcdefghijklmnopqrstuvwxyz in a message", "sk-abcdefghijklmnopqrstuvwxyz"),
        ("AIzaSyA1234567890abcdefghijklmno leaked", "AIzaSyA1234567890abcdefghijklmno"),
    ],
)
def test_key_shaped_tokens_are_scrubbed(text: str, leaks: str) -> None:
    clean = scrub(text, [])
    assert leaks not in clean
    assert REDACTED in clean
    assert has_secret(text, [])
    assert not has_secret(clean, [])


def test_configured_key_values_are_scrubbed_wherever_they_appear(keys: dict[str, str]) -> None:
    secrets = secret_values()
    assert set(secrets) == set(keys.values())
    text = f"calling with {keys['DASHSCOPE_API_KEY']} and {keys['GEMINI_API_KEY']}!"
    assert scrub(text, secrets) == f"calling with {REDACTED} and {REDACTED}!"


def test_plain_text_is_left_alone() -> None:
    text = "the gold answer cites (cooking-01 @ 00:30–01:00) twice"
    assert scrub(text, ["abcdef"]) == text


@pytest.fixture
def json_logs() -> Iterator[None]:
    """structlog set up as the CLI does, and back to its defaults afterwards."""
    logs.configure(json=True)
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("json_logs")
def test_log_lines_carry_no_key_even_in_nested_values_and_exceptions(
    keys: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    log = structlog.get_logger("test")
    try:
        raise RuntimeError(f"401 for key {keys['OPENAI_API_KEY']}")
    except RuntimeError as exc:
        log.error(
            "provider_failed",
            headers={"Authorization": f"Bearer {keys['GEMINI_API_KEY']}"},
            args=[keys["DASHSCOPE_API_KEY"]],
            error=exc,
        )
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["event"] == "provider_failed"
    for value in keys.values():
        assert value not in line


def _leaky_model(secret: str) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError(
            f"HTTP 401: invalid key {secret} (header Authorization: Bearer {secret})"
        )

    return FunctionModel(answer, model_name="leaky")


def test_provider_errors_quoting_the_key_are_scrubbed_from_events(
    workspace: Path, keys: dict[str, str]
) -> None:
    secret = keys["DASHSCOPE_API_KEY"]
    # No second round for the parked seed: its minute-long pause is not what this tests.
    with App(load_settings(workspace, curation={"provider_retry_rounds": 0})) as app:
        curator = app.curator()
        curator.model_for = lambda model_id: _leaky_model(secret)
        seed = app.catalog.seeds()[0]
        report = anyio.run(lambda: curator.curate("leak", [seed], budget_micros=None))
        assert report.stopped
        events = [s.event() for s in app.events.read_stream(seed_stream("leak", seed.id))]
        failed = [e for e in events if isinstance(e, CallFailed)]
        stopped = [e for e in events if isinstance(e, SeedStopped)]
        assert failed
        assert stopped
        assert stopped[-1].reason == "provider"
        assert REDACTED in failed[0].error
    raw = (workspace / "playlisteval.db").read_bytes()
    wal = workspace / "playlisteval.db-wal"
    if wal.exists():
        raw += wal.read_bytes()
    for value in keys.values():
        assert value.encode() not in raw


def test_credentials_in_variables_named_like_keys_are_scrubbed_too() -> None:
    from store.redact import scrub

    env = {
        "OPENWEIGHT_API_KEY": "vllm-key-5544",
        "MY_SERVICE_TOKEN": "tok-778899",
        "TOKENIZERS_PARALLELISM": "false-ish-value",
    }
    found = secret_values(env)
    assert "vllm-key-5544" in found
    assert "tok-778899" in found
    assert "false-ish-value" not in found
    assert "vllm-key-5544" not in scrub("upstream said: bad key vllm-key-5544", found)
