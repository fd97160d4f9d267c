"""The network edge for provider tests: a loopback HTTP server that each provider's fake builds
on to speak its wire format, driven by the real SDK.

Each fake answers a model request with what the offline provider would say to the same prompt
(so a whole curation can run against it), and can be told to fail the next requests in the ways
real APIs fail: ``429`` with ``Retry-After``, ``500``, a timeout, a malformed body, output cut at
the token limit, a refusal.

A server can also hold its callers to a rate limit as the providers do (``rpm``): it logs when
every model request arrived (``arrivals``), so a test can count any window, and answers a model
request beyond ``rpm`` in the last 60 s with the fake's own ``429`` + ``Retry-After``.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from tools.contracts.roles import parse_context
from tools.index import media
from tools.providers.offline import Fallibility, answer

Fault = Literal["429", "500", "timeout", "malformed", "truncated", "refusal"]
FAULTS: tuple[Fault, ...] = ("429", "500", "timeout", "malformed", "truncated", "refusal")
RETRY_AFTER_S = 7  # what a fake 429 asks for; tests check the wait honours it
TIMEOUT_SLEEP_S = 1.5  # a fake "timeout" holds the answer this long (clients use a shorter limit)


@dataclass(frozen=True)
class SeenRequest:
    """One request the fake received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (``None`` when it is not JSON)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


@dataclass(frozen=True)
class Reply:
    """What the fake answers: status, headers, body."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @classmethod
    def json(cls, status: int, data: Any, headers: Mapping[str, str] | None = None) -> Reply:
        """A JSON reply."""
        return cls(
            status,
            json.dumps(data).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )


Handler = Callable[[SeenRequest], Reply]


@dataclass(frozen=True)
class Arrival:
    """When a model request arrived (``time.monotonic()`` of the server's process) and how it
    was made to fail, if it was."""

    at: float
    fault: Fault | None


@dataclass
class FakeProviderServer:
    """Routes ``(method, path prefix)`` to handlers; logs every request; queues faults.

    ``faults`` are consumed one per *model* request (the provider fake decides which requests
    are model requests and calls :meth:`next_fault`).
    """

    routes: list[tuple[str, str, Handler]] = field(default_factory=list)
    base_url: str = ""
    requests: list[SeenRequest] = field(default_factory=list)
    faults: deque[Fault] = field(default_factory=deque)
    fault_rate: float = 0.0  # besides the queue: this share of model requests fail (hash-chosen)
    fault_kinds: Sequence[Fault] = FAULTS
    # How long a "timeout" fault holds its answer: longer than the client's limit. A test whose
    # clients wait longer (a loaded machine answers slowly even without faults) raises both.
    timeout_sleep_s: float = TIMEOUT_SLEEP_S
    model_requests: int = 0
    # A careless upstream: server errors quote the request's credentials back (the client must
    # never let them reach its logs or records).
    leak_keys: bool = False
    # A rate limit as the providers keep one. OpenAI's "Rate limits" guide
    # (https://platform.openai.com/docs/guides/rate-limits): limits are measured in requests
    # and tokens per minute (RPM, TPM), and a request past one is answered 429 with a
    # ``retry-after`` header. Here: a model request that finds ``rpm`` others in the last 60 s
    # gets the fake's "429" (it still arrived: it counts in later windows, as a provider's
    # refused requests count against the limit).
    rpm: int | None = None
    # How long every model request takes to answer (a model is not instant); None of it holds
    # the server's lock, so concurrent requests overlap as at a provider.
    latency_s: float = 0.0
    arrivals: list[Arrival] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def route(self, method: str, prefix: str, handler: Handler) -> None:
        """Answer ``method`` requests whose path starts with ``prefix`` with ``handler``."""
        self.routes.append((method, prefix, handler))

    def fail_next(self, *faults: Fault) -> None:
        """The next model requests fail in these ways, in order."""
        with self._lock:
            self.faults.extend(faults)

    def next_fault(self, request: SeenRequest) -> Fault | None:
        """Count a model request, log its arrival and say how it must fail, if it must (after
        ``latency_s``: the answer is that late whatever it is)."""
        with self._lock:
            now = time.monotonic()
            self.model_requests += 1
            fault: Fault | None = "429" if self._over_rpm(now) else self._scheduled_fault()
            self.arrivals.append(Arrival(now, fault))
        if self.latency_s:
            time.sleep(self.latency_s)
        return fault

    def _over_rpm(self, now: float) -> bool:
        """Whether ``rpm`` model requests already arrived in the 60 s up to ``now``."""
        if self.rpm is None:
            return False
        recent = 0
        for arrival in reversed(self.arrivals):
            if arrival.at <= now - 60:
                break
            recent += 1
        return recent >= self.rpm

    def _scheduled_fault(self) -> Fault | None:
        if self.faults:
            return self.faults.popleft()
        if self.fault_rate > 0:
            # Deterministic in the request count: the same test run faults the same calls.
            slot = (self.model_requests * 2654435761) % 1000 / 1000
            if slot < self.fault_rate:
                return self.fault_kinds[self.model_requests % len(self.fault_kinds)]
        return None

    def seen(self, method: str | None = None, prefix: str = "") -> list[SeenRequest]:
        """Logged requests, optionally only one method and path prefix."""
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and r.path.startswith(prefix)
            ]

    def dispatch(self, request: SeenRequest) -> Reply:
        """The reply of the longest matching route (404 when none)."""
        with self._lock:
            self.requests.append(request)
        best: tuple[int, Handler] | None = None
        for method, prefix, handler in self.routes:
            matches = request.method == method and request.path.startswith(prefix)
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), handler)
        if best is None:
            return Reply.json(404, {"error": {"message": f"no route {request.path}"}})
        reply = best[1](request)
        if self.leak_keys and reply.status >= 500:
            credentials = {
                k: v
                for k, v in request.headers.items()
                if k.lower() in ("authorization", "x-goog-api-key", "x-api-key")
            }
            message = f"upstream failed for request with headers {credentials}"
            reply = Reply.json(
                reply.status,
                {
                    "code": "InternalError",
                    "message": message,
                    "error": {"code": reply.status, "message": message, "status": "INTERNAL"},
                },
                {k: v for k, v in reply.headers.items() if k.lower() != "content-length"},
            )
        return reply


def _handler_for(server: FakeProviderServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output clean."""

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if not length and self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self._read_chunked()
            request = SeenRequest(self.command, self.path, dict(self.headers.items()), body)
            reply = server.dispatch(request)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            try:
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def _read_chunked(self) -> bytes:
            out = bytearray()
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815

    return Handler


@contextmanager
def serve_provider(server: FakeProviderServer) -> Iterator[FakeProviderServer]:
    """Run ``server`` on 127.0.0.1 (a free port) for the ``with`` block."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(server))
    httpd.daemon_threads = True
    server.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def offline_answer(
    prompt_text: str,
    model_id: str,
    videos: Mapping[str, list[media.Frame]] | None = None,
    fallibility: Fallibility | None = None,
) -> str:
    """What the offline provider answers to ``prompt_text`` (the role prompt with its
    ``<context>`` block), as the JSON the role's output type validates; ``videos`` maps segment
    id → frames timed in the source video (video roles need them)."""
    context = parse_context(prompt_text)
    output = answer(context, dict(videos or {}), fallibility or Fallibility(), model_id=model_id)
    return output.model_dump_json()


def prompt_has_context(text: str) -> bool:
    """Whether ``text`` carries a role context (a curation prompt) rather than free text."""
    return "<context>" in text


class Harness:
    """What the provider contract tests need from each provider's fake: the server, a model
    built by our adapter against it, and provider-neutral readings of the requests it got."""

    name: str = ""
    server: FakeProviderServer

    def model(self, model_id: str, **config: Any) -> Any:
        """Our adapter's pydantic-ai model for ``model_id``, pointed at the fake (``config``
        overrides ProviderConfig fields, e.g. ``timeout_s=0.5``)."""
        raise NotImplementedError

    def model_requests(self) -> list[SeenRequest]:
        """The model (generation) requests the fake received, in order."""
        raise NotImplementedError

    def prompt_text(self, request: SeenRequest) -> str:
        """All text the request carries (instructions, prompt, transcripts, frame labels)."""
        raise NotImplementedError

    def media(self, request: SeenRequest) -> list[dict[str, Any]]:
        """Each visual item of the request: ``{"kind": "video", "fps": …, "start_s": …,
        "end_s": …, "audio": bool | None}`` for native video, ``{"kind": "image"}`` per frame."""
        raise NotImplementedError

    def output_schema(self, request: SeenRequest) -> dict[str, Any] | None:
        """The JSON schema the request asks the output to follow, if it sends one."""
        raise NotImplementedError

    def last_usage(self) -> dict[str, int]:
        """The usage the fake reported in its last successful answer: ``input_tokens``,
        ``output_tokens``, ``cached_tokens`` and per modality ``text``, ``image``, ``video``,
        ``audio``."""
        raise NotImplementedError
