"""What every router of one UI shares, made once by :func:`playlisteval.ui.app.create_app` and
handed to each route explicitly (:func:`ui_state`, a FastAPI dependency): the workspace, the
benchmark and its annotations, the signer and its cookies, the coordination tables and the
log's counters, the evaluations open in the judgments viewer and the media the UI may serve.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.exceptions import HTTPException as StarletteHTTPException

from playlisteval.app import App
from playlisteval.metrics import LogMetrics
from playlisteval.ui.annotations import AnnotationLog, AnnotationState, LabelsWithheld, not_invited
from playlisteval.ui.benchmark import Benchmark
from playlisteval.ui.judgments import EvaluationFolder, PromptRebuilder, Thumbnails
from playlisteval.ui.media_roots import MediaRoots
from playlisteval.ui.signing import Signer
from store.coordination import BudgetAccounts, WorkQueue


@dataclass
class UiState:
    """One UI's shared state (one benchmark over one workspace).

    ``cookie`` and ``owner_cookie`` are the names of this benchmark's annotator and owner
    cookies; ``log_metrics`` is one fold for the server's lifetime (each status page reads only
    what was appended since); ``evaluated`` maps an open evaluation's name to it;
    ``rebuilder`` holds each open evaluation's log index (who answered each call, where each
    recorded answer lies), read once and then only what was appended since.
    """

    app: App
    benchmark: Benchmark
    log: AnnotationLog
    signer: Signer
    cookie: str
    owner_cookie: str
    queue: WorkQueue
    accounts: BudgetAccounts
    log_metrics: LogMetrics
    stale_after_s: float
    evaluated: dict[str, EvaluationFolder]
    media_roots: MediaRoots
    rebuilder: PromptRebuilder
    thumbnails: Thumbnails

    def who(self, request: Request) -> str | None:
        """The signed-in annotator, None when there is no cookie; ForgedAnnotator if forged."""
        value = request.cookies.get(self.cookie)
        return None if value is None else self.signer.annotator(value)

    def is_owner(self, request: Request) -> bool:
        """Whether the request carries this UI's owner cookie."""
        return self.signer.is_owner_cookie(request.cookies.get(self.owner_cookie, ""))

    def reader(self, request: Request, state: AnnotationState) -> str | None:
        """Who reads labels: None for the owner, else the joined, still invited annotator
        signed in; :class:`AnnotationRefused` for anyone else."""
        if self.is_owner(request):
            return None
        name = self.who(request)
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


async def ui_state(request: Request) -> UiState:
    """The UI's shared state, for a route to ask for (``ui: Ui``)."""
    state: UiState = request.app.state.ui
    return state


Ui = Annotated[UiState, Depends(ui_state)]


def owner_only(why: str) -> Callable[..., Awaitable[None]]:
    """A route dependency that refuses (403, ``why``) a request without this UI's owner cookie:
    the pages that show which answer of a pair was intended are the owner's."""

    async def check(request: Request, ui: Ui) -> None:
        if not ui.is_owner(request):
            raise StarletteHTTPException(403, why)

    return check


"""A route's parameter that receives the UI's shared state."""
