"""What the catalogue and the event log share about their SQLite files: whether this process
may write one, and how a read-only one is opened.

An archived workspace (a read-only folder, or files this user may not write) is still read:
SQLite's immutable mode reads the file as it is, with no ``-wal`` or ``-shm`` file beside it
(which a read-only folder could not hold) and no locking. Nothing else may write it meanwhile,
which is what read-only means here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, event

from store.errors import ConfigError


def writable(file: Path) -> bool:
    """Whether this process may write ``file`` (when it exists) and its folder (a SQLite
    database in WAL mode writes files beside itself)."""
    return os.access(file.parent, os.W_OK) and (not file.exists() or os.access(file, os.W_OK))


def read_only(file: Path) -> bool:
    """Whether ``file`` is an existing database this process may read but not write."""
    return file.is_file() and not writable(file)


def immutable_url(file: Path) -> str:
    """The SQLAlchemy URL opening ``file`` read-only and immutable."""
    return f"sqlite:///file:{quote(str(file.resolve()))}?mode=ro&immutable=1&uri=true"


def refuse_writes(engine: Engine, what: str) -> Engine:
    """Make every write through ``engine`` (an immutable one) a :class:`ConfigError` that says
    the workspace is read-only, instead of SQLite's "attempt to write a readonly database"."""

    def check(
        _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
    ) -> None:
        head = statement.strip().upper()
        if not (head.startswith(_READS) or head in _READ_TRANSACTIONS):
            raise ConfigError(
                f"{what} is read-only (an archived workspace, or files this user may not write): "
                "this command writes to it; run it on a writable copy (`cp -a`), or give this "
                "process write permission"
            )

    event.listen(engine, "before_cursor_execute", check)
    return engine


_READS = ("SELECT", "PRAGMA", "WITH")
# A deferred transaction takes no write lock: a reader opens one to see one snapshot.
_READ_TRANSACTIONS = ("BEGIN", "BEGIN DEFERRED", "BEGIN TRANSACTION", "BEGIN DEFERRED TRANSACTION")
