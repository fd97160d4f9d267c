"""The workspace at the command line: `--home` on every command (before the command or after
it), read commands refusing a workspace that was never started instead of making an empty one,
`search` in an empty workspace saying what to do, and the budget stop naming the command (and a
cap) that goes on. `runs` and `status` on a curated run are in tests/test_terminal.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from click.testing import Result
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import EXIT_FIX, BudgetStops
from playlisteval.cli import app as cli_app
from playlisteval.cli.curation_report import round_up_cents
from playlisteval.overview import run_state
from playlisteval.settings import load_settings
from store.events import CallRefused, RunFinished, RunResumed, RunStarted, seed_stream
from store.runlog import run_ids


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli_app, list(args))


def error_lines(result: Result) -> list[str]:
    """The output's error lines, each joined back from rich's wrapping."""
    text = " ".join(result.output.split())
    return [m.strip() for m in re.findall(r"error:(.*?)(?=error:|$)", text)]


def commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command and group of the CLI, with its path. (A group is whatever has
    ``commands``: typer 0.29 builds its commands on a click of its own, not click's classes.)"""
    found: list[tuple[tuple[str, ...], Any]] = [(path, group)]
    for name, command in sorted(group.commands.items()):
        if isinstance(getattr(command, "commands", None), dict):
            found.extend(commands(command, (*path, name)))
        else:
            found.append(((*path, name), command))
    return found


def test_every_command_and_group_takes_home() -> None:
    root = typer.main.get_command(cli_app)
    assert isinstance(getattr(root, "commands", None), dict)
    found = commands(root)
    assert len(found) > 20
    missing = [
        " ".join(path) or "playlisteval"
        for path, c in found
        if "home" not in {p.name for p in c.params}
    ]
    assert missing == []


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(("status", "--home", "{home}"), id="after the command"),
        pytest.param(("--home", "{home}", "status"), id="before the command"),
    ],
)
def test_home_before_or_after_the_command_is_the_workspace_read(
    workspace: Path, where: tuple[str, ...]
) -> None:
    result = invoke(*(part.format(home=workspace) for part in where))
    assert result.exit_code == 0, result.output
    assert f"workspace {workspace}" in result.output


def test_home_given_to_a_group_reaches_its_commands(workspace: Path) -> None:
    result = invoke("store", "--home", str(workspace), "verify")
    assert result.exit_code == 0, result.output
    assert "every chain intact" in result.output


#: Commands that read (or work on) a workspace's catalogue and log: given one that was never
#: started, each refuses in one line rather than make an empty workspace where a typo points.
READ_COMMANDS = [
    ("status",),
    ("runs",),
    ("search", "dough"),
    ("seeds",),
    ("index",),
    ("curate", "--budget", "1"),
    ("audit",),
    ("replay", "some-run"),
    ("rehearse",),
    ("pairs",),
    ("export", "{tmp}/bench"),
    ("enqueue",),
    ("fleet",),
    ("store", "verify"),
    ("store", "rebuild"),
    ("eval", "--benchmark", "{tmp}/bench", "--judge", "offline-first"),
    ("ui", "{tmp}/bench"),
    ("annotations", "export", "{tmp}/bench", "--out", "{tmp}/labels.csv"),
    ("annotations", "invite", "{tmp}/bench", "alice"),
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=[" ".join(c[:2]) for c in READ_COMMANDS])
def test_a_workspace_that_does_not_exist_is_refused_not_made(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    typo = tmp_path / "workspaces" / "typo"
    result = invoke(*(part.format(tmp=tmp_path) for part in command), "--home", str(typo))
    assert result.exit_code == EXIT_FIX, result.output
    (line,) = error_lines(result)
    assert f"no workspace at {str(typo)!r}" in line
    assert "playlisteval add SOURCE" in line
    assert "Traceback" not in result.output
    assert not typo.exists()
    assert not (tmp_path / "workspaces").exists()


def test_a_folder_with_only_settings_is_not_a_workspace_yet(tmp_path: Path) -> None:
    """Settings written ahead of the first `add` are kept and read, and the folder is not
    taken for a workspace until `add` starts one there."""
    home = tmp_path / "ws"
    home.mkdir()
    (home / "playlisteval.toml").write_text("[budget]\ncap_usd = 3.0\n")
    refused = invoke("status", "--home", str(home))
    assert refused.exit_code == EXIT_FIX
    assert sorted(p.name for p in home.iterdir()) == ["playlisteval.toml"]


def test_add_starts_a_workspace_where_none_was(tmp_path: Path, demo_playlist: Path) -> None:
    home = tmp_path / "new"
    added = invoke("add", str(demo_playlist), "--no-download", "--home", str(home))
    assert added.exit_code == 0, added.output
    assert (home / "playlisteval.db").is_file()
    status = invoke("status", "--home", str(home))
    assert status.exit_code == 0, status.output
    assert "runs: none yet" in status.output


@pytest.mark.parametrize(
    ("videos", "says"),
    [
        (False, "take videos in with `playlisteval add SOURCE`, then `playlisteval index`"),
        (True, "index the videos taken in with `playlisteval index`"),
    ],
    ids=["no video yet", "videos not indexed"],
)
def test_search_in_an_empty_workspace_says_what_to_do(
    tmp_path: Path, demo_playlist: Path, videos: bool, says: str
) -> None:
    home = tmp_path / "ws"
    if videos:
        assert (
            invoke("add", str(demo_playlist), "--no-download", "--home", str(home)).exit_code == 0
        )
    else:
        with App(load_settings(home)) as app:
            assert app.catalog.chunk_count() == 0  # the catalogue exists, empty
    result = invoke("search", "kneading the dough", "--home", str(home))
    assert result.exit_code == EXIT_FIX, result.output
    (line,) = error_lines(result)
    assert "nothing is indexed" in line
    assert says in line
    assert "ensure_collection" not in result.output


def test_a_budget_stop_names_the_command_and_a_cap_that_goes_on(workspace: Path) -> None:
    """A cap too small for any call stops every seed; the report says so once per cap, not per
    seed, and names `curate --run RUN --budget X` with an X that lets each seed make its next
    call: run as printed, the seeds go on."""
    stopped = invoke("curate", "--budget", "0.01", "--max-seeds", "2", "--home", str(workspace))
    assert stopped.exit_code == 0, stopped.output
    with App(load_settings(workspace)) as app:
        (run_id,) = run_ids(app.events)
    flat = " ".join(stopped.output.split())
    assert "stopped by the run's cap: 2 seed(s)" in flat
    found = re.search(
        rf"resume with: playlisteval curate --run {run_id} --budget (\d+\.\d\d)", flat
    )
    assert found, flat
    cap = found.group(1)
    assert float(cap) > 0.01
    resumed = invoke("curate", "--run", run_id, "--budget", cap, "--home", str(workspace))
    assert resumed.exit_code == 0, resumed.output
    calls = re.search(r"\((\d+) calls made", " ".join(resumed.output.split()))
    assert calls, resumed.output
    assert int(calls.group(1)) >= 2  # each stopped seed made the call it was refused


def test_a_seed_cap_stop_is_told_by_the_event_and_says_how_to_go_on(workspace: Path) -> None:
    """A per-seed cap too small for any call: each refusal records whose cap refused it (the
    seed's), and the report names that cap, not the run's, with no `--run --budget` to resume
    with (a resumed run keeps its per-seed cap)."""
    stopped = invoke(
        "curate", "--budget", "5", "--per-seed", "0.001", "--max-seeds", "2",
        "--home", str(workspace),
    )  # fmt: skip
    assert stopped.exit_code == 0, stopped.output
    with App(load_settings(workspace)) as app:
        (run_id,) = run_ids(app.events)
        refused = [
            e
            for s in app.events.read_all(stream_prefix=seed_stream(run_id, ""))
            if isinstance(e := s.event(), CallRefused)
        ]
    assert len(refused) == 2
    assert {e.cap for e in refused} == {"seed"}
    flat = " ".join(stopped.output.split())
    assert "stopped by the per-seed cap: 2 seed(s)" in flat
    assert "a resumed run keeps its per-seed cap" in flat
    assert "resume with:" not in flat
    assert "run's cap" not in flat


@pytest.mark.parametrize(
    ("stops", "spent", "finished", "suggested"),
    [
        # Nothing finished yet: what was spent plus each stopped seed's next call.
        ({"a": ("run", 70_000), "b": ("run", 80_000)}, 10_000, 0, 160_000),
        # Seeds finished at 300 000 each: that much more per stopped seed, when it is more.
        ({"a": ("run", 70_000)}, 900_000, 3, 1_200_000),
        # A seed its own cap stopped asks nothing of the run's cap.
        ({"a": ("run", 70_000), "b": ("seed", 500_000)}, 0, 0, 70_000),
    ],
)
def test_the_suggested_cap_covers_what_the_stopped_seeds_need(
    stops: dict[str, tuple[str, int]], spent: int, finished: int, suggested: int
) -> None:
    found = BudgetStops(seeds=stops, spent_micros=spent, cap_micros=spent, finished=finished)
    assert found.suggested_micros() == suggested
    lines = " ".join(found.lines("R"))
    assert f"playlisteval curate --run R --budget {round_up_cents(suggested)}" in lines
    if any(which == "seed" for which, _ in stops.values()):
        assert "a resumed run keeps its per-seed cap" in lines


@pytest.mark.parametrize(
    ("micros", "usd"), [(1, "0.01"), (10_000, "0.01"), (10_001, "0.02"), (1_234_567, "1.24")]
)
def test_a_suggested_cap_is_rounded_up_to_the_cent(micros: int, usd: str) -> None:
    assert round_up_cents(micros) == usd


def _started() -> RunStarted:
    return RunStarted(
        run_id="r", seeds=("s",), budget_micros=1, max_attempts=6, concurrency=1, offline=True
    )


def _finished(outcome: str) -> RunFinished:
    return RunFinished(
        run_id="r", outcome=outcome, spent_micros=0, accepted=0, discarded=0, stopped=0
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("lifecycle", "holder", "open_items", "state"),
    [
        ([_started(), _finished("completed")], None, 0, ("completed", True)),
        ([_started(), _finished("budget")], None, 0, ("stopped by its cap", True)),
        # Resumed after its end: not finished any more.
        (
            [_started(), _finished("budget"), RunResumed(run_id="r", budget_micros=2)],
            None,
            0,
            ("unfinished", False),
        ),
        ([_started()], "host:42", 0, ("running (host:42)", False)),
        ([_started()], None, 3, ("queued (3 open)", False)),
        ([_started()], None, 0, ("unfinished", False)),
    ],
    ids=["completed", "budget", "resumed after its end", "lease held", "in the queue", "killed"],
)
def test_where_a_run_stands(
    lifecycle: list[RunStarted | RunFinished | RunResumed],
    holder: str | None,
    open_items: int,
    state: tuple[str, bool],
) -> None:
    assert run_state(lifecycle, holder, open_items) == state
