"""How fast a ``playlisteval`` command starts, against a bare Python start in the same run.

Each repetition runs, one after another (interleaved, so a burst of load from elsewhere falls
on all of them alike): ``python -c pass`` (the baseline: the interpreter alone),
``python -c "import playlisteval.cli"``, ``python -m playlisteval --help`` and
``python -m playlisteval status --help`` (rendered at 80 columns, output discarded), reading the
settings (``from playlisteval.settings import load_settings; load_settings(HOME)``), and, on the
workspace ``--home`` names, the real commands ``status``, ``runs`` and ``audit``. It prints each
one's median and minimum wall time, its median over the baseline's (the ratio), and what it adds
to the baseline; the load average before and after says how busy the machine was.

Python's bytecode cache is on for the runs, as it is for anyone who installed the package (pip
compiles it; an editable install writes it on the first import, the untimed warm-up run here):
a shell that sets ``PYTHONDONTWRITEBYTECODE`` (this development machine's does) would otherwise
have every project module compiled from source on each start, ~0.04 s of the figure.

Targets, on an idle machine: ``--help`` and ``status --help`` start in at most 0.5 s; reading
the settings adds at most 0.2 s to the bare interpreter (it imports no SDK: no pydantic-ai,
openai, google-genai, dashscope, transformers or torch); ``status``, ``runs`` and ``audit`` on the
demo workspace answer within 1 s.

Run: `.venv/bin/python bench/cli_start.py [--repeat 15] [--home DEMO]` (make the demo workspace
once: `playlisteval demo --home /tmp/h8demo`; without ``--home`` the settings are read from an
empty temporary folder and the three commands are left out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine

ROOT = Path(__file__).resolve().parent.parent

Command = tuple[str, tuple[str, ...]]
#: What is always timed: a label and the arguments after the interpreter.
COMMANDS: tuple[Command, ...] = (
    ("python -c pass (baseline)", ("-c", "pass")),
    ("import playlisteval.cli", ("-c", "import playlisteval.cli")),
    ("playlisteval --help", ("-m", "playlisteval", "--help")),
    ("playlisteval status --help", ("-m", "playlisteval", "status", "--help")),
)


def workspace_commands(home: Path, real: bool) -> tuple[Command, ...]:
    """Reading the settings of ``home``, and (``real``: a workspace with runs) the commands
    ``status``, ``runs`` and ``audit`` on it."""
    load = f"from playlisteval.settings import load_settings; load_settings({str(home)!r})"
    found: tuple[Command, ...] = (("load_settings(home)", ("-c", load)),)
    if real:
        found += tuple(
            (f"playlisteval {name}", ("-m", "playlisteval", name, "--home", str(home)))
            for name in ("status", "runs", "audit")
        )
    return found


def wall_time(args: tuple[str, ...], env: dict[str, str]) -> float:
    """Seconds one run of the interpreter with ``args`` takes, start to exit."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=True
    )
    return time.perf_counter() - started


def main() -> None:
    """Time every command ``--repeat`` times, interleaved, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--home", type=Path, help="A workspace with runs (the demo's).")
    options = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the cache a user's install has (module docstring)
    with tempfile.TemporaryDirectory() as empty:
        home = options.home.resolve() if options.home else Path(empty)
        commands = COMMANDS + workspace_commands(home, real=options.home is not None)
        times = timed(commands, env, options.repeat)
    report(commands, times, options.repeat)


def timed(
    commands: tuple[Command, ...], env: dict[str, str], repeat: int
) -> dict[str, list[float]]:
    """Each command's wall times, ``repeat`` of them, the commands interleaved; the load
    average before and after under the key ``load``."""
    for _, args in commands:  # once each, untimed: the file cache warm for every one alike
        wall_time(args, env)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {label: [] for label, _ in commands}
    for _ in range(repeat):
        for label, args in commands:
            times[label].append(wall_time(args, env))
    times["load"] = [load_before[0], os.getloadavg()[0]]
    return times


def report(commands: tuple[Command, ...], times: dict[str, list[float]], repeat: int) -> None:
    """The table: each command's median and minimum, its ratio to the baseline and what it
    adds to it."""
    baseline = statistics.median(times[commands[0][0]])
    load_before, load_after = times["load"]
    print(machine())
    print(
        f"{repeat} runs each, interleaved; load average (1 min) "
        f"{load_before:.2f} before, {load_after:.2f} after, on {os.cpu_count()} cores; "
        "bytecode cache on"
    )
    print(f"| {'command':<30} | median (s) | min (s) | ratio to baseline | above baseline (s) |")
    print(f"|{'-' * 32}|------------|---------|-------------------|--------------------|")
    for label, _ in commands:
        median = statistics.median(times[label])
        print(
            f"| {label:<30} | {median:10.3f} | {min(times[label]):7.3f} "
            f"| {median / baseline:17.1f} | {median - baseline:18.3f} |"
        )


if __name__ == "__main__":
    main()
