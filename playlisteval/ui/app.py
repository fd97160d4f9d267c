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
labels stay blind. The audit, status and judgments pages ask for no identity.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import mimetypes
import os
import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from agents.audit import Audit
from playlisteval import runs
from playlisteval.app import App
from playlisteval.metrics import LogMetrics, LogSnapshot
from playlisteval.ui.annotations import (
    EXPORT_FORMATS,
    MAX_COMMENT_CHARS,
    AnnotationLog,
    AnnotationRefused,
    AnnotationState,
    ForgedAnnotator,
    LabelsWithheld,
    UnknownPair,
    chosen_shown_as,
    label_rows,
    labels_text,
    not_invited,
    readable_by,
)
from playlisteval.ui.answer_diff import diff_answers
from playlisteval.ui.benchmark import Benchmark, BenchmarkPair, load_benchmark
from playlisteval.ui.judgments import (
    FILTER_TITLES,
    FILTERS,
    PromptRebuilder,
    Thumbnails,
    answer_name,
    check_filter,
    group_records,
    group_views,
    load_evaluations,
    offline_keys,
)
from policies.agreement import (
    MIN_BOOTSTRAP_ITEMS,
    AgreementSummary,
    Annotation,
    ValidationItem,
    summary,
)
from store.coordination import AccountRow, ItemRow
from store.errors import ConfigError, MediaError
from store.events import micros_to_usd
from store.runlog import run_ids, run_started

COOKIE = "playlisteval_annotator"
OWNER_COOKIE = "playlisteval_owner"
SECRET_FILE = "ui_secret"
# A form within the comment limit is a few kB even fully percent-encoded; read no more than this.
MAX_FORM_BYTES = 64 * 1024
# Queue columns of the status page, in an item's order of life ("expired": leased, lease lapsed).
_QUEUE_STATES = ("queued", "leased", "expired", "done", "parked")

_TEMPLATES = Environment(
    loader=PackageLoader("playlisteval.ui", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def export_labels(app: App, benchmark_dir: Path, out: Path, fmt: str | None = None) -> int:
    """Write the standing labels of the benchmark's annotations to ``out`` (CSV or JSON Lines:
    ``fmt``, else ``out``'s suffix), whole or not at all; returns how many labels."""
    suffixes = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
    chosen = fmt or suffixes.get(out.suffix.lower())
    if chosen not in EXPORT_FORMATS:
        raise ConfigError(
            f"cannot tell the label format of {str(out)!r} ({fmt!r}): name it .csv or .jsonl, "
            f"or give --format {' or '.join(EXPORT_FORMATS)}"
        )
    benchmark = load_benchmark(benchmark_dir)
    rows = label_rows(AnnotationLog(app.events, benchmark).state(), benchmark)
    text = labels_text(rows, chosen)
    out = out.expanduser()
    if out.is_dir():
        raise ConfigError(f"{str(out)!r} is a folder; give a file name such as labels.{chosen}")
    if not out.parent.is_dir():
        raise ConfigError(f"folder {str(out.parent)!r} does not exist; create it first")
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, out)  # a reader never sees half a file
    return len(rows)


def workspace_secret(home: Path) -> bytes:
    """The workspace's signing key, made once (``<home>/ui_secret``, readable by its owner
    only) and read back after that."""
    path = Path(home) / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_bytes().strip()
        if len(key) < 32:
            raise ConfigError(
                f"{str(path)!r} holds too short a key ({len(key)} bytes); delete it and a new "
                "one is made (signed-in annotators then enter their names again)"
            ) from None
        return key
    key = secrets.token_hex(32).encode()
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


def _same(given: str, expected: str) -> bool:
    """Whether ``given`` (from a request: any characters) is ``expected``, in constant time
    (``compare_digest`` refuses non-ASCII text with a TypeError: compared as UTF-8 instead)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


@dataclass(frozen=True)
class Signer:
    """HMAC-SHA256 signatures for invite links, annotator cookies and answer forms, each bound
    to one benchmark (``scope``, its annotations stream): what one benchmark's UI signs opens
    nothing in another's, even on one workspace and one host."""

    key: bytes
    scope: str = ""

    def _mac(self, *parts: str) -> str:
        message = "|".join((self.scope, *parts)).encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def _named(self, purpose: str, name: str) -> str:
        encoded = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
        return f"{encoded}.{self._mac(purpose, name)}"

    def _name(self, purpose: str, value: str) -> str | None:
        """The name ``value`` carries when this key signed it for ``purpose``, else None."""
        encoded, _, mac = value.partition(".")
        try:
            name = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        return name if _same(mac, self._mac(purpose, name)) else None

    def invite(self, name: str) -> str:
        """The invite token of annotator ``name``: whoever holds it joins as ``name``."""
        return self._named("invite", name)

    def invited(self, token: str) -> str:
        """The name an invite token carries; :class:`ForgedAnnotator` unless this server made
        it for this benchmark."""
        name = self._name("invite", token)
        if name is None:
            raise ForgedAnnotator(
                "the invite link is not one this UI made for this benchmark; ask whoever runs "
                "the UI for yours (`playlisteval ui BENCH --invite NAME` prints it)"
            )
        return name

    def cookie(self, name: str) -> str:
        """The cookie value that names ``name``."""
        return self._named("annotator", name)

    def annotator(self, cookie: str) -> str:
        """The name a cookie value carries; :class:`ForgedAnnotator` unless this key signed it."""
        name = self._name("annotator", cookie)
        if name is None:
            raise ForgedAnnotator("the annotator cookie was not signed by this server")
        return name

    def owner(self) -> str:
        """The owner token of this benchmark's UI: whoever holds it reads every label."""
        return self._mac("owner")

    def owner_cookie(self) -> str:
        """The cookie value the owner link sets."""
        return self._mac("owner-cookie")

    def is_owner_cookie(self, value: str) -> bool:
        """Whether ``value`` is the owner cookie this key signs for this benchmark."""
        return _same(value, self.owner_cookie())

    def check_owner(self, token: str) -> None:
        """:class:`ForgedAnnotator` unless ``token`` is this benchmark's owner token."""
        if not _same(token, self.owner()):
            raise ForgedAnnotator(
                "the owner link is not one this UI made for this benchmark; `playlisteval ui "
                "BENCH` prints it when it starts"
            )

    def form_token(self, annotator: str, pair_id: str) -> str:
        """The token an answer form for (annotator, pair) carries."""
        return self._mac("form", annotator, pair_id)

    def check_form(self, annotator: str, pair_id: str, token: str) -> None:
        """:class:`ForgedAnnotator` unless ``token`` was made for this annotator and pair."""
        if not _same(token, self.form_token(annotator, pair_id)):
            raise ForgedAnnotator(
                f"the form for pair {pair_id!r} was not issued to annotator {annotator!r}"
            )


def cookie_name(benchmark: Benchmark) -> str:
    """The annotator cookie of one benchmark's UI (UIs on one host share cookies across ports)."""
    return f"{COOKIE}_{benchmark.content_sha256[:12]}"


def owner_cookie_name(benchmark: Benchmark) -> str:
    """The owner cookie of one benchmark's UI."""
    return f"{OWNER_COOKIE}_{benchmark.content_sha256[:12]}"


def invite_path(signer: Signer, name: str) -> str:
    """The path of annotator ``name``'s invite link."""
    return f"/join?invite={quote(signer.invite(name), safe='')}"


def owner_path(signer: Signer) -> str:
    """The path of the owner link: it opens the results and every label to whoever runs the
    UI (the same link after a restart, like the invite links)."""
    return f"/owner?token={signer.owner()}"


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


def _clock(seconds: float) -> str:
    whole = int(seconds)  # whole seconds, as citations write them
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _usd(micros: int | None) -> str:
    return "no cap" if micros is None else f"{micros_to_usd(micros):,.4f} USD"


def _usd_exact(micros: int) -> str:
    """A money figure to the micro-dollar the log keeps (a tooltip beside :func:`_usd`'s)."""
    return f"{micros_to_usd(micros):,.6f} USD exactly"


def _offline_run(app: App, report: Audit) -> bool:
    """Whether the offline provider answered run ``report``: its ``RunStarted`` says so, or a
    call it recorded does. Such a run is a harness, never evidence of model quality."""
    calls = (step for line in report.seeds for step in line.steps if step["step"] == "call")
    return run_started(app.events, report.run_id).offline or any(s["offline"] for s in calls)


def _page(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(
        _TEMPLATES.get_template(template).render(**context), status_code=status_code
    )


def _error(status: int, message: str, title: str | None = None) -> HTMLResponse:
    titles = {403: "Forbidden", 404: "Not found", 409: "Already labelled", 413: "Too long"}
    return _page(
        "error.html",
        status,
        title=title or titles.get(status, "Not accepted"),
        status=status,
        message=message,
    )


def _summary(state: AnnotationState, benchmark: Benchmark) -> AgreementSummary | None:
    """Agreement over what has been recorded (None before the first answer)."""
    recorded = state.recorded()
    if not recorded:
        return None
    items = {
        pair_id: ValidationItem(
            item_id=pair_id,
            intended="intended",
            other="other",
            domain=benchmark.pairs[pair_id].domain,
            gap=benchmark.pairs[pair_id].gap,
        )
        for pair_id in {r.pair_id for r in recorded}
    }
    return summary(
        [Annotation(item_id=r.pair_id, annotator=r.annotator, choice=r.label) for r in recorded],
        items,
    )


def design_sentence(state: AnnotationState) -> str:
    """How the sample is shared among the invited annotators now, in one sentence: never more
    annotators to a pair than are invited, and no shared pair while fewer than two are."""
    sample, invited = len(state.pair_ids), len(state.invited)
    if state.design is None:
        if invited == 1:
            return f"{sample} pairs, every one to the 1 invited annotator"
        return f"{sample} pairs, every one to every annotator"
    k, shared = state.design.k, len(state.planned_overlap)
    planned = f"{shared} of the {sample} pairs ({state.design.share * 100:g} %)"
    rest = f", the other {sample - shared} to one" if shared < sample else ""
    if invited == 0:
        return (
            f"{sample} pairs, no annotator invited yet: once {k} are, {planned} go to {k} "
            f"annotators each{rest}"
        )
    if invited == 1:
        return (
            f"{sample} pairs, each to the 1 invited annotator (overlap {k} needs {k}; invite "
            "more for agreement)"
        )
    if invited < k:
        return (
            f"{planned} go to all {invited} invited annotators each (overlap {k} needs {k}; "
            f"invite more){rest}"
        )
    return f"{planned} go to {k} of the {invited} invited annotators each{rest}"


def _progress_rows(state: AnnotationState) -> list[dict[str, Any]]:
    """Each invited annotator's standing: joined or not, answers given of the pairs assigned
    (and answers on pairs no longer theirs, after later invites moved them)."""
    rows = []
    for name in state.invited + [a for a in state.annotators if a not in state.invited]:
        assigned = state.assigned(name)
        mine = set(assigned)
        given = [p for (a, p) in state.labels if a == name]
        rows.append(
            {
                "name": name,
                "joined": name in state.annotators,
                "done": sum(1 for p in given if p in mine),
                "assigned": len(assigned),
                "extra": sum(1 for p in given if p not in mine),
            }
        )
    return rows


def _gate_rates(audit: Audit) -> list[dict[str, Any]]:
    """GatePassed against GateRejected per (phase, gate), from the audit's timelines."""
    passed: Counter[tuple[int, str]] = Counter()
    rejected: Counter[tuple[int, str]] = Counter()
    for line in audit.seeds:
        for step in line.steps:
            if step["step"] == "pass":
                passed[step["phase"], step["gate"]] += 1
            elif step["step"] == "reject":
                rejected[step["phase"], step["gate"]] += 1
    rows = []
    for phase, gate in sorted(set(passed) | set(rejected)):
        p, r = passed[phase, gate], rejected[phase, gate]
        rows.append({"phase": phase, "gate": gate, "passed": p, "rejected": r, "rate": p / (p + r)})
    return rows


def _status_view(
    workers: list[dict[str, Any]],
    counts: dict[tuple[str, str], int],
    accounts: list[AccountRow],
    holds: int,
    parked: list[ItemRow],
    snap: LogSnapshot,
    stale_after_s: float,
) -> dict[str, Any]:
    """What the status page shows, from the coordination tables and the log's counters."""
    seen = {state for _kind, state in counts}
    states = [*_QUEUE_STATES, *sorted(seen - set(_QUEUE_STATES))]
    calls_by_outcome: Counter[str] = Counter()
    for (_model, _role, outcome), n in snap.calls.items():
        calls_by_outcome[outcome] += n
    ratios = snap.gate_pass_ratio()
    return {
        "workers": [
            {
                "name": w["name"],
                "state": w["state"],
                "age": f"{float(w['age_s']):.0f} s",
                # A worker that said it stopped beats no more; only a silent one is stale.
                "stale": w["state"] != "stopped" and float(w["age_s"]) > stale_after_s,
                "active": [str(item) for item in w["info"].get("active", [])],
            }
            for w in workers
        ],
        "stale_after": f"{stale_after_s:g} s",
        "states": states,
        "queue": [
            {"kind": kind, "counts": [counts.get((kind, state), 0) for state in states]}
            for kind in sorted({kind for kind, _state in counts})
        ],
        "accounts": [
            {
                "name": row.name,
                "cap": "uncapped" if row.cap_micros is None else _usd(row.cap_micros),
                "spent": _usd(row.spent_micros),
                "reserved": _usd(row.reserved_micros),
                "left": "uncapped" if row.left_micros is None else _usd(row.left_micros),
            }
            for row in accounts
        ],
        "holds": holds,
        "parked": parked,
        "events": snap.events,
        "seeds": sorted(snap.seeds.items()),
        "calls": sorted(calls_by_outcome.items()),
        "spend": _usd(snap.spend_micros),
        "spend_by_model": [(model, _usd(m)) for model, m in snap.spend_by_model.items()],
        "unsettled": snap.in_flight,
        "unsettled_usd": _usd(snap.reserved_micros),
        "gates": [
            {
                "phase": phase,
                "gate": gate,
                "passed": snap.gates.get((phase, gate, "passed"), 0),
                "rejected": snap.gates.get((phase, gate, "rejected"), 0),
                "rate": ratio,
            }
            for (phase, gate), ratio in sorted(ratios.items())
        ],
        "provider_errors": sorted(snap.provider_errors.items()),
        "retries": sorted(snap.retries.items()),
    }


def _undo_target(pair_id: str) -> str:
    """What an undo form's token is signed for (never a pair id: it cannot pass as an answer's)."""
    return f"undo\x1f{pair_id}"


def _undo_form(signer: Signer, state: AnnotationState, annotator: str) -> dict[str, str] | None:
    """The undo form of ``annotator``: their latest standing answer and its signed token (none
    when that pair left their share: they could not answer it again)."""
    latest = state.latest(annotator)
    if latest is None or latest.pair_id not in state.assigned(annotator):
        return None
    return {
        "pair_id": latest.pair_id,
        "token": signer.form_token(annotator, _undo_target(latest.pair_id)),
    }


def _annotation_view(
    pair: BenchmarkPair, annotator: str, signer: Signer, state: AnnotationState
) -> dict[str, Any]:
    """What the annotation page shows of ``pair`` to ``annotator``: the answers under their
    letters, word-diffed, with their citations; the evidence clips; where they stand in their
    share; the answer they took back on this pair, if any; and their latest answer to undo."""
    chosen_as = chosen_shown_as(annotator, pair.id)
    answers = {chosen_as: pair.chosen, ("B" if chosen_as == "A" else "A"): pair.rejected}
    pieces_a, pieces_b = diff_answers(answers["A"], answers["B"])
    assigned = state.assigned(annotator)
    done = sum(1 for p in assigned if (annotator, p) in state.labels)
    return {
        "annotator": annotator,
        "pair": pair,
        "answer_a": answers["A"],
        "answer_b": answers["B"],
        "pieces_a": pieces_a,
        "pieces_b": pieces_b,
        "clips": [
            {
                "src": f"/media/{quote(c.video_id, safe='')}",
                "video_id": c.video_id,
                "start": f"{c.start_s:g}",
                "end": f"{c.end_s:g}",
                "span": f"{_clock(c.start_s)}–{_clock(c.end_s)}",
            }
            for c in pair.evidence
        ],
        "token": signer.form_token(annotator, pair.id),
        "position": min(done + 1, len(assigned)) if pair.id in assigned else done + 1,
        "done": done,
        "total": len(assigned),
        "overlap": pair.id in state.overlap,
        "before": state.retracted.get((annotator, pair.id)),
        "undo": _undo_form(signer, state, annotator),
        "max_comment": MAX_COMMENT_CHARS,
        "clock": _clock,
    }


async def _read_form(request: Request) -> dict[str, str]:
    """The url-encoded form of a POST, refusing (413) a body over :data:`MAX_FORM_BYTES`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise _TooLarge()
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_FORM_BYTES:
            raise _TooLarge()
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return {}
    return {key: values[0] for key, values in fields.items()}


class _TooLarge(Exception):
    """A request body over the form limit."""


class MediaRoots:
    """What the media route may serve, whatever a benchmark's manifest says: files inside the
    benchmark's own folder, the workspace's media folder or ``ingest.allowed_roots``, and the
    files of the workspace's catalogued videos — each compared after resolving (symlinks
    followed), so neither ``..`` nor a link leads out."""

    def __init__(self, app: App, benchmark_root: Path) -> None:
        self._app = app
        roots = [benchmark_root, app.workspace.media, *app.settings.ingest.allowed_roots]
        self._roots = [Path(root).expanduser().resolve() for root in roots]
        self._videos: set[Path] = set()

    def _catalogued(self) -> set[Path]:
        found: set[Path] = set()
        for video in self._app.catalog.videos():
            if video.path:
                try:
                    found.add(Path(video.path).resolve(strict=True))
                except (OSError, RuntimeError, ValueError):  # ValueError: a NUL in the path
                    continue
        return found

    def allows(self, real: Path) -> bool:
        """Whether the resolved file ``real`` may be served."""
        if any(real.is_relative_to(root) for root in self._roots) or real in self._videos:
            return True
        self._videos = self._catalogued()  # videos added since the last look
        return real in self._videos


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
    cookie, owner_cookie = cookie_name(benchmark), owner_cookie_name(benchmark)
    queue, accounts = app.queue(), app.accounts()
    # One fold for the server's lifetime: each status page reads only what was appended since.
    log_metrics = LogMetrics(app.events)
    if stale_after_s is None:
        stale_after_s = 3 * app.settings.worker.heartbeat_s
    web = FastAPI(title="PlaylistEval validation", docs_url=None, redoc_url=None, openapi_url=None)
    web.state.invite_links = {name: invite_path(signer, name) for name in log.state().invited}
    web.state.owner_link = owner_path(signer)
    web.state.design = design_sentence(log.state())

    @web.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        return _error(exc.status_code, str(exc.detail))

    def who(request: Request) -> str | None:
        """The signed-in annotator, None when there is no cookie; ForgedAnnotator if forged."""
        value = request.cookies.get(cookie)
        return None if value is None else signer.annotator(value)

    def is_owner(request: Request) -> bool:
        """Whether the request carries this UI's owner cookie."""
        return signer.is_owner_cookie(request.cookies.get(owner_cookie, ""))

    def reader(request: Request, state: AnnotationState) -> str | None:
        """Who reads labels: None for the owner, else the joined, still invited annotator
        signed in; :class:`AnnotationRefused` for anyone else."""
        if is_owner(request):
            return None
        name = who(request)
        if name is None:
            raise LabelsWithheld(
                "the results and labels are for invited annotators who joined (through their "
                "invite link) and for whoever runs the UI (its owner link); this browser is "
                "signed in as neither"
            )
        if name not in state.annotators:
            raise LabelsWithheld(f"{name!r} has not joined: open your invite link first")
        if name not in state.invited:
            raise LabelsWithheld(not_invited(state, name))
        return name

    @web.get("/owner")
    def owner(token: str = "") -> Response:
        try:
            signer.check_owner(token)
        except ForgedAnnotator as exc:
            return _error(exc.status, str(exc))
        response = RedirectResponse("/results", status_code=303)
        response.set_cookie(owner_cookie, signer.owner_cookie(), httponly=True, samesite="strict")
        return response

    @web.get("/", response_class=HTMLResponse)
    def index(request: Request) -> Response:
        try:
            name = who(request)
        except ForgedAnnotator:
            name = None  # a stale or foreign cookie: their invite link replaces it
        state = log.state()
        return _page(
            "index.html",
            name=name,
            owner=is_owner(request),
            sample=len(state.pair_ids),
            invited=len(state.invited),
            annotators=len(state.annotators),
            benchmark=benchmark.path.name,
        )

    @web.post("/")
    def join_by_name() -> Response:
        # The old way in: a bare name is no proof of who is typing it.
        return _error(
            403,
            "joining takes your invite link, not a name: ask whoever runs the UI for it "
            "(`playlisteval ui BENCH --invite NAME` prints one per annotator)",
        )

    @web.get("/join", response_class=HTMLResponse)
    def join_page(invite: str = "") -> Response:
        try:
            name = signer.invited(invite)
        except ForgedAnnotator as exc:
            return _error(exc.status, str(exc))
        state = log.state()
        if name not in state.invited:
            return _error(403, not_invited(state, name))
        return _page(
            "join.html",
            name=name,
            invite=invite,
            sample=len(state.pair_ids),
            benchmark=benchmark.path.name,
        )

    @web.post("/join")
    async def join(request: Request) -> Response:
        try:
            form = await _read_form(request)
        except _TooLarge:
            return _error(413, f"the form is over {MAX_FORM_BYTES} bytes")
        try:
            name = signer.invited(form.get("invite", ""))
            await run_in_threadpool(log.join, name)
        except AnnotationRefused as exc:
            return _error(exc.status, str(exc))
        response = RedirectResponse("/annotate", status_code=303)
        response.set_cookie(cookie, signer.cookie(name), httponly=True, samesite="strict")
        return response

    @web.get("/annotate", response_class=HTMLResponse)
    def next_pair(request: Request, pair: str = "") -> Response:
        try:
            name = who(request)
        except ForgedAnnotator as exc:
            return _error(exc.status, str(exc))
        if name is None:
            return RedirectResponse("/", status_code=303)
        state = log.state()
        if pair:
            try:
                if pair not in benchmark.pairs:
                    raise UnknownPair(f"there is no pair {pair!r} in this benchmark")
                state.check_assigned(name, pair)
            except AnnotationRefused as exc:
                return _error(exc.status, str(exc))
        # ``pair``: the one just taken back (undo) comes next, whatever the order says.
        wanted = pair if pair and (name, pair) not in state.labels else ""
        todo = state.remaining(name)
        if not wanted and not todo:
            return _page(
                "done.html",
                annotator=name,
                total=len(state.assigned(name)),
                undo=_undo_form(signer, state, name),
            )
        shown = benchmark.pairs[wanted or todo[0]]
        return _page("annotate.html", **_annotation_view(shown, name, signer, state))

    @web.post("/undo")
    async def undo(request: Request) -> Response:
        try:
            form = await _read_form(request)
        except _TooLarge:
            return _error(413, f"the form is over {MAX_FORM_BYTES} bytes")
        pair_id = form.get("pair_id", "")
        try:
            name = who(request)
            if name is None:
                raise ForgedAnnotator("no annotator cookie: join through your invite link first")
            signer.check_form(name, _undo_target(pair_id), form.get("token", ""))
            await run_in_threadpool(log.retract, name, pair_id)
        except AnnotationRefused as exc:
            return _error(exc.status, str(exc))
        return RedirectResponse(f"/annotate?pair={quote(pair_id, safe='')}", status_code=303)

    @web.post("/annotate")
    async def record(request: Request) -> Response:
        try:
            form = await _read_form(request)
        except _TooLarge:
            return _error(
                413, f"the answer is over {MAX_FORM_BYTES} bytes; keep the comment shorter"
            )
        pair_id = form.get("pair_id", "")
        try:
            name = who(request)
            if name is None:
                raise ForgedAnnotator("no annotator cookie: join through your invite link first")
            if pair_id in benchmark.pairs:
                signer.check_form(name, pair_id, form.get("token", ""))
            await run_in_threadpool(
                log.record, name, pair_id, form.get("choice", ""), form.get("comment", "")
            )
        except AnnotationRefused as exc:
            return _error(exc.status, str(exc))
        return RedirectResponse("/annotate", status_code=303)

    @web.get("/results", response_class=HTMLResponse)
    def results(request: Request) -> Response:
        state = log.state()
        try:
            viewer = reader(request, state)
        except AnnotationRefused as exc:
            return _error(exc.status, str(exc))
        readable = readable_by(state, viewer)
        comments = [r for r in readable.recorded() if r.comment]
        return _page(
            "results.html",
            viewer=viewer,
            answered=len(state.answered_by(viewer)) if viewer is not None else None,
            summary=_summary(readable, benchmark),
            sample=len(state.pair_ids),
            design=state.design,
            design_text=design_sentence(state),
            shared=bool(state.overlap),
            annotators=_progress_rows(state),
            min_interval=MIN_BOOTSTRAP_ITEMS,
            comments=comments,
            benchmark=benchmark.path.name,
            digest=benchmark.content_sha256,
        )

    @web.get("/annotations.{fmt}")
    def download(request: Request, fmt: str) -> Response:
        if fmt not in EXPORT_FORMATS:
            return _error(404, f"no label format {fmt!r}; use one of {list(EXPORT_FORMATS)!r}")
        state = log.state()
        try:
            viewer = reader(request, state)
        except AnnotationRefused as exc:
            return _error(exc.status, str(exc))
        text = labels_text(label_rows(readable_by(state, viewer), benchmark), fmt)
        kind = "text/csv" if fmt == "csv" else "application/x-ndjson"
        filename = f"labels-{benchmark.content_sha256[:12]}.{fmt}"
        return Response(
            text.encode("utf-8"),
            media_type=f"{kind}; charset=utf-8",
            headers={"content-disposition": f'attachment; filename="{filename}"'},
        )

    @web.get("/audit", response_class=HTMLResponse)
    def audit_runs() -> Response:
        views = []
        for run_id in run_ids(app.events):
            report = runs.audit(app, run_id)
            statuses = Counter(line.status for line in report.seeds)
            views.append(
                {
                    "report": report,
                    "share": (
                        report.spent_micros / report.budget_micros if report.budget_micros else None
                    ),
                    "statuses": sorted(statuses.items()),
                    "gates": _gate_rates(report),
                    "phases": sorted(report.by_phase.items()),
                    "offline": _offline_run(app, report),
                }
            )
        return _page("audit.html", runs=views, usd=_usd, exact=_usd_exact)

    @web.get("/audit/{run_id}/{seed_id}", response_class=HTMLResponse)
    def audit_seed(run_id: str, seed_id: str) -> Response:
        try:
            report = runs.audit(app, run_id, seed_id)
        except ConfigError as exc:
            return _error(404, str(exc))
        line = report.seeds[0]
        return _page(
            "audit_seed.html",
            run_id=run_id,
            line=line,
            usd=_usd,
            exact=_usd_exact,
            offline=_offline_run(app, report),
        )

    @web.get("/status", response_class=HTMLResponse)
    def status() -> Response:
        log_metrics.catch_up()
        view = _status_view(
            queue.workers(),
            queue.counts(),
            accounts.accounts(),
            accounts.holds(),
            [item for item in queue.items() if item.state == "parked"],
            log_metrics.snapshot(),
            stale_after_s,
        )
        return _page("status.html", **view)

    media_roots = MediaRoots(app, benchmark.path)

    @web.get("/media/{video_id}")
    def media(video_id: str) -> Response:
        path = benchmark.videos.get(video_id)
        if path is None:
            return _error(404, f"no video {video_id!r} in this benchmark's manifest")
        # The manifest's path first; then this workspace's own copy of the video, found by its
        # id in the catalogue (paths kept relative to the workspace): a workspace copied or
        # moved, with the benchmark still naming the old place, serves its own file.
        catalogued = app.catalog.video(video_id)
        paths = [path, *([Path(catalogued.path)] if catalogued and catalogued.path else [])]
        refusal = _error(404, f"video {video_id!r} is not on this machine")
        for candidate in paths:
            try:
                real = candidate.resolve(strict=True)
            except (OSError, RuntimeError, ValueError):  # missing, dangling, a loop, a NUL byte
                continue
            if not real.is_file():
                refusal = _error(404, f"video {video_id!r} is not a file")
            elif not media_roots.allows(real):
                refusal = _error(
                    403,
                    f"video {video_id!r} lies outside this workspace's media and this "
                    "benchmark's folder; the UI serves nothing else",
                )
            else:
                kind = mimetypes.guess_type(real.name)[0] or "application/octet-stream"
                # FileResponse answers Range requests (206), which is how browsers seek in it.
                return FileResponse(real, media_type=kind)
        return refusal

    rebuilder = PromptRebuilder(app)
    thumbnails = Thumbnails()
    # Which judgments the offline provider answered, per evaluation: read once, on first view.
    offline_seen: dict[str, frozenset[str]] = {}

    def offline_of(evaluation: Any) -> frozenset[str]:
        if evaluation.name not in offline_seen:
            offline_seen[evaluation.name] = offline_keys(app.events, evaluation)
        return offline_seen[evaluation.name]

    def offline_count(evaluation: Any) -> int:
        keys = offline_of(evaluation)
        return sum(1 for r in evaluation.records if r.call_key in keys)

    def evaluation_named(name: str) -> Any:
        found = evaluated.get(name)
        if found is None:
            raise StarletteHTTPException(
                404,
                f"no evaluation {name!r} is open in this UI; start it with "
                "`playlisteval ui BENCH --evaluation EVAL_DIR`",
            )
        return found

    @web.get("/evaluations", response_class=HTMLResponse)
    def evaluation_list() -> Response:
        return _page(
            "evaluations.html",
            evaluations=list(evaluated.values()),
            offline={e.name: offline_count(e) for e in evaluated.values()},
        )

    @web.get("/evaluations/{name}", response_class=HTMLResponse)
    def evaluation_page(
        name: str, show: str = "all", judge: str = "", condition: str = ""
    ) -> Response:
        evaluation = evaluation_named(name)
        try:
            which = check_filter(show)
        except ConfigError as exc:
            return _error(404, str(exc))
        groups = [
            g
            for g in group_records(evaluation.records)
            if (not judge or g.judge == judge) and (not condition or g.condition_id == condition)
        ]
        counts = {f: sum(1 for g in groups if g.shows(f)) for f in FILTERS}
        return _page(
            "evaluation.html",
            evaluation=evaluation,
            groups=[g for g in groups if g.shows(which)],
            show=which,
            filters=[(f, FILTER_TITLES[f], counts[f]) for f in FILTERS],
            judge=judge,
            condition=condition,
            answer=answer_name,
            offline=offline_count(evaluation),
            offline_keys=offline_of(evaluation),
        )

    @web.get("/evaluations/{name}/pair/{pair_id}", response_class=HTMLResponse)
    def judgment_page(name: str, pair_id: str, judge: str, condition: str) -> Response:
        evaluation = evaluation_named(name)
        pair = benchmark.pairs.get(pair_id)
        group = next(
            (g for g in group_records(evaluation.records) if g.key == (pair_id, judge, condition)),
            None,
        )
        if pair is None or group is None:
            return _error(
                404,
                f"evaluation {name!r} holds no judgment of pair {pair_id!r} by {judge!r} "
                f"under {condition!r}",
            )
        views = group_views(rebuilder, evaluation, pair, group)
        return _page(
            "judgment.html",
            evaluation=evaluation,
            pair=pair,
            group=group,
            views=views,
            answer=answer_name,
            offline_keys=offline_of(evaluation),
            clock=_clock,
            frame_src=lambda video, t: (
                f"/evaluations/{quote(name, safe='')}/frame/{quote(video, safe='')}?t={t!r}"
            ),
        )

    @web.get("/evaluations/{name}/frame/{video_id}")
    def frame(name: str, video_id: str, t: float) -> Response:
        evaluation = evaluation_named(name)
        shown = {
            (video, at)
            for record in evaluation.records
            if record.shown is not None
            for video, at in record.shown.frame_times
        }
        if (video_id, t) not in shown:
            return _error(404, f"no judgment of this evaluation was shown {video_id!r} at {t!r} s")
        video = app.catalog.video(video_id)
        if video is None or not video.path:
            return _error(404, f"video {video_id!r} is not in this workspace's catalogue")
        try:
            real = Path(video.path).resolve(strict=True)
        except (OSError, RuntimeError, ValueError):  # ValueError: a NUL in the path
            return _error(404, f"video {video_id!r} is not on this machine")
        if not media_roots.allows(real):
            return _error(403, f"video {video_id!r} lies outside this workspace's media")
        try:
            data = thumbnails.jpeg(real, video_id, t)
        except (MediaError, ConfigError) as exc:
            return _error(404, str(exc))
        return Response(data, media_type="image/jpeg", headers={"cache-control": "max-age=86400"})

    return web


def serve(web: FastAPI, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the UI :func:`create_app` made with uvicorn until interrupted."""
    uvicorn.run(web, host=host, port=port, log_level="info")
