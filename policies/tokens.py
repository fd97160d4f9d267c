"""A call's worst-case token count and cost, counted *before* the call is made.

The budget reserves this worst case (counted input + ``max_output_tokens`` at list price, never
cached rates) and settles the actual cost afterwards. Counts follow each provider family's
published rules; where a rule has a choice, the dearer one is taken, because an estimate
that is too low is the only kind that can let a run pass its cap.

Sources (checked when written; the provider pages are the authority):

* Gemini — "Video understanding", "Media resolution" and "Token counting" in the Gemini API
  docs: video is sampled at the requested fps; Gemini 2.x bills 258 tokens per frame at
  default media resolution (66 at low); Gemini 3 bills 70 per frame at its default (low and
  medium) and 280 at high, so a Gemini 3 worst case counts 280 and its expected count 70.
  Audio 32 tokens per second. Images: 258 tokens when both sides are <= 384 px, else
  258 per 768x768 tile; Gemini 3's ``media_resolution_high`` (its default for images) costs up
  to 1120 tokens per image, so an image counts ``max(tiles, 1120)``.
* OpenAI — "Images and vision", "Model sizing behavior" and "Calculating costs"
  (https://developers.openai.com/api/docs/guides/images-vision#calculating-costs), rule per
  model (:data:`OPENAI_IMAGE_RULES`). *Patch* models cover the image with 32x32-px patches
  after fitting it within a 2048-px side; past the model's patch budget the image is scaled
  down to fit, and the patch count times the model's multiplier is billed: ``gpt-5.4`` (its
  ``auto`` detail sized as ``high``: 2,500 patches, multiplier 1), ``gpt-5.5`` (``auto`` sized
  as ``original``: 10,000 patches within a 6000-px side), and at 1,536 patches ``gpt-5.4-mini``
  and ``gpt-5-mini`` (x1.62), ``gpt-5.4-nano`` and ``gpt-5-nano`` (x2.46), ``gpt-5.2`` and the
  codex minis (x1), ``o4-mini`` (x1.72), ``gpt-4.1-mini`` (x1.62), ``gpt-4.1-nano`` (x2.46);
  the guide gives no rounding for the multiplied count, so it is rounded up. *Tile* models
  (``detail: high``): fit within 2048x2048, scale the short side down to 768, then base + per
  512-px tile tokens — ``gpt-5`` 70 + 140, ``gpt-4o``/``gpt-4.1``/``gpt-4.5`` 85 + 170,
  ``gpt-4o-mini`` 2833 + 5667, ``o1``/``o3`` 75 + 150. An id the guide does not list counts as
  the dearest of these rules but ``gpt-4o-mini``'s (33 times gpt-4o's counts, that one model's
  way of pricing images: ~37k tokens a 720p frame, which no other model comes near). We send
  ``detail: auto`` (pydantic-ai's default). Video is sent as frames.
* Qwen-VL on DashScope (hosted ids: ``qwen-3.7-plus``, ``qwen3-vl-plus``) — Qwen2.5-VL
  preprocessing: 28x28-pixel patches after 2x2 merging, tokens = ceil(h/28) * ceil(w/28), at
  least 4 per image; video is sent as frames. The worst case assumes no temporal merge. The
  *expected* count (a rehearsal's) follows Qwen3-VL: 16-px patches merged 2x2 (32x32 pixels per
  token) and two consecutive video frames merged into one (temporal patch 2).
* The open-weight judges a vLLM server runs, counted as the model's own processor counts them
  (:data:`OPEN_WEIGHT_RULES`, one rule a model family; an id names its family by its checkpoint
  name, ``qwen3-vl-30b-a3b``, ``Qwen/Qwen2.5-VL-7B-Instruct``, ``internvl3.5-8b``):
  Qwen3-VL and Qwen2.5-VL resize each picture to a multiple of the merged patch (``smart_resize``
  in transformers' ``image_processing_qwen2_vl.py``; Qwen3-VL: patch 16, merge 2, 32 px a token,
  65,536 to 16,777,216 pixels an image, its ``preprocessor_config.json``; Qwen2.5-VL: patch 14,
  merge 2, 28 px, 3,136 to 12,845,056) and bill one token a merged patch; a video's frames go
  in pairs (``temporal_patch_size`` 2; an odd clip's last frame is repeated to make its pair:
  ``video_processing_qwen3_vl.py``), so each frame counts half its grid and each clip one half
  grid more. InternVL3.5 (``InternVLChatModel``, vllm/model_executor/models/internvl.py, its
  ``dynamic_preprocess``): the picture is cut into the grid of 448-px tiles, 1 to
  ``max_dynamic_patch`` 12 of them, whose aspect ratio is nearest its own, plus a thumbnail
  tile when the grid has more than one, 256 tokens a tile (a 16:9 frame: 2 tiles and the
  thumbnail, 768 tokens; a 4:3 one: 4x3 and the thumbnail, 3,328). Video frames are counted at
  the shape's ``video_width``; unknown, at 16:9, and InternVL's at its dearest grid.
* Text — about 4 characters per token for English, rounded up, plus a 25 % margin for
  non-English text and tokenizer differences, plus a fixed per-call overhead for chat markup.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from policies.prices import PriceTable, Usage
from store.errors import ConfigError

# The counting rules, by the name a provider family's spec gives (``ProviderFamily.token_rule``
# in ``tools.providers``, which this package cannot import).
TokenRule = Literal["gemini", "openai", "qwen"]
TOKEN_RULES: tuple[TokenRule, ...] = ("gemini", "openai", "qwen")

TEXT_CHARS_PER_TOKEN = 4
TEXT_MARGIN = 1.25
CALL_OVERHEAD_TOKENS = 64  # system/role markup each provider adds around the messages

GEMINI_TOKENS_PER_FRAME = {"default": 258, "low": 66}
GEMINI3_TOKENS_PER_FRAME = {"default": 70, "low": 70, "high": 280}
GEMINI_AUDIO_TOKENS_PER_SECOND = 32
GEMINI_IMAGE_TILE = 768
GEMINI_IMAGE_HIGH_RES_TOKENS = 1120

OPENAI_TILE = 512
OPENAI_BASE_TOKENS = 85  # the gpt-4o / gpt-4.1 tile rule's
OPENAI_TOKENS_PER_TILE = 170
OPENAI_PATCH = 32
OPENAI_MAX_SIDE = 2048  # patch models at ``high`` (and ``gpt-5.4``'s ``auto``)


@dataclass(frozen=True)
class OpenAIImageRule:
    """How one OpenAI model bills an image sent at ``detail: auto`` (the guide's "Model sizing
    behavior" and "Calculating costs"): 32-px patches up to a budget within a longest side,
    times a multiplier, or 512-px tiles plus a base."""

    kind: Literal["patch", "tile"]
    patch_budget: int = 1536
    max_side: int = OPENAI_MAX_SIDE
    multiplier: float = 1.0
    base_tokens: int = OPENAI_BASE_TOKENS
    tile_tokens: int = OPENAI_TOKENS_PER_TILE


def _patches(
    budget: int, multiplier: float = 1.0, max_side: int = OPENAI_MAX_SIDE
) -> OpenAIImageRule:
    return OpenAIImageRule("patch", patch_budget=budget, max_side=max_side, multiplier=multiplier)


def _tiles(base: int, per_tile: int) -> OpenAIImageRule:
    return OpenAIImageRule("tile", base_tokens=base, tile_tokens=per_tile)


# Model id (snapshot date dropped) → its rule, as the guide lists them.
OPENAI_IMAGE_RULES: dict[str, OpenAIImageRule] = {
    "gpt-5.5": _patches(10_000, max_side=6000),  # ``auto`` is sized as ``original``
    "gpt-5.4": _patches(2500),  # ``auto`` is sized as ``high``
    "gpt-5.4-mini": _patches(1536, 1.62),
    "gpt-5.4-nano": _patches(1536, 2.46),
    "gpt-5-mini": _patches(1536, 1.62),
    "gpt-5-nano": _patches(1536, 2.46),
    "gpt-5.2": _patches(1536),
    "gpt-5.2-chat-latest": _patches(1536),
    "gpt-5.2-codex": _patches(1536),
    "gpt-5.3-codex": _patches(1536),
    "gpt-5-codex-mini": _patches(1536),
    "gpt-5.1-codex-mini": _patches(1536),
    "o4-mini": _patches(1536, 1.72),
    "gpt-4.1-mini": _patches(1536, 1.62),
    "gpt-4.1-nano": _patches(1536, 2.46),
    "gpt-5": _tiles(70, 140),
    "gpt-5-chat-latest": _tiles(70, 140),
    "gpt-4o": _tiles(85, 170),
    "gpt-4.1": _tiles(85, 170),
    "gpt-4.5": _tiles(85, 170),
    "gpt-4o-mini": _tiles(2833, 5667),
    "o1": _tiles(75, 150),
    "o1-pro": _tiles(75, 150),
    "o3": _tiles(75, 150),
    "computer-use-preview": _tiles(65, 129),
}
# What an id the guide does not list is counted by: each of these, the dearest kept.
_OPENAI_UNLISTED = tuple(rule for name, rule in OPENAI_IMAGE_RULES.items() if name != "gpt-4o-mini")
_SNAPSHOT_RE = re.compile(r"-\d{4}-\d{2}-\d{2}$")

QWEN_PATCH = 28
QWEN3_PATCH = 32
QWEN_TEMPORAL_MERGE = 2
QWEN_MIN_TOKENS_PER_IMAGE = 4

# Audio for non-Gemini families: none of the default roles send it, but an override might;
# Gemini's 32 tokens/s is the dearest published rate we know, so it stands in.
OTHER_AUDIO_TOKENS_PER_SECOND = GEMINI_AUDIO_TOKENS_PER_SECOND


@dataclass(frozen=True)
class CallShape:
    """What a call carries, enough to count its tokens before it is made.

    ``audio_seconds`` is counted on its own: a Gemini video with its audio track sets both
    ``video_seconds`` and ``audio_seconds``. Video attached to a non-Gemini model is counted as
    frames at ``video_fps`` of a 16:9 picture ``video_height`` high. ``token_rule`` names the
    rule the model's provider family counts by (one of :data:`TOKEN_RULES`); unset, the model
    id's prefix picks it (:func:`provider_family`).
    """

    model: str
    text_chars: int = 0
    images: Sequence[tuple[int, int]] = ()
    video_seconds: float = 0.0
    video_fps: float = 0.5
    video_height: int = 720
    audio_seconds: float = 0.0
    max_output_tokens: int = 4096
    media_resolution: Literal["default", "low", "high"] = "default"
    transcript_chars: int = 0  # the part of text_chars that is segment transcript
    # The frames the request carries, when known exactly (each clip's own rate and the
    # adapter's caps); None: ``video_seconds * video_fps``.
    video_frames: int | None = None
    token_rule: str | None = None
    # How many clips (videos) carry those frames, when known: a Qwen-VL judge pads each odd
    # clip with one frame. None: :data:`QWEN_VL_CLIPS_ASSUMED`.
    video_clips: int | None = None
    # The frames' width, when known; None: a 16:9 picture (InternVL, whose tiling turns on the
    # aspect ratio: its dearest grid).
    video_width: int | None = None

    def __post_init__(self) -> None:
        if self.token_rule is not None and self.token_rule not in TOKEN_RULES:
            raise ConfigError(
                f"call shape for {self.model!r}: no token rule {self.token_rule!r}; the rules "
                f"are {', '.join(TOKEN_RULES)} (a provider family's token_rule names one)"
            )
        checks: list[tuple[str, float, bool]] = [
            ("text_chars", self.text_chars, self.text_chars >= 0),
            ("video_seconds", self.video_seconds, self.video_seconds >= 0),
            ("video_fps", self.video_fps, self.video_fps > 0),
            ("video_height", self.video_height, self.video_height > 0),
            ("audio_seconds", self.audio_seconds, self.audio_seconds >= 0),
            ("max_output_tokens", self.max_output_tokens, self.max_output_tokens > 0),
            ("video_clips", self.video_clips or 0, (self.video_clips or 0) >= 0),
            ("video_width", self.video_width or 1, (self.video_width or 1) > 0),
        ]
        for name, value, ok in checks:
            if not ok or not math.isfinite(value):
                raise ConfigError(
                    f"call shape for {self.model!r}: {name}={value!r} is out of range "
                    "(counts and durations are >= 0, fps, height and max_output_tokens > 0)"
                )
        for size in self.images:
            if len(size) != 2 or min(size) <= 0:
                raise ConfigError(
                    f"call shape for {self.model!r}: image size {size!r} must be "
                    "(width, height) with both > 0"
                )


def provider_family(model: str) -> TokenRule | None:
    """The token rule a model id's prefix implies, or ``None`` when the id says nothing we
    know: the fallback for calls whose provider family names no rule."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith("gemini"):
        return "gemini"
    if name.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if name.startswith(("qwen", "internvl")):
        return "qwen"
    return None


def estimate_input_tokens(shape: CallShape, *, expected: bool = False) -> Usage:
    """The input tokens ``shape`` will cost at most, by modality (``output_tokens`` is 0);
    with ``expected``, what it will most likely cost (the published default behaviour rather
    than the dearest reading of each rule: for rehearsals, never for reservations).

    The rule is the shape's ``token_rule``, else the one the model id implies; a model with
    neither is counted under every rule and the largest count kept: an override may price any
    id, and the worst case must still hold.
    """
    rule = _rule(shape.token_rule) or provider_family(shape.model)
    if rule is not None:
        return _count(shape, rule, expected)
    counts = [_count(shape, r, expected) for r in TOKEN_RULES]
    return max(counts, key=lambda u: u.input_tokens)


def _rule(name: str | None) -> TokenRule | None:
    """``name`` as a rule (``CallShape`` has checked it is one)."""
    return next((rule for rule in TOKEN_RULES if rule == name), None)


def _gemini_generation(model: str) -> int:
    """The major version in a Gemini id (``gemini-3.1-pro`` → 3); 2 when it does not say."""
    name = model.lower().rsplit("/", 1)[-1]
    digits = name.removeprefix("gemini-").split(".", 1)[0].split("-", 1)[0]
    return int(digits) if digits.isdigit() else 2


def gemini_frame_tokens(model: str, resolution: str, *, expected: bool) -> int:
    """Tokens Gemini bills per video frame at a media resolution."""
    if _gemini_generation(model) >= 3:
        if expected:
            return GEMINI3_TOKENS_PER_FRAME[resolution]
        return GEMINI3_TOKENS_PER_FRAME["high"]  # the dearest the request could be billed
    return GEMINI_TOKENS_PER_FRAME["default" if resolution == "high" else resolution]


def worst_case_micros(prices: PriceTable, shape: CallShape, *, batch: bool = False) -> int:
    """Worst-case cost: counted input plus ``max_output_tokens``, at list (never cached) rates.

    Raises :class:`policies.prices.UnknownPriceError` for a model with no price, so such a call
    never reaches the budget.
    """
    # The count is input tokens by modality only (nothing cached): the output is all it lacks.
    usage = replace(estimate_input_tokens(shape), output_tokens=shape.max_output_tokens)
    return prices.cost_micros(shape.model, usage, batch=batch)


def text_tokens(chars: int) -> int:
    """Tokens for ``chars`` characters of prompt text, margin and call overhead included."""
    base = math.ceil(chars / TEXT_CHARS_PER_TOKEN)
    return math.ceil(base * TEXT_MARGIN) + CALL_OVERHEAD_TOKENS


def gemini_image_tokens(width: int, height: int) -> int:
    """Gemini: 258 per image up to 384 px, else 258 per 768-px tile; at least Gemini 3's 1120."""
    if width <= 384 and height <= 384:
        tiles = 1
    else:
        tiles = math.ceil(width / GEMINI_IMAGE_TILE) * math.ceil(height / GEMINI_IMAGE_TILE)
    return max(tiles * GEMINI_TOKENS_PER_FRAME["default"], GEMINI_IMAGE_HIGH_RES_TOKENS)


def openai_image_rule(model: str) -> OpenAIImageRule | None:
    """The guide's rule for ``model`` (``openai/`` prefix and snapshot date ignored), or
    ``None`` for an id it does not list."""
    name = _SNAPSHOT_RE.sub("", model.lower().rsplit("/", 1)[-1])
    return OPENAI_IMAGE_RULES.get(name)


@functools.lru_cache(maxsize=4096)
def openai_image_tokens(width: int, height: int, model: str = "") -> int:
    """Tokens OpenAI bills ``model`` for a ``width`` x ``height`` image at ``detail: auto``; an
    id the guide does not list counts as the dearest of its rules (gpt-4o-mini's aside)."""
    rule = openai_image_rule(model)
    if rule is not None:
        return _openai_rule_tokens(rule, width, height)
    return max(_openai_rule_tokens(r, width, height) for r in _OPENAI_UNLISTED)


def _openai_rule_tokens(rule: OpenAIImageRule, width: int, height: int) -> int:
    if rule.kind == "tile":
        return _openai_tile_tokens(rule, width, height)
    return math.ceil(_openai_patches(rule, width, height) * rule.multiplier)


def _openai_tile_tokens(rule: OpenAIImageRule, width: int, height: int) -> int:
    """Fit within 2048x2048, scale the short side down to 768, then base + per 512-px tile."""
    w, h = float(width), float(height)
    fit = min(1.0, 2048 / max(w, h))
    w, h = w * fit, h * fit
    short = min(1.0, 768 / min(w, h))
    w, h = w * short, h * short
    tiles = math.ceil(w / OPENAI_TILE) * math.ceil(h / OPENAI_TILE)
    return rule.base_tokens + rule.tile_tokens * tiles


def _openai_patches(rule: OpenAIImageRule, width: int, height: int) -> int:
    """The guide's steps: fit the longest side, cover with 32-px patches, and past the budget
    shrink (then shrink a little more, so whole patches fit) and count again, capped."""
    fit = min(1.0, rule.max_side / max(width, height))
    w, h = max(1, math.floor(width * fit)), max(1, math.floor(height * fit))
    patches = math.ceil(w / OPENAI_PATCH) * math.ceil(h / OPENAI_PATCH)
    if patches <= rule.patch_budget:
        return patches
    shrink = math.sqrt(OPENAI_PATCH**2 * rule.patch_budget / (w * h))
    across, down = w * shrink / OPENAI_PATCH, h * shrink / OPENAI_PATCH
    shrink *= min(math.floor(across) / across, math.floor(down) / down)
    w, h = max(1, math.floor(w * shrink)), max(1, math.floor(h * shrink))
    resized = math.ceil(w / OPENAI_PATCH) * math.ceil(h / OPENAI_PATCH)
    return min(resized, rule.patch_budget)


def qwen_image_tokens(width: int, height: int) -> int:
    """Qwen-VL: one token per 28x28-pixel patch, at least 4 per image."""
    patches = math.ceil(height / QWEN_PATCH) * math.ceil(width / QWEN_PATCH)
    return max(patches, QWEN_MIN_TOKENS_PER_IMAGE)


# -- the open-weight judges a vLLM server runs (one rule a model family, sources above) ----------
OpenWeightFamily = Literal["qwen3-vl", "qwen2.5-vl", "internvl"]
# A checkpoint's name says its family; a hosted id (DashScope's ``qwen3-vl-plus``) names no size.
_OPEN_WEIGHT_IDS: tuple[tuple[OpenWeightFamily, re.Pattern[str]], ...] = (
    ("qwen3-vl", re.compile(r"^qwen3-vl-\d+(\.\d+)?b")),
    ("qwen2.5-vl", re.compile(r"^qwen2(\.5)?-vl-\d+(\.\d+)?b")),
    ("internvl", re.compile(r"^internvl")),
)


@dataclass(frozen=True)
class QwenVLRule:
    """How a Qwen-VL checkpoint counts a picture: ``smart_resize`` to a multiple of ``merged``
    pixels within [``min_pixels``, ``max_pixels``], one token a ``merged`` x ``merged`` patch; a
    video's frames two to a token grid (``temporal_patch_size``)."""

    merged: int  # patch_size x merge_size
    min_pixels: int
    max_pixels: int
    video_min_pixels: int
    temporal_patch: int = 2


# Qwen3-VL: patch 16, merge 2; images 65,536..16,777,216 px (preprocessor_config.json), video
# ``size.shortest_edge`` 4,096 (video_preprocessor_config.json; its ``longest_edge`` 25,165,824
# caps a whole video's pixels and only lowers the count, so the worst case leaves it out).
# Qwen2.5-VL: patch 14, merge 2; images 3,136..12,845,056 px (preprocessor_config.json); a
# frame at least 100,352 px (128 x 28 x 28, Qwen2VLVideoProcessor's default ``min_pixels``, the
# dearer reading for the small frames a checkpoint without a video config may be resized up to).
QWEN3_VL = QwenVLRule(merged=32, min_pixels=65_536, max_pixels=16_777_216, video_min_pixels=4096)
QWEN2_5_VL = QwenVLRule(
    merged=28, min_pixels=3136, max_pixels=12_845_056, video_min_pixels=128 * 28 * 28
)
OPEN_WEIGHT_RULES: dict[OpenWeightFamily, QwenVLRule | None] = {
    "qwen3-vl": QWEN3_VL,
    "qwen2.5-vl": QWEN2_5_VL,
    "internvl": None,  # tiles: :func:`internvl_image_tokens`
}
# A call whose shape does not say how many clips it carries is counted as the pair judge's two
# segments, each of which may pad one frame to make its last pair.
QWEN_VL_CLIPS_ASSUMED = 2

# InternVL3.5 (InternVLChatModel's dynamic_preprocess, vllm/model_executor/models/internvl.py;
# the checkpoint's config: image_size 448, max_dynamic_patch 12, use_thumbnail true, 256
# tokens a tile: (448 / 14)^2 patches x downsample_ratio 0.5^2).
INTERNVL_TILE = 448
INTERNVL_TILE_TOKENS = 256
INTERNVL_MAX_TILES = 12


def open_weight_family(model: str) -> OpenWeightFamily | None:
    """The open-weight model family a checkpoint's id names (``Qwen/Qwen3-VL-30B-A3B-Instruct``,
    ``qwen3-vl-30b-a3b`` → ``qwen3-vl``), or ``None`` for any other id (a hosted model)."""
    name = model.lower().rsplit("/", 1)[-1]
    return next((family for family, pattern in _OPEN_WEIGHT_IDS if pattern.match(name)), None)


def qwen_vl_resize(rule: QwenVLRule, width: int, height: int, min_pixels: int) -> tuple[int, int]:
    """``smart_resize``: each side rounded to a multiple of the merged patch, then scaled (by
    whole patches) into [``min_pixels``, ``rule.max_pixels``]; (width, height)."""
    factor = rule.merged
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > rule.max_pixels:
        beta = math.sqrt(height * width / rule.max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return w, h


def qwen_vl_grid(rule: QwenVLRule, width: int, height: int, *, video: bool = False) -> int:
    """Tokens of one picture (of a video: of one pair of frames) under ``rule``."""
    w, h = qwen_vl_resize(rule, width, height, rule.video_min_pixels if video else rule.min_pixels)
    return (w // rule.merged) * (h // rule.merged)


def qwen_vl_video_tokens(rule: QwenVLRule, frames: int, clips: int, width: int, height: int) -> int:
    """A request's video tokens at most: half a pair's grid a frame (rounded up), and half a grid
    more for each clip, whose odd last frame is repeated to make a pair."""
    half = math.ceil(qwen_vl_grid(rule, width, height, video=True) / rule.temporal_patch)
    return (frames + clips) * half


def internvl_tiles(width: int, height: int, max_tiles: int = INTERNVL_MAX_TILES) -> int:
    """InternVL's ``dynamic_preprocess``: the grid of at most ``max_tiles`` 448-px tiles whose
    ratio is nearest the picture's (on a tie, the later grid when the picture's area passes half
    the grid's), plus the thumbnail when the grid has more than one tile."""
    ratios = sorted(
        {
            (cols, rows)
            for n in range(1, max_tiles + 1)
            for cols in range(1, n + 1)
            for rows in range(1, n + 1)
            if cols * rows <= max_tiles
        },
        key=lambda grid: grid[0] * grid[1],
    )
    aspect = width / height
    best, best_diff = (1, 1), float("inf")
    for cols, rows in ratios:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * INTERNVL_TILE**2 * cols * rows:
            best = (cols, rows)
    tiles = best[0] * best[1]
    return tiles + 1 if tiles > 1 else tiles


def internvl_image_tokens(width: int, height: int) -> int:
    """InternVL3.5: 256 tokens a tile, thumbnail included."""
    return internvl_tiles(width, height) * INTERNVL_TILE_TOKENS


_IMAGE_RULES: dict[TokenRule, Callable[[int, int], int]] = {
    "gemini": gemini_image_tokens,
    "openai": openai_image_tokens,
    "qwen": qwen_image_tokens,
}


def _count(shape: CallShape, rule: TokenRule, expected: bool = False) -> Usage:
    frames = (
        shape.video_frames
        if shape.video_frames is not None
        else math.ceil(shape.video_seconds * shape.video_fps)
    )
    open_weight = open_weight_family(shape.model) if rule == "qwen" else None
    if open_weight is not None:  # exact: the worst case and the expected count agree
        images, video = _open_weight_media(shape, open_weight, frames)
        audio = math.ceil(shape.audio_seconds * OTHER_AUDIO_TOKENS_PER_SECOND)
    elif rule == "gemini":
        images = sum(gemini_image_tokens(w, h) for w, h in shape.images)
        per_frame = gemini_frame_tokens(shape.model, shape.media_resolution, expected=expected)
        video = frames * per_frame
        audio = math.ceil(shape.audio_seconds * GEMINI_AUDIO_TOKENS_PER_SECOND)
    else:
        image_rule = _IMAGE_RULES[rule]
        if rule == "openai":  # billed per model
            image_rule = functools.partial(openai_image_tokens, model=shape.model)
        images = sum(image_rule(w, h) for w, h in shape.images)
        width = math.ceil(shape.video_height * 16 / 9)
        if rule == "qwen" and expected:
            grid = math.ceil(shape.video_height / QWEN3_PATCH) * math.ceil(width / QWEN3_PATCH)
            video = math.ceil(frames / QWEN_TEMPORAL_MERGE) * max(grid, QWEN_MIN_TOKENS_PER_IMAGE)
        else:
            video = frames * image_rule(width, shape.video_height) if frames else 0
        audio = math.ceil(shape.audio_seconds * OTHER_AUDIO_TOKENS_PER_SECOND)
    return Usage(
        input_text_tokens=text_tokens(shape.text_chars),
        input_image_tokens=images,
        input_video_tokens=video,
        input_audio_tokens=audio,
    )


def _open_weight_media(shape: CallShape, family: OpenWeightFamily, frames: int) -> tuple[int, int]:
    """(image tokens, video tokens) of ``shape`` for an open-weight judge: its pictures as they
    are, its video frames ``video_width`` x ``video_height`` (unknown width: a 16:9 picture, and
    for InternVL the dearest grid, which a 4:3 frame takes). A shape with clips but no
    frames (a fit's baseline) still counts each clip's padding, so the cost of one more frame is
    the difference of two counts."""
    height = shape.video_height
    width = shape.video_width or math.ceil(height * 16 / 9)
    rule = OPEN_WEIGHT_RULES[family]
    if rule is None:
        images = sum(internvl_image_tokens(w, h) for w, h in shape.images)
        per_frame = (
            internvl_image_tokens(width, height)
            if shape.video_width is not None
            else (INTERNVL_MAX_TILES + 1) * INTERNVL_TILE_TOKENS  # a 4:3 frame's 4x3 grid
        )
        return images, frames * per_frame
    images = sum(qwen_vl_grid(rule, w, h) for w, h in shape.images)
    if not frames and not shape.video_seconds:
        return images, 0
    clips = QWEN_VL_CLIPS_ASSUMED if shape.video_clips is None else shape.video_clips
    return images, qwen_vl_video_tokens(rule, frames, clips, width, height)
