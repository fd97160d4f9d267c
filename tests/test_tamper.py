"""A log that cannot lie: every kind of edit to the database is caught.

Three forgers. The careless one edits rows with ``sqlite3`` and leaves the hash chain alone:
``store verify`` (and so ``replay``, which verifies first) names the first event that no longer
checks out. The careful one also recomputes every hash and head afterwards, but without the log
key (kept outside the database) the chain it writes is not the keyed one: ``store verify``
still fails. The one who holds the key too makes the chain whole again: strict replay still
re-derives every decision, cost and run end from the recorded answers and names the first seq
where the log says otherwise, and an anchor published before the rewrite (``store anchor``, an
export's ``benchmark.json``) no longer matches, whatever was rewritten. An untouched log replays
with exit 0, and a log written before the chain existed is migrated when opened and replays
too.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import EXIT_FIX, EXIT_TAMPERED
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from store.chain import Anchor, canonical_json, chain_hash, link_hash
from store.events import RunFinished
from tests.workspaces import copy_workspace

SEEDS = 4


@pytest.fixture(scope="module")
def curated(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A small run with a pair selection, made once; each test tampers with its own copy."""
    home = tmp_path_factory.mktemp("tamper") / "ws"
    copy_workspace(demo_home, home)
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=5.0, max_seeds=SEEDS)
        assert report.accepted, "the run should accept an item to tamper with"
        runs.select_pairs(app, report.run_id, per_domain=5)
    return home, report.run_id


@pytest.fixture
def copy(curated: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    home, run_id = curated
    return copy_workspace(home, tmp_path / "ws"), run_id


# -- forging ---------------------------------------------------------------------------------------


class Db:
    """The workspace's database as a forger sees it: rows, no store in between."""

    def __init__(self, home: Path, run_id: str) -> None:
        self.path = home / "playlisteval.db"
        self.run_id = run_id

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.path) as conn:
            return list(conn.execute(sql, args))

    def run(self, sql: str, *args: Any) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute(sql, args)

    def first(self, type_: str, where: str = "") -> tuple[int, str, int, dict[str, Any]]:
        """``(seq, stream, version, data)`` of the first event of ``type_`` in the run."""
        rows = self.query(
            "SELECT seq, stream, version, data FROM events WHERE type = ? AND "
            "(stream LIKE ? OR stream = ? OR stream = ?) " + where + " ORDER BY seq LIMIT 1",
            type_,
            f"seed-{self.run_id}-%",
            f"run-{self.run_id}",
            f"pairs-{self.run_id}",
        )
        assert rows, f"no {type_} to tamper with"
        seq, stream, version, data = rows[0]
        return seq, stream, version, json.loads(data)

    def set_data(self, seq: int, data: dict[str, Any]) -> None:
        self.run("UPDATE events SET data = ? WHERE seq = ?", json.dumps(data), seq)

    def edit(self, type_: str, change: Callable[[dict[str, Any]], None], where: str = "") -> int:
        seq, _stream, _version, data = self.first(type_, where)
        change(data)
        self.set_data(seq, data)
        return seq

    def append_at_end(self, stream: str, type_: str, data: dict[str, Any]) -> tuple[int, int]:
        """A forged row after ``stream``'s last (its head left alone); the log's and the
        stream's last seq and version before it."""
        (top,) = self.query("SELECT max(seq) FROM events")[0]
        (last,) = self.query("SELECT max(version) FROM events WHERE stream = ?", stream)[0]
        self.run(
            "INSERT INTO events (seq, stream, version, type, schema, data, recorded_at) VALUES "
            "(?, ?, ?, ?, 1, ?, '2026-01-01 00:00:00.000000')",
            top + 1,
            stream,
            last + 1,
            type_,
            json.dumps(data),
        )
        return int(top), int(last)

    def shift_versions(self, stream: str, after: int, by: int) -> None:
        """Renumber a stream's versions after ``after`` (highest first: (stream, version) is
        unique)."""
        order = "DESC" if by > 0 else "ASC"
        rows = self.query(
            f"SELECT seq, version FROM events WHERE stream = ? AND version > ? ORDER BY version "
            f"{order}",
            stream,
            after,
        )
        for seq, version in rows:
            self.run("UPDATE events SET version = ? WHERE seq = ?", version + by, seq)

    def key(self) -> bytes:
        """The workspace's log key (a forger who has it; most do not)."""
        return (self.path.parent / "log_key").read_bytes().strip()

    def rechain(self, key: bytes | None) -> None:
        """What a careful forger does next: the log renumbered 1, 2, 3 … (seq and each stream's
        versions), every hash, link and stream head recomputed — under ``key``: None for one
        who does not have the key, who can only use plain SHA-256 or a key of their own. One
        who holds the real key can write its folder too, and moves the head kept beside it."""
        with sqlite3.connect(self.path) as conn:
            conn.execute("UPDATE events SET version = -version, seq = -seq")
            for new, (seq,) in enumerate(
                conn.execute("SELECT seq FROM events ORDER BY -seq").fetchall(), start=1
            ):
                conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (new, seq))
            streams = [r[0] for r in conn.execute("SELECT DISTINCT stream FROM events")]
            for stream in streams:
                seqs = conn.execute(
                    "SELECT seq FROM events WHERE stream = ? ORDER BY -version", (stream,)
                ).fetchall()
                for version, (seq,) in enumerate(seqs, start=1):
                    conn.execute("UPDATE events SET version = ? WHERE seq = ?", (version, seq))
        rows = self.query(
            "SELECT seq, stream, version, type, schema, data FROM events ORDER BY stream, version"
        )
        previous, current, heads, hashes = "", None, {}, {}
        with sqlite3.connect(self.path) as conn:
            for seq, stream, version, type_, schema, data in rows:
                if stream != current:
                    previous, current = "", stream
                previous = chain_hash(
                    previous, stream, version, type_, schema, canonical_json(json.loads(data)), key
                )
                hashes[seq] = previous
                heads[stream] = (stream, version, previous, seq)
            link = ""
            for seq in sorted(hashes):
                link = link_hash(link, seq, hashes[seq], key)
                conn.execute(
                    "UPDATE events SET hash = ?, link = ? WHERE seq = ?", (hashes[seq], link, seq)
                )
            conn.execute("DELETE FROM stream_heads")
            conn.executemany("INSERT INTO stream_heads VALUES (?, ?, ?, ?)", list(heads.values()))
        if key is not None and key == self.key():
            head_file = self.path.parent / "log_key.head"
            kept = json.loads(head_file.read_text())
            for entry in kept["logs"].values():
                entry.update(seq=max(hashes, default=0), link=link)
            head_file.write_text(json.dumps(kept))


def _gold(data: dict[str, Any]) -> None:
    data["qa"]["gold_answer"] = data["qa"]["gold_answer"].replace(" ", " forged ", 1)


def _cost(data: dict[str, Any]) -> None:
    data["cost_micros"] = data["cost_micros"] // 2


def _response(data: dict[str, Any]) -> None:
    part = data["response"]["parts"][0]
    args = part["args"] if isinstance(part.get("args"), dict) else json.loads(part["args"])
    for key, value in args.items():
        if isinstance(value, str):
            args[key] = value + " (forged)"
            break
        if isinstance(value, bool):
            args[key] = not value
            break
    part["args"] = args if isinstance(part.get("args"), dict) else json.dumps(args)


def edited_text(db: Db) -> int:
    return db.edit("ItemAccepted", _gold)


def edited_cost(db: Db) -> int:
    return db.edit("CallRecorded", _cost, "AND json_extract(data, '$.replayed') = 0")


def edited_answer(db: Db) -> int:
    return db.edit("CallRecorded", _response, "AND json_extract(data, '$.role') = 'sufficiency'")


def edited_verdict(db: Db) -> int:
    """A pass turned into a rejection (its type changed, its fields made to fit)."""
    seq, _stream, _version, data = db.first("GatePassed")
    data.pop("detail", None)
    data.update(reason="forged", rejected_output="")
    db.set_data(seq, data)
    db.run("UPDATE events SET type = 'GateRejected' WHERE seq = ?", seq)
    return seq


def edited_reason(db: Db) -> int:
    return db.edit("GateRejected", lambda d: d.update(reason="a reason nobody gave"))


def edited_proposal(db: Db) -> int:
    return db.edit("QAProposed", lambda d: d["qa"].update(question="A forged question?"))


def edited_run_end(db: Db) -> int:
    return db.edit("RunFinished", lambda d: d.update(spent_micros=d["spent_micros"] + 1))


def edited_cap(db: Db) -> int:
    return db.edit("RunStarted", lambda d: d.update(budget_micros=999_000_000))


def edited_reservation(db: Db) -> int:
    return db.edit("CallReserved", lambda d: d.update(reserved_micros=1))


def edited_pair_verdict(db: Db) -> int:
    return db.edit("PairJudged", lambda d: d.update(choice="B" if d["choice"] == "A" else "A"))


def _seq_at(db: Db, stream: str, version: int) -> int:
    ((seq,),) = db.query("SELECT seq FROM events WHERE stream = ? AND version = ?", stream, version)
    return int(seq)


def deleted_middle(db: Db) -> int | None:
    """The log's global chain names the missing seq itself."""
    seq, _stream, _version, _data = db.first("GatePassed")
    db.run("DELETE FROM events WHERE seq = ?", seq)
    return seq


def _deleted_last(db: Db, type_: str) -> int | None:
    """The stream's new last event is where its head no longer matches."""
    seq, stream, version, _data = db.first(type_)
    db.run("DELETE FROM events WHERE seq = ?", seq)
    return _seq_at(db, stream, version - 1)


def deleted_run_end(db: Db) -> int | None:
    return _deleted_last(db, "RunFinished")


def deleted_item(db: Db) -> int | None:
    return _deleted_last(db, "ItemAccepted")


def deleted_seed_stream(db: Db) -> int | None:
    _seq, stream, _version, _data = db.first("ItemAccepted")
    db.run("DELETE FROM events WHERE stream = ?", stream)
    return None


def truncated_log(db: Db) -> int | None:
    (last,) = db.query("SELECT max(seq) FROM events")[0]
    db.run("DELETE FROM events WHERE seq > ?", last - 5)
    return None


def inserted_middle(db: Db) -> int | None:
    """A forged rejection slipped in after the first GatePassed, later versions moved up."""
    _seq, stream, version, data = db.first("GatePassed")
    db.shift_versions(stream, version, +1)
    (top,) = db.query("SELECT max(seq) FROM events")[0]
    forged = {**data, "reason": "forged", "rejected_output": ""}
    forged.pop("detail", None)
    db.run(
        "INSERT INTO events (seq, stream, version, type, schema, data, recorded_at) VALUES "
        "(?, ?, ?, 'GateRejected', 1, ?, '2026-01-01 00:00:00.000000')",
        top + 1,
        stream,
        version + 1,
        json.dumps(forged),
    )
    return None  # the moved events (older seqs) break first


def inserted_at_end(db: Db) -> int | None:
    """Its head still names the old last event: that is where the stream stops matching."""
    _seq, stream, _version, data = db.first("ItemAccepted")
    _top, last = db.append_at_end(stream, "ItemAccepted", data)
    return _seq_at(db, stream, last)


def reordered(db: Db) -> int:
    """Two neighbouring decisions of a seed swapped (their types and data)."""
    seq, stream, version, data = db.first("GatePassed")
    ((other, other_type, other_data),) = db.query(
        "SELECT seq, type, data FROM events WHERE stream = ? AND version = ?", stream, version + 1
    )
    db.run("UPDATE events SET type = ?, data = ? WHERE seq = ?", other_type, other_data, seq)
    db.run("UPDATE events SET type = 'GatePassed', data = ? WHERE seq = ?", json.dumps(data), other)
    return seq


def zeroed_costs(db: Db) -> int:
    """Every call's cost set to 0: the run looks free."""
    rows = db.query("SELECT seq, data FROM events WHERE type = 'CallRecorded' ORDER BY seq")
    for seq, data in rows:
        db.set_data(seq, {**json.loads(data), "cost_micros": 0})
    return int(rows[0][0])


def appended_copy(db: Db) -> int | None:
    """A copy of a paid call appended to the end of its seed's stream (its head moved along)."""
    _seq, stream, _version, data = db.first("CallRecorded")
    top, last = db.append_at_end(stream, "CallRecorded", data)
    db.run(
        "UPDATE stream_heads SET version = ?, seq = ? WHERE stream = ?", last + 1, top + 1, stream
    )
    return None


def unknown_schema(db: Db) -> int:
    seq, _stream, _version, _data = db.first("AttemptStarted")
    db.run("UPDATE events SET type = 'AttemptForged' WHERE seq = ?", seq)
    return seq


# A tampering returns the seq verify should name first (None: wherever it lands first).
Tamper = Callable[[Db], int | None]

# Each kind of tampering, and whether a careful forger (one who recomputes the chain) is still
# caught: by strict replay, re-deriving the log from its recorded answers. Rows the replay cannot
# see once rechained (a cap, a reservation, a pair verdict: inputs, not derived from answers)
# rely on the chain alone.
CASES: list[tuple[str, Tamper, bool]] = [
    ("edited accepted text", edited_text, True),
    ("edited cost", edited_cost, True),
    ("edited model answer", edited_answer, True),
    ("edited verdict (type changed)", edited_verdict, True),
    ("edited rejection reason", edited_reason, True),
    ("edited proposal", edited_proposal, True),
    ("edited run end", edited_run_end, True),
    ("reordered events", reordered, True),
    ("edited cap", edited_cap, False),
    ("zeroed costs", zeroed_costs, True),
    ("appended copy of a call", appended_copy, False),
    ("edited reservation", edited_reservation, False),
    ("edited pair verdict", edited_pair_verdict, False),
    ("deleted event in the middle", deleted_middle, True),
    ("deleted run end", deleted_run_end, False),
    ("deleted accepted item", deleted_item, False),
    ("deleted seed stream", deleted_seed_stream, False),
    ("truncated log", truncated_log, False),
    ("inserted event in the middle", inserted_middle, True),
    ("inserted event at the end", inserted_at_end, True),
    ("unknown event type", unknown_schema, False),
]


def _cli(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli_app, [*args, "--home", str(home)])


def test_an_untouched_log_verifies_and_replays_with_exit_0(copy: tuple[Path, str]) -> None:
    home, run_id = copy
    verified = _cli(home, "store", "verify")
    assert verified.exit_code == 0, verified.output
    assert "every chain intact" in verified.output
    replayed = _cli(home, "replay", run_id)
    assert replayed.exit_code == 0, replayed.output
    assert "replays exactly" in replayed.output


@pytest.mark.parametrize(("name", "tamper", "_replay_sees_it"), CASES, ids=[c[0] for c in CASES])
def test_tampering_fails_store_verify_and_strict_replay(
    copy: tuple[Path, str], name: str, tamper: Tamper, _replay_sees_it: bool
) -> None:
    home, run_id = copy
    seq = tamper(Db(home, run_id))
    verified = _cli(home, "store", "verify")
    assert verified.exit_code == EXIT_TAMPERED, verified.output
    assert "the log was changed" in verified.output
    assert "seq " in verified.output
    replayed = _cli(home, "replay", run_id)
    assert replayed.exit_code == EXIT_TAMPERED, replayed.output
    assert "does not replay" in replayed.output
    assert "Traceback" not in verified.output + replayed.output
    with App(load_settings(home)) as app:
        problems = app.events.verify()
    assert problems, name
    if seq is not None:
        assert problems[0].seq == seq, (name, [str(p) for p in problems[:3]])
        assert f"seq {seq}" in verified.output


@pytest.mark.parametrize(
    ("name", "tamper"), [(n, t) for n, t, sees in CASES if sees], ids=[n for n, _, s in CASES if s]
)
def test_a_rechained_forgery_with_the_key_passes_verify_but_not_strict_replay(
    copy: tuple[Path, str], name: str, tamper: Tamper
) -> None:
    home, run_id = copy
    db = Db(home, run_id)
    tamper(db)
    db.rechain(db.key())
    verified = _cli(home, "store", "verify")
    if name != "inserted event in the middle":  # its forged seq is out of order: still caught
        assert verified.exit_code == 0, verified.output  # the chain is whole again
    replayed = _cli(home, "replay", run_id)
    assert replayed.exit_code == EXIT_TAMPERED, (name, replayed.output)
    assert "does not replay" in replayed.output


def test_a_log_from_before_the_chain_is_refused_until_rekeyed_unverified_then_replays(
    copy: tuple[Path, str],
) -> None:
    """Opening a log never re-chains it (dropping the chain would otherwise bless any edit):
    verify fails, rekey refuses what it cannot check, ``rekey --unverified`` chains it as it
    stands and records so, and from then on it verifies and replays."""
    home, run_id = copy
    db = home / "playlisteval.db"
    with sqlite3.connect(db) as conn:  # the shape of the events table before hash chains
        conn.executescript(
            """
            DROP TABLE stream_heads; DROP TABLE store_meta;
            ALTER TABLE events DROP COLUMN hash; ALTER TABLE events DROP COLUMN link;
            """
        )
    verified = _cli(home, "store", "verify")
    assert verified.exit_code == EXIT_TAMPERED, verified.output
    assert "store rekey" in " ".join(verified.output.split())
    refused = _cli(home, "store", "rekey")
    assert refused.exit_code == EXIT_TAMPERED, refused.output
    assert "nothing re-chained" in refused.output
    assert "no event has a hash" in refused.output
    rekeyed = _cli(home, "store", "rekey", "--unverified")
    assert rekeyed.exit_code == 0, rekeyed.output
    assert "re-chained" in rekeyed.output
    assert "unverified" in rekeyed.output
    assert _cli(home, "store", "verify").exit_code == 0
    replayed = _cli(home, "replay", run_id)
    assert replayed.exit_code == 0, replayed.output
    ((recorded,),) = Db(home, run_id).query("SELECT data FROM events WHERE type = 'LogRekeyed'")
    assert json.loads(recorded)["checked"] is False


@pytest.mark.parametrize(
    ("name", "tamper"), [(n, t) for n, t, _ in CASES], ids=[n for n, *_ in CASES]
)
def test_a_forgery_rechained_without_the_key_fails_verify(
    copy: tuple[Path, str], name: str, tamper: Tamper
) -> None:
    """Whoever can write the database but not read the key cannot make the chain whole: plain
    SHA-256 (what the chain was before it was keyed) and a key of their own both fail."""
    pristine, run_id = copy
    for n, key in enumerate((None, b"f" * 64)):
        home = copy_workspace(pristine, pristine.parent / f"forged-{n}")
        db = Db(home, run_id)
        tamper(db)
        db.rechain(key)
        verified = _cli(home, "store", "verify")
        assert verified.exit_code == EXIT_TAMPERED, (name, key, verified.output)
        assert "its content does not match its hash chain" in verified.output


def test_the_first_lines_of_runs_and_audit_flag_a_log_that_fails_and_export_refuses(
    copy: tuple[Path, str], tmp_path: Path
) -> None:
    home, run_id = copy
    db = Db(home, run_id)
    edited_cap(db)
    db.rechain(None)
    for args in (("runs",), ("audit", "--run", run_id)):
        said = _cli(home, *args)
        assert said.exit_code == 0, said.output
        first = said.output.strip().splitlines()[0]
        assert "the log fails verification" in first, (args, said.output)
    audited = _cli(home, "audit", "--run", run_id, "--json")
    assert "the log fails verification" in json.loads(audited.stdout)["log_warning"]
    exported = _cli(home, "export", str(tmp_path / "bench"), "--run", run_id)
    assert exported.exit_code != 0, exported.output
    assert "nothing exported: the log fails verification" in " ".join(exported.output.split())
    assert not (tmp_path / "bench").exists()


@pytest.mark.parametrize(
    ("name", "tamper"), [(n, t) for n, t, _ in CASES], ids=[n for n, *_ in CASES]
)
def test_a_rewrite_with_the_key_after_an_anchor_is_caught_against_the_anchor(
    copy: tuple[Path, str], tmp_path: Path, name: str, tamper: Tamper
) -> None:
    """The anchor was published (kept outside the workspace); then someone holding both the
    database and the key rewrites and re-chains: verify alone passes, the anchor does not."""
    home, run_id = copy
    anchor = tmp_path / "anchor.json"
    taken = _cli(home, "store", "anchor", "--run", run_id, "--out", str(anchor))
    assert taken.exit_code == 0, taken.output
    assert _cli(home, "store", "verify", "--anchor", str(anchor)).exit_code == 0
    db = Db(home, run_id)
    tamper(db)
    db.rechain(db.key())
    verified = _cli(home, "store", "verify", "--anchor", str(anchor))
    assert verified.exit_code == EXIT_TAMPERED, (name, verified.output)
    assert f"run {run_id}" in verified.output
    said = " ".join(verified.output.split())
    assert "the log was rewritten after the anchor" in said or "after the anchor (past seq" in said


def test_an_export_carries_its_runs_anchor_and_verify_checks_a_copy_against_it(
    copy: tuple[Path, str], tmp_path: Path
) -> None:
    home, run_id = copy
    out = tmp_path / "bench"
    exported = _cli(home, "export", str(out), "--run", run_id)
    assert exported.exit_code == 0, exported.output
    (anchor,) = json.loads((out / "benchmark.json").read_text())["anchors"]
    assert anchor["label"] == f"run {run_id}"
    assert len(anchor["digest"]) == 64
    assert anchor["digest"] in (out / "README.md").read_text()
    other = copy_workspace(home, tmp_path / "elsewhere")  # any copy of the log
    assert _cli(other, "store", "verify", "--anchor", str(out)).exit_code == 0
    db = Db(other, run_id)
    edited_cap(db)
    db.rechain(db.key())
    assert _cli(other, "store", "verify").exit_code == 0  # the chain alone is whole again
    verified = _cli(other, "store", "verify", "--anchor", str(out))
    assert verified.exit_code == EXIT_TAMPERED, verified.output


def test_the_finished_run_records_its_anchor(copy: tuple[Path, str]) -> None:
    home, run_id = copy
    with App(load_settings(home)) as app:
        finished = [s.event() for s in app.events.read_stream(f"run-{run_id}")][-1]
        assert isinstance(finished, RunFinished)
        assert finished.anchor is not None
        anchor = Anchor.from_json(finished.anchor)
        assert app.events.check_anchor(anchor, allow_later=True) == []  # RunFinished is later
        assert len(app.events.check_anchor(anchor)) == 1
        assert anchor.events > 10


def test_a_log_opened_with_another_key_is_refused_not_read_as_tampering(
    copy: tuple[Path, str],
) -> None:
    home, _run_id = copy
    (home / "log_key").write_text("0" * 64)
    said = _cli(home, "store", "verify")
    assert said.exit_code == EXIT_FIX, said.output
    assert "restore the log key" in " ".join(said.output.split())


# -- what `store anchor` refuses to vouch for ------------------------------------------------------


def test_an_anchor_is_refused_for_a_log_that_fails_verify_and_for_an_unknown_run(
    copy: tuple[Path, str], tmp_path: Path
) -> None:
    home, run_id = copy
    unknown = _cli(home, "store", "anchor", "--run", "bogus-run")
    assert unknown.exit_code == EXIT_FIX, unknown.output
    assert "no run 'bogus-run' in the log" in " ".join(unknown.output.split())
    db = Db(home, run_id)
    edited_cap(db)  # edited without the key: the chain no longer checks out
    anchor = tmp_path / "anchor.json"
    refused = _cli(home, "store", "anchor", "--run", run_id, "--out", str(anchor))
    assert refused.exit_code == EXIT_TAMPERED, refused.output
    assert "no anchor is taken of a log that fails" in " ".join(refused.output.split())
    assert not anchor.exists()


def test_an_anchor_on_stdout_is_raw_json_whatever_the_terminal_width(
    copy: tuple[Path, str],
) -> None:
    home, run_id = copy
    result = CliRunner().invoke(
        cli_app, ["store", "anchor", "--run", run_id, "--home", str(home)], env={"COLUMNS": "20"}
    )
    assert result.exit_code == 0, result.output
    (taken,) = json.loads(result.stdout)["anchors"]
    assert taken["label"] == f"run {run_id}"


@pytest.mark.parametrize("where", ["a folder", "a missing folder's file"])
def test_an_anchor_target_that_cannot_be_written_is_one_line(
    copy: tuple[Path, str], tmp_path: Path, where: str
) -> None:
    home, run_id = copy
    out = tmp_path if where == "a folder" else tmp_path / "missing" / "anchor.json"
    result = _cli(home, "store", "anchor", "--run", run_id, "--out", str(out))
    assert result.exit_code == EXIT_FIX, result.output
    assert "Traceback" not in result.output
    assert "--out" in result.output


@pytest.mark.parametrize(
    ("what", "text", "says"),
    [
        ("nested 200,000 deep", "[" * 200_000 + "]" * 200_000, "nested too deep"),
        (
            "a through_seq of 10**30",
            json.dumps(
                {
                    "format": 1,
                    "streams": ["run-r"],
                    "through_seq": 10**30,
                    "events": 1,
                    "digest": "0" * 64,
                }
            ),
            "between 0 and 2**63 - 1",
        ),
    ],
)
def test_a_hostile_anchor_file_is_one_line_not_a_traceback(
    copy: tuple[Path, str], tmp_path: Path, what: str, text: str, says: str
) -> None:
    from store.chain import ANCHOR_FORMAT

    home, _run_id = copy
    anchor = tmp_path / "anchor.json"
    anchor.write_text(text.replace('"format": 1', f'"format": {json.dumps(ANCHOR_FORMAT)}'))
    result = _cli(home, "store", "verify", "--anchor", str(anchor))
    assert result.exit_code == EXIT_FIX, (what, result.output[-500:])
    assert "Traceback" not in result.output
    assert says in " ".join(result.output.split()), what


# -- the trust kept outside the database (issue 41) ------------------------------------------------


def _verify_names(home: Path, seq: int | None, *words: str) -> str:
    verified = _cli(home, "store", "verify")
    assert verified.exit_code == EXIT_TAMPERED, verified.output
    said = " ".join(verified.output.split())
    assert "Traceback" not in said
    if seq is not None:
        assert f"the first at seq {seq}" in said, said
    for word in words:
        assert word in said, (word, said)
    return said


def test_a_keyless_rewrite_that_deletes_the_chain_record_is_caught_not_rechained(
    copy: tuple[Path, str],
) -> None:
    """The walk's worst case: the cap edited to 99 USD and ``store_meta`` deleted. Opening the
    workspace used to re-chain the whole log under the real key; now the key decides how rows
    are checked, whatever the database says: exit 4 at the edited event, the chain record named,
    nothing written, and ``runs`` flags its figures."""
    home, run_id = copy
    db = Db(home, run_id)
    seq = db.edit("RunStarted", lambda d: d.update(budget_micros=99_000_000))
    db.run("DELETE FROM store_meta")
    _verify_names(home, seq, "no chain record", "store rekey")
    again = _cli(home, "store", "verify")  # opening did not bless it
    assert again.exit_code == EXIT_TAMPERED, again.output
    listed = _cli(home, "runs")
    assert "the log fails verification" in listed.output.splitlines()[0], listed.output
    resumed = _cli(home, "curate", "--run", run_id)
    assert resumed.exit_code != 0, resumed.output
    assert "nothing written" in " ".join(resumed.output.split()), resumed.output
    assert _cli(home, "replay", run_id).exit_code == EXIT_TAMPERED
    assert not db.query("SELECT * FROM store_meta")


def test_a_plain_sha256_rechain_with_its_chain_record_gone_is_caught(
    copy: tuple[Path, str],
) -> None:
    home, run_id = copy
    db = Db(home, run_id)
    edited_cap(db)
    db.rechain(None)
    db.run("DELETE FROM store_meta")
    _verify_names(home, 1, "does not match")
    rekeyed = _cli(home, "store", "rekey")  # a plain chain that checks out: still the key's
    assert rekeyed.exit_code == EXIT_TAMPERED, rekeyed.output


def test_only_the_chain_record_deleted_still_fails_verify(copy: tuple[Path, str]) -> None:
    home, run_id = copy
    Db(home, run_id).run("DELETE FROM store_meta")
    said = _verify_names(home, None, "in the log's chain record", "no chain record")
    assert "store rekey" in said


def test_the_tail_of_the_annotations_stream_cut_with_its_head_moved_back_is_caught(
    copy: tuple[Path, str],
) -> None:
    """Five human answers, the last one deleted and its stream head moved back a version: the
    stream's own chain still checks out, but the log's head beside the key names the missing
    seq."""
    from store.annotation_events import AnnotatorInvited

    home, run_id = copy
    stream = "annotations-0123456789ab"
    with App(load_settings(home)) as app:
        app.events.append(stream, [AnnotatorInvited(name=f"annotator{n}") for n in range(5)])
    db = Db(home, run_id)
    ((seq, version),) = db.query(
        "SELECT seq, version FROM events WHERE stream = ? ORDER BY version DESC LIMIT 1", stream
    )
    ((previous_hash, previous_seq),) = db.query(
        "SELECT hash, seq FROM events WHERE stream = ? AND version = ?", stream, version - 1
    )
    db.run("DELETE FROM events WHERE seq = ?", seq)
    db.run(
        "UPDATE stream_heads SET version = ?, hash = ?, seq = ? WHERE stream = ?",
        version - 1,
        previous_hash,
        previous_seq,
        stream,
    )
    said = _verify_names(home, seq, "cut off its end")
    assert "1 event(s) cut off" in said


def test_an_event_deleted_from_the_middle_and_the_log_renumbered_is_caught(
    copy: tuple[Path, str],
) -> None:
    """The stream chains do not cover seq; the global chain does."""
    home, run_id = copy
    db = Db(home, run_id)
    seq, stream, version, _data = db.first("GatePassed")
    db.run("DELETE FROM events WHERE seq = ?", seq)
    db.shift_versions(stream, version, -1)
    with sqlite3.connect(db.path) as conn:  # the stream's own chain recomputed (no key: plain)
        conn.execute("UPDATE events SET seq = -(seq - 1) WHERE seq > ?", (seq,))
        conn.execute("UPDATE events SET seq = -seq WHERE seq < 0")
    _verify_names(home, None, "global chain")


def test_the_head_file_removed_fails_verify_and_refuses_writes(copy: tuple[Path, str]) -> None:
    home, _run_id = copy
    (home / "log_key.head").unlink()
    said = _verify_names(home, None, "no head is kept beside the key")
    assert "store rekey" in said
    rekeyed = _cli(home, "store", "rekey")
    assert rekeyed.exit_code == 0, rekeyed.output
    assert "checked under this key" in " ".join(rekeyed.output.split())
    assert _cli(home, "store", "verify").exit_code == 0


def test_verify_says_how_many_events_it_checked(copy: tuple[Path, str]) -> None:
    home, run_id = copy
    (count,) = Db(home, run_id).query("SELECT count(*) FROM events")[0]
    verified = _cli(home, "store", "verify")
    assert verified.exit_code == 0, verified.output
    assert f"{count} events checked" in verified.output
