"""The UI's routers, one per page family, each a FastAPI :class:`~fastapi.APIRouter` whose
routes receive the UI's shared state explicitly (:data:`playlisteval.ui.state.Ui`):

* :mod:`~playlisteval.ui.routes.annotations`: the owner link, joining, labelling, undo;
* :mod:`~playlisteval.ui.routes.labels`: the results page and the label downloads;
* :mod:`~playlisteval.ui.routes.audit`: the audit pages and the status page;
* :mod:`~playlisteval.ui.routes.media`: the evidence clips' videos;
* :mod:`~playlisteval.ui.routes.judgments`: the judgments viewer.
"""

from playlisteval.ui.routes import annotations, audit, judgments, labels, media

ROUTERS = (annotations.router, labels.router, audit.router, media.router, judgments.router)
"""Every router, in the order the UI includes them."""

__all__ = ["ROUTERS"]
