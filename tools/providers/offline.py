"""The offline provider: a deterministic pydantic-ai model that answers every declared role.

It needs no key and no network. It reads the same prompt every model reads (the ``<context>`` JSON
from :mod:`tools.contracts.roles`) and, for video roles, decodes the attached clips and describes
their
frames with :mod:`tools.offline.vision`. It answers each role with the offline answerer that role's
``RoleSpec`` declares (the paper's are in :mod:`tools.offline.offline_answers`; a gate package's
role
brings its own), so the same call always gives byte-identical output. It is a stand-in for the
pipeline's plumbing, never a measure of model quality.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence

import anyio
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from store.errors import ConfigError
from tools.contracts.roles import Frozen, RoleContext, parse_context, role_spec
from tools.index import media
from tools.offline.offline_answers import (
    Fallibility,
    OfflineCall,
    cited_claims,
    content_words,
    visual_words,
)
from tools.offline.vision import VisualFact, decode_clip, describe_frames
from tools.providers.base import (
    CallWrapper,
    ModelCall,
    clip_info,
    latest_user_prompt,
    nearest_frames,
)

__all__ = [
    "DEFAULT_CLIP_FPS",
    "TOKENS_PER_FRAME",
    "Fallibility",
    "LatencyModel",
    "OfflineProvider",
    "answer",
    "cited_claims",
    "content_words",
    "latest_prompt",
    "shown",
    "visual_words",
]

TOKENS_PER_FRAME = 258  # what Gemini bills per video frame at default media resolution
DEFAULT_CLIP_FPS = 0.5
_DECODE_CACHE_SIZE = 32
# Described clips kept (their facts: a few hundred small records each): every segment clip of a
# curation run or a difficulty gate at campaign scale.
_DESCRIBED_CACHE_SIZE = 512
_ClipKey = tuple[str, float, float, tuple[float, ...] | None]  # content, rate, start, times
_AS_REAL_GENERATORS_ERR = Fallibility()


def answer(
    context: RoleContext,
    videos: Mapping[str, list[media.Frame]],
    fallibility: Fallibility,
    *,
    model_id: str,
    salt: str = "",
    described: Mapping[str, list[VisualFact]] | None = None,
) -> Frozen:
    """The offline answer to one call, by the answerer its role declares: ``videos`` maps
    segment id → frames timed in its video.

    ``described`` may hold those frames' facts (``tools.offline.vision.describe_frames``) by
    segment id,
    already computed: it spares describing the same clip again on every call, nothing else.
    Deterministic in all its arguments. Raises MediaError when a video role lacks a segment's
    frames, ConfigError when the role declares no offline answerer.
    """
    spec = role_spec(context.role)
    if spec.offline is None:
        raise ConfigError(
            f"the offline provider has no answer for role {context.role!r}: give its RoleSpec "
            "an offline= answerer (see tools/offline/offline_answers.py)"
        )
    call = OfflineCall(
        context,
        model_id,
        fallibility=fallibility,
        salt=salt,
        videos=videos,
        described=described,
    )
    output: Frozen = spec.offline(call)
    return output


def shown(clip: BinaryContent, decoded: Sequence[media.Frame]) -> list[media.Frame]:
    """The frames of a clip a model is shown, from all it ``decoded`` (timed from the clip's
    start): those nearest the instants the caller fixed (``frame_times``), else every one."""
    info = clip_info(clip)
    if info is None or info.shown_times is None:
        return list(decoded)
    return nearest_frames(decoded, [t - info.start_s for t in info.shown_times])


def latest_prompt(messages: Sequence[ModelMessage]) -> tuple[str, list[BinaryContent]]:
    """The text and the clips of the latest user prompt."""
    part = latest_user_prompt(messages)
    if part is None:
        raise ConfigError("the offline provider got no user prompt; send the rendered role prompt")
    if isinstance(part.content, str):
        return part.content, []
    texts = [item for item in part.content if isinstance(item, str)]
    clips = [
        item
        for item in part.content
        if isinstance(item, BinaryContent) and item.media_type.startswith("video/")
    ]
    return "\n".join(texts), clips


class OfflineProvider:
    """Deterministic stand-in models, one per model id, answering every declared role offline."""

    def __init__(
        self, fallibility: Fallibility = _AS_REAL_GENERATORS_ERR, *, salt: str = ""
    ) -> None:
        """``salt`` changes which calls the fallibility shares select, nothing else."""
        self.fallibility = fallibility
        self.salt = salt
        self._decoded: dict[tuple[str, float], list[media.Frame]] = {}
        self._described: dict[_ClipKey, tuple[list[VisualFact], int]] = {}
        self._describing: dict[_ClipKey, threading.Lock] = {}
        self._lock = threading.Lock()

    def model(self, model_id: str) -> FunctionModel:
        """A pydantic-ai model named ``offline:<model_id>`` that answers every role."""

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return self._respond(messages, info, model_id)

        return FunctionModel(respond, model_name=f"offline:{model_id}")

    def _frames(self, clip: BinaryContent) -> list[media.Frame]:
        meta = clip.vendor_metadata or {}
        fps = float(meta.get("fps", DEFAULT_CLIP_FPS))
        cache_key = (hashlib.sha256(clip.data).hexdigest(), fps)
        frames = self._decoded.get(cache_key)
        if frames is None:
            frames = decode_clip(clip.data, fps)
            if len(self._decoded) >= _DECODE_CACHE_SIZE:
                self._decoded.pop(next(iter(self._decoded)))
            self._decoded[cache_key] = frames
        # The clip's own time 0 is the segment's start in its video.
        start = float(meta.get("start_s", 0.0))
        return [media.Frame(t=round(start + f.t, 6), image=f.image) for f in shown(clip, frames)]

    def _seen(self, clip: BinaryContent) -> tuple[list[media.Frame] | None, list[VisualFact], int]:
        """``(frames, facts, frame count)`` of a clip, its facts described once per clip content,
        rate, start and fixed frame times: a clip seen before is neither decoded nor described
        again (frames is then None). A difficulty gate shows the same two segments to two judges
        in both orders for every pair of an item, so this is most of its work."""
        meta = clip.vendor_metadata or {}
        info = clip_info(clip)
        cache_key = (
            hashlib.sha256(clip.data).hexdigest(),
            float(meta.get("fps", DEFAULT_CLIP_FPS)),
            float(meta.get("start_s", 0.0)),
            info.shown_times if info is not None else None,
        )
        # Calls run in worker threads: the first to want a clip describes it, the others
        # showing the same clip at once wait for it instead of describing it too.
        with self._lock:
            gate = self._describing.setdefault(cache_key, threading.Lock())
        with gate:
            found = self._described.get(cache_key)
            if found is not None:
                return None, found[0], found[1]
            frames = self._frames(clip)
            facts = describe_frames(frames, 0.0)
            with self._lock:
                if len(self._described) >= _DESCRIBED_CACHE_SIZE:
                    evicted = next(iter(self._described))
                    self._described.pop(evicted)
                    self._describing.pop(evicted, None)
                self._described[cache_key] = (facts, len(frames))
            return frames, facts, len(frames)

    def _respond(
        self, messages: Sequence[ModelMessage], info: AgentInfo, model_id: str
    ) -> ModelResponse:
        text, clips = latest_prompt(messages)
        try:
            context = parse_context(text)
        except ValueError as exc:
            raise ConfigError(
                f"the offline provider cannot read the prompt's context: {exc}; render it with "
                "agents.prompts.render_prompt"
            ) from exc
        videos: dict[str, list[media.Frame]] = {}
        described: dict[str, list[VisualFact]] = {}
        counts: dict[str, int] = {}
        for index, clip in enumerate(clips):
            name = clip.identifier or f"clip-{index}"
            frames, described[name], counts[name] = self._seen(clip)
            # Every clip is described, so its frames are looked at only when just decoded.
            videos[name] = frames if frames is not None else []
            # An evaluation's clip is named "video@start-end@rate@height", its span (the segment
            # the judge's prompt lists) "video@start-end": found by either name.
            span = "@".join(name.split("@")[:2])
            if span != name and span not in videos:
                videos[span], described[span] = videos[name], described[name]
                counts[span] = counts[name]
        output = answer(
            context,
            videos,
            self.fallibility,
            model_id=model_id,
            salt=self.salt,
            described=described,
        )
        args = output.model_dump_json()
        n_frames = sum(counts.values())
        usage = RequestUsage(
            input_tokens=len(text) // 4 + TOKENS_PER_FRAME * n_frames,
            output_tokens=max(1, len(args) // 4),
        )
        if info.output_tools:
            wanted = type(output).__name__
            tool = next(
                (t for t in info.output_tools if t.name.endswith(wanted)), info.output_tools[0]
            )
            part: ToolCallPart | TextPart = ToolCallPart(tool_name=tool.name, args=args)
        else:
            part = TextPart(content=args)
        return ModelResponse(parts=[part], usage=usage, model_name=f"offline:{model_id}")


class LatencyModel(CallWrapper):
    """A model that holds every request ``latency_s`` seconds before answering: the offline
    provider standing in for a latency-bound live provider (daemon rehearsals, fleet tests,
    ``bench/workers.py``). The wait is an await, so it costs the event loop nothing."""

    def __init__(self, wrapped: Model, latency_s: float) -> None:
        super().__init__(wrapped)
        self.latency_s = latency_s

    async def answer(self, call: ModelCall) -> ModelResponse:
        """Wait, then answer as the wrapped model."""
        await anyio.sleep(self.latency_s)
        return await super().answer(call)
