"""The citation grammar: what parses, what is reported as malformed, and what a citation covers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.citations import (
    Citation,
    chunks_covered,
    format_citation,
    malformed_citations,
    parse_citations,
)
from tools.contracts.roles import ChunkText, SegmentEvidence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(vid @ 01:30–02:00)", [("vid", 90.0, 120.0)]),
        ("(vid @ 01:30—02:00)", [("vid", 90.0, 120.0)]),
        ("(vid @ 01:30-02:00)", [("vid", 90.0, 120.0)]),
        ("(vid @ 01:30 to 02:00)", [("vid", 90.0, 120.0)]),
        ("(  vid@01:30 – 02:00  )", [("vid", 90.0, 120.0)]),
        ("(vid @ 1:30–2:00)", [("vid", 90.0, 120.0)]),
        ("(vid @ 75:00–76:30)", [("vid", 4500.0, 4590.0)]),
        ("(vid @ 1:15:00–1:16:30)", [("vid", 4500.0, 4590.0)]),
        ("(vid @ 59:30–1:00:30)", [("vid", 3570.0, 3630.0)]),
        ("(dQw4w9WgXcQ_-x @ 00:00–00:30)", [("dQw4w9WgXcQ_-x", 0.0, 30.0)]),
        ("(a @ 00:10–00:20; b @ 00:30–00:40)", [("a", 10.0, 20.0), ("b", 30.0, 40.0)]),
        ("A (a @ 00:10–00:20) then B (b @ 01:00-02:00).", [("a", 10.0, 20.0), ("b", 60.0, 120.0)]),
        ("no citations (just an aside) here", []),
        ("(vid @ 02:00–01:00)", []),
        ("vid @ 01:00–02:00 without parentheses", []),
    ],
)
def test_parse_citations_reads_every_accepted_form(
    text: str, expected: list[tuple[str, float, float]]
) -> None:
    """En dash, em dash, hyphen, "to", free spaces, H:MM:SS and minutes past 59 all parse."""
    assert [(c.video_id, c.start_s, c.end_s) for c in parse_citations(text)] == expected


def test_citation_records_its_text_and_offset() -> None:
    """``raw`` is the matched text and ``offset`` where it starts, so it can be quoted back."""
    text = "Claim one (a @ 00:10–00:20). Claim two (a @ 00:30–00:40; b @ 01:00–01:30)."
    found = parse_citations(text)
    assert found[0] == Citation("a", 10.0, 20.0, "(a @ 00:10–00:20)", text.index("(a @ 00:10"))
    assert [text[c.offset : c.offset + len(c.raw)] for c in found] == [c.raw for c in found]
    assert found[2].raw == "b @ 01:00–01:30"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(vid @ 02:00–01:00)", ["(vid @ 02:00–01:00)"]),
        ("(vid @ 01:00–01:00)", ["(vid @ 01:00–01:00)"]),
        ("(vid @ 01:75–02:00)", ["(vid @ 01:75–02:00)"]),
        ("(vid @ 1:61:00–1:62:00)", ["(vid @ 1:61:00–1:62:00)"]),
        ("(see 01:00–02:00)", ["(see 01:00–02:00)"]),
        ("(01:00–02:00)", ["(01:00–02:00)"]),
        ("(vid @ 01:00)", ["(vid @ 01:00)"]),
        ("(vid @ 01:00 / 02:00)", ["(vid @ 01:00 / 02:00)"]),
        ("(vid! @ 01:00–02:00)", ["(vid! @ 01:00–02:00)"]),
        ("(a @ 00:10–00:20; b at 00:30)", ["(a @ 00:10–00:20; b at 00:30)"]),
        ("(vid @ 01:00–02:00) and (an aside, 2-3 times)", []),
        ("(vid @ 01:00–02:00)", []),
    ],
)
def test_malformed_citations_are_reported_whole(text: str, expected: list[str]) -> None:
    """Parenthesised text with "@" or a time range that does not parse is quoted back whole."""
    assert malformed_citations(text) == expected


@pytest.mark.parametrize(
    ("video_id", "start_s", "end_s", "expected"),
    [
        ("vid", 90, 120, "(vid @ 01:30–02:00)"),
        ("vid", 0, 30, "(vid @ 00:00–00:30)"),
        ("vid", 4500, 4590, "(vid @ 75:00–76:30)"),
        ("a-b_c", 89.6, 120.2, "(a-b_c @ 01:30–02:00)"),
    ],
)
def test_format_citation_writes_the_canonical_form(
    video_id: str, start_s: float, end_s: float, expected: str
) -> None:
    """Two-digit minutes (past 59 when needed), en dash, times rounded to the second."""
    assert format_citation(video_id, start_s, end_s) == expected


@pytest.mark.parametrize(
    ("video_id", "start_s", "end_s"),
    [
        ("has space", 0, 30),
        ("", 0, 30),
        ("vid", -5, 30),
        ("vid", 0, float("nan")),
        ("vid", 30, 30.2),
        ("vid", 60, 30),
    ],
)
def test_format_citation_refuses_what_would_not_parse_back(
    video_id: str, start_s: float, end_s: float
) -> None:
    """A bad id, a negative or NaN time or an empty span raises ValueError, naming the value."""
    with pytest.raises(ValueError, match=r"cannot be cited|is empty"):
        format_citation(video_id, start_s, end_s)


@given(
    video_id=st.from_regex(r"[A-Za-z0-9_-]+", fullmatch=True),
    start=st.integers(min_value=0, max_value=30 * 3600),
    length=st.integers(min_value=1, max_value=3 * 3600),
)
def test_format_then_parse_round_trips(video_id: str, start: int, length: int) -> None:
    """Whatever format_citation writes, parse_citations reads back exactly, in running text too."""
    formatted = format_citation(video_id, start, start + length)
    text = f"The host points left {formatted}.\n\nNext."
    assert parse_citations(text) == [
        Citation(video_id, float(start), float(start + length), formatted, text.index(formatted))
    ]
    assert malformed_citations(text) == []


def _segment(video_id: str = "vid", start_s: float = 60.0, n_chunks: int = 4) -> SegmentEvidence:
    chunks = tuple(
        ChunkText(start_s=start_s + 30 * i, end_s=start_s + 30 * (i + 1), text=f"c{i}")
        for i in range(n_chunks)
    )
    return SegmentEvidence(
        segment_id="s1",
        video_id=video_id,
        start_s=start_s,
        end_s=start_s + 30 * n_chunks,
        chunks=chunks,
    )


@pytest.mark.parametrize(
    ("cited", "expected"),
    [
        ("(vid @ 01:00–02:00)", {0, 1}),
        ("(vid @ 01:00–01:30)", {0}),
        ("(vid @ 01:29–02:00)", {1}),
        ("(vid @ 01:28–02:00)", {0, 1}),
        ("(vid @ 01:00–01:31)", {0}),
        ("(vid @ 01:00–01:32)", {0, 1}),
        ("(vid @ 00:00–01:00)", set()),
        ("(vid @ 00:00–01:02)", {0}),
        ("(vid @ 03:00–04:00)", set()),
        ("(vid @ 00:00–10:00)", {0, 1, 2, 3}),
        ("(vid @ 01:10–01:20) (vid @ 01:15–01:25)", {0}),
        ("(other @ 01:00–02:00)", set()),
        ("(vid @ 01:00–01:30) (vid @ 02:30–03:00)", {0, 3}),
    ],
)
def test_chunks_covered_counts_overlaps_beyond_one_second(cited: str, expected: set[int]) -> None:
    """01:00–02:00 covers the two chunks 01:00–01:30 and 01:30–02:00; touching is not covering."""
    assert chunks_covered(parse_citations(cited), _segment()) == expected


def test_chunks_covered_cuts_a_chunkless_segment_into_steps() -> None:
    """A segment without transcript chunks is cut into chunk_s steps from its start."""
    segment = _segment(n_chunks=0).model_copy(update={"end_s": 180.0})
    assert chunks_covered(parse_citations("(vid @ 01:00–02:00)"), segment) == {0, 1}
    assert chunks_covered(parse_citations("(vid @ 01:00–02:00)"), segment, chunk_s=60.0) == {0}


@pytest.mark.parametrize("seconds", [0.0, 29.4, 59.5, 59.6, 61.0, 3599.6, 5400.2])
def test_frame_labels_and_citations_write_a_time_alike(seconds: float) -> None:
    """One MM:SS formatter: a frame labelled at 59.6 s and a citation of it say the same."""
    from tools.contracts.roles import format_timestamp
    from tools.providers.base import TimedFrame, timestamp

    assert timestamp(seconds) == format_timestamp(seconds)
    assert TimedFrame("v", seconds, b"").label() == f"(v @ {format_timestamp(seconds)})"
