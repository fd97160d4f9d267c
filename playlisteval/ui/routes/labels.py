"""The results page and the label downloads: agreement with the intended preference and among
annotators, for whoever runs the UI (the owner link) and for annotators who joined, who read the
others' answers on a pair only once they gave their own: labels stay blind. Which answer was the
intended one (the letter it was shown under, the label, agreement with it) is the owner's alone,
as is how many answers each annotator took back (beside agreement). An annotator who opens the
page or a download ends their undo first (the undo rule of :mod:`playlisteval.ui.annotations`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from playlisteval.ui.annotations import (
    EXPORT_FORMATS,
    AnnotationRefused,
    AnnotationState,
    export_columns,
    label_rows,
    labels_text,
    readable_by,
)
from playlisteval.ui.benchmark import Benchmark
from playlisteval.ui.label_formats import ToolFormat, tool_files
from playlisteval.ui.pages import error_page, page
from playlisteval.ui.state import Ui
from policies.agreement import (
    MIN_BOOTSTRAP_ITEMS,
    AgreementSummary,
    Annotation,
    ValidationItem,
    summary,
)
from store.annotation_events import Read


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


def undo_sentence(state: AnnotationState) -> str:
    """How many answers were taken back (undo), in all and by whom, in one line: shown to the
    owner beside agreement, which counts only the answers that stand."""
    total = sum(state.undos.values())
    if not total:
        return "undos: 0"
    by_name = ", ".join(f"{name} {n}" for name, n in sorted(state.undos.items()) if n)
    return f"undos: {total} ({by_name})"


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


router = APIRouter()


@router.get("/results", response_class=HTMLResponse)
def results(request: Request, ui: Ui) -> Response:
    """Agreement so far, with the others' answers only for those who gave their own."""
    state = ui.log.state()
    try:
        viewer = ui.reader(request, state)
        if viewer is not None:
            ui.log.read_labels(viewer, "results")  # before anything is shown: undo ends here
            state = ui.log.state()
    except AnnotationRefused as exc:
        return error_page(exc.status, str(exc))
    readable = readable_by(state, viewer)
    comments = [r for r in readable.recorded() if r.comment]
    return page(
        "results.html",
        viewer=viewer,
        answered=len(state.answered_by(viewer)) if viewer is not None else None,
        summary=_summary(readable, ui.benchmark),
        sample=len(state.pair_ids),
        design=state.design,
        design_text=design_sentence(state),
        shared=bool(state.overlap),
        annotators=_progress_rows(state),
        min_interval=MIN_BOOTSTRAP_ITEMS,
        comments=comments,
        undos=undo_sentence(state) if viewer is None else None,
        benchmark=ui.benchmark.path.name,
        digest=ui.benchmark.content_sha256,
    )


#: The downloads of the label tool formats: the path's ending → (format, which of its two texts:
#: 0 the labels, 1 what they answer: the labelling config or the dataset settings).
TOOL_DOWNLOADS: dict[str, tuple[ToolFormat, int]] = {
    "label-studio.json": ("label-studio", 0),
    "label-studio.xml": ("label-studio", 1),
    "argilla.json": ("argilla", 0),
    "argilla-settings.json": ("argilla", 1),
}
DOWNLOADS = (*EXPORT_FORMATS, *TOOL_DOWNLOADS)


def _media_type(ending: str) -> str:
    if ending == "csv":
        return "text/csv"
    if ending == "jsonl":
        return "application/x-ndjson"
    return "application/xml" if ending.endswith(".xml") else "application/json"


@router.get("/annotations.{fmt}")
def download(request: Request, ui: Ui, fmt: str) -> Response:
    """The labels the reader may read, as CSV, JSON Lines, Label Studio tasks or Argilla records
    (and the labelling config or dataset settings those answer): the whole record for the owner,
    for an annotator without what says which answer was intended (:func:`label_rows`). Only a
    download that holds labels ends an annotator's undo; the config and settings hold none."""
    if fmt not in DOWNLOADS:
        return error_page(404, f"no label format {fmt!r}; use one of {list(DOWNLOADS)!r}")
    tool = TOOL_DOWNLOADS.get(fmt)
    state = ui.log.state()
    try:
        viewer = ui.reader(request, state)
        if viewer is not None and (tool is None or tool[1] == 0):
            read: Read = tool[0] if tool is not None else "csv" if fmt == "csv" else "jsonl"
            ui.log.read_labels(viewer, read)
            state = ui.log.state()
    except AnnotationRefused as exc:
        return error_page(exc.status, str(exc))
    if tool is not None:
        text = tool_files(tool[0], state, ui.benchmark, viewer)[tool[1]]
    else:
        text = labels_text(label_rows(state, ui.benchmark, viewer), fmt, export_columns(viewer))
    filename = f"labels-{ui.benchmark.content_sha256[:12]}.{fmt}"
    return Response(
        text.encode("utf-8"),
        media_type=f"{_media_type(fmt)}; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="{filename}"'},
    )
