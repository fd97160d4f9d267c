"""Caption files are read forgivingly and laid onto the chunk grid by cue midpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.errors import TranscriptError
from tools.index.captions import Cue, align_to_chunks, parse_captions

VTT = b"""WEBVTT
Kind: captions

NOTE a comment block that is not a cue

00:00:01.000 --> 00:00:03.500 align:start position:0%
Hello &amp; welcome

00:00:04.000 --> 00:00:06.000
<v Ann><b>to the</b> show</v>
"""

SRT = b"""1
00:00:01,000 --> 00:00:03,500
Hello &amp; welcome

2
00:00:04,000 --> 00:00:06,000
<i>to the</i> show
"""

ROLLING = b"""WEBVTT

00:00:00.000 --> 00:00:02.000 align:start position:0%
hello<00:00:00.500><c> world</c>

00:00:02.000 --> 00:00:02.010 align:start position:0%
hello world

00:00:02.010 --> 00:00:04.000 align:start position:0%
hello world
this is<00:00:02.500><c> next</c>

00:00:04.000 --> 00:00:06.000 align:start position:0%
this is next
and more
"""

MALFORMED = b"""WEBVTT

00:00:01.000 --> garbage
lost

00:00:09.000 --> 00:00:02.000
ends before it starts

just some text without timing

00:00:10.000 --> 00:00:12.000
kept
"""

SHORT_TIMES = b"""WEBVTT

00:01.000 --> 00:02.500
short form
"""


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        pytest.param(
            "a.vtt",
            VTT,
            [Cue(1.0, 3.5, "Hello & welcome"), Cue(4.0, 6.0, "to the show")],
            id="vtt-with-header-note-voice-and-entities",
        ),
        pytest.param(
            "a.srt",
            SRT,
            [Cue(1.0, 3.5, "Hello & welcome"), Cue(4.0, 6.0, "to the show")],
            id="srt",
        ),
        pytest.param(
            "bom.srt",
            b"\xef\xbb\xbf" + SRT,
            [Cue(1.0, 3.5, "Hello & welcome"), Cue(4.0, 6.0, "to the show")],
            id="utf8-bom",
        ),
        pytest.param(
            "crlf.srt",
            SRT.replace(b"\n", b"\r\n"),
            [Cue(1.0, 3.5, "Hello & welcome"), Cue(4.0, 6.0, "to the show")],
            id="crlf-line-ends",
        ),
        pytest.param(
            "cp1252.srt",
            "1\n00:00:01,000 --> 00:00:02,000\ncaf\u00e9 \u201cquoted\u201d\n".encode("cp1252"),
            [Cue(1.0, 2.0, "caf\u00e9 \u201cquoted\u201d")],
            id="cp1252-bytes",
        ),
        pytest.param(
            "latin.srt",
            b"1\n00:00:01,000 --> 00:00:02,000\nbad \x81 byte\n",
            [Cue(1.0, 2.0, "bad \x81 byte")],
            id="bytes-undefined-in-cp1252-fall-back-to-latin-1",
        ),
        pytest.param(
            "rolling.vtt",
            ROLLING,
            [
                Cue(0.0, 2.0, "hello world"),
                Cue(2.01, 4.0, "this is next"),
                Cue(4.0, 6.0, "and more"),
            ],
            id="youtube-rolling-duplicates-and-inline-timestamps",
        ),
        pytest.param(
            "malformed.vtt", MALFORMED, [Cue(10.0, 12.0, "kept")], id="malformed-blocks-skipped"
        ),
        pytest.param(
            "short.vtt", SHORT_TIMES, [Cue(1.0, 2.5, "short form")], id="mm-ss-timestamps"
        ),
    ],
)
def test_parse_captions_reads_cues(
    tmp_path: Path, name: str, content: bytes, expected: list[Cue]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert parse_captions(path) == expected


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(b"", "no cue with a valid timing line", id="empty-file"),
        pytest.param(
            b"WEBVTT\n\nNOTE nothing here\n", "no cue with a valid timing line", id="header"
        ),
        pytest.param(b"\x00\xff\xfe binary junk", "no cue with a valid timing line", id="binary"),
        pytest.param(
            b"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n<c> </c>\n", "hold no text", id="empty-cues"
        ),
    ],
)
def test_file_without_usable_cue_is_a_transcript_error(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "broken.vtt"
    path.write_bytes(content)
    with pytest.raises(TranscriptError, match=reason):
        parse_captions(path)


def test_unreadable_file_is_a_transcript_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.vtt"
    with pytest.raises(TranscriptError, match=r"missing\.vtt"):
        parse_captions(missing)
    with pytest.raises(TranscriptError, match="cannot be read"):
        parse_captions(tmp_path)  # a directory


GRID = [(0.0, 30.0), (30.0, 60.0), (60.0, 75.0)]


@pytest.mark.parametrize(
    ("cues", "grid", "expected"),
    [
        pytest.param([], GRID, ["", "", ""], id="no-cues-give-empty-chunks"),
        pytest.param(
            [Cue(1, 2, "a"), Cue(3, 4, "b"), Cue(31, 32, "c")],
            GRID,
            ["a b", "c", ""],
            id="cues-joined-in-order",
        ),
        pytest.param(
            [Cue(25, 40, "straddles into second")],
            GRID,
            ["", "straddles into second", ""],
            id="straddling-cue-goes-to-midpoint-chunk",
        ),
        pytest.param(
            [Cue(20, 35, "mostly first")],
            GRID,
            ["mostly first", "", ""],
            id="midpoint-before-boundary",
        ),
        pytest.param(
            [Cue(29, 31, "exactly on boundary")],
            GRID,
            ["", "exactly on boundary", ""],
            id="boundary-midpoint-belongs-to-later-chunk",
        ),
        pytest.param(
            [Cue(70, 90, "runs past the end")],
            GRID,
            ["", "", "runs past the end"],
            id="cue-past-short-last-chunk-goes-to-overlap",
        ),
        pytest.param(
            [Cue(200, 210, "after everything")], GRID, ["", "", ""], id="cue-outside-grid-dropped"
        ),
        pytest.param(
            [Cue(1, 2, "  spaced\t out  ")],
            [(0.0, 30.0)],
            ["spaced out"],
            id="whitespace-normalised",
        ),
        pytest.param(
            [Cue(1, 2, "first"), Cue(31, 32, "second")],
            [(30.0, 60.0), (0.0, 30.0)],
            ["second", "first"],
            id="unsorted-grid-keeps-its-order",
        ),
    ],
)
def test_align_to_chunks_places_cue_by_midpoint(
    cues: list[Cue], grid: list[tuple[float, float]], expected: list[str]
) -> None:
    assert align_to_chunks(cues, grid) == expected
