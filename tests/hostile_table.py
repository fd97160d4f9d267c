"""The shape of the hostile and careless input table (issue 17) and the checks every row passes.

A row is a :class:`Case`: how a copy of a workspace (or a source beside it) is spoiled, what is
then asked of it — a command line, or an HTTP request to the validation UI — and what must come
back: the exit code (or HTTP status) and the words of the one line that says what to fix. Every
row also shows that no traceback was printed and that nothing was lost: the event log is as long
as it was (or longer, where the case appends on purpose), every catalogued video is as it was,
and every earlier export is the same, byte for byte. The tables are ``tests/test_hostile_*.py``;
a new input the project accepts gets a row there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from playlisteval import cli
from playlisteval.cli import EXIT_FIX
from playlisteval.cli import app as cli_app
from playlisteval.workspace import Workspace
from store.catalog import Catalog
from store.eventstore import open_event_store

Spoil = Callable[[Path], None]


def keep(_home: Path) -> None:
    """The workspace as it is."""


@dataclass(frozen=True)
class Case:
    """One hostile or careless input and what it must get.

    ``command`` is a command line (``{home}`` is the workspace, ``{src}`` the folder beside it
    that ``spoil`` may fill with a source) or, for the UI, ``(METHOD, PATH, *form fields)``.
    ``code`` is the exit code, or the HTTP status. ``says`` is what the one line (or the error
    page) must say. ``appends``: the command may add to the event log (it must not shrink)."""

    name: str
    command: tuple[str, ...]
    says: str
    spoil: Spoil = keep
    code: int = EXIT_FIX
    env: Mapping[str, str] = field(default_factory=dict)
    appends: bool = False


def ids(cases: list[Case]) -> list[str]:
    """Test ids: the cases' names."""
    return [case.name for case in cases]


def rows(cases: list[Case], known_bugs: Mapping[str, str] | None = None) -> list[Any]:
    """The cases as parameters named by their names; a case named in ``known_bugs`` is a strict
    xfail with that reason (it must start passing when the bug is fixed, then leave the map)."""
    bugs = dict(known_bugs or {})
    out = []
    for case in cases:
        reason = bugs.pop(case.name, None)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(case, id=case.name, marks=marks))
    assert not bugs, f"known bugs name no case: {sorted(bugs)}"
    return out


# -- what a workspace holds ------------------------------------------------------------------


@dataclass(frozen=True)
class Holdings:
    """What a careless command must not lose: the log's length, each catalogued video's status
    and file, and each exported file's digest."""

    last_seq: int
    videos: dict[str, tuple[str, str | None]]
    exports: dict[str, str]


def holdings(home: Path) -> Holdings:
    """Read what ``home`` holds, straight from its files (no settings, no environment)."""
    database = Workspace(home).database
    store = open_event_store(database)
    try:
        last_seq = store.last_seq()
    finally:
        store.close()
    catalog = Catalog.open(database)
    try:
        videos = {v.id: (v.status, v.path) for v in catalog.videos()}
    finally:
        catalog.close()
    exports = {
        str(path.relative_to(home)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(Workspace(home).exports.rglob("*"))
        if path.is_file()
    }
    return Holdings(last_seq, videos, exports)


def assert_nothing_lost(before: Holdings, after: Holdings, *, appends: bool = False) -> None:
    """The log only grew where the case appends (never shrank), every video the catalogue held
    is there as it was, and every earlier export is unchanged."""
    if appends:
        assert after.last_seq >= before.last_seq
    else:
        assert after.last_seq == before.last_seq, "the command wrote to the event log"
    for video_id, kept in before.videos.items():
        assert after.videos.get(video_id) == kept, video_id
    for name, digest in before.exports.items():
        assert after.exports.get(name) == digest, name


# -- what was printed ------------------------------------------------------------------------


def one_line(text: str) -> str:
    """Printed output as one line of words."""
    return " ".join(text.split())


def assert_said(result: Result, case: Case) -> None:
    """The exit code, no traceback, the words, and for a failure exactly one ``error:`` line on
    stderr (for a success none)."""
    assert result.exit_code == case.code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    assert case.says in one_line(result.output), result.output
    # Counted on stderr alone: on a terminal it is its own stream, not glued to a live table.
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == (1 if case.code else 0), result.output


def invoke(home: Path, case: Case, monkeypatch: pytest.MonkeyPatch) -> Result:
    """Spoil ``home`` as the case says and run its command line on it."""
    src = home.parent / "src"
    src.mkdir(exist_ok=True)
    case.spoil(home)
    # Wide enough that rich never folds a long path inside a word. The consoles' own size, not
    # COLUMNS: a console made while COLUMNS and LINES were set (an xdist worker) keeps them.
    for console in (cli.console, cli.err_console):
        monkeypatch.setattr(console, "_width", 1000)
        monkeypatch.setattr(console, "_height", 25)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    args = [part.format(home=home, src=src) for part in case.command]
    if "--home" not in args:  # a case about --home itself gives its own
        args += ["--home", str(home)]
    return CliRunner().invoke(cli_app, args)


def run_cli_case(home: Path, case: Case, monkeypatch: pytest.MonkeyPatch) -> Result:
    """The whole row: spoil, run, check the line and that nothing was lost."""
    before = holdings(home)
    result = invoke(home, case, monkeypatch)
    assert_said(result, case)
    assert_nothing_lost(before, holdings(home), appends=case.appends)
    return result


# -- a full disk, honestly ---------------------------------------------------------------------


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past ``limit`` bytes into any file fail with EFBIG while inside (RLIMIT_FSIZE, the
    same refusal a quota gives; unlike a small tmpfs it needs no root). Python ignores
    SIGXFSZ, so the write returns the error instead of killing the process."""
    import resource
    import signal

    assert signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN, "SIGXFSZ would kill the process"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
