"""``runs``, ``audit`` and ``status`` at the paper's campaign scale, against the demo-sized log.

The campaign's log (7 domains, ~600 seeds of which 327 accepted, ~630 preference pairs kept, 17
judges' evaluations of ~100,000 judgments: some 300,000 events) is written once under ``--home``
with the real store: a copy of the demo workspace (its catalogue, index and exports), to whose
log every event is appended through :meth:`store.eventstore.EventStore.append_batch` under the
workspace's key, each one a real event class (:func:`store.events.decode_event`). The events are
the demo run's own, as the offline loop wrote them, cloned with new run, seed and pair ids: each
seed stream is one of the demo's seed streams (an accepted one, or its discarded one), appended a
few events at a time with the run's seeds interleaved as concurrent seeds are; each run's pairs
stream is the demo's pairs stream once per five accepted items; each evaluation stream holds one
judge's calls (a ``CallReserved`` and a ``CallRecorded`` of the demo's judge-call size per
judgment). It is kept while its ``BUILT`` marker is there.

Then the real CLI is timed, in subprocesses, on both logs (the demo's is the baseline, measured
in the same run): ``playlisteval runs``, ``audit --run RUN``, ``audit --run RUN --seed SEED`` and
``status``. Two figures each, best of ``--repeat``:

* ``wall``: the whole command as a user runs it (interpreter start and imports included);
* ``in command``: the same command in a subprocess that first imports the CLI and reads the
  settings once (so the imports, which another change makes faster, are left out), timed around
  the command alone.

Before that, one ``runs`` is timed with the checkpoint beside the key moved back to the start
(what the first ``runs`` after a campaign nobody checked does: it verifies every event, as ``store
verify`` does); the calls after it go on from the checkpoint it leaves. Prints each figure and the
ratio large / small.

Run: ``.venv/bin/python bench/cli_scale.py [--home DIR] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine
from store.chain import HeadFile, canonical_json
from store.events import (
    CapSet,
    Event,
    PairKept,
    PairsSampled,
    RunFinished,
    RunStarted,
    decode_event,
    pairs_stream,
    run_stream,
    run_streams,
    seed_stream,
)
from store.eventstore import EventStore, SqliteEventStore, StoredEvent
from store.ledger import stream_spend
from store.runlog import run_ids

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ("cooking", "documentary", "education", "gaming", "history", "news", "podcast")
SEEDS = 602
ACCEPTED = 327
JUDGES = 17
JUDGMENTS = 100_000
CHUNK = 4  # events a seed appends at a time (a call's reservation and record, a gate's verdict)
PLAYLISTEVAL = ROOT / ".venv" / "bin" / "playlisteval"
_IDS = re.compile(r"\b(pair|seed)-[0-9a-f]{16}\b")


@dataclass(frozen=True)
class Templates:
    """What the campaign's events are cloned from: the demo run's id, its ``RunStarted``, its
    seed streams (the accepted ones first, a discarded one last), its pairs stream and one of
    its judge calls (reservation and record)."""

    run_id: str
    started: StoredEvent
    seeds: list[list[StoredEvent]]
    pairs: list[StoredEvent]
    call: list[StoredEvent]

    @property
    def accepted_seeds(self) -> list[str]:
        """The demo's accepted seeds' ids, in template order."""
        return [str(s[0].data["seed_id"]) for s in self.seeds[:-1]]


def read_templates(store: EventStore) -> Templates:
    """The demo log's templates (:class:`Templates`)."""
    run_id = run_ids(store)[0]
    seeds = [store.read_stream(name) for name in store.streams(seed_stream(run_id, ""))]
    seeds.sort(key=lambda s: s[-1].type != "ItemAccepted")
    assert seeds[-1][-1].type == "SeedDiscarded", "the demo run discarded no seed"
    pairs = store.read_stream(pairs_stream(run_id))
    call = [s for s in pairs if s.type in ("CallReserved", "CallRecorded")][:2]
    started = store.read_stream(run_stream(run_id))[0]
    return Templates(run_id, started, seeds, pairs, call)


def clone(stored: StoredEvent, old_run: str, new_run: str, ids: dict[str, str]) -> Event:
    """A template event with the run id and its seed and pair ids replaced (new ones made in
    ``ids`` as they are met), decoded into its real class."""

    def new_id(match: re.Match[str]) -> str:
        old = match.group(0)
        if old not in ids:
            digest = hashlib.sha256(f"{new_run} {old} {len(ids)}".encode()).hexdigest()
            ids[old] = f"{match.group(1)}-{digest[:16]}"
        return ids[old]

    text = _IDS.sub(new_id, canonical_json(stored.data).replace(old_run, new_run))
    return decode_event(stored.type, stored.schema, json.loads(text))


def interleaved(streams: dict[str, list[Event]]) -> Iterator[tuple[str, list[Event]]]:
    """Each stream's events ``CHUNK`` at a time, the streams taking turns (concurrent seeds)."""
    at = dict.fromkeys(streams, 0)
    while at:
        for name in list(at):
            yield name, streams[name][at[name] : at[name] + CHUNK]
            at[name] += CHUNK
            if at[name] >= len(streams[name]):
                del at[name]


def append_run(store: EventStore, number: int, t: Templates, seeds: range) -> tuple[str, int]:
    """One domain's run: its ``RunStarted``, the seeds numbered ``seeds`` (accepted at the
    campaign's rate), its ``RunFinished`` with the anchor the loop records, and its pairs
    stream; the run id and the events written."""
    run_id = f"20261201-{10 + number:02d}0000-c{number:05x}"
    streams: dict[str, list[Event]] = {}
    accepted: list[str] = []
    for n in seeds:
        takes = n * ACCEPTED // SEEDS != (n + 1) * ACCEPTED // SEEDS
        template = t.seeds[n % (len(t.seeds) - 1)] if takes else t.seeds[-1]
        seed_id = f"seed-{number:02x}{n:014x}"
        ids = {str(template[0].data["seed_id"]): seed_id}
        streams[seed_stream(run_id, seed_id)] = [clone(s, t.run_id, run_id, ids) for s in template]
        if takes:
            accepted.append(seed_id)
    started = clone(t.started, t.run_id, run_id, {})
    assert isinstance(started, RunStarted)
    started = started.model_copy(
        update={"seeds": tuple(name[len(seed_stream(run_id, "")) :] for name in streams)}
    )
    written = len(store.append(run_stream(run_id), [started], 0))
    for name, events in interleaved(streams):
        written += len(store.append_batch([(name, events, None)]))
    finished = RunFinished(
        run_id=run_id,
        outcome="completed",
        spent_micros=stream_spend(store, seed_stream(run_id, "")).spent_micros,
        accepted=len(accepted),
        discarded=len(streams) - len(accepted),
        stopped=0,
        anchor=store.anchor(run_streams(run_id, pairs=False)).to_json(),
    )
    written += len(store.append(run_stream(run_id), [finished]))
    return run_id, written + append_pairs(store, run_id, t, accepted)


def append_pairs(store: EventStore, run_id: str, t: Templates, accepted: Sequence[str]) -> int:
    """A run's pairs stream: the demo's (five accepted items) once per five accepted items,
    then the sample of every kept pair."""
    body = [s for s in t.pairs if s.type != "PairsSampled"]
    per = len(t.accepted_seeds)
    kept: list[str] = []
    written = 0
    for block in range(len(accepted) // per):
        ids = dict(zip(t.accepted_seeds, accepted[block * per : (block + 1) * per], strict=True))
        events = [clone(s, t.run_id, run_id, ids) for s in body]
        kept += [e.pair_id for e in events if isinstance(e, PairKept)]
        for at in range(0, len(events), 50):
            written += len(store.append(pairs_stream(run_id), events[at : at + 50]))
    sampled = PairsSampled(pair_ids=tuple(kept), per_domain=90, sampling="proportional", seed=0)
    return written + len(store.append(pairs_stream(run_id), [sampled]))


def append_evaluation(store: EventStore, judge: int, t: Templates, judgments: int) -> int:
    """One judge's evaluation stream: its cap, then a reservation and a record per judgment
    (eight judgments in flight, appended as they finish)."""
    stream = f"eval-campaign-judge{judge:02d}"
    written = len(store.append(stream, [CapSet(cap_micros=None, command="bench")], 0))
    batch: list[Event] = []
    for n in range(judgments):
        call_id = f"pair-{n:016x}:j{judge:02d}:{n % 2}"
        for stored in t.call:
            data = {**stored.data, "call_id": call_id, "model": f"judge-{judge:02d}"}
            data["key"] = hashlib.sha256(f"{judge} {n}".encode()).hexdigest()
            batch.append(decode_event(stored.type, stored.schema, data))
        if len(batch) >= 16:
            written += len(store.append(stream, batch))
            batch = []
    if batch:
        written += len(store.append(stream, batch))
    return written


def build_large(workdir: Path, small_home: Path) -> Path:
    """The campaign-sized workspace under ``workdir`` (a copy of the demo's, its log grown to
    the campaign's), made once: kept while its ``BUILT`` marker is there."""
    home = workdir / "large" / "home"
    marker = workdir / "large" / "BUILT"
    if marker.exists():
        return home
    shutil.rmtree(workdir / "large", ignore_errors=True)
    shutil.copytree(small_home, home, symlinks=True)
    store = SqliteEventStore(home / "playlisteval.db")
    try:
        t = read_templates(store)
        start, written = time.perf_counter(), 0
        per_run = -(-SEEDS // len(DOMAINS))
        for number in range(len(DOMAINS)):
            seeds = range(number * per_run, min(SEEDS, (number + 1) * per_run))
            written += append_run(store, number, t, seeds)[1]
            print(f"  run {number + 1}/{len(DOMAINS)}: {written} events", flush=True)
        for judge in range(JUDGES):
            written += append_evaluation(store, judge, t, JUDGMENTS // JUDGES)
        print(f"  {written} events appended in {time.perf_counter() - start:.0f} s", flush=True)
    finally:
        store.close()
    marker.write_text(json.dumps({"events": written}))
    return home


def forget_checkpoint(home: Path) -> None:
    """Move the checkpoint beside the workspace's key back to the start, as it stands after a
    campaign no command checked: the next quick check verifies every event."""
    heads = HeadFile(home / "log_key")
    for log_id, head in heads.read().items():
        heads.put(log_id, replace(head, verified_seq=0, verified_link=""))


def in_command(argv: Sequence[str]) -> None:
    """``--inner``: import the CLI and read the settings once, then run the command with its
    output thrown away; prints the seconds the command took on stderr (``IN_COMMAND s``)."""
    import typer

    from playlisteval.cli import app
    from playlisteval.settings import load_settings

    home, args = Path(argv[0]), list(argv[1:])
    load_settings(home)  # the providers' modules, which the settings read, imported here
    # What the commands import inside their functions.
    import agents.audit
    import playlisteval.integrity
    import playlisteval.overview
    import playlisteval.runs

    del agents, playlisteval

    command = typer.main.get_command(app)
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1)
    os.dup2(devnull, 1)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        command.main([*args, "--home", str(home)], standalone_mode=False)
    finally:
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        sys.stdout.flush()
        os.dup2(saved, 1)
    print(f"IN_COMMAND {elapsed:.4f} {cpu:.4f}", file=sys.stderr)


def wall(home: Path, args: Sequence[str]) -> float:
    """Seconds the real CLI takes to run ``args`` on ``home`` (it must succeed)."""
    start = time.perf_counter()
    done = subprocess.run(
        [str(PLAYLISTEVAL), *args, "--home", str(home)], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"`playlisteval {' '.join(args)}` failed:\n{done.stderr[-2000:]}")
    return elapsed


def inner(home: Path, args: Sequence[str]) -> tuple[float, float]:
    """Seconds the command takes apart from imports (see :func:`in_command`), wall and CPU
    (the CPU seconds are what a busy machine inflates least)."""
    done = subprocess.run(
        [sys.executable, __file__, "--inner", str(home), *args], capture_output=True, text=True
    )
    found = re.findall(r"IN_COMMAND (\S+) (\S+)", done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"`playlisteval {' '.join(args)}` failed:\n{done.stderr[-2000:]}")
    return float(found[-1][0]), float(found[-1][1])


def commands(home: Path) -> dict[str, list[str]]:
    """The calls timed on ``home``: its run with the most seeds, and that run's first seed."""
    store = SqliteEventStore(home / "playlisteval.db")
    try:
        seeds = {run: store.streams(seed_stream(run, "")) for run in run_ids(store)}
        run = max(seeds, key=lambda run: len(seeds[run]))
        seed = seeds[run][0][len(seed_stream(run, "")) :]
        events = store.last_seq()
    finally:
        store.close()
    return {
        "runs": ["runs"],
        "audit --run": ["audit", "--run", run],
        "audit --run --seed": ["audit", "--run", run, "--seed", seed],
        "status": ["status"],
        "(events in the log)": [str(events)],
    }


NAN = float("nan")


def measure(home: Path, repeat: int) -> dict[str, tuple[float, float, float]]:
    """Each call's best wall, in-command and in-command CPU seconds on ``home``, the cold
    ``runs`` first."""
    calls = commands(home)
    forget_checkpoint(home)
    out = {"runs, first (verifies all)": (wall(home, ["runs"]), NAN, NAN)}
    for name, args in calls.items():
        if name.startswith("("):
            continue
        walls = [wall(home, args) for _ in range(repeat)]
        inners = [inner(home, args) for _ in range(repeat)]
        out[name] = (min(walls), min(w for w, _ in inners), min(c for _, c in inners))
    out["events"] = (float(calls["(events in the log)"][0]), NAN, NAN)
    return out


def main() -> None:
    """Build (or reuse) both workspaces, time the calls on each and print the table."""
    if sys.argv[1:2] == ["--inner"]:
        in_command(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path("/tmp/playlisteval-cli-scale"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from bench._demo import demo_benchmark

    print(machine())
    small, _bench = demo_benchmark(args.home / "small")
    large = build_large(args.home, small)
    figures = {"small": measure(small, args.repeat), "large": measure(large, args.repeat)}
    events = (int(figures["small"].pop("events")[0]), int(figures["large"].pop("events")[0]))
    print(f"\nevents in the log: small {events[0]:,}, large {events[1]:,}")
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| call | figure | small s | large s | large / small |")
    print("| --- | --- | ---: | ---: | ---: |")
    labels = ("wall (whole CLI)", "in command", "in command, CPU")
    for name, small_figures in figures["small"].items():
        large_figures = figures["large"][name]
        for label, small_s, large_s in zip(labels, small_figures, large_figures, strict=True):
            if small_s == small_s:  # not NaN: measured
                cells = f"{small_s:.3f} | {large_s:.3f} | {large_s / small_s:.1f}"
                print(f"| `{name}` | {label} | {cells} |")


if __name__ == "__main__":
    main()
