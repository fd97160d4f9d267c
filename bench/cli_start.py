"""How fast a ``playlisteval`` command starts, against a bare Python start in the same run.

Each repetition runs, one after another (interleaved, so a burst of load from elsewhere falls
on all of them alike): ``python -c pass`` (the baseline: the interpreter alone),
``python -c "import playlisteval.cli"``, ``python -m playlisteval --help`` and
``python -m playlisteval status --help`` (rendered at 80 columns, output discarded). It prints
each one's median and minimum wall time, its median over the baseline's (the ratio), and what it
adds to the baseline; the load average before and after says how busy the machine was.

Python's bytecode cache is on for the runs, as it is for anyone who installed the package (pip
compiles it; an editable install writes it on the first import, the untimed warm-up run here):
a shell that sets ``PYTHONDONTWRITEBYTECODE`` (this development machine's does) would otherwise
have every project module compiled from source on each start, ~0.04 s of the figure.

Target: ``--help`` and ``status --help`` start in at most 0.5 s on an idle machine.

Run: `.venv/bin/python bench/cli_start.py [--repeat 15]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine

ROOT = Path(__file__).resolve().parent.parent

#: What is timed: a label and the arguments after the interpreter.
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("python -c pass (baseline)", ("-c", "pass")),
    ("import playlisteval.cli", ("-c", "import playlisteval.cli")),
    ("playlisteval --help", ("-m", "playlisteval", "--help")),
    ("playlisteval status --help", ("-m", "playlisteval", "status", "--help")),
)


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
    options = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the cache a user's install has (module docstring)
    for _, args in COMMANDS:  # once each, untimed: the file cache warm for every one alike
        wall_time(args, env)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {label: [] for label, _ in COMMANDS}
    for _ in range(options.repeat):
        for label, args in COMMANDS:
            times[label].append(wall_time(args, env))
    load_after = os.getloadavg()
    baseline = statistics.median(times[COMMANDS[0][0]])
    print(machine())
    print(
        f"{options.repeat} runs each, interleaved; load average (1 min) "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} cores; "
        "bytecode cache on"
    )
    print(f"| {'command':<30} | median (s) | min (s) | ratio to baseline | above baseline (s) |")
    print(f"|{'-' * 32}|------------|---------|-------------------|--------------------|")
    for label, _ in COMMANDS:
        median = statistics.median(times[label])
        print(
            f"| {label:<30} | {median:10.3f} | {min(times[label]):7.3f} "
            f"| {median / baseline:17.1f} | {median - baseline:18.3f} |"
        )


if __name__ == "__main__":
    main()
