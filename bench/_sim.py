"""A simulated provider for the curation benchmark: fixed latency, cheap valid answers.

Each call awaits ``latency`` seconds (the time a real provider holds a request) and returns the
answer the offline provider gives to the same call. That answer is computed once per distinct
call (model id, prompt text, attached clips, output tools) and served from a cache afterwards, so a
call costs the event loop almost nothing: the benchmark measures our pipeline, not the stand-in.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import anyio
import anyio.to_thread
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tools.providers import OfflineProvider
from tools.providers.base import user_prompt_items

SyncFunction = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


class SimulatedStop(Exception):
    """The benchmark's window is over: the provider refuses further calls (seeds stop)."""


def call_key(messages: Sequence[ModelMessage], info: AgentInfo, model_id: str) -> str:
    """What identifies an answer: model id, the user prompt (clips by identifier), output tools."""
    digest = hashlib.sha256(model_id.encode())
    for item in user_prompt_items(messages):
        if isinstance(item, str):
            digest.update(item.encode())
        elif isinstance(item, BinaryContent):
            # The clip's identifier and metadata name it; hashing megabytes of video per call
            # would be exactly the CPU work this stand-in must not do.
            meta = sorted((item.vendor_metadata or {}).items())
            digest.update(f"|{item.identifier}|{meta}".encode())
    for tool in info.output_tools:
        digest.update(f"|tool:{tool.name}".encode())
    return digest.hexdigest()


@dataclass
class SimulatedProvider:
    """Models that answer as the offline provider does, after a fixed ``latency``.

    ``deadline`` (a ``clock`` time) ends the benchmark's window: calls that start after it raise
    :class:`SimulatedStop`, which the curation loop records as a failed call and a stopped seed.
    ``started`` holds the clock time at which each call began, ``spans`` each answered call's
    (start, end).
    """

    latency: float
    offline: OfflineProvider = field(default_factory=OfflineProvider)
    clock: Callable[[], float] = time.perf_counter
    deadline: float | None = None
    answers: dict[str, ModelResponse] = field(default_factory=dict)
    computed: int = 0
    served: int = 0
    started: list[float] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)
    _functions: dict[str, SyncFunction] = field(default_factory=dict)

    def model(self, model_id: str) -> FunctionModel:
        """The stand-in for ``model_id`` (named as the offline provider names it)."""
        offline = self._functions.get(model_id)
        if offline is None:
            # The offline provider's FunctionModel wraps a plain synchronous function.
            offline = cast(SyncFunction, self.offline.model(model_id).function)
            self._functions[model_id] = offline

        async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if self.deadline is not None and self.clock() >= self.deadline:
                raise SimulatedStop("the benchmark window is over")
            begun = self.clock()
            self.started.append(begun)
            key = call_key(messages, info, model_id)
            response = self.answers.get(key)
            if response is None:
                # A first sight: the offline answer is CPU work, kept off the event loop.
                response = await anyio.to_thread.run_sync(offline, messages, info)
                self.answers[key] = response
                self.computed += 1
            else:
                self.served += 1
            if self.latency > 0:
                await anyio.sleep(self.latency)
            self.spans.append((begun, self.clock()))
            return response

        return FunctionModel(respond, model_name=f"offline:{model_id}")
