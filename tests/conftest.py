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


DEMO_INDEX = {
    "segment_min_minutes": 1.0,
    "segment_target_minutes": 1.0,
    "segment_max_minutes": 2.0,
}


@pytest.fixture(scope="session")
def demo_playlist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic demo playlist (with its planted duplicate), made once per session."""
    from tools.synthetic import make_demo_playlist

    return make_demo_playlist(tmp_path_factory.mktemp("demo-playlist"))


@pytest.fixture(scope="session")
def demo_home(demo_playlist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with the demo playlist indexed (closed again: copy it before writing)."""
    from playlisteval.app import App
    from playlisteval.settings import SETTINGS_FILE, load_settings

    home = tmp_path_factory.mktemp("demo-home")
    (home / SETTINGS_FILE).write_text(
        "[index]\n" + "".join(f"{k} = {v}\n" for k, v in DEMO_INDEX.items())
    )
    with App(load_settings(home)) as app:
        indexer = app.indexer()
        indexer.add(str(demo_playlist), domain=None)
        indexer.prepare_media()
        indexer.run()
    return home


@pytest.fixture
def workspace(demo_home: Path, tmp_path: Path) -> Path:
    """A private copy of the indexed demo workspace."""
    import shutil

    copy = tmp_path / "ws"
    shutil.copytree(demo_home, copy)
    return copy
