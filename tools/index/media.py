"""Reading, sampling and cutting video files with PyAV.

Every time here is in seconds from the start of the video, where "start" is the first timestamp of
the video stream (so audio samples and video frames share one clock). Everything that goes wrong
inside FFmpeg is re-raised as :class:`store.errors.MediaError` naming the file and the reason.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import av.error
import numpy as np

from store.errors import ConfigError, MediaError, disk_full

__all__ = [
    "Frame",
    "MediaInfo",
    "check_indexable",
    "chunk_grid",
    "export_clip",
    "extract_audio",
    "iter_frames",
    "probe",
    "sample_frames",
]

# A chunk-grid remainder shorter than this is container rounding, not content.
_GRID_EPSILON_S = 1e-3
# H.264 and HEVC reorder at most 16 frames between decode and presentation order.
_MAX_REORDER = 16
# Packets read ahead of the decoder to learn each frame's successor in presentation order.
_LOOKAHEAD_PACKETS = 2 * _MAX_REORDER
# How far ahead packets are read to find the next keyframe, so the end of a GOP after its last
# wanted frame can be left undecoded (about 40 s at 25 fps; longer GOPs are decoded whole).
_GOP_LOOKAHEAD_PACKETS = 1024
# Packets demuxed by probe to tell constant from variable frame rate.
_VFR_PROBE_PACKETS = 300
_AAC_RATES = frozenset({8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200})
# Errors PyAV raises for broken input: FFmpeg's own, plus the ones it maps onto builtins.
_AV_ERRORS: tuple[type[BaseException], ...] = (av.error.FFmpegError, OSError, EOFError)
# The largest picture a video may claim: 8K UHD is 7680x4320. A header claiming more is corrupt
# or hostile, and decoding it would ask for gigabytes per frame.
_MAX_SIDE = 16_384
_MAX_PIXELS = 8_192 * 8_192
# Video data that ends this much before the duration its own stream declares is a truncated
# file (a download cut short, a copy interrupted), not a last frame held on screen.
_TRUNCATED_S = 1.0
# Sound that runs this much past the picture is worth a word (a few milliseconds of encoder
# padding are usual and say nothing).
_SOUND_PAST_PICTURE_S = 1.0
# Matroska keeps each stream's length as a ``DURATION`` tag, "HH:MM:SS.nnnnnnnnn".
_MATROSKA_DURATION = re.compile(r"^(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$")


@dataclass(frozen=True)
class MediaInfo:
    """What :func:`probe` learnt about a video file.

    ``duration_s`` is the picture's length, not the file's: sound that runs past the last frame
    (a 3 s clip over a 300 s track) is not indexed, and ``sound_s`` says how long it runs when
    that is more than a second past the picture (None otherwise).
    """

    path: Path
    duration_s: float
    width: int
    height: int
    fps: float | None  # average frame rate; None when unknown
    variable_frame_rate: bool
    has_audio: bool
    video_codec: str
    audio_codec: str | None
    size_bytes: int
    pictures: int  # pictures read, at most 300: enough to tell a still from a moving picture
    sound_s: float | None = None

    @property
    def sound_past_picture(self) -> str | None:
        """What a user should hear about sound that outlasts the picture, or None."""
        if self.sound_s is None:
            return None
        return (
            f"its sound runs {self.sound_s:.1f} s, {self.sound_s - self.duration_s:.1f} s past "
            f"its picture's {self.duration_s:.1f} s; only the {self.duration_s:.1f} s with a "
            "picture are indexed"
        )


@dataclass(frozen=True)
class Frame:
    """One sampled video frame: the picture shown at time ``t``."""

    t: float  # seconds from the start of the video
    image: np.ndarray  # H×W×3 uint8 RGB; height <= max_height, aspect kept, even dims


# --------------------------------------------------------------------------------------------
# opening and probing


def _check_file(path: Path) -> None:
    if not path.exists():
        raise MediaError(f"video file {str(path)!r} does not exist; check the path")
    if not path.is_file():
        raise MediaError(f"video path {str(path)!r} is not a regular file")
    if path.stat().st_size == 0:
        raise MediaError(f"video file {str(path)!r} is empty (0 bytes); re-download it")


def _open(path: Path) -> av.container.InputContainer:
    _check_file(path)
    try:
        return av.open(str(path), mode="r")
    except _AV_ERRORS as exc:
        raise MediaError(
            f"cannot open {str(path)!r} as media (corrupt, truncated or not a video): {exc}"
        ) from exc


def _video_stream(container: av.container.InputContainer, path: Path) -> av.VideoStream:
    streams = list(container.streams.video)
    # Cover art in audio files shows up as a one-picture video stream; it is not a video.
    real = [s for s in streams if not (s.disposition & av.stream.Disposition.attached_pic)]
    if not real:
        raise MediaError(f"{str(path)!r} has no video stream; only video files can be indexed")
    stream = real[0]
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise MediaError(f"video stream of {str(path)!r} has no frame size; the file is corrupt")
    if max(width, height) > _MAX_SIDE or width * height > _MAX_PIXELS:
        raise MediaError(
            f"video stream of {str(path)!r} claims {width}x{height} pixels, more than any video "
            f"indexed here (at most {_MAX_SIDE} a side, 8192x8192 in all): the file is corrupt "
            "or not what it says; re-encode or drop it"
        )
    return stream


def _origin_s(container: av.container.InputContainer, stream: av.VideoStream) -> float:
    """The timestamp (s) that counts as t=0: the video stream's first timestamp."""
    if stream.start_time is not None and stream.time_base is not None:
        return float(stream.start_time * stream.time_base)
    if container.start_time is not None:
        return container.start_time / av.time_base
    return 0.0


def _tagged_s(stream: av.stream.Stream) -> float | None:
    """A stream's length from its Matroska ``DURATION`` tag (Matroska stores no per-stream
    duration field; FFmpeg's muxer writes the tag), or None."""
    found = _MATROSKA_DURATION.match(str(stream.metadata.get("DURATION", "")).strip())
    if found is None:
        return None
    hours, minutes, seconds = found.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _picture_s(container: av.container.InputContainer, stream: av.VideoStream) -> float | None:
    """How long the picture lasts: the video stream's own duration (its header, or its Matroska
    tag), else the container's when the picture is all it holds, else the end of the last video
    packet (the container's duration when no packet tells).

    The container's duration is its longest stream's: a sound track that outlasts the picture
    would make chunks with nothing to see, and a last frame held on screen for minutes.
    """
    if stream.duration is not None and stream.duration > 0 and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    tagged = _tagged_s(stream)
    if tagged is not None and tagged > 0:
        return tagged
    whole = None
    if container.duration is not None and container.duration > 0:
        whole = container.duration / av.time_base
    if len(container.streams) == 1 and whole is not None:
        return whole
    end = _last_packet_end_s(container, stream)
    return end if end is not None and end > 0 else whole


def _last_packet_end_s(
    container: av.container.InputContainer, stream: av.VideoStream
) -> float | None:
    """The end (s, from the stream's start) of the video stream's last packet, read from the last
    keyframe before the container's end onwards; None when no packet tells."""
    time_base = stream.time_base
    if time_base is None:
        return None
    first = stream.start_time or 0
    if container.duration is not None and container.duration > 0:
        try:
            container.seek(
                first + int(container.duration / av.time_base / time_base),
                stream=stream,
                backward=True,
            )
        except _AV_ERRORS:
            container.seek(0)  # not seekable there: read it all from the start
    last_end: int | None = None
    for packet in container.demux(stream):
        if packet.pts is not None and packet.size:
            end = packet.pts + (packet.duration or 0)
            last_end = end if last_end is None else max(last_end, end)
    container.seek(0)
    return None if last_end is None else float((last_end - first) * time_base)


def _sound_s(container: av.container.InputContainer, audio: av.AudioStream) -> float | None:
    """How long the sound track lasts (its own duration, its tag, else the container's)."""
    if audio.duration is not None and audio.duration > 0 and audio.time_base is not None:
        return float(audio.duration * audio.time_base)
    tagged = _tagged_s(audio)
    if tagged is not None:
        return tagged
    if container.duration is not None and container.duration > 0:
        return container.duration / av.time_base
    return None


def _packet_times(
    container: av.container.InputContainer, stream: av.VideoStream
) -> list[int | None]:
    """The pts of the first packets holding data (up to ``_VFR_PROBE_PACKETS``), in read order."""
    times: list[int | None] = []
    for packet in container.demux(stream):
        if packet.size:
            times.append(packet.pts)
        if len(times) >= _VFR_PROBE_PACKETS:
            break
    return times


def _is_variable_rate(times: list[int | None]) -> bool:
    """Whether the steps between the presentation times read vary by more than rounding."""
    pts = sorted(t for t in times if t is not None)
    if len(times) >= _VFR_PROBE_PACKETS:
        # Packets come in decode order: frames shown just after the last one read may still be
        # unread (B-frame reordering), which would look like a gap.
        pts = pts[:-_MAX_REORDER]
    steps = [b - a for a, b in itertools.pairwise(pts) if b > a]
    if len(steps) < 2:
        return False
    steps.sort()
    median = steps[len(steps) // 2]
    # Rounding to the time base may jitter a constant rate by a tick or two, never by 5 %.
    return steps[-1] - steps[0] > max(2, 0.05 * median)


def probe(path: Path) -> MediaInfo:
    """Describe the video at ``path``; raise MediaError when it cannot be read as one.

    A file with no video stream (sound only, cover art only) is refused with its reason. Its
    duration is its picture's; sound past the last frame is left out, and ``sound_s`` says so
    (see :class:`MediaInfo`) for the caller to record. A single picture is described (a
    provider's one-frame clip is one); :func:`check_indexable` refuses it as a video to index.
    """
    container = _open(path)
    try:
        stream = _video_stream(container, path)
        audio = container.streams.audio[0] if container.streams.audio else None
        duration = _picture_s(container, stream)
        if duration is None or not math.isfinite(duration) or duration <= 0:
            raise MediaError(
                f"{str(path)!r} has no usable duration ({duration!r}); the file is truncated"
                " or corrupt, re-download it"
            )
        times = _packet_times(container, stream)
        sound = _sound_s(container, audio) if audio is not None else None
        if sound is not None and sound - duration <= _SOUND_PAST_PICTURE_S:
            sound = None  # ends with the picture, give or take encoder padding
        rate = stream.average_rate
        fps = float(rate) if rate is not None and rate > 0 else None
        return MediaInfo(
            path=path,
            duration_s=duration,
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            fps=fps,
            variable_frame_rate=_is_variable_rate(times),
            has_audio=audio is not None,
            video_codec=stream.codec_context.name,
            audio_codec=audio.codec_context.name if audio is not None else None,
            size_bytes=path.stat().st_size,
            pictures=len(times),
            sound_s=sound,
        )
    except _AV_ERRORS as exc:
        raise MediaError(f"cannot probe {str(path)!r}: {exc}") from exc
    finally:
        container.close()


def check_indexable(info: MediaInfo) -> None:
    """Raise MediaError when ``info`` describes no moving picture: a file holding one picture
    (a PNG or JPEG renamed ``.mp4``, a one-frame clip) opens as a 0.04 s video, and indexed it
    would be a "video" of one frame that seeds and questions cannot be about."""
    if info.pictures <= 1:
        raise MediaError(
            f"{str(info.path)!r} holds a single still picture ({info.video_codec}), not a "
            "video; only moving pictures can be indexed"
        )


def chunk_grid(duration_s: float, chunk_s: float = 30.0) -> list[tuple[float, float]]:
    """Split ``[0, duration_s)`` into ``chunk_s`` spans; the last one may be shorter.

    A remainder under 1 ms is container rounding (a 60.0000001 s video has two 30 s chunks): the
    last chunk absorbs it so the grid still covers the whole video.
    """
    if not math.isfinite(chunk_s) or chunk_s <= 0:
        raise ConfigError(f"chunk length must be a positive number of seconds, got {chunk_s!r}")
    if not math.isfinite(duration_s):
        raise ConfigError(f"video duration must be finite, got {duration_s!r}")
    if duration_s <= 0:
        return []
    count = max(1, math.ceil((duration_s - _GRID_EPSILON_S) / chunk_s))
    spans = [(k * chunk_s, min((k + 1) * chunk_s, duration_s)) for k in range(count)]
    spans[-1] = (spans[-1][0], duration_s)
    return spans


# --------------------------------------------------------------------------------------------
# video frames


def _scaled_size(width: int, height: int, max_height: int | None) -> tuple[int, int]:
    """Even output size with the source aspect, height capped at ``max_height``."""
    out_h = height if max_height is None else min(height, max_height)
    out_h = max(2, out_h - out_h % 2)
    out_w = max(2, 2 * round(width * out_h / height / 2))
    return out_w, out_h


def _check_range(fps: float | None, start_s: float, end_s: float | None) -> None:
    if fps is not None and (not math.isfinite(fps) or fps <= 0):
        raise ConfigError(f"sampling rate must be a positive number of frames/s, got {fps!r}")
    if not math.isfinite(start_s) or start_s < 0:
        raise ConfigError(f"start time must be >= 0 seconds, got {start_s!r}")
    if end_s is not None and (math.isnan(end_s) or end_s <= start_s):
        raise ConfigError(f"end time {end_s!r} must be after start time {start_s!r}")


class _FrameClock:
    """The wanted times ``t = start_s + k/fps`` (before ``end_s``) and the frame on screen at
    each: fed decoded frames in presentation order, it yields ``(t, frame)`` for every wanted
    time that falls before the next frame's time."""

    def __init__(
        self,
        stream: av.VideoStream,
        fps: float,
        start_s: float,
        end_s: float | None,
        origin: float,
        time_base: Fraction,
    ) -> None:
        self.start_s = start_s
        self.fps = fps
        self.step = 1.0 / fps
        # Emission stops at end_s; without one, at the last frame.
        self.end = end_s
        self.origin = origin
        self.time_base = time_base
        rate = stream.average_rate
        self.frame_step = 1.0 / float(rate) if rate is not None and rate > 0 else 0.0
        self.ctx = stream.codec_context
        self.k = 0  # the next wanted time's number
        self.previous: av.VideoFrame | None = None  # the frame on screen now
        self.previous_t = -math.inf  # and its time

    def _wanted_at_or_after(self, t: float) -> float:
        k = max(0, math.ceil((t - self.start_s) * self.fps - 1e-9))
        return self.start_s + k * self.step

    def needed(self, pts: int, successor: int | None) -> bool:
        """Whether the frame at ``pts`` is on screen at a wanted time (before its successor's
        ``pts``, and before the end)."""
        if successor is None:
            return True
        t = self._wanted_at_or_after(float(pts * self.time_base) - self.origin)
        end = self.end
        return t < float(successor * self.time_base) - self.origin and (end is None or t < end)

    def last_wanted_before(self, t: float) -> float:
        """The last wanted time before ``t`` (-inf when there is none)."""
        k_last = math.ceil((t - self.start_s) * self.fps - 1e-9) - 1
        return self.start_s + k_last * self.step if k_last >= 0 else -math.inf

    def done(self) -> bool:
        """Whether every wanted time before the end has had its frame."""
        return self.end is not None and self.start_s + self.k * self.step >= self.end

    def emit_until(self, limit: float) -> Iterator[tuple[float, av.VideoFrame]]:
        """The frame on screen at each wanted time before ``limit`` (and the end)."""
        while self.previous is not None:
            t = self.start_s + self.k * self.step
            if t >= limit or (self.end is not None and t >= self.end):
                return
            yield t, self.previous
            self.k += 1

    def decode(self, packet: av.Packet[Any] | None) -> Iterator[tuple[float, av.VideoFrame]]:
        """Decode ``packet`` (None: flush) and emit what its frames end on screen."""
        for frame in self.ctx.decode(packet):
            # frame.time is NaN on frames drained at flush (no time base set): use the stream's.
            if frame.pts is None:
                ft = self.previous_t + self.frame_step
            else:
                ft = float(frame.pts * self.time_base) - self.origin
            yield from self.emit_until(ft)
            self.previous, self.previous_t = frame, ft


class _PacketsAhead:
    """Packets read ahead of the decoder: far enough to see each frame's successor in
    presentation order and, when the stream's keyframes can be told to start closed GOPs, the
    next keyframe (within a bound), so the end of a GOP after its last wanted frame is known."""

    def __init__(
        self, container: av.container.InputContainer, stream: av.VideoStream, clock: _FrameClock
    ) -> None:
        self.clock = clock
        self.window: deque[av.Packet[Any]] = deque()
        # Keyframes in the window, by read order.
        self.keys: deque[tuple[int, av.Packet[Any]]] = deque()
        self.recent: deque[int] = deque(maxlen=_LOOKAHEAD_PACKETS)
        self.packets = container.demux(stream)
        self.exhausted = False
        self.data_end: int | None = None  # end of the last packet read (pts units)
        self.read = self.sent = 0  # packets read ahead, packets taken off the window (read order)
        self.closed_gop = closed_gop_test(stream)
        self.tail_from: int | None = None  # packets from here to the next keyframe: not needed
        self.tail_key = -1  # read order of the keyframe that tail_from was worked out for

    def _fill(self) -> None:
        window, keys = self.window, self.keys
        while not self.exhausted and (
            len(window) < _LOOKAHEAD_PACKETS
            or (self.closed_gop is not None and not keys and len(window) < _GOP_LOOKAHEAD_PACKETS)
        ):
            try:
                ahead = next(self.packets)
            except StopIteration:
                self.exhausted = True
                break
            if ahead.is_keyframe and self.read > 0:
                keys.append((self.read, ahead))
            window.append(ahead)
            self.read += 1

    def take(self) -> tuple[int, av.Packet[Any]] | None:
        """The next packet in read order with its number (None past the last), after reading
        ahead; when a closed GOP follows, works out where its predecessor's unneeded tail
        begins."""
        self._fill()
        if not self.window:
            return None
        packet = self.window.popleft()
        number, self.sent = self.sent, self.sent + 1
        keys = self.keys
        if keys and keys[0][0] == number:
            keys.popleft()
        if self.closed_gop is not None and keys and keys[0][0] != self.tail_key:
            self.tail_key, key = keys[0]
            self.tail_from = None
            if key.pts is not None and self.closed_gop(key):
                # A closed GOP follows: everything shown up to the last wanted time before its
                # keyframe must be decoded (and what that refers to, decoded before it); the
                # packets after the last of those feed nothing wanted.
                clock = self.clock
                t_last = clock.last_wanted_before(float(key.pts * clock.time_base) - clock.origin)
                self.tail_from = _first_after(
                    self.window, number + 1, self.tail_key, t_last, clock.time_base, clock.origin
                )
        return number, packet

    def successor(self, packet: av.Packet[Any]) -> int | None:
        """The pts shown next after ``packet``'s (None: none known), noting where its data
        ends and its pts among the recent ones."""
        assert packet.pts is not None
        packet_end = packet.pts + (packet.duration or 0)
        self.data_end = packet_end if self.data_end is None else max(self.data_end, packet_end)
        later = [
            p.pts
            for p in itertools.islice(self.window, _LOOKAHEAD_PACKETS)
            if p.pts is not None and p.pts > packet.pts
        ]
        later += [p for p in self.recent if p > packet.pts]
        self.recent.append(packet.pts)
        return min(later) if later else None

    def in_tail(self, number: int) -> bool:
        """Whether packet ``number`` lies in a GOP's tail past its last wanted frame."""
        return self.tail_from is not None and self.tail_from <= number < self.tail_key


def _timed_video_frames(
    container: av.container.InputContainer,
    stream: av.VideoStream,
    fps: float,
    start_s: float,
    end_s: float | None,
) -> Iterator[tuple[float, av.VideoFrame]]:
    """Yield ``(t, frame)`` for ``t = start_s + k/fps < end``: the latest frame with pts <= t.

    Decodes sequentially (one seek to ``start_s`` at most). Packets are read a little ahead so
    each frame's successor in presentation order is known; a frame no wanted time falls on is
    decoded with ``skip_frame=NONREF``, which lets the decoder drop it when nothing refers to it.
    """
    time_base = stream.time_base
    if time_base is None:
        raise MediaError("video stream has no time base")
    origin = _origin_s(container, stream)
    duration = _picture_s(container, stream)
    clock = _FrameClock(stream, fps, start_s, end_s, origin, time_base)
    ctx = clock.ctx
    ctx.thread_type = "AUTO"
    if start_s > 0:
        container.seek(int((start_s + origin) / time_base), stream=stream, backward=True)
    ahead = _PacketsAhead(container, stream, clock)
    while not clock.done():
        taken = ahead.take()
        if taken is None:
            break
        number, packet = taken
        if packet.size == 0:
            # The demuxer's end-of-stream marker; the decoder is flushed once, below.
            continue
        if packet.pts is not None:
            needed = clock.needed(packet.pts, ahead.successor(packet))
            if ahead.in_tail(number) and not needed:
                continue  # a GOP's tail past its last wanted frame: nothing decodes from it
            ctx.skip_frame = "DEFAULT" if needed else "NONREF"
        else:
            ctx.skip_frame = "DEFAULT"
        yield from clock.decode(packet)
    if not clock.done():
        ctx.skip_frame = "DEFAULT"
        yield from clock.decode(None)
        _check_not_truncated(container, stream, ahead.data_end)
        if clock.previous is not None:
            # Past the last frame, the picture stays on screen until the declared duration (or
            # one frame interval when that is shorter).
            shown_until = max(duration or 0.0, clock.previous_t + clock.frame_step)
            yield from clock.emit_until(shown_until)


def _first_after(
    window: deque[av.Packet[Any]],
    first: int,
    key_number: int,
    t_last: float,
    time_base: Fraction,
    origin: float,
) -> int:
    """The read order from which no packet before the keyframe ``key_number`` is shown at or
    before ``t_last``: the last one that is (or has no pts) and all before it are decoded."""
    start = first
    for offset, packet in enumerate(window):
        number = first + offset
        if number >= key_number:
            break
        if packet.pts is None or float(packet.pts * time_base) - origin <= t_last:
            start = number + 1
    return start


def closed_gop_test(stream: av.VideoStream) -> Callable[[av.Packet[Any]], bool] | None:
    """A test telling whether a keyframe packet starts a closed GOP (nothing decoded after it
    refers to a frame before it), for the codecs whose bitstream says so; None for others.

    H.264: an IDR picture (NAL unit type 5) empties the decoder's references (ITU-T H.264
    8.2.1); HEVC: IDR_W_RADL and IDR_N_LP (types 19, 20; ITU-T H.265 7.4.2.2) do the same,
    while a CRA may be followed by leading pictures that refer back. VP8 and VP9 keyframes
    reset every reference (RFC 6386 9.7; VP9 bitstream spec 7.2).
    """
    name = stream.codec_context.name
    if name in ("vp8", "vp9"):
        return lambda packet: True
    if name not in ("h264", "hevc"):
        return None
    extradata = bytes(stream.codec_context.extradata or b"")
    length_size: int | None = None  # MP4-style length-prefixed NAL units, else Annex B
    if name == "h264" and len(extradata) > 4 and extradata[0] == 1:
        length_size = (extradata[4] & 0x03) + 1
    elif name == "hevc" and len(extradata) > 21 and extradata[0] == 1:
        length_size = (extradata[21] & 0x03) + 1
    idr = (lambda b: b & 0x1F == 5) if name == "h264" else (lambda b: (b >> 1) & 0x3F in (19, 20))

    def starts_closed_gop(packet: av.Packet[Any]) -> bool:
        return any(idr(header) for header in nal_headers(bytes(packet), length_size))

    return starts_closed_gop


def nal_headers(data: bytes, length_size: int | None) -> Iterator[int]:
    """The first byte of each NAL unit in ``data`` (length-prefixed, or Annex B start codes)."""
    if length_size is not None:
        position = 0
        while position + length_size < len(data):
            size = int.from_bytes(data[position : position + length_size], "big")
            yield data[position + length_size]
            position += length_size + size
        return
    position = data.find(b"\x00\x00\x01")
    while position != -1 and position + 3 < len(data):
        yield data[position + 3]
        position = data.find(b"\x00\x00\x01", position + 3)


class _Truncated(MediaError):
    """Video data that stops before its declared end (raised where the path is not known)."""


def _check_not_truncated(
    container: av.container.InputContainer, stream: av.VideoStream, data_end: int | None
) -> None:
    """Raise MediaError when the video data ran out well before the end its own stream
    declares. Only MP4/MOV are judged: their header (``moov``) states each track's duration
    exactly, so a file cut short after a front-loaded header still opens and would otherwise
    show its last picture, frozen, until the declared end. Other containers estimate or omit
    the stream's duration."""
    if "mov" not in container.format.name.split(","):
        return
    time_base, duration = stream.time_base, stream.duration
    if time_base is None or duration is None or duration <= 0:
        return
    declared_end = (stream.start_time or 0) + duration
    ends = data_end if data_end is not None else stream.start_time or 0
    if float((declared_end - ends) * time_base) > _TRUNCATED_S:
        start = stream.start_time or 0
        raise _Truncated(
            f"its video data ends at {float((ends - start) * time_base):.1f} s of the "
            f"{float(duration * time_base):.1f} s its header declares: the file is truncated; "
            "download or copy it again"
        )


def iter_frames(
    path: Path,
    fps: float = 0.5,
    max_height: int = 720,
    start_s: float = 0.0,
    end_s: float | None = None,
) -> Iterator[Frame]:
    """Yield the frames shown at ``t = start_s + k/fps`` for every ``t < end_s`` (default: the end).

    Frames are RGB, scaled down to at most ``max_height`` rows with even dimensions; only the
    frames kept are converted. Raises MediaError for unreadable files.
    """
    _check_range(fps, start_s, end_s)
    if max_height < 2:
        raise ConfigError(f"max_height must be at least 2 pixels, got {max_height!r}")
    container = _open(path)
    try:
        stream = _video_stream(container, path)
        width, height = _scaled_size(
            stream.codec_context.width, stream.codec_context.height, max_height
        )
        last_frame: av.VideoFrame | None = None
        last_image: np.ndarray | None = None
        for t, frame in _timed_video_frames(container, stream, fps, start_s, end_s):
            if frame is last_frame and last_image is not None:
                # The same picture again (a still or a slow variable-rate stretch): copy, so no two
                # Frames share a mutable buffer.
                image = last_image.copy()
            else:
                image = frame.to_ndarray(width=width, height=height, format="rgb24")
            last_frame, last_image = frame, image
            yield Frame(t=t, image=image)
    except _Truncated as exc:
        raise MediaError(f"cannot decode all of {str(path)!r}: {exc}") from exc
    except _AV_ERRORS as exc:
        raise MediaError(f"cannot decode video of {str(path)!r}: {exc}") from exc
    finally:
        container.close()


def sample_frames(
    path: Path,
    fps: float = 0.5,
    max_height: int = 720,
    start_s: float = 0.0,
    end_s: float | None = None,
) -> list[Frame]:
    """All of :func:`iter_frames` as a list."""
    return list(iter_frames(path, fps, max_height, start_s, end_s))


# --------------------------------------------------------------------------------------------
# audio


def _audio_chunks(
    container: av.container.InputContainer,
    audio: av.AudioStream,
    origin: float,
    resampler: av.AudioResampler,
    start_s: float,
    end_s: float | None,
) -> Iterator[np.ndarray]:
    """Yield resampled audio (channels × n float32) covering exactly ``[start_s, end_s)``.

    Audio that starts after ``start_s`` is padded with silence, so sample ``i`` is always at
    ``start_s + i / rate``.
    """
    rate = resampler.rate
    time_base = audio.time_base
    if time_base is None:
        raise MediaError("audio stream has no time base")
    if start_s > 0:
        container.seek(int((start_s + origin) / time_base), stream=audio, backward=True)
    channels = resampler.layout.nb_channels
    position: int | None = None  # samples from start_s of the next resampled sample
    limit = None if end_s is None else round((end_s - start_s) * rate)

    def trim(frames: list[av.AudioFrame]) -> Iterator[np.ndarray]:
        nonlocal position
        for out in frames:
            samples = out.to_ndarray().reshape(channels, -1)
            assert position is not None
            begin = position
            position += samples.shape[1]
            lo = max(0, -begin)
            hi = samples.shape[1] if limit is None else min(samples.shape[1], limit - begin)
            if hi > lo:
                yield samples[:, lo:hi]

    for frame in container.decode(audio):
        if position is None:
            first_t = 0.0 if frame.pts is None else float(frame.pts * time_base) - origin
            position = round((first_t - start_s) * rate)
            if position > 0:
                padding = position if limit is None else min(position, limit)
                yield np.zeros((channels, padding), np.float32)
        yield from trim(resampler.resample(frame))
        if limit is not None and position >= limit:
            return
    if position is not None:
        yield from trim(resampler.resample(None))


def extract_audio(
    path: Path, start_s: float = 0.0, end_s: float | None = None, rate: int = 16_000
) -> np.ndarray:
    """Mono float32 samples in [-1, 1] at ``rate`` Hz for ``[start_s, end_s)``.

    Sample ``i`` is at ``start_s + i / rate``. A file without an audio track gives an empty array.
    """
    _check_range(None, start_s, end_s)
    if rate <= 0:
        raise ConfigError(f"audio rate must be a positive number of Hz, got {rate!r}")
    container = _open(path)
    try:
        stream = _video_stream(container, path)
        if not container.streams.audio:
            return np.zeros(0, np.float32)
        audio = container.streams.audio[0]
        audio.codec_context.thread_type = "AUTO"
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        origin = _origin_s(container, stream)
        parts = list(_audio_chunks(container, audio, origin, resampler, start_s, end_s))
    except _AV_ERRORS as exc:
        raise MediaError(f"cannot decode audio of {str(path)!r}: {exc}") from exc
    finally:
        container.close()
    if not parts:
        return np.zeros(0, np.float32)
    samples = np.concatenate(parts, axis=1).reshape(-1).astype(np.float32, copy=False)
    # AAC and other lossy decoders overshoot full scale a little.
    return np.clip(samples, -1.0, 1.0)


# --------------------------------------------------------------------------------------------
# clips


@contextmanager
def _encoder_source(path: Path) -> Iterator[av.container.InputContainer]:
    """The file at ``path`` opened to add an encoder's stream from: closed here when that
    fails; else left open for the packet stream it goes on to, which closes it when done."""
    container = _open(path)
    try:
        yield container
    except BaseException:
        container.close()
        raise


def _encoded_video(
    path: Path,
    out: av.container.OutputContainer,
    start_s: float,
    end_s: float,
    fps: float | None,
    max_height: int | None,
) -> Iterator[tuple[float, av.Packet[Any]]]:
    """Add an H.264 stream to ``out`` now; return the (time, packet) stream of the range."""
    with _encoder_source(path) as container:
        stream = _video_stream(container, path)
        rate = fps if fps is not None else float(stream.average_rate or 0) or 30.0
        rate_q = Fraction(rate).limit_denominator(1001)
        width, height = _scaled_size(
            stream.codec_context.width, stream.codec_context.height, max_height
        )
        ostream = out.add_stream("libx264", rate=rate_q)
        ostream.width, ostream.height, ostream.pix_fmt = width, height, "yuv420p"
        ostream.codec_context.time_base = 1 / rate_q
        ostream.thread_type = "AUTO"
    return _video_packets(container, stream, ostream, rate_q, start_s, end_s)


def _video_packets(
    container: av.container.InputContainer,
    stream: av.VideoStream,
    ostream: av.VideoStream,
    rate_q: Fraction,
    start_s: float,
    end_s: float,
) -> Iterator[tuple[float, av.Packet[Any]]]:
    width, height = ostream.width, ostream.height
    try:
        timed = _timed_video_frames(container, stream, float(rate_q), start_s, end_s)
        for index, (_t, frame) in enumerate(timed):
            picture = frame.reformat(width=width, height=height, format="yuv420p")
            picture.pts, picture.time_base = index, 1 / rate_q
            for packet in ostream.encode(picture):
                yield _packet_time(packet), packet
        for packet in ostream.encode(None):
            yield _packet_time(packet), packet
    finally:
        container.close()


def _encoded_audio(
    path: Path, out: av.container.OutputContainer, start_s: float, end_s: float
) -> Iterator[tuple[float, av.Packet[Any]]]:
    """Add an AAC stream to ``out`` now; return the (time, packet) stream of the range."""
    with _encoder_source(path) as container:
        video = _video_stream(container, path)
        audio = container.streams.audio[0]
        rate = audio.codec_context.sample_rate or 48_000
        rate = rate if rate in _AAC_RATES else 48_000
        layout = "mono" if audio.codec_context.channels == 1 else "stereo"
        ostream = out.add_stream("aac", rate=rate, layout=layout)
        origin = _origin_s(container, video)
    return _audio_packets(container, audio, ostream, origin, start_s, end_s)


def _audio_packets(
    container: av.container.InputContainer,
    audio: av.AudioStream,
    ostream: av.AudioStream,
    origin: float,
    start_s: float,
    end_s: float,
) -> Iterator[tuple[float, av.Packet[Any]]]:
    rate = ostream.codec_context.sample_rate
    layout = ostream.codec_context.layout.name
    try:
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        frame_size = ostream.codec_context.frame_size or 1024
        pending = np.zeros((resampler.layout.nb_channels, 0), np.float32)
        written = 0

        def encode(block: np.ndarray | None) -> Iterator[tuple[float, av.Packet[Any]]]:
            nonlocal written
            if block is None:
                packets = ostream.encode(None)
            else:
                frame = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(block), format="fltp", layout=layout
                )
                frame.sample_rate, frame.pts, frame.time_base = rate, written, Fraction(1, rate)
                written += block.shape[1]
                packets = ostream.encode(frame)
            for packet in packets:
                yield _packet_time(packet), packet

        for chunk in _audio_chunks(container, audio, origin, resampler, start_s, end_s):
            pending = np.concatenate([pending, chunk], axis=1)
            while pending.shape[1] >= frame_size:
                yield from encode(pending[:, :frame_size])
                pending = pending[:, frame_size:]
        if pending.shape[1]:
            yield from encode(pending)
        yield from encode(None)
    finally:
        container.close()


def export_clip(
    path: Path,
    out_path: Path,
    start_s: float,
    end_s: float,
    fps: float | None = None,
    max_height: int | None = None,
    audio: bool = True,
) -> Path:
    """Re-encode ``[start_s, end_s)`` of ``path`` to an mp4 at ``out_path`` and return it.

    Video is H.264 yuv420p at ``fps`` (default: the source's average rate) and at most
    ``max_height`` rows; audio is AAC when ``audio`` is true and the source has a track.
    """
    _check_range(fps, start_s, end_s)
    if max_height is not None and max_height < 2:
        raise ConfigError(f"max_height must be at least 2 pixels, got {max_height!r}")
    info = probe(path)
    if start_s >= info.duration_s:
        raise MediaError(
            f"clip start {start_s!r} s is past the end of {str(path)!r} ({info.duration_s!r} s)"
        )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with av.open(str(out_path), mode="w", format="mp4") as out:
            # Streams must all exist before anything is encoded: both are added here, eagerly.
            sources: list[Iterator[tuple[float, av.Packet[Any]]]] = [
                _encoded_video(path, out, start_s, end_s, fps, max_height)
            ]
            if audio and info.has_audio:
                sources.append(_encoded_audio(path, out, start_s, end_s))
            _mux_in_time_order(out, sources)
    except (av.error.FFmpegError, OSError, EOFError, _Truncated) as exc:  # _AV_ERRORS and ours
        # A half-written clip is no clip, and on a full disk its bytes are wanted back.
        out_path.unlink(missing_ok=True)
        full = disk_full(exc)
        if full is not None:
            raise full from exc  # not this clip's fault: every write fails alike
        raise MediaError(f"cannot export {str(path)!r} to {str(out_path)!r}: {exc}") from exc
    return out_path


def _packet_time(packet: av.Packet[Any]) -> float:
    """Seconds of an encoded packet, for interleaving; encoders always set pts."""
    return 0.0 if packet.pts is None else float(packet.pts * packet.time_base)


def _mux_in_time_order(
    out: av.container.OutputContainer, sources: list[Iterator[tuple[float, av.Packet[Any]]]]
) -> None:
    """Mux packets of several encoders interleaved by time, so memory stays small."""
    heap: list[tuple[float, int, av.Packet[Any]]] = []
    for i, source in enumerate(sources):
        first = next(source, None)
        if first is not None:
            heap.append((first[0], i, first[1]))
    heapq.heapify(heap)
    while heap:
        _, i, packet = heapq.heappop(heap)
        out.mux(packet)
        following: Any = next(sources[i], None)
        if following is not None:
            heapq.heappush(heap, (following[0], i, following[1]))
