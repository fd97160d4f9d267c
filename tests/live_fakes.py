"""Fake Gemini, OpenAI and DashScope servers running together, with keys in the environment:
what a live curation run (``curation.offline = false``) talks to in tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fakes_dashscope import dashscope_harness
from tests.fakes_gemini import gemini_harness
from tests.fakes_openai import openai_harness
from tests.fakes_providers import Harness


@dataclass
class Fakes:
    """The three running fakes."""

    gemini: Harness
    openai: Harness
    dashscope: Harness

    def all(self) -> list[Harness]:
        """Every fake."""
        return [self.gemini, self.openai, self.dashscope]

    def provider_settings(self, **family: Any) -> dict[str, Any]:
        """``providers`` settings pointing each family at its fake (``family``: more fields
        for every family block, e.g. timeouts)."""
        return {
            "gemini": {**family, "base_url": self.gemini.server.base_url},
            "openai": {**family, "base_url": f"{self.openai.server.base_url}/v1"},
            "dashscope": {**family, "base_url": f"{self.dashscope.server.base_url}/api/v1"},
        }

    def batch_jobs(self) -> int:
        """Batch jobs the Gemini and OpenAI batch APIs were asked to create."""
        gemini = [
            r
            for r in self.gemini.server.seen("POST", "/v1beta/models/")
            if r.path.split("?")[0].endswith(":batchGenerateContent")
        ]
        openai = [
            r
            for r in self.openai.server.seen("POST", "/v1/batches")
            if not r.path.split("?")[0].endswith("/cancel")
        ]
        return len(gemini) + len(openai)


@contextmanager
def running_fakes(monkeypatch: pytest.MonkeyPatch, keys: Mapping[str, str]) -> Iterator[Fakes]:
    """Start the three fakes; ``keys`` (GEMINI/OPENAI/DASHSCOPE_API_KEY) go into the environment
    and DashScope's fake accepts only its key."""
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    with ExitStack() as stack:
        running = Fakes(
            stack.enter_context(gemini_harness()),
            stack.enter_context(openai_harness()),
            stack.enter_context(dashscope_harness()),
        )
        running.dashscope.fake.api_key = keys["DASHSCOPE_API_KEY"]  # type: ignore[attr-defined]
        yield running
