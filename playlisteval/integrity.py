"""Whether the figures a command shows rest on a log that checks out, and the anchors that let a
published benchmark be checked against any copy of that log later.

The chain (:mod:`store.eventstore`) catches an edit made without the log key; an
:class:`~store.eventstore.Anchor` published with a benchmark or a report catches a rewrite made
after it, with or without the key. ``audit``, ``runs`` and ``export`` call :func:`log_warning`
first, so figures read from a log that fails verification are flagged on their first line (or,
for ``export``, refused).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playlisteval.app import App
from store.chain import Anchor
from store.errors import ConfigError
from store.events import run_streams
from store.eventstore import EventStore

ANCHOR_KEYS = ("anchor", "anchors")


@dataclass(frozen=True)
class NamedAnchor:
    """An anchor and what it anchors ("run R", "export …", "evaluation E")."""

    label: str
    anchor: Anchor

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, **self.anchor.to_json()}


def log_warning(app: App, runs: Iterable[str] | None = None, *, quick: bool = True) -> str | None:
    """The line to put first when the figures about to be shown rest on a log that fails
    verification (``runs``: only those runs' streams; None: the whole log); None when it
    checks out. ``quick``: it goes on from the last checkpoint a check left beside the key
    (``EventStore.check(quick=True)``), so ``runs`` and ``audit`` answer in the time the
    events since take; ``export`` (what it publishes rests on it) and ``store verify`` check
    every event."""
    if runs is None:
        problems = app.events.check(quick=quick).problems
    else:
        streams = [name for run in sorted(set(runs)) for name in run_streams(run)]
        problems = app.events.check(streams, quick=quick).problems
    if not problems:
        return None
    return (
        f"the log fails verification ({len(problems)} problem(s), the first "
        f"{problems[0].at}): the figures below are read from it and cannot be trusted; "
        "see `playlisteval store verify`"
    )


def run_anchor(app: App, run_id: str) -> NamedAnchor:
    """The anchor of a run's streams as they stand now (its seeds' and its pair selection's)."""
    return NamedAnchor(f"run {run_id}", app.events.anchor(run_streams(run_id)))


def read_anchors(path: Path) -> list[NamedAnchor]:
    """The anchors published in ``path``: an export folder (its ``benchmark.json``), an
    evaluation folder (its ``evaluation.json``), either file, or an anchor file ``store anchor``
    wrote."""
    file = path
    if path.is_dir():
        file = next(
            (path / n for n in ("benchmark.json", "evaluation.json") if (path / n).is_file()),
            path / "benchmark.json",
        )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{str(path)!r} holds no anchor: give an export or evaluation folder, its "
            "benchmark.json or evaluation.json, or a file `playlisteval store anchor --out` wrote"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read anchors from {str(file)!r}: {exc}") from exc
    except RecursionError as exc:  # JSON nested deeper than a parser's stack: not an anchor
        raise ConfigError(
            f"cannot read anchors from {str(file)!r}: its JSON is nested too deep to be one"
        ) from exc
    found: list[Any] = []
    if isinstance(data, dict):
        for key in ANCHOR_KEYS:
            value = data.get(key)
            found += value if isinstance(value, list) else [value] if value else []
        if not found and "digest" in data:
            found = [data]
    if not found:
        raise ConfigError(f"{str(file)!r} records no anchor")
    out: list[NamedAnchor] = []
    for n, item in enumerate(found, start=1):
        where = f"anchor {n} of {str(file)!r}"
        label = str(item.get("label", f"anchor {n}")) if isinstance(item, dict) else where
        out.append(NamedAnchor(label, Anchor.from_json(item, where)))
    return out


def check_anchors(store: EventStore, anchors: Iterable[NamedAnchor]) -> list[str]:
    """What in the log differs from each anchor, each line naming the anchor."""
    return [
        f"{named.label}: {problem}"
        for named in anchors
        for problem in store.check_anchor(named.anchor)
    ]
