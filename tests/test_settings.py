"""Settings: bad input is an error that names the setting, never a silent default."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agents.evidence import ClipSpec
from playlisteval.app import curation_config
from playlisteval.cli import app
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.errors import ConfigError


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / SETTINGS_FILE).write_text(text)
    return home


def test_a_misspelt_key_inside_a_section_is_named(tmp_path: Path) -> None:
    home = write(tmp_path / "h", "[index]\nchunk_second = 20\n")
    with pytest.raises(ConfigError, match=r"index\.chunk_second: no such setting"):
        load_settings(home)


def test_a_bad_value_is_named_with_what_was_given(tmp_path: Path) -> None:
    home = write(tmp_path / "h", '[worker]\nlease_s = "soon"\n')
    with pytest.raises(ConfigError, match=r"worker\.lease_s: .*'soon'"):
        load_settings(home)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[providers.gemini]\nrpmm = 5\n", r"providers\.gemini\.rpmm: no such setting"),
        ("[providers.dashscope]\nrpm = -1\n", r"providers\.dashscope\.rpm: .*-1"),
        ("[providers.gemni]\nrpm = 5\n", r"no provider family 'gemni'.*gemini, openai"),
        (
            '[providers.models."m-1"]\nfamily = "vertex"\n',
            r"providers\.models\.m-1\.family: .*no provider family 'vertex'.*dashscope",
        ),
    ],
)
def test_a_family_block_or_family_name_that_is_wrong_is_named(
    tmp_path: Path, text: str, named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        load_settings(write(tmp_path / "h", text))


def test_every_family_block_has_its_specs_defaults(tmp_path: Path) -> None:
    providers = load_settings(write(tmp_path / "h", "[providers.openai]\nrpm = 50\n")).providers
    assert providers.family("openai").rpm == 50
    assert providers.family("gemini").api_key_env == "GEMINI_API_KEY"
    assert providers.family("dashscope").base_url == "https://dashscope-intl.aliyuncs.com/api/v1"
    assert providers.family("transformers").max_concurrency == 1
    assert providers.family("openai-compatible").rpm is None


def test_heartbeats_must_come_within_the_lease(tmp_path: Path) -> None:
    home = write(tmp_path / "h", "[worker]\nlease_s = 10.0\nheartbeat_s = 10.0\n")
    with pytest.raises(ConfigError, match=r"heartbeat_s .* must be below worker\.lease_s"):
        load_settings(home)


def test_the_environment_overrides_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = write(tmp_path / "h", "[daemon]\ntick_s = 5.0\n[budget]\nper_day_usd = 10.0\n")
    monkeypatch.setenv("PLAYLISTEVAL_DAEMON__TICK_S", "2.5")
    settings = load_settings(home)
    assert settings.daemon.tick_s == 2.5
    assert settings.budget.per_day_usd == 10.0


def test_the_cli_says_what_to_fix_and_exits_2(tmp_path: Path) -> None:
    home = write(tmp_path / "h", "[store]\nurll = 'postgresql://x'\n")
    result = CliRunner().invoke(app, ["fleet", "--home", str(home)])
    assert result.exit_code == 2
    assert "store.urll: no such setting" in " ".join(result.output.split())


def test_the_generators_clip_settings_shape_the_clips_they_are_given(tmp_path: Path) -> None:
    """generation.video_fps / video_max_height / video_audio are what the generators' clips are
    cut at (the Gemini adapter sends a clip's own fps, at most the model's video_fps)."""
    settings = load_settings(
        tmp_path, generation={"video_fps": 0.25, "video_max_height": 480, "video_audio": False}
    )
    clip = curation_config(settings).limits.generator_clip
    assert (clip.fps, clip.max_height, clip.audio) == (0.25, 480, False)
    assert curation_config(load_settings(tmp_path)).limits.generator_clip == ClipSpec()
