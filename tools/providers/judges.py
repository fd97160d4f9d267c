"""Offline pairwise judges of known behaviour, for testing the judge-evaluation harness.

Each is a pydantic-ai :class:`FunctionModel` that reads the ``pair_judge`` prompt every model
reads (the :class:`tools.contracts.roles.PairJudgeContext` between ``<context>`` tags, plus any
attached
clips) and answers a :class:`tools.contracts.roles.PairVerdict`. Their behaviour is known in
advance, so the
metrics an evaluation computes for them can be asserted:

* ``offline-first`` always picks the first answer (accuracy 0.5, position consistency 0, position
  bias +0.5).
* ``offline-transcript`` reads only the transcript text: it prefers the answer with more content
  words found in the transcripts, and says tie when they have as many. The demo's visual facts
  (colours, shapes, positions) are never spoken, so it is near chance there.
* ``offline-frames`` decodes the attached clips with :mod:`tools.offline.vision` and prefers the
  answer
  whose claims the frames contradict less often; a claim whose cited span shows no frame is not
  checked. It says tie when the frames do not separate the answers. It cannot hear: clips marked
  ``vendor_metadata["modality"] == "audio"`` are not looked at.

All three are deterministic: the same prompt and clips always give byte-identical output.

Any other judge id the offline provider answers for (an offline evaluation of ``gpt-5.4``) is a
*stand-in*: the harness playing that model, priced as it, never the model. Its judgments are
recorded under :func:`stand_in_name` (``offline-stand-in(gpt-5.4)``), so no output names the
harness as the real model. :data:`PAPER_JUDGES` are the evaluated judges the paper names.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from pydantic_ai.messages import BinaryContent, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from store.errors import ConfigError
from tools.contracts.roles import PairJudgeContext, PairVerdict, parse_context
from tools.offline.vision import VisualFact, decode_clip, describe_frames
from tools.providers.offline import (
    DEFAULT_CLIP_FPS,
    TOKENS_PER_FRAME,
    cited_claims,
    content_words,
    latest_prompt,
    shown,
    visual_words,
)

__all__ = [
    "OFFLINE_JUDGES",
    "PAPER_JUDGES",
    "PAPER_JUDGE_COUNT",
    "is_stand_in",
    "judge_model",
    "judge_models",
    "judge_verdict",
    "stand_in_name",
    "stood_in_for",
]

OFFLINE_JUDGES = ("offline-first", "offline-transcript", "offline-frames")

#: The judges the paper evaluates in its Table 1 that its text names (``seed/PlaylistEval-paper
#: .txt``: the caption names Kimi-K2.6 and Qwen-3.8-Max, the findings Gemma-4-26B-A4B,
#: Gemini-3.5-Flash-Lite and Gemini-3.7-Flash), as ids in this project's spelling. The paper
#: evaluates :data:`PAPER_JUDGE_COUNT` judges from eight families; the body of its Table 1, which
#: would name the others, is not in that text, so they are not listed here rather than guessed.
#: No price or endpoint is known for them: ``eval`` asks for both before it judges with one.
PAPER_JUDGES = (
    "gemini-3.7-flash",
    "gemini-3.5-flash-lite",
    "qwen-3.8-max",
    "kimi-k2.6",
    "gemma-4-26b-a4b",
)
PAPER_JUDGE_COUNT = 17

_STAND_IN_OPEN, _STAND_IN_CLOSE = "offline-stand-in(", ")"


def stand_in_name(model_id: str) -> str:
    """The name the offline provider's answers for judge ``model_id`` are recorded under: it
    says that they are the harness's, not the model's (``offline-stand-in(gpt-5.4)``)."""
    return f"{_STAND_IN_OPEN}{model_id}{_STAND_IN_CLOSE}"


def stood_in_for(name: str) -> str | None:
    """The model id a :func:`stand_in_name` name stood in for; None for any other name."""
    if name.startswith(_STAND_IN_OPEN) and name.endswith(_STAND_IN_CLOSE):
        return name[len(_STAND_IN_OPEN) : -len(_STAND_IN_CLOSE)] or None
    return None


def is_stand_in(name: str) -> bool:
    """Whether a recorded judge name is the offline provider standing in for a model."""
    return stood_in_for(name) is not None


Seen = Mapping[str, Sequence[VisualFact]]
"""Video id → the facts of every attached frame of that video, timed in the video."""


def _first(context: PairJudgeContext) -> PairVerdict:
    return PairVerdict(choice="A", reason="always the first answer")


def _transcript(context: PairJudgeContext) -> PairVerdict:
    spoken: set[str] = set()
    for segment in context.segments:
        for chunk in segment.chunks:
            spoken |= content_words(chunk.text)
    found_a = len(content_words(context.answer_a) & spoken)
    found_b = len(content_words(context.answer_b) & spoken)
    summary = f"A: {found_a} content words found in the transcripts; B: {found_b}"
    if found_a == found_b:
        return PairVerdict(choice="tie", reason=f"{summary}: the transcripts do not separate them")
    better: Literal["A", "B"] = "A" if found_a > found_b else "B"
    return PairVerdict(choice=better, reason=f"{summary}: {better} is closer to what is said")


def _contradicted(text: str, seen: Seen) -> tuple[int, int]:
    """(claim details the frames contradict, claims checked) over the claims of ``text``."""
    wrong = checked = 0
    for sentence, (video_id, start, end) in cited_claims(text):
        facts = [f for f in seen.get(video_id, ()) if start <= f.t_s < end]
        if not facts:
            continue  # no frame of the cited span was shown: nothing to check it against
        checked += 1
        values = {
            "colour": {f.colour for f in facts},
            "shape": {f.shape for f in facts if f.shape},
            "position": {f.position for f in facts if f.position},
        }
        wrong += sum(1 for a, v, _, _ in visual_words(sentence) if v not in values.get(a, set()))
    return wrong, checked


def _frames(context: PairJudgeContext, seen: Seen) -> PairVerdict:
    wrong_a, checked_a = _contradicted(context.answer_a, seen)
    wrong_b, checked_b = _contradicted(context.answer_b, seen)
    summary = (
        f"A: {wrong_a} detail(s) contradicted in {checked_a} checked claim(s); "
        f"B: {wrong_b} in {checked_b}"
    )
    if wrong_a == wrong_b:
        return PairVerdict(choice="tie", reason=f"{summary}: the frames do not separate them")
    better: Literal["A", "B"] = "A" if wrong_a < wrong_b else "B"
    return PairVerdict(choice=better, reason=f"{summary}: {better} is more faithful")


def judge_verdict(model_id: str, context: PairJudgeContext, seen: Seen) -> PairVerdict:
    """The verdict of offline judge ``model_id`` on ``context`` given the frames ``seen``.

    Raises ConfigError for a model id not in :data:`OFFLINE_JUDGES`.
    """
    if model_id == "offline-first":
        return _first(context)
    if model_id == "offline-transcript":
        return _transcript(context)
    if model_id == "offline-frames":
        return _frames(context, seen)
    raise ConfigError(f"no offline judge {model_id!r}; expected one of {OFFLINE_JUDGES!r}")


class _FrameCache:
    """Decoded and described clips by content, start and rate (a run shows the same clips often);
    of a clip whose frames the caller fixed, the frames nearest those instants only."""

    # A clip's facts are a few small records: keep enough for every clip of a long evaluation's
    # views (64 frames a view, lone frames at 100 h), so a pair's second order and the other
    # judges never decode a clip again.
    def __init__(self, size: int = 16_384) -> None:
        self.size = size
        self._facts: dict[tuple[str, float, float], list[VisualFact]] = {}
        self._describing: dict[tuple[str, float, float], threading.Lock] = {}
        self._lock = threading.Lock()

    def facts(self, clip: BinaryContent, fps: float, start_s: float) -> list[VisualFact]:
        """The facts of a clip, described once: judgments run in worker threads, and the two
        orders of a pair (and the other judges) showing the clip at once wait for the first."""
        key = (hashlib.sha256(clip.data).hexdigest(), fps, start_s)
        with self._lock:
            gate = self._describing.setdefault(key, threading.Lock())
        with gate:
            found = self._facts.get(key)
            if found is None:
                found = describe_frames(shown(clip, decode_clip(clip.data, fps)), start_s)
                with self._lock:
                    if len(self._facts) >= self.size:
                        evicted = next(iter(self._facts))
                        self._facts.pop(evicted)
                        self._describing.pop(evicted, None)
                    self._facts[key] = found
            return found


def judge_model(model_id: str) -> FunctionModel:
    """The offline judge ``model_id`` (one of :data:`OFFLINE_JUDGES`) as a pydantic-ai model.

    It answers ``pair_judge`` prompts only (ConfigError for any other role). A clip is read from
    its ``vendor_metadata``: ``video_id``, ``start_s`` (its time 0 in the video) and ``fps``, and
    of a clip that fixes its frames (``frame_times``) only those frames are looked at.
    """
    if model_id not in OFFLINE_JUDGES:
        raise ConfigError(f"no offline judge {model_id!r}; expected one of {OFFLINE_JUDGES!r}")
    cache = _FrameCache()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text, clips = latest_prompt(messages)
        context = parse_context(text)
        if not isinstance(context, PairJudgeContext):
            raise ConfigError(f"offline judge {model_id!r} answers pair_judge prompts only")
        seen: dict[str, list[VisualFact]] = {}
        n_frames = 0
        if model_id == "offline-frames":
            for clip in clips:
                meta = clip.vendor_metadata or {}
                if meta.get("modality") == "audio":
                    continue  # an audio condition's clip: this judge cannot hear
                video_id = str(meta.get("video_id") or clip.identifier or "")
                fps = float(meta.get("fps", DEFAULT_CLIP_FPS))
                facts = cache.facts(clip, fps, float(meta.get("start_s", 0.0)))
                seen.setdefault(video_id, []).extend(facts)
                n_frames += len({f.t_s for f in facts})
        verdict = judge_verdict(model_id, context, seen)
        args = verdict.model_dump_json()
        usage = RequestUsage(
            input_tokens=len(text) // 4 + TOKENS_PER_FRAME * n_frames,
            output_tokens=max(1, len(args) // 4),
        )
        part: ToolCallPart | TextPart
        if info.output_tools:
            part = ToolCallPart(tool_name=info.output_tools[0].name, args=args)
        else:
            part = TextPart(content=args)
        return ModelResponse(parts=[part], usage=usage, model_name=f"offline:{model_id}")

    return FunctionModel(respond, model_name=f"offline:{model_id}")


def judge_models(fallback: Callable[[str], Model]) -> Callable[[str], Model]:
    """Model id → the offline judge for ids in :data:`OFFLINE_JUDGES`, else ``fallback(id)``."""
    made: dict[str, Model] = {}

    def model_for(model_id: str) -> Model:
        if model_id not in OFFLINE_JUDGES:
            return fallback(model_id)
        if model_id not in made:
            made[model_id] = judge_model(model_id)
        return made[model_id]

    return model_for
