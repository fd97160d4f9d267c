"""Where the log key lives: ``store.key_file`` when set (a fleet's workers share one, kept away
from the database), else ``log_key`` in the workspace; a log opened with another key is refused
by name, never re-chained under it."""

from __future__ import annotations

from pathlib import Path

import pytest

from playlisteval.app import App
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.chain import LOG_KEY_FILE, key_id, read_log_key
from store.errors import ConfigError
from store.events import CapSet


def _append(home: Path) -> None:
    with App(load_settings(home)) as app:
        app.events.append("eval-x", [CapSet(cap_micros=1, command="eval")])
        assert app.events.verify() == []


def test_the_configured_key_file_keys_the_log_and_none_is_made_in_the_workspace(
    tmp_path: Path,
) -> None:
    home, key = tmp_path / "ws", tmp_path / "keys" / "campaign.key"
    home.mkdir()
    key.parent.mkdir()  # kept apart: its folder is its owner's to make
    (home / SETTINGS_FILE).write_text(f'[store]\nkey_file = "{key}"\n')
    _append(home)
    assert key.is_file()
    assert key.stat().st_mode & 0o077 == 0  # its owner's only
    assert not (home / LOG_KEY_FILE).exists()
    made = read_log_key(key)
    assert made is not None
    with App(load_settings(home)) as app:
        assert app.log_key_path() == key
        assert app.log_key() == made
    # The same workspace without the setting would make a key of its own: refused by name.
    (home / SETTINGS_FILE).write_text("")
    with pytest.raises(ConfigError, match=f"under key {key_id(made)}.*restore the log key"):
        _append(home)


def test_a_key_file_outside_the_workspace_in_a_missing_folder_is_refused_and_nothing_made(
    tmp_path: Path,
) -> None:
    home, key = tmp_path / "ws", tmp_path / "nowhere" / "deeper" / "campaign.key"
    home.mkdir()
    (home / SETTINGS_FILE).write_text(f'[store]\nkey_file = "{key}"\n')
    with pytest.raises(ConfigError, match=r"store\.key_file .* its folder .* does not exist"):
        _append(home)
    assert not (tmp_path / "nowhere").exists()


def test_a_relative_key_file_is_under_the_workspace(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / SETTINGS_FILE).write_text('[store]\nkey_file = "secrets/log.key"\n')
    _append(home)
    assert (home / "secrets" / "log.key").is_file()


def test_a_plain_log_is_not_rechained_by_opening_it_with_a_key_but_by_rekey(
    tmp_path: Path,
) -> None:
    """A log written without a key is not quietly re-chained when opened with one: the keyed
    store refuses to append and fails verification until ``rekey`` checks the plain chain and
    records the change; a process that opened it plain is refused from then on."""
    from store.eventstore import SqliteEventStore

    database, key_file = tmp_path / "log.db", tmp_path / "secret.key"
    key = read_log_key(key_file, create=True)
    assert key is not None
    plain = SqliteEventStore(database)
    plain.append("eval-x", [CapSet(cap_micros=1, command="eval")])
    keyed = SqliteEventStore(database, key=key, key_file=key_file)
    with pytest.raises(ConfigError, match="store rekey"):
        keyed.append("eval-x", [CapSet(cap_micros=2, command="eval")])
    problems = keyed.verify()
    assert problems
    assert "plain SHA-256" in str(problems[-1])
    done = keyed.rekey(command="test")
    assert done.done
    assert (done.was, done.events) == ("plain SHA-256", 1)
    with pytest.raises(ConfigError, match="changed since this store opened it"):
        plain.append("eval-x", [CapSet(cap_micros=2, command="eval")])
    keyed.append("eval-x", [CapSet(cap_micros=3, command="eval")])
    assert keyed.verify() == []
    assert keyed.read_stream("store")[0].type == "LogRekeyed"
    plain.close()
    keyed.close()


def test_a_quick_check_goes_on_from_the_checkpoint_a_full_one_left_beside_the_key(
    tmp_path: Path,
) -> None:
    """``store verify`` (a full check) leaves a checkpoint beside the key; ``runs`` and
    ``audit`` (a quick check) then read only the events since. An edit after the checkpoint,
    or of the event at it, still shows quickly; an event before it edited with its hashes left
    alone only shows in the full check, which is what ``store verify`` is for."""
    import json
    import sqlite3

    from store.chain import HeadFile
    from store.eventstore import SqliteEventStore

    key_file = tmp_path / "log_key"
    key = read_log_key(key_file, create=True)
    database = tmp_path / "log.db"
    store = SqliteEventStore(database, key=key, key_file=key_file)
    store.append("eval-x", [CapSet(cap_micros=n, command="eval") for n in range(10)])
    full = store.check()
    assert (full.events, full.since, full.problems) == (10, 0, [])
    (head,) = HeadFile(key_file).read().values()
    assert head.verified_seq == 10
    store.append("eval-y", [CapSet(cap_micros=n, command="eval") for n in range(3)])
    quick = store.check(quick=True)
    assert (quick.events, quick.since, quick.problems) == (3, 10, [])
    (head,) = HeadFile(key_file).read().values()
    assert head.verified_seq == 13  # a quick check of the whole log moves it on too
    store.append("eval-y", [CapSet(cap_micros=99, command="eval")])

    def edit(seq: int) -> None:
        with sqlite3.connect(database) as conn:
            (data,) = conn.execute("SELECT data FROM events WHERE seq = ?", (seq,)).fetchone()
            conn.execute(
                "UPDATE events SET data = ? WHERE seq = ?",
                (json.dumps({**json.loads(data), "cap_micros": 7}), seq),
            )

    edit(14)  # after the checkpoint: the quick check sees it
    assert [p.seq for p in store.check(quick=True).problems] == [14]
    edit(5)  # before it, hashes untouched: only the full check sees it
    assert [p.seq for p in store.check(quick=True).problems] == [14]
    assert [p.seq for p in store.check().problems][:2] == [5, 14]
    with sqlite3.connect(database) as conn:  # the event at the checkpoint replaced
        conn.execute("UPDATE events SET link = ? WHERE seq = 13", ("0" * 64,))
    assert 13 in [p.seq for p in store.check(quick=True).problems]
    store.close()
