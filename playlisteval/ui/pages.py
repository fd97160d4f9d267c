"""Rendering the UI's pages: Jinja2 templates with autoescaping on, the error page, the money and
clock figures the pages show, and the url-encoded forms they post (refused past a size).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from store.events import micros_to_usd

# A form within the comment limit is a few kB even fully percent-encoded; read no more than this.
MAX_FORM_BYTES = 64 * 1024


_TEMPLATES = Environment(
    loader=PackageLoader("playlisteval.ui", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def clock(seconds: float) -> str:
    """Seconds into a video as citations write them: ``M:SS``, or ``H:MM:SS`` past an hour."""
    whole = int(seconds)  # whole seconds, as citations write them
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def usd(micros: int | None) -> str:
    """A money figure in USD to four decimals (``no cap`` for None)."""
    return "no cap" if micros is None else f"{micros_to_usd(micros):,.4f} USD"


def usd_exact(micros: int) -> str:
    """A money figure to the micro-dollar the log keeps (a tooltip beside :func:`usd`'s)."""
    return f"{micros_to_usd(micros):,.6f} USD exactly"


def page(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """The page ``template`` rendered with ``context``."""
    return HTMLResponse(
        _TEMPLATES.get_template(template).render(**context), status_code=status_code
    )


def error_page(status: int, message: str, title: str | None = None) -> HTMLResponse:
    """The error page: ``message`` under a title that names the ``status``."""
    titles = {403: "Forbidden", 404: "Not found", 409: "Already labelled", 413: "Too long"}
    return page(
        "error.html",
        status,
        title=title or titles.get(status, "Not accepted"),
        status=status,
        message=message,
    )


class FormTooLarge(Exception):
    """A request body over the form limit."""


async def read_form(request: Request) -> dict[str, str]:
    """The url-encoded form of a POST, refusing (413) a body over :data:`MAX_FORM_BYTES`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise FormTooLarge()
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_FORM_BYTES:
            raise FormTooLarge()
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return {}
    return {key: values[0] for key, values in fields.items()}
