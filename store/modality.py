"""What a judge is shown of the spans it judges: one vocabulary for both sides of an evaluation.

An evaluation condition names its modality (``policies.judging.Condition``) and the pair judge's
context says what it receives (``tools.contracts.roles.PairJudgeContext``); they are the same five
words.
``tools`` and ``policies`` may not import each other, so the words live here, in the bottom layer
both of them stand on.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = ["Modality"]

Modality: TypeAlias = Literal["frames+transcript", "frames", "transcript", "audio", "none"]
"""``frames+transcript`` (the spans' video and transcripts), ``frames`` (their video, without
sound or transcript), ``transcript`` (their transcripts only), ``audio`` (their sound, no picture)
or ``none`` (the question and the answers alone): what ``agents.prompts.judge_evidence`` tells the
judge it receives."""
