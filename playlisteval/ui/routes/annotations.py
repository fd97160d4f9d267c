"""The annotation pages: the owner link, joining through an invite, the next pair to label,
answering it and taking the latest answer back. An annotator is shown and may answer only the
pairs of their share, and may take back only their latest answer, until they open the results or
a labels download (the undo rule of :mod:`playlisteval.ui.annotations`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from playlisteval.ui.annotations import (
    MAX_COMMENT_CHARS,
    AnnotationRefused,
    AnnotationState,
    ForgedAnnotator,
    UnknownPair,
    not_invited,
    other_letter,
)
from playlisteval.ui.answer_diff import diff_answers
from playlisteval.ui.benchmark import BenchmarkPair
from playlisteval.ui.pages import MAX_FORM_BYTES, FormTooLarge, clock, error_page, page, read_form
from playlisteval.ui.signing import Signer
from playlisteval.ui.state import Ui


def _undo_target(pair_id: str) -> str:
    """What an undo form's token is signed for (never a pair id: it cannot pass as an answer's)."""
    return f"undo\x1f{pair_id}"


def _undo_form(signer: Signer, state: AnnotationState, annotator: str) -> dict[str, str] | None:
    """The undo form of ``annotator``: their latest standing answer and its signed token (none
    once they read the labels after giving it, or when that pair left their share: they could
    not answer it again)."""
    latest = state.undoable(annotator)
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
    chosen_as = state.chosen_as(annotator, pair.id, signer.chosen_shown_as(annotator, pair.id))
    answers = {chosen_as: pair.chosen, other_letter(chosen_as): pair.rejected}
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
                "span": f"{clock(c.start_s)}–{clock(c.end_s)}",
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
        "clock": clock,
    }


router = APIRouter()


@router.get("/owner")
def owner(ui: Ui, token: str = "") -> Response:
    """The owner link: sets the owner cookie and opens the results."""
    try:
        ui.signer.check_owner(token)
    except ForgedAnnotator as exc:
        return error_page(exc.status, str(exc))
    response = RedirectResponse("/results", status_code=303)
    response.set_cookie(ui.owner_cookie, ui.signer.owner_cookie(), httponly=True, samesite="strict")
    return response


@router.get("/", response_class=HTMLResponse)
def index(request: Request, ui: Ui) -> Response:
    """The start page: who is signed in, and the sample's size."""
    try:
        name = ui.who(request)
    except ForgedAnnotator:
        name = None  # a stale or foreign cookie: their invite link replaces it
    state = ui.log.state()
    return page(
        "index.html",
        name=name,
        owner=ui.is_owner(request),
        sample=len(state.pair_ids),
        invited=len(state.invited),
        annotators=len(state.annotators),
        benchmark=ui.benchmark.path.name,
    )


@router.post("/")
def join_by_name() -> Response:
    """Refused: a bare name is no proof of who is typing it."""
    return error_page(
        403,
        "joining takes your invite link, not a name: ask whoever runs the UI for it "
        "(`playlisteval ui BENCH --invite NAME` prints one per annotator)",
    )


@router.get("/join", response_class=HTMLResponse)
def join_page(ui: Ui, invite: str = "") -> Response:
    """The page an invite link opens: join as the name it carries."""
    try:
        name = ui.signer.invited(invite)
    except ForgedAnnotator as exc:
        return error_page(exc.status, str(exc))
    state = ui.log.state()
    if name not in state.invited:
        return error_page(403, not_invited(state, name))
    return page(
        "join.html",
        name=name,
        invite=invite,
        sample=len(state.pair_ids),
        benchmark=ui.benchmark.path.name,
    )


@router.post("/join")
async def join(request: Request, ui: Ui) -> Response:
    """Join through a signed invite: recorded, and the annotator cookie set."""
    try:
        form = await read_form(request)
    except FormTooLarge:
        return error_page(413, f"the form is over {MAX_FORM_BYTES} bytes")
    try:
        name = ui.signer.invited(form.get("invite", ""))
        await run_in_threadpool(ui.log.join, name)
    except AnnotationRefused as exc:
        return error_page(exc.status, str(exc))
    response = RedirectResponse("/annotate", status_code=303)
    response.set_cookie(ui.cookie, ui.signer.cookie(name), httponly=True, samesite="strict")
    return response


@router.get("/annotate", response_class=HTMLResponse)
def next_pair(request: Request, ui: Ui, pair: str = "") -> Response:
    """The annotator's next pair (``pair``: the one just taken back comes next), or done."""
    try:
        name = ui.who(request)
    except ForgedAnnotator as exc:
        return error_page(exc.status, str(exc))
    if name is None:
        return RedirectResponse("/", status_code=303)
    state = ui.log.state()
    if pair:
        try:
            if pair not in ui.benchmark.pairs:
                raise UnknownPair(f"there is no pair {pair!r} in this benchmark")
            state.check_assigned(name, pair)
        except AnnotationRefused as exc:
            return error_page(exc.status, str(exc))
    # ``pair``: the one just taken back (undo) comes next, whatever the order says.
    wanted = pair if pair and (name, pair) not in state.labels else ""
    todo = state.remaining(name)
    if not wanted and not todo:
        return page(
            "done.html",
            annotator=name,
            total=len(state.assigned(name)),
            undo=_undo_form(ui.signer, state, name),
        )
    shown = ui.benchmark.pairs[wanted or todo[0]]
    return page("annotate.html", **_annotation_view(shown, name, ui.signer, state))


@router.post("/undo")
async def undo(request: Request, ui: Ui) -> Response:
    """Take back the annotator's latest answer (signed for them and that pair), unless they
    opened the results or a labels download since giving it (refused: 403)."""
    try:
        form = await read_form(request)
    except FormTooLarge:
        return error_page(413, f"the form is over {MAX_FORM_BYTES} bytes")
    pair_id = form.get("pair_id", "")
    try:
        name = ui.who(request)
        if name is None:
            raise ForgedAnnotator("no annotator cookie: join through your invite link first")
        ui.signer.check_form(name, _undo_target(pair_id), form.get("token", ""))
        await run_in_threadpool(ui.log.retract, name, pair_id)
    except AnnotationRefused as exc:
        return error_page(exc.status, str(exc))
    return RedirectResponse(f"/annotate?pair={quote(pair_id, safe='')}", status_code=303)


@router.post("/annotate")
async def record(request: Request, ui: Ui) -> Response:
    """Record an answer (its form signed for the annotator and the pair)."""
    try:
        form = await read_form(request)
    except FormTooLarge:
        return error_page(
            413, f"the answer is over {MAX_FORM_BYTES} bytes; keep the comment shorter"
        )
    pair_id = form.get("pair_id", "")
    try:
        name = ui.who(request)
        if name is None:
            raise ForgedAnnotator("no annotator cookie: join through your invite link first")
        if pair_id in ui.benchmark.pairs:
            ui.signer.check_form(name, pair_id, form.get("token", ""))
        drawn = ui.signer.chosen_shown_as(name, pair_id)  # as :func:`_annotation_view` drew it
        await run_in_threadpool(
            ui.log.record, name, pair_id, form.get("choice", ""), form.get("comment", ""), drawn
        )
    except AnnotationRefused as exc:
        return error_page(exc.status, str(exc))
    return RedirectResponse("/annotate", status_code=303)
