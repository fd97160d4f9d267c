"""The settings reference of the docs (``docs/settings.md``), rendered from
:class:`playlisteval.settings.Settings`.

Each section of the settings (a TOML table) gets a heading and a table of its keys, defaults and
descriptions. ``python -m playlisteval.settings_doc`` rewrites the page's block between
:data:`BEGIN` and :data:`END`; ``tests/test_settings_doc.py`` fails while that block and the
settings disagree, so a new setting arrives with its documentation.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from playlisteval.settings import ProviderSettings, Settings, family_tables
from store.errors import ConfigError

BEGIN = "<!-- settings-reference:begin -->"
END = "<!-- settings-reference:end -->"
#: The docs page that holds the reference (``mkdocs.yml`` builds it with the others).
SETTINGS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
MODEL_ID = '"MODEL-ID"'

# `home` is where the TOML file lives (--home, $PLAYLISTEVAL_HOME), so it cannot be set in it.
_NOT_IN_FILE = frozenset({"home"})

_INTRO = """\
_Generated from `playlisteval/settings.py` by `python -m playlisteval.settings_doc`: change a
field's `description=` there and rerun it, do not edit this block by hand._

Every key below goes under its `[section]` in `<home>/playlisteval.toml`. An environment variable
`PLAYLISTEVAL_<SECTION>__<NAME>` (one `__` per level, upper case:
`PLAYLISTEVAL_INDEX__CHUNK_SECONDS=20`, `PLAYLISTEVAL_PROVIDERS__GEMINI__RPM=500`; lists and tables
as JSON) wins over the file. `unset` means no value: leave the key out.
"""


@dataclass(frozen=True)
class Section:
    """One TOML table of the settings: its dotted name, what it is for, and its own keys."""

    name: str
    about: str
    leaves: tuple[tuple[str, FieldInfo], ...]


def sections(model: type[BaseModel] = Settings, name: str = "", about: str = "") -> list[Section]:
    """The sections of ``model`` in declaration order, each followed by its nested sections."""
    leaves: list[tuple[str, FieldInfo]] = []
    nested: list[Section] = []
    if issubclass(model, ProviderSettings):
        # Its family blocks are not fields: one per family tools.providers declares.
        for key, block in family_tables().items():
            nested += sections(block, f"{name}.{key}", _first_paragraph(block))
    for key, field in model.model_fields.items():
        if not name and key in _NOT_IN_FILE:
            continue
        child = f"{name}.{key}" if name else key
        table = _table_model(field.annotation)
        if table is not None:
            nested += sections(table, child, field.description or _first_paragraph(table))
            continue
        entry = _map_value_model(field.annotation)
        if entry is not None:
            about_entry = f"{field.description or _first_paragraph(entry)}{_built_in(field)}"
            nested += sections(entry, f"{child}.{MODEL_ID}", about_entry)
            continue
        leaves.append((key, field))
    own = [Section(name, about, tuple(leaves))] if name else []
    return own + nested


def settings_reference() -> str:
    """The Markdown reference of every setting: an introduction, then one table per section."""
    parts = [_INTRO]
    for section in sections():
        parts.append(f"### [{section.name}]\n")
        if section.about:
            parts.append(f"{_prose(section.about)}\n")
        if section.leaves:
            rows = ["| setting | default | what it does |", "| --- | --- | --- |"]
            rows += [_row(key, field) for key, field in section.leaves]
            parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def reference_block(text: str) -> str:
    """The text between the page's markers, less the line breaks just inside them."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ConfigError(
            f"the settings page has no reference block: put {BEGIN!r} and then {END!r} on "
            "lines of their own under its '## Reference' heading"
        )
    return text[start + len(BEGIN) : end].removeprefix("\n").removesuffix("\n")


def write_reference(page: Path = SETTINGS_PAGE) -> bool:
    """Replace the block between the markers of ``page`` with :func:`settings_reference`.

    Returns whether the file changed. Raises :class:`ConfigError` when the markers are missing.
    """
    text = page.read_text(encoding="utf-8")
    current = reference_block(text)
    wanted = settings_reference()
    if current == wanted:
        return False
    start = text.index(BEGIN) + len(BEGIN)
    # The blank line before END ends the last table: an HTML line right after one may join it.
    page.write_text(f"{text[:start]}\n{wanted}\n{text[text.index(END) :]}", encoding="utf-8")
    return True


def render_default(field: FieldInfo) -> str:
    """A field's default as it would be written in TOML (``unset`` for None)."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    return f"`{_toml_value(value)}`"


def choices(annotation: Any) -> tuple[str, ...]:
    """The values a ``Literal`` annotation (possibly ``| None``) allows; empty for other types."""
    members = get_args(annotation) if _is_union(annotation) else (annotation,)
    found: list[str] = []
    for member in members:
        if get_origin(member) is Literal:
            found += [str(value) for value in get_args(member)]
    return tuple(found)


def _row(key: str, field: FieldInfo) -> str:
    text = _prose(field.description or "")
    allowed = choices(field.annotation)
    if allowed:
        text = f"{text} One of {', '.join(f'`{value}`' for value in allowed)}.".strip()
    return (
        "| " + " | ".join(_cell(part) for part in (f"`{key}`", render_default(field), text)) + " |"
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    return json.dumps(to_jsonable_python(value), separators=(", ", ": "))


def _built_in(field: FieldInfo) -> str:
    """`` Built in: …`` naming the entries a dict-of-models field holds by default."""
    entries = field.get_default(call_default_factory=True)
    if not entries:
        return ""
    described = []
    for key, entry in entries.items():
        values = entry.model_dump(mode="json", exclude_defaults=True)
        inner = ", ".join(f"{name} = {_toml_value(value)}" for name, value in values.items())
        described.append(f"`{json.dumps(key)}` ({inner})" if inner else f"`{json.dumps(key)}`")
    return f" Built in: {'; '.join(described)}."


def _table_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _map_value_model(annotation: Any) -> type[BaseModel] | None:
    if get_origin(annotation) is not dict:
        return None
    return _table_model(get_args(annotation)[1])


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (typing.Union, types.UnionType)


def _first_paragraph(model: type[BaseModel]) -> str:
    return (model.__doc__ or "").strip().split("\n\n", 1)[0]


def _prose(text: str) -> str:
    """``text`` on one line, with ``<`` outside code spans escaped (``<home>`` is no HTML tag)."""
    spans = " ".join(text.split()).split("`")
    return "`".join(
        span if index % 2 else span.replace("<", "&lt;") for index, span in enumerate(spans)
    )


def _cell(text: str) -> str:
    # A bare | would end the table cell, even inside backticks.
    return text.replace("|", "\\|")


def _main(argv: list[str]) -> int:
    page = Path(argv[0]) if argv else SETTINGS_PAGE
    changed = write_reference(page)
    print(f"{page}: settings reference {'rewritten' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
