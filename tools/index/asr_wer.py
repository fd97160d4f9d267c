"""Word error rate of our speech-to-text on real speech with reference transcripts.

Debian's ``pocketsphinx-testdata`` ships five LibriVox recordings of *Sense and Sensibility*
(public domain; 16 kHz mono WAV, 3–7 s each) with their reference transcripts and the
hypotheses of pocketsphinx's own test language model (``test-lm.match``).
:func:`librivox_items` reads them in place (they are never copied into the repository),
:func:`transcribe_items` puts them through a project transcriber (the Whisper path of
:mod:`tools.index.transcripts`, one 30 s chunk per recording) and :func:`word_error_rate` scores
hypotheses against references after one normalisation applied to both (lower case, no
punctuation, a few spoken forms of abbreviations).
"""

from __future__ import annotations

import re
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from store.errors import ConfigError
from tools.index.transcripts import Transcriber, TranscriptRequest

__all__ = [
    "LIBRIVOX_DIR",
    "SpeechItem",
    "WerScore",
    "librivox_items",
    "normalise_words",
    "pocketsphinx_hypotheses",
    "read_wav",
    "transcribe_items",
    "word_error_rate",
]

LIBRIVOX_DIR = Path("/usr/share/pocketsphinx/test/data/librivox")
"""Where Debian's ``pocketsphinx-testdata`` puts the LibriVox recordings."""

# Written forms Whisper uses for words the references spell out.
_SPOKEN = {"mr": "mister", "mrs": "missus", "dr": "doctor", "st": "saint"}
_LINE = re.compile(r"^(?:<s>)?\s*(.*?)\s*(?:</s>)?\s*\(([^()\s]+)(?:\s+-?\d+)?\)\s*$")


@dataclass(frozen=True)
class SpeechItem:
    """One recording and what is said in it."""

    item_id: str
    wav: Path
    reference: str


@dataclass(frozen=True)
class WerScore:
    """Edit operations over reference words: WER = (substitutions + deletions + insertions) /
    reference words."""

    substitutions: int
    deletions: int
    insertions: int
    reference_words: int

    @property
    def errors(self) -> int:
        """Word edits needed to turn the hypothesis into the reference."""
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        """The word error rate (0 for an empty reference with an empty hypothesis)."""
        if self.reference_words == 0:
            return 0.0 if self.errors == 0 else float("inf")
        return self.errors / self.reference_words

    def __add__(self, other: WerScore) -> WerScore:
        return WerScore(
            self.substitutions + other.substitutions,
            self.deletions + other.deletions,
            self.insertions + other.insertions,
            self.reference_words + other.reference_words,
        )


def normalise_words(text: str) -> list[str]:
    """Lower-case words with punctuation dropped (hyphens split words; apostrophes kept
    inside them) and abbreviations spelt as spoken (``Mr.`` → ``mister``)."""
    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower().replace("-", " "))
    return [_SPOKEN.get(word, word) for word in words]


def word_error_rate(reference: str, hypothesis: str) -> WerScore:
    """The word-level edit distance of ``hypothesis`` from ``reference``, by kind (both
    normalised by :func:`normalise_words`)."""
    ref, hyp = normalise_words(reference), normalise_words(hypothesis)
    # cost[i][j]: (edits, subs, dels, ins) turning hyp[:j] into ref[:i]
    previous = [(j, 0, 0, j) for j in range(len(hyp) + 1)]
    for i in range(1, len(ref) + 1):
        current = [(i, 0, i, 0)]
        for j in range(1, len(hyp) + 1):
            same = ref[i - 1] == hyp[j - 1]
            diag = previous[j - 1]
            options = [
                (diag[0] + (0 if same else 1), diag[1] + (0 if same else 1), diag[2], diag[3]),
                (previous[j][0] + 1, previous[j][1], previous[j][2] + 1, previous[j][3]),
                (
                    current[j - 1][0] + 1,
                    current[j - 1][1],
                    current[j - 1][2],
                    current[j - 1][3] + 1,
                ),
            ]
            current.append(min(options))
        previous = current
    _edits, subs, dels, ins = previous[-1]
    return WerScore(subs, dels, ins, len(ref))


def _read_lines(path: Path) -> dict[str, str]:
    """``text (item-id [score])`` lines (the Sphinx transcription format) by item id."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = _LINE.match(line.strip())
        if match:
            found[match.group(2)] = match.group(1)
    return found


def librivox_items(folder: Path = LIBRIVOX_DIR) -> list[SpeechItem]:
    """The recordings of ``folder`` (the ``fileids`` order) with their reference transcripts;
    ConfigError saying what to install when the folder is not there."""
    if not (folder / "transcription").is_file():
        raise ConfigError(
            f"no LibriVox test recordings in {str(folder)!r}: install Debian's "
            "pocketsphinx-testdata (`apt-get install pocketsphinx-testdata`)"
        )
    references = _read_lines(folder / "transcription")
    ids = (folder / "fileids").read_text().split()
    return [SpeechItem(item, folder / f"{item}.wav", references[item]) for item in ids]


def pocketsphinx_hypotheses(folder: Path = LIBRIVOX_DIR) -> dict[str, str]:
    """What pocketsphinx heard with its test language model (the package's ``test-lm.match``),
    by item id: a baseline measured elsewhere, shipped beside the recordings."""
    return _read_lines(folder / "test-lm.match")


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """Mono float32 samples in [-1, 1] of a 16-bit PCM WAV file, and its sample rate."""
    with wave.open(str(path), "rb") as audio:
        if audio.getsampwidth() != 2:
            raise ConfigError(f"{str(path)!r} is not 16-bit PCM; convert it with ffmpeg first")
        frames = audio.readframes(audio.getnframes())
        channels, rate = audio.getnchannels(), audio.getframerate()
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    return samples.reshape(-1, channels).mean(axis=1), rate


def transcribe_items(transcriber: Transcriber, items: Sequence[SpeechItem]) -> dict[str, str]:
    """What ``transcriber`` hears in each recording (each one chunk of its own), by item id.
    The recordings are 16 kHz, the rate every backend takes."""
    heard: dict[str, str] = {}
    for item in items:
        samples, rate = read_wav(item.wav)
        if rate != 16_000:
            raise ConfigError(f"{str(item.wav)!r} is at {rate} Hz; the transcribers take 16 kHz")
        request = TranscriptRequest(
            grid=[(0.0, len(samples) / rate)], audio=_whole(samples), language="en"
        )
        heard[item.item_id] = transcriber.transcribe(request)[0]
    return heard


def _whole(samples: np.ndarray) -> Callable[[float, float], np.ndarray]:
    """The audio callback of a one-chunk request: the whole recording, whatever the span."""

    def audio(_start: float, _end: float) -> np.ndarray:
        return samples

    return audio
