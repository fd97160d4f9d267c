"""The settings reference (docs/settings.md) documents every setting and matches the settings
model."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

from playlisteval.settings import ProviderSettings, Settings, family_tables, load_settings
from playlisteval.settings_doc import (
    BEGIN,
    END,
    SETTINGS_PAGE,
    choices,
    reference_block,
    render_default,
    settings_reference,
    write_reference,
)
from store.errors import ConfigError

REGENERATE = "run `.venv/bin/python -m playlisteval.settings_doc` and commit docs/settings.md"


def _model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def leaf_settings(
    model: type[BaseModel] = Settings, section: str = ""
) -> Iterator[tuple[str, str, FieldInfo]]:
    """(section, key, field) of every setting a TOML file can hold, walked independently of the
    module under test."""
    if model is ProviderSettings:  # one block per provider family, not fields
        for key, table in family_tables().items():
            yield from leaf_settings(table, f"{section}.{key}")
    for key, field in model.model_fields.items():
        if model is Settings and key == "home":
            continue
        path = f"{section}.{key}" if section else key
        nested = _model(field.annotation)
        if nested is not None:
            yield from leaf_settings(nested, path)
            continue
        if get_origin(field.annotation) is dict:
            entry = _model(get_args(field.annotation)[1])
            if entry is not None:
                yield from leaf_settings(entry, f'{path}."MODEL-ID"')
                continue
        yield section, key, field


def section_rows(reference: str) -> dict[str, list[str]]:
    """Section name → the keys of its table rows, read back from the rendered Markdown."""
    rows: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in reference.splitlines():
        heading = re.fullmatch(r"### \[(.+)\]", line)
        if heading:
            current = rows.setdefault(heading.group(1), [])
        row = re.match(r"\| `([a-z0-9_]+)` \|", line)
        if row:
            assert current is not None, f"table row before any section heading: {line!r}"
            current.append(row.group(1))
    return rows


def test_settings_has_nested_and_map_sections() -> None:
    """The walker used below reaches the nested family blocks and the per-model endpoints."""
    sections = {section for section, _, _ in leaf_settings()}
    assert {"index", "providers", "providers.gemini", 'providers.models."MODEL-ID"'} <= sections
    assert ("index", "chunk_seconds") in {(s, k) for s, k, _ in leaf_settings()}
    assert "" not in sections  # `home` is not a TOML key


def test_every_setting_has_a_description() -> None:
    missing = [
        f"{section}.{key}"
        for section, key, field in leaf_settings()
        if not (field.description or "").strip()
    ]
    assert not missing, (
        f"settings without a description=: {missing!r}; give each a one-line description in "
        f"playlisteval/settings.py, then {REGENERATE}"
    )


def test_the_settings_page_block_is_the_generated_reference() -> None:
    block = reference_block(SETTINGS_PAGE.read_text(encoding="utf-8"))
    assert block == settings_reference(), f"docs/settings.md's reference is stale: {REGENERATE}"


def test_reference_has_a_row_for_every_setting_and_no_other() -> None:
    rows = section_rows(settings_reference())
    expected: dict[str, list[str]] = {}
    for section, key, _ in leaf_settings():
        expected.setdefault(section, []).append(key)
    assert rows == expected


def test_reference_lists_each_literal_choice_and_the_env_var_form() -> None:
    reference = settings_reference()
    transcriber = next(
        line for line in reference.splitlines() if line.startswith("| `transcriber`")
    )
    for value in ("auto", "captions", "faster-whisper", "qwen3-asr", "dashscope", "none"):
        assert f"`{value}`" in transcriber
    assert reference.count("PLAYLISTEVAL_<SECTION>__<NAME>") == 1
    assert '### [providers.models."MODEL-ID"]' in reference
    assert (
        '`"qwen-3.7-plus"` (family = "dashscope", model_name = "qwen3.7-plus", max_frames = 1800)'
        in reference
    )


def test_env_var_examples_in_the_reference_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two environment variables the reference quotes set what it says they set."""
    reference = settings_reference()
    assert "`PLAYLISTEVAL_INDEX__CHUNK_SECONDS=20`" in reference
    assert "`PLAYLISTEVAL_PROVIDERS__GEMINI__RPM=500`" in reference
    monkeypatch.setenv("PLAYLISTEVAL_INDEX__CHUNK_SECONDS", "20")
    monkeypatch.setenv("PLAYLISTEVAL_PROVIDERS__GEMINI__RPM", "500")
    settings = load_settings(tmp_path)
    assert settings.index.chunk_seconds == 20.0
    assert settings.providers.gemini.rpm == 500


@pytest.mark.parametrize(
    ("field", "rendered"),
    [
        (Field(None), "unset"),
        (Field("auto"), '`"auto"`'),
        (Field(True), "`true`"),
        (Field(False), "`false`"),
        (Field(16_000), "`16000`"),
        (Field(0.5), "`0.5`"),
        (Field(Path("/models/whisper")), '`"/models/whisper"`'),
        (Field(default_factory=list), "`[]`"),
        (Field(default_factory=dict), "`{}`"),
        (Field(default_factory=lambda: [("a", "b")]), '`[["a", "b"]]`'),
        (
            Field(default_factory=lambda: {"m": {"input_per_mtok": 0.5}}),
            '`{"m": {"input_per_mtok": 0.5}}`',
        ),
    ],
)
def test_defaults_render_as_toml(field: FieldInfo, rendered: str) -> None:
    assert render_default(field) == rendered


@pytest.mark.parametrize(
    ("annotation", "allowed"),
    [
        (Literal["a", "b"], ("a", "b")),
        (Literal["a", "b"] | None, ("a", "b")),
        (str, ()),
        (int | None, ()),
    ],
)
def test_choices_of_an_annotation(annotation: Any, allowed: tuple[str, ...]) -> None:
    assert choices(annotation) == allowed


def _stale_copy(tmp_path: Path) -> tuple[Path, str, str]:
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    before, rest = text.split(BEGIN)
    after = rest.split(END)[1]
    page = tmp_path / "settings.md"
    page.write_text(f"{before}{BEGIN}\nold text\n{END}{after}", encoding="utf-8")
    return page, before, after


def test_write_reference_fills_the_block_only_and_is_idempotent(tmp_path: Path) -> None:
    page, before, after = _stale_copy(tmp_path)
    assert write_reference(page) is True
    written = page.read_text(encoding="utf-8")
    assert reference_block(written) == settings_reference()
    assert written.startswith(before + BEGIN)
    assert written.endswith(END + after)
    assert write_reference(page) is False
    assert page.read_text(encoding="utf-8") == written


def test_write_reference_without_markers_says_what_to_add(tmp_path: Path) -> None:
    page = tmp_path / "settings.md"
    page.write_text("# Settings\n\n## Reference\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="settings-reference:begin"):
        write_reference(page)
    assert page.read_text(encoding="utf-8") == "# Settings\n\n## Reference\n"


def test_module_entry_point_rewrites_the_page_given(tmp_path: Path) -> None:
    page, _, _ = _stale_copy(tmp_path)
    command = [sys.executable, "-m", "playlisteval.settings_doc", str(page)]
    root = Path(__file__).resolve().parent.parent
    first = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True)
    assert "rewritten" in first.stdout
    assert reference_block(page.read_text(encoding="utf-8")) == settings_reference()
    second = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True)
    assert "already up to date" in second.stdout


def test_the_default_target_is_the_docs_page_and_the_readme_holds_no_block() -> None:
    """The reference lives on the docs site; the README no longer carries a copy to go stale."""
    root = Path(__file__).resolve().parent.parent
    assert root / "docs" / "settings.md" == SETTINGS_PAGE
    assert BEGIN not in (root / "README.md").read_text(encoding="utf-8")
