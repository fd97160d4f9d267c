"""An exported benchmark folder, read strictly: every record checked and the content hash
compared with ``benchmark.json`` before any caller uses a single pair.

``playlisteval export`` writes ``pairs.jsonl`` (one record per pair) and ``benchmark.json``,
whose ``content_sha256`` is :func:`content_sha256` of the ``pairs.jsonl`` bytes. The judge
evaluation (:mod:`agents.evaluation`) and the validation UI (:mod:`playlisteval.ui.benchmark`)
both read a folder through :func:`read_benchmark_folder`: a record that is not JSON, holds a
NaN or an infinity, has a field of the wrong type, or repeats a pair id is refused with its file
and line, and records changed after the export are refused unless the caller allows them
(``allow_modified``), which the folder then says (:attr:`BenchmarkFolder.check`) so that what
is made from it can say so too. The records stay plain dicts, so a new export field never
breaks a reader.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeGuard

from store.errors import ConfigError

__all__ = [
    "INFO_FILE",
    "PAIRS_FILE",
    "BenchmarkFolder",
    "HashCheck",
    "content_sha256",
    "read_benchmark_folder",
]

PAIRS_FILE = "pairs.jsonl"
INFO_FILE = "benchmark.json"
#: Text fields every reader of a pair needs.
TEXT_FIELDS = ("id", "prompt", "chosen", "rejected", "domain")

HashCheck = Literal["verified", "modified", "unverified"]
"""How the records compare with ``benchmark.json``: ``verified`` (they hash to its
``content_sha256``), ``modified`` (they do not, and the caller allowed it) or ``unverified``
(the folder has no ``benchmark.json`` to compare with)."""


def content_sha256(pairs_jsonl: bytes) -> str:
    """A benchmark's content hash: the SHA-256 of its ``pairs.jsonl`` bytes, as
    ``benchmark.json`` records it."""
    return hashlib.sha256(pairs_jsonl).hexdigest()


@dataclass(frozen=True)
class BenchmarkFolder:
    """An export folder, read and checked: its records in file order and their content hash.

    ``content_sha256`` is the hash of the records as found; ``recorded_sha256`` the one
    ``benchmark.json`` holds (None without it); ``check`` how the two compare."""

    path: Path
    records: tuple[Mapping[str, Any], ...]
    content_sha256: str
    recorded_sha256: str | None
    check: HashCheck


def _non_finite(value: Any, where: str) -> Iterator[tuple[str, float]]:
    """The field paths inside ``value`` that hold a NaN or an infinity, with what they hold."""
    if isinstance(value, float) and not math.isfinite(value):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{where}[{index}]")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _record_fault(record: Any, required_text: Collection[str]) -> str | None:
    """What is wrong with one parsed record, or None."""
    if not isinstance(record, dict):
        return f"a record must be a JSON object, got {type(record).__name__}"
    for where, value in _non_finite(record, ""):
        return f"field {where!r} is {value!r}; a number must be finite"
    for name in (*TEXT_FIELDS, *required_text):
        if name not in record:
            return f"field {name!r} is missing"
        if not isinstance(record[name], str):
            return f"field {name!r} must be text, got {record[name]!r}"
    if not record["id"]:
        return "field 'id' is empty"
    gap = record.get("gap")
    if not isinstance(gap, int) or isinstance(gap, bool):
        return f"field 'gap' must be an integer, got {gap!r}"
    evidence = record.get("evidence")
    if not isinstance(evidence, list):
        return f"field 'evidence' must be a list of spans, got {evidence!r}"
    for index, span in enumerate(evidence):
        where = f"evidence[{index}]"
        if not isinstance(span, dict):
            return f"{where} must be an object, got {span!r}"
        if not isinstance(span.get("video_id"), str) or not span["video_id"]:
            return f"{where}.video_id must be a video id, got {span.get('video_id')!r}"
        start, end = span.get("start_s"), span.get("end_s")
        if not _is_number(start) or not _is_number(end):
            return f"{where} needs start_s and end_s in seconds, got {start!r} and {end!r}"
        if not 0 <= start < end:
            return f"{where} spans {start!r}–{end!r} s: it must start at 0 s or later and end after"
    return None


def _records(pairs_file: Path, text: str, required_text: Collection[str]) -> list[dict[str, Any]]:
    """Every record of ``pairs.jsonl``'s ``text``, each checked; the first fault raises
    :class:`ConfigError` with its file and line."""
    records: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{str(pairs_file)!r} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where} is not valid JSON ({exc.msg}, column {exc.colno}): restore the file "
                "or export the benchmark again"
            ) from exc
        fault = _record_fault(record, required_text)
        if fault is not None:
            raise ConfigError(f"{where}: not a benchmark pair record: {fault}")
        pair_id = record["id"]
        if pair_id in first_line:
            raise ConfigError(
                f"{where}: pair id {pair_id!r} appears twice (first on line "
                f"{first_line[pair_id]}); keep one of them or export the benchmark again"
            )
        first_line[pair_id] = number
        records.append(record)
    return records


def _recorded_hash(info_file: Path) -> str | None:
    """The ``content_sha256`` of ``benchmark.json`` (None without the file)."""
    if not info_file.exists():
        return None
    try:
        info = json.loads(info_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{str(info_file)!r} is not valid JSON ({exc}); export the benchmark again"
        ) from exc
    found = info.get("content_sha256") if isinstance(info, dict) else None
    if not isinstance(found, str) or not found:
        raise ConfigError(f"{str(info_file)!r} names no content_sha256; export the benchmark again")
    return found


def read_benchmark_folder(
    path: Path, *, allow_modified: bool = False, required_text: Collection[str] = ()
) -> BenchmarkFolder:
    """Read and check the export folder ``path`` whole; :class:`ConfigError` names the first
    fault (its file, and its line for a record).

    Every record must be a JSON object with the text fields :data:`TEXT_FIELDS` (and
    ``required_text``), an integer ``gap`` and a list of ``evidence`` spans, no NaN or infinity
    anywhere, and an id no other record has. The records must hash to the ``content_sha256``
    of ``benchmark.json``, unless ``allow_modified`` (the folder's ``check`` is then
    ``modified``). A benchmark is read whole or not at all: a folder without ``benchmark.json``
    cannot be checked, so it is refused too unless ``allow_modified`` (then read as
    ``unverified``, which the evaluation records)."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"benchmark folder {str(root)!r} does not exist")
    pairs_file = root / PAIRS_FILE
    try:
        raw = pairs_file.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{str(pairs_file)!r} is missing; is {str(root)!r} a folder `playlisteval export` "
            "wrote?"
        ) from exc
    except OSError as exc:  # a folder where the file goes, or one that cannot be read
        raise ConfigError(
            f"{str(pairs_file)!r} cannot be read ({exc.strerror or exc}); is {str(root)!r} a "
            "folder `playlisteval export` wrote?"
        ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{str(pairs_file)!r} is not UTF-8 text (byte {exc.start}): give the pairs.jsonl "
            "`playlisteval export` wrote"
        ) from exc
    records = _records(pairs_file, text, required_text)
    actual = content_sha256(raw)
    recorded = _recorded_hash(root / INFO_FILE)
    check: HashCheck = (
        "unverified" if recorded is None else "verified" if recorded == actual else "modified"
    )
    if check == "unverified" and not allow_modified:
        raise ConfigError(
            f"{str(root)!r} has no {INFO_FILE}, so its records cannot be checked against the "
            "export's content hash (deleting it would hide any edit): restore it, export the "
            "benchmark again, or (eval) judge it unchecked on purpose with "
            "--allow-modified-benchmark, recorded as unverified"
        )
    if check == "modified" and not allow_modified:
        raise ConfigError(
            f"{str(pairs_file)!r} does not match the content hash in {INFO_FILE} "
            f"({recorded[:12] if recorded else ''}…; the records hash to {actual[:12]}…): the "
            "records were changed after the export; restore pairs.jsonl or export the benchmark "
            "again (or allow a modified benchmark on purpose, which is recorded)"
        )
    return BenchmarkFolder(
        path=root,
        records=tuple(records),
        content_sha256=actual,
        recorded_sha256=recorded,
        check=check,
    )
