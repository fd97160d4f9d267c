"""The rule-based Structural Validity gates of Phase I and Phase II: no model call.

They run first because they are free: a QA or distractor set that fails here never reaches the
paid gates. A rejection's reason is fed back to the generator verbatim, so it names every failure
at once (most important first), quotes the offending value with ``!r`` (cut short, never a whole
answer) and says what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agents.citations import (
    COVER_TOLERANCE_S,
    Citation,
    chunks_covered,
    format_timestamp,
    malformed_citations,
    parse_citations,
)
from tools.contracts.roles import QA, VISUAL_KINDS, DistractorSet, GradedAnswer, SegmentEvidence

__all__ = ["GateResult", "phase1_structural", "phase2_structural"]

_PARAGRAPH_BREAK_RE = re.compile(r"\n[ \t\r\f\v]*\n")
# Quotes in a reason are cut to this many characters, and at most this many are listed per rule:
# the reason goes back into the next prompt, which must not grow with the size of the failure.
_QUOTE_CHARS = 80
_MAX_QUOTES = 5


@dataclass(frozen=True)
class GateResult:
    """A gate's verdict. ``reason`` is fed to the generator verbatim on a rejection (specific,
    actionable, quoting offending values); on a pass it is a short summary."""

    passed: bool
    reason: str


def _quote(text: str) -> str:
    """``text!r``, cut short so that a reason never echoes a whole answer."""
    if len(text) <= _QUOTE_CHARS:
        return repr(text)
    return repr(text[:_QUOTE_CHARS] + "…") + f" ({len(text):,} chars)"


def _quote_all(items: Sequence[str]) -> str:
    shown = ", ".join(_quote(item) for item in items[:_MAX_QUOTES])
    more = len(items) - _MAX_QUOTES
    return shown + (f" and {more} more" if more > 0 else "")


def _verdict(failures: list[str], summary: str) -> GateResult:
    if failures:
        return GateResult(False, " ".join(f"({i}) {f}" for i, f in enumerate(failures, 1)))
    return GateResult(True, summary)


def _span(start_s: float, end_s: float) -> str:
    return f"{format_timestamp(start_s)}–{format_timestamp(end_s)}"


def _paragraphs(text: str) -> list[str]:
    """The non-empty, blank-line-separated paragraphs of ``text``."""
    return [p.strip() for p in _PARAGRAPH_BREAK_RE.split(text) if p.strip()]


def _within(citation: Citation, segment: SegmentEvidence) -> bool:
    return (
        citation.start_s >= segment.start_s - COVER_TOLERANCE_S
        and citation.end_s <= segment.end_s + COVER_TOLERANCE_S
    )


def _citation_failures(citations: list[Citation], segments: Sequence[SegmentEvidence]) -> list[str]:
    """Citations of a video neither segment shows, or of a span outside every segment of it."""
    wrong_video: list[str] = []
    outside: list[str] = []
    video_ids = list(dict.fromkeys(s.video_id for s in segments))
    for citation in citations:
        own = [s for s in segments if s.video_id == citation.video_id]
        if not own:
            wrong_video.append(citation.raw)
        elif not any(_within(citation, s) for s in own):
            spans = " or ".join(
                f"segment {s.segment_id!r} {_span(s.start_s, s.end_s)}" for s in own
            )
            outside.append(
                f"{_quote(citation.raw)} lies outside {spans} of video {own[0].video_id!r}"
            )
    failures: list[str] = []
    if wrong_video:
        failures.append(
            f"citations {_quote_all(wrong_video)} name a video that neither segment shows;"
            f" cite only videos {', '.join(repr(v) for v in video_ids)}."
        )
    if outside:
        shown = "; ".join(outside[:_MAX_QUOTES])
        more = f" and {len(outside) - _MAX_QUOTES} more" if len(outside) > _MAX_QUOTES else ""
        failures.append(f"{shown}{more}; cite spans inside the segments.")
    return failures


def phase1_structural(
    qa: QA,
    segments: Sequence[SegmentEvidence],
    *,
    min_paragraphs: int = 3,
    min_chunks: int = 2,
    max_chunks: int = 15,
    max_answer_chars: int = 20_000,
) -> GateResult:
    """Phase I Structural Validity: shape, citations and evidence coverage of a QA's gold answer.

    Rejects, naming every failure: an empty question or gold answer; a gold answer longer than
    ``max_answer_chars``; fewer than ``min_paragraphs`` paragraphs; no citation; malformed
    citations; a paragraph with no citation; a citation of another video or outside its segment
    (1 s tolerance); and, in each segment, a count of cited 30-second chunks outside
    ``[min_chunks, max_chunks]``.
    """
    failures: list[str] = []
    question, gold = qa.question.strip(), qa.gold_answer.strip()
    if not question:
        failures.append("the question is empty; write a question about both segments.")
    if not gold:
        failures.append(
            f"the gold answer is empty; write {min_paragraphs} or more paragraphs citing"
            " (video-id @ MM:SS–MM:SS)."
        )
        return _verdict(failures, "")
    if len(qa.gold_answer) > max_answer_chars:
        failures.append(
            f"the gold answer is {len(qa.gold_answer):,} characters long;"
            f" keep it under {max_answer_chars:,}."
        )
    found = _paragraphs(qa.gold_answer)
    if len(found) < min_paragraphs:
        failures.append(
            f"the gold answer has {len(found)} paragraph{'s' if len(found) != 1 else ''};"
            f" write at least {min_paragraphs}, separated by blank lines."
        )
    citations = parse_citations(qa.gold_answer)
    malformed = malformed_citations(qa.gold_answer)
    if not citations:
        failures.append(
            "the gold answer cites no span; cite each claim's span as (video-id @ MM:SS–MM:SS)."
        )
    if malformed:
        failures.append(
            f"malformed citations {_quote_all(malformed)}; write each as (video-id @ MM:SS–MM:SS)"
            " with the end after the start."
        )
    if citations:
        uncited = [i for i, p in enumerate(found, 1) if not parse_citations(p)]
        if uncited:
            many = len(uncited) > 1
            failures.append(
                f"paragraph{'s' if many else ''} {', '.join(map(str, uncited))}"
                f" ({_quote_all([found[i - 1] for i in uncited])}) cite{'' if many else 's'}"
                " no span; every claim cites its span."
            )
    failures.extend(_citation_failures(citations, segments))
    counts: list[str] = []
    for segment in segments:
        covered = len(chunks_covered(citations, segment))
        counts.append(f"{segment.segment_id}={covered}")
        if not min_chunks <= covered <= max_chunks:
            failures.append(
                f"the citations cover {covered} of the 30-second chunks of segment"
                f" {segment.segment_id!r} (video {segment.video_id!r},"
                f" {_span(segment.start_s, segment.end_s)});"
                f" cite between {min_chunks} and {max_chunks} of them."
            )
    return _verdict(
        failures,
        f"{len(found)} paragraphs, {len(citations)} citations, chunks covered {', '.join(counts)}.",
    )


def _normal(text: str) -> str:
    """Text compared for sameness: case and runs of whitespace do not make answers different."""
    return " ".join(text.split()).casefold()


def _answer_failures(
    index: int, answer: GradedAnswer, gold: str, max_answer_chars: int
) -> list[str]:
    name = f"answer {index} (rated {answer.rating})"
    failures: list[str] = []
    if not answer.answer.strip():
        failures.append(f"{name} is empty; rewrite the gold with visual-only errors.")
    elif len(answer.answer) > max_answer_chars:
        failures.append(
            f"{name} is {len(answer.answer):,} characters long; keep it under"
            f" {max_answer_chars:,}, close to the gold's length."
        )
    elif _normal(answer.answer) == _normal(gold):
        failures.append(f"{name} repeats the gold answer; inject at least one visual-only error.")
    if not answer.causal_record:
        failures.append(f"{name} has an empty causal record; record each degradation it makes.")
        return failures
    for number, d in enumerate(answer.causal_record, 1):
        empty = [
            field
            for field in ("attribute", "element", "original", "degraded")
            if not getattr(d, field).strip()
        ]
        if empty:
            failures.append(
                f"{name}, degradation {number}: {', '.join(empty)} empty; fill in attribute,"
                " element, original and degraded."
            )
        elif _normal(d.original) == _normal(d.degraded):
            failures.append(
                f"{name}, degradation {number}: original and degraded are both"
                f" {_quote(d.original)}; a degradation must change something."
            )
    if not any(d.kind in VISUAL_KINDS for d in answer.causal_record):
        kinds = sorted({d.kind for d in answer.causal_record})
        failures.append(
            f"{name} has no visual-only degradation (kinds {kinds!r}); degrade at least one of"
            f" {', '.join(VISUAL_KINDS)}."
        )
    return failures


def phase2_structural(
    distractors: DistractorSet, gold_answer: str, *, max_answer_chars: int = 20_000
) -> GateResult:
    """Phase II Structural Validity: four rated wrong answers with well-formed causal records.

    Rejects, naming every failure: not exactly four answers rated 4, 3, 2 and 1; an answer that is
    empty, longer than ``max_answer_chars``, the gold again or the same as another answer; an
    empty causal record or a degradation with an empty field or no change; an answer with no
    visual-only degradation (a "spoken" one may sit beside it but does not count).
    """
    failures: list[str] = []
    answers = distractors.answers
    ratings = [a.rating for a in answers]
    if len(answers) != 4 or sorted(ratings) != [1, 2, 3, 4]:
        failures.append(
            f"the set has {len(answers)} answers rated {ratings!r}; give exactly four,"
            " rated 4, 3, 2 and 1 once each."
        )
    for index, answer in enumerate(answers, 1):
        failures.extend(_answer_failures(index, answer, gold_answer, max_answer_chars))
    seen: dict[str, int] = {}
    for index, answer in enumerate(answers, 1):
        key = _normal(answer.answer)
        if not key:
            continue
        if key in seen:
            failures.append(
                f"answer {index} (rated {answer.rating}) is the same as answer {seen[key]};"
                " each answer must degrade the gold differently."
            )
        else:
            seen[key] = index
    visual = sum(1 for d in (d for a in answers for d in a.causal_record) if d.kind in VISUAL_KINDS)
    return _verdict(failures, f"4 answers rated 4–1, {visual} visual-only degradations.")
