"""The workers of the fleet rate-limit test (``tests/test_fleet_ratelimit.py``): ``--workers``
OS processes, each with our OpenAI adapter against the test's fake and each call through a
``CallRecorder`` whose traffic holds a ``SharedRateLimiter`` on the test's PostgreSQL schema
(``--local`` swaps in a per-process ``RateLimiter``, the fleet's old behaviour, to see the test
catch it).

The launcher imports everything once and forks the workers (still single-threaded: nothing is
shared after but the code), so starting four costs one interpreter's imports. Each worker
prints ``ready`` once set up; on a line on the launcher's stdin they all start, send text-only
calls as fast as their limiter lets ``--tasks`` callers for ``--seconds``, and each prints what it
did as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestParameters

from agents.recorded import CallContext, CallRecorder
from policies.budget import Budget
from policies.prices import PriceTable
from policies.ratelimits import Limiter, RateLimiter, RetryPolicy, SharedRateLimiter, Traffic
from store.events import Event
from store.eventstore import open_event_store
from tools.providers.base import ProviderConfig
from tools.providers.openai_models import openai_model

MODEL = "gpt-5.4"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--store", required=True, help="the PostgreSQL URL")
    parser.add_argument("--schema", required=True)
    parser.add_argument("--base-url", required=True, help="the fake's root URL")
    parser.add_argument("--rpm", type=int, required=True)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--local", action="store_true", help="a per-process RateLimiter")
    return parser.parse_args()


async def _work(args: argparse.Namespace, name: str, go: int) -> dict[str, Any]:
    store = open_event_store(args.store, schema=args.schema)
    limiter: Limiter
    if args.local:
        limiter = RateLimiter(rpm=args.rpm, max_concurrency=args.tasks)
    else:
        limiter = SharedRateLimiter(
            store.engine, "openai", rpm=args.rpm, max_concurrency=args.tasks
        )
    traffic = Traffic(retry=RetryPolicy(max_retries=3, backoff_s=0.5), limiter=limiter)
    recorder = CallRecorder(
        budget=Budget(None), prices=PriceTable.load(), traffic=lambda _model: traffic
    )
    config = ProviderConfig(
        family="openai",
        model_name=MODEL,
        base_url=f"{args.base_url}/v1",
        api_key="sk-fake-key",
        timeout_s=30.0,
    )
    model = openai_model(MODEL, config)
    prompt: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(content="Say hi.")])]
    done = {"calls": 0, "failed": 0}

    async def append(event: Event) -> None:
        del event  # the test reads the fake's log, not ours

    async def caller(task: int) -> None:
        for n in range(1_000_000):
            context = CallContext(
                seed_id=f"{name}-{task}-{n}", role="transcript_matcher", model=MODEL
            )
            try:
                await recorder.call(model, context, append, prompt, None, ModelRequestParameters())
                done["calls"] += 1
            except Exception:
                done["failed"] += 1

    _say("ready")
    await anyio.to_thread.run_sync(os.read, go, 16)
    with anyio.move_on_after(args.seconds):
        async with anyio.create_task_group() as group:
            for task in range(args.tasks):
                group.start_soon(caller, task)
    store.close()
    return {"name": name, **done, "retries": recorder.retries, "waited_s": limiter.waited_s}


def _say(line: str) -> None:
    """One line on stdout in one write: the workers share the pipe."""
    os.write(sys.stdout.fileno(), f"{line}\n".encode())


def _worker(args: argparse.Namespace, name: str, go: int) -> None:
    """A forked worker's whole life; it never returns into the launcher's code."""
    code = 1
    try:
        report = anyio.run(_work, args, name, go)
        _say(json.dumps(report))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    """Fork the workers, start them on a line on stdin, exit with the worst of their codes."""
    args = _arguments()
    if threading.active_count() != 1:  # a fork would copy another thread's locks, not it
        raise SystemExit(f"threads before fork: {threading.enumerate()!r}")
    starts: list[tuple[int, int]] = []
    for n in range(args.workers):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            _worker(args, f"w{n}", read_end)
        os.close(read_end)
        starts.append((pid, write_end))
    sys.stdin.readline()
    for _, write_end in starts:
        os.write(write_end, b"go\n")
        os.close(write_end)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid, _ in starts]
    sys.exit(max(codes, key=abs))


if __name__ == "__main__":
    main()
