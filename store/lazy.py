"""How a package hands on the names of its modules when first asked for (PEP 562): importing
one submodule then loads only that one, not every module the package offers names from.

Each such package keeps a table of its names' homes and takes its module ``__getattr__`` from
:func:`lazy_getattr` (``__getattr__ = lazy_getattr(__name__, _HOMES)``); what to do with a name
is decided once, here."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_name(package: str, homes: Mapping[str, str], name: str) -> Any:
    """``name`` as package ``package`` hands it on: taken from its module in ``homes`` (which
    is imported now if it was not yet); an ``AttributeError``, as for any attribute a module
    lacks, when ``package`` offers no such name."""
    if name in homes:
        return getattr(importlib.import_module(homes[name]), name)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of package ``package``, whose names live in the
    modules ``homes`` gives: each is :func:`lazy_name` of the name asked for."""

    def module_getattr(name: str) -> Any:
        """A name of the package's ``__all__``, imported from its module on first use."""
        return lazy_name(package, homes, name)

    return module_getattr
