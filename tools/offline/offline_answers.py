"""How the offline provider answers each role: deterministic answers from what a call is given.

Each role's :class:`tools.contracts.roles.RoleSpec` names its offline answerer, a function of one
:class:`OfflineCall` (the context, the frames of its clips, the model asked, how the generator
errs); :mod:`tools.providers.offline` finds it there. The answers are honest about what they are
given: visually grounded gold answers from what the frames show, claims checked against the frames
of the cited spans, text ranked by text cues only. The generator also errs the way real generators
do (:class:`Fallibility`), so the gates have real work: a narration-leaning first answer, a stray
citation, textual tells in distractors and seeds it cannot see. As a difficulty judge it is weak
on purpose: it misses some wrong details and then falls back on a habit of its model id, so close
pairs sometimes beat it. Every such decision is a function of a hash of the call's content, so
the same call always gives byte-identical output. It is a stand-in for the pipeline's plumbing,
never a measure of model quality.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from store.errors import ConfigError, MediaError
from tools.contracts.role_types import (
    QA,
    Degradation,
    DegradationKind,
    DistractorSet,
    Feedback,
    FreeAnswer,
    GradedAnswer,
    MatchContext,
    MatchVerdict,
    PairJudgeContext,
    PairVerdict,
    ParametricContext,
    Phase1Context,
    Phase2Context,
    Ranking,
    RankingContext,
    RoleContext,
    SegmentEvidence,
    SufficiencyContext,
    SufficiencyVerdict,
    TranscriptTestContext,
    VerificationMeta,
    cite,
)
from tools.index import media
from tools.offline.vision import COLOURS, POSITIONS, SHAPE_KINDS, VisualFact, describe_frames

MATCH_THRESHOLD = 0.5  # share of the gold's content words a candidate must recover to match
HEDGES = ("possibly", "it seems", "perhaps", "might", "probably", "apparently")
_SEGMENT_ORDINALS = ("first", "second")


@dataclass(frozen=True)
class Fallibility:
    """How the offline generator errs, as real generators do.

    Each share is the fraction of calls (or seeds) a hash of the call's content selects; a failure
    stays until feedback from the gate that catches it reaches the generator.
    """

    narration_leaning: float = 0.5
    """Seeds whose Phase I answer leans on the narration until the transcript test says so."""
    citation_slip: float = 0.2
    """Phase I attempts citing one span past a segment's end until feedback names citations."""
    textual_tell: float = 0.5
    """Phase II sets whose worse answers are shorter and hedged until textual feedback comes."""
    blind_spot: float = 0.15
    """Seeds (pairs of segment ids) on which every colour is misread, whatever the feedback."""

    def __post_init__(self) -> None:
        for name in ("narration_leaning", "citation_slip", "textual_tell", "blind_spot"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"Fallibility.{name} must lie in [0, 1], got {value!r}")


# -- text analysis shared by every role ----------------------------------------------------------

_CITATION_RE = re.compile(r"\(\s*([^()@\s]+)\s*@\s*(\d+):(\d{2})\s*[–-]\s*(\d+):(\d{2})\s*\)")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")
_PARAGRAPH_RE = re.compile(r"\n\s*\n")
_WORD_RE = re.compile(r"[a-z]+")
_HEDGE_RE = re.compile(r"\b(?:" + "|".join(re.escape(h) for h in HEDGES) + r")\b", re.I)


def _alternation(words: Iterable[str]) -> str:
    # Longest first, and never inside a hyphenated word: "center" must not match "top-center".
    ordered = sorted(words, key=len, reverse=True)
    return r"(?<![\w-])(?:" + "|".join(re.escape(w) for w in ordered) + r")(?![\w-])"


_VISUAL_RE = re.compile(
    f"(?P<colour>{_alternation(COLOURS)})|(?P<shape>{_alternation(SHAPE_KINDS)})"
    f"|(?P<position>{_alternation(POSITIONS)})",
    re.I,
)
_STOP_WORDS = frozenset(
    """a about above across after again against all also an and any are around as at be because
    been before being below between both but by can could did do does each early end first for
    from had has have how in into is it its later more most much near next not of on once one only
    or other over own same second segment segments so some such than that the their them then there
    these they this those through to too towards under until up very was we were what when where
    which while who why will with within would you your""".split()  # noqa: SIM905
)

_Span = tuple[str, float, float]  # (video id, start_s, end_s) of a citation


def _citations(text: str) -> list[_Span]:
    return [
        (m.group(1), int(m.group(2)) * 60 + int(m.group(3)), int(m.group(4)) * 60 + int(m.group(5)))
        for m in _CITATION_RE.finditer(text)
    ]


def _without_citations(text: str) -> str:
    # Same length, so offsets of visual words found in the result are offsets in ``text``.
    return _CITATION_RE.sub(lambda m: " " * len(m.group(0)), text)


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry content (3+ letters, no stop words), citations aside."""
    words = _WORD_RE.findall(_without_citations(text).lower())
    return {w for w in words if len(w) >= 3 and w not in _STOP_WORDS}


def visual_words(text: str) -> list[tuple[str, str, int, int]]:
    """(attribute, value, start, end) of each colour, shape and position word, citations aside."""
    found: list[tuple[str, str, int, int]] = []
    for m in _VISUAL_RE.finditer(_without_citations(text)):
        attribute = m.lastgroup or ""
        value = m.group(0).lower()
        found.append((attribute, value, m.start(), m.end()))
    return found


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in _PARAGRAPH_RE.split(text.strip()) if p.strip()]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END_RE.split(text.strip()) if s.strip()]


def _draw(*parts: str) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _hash_order(items: Sequence[str], *parts: str) -> list[str]:
    return sorted(items, key=lambda item: (_draw(*parts, item), item))


def _feedback_from(feedback: Sequence[Feedback], *needles: str) -> bool:
    """Whether any earlier rejection's gate or reason mentions one of ``needles``."""
    return any(
        needle in f"{item.gate} {item.reason}".lower() for item in feedback for needle in needles
    )


def _seed_key(segments: Sequence[SegmentEvidence]) -> str:
    return "|".join(sorted(s.segment_id for s in segments))


# -- what the frames show ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scene:
    """What one frame shows: a background and its shapes as (colour, shape, position)."""

    background: str
    shapes: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class _Seen:
    """The values seen anywhere in a span: what a claim about that span may name."""

    colour: frozenset[str]
    shape: frozenset[str]
    position: frozenset[str]

    def allows(self, attribute: str, value: str) -> bool:
        return value in getattr(self, attribute, frozenset())


class Footage:
    """The facts of each segment's frames, looked up by cited span."""

    def __init__(
        self,
        segments: Sequence[SegmentEvidence],
        videos: Mapping[str, list[media.Frame]],
        described: Mapping[str, list[VisualFact]] | None = None,
    ) -> None:
        self.segments = tuple(segments)
        self.facts: dict[str, list[VisualFact]] = {}
        for segment in segments:
            known = (described or {}).get(segment.segment_id)
            if known is not None:  # the same frames described before: the same facts
                self.facts[segment.segment_id] = known
                continue
            frames = videos.get(segment.segment_id)
            if frames is None:
                raise MediaError(
                    f"no clip for segment {segment.segment_id!r}; attach its video as BinaryContent"
                    f" with identifier={segment.segment_id!r}"
                )
            self.facts[segment.segment_id] = describe_frames(frames, 0.0)

    def segment_of(self, span: _Span) -> SegmentEvidence | None:
        video_id, start, end = span
        for segment in self.segments:
            # Citations are whole seconds: allow their rounding at the segment's edges.
            inside = segment.start_s - 1 <= start < end <= segment.end_s + 1
            if segment.video_id == video_id and inside:
                return segment
        return None

    def facts_in(self, segment: SegmentEvidence, start: float, end: float) -> list[VisualFact]:
        return [f for f in self.facts[segment.segment_id] if start <= f.t_s < end]

    def seen(self, span: _Span) -> _Seen | None:
        """What the span's frames show; None when the span lies outside every segment."""
        segment = self.segment_of(span)
        if segment is None:
            return None
        facts = self.facts_in(segment, span[1], span[2])
        return _Seen(
            colour=frozenset(f.colour for f in facts),
            shape=frozenset(f.shape for f in facts if f.shape),
            position=frozenset(f.position for f in facts if f.position),
        )

    def scene(self, segment: SegmentEvidence, start: float, end: float) -> _Scene | None:
        """The scene shown longest in ``[start, end)`` (the earliest on a tie)."""
        by_time: dict[float, list[VisualFact]] = {}
        for fact in self.facts_in(segment, start, end):
            by_time.setdefault(fact.t_s, []).append(fact)
        scenes: list[_Scene] = []
        for _, facts in sorted(by_time.items()):
            background = next((f.colour for f in facts if f.kind == "background"), None)
            if background is None:
                continue
            shapes = tuple(
                sorted((f.colour, f.shape or "", f.position or "") for f in facts if f.shape)
            )
            scenes.append(_Scene(background, shapes))
        if not scenes:
            return None
        counts = Counter(scenes)
        return max(scenes, key=lambda s: (counts[s], -scenes.index(s)))


# -- claims and their checks ---------------------------------------------------------------------


def cited_claims(text: str) -> list[tuple[str, _Span]]:
    """Each sentence that cites a span, with the span it cites (its last citation)."""
    claims: list[tuple[str, _Span]] = []
    for paragraph in _paragraphs(text):
        for sentence in _sentences(paragraph):
            spans = _citations(sentence)
            if spans:
                claims.append((sentence, spans[-1]))
    return claims


def _contradictions(sentence: str, span: _Span, footage: Footage) -> list[str]:
    """The visual words of a claim that its span's frames do not show (all, if off the footage)."""
    seen = footage.seen(span)
    words = visual_words(sentence)
    if seen is None:
        return [f"cites {cite(*span)}, outside both segments"]
    return [f"{a} {v!r}" for a, v, _, _ in words if not seen.allows(a, v)]


# -- Phase I -------------------------------------------------------------------------------------

_WHEN = ("Early in", "Next in", "Later in", "Towards the close of")


def _chosen_chunks(
    segment: SegmentEvidence, context: Phase1Context, usable: list[int]
) -> list[int]:
    """Evenly spaced chunk indices, as many as the gate asks for (at most 4: enough to compare)."""
    want = max(context.min_cited_chunks, min(4, context.max_cited_chunks))
    k = min(len(usable), want)
    if k <= 1:
        return usable[:k]
    return sorted({usable[round(i * (len(usable) - 1) / (k - 1))] for i in range(k)})


def _misread(colour: str, seen: _Seen, key: str) -> str:
    """A blind spot: a colour the span does not show, so the misreading is checkable."""
    options = [c for c in COLOURS if c not in seen.colour] or [c for c in COLOURS if c != colour]
    return _hash_order(options, "blind", key, colour)[0]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _shapes_phrase(shapes: Sequence[tuple[str, str, str]]) -> str:
    parts = [
        f"{_article(colour)} {colour} {shape} sits in the {position}"
        for colour, shape, position in shapes
    ]
    if len(parts) <= 1:
        return parts[0] if parts else "no shape stands out"
    return ", ".join(parts[:-1]) + " and " + parts[-1].replace(" sits in ", " in ")


_Claim = tuple[str, str, list[str]]  # (sentence body, citation, the facts it states)


@dataclass
class _SegmentDraft:
    """What the Phase I generator writes of one segment: its claims, the words it would ask
    about (when it leans on the narration), and the scene it opens on with the words said there."""

    claims: list[_Claim] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    opener: _Scene | None = None
    anchor: list[str] = field(default_factory=list)


def _segment_draft(
    segment: SegmentEvidence,
    ordinal: str,
    context: Phase1Context,
    footage: Footage,
    *,
    leaning: bool,
    blind: bool,
    seed: str,
) -> _SegmentDraft:
    draft = _SegmentDraft()
    chunks = segment.chunks
    scenes = [footage.scene(segment, c.start_s, c.end_s) for c in chunks]
    texts = [_sentences(c.text)[:1] for c in chunks]
    if leaning and any(texts):
        usable = [i for i, t in enumerate(texts) if t]
    else:
        usable = [i for i, s in enumerate(scenes) if s is not None]
    for n, index in enumerate(_chosen_chunks(segment, context, usable)):
        chunk = chunks[index]
        citation = cite(segment.video_id, chunk.start_s, chunk.end_s)
        when = _WHEN[min(n, len(_WHEN) - 1)]
        scene = scenes[index]
        if leaning and texts[index]:
            said = texts[index][0].rstrip(".!? ")
            said = said[:1].lower() + said[1:]
            body = f"{when} the {ordinal} segment, the narration explains that {said}"
            rare = sorted(content_words(said), key=lambda w: (-len(w), w))
            draft.words.extend(rare[:1])
            draft.claims.append((body, citation, []))
            continue
        if scene is None:
            continue
        span = (segment.video_id, chunk.start_s, chunk.end_s)
        seen = footage.seen(span)
        if blind and seen is not None:
            scene = _Scene(
                _misread(scene.background, seen, seed),
                tuple((_misread(c, seen, seed), s, p) for c, s, p in scene.shapes),
            )
        if draft.opener is None:
            draft.opener, draft.anchor = scene, _anchor_words(chunk.text)
        body = (
            f"{when} the {ordinal} segment, against {_article(scene.background)} "
            f"{scene.background} background, "
            f"{_shapes_phrase(scene.shapes)}"
        )
        facts = [f"{scene.background} background {citation}"] + [
            f"{c} {s} in the {p} {citation}" for c, s, p in scene.shapes
        ]
        draft.claims.append((body, citation, facts))
    return draft


def _gold_answer(per_segment: Sequence[list[_Claim]], context: Phase1Context) -> str:
    """The claims as paragraphs (a segment each, then a comparison), split to the fewest the
    generator is asked for and cut to the most."""
    paragraphs = [[f"{body} {ref}." for body, ref, _ in claims] for claims in per_segment]
    paragraphs = [p for p in paragraphs if p]
    comparison: list[str] = []
    for ordinal, claims in zip(_SEGMENT_ORDINALS, per_segment, strict=True):
        if claims:
            body, ref, _ = claims[0]
            lead = body.split(", ", 1)[-1]
            comparison.append(f"Set side by side, in the {ordinal} segment {lead} {ref}.")
    if comparison:
        paragraphs.append(comparison)
    while len(paragraphs) < context.min_paragraphs and max(map(len, paragraphs)) > 1:
        longest = max(range(len(paragraphs)), key=lambda i: len(paragraphs[i]))
        half = (len(paragraphs[longest]) + 1) // 2
        paragraphs[longest : longest + 1] = [
            paragraphs[longest][:half],
            paragraphs[longest][half:],
        ]
    return "\n\n".join(" ".join(p) for p in paragraphs[: context.max_paragraphs])


def _phase1(context: Phase1Context, footage: Footage, fall: Fallibility, key: str) -> QA:
    seed = _seed_key(context.segments)
    leaning = _draw(key, seed, "narration") < fall.narration_leaning and not _feedback_from(
        context.feedback, "transcript"
    )
    slip = _draw(key, context.model_dump_json(), "slip") < fall.citation_slip and not (
        _feedback_from(context.feedback, "structural", "citation")
    )
    blind = _draw(key, seed, "blind") < fall.blind_spot
    drafts = [
        _segment_draft(segment, ordinal, context, footage, leaning=leaning, blind=blind, seed=seed)
        for ordinal, segment in zip(_SEGMENT_ORDINALS, context.segments, strict=True)
    ]
    per_segment = [draft.claims for draft in drafts]
    if slip:
        segment = context.segments[1]
        claims = per_segment[1]
        if claims:
            body, _, facts = claims[-1]
            stray = cite(segment.video_id, segment.end_s + 30, segment.end_s + 60)
            claims[-1] = (body, stray, facts)
    gold = _gold_answer(per_segment, context)

    if leaning:
        first = ", ".join(drafts[0].words) or "its topic"
        second = ", ".join(drafts[1].words) or "its topic"
        question = (
            f"What does the narration explain about {first} in the first segment, and how does "
            f"that compare with what it says about {second} in the second segment?"
        )
    else:
        opened = [(d, o) for d, o in zip(drafts, _SEGMENT_ORDINALS, strict=True) if d.opener]
        question = _visual_question(
            [(d.opener, o) for d, o in opened if d.opener is not None],
            [(o, d.anchor) for d, o in opened],
        )
    seen_facts = tuple(fact for claims in per_segment for _, _, fs in claims for fact in fs)
    return QA(
        question=question,
        gold_answer=gold,
        verification=VerificationMeta(
            visual_facts=seen_facts,
            knowledge_cell="conceptual × analyze",
            why_both_segments=(
                "the answer compares how the scenes of the first segment are arranged with those "
                "of the second, so neither segment alone supports it"
            ),
        ),
    )


def _anchor_words(text: str) -> list[str]:
    """The two rarest-looking words said in a chunk (the longest content words): how a question
    points at the moment it asks about, as a person would ("where they talk about …")."""
    words = sorted(content_words(text), key=lambda w: (-len(w), w))
    return words[:2]


def _visual_question(
    openers: Sequence[tuple[_Scene, str]], anchors: Sequence[tuple[str, list[str]]] = ()
) -> str:
    said = [
        f"the narration speaks of {' and '.join(words)} in the {ordinal} segment"
        for ordinal, words in anchors
        if words
    ]
    where = f" ({'; '.join(said)})" if said else ""
    refs = [
        f"the shape in the {scene.shapes[0][2]} against the {scene.background} background early "
        f"in the {ordinal} segment"
        for scene, ordinal in openers
        if scene.shapes
    ]
    if not refs:
        return "How do the scenes of the first segment compare with those of the second segment?"
    return (
        f"Consider {' and '.join(refs)}{where}: how does the arrangement of shapes and colours "
        "develop "
        "across the two segments, and what does the comparison show about how each segment "
        "stages its scenes?"
    )


# -- Phase II ------------------------------------------------------------------------------------

_KIND_OF: dict[str, DegradationKind] = {
    "colour": "colour",
    "position": "spatial_layout",
    "shape": "props",
}
_VALUES: dict[str, tuple[str, ...]] = {
    "colour": COLOURS,
    "shape": SHAPE_KINDS,
    "position": POSITIONS,
}


@dataclass(frozen=True)
class _Change:
    start: int
    end: int
    attribute: str
    original: str
    degraded: str
    element: str


def _elements(text: str) -> list[list[tuple[str, str, int, int]]]:
    """Visual words grouped by element: a colour starts one ("red circle … top-left")."""
    groups: list[list[tuple[str, str, int, int]]] = []
    for word in visual_words(text):
        if word[0] == "colour" or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    return groups


def _change_plan(gold: str, footage: Footage, key: str) -> list[_Change]:
    """Changes in the order answers take them: one attribute per element first, then more.

    With fewer than four elements a worse answer degrades the same elements more severely:
    a second (then third) attribute of each is changed, so the count of wrong attributes still
    grows 1, 2, 3, 4 down the ratings. Each degraded value is one the cited span does NOT show,
    so a judge with the video can see every change.
    """
    rounds: list[list[_Change]] = []
    offset = 0
    for paragraph in _PARAGRAPH_RE.split(gold):
        for sentence in _SENTENCE_END_RE.split(paragraph):
            base = gold.index(sentence, offset) if sentence else offset
            offset = base + len(sentence)
            spans = _citations(sentence)
            seen = footage.seen(spans[-1]) if spans else None
            if seen is None:
                continue
            for group in _elements(sentence):
                element = " ".join(v for _, v, _, _ in group)
                words = _hash_order([f"{i}" for i in range(len(group))], key, "attr", element)
                changes: list[_Change] = []
                for i in words:
                    attribute, value, start, end = group[int(i)]
                    options = [v for v in _VALUES[attribute] if not seen.allows(attribute, v)]
                    if not options:
                        continue
                    degraded = _hash_order(options, key, "value", element, attribute)[0]
                    changes.append(
                        _Change(base + start, base + end, attribute, value, degraded, element)
                    )
                for depth, change in enumerate(changes):
                    while len(rounds) <= depth:
                        rounds.append([])
                    rounds[depth].append(change)
    plan: list[_Change] = []
    for depth, changes in enumerate(rounds):
        plan.extend(
            sorted(changes, key=lambda c: _draw(key, "order", str(depth), str(c.start), c.element))
        )
    return plan


def _apply(gold: str, changes: Sequence[_Change]) -> str:
    text = gold
    for change in sorted(changes, key=lambda c: c.start, reverse=True):
        text = text[: change.start] + change.degraded + text[change.end :]
    return text


def _with_tells(text: str, count: int) -> str:
    """Hedge ``count`` sentences and drop their openers: the textual tell of a weak answer."""
    hedges = ("Possibly", "It seems that", "Perhaps")
    out: list[str] = []
    done = 0
    for paragraph in _paragraphs(text):
        sentences: list[str] = []
        for sentence in _sentences(paragraph):
            if done < count:
                head, sep, rest = sentence.partition(", ")
                if sep and not visual_words(head) and not _citations(head):
                    sentence = rest  # shorter: the time opener goes
                hedge = hedges[done % len(hedges)]
                sentence = f"{hedge}, {sentence[:1].lower()}{sentence[1:]}"
                done += 1
            sentences.append(sentence)
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def _phase2(context: Phase2Context, footage: Footage, fall: Fallibility, key: str) -> DistractorSet:
    plan = _change_plan(context.gold_answer, footage, key)
    tell = _draw(
        key, _seed_key(context.segments), context.question, "tell"
    ) < fall.textual_tell and not _feedback_from(context.feedback, "textual")
    answers: list[GradedAnswer] = []
    for rating in (4, 3, 2, 1):
        changes = plan[: 5 - rating]
        text = _apply(context.gold_answer, changes)
        if tell:
            text = _with_tells(text, 5 - rating)
        record = tuple(
            Degradation(
                attribute=f"{c.attribute} of the {c.element}",
                element=c.element,
                original=c.original,
                degraded=c.degraded,
                kind=_KIND_OF[c.attribute],
            )
            for c in changes
        )
        answers.append(GradedAnswer(rating=rating, answer=text, causal_record=record))
    return DistractorSet(answers=tuple(answers))


# -- the other roles -----------------------------------------------------------------------------


def _transcript_answer(context: TranscriptTestContext) -> FreeAnswer:
    wanted = content_words(context.question)
    scored: list[tuple[int, int, int, str]] = []
    for w, window in enumerate(context.windows):
        for s, sentence in enumerate(_sentences(window.text)):
            overlap = len(content_words(sentence) & wanted)
            if overlap:
                scored.append((-overlap, w, s, sentence))
    best = sorted(sorted(scored)[:20], key=lambda item: (item[1], item[2]))
    if not best:
        return FreeAnswer(answer="The transcripts do not speak to this question.")
    return FreeAnswer(answer=" ".join(sentence for *_, sentence in best))


def _parametric_answer(context: ParametricContext) -> FreeAnswer:
    words = sorted(content_words(context.question), key=context.question.lower().find)
    topic = ", ".join(words[:6]) or "the subject"
    return FreeAnswer(
        answer=(
            f"Without the footage, only a general answer is possible: questions about {topic} "
            "usually turn on details that differ from one recording to the next, so the two "
            "parts most likely differ in the way such details are presented."
        )
    )


def _match(context: MatchContext) -> MatchVerdict:
    gold = content_words(context.gold_answer)
    candidate = content_words(context.candidate)
    share = len(gold & candidate) / len(gold) if gold else 0.0
    gold_visual = {v for _, v, _, _ in visual_words(context.gold_answer)}
    candidate_visual = {v for _, v, _, _ in visual_words(context.candidate)}
    all_visual = bool(gold_visual) and gold_visual <= candidate_visual
    matches = share >= MATCH_THRESHOLD or all_visual
    reason = (
        f"the candidate recovers {len(gold & candidate)} of the gold's {len(gold)} content words "
        f"({share:.0%}; a match needs {MATCH_THRESHOLD:.0%}) and "
        f"{len(gold_visual & candidate_visual)} of its {len(gold_visual)} visual words"
    )
    return MatchVerdict(matches_gold=matches, reason=reason)


def _sufficiency(context: SufficiencyContext, footage: Footage) -> SufficiencyVerdict:
    claims = cited_claims(context.gold_answer)
    if not claims:
        return SufficiencyVerdict(
            answerable=False, reason="the gold answer cites no span, so nothing can be checked"
        )
    unsupported: list[str] = []
    problems: list[str] = []
    for sentence, span in claims:
        wrong = _contradictions(sentence, span, footage)
        if wrong:
            unsupported.append(sentence)
            problems.append(f"{cite(*span)}: {', '.join(wrong)} not seen there")
    reason = (
        f"{len(unsupported)} of {len(claims)} claims unsupported: " + "; ".join(problems)
        if unsupported
        else f"all {len(claims)} claims are supported by the frames of their cited spans"
    )
    return SufficiencyVerdict(answerable=True, unsupported_claims=tuple(unsupported), reason=reason)


def _textual_rank(context: RankingContext, key: str) -> Ranking:
    def cues(text: str) -> tuple[int, int, float]:
        # Fewer hedges, then more words; what is left is chance, as for any text-only reader.
        return (len(_HEDGE_RE.findall(text)), -len(text.split()), _draw(key, "text", text))

    ranked = sorted(context.answers, key=lambda a: (cues(a.text), a.label))
    reason = "; ".join(
        f"{a.label}: {cues(a.text)[0]} hedges, {-cues(a.text)[1]} words" for a in ranked
    )
    return Ranking(order=tuple(a.label for a in ranked), reason=reason)


def _visual_rank(context: RankingContext, footage: Footage) -> Ranking:
    counts = {
        a.label: sum(len(_contradictions(s, span, footage)) for s, span in cited_claims(a.text))
        for a in context.answers
    }
    ranked = sorted(context.answers, key=lambda a: (counts[a.label], a.label))
    reason = "; ".join(f"{a.label}: {counts[a.label]} contradicted by the frames" for a in ranked)
    return Ranking(order=tuple(a.label for a in ranked), reason=reason)


# -- pair selection ------------------------------------------------------------------------------

_JUDGE_HABITS = ("first", "second", "longer")


@dataclass(frozen=True)
class _JudgeTraits:
    """How one weak judge model perceives a pair: the share of the frames' contradictions it
    notices, and what it falls back on when it notices no difference."""

    acuity: float
    habit: str


def _judge_traits(model_id: str) -> _JudgeTraits:
    # From the model id alone: two judges differ in acuity (and most often in habit).
    acuity = 0.45 + 0.35 * _draw("pair_judge", "acuity", model_id)
    habit = _JUDGE_HABITS[int(_draw("pair_judge", "habit", model_id) * len(_JUDGE_HABITS))]
    return _JudgeTraits(acuity=acuity, habit=habit)


def _noticed(text: str, footage: Footage, traits: _JudgeTraits, key: str) -> list[str]:
    """The contradictions of ``text`` with the frames that the judge notices.

    Whether a wrong detail is noticed depends on the detail (its span and word), not on the
    answer around it: an answer with every wrong detail of another and more is never seen as
    better than it, but two answers that differ by a few details may look the same.
    """
    noticed: list[str] = []
    for sentence, span in cited_claims(text):
        for wrong in _contradictions(sentence, span, footage):
            if _draw(key, "notice", cite(*span), wrong) < traits.acuity:
                noticed.append(f"{wrong} at {cite(*span)}")
    return noticed


def _pair_judge(
    context: PairJudgeContext, footage: Footage, key: str, model_id: str
) -> PairVerdict:
    """A weak judge: it prefers the answer with fewer contradictions it notices; when it notices
    as many in both, it falls back on its habit (the first answer, the second, the longer)."""
    traits = _judge_traits(model_id)
    # No footage (a judge given no picture): nothing is checked, its habit decides.
    seen_a = _noticed(context.answer_a, footage, traits, key) if footage.segments else []
    seen_b = _noticed(context.answer_b, footage, traits, key) if footage.segments else []
    summary = f"A: {len(seen_a)} claim detail(s) contradicted by the frames" + (
        f" ({'; '.join(seen_a[:3])})" if seen_a else ""
    )
    summary += f"; B: {len(seen_b)}" + (f" ({'; '.join(seen_b[:3])})" if seen_b else "")
    if len(seen_a) != len(seen_b):
        better: Literal["A", "B"] = "A" if len(seen_a) < len(seen_b) else "B"
        return PairVerdict(choice=better, reason=f"{summary}: {better} is more faithful")
    if traits.habit == "first":
        return PairVerdict(choice="A", reason=f"{summary}: no difference seen; A reads better")
    if traits.habit == "second":
        return PairVerdict(choice="B", reason=f"{summary}: no difference seen; B reads better")
    size_a = (len(context.answer_a.split()), len(context.answer_a))
    size_b = (len(context.answer_b.split()), len(context.answer_b))
    if size_a == size_b:
        return PairVerdict(choice="tie", reason=f"{summary}: the footage does not separate them")
    longer: Literal["A", "B"] = "A" if size_a > size_b else "B"
    return PairVerdict(
        choice=longer, reason=f"{summary}: no difference seen; {longer} is more detailed"
    )


# -- one call, and each role's answerer ----------------------------------------------------------

ContextT = TypeVar("ContextT", bound=RoleContext)


@dataclass(frozen=True)
class OfflineCall(Generic[ContextT]):
    """One call the offline provider answers: the context, the model asked, how the generator
    errs, and the frames of the call's clips by segment id (``described`` may hold their facts,
    already computed: it spares describing a clip again, nothing else). ``salt`` changes which
    calls the fallibility shares select, nothing else."""

    context: ContextT
    model_id: str
    fallibility: Fallibility = Fallibility()
    salt: str = ""
    videos: Mapping[str, list[media.Frame]] = field(default_factory=dict)
    described: Mapping[str, list[VisualFact]] | None = None

    @property
    def key(self) -> str:
        """What every decision of this call is drawn from, besides the call's own content."""
        return f"{self.salt}\x1e{self.model_id}"

    def draw(self, *parts: str) -> float:
        """A number in [0, 1) fixed by this call's key and ``parts``: a deterministic choice."""
        return _draw(self.key, *parts)

    def footage(self, segments: Sequence[SegmentEvidence]) -> Footage:
        """What the frames of ``segments`` show; MediaError when a segment's clip is missing."""
        return Footage(segments, self.videos, self.described)


def phase1_answer(call: OfflineCall[Phase1Context]) -> QA:
    """The Phase I generator: a visually grounded QA (errs as :class:`Fallibility` says)."""
    context = call.context
    return _phase1(context, call.footage(context.segments), call.fallibility, call.key)


def phase2_answer(call: OfflineCall[Phase2Context]) -> DistractorSet:
    """The Phase II generator: four answers, each degrading more of the gold's visual details."""
    context = call.context
    return _phase2(context, call.footage(context.segments), call.fallibility, call.key)


def transcript_answer(call: OfflineCall[TranscriptTestContext]) -> FreeAnswer:
    """The transcript test's answerer: the transcript sentences that speak to the question."""
    return _transcript_answer(call.context)


def parametric_answer(call: OfflineCall[ParametricContext]) -> FreeAnswer:
    """The parametric test's answerer: a general answer, since it has no footage."""
    return _parametric_answer(call.context)


def match_answer(call: OfflineCall[MatchContext]) -> MatchVerdict:
    """A matcher or verifier: whether the candidate recovers the gold's words."""
    return _match(call.context)


def sufficiency_answer(call: OfflineCall[SufficiencyContext]) -> SufficiencyVerdict:
    """Sufficiency: every cited claim checked against the frames of its span."""
    context = call.context
    return _sufficiency(context, call.footage(context.segments))


def textual_rank_answer(call: OfflineCall[RankingContext]) -> Ranking:
    """A text-only ranker: fewer hedges and more words first."""
    return _textual_rank(call.context, call.key)


def visual_rank_answer(call: OfflineCall[RankingContext]) -> Ranking:
    """The ranker with the video: fewer claims the frames contradict first."""
    context = call.context
    return _visual_rank(context, call.footage(context.segments))


def pair_judge_answer(call: OfflineCall[PairJudgeContext]) -> PairVerdict:
    """A weak pair judge: fewer contradictions it notices, else its model's habit."""
    context = call.context
    # A judge given no picture (transcript, sound or nothing) checks no claim against
    # frames: what it notices is nothing, and its habit decides.
    shown = context.segments if context.receives in ("frames", "frames+transcript") else ()
    return _pair_judge(context, call.footage(shown), call.key, call.model_id)
