"""Benchmark: 0.5 fps RGB frames of a 10-minute 720p long-GOP video, ffmpeg CLI vs sample_frames.

The video (1280×720, 30 fps, H.264 veryfast, GOP 300 = one keyframe per 10 s, with B-frames) is
made once with the ffmpeg CLI and cached in the work directory. Prints seconds for each side and
the ratio ours/ffmpeg (target <= 0.5) at 720p and at the offline embedder's 180p.
Run: ``python -m bench.frames [WORKDIR]``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from tools.index.media import probe, sample_frames

VIDEO_NAME = "long_gop_720p_10min.mp4"
DEFAULT_WORKDIR = Path(__file__).resolve().parent.parent / ".bench-cache"


def ffmpeg_exe() -> str:
    """The ffmpeg bundled by imageio-ffmpeg when installed, else the system one."""
    try:
        import imageio_ffmpeg  # type: ignore[import-untyped]
    except ImportError:
        return shutil.which("ffmpeg") or "/usr/bin/ffmpeg"
    return str(imageio_ffmpeg.get_ffmpeg_exe())


def make_video(workdir: Path) -> Path:
    """Create (once) the 10-minute test video in ``workdir`` and return its path."""
    workdir.mkdir(parents=True, exist_ok=True)
    video = workdir / VIDEO_NAME
    if video.exists():
        return video
    partial = workdir / (VIDEO_NAME + ".partial.mp4")
    subprocess.run(
        [
            ffmpeg_exe(),
            *("-hide_banner", "-loglevel", "error", "-y"),
            *("-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-t", "600"),
            *("-c:v", "libx264", "-preset", "veryfast", "-g", "300", "-pix_fmt", "yuv420p"),
            str(partial),
        ],
        check=True,
    )
    # Rename only when complete so an interrupted run never leaves a truncated cache.
    partial.rename(video)
    return video


def _ffmpeg_s(video: Path, height: int) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            ffmpeg_exe(),
            *("-hide_banner", "-loglevel", "error", "-i", str(video)),
            *("-vf", f"fps=0.5,scale=-2:{height}", "-f", "rawvideo", "-pix_fmt", "rgb24"),
            *("-y", "/dev/null"),
        ],
        check=True,
    )
    return time.perf_counter() - started


def run(workdir: Path, heights: tuple[int, ...] = (720, 180), repeats: int = 2) -> dict[str, float]:
    """Time the ffmpeg CLI and ``sample_frames`` on the cached video at each output height (720:
    what a generator's clip needs; 180: what the offline embedder decodes), alternating the two
    ``repeats`` times and keeping each side's fastest run (the least disturbed by other load)."""
    video = make_video(workdir)
    expected = len(range(0, round(probe(video).duration_s * 0.5)))
    results: dict[str, float] = {"frames_expected": float(expected)}
    for height in heights:
        ffmpeg_s = ours_s = float("inf")
        for _ in range(repeats):
            ffmpeg_s = min(ffmpeg_s, _ffmpeg_s(video, height))
            started = time.perf_counter()
            frames = sample_frames(video, fps=0.5, max_height=height)
            ours_s = min(ours_s, time.perf_counter() - started)
        results |= {
            f"ffmpeg_cli_{height}p_s": ffmpeg_s,
            f"sample_frames_{height}p_s": ours_s,
            f"ratio_ours_over_ffmpeg_{height}p": ours_s / ffmpeg_s,
            f"frames_{height}p": float(len(frames)),
        }
    return results


if __name__ == "__main__":
    results = run(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_WORKDIR)
    for name, value in results.items():
        print(f"{name:>24}: {value:.3f}")
