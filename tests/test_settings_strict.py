"""Settings from the environment refuse a section they do not know, as the file does, and a
boolean where a number goes is refused wherever it comes from (never read as 1 or 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval.cli import EXIT_FIX
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.errors import ConfigError


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / SETTINGS_FILE).write_text(text)
    return home


def test_a_misspelt_section_in_a_variable_is_named_with_the_known_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYLISTEVAL_INDX__CHUNK_SECONDS", "5")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    message = str(caught.value)
    assert message.startswith("PLAYLISTEVAL_INDX__CHUNK_SECONDS: no settings section 'indx'")
    assert "did you mean PLAYLISTEVAL_INDEX__" in message
    assert "ingest, index, vectors" in message
    assert "\n" not in message


def test_a_section_nothing_resembles_is_named_without_a_guess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYLISTEVAL_ZZZQQQ__X", "1")
    with pytest.raises(ConfigError, match=r"^PLAYLISTEVAL_ZZZQQQ__X: no settings section") as c:
        load_settings(tmp_path)
    assert "did you mean" not in str(c.value)


@pytest.mark.parametrize(
    "name",
    ["PLAYLISTEVAL_INDEX__CHUNK_SECONDS", "playlisteval_index__chunk_seconds"],
)
def test_a_known_section_in_a_variable_still_sets_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "5")
    monkeypatch.setenv("PLAYLISTEVAL_LOG_LEVEL", "info")  # not a setting: no `__`, left alone
    assert load_settings(tmp_path).index.chunk_seconds == 5.0


def test_the_cli_refuses_a_misspelt_section_in_one_line(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYLISTEVAL_CURATIN__CONCURRENCY", "4")
    result = CliRunner().invoke(cli_app, ["status", "--home", str(workspace)])
    assert result.exit_code == EXIT_FIX, result.output
    flat = " ".join(result.output.split())
    assert "error: PLAYLISTEVAL_CURATIN__CONCURRENCY: no settings section 'curatin'" in flat
    assert "PLAYLISTEVAL_CURATION__" in flat
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[index]\nchunk_seconds = true\n", "index.chunk_seconds"),
        ("[index]\naudio_rate = false\n", "index.audio_rate"),
        ("[budget]\ncap_usd = true\n", "budget.cap_usd"),
        ("[curation]\nconcurrency = true\n", "curation.concurrency"),
        ("[providers.gemini]\nrpm = true\n", "providers.gemini.rpm"),
        ('[providers.models."m-1"]\nvideo_fps = true\n', "providers.models.m-1.video_fps"),
        ('[budget.price_overrides."m-1"]\ninput_per_mtok = true\n', "budget.price_overrides"),
    ],
)
def test_a_boolean_where_a_number_goes_in_the_file_is_refused(
    tmp_path: Path, text: str, named: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path / "h", text))
    assert f"{named}: Value error, true or false is no number" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("PLAYLISTEVAL_INDEX", '{"chunk_seconds": true}', "index.chunk_seconds"),
        ("PLAYLISTEVAL_INDEX__CHUNK_SECONDS", "true", "index.chunk_seconds"),
        ("PLAYLISTEVAL_PROVIDERS__GEMINI__RPM", "true", "providers.gemini.rpm"),
    ],
)
def test_a_boolean_where_a_number_goes_in_a_variable_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, named: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=rf"{named}: .*(got True|got 'true')"):
        load_settings(tmp_path)


def test_booleans_and_numbers_in_their_own_places_still_load(tmp_path: Path) -> None:
    text = "[index]\nchunk_seconds = 20\naudio_rate = 8000\n[curation]\noffline = false\n"
    settings = load_settings(write(tmp_path / "h", text))
    assert settings.index.chunk_seconds == 20.0
    assert settings.index.audio_rate == 8000
    assert settings.curation.offline is False


def test_a_whole_section_variable_and_a_key_variable_meet_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A section given as JSON, a key of it given on its own, and the file: the key variable wins
    over the section's JSON, which wins over the file; keys no variable names keep the file's."""
    home = write(tmp_path / "h", "[index]\nchunk_seconds = 20\naudio_rate = 8000\n")
    monkeypatch.setenv("PLAYLISTEVAL_INDEX", '{"chunk_seconds": 25, "frame_max_height": 360}')
    monkeypatch.setenv("playlisteval_index__chunk_seconds", "40")
    monkeypatch.setenv("PLAYLISTEVAL_MODELS__SUFFICIENCY", "qwen-3.7-plus")  # text, not JSON
    settings = load_settings(home)
    assert settings.index.chunk_seconds == 40.0
    assert settings.index.frame_max_height == 360
    assert settings.index.audio_rate == 8000
    assert settings.models.sufficiency == "qwen-3.7-plus"
