"""Throughput of the offline embedder against MiniLM alone, measured in the same run.

Prints chunks/s for ``minilm-text+frame-stats`` on synthetic chunks (15 frames of 320×180 and
a 60-word transcript each) and for MiniLM on the transcripts only; the ratio is what matters.
"""

from __future__ import annotations

import os
import time

import numpy as np

from tools.index.embeddings import ChunkContent, FrameStatsTextEmbedder

_WORDS = [
    "the",
    "speaker",
    "walks",
    "to",
    "the",
    "board",
    "and",
    "writes",
    "the",
    "equation",
    "then",
    "turns",
    "to",
    "the",
    "class",
    "and",
    "asks",
    "who",
    "remembers",
    "how",
    "we",
    "solved",
    "the",
    "last",
    "problem",
    "about",
    "rates",
    "of",
    "change",
    "and",
    "slopes",
]


def _chunks(count: int, seed: int = 0) -> list[ChunkContent]:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (15, 180, 320, 3), dtype=np.uint8)
    chunks = []
    for index in range(count):
        words = rng.choice(_WORDS, size=60)
        # Shift the shared frames so chunks differ without generating 512×15 new images.
        frames = [np.roll(frame, index, axis=1) for frame in base]
        chunks.append(ChunkContent(frames, " ".join(words)))
    return chunks


def run(count: int = 512) -> dict[str, float]:
    """Return chunks/s of the fused embedder, of MiniLM alone, and their ratio."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder = FrameStatsTextEmbedder()
    chunks = _chunks(count)
    embedder.embed_chunks(chunks[:8])  # warm-up: first call pays for lazy initialisation

    started = time.perf_counter()
    embedder._encode_texts([chunk.transcript for chunk in chunks])
    minilm_s = time.perf_counter() - started

    started = time.perf_counter()
    embedder.embed_chunks(chunks)
    fused_s = time.perf_counter() - started

    return {
        "chunks": float(count),
        "fused_chunks_per_s": count / fused_s,
        "minilm_only_chunks_per_s": count / minilm_s,
        "fused_over_minilm": minilm_s / fused_s,
    }


if __name__ == "__main__":
    for key, value in run().items():
        print(f"{key}: {value:.2f}")
