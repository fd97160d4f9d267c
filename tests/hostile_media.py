"""Media files made here for the hostile input tables: tiny videos, sound with no picture,
a picture that claims a size it is not, and files cut short (PyAV; milliseconds each)."""

from __future__ import annotations

import struct
from pathlib import Path

import av
import numpy as np


def tiny_video(
    path: Path, *, seconds: int = 40, colour: tuple[int, int, int] = (200, 40, 40), **options: str
) -> Path:
    """A 64x48 H.264 mp4 of one colour, 2 frames a second (``options`` go to the muxer)."""
    with av.open(str(path), "w", format="mp4", options=options) as out:
        stream = out.add_stream("libx264", rate=2)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.options = {"preset": "ultrafast"}
        image = np.empty((48, 64, 3), np.uint8)
        image[:] = colour
        frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p")
        for index in range(seconds * 2):
            frame.pts = index
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def audio_only(path: Path) -> Path:
    """An mp4 with one AAC track of silence and no picture."""
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("aac", rate=16_000, layout="mono")
        for index in range(20):
            frame = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts = 16_000, index * 1024
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def claiming(path: Path, width: int, height: int) -> Path:
    """A 32x32 Motion-JPEG AVI whose headers and frames claim ``width`` x ``height``."""
    with av.open(str(path), "w", format="avi") as out:
        stream = out.add_stream("mjpeg", rate=5)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuvj420p"
        image = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
        picture = image.reformat(format="yuvj420p")
        for index in range(10):
            picture.pts = index
            out.mux(stream.encode(picture))
        out.mux(stream.encode(None))
    data = path.read_bytes()
    # BITMAPINFOHEADER and the AVI main header: little-endian width, height.
    data = data.replace(struct.pack("<II", 32, 32), struct.pack("<II", width, height))
    # Each JPEG's start-of-frame segment: big-endian height, width.
    sof = b"\xff\xc0\x00\x11\x08"
    data = data.replace(sof + struct.pack(">HH", 32, 32), sof + struct.pack(">HH", height, width))
    path.write_bytes(data)
    return path


def cut_short(path: Path, keep: float, **options: str) -> Path:
    """A tiny video with only the first ``keep`` of its bytes (``movflags=faststart`` puts the
    header first, so a file cut short still opens)."""
    tiny_video(path, **options)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def cut_between_frames(path: Path, keep: float) -> Path:
    """A tiny faststart video whose data stops cleanly at the frame ``keep`` of the way in: the
    header still declares the whole length, every frame left decodes (a download or copy cut
    short between two writes)."""
    tiny_video(path, movflags="faststart")
    with av.open(str(path)) as container:
        starts = sorted(p.pos for p in container.demux(video=0) if p.pos is not None and p.size)
    data = path.read_bytes()
    path.write_bytes(data[: starts[int(len(starts) * keep)]])
    return path
