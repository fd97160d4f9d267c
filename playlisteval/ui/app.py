"""The validation, judgments and audit web UI: server-rendered pages over the workspace's event
store.

Invited annotators label a stratified sample of an exported benchmark; the results page measures
their agreement with the intended preference and with each other; the judgments viewer shows what
judges of an evaluation were shown and sent and what they answered; the audit pages show the
curation runs of the same workspace, and the status page what the curator daemon and its
workers are doing now (the coordination tables and the log's counters).

Pages are Jinja2 with autoescaping on. Annotators are invited by name; each joins through an
invite link signed for them and this benchmark, which sets a cookie signed the same way (with the
workspace's secret, ``<home>/ui_secret``), and every answer form carries a token signed for that
annotator and pair, so none can be forged or carried to another benchmark. An annotator is shown
and may answer only the pairs of their share. The results and the label downloads are for
whoever runs the UI (the owner link, signed the same way, which ``playlisteval ui`` prints) and
for annotators who joined, who read the others' answers on a pair only once they gave their own:
labels stay blind. Which answer was intended (the letter it was shown under, keyed with the same
secret; the label; agreement with it) is the owner's alone, and an annotator may take back only
their latest answer, until they open the results or a labels download. The audit and status
pages ask for no identity; the judgments viewer is the owner's.

The routes live in :mod:`playlisteval.ui.routes`, one router per page family, and receive
the shared state :func:`create_app` makes (:class:`playlisteval.ui.state.UiState`) explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from playlisteval.app import App
from playlisteval.metrics import LogMetrics
from playlisteval.ui.annotations import EXPORT_FORMATS, AnnotationLog, label_rows, labels_text
from playlisteval.ui.benchmark import load_benchmark
from playlisteval.ui.judgments import PromptRebuilder, Thumbnails, load_evaluations
from playlisteval.ui.label_formats import (
    TOOL_FORMATS,
    companion_name,
    tool_files,
    tool_format,
)
from playlisteval.ui.media_roots import MediaRoots
from playlisteval.ui.pages import error_page
from playlisteval.ui.routes import ROUTERS
from playlisteval.ui.routes.labels import design_sentence
from playlisteval.ui.signing import (
    Signer,
    cookie_name,
    invite_path,
    owner_cookie_name,
    owner_path,
    workspace_secret,
)
from playlisteval.ui.state import UiState
from store.errors import ConfigError


def export_labels(app: App, benchmark_dir: Path, out: Path, fmt: str | None = None) -> int:
    """Write the standing labels of the benchmark's annotations to ``out``, whole or not at all,
    and return how many labels: CSV or JSON Lines (``fmt``, else ``out``'s suffix), or for a
    label tool (``label-studio``, ``argilla``: :mod:`playlisteval.ui.label_formats`) its labels
    in ``out`` and what they answer beside it (:func:`companion_name`). The owner's export: the
    whole record."""
    suffixes = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
    chosen = fmt or suffixes.get(out.suffix.lower())
    if chosen not in EXPORT_FORMATS + TOOL_FORMATS:
        raise ConfigError(
            f"cannot tell the label format of {str(out)!r} ({fmt!r}): name it .csv or .jsonl, "
            f"or give --format {', '.join(EXPORT_FORMATS + TOOL_FORMATS[:-1])} or "
            f"{TOOL_FORMATS[-1]}"
        )
    out = out.expanduser()
    if out.is_dir():
        raise ConfigError(f"{str(out)!r} is a folder; give a file name such as labels.json")
    if not out.parent.is_dir():
        raise ConfigError(f"folder {str(out.parent)!r} does not exist; create it first")
    benchmark = load_benchmark(benchmark_dir)
    state = AnnotationLog(app.events, benchmark).state()
    rows = label_rows(state, benchmark)
    tool = tool_format(chosen)
    if tool is not None:
        labels, answered = tool_files(tool, state, benchmark)
        files = {out: labels, out.with_name(companion_name(out.name, tool)): answered}
    else:
        files = {out: labels_text(rows, chosen)}
    partials = {path: path.with_name(f".{path.name}.partial") for path in files}
    for path, text in files.items():
        partials[path].write_text(text, encoding="utf-8")
    for path, partial in partials.items():
        os.replace(partial, path)  # a reader never sees half a file
    return len(rows)


def invite_annotators(
    app: App, benchmark_dir: Path, names: Sequence[str], *, secret: bytes | None = None
) -> dict[str, str]:
    """Invite ``names`` to label the benchmark (each recorded once; a bad name invites no one)
    and return every invited annotator's invite-link path, earlier invites included: the links
    are signed with the workspace's secret, so a restart prints the same ones."""
    benchmark = load_benchmark(benchmark_dir)
    log = AnnotationLog(app.events, benchmark)
    log.invite(names)
    signer = Signer(
        secret if secret is not None else workspace_secret(app.workspace.root), benchmark.stream
    )
    return {name: invite_path(signer, name) for name in log.state().invited}


def withdraw_annotators(app: App, benchmark_dir: Path, names: Sequence[str]) -> dict[str, int]:
    """Withdraw invited annotators from labelling the benchmark (one who never joined holds
    their share of the sample until then): their pairs go to the others, their answers stay.
    Returns how many sampled pairs each held. A name not invited is refused, and no one is
    withdrawn then."""
    benchmark = load_benchmark(benchmark_dir)
    return AnnotationLog(app.events, benchmark).withdraw(names)


def create_app(
    app: App,
    benchmark_dir: Path,
    *,
    sample_size: int = 152,
    sample_seed: int = 0,
    secret: bytes | None = None,
    stale_after_s: float | None = None,
    evaluations: Sequence[Path] = (),
    invites: Sequence[str] = (),
    overlap: int | None = None,
    overlap_share: float | None = None,
) -> FastAPI:
    """The web UI for one exported benchmark over ``app``'s workspace.

    The sample (``sample_size`` pairs, stratified by domain and gap, seeded by ``sample_seed``)
    is recorded in the annotations stream the first time.
    ``invites`` names annotators to invite (recorded once; earlier invites stand): each joins
    through the invite link :func:`invite_path` makes for them, and the app's
    ``state.invite_links`` maps every invited name to that path.
    ``overlap`` annotators label each pair of ``overlap_share`` of the sample, one annotator
    every other pair (recorded once; by default ``pairs.human_overlap`` and
    ``pairs.human_overlap_share``).
    ``secret`` signs invites, cookies and forms; by default the workspace's own (made once).
    ``state.owner_link`` is the path of the owner link, which opens the results and every
    label (:func:`owner_path`).
    The status page calls a worker stale when its last heartbeat is older than
    ``stale_after_s``; by default three of the workspace's heartbeat intervals.
    ``evaluations`` are evaluation folders of this benchmark (``playlisteval eval --out``) the
    judgments viewer shows under ``/evaluations``.
    """
    benchmark = load_benchmark(benchmark_dir)
    evaluated = load_evaluations(evaluations, benchmark)
    log = AnnotationLog(app.events, benchmark)
    log.ensure_sample(sample_size, sample_seed)
    log.ensure_design(
        app.settings.pairs.human_overlap if overlap is None else overlap,
        app.settings.pairs.human_overlap_share if overlap_share is None else overlap_share,
    )
    log.invite(invites)
    signer = Signer(
        secret if secret is not None else workspace_secret(app.workspace.root), benchmark.stream
    )
    rebuilder = PromptRebuilder(app)
    for evaluation in evaluated.values():
        rebuilder.calls(evaluation)  # each log read once, here: no page reads a whole log
    web = FastAPI(title="PlaylistEval validation", docs_url=None, redoc_url=None, openapi_url=None)
    web.state.ui = UiState(
        app=app,
        benchmark=benchmark,
        log=log,
        signer=signer,
        cookie=cookie_name(benchmark),
        owner_cookie=owner_cookie_name(benchmark),
        queue=app.queue(),
        accounts=app.accounts(),
        # One fold for the server's lifetime: each status page reads only what was appended since.
        log_metrics=LogMetrics(app.events),
        stale_after_s=(
            3 * app.settings.worker.heartbeat_s if stale_after_s is None else stale_after_s
        ),
        evaluated=evaluated,
        media_roots=MediaRoots(app, benchmark.path),
        rebuilder=rebuilder,
        thumbnails=Thumbnails(),
    )
    web.state.invite_links = {name: invite_path(signer, name) for name in log.state().invited}
    web.state.owner_link = owner_path(signer)
    web.state.design = design_sentence(log.state())

    @web.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        return error_page(exc.status_code, str(exc.detail))

    for router in ROUTERS:
        web.include_router(router)
    return web


def serve(web: FastAPI, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the UI :func:`create_app` made with uvicorn until interrupted."""
    uvicorn.run(web, host=host, port=port, log_level="info")


__all__ = [
    "MediaRoots",
    "Signer",
    "cookie_name",
    "create_app",
    "design_sentence",
    "export_labels",
    "invite_annotators",
    "invite_path",
    "owner_cookie_name",
    "owner_path",
    "serve",
    "withdraw_annotators",
    "workspace_secret",
]
