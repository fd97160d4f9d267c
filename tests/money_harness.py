"""The money harness: seeded random interleavings of real commands, ``kill -9`` at random
moments, resumes with and without ``--budget``, two concurrent resumes, two concurrent ``pairs``
and an evaluation — and, after each trial, the invariants read back from the log:

- every run, pair selection and evaluation spent at most its cap (the one ledger);
- no request key was answered and paid twice (a first-hand ``CallRecorded``), per stream;
- no seed was accepted twice, in any run; no judgment made twice;
- nothing written is ever lost: the log after each command begins with the log before it;
- the log still verifies (hash chains and heads intact after every kill).

Commands run as child processes forked from a server that has imported the project once
(multiprocessing's ``forkserver``), so a trial of several commands takes seconds, and a kill is
a real ``SIGKILL`` of a real process in the middle of whatever it was doing. Used by
``tests/test_money_invariants.py`` (a share of the trials, on SQLite and PostgreSQL) and
``bench/money.py`` (the rest, with the counts printed).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
JUDGE = "gpt-5.4-mini"  # an evaluation judge priced as a live model (the offline provider answers)
CONDITION = "uniform::transcript:1h:8"

_CONTEXT: ForkServerContext | None = None


def context() -> ForkServerContext:
    """The forkserver every command child is forked from (the project imported once)."""
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["playlisteval.cli", "playlisteval.runs", "tests.money_harness"])
        _CONTEXT = ctx
    return _CONTEXT


def _child(argv: list[str], log: str) -> None:
    """A command in a child: its output to ``log``, its exit code as the process's."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["PLAYLISTEVAL_LOG_LEVEL"] = "error"
    sys.argv = ["playlisteval", *argv]
    from playlisteval.cli import app

    try:
        app(prog_name="playlisteval")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        os._exit(code)
    os._exit(0)


@dataclass
class Command:
    """One command child: what it ran, and how it ended (exit code, or killed)."""

    argv: list[str]
    process: Any
    log: Path

    def wait(self, timeout: float = 300.0) -> int | None:
        self.process.join(timeout)
        if self.process.is_alive():
            self.kill()
        return self.process.exitcode  # type: ignore[no-any-return]

    def kill(self) -> None:
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(30)


@dataclass
class Trial:
    """One trial's plan and what came of it."""

    number: int
    backend: str
    ops: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    kills: int = 0
    refusals: int = 0
    seconds: float = 0.0


class Harness:
    """Trials over copies of one prepared workspace (indexed, its clips already cut)."""

    def __init__(self, base: Path, workdir: Path, *, max_seeds: int = 3) -> None:
        self.base = base
        self.workdir = workdir
        self.max_seeds = max_seeds
        self._where: dict[Path, tuple[str, str | None]] = {}  # trial home → its store

    # -- running commands ---------------------------------------------------------------------

    def start(self, home: Path, *argv: str) -> Command:
        log = home / f"cmd-{time.monotonic_ns()}.log"
        args = [*argv, "--home", str(home)]
        process = context().Process(target=_child, args=(args, str(log)))
        process.start()
        return Command(args, process, log)

    def wave(self, rng: random.Random, trial: Trial, home: Path, *argvs: Sequence[str]) -> None:
        """Start the commands together and let them run; with some probability kill one at a
        random moment. Then the log must begin with everything it held before."""
        before = self._rows(home)
        commands = [self.start(home, *argv) for argv in argvs]
        if rng.random() < 0.55:
            time.sleep(rng.uniform(0.2, 4.0))
            victim = rng.choice(list(commands))
            if victim.process.is_alive():
                victim.kill()
                trial.kills += 1
                trial.ops.append(f"kill -9 {victim.argv[0]}")
        for command in commands:
            code = command.wait()
            if code == 3:
                trial.refusals += 1
            elif code == 6 and command.argv[0] == "eval":
                trial.refusals += 1  # a cap too small for any judgment: nothing judged, said so
            elif code not in (0, 2, -signal.SIGKILL, None):
                trial.violations.append(
                    f"{' '.join(command.argv[:4])} exited {code}: "
                    + command.log.read_text(errors="replace")[-600:]
                )
        after = self._rows(home)
        if after[: len(before)] != before:
            trial.violations.append(f"events were lost after {commands[0].argv[0]}")

    def _rows(self, home: Path) -> list[tuple[Any, ...]]:
        """``(seq, stream, version, hash)`` of every event, in seq order."""
        backend, schema = self._where[home]
        store = self._store(home, backend, schema)
        try:
            return [(e.seq, e.stream, e.version, e.hash) for e in store.read_all()]
        finally:
            store.close()

    # -- a trial ------------------------------------------------------------------------------

    def trial(self, number: int, backend: str, *, schema: str | None = None) -> Trial:
        """One seeded trial on ``backend`` ("sqlite" or "postgres" with ``schema``)."""
        from tests.workspaces import copy_workspace

        started = time.monotonic()
        rng = random.Random(f"money-{backend}-{number}")
        trial = Trial(number, backend)
        home = self.workdir / f"trial-{backend}-{number}"
        copy_workspace(self.base, home)
        self._where[home] = (backend, schema)
        settings = (home / "playlisteval.toml").read_text()
        settings += f"\n[curation]\nconcurrency = {rng.randint(1, 4)}\noffline_latency_s = 0.02\n"
        settings += "\n[pairs]\npairs_per_domain = 3\n"
        if backend == "postgres":
            settings += f'\n[store]\nurl = "{PG_URL}"\nschema_name = "{schema}"\n'
        (home / "playlisteval.toml").write_text(settings)

        cap = round(rng.uniform(0.02, 0.5), 4)
        seeds = rng.randint(1, self.max_seeds)
        trial.ops.append(f"curate --budget {cap} --max-seeds {seeds}")
        self.wave(rng, trial, home, ["curate", "--budget", str(cap), "--max-seeds", str(seeds)])
        run_id = self._run_id(home, backend, schema)
        if run_id is None:
            trial.seconds = time.monotonic() - started
            return trial  # killed before it opened its run: nothing to check but the log
        for _ in range(rng.randint(1, 3)):
            spent = self._spent(home, run_id, backend, schema)
            budgets = [self._budget_flag(rng, spent) for _ in range(rng.choice((1, 1, 2)))]
            trial.ops.append("resume " + " & ".join(b or "(its cap)" for b in budgets))
            self.wave(
                rng,
                trial,
                home,
                *(["curate", "--run", run_id, *(["--budget", b] if b else [])] for b in budgets),
            )
        if rng.random() < 0.6:
            pairs_cap = str(round(rng.uniform(0.01, 0.4), 4))
            trial.ops.append(f"pairs & pairs --budget {pairs_cap}")
            pairs = ["pairs", "--run", run_id, "--budget", pairs_cap]
            self.wave(rng, trial, home, pairs, pairs)
            if rng.random() < 0.5:
                self._evaluate(rng, trial, home, run_id, pairs_cap)
        self.check(trial, home, backend, schema)
        trial.seconds = time.monotonic() - started
        return trial

    def _evaluate(
        self, rng: random.Random, trial: Trial, home: Path, run_id: str, pairs_cap: str
    ) -> None:
        bench = home / "bench"
        trial.ops.append("export")
        export = self.start(home, "export", str(bench), "--run", run_id, "--budget", pairs_cap)
        if export.wait() != 0 or not (bench / "pairs.jsonl").exists():
            return
        eval_cap = str(round(rng.uniform(0.0005, 0.02), 5))
        args = ["eval", "--benchmark", str(bench), "--judge", JUDGE, "--condition", CONDITION]
        args += ["--out", str(home / "eval"), "--budget", eval_cap]
        trial.ops.append(f"eval --budget {eval_cap}, then again")
        self.wave(rng, trial, home, args)
        self.wave(rng, trial, home, args)

    @staticmethod
    def _budget_flag(rng: random.Random, spent: int) -> str | None:
        choice = rng.random()
        if choice < 0.4:
            return None  # keep the run's cap
        if choice < 0.55 and spent > 0:
            return f"{max(spent / 1e6 - 0.001, 0):.4f}"  # below the spend: refused
        return f"{spent / 1e6 + rng.uniform(0.0, 0.4):.4f}"

    # -- reading the log back -----------------------------------------------------------------

    def _store(self, home: Path, backend: str, schema: str | None) -> Any:
        from store.chain import LOG_KEY_FILE, read_log_key
        from store.eventstore import open_event_store

        if backend == "postgres":  # the trial's commands keyed it with the workspace's key
            key_file = home / LOG_KEY_FILE
            return open_event_store(
                PG_URL, schema=schema, key=read_log_key(key_file), key_file=key_file
            )
        return open_event_store(home / "playlisteval.db")

    def _run_id(self, home: Path, backend: str, schema: str | None) -> str | None:
        store = self._store(home, backend, schema)
        try:
            found = [s[len("run-") :] for s in store.streams("run-")]
        finally:
            store.close()
        return found[0] if found else None

    def _spent(self, home: Path, run_id: str, backend: str, schema: str | None) -> int:
        from store.events import seed_stream
        from store.ledger import stream_spend

        store = self._store(home, backend, schema)
        try:
            return stream_spend(store, seed_stream(run_id, "")).spent_micros
        finally:
            store.close()

    def check(self, trial: Trial, home: Path, backend: str, schema: str | None) -> None:
        """Every invariant, read back from the log; each breach is a violation."""
        from store.ledger import current_cap, spend

        store = self._store(home, backend, schema)
        try:
            problems = store.verify()
            if problems:
                trial.violations.append(f"the log does not verify: {problems[0]}")
            events = store.read_all()
        finally:
            store.close()
        by_stream: dict[str, list[Any]] = {}
        for stored in events:
            by_stream.setdefault(stored.stream, []).append(stored)
        accepted: Counter[str] = Counter()
        for stream, stored in by_stream.items():
            typed = [s.event() for s in stored]
            if stream.startswith(("seed-", "pairs-", "eval-")):
                paid = Counter(
                    s.data["key"]
                    for s in stored
                    if s.type == "CallRecorded" and not s.data.get("replayed")
                )
                twice = [key for key, n in paid.items() if n > 1]
                if twice:
                    trial.violations.append(f"{stream}: {len(twice)} request key(s) paid twice")
            for s in stored:
                if s.type == "ItemAccepted":
                    accepted[str(s.data["seed_id"])] += 1
            if stream.startswith(("pairs-", "eval-")):
                cap = current_cap(typed)
                spent = spend(stored).spent_micros
                if cap is not None and spent > cap:
                    trial.violations.append(f"{stream} spent {spent} over its cap {cap}")
                judged = Counter(
                    (s.data["pair_id"], s.data["judge"], s.data["order"])
                    for s in stored
                    if s.type == "PairJudged"
                )
                if any(n > 1 for n in judged.values()):
                    trial.violations.append(f"{stream}: a pair judged twice in one order")
        for stream, stored in by_stream.items():
            if not stream.startswith("run-"):
                continue
            run_id = stream[len("run-") :]
            prefix = f"seed-{run_id}-"
            seed_events = [s for st, ss in by_stream.items() if st.startswith(prefix) for s in ss]
            spent = spend(seed_events).spent_micros
            cap = current_cap(s.event() for s in stored)
            if cap is not None and spent > cap:
                trial.violations.append(f"run {run_id} spent {spent} over its cap {cap}")
        twice = [seed for seed, n in accepted.items() if n > 1]
        if twice:
            trial.violations.append(f"seeds accepted twice: {twice}")
        judgments = home / "eval" / "judgments.jsonl"
        if judgments.exists():
            import json

            keys = Counter(
                (r["pair_id"], r["judge"], r["condition_id"], r["order"])
                for r in map(json.loads, judgments.read_text().splitlines())
            )
            if any(n > 1 for n in keys.values()):
                trial.violations.append("an evaluation judgment written twice")


def prepare_base(demo_home: Path, base: Path, max_seeds: int) -> Path:
    """A copy of the indexed demo workspace whose clips for the first ``max_seeds`` seeds are
    already cut (a curation run made them), its log emptied again."""
    from playlisteval import runs
    from playlisteval.app import App
    from playlisteval.settings import load_settings
    from tests.workspaces import copy_workspace

    copy_workspace(demo_home, base)
    with App(load_settings(base)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=max_seeds)
        runs.select_pairs(app, report.run_id, per_domain=3)
    with sqlite3.connect(base / "playlisteval.db") as conn:
        for table in (
            "events",
            "stream_heads",
            "store_meta",
            "leases",
            "budget_holds",
            "budget_accounts",
        ):
            conn.execute(f"DELETE FROM {table}")
    # A new, empty log: its chain record and its head beside the key go with the events (kept,
    # they would say, rightly, that the log was cut).
    (base / "log_key.head").unlink()
    return base


def run_trials(base: Path, workdir: Path, backend: str, count: int) -> list[Trial]:
    """``count`` seeded trials on ``backend`` (numbered from 0, so a failure reproduces), each
    PostgreSQL trial in a fresh schema dropped afterwards, each trial's folder removed after it."""
    import shutil
    import uuid

    from sqlalchemy import create_engine

    harness = Harness(base, workdir)
    trials = []
    for number in range(count):
        schema = f"t_{uuid.uuid4().hex[:16]}" if backend == "postgres" else None
        try:
            trials.append(harness.trial(number, backend, schema=schema))
        finally:
            if schema is not None:
                engine = create_engine(PG_URL)
                with engine.begin() as conn:
                    conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                engine.dispose()
            shutil.rmtree(workdir / f"trial-{backend}-{number}", ignore_errors=True)
    return trials


def summary(trials: Sequence[Trial], backend: str) -> str:
    """One line: trials, kills, refused second writers and violations."""
    violations = sum(len(t.violations) for t in trials)
    return (
        f"money invariants ({backend}): {len(trials)} trials, "
        f"{sum(t.kills for t in trials)} kills, {sum(t.refusals for t in trials)} refused "
        f"second writers, {violations} violations"
    )
