"""Does reading on-screen text change search? The demo's scene labels, with and without OCR.

Every demo scene shows a label (``KILO 42``) in a band at the bottom of the picture; the
narration never says it. The demo playlist is indexed twice through the real pipeline (the
offline embedder, captions as transcripts): once as configured by default (``index.ocr =
false``) and once with on-screen text read by RapidOCR from each chunk's frames and embedded
beside the transcript. Then each label is searched for (top 5 chunks of the search tool) and a
hit is the chunk that shows that scene. Printed: how many labels OCR read exactly (spaces
aside), recall@1 and @5 with and without OCR, and the seconds indexing took each way.

Run: ``.venv/bin/python bench/ocr_search.py [--workdir DIR]`` (a few minutes on 2 cores; needs
the ``ocr`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine

CACHE = Path(__file__).resolve().parents[1] / ".bench-cache" / "ocr-search"


def index(home: Path, playlist: Path, ocr: bool) -> float:
    """Index ``playlist`` into a fresh workspace at ``home``; the seconds it took."""
    from playlisteval.app import App, build_transcriber, index_config
    from playlisteval.settings import load_settings
    from tools.index.indexer import Indexer

    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    with App(load_settings(home)) as app:
        indexer = Indexer(
            catalog=app.catalog,
            vectors=app.vectors,
            embedder=app.embedder,
            transcriber=build_transcriber(app.settings),
            config=replace(index_config(app.settings), ocr=ocr),
            media_dir=app.workspace.media,
        )
        indexer.add(str(playlist), domain=None)
        indexer.prepare_media()
        started = time.perf_counter()
        indexer.index_ready()
        return time.perf_counter() - started


def scenes(playlist: Path) -> list[dict[str, Any]]:
    """Every scene of the demo's ground truth with its video's id (duplicates left out)."""
    return [
        {**scene, "video_id": video["id"]}
        for video in _videos(playlist.parent)
        if not video.get("duplicate_of")
        for scene in video["scenes"]
    ]


def recall(home: Path, shown: list[dict[str, Any]]) -> tuple[float, float]:
    """Recall@1 and @5 of a search for each scene's label: a hit shows that scene."""
    from playlisteval.app import App
    from playlisteval.settings import load_settings

    at1 = at5 = 0
    with App(load_settings(home)) as app:
        search = app.search()
        for scene in shown:
            hits = search.search(scene["on_screen_text"], k=5)
            good = [
                h
                for h in hits
                if h.video_id == scene["video_id"]
                and h.start_s < scene["end_s"]
                and scene["start_s"] < h.end_s
            ]
            at1 += bool(good) and hits[0] in good
            at5 += bool(good)
    return at1 / len(shown), at5 / len(shown)


def read_labels(folder: Path, shown: list[dict[str, Any]]) -> tuple[int, float]:
    """Labels OCR reads exactly (spaces aside) from each scene's middle frame, decoded at the
    offline embedder's 180p as the indexer decodes them; and the seconds a frame took."""
    from tools.index import media
    from tools.index.ocr import ScreenTextReader

    reader = ScreenTextReader()
    exact = 0
    started = time.perf_counter()
    for scene in shown:
        path = folder / next(v["path"] for v in _videos(folder) if v["id"] == scene["video_id"])
        middle = (scene["start_s"] + scene["end_s"]) / 2
        frame = next(iter(media.iter_frames(path, fps=0.5, max_height=180, start_s=middle)))
        read = "".join(reader.read_frame(frame.image)).replace(" ", "")
        exact += read == scene["on_screen_text"].replace(" ", "")
    return exact, (time.perf_counter() - started) / len(shown)


def _videos(folder: Path) -> list[dict[str, Any]]:
    truth = json.loads((folder / "ground_truth.json").read_text())
    videos: list[dict[str, Any]] = truth["videos"] if isinstance(truth, dict) else truth
    return videos


def main() -> None:
    """Index twice, search every label, print the figures."""
    from tools.offline.synthetic import make_demo_playlist

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=CACHE)
    args = parser.parse_args()
    playlist = args.workdir / "playlist" / "manifest.json"
    if not playlist.exists():
        shutil.rmtree(args.workdir, ignore_errors=True)
        playlist = make_demo_playlist(args.workdir / "playlist")
    shown = scenes(playlist)
    exact, per_frame = read_labels(playlist.parent, shown)
    seconds = {ocr: index(args.workdir / f"home-ocr-{ocr}", playlist, ocr) for ocr in (False, True)}
    found = {ocr: recall(args.workdir / f"home-ocr-{ocr}", shown) for ocr in (False, True)}
    print(f"# On-screen text and search on the demo ({machine()})")
    print(f"{len(shown)} scenes; OCR read {exact} labels exactly ({per_frame:.2f} s a frame)")
    print("| index.ocr | recall@1 | recall@5 | indexing s |")
    print("|---|---|---|---|")
    for ocr in (False, True):
        at1, at5 = found[ocr]
        print(f"| {str(ocr).lower()} | {at1:.3f} | {at5:.3f} | {seconds[ocr]:.0f} |")


if __name__ == "__main__":
    main()
