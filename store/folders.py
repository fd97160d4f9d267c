"""Folders the stores keep their files in, made on first use.

A folder that cannot be made (no permission, a file in its way, a read-only disk) is an error
of this project's, naming what the folder is for, not a bare ``OSError`` from deep in a store.
"""

from __future__ import annotations

from pathlib import Path

from store.errors import ConfigError, PlaylistEvalError


def make_folder(folder: Path, what: str, error: type[PlaylistEvalError] = ConfigError) -> None:
    """Create ``folder`` and its parents unless they are there; when the OS refuses, raise
    ``error`` saying it ``cannot create {what}`` and why (``what`` names the folder's use and
    quotes its path)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"cannot create {what}: {exc}") from exc
