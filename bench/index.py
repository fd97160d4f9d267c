"""Index benchmarks, each measured side by side with its baseline in one run.

- chunks/s of the offline embedder (baseline: MiniLM alone on the same transcripts);
- 0.5 fps frame sampling of a 10-minute 720p video, as a ratio to the bundled ffmpeg CLI
  (`-vf fps=0.5,scale`) doing the same, at 720p and at the offline embedder's 180p — target ≤ 0.5;
- hours of 720p video indexed per hour over a generated multi-hour playlist (captions and the
  offline embedder; Whisper base on part of it), against ffmpeg decoding the same files
  (`bench/throughput.py`);
- filtered top-10 query latency p50/p99 at 100 000 chunk vectors per index backend, with
  recall@10 against exact numpy search — target p50 ≤ 10 ms at recall@10 ≥ 0.95 for the
  embedded default.

Run: `make bench` or `.venv/bin/python bench/index.py [--workdir DIR] [--only NAME] [--hours H]
[--whisper-minutes M]` (about 15 minutes on 2 idle cores, most of it the 2-hour playlist; the GPU
counterpart is `bench/gpu_index.py`).
Figures go into bench/RESULTS.md with the machine they came from.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import embedder
import frames
import throughput
import vector_search
from _machine import machine


def main() -> None:
    """Run the benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", type=Path, default=Path(".bench-cache"))
    choices = ["embedder", "frames", "throughput", "vectors"]
    parser.add_argument("--only", choices=choices, action="append")
    parser.add_argument("--hours", type=float, default=2.0, help="playlist length (throughput)")
    parser.add_argument(
        "--whisper-minutes", type=float, default=10.0, help="of it transcribed by Whisper base"
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    wanted = set(args.only or choices)
    print(f"machine: {machine()}")
    if "embedder" in wanted:
        print("\n## offline embedder")
        for key, value in embedder.run().items():
            print(f"{key}: {value:.3f}")
    if "frames" in wanted:
        print("\n## 0.5 fps frame sampling, 10 min 720p", flush=True)
        for key, value in frames.run(args.workdir).items():
            print(f"{key}: {value:.3f}")
    if "throughput" in wanted:
        print(f"\n## indexing throughput, {args.hours:g} h of 720p", flush=True)
        for key, value in throughput.run(args.workdir, args.hours, args.whisper_minutes).items():
            print(f"{key}: {value:.3f}")
    if "vectors" in wanted:
        print("\n## filtered top-10 at 100k chunk vectors")
        for key, value in vector_search.run().items():
            print(f"{key}: {value:.4f}")


if __name__ == "__main__":
    main()
