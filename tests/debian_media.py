"""Real media that Debian packages ship, used in place: LibriVox speech with transcripts
(``pocketsphinx-testdata``) and real street footage (``opencv-doc``).

``scripts/setup.sh`` installs both. A test that needs one calls :func:`debian_file`: on a
machine without the package it is installed when the tests run as root (as CI does), and the
test is skipped, with the reason, only where it is absent and cannot be installed by us.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

VTEST = Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi")
TREE = Path("/usr/share/doc/opencv-doc/examples/data/tree.avi")
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")


def debian_file(package: str, path: Path) -> Path:
    """``path`` from Debian's ``package``: installed with apt-get when absent and root; a skip
    saying what to install when absent and not root; a failure when root could not install it."""
    if path.exists():
        return path
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(f"{path} is absent: `apt-get install {package}` (as root) brings it")
    done = subprocess.run(
        ["apt-get", "install", "-y", "-qq", package],
        capture_output=True,
        text=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        check=False,
    )
    if done.returncode != 0 or not path.exists():
        pytest.fail(f"apt-get install {package} failed ({done.returncode}): {done.stderr[-500:]}")
    return path
