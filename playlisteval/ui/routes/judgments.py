"""The judgments viewer: the evaluations of this benchmark opened in the UI, what each judge was
shown and sent and what it answered, and the frames it was shown. Every route is the owner's
(whoever runs the UI, through its owner link): a judgment says which answer was intended, which
an annotator must not learn before labelling it, nor anyone else who reaches the server.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from playlisteval.ui.judgments import (
    FILTER_TITLES,
    FILTERS,
    AnsweredKeys,
    EvaluationFolder,
    answer_name,
    check_filter,
    group_views,
)
from playlisteval.ui.pages import clock, error_page, page
from playlisteval.ui.state import Ui, UiState, owner_only
from store.errors import ConfigError, MediaError

OWNER_ONLY = (
    "the judgments viewer shows which answer of each pair was intended, so it is for whoever "
    "runs the UI: open its owner link (`playlisteval ui` prints it) in this browser first"
)


router = APIRouter(dependencies=[Depends(owner_only(OWNER_ONLY))])


def _answered_of(ui: UiState, evaluation: EvaluationFolder) -> AnsweredKeys:
    """Which judgments of ``evaluation`` the offline provider and which a real local model
    answered (its log indexed once per UI, then only what was appended since)."""
    return ui.rebuilder.calls(evaluation).answered


def _offline_count(ui: UiState, evaluation: EvaluationFolder) -> int:
    keys = _answered_of(ui, evaluation).offline
    return sum(1 for r in evaluation.records if r.call_key in keys)


def _evaluation_named(ui: UiState, name: str) -> EvaluationFolder:
    found = ui.evaluated.get(name)
    if found is None:
        raise StarletteHTTPException(
            404,
            f"no evaluation {name!r} is open in this UI; start it with "
            "`playlisteval ui BENCH --evaluation EVAL_DIR`",
        )
    return found


@router.get("/evaluations", response_class=HTMLResponse)
def evaluation_list(ui: Ui) -> Response:
    """The evaluations open in this UI."""
    return page(
        "evaluations.html",
        evaluations=list(ui.evaluated.values()),
        offline={e.name: _offline_count(ui, e) for e in ui.evaluated.values()},
    )


@router.get("/evaluations/{name}", response_class=HTMLResponse)
def evaluation_page(
    ui: Ui, name: str, show: str = "all", judge: str = "", condition: str = ""
) -> Response:
    """One evaluation's judgments, grouped per pair, judge and condition, filtered."""
    evaluation = _evaluation_named(ui, name)
    try:
        which = check_filter(show)
    except ConfigError as exc:
        return error_page(404, str(exc))
    groups = [
        g
        for g in evaluation.groups.values()
        if (not judge or g.judge == judge) and (not condition or g.condition_id == condition)
    ]
    counts = {f: sum(1 for g in groups if g.shows(f)) for f in FILTERS}
    answered = _answered_of(ui, evaluation)
    return page(
        "evaluation.html",
        evaluation=evaluation,
        groups=[g for g in groups if g.shows(which)],
        show=which,
        filters=[(f, FILTER_TITLES[f], counts[f]) for f in FILTERS],
        judge=judge,
        condition=condition,
        answer=answer_name,
        offline=_offline_count(ui, evaluation),
        offline_keys=answered.offline,
        real_local_keys=answered.real_local,
    )


@router.get("/evaluations/{name}/pair/{pair_id}", response_class=HTMLResponse)
def judgment_page(ui: Ui, name: str, pair_id: str, judge: str, condition: str) -> Response:
    """What one judge was shown and sent of one pair, and what it answered."""
    evaluation = _evaluation_named(ui, name)
    pair = ui.benchmark.pairs.get(pair_id)
    group = evaluation.groups.get((pair_id, judge, condition))
    if pair is None or group is None:
        return error_page(
            404,
            f"evaluation {name!r} holds no judgment of pair {pair_id!r} by {judge!r} "
            f"under {condition!r}",
        )
    views = group_views(ui.rebuilder, evaluation, pair, group)
    answered = _answered_of(ui, evaluation)
    return page(
        "judgment.html",
        evaluation=evaluation,
        pair=pair,
        group=group,
        views=views,
        answer=answer_name,
        offline_keys=answered.offline,
        real_local_keys=answered.real_local,
        clock=clock,
        frame_src=lambda video, t: (
            f"/evaluations/{quote(name, safe='')}/frame/{quote(video, safe='')}?t={t!r}"
        ),
    )


@router.get("/evaluations/{name}/frame/{video_id}")
def frame(ui: Ui, name: str, video_id: str, t: float) -> Response:
    """A frame a judgment of the evaluation was shown, as a JPEG thumbnail."""
    evaluation = _evaluation_named(ui, name)
    if (video_id, t) not in evaluation.shown_frames:
        return error_page(404, f"no judgment of this evaluation was shown {video_id!r} at {t!r} s")
    video = ui.app.catalog.video(video_id)
    if video is None or not video.path:
        return error_page(404, f"video {video_id!r} is not in this workspace's catalogue")
    try:
        real = Path(video.path).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):  # ValueError: a NUL in the path
        return error_page(404, f"video {video_id!r} is not on this machine")
    if not ui.media_roots.allows(real):
        return error_page(403, f"video {video_id!r} lies outside this workspace's media")
    try:
        data = ui.thumbnails.jpeg(real, video_id, t)
    except (MediaError, ConfigError) as exc:
        return error_page(404, str(exc))
    return Response(data, media_type="image/jpeg", headers={"cache-control": "max-age=86400"})
