"""Column types the store's tables share.

:class:`JsonDocument` is JSON on SQLite and JSONB on PostgreSQL, as ``JSON().with_variant(JSONB(),
"postgresql")`` is, but it imports SQLAlchemy's PostgreSQL dialect only when a PostgreSQL engine
first uses the column: a workspace on SQLite (the default) does not pay for it on every command
(~30 ms of each start; ``bench/cli_start.py``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.types import JSON, TypeDecorator, TypeEngine


class JsonDocument(TypeDecorator[Any]):
    """A JSON document: JSONB on PostgreSQL (stored parsed; ``data - key`` works on it), JSON
    elsewhere. The same DDL and values as ``JSON().with_variant(JSONB(), "postgresql")``."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """JSONB for PostgreSQL (its dialect imported here, on first use), JSON for the rest."""
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


__all__ = ["JsonDocument"]
