"""Seed computation at campaign scale: the catalogue write of every same-domain pair in the band.

    python bench/seeds.py WORKSPACE   # a rehearsed one, e.g. ~/.playlisteval/rehearsal-7x100h
    python bench/seeds.py --synthetic # every pair against a top-k a segment, at two sizes

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

import numpy as np
from sqlmodel import Session, delete

from store.catalog import INDEXED, Catalog, SeedRow, vectors_from_bytes
from tools.index.seeding import SegmentRef, find_seeds


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


def synthetic(sizes: tuple[int, ...] = (300, 1200), k: int = 16) -> None:
    """Seeds of one domain of random segment vectors (a paper-scale domain holds ~300-600
    segments): every pair in the band against each segment's k best, counted and timed in the
    same run, at two sizes, so the growth of each shows (every pair: the square; top-k: the
    segments)."""
    rng = np.random.default_rng(7)
    previous: tuple[int, int] | None = None
    for n in sizes:
        refs = [SegmentRef(f"v{i // 3}-s{i % 3}", f"v{i // 3}", "x") for i in range(n)]
        vectors = rng.normal(size=(1, 64)) + 1.2 * rng.normal(size=(n, 64))
        started = time.perf_counter()
        every = find_seeds(refs, vectors, min_cosine=0.33, max_cosine=0.90)
        every_s = time.perf_counter() - started
        started = time.perf_counter()
        kept = find_seeds(refs, vectors, min_cosine=0.33, max_cosine=0.90, per_segment=k)
        kept_s = time.perf_counter() - started
        grow = ""
        if previous is not None:
            grow = (
                f"; growth ×{len(every) / previous[0]:.1f} (every pair) and "
                f"×{len(kept) / previous[1]:.1f} (top-{k}) for ×{n / sizes[0]:.0f} segments"
            )
        print(
            f"{n} segments: every pair {len(every)} seeds in {every_s:.2f} s; top-{k} a segment "
            f"{len(kept)} seeds in {kept_s:.2f} s{grow}"
        )
        previous = (len(every), len(kept))


def main() -> None:
    if sys.argv[1:] == ["--synthetic"]:
        synthetic()
        return
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
