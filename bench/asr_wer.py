"""Word error rate of the project's Whisper path on real speech (Debian's pocketsphinx-testdata).

The five LibriVox recordings of *Sense and Sensibility* (public domain, 25 s in all, 71 reference
words) go through ``make_transcriber("faster-whisper", model=...)``, each recording as one chunk
(the index's own backend and chunking), and are scored against the package's reference
transcripts with :func:`tools.index.asr_wer.word_error_rate` (lower case, no punctuation, ``Mr.``
read
as ``mister``). Beside it, on the same references: pocketsphinx's own hypotheses with its test
language model, which the package ships (``test-lm.match``).

Run: ``.venv/bin/python bench/asr_wer.py [--model base] [--beam-size 1]`` (about 30 s on 2 cores
with Whisper base; needs `apt-get install pocketsphinx-testdata` and the `asr` extra).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine


def main() -> None:
    """Print each recording's WER and the totals, Whisper beside pocketsphinx."""
    from tools.index.asr_wer import (
        WerScore,
        librivox_items,
        pocketsphinx_hypotheses,
        transcribe_items,
        word_error_rate,
    )
    from tools.index.transcripts import make_transcriber

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="base", help="index.whisper_model (default base)")
    parser.add_argument("--beam-size", type=int, default=1, help="the index's default is 1")
    args = parser.parse_args()
    items = librivox_items()
    transcriber = make_transcriber(
        "faster-whisper", model=args.model, beam_size=args.beam_size, batch_size=1
    )
    started = time.perf_counter()
    heard = transcribe_items(transcriber, items)
    seconds = time.perf_counter() - started
    baseline = pocketsphinx_hypotheses()
    print(f"# ASR word error rate on LibriVox ({machine()})")
    print(f"Whisper {args.model} (faster-whisper, beam {args.beam_size}), {len(items)} recordings")
    print("| recording | words | Whisper WER | pocketsphinx WER | Whisper heard |")
    print("|---|---|---|---|---|")
    whisper_total = sphinx_total = WerScore(0, 0, 0, 0)
    for item in items:
        ours = word_error_rate(item.reference, heard[item.item_id])
        theirs = word_error_rate(item.reference, baseline[item.item_id])
        whisper_total += ours
        sphinx_total += theirs
        print(
            f"| {item.item_id.rsplit('-', 1)[-1]} | {ours.reference_words} | {ours.wer:.3f} | "
            f"{theirs.wer:.3f} | {heard[item.item_id]} |"
        )
    w, s = whisper_total, sphinx_total
    print(
        f"\nWhisper {args.model}: WER {w.wer:.3f} ({w.errors} errors: {w.substitutions} sub, "
        f"{w.deletions} del, {w.insertions} ins, over {w.reference_words} words) in "
        f"{seconds:.1f} s of transcription"
    )
    print(f"pocketsphinx (test LM, shipped hypotheses): WER {s.wer:.3f} ({s.errors} errors)")
    if w.wer > 0:
        print(f"ratio pocketsphinx / Whisper: {s.wer / w.wer:.1f}")


if __name__ == "__main__":
    main()
