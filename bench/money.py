"""The money harness at scale: many seeded trials of real commands killed at random moments,
resumed with and without ``--budget``, run two at once — on SQLite and on PostgreSQL — and the
count of trials, kills, refused second writers and invariant violations (spend over a cap, a
request paid twice, a seed accepted twice, a log that no longer verifies). See
``tests/money_harness.py``; the suite runs a share of the same trials.

Run: `.venv/bin/python bench/money.py [--trials N] [--backends sqlite,postgres] [--workdir DIR]`.
A trial takes a few seconds; the default (100 per backend) about a quarter of an hour on 2 cores.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.money_harness import PG_URL, Harness, prepare_base


def _demo_home(folder: Path) -> Path:
    """The demo playlist, indexed (as the tests' ``demo_home``)."""
    from playlisteval.app import App
    from playlisteval.settings import SETTINGS_FILE, load_settings
    from tools.offline.synthetic import make_demo_playlist

    playlist = make_demo_playlist(folder / "playlist")
    home = folder / "demo-home"
    home.mkdir()
    (home / SETTINGS_FILE).write_text(
        "[index]\nsegment_min_minutes = 1.0\nsegment_target_minutes = 1.0\n"
        "segment_max_minutes = 2.0\n"
    )
    with App(load_settings(home)) as app:
        indexer = app.indexer()
        indexer.add(str(playlist), domain=None)
        indexer.prepare_media()
        indexer.run()
    return home


def _drop(schema: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(PG_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    engine.dispose()


def main() -> None:
    """Run the trials and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100, help="Trials per backend.")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--first", type=int, default=1000, help="Number of the first trial.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-money-") as tmp:
        folder = args.workdir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        base = prepare_base(_demo_home(folder), folder / "base", 3)
        print(f"prepared the workspace in {time.monotonic() - started:.0f} s", flush=True)
        harness = Harness(base, folder)
        totals: dict[str, list[int]] = {}
        for backend in args.backends.split(","):
            counts = totals.setdefault(backend, [0, 0, 0, 0])
            for number in range(args.first, args.first + args.trials):
                schema = f"bench_{uuid.uuid4().hex[:12]}" if backend == "postgres" else None
                try:
                    trial = harness.trial(number, backend, schema=schema)
                finally:
                    if schema is not None:
                        _drop(schema)
                    shutil.rmtree(folder / f"trial-{backend}-{number}", ignore_errors=True)
                counts[0] += 1
                counts[1] += trial.kills
                counts[2] += trial.refusals
                counts[3] += len(trial.violations)
                for violation in trial.violations:
                    print(f"  VIOLATION trial {number} ({backend}): {violation}", flush=True)
                if counts[0] % 10 == 0:
                    print(
                        f"{backend}: {counts[0]} trials, {counts[1]} kills, {counts[2]} refused "
                        f"second writers, {counts[3]} violations",
                        flush=True,
                    )
        print()
        for backend, (n, kills, refusals, violations) in totals.items():
            print(
                f"{backend:9s} trials {n:4d}  kills {kills:4d}  refused second writers "
                f"{refusals:4d}  violations {violations}"
            )
        print(
            f"total     trials {sum(c[0] for c in totals.values()):4d}  violations "
            f"{sum(c[3] for c in totals.values())}  ({time.monotonic() - started:.0f} s)"
        )


if __name__ == "__main__":
    main()
