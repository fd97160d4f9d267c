"""Seed computation at campaign scale: the catalogue write of every same-domain pair in the band.

    python bench/seeds.py WORKSPACE   # a rehearsed one, e.g. ~/.playlisteval/rehearsal-7x100h

On a copy of the workspace's catalogue (never the catalogue itself), with its seeds table emptied,
it times the whole of `Indexer.compute_seeds`' work — reading the segments, `find_seeds` (numpy),
then the write — once through SQLAlchemy Core (`Catalog.replace_seeds`, what the code does) and
once through ORM objects (`Session.add_all`, what it did before: the baseline), in the same run.
The number of seeds is quadratic in the segments per domain by definition (every related pair);
what must stay linear is the time per seed.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from sqlmodel import Session, delete

from store.catalog import INDEXED, Catalog, SeedRow, vectors_from_bytes
from tools.seeding import SegmentRef, find_seeds


def _copy(source: Path, target: Path) -> Catalog:
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    catalog = Catalog.open(target)
    with Session(catalog.engine) as s:
        s.exec(delete(SeedRow))  # type: ignore[call-overload]
        s.commit()
    return catalog


def _seeds(catalog: Catalog) -> list[SeedRow]:
    order = [v.id for v in catalog.videos(statuses=[INDEXED])]
    rows = catalog.segments(video_ids=order)
    refs = [SegmentRef(r.id, r.video_id, r.domain) for r in rows]
    pairs = find_seeds(
        refs, vectors_from_bytes([r.vector for r in rows]), min_cosine=0.33, max_cosine=0.90
    )
    return [SeedRow(id=p.seed_id, domain=p.domain, segment_a=p.segment_a,
                    segment_b=p.segment_b, cosine=p.cosine) for p in pairs]  # fmt: skip


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    source = Path(sys.argv[1]).expanduser() / "playlisteval.db"
    scratch = Path(tempfile.mkdtemp(prefix="bench-seeds-"))
    try:
        for name in ("orm", "core"):
            catalog = _copy(source, scratch / f"{name}.db")
            started = time.perf_counter()
            rows = _seeds(catalog)
            found = time.perf_counter() - started
            if name == "core":
                catalog.replace_seeds(rows)
            else:
                with Session(catalog.engine) as s:
                    s.add_all(rows)
                    s.commit()
            total = time.perf_counter() - started
            print(f"{name}: {len(rows)} seeds; find {found:.1f} s; all {total:.1f} s; "
                  f"{total / max(len(rows), 1) * 1e6:.1f} µs a seed")  # fmt: skip
            catalog.engine.dispose()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
