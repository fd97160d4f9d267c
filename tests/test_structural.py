"""The rule-based Structural Validity gates of Phase I (QA) and Phase II (distractors)."""

from __future__ import annotations

import pytest

from agents.structural import GateResult, phase1_structural, phase2_structural
from tools.contracts.roles import (
    QA,
    ChunkText,
    Degradation,
    DistractorSet,
    GradedAnswer,
    SegmentEvidence,
)


def _segment(segment_id: str, video_id: str, start_s: float, n_chunks: int) -> SegmentEvidence:
    return SegmentEvidence(
        segment_id=segment_id,
        video_id=video_id,
        start_s=start_s,
        end_s=start_s + 30 * n_chunks,
        chunks=tuple(
            ChunkText(start_s=start_s + 30 * i, end_s=start_s + 30 * (i + 1), text=f"t{i}")
            for i in range(n_chunks)
        ),
    )


# alpha 01:00–04:00 and beta 05:00–08:00, six 30-second chunks each.
SEGMENTS = (_segment("s1", "alpha", 60, 6), _segment("s2", "beta", 300, 6))

GOOD_GOLD = (
    "The presenter first lays the red cable across the board (alpha @ 01:00–02:00).\n\n"
    "Later she repeats the step with the blue one (beta @ 05:00–06:00).\n\n"
    "Comparing both, the second layout is mirrored (alpha @ 02:00–02:30; beta @ 06:00–06:30)."
)


def _qa(gold: str = GOOD_GOLD, question: str = "Why is the second layout mirrored?") -> QA:
    return QA(question=question, gold_answer=gold)


def test_phase1_passes_a_well_formed_qa_with_a_summary() -> None:
    """Three cited paragraphs covering 3 chunks of each segment pass; the reason summarises."""
    assert phase1_structural(_qa(), SEGMENTS) == GateResult(
        True, "3 paragraphs, 4 citations, chunks covered s1=3, s2=3."
    )


@pytest.mark.parametrize(
    ("gold", "expected"),
    [
        pytest.param(
            GOOD_GOLD.replace("(alpha @ 01:00–02:00)", "(alpha @ 1:00 - 2:00)"),
            True,
            id="hyphen-and-spaces",
        ),
        pytest.param(
            GOOD_GOLD.replace("(beta @ 05:00–06:00)", "(beta @ 0:05:00 to 0:06:00)"),
            True,
            id="h-mm-ss-and-to",
        ),
        pytest.param(
            GOOD_GOLD.replace("(alpha @ 01:00–02:00)", "(alpha @ 00:59–02:00)"),
            True,
            id="one-second-before-the-segment-is-tolerated",
        ),
        pytest.param(GOOD_GOLD + "\n\nA fourth paragraph (beta @ 07:30–08:00).", True, id="4-par"),
        pytest.param(GOOD_GOLD.replace("\n\n", "\n  \n"), True, id="blank-line-with-spaces"),
    ],
)
def test_phase1_accepts_tolerated_variants(gold: str, expected: bool) -> None:
    """Other dashes, "to", H:MM:SS, 1 s of slack and whitespace-only blank lines are accepted."""
    result = phase1_structural(_qa(gold), SEGMENTS)
    assert result.passed is expected, result.reason


def test_phase1_accepts_minutes_past_59() -> None:
    """A segment past the first hour is cited as MM:SS with minutes > 59."""
    late = (_segment("s1", "alpha", 4500, 4), _segment("s2", "beta", 300, 4))
    gold = (
        "One (alpha @ 75:00–76:00).\n\nTwo (beta @ 05:00–06:00).\n\n"
        "Three (alpha @ 1:16:00–1:16:30; beta @ 06:00–06:30)."
    )
    result = phase1_structural(_qa(gold), late)
    assert result.passed, result.reason


@pytest.mark.parametrize(
    ("question", "gold", "fragments"),
    [
        pytest.param("  ", GOOD_GOLD, ["the question is empty"], id="empty-question"),
        pytest.param("Why?", " \n\n ", ["the gold answer is empty"], id="empty-gold"),
        pytest.param(
            "Why?",
            GOOD_GOLD.replace("\n\n", " "),
            ["has 1 paragraph;", "at least 3"],
            id="one-paragraph",
        ),
        pytest.param(
            "Why?",
            "One.\n\nTwo.\n\nThree.",
            ["cites no span", "'s1' (video 'alpha', 01:00–04:00)", "cover 0 of"],
            id="no-citation",
        ),
        pytest.param(
            "Why?",
            GOOD_GOLD + "\n\nAlso this (alpha @ 03:00–02:30) and (at 01:75-02:00).",
            ["malformed citations '(alpha @ 03:00–02:30)', '(at 01:75-02:00)'"],
            id="malformed",
        ),
        pytest.param(
            "Why?",
            GOOD_GOLD + "\n\nAn unsupported claim.",
            ["paragraph 4 ('An unsupported claim.') cites no span"],
            id="uncited-paragraph",
        ),
        pytest.param(
            "Why?",
            GOOD_GOLD + "\n\nElsewhere (gamma @ 01:00–02:00).",
            ["'(gamma @ 01:00–02:00)' name a video that neither segment shows", "'alpha', 'beta'"],
            id="wrong-video",
        ),
        pytest.param(
            "Why?",
            GOOD_GOLD + "\n\nLater on (alpha @ 09:00–10:00).",
            ["'(alpha @ 09:00–10:00)' lies outside segment 's1' 01:00–04:00 of video 'alpha'"],
            id="outside-segment",
        ),
        pytest.param(
            "Why?",
            GOOD_GOLD + "\n\nJust before (beta @ 04:58–05:30).",
            ["'(beta @ 04:58–05:30)' lies outside segment 's2' 05:00–08:00"],
            id="two-seconds-early",
        ),
        pytest.param(
            "Why?",
            "One (alpha @ 01:00–01:30).\n\nTwo (beta @ 05:00–06:00).\n\n"
            "Three (beta @ 06:00–06:30).",
            ["cover 1 of the 30-second chunks of segment 's1'", "between 2 and 15"],
            id="too-few-chunks",
        ),
    ],
)
def test_phase1_rejects_with_a_reason_that_quotes_the_failure(
    question: str, gold: str, fragments: list[str]
) -> None:
    """Each broken rule is named in the reason, with the offending value quoted."""
    result = phase1_structural(_qa(gold, question), SEGMENTS)
    assert not result.passed
    for fragment in fragments:
        assert fragment in result.reason


def test_phase1_reports_every_failure_most_important_first() -> None:
    """One reason lists all failures in rule order, numbered."""
    gold = "Two paragraphs (gamma @ 01:00–02:00).\n\nAnd no citation (x @ 1:00)."
    reason = phase1_structural(_qa(gold, ""), SEGMENTS).reason
    order = [
        "(1) the question is empty",
        "(2) the gold answer has 2 paragraphs",
        "(3) malformed citations '(x @ 1:00)'",
        "(4) paragraph 2",
        "(5) citations '(gamma @ 01:00–02:00)'",
        "(6) the citations cover 0 of the 30-second chunks of segment 's1'",
        "(7) the citations cover 0 of the 30-second chunks of segment 's2'",
    ]
    positions = [reason.index(item) for item in order]
    assert positions == sorted(positions)


@pytest.mark.parametrize(
    ("kwargs", "passed", "fragment"),
    [
        ({"min_chunks": 4}, False, "cover 3 of the 30-second chunks of segment 's1'"),
        ({"max_chunks": 2}, False, "between 2 and 2"),
        ({"min_paragraphs": 4}, False, "at least 4"),
        ({"min_chunks": 3, "max_chunks": 3}, True, "s1=3, s2=3"),
    ],
)
def test_phase1_limits_are_parameters(kwargs: dict[str, int], passed: bool, fragment: str) -> None:
    """Chunk and paragraph bounds come from the caller's settings."""
    result = phase1_structural(_qa(), SEGMENTS, **kwargs)
    assert result.passed is passed
    assert fragment in result.reason


def test_phase1_rejects_a_100kb_answer_by_its_size_without_echoing_it() -> None:
    """A huge answer is rejected with its size; the reason stays short."""
    gold = GOOD_GOLD + "\n\n" + "x" * 100_000
    result = phase1_structural(_qa(gold), SEGMENTS)
    assert not result.passed
    assert f"{len(gold):,} characters long; keep it under 20,000" in result.reason
    assert len(result.reason) < 1_000


def test_phase1_quotes_are_cut_short_and_capped() -> None:
    """Many malformed citations are quoted five at a time, so the reason does not grow unbounded."""
    gold = GOOD_GOLD + "\n\n" + " ".join(f"(v{i} @ 9:99-1:00)" for i in range(50))
    reason = phase1_structural(_qa(gold), SEGMENTS).reason
    assert "and 45 more" in reason
    assert len(reason) < 1_000


def test_phase1_same_video_in_both_segments_uses_either_span() -> None:
    """When both segments come from one video, a citation inside either of them is in range."""
    same = (_segment("s1", "alpha", 60, 6), _segment("s2", "alpha", 300, 6))
    gold = GOOD_GOLD.replace("beta", "alpha")
    assert phase1_structural(_qa(gold), same).passed
    outside = phase1_structural(_qa(gold + "\n\nGap (alpha @ 04:30–04:50)."), same)
    assert "segment 's1' 01:00–04:00 or segment 's2' 05:00–08:00" in outside.reason


# -- Phase II ----------------------------------------------------------------------------------

GOLD = "She lays the red cable on the left of the board, then points up."


def _degradation(
    kind: str = "colour", original: str = "red", degraded: str = "blue"
) -> Degradation:
    return Degradation.model_validate(
        {
            "attribute": "cable colour",
            "element": "the cable",
            "original": original,
            "degraded": degraded,
            "kind": kind,
        }
    )


def _answer(rating: int, answer: str | None = None, *record: Degradation) -> GradedAnswer:
    return GradedAnswer(
        rating=rating,
        answer=answer if answer is not None else GOLD.replace("red", f"colour-{rating}"),
        causal_record=record or (_degradation(),),
    )


def _set(*answers: GradedAnswer) -> DistractorSet:
    return DistractorSet(answers=answers or tuple(_answer(r) for r in (4, 3, 2, 1)))


def test_phase2_passes_four_rated_answers_with_visual_degradations() -> None:
    """Four distinct answers rated 4–1, each with a visual-only degradation, pass."""
    result = phase2_structural(_set(), GOLD)
    assert result == GateResult(True, "4 answers rated 4–1, 4 visual-only degradations.")


def test_phase2_allows_a_spoken_degradation_beside_a_visual_one() -> None:
    """A "spoken" degradation may sit beside a visual one; it is not counted as visual."""
    spoken = _degradation("spoken", "points up", "points down")
    answers = _set(_answer(4, None, _degradation("gesture"), spoken), *_set().answers[1:])
    assert phase2_structural(answers, GOLD).passed


@pytest.mark.parametrize(
    ("answers", "fragments"),
    [
        pytest.param(
            _set(*(_answer(r) for r in (4, 3, 2))),
            ["the set has 3 answers rated [4, 3, 2]"],
            id="three-answers",
        ),
        pytest.param(
            _set(*(_answer(r) for r in (4, 3, 2, 1, 1))),
            ["the set has 5 answers"],
            id="five-answers",
        ),
        pytest.param(
            _set(*(_answer(r) for r in (4, 3, 3, 1))),
            ["rated [4, 3, 3, 1]", "rated 4, 3, 2 and 1 once each"],
            id="repeated-rating",
        ),
        pytest.param(
            _set(_answer(4, "  "), *(_answer(r) for r in (3, 2, 1))),
            ["answer 1 (rated 4) is empty"],
            id="empty-answer",
        ),
        pytest.param(
            _set(_answer(4, "y" * 100_000), *(_answer(r) for r in (3, 2, 1))),
            ["answer 1 (rated 4) is 100,000 characters long; keep it under 20,000"],
            id="100kb-answer",
        ),
        pytest.param(
            _set(_answer(4, GOLD.upper() + "  "), *(_answer(r) for r in (3, 2, 1))),
            ["answer 1 (rated 4) repeats the gold answer"],
            id="same-as-gold",
        ),
        pytest.param(
            _set(_answer(4, "Same text."), _answer(3, "same  text."), _answer(2), _answer(1)),
            ["answer 2 (rated 3) is the same as answer 1"],
            id="duplicate-answers",
        ),
        pytest.param(
            _set(
                GradedAnswer(rating=4, answer="A wrong one.", causal_record=()),
                *(_answer(r) for r in (3, 2, 1)),
            ),
            ["answer 1 (rated 4) has an empty causal record"],
            id="empty-record",
        ),
        pytest.param(
            _set(_answer(4, None, _degradation(original=" ")), *(_answer(r) for r in (3, 2, 1))),
            ["answer 1 (rated 4), degradation 1: original empty"],
            id="empty-field",
        ),
        pytest.param(
            _set(
                _answer(4, None, _degradation(original="Red", degraded="red ")),
                *(_answer(r) for r in (3, 2, 1)),
            ),
            ["degradation 1: original and degraded are both 'Red'"],
            id="no-change",
        ),
        pytest.param(
            _set(
                _answer(1, None, _degradation("spoken"), _degradation("other")),
                *(_answer(r) for r in (4, 3, 2)),
            ),
            ["answer 1 (rated 1) has no visual-only degradation (kinds ['other', 'spoken'])"],
            id="spoken-only",
        ),
    ],
)
def test_phase2_rejects_with_a_reason_naming_the_answer(
    answers: DistractorSet, fragments: list[str]
) -> None:
    """Each broken rule names the answer (by position and rating) and what to fix."""
    result = phase2_structural(answers, GOLD)
    assert not result.passed
    for fragment in fragments:
        assert fragment in result.reason
    assert len(result.reason) < 2_000


def test_phase2_reports_every_failure_at_once() -> None:
    """A set broken in several ways gets one numbered reason listing all of them."""
    answers = _set(
        _answer(4, ""),
        _answer(4, GOLD),
        _answer(2, None, _degradation("spoken")),
    )
    reason = phase2_structural(answers, GOLD).reason
    assert reason.startswith("(1) the set has 3 answers rated [4, 4, 2]")
    for fragment in ("answer 1 (rated 4) is empty", "answer 2 (rated 4) repeats the gold", "(4)"):
        assert fragment in reason


def test_phase2_max_answer_chars_is_a_parameter() -> None:
    """The length bound comes from the caller's settings."""
    result = phase2_structural(_set(), GOLD, max_answer_chars=10)
    assert not result.passed
    assert "keep it under 10" in result.reason
