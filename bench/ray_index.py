"""Ray Data's overhead on one machine: hours of video indexed per hour by the local indexer and by
``index --ray`` on the same playlist, in one run (target: Ray at least 0.85 of local).

The playlist is the campaign rehearsal's (``tools/offline/campaign.py``: 128×96 at 1 fps, captions,
one
domain of ``--hours``), the models the offline defaults (captions, MiniLM + frame statistics).
Each engine indexes it into a fresh workspace, timed from the listed playlist to the seeds:
the local indexer probes, loads its models and indexes; the Ray run does the same inside its
tasks and actors. The local Ray cluster is started once before both (on a real cluster it is
already up) and its start is printed apart. Both indexes are then compared (chunk for chunk).

Ray's extra time is mostly fixed (actors start, import and load their models while decoding
begins), so the ratio grows with the playlist: 30 hours (the default) is where the target is
judged. Run: ``.venv/bin/python bench/ray_index.py [--hours 30] [--set KEY=VALUE] [--workdir
DIR]`` (about 4 minutes on 2 idle cores). Figures go into bench/RESULTS.md with the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine


def _index(
    home: Path, manifest: Path, engine: str, index: dict[str, Any]
) -> tuple[float, int, Any]:
    """Index ``manifest`` into a fresh workspace at ``home``; seconds, chunks, stored chunks."""
    from playlisteval.app import App
    from playlisteval.settings import load_settings

    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    with App(load_settings(home, index=index)) as app:
        app.indexer().add(str(manifest), domain=None)  # listing only: no model, no probe
        started = time.perf_counter()
        if engine == "local":
            indexer = app.indexer()  # loads MiniLM: part of the local run's time
            indexer.prepare_media()
            summary = indexer.run()
        else:
            summary = app.ray_indexer().run()
        took = time.perf_counter() - started
        stored = {
            (c.video_id, c.idx): (c.transcript, c.vector)
            for v in app.catalog.videos()
            for c in app.catalog.chunks(v.id)
        }
    if summary.videos_failed:
        raise SystemExit(f"ray_index: {engine} failed videos: {summary.videos_failed}")
    return took, summary.chunks_computed, stored


def run(workdir: Path, hours: float, index: dict[str, Any] | None = None) -> dict[str, float]:
    """Generate the playlist, index it both ways, print and return the figures."""
    import numpy as np
    import ray

    from store.catalog import vectors_from_bytes
    from tools.offline.campaign import CampaignSpec, make_campaign

    spec = CampaignSpec(domains=1, hours_per_domain=hours)
    started = time.perf_counter()
    manifest = make_campaign(workdir / f"campaign-{hours:g}h", spec)
    print(f"playlist: {hours:g} h, {time.perf_counter() - started:.0f} s to make", flush=True)

    started = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
    cluster_s = time.perf_counter() - started
    print(f"local Ray cluster started in {cluster_s:.1f} s (not counted below)", flush=True)
    try:
        index = index or {}
        local_s, local_chunks, local = _index(workdir / "local", manifest, "local", index)
        print(f"local: {local_chunks} chunks in {local_s:.1f} s", flush=True)
        ray_s, ray_chunks, on_ray = _index(workdir / "ray", manifest, "ray", index)
        print(f"ray:   {ray_chunks} chunks in {ray_s:.1f} s", flush=True)
    finally:
        ray.shutdown()
    if local.keys() != on_ray.keys():
        raise SystemExit("ray_index: the two indexes hold different chunks")
    worst = 0.0
    for key, (text, vector) in local.items():
        if on_ray[key][0] != text:
            raise SystemExit(f"ray_index: transcripts differ at {key}")
        got, want = vectors_from_bytes([on_ray[key][1]]), vectors_from_bytes([vector])
        worst = max(worst, float(np.abs(got - want).max()))
    figures = {
        "hours": hours,
        "chunks": float(local_chunks),
        "cluster_start_s": cluster_s,
        "local_s": local_s,
        "ray_s": ray_s,
        "local_hours_per_hour": hours * 3600 / local_s,
        "ray_hours_per_hour": hours * 3600 / ray_s,
        "ratio": local_s / ray_s,
        "max_vector_difference": worst,
    }
    print(
        f"hours indexed per hour: local {figures['local_hours_per_hour']:.0f}, "
        f"Ray {figures['ray_hours_per_hour']:.0f}; Ray/local {figures['ratio']:.2f} "
        f"(target >= 0.85); same chunks, vectors within {worst:.1e}",
        flush=True,
    )
    return figures


def main() -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=30.0, help="playlist length")
    parser.add_argument("--workdir", type=Path, default=Path(".bench-cache") / "ray-index")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an [index] setting for both runs, e.g. ray_decode_cpus=0.5 (repeatable)",
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    index = {
        k: float(v) if v.replace(".", "").isdigit() else v
        for k, v in (a.split("=", 1) for a in args.set)
    }
    print(f"machine: {machine()}; [index] {index or 'defaults'}")
    run(args.workdir, args.hours, index)


if __name__ == "__main__":
    main()
