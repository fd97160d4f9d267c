"""The campaign rehearsal's instruments: each stage's wall time, peak memory and disk.

``playlisteval demo --domains N --hours-per-domain H`` runs every stage of a campaign on a
generated collection (:mod:`tools.offline.campaign`) and measures each with a :class:`StageMeter`:
wall
time, the peak resident memory of this process and its children while the stage ran (sampled),
and the workspace's size on disk after it. The figures are printed and written to
``rehearsal.json`` in the workspace, one record a run, so two sizes can be compared stage by stage
(:func:`growth`).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

__all__ = [
    "RehearsalRecord",
    "StageFigure",
    "StageMeter",
    "campaign_conditions",
    "default_haystacks",
    "disk_bytes",
    "first_fill",
    "growth",
    "next_fill",
]

RECORD_FILE = "rehearsal.json"
# How far past the measured yield the next round aims (a seed's yield varies by domain).
FILL_MARGIN = 1.25
_SAMPLE_S = 1.0
PAPER_HAYSTACKS = (1.0, 10.0, 100.0)


@dataclass(frozen=True)
class StageFigure:
    """One stage's measurement."""

    stage: str
    seconds: float
    peak_rss_bytes: int
    disk_bytes: int
    note: str = ""


@dataclass
class RehearsalRecord:
    """One rehearsal run: what it was asked, and every stage's figure."""

    command: str
    domains: int
    hours_per_domain: float
    hours: float
    started: str
    stages: list[StageFigure] = field(default_factory=list)
    # A filling rehearsal: the pairs asked per domain, and the pairs sampled per domain.
    pairs_target: int | None = None
    pairs_by_domain: dict[str, int] = field(default_factory=dict)
    # Each domain that fell short of the target, and why.
    short: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The record as stored in ``rehearsal.json``."""
        return asdict(self)

    @property
    def total_seconds(self) -> float:
        """Wall time of all stages."""
        return sum(s.seconds for s in self.stages)


def disk_bytes(root: Path) -> int:
    """Bytes of the files under ``root`` (links not followed), as ``du --apparent-size``."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:  # a file gone meanwhile (a temporary one)
                continue
    return total


def _children_rss(process: psutil.Process) -> int:
    total = 0
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # a child that ended meanwhile
            continue
    return total


def _reset_peak() -> bool:
    """Reset this process's peak resident memory (Linux: ``clear_refs`` 5); False elsewhere."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _own_peak(process: psutil.Process, fallback: int) -> int:
    """This process's peak resident memory since :func:`_reset_peak` (VmHWM), or ``fallback``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(fallback, int(process.memory_info().rss))


class StageMeter:
    """Measures stages one after another (``with meter.stage("index") as notes: …``).

    A stage's peak memory is this process's own peak while it ran (the kernel's high-water mark,
    reset at the stage's start where Linux allows, else sampled) plus the largest total its child
    processes (the generator's workers) were seen to hold, sampled every second: cheap enough
    not to slow what it measures.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self.figures: list[StageFigure] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[list[str]]:
        """Time ``name``; the list it yields takes notes (joined into the figure's note)."""
        process = psutil.Process()
        exact = _reset_peak()
        own = [process.memory_info().rss]
        children = [0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(_SAMPLE_S):
                children[0] = max(children[0], _children_rss(process))
                if not exact:
                    own[0] = max(own[0], process.memory_info().rss)

        sampler = threading.Thread(target=sample, name=f"rss-{name}", daemon=True)
        sampler.start()
        notes: list[str] = []
        started = time.perf_counter()
        try:
            yield notes
        finally:
            seconds = time.perf_counter() - started
            stop.set()
            sampler.join()
            peak = _own_peak(process, own[0]) if exact else max(own[0], process.memory_info().rss)
            self.figures.append(
                StageFigure(
                    name,
                    round(seconds, 2),
                    peak + children[0],
                    disk_bytes(self.home),
                    "; ".join(notes),
                )
            )


def default_haystacks(hours_per_domain: float) -> list[float]:
    """The haystack lengths a rehearsal builds by default: the paper's ladder (1, 10, 100 h) as
    far as a domain of ``hours_per_domain`` reaches, topped by the whole domain when it holds
    more than the last rung; so any domain of more than an hour draws the length axis with two
    lengths or more (3 h gives 1 and 3 h), and one of an hour or less gives the whole domain."""
    fitting = [h for h in PAPER_HAYSTACKS if h <= hours_per_domain + 1e-9]
    if not fitting or hours_per_domain > fitting[-1] + 1e-9:
        fitting.append(float(hours_per_domain))
    return fitting


def campaign_conditions(haystacks: Sequence[float], n_frames: int) -> list[str]:
    """Uniform frames against each of the four retrievers, frames and transcript, at each
    haystack length: the conditions of the paper's length and retrieval axes."""
    from tools.evidence.retrieval import RETRIEVERS  # the one table of retriever names

    out: list[str] = []
    for hours in haystacks:
        out.append(f"uniform::frames+transcript:{hours:g}h:{n_frames}")
        out += [f"retrieved:{r}:frames+transcript:{hours:g}h:{n_frames}" for r in RETRIEVERS]
    return out


def save_record(home: Path, record: RehearsalRecord) -> Path:
    """Append ``record`` to the workspace's ``rehearsal.json`` (a list, oldest first)."""
    path = home / RECORD_FILE
    found: list[Any] = []
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            found = loaded if isinstance(loaded, list) else []
        except ValueError:
            found = []  # a torn file from a killed run: start the list again
    found.append(record.to_json())
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def growth(
    small: Sequence[StageFigure], large: Sequence[StageFigure], size_ratio: float
) -> list[tuple[str, float, float | None]]:
    """Per stage ``(stage, time ratio large/small, that ratio over the size ratio)``: about 1
    or less is linear (or better); well above 1 grows faster than the collection."""
    by_name = {f.stage: f for f in small}
    out: list[tuple[str, float, float | None]] = []
    for figure in large:
        base = by_name.get(figure.stage)
        if base is None or base.seconds <= 0:
            continue
        ratio = figure.seconds / base.seconds
        out.append((figure.stage, ratio, ratio / size_ratio if size_ratio > 0 else None))
    return out


def first_fill(target: int) -> int:
    """Seeds per domain a filling rehearsal's first round curates for ``target`` pairs a
    domain: a quarter of the target (a seed of the offline harness yields one to three pairs),
    at least 2 and at most 16, so the round measures a yield without paying for the whole."""
    return max(2, min(16, math.ceil(target / 4)))


def next_fill(
    target: int,
    taken: int,
    pairs: dict[str, int],
    available: dict[str, int],
    *,
    margin: float = FILL_MARGIN,
) -> int | None:
    """Seeds per domain for the next round of a rehearsal that fills ``target`` pairs per
    domain, after a round of ``taken`` seeds per domain sampled ``pairs`` (domain -> pairs) out
    of ``available`` seeds (domain -> active seeds); None when every domain is full, or when no
    short domain has a seed left to take (its seeds ran out: the caller says so).

    Each short domain's yield (pairs per seed) is measured by the round just run; the next round
    takes enough seeds for the worst of them, with ``margin`` to spare, never fewer than one more
    than now and never more than the largest short domain holds. A domain that sampled no pair
    is counted as one, so its next round is large but finite. Seeds are taken again from the
    start (``curate --again``): the rounds' seed lists are nested, so the last round's run holds
    the whole benchmark."""
    if target < 1 or taken < 1:
        raise ValueError(f"target and taken must be at least 1, got {target!r} and {taken!r}")
    short = [d for d in available if pairs.get(d, 0) < target and available[d] > taken]
    if not short:
        return None
    need = max(math.ceil(taken * target * margin / max(pairs.get(d, 0), 1)) for d in short)
    most = max(available[d] for d in short)
    return min(max(need, taken + 1), most)
