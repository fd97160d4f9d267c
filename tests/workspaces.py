"""Copies of an indexed workspace that cost what they hold, not what they appear to hold.

The embedded Qdrant engine preallocates its WAL and segment files as sparse 32 MiB files: a
workspace of 23 MB on disk *appears* to be 330 MB, and ``shutil.copytree`` writes every
apparent byte. ``cp --sparse=always`` keeps the holes, so a test's copy takes what the data
takes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def copy_workspace(source: Path, target: Path) -> Path:
    """Copy the workspace folder ``source`` to ``target`` (which must not exist), sparsely."""
    if shutil.which("cp") is None:  # not GNU coreutils: a plain copy still works
        shutil.copytree(source, target)
        return target
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)
    return target
