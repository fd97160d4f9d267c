"""Driving ``playlisteval serve`` processes from tests: start, wait, stop, read what they wrote."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from playlisteval.settings import SETTINGS_FILE
from store.eventstore import StoredEvent, open_event_store


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def configure(home: Path, text: str) -> None:
    """Append TOML to the workspace's settings."""
    settings = home / SETTINGS_FILE
    settings.write_text((settings.read_text() if settings.exists() else "") + "\n" + text)


def serve(home: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """A ``playlisteval serve`` process."""
    env = {**os.environ, "PLAYLISTEVAL_HOME": str(home), "PLAYLISTEVAL_LOG_LEVEL": "info"}
    return subprocess.Popen(
        [sys.executable, "-m", "playlisteval", "serve", "--home", str(home), *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env=env,
    )


def wait_for(check: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    """Poll ``check`` until it holds; fail with the daemon's log tail otherwise."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s; log:\n{log.read_text()[-4000:]}")
        time.sleep(0.25)


def stop(process: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM, then the process must end by itself, cleanly."""
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=120)
    assert code == 0, log.read_text()[-4000:]


def events_of(home: Path) -> list[StoredEvent]:
    """The workspace's whole log (SQLite, the single-machine default)."""
    store = open_event_store(home / "playlisteval.db")
    try:
        return store.read_all()
    finally:
        store.close()


def has_event(home: Path, type_: str) -> bool:
    """Whether the workspace's log holds an event of this type yet."""
    if not (home / "playlisteval.db").exists():
        return False
    store = open_event_store(home / "playlisteval.db")
    try:
        return bool(store.read_all(types=[type_], limit=1))
    finally:
        store.close()


def final_state(home: Path) -> dict[str, Any]:
    """Per seed: how it ended, what was accepted, and what it paid — run ids aside."""
    seeds: dict[str, dict[str, Any]] = {}
    for stored in events_of(home):
        if not stored.stream.startswith("seed-"):
            continue
        data = stored.data
        seed = seeds.setdefault(
            stored.stream.rsplit("-seed-", 1)[-1],
            {"status": "new", "paid_micros": 0, "item": None, "calls": 0},
        )
        if stored.type == "ItemAccepted":
            seed["status"], seed["item"] = "accepted", (data["qa"], data["distractors"])
        elif stored.type == "SeedDiscarded":
            seed["status"] = "discarded"
        elif stored.type == "CallRecorded" and not data["replayed"]:
            seed["paid_micros"] += data["cost_micros"]
            seed["calls"] += 1
        elif stored.type == "CallFailed":
            seed["paid_micros"] += data["charged_micros"]
    return seeds


def answers(url: str) -> bool:
    """Whether ``url`` answers at all yet (healthy, or saying it is not)."""
    try:
        return httpx.get(url, timeout=5).status_code in (200, 503)
    except httpx.HTTPError:
        return False
