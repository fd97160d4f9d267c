"""Which code ran: recorded beside what it made (an evaluation, a report), so a figure can be
traced to the version that produced it."""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path


def code_version() -> str:
    """``git describe`` of the checkout this code runs from, else the installed version."""
    root = Path(__file__).resolve().parent.parent
    if (root / ".git").exists():
        try:
            described = subprocess.run(
                ["git", "-C", str(root), "describe", "--always", "--dirty", "--tags"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            if described:
                return f"git {described}"
        except (OSError, subprocess.SubprocessError):
            pass  # no git here: the package's version says enough
    try:
        return f"playlisteval {importlib.metadata.version('playlisteval')}"
    except importlib.metadata.PackageNotFoundError:
        return "playlisteval (version unknown)"
