"""Which stages of a video's index a change of settings makes stale, and what redoing them takes.

Each indexed video carries a record (:class:`store.catalog.IndexRecordRow`) of what its chunks
were made with, one line of words per stage. Comparing it with what the settings make now says
what to redo, the least that brings the video up to date:

- ``chunks``: the chunk grid changed (``index.chunk_seconds``): every chunk is made again;
- ``transcripts``: the transcript source changed (transcriber, its model): transcripts again,
  then the embeddings of the chunks whose transcript changed, then segments;
- ``embeddings``: the embedder, its model, the frames it sees or OCR changed: every chunk's
  vector again from its stored transcript, then segments;
- ``segments``: only the segment lengths changed: segments again from the stored vectors.

Near-duplicates and seeds follow every ``index`` run anyway. Pure functions over rows: the
indexer does the work (:meth:`tools.index.indexer.Indexer.redo_stale`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from store.catalog import IndexRecordRow, VideoRow
from store.errors import ConfigError

__all__ = ["REDO_ONLY", "RedoPlan", "old_defaults_record", "plan_redo"]

RedoKind = Literal["chunks", "transcripts", "embeddings", "segments"]
#: What ``index --redo --only`` takes.
REDO_ONLY = ("transcripts", "embeddings")
_WHAT = {
    "chunks": "chunk grid",
    "transcripts": "transcripts",
    "embeddings": "embeddings",
    "segments": "segments",
}


@dataclass(frozen=True)
class RedoPlan:
    """What one video needs redone: ``kind`` (the earliest stale stage), whether every chunk
    is embedded again (not only those whose transcript changed), and the changes, in words."""

    video_id: str
    kind: RedoKind
    reembed_all: bool
    changes: tuple[str, ...]


def _changes(recorded: IndexRecordRow, now: IndexRecordRow) -> list[tuple[str, str]]:
    """(stage, 'old' → 'new') for each stage whose record differs from the settings now."""
    found: list[tuple[str, str]] = []
    for stage in _WHAT:
        old, new = getattr(recorded, stage), getattr(now, stage)
        if old != new:
            found.append((stage, f"{_WHAT[stage]} {old!r} → {new!r}"))
    return found


def plan_redo(
    recorded: IndexRecordRow, now: IndexRecordRow, force: str | None = None
) -> RedoPlan | None:
    """What to redo for a video indexed as ``recorded`` when the settings make ``now``; None
    when nothing is stale. ``force`` (``index --redo``): ``all`` redoes transcripts and every
    embedding, ``transcripts`` or ``embeddings`` that stage (and what follows from it), stale
    or not. A redo left unfinished (``recorded.redo``) is taken up again."""
    if force is not None and force not in ("all", *REDO_ONLY):
        raise ConfigError(f"--only {force!r}: choose one of {', '.join(REDO_ONLY)}")
    changes = _changes(recorded, now)
    stale = {stage for stage, _ in changes}
    words = tuple(text for _, text in changes)
    if "chunks" in stale:
        return RedoPlan(recorded.video_id, "chunks", True, words)
    pending = recorded.redo if recorded.redo in ("all", *REDO_ONLY) else None
    wanted = force or pending
    if wanted is not None:
        words = words or (f"asked for ({'--redo' if force else 'an unfinished redo'})",)
    if wanted == "all" or (wanted == "transcripts" and "embeddings" in stale):
        return RedoPlan(recorded.video_id, "transcripts", True, words)
    if wanted == "transcripts" or "transcripts" in stale:
        return RedoPlan(recorded.video_id, "transcripts", "embeddings" in stale, words)
    if wanted == "embeddings" or "embeddings" in stale:
        return RedoPlan(recorded.video_id, "embeddings", True, words)
    if "segments" in stale:
        return RedoPlan(recorded.video_id, "segments", False, words)
    return None


def old_defaults_record(video: VideoRow, now: IndexRecordRow, grid_matches: bool) -> IndexRecordRow:
    """The record of a video indexed before records were kept: made with the old defaults.

    What the catalogue did keep is used (the transcript backend and the embedder's name; the
    chunk grid, when the stored chunks fit the one the settings make now); what it did not
    (frames, OCR, segment lengths, a model's name) is taken as the settings say now, so such a
    video is redone only where it is known to differ.
    """
    source = video.transcript_source or "none"
    if source not in ("captions", "none") and now.transcripts.split(" ", 1)[0] == source:
        source = now.transcripts  # the same backend; its model was not recorded
    embeddings = now.embeddings
    if video.embedder and not now.embeddings.startswith(video.embedder):
        embeddings = video.embedder
    return IndexRecordRow(
        video_id=video.id,
        chunks=now.chunks if grid_matches else "unknown (indexed before records were kept)",
        transcripts=source,
        embeddings=embeddings,
        segments=now.segments,
    )
