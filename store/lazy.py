"""How a package hands on the names of its modules when first asked for (PEP 562): importing
one submodule then loads only that one, not every module the package offers names from.

Each such package keeps a table of its names' homes and a module ``__getattr__`` that asks
:func:`lazy_name`; what to do with a name is decided once, here."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def lazy_name(package: str, homes: Mapping[str, str], name: str) -> Any:
    """``name`` as package ``package`` hands it on: taken from its module in ``homes`` (which
    is imported now if it was not yet); an ``AttributeError``, as for any attribute a module
    lacks, when ``package`` offers no such name."""
    if name in homes:
        return getattr(importlib.import_module(homes[name]), name)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")
