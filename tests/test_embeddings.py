"""Embedders give unit rows; the offline one ranks by meaning and moves with the pictures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from store.errors import ConfigError, EmbeddingError
from tests.tiny_models import save_tiny_qwen3_vl
from tools.index.embeddings import (
    ChunkContent,
    Embedder,
    FrameStatsTextEmbedder,
    frame_descriptor,
    make_embedder,
)


def _solid(rgb: tuple[int, int, int], height: int = 180, width: int = 320) -> np.ndarray:
    return np.broadcast_to(np.array(rgb, dtype=np.uint8), (height, width, 3)).copy()


def _noise(seed: int, height: int = 90, width: int = 160) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return make_embedder("minilm-text+frame-stats")


def test_semantically_close_transcripts_score_higher_than_unrelated(minilm: Embedder) -> None:
    rows = minilm.embed_chunks(
        [
            ChunkContent((), "The chef chops onions and fries them in butter."),
            ChunkContent((), "Someone is cooking: slicing onions and frying them in a pan."),
            ChunkContent((), "The rocket engine ignites and the launch vehicle lifts off."),
        ]
    )
    assert rows[0] @ rows[1] > rows[0] @ rows[2] + 0.2


def test_query_retrieves_the_matching_chunk_first(minilm: Embedder) -> None:
    transcripts = [
        "welcome back, today we solve quadratic equations with the formula",
        "the goalkeeper dives but the striker scores in the final minute",
        "add two cups of flour and knead the dough for ten minutes",
        "the senate votes on the new budget bill this afternoon",
    ]
    rows = minilm.embed_chunks(
        [ChunkContent([_noise(index)], text) for index, text in enumerate(transcripts)]
    )
    query = minilm.embed_query("how do I bake bread dough")
    assert int(np.argmax(rows @ query)) == 2


@pytest.mark.parametrize(
    "chunk",
    [
        pytest.param(ChunkContent((), ""), id="nothing"),
        pytest.param(ChunkContent((), "just words"), id="no-frames"),
        pytest.param(ChunkContent([_solid((10, 200, 30))], ""), id="no-transcript"),
        pytest.param(ChunkContent([_noise(1, 2, 3)], "tiny frame"), id="tiny-frame"),
        pytest.param(ChunkContent([_noise(1), _noise(2, 40, 30)], "mixed"), id="mixed-sizes"),
    ],
)
def test_rows_are_unit_float32_whatever_is_missing(minilm: Embedder, chunk: ChunkContent) -> None:
    rows = minilm.embed_chunks([chunk, chunk])
    assert rows.shape == (2, minilm.dim)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(rows[0], rows[1], atol=1e-6)


def test_frames_of_different_colours_move_the_vector(minilm: Embedder) -> None:
    text = "the presenter explains the next slide"
    red, blue, red_again = minilm.embed_chunks(
        [
            ChunkContent([_solid((220, 20, 20))] * 3, text),
            ChunkContent([_solid((20, 20, 220))] * 3, text),
            ChunkContent([_solid((215, 25, 20))] * 3, text),
        ]
    )
    assert red @ red_again > red @ blue + 0.05


def test_query_cosine_is_text_weight_times_text_cosine() -> None:
    embedder = FrameStatsTextEmbedder(w_text=0.8, w_frame=0.6)
    chunk = ChunkContent([_noise(3)], "a lecture about photosynthesis in plants")
    row = embedder.embed_chunks([chunk])[0]
    text_only = embedder.embed_chunks([ChunkContent((), chunk.transcript)])[0]
    query = embedder.embed_query("photosynthesis")
    assert row @ query == pytest.approx(0.8 * (text_only @ query), abs=1e-5)


def test_embedding_is_deterministic_and_batch_independent(minilm: Embedder) -> None:
    chunks = [ChunkContent([_noise(seed)], f"chunk number {seed}") for seed in range(5)]
    together = minilm.embed_chunks(chunks)
    alone = np.stack([minilm.embed_chunks([chunk])[0] for chunk in chunks])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert minilm.embed_chunks([]).shape == (0, minilm.dim)


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(np.zeros((10, 10), dtype=np.uint8), id="grey-2d"),
        pytest.param(np.zeros((10, 10, 4), dtype=np.uint8), id="rgba"),
        pytest.param(np.zeros((10, 10, 3), dtype=np.float32), id="float"),
        pytest.param(np.zeros((0, 10, 3), dtype=np.uint8), id="empty"),
    ],
)
def test_bad_frame_is_an_embedding_error_naming_it(minilm: Embedder, frame: np.ndarray) -> None:
    with pytest.raises(EmbeddingError, match="chunk 1 frame 0"):
        minilm.embed_chunks([ChunkContent((), "ok"), ChunkContent([frame], "bad")])


def test_frame_descriptor_is_unit_or_zero() -> None:
    assert not frame_descriptor([]).any()
    np.testing.assert_allclose(np.linalg.norm(frame_descriptor([_noise(0)])), 1.0, rtol=1e-5)


@pytest.mark.parametrize(
    ("name", "options", "error"),
    [
        pytest.param("clip", {}, ConfigError, id="unknown-name"),
        pytest.param("minilm-text+frame-stats", {"w_text": -1.0}, ConfigError, id="neg-weight"),
        pytest.param("minilm-text+frame-stats", {"colour": 1}, ConfigError, id="bad-option"),
        pytest.param(
            "minilm-text+frame-stats", {"model_path": "/nonexistent"}, EmbeddingError, id="no-model"
        ),
    ],
)
def test_make_embedder_rejects_bad_configuration(
    name: str, options: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        make_embedder(name, **options)


# ----------------------------------------------------------------------------------------------
# Qwen3-VL-Embedding on a tiny random model


@pytest.fixture(scope="module")
def tiny_qwen3_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised Qwen3-VL with a tiny BPE tokenizer and image processor on disk."""
    return save_tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3-vl-tiny"), stop_on_every_token=False)


@pytest.mark.slow
def test_qwen3_vl_embedding_on_tiny_random_model(tiny_qwen3_vl: Path) -> None:
    embedder = make_embedder(
        "qwen3-vl-embedding", model=str(tiny_qwen3_vl), dtype="float32", max_frames=2
    )
    chunks = [
        ChunkContent([_noise(0), _noise(1), _noise(2)], "a red cat"),
        ChunkContent([_noise(5)], "a red cat"),
        ChunkContent((), "sat on the mat"),
        ChunkContent((), ""),
    ]
    rows = embedder.embed_chunks(chunks)
    assert rows.shape == (4, embedder.dim) == (4, 64)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(embedder.embed_chunks(chunks), rows, atol=1e-6)
    distinct = {tuple(np.round(row, 5)) for row in rows}
    assert len(distinct) == 4
    query = embedder.embed_query("red cat")
    assert query.shape == (64,)
    assert np.linalg.norm(query) == pytest.approx(1.0, rel=1e-5)
    with pytest.raises(EmbeddingError, match="chunk 0 frame 0"):
        embedder.embed_chunks([ChunkContent([np.zeros((4, 4), dtype=np.uint8)], "x")])


@pytest.mark.slow
def test_qwen3_vl_embedding_in_batches_matches_one_chunk_at_a_time(tiny_qwen3_vl: Path) -> None:
    """Padding a batch changes no row: chunks of different prompt lengths and frame counts
    (none, one, three) embed as they do alone, whatever the batch size."""
    chunks = [
        ChunkContent([_noise(0), _noise(1), _noise(2)], "a red cat sat on the mat"),
        ChunkContent((), "cat"),
        ChunkContent([_noise(5)], ""),
        ChunkContent((), ""),
        ChunkContent([_noise(7), _noise(8)], "the mat"),
    ]
    rows = {}
    for batch_size in (1, 2, 5):
        embedder = make_embedder(
            "qwen3-vl-embedding",
            model=str(tiny_qwen3_vl),
            dtype="float32",
            max_frames=3,
            batch_size=batch_size,
        )
        rows[batch_size] = embedder.embed_chunks(chunks)
    np.testing.assert_allclose(rows[2], rows[1], atol=2e-5)
    np.testing.assert_allclose(rows[5], rows[1], atol=2e-5)
    assert len({tuple(np.round(row, 4)) for row in rows[1]}) == len(chunks)
