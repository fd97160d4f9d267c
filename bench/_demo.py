"""The demo benchmark the judge benches evaluate: indexed, curated and exported once."""

from __future__ import annotations

import shutil
from pathlib import Path


def demo_benchmark(workdir: Path, max_seeds: int = 6) -> tuple[Path, Path]:
    """The demo playlist indexed, ``max_seeds`` seeds curated offline and the run exported
    under ``workdir``, made once (kept while its ``pairs.jsonl`` is there):
    (workspace home, benchmark dir)."""
    from playlisteval import runs
    from playlisteval.app import App
    from playlisteval.settings import SETTINGS_FILE, load_settings
    from tools.offline.synthetic import make_demo_playlist

    home, bench = workdir / "home", workdir / "bench"
    if (bench / "pairs.jsonl").exists():
        return home, bench
    shutil.rmtree(workdir, ignore_errors=True)  # a half-made one from an interrupted run
    home.mkdir(parents=True)
    (home / SETTINGS_FILE).write_text(
        "[index]\nsegment_min_minutes = 1.0\nsegment_target_minutes = 1.0\n"
        "segment_max_minutes = 2.0\n"
    )
    playlist = make_demo_playlist(workdir / "playlist")
    with App(load_settings(home)) as app:
        indexer = app.indexer()
        indexer.add(str(playlist), domain=None)
        indexer.prepare_media()
        indexer.run()
        report = runs.curate(app, budget_usd=None, max_seeds=max_seeds)
        runs.export(app, bench, report.run_id)
    return home, bench
