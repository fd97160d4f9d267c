"""On-screen text read from a chunk's frames (RapidOCR's PP-OCR models, shipped in its wheel).

With ``index.ocr = true`` the indexer reads the text shown in each chunk's sampled frames and
offers it to the chunk embedder beside the transcript, so a search for words that are only
shown (a title, a label, a slide) can find the chunk. It never enters the stored transcript:
the transcript conditions, the transcript test and the transcript-only judges see what was
said, not what was shown (on-screen graphics are one of the visual facts a distractor may
change).

Reading is the costly part (about a second a frame on a CPU core), so a chunk's frames are read
once per distinct picture (a frame like the one before it is skipped) and at most
``max_frames`` of them, spread over the chunk.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from store.errors import ConfigError

__all__ = ["ScreenTextReader", "distinct_frames", "with_screen_text"]

MIN_SCORE = 0.6  # PP-OCR's recognition confidence under which a line is dropped
SAME_PICTURE = 6.0  # mean absolute difference (0–255) of 32×32 grey thumbnails: the same picture


def _thumbnail(frame: np.ndarray) -> np.ndarray:
    grey = frame.astype(np.float32).mean(axis=2) if frame.ndim == 3 else frame.astype(np.float32)
    rows = np.linspace(0, grey.shape[0] - 1, 32).astype(int)
    cols = np.linspace(0, grey.shape[1] - 1, 32).astype(int)
    thumb: np.ndarray = grey[np.ix_(rows, cols)]
    return thumb


def distinct_frames(frames: Sequence[np.ndarray], max_frames: int) -> list[int]:
    """Indices of the frames worth reading: each unlike the one kept before it, thinned evenly
    to at most ``max_frames`` (a still scene is read once, moving footage a few times)."""
    kept: list[int] = []
    last: np.ndarray | None = None
    for index, frame in enumerate(frames):
        thumb = _thumbnail(frame)
        if last is None or float(np.abs(thumb - last).mean()) > SAME_PICTURE:
            kept.append(index)
            last = thumb
    if len(kept) <= max_frames:
        return kept
    picks = np.linspace(0, len(kept) - 1, max_frames).round().astype(int)
    return [kept[i] for i in sorted(set(picks.tolist()))]


def with_screen_text(transcript: str, screen: str) -> str:
    """The text a chunk is embedded from: its transcript, and what is shown when anything is."""
    if not screen:
        return transcript
    return f"{transcript}\nOn screen: {screen}" if transcript else f"On screen: {screen}"


class ScreenTextReader:
    """RapidOCR over frames (RGB arrays), loaded on first use; one reading at a time."""

    def __init__(self, max_frames: int = 4, min_score: float = MIN_SCORE) -> None:
        """``max_frames``: the most frames of one chunk read; lines under ``min_score`` are
        dropped."""
        if max_frames < 1:
            raise ConfigError(f"max_frames={max_frames!r} must be at least 1")
        self.max_frames = max_frames
        self.min_score = min_score
        self._engine: Any = None
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        if self._engine is None:
            try:
                module: Any = importlib.import_module("rapidocr_onnxruntime")
            except ImportError as exc:
                raise ConfigError(
                    "index.ocr = true needs rapidocr-onnxruntime: install the `ocr` extra "
                    "(`pip install -e '.[ocr]'`) or set index.ocr = false"
                ) from exc
            self._engine = module.RapidOCR()
        return self._engine

    def read_frame(self, frame: np.ndarray) -> list[str]:
        """The lines of text in one RGB frame, top to bottom, above the confidence floor."""
        with self._lock:
            # PP-OCR takes OpenCV's channel order.
            found, _elapsed = self._loaded()(np.ascontiguousarray(frame[..., ::-1]))
        lines = [
            (float(box[0][1]), str(text).strip())
            for box, text, score in found or ()
            if float(score) >= self.min_score and str(text).strip()
        ]
        return [text for _top, text in sorted(lines)]

    def read_chunk(self, frames: Sequence[np.ndarray]) -> str:
        """Every distinct line shown in a chunk's frames, in the order first seen."""
        seen: dict[str, None] = {}
        for index in distinct_frames(frames, self.max_frames):
            for line in self.read_frame(frames[index]):
                seen.setdefault(line, None)
        return " ".join(seen)
