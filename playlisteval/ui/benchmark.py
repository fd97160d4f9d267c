"""An exported benchmark as the validation UI reads it, and the stratified sample drawn from it.

The export directory holds ``pairs.jsonl`` (one record per pair), ``manifest.json`` (the videos
and clips) and ``benchmark.json`` (version and content hash). The records are read and checked
as an evaluation reads them (:mod:`tools.evidence.benchmark_folder`); of each, the UI keeps what it
shows, so a new export field never breaks the UI.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.pairs import even_shares
from store.errors import ConfigError
from tools.evidence.benchmark_folder import read_benchmark_folder


@dataclass(frozen=True)
class Clip:
    """One evidence span of a pair: a video and the seconds to watch."""

    video_id: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class BenchmarkPair:
    """What an annotator needs of one exported pair."""

    id: str
    prompt: str
    chosen: str
    rejected: str
    domain: str
    gap: int
    evidence: tuple[Clip, ...]


@dataclass(frozen=True)
class Benchmark:
    """An export directory, read: its pairs by id, its videos and its content hash."""

    path: Path
    content_sha256: str
    pairs: Mapping[str, BenchmarkPair]
    videos: Mapping[str, Path]  # video id → file, only videos the manifest lists

    @property
    def stream(self) -> str:
        """The event stream that holds this benchmark's annotations."""
        return f"annotations-{self.content_sha256[:12]}"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{str(path)!r} is not UTF-8 text (byte {exc.start})") from exc
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{str(path)!r} is missing; give the folder `playlisteval export` wrote"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{str(path)!r} is not valid JSON: {exc}") from exc


def _pair(record: Mapping[str, Any]) -> BenchmarkPair:
    """A record :func:`tools.evidence.benchmark_folder.read_benchmark_folder` checked, as the UI
    shows it."""
    return BenchmarkPair(
        id=str(record["id"]),
        prompt=str(record["prompt"]),
        chosen=str(record["chosen"]),
        rejected=str(record["rejected"]),
        domain=str(record["domain"]),
        gap=int(record["gap"]),
        evidence=tuple(
            Clip(str(e["video_id"]), float(e["start_s"]), float(e["end_s"]))
            for e in record["evidence"]
        ),
    )


def load_benchmark(path: Path, *, allow_modified: bool = False) -> Benchmark:
    """Read an export directory; :class:`ConfigError` says what is missing or malformed.

    The records are read and checked whole, as an evaluation reads them
    (:func:`tools.evidence.benchmark_folder.read_benchmark_folder`): a bad record is named with its
    file and line, and records changed after the export are refused unless ``allow_modified``.
    Labels are filed under the hash of the records as found, so an edited ``pairs.jsonl`` never
    counts labels given to other records."""
    folder = read_benchmark_folder(path, allow_modified=allow_modified)
    root = folder.path
    pairs = {str(record["id"]): _pair(record) for record in folder.records}
    manifest = _read_json(root / "manifest.json")
    videos: dict[str, Path] = {}
    for entry in manifest.get("videos", []) if isinstance(manifest, dict) else []:
        if not isinstance(entry, dict) or not entry.get("id") or not entry.get("path"):
            continue
        file = Path(str(entry["path"])).expanduser()
        videos[str(entry["id"])] = file if file.is_absolute() else root / file
    return Benchmark(
        path=root,
        content_sha256=folder.content_sha256,
        pairs=pairs,
        videos=videos,
    )


def _fill(capacity: Mapping[Any, int], total: int, rng: random.Random) -> dict[Any, int]:
    """Share ``total`` over the cells as evenly as their capacities allow (water filling,
    :func:`policies.pairs.even_shares`); the seeded ``rng`` decides which cells get the
    remainder that does not divide evenly."""

    def shuffled(open_cells: list[Any], _given: Mapping[Any, int]) -> list[Any]:
        cells = list(open_cells)
        rng.shuffle(cells)
        return cells

    return even_shares(capacity, total, shuffled)


def draw_sample(pairs: Sequence[BenchmarkPair], size: int, seed: int) -> tuple[str, ...]:
    """``size`` pair ids, spread evenly over domains and, within each domain, over rating gaps
    (as evenly as the data allows), chosen by the seeded generator: the same pairs, seed and
    size always give the same sample. All pairs when there are no more than ``size``."""
    if size < 1:
        raise ConfigError(f"sample size must be at least 1, got {size!r}")
    rng = random.Random(seed)
    cells: dict[str, dict[int, list[str]]] = {}
    for pair in sorted(pairs, key=lambda p: p.id):
        cells.setdefault(pair.domain, {}).setdefault(pair.gap, []).append(pair.id)
    per_domain = _fill(
        {d: sum(len(ids) for ids in gaps.values()) for d, gaps in cells.items()}, size, rng
    )
    chosen: list[str] = []
    for domain in sorted(cells):
        gaps = cells[domain]
        per_gap = _fill({g: len(ids) for g, ids in gaps.items()}, per_domain[domain], rng)
        for gap in sorted(gaps):
            chosen.extend(rng.sample(gaps[gap], per_gap[gap]))
    return tuple(sorted(chosen))
