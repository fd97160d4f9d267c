"""Indexing throughput end to end: hours of 720p video indexed per hour, against decoding alone.

A generated multi-hour playlist of 1280×720, 30 fps H.264 (veryfast, a keyframe every 5 s, three
B-frames: what a 720p download looks like) with AAC narration (espeak-ng): a 2-minute lecture-like
source (colour bars whose hue changes every 20 s, a moving pointer, speech throughout) repeated
into 30-minute videos with stream copy. Measured in one run, each against the same files:

- **decode-only limit**: the ffmpeg CLI decoding every video frame of the playlist (``-f null``),
  the most any indexer that looks at every frame's bitstream could do on this machine;
- **indexed, captions + offline embedder**: ``Indexer.run`` over the playlist (frames at 0.5 fps,
  WebVTT captions, MiniLM + frame statistics, Qdrant edge, SQLite), decoders in threads;
- **indexed, Whisper base**: the same on the first ``--whisper-minutes`` of a copy without
  captions, transcribed by Whisper base (int8 on the CPU), so the ASR's cost is in the figure.

Each figure is "hours of video per hour of wall time" (video seconds / wall seconds); the ratio
to the decode-only limit is what to compare between machines. Run:
``python bench/index.py --only throughput [--hours 2] [--whisper-minutes 10]``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import wave
from collections.abc import Sequence
from pathlib import Path

from tools.offline.synthetic import DOMAINS, espeak_available, narrate_to_wav

SOURCE_MINUTES = 2
VIDEO_MINUTES = 30
_FILTER = (
    "[0:v]hue=h='floor(t/20)*45'[bg];[bg][1:v]overlay=x='mod(t*160,1216)':y='300+100*sin(t)'[v]"
)


def ffmpeg_exe() -> str:
    """The ffmpeg bundled by imageio-ffmpeg when installed, else the system one."""
    try:
        import imageio_ffmpeg  # type: ignore[import-untyped]
    except ImportError:
        return shutil.which("ffmpeg") or "/usr/bin/ffmpeg"
    return str(imageio_ffmpeg.get_ffmpeg_exe())


def _ffmpeg(*args: str) -> None:
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", *args], check=True)


def _sentences() -> list[str]:
    return [s for domain in DOMAINS.values() for s in domain.general]


def make_source(workdir: Path) -> tuple[Path, list[tuple[float, float, str]]]:
    """The 2-minute narrated 720p source (made once) and its narration cues: one pass of the
    demo domains' shared sentences, looped until the 2 minutes are full."""
    source = workdir / "lecture_720p_2min.mp4"
    wav = workdir / "lecture_narration.wav"
    once = narrate_to_wav(_sentences(), wav)  # cheap (espeak-ng), and gives the cues again
    with wave.open(str(wav)) as spoken:
        period = spoken.getnframes() / spoken.getframerate()
    span = SOURCE_MINUTES * 60.0
    cues = [
        (start + k * period, end + k * period, text)
        for k in range(int(span // period) + 1)
        for start, end, text in once
        if end + k * period <= span
    ]
    if not source.exists():
        partial = workdir / "lecture.partial.mp4"
        _ffmpeg(
            *("-f", "lavfi", "-i", "smptehdbars=s=1280x720:r=30"),
            *("-f", "lavfi", "-i", "color=c=red:s=64x64:r=30"),
            *("-stream_loop", "-1", "-i", str(wav)),
            *("-filter_complex", _FILTER, "-map", "[v]", "-map", "2:a"),
            *("-t", str(span)),
            *("-c:v", "libx264", "-preset", "veryfast", "-g", "150", "-bf", "3"),
            *("-pix_fmt", "yuv420p", "-c:a", "aac", "-ar", "16000", "-ac", "1"),
            str(partial),
        )
        partial.rename(source)
    return source, cues


def _vtt(path: Path, cues: Sequence[tuple[float, float, str]]) -> None:
    def stamp(t: float) -> str:
        return f"{int(t // 3600):02d}:{int(t // 60) % 60:02d}:{t % 60:06.3f}"

    lines = ["WEBVTT", ""]
    for start, end, text in cues:
        lines += [f"{stamp(start)} --> {stamp(end)}", text, ""]
    path.write_text("\n".join(lines))


def make_playlist(
    workdir: Path, hours: float, captions: bool, minutes_each: float = VIDEO_MINUTES
) -> list[Path]:
    """``hours`` of video as ``minutes_each``-minute copies of the source (stream copy)."""
    source, cues = make_source(workdir)
    minutes_each = min(minutes_each, hours * 60)
    folder = workdir / f"playlist_{hours:g}h_{minutes_each:g}min_{'cc' if captions else 'nocc'}"
    folder.mkdir(parents=True, exist_ok=True)
    repeats = max(1, round(minutes_each / SOURCE_MINUTES))
    count = max(1, round(hours * 60 / (repeats * SOURCE_MINUTES)))
    listing = workdir / f"concat_{repeats}.txt"
    listing.write_text("".join(f"file '{source.name}'\n" for _ in range(repeats)))
    videos = []
    for number in range(1, count + 1):
        video = folder / f"lecture-{number:02d}.mp4"
        if not video.exists():
            partial = folder / f".lecture-{number:02d}.partial.mp4"
            _ffmpeg("-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy", str(partial))
            partial.rename(video)
        if captions:
            span = SOURCE_MINUTES * 60
            _vtt(
                video.with_suffix(".en.vtt"),
                [(s + k * span, e + k * span, t) for k in range(repeats) for s, e, t in cues],
            )
        videos.append(video)
    return videos


def decode_only_s(videos: Sequence[Path]) -> float:
    """Seconds the ffmpeg CLI takes to decode every video frame of ``videos``."""
    started = time.perf_counter()
    for video in videos:
        _ffmpeg("-threads", "0", "-i", str(video), "-map", "0:v", "-f", "null", "-")
    return time.perf_counter() - started


def index_s(videos: Sequence[Path], home: Path, index: dict[str, object]) -> tuple[float, int]:
    """Seconds ``Indexer.run`` takes over ``videos`` (listing and probing excluded), and chunks."""
    from playlisteval.app import App
    from playlisteval.settings import load_settings

    if home.exists():
        shutil.rmtree(home)
    with App(load_settings(home, index=index)) as app:
        indexer = app.indexer()
        indexer.add(str(videos[0].parent), domain="lectures")
        indexer.prepare_media()
        started = time.perf_counter()
        summary = indexer.run()
        took = time.perf_counter() - started
        if summary.videos_failed:
            raise RuntimeError(f"indexing failed: {summary.videos_failed}")
    return took, summary.chunks_computed


def run(workdir: Path, hours: float = 2.0, whisper_minutes: float = 10.0) -> dict[str, float]:
    """The three figures, in hours of video per hour, and their ratios to decoding alone."""
    if not espeak_available():
        raise SystemExit("bench throughput: espeak-ng narrates the playlist; install it")
    workdir.mkdir(parents=True, exist_ok=True)
    videos = make_playlist(workdir, hours, captions=True)
    video_s = hours * 3600.0
    decode_s = decode_only_s(videos)
    results: dict[str, float] = {
        "playlist_hours": hours,
        "videos": float(len(videos)),
        "decode_only_s": decode_s,
        "decode_only_hours_per_hour": video_s / decode_s,
    }
    print(f"decode only: {decode_s:.1f} s for {hours:g} h", flush=True)
    took, chunks = index_s(videos, workdir / "home-captions", {})
    results |= {
        "captions_index_s": took,
        "captions_chunks": float(chunks),
        "captions_hours_per_hour": video_s / took,
        "captions_over_decode_only": decode_s / took,
    }
    print(f"captions + offline embedder: {took:.1f} s, {chunks} chunks", flush=True)
    if whisper_minutes > 0:
        speech = make_playlist(workdir, whisper_minutes / 60, False, minutes_each=whisper_minutes)
        speech_decode_s = decode_only_s(speech)
        took, chunks = index_s(
            speech,
            workdir / "home-whisper",
            {"local_transcriber": "faster-whisper", "whisper_model": "base"},
        )
        speech_s = whisper_minutes * 60.0
        results |= {
            "whisper_minutes": whisper_minutes,
            "whisper_decode_only_s": speech_decode_s,
            "whisper_index_s": took,
            "whisper_hours_per_hour": speech_s / took,
            "whisper_over_decode_only": speech_decode_s / took,
        }
        print(f"whisper base: {took:.1f} s, {chunks} chunks", flush=True)
    return results
