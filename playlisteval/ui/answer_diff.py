"""Two answers side by side, word by word: what differs between them, and where they cite.

Preference pairs often differ in a word or two over several paragraphs; an annotator should see
those words at once. :func:`diff_answers` splits each answer into pieces — words, punctuation,
whitespace, and citations ``(video-id @ MM:SS–MM:SS)`` kept whole (parsed by
:mod:`agents.citations`) — and marks the pieces of each that the other lacks (``difflib`` over
the non-space pieces). Whitespace never counts as a change. Pure functions over strings.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from agents.citations import Citation, parse_citations

# A word (letters, digits, apostrophes and hyphens inside it), a run of whitespace, or one other
# character (punctuation is a piece of its own, so "red." and "red," share the word).
_PIECE = re.compile(r"\w+(?:['’-]\w+)*|\s+|[^\w\s]", re.UNICODE)


@dataclass(frozen=True)
class Piece:
    """One piece of an answer: its text, whether the other answer lacks it, and the citation it
    is (None for plain text)."""

    text: str
    changed: bool = False
    citation: Citation | None = None

    @property
    def space(self) -> bool:
        """Whitespace only."""
        return self.text.isspace()


def pieces(text: str) -> list[Piece]:
    """``text`` as pieces, in order; citations whole, everything else by :data:`_PIECE`."""
    out: list[Piece] = []
    cursor = 0
    for citation in sorted(parse_citations(text), key=lambda c: c.offset):
        if citation.offset < cursor:
            continue  # overlapping parse: the first citation already covers it
        out.extend(Piece(m.group(0)) for m in _PIECE.finditer(text[cursor : citation.offset]))
        out.append(Piece(citation.raw, citation=citation))
        cursor = citation.offset + len(citation.raw)
    out.extend(Piece(m.group(0)) for m in _PIECE.finditer(text[cursor:]))
    return out


def _marked(items: list[Piece], changed: set[int]) -> list[Piece]:
    words = [i for i, piece in enumerate(items) if not piece.space]
    flagged = {words[j] for j in changed}
    return [
        Piece(piece.text, changed=i in flagged, citation=piece.citation)
        for i, piece in enumerate(items)
    ]


def diff_answers(a: str, b: str) -> tuple[list[Piece], list[Piece]]:
    """The pieces of ``a`` and of ``b``, each marked ``changed`` where the other answer has
    something else there (replaced, inserted or deleted words, citations or punctuation)."""
    first, second = pieces(a), pieces(b)
    words_a = [p.text for p in first if not p.space]
    words_b = [p.text for p in second if not p.space]
    changed_a: set[int] = set()
    changed_b: set[int] = set()
    matcher = difflib.SequenceMatcher(a=words_a, b=words_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changed_a.update(range(i1, i2))
            changed_b.update(range(j1, j2))
    return _marked(first, changed_a), _marked(second, changed_b)
