"""The citation grammar of gold answers: ``(video-id @ MM:SS–MM:SS)``.

A gold answer cites the span that supports each claim; together its citations are the question's
evidence map. Parsing is tolerant of what models actually write (en dash, em dash, hyphen or "to"
between the times, spaces anywhere, ``H:MM:SS``, minutes past 59, several citations in one pair of
parentheses separated by ``;``), and strict about the rest: anything parenthesised that looks like
a citation but does not parse is reported by :func:`malformed_citations`, so the gate can quote it
back to the generator instead of silently dropping evidence.

Pure functions over strings; no model call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tools.contracts.roles import SegmentEvidence, cite, format_timestamp

__all__ = [
    "COVER_TOLERANCE_S",
    "Citation",
    "chunks_covered",
    "format_citation",
    "format_timestamp",
    "malformed_citations",
    "parse_citations",
]

# A citation must overlap a chunk by more than this to cover it: a span that ends at 02:00.4
# because of rounding does not claim the chunk that starts at 02:00.
COVER_TOLERANCE_S = 1.0

_TIME = r"\d+:\d{2}(?::\d{2})?"
_DASHES = "\u2013\u2014\u2012\u2212-"  # en dash, em dash, figure dash, minus sign, hyphen
_SEPARATOR = rf"(?:\s*[{_DASHES}]\s*|\s+to\s+)"
_CITATION_RE = re.compile(
    rf"\s*(?P<vid>[A-Za-z0-9_-]+)\s*@\s*(?P<start>{_TIME}){_SEPARATOR}(?P<end>{_TIME})\s*"
)
# Innermost parenthesised groups; a citation never holds parentheses of its own.
_GROUP_RE = re.compile(r"\(([^()]*)\)")
# A time range with no video id, e.g. "(see 01:00-02:00)": looks like a citation, so it is checked.
_RANGE_HINT_RE = re.compile(rf"\d+:\d{{2}}\s*(?:[{_DASHES}]|to\b)\s*\d+:\d{{2}}")


@dataclass(frozen=True)
class Citation:
    """One parsed citation: the video, the cited span in seconds, and where it sits in the text.

    ``raw`` is the matched text: the whole parenthesised citation, or one ``;``-separated part of
    a parenthesis that holds several. ``offset`` is where ``raw`` starts in the answer.
    """

    video_id: str
    start_s: float
    end_s: float
    raw: str
    offset: int


def _seconds(token: str) -> float | None:
    """``MM:SS`` (minutes unbounded) or ``H:MM:SS`` in seconds; ``None`` for 75 s or 61 min."""
    parts = [int(p) for p in token.split(":")]
    if len(parts) == 2:
        minutes, seconds = parts
        return None if seconds > 59 else float(minutes * 60 + seconds)
    hours, minutes, seconds = parts
    if minutes > 59 or seconds > 59:
        return None
    return float(hours * 3600 + minutes * 60 + seconds)


def _looks_like_citation(inner: str) -> bool:
    return "@" in inner or _RANGE_HINT_RE.search(inner) is not None


def _scan(text: str) -> tuple[list[Citation], list[str]]:
    """Every parenthesised group that looks like a citation: the good parts and the bad groups."""
    citations: list[Citation] = []
    malformed: list[str] = []
    for group in _GROUP_RE.finditer(text):
        inner = group.group(1)
        if not _looks_like_citation(inner):
            continue
        parts = inner.split(";")
        bad = False
        part_offset = group.start(1)
        for part in parts:
            match = _CITATION_RE.fullmatch(part)
            start = _seconds(match.group("start")) if match else None
            end = _seconds(match.group("end")) if match else None
            if match is None or start is None or end is None or end <= start:
                bad = True
            elif len(parts) == 1:
                citations.append(
                    Citation(match.group("vid"), start, end, group.group(0), group.start())
                )
            else:
                lead = len(part) - len(part.lstrip())
                citations.append(
                    Citation(match.group("vid"), start, end, part.strip(), part_offset + lead)
                )
            part_offset += len(part) + 1
        if bad:
            malformed.append(group.group(0))
    return citations, malformed


def parse_citations(text: str) -> list[Citation]:
    """The well-formed citations in ``text``, in order of appearance.

    A citation is ``(video-id @ START–END)`` where the times are ``MM:SS`` (minutes may pass 59)
    or ``H:MM:SS``, the separator is an en dash, em dash, hyphen or "to", and spaces are free.
    Citations whose end is not after their start are left out (see :func:`malformed_citations`).
    """
    return _scan(text)[0]


def malformed_citations(text: str) -> list[str]:
    """Parenthesised text that looks like a citation (holds "@" or a time range) but is not one.

    That is: no video id, a bad time such as ``01:75``, an unknown separator, or an end that is
    not after the start. Each is returned whole, parentheses included, in order of appearance.
    """
    return _scan(text)[1]


def format_citation(video_id: str, start_s: float, end_s: float) -> str:
    """The canonical citation ``(vid @ 01:30–02:00)``, times rounded to the second.

    Raises ``ValueError`` for a video id outside ``[A-Za-z0-9_-]+``, a negative or non-finite
    time, or a span that is empty once rounded: such a citation would not parse back.
    """
    if re.fullmatch(r"[A-Za-z0-9_-]+", video_id) is None:
        raise ValueError(f"video id {video_id!r} cannot be cited: use letters, digits, _ and -")
    if not (math.isfinite(start_s) and math.isfinite(end_s)) or start_s < 0:
        raise ValueError(f"span {start_s!r}–{end_s!r} s cannot be cited: times must be >= 0")
    if round(end_s) <= round(start_s):
        raise ValueError(
            f"span {start_s!r}–{end_s!r} s is empty at one-second resolution: cite a longer span"
        )
    return cite(video_id, start_s, end_s)


def _chunk_spans(segment: SegmentEvidence, chunk_s: float) -> list[tuple[float, float]]:
    """The segment's chunks; a segment with no transcript chunks is cut into ``chunk_s`` steps."""
    if segment.chunks:
        return [(c.start_s, c.end_s) for c in segment.chunks]
    spans: list[tuple[float, float]] = []
    start = segment.start_s
    while start < segment.end_s:
        spans.append((start, min(start + chunk_s, segment.end_s)))
        start += chunk_s
    return spans


def chunks_covered(
    citations: Sequence[Citation], segment: SegmentEvidence, chunk_s: float = 30.0
) -> set[int]:
    """Indexes (into the segment's chunks) of the chunks that a citation of its video covers.

    A citation covers a chunk when it overlaps it by more than :data:`COVER_TOLERANCE_S` (or half
    the chunk, for a chunk shorter than two seconds): ``01:00–02:00`` covers ``01:00–01:30`` and
    ``01:30–02:00`` but not the chunks that merely touch it at 01:00 or 02:00. When the segment
    carries no chunks, its span is cut into ``chunk_s``-second chunks from its start.
    """
    covered: set[int] = set()
    spans = _chunk_spans(segment, chunk_s)
    for citation in citations:
        if citation.video_id != segment.video_id:
            continue
        for index, (start, end) in enumerate(spans):
            overlap = min(citation.end_s, end) - max(citation.start_s, start)
            if overlap > min(COVER_TOLERANCE_S, (end - start) / 2):
                covered.add(index)
    return covered
