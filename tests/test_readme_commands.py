"""The README's commands run as written.

Every shell line of the README's code blocks is read back and checked: ``make TARGET`` lines name
a target of the Makefile that calls what the README says it does (``make demo`` and ``make test``
themselves are too slow for the suite), and every other line is run by bash, in a fresh home
whose ``~/.playlisteval/demo`` is a small demo workspace (the demo's stages on two seeds), with
only the placeholders the README declares filled in."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from markdown_it import MarkdownIt

from tests.daemon_harness import free_port
from tests.workspaces import copy_workspace

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SHELLS = {"bash", "sh", "shell", "console"}
#: What each ``make`` target the README names must call (read from ``make -n``, not run).
MAKE_CALLS = {
    "demo": ("playlisteval demo",),
    "test": ("ruff check", "ruff format --check", "mypy", "mkdocs build --strict", "pytest"),
}
#: Words in capitals that are a command's own (option values, not placeholders).
NOT_PLACEHOLDERS = frozenset({"PATH"})
#: What a command's output must show, by the start of the command (checked where one matches).
EXPECTED_OUTPUT = {
    "ls ~/.playlisteval/demo/exports/report": ("report.md", "report.html", "figures", "tables"),
    "ls ~/.playlisteval/demo/exports/benchmark": ("pairs.jsonl", "pairs.parquet", "README.md"),
    "playlisteval search": ("cooking",),
    "playlisteval runs": ("completed",),
    "playlisteval audit --run": ("seed-",),
    "playlisteval replay": ("the log replays exactly",),
    "playlisteval status": ("benchmark",),
}


@dataclass(frozen=True)
class ShellLine:
    """One command of a README code block: continuations joined, its trailing comment dropped."""

    text: str
    line: int  # where its block starts in README.md (1-based), for the failure message

    @property
    def is_make(self) -> bool:
        return self.text.split()[0] == "make"


def strip_comment(line: str) -> str:
    """``line`` without a ``#`` comment that starts outside quotes (as bash reads it)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def shell_lines(markdown: str) -> list[ShellLine]:
    """Every command in the shell code blocks (``bash``, ``sh``, ``shell``, ``console``)."""
    found: list[ShellLine] = []
    for token in MarkdownIt().parse(markdown):
        if token.type != "fence" or token.info.split()[:1] == [] or token.map is None:
            continue
        if token.info.split()[0] not in SHELLS:
            continue
        pending = ""
        for raw in token.content.splitlines():
            text = strip_comment(raw.removeprefix("$ "))
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            text = (pending + text).strip()
            pending = ""
            if text:
                found.append(ShellLine(" ".join(text.split()), token.map[0] + 1))
    return found


def declared_placeholders(markdown: str) -> dict[str, str]:
    """The placeholders the README declares: the code spans in capitals of its paragraph that
    begins with ``**Placeholders**``, each with the sentence part that says what it stands for."""
    for paragraph in markdown.split("\n\n"):
        if paragraph.startswith("**Placeholders**"):
            text = " ".join(paragraph.split())
            return {
                name: rest.split(",")[0].strip()
                for name, rest in re.findall(r"`([A-Z][A-Z0-9_]+)` ([^`]*)", text)
            }
    return {}


def used_placeholders(command: str) -> set[str]:
    """The words in capitals of ``command``, outside its ``--options``."""
    words = re.findall(r"(?<![-\w/.~])[A-Z][A-Z0-9_]{2,}(?![\w/.])", command)
    return set(words) - NOT_PLACEHOLDERS


TEXT = README.read_text(encoding="utf-8")
LINES = shell_lines(TEXT)
RUNNABLE = [line for line in LINES if not line.is_make]


def test_the_readme_shows_the_two_commands_and_what_to_look_at_after_the_demo() -> None:
    """``make demo`` and ``make test`` first, then the commands the demo ends by suggesting."""
    assert [line.text for line in LINES[:2]] == ["make demo", "make test"]
    ours = [line.text.split() for line in RUNNABLE if line.text.startswith("playlisteval ")]
    subcommands = {words[1] for words in ours}
    assert {"search", "audit", "replay", "ui"} <= subcommands
    assert any("--seed SEED" in line.text for line in RUNNABLE)
    for folder in ("exports/report", "exports/benchmark", "exports/evaluation"):
        assert f"~/.playlisteval/demo/{folder}" in TEXT
    assert "report.md" in TEXT
    assert "report.html" in TEXT
    assert len(TEXT.splitlines()) <= 300


@pytest.mark.parametrize("target", sorted({line.text for line in LINES if line.is_make}))
def test_each_make_line_names_a_target_that_calls_what_the_readme_says(target: str) -> None:
    """``make -n`` prints the target's recipe (its prerequisites' too) without running it."""
    name = target.split()[1]
    assert target == f"make {name}", f"README: {target!r} is not a plain `make TARGET` line"
    assert name in MAKE_CALLS, f"README names `make {name}`: say in MAKE_CALLS what it must call"
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    dry = subprocess.run(
        ["make", "-n", name], cwd=ROOT, capture_output=True, text=True, env=env, check=False
    )
    assert dry.returncode == 0, dry.stderr
    for call in MAKE_CALLS[name]:
        assert call in dry.stdout, f"`make {name}` should call {call!r}; it runs:\n{dry.stdout}"


def test_every_placeholder_is_declared_and_every_declared_one_is_used() -> None:
    declared = declared_placeholders(TEXT)
    assert declared, "README: no '**Placeholders**' paragraph naming the placeholders"
    used = set().union(*(used_placeholders(line.text) for line in RUNNABLE))
    assert used == set(declared), (used, declared)
    assert all(declared.values()), f"say what each placeholder stands for: {declared}"


def test_the_comment_and_continuation_reader() -> None:
    """What bash would read: quoted ``#`` kept, comments dropped, continuations joined."""
    markdown = (
        "```bash\nplaylisteval search 'a # b' --home x   # a comment\n"
        "playlisteval demo --domains 2 \\\n    --hours-per-domain 1\n# only a comment\n```\n"
        "```text\nplaylisteval not-a-command\n```\n"
    )
    assert [line.text for line in shell_lines(markdown)] == [
        "playlisteval search 'a # b' --home x",
        "playlisteval demo --domains 2 --hours-per-domain 1",
    ]
    assert used_placeholders("playlisteval audit --run RUN --seed SEED --home ~/X_Y") == {
        "RUN",
        "SEED",
    }


# -- the commands, run -------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoUser:
    """A home whose ``~/.playlisteval/demo`` holds what the demo leaves, and the values of the
    README's placeholders there."""

    home: Path
    values: dict[str, str]

    def env(self) -> dict[str, str]:
        """A fresh user's environment: this home, the project's commands on the PATH, no
        PLAYLISTEVAL_* variable (the commands say --home), no model hub."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLAYLISTEVAL_")}
        bin_dir = str(Path(sys.executable).parent)
        env.update(
            HOME=str(self.home),
            PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            COLUMNS="200",
        )
        return env

    def fill(self, command: str) -> str:
        for name in used_placeholders(command):
            command = re.sub(rf"\b{name}\b", self.values[name], command)
        return command


@pytest.fixture(scope="module")
def demo_user(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> DemoUser:
    """The demo's stages (``run_demo``: curate, export, evaluate, report) on the indexed demo
    workspace, on two seeds, where ``make demo`` leaves them: ``~/.playlisteval/demo``."""
    from playlisteval import runs
    from playlisteval.app import App
    from playlisteval.cli.demo import OFFLINE_JUDGES
    from playlisteval.report import write_report
    from playlisteval.settings import load_settings

    home = tmp_path_factory.mktemp("readme-user")
    root = home / ".playlisteval" / "demo"
    root.parent.mkdir()
    copy_workspace(demo_home, root)
    exports = root / "exports"
    with App(load_settings(root)) as app:
        report = runs.curate(app, budget_usd=5.0, max_seeds=2)
        assert report.accepted, "the offline demo run should accept a seed"
        exported = runs.export(app, exports / "benchmark", report.run_id)
        evaluation = runs.evaluate(
            app, exported.path, OFFLINE_JUDGES, exports / "evaluation", list(runs.DEMO_CONDITIONS)
        )
        write_report([evaluation.out_dir], exports / "report", events=app.events)
    values = {"RUN": report.run_id, "SEED": report.accepted[0], "YOUR_NAME": "ada"}
    assert set(values) == set(declared_placeholders(TEXT)), "fill every declared placeholder"
    return DemoUser(home, values)


def served_once(command: str, user: DemoUser, cwd: Path) -> str:
    """Run a ``playlisteval ui`` line on a free port until its invite link answers, then press
    Ctrl-C; what it printed. (The port is the one thing added: 8000 may be taken here.)"""
    port = free_port()
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command} --port {port}"],
        cwd=cwd,
        env=user.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    printed: list[str] = []
    try:
        invite = None
        while invite is None:
            line = lines.get(timeout=300)
            assert line is not None, f"`ui` ended before serving:\n{''.join(printed)}"
            printed.append(line)
            invite = re.search(rf"invite {user.values['YOUR_NAME']}: (\S+)", line)
        page = _first_answer(invite.group(1), printed)
        assert page.status_code == 200, page.text[:2000]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    while (line := lines.get(timeout=60)) is not None:
        printed.append(line)
    return "".join(printed)


def _first_answer(url: str, printed: list[str]) -> httpx.Response:
    """The first answer of the server at ``url`` (it prints its links just before it listens)."""
    for _ in range(600):
        try:
            return httpx.get(url, follow_redirects=True, timeout=30)
        except httpx.TransportError:
            time.sleep(0.2)  # a process, not a task of ours: nothing to wait on but it
    raise AssertionError(f"nothing answered at {url}:\n{''.join(printed)}")


@pytest.mark.parametrize("command", RUNNABLE, ids=[line.text[:60] for line in RUNNABLE])
def test_each_readme_command_runs_as_written(
    command: ShellLine, demo_user: DemoUser, tmp_path: Path
) -> None:
    """From any folder (here an empty one), with the placeholders filled in."""
    text = demo_user.fill(command.text)
    if command.text.startswith("playlisteval ui "):
        output = served_once(text, demo_user, tmp_path)
    else:
        done = subprocess.run(
            ["bash", "-c", text],
            cwd=tmp_path,
            env=demo_user.env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"README line {command.line}: {text}\n{output[-4000:]}"
    assert "Traceback" not in output, output[-4000:]
    assert output.strip(), f"README line {command.line}: {text} printed nothing"
    for start, shown in EXPECTED_OUTPUT.items():
        if command.text.startswith(start):
            for part in shown:
                assert part in output, f"{text}: {part!r} not in its output:\n{output[-4000:]}"
