"""Prompts for every role, from the template files beside this module.

A prompt is the role's instructions (``prompts/<role>.md``, filled from the context), the feedback
section when there is feedback, the context as readable text, and the same context as JSON between
``<context>`` tags. The JSON (``tools.roles.embed_context``) makes the contract exact: every model,
the offline provider included, reads the same facts.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from agents.citations import format_timestamp
from tools.roles import (
    AnyContext,
    Feedback,
    MatchContext,
    PairJudgeContext,
    Phase1Context,
    Phase2Context,
    RankingContext,
    SegmentEvidence,
    embed_context,
)


@cache
def template(name: str) -> str:
    """The text of ``prompts/<name>.md``."""
    return (resources.files("agents") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


def _segment_text(segment: SegmentEvidence) -> str:
    lines = [
        f"### Segment {segment.segment_id} — video {segment.video_id}"
        f" {format_timestamp(segment.start_s)}–{format_timestamp(segment.end_s)}"
        + (f" ({segment.title})" if segment.title else "")
    ]
    for chunk in segment.chunks:
        span = f"{format_timestamp(chunk.start_s)}–{format_timestamp(chunk.end_s)}"
        lines.append(f"[{span}] {chunk.text}" if chunk.text else f"[{span}] (no speech)")
    return "\n".join(lines)


def feedback_section(feedback: tuple[Feedback, ...]) -> str:
    """The generator's feedback section: each rejection's gate, reason and rejected output."""
    if not feedback:
        return ""
    items = "\n".join(
        f"{i}. Phase {f.phase}, gate {f.gate}: {f.reason}\n   Rejected output:\n   "
        + f.rejected_output.replace("\n", "\n   ")
        for i, f in enumerate(feedback, 1)
    )
    return template("feedback").format(items=items)


def _answers_text(context: AnyContext) -> list[str]:
    """The answers a role weighs, as readable sections (the JSON block repeats them exactly)."""
    if isinstance(context, RankingContext):
        return [
            "## Answers\n\n"
            + "\n\n".join(f"### Answer {a.label}\n{a.text}" for a in context.answers)
        ]
    if isinstance(context, PairJudgeContext):
        return [f"## Answer A\n{context.answer_a}", f"## Answer B\n{context.answer_b}"]
    out: list[str] = []
    gold = getattr(context, "gold_answer", None)
    if gold:
        out.append(f"## Gold answer\n{gold}")
    if isinstance(context, MatchContext):
        out.append(f"## Candidate answer\n{context.candidate}")
    return out


def render_prompt(context: AnyContext) -> str:
    """The whole user prompt for one call."""
    role = context.role
    text = template(role)
    if isinstance(context, Phase1Context):
        text = text.format(
            min_paragraphs=context.min_paragraphs,
            max_paragraphs=context.max_paragraphs,
            min_cited_chunks=context.min_cited_chunks,
            max_cited_chunks=context.max_cited_chunks,
        )
    parts = [text.strip()]
    if isinstance(context, Phase1Context | Phase2Context):
        parts.append(feedback_section(context.feedback).strip())
    segments = getattr(context, "segments", ())
    if segments:
        parts.append("## Transcripts\n" + "\n\n".join(_segment_text(s) for s in segments))
    question = getattr(context, "question", None)
    if question:
        parts.append(f"## Question\n{question}")
    parts.extend(_answers_text(context))
    parts.append(embed_context(context))
    return "\n\n".join(p for p in parts if p)
