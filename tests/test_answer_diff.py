"""Word-level differences between two answers: only what differs is marked, citations stay whole
(and are marked when they differ), whitespace never counts."""

from __future__ import annotations

import pytest

from playlisteval.ui.answer_diff import diff_answers, pieces

CASES = [
    # (answer A, answer B, words marked in A, words marked in B)
    ("The sauce turns red.", "The sauce turns red.", [], []),
    ("The sauce turns red.", "The sauce turns green.", ["red"], ["green"]),
    ("The sauce turns red.", "The   sauce\nturns red.", [], []),  # whitespace is no change
    ("It is red, then brown.", "It is red then brown.", [","], []),
    (
        "She adds basil (cooking-01 @ 00:12–00:47) and stirs.",
        "She adds basil (cooking-01 @ 00:50–01:10) and stirs.",
        ["(cooking-01 @ 00:12–00:47)"],
        ["(cooking-01 @ 00:50–01:10)"],
    ),
    (
        "First paragraph is long and the same.\n\nThe lid is blue (v1 @ 1:00-1:30).",
        "First paragraph is long and the same.\n\nThe lid is green (v1 @ 1:00-1:30).",
        ["blue"],
        ["green"],
    ),
    ("Two knives are used.", "Three knives are used.", ["Two"], ["Three"]),
    ("The pot boils.", "The pot boils over.", [], ["over"]),
]


@pytest.mark.parametrize(("a", "b", "in_a", "in_b"), CASES)
def test_only_the_words_that_differ_are_marked(
    a: str, b: str, in_a: list[str], in_b: list[str]
) -> None:
    first, second = diff_answers(a, b)
    assert "".join(p.text for p in first) == a  # nothing lost, nothing added
    assert "".join(p.text for p in second) == b
    assert [p.text for p in first if p.changed] == in_a
    assert [p.text for p in second if p.changed] == in_b


def test_citations_are_whole_pieces_with_their_span() -> None:
    text = "Basil goes in (cooking-01 @ 00:12–00:47; cooking-02 @ 1:02:03-1:02:30), then salt."
    found = [p for p in pieces(text) if p.citation is not None]
    assert [(p.citation.video_id, p.citation.start_s, p.citation.end_s) for p in found] == [
        ("cooking-01", 12.0, 47.0),
        ("cooking-02", 3723.0, 3750.0),
    ]
    assert [p.text for p in found] == ["cooking-01 @ 00:12–00:47", "cooking-02 @ 1:02:03-1:02:30"]
    assert "".join(p.text for p in pieces(text)) == text
    # Something that looks like a citation but is none stays text.
    assert all(p.citation is None for p in pieces("at (v1 @ 01:75–02:00) it stops"))
