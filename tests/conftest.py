"""Shared fixtures: every test runs offline, in its own workspace."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.workspaces import copy_workspace

if TYPE_CHECKING:
    from store.eventstore import EventStore

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's real workspace or settings."""
    monkeypatch.setenv("PLAYLISTEVAL_HOME", str(tmp_path / "home"))
    for name in list(os.environ):
        if name.startswith("PLAYLISTEVAL_") and name != "PLAYLISTEVAL_HOME":
            monkeypatch.delenv(name)


# Test files that check the settings as shipped (docs/settings.md, the reference of defaults).
SHIPPED_DEFAULTS_FILES = frozenset({"test_settings_doc.py"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hears_speech: the test runs with the shipped default transcriber (auto falls back to "
        "faster-whisper base), not the suite's `none`",
    )


@pytest.fixture(autouse=True)
def _quiet_default_transcriber(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Speech is heard by default (``index.local_transcriber = "faster-whisper"``), but most
    tests' synthetic videos carry a tone or narration they do not test: Whisper on each would
    cost the suite minutes. So a test's settings default to ``none`` unless it is marked
    ``hears_speech`` (or states its transcriber, as the Whisper tests' settings files do)."""
    import playlisteval.settings

    if request.node.get_closest_marker("hears_speech") is not None:
        return
    if request.node.path.name in SHIPPED_DEFAULTS_FILES:
        return
    monkeypatch.setattr(playlisteval.settings, "DEFAULT_LOCAL_TRANSCRIBER", "none")


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """No test inherits another's structlog set-up: a CLI command run at warning level (as
    ``playlisteval.logs.configure`` sets it) would otherwise drop the info events a later
    test captures with ``structlog.testing.capture_logs``, depending on which file ran first."""
    yield
    import structlog

    structlog.reset_defaults()


@pytest.fixture(autouse=True)
def _no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test can reach a real model API: pydantic-ai's guard is off, as its docs advise for
    test suites. The offline provider and FunctionModel never ask; the adapters (theirs and
    ours) do, so a test that drives them against the local fake servers opts in with
    ``allow_model_requests``."""
    import pydantic_ai.models

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", False)


@pytest.fixture
def allow_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opt in to model requests: the test's adapters talk to the fake servers on loopback."""
    import pydantic_ai.models

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", True)


PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"  # the machine's PostgreSQL


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh PostgreSQL schema name for the test; the schema and all in it dropped after."""
    from sqlalchemy import create_engine

    name = f"t_{uuid.uuid4().hex[:16]}"
    yield name
    engine = create_engine(PG_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def event_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """An event store on a SQLite file, or in a fresh PostgreSQL schema (dropped afterwards)."""
    from store.eventstore import open_event_store

    if request.param == "sqlite":
        opened = open_event_store(tmp_path / "events.db")
    else:
        opened = open_event_store(PG_URL, schema=request.getfixturevalue("pg_schema"))
    yield opened
    opened.close()


DEMO_INDEX = {
    "segment_min_minutes": 1.0,
    "segment_target_minutes": 1.0,
    "segment_max_minutes": 2.0,
}


@pytest.fixture(scope="session")
def demo_playlist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic demo playlist (with its planted duplicate), made once per session."""
    from tools.offline.synthetic import make_demo_playlist

    return make_demo_playlist(tmp_path_factory.mktemp("demo-playlist"))


@pytest.fixture(scope="session")
def demo_home(demo_playlist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with the demo playlist indexed (closed again: copy it before writing)."""
    from playlisteval.app import App
    from playlisteval.settings import SETTINGS_FILE, load_settings

    home = tmp_path_factory.mktemp("demo-home")
    (home / SETTINGS_FILE).write_text(
        "[index]\n" + "".join(f"{k} = {v}\n" for k, v in DEMO_INDEX.items())
    )
    with App(load_settings(home)) as app:
        indexer = app.indexer()
        indexer.add(str(demo_playlist), domain=None)
        indexer.prepare_media()
        indexer.run()
    return home


@pytest.fixture
def workspace(demo_home: Path, tmp_path: Path) -> Path:
    """A private copy of the indexed demo workspace."""

    copy = tmp_path / "ws"
    copy_workspace(demo_home, copy)
    return copy


# -- how much disk the suite takes -----------------------------------------------------------


class TempPeak:
    """Samples, every few seconds of a test run, the disk taken by pytest's temporary root
    (``<tmp>/pytest-of-<user>``: this run's folders and the one earlier run pytest keeps) and
    how much more of the temporary folder's file system is in use than at the start (anything a
    test or a subprocess writes anywhere there). The peaks are printed at the end of the run;
    the suite is meant to stay under 3 GB (docs/development.md)."""

    def __init__(self, every_s: float = 2.0) -> None:
        import getpass
        import shutil
        import tempfile
        import threading

        self.tmp = Path(tempfile.gettempdir())
        self.root = self.tmp / f"pytest-of-{getpass.getuser()}"
        self.every_s = every_s
        self._disk_usage = shutil.disk_usage
        self.used_at_start = self._disk_usage(self.tmp).used
        self.peak_root = 0
        self.peak_growth = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="temp-peak", daemon=True)
        self._thread.start()

    @staticmethod
    def on_disk(folder: Path) -> int:
        """Bytes ``folder`` takes on disk (allocated blocks: sparse files count what they hold)."""
        total = 0
        stack = [str(folder)]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:  # removed while we looked
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
        return total

    def sample(self) -> None:
        """One measurement."""
        self.peak_root = max(self.peak_root, self.on_disk(self.root))
        growth = self._disk_usage(self.tmp).used - self.used_at_start
        self.peak_growth = max(self.peak_growth, growth)

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        """Take a last sample and stop sampling."""
        self._stop.set()
        self._thread.join(timeout=30)
        self.sample()


_TEMP_PEAK: list[TempPeak] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    # One sampler per run, in the process that sees the whole run (xdist's controller).
    if not hasattr(session.config, "workerinput"):
        _TEMP_PEAK.append(TempPeak())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TEMP_PEAK:
        return
    peak = _TEMP_PEAK.pop()
    peak.stop()
    mib = 2**20
    terminalreporter.write_line(
        f"temporary files: peak {peak.peak_root / mib:.0f} MiB under {peak.root}, "
        f"peak growth of {peak.tmp}'s file system {max(peak.peak_growth, 0) / mib:.0f} MiB "
        "(sampled every 2 s; the suite's limit is 3 GB)"
    )


# -- the order files start in ----------------------------------------------------------------

# Seconds each long file takes on this 2-core machine (its tests and module fixtures, from
# ``--durations``), roughly. xdist runs whole files per worker (``--dist loadfile``) and, left to
# itself, starts the files with the most tests first, so these few-test, long files start last
# and one worker finishes them alone for minutes. Started first instead (longest first, with
# ``--no-loadscope-reorder``), the short files fill the other workers meanwhile.
LONG_FILES = {
    "test_ray_index.py": 130,
    "test_money_invariants.py": 75,
    "test_curation.py": 120,
    "test_daemon.py": 100,
    "test_money_invariants_pg.py": 85,
    "test_daemon_restart.py": 85,
    "test_fleet.py": 50,
    "test_tamper.py": 60,
    "test_accounts_check.py": 60,
    "test_pairs.py": 60,
    "test_index_pipeline.py": 60,
    "test_index_follows_settings.py": 60,
    "test_readme_commands.py": 300,
    "test_hub.py": 120,
    "test_live_curation.py": 50,
    "test_evaluation.py": 45,
    "test_batch_mode.py": 40,
    "test_daemon_soak.py": 40,
    "test_retrieval.py": 35,
    "test_run_money.py": 30,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long files first (a stable sort: the order within a file, and among the rest, stays)."""
    items.sort(key=lambda item: -LONG_FILES.get(item.path.name, 0))
