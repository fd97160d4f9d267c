"""Batch mode: text-only gate calls go to the providers' batch APIs (Gemini, OpenAI) at batch
prices, through pydantic-ai's batch primitives (``batch_encode`` → ``batch_create`` →
``batch_status`` → ``batch_results`` → ``batch_decode``).

Calls that arrive within ``window_s`` of each other for one model share a job. The first caller
of a job leads it: it waits out the window, submits, tells every member the job's handle (which
each records as ``CallBatched`` before anything else happens, so a restart finds it), polls until
the job ends and hands each member its result. A call whose job was submitted before a restart
is collected from that job by :meth:`Batcher.collect`, never submitted again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import TypeAdapter
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.batch import Batch, BatchRequest, BatchResult, EncodedBatchRequest

from policies.ratelimits import Sleep

BATCH_ADAPTER: TypeAdapter[Batch] = TypeAdapter(Batch)
OnSubmitted = Callable[[Batch], Coroutine[Any, Any, None]]


def batch_to_json(batch: Batch) -> dict[str, Any]:
    """A batch handle as plain JSON for the log."""
    data: dict[str, Any] = BATCH_ADAPTER.dump_python(batch, mode="json")
    return data


def batch_from_json(data: dict[str, Any]) -> Batch:
    """A logged batch handle back."""
    return BATCH_ADAPTER.validate_python(data)


@dataclass
class _Member:
    request: BatchRequest
    encoded: EncodedBatchRequest
    on_submitted: OnSubmitted | None
    done: anyio.Event = field(default_factory=anyio.Event)
    response: ModelResponse | None = None
    error: BaseException | None = None


@dataclass
class _Collecting:
    """Everyone waiting on one submitted job, by custom id."""

    members: dict[str, _Member] = field(default_factory=dict)
    leader_running: bool = False


class Batcher:
    """Groups batchable calls per model into jobs and waits for their results."""

    def __init__(
        self,
        *,
        window_s: float = 5.0,
        max_requests: int = 1000,
        poll_s: float = 30.0,
        max_poll_s: float = 600.0,
        sleep: Sleep | None = None,
    ) -> None:
        self.window_s = window_s
        self.max_requests = max_requests
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self._sleep: Sleep = sleep or anyio.sleep
        self._forming: dict[tuple[int, str], list[_Member]] = {}
        self._jobs: dict[str, _Collecting] = {}
        self.submitted: list[Batch] = []

    async def call(
        self, model: Model, request: BatchRequest, on_submitted: OnSubmitted
    ) -> ModelResponse:
        """Send ``request`` in the next job for ``model`` and wait for its answer."""
        encoded = await model.batch_encode(request)
        member = _Member(request, encoded, on_submitted)
        group = (id(model), encoded.group)
        forming = self._forming.get(group)
        if forming is not None and len(forming) < self.max_requests:
            forming.append(member)
            return await self._wait(member)
        self._forming[group] = members = [member]
        await self._sleep(self.window_s)
        if self._forming.get(group) is members:
            del self._forming[group]
        try:
            batch = await model.batch_create([m.encoded for m in members])
        except BaseException as exc:
            for m in members:
                m.error = exc
                m.done.set()
            raise
        self.submitted.append(batch)
        job = self._jobs.setdefault(batch.id, _Collecting())
        for m in members:
            job.members[m.encoded.custom_id] = m
        # Every member records the job at once (one group commit), so a crash right after
        # leaves either all of them or none knowing it.
        async with anyio.create_task_group() as tasks:
            for m in members:
                if m.on_submitted is not None:
                    tasks.start_soon(m.on_submitted, batch)
        job.leader_running = True
        await self._lead(model, batch, job)
        return await self._wait(member)

    async def collect(self, model: Model, batch: Batch, request: BatchRequest) -> ModelResponse:
        """The answer to ``request`` from a job submitted earlier (before a restart)."""
        encoded = await model.batch_encode(request)
        member = _Member(request, encoded, None)
        job = self._jobs.setdefault(batch.id, _Collecting())
        job.members[request.custom_id] = member
        if not job.leader_running:
            job.leader_running = True
            await self._lead(model, batch, job)
        return await self._wait(member)

    async def _wait(self, member: _Member) -> ModelResponse:
        await member.done.wait()
        if member.error is not None:
            raise member.error
        assert member.response is not None
        return member.response

    async def _lead(self, model: Model, batch: Batch, job: _Collecting) -> None:
        delay = self.poll_s
        try:
            while batch.status != "ended":
                await self._sleep(delay)
                delay = min(delay * 1.5, self.max_poll_s)
                batch = await model.batch_status(batch)
            results = {r.custom_id: r for r in await model.batch_results(batch)}
        except BaseException as exc:
            for m in job.members.values():
                if not m.done.is_set():
                    m.error = exc
                    m.done.set()
            self._jobs.pop(batch.id, None)
            raise
        for custom_id, m in job.members.items():
            try:
                m.response = _decode(model, results.get(custom_id), m.request)
            except Exception as exc:
                m.error = exc
            m.done.set()
        self._jobs.pop(batch.id, None)


def _decode(model: Model, result: BatchResult | None, request: BatchRequest) -> ModelResponse:
    if result is None:
        raise ModelAPIError(
            model.model_name, f"batch job has no result for request {request.custom_id!r}"
        )
    if result.status != "succeeded":
        raise ModelAPIError(
            model.model_name,
            f"batch request {request.custom_id!r} {result.status}: {(result.body or '')[:500]}",
        )
    response = model.batch_decode(result, request)
    details = {**(response.provider_details or {}), "batch": True}
    return dataclasses.replace(response, provider_details=details)
