"""The evidence clips' videos: served (with Range requests, so a browser seeks in them) only
from inside the benchmark's folder, the workspace's media or its catalogued videos.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

from playlisteval.ui.pages import error_page
from playlisteval.ui.state import Ui

router = APIRouter()


@router.get("/media/{video_id}")
def media(ui: Ui, video_id: str) -> Response:
    """A video of the benchmark's manifest, if it lies where the UI may serve from."""
    path = ui.benchmark.videos.get(video_id)
    if path is None:
        return error_page(404, f"no video {video_id!r} in this benchmark's manifest")
    # The manifest's path first; then this workspace's own copy of the video, found by its
    # id in the catalogue (paths kept relative to the workspace): a workspace copied or
    # moved, with the benchmark still naming the old place, serves its own file.
    catalogued = ui.app.catalog.video(video_id)
    paths = [path, *([Path(catalogued.path)] if catalogued and catalogued.path else [])]
    refusal = error_page(404, f"video {video_id!r} is not on this machine")
    for candidate in paths:
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):  # missing, dangling, a loop, a NUL byte
            continue
        if not real.is_file():
            refusal = error_page(404, f"video {video_id!r} is not a file")
        elif not ui.media_roots.allows(real):
            refusal = error_page(
                403,
                f"video {video_id!r} lies outside this workspace's media and this "
                "benchmark's folder; the UI serves nothing else",
            )
        else:
            kind = mimetypes.guess_type(real.name)[0] or "application/octet-stream"
            # FileResponse answers Range requests (206), which is how browsers seek in it.
            return FileResponse(real, media_type=kind)
    return refusal
