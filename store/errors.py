"""The project's exceptions.

``store`` is the bottom layer (it imports nothing else of ours), so the root exception lives here
and every other layer raises a subclass of it. Messages quote the offending value with ``!r`` and
say what to do about it.
"""

from __future__ import annotations


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


class UndecodableEvent(PlaylistEvalError):
    """A stored event does not decode (its type or fields were edited, or a newer version wrote
    it); the message names its seq and stream and what to run."""


class StoreConflict(PlaylistEvalError):
    """An append lost an optimistic-concurrency race: the stream moved on since it was read."""


class ReplayDivergence(PlaylistEvalError):
    """Strict replay met a model call that the log does not hold: code and history disagree."""


class ProviderError(PlaylistEvalError):
    """A model provider failed for good (after retries); carries the provider's message."""
