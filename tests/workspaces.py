"""Copies of an indexed workspace that cost what they hold, not what they appear to hold.

The embedded Qdrant engine preallocates its WAL and segment files as sparse 32 MiB files: a
workspace of 23 MB on disk *appears* to be 330 MB, and ``shutil.copytree`` writes every
apparent byte. ``cp --sparse=always`` keeps the holes, so a test's copy takes what the data
takes.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from playlisteval.app import App
from playlisteval.settings import SETTINGS_FILE, load_settings

#: A workspace whose short clips carry no captions: Whisper base hears them, in short segments.
WHISPER_SETTINGS = (
    "[index]\n"
    'local_transcriber = "faster-whisper"\n'
    'whisper_model = "base"\n'
    "segment_min_minutes = 0.05\n"
    "segment_target_minutes = 0.1\n"
    "segment_max_minutes = 0.5\n"
)


def copy_workspace(source: Path, target: Path) -> Path:
    """Copy the workspace folder ``source`` to ``target`` (which must not exist), sparsely."""
    if shutil.which("cp") is None:  # not GNU coreutils: a plain copy still works
        shutil.copytree(source, target)
        return target
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)
    return target


@contextmanager
def whisper_indexed(home: Path, folders: Mapping[Path, str]) -> Iterator[App]:
    """The workspace ``home`` (:data:`WHISPER_SETTINGS`) with each folder of ``folders``
    indexed under its domain, every video indexed; open while the block runs."""
    (home / SETTINGS_FILE).write_text(WHISPER_SETTINGS)
    with App(load_settings(home)) as app:
        indexer = app.indexer()
        for folder, domain in folders.items():
            indexer.add(str(folder), domain=domain)
        indexer.prepare_media()
        summary = indexer.run()
        assert summary.videos_failed == []
        yield app
