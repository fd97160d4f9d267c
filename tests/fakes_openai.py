"""A fake OpenAI API (and a vLLM server) on loopback, driven by the real SDK.

Routes: ``POST /v1/responses`` (the Responses API), ``POST /v1/chat/completions`` (Chat
Completions as a vLLM server serves it), and the batch routes ``/v1/files`` + ``/v1/batches``.
A model request is answered with what the offline provider says to its prompt, reading the
frames it carries: each data-URL JPEG is decoded, and its time and segment come from the
``(video-id @ MM:SS)`` text before it, mapped to a segment through the prompt's ``<context>``;
each ``video_url`` mp4 is decoded as vLLM reads it and timed by the clip label before it.

As strict as the services: each refuses a model id it does not serve (``served_models``) with
its own 404; OpenAI refuses a ``strict: true`` schema outside its subset (400
``invalid_json_schema``) and, out of credit (``quota_exhausted``), every model request (429
``insufficient_quota``); vLLM refuses more images or videos a prompt than its
``limit_mm_per_prompt`` (400). Each rule cites its source where it is enforced.

Usage is reported as each bills it: text at ``len // 4``; on OpenAI each image by its model's
rule at the detail it was sent with (:data:`OPENAI_VISION`, transcribed from OpenAI's guide
independently of ``policies.tokens``, which reserves for them), on vLLM by the served model's
processor (:data:`VLLM_VISION`); cached input when a request repeats the previous one's leading
items (OpenAI caches prompts of 1024 tokens and more, in steps of 128). Batches write successes
to the output file and failures to the error file. Faults take the APIs' own wire forms (see
:mod:`tests.fakes_providers`).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import functools
import hashlib
import io
import itertools
import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import av
import numpy as np
import numpy.typing as npt
from PIL import Image

from playlisteval.settings import default_endpoints
from store.errors import MediaError
from tests.fakes_providers import (
    RETRY_AFTER_S,
    FakeProviderServer,
    Fault,
    Harness,
    Reply,
    SeenRequest,
    offline_answer,
    prompt_has_context,
    serve_provider,
)
from tools.contracts.roles import parse_context
from tools.index import media
from tools.providers.base import ProviderConfig
from tools.providers.openai_models import openai_compatible_model, openai_model

Api = Literal["responses", "chat"]

CREATED_AT = 1_767_225_600  # a fixed clock: the fake's answers are byte-identical run to run
FREE_TEXT_ANSWER = "A fake answer."
REFUSAL_TEXT = "I'm sorry, but I can't help with that request."
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
COST_PER_TOKEN_USD = 2e-7  # what the compatible fake reports as ``usage.cost`` when asked to

_LABEL_RE = re.compile(r"^\((?P<video>[^()@\s]+) @ (?P<min>\d+):(?P<sec>\d{2})\)$")
# The label before a clip sent as video (``clip_label(..., source_timeline=False)``).
_CLIP_LABEL_RE = re.compile(
    r"^Video (?P<video>\S+) \(segment (?P<segment>[^)]*)\), "
    r"(?P<min>\d+):(?P<sec>\d{2})–(?P<emin>\d+):(?P<esec>\d{2}) of the video;"
)


# -- reading a request ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """One piece of a request's input, in order: text, or an image or a video as a data URL."""

    kind: Literal["text", "image", "video"]
    value: str
    detail: str = "auto"


def _responses_items(body: dict[str, Any]) -> list[_Item]:
    items: list[_Item] = []
    if isinstance(body.get("instructions"), str):
        items.append(_Item("text", body["instructions"]))
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        return [*items, _Item("text", raw_input)]
    for message in raw_input or []:
        content = message.get("content")
        if isinstance(content, str):
            items.append(_Item("text", content))
            continue
        for part in content or []:
            if part.get("type") in ("input_text", "output_text"):
                items.append(_Item("text", part.get("text", "")))
            elif part.get("type") == "input_image":
                detail = str(part.get("detail") or "auto")
                items.append(_Item("image", part.get("image_url", ""), detail))
    return items


def _chat_items(body: dict[str, Any]) -> list[_Item]:
    items: list[_Item] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            items.append(_Item("text", content))
            continue
        for part in content or []:
            if part.get("type") == "text":
                items.append(_Item("text", part.get("text", "")))
            elif part.get("type") == "image_url":
                image_url = part.get("image_url", {})
                detail = str(image_url.get("detail") or "auto")
                items.append(_Item("image", image_url.get("url", ""), detail))
            elif part.get("type") == "video_url":
                items.append(_Item("video", part.get("video_url", {}).get("url", "")))
    return items


def _items(api: Api, body: dict[str, Any]) -> list[_Item]:
    return _responses_items(body) if api == "responses" else _chat_items(body)


def _schema(api: Api, body: dict[str, Any]) -> dict[str, Any] | None:
    if api == "responses":
        fmt = (body.get("text") or {}).get("format") or {}
        return fmt.get("schema") if fmt.get("type") == "json_schema" else None
    fmt = body.get("response_format") or {}
    if fmt.get("type") != "json_schema":
        return None
    schema: dict[str, Any] | None = (fmt.get("json_schema") or {}).get("schema")
    return schema


def _format(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """The ``json_schema`` format object: ``name``, ``schema``, ``strict`` (empty when none)."""
    if api == "responses":
        fmt = (body.get("text") or {}).get("format") or {}
        return dict(fmt) if fmt.get("type") == "json_schema" else {}
    fmt = body.get("response_format") or {}
    return dict(fmt.get("json_schema") or {}) if fmt.get("type") == "json_schema" else {}


# -- OpenAI's strict schema subset ------------------------------------------------------------
# "Structured Outputs", supported schemas
# (https://developers.openai.com/api/docs/guides/structured-outputs#supported-schemas): "If you
# turn on Structured Outputs by supplying strict: true and call the API with an unsupported JSON
# Schema, you will receive an error." Its rules: the root is an object, not anyOf; all fields
# must be required; additionalProperties: false must always be set in objects; up to 5000
# object properties total, with up to 10 levels of nesting; up to 1000 enum values; property
# names, definition names, enum and const values at most 120,000 characters in all; composition
# by allOf, not, dependentRequired, dependentSchemas, if, then, else is not supported. ``default``
# is refused too (pydantic-ai's OpenAIJsonSchemaTransformer: "the 'default' keyword is not
# allowed in strict mode"). The refusal is a 400 ``invalid_json_schema`` whose message reads
# "Invalid schema for response_format '<name>': In context=(<path>), …" (as OpenAI words it,
# e.g. vercel/ai#6484: "In context=('properties', 'organizations', 'items'), 'required' is
# required to be supplied and to be an array including every key in properties. Missing
# 'roles'."), ``param`` ``text.format.schema`` on the Responses API, ``response_format`` on Chat.
STRICT_MAX_PROPERTIES = 5000
STRICT_MAX_NESTING = 10
STRICT_MAX_ENUM_VALUES = 1000
STRICT_MAX_NAME_CHARS = 120_000
STRICT_NOT_PERMITTED = (
    "allOf",
    "not",
    "dependentRequired",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "default",
)
_TYPED_BY = ("type", "$ref", "anyOf", "enum", "const")


@dataclass
class _SchemaTally:
    """What the size limits count over a whole schema."""

    properties: int = 0
    enum_values: int = 0
    name_chars: int = 0


def strict_schema_violation(schema: Any) -> str | None:
    """Why OpenAI refuses ``schema`` as a ``strict: true`` schema (its words), or ``None``."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        got = schema.get("type") if isinstance(schema, dict) else type(schema).__name__
        return f"schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{got}\"'."
    tally = _SchemaTally()
    found = _node_violation(schema, (), 1, tally)
    if found is not None:
        return found
    if tally.properties > STRICT_MAX_PROPERTIES:
        return (
            f"The schema has {tally.properties} object properties; at most "
            f"{STRICT_MAX_PROPERTIES} are permitted."
        )
    if tally.enum_values > STRICT_MAX_ENUM_VALUES:
        return (
            f"The schema has {tally.enum_values} enum values; at most "
            f"{STRICT_MAX_ENUM_VALUES} are permitted."
        )
    if tally.name_chars > STRICT_MAX_NAME_CHARS:
        return (
            f"The total string length of property names, definition names, enum values and "
            f"const values is {tally.name_chars}; at most {STRICT_MAX_NAME_CHARS} is permitted."
        )
    return None


def _node_violation(
    node: Any, context: tuple[str | int, ...], depth: int, tally: _SchemaTally
) -> str | None:
    where = f"In context={context!r}"
    if not isinstance(node, dict):
        return f"{where}, schema must be a JSON Schema object, got {node!r}."
    for keyword in STRICT_NOT_PERMITTED:
        if keyword in node:
            return f"{where}, '{keyword}' is not permitted."
    if not any(keyword in node for keyword in _TYPED_BY):
        return f"{where}, schema must have a 'type' key."
    kinds = node.get("type")
    if "object" in (kinds if isinstance(kinds, list) else [kinds]):
        found = _object_violation(node, context, depth, tally)
        if found is not None:
            return found
    children: list[tuple[tuple[str | int, ...], Any, int]] = []
    if "items" in node:
        children.append(((*context, "items"), node["items"], depth))
    children += [
        ((*context, "anyOf", i), sub, depth) for i, sub in enumerate(node.get("anyOf", []))
    ]
    for defs in ("$defs", "definitions"):
        for name, sub in (node.get(defs) or {}).items():
            tally.name_chars += len(name)
            children.append(((*context, defs, name), sub, depth))
    enum = node.get("enum")
    if isinstance(enum, list):
        tally.enum_values += len(enum)
        tally.name_chars += sum(len(str(value)) for value in enum)
    if "const" in node:
        tally.name_chars += len(str(node["const"]))
    for child_context, child, child_depth in children:
        found = _node_violation(child, child_context, child_depth, tally)
        if found is not None:
            return found
    return None


def _object_violation(
    node: dict[str, Any], context: tuple[str | int, ...], depth: int, tally: _SchemaTally
) -> str | None:
    where = f"In context={context!r}"
    if depth > STRICT_MAX_NESTING:
        return f"{where}, the schema nests objects {depth} deep; at most {STRICT_MAX_NESTING}."
    if node.get("additionalProperties") is not False:
        return f"{where}, 'additionalProperties' is required to be supplied and to be false."
    properties: dict[str, Any] = node.get("properties") or {}
    required = node.get("required")
    missing = [key for key in properties if not isinstance(required, list) or key not in required]
    if missing:
        return (
            f"{where}, 'required' is required to be supplied and to be an array including "
            f"every key in properties. Missing '{missing[0]}'."
        )
    tally.properties += len(properties)
    tally.name_chars += sum(len(key) for key in properties)
    for key, sub in properties.items():
        found = _node_violation(sub, (*context, "properties", key), depth + 1, tally)
        if found is not None:
            return found
    return None


# -- how OpenAI bills an image -------------------------------------------------------------------
# "Images and vision", "Model sizing behavior" and "Calculating costs"
# (https://developers.openai.com/api/docs/guides/images-vision#calculating-costs). Patch models:
# "A. Calculate the number of 32px x 32px patches that are needed to cover the original image";
# "B. If the original image would exceed the model's patch budget, scale it down
# proportionally until it fits within that budget. Then adjust the scale so that the final
# resized image stays within budget after converting to integer pixel dimensions and computing
# patch coverage" (shrink_factor = sqrt(32^2 * patch_budget / (width * height)), adjusted by
# min(floor(w*s/32)/(w*s/32), floor(h*s/32)/(h*s/32))); "C. ... resized_patch_count =
# ceil(resized_width/32) x ceil(resized_height/32)"; "D. Apply a multiplier based on the model".
# Budgets: gpt-5.4 "high allows up to 2,500 patches or a 2048-pixel maximum dimension. original
# allows up to 10,000 patches or a 6000-pixel maximum dimension ... auto and omitted detail use
# the same sizing behavior as high"; gpt-5.5 the same, but auto "as original"; gpt-5.4-mini,
# gpt-5.4-nano, o4-mini and the other 1,536-patch models "high allows up to 1,536 patches or a
# 2048-pixel maximum dimension"; multipliers gpt-5.4-mini 1.62, gpt-5.4-nano 2.46, o4-mini 1.72.
# low: "The model receives a 512px x 512px low-resolution version of the image". Tile models
# (gpt-5 70 + 140, gpt-4o and gpt-4.1 85 + 170 a 512-px tile): "Any image with detail: low
# costs a fixed base"; at high, "Scale to fit in a 2048px x 2048px square ... Scale such that
# the image's shortest side is 768px long ... Count the number of 512px squares".


@dataclass(frozen=True)
class Vision:
    """How one served OpenAI model bills images: patches (budget, longest side, multiplier; for
    ``original`` its own budget and side) or tiles (base, per tile)."""

    patch_budget: int | None = None  # None: the tile rule
    max_side: int = 2048
    multiplier: float = 1.0
    original: tuple[int, int] | None = None  # (budget, longest side) where ``original`` is taken
    auto_is_original: bool = False
    tile: tuple[int, int] = (85, 170)

    def tokens(self, width: int, height: int, detail: str) -> int:
        """What an image of this size costs at ``detail``."""
        if self.patch_budget is None:
            return self._tiles(width, height, detail)
        budget, side = self.patch_budget, self.max_side
        if self.original is not None and (
            detail == "original" or (detail == "auto" and self.auto_is_original)
        ):
            budget, side = self.original
        if detail == "low":
            budget, side = budget, 512
        return math.ceil(_patch_count(width, height, budget, side) * self.multiplier)

    def _tiles(self, width: int, height: int, detail: str) -> int:
        base, per_tile = self.tile
        if detail == "low":
            return base
        w, h = float(width), float(height)
        fit = min(1.0, 2048 / max(w, h))
        w, h = w * fit, h * fit
        short = min(1.0, 768 / min(w, h))
        w, h = w * short, h * short
        return base + per_tile * math.ceil(w / 512) * math.ceil(h / 512)


def _patch_count(width: int, height: int, budget: int, max_side: int) -> int:
    scale = min(1.0, max_side / max(width, height))
    w, h = max(1, int(width * scale)), max(1, int(height * scale))
    if math.ceil(w / 32) * math.ceil(h / 32) <= budget:
        return math.ceil(w / 32) * math.ceil(h / 32)
    shrink = math.sqrt(32 * 32 * budget / (w * h))
    shrink *= min(
        int(w * shrink / 32) / (w * shrink / 32), int(h * shrink / 32) / (h * shrink / 32)
    )
    w, h = max(1, int(w * shrink)), max(1, int(h * shrink))
    return min(math.ceil(w / 32) * math.ceil(h / 32), budget)


# The models the OpenAI fake serves, with how each bills images.
OPENAI_VISION: dict[str, Vision] = {
    "gpt-5.5": Vision(2500, original=(10_000, 6000), auto_is_original=True),
    "gpt-5.4": Vision(2500, original=(10_000, 6000)),
    "gpt-5.4-mini": Vision(1536, multiplier=1.62),
    "gpt-5.4-nano": Vision(1536, multiplier=2.46),
    "o4-mini": Vision(1536, multiplier=1.72),
    "gpt-5": Vision(tile=(70, 140)),
    "gpt-4.1": Vision(tile=(85, 170)),
    "gpt-4o": Vision(tile=(85, 170)),
}

# -- how a vLLM server counts an open-weight judge's media ----------------------------------------
# vLLM reports the prompt tokens the model's own processor makes. Qwen-VL ("smart_resize" in
# transformers' Qwen2-VL image processor, which Qwen2.5-VL and Qwen3-VL share): each side rounded
# to a multiple of the merged patch (Qwen2.5-VL 14 px x 2 = 28, Qwen3-VL 16 px x 2 = 32), at
# least one, scaled into [min_pixels, max_pixels] (Qwen2.5-VL 56*56 .. 12845056, Qwen3-VL
# 65536 .. 16777216, their preprocessor_config.json), one token per merged patch; a video merges
# pairs of frames (temporal_patch_size 2; an odd count repeats its last frame: "Check that videos
# have `num_frames` divisible by `temporal_patch_size`" in video_processing_qwen3_vl.py).
# Qwen3-VL's video processor resizes a whole video at once: ``smart_resize(num_frames, height,
# width, temporal_factor=2, factor=32, min_pixels=4096, max_pixels=25165824)`` (its
# video_preprocessor_config.json ``size``), so the frames x pixels of one video are capped.
# InternVL (InternVLChatModel, vllm/model_executor/models/internvl.py): 448-px tiles, 1 to
# max_dynamic_patch 12 of them picked by the closest aspect ratio, plus a thumbnail when more
# than one, 256 tokens each.
#
# How a Qwen-VL server reads a video: the loader decodes it (vllm/multimodal/video.py: the
# dynamic OpenCV backend, ``OpenCVDynamicVideoBackend.load_bytes``: "num_frames: Not used",
# "fps: Target FPS for sampling (default: 2)"; the plain one, read whole with ``num_frames``
# -1, marks it ``"do_sample_frames": True``, "used to control hf processor's video sampling
# behavior"; a server left at its ``num_frames`` 32 would instead hand over 32 frames unsampled,
# which no request of ours asks for), and the model's video processor samples it again
# (``sample_frames`` of transformers' Qwen3VLVideoProcessor / Qwen2VLVideoProcessor, the
# checkpoints' video_preprocessor_config.json: fps 2, min_frames 4, max_frames 768): frames =
# int(total / video_fps * fps), held within [min_frames, max_frames] and at most the total,
# spread evenly (Qwen2-VL's processor also floors them to a multiple of temporal_patch_size).
# ``num_frames`` in ``media_io_kwargs`` does not change it; a request's own
# ``mm_processor_kwargs: {"fps": F}`` (ChatCompletionRequest.mm_processor_kwargs, handed to the
# HF processor; Qwen3-VL's model card: "video frame sampling can be configured via extra_body
# (e.g., by setting fps)") does.
QWEN_VL_SAMPLING_FPS = 2.0
QWEN_VL_MIN_FRAMES = 4
QWEN_VL_MAX_FRAMES = 768


@dataclass(frozen=True)
class VLLMVision:
    """How one model a vLLM server serves counts images and videos, and which it takes."""

    kind: Literal["qwen3", "qwen2", "internvl"]
    merged_patch: int = 28
    min_pixels: int = 56 * 56
    max_pixels: int = 12_845_056
    modalities: frozenset[str] = frozenset({"image", "video"})
    # Qwen3-VL: a video's size limits are over all its frames (None: per frame, as images).
    video_pixels: tuple[int, int] | None = None

    def image_tokens(self, width: int, height: int) -> int:
        """Tokens of one image."""
        if self.kind == "internvl":
            return _internvl_tiles(width, height) * 256
        w, h = self._resized(width, height, self.min_pixels, self.max_pixels)
        return (w // self.merged_patch) * (h // self.merged_patch)

    def video_tokens(self, frames: int, width: int, height: int) -> int:
        """Tokens of a video of ``frames`` frames (as its processor sampled them) of this size."""
        if self.kind == "internvl":
            return frames * 256  # one tile a frame
        if self.video_pixels is None:
            w, h = self._resized(width, height, self.min_pixels, self.max_pixels)
        else:
            w, h = self._video_resized(frames, width, height, *self.video_pixels)
        return math.ceil(frames / 2) * (w // self.merged_patch) * (h // self.merged_patch)

    def sampled(self, total: int, video_fps: float, fps: float) -> list[int]:
        """Indices of the frames the video processor keeps of ``total`` decoded at
        ``video_fps``, sampling at ``fps`` (its ``sample_frames``)."""
        if self.kind == "qwen3":
            wanted = int(total / video_fps * fps)
            wanted = min(min(max(wanted, QWEN_VL_MIN_FRAMES), QWEN_VL_MAX_FRAMES), total)
            return [int(i) for i in np.linspace(0, total - 1, wanted).round().astype(int)]
        most = math.floor(min(QWEN_VL_MAX_FRAMES, total) / 2) * 2
        kept = min(min(max(total / video_fps * fps, QWEN_VL_MIN_FRAMES), most), total)
        wanted = math.floor(kept / 2) * 2
        return [int(i) for i in np.arange(0, total, total / wanted).astype(int)] if wanted else []

    def _resized(
        self, width: int, height: int, min_pixels: int, max_pixels: int
    ) -> tuple[int, int]:
        factor = self.merged_patch
        h = max(factor, round(height / factor) * factor)
        w = max(factor, round(width / factor) * factor)
        if h * w > max_pixels:
            beta = math.sqrt(height * width / max_pixels)
            h = max(factor, math.floor(height / beta / factor) * factor)
            w = max(factor, math.floor(width / beta / factor) * factor)
        elif h * w < min_pixels:
            beta = math.sqrt(min_pixels / (height * width))
            h = math.ceil(height * beta / factor) * factor
            w = math.ceil(width * beta / factor) * factor
        return w, h

    def _video_resized(
        self, frames: int, width: int, height: int, min_pixels: int, max_pixels: int
    ) -> tuple[int, int]:
        """Qwen3-VL's video ``smart_resize``: the limits bound frames x pixels."""
        factor = self.merged_patch
        h = max(factor, round(height / factor) * factor)
        w = max(factor, round(width / factor) * factor)
        t = round(frames / 2) * 2
        if t * h * w > max_pixels:
            beta = math.sqrt(frames * height * width / max_pixels)
            h = max(factor, math.floor(height / beta / factor) * factor)
            w = max(factor, math.floor(width / beta / factor) * factor)
        elif t * h * w < min_pixels:
            beta = math.sqrt(min_pixels / (frames * height * width))
            h = math.ceil(height * beta / factor) * factor
            w = math.ceil(width * beta / factor) * factor
        return w, h


def _internvl_tiles(width: int, height: int, max_tiles: int = 12) -> int:
    """InternVL's dynamic_preprocess: the (cols, rows) grid of at most ``max_tiles`` whose
    ratio is closest to the image's (ties to the larger grid when the image fills it), and a
    thumbnail tile when the grid is more than one."""
    aspect = width / height
    grids = sorted(
        {
            (i, j)
            for n in range(1, max_tiles + 1)
            for i in range(1, n + 1)
            for j in range(1, n + 1)
            if 1 <= i * j <= max_tiles
        },
        key=lambda g: g[0] * g[1],
    )
    best, best_diff = (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * 448 * 448 * cols * rows:
            best = (cols, rows)
    tiles = best[0] * best[1]
    return tiles + 1 if tiles > 1 else tiles


VLLM_VISION: dict[str, VLLMVision] = {
    "Qwen/Qwen3-VL-30B-A3B-Instruct": VLLMVision(
        "qwen3",
        merged_patch=32,
        min_pixels=65_536,
        max_pixels=16_777_216,
        video_pixels=(4096, 25_165_824),
    ),
    "Qwen/Qwen2.5-VL-7B-Instruct": VLLMVision("qwen2"),
    # vLLM's table gives InternVL video in parentheses (some checkpoints only): served here as
    # one without, so a video for it is refused as vLLM refuses a modality a model lacks.
    "OpenGVLab/InternVL3_5-8B": VLLMVision("internvl", modalities=frozenset({"image"})),
}
# vLLM's MultiModalConfig.limit_per_prompt (vllm/config/multimodal.py): "The maximum number of
# input items ... allowed per prompt for each modality. Defaults to 999 for each modality"
# (``--limit-mm-per-prompt '{"image": 16, "video": 2}'`` lowers it).
VLLM_DEFAULT_MM_LIMIT = 999
VLLM_DEFAULT_VIDEO_FRAMES = 32  # VideoMediaIO's num_frames (vllm/multimodal/video.py)
# The context window the fake server is launched with (``vllm serve --max-model-len``): the
# 32k an 8B/30B judge is commonly served at on one GPU.
VLLM_DEFAULT_MAX_MODEL_LEN = 32768
# OpenAI's "Images and vision" guide, "Image input requirements"
# (https://developers.openai.com/api/docs/guides/images-vision#image-input-requirements): "Up to
# 500 individual image inputs per request", "Up to 50 MB total payload size per request" (the
# images as they travel, base64 data URLs, counted here; the guide gives no error text, so
# the messages are ours, in OpenAI's invalid_request_error envelope).
OPENAI_MAX_IMAGES = 500
OPENAI_MAX_IMAGE_PAYLOAD = 50_000_000

# The ids a vLLM server serves by default here: our open-weight judges' wire names
# (``playlisteval.settings.default_endpoints``, as ``vllm serve <model>`` names them) and a
# Qwen2.5-VL.
VLLM_SERVED = tuple(VLLM_VISION)
QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)


TimedPicture = tuple[float, npt.NDArray[np.uint8]]  # (clip time, picture)


def _image(data_url: str) -> Image.Image:
    _, _, encoded = data_url.partition("base64,")
    return Image.open(io.BytesIO(base64.b64decode(encoded))).convert("RGB")


def _segment_for(segments: Sequence[Any], video_id: str, t: float) -> str | None:
    """The segment of ``video_id`` whose span holds ``t`` (labels are whole seconds, floored)."""
    for segment in segments:
        if segment.video_id == video_id and segment.start_s - 1 < t < segment.end_s:
            return str(segment.segment_id)
    return None


def _videos(
    prompt_text: str, items: Sequence[_Item], read: Callable[[str], list[TimedPicture]]
) -> dict[str, list[media.Frame]]:
    """Segment id → the frames the request carried, timed in the source video: each image
    after its ``(video-id @ MM:SS)`` label, each video's frames (as vLLM reads them) after its
    clip label, offset by the clip's start."""
    try:
        segments = getattr(parse_context(prompt_text), "segments", ())
    except ValueError:
        return {}
    videos: dict[str, list[media.Frame]] = {}
    label: tuple[str, float] | None = None
    clip: tuple[str, float] | None = None
    for item in items:
        if item.kind == "text":
            match = _LABEL_RE.match(item.value.strip())
            label = (match["video"], int(match["min"]) * 60 + int(match["sec"])) if match else None
            found = _CLIP_LABEL_RE.match(item.value.strip())
            clip = (found["segment"], int(found["min"]) * 60 + int(found["sec"])) if found else None
            continue
        if item.kind == "video":
            if clip is not None:
                segment_id, start = clip
                for t, picture in read(item.value):
                    frame = media.Frame(t=start + t, image=picture)
                    videos.setdefault(segment_id, []).append(frame)
            clip = None
            continue
        if label is None:
            continue
        segment_id = _segment_for(segments, *label)
        if segment_id is not None:
            frame = media.Frame(t=float(label[1]), image=np.asarray(_image(item.value)))
            videos.setdefault(segment_id, []).append(frame)
        label = None
    return videos


@functools.lru_cache(maxsize=8)
def _decoded_video(data_url: str) -> tuple[float, tuple[npt.NDArray[np.uint8], ...]]:
    """The frames of a data-URI mp4 and its frame rate (as OpenCV reports them to vLLM)."""
    _, _, encoded = data_url.partition("base64,")
    try:
        with av.open(io.BytesIO(base64.b64decode(encoded))) as container:
            stream = container.streams.video[0]
            fps = float(stream.average_rate or 0) or 1.0
            frames = tuple(f.to_ndarray(format="rgb24") for f in container.decode(video=0))
    except (av.error.FFmpegError, IndexError) as exc:
        raise ValueError(f"Could not open video stream: {exc}") from exc
    return fps, frames


def vllm_video_frames(data_url: str, num_frames: int) -> list[TimedPicture]:
    """(clip time, picture) of the frames vLLM reads of a video: all of them up to
    ``num_frames``, else that many spread uniformly — vllm/multimodal/video.py, the OpenCV
    loader: ``full_read = num_frames == -1 or total_frames_num < num_frames``, else
    ``np.linspace(0, total_frames_num - 1, num_frames, dtype=int)``; ``VideoMediaIO``'s
    ``num_frames`` is 32 unless ``--media-io-kwargs '{"video": {"num_frames": N}}'``."""
    fps, frames = _decoded_video(data_url)
    indices = list(range(len(frames)))
    if 0 < num_frames < len(frames):
        indices = [int(i) for i in np.linspace(0, len(frames) - 1, num_frames, dtype=int)]
    return [(i / fps, frames[i]) for i in indices]


def vllm_qwen_video_frames(
    data_url: str, vision: VLLMVision, fps: float = QWEN_VL_SAMPLING_FPS
) -> list[TimedPicture]:
    """(clip time, picture) of the frames a Qwen-VL model on vLLM reads of a video: every
    decoded frame, sampled again at ``fps`` by its video processor (:meth:`VLLMVision.sampled`,
    whatever ``num_frames`` says)."""
    video_fps, frames = _decoded_video(data_url)
    return [(i / video_fps, frames[i]) for i in vision.sampled(len(frames), video_fps, fps)]


def _text_tokens(text: str) -> int:
    return len(text) // 4


# -- answering ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Answer:
    """What the model says and what it costs, before the wire envelope."""

    model: str
    text: str
    usage: dict[str, int]
    reasoning: int = 0  # tokens it thought before answering (counted in the output's)
    cut: bool = False  # the output cap ended it before the answer was whole


@dataclass
class OpenAIFake:
    """The fake's state: the server, files and batches it holds, and the last usage."""

    api: Api
    server: FakeProviderServer = field(default_factory=FakeProviderServer)
    report_cost: bool = False
    # Refuse a ``strict: true`` schema outside OpenAI's subset, as OpenAI does on both APIs
    # (default: the Responses fake, which is OpenAI; a vLLM server takes ``strict`` and ignores
    # it — ``JsonSchemaResponseFormat.strict`` in vllm/entrypoints/openai/protocol.py).
    checks_strict_schemas: bool | None = None
    # The model ids it serves (default: OpenAI's of :data:`OPENAI_VISION`, which include our
    # defaults gpt-5.4 and gpt-5.4-mini; a vLLM server's :data:`VLLM_SERVED`). Any other id is
    # refused as the service refuses it.
    served_models: tuple[str, ...] = ()
    # An account out of credit: OpenAI answers every model request 429 ``insufficient_quota``
    # until billing is fixed (waiting does not help), unlike a rate limit.
    quota_exhausted: bool = False
    # vLLM's ``--limit-mm-per-prompt`` (modality → most items a prompt may carry; unset: 999)
    # and ``--media-io-kwargs '{"video": {"num_frames": N}}'`` (frames it reads of a video).
    limit_mm_per_prompt: dict[str, int] = field(default_factory=dict)
    video_num_frames: int = VLLM_DEFAULT_VIDEO_FRAMES
    # vLLM's ``--max-model-len``: prompt and completion together, reported on ``/v1/models``.
    max_model_len: int = VLLM_DEFAULT_MAX_MODEL_LEN
    # OpenAI reasoning: tokens a response thinks at each ``reasoning.effort`` before it answers
    # (the guide gives no figure: a test sets what it needs); they count against
    # ``max_output_tokens``.
    reasoning_tokens: dict[str, int] = field(default_factory=dict)
    # Per model request, per video part: how many frames the server read of it.
    videos_read: list[list[int]] = field(default_factory=list)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # id → (purpose, data)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    usage_log: list[dict[str, int]] = field(default_factory=list)
    _previous: list[tuple[str, int]] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.checks_strict_schemas is None:
            self.checks_strict_schemas = self.api == "responses"
        if not self.served_models:
            self.served_models = tuple(OPENAI_VISION) if self.api == "responses" else VLLM_SERVED
        if self.api == "responses":
            self.server.route("POST", "/v1/responses", self._responses)
        else:
            self.server.route("POST", "/v1/chat/completions", self._chat)
        self.server.route("GET", "/v1/models", self._list_models)
        self.server.route("POST", "/v1/files", self._upload)
        self.server.route("GET", "/v1/files/", self._file)
        self.server.route("DELETE", "/v1/files/", self._delete_file)
        self.server.route("POST", "/v1/batches", self._batch_create)
        self.server.route("GET", "/v1/batches/", self._batch_get)

    def _list_models(self, request: SeenRequest) -> Reply:
        """``GET /v1/models``: the served ids, in the list shape both services answer.

        OpenAI API reference, Models, "List models": ``{"object": "list", "data": [{"id",
        "object": "model", "created", "owned_by"}]}``. vLLM (``show_available_models`` in
        vllm/entrypoints/openai/serving_models.py) answers the same list of ``ModelCard``s
        (vllm/entrypoints/openai/protocol.py: ``owned_by`` "vllm", ``root`` the served model's
        path, ``max_model_len``)."""
        del request
        owner = "openai" if self.api == "responses" else "vllm"
        cards: list[dict[str, Any]] = []
        for model in self.served_models:
            card: dict[str, Any] = {
                "id": model,
                "object": "model",
                "created": 1_700_000_000,
                "owned_by": owner,
            }
            if self.api == "chat":
                card |= {"root": model, "parent": None, "max_model_len": self.max_model_len}
            cards.append(card)
        return Reply.json(200, {"object": "list", "data": cards})

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids)}"

    # model requests

    def _responses(self, request: SeenRequest) -> Reply:
        return self._model_reply(request, self._responses_body)

    def _chat(self, request: SeenRequest) -> Reply:
        return self._model_reply(request, self._chat_body)

    def _model_reply(self, request: SeenRequest, envelope: Any) -> Reply:
        body = request.json()
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.", "invalid_json")
        refused = self._refusal(body)
        if refused is not None:
            return refused
        fault = self.server.next_fault(request)
        if fault == "429":
            return _error(
                429,
                "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1.",
                "rate_limit_exceeded",
                error_type="requests",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        if fault == "500":
            return _error(
                500,
                "The server had an error while processing your request. Sorry about that!",
                None,
                error_type="server_error",
            )
        if fault == "malformed":
            return Reply(
                200, b'{"id": "resp_cut", "output": [', {"Content-Type": "application/json"}
            )
        try:
            answer = self._answer(body)
        except (ValueError, MediaError) as exc:  # no frames for a video role, a bad context
            return _error(400, str(exc), "invalid_request")
        if self.api == "responses":
            answer = self._reasoned(answer, body)
        reply = Reply.json(200, envelope(answer, fault))
        if fault == "timeout":
            return Reply(
                reply.status, reply.body, reply.headers, delay_s=self.server.timeout_sleep_s
            )
        return reply

    def _refusal(self, body: dict[str, Any]) -> Reply | None:
        """What the service answers a request it will not run, before any model sees it."""
        model = body.get("model")
        if model not in self.served_models:
            return self._unknown_model(model)
        if self.quota_exhausted:
            # OpenAI's "Error codes" guide (https://platform.openai.com/docs/guides/error-codes):
            # "429 - You exceeded your current quota, please check your plan and billing
            # details"; the body's type and code are both ``insufficient_quota``.
            return _error(429, QUOTA_MESSAGE, "insufficient_quota", error_type="insufficient_quota")
        if self.api == "chat":
            over = self._over_mm_limit(str(model), _items(self.api, body))
            if over is not None:
                return over
            too_long = self._over_max_model_len(str(model), body)
            if too_long is not None:
                return too_long
        else:
            too_many = self._over_image_limits(_items(self.api, body))
            if too_many is not None:
                return too_many
        fmt = _format(self.api, body)
        if self.checks_strict_schemas and fmt.get("strict") is True:
            violation = strict_schema_violation(fmt.get("schema"))
            if violation is not None:
                return _error(
                    400,
                    f"Invalid schema for response_format {fmt.get('name')!r}: {violation}",
                    "invalid_json_schema",
                    param="text.format.schema" if self.api == "responses" else "response_format",
                )
        return None

    def _reasoned(self, answer: _Answer, body: dict[str, Any]) -> _Answer:
        """The answer of a reasoning request: OpenAI's API reference, Responses,
        ``max_output_tokens``: "An upper bound for the number of tokens that can be generated
        for a response, including visible output tokens and reasoning tokens"; the "Reasoning
        models" guide: reaching it gives ``status: incomplete`` with ``incomplete_details.reason``
        ``max_output_tokens``, which "might occur before any visible output tokens are
        produced"."""
        effort = (body.get("reasoning") or {}).get("effort")
        thought = self.reasoning_tokens.get(str(effort), 0)
        if not thought:
            return answer
        cap = body.get("max_output_tokens")
        wanted = answer.usage["output_tokens"]
        usage = dict(answer.usage)
        if isinstance(cap, int) and thought + wanted > cap:
            room = max(cap - thought, 0)
            usage["output_tokens"] = cap
            return _Answer(answer.model, answer.text[: room * 4], usage, min(thought, cap), True)
        usage["output_tokens"] = thought + wanted
        return _Answer(answer.model, answer.text, usage, thought)

    def _over_image_limits(self, items: Sequence[_Item]) -> Reply | None:
        """OpenAI's image limits per request (:data:`OPENAI_MAX_IMAGES`,
        :data:`OPENAI_MAX_IMAGE_PAYLOAD`), a 400 ``invalid_request_error``."""
        images = [item for item in items if item.kind == "image"]
        if len(images) > OPENAI_MAX_IMAGES:
            return _error(
                400,
                f"Too many images: {len(images)} were provided; at most {OPENAI_MAX_IMAGES} "
                "image inputs are allowed per request.",
                "too_many_images",
                param="input",
            )
        payload = sum(len(item.value) for item in images)
        if payload > OPENAI_MAX_IMAGE_PAYLOAD:
            return _error(
                400,
                f"The request's images total {payload} bytes; at most "
                f"{OPENAI_MAX_IMAGE_PAYLOAD} are allowed per request.",
                "request_too_large",
                param="input",
            )
        return None

    def _over_max_model_len(self, model: str, body: dict[str, Any]) -> Reply | None:
        """vLLM's length check of a chat request (``_validate_input`` in
        vllm/entrypoints/openai/serving_engine.py): the prompt's tokens (the served model's own
        processor's count, :meth:`_item_tokens`) and ``max_tokens`` together past
        ``max_model_len`` are a 400 "This model's maximum context length is N tokens. However,
        you requested M tokens (P in the messages, C in the completion). Please reduce the
        length of the messages or completion."""
        items = _items(self.api, body)
        schema = _schema(self.api, body)
        prompt = sum(self._item_tokens(model, item, body) for item in items)
        prompt += _text_tokens(json.dumps(schema)) if schema is not None else 0
        completion = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        if prompt + completion <= self.max_model_len:
            return None
        message = (
            f"This model's maximum context length is {self.max_model_len} tokens. However, you "
            f"requested {prompt + completion} tokens ({prompt} in the messages, {completion} in "
            "the completion). Please reduce the length of the messages or completion."
        )
        return _vllm_error(400, message, "BadRequestError")

    def _num_frames(self, body: dict[str, Any]) -> int:
        """Frames vLLM reads of each video of the request: the request's own
        ``media_io_kwargs`` over the server's (``request_media_io_kwargs`` of
        parse_chat_messages, vllm/entrypoints/chat_utils.py); -1 reads every frame."""
        asked = ((body.get("media_io_kwargs") or {}).get("video") or {}).get("num_frames")
        return int(asked) if isinstance(asked, int) else self.video_num_frames

    def _read_video(self, model: str, data_url: str, body: dict[str, Any]) -> list[TimedPicture]:
        """The frames the served model reads of a video: a Qwen-VL model's video processor
        samples it at 2 fps, or the request's ``mm_processor_kwargs.fps``
        (:func:`vllm_qwen_video_frames`); any other reads ``num_frames``
        (:func:`vllm_video_frames`)."""
        vision = VLLM_VISION.get(model)
        if vision is None or vision.kind == "internvl":
            return vllm_video_frames(data_url, self._num_frames(body))
        asked = (body.get("mm_processor_kwargs") or {}).get("fps")
        fps = float(asked) if isinstance(asked, int | float) and asked > 0 else None
        return vllm_qwen_video_frames(data_url, vision, fps or QWEN_VL_SAMPLING_FPS)

    def _over_mm_limit(self, model: str, items: Sequence[_Item]) -> Reply | None:
        """vLLM's per-prompt media check (``validate_num_items`` in
        vllm/multimodal/processing.py), a 400 BadRequestError: "At most {limit} {modality}(s)
        may be provided in one prompt.", with " Set `--limit-mm-per-prompt` to increase this
        limit." when the model itself would take that many."""
        vision = VLLM_VISION[model]
        for modality in ("image", "video"):
            count = sum(1 for item in items if item.kind == modality)
            if not count:
                continue
            allowed = self.limit_mm_per_prompt.get(modality, VLLM_DEFAULT_MM_LIMIT)
            supported: int | None = None if modality in vision.modalities else 0
            if supported is not None:
                allowed = min(allowed, supported)
            else:
                supported = allowed
            limit = min(supported, allowed)
            if count > limit:
                message = f"At most {limit} {modality}(s) may be provided in one prompt."
                if count <= supported:
                    message += " Set `--limit-mm-per-prompt` to increase this limit."
                return _vllm_error(400, message, "BadRequestError")
        return None

    def _unknown_model(self, model: object) -> Reply:
        if self.api == "responses":
            # OpenAI: 404 "The model `<id>` does not exist or you do not have access to it.",
            # code ``model_not_found`` (the code pydantic-ai maps to ModelNotFoundError,
            # pydantic_ai/_model_errors.py).
            message = f"The model `{model}` does not exist or you do not have access to it."
            return _error(404, message, "model_not_found")
        # vLLM: ``_check_model`` in vllm/entrypoints/openai/serving_engine.py answers
        # "The model `<id>` does not exist." as a NotFoundError 404, in its ErrorResponse
        # envelope (vllm/entrypoints/openai/protocol.py: error.message, type, param, code=status).
        return _vllm_error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")

    def _answer(self, body: dict[str, Any]) -> _Answer:
        items = _items(self.api, body)
        schema = _schema(self.api, body)
        prompt_text = "\n".join(i.value for i in items if i.kind == "text")
        model = str(body.get("model", ""))
        if self.api == "chat":
            read = [
                len(self._read_video(model, item.value, body))
                for item in items
                if item.kind == "video"
            ]
            with self._lock:
                self.videos_read.append(read)
        if prompt_has_context(prompt_text):
            videos = _videos(
                prompt_text, items, functools.partial(self._read_video, model, body=body)
            )
            text = offline_answer(prompt_text, model, videos)
        elif schema is not None:
            text = json.dumps({"answer": FREE_TEXT_ANSWER})
        else:
            text = FREE_TEXT_ANSWER
        return _Answer(model, text, self._usage(model, items, schema, text, body))

    def _usage(
        self,
        model: str,
        items: Sequence[_Item],
        schema: dict[str, Any] | None,
        text: str,
        body: dict[str, Any],
    ) -> dict[str, int]:
        costs = [
            (hashlib.sha256(item.value.encode()).hexdigest(), self._item_tokens(model, item, body))
            for item in items
        ]

        def total(kind: str) -> int:
            return sum(t for (_, t), i in zip(costs, items, strict=True) if i.kind == kind)

        schema_tokens = _text_tokens(json.dumps(schema)) if schema is not None else 0
        text_tokens = schema_tokens + total("text")
        image_tokens, video_tokens = total("image"), total("video")
        with self._lock:
            shared = 0
            for (key, tokens), (seen, _) in zip(costs, self._previous, strict=False):
                if key != seen:
                    break
                shared += tokens
            self._previous = costs
        cached = (
            shared // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS if shared >= CACHE_MIN_TOKENS else 0
        )
        usage = {
            "input_tokens": text_tokens + image_tokens + video_tokens,
            "output_tokens": max(_text_tokens(text), 1),
            "cached_tokens": cached,
            "text": text_tokens,
            "image": image_tokens,
            "video": video_tokens,
            "audio": 0,
        }
        with self._lock:
            self.usage_log.append(usage)
        return usage

    def _item_tokens(self, model: str, item: _Item, body: dict[str, Any]) -> int:
        """What one input item costs: OpenAI's rule for the model, or the vLLM model's."""
        if item.kind == "text":
            return _text_tokens(item.value)
        if self.api == "responses":
            image = _image(item.value)
            return OPENAI_VISION[model].tokens(image.width, image.height, item.detail)
        vision = VLLM_VISION[model]
        if item.kind == "image":
            image = _image(item.value)
            return vision.image_tokens(image.width, image.height)
        frames = self._read_video(model, item.value, body)
        height, width = frames[0][1].shape[:2] if frames else (0, 0)
        return vision.video_tokens(len(frames), width, height) if frames else 0

    def _responses_body(self, answer: _Answer, fault: Fault | None) -> dict[str, Any]:
        usage = answer.usage
        status, incomplete = "completed", None
        content: list[dict[str, Any]]
        if fault == "refusal":
            content = [{"type": "refusal", "refusal": REFUSAL_TEXT}]
        elif fault == "truncated":
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
            content = [_output_text(answer.text[: len(answer.text) // 2])]
        elif answer.cut:
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
            content = [_output_text(answer.text)] if answer.text else []
        else:
            content = [_output_text(answer.text)]
        return {
            "id": self._next_id("resp_"),
            "object": "response",
            "created_at": CREATED_AT,
            "status": status,
            "error": None,
            "incomplete_details": incomplete,
            "instructions": None,
            "max_output_tokens": None,
            "model": answer.model,
            "output": [
                {
                    "type": "message",
                    "id": self._next_id("msg_"),
                    "status": status,
                    "role": "assistant",
                    "content": content,
                }
            ],
            "parallel_tool_calls": True,
            "temperature": 0.0,
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": {
                "input_tokens": usage["input_tokens"],
                "input_tokens_details": {"cached_tokens": usage["cached_tokens"]},
                "output_tokens": usage["output_tokens"],
                "output_tokens_details": {"reasoning_tokens": answer.reasoning},
                "total_tokens": usage["input_tokens"] + usage["output_tokens"],
            },
            "metadata": {},
        }

    def _chat_body(self, answer: _Answer, fault: Fault | None) -> dict[str, Any]:
        usage = answer.usage
        message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
        finish_reason = "stop"
        if fault == "refusal":
            message = {"role": "assistant", "content": None, "refusal": REFUSAL_TEXT}
        elif fault == "truncated":
            message["content"] = answer.text[: len(answer.text) // 2]
            finish_reason = "length"
        wire_usage: dict[str, Any] = {
            "prompt_tokens": usage["input_tokens"],
            "completion_tokens": usage["output_tokens"],
            "total_tokens": usage["input_tokens"] + usage["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": usage["cached_tokens"]},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
        if self.report_cost:
            wire_usage["cost"] = chat_cost_usd(usage)
        return {
            "id": self._next_id("chatcmpl-"),
            "object": "chat.completion",
            "created": CREATED_AT,
            "model": answer.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
            ],
            "usage": wire_usage,
        }

    # files and batches

    def _upload(self, request: SeenRequest) -> Reply:
        fields = _multipart(request)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        filename, data = fields.get("file", ("upload", b""))
        file_id = self._next_id("file-")
        self.files[file_id] = (purpose, data)
        return Reply.json(200, _file_object(file_id, filename or "upload", purpose, data))

    def _file(self, request: SeenRequest) -> Reply:
        path = request.path.split("?")[0]
        file_id = path.removeprefix("/v1/files/").removesuffix("/content")
        if file_id not in self.files:
            return _error(404, f"No such File object: {file_id}", None, "invalid_request_error")
        purpose, data = self.files[file_id]
        if path.endswith("/content"):
            return Reply(200, data, {"Content-Type": "application/octet-stream"})
        return Reply.json(200, _file_object(file_id, "batch.jsonl", purpose, data))

    def _delete_file(self, request: SeenRequest) -> Reply:
        file_id = request.path.split("?")[0].removeprefix("/v1/files/")
        deleted = self.files.pop(file_id, None) is not None
        return Reply.json(200, {"id": file_id, "object": "file", "deleted": deleted})

    def _batch_create(self, request: SeenRequest) -> Reply:
        path = request.path.split("?")[0]
        if path.endswith("/cancel"):
            batch_id = path.removeprefix("/v1/batches/").removesuffix("/cancel")
            batch = self.batches[batch_id]
            if batch["status"] not in ("completed", "failed", "expired"):
                batch["status"] = "cancelled"
                batch["cancelled_at"] = CREATED_AT
            return Reply.json(200, batch)
        body = request.json() or {}
        input_file_id = str(body.get("input_file_id", ""))
        if input_file_id not in self.files:
            return _error(400, f"Invalid input_file_id {input_file_id!r}", "invalid_file")
        batch_id = self._next_id("batch_")
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "errors": None,
            "input_file_id": input_file_id,
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": CREATED_AT,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": None,
        }
        return Reply.json(200, self.batches[batch_id])

    def _batch_get(self, request: SeenRequest) -> Reply:
        batch_id = request.path.split("?")[0].removeprefix("/v1/batches/")
        batch = self.batches.get(batch_id)
        if batch is None:
            return _error(404, f"No batch found with id '{batch_id}'.", None)
        # Each look moves it on one step, so a client polls at least once before it ends.
        if batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif batch["status"] == "in_progress":
            self._run_batch(batch)
        return Reply.json(200, batch)

    def _run_batch(self, batch: dict[str, Any]) -> None:
        # The Batch API writes two files: ``output_file_id`` "the file containing the outputs of
        # successfully executed requests", ``error_file_id`` "the file containing the outputs
        # of requests with errors" (openai/types/batch.py); each is set only when it has lines.
        _, data = self.files[batch["input_file_id"]]
        lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        succeeded: list[str] = []
        failed: list[str] = []
        for line in lines:
            result = self._batch_line_result(line["body"])
            written = json.dumps(
                {"id": self._next_id("batch_req_"), "custom_id": line["custom_id"]}
                | {"response": result, "error": None}
            )
            (succeeded if result["status_code"] == 200 else failed).append(written)
        output_id = self._batch_file("batch_output", succeeded)
        error_id = self._batch_file("batch_output", failed)
        batch.update(
            status="completed",
            output_file_id=output_id,
            error_file_id=error_id,
            completed_at=CREATED_AT,
            request_counts={
                "total": len(lines),
                "completed": len(succeeded),
                "failed": len(failed),
            },
        )

    def _batch_line_result(self, body: dict[str, Any]) -> dict[str, Any]:
        """One line's ``response``: the status and body the request would have had alone."""
        request_id = self._next_id("req_")
        refused = self._refusal(body)
        if refused is not None:
            return {
                "status_code": refused.status,
                "request_id": request_id,
                "body": json.loads(refused.body),
            }
        try:
            answer = self._answer(body)
        except (ValueError, MediaError) as exc:
            error = {"message": str(exc), "type": "invalid_request_error", "param": None}
            return {
                "status_code": 400,
                "request_id": request_id,
                "body": {"error": error | {"code": "invalid_request"}},
            }
        return {
            "status_code": 200,
            "request_id": request_id,
            "body": self._responses_body(answer, None),
        }

    def _batch_file(self, purpose: str, lines: list[str]) -> str | None:
        """A file of ``lines`` (its id), or ``None`` when there are none."""
        if not lines:
            return None
        file_id = self._next_id("file-")
        self.files[file_id] = (purpose, "\n".join(lines).encode())
        return file_id

    def file_lines(self, file_id: str | None) -> list[dict[str, Any]]:
        """The JSON lines of a file the fake holds (none for ``None``)."""
        if file_id is None:
            return []
        _, data = self.files[file_id]
        return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def chat_cost_usd(usage: dict[str, int]) -> float:
    """The ``usage.cost`` the compatible fake reports (OpenRouter-style) for ``usage``."""
    return (usage["input_tokens"] + usage["output_tokens"]) * COST_PER_TOKEN_USD


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _error(
    status: int,
    message: str,
    code: str | None,
    error_type: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
    param: str | None = None,
) -> Reply:
    error = {"message": message, "type": error_type, "param": param, "code": code}
    return Reply.json(status, {"error": error}, headers)


def _vllm_error(status: int, message: str, error_type: str, param: str | None = None) -> Reply:
    """vLLM's ErrorResponse: ``{"error": {"message", "type", "param", "code": <status>}}``."""
    error = {"message": message, "type": error_type, "param": param, "code": status}
    return Reply.json(status, {"error": error})


def _file_object(file_id: str, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(data),
        "created_at": CREATED_AT,
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
    }


def _multipart(request: SeenRequest) -> dict[str, tuple[str | None, bytes]]:
    """Field name → (file name, bytes) of a ``multipart/form-data`` body."""
    content_type = next(v for k, v in request.headers.items() if k.lower() == "content-type")
    raw = f"Content-Type: {content_type}\r\n\r\n".encode() + request.body
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = (part.get_filename(), payload)
    return fields


# -- harnesses ------------------------------------------------------------------------------------


class OpenAIHarness(Harness):
    """The contract-test view of the fake (Responses API or Chat Completions)."""

    def __init__(self, fake: OpenAIFake, name: str) -> None:
        self.fake = fake
        self.server = fake.server
        self.name = name

    @property
    def api(self) -> Api:
        """Which API the fake serves."""
        return self.fake.api

    @property
    def default_model(self) -> str:
        """Our id of a model the fake serves: gpt-5.4, or the InternVL judge (sent frames)."""
        return "gpt-5.4" if self.api == "responses" else "internvl3.5-8b"

    def config(self, model_id: str, **config: Any) -> ProviderConfig:
        """The adapter configuration pointed at the fake; the wire name is the one the app
        gives our id (``default_endpoints``: ``qwen3-vl-30b-a3b`` →
        ``Qwen/Qwen3-VL-30B-A3B-Instruct``), else the id itself."""
        family = "openai" if self.api == "responses" else "openai-compatible"
        key = "sk-fake-key" if self.api == "responses" else None
        endpoint = default_endpoints().get(model_id)
        values: dict[str, Any] = {
            "family": family,
            "model_name": (endpoint.model_name if endpoint else None) or model_id,
            "base_url": f"{self.server.base_url}/v1",
            "api_key": key,
        }
        return ProviderConfig(**(values | config))

    def model(self, model_id: str, **config: Any) -> Any:
        """Our adapter for ``model_id`` against the fake."""
        factory = openai_model if self.api == "responses" else openai_compatible_model
        return factory(model_id, self.config(model_id, **config))

    def model_requests(self) -> list[SeenRequest]:
        """The generation requests, in order."""
        path = "/v1/responses" if self.api == "responses" else "/v1/chat/completions"
        return self.server.seen("POST", path)

    def prompt_text(self, request: SeenRequest) -> str:
        """Every text the request carries, joined by newlines."""
        return "\n".join(i.value for i in _items(self.api, request.json()) if i.kind == "text")

    def media(self, request: SeenRequest) -> list[dict[str, Any]]:
        """One ``{"kind": "image"}`` per frame, ``{"kind": "video", "fps", "frames",
        "start_s", "end_s", "audio", "size"}`` per video (vLLM's ``video_url``), timed in the
        source video by the clip label before it."""
        out: list[dict[str, Any]] = []
        start = 0.0
        for item in _items(self.api, request.json()):
            if item.kind == "text":
                found = _CLIP_LABEL_RE.match(item.value.strip())
                start = int(found["min"]) * 60 + int(found["sec"]) if found else start
            elif item.kind == "image":
                out.append({"kind": "image"})
            else:
                fps, frames = _decoded_video(item.value)
                height, width = frames[0].shape[:2] if frames else (0, 0)
                out.append(
                    {
                        "kind": "video",
                        "fps": fps,
                        "frames": len(frames),
                        "start_s": start,
                        "end_s": start + len(frames) / fps,
                        "audio": False,  # the mp4 carries no audio stream
                        "size": (width, height),
                    }
                )
        return out

    def items(self, request: SeenRequest) -> list[tuple[str, str]]:
        """The request's input in order: ``("text", text)`` or ``("image", data URL)``."""
        return [(i.kind, i.value) for i in _items(self.api, request.json())]

    def output_schema(self, request: SeenRequest) -> dict[str, Any] | None:
        """The ``json_schema`` the request asks for."""
        return _schema(self.api, request.json())

    def last_usage(self) -> dict[str, int]:
        """The usage of the fake's last answer."""
        return dict(self.fake.usage_log[-1])


@contextmanager
def openai_harness(**kw: Any) -> Iterator[OpenAIHarness]:
    """The fake OpenAI (Responses API + batches), running, with its harness."""
    fake = OpenAIFake("responses", **kw)
    with serve_provider(fake.server):
        yield OpenAIHarness(fake, "openai")


@contextmanager
def openai_compatible_harness(**kw: Any) -> Iterator[OpenAIHarness]:
    """A fake OpenAI-compatible server (Chat Completions, as vLLM serves), running, with its
    harness; ``report_cost=True`` makes it report an OpenRouter-style ``usage.cost``."""
    fake = OpenAIFake("chat", **kw)
    with serve_provider(fake.server):
        yield OpenAIHarness(fake, "openai-compatible")
