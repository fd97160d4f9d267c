"""A loopback HTTP server for tests: fixed routes, a request log and byte-range support.

It is the network edge that yt-dlp talks to in tests, so nothing ever reaches the internet.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Route:
    """What one path answers: a status, a body and its content type."""

    status: int
    body: bytes = b""
    content_type: str = "application/octet-stream"


@dataclass(frozen=True)
class Request:
    """One request the server saw."""

    method: str
    path: str
    range: str | None


@dataclass
class FakeHttpServer:
    """Routes by path; unknown paths answer 404. ``requests`` logs every request in order."""

    routes: dict[str, Route]
    base_url: str = ""
    requests: list[Request] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` on this server."""
        return self.base_url + path

    def requests_for(self, path: str) -> list[Request]:
        """The logged requests for one path."""
        with self._lock:
            return [request for request in self.requests if request.path == path]

    def request_count(self) -> int:
        """How many requests the server has answered so far."""
        with self._lock:
            return len(self.requests)


def _handler_for(server: FakeHttpServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output clean."""

        def _answer(self, with_body: bool) -> None:
            range_header = self.headers.get("Range")
            with server._lock:
                server.requests.append(Request(self.command, self.path, range_header))
            route = server.routes.get(self.path, Route(404, b"not found", "text/plain"))
            body = route.body
            status = route.status
            extra: dict[str, str] = {}
            if status == 200:
                extra["Accept-Ranges"] = "bytes"
                wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header or "")
                if wanted:
                    start = int(wanted.group(1))
                    end = int(wanted.group(2)) if wanted.group(2) else len(body) - 1
                    if start >= len(body):
                        status, body = 416, b""
                        extra["Content-Range"] = f"bytes */{len(route.body)}"
                    else:
                        end = min(end, len(body) - 1)
                        extra["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
                        status, body = 206, body[start : end + 1]
            self.send_response(status)
            self.send_header("Content-Type", route.content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self) -> None:
            """Answer a GET from the routes."""
            self._answer(with_body=True)

        def do_HEAD(self) -> None:
            """Answer a HEAD like a GET without the body."""
            self._answer(with_body=False)

    return Handler


@contextmanager
def serve(routes: dict[str, Route]) -> Iterator[FakeHttpServer]:
    """Run a FakeHttpServer on 127.0.0.1 (a free port) for the duration of the block."""
    fake = FakeHttpServer(routes=routes)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    httpd.daemon_threads = True
    fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def rss(base: str, items: list[tuple[str, str, int | None]]) -> bytes:
    """An RSS feed whose items enclose the given media paths (yt-dlp's generic extractor)."""
    body = "".join(
        f'<item><title>{title}</title><enclosure url="{base}{path}" type="video/mp4"/>'
        + (f"<itunes:duration>{seconds}</itunes:duration>" if seconds is not None else "")
        + "</item>"
        for title, path, seconds in items
    )
    return (
        '<?xml version="1.0"?><rss version="2.0" '
        'xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd">'
        f"<channel><title>Demo feed</title>{body}</channel></rss>"
    ).encode()
