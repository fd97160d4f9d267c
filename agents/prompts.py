"""Prompts for every role, from the template its ``RoleSpec`` names.

A prompt is the role's instructions (``prompts/<role>.md`` beside this module for the paper's
roles, the file a gate package's ``RoleSpec.prompt`` names for its own; filled from the context
where the context has values for it), the feedback section when there is feedback, the context as
readable text, and the same context as JSON between ``<context>`` tags. The JSON
(``tools.contracts.roles.embed_context``) makes the contract exact: every model, the offline
provider
included, reads the same facts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from agents.citations import format_timestamp
from store.errors import ConfigError
from tools.contracts.roles import (
    Feedback,
    MatchContext,
    PairJudgeContext,
    Phase1Context,
    RankingContext,
    RoleContext,
    SegmentEvidence,
    VideoRate,
    embed_context,
    neutralise_tags,
    role_spec,
)


@cache
def template(name: str) -> str:
    """The text of ``prompts/<name>.md``."""
    return (resources.files("agents") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


@cache
def _template_file(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def role_template(role: str) -> str:
    """The template of role ``role``: the file its ``RoleSpec.prompt`` names, else
    ``prompts/<role>.md`` (:func:`template`); ``ValueError`` for a role never declared,
    ``ConfigError`` when its template cannot be read."""
    spec = role_spec(role)
    try:
        return template(spec.name) if spec.prompt is None else _template_file(spec.prompt)
    except OSError as exc:
        raise ConfigError(
            f"role {role!r} has no readable prompt template ({exc}): give its RoleSpec "
            "prompt=Path(...) of the template beside its module"
        ) from exc


def template_hash(role: str) -> str:
    """The content hash (SHA-256, 16 hex digits) of role ``role``'s template: what each call
    records it was rendered from, and what a run's definition holds of the role."""
    return hashlib.sha256(role_template(role).encode("utf-8")).hexdigest()[:16]


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


def _fps(rate: float) -> str:
    # Two decimals for the rates we send (0.5, 0.21); low rates keep two significant digits.
    return f"{rate:.2f}" if rate >= 0.1 else f"{rate:.2g}"


def video_rate_text(rates: tuple[VideoRate, ...]) -> str:
    """The rate the prompt says the segments' video is sent at, as ``" at 0.21 fps"`` (one per
    segment when they differ; a note when the request's frame cap thinned them), or nothing
    when the context does not say: a prompt claims no rate its request does not carry."""
    if not rates:
        return ""
    shown = [_fps(r.fps) for r in rates]
    if len(set(shown)) == 1:
        text = f" at {shown[0]} fps"
    else:
        text = " at " + " and ".join(
            f"{fps} fps (segment {r.segment_id})" for fps, r in zip(shown, rates, strict=True)
        )
    thinned = [r for r in rates if r.max_frames is not None]
    if thinned:
        asked = sorted({_fps(r.asked_fps) for r in thinned})
        text += (
            f" (thinned from {' and '.join(asked)} fps to fit {thinned[0].max_frames} frames "
            "per request)"
        )
    return text


def judge_evidence(context: PairJudgeContext) -> dict[str, str]:
    """What the pair judge's prompt says it receives and checks claims against: exactly its
    ``receives`` (a judge shown transcripts is not told of frames, nor one shown frames of
    a transcript), the video's rate when it is known, and nothing of how the answers were made."""
    rate = video_rate_text(context.video_rates)
    spans = "the spans listed below"
    match context.receives:
        case "frames+transcript":
            return {
                "evidence": f"You receive the video of each of {spans}{rate}, with its transcript.",
                "source": "what the footage shows and says",
                "check": "the frames and the transcript of the span it cites",
                "tie": "the evidence cannot separate them",
            }
        case "frames":
            return {
                "evidence": f"You receive the video of each of {spans}{rate}, without sound or "
                "transcript.",
                "source": "what the footage shows",
                "check": "the frames of the span it cites",
                "tie": "the frames cannot separate them",
            }
        case "transcript":
            return {
                "evidence": f"You receive the transcript of each of {spans}; no video and no "
                "sound.",
                "source": "what the transcripts say",
                "check": "the transcript of the span it cites",
                "tie": "the transcripts cannot separate them",
            }
        case "audio":
            return {
                "evidence": f"You receive the sound of each of {spans}; no picture and no "
                "transcript.",
                "source": "what can be heard",
                "check": "the sound of the span it cites",
                "tie": "the sound cannot separate them",
            }
        case _:
            return {
                "evidence": "You receive no video, sound or transcript.",
                "source": "the question",
                "check": "what you know",
                "tie": "you cannot separate them",
            }


_UNUSABLE = {
    "malformed": "it was not in the required form (the output schema)",
    "truncated": "it was cut off at the output limit before it was complete",
    "refused": "it was a refusal",
}


def retry_note(kinds: Sequence[str]) -> str:
    """What ends the prompt of a call made again because its earlier answers (``kinds``, in
    order: ``malformed``, ``truncated``, ``refused``) could not be used. It names each, so every
    retry is a request of its own (the recorder answers a repeated request from its record)."""
    told = "; ".join(f"answer {i}: {_UNUSABLE.get(kind, kind)}" for i, kind in enumerate(kinds, 1))
    return template("retry").format(count=len(kinds), told=told).strip()


def _answers_text(context: RoleContext) -> list[str]:
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


def template_values(context: RoleContext) -> Mapping[str, object] | None:
    """What the role's template is filled with (``str.format``), or None when its context has
    nothing for it (the template is then used as it is): the Phase I limits, what a pair judge
    receives, and the rate any other context with ``video_rates`` is sent its video at."""
    if isinstance(context, Phase1Context):
        return {
            "min_paragraphs": context.min_paragraphs,
            "max_paragraphs": context.max_paragraphs,
            "min_cited_chunks": context.min_cited_chunks,
            "max_cited_chunks": context.max_cited_chunks,
        }
    if isinstance(context, PairJudgeContext):
        return judge_evidence(context)
    rates = getattr(context, "video_rates", None)
    if rates is not None:
        return {"video_rate": video_rate_text(rates)}
    return None


def render_prompt(context: RoleContext) -> str:
    """The whole user prompt for one call."""
    text = role_template(context.role)
    values = template_values(context)
    if values is not None:
        text = text.format(**values)
    parts = [text.strip()]
    feedback: tuple[Feedback, ...] = getattr(context, "feedback", ())
    parts.append(feedback_section(feedback).strip())
    segments = getattr(context, "segments", ())
    if segments:
        # Spans with no transcript (a judge shown frames or sound only) are listed as spans.
        heading = "Transcripts" if any(s.chunks for s in segments) else "Spans shown"
        parts.append(f"## {heading}\n" + "\n\n".join(_segment_text(s) for s in segments))
    question = getattr(context, "question", None)
    if question:
        parts.append(f"## Question\n{question}")
    parts.extend(_answers_text(context))
    # Transcripts, titles, questions, answers and feedback are untrusted text: none of it may
    # open or close the context block (the template, parts[0], is ours).
    parts[1:] = [neutralise_tags(part) for part in parts[1:]]
    parts.append(embed_context(context))
    return "\n\n".join(p for p in parts if p)
