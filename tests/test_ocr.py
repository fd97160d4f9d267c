"""On-screen text: RapidOCR reads the labels the demo's scenes show from frames decoded out of
its mp4 files (as the indexer decodes them), and with ``ocr`` on the indexer embeds what is
shown beside what is said, while the stored transcript stays what was said."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from playlisteval.app import App, build_transcriber, index_config
from playlisteval.settings import load_settings
from tools.index import media
from tools.index.indexer import Indexer
from tools.index.ocr import ScreenTextReader, distinct_frames, with_screen_text


def _truth(playlist: Path) -> list[dict[str, Any]]:
    data = json.loads((playlist.parent / "ground_truth.json").read_text())
    videos: list[dict[str, Any]] = data["videos"]
    return videos


@pytest.mark.slow
def test_the_labels_of_demo_scenes_are_read_from_their_decoded_frames(
    demo_playlist: Path,
) -> None:
    video = _truth(demo_playlist)[0]
    reader = ScreenTextReader()
    for scene in video["scenes"][:3]:
        middle = (scene["start_s"] + scene["end_s"]) / 2
        frame = next(
            iter(media.iter_frames(demo_playlist.parent / video["path"], 0.5, 180, middle))
        )
        read = "".join(reader.read_frame(frame.image)).replace(" ", "")
        assert read == scene["on_screen_text"].replace(" ", "")


def test_a_still_scene_is_read_once_and_moving_footage_at_most_max_frames() -> None:
    rng = np.random.default_rng(0)
    still = rng.integers(0, 255, (90, 120, 3), dtype=np.uint8)
    other = rng.integers(0, 255, (90, 120, 3), dtype=np.uint8)
    assert distinct_frames([still, still.copy(), still, other, other], 4) == [0, 3]
    moving = [rng.integers(0, 255, (90, 120, 3), dtype=np.uint8) for _ in range(15)]
    assert distinct_frames(moving, 4) == [0, 5, 9, 14]


@pytest.mark.parametrize(
    ("transcript", "screen", "text"),
    [
        ("we knead the dough", "KILO 42", "we knead the dough\nOn screen: KILO 42"),
        ("", "KILO 42", "On screen: KILO 42"),
        ("we knead the dough", "", "we knead the dough"),
    ],
)
def test_the_embedded_text_is_the_transcript_and_what_is_shown(
    transcript: str, screen: str, text: str
) -> None:
    assert with_screen_text(transcript, screen) == text


class _Recording:
    """An embedder that records the transcripts it is given and otherwise is the real one."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.texts: list[str] = []
        self.name = wrapped.name
        self.dim = wrapped.dim
        self.frame_height = getattr(wrapped, "frame_height", None)

    def embed_chunks(self, contents: Any) -> Any:
        self.texts.extend(c.transcript for c in contents)
        return self.wrapped.embed_chunks(contents)

    def embed_query(self, query: str) -> Any:
        return self.wrapped.embed_query(query)


@pytest.mark.slow
def test_with_ocr_on_the_shown_labels_are_embedded_and_the_transcript_is_unchanged(
    demo_playlist: Path, tmp_path: Path
) -> None:
    video = _truth(demo_playlist)[0]
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copyfile(demo_playlist.parent / video["path"], folder / "episode.mp4")
    shutil.copyfile(demo_playlist.parent / video["captions"][0], folder / "episode.vtt")
    with App(load_settings(tmp_path / "home")) as app:
        embedder = _Recording(app.embedder)
        indexer = Indexer(
            catalog=app.catalog,
            vectors=app.vectors,
            embedder=embedder,  # type: ignore[arg-type]
            transcriber=build_transcriber(app.settings),
            config=replace(index_config(app.settings), ocr=True),
            media_dir=app.workspace.media,
        )
        indexer.add(str(folder), domain="cooking")
        indexer.prepare_media()
        indexer.index_ready()
        (row,) = app.catalog.videos()
        stored = [c.transcript for c in app.catalog.chunks(row.id)]
    labels = [s["on_screen_text"].replace(" ", "") for s in video["scenes"]]
    embedded = " ".join(embedder.texts).replace(" ", "")
    assert sum(label in embedded for label in labels) >= len(labels) - 1
    assert all("On screen:" not in text for text in stored)
    assert len(embedder.texts) == len(stored)


@pytest.mark.parametrize("ocr", [True, False])
def test_index_ocr_in_the_settings_reaches_the_indexer(ocr: bool, tmp_path: Path) -> None:
    config = index_config(load_settings(tmp_path, index={"ocr": ocr}))
    assert config.ocr is ocr


class _Texts:
    """An embedder that keeps the texts it is given and returns a zero vector per chunk."""

    name = "texts"
    dim = 4

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_chunks(self, contents: Any) -> Any:
        self.texts.extend(c.transcript for c in contents)
        return np.zeros((len(contents), self.dim), dtype=np.float32)


@pytest.mark.slow
def test_the_ray_embedding_stage_with_ocr_embeds_the_shown_label_beside_the_transcript(
    demo_playlist: Path,
) -> None:
    import pickle

    from tools.index.indexer import BatchTranscript
    from tools.index.ray_index import BATCH, ChunkBatch, EmbedStage, RayModels

    video = _truth(demo_playlist)[0]
    scene = video["scenes"][0]
    middle = (scene["start_s"] + scene["end_s"]) / 2
    frame = next(iter(media.iter_frames(demo_playlist.parent / video["path"], 0.5, 180, middle)))
    batch = ChunkBatch(
        video_id="v",
        idx=[0],
        spans=[(scene["start_s"], scene["end_s"])],
        frames=[[frame.image]],
        audio=None,
        captions=(),
        path="",
        rate=16000,
        transcript=BatchTranscript(texts=["we knead the dough"], source="captions", note=""),
    )
    row = {"video_id": "v", "kind": BATCH, "data": pickle.dumps(batch)}
    for ocr, wanted in ((True, scene["on_screen_text"].replace(" ", "")), (False, None)):
        embedder = _Texts()
        models = RayModels(
            embedder=lambda e=embedder: e,  # type: ignore[misc]
            transcriber=lambda: None,  # type: ignore[arg-type,return-value]
            frame_height=None,
            audio="never",
        )
        out = EmbedStage(models, ocr=ocr)(row)
        stored: ChunkBatch = pickle.loads(out["data"])
        assert stored.transcript is not None
        assert stored.transcript.texts == ["we knead the dough"]  # what was said, unchanged
        (text,) = embedder.texts
        if wanted is None:
            assert text == "we knead the dough"
        else:
            assert text.startswith("we knead the dough\nOn screen: ")
            assert wanted in text.replace(" ", "")
