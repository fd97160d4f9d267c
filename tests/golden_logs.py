"""Golden logs: curation runs recorded once, kept beside the tests, replayed strictly by every
run of the suite — Temporal keeps workflow histories the same way, one of them deliberately
divergent. A change to request keys, prompts or event shapes that would stop old logs from
replaying fails ``tests/test_golden_logs.py``; when such a change is meant, regenerate them:

    .venv/bin/python -m tests.golden_logs

which indexes the demo playlist into a scratch workspace (as the tests' ``demo_home``), curates
two seeds offline and writes the log of today's schemas, ``tests/golden/spec-run.jsonl``.

``inputs.json`` records what the logs were recorded on: the content keys of the demo videos
(:func:`agents.evidence.source_key`, part of every request key) and the PyAV that encoded them;
``constraints.txt`` pins that PyAV, since another build encodes the same frames into other bytes.

The logs of earlier schemas stay as they were recorded, never re-recorded: each must go on
replaying strictly (upcast, its definition rebuilt from what it did record). They are
``small-run.jsonl`` (step 14: ``RunStarted`` schema 1, no recorded definition) and its
divergent twin, whose one recorded answer (a sufficiency verdict) was changed after the fact;
``spec-run.jsonl`` (step 21: ``RunStarted`` schema 2, the run's definition recorded).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.events import decode_event
from store.eventstore import EventStore

GOLDEN = Path(__file__).resolve().parent / "golden"
SMALL = GOLDEN / "small-run.jsonl"
DIVERGENT = GOLDEN / "divergent-run.jsonl"
SPEC = GOLDEN / "spec-run.jsonl"
INPUTS = GOLDEN / "inputs.json"
#: Every golden log that must replay exactly, each of a schema generation of its own.
EXACT = (SMALL, SPEC)


def demo_sources(manifest: Path) -> dict[str, str]:
    """The content key of each video of the demo playlist whose ``manifest.json`` is given."""
    from agents.evidence import source_key

    return {video.stem: source_key(video) for video in sorted(manifest.parent.glob("*/*.mp4"))}


def inputs_differ(manifest: Path) -> str | None:
    """Why the demo playlist at ``manifest`` is not the one the golden logs were recorded on
    (its videos' bytes differ), or None when it is."""
    import av

    recorded = json.loads(INPUTS.read_text(encoding="utf-8"))
    found = demo_sources(manifest)
    changed = sorted(v for v in recorded["sources"] if found.get(v) != recorded["sources"][v])
    if not changed:
        return None
    return (
        f"the demo videos are not the bytes the golden logs were recorded on ({len(changed)} of "
        f"{len(recorded['sources'])} differ, e.g. {changed[0]!r}): they were encoded by PyAV "
        f"{recorded['av']}, this machine has {av.__version__}; install the pinned one "
        "(`pip install -c constraints.txt -e .`, as scripts/setup.sh does)"
    )


def dump(store: EventStore, path: Path) -> int:
    """Write every event of ``store`` as JSON lines (stream, type, schema, data), in seq order."""
    rows = store.read_all()
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            record = {
                "stream": row.stream,
                "type": row.type,
                "schema": row.schema,
                "data": row.data,
            }
            out.write(json.dumps(record, sort_keys=True) + "\n")
    return len(rows)


def records(path: Path) -> Iterator[dict[str, Any]]:
    """The lines of a golden log."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def load(store: EventStore, path: Path) -> str:
    """Append a golden log to ``store`` through the store itself (so its chains are its own);
    returns the run id it holds."""
    run_id = ""
    for record in records(path):
        event = decode_event(record["type"], record["schema"], record["data"])
        store.append(record["stream"], [event])
        if record["type"] == "RunStarted":
            run_id = str(record["data"]["run_id"])
    return run_id


def diverge(source: Path, target: Path) -> int:
    """Copy ``source`` with the first passing sufficiency answer (answerable, every claim
    supported) turned into "not answerable"; returns the position (0-based line) of the
    changed record. Always a pass made a rejection, however the run's seeds interleaved."""
    changed = -1
    with target.open("w", encoding="utf-8") as out:
        for position, record in enumerate(records(source)):
            data = record["data"]
            if changed < 0 and record["type"] == "CallRecorded" and data["role"] == "sufficiency":
                for part in data["response"]["parts"]:
                    if part.get("part_kind") != "tool-call":
                        continue
                    args = part["args"]
                    parsed = json.loads(args) if isinstance(args, str) else args
                    if parsed.get("answerable") is not True or parsed.get("unsupported_claims"):
                        continue
                    parsed["answerable"] = False
                    part["args"] = json.dumps(parsed) if isinstance(args, str) else parsed
                    changed = position
            out.write(json.dumps(record, sort_keys=True) + "\n")
    if changed < 0:
        raise SystemExit("the golden run has no passing sufficiency call to make divergent")
    return changed


def main() -> None:
    """Record the golden logs anew (see the module docstring)."""
    from playlisteval import runs
    from playlisteval.app import App
    from playlisteval.settings import SETTINGS_FILE, load_settings
    from tools.offline.synthetic import make_demo_playlist

    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        folder = Path(tmp)
        playlist = make_demo_playlist(folder / "playlist")
        home = folder / "home"
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
            report = runs.curate(app, budget_usd=5.0, max_seeds=2, run_id="golden-spec")
            GOLDEN.mkdir(exist_ok=True)
            count = dump(app.events, SPEC)
        import av

        INPUTS.write_text(
            json.dumps(
                {"av": av.__version__, "sources": demo_sources(playlist)}, indent=2, sort_keys=True
            )
            + "\n",
            encoding="utf-8",
        )
    print(
        f"{SPEC}: {count} events of run {report.run_id!r} "
        f"({len(report.accepted)} accepted, {len(report.discarded)} discarded)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
