"""The offline provider's eyes: named colours, shapes and grid positions read from frames.

Pure numpy on purpose (no scipy, no model): the offline provider must answer from what a call
carries, deterministically and fast. It reads scenes made of flat colour regions — the synthetic
demo playlist, and any footage simple enough — as a background plus the blobs in front of it,
each named by the nearest colour of :data:`tools.offline.synthetic.PALETTE`, its 3×3 grid cell and
the
shape its fill ratio suggests.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from store.errors import MediaError
from tools.index import media
from tools.offline.synthetic import PALETTE, POSITIONS, SHAPE_KINDS

__all__ = [
    "COLOURS",
    "PALETTE_RGB",
    "POSITIONS",
    "SHAPE_KINDS",
    "VisualFact",
    "decode_clip",
    "describe_frames",
    "describe_image",
    "nearest_colour_index",
]

COLOURS: tuple[str, ...] = tuple(PALETTE)
PALETTE_RGB = np.array([PALETTE[name] for name in COLOURS], dtype=np.float32)
# Frames are read on a grid about this many pixels wide: enough for a shape a ninth of the frame
# across, small enough that the pure-Python flood fill costs little.
_WORK_WIDTH = 96
# A blob smaller than this share of the grid area is an edge artefact or a glyph, not a shape.
_MIN_BLOB_SHARE = 0.004
# Fill ratio of a blob's bounding box: square ~1.0, circle ~0.785, triangle ~0.5.
_SQUARE_FILL = 0.9
_CIRCLE_FILL = 0.65
# Below this fill ratio a "blob" is the halo that chroma subsampling leaves around a shape (e.g. a
# purple ring around red on blue), not a shape: even a triangle fills half its box.
_MIN_FILL = 0.35


class VisualFact(BaseModel):
    """One thing seen at one moment: the background's colour, or a shape in front of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    t_s: float
    kind: Literal["background", "shape"]
    colour: str
    position: str | None = None
    shape: str | None = None


def _caption_band(height: int) -> int:
    """Rows at the bottom kept for on-screen text: the grid (and its shapes) lies above them."""
    return height // 6


_PALETTE_F64 = PALETTE_RGB.astype(np.float64)
_PALETTE_NORMS = (_PALETTE_F64**2).sum(axis=-1)


def nearest_colour_index(pixels: npt.NDArray[np.float32]) -> npt.NDArray[np.intp]:
    """Index into :data:`COLOURS` of the nearest palette colour of each RGB pixel.

    ``|p - c|² = |p|² - 2 p·c + |c|²``, and ``|p|²`` is the same for every ``c``: the nearest
    colour minimises ``|c|² - 2 p·c``, one matrix product instead of a pixels × palette × 3
    array of differences (8× faster; most of the offline harness's time describing clips). In
    float64 the sums of integer pixels are exact, so ties fall as before (the first colour)."""
    flat = pixels.reshape(-1, 3).astype(np.float64)
    scores = _PALETTE_NORMS - 2.0 * (flat @ _PALETTE_F64.T)
    return np.asarray(scores.argmin(axis=-1), dtype=np.intp).reshape(pixels.shape[:-1])


def _components(mask: npt.NDArray[np.bool_]) -> list[npt.NDArray[np.intp]]:
    """4-connected regions of ``mask`` as arrays of flat indices (an iterative flood fill)."""
    height, width = mask.shape
    flat = mask.ravel().copy()
    regions: list[npt.NDArray[np.intp]] = []
    for seed in np.flatnonzero(flat):
        if not flat[seed]:
            continue
        flat[seed] = False
        stack = [int(seed)]
        members: list[int] = []
        while stack:
            index = stack.pop()
            members.append(index)
            row, col = divmod(index, width)
            for neighbour, inside in (
                (index - width, row > 0),
                (index + width, row < height - 1),
                (index - 1, col > 0),
                (index + 1, col < width - 1),
            ):
                if inside and flat[neighbour]:
                    flat[neighbour] = False
                    stack.append(neighbour)
        regions.append(np.array(members, dtype=np.intp))
    return regions


def _shape_name(fill_ratio: float) -> str:
    if fill_ratio >= _SQUARE_FILL:
        return "square"
    if fill_ratio >= _CIRCLE_FILL:
        return "circle"
    return "triangle"


def _position_name(cx: float, cy: float, width: int, height: int) -> str:
    col = min(2, max(0, int(3 * cx / width)))
    row = min(2, max(0, int(3 * cy / height)))
    return POSITIONS[3 * row + col]


def describe_image(image: npt.NDArray[np.uint8], t_s: float) -> list[VisualFact]:
    """The background and the shapes of one RGB picture (H×W×3 uint8), seen at ``t_s``."""
    if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] < 6 or image.shape[1] < 3:
        raise MediaError(f"expected an H×W×3 RGB picture, got an array of shape {image.shape!r}")
    height = image.shape[0] - _caption_band(image.shape[0])
    step = max(1, image.shape[1] // _WORK_WIDTH)
    # Point sampling, not averaging: an average mixes the colours at a shape's edge into a third.
    grid = image[:height:step, ::step].astype(np.float32)
    labels = nearest_colour_index(grid)
    rows, cols = labels.shape
    counts = np.bincount(labels.ravel(), minlength=len(COLOURS))
    background = int(counts.argmax())
    facts = [VisualFact(t_s=t_s, kind="background", colour=COLOURS[background])]
    min_size = max(4, round(_MIN_BLOB_SHARE * rows * cols))
    for colour in np.flatnonzero(counts >= min_size):
        if colour == background:
            continue
        for region in _components(labels == colour):
            if len(region) < min_size:
                continue
            ys, xs = np.divmod(region, cols)
            box = (int(ys.max()) - int(ys.min()) + 1) * (int(xs.max()) - int(xs.min()) + 1)
            if len(region) / box < _MIN_FILL:
                continue
            # Colour from the original pixels, so a blob is named by its body, not by its label.
            mean_rgb = grid[ys, xs].mean(axis=0)
            facts.append(
                VisualFact(
                    t_s=t_s,
                    kind="shape",
                    colour=COLOURS[int(nearest_colour_index(mean_rgb[None, :])[0])],
                    position=_position_name(
                        (xs.min() + xs.max() + 1) / 2, (ys.min() + ys.max() + 1) / 2, cols, rows
                    ),
                    shape=_shape_name(len(region) / box),
                )
            )
    return sorted(facts, key=lambda f: (f.kind, f.position or "", f.colour))


def describe_frames(frames: Sequence[media.Frame], offset_s: float) -> list[VisualFact]:
    """Every frame's facts, timed ``offset_s + frame.t`` (absolute time in the video)."""
    facts: list[VisualFact] = []
    for frame in frames:
        facts.extend(describe_image(frame.image, round(offset_s + frame.t, 6)))
    return facts


def decode_clip(data: bytes, fps: float) -> list[media.Frame]:
    """Frames of an encoded clip (mp4 bytes) at ``fps``, timed from the clip's own start."""
    if not data:
        raise MediaError("the clip is empty (0 bytes); attach the segment's exported mp4")
    with tempfile.TemporaryDirectory(prefix="clip-") as tmp:
        path = Path(tmp) / "clip.mp4"
        path.write_bytes(data)
        return media.sample_frames(path, fps=fps, max_height=720)
