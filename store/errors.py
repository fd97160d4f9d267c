"""The project's exceptions.

``store`` is the bottom layer (it imports nothing else of ours), so the root exception lives here
and every other layer raises a subclass of it. Messages quote the offending value with ``!r`` and
say what to do about it.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence


class PlaylistEvalError(Exception):
    """Root of every error this project raises on purpose."""


class ConfigError(PlaylistEvalError):
    """A setting, a file or a command-line value is not usable; the message says which and why."""


class IngestError(PlaylistEvalError):
    """A playlist, manifest or video entry could not be taken in."""


class UnsafeSourceError(IngestError):
    """A manifest path or ``file://`` URL points outside the allowed roots."""


class MediaError(PlaylistEvalError):
    """A video file cannot be probed, decoded or cut (corrupt, zero-length, no video stream)."""


class TranscriptError(PlaylistEvalError):
    """A transcript backend failed or a caption file could not be read."""


class EmbeddingError(PlaylistEvalError):
    """An embedder could not be loaded or failed on its input."""


class IndexBackendError(PlaylistEvalError):
    """The vector index (Qdrant) refused an operation or is unreachable."""


class StoreUnreadable(PlaylistEvalError):
    """A database file exists but is not a readable database (corrupt, truncated, or not
    SQLite at all); the message names the file and how to recover."""


def unreadable_database(path: object, reason: object) -> StoreUnreadable:
    """The one message for a database file that cannot be read: which file, what SQLite said,
    and the ways back (a backup, ``doctor``'s integrity check, rebuilding from the log)."""
    return StoreUnreadable(
        f"{str(path)!r} is not a readable database ({reason}): restore it from a backup (or "
        "move it aside to start an empty workspace); `playlisteval doctor` runs SQLite's "
        "integrity check on it"
    )


class DiskFull(PlaylistEvalError):
    """A write found no room: the disk or a quota is full, or the process may not make a file
    any larger (``ulimit -f``). What was written before stays; the message says what to do."""


# errno values of a write that found no room (ENOSPC: no space; EFBIG: over the file-size
# limit, RLIMIT_FSIZE; EDQUOT: over the user's quota).
_NO_ROOM = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
# SQLite's result codes (https://www.sqlite.org/rescode.html): SQLITE_FULL is its ENOSPC; a
# write the OS refused otherwise (EFBIG, EDQUOT) is SQLITE_IOERR_WRITE, SQLITE_IOERR_FSYNC,
# SQLITE_IOERR_TRUNCATE, or SQLITE_IOERR_SHMSIZE when the WAL's shared-memory file cannot grow.
# Reads that fail (SQLITE_IOERR_READ, a damaged disk) are not ours.
_SQLITE_FULL = 13
_SQLITE_WRITE_ERRORS = frozenset({13, 778, 1034, 1546, 4874})

_FREE_SPACE = (
    "free space there (or raise the file-size limit, `ulimit -f`) and run the command again: "
    "what was written before is kept, and a curation run resumes with `curate --run RUN`"
)


def disk_full(exc: BaseException) -> DiskFull | None:
    """``exc`` as a :class:`DiskFull` when it, or an error that caused it, is a write that found
    no room (an OS error, or SQLite's, re-raised by SQLAlchemy or wrapped by ours); else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DiskFull):
            return current
        if isinstance(current, OSError) and current.errno in _NO_ROOM:
            where = f" {current.filename!r}" if current.filename else ""
            return DiskFull(f"cannot write{where}: {current.strerror}; {_FREE_SPACE}")
        code = getattr(current, "sqlite_errorcode", None)
        if isinstance(code, int) and code in _SQLITE_WRITE_ERRORS:
            what = "the disk is full" if code == _SQLITE_FULL else f"{current}"
            return DiskFull(f"cannot write the database: {what}; {_FREE_SPACE}")
        current = current.__cause__ or current.__context__
    return None


class UndecodableEvent(PlaylistEvalError):
    """A stored event does not decode (its type or fields were edited, or a newer version wrote
    it); the message names its seq and stream and what to run."""


class StoreConflict(PlaylistEvalError):
    """An append lost an optimistic-concurrency race: the stream moved on since it was read."""


class RunDefinitionMismatch(PlaylistEvalError):
    """Today's code (or settings) cannot honour a run's recorded definition: the message names
    what differs and the ways on. Raised before any model call or reservation."""

    def __init__(self, run_id: str, differences: Sequence[str], ways_on: str) -> None:
        self.run_id = run_id
        self.differences = tuple(differences)
        more = f" (and {len(differences) - 1} more)" if len(differences) > 1 else ""
        super().__init__(f"run {run_id!r}: {differences[0]}{more}; {ways_on}")


class ReplayDivergence(PlaylistEvalError):
    """Strict replay met a model call that the log does not hold: code and history disagree."""


class ProviderError(PlaylistEvalError):
    """A model provider failed for good (after retries); carries the provider's message."""
