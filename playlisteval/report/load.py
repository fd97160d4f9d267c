"""The report's input: the judgment records of evaluation folders, read strictly.

An evaluation folder holds ``judgments.jsonl`` (one verdict per line, parsed by
:class:`policies.judging.JudgmentRecord`) and ``evaluation.json`` (its id, the benchmark's content
hash, when it started). :func:`load_evaluations` reads several, one verdict per key, and refuses
one judge under one condition judged in two folders unless asked to merge them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.judging import JudgingError, JudgmentRecord
from store.errors import PlaylistEvalError

JUDGMENTS_FILE = "judgments.jsonl"


EVALUATION_FILE = "evaluation.json"


class ReportError(PlaylistEvalError):
    """The evaluation directories cannot be reported on (missing file, malformed record)."""


def _parse(line: str, where: str) -> JudgmentRecord:
    try:
        return JudgmentRecord.from_line(line)
    except JudgingError as error:
        raise ReportError(f"{where}: {error}") from error


def _said(record: JudgmentRecord) -> tuple[Any, ...]:
    """What a record says, not the call that made it: equal for a verdict recorded twice."""
    return (record.judgment, record.condition, record.ranked, record.gold)


@dataclass(frozen=True)
class LoadedJudgments:
    """The judgments of some evaluation folders and where each run's came from.

    ``sources`` maps each ``(judge, condition id)`` to the folders (as given) whose judgments it
    holds: one, unless the evaluations were merged (``merge_duplicates``).
    """

    records: list[JudgmentRecord]
    sources: dict[tuple[str, str], tuple[Path, ...]]


def distinct_folders(eval_dirs: Sequence[Path]) -> list[Path]:
    """The folders in the order given, a folder given twice (by any path to it) once."""
    seen: dict[Path, Path] = {}
    for directory in eval_dirs:
        seen.setdefault(Path(directory).resolve(), Path(directory))
    return list(seen.values())


def _refuse_duplicate(run: tuple[str, str], first: Path, second: Path) -> ReportError:
    judge, condition = run
    return ReportError(
        f"{judge!r} under {condition!r} was judged in two evaluations, {str(first)!r} and "
        f"{str(second)!r}; report one of them, or merge them into one cell on purpose with "
        "merge_duplicates=True (`playlisteval report --merge-duplicates`)"
    )


def load_evaluations(
    eval_dirs: Sequence[Path], *, merge_duplicates: bool = False
) -> LoadedJudgments:
    """Every judgment of the evaluation folders, in file order, one per verdict, and the
    folders each run (judge × condition) came from.

    A verdict recorded twice in one folder (a resumed run) counts once, and a folder given twice
    is read once. The same judge under the same condition in two different folders raises
    :class:`ReportError` naming both, unless ``merge_duplicates``: then their judgments make one
    run (a verdict both hold counts once) and the run names both folders. Two different verdicts
    for the same judge, condition, pair, length and order raise either way.
    """
    seen: dict[tuple[str, str, str, float, str], tuple[JudgmentRecord, str]] = {}
    sources: dict[tuple[str, str], list[Path]] = {}
    for directory in distinct_folders(eval_dirs):
        path = directory / JUDGMENTS_FILE
        if not path.is_file():
            raise ReportError(
                f"{str(directory)!r} has no {JUDGMENTS_FILE}; run `eval` into it first"
            )
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            item = _parse(line, where)
            run = (item.judge, item.condition_id)
            folders = sources.setdefault(run, [directory])
            if folders[-1] != directory:
                if not merge_duplicates:
                    raise _refuse_duplicate(run, folders[0], directory)
                folders.append(directory)
            key = (*run, item.pair_id, item.length_hours, item.order)
            if key in seen:
                first, first_where = seen[key]
                if _said(first) != _said(item):
                    raise ReportError(
                        f"{where}: {item.judge!r} under {item.condition_id!r} judged pair "
                        f"{item.pair_id!r} ({item.order}, {item.length_hours:g} h) differently "
                        f"at {first_where}; keep one"
                    )
                continue
            seen[key] = (item, where)
    return LoadedJudgments(
        [item for item, _ in seen.values()], {run: tuple(f) for run, f in sources.items()}
    )


def load_records(
    eval_dirs: Sequence[Path], *, merge_duplicates: bool = False
) -> list[JudgmentRecord]:
    """The judgments of :func:`load_evaluations` (same rules), without their folders."""
    return load_evaluations(eval_dirs, merge_duplicates=merge_duplicates).records


def evaluation_json(directory: Path) -> dict[str, Any]:
    """An evaluation folder's ``evaluation.json`` ({} when it has none)."""
    path = Path(directory) / EVALUATION_FILE
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ReportError(
            f"{path} is not JSON ({error}); restore it or run `eval` again"
        ) from error
    return found if isinstance(found, dict) else {}
