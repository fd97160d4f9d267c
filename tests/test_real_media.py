"""Real footage with real speech, through the real index: OpenCV's street-scene sample
(``vtest.avi``, pedestrians) carries a LibriVox reading of *Sense and Sensibility*, and its tree
sample (``tree.avi``) a reading of playing cards, muxed here with ffmpeg (the Debian packages'
files are used in place, never committed). Both are added and indexed with Whisper base, and a
search for words spoken in one finds that one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import imageio_ffmpeg
import pytest

from playlisteval.app import App
from store.catalog import INDEXED
from tests.debian_media import LIBRIVOX, TREE, VTEST, debian_file
from tests.workspaces import whisper_indexed
from tools.index.asr_wer import librivox_items, word_error_rate

pytestmark = pytest.mark.slow

CARDS = LIBRIVOX.parent / "cards"


def mux(video: Path, speech: Sequence[Path], out: Path, seconds: float) -> Path:
    """``seconds`` of ``video`` (at 360p) with the ``speech`` recordings one after another as
    its sound: one mp4."""
    inputs = [arg for wav in speech for arg in ("-i", str(wav))]
    joined = "".join(f"[{n + 1}:a]" for n in range(len(speech)))
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(),
        *("-y", "-loglevel", "error", "-t", f"{seconds:g}", "-i", str(video), *inputs),
        "-filter_complex",
        f"{joined}concat=n={len(speech)}:v=0:a=1,apad[a];[0:v]scale=-2:360[v]",
        *("-map", "[v]", "-map", "[a]", "-t", f"{seconds:g}"),
        *("-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"),
        *("-c:a", "aac", "-ar", "16000", str(out)),
    ]
    subprocess.run(command, check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def real_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """A workspace of the two real clips, indexed with Whisper base (no captions)."""
    debian_file("opencv-doc", VTEST)
    debian_file("pocketsphinx-testdata", LIBRIVOX / "transcription")
    media = tmp_path_factory.mktemp("real-media") / "street"
    media.mkdir()
    mux(VTEST, [item.wav for item in librivox_items(LIBRIVOX)], media / "pedestrians.mp4", 26)
    mux(TREE, sorted(CARDS.glob("*.wav")), media / "tree-cards.mp4", 12)
    with whisper_indexed(tmp_path_factory.mktemp("real-home"), {media: "street"}) as app:
        yield app


def _video(app: App, name: str) -> str:
    (video,) = [v for v in app.catalog.videos() if v.title and name in v.title.lower()]
    return video.id


def test_real_footage_with_real_speech_is_indexed_with_what_was_said(real_home: App) -> None:
    video_id = _video(real_home, "pedestrians")
    video = real_home.catalog.video(video_id)
    assert video is not None
    assert video.status == INDEXED
    assert video.transcript_source == "faster-whisper"
    heard = " ".join(c.transcript for c in real_home.catalog.chunks(video_id))
    said = " ".join(item.reference for item in librivox_items(LIBRIVOX))
    assert word_error_rate(said, heard).wer <= 0.15, heard


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("how much there might be prudently in his power", "pedestrians"),
        ("rather cold hearted and rather selfish", "pedestrians"),
        ("queen of clubs and seven of hearts", "tree-cards"),
    ],
)
def test_a_search_for_spoken_words_finds_the_clip_they_were_said_in(
    real_home: App, query: str, name: str
) -> None:
    hits = real_home.search().search(query, k=2)
    assert hits[0].video_id == _video(real_home, name), (query, hits)
