"""Shared fixtures: every test runs offline, in its own workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's real workspace or settings."""
    monkeypatch.setenv("PLAYLISTEVAL_HOME", str(tmp_path / "home"))
    for name in list(os.environ):
        if name.startswith("PLAYLISTEVAL_") and name != "PLAYLISTEVAL_HOME":
            monkeypatch.delenv(name)
