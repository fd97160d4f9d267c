"""Help reads as sentences: a command's docstring is shown as paragraphs the terminal wraps,
not broken where its source lines ended."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from playlisteval.cli import app
from playlisteval.cli.commands import LIST_ITEM, prose

COLUMNS = 80


@pytest.mark.parametrize(
    ("doc", "shown"),
    [
        ("One sentence\n    over two lines.", "One sentence over two lines."),
        (
            "First.\n\n    Second paragraph,\n    two lines.",
            "First.\n\nSecond paragraph, two lines.",
        ),
        (
            "A list:\n- one\n- two, and\n  more of two\n\nAfter.",
            "A list:\n- one\n- two, and more of two\n\nAfter.",
        ),
        ("\b\nKept\nas written", "\b\nKept\nas written"),
    ],
    ids=["lines joined", "paragraphs kept", "list items kept", "a \\b paragraph kept"],
)
def test_prose_joins_the_lines_of_a_paragraph_and_keeps_the_rest(doc: str, shown: str) -> None:
    assert prose(doc) == shown


def _callbacks() -> dict[str, Callable[..., Any]]:
    """Each top-level command's name → the function that defines it (its docstring)."""
    found: dict[str, Callable[..., Any]] = {}
    for group in app.registered_groups:
        if isinstance(group.name, str):
            continue  # a named group (annotations, store): its commands are not top-level
        assert group.typer_instance is not None
        for info in group.typer_instance.registered_commands:
            if info.callback is not None:
                found[info.name or info.callback.__name__] = info.callback
    return found


CALLBACKS = _callbacks()
#: Commands whose docstrings hold sentences over several source lines (and, for demo and eval,
#: a second paragraph).
SPREAD_OUT = ["status", "runs", "curate", "replay", "rehearse", "pairs", "export", "demo", "eval"]


def _paragraphs(name: str) -> list[str]:
    doc = inspect.getdoc(CALLBACKS[name])
    assert doc is not None
    return doc.split("\n\n")


def _body(output: str) -> list[str]:
    """The help's text outside its boxes, without the one column of padding on the left."""
    return [line[1:] for line in output.splitlines() if line[:1] not in "│╭╰"]


def _panel(output: str) -> list[str]:
    """The rows inside the help's boxes, without their borders."""
    return [line[2:-2] for line in output.splitlines() if line.startswith("│")]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _early_breaks(lines: list[str], paragraph: str, room: int) -> list[str]:
    """Places where ``lines`` break where the paragraph's source broke, though the next word
    would have fitted on the line (``room`` columns)."""
    source = paragraph.splitlines()
    found = []
    for before, after in itertools.pairwise(source):
        if LIST_ITEM.match(after.strip()):
            continue  # a list item is on a line of its own on purpose
        tail, head = before.split()[-1], after.split()[0]
        for shown, following in itertools.pairwise(lines):
            line = shown.rstrip()
            fitted = len(line) + 1 + len(head) <= room
            if fitted and line.endswith(tail) and following.strip().startswith(head):
                found.append(f"{line!r} / {following.strip()!r}")
    return found


def _help(*args: str) -> str:
    said = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(COLUMNS)})
    assert said.exit_code == 0, said.output
    return said.output


@pytest.mark.parametrize("name", SPREAD_OUT)
def test_a_commands_help_flows_as_paragraphs_at_80_columns(name: str) -> None:
    body = _body(_help(name))
    shown = _flat("\n".join(body))
    for paragraph in _paragraphs(name):
        if any(LIST_ITEM.match(line) for line in paragraph.splitlines()):
            continue  # a list keeps its lines (checked by the eval test of test_cli_frictions)
        assert _flat(paragraph) in shown
        assert _early_breaks(body, paragraph, room=COLUMNS - 2) == []


def test_the_command_list_shows_each_first_paragraph_flowing() -> None:
    """The list of commands broke "the" / "latest runs" mid-line where status's docstring
    line ended."""
    rows = _panel(_help())
    listed = _flat("\n".join(rows))
    for name in SPREAD_OUT:
        first = _paragraphs(name)[0]
        assert _flat(first) in listed, name
        assert _early_breaks(rows, first, room=COLUMNS - 4) == [], name


def test_no_help_line_is_wider_than_the_terminal() -> None:
    for name in SPREAD_OUT:
        for line in _help(name).splitlines():
            assert len(line) <= COLUMNS, line


def test_the_eval_help_names_the_retrievers_of_the_one_table() -> None:
    """The retrievers a condition may name live in one table (tools.evidence.retrieval.RETRIEVERS);
    the
    help, written as prose so that ``--help`` imports nothing, must name exactly those."""
    import re

    from playlisteval.cli.benchmark import eval_
    from tools.evidence.retrieval import RETRIEVERS

    line = next(s for s in (eval_.__doc__ or "").splitlines() if "- retriever:" in s)
    named = re.findall(r"[a-z0-9]+", line.split(":", 1)[1].split("(")[0])
    assert set(named) - {"or"} == set(RETRIEVERS), line
