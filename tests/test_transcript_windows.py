"""The transcript test's windows: one length, the relevant ones cut to what the gold cites and
hidden at positions drawn from the seed; a prompt that does not say how the test works.

Real index (the indexed demo workspace, its SQLite catalogue), real seeds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.citations import format_citation, parse_citations
from agents.evidence import MAX_WINDOW_CHUNKS, SeedEvidence, kept_chunks
from agents.prompts import render_prompt, template
from playlisteval.app import App
from playlisteval.settings import load_settings
from store.catalog import Catalog, SeedRow
from tools.contracts.roles import (
    ChunkText,
    SegmentEvidence,
    TranscriptTestContext,
    TranscriptWindow,
)


@pytest.fixture
def app(workspace: Path) -> Iterator[App]:
    with App(load_settings(workspace)) as opened:
        yield opened


def evidence(app: App, seed: SeedRow) -> SeedEvidence:
    return SeedEvidence(app.catalog, app.clips(), seed.id, seed.segment_a, seed.segment_b)


def chunk_texts(catalog: Catalog, video_id: str) -> list[str]:
    return [c.transcript for c in catalog.chunks(video_id)]


def window_chunks(catalog: Catalog, window: TranscriptWindow) -> tuple[str, int]:
    """The video and the number of consecutive chunks whose transcripts make ``window``'s text
    (the only way to tell a window's length in chunks from outside)."""
    for video in catalog.videos(statuses=["indexed"]):
        texts = chunk_texts(catalog, video.id)
        for start in range(len(texts)):
            for end in range(start + 1, len(texts) + 1):
                if " ".join(t for t in texts[start:end] if t) == window.text:
                    return video.id, end - start
    raise AssertionError(f"window {window.label} is no run of chunks: {window.text[:80]!r}")


def relevant_positions(seed: SeedEvidence, windows: tuple[TranscriptWindow, ...]) -> list[int]:
    """Where the seed's own segments' windows sit (0-based)."""
    own = {row.video_id for row in seed.rows}
    segment_texts = {c.text for s in seed.segments for c in s.chunks if c.text}
    return [
        i
        for i, w in enumerate(windows)
        if any(t in w.text for t in segment_texts) and window_chunks(seed.catalog, w)[0] in own
    ]


def citing_gold(segments: tuple[SegmentEvidence, SegmentEvidence], picks: list[int]) -> str:
    """A gold answer citing chunk ``picks[k]`` of segment ``k``."""
    return "\n\n".join(
        f"Here it is shown {format_citation(s.video_id, s.chunks[i].start_s, s.chunks[i].end_s)}."
        for s, i in zip(segments, picks, strict=True)
    )


@pytest.mark.parametrize(
    ("bound", "distractors"),
    [
        # The demo's segments are 2 chunks and each playlist has one video besides the seed's
        # two: its 4 chunks make 2 windows of 2, or 4 windows of 1 under a bound of 1 chunk.
        (MAX_WINDOW_CHUNKS, 2),
        (1, 4),
    ],
)
def test_every_window_is_the_same_number_of_chunks_and_the_relevant_ones_are_among_them(
    app: App, bound: int, distractors: int
) -> None:
    seeds = app.catalog.seeds()
    assert seeds
    for seed in seeds[::5]:
        built = evidence(app, seed)
        windows = built.transcript_windows(max_window_chunks=bound)
        size = min(bound, *(len(s.chunks) for s in built.segments))
        assert len(windows) == 2 + distractors, seed.id
        assert [w.label for w in windows] == [f"W{i}" for i in range(1, len(windows) + 1)]
        lengths = {window_chunks(app.catalog, w)[1] for w in windows}
        assert lengths == {size}, (seed.id, lengths)
        relevant = relevant_positions(built, windows)
        assert len(relevant) == 2, seed.id
        own = {row.video_id for row in built.rows}
        for i, window in enumerate(windows):
            video = window_chunks(app.catalog, window)[0]
            assert (video in own) == (i in relevant), (seed.id, window.label)


def test_character_lengths_of_the_windows_are_comparable(app: App) -> None:
    for seed in app.catalog.seeds()[:6]:
        windows = evidence(app, seed).transcript_windows()
        chars = [len(w.text) for w in windows]
        assert max(chars) <= 2 * min(chars), (seed.id, chars)


def test_the_same_seed_gives_the_same_windows_in_the_same_order(app: App) -> None:
    seed = app.catalog.seeds()[0]
    first = evidence(app, seed).transcript_windows()
    again = evidence(app, seed).transcript_windows()  # a fresh object, as a replay builds it
    assert first == again


def test_the_relevant_windows_sit_at_positions_that_differ_between_seeds(app: App) -> None:
    placements = set()
    orders = set()
    for seed in app.catalog.seeds():
        built = evidence(app, seed)
        windows = built.transcript_windows()
        placements.add(tuple(relevant_positions(built, windows)))
        orders.add(tuple(w.text for w in windows))
    assert len(placements) > 1, placements
    assert len(orders) > 1


def test_a_segment_longer_than_the_windows_is_cut_to_the_chunks_the_gold_cites(app: App) -> None:
    seed = app.catalog.seeds()[0]
    built = evidence(app, seed)
    assert all(len(s.chunks) == 2 for s in built.segments)
    gold = citing_gold(built.segments, [0, 1])  # segment A's first chunk, B's last
    windows = built.transcript_windows(gold, max_window_chunks=1)
    texts = {w.text for w in windows}
    a, b = built.segments
    assert a.chunks[0].text in texts
    assert a.chunks[1].text not in texts
    assert b.chunks[1].text in texts
    assert b.chunks[0].text not in texts
    # With no gold to go by, each keeps its middle chunk (the later of two).
    default = {w.text for w in built.transcript_windows(max_window_chunks=1)}
    assert {a.chunks[1].text, b.chunks[1].text} <= default
    assert a.chunks[0].text not in default


def test_the_default_call_is_the_call_with_no_gold(app: App) -> None:
    built = evidence(app, app.catalog.seeds()[0])
    assert built.transcript_windows() == built.transcript_windows("")


def chunks_of(count: int) -> SegmentEvidence:
    return SegmentEvidence(
        segment_id="s",
        video_id="v",
        start_s=0.0,
        end_s=30.0 * count,
        chunks=tuple(
            ChunkText(start_s=30.0 * i, end_s=30.0 * (i + 1), text=f"c{i}") for i in range(count)
        ),
    )


@pytest.mark.parametrize(
    ("count", "cited", "size", "kept"),
    [
        (3, [], 5, [0, 1, 2]),  # short enough: all of it
        (10, [], 3, [4, 5, 6]),  # nothing cited: the middle
        (10, [(8, 9)], 3, [7, 8, 9]),  # the cited chunk and its neighbours
        (10, [(0, 0)], 3, [0, 1, 2]),  # at the start: neighbours on one side only
        (
            10,
            [(1, 1), (7, 7)],
            4,
            [0, 1, 2, 7],
        ),  # two cited spans, then the nearest
        (10, [(2, 8)], 3, [2, 3, 4]),  # more cited than fit: the earliest
    ],
)
def test_kept_chunks_are_the_cited_ones_and_their_nearest_neighbours(
    count: int, cited: list[tuple[int, int]], size: int, kept: list[int]
) -> None:
    segment = chunks_of(count)
    gold = " ".join(format_citation("v", 30.0 * a, 30.0 * (b + 1)) for a, b in cited)
    assert kept_chunks(segment, parse_citations(gold), size) == kept


BANNED = ("visible", "on screen", "on-screen", "test", "unrelated", "no video", "shuffle", "gold")


def test_the_answerer_prompt_does_not_say_how_the_test_works() -> None:
    text = template("transcript_answerer").lower()
    assert "transcript" in text
    for word in BANNED:
        assert word not in text, word
    context = TranscriptTestContext(
        question="What happens?",
        windows=(TranscriptWindow(label="W1", text="We mix the flour."),),
    )
    prompt = render_prompt(context).lower()
    for word in BANNED:
        assert word not in prompt, word
