"""Sidecar subtitle files (WebVTT and SubRip) read into cues and laid onto the 30 s chunk grid.

Caption files from the wild are messy: YouTube's auto-captions repeat every line as the next one
rolls in, old SRT files are cp1252, editors add BOMs, and one broken block must not lose the rest.
The parser is therefore a forgiving block scanner rather than a strict WebVTT reader.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from store.errors import TranscriptError

__all__ = ["Cue", "align_to_chunks", "parse_captions"]


@dataclass(frozen=True)
class Cue:
    """One caption cue: its span in seconds and its cleaned, single-line text."""

    start_s: float
    end_s: float
    text: str


# hh:mm:ss.ttt (VTT), hh:mm:ss,ttt (SRT) and the VTT short form mm:ss.ttt.
_TIMESTAMP = r"(?:(\d+):)?(\d{1,2}):(\d{1,2})(?:[.,](\d{1,3}))?"
_TIMING_LINE = re.compile(rf"^\s*{_TIMESTAMP}\s*-->\s*{_TIMESTAMP}")
_TAG = re.compile(r"<[^>]*>")  # <c>, <00:00:01.000>, <b>, <v Speaker>, <font …>
_ASS_OVERRIDE = re.compile(r"\{\\[^}]*\}")  # SRT files converted from ASS carry {\an8} and friends
_BLOCK_SPLIT = re.compile(r"\n\s*\n")
_ENCODINGS = ("utf-8-sig", "cp1252")


def _decode(raw: bytes) -> str:
    """Decode caption bytes, falling back from UTF-8 to cp1252 to latin-1 (which never fails)."""
    for encoding in _ENCODINGS:
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")


def _seconds(hours: str | None, minutes: str, seconds: str, fraction: str | None) -> float:
    frac = float("0." + fraction) if fraction else 0.0
    return int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds) + frac


def _clean_line(line: str) -> str:
    """Strip inline markup, decode entities and collapse whitespace."""
    line = _ASS_OVERRIDE.sub("", _TAG.sub("", line))
    return " ".join(html.unescape(line).split())


def _parse_block(block: str) -> tuple[float, float, list[str]] | None:
    """Return (start, end, cleaned lines) for a cue block, or None if it is not a usable cue."""
    lines = block.split("\n")
    for index, line in enumerate(lines):
        match = _TIMING_LINE.match(line)
        if match is None:
            continue
        groups = match.groups()
        try:
            start = _seconds(*groups[:4])
            end = _seconds(*groups[4:])
        except OverflowError:  # hundreds of digits of hours: no time a video has
            return None
        if end < start:
            return None
        text_lines = [cleaned for raw in lines[index + 1 :] if (cleaned := _clean_line(raw))]
        return start, end, text_lines
    # Headers (WEBVTT), NOTE/STYLE/REGION blocks and garbage have no timing line.
    return None


def parse_captions(path: Path) -> list[Cue]:
    """Read a ``.vtt`` or ``.srt`` file into cues in file order.

    Broken blocks are skipped and the good ones kept. Rolling auto-captions (each cue repeats the
    previous cue's line before adding a new one) are de-duplicated so each spoken line appears
    once. Raises :class:`TranscriptError` if the file cannot be read or holds no usable cue.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(
            f"caption file {str(path)!r} cannot be read ({exc.strerror or exc}); "
            "check the path or drop it from the request"
        ) from exc
    text = _decode(raw).replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")

    cues: list[Cue] = []
    previous_lines: set[str] = set()
    saw_timing = False
    for block in _BLOCK_SPLIT.split(text):
        parsed = _parse_block(block.strip("\n"))
        if parsed is None:
            continue
        saw_timing = True
        start, end, lines = parsed
        # Rolling captions show the last line again above the new one; drop lines the previous
        # cue already showed so the transcript does not say everything twice.
        fresh = [line for line in lines if line not in previous_lines]
        previous_lines = set(lines)
        if fresh:
            cues.append(Cue(start_s=start, end_s=end, text=" ".join(fresh)))

    if not cues:
        reason = "its cues hold no text" if saw_timing else "no cue with a valid timing line"
        raise TranscriptError(
            f"caption file {str(path)!r} has no parsable cue ({reason}); "
            "use a speech-to-text backend for this video instead"
        )
    return cues


def align_to_chunks(cues: Sequence[Cue], grid: Sequence[tuple[float, float]]) -> list[str]:
    """Give each chunk of ``grid`` (start, end seconds) the text of the cues it holds.

    A cue belongs to the chunk that holds its midpoint, so a cue straddling a boundary is counted
    exactly once (duplicating it would make neighbouring chunks look alike to the embedder) and
    lands where most of its words were spoken. A cue whose midpoint falls outside every chunk
    (a gap, or past the end of a short last chunk) goes to the chunk it overlaps most, if any.
    """
    order = sorted(range(len(grid)), key=lambda i: grid[i][0])
    starts = [grid[i][0] for i in order]
    parts: list[list[str]] = [[] for _ in grid]
    for cue in cues:
        middle = (cue.start_s + cue.end_s) / 2
        target = None
        position = bisect.bisect_right(starts, middle) - 1
        if position >= 0:
            candidate = order[position]
            if grid[candidate][0] <= middle < grid[candidate][1]:
                target = candidate
        if target is None:
            target = _most_overlapping(cue, grid)
        if target is not None:
            parts[target].append(cue.text)
    return [" ".join(" ".join(texts).split()) for texts in parts]


def _most_overlapping(cue: Cue, grid: Sequence[tuple[float, float]]) -> int | None:
    best, best_overlap = None, 0.0
    for index, (start, end) in enumerate(grid):
        overlap = min(end, cue.end_s) - max(start, cue.start_s)
        if overlap > best_overlap:
            best, best_overlap = index, overlap
    return best
