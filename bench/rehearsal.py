"""How each stage of a campaign grows with its size: the campaign rehearsal at two or more sizes.

    python bench/rehearsal.py WS_SMALL WS_LARGE [WS_LARGER …]
    python bench/rehearsal.py --run 2x1 2x10      # runs `playlisteval demo` at those sizes first

Each workspace is one made by `playlisteval demo --domains N --hours-per-domain H`; its
`rehearsal.json` holds a record per run (the last one is read). Printed per stage: wall time,
peak memory and disk at each size, then for each larger size against the smallest the time ratio
and that ratio over the hours ratio (about 1 or less: linear or better; well above 1: the stage
grows faster than the collection and is a bug, or must be explained in bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from playlisteval.rehearsal import RECORD_FILE, StageFigure, growth


def _last_record(home: Path) -> dict[str, object]:
    records = json.loads((home / RECORD_FILE).read_text(encoding="utf-8"))
    if not records:
        sys.exit(f"{home / RECORD_FILE} holds no rehearsal")
    record: dict[str, object] = records[-1]
    return record


def _figures(record: dict[str, object]) -> list[StageFigure]:
    stages = record["stages"]
    assert isinstance(stages, list)
    return [StageFigure(**s) for s in stages]


def _rehearse(size: str, root: Path) -> Path:
    domains, hours = size.split("x")
    home = root / f"rehearsal-{size}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "playlisteval",
            "demo",
            "--domains",
            domains,
            "--hours-per-domain",
            hours,
            "--home",
            str(home),
        ],
        check=True,
    )
    return home


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspaces", nargs="*", type=Path)
    parser.add_argument("--run", nargs="*", default=[], help="sizes NxH to rehearse first")
    args = parser.parse_args()
    homes: list[Path] = list(args.workspaces)
    if args.run:
        root = Path(tempfile.mkdtemp(prefix="bench-rehearsal-"))
        homes += [_rehearse(size, root) for size in args.run]
    if len(homes) < 2:
        parser.error("give two workspaces or more (or --run two sizes)")
    records = sorted((_last_record(h) for h in homes), key=lambda r: float(str(r["hours"])))
    sizes = [f"{r['domains']}x{float(str(r['hours_per_domain'])):g}h" for r in records]
    print(f"{'stage':<16}" + "".join(f"{s + ' (s)':>14}" for s in sizes))
    figures = [_figures(r) for r in records]
    for stage in [f.stage for f in figures[0]]:
        row = []
        for each in figures:
            found = next((f for f in each if f.stage == stage), None)
            row.append(f"{found.seconds:14.1f}" if found else f"{'-':>14}")
        print(f"{stage:<16}" + "".join(row))
    print(f"{'all':<16}" + "".join(f"{sum(f.seconds for f in each):14.1f}" for each in figures))
    print()
    for label, key in (("peak MiB", "peak_rss_bytes"), ("disk MiB", "disk_bytes")):
        print(f"{label:<16}" + "".join(f"{max(getattr(f, key) for f in each) / 2**20:14.0f}"
                                       for each in figures))  # fmt: skip
    base_hours = float(str(records[0]["hours"]))
    for record, each in zip(records[1:], figures[1:], strict=True):
        ratio = float(str(record["hours"])) / base_hours
        print(f"\n{sizes[figures.index(each)]} against {sizes[0]}: hours x{ratio:g}")
        print(f"{'stage':<16}{'time ratio':>12}{'/ hours ratio':>15}")
        for stage, time_ratio, per_size in growth(figures[0], each, ratio):
            flag = "  <- faster than linear" if per_size is not None and per_size > 1.3 else ""
            shown = f"{per_size:15.2f}" if per_size is not None else f"{'-':>15}"
            print(f"{stage:<16}{time_ratio:12.2f}{shown}{flag}")


if __name__ == "__main__":
    main()
