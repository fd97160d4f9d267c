"""The offline eyes read the demo scenes back: background, shape colours, kinds and grid cells."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from store.errors import MediaError
from tools.index import media
from tools.offline.synthetic import make_demo_playlist
from tools.offline.vision import VisualFact, decode_clip, describe_frames, describe_image


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("demo")
    make_demo_playlist(
        root, domains=("cooking",), videos_per_domain=2, plant_duplicate=False, narrate=False
    )
    truth = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))
    return root, truth


def _expected(scene: dict[str, Any]) -> set[tuple[str, str, str | None, str | None]]:
    wanted: set[tuple[str, str, str | None, str | None]] = {
        ("background", scene["background"]["colour"], None, None)
    }
    wanted |= {("shape", s["colour"], s["position"], s["kind"]) for s in scene["shapes"]}
    return wanted


def _seen(facts: list[VisualFact], t: float) -> set[tuple[str, str, str | None, str | None]]:
    return {(f.kind, f.colour, f.position, f.shape) for f in facts if f.t_s == t}


def test_scenes_of_the_demo_playlist_are_read_back_nearly_always(
    demo: tuple[Path, dict[str, Any]],
) -> None:
    root, truth = demo
    hits = total = 0
    for video in truth["videos"]:
        facts = describe_frames(media.sample_frames(root / video["path"], fps=0.5), 0.0)
        for scene in video["scenes"]:
            for t in sorted({f.t_s for f in facts if scene["start_s"] <= f.t_s < scene["end_s"]}):
                total += 1
                hits += _seen(facts, t) == _expected(scene)
    assert total >= 100
    assert hits / total >= 0.9


@pytest.mark.parametrize(
    ("video", "t", "expected"),
    [
        (
            "cooking-01",
            4.0,
            {
                ("background", "pink", None, None),
                ("shape", "yellow", "top-right", "triangle"),
                ("shape", "red", "bottom-left", "circle"),
            },
        ),
        (
            "cooking-02",
            64.0,
            {
                ("background", "blue", None, None),
                ("shape", "cyan", "bottom-left", "triangle"),
                ("shape", "red", "center", "square"),
            },
        ),
    ],
)
def test_hand_checked_scenes_are_read_exactly(
    demo: tuple[Path, dict[str, Any]], video: str, t: float, expected: set[Any]
) -> None:
    """A red square on blue leaves a purple halo after chroma subsampling: it is not a shape."""
    root, truth = demo
    path = root / next(v["path"] for v in truth["videos"] if v["id"] == video)
    frames = media.sample_frames(path, fps=1.0, start_s=t, end_s=t + 0.5)
    assert _seen(describe_frames(frames, 0.0), t) == expected
    scene = next(
        s
        for v in truth["videos"]
        if v["id"] == video
        for s in v["scenes"]
        if s["start_s"] <= t < s["end_s"]
    )
    assert _expected(scene) == expected


def test_a_decoded_clip_is_timed_from_its_start_and_offset_into_the_video(
    demo: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, truth = demo
    video = truth["videos"][0]
    clip = media.export_clip(root / video["path"], tmp_path / "clip.mp4", 30.0, 60.0, fps=0.5)
    frames = decode_clip(clip.read_bytes(), fps=0.5)
    assert [f.t for f in frames] == pytest.approx([2.0 * i for i in range(15)])
    facts = describe_frames(frames, offset_s=30.0)
    assert min(f.t_s for f in facts) == pytest.approx(30.0)
    scene = next(s for s in video["scenes"] if s["start_s"] <= 30.0 < s["end_s"])
    assert _seen(facts, 30.0) == _expected(scene)


@pytest.mark.parametrize(
    ("data", "message"), [(b"", "empty"), (b"not a video at all" * 10, "cannot")]
)
def test_unreadable_clips_are_a_media_error(data: bytes, message: str) -> None:
    with pytest.raises(MediaError, match=message):
        decode_clip(data, fps=0.5)


@pytest.mark.parametrize("shape", [(10, 10), (10, 10, 4), (2, 10, 3)])
def test_pictures_that_are_not_rgb_are_a_media_error(shape: tuple[int, ...]) -> None:
    with pytest.raises(MediaError, match="RGB"):
        describe_image(np.zeros(shape, dtype=np.uint8), 0.0)


def test_a_flat_picture_is_only_a_background() -> None:
    image = np.full((120, 160, 3), (40, 80, 220), dtype=np.uint8)
    assert describe_image(image, 1.5) == [VisualFact(t_s=1.5, kind="background", colour="blue")]


def test_the_nearest_colour_is_the_one_at_least_distance() -> None:
    """The matrix-product form picks, for every pixel, the palette colour at least squared
    distance, the first of equals: the definition, computed directly, on seeded random pixels
    (whole values, as decoded frames give, and the fractional means of a blob's body)."""
    from tools.offline.vision import PALETTE_RGB, nearest_colour_index

    rng = np.random.default_rng(7)
    for pixels in (
        rng.integers(0, 256, size=(40, 48, 3)).astype(np.float32),
        rng.uniform(0, 255, size=(500, 3)).astype(np.float32),
        np.repeat(PALETTE_RGB, 3, axis=0),  # the palette itself: distance 0 to its own colour
    ):
        direct = ((pixels[..., None, :] - PALETTE_RGB) ** 2).sum(axis=-1).argmin(axis=-1)
        assert np.array_equal(nearest_colour_index(pixels), direct)
