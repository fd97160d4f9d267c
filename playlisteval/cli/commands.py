"""The click group behind ``playlisteval`` and its sub-groups: help that reads as prose, and
commands that are loaded only when they run.

Typer hands a command's docstring to rich with the source's line breaks in it, so a sentence
broke where its source line ended, in the middle of the terminal ("recorded problems, the" and
"latest runs" on two lines). :func:`prose` joins the lines of each paragraph and keeps the
paragraph breaks; a list item keeps a line of its own, and a paragraph that starts with ``\\b``
(click's mark for "keep as written") stays as it is. The terminal then wraps where it must.

A :class:`LazyCommand` is listed by its name and a line of help, and imported when it runs or
shows its own ``--help``: listing ``smoke``, whose module loads the model providers, loads none.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar

from typer.core import TyperCommand, TyperGroup

#: A line that starts a list item: "- x", "* x", "• x", "1. x", "2) x".
LIST_ITEM = re.compile(r"^([-*•]|\d+[.)])\s")


def prose(text: str) -> str:
    """``text`` (a docstring) with the lines of each paragraph joined into one, so that the
    terminal wraps it; paragraph breaks, list items and ``\\b`` paragraphs are kept."""
    return "\n\n".join(_joined(p) for p in inspect.cleandoc(text).split("\n\n"))


def _joined(paragraph: str) -> str:
    if paragraph.startswith("\b"):
        return paragraph
    lines: list[str] = []
    for line in paragraph.splitlines():
        words = line.strip()
        if not words:
            continue
        if lines and not LIST_ITEM.match(words):
            lines[-1] = f"{lines[-1]} {words}"
        else:
            lines.append(words)
    return "\n".join(lines)


class Helped(Protocol):
    """A command (or group) as far as its help goes."""

    help: str | None
    params: list[Any]


_Command = TypeVar("_Command", bound=Helped)


def as_prose(command: _Command) -> _Command:
    """``command`` with its help and its parameters' help made :func:`prose` (in place)."""
    if command.help:
        command.help = prose(command.help)
    for param in command.params:
        text = getattr(param, "help", None)
        if isinstance(text, str) and text:
            param.help = prose(text)  # options' and typer arguments' help
    return command


class LazyCommand(TyperCommand):
    """A command listed by ``name`` and one line of ``help``; ``load`` makes the real command
    when it is run or shows its own ``--help`` (that command parses the arguments and runs),
    or when something asks what it takes (its :attr:`params`)."""

    def __init__(self, name: str, help: str, load: Callable[[], TyperCommand]) -> None:
        self.load = load
        self.loaded: TyperCommand | None = None
        super().__init__(name, help=help)

    def real(self) -> TyperCommand:
        """The command itself, loaded once."""
        if self.loaded is None:
            self.loaded = as_prose(self.load())
        return self.loaded

    @property
    def params(self) -> list[Any]:
        """The real command's parameters."""
        return self.real().params

    @params.setter
    def params(self, value: list[Any]) -> None:
        """Set by click's constructor (to nothing): the real command has its own."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        """The real command's context (the group invokes the command the context holds)."""
        return self.real().make_context(info_name, args, parent=parent, **extra)


class CommandGroup(TyperGroup):
    """A typer group whose commands' help reads as prose and whose :attr:`lazy_commands` are
    imported only when one of them runs. Sub-groups are listed after the commands."""

    #: Commands listed here and loaded on use; a subclass names its own.
    lazy_commands: ClassVar[tuple[Callable[[], LazyCommand], ...]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        if self.help:
            self.help = prose(self.help)
        plain = {n: c for n, c in self.commands.items() if not isinstance(c, TyperGroup)}
        groups = {n: c for n, c in self.commands.items() if isinstance(c, TyperGroup)}
        lazy = {(c := make()).name or "": c for make in self.lazy_commands}
        self.commands = {**plain, **lazy, **groups}
        for command in self.commands.values():
            if not isinstance(command, LazyCommand):  # made prose when loaded, not before
                as_prose(command)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """This group's arguments, read as typer reads them; but a request for a command's
        help and nothing else (``status --help``, ``store verify --help``) is answered before
        this group's own options are read and its callback runs: help needs neither, and
        reading an option builds typer's pydantic coercion, which costs a start of ``--help``
        about 0.2 s."""
        command = self._help_only(ctx, args)
        if command is not None:
            command.make_context(args[0], args[1:], parent=ctx)  # prints the help, exits
        return list(super().parse_args(ctx, args))

    def _help_only(self, ctx: Any, args: list[str]) -> Any:
        """The command ``args`` asks the help of, when they are command names and then a help
        option only (no option of this group's, no value that could be one's), else None."""
        if ctx.resilient_parsing or len(args) < 2 or args[-1] not in ctx.help_option_names:
            return None
        if any(arg.startswith("-") for arg in args[:-1]):
            return None
        command = self.get_command(ctx, args[0])
        if isinstance(command, TyperGroup) and not isinstance(command, CommandGroup):
            return None  # a group of typer's own reads its arguments in full
        return command
