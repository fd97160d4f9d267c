"""Which benchmark each evaluation folder judged, and how the report names an evaluation.

A report compares numbers only over one benchmark: :func:`benchmark_groups` sorts the folders by
the benchmark content hash their ``evaluation.json`` records, and :func:`refuse_mixed` refuses
folders of two benchmarks (:class:`MixedBenchmarks`, naming which folder judged which) unless
the report was asked to group every table and figure by benchmark.

:func:`evaluation_labels` names each evaluation by what it judged — the benchmark name,
conditions and judges its ``evaluation.json`` records, as shortly as tells them apart —
falling back to the folder's name, and never gives two evaluations one label (evaluation
folders long defaulted to one name, so a folder's name alone may tell nothing apart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playlisteval.report.load import EVALUATION_FILE, ReportError, evaluation_json

SHORT_HASH = 12
"""How many hex digits of a benchmark's hash a label shows (48 bits: two benchmarks of one
report never share them by chance)."""

NAMED_JUDGES = 3
"""How many judges a label names before it counts the rest."""


class MixedBenchmarks(ReportError):
    """The evaluation folders judged different benchmarks, and the report was not asked to
    group its tables and figures by benchmark."""


def _sha(meta: Mapping[str, Any]) -> str | None:
    found = meta.get("benchmark_sha256")
    return str(found) if isinstance(found, str) and found else None


def _benchmark_name(meta: Mapping[str, Any]) -> str | None:
    """The benchmark's name as ``evaluation.json`` records it (``benchmark_name``), if it does."""
    found = meta.get("benchmark_name")
    return found.strip() if isinstance(found, str) and found.strip() else None


@dataclass(frozen=True)
class BenchmarkGroup:
    """The evaluation folders (as given, in order) that judged one benchmark: its content hash
    (None: the folders record none) and its recorded name, if any."""

    sha256: str | None
    name: str | None
    folders: tuple[Path, ...]

    @property
    def label(self) -> str:
        """The benchmark in words: ``benchmark NAME (sha256 0123456789ab…)``."""
        if self.sha256 is None:
            return "a benchmark whose hash was not recorded"
        hashed = f"sha256 {self.sha256[:SHORT_HASH]}…"
        return f"benchmark {self.name} ({hashed})" if self.name else f"benchmark {hashed}"

    @property
    def slug(self) -> str:
        """A file-name prefix for this benchmark's tables and figures: ``bench-0123456789ab``."""
        return f"bench-{self.sha256[:SHORT_HASH]}" if self.sha256 else "bench-unrecorded"


def benchmark_groups(folders: Sequence[Path]) -> list[BenchmarkGroup]:
    """The folders grouped by the benchmark hash their ``evaluation.json`` records, in the order
    each benchmark is first given. Folders that record no hash make one group of their own: the
    report cannot tell whether they judged the benchmark the others did."""
    groups: dict[str | None, list[Path]] = {}
    names: dict[str | None, str | None] = {}
    for folder in folders:
        meta = evaluation_json(folder)
        sha = _sha(meta)
        groups.setdefault(sha, []).append(folder)
        names[sha] = names.get(sha) or _benchmark_name(meta)
    return [BenchmarkGroup(sha, names[sha], tuple(f)) for sha, f in groups.items()]


def refuse_mixed(groups: Sequence[BenchmarkGroup]) -> None:
    """Raise :class:`MixedBenchmarks` when ``groups`` holds more than one benchmark, saying which
    folder judged which and what to do."""
    if len(groups) < 2:
        return
    said = "; ".join(
        f"{str(folder)!r} judged {_judged(group, folder)}"
        for group in groups
        for folder in group.folders
    )
    raise MixedBenchmarks(
        f"these evaluations judged different benchmarks: {said}; one leaderboard would mix "
        "them. Report each benchmark on its own, or give --across-benchmarks "
        "(across_benchmarks=True) for every table and figure grouped by benchmark"
    )


def _judged(group: BenchmarkGroup, folder: Path) -> str:
    if group.sha256 is None:
        return f"a benchmark whose hash its {EVALUATION_FILE} does not record"
    return group.label


def _conditions_text(meta: Mapping[str, Any]) -> str | None:
    """The conditions an evaluation judged: the one condition's id, or how many."""
    conditions = [
        str(c.get("condition_id"))
        for c in meta.get("conditions") or []
        if isinstance(c, dict) and c.get("condition_id")
    ]
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else f"{len(conditions)} conditions"


def _judges_text(meta: Mapping[str, Any]) -> str | None:
    """The judges an evaluation judged with: the first few by name, the rest counted."""
    judges = [j for j in meta.get("judges") or [] if isinstance(j, str) and j]
    if not judges:
        return None
    named = ", ".join(judges[:NAMED_JUDGES])
    return named + (f" +{len(judges) - NAMED_JUDGES} more" if len(judges) > NAMED_JUDGES else "")


def _described(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """What an evaluation judged, from its ``evaluation.json``, said shortly and more fully:
    ``NAME: 3 conditions`` and ``NAME: judge-a, judge-b × 3 conditions`` (NAME: the benchmark's
    recorded name, else its hash). None when it records neither judges nor conditions."""
    judges, conditions = _judges_text(meta), _conditions_text(meta)
    if judges is None or conditions is None:
        return None
    sha = _sha(meta)
    benchmark = _benchmark_name(meta) or (f"sha256 {sha[:SHORT_HASH]}…" if sha else None)
    prefix = f"{benchmark}: " if benchmark else ""
    return f"{prefix}{conditions}", f"{prefix}{judges} × {conditions}"


def _clashing(labels: Mapping[Path, str]) -> set[Path]:
    """The folders whose label another folder has too."""
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    return {folder for folder, label in labels.items() if counts[label] > 1}


def evaluation_labels(folders: Sequence[Path]) -> dict[Path, str]:
    """How the report names each evaluation folder: by what it judged (its ``evaluation.json``:
    the benchmark's name and the conditions, and the judges where that tells two evaluations
    apart), else by the folder's name. Two evaluations that would still share a label are told
    apart by their folder's name, then by its path as given, which differs for any two folders
    (:func:`~playlisteval.report.load.distinct_folders` keeps one per real path)."""
    tiers: dict[Path, list[str]] = {}
    for folder in dict.fromkeys(folders):
        meta = evaluation_json(folder)
        recorded = meta.get("name") if isinstance(meta.get("name"), str) else None
        name, path = recorded or folder.name or str(folder), str(folder)
        said = _described(evaluation_json(folder))
        if said is None:
            tiers[folder] = [name, path]
        else:
            short, full = said
            tiers[folder] = [short, full, f"{full} ({name})", f"{full} ({path})"]
    level = dict.fromkeys(tiers, 0)
    while clash := {
        f
        for f in _clashing({f: t[level[f]] for f, t in tiers.items()})
        if level[f] + 1 < len(tiers[f])
    }:
        for folder in clash:
            level[folder] += 1
    labels = {f: t[level[f]] for f, t in tiers.items()}
    # Only a described label equal to another folder's path could still clash: number them.
    for number, folder in enumerate(sorted(_clashing(labels), key=str), start=1):
        labels[folder] += f" #{number}"
    return labels
