"""PlaylistEval's shell: the CLI, the settings object and the composition root.

``Settings`` and ``load_settings`` are handed on from :mod:`playlisteval.settings` when first
asked for: importing a submodule (the CLI, to show its help) does not load the settings, nor
the model providers they name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playlisteval.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]


def __getattr__(name: str) -> Any:
    """``Settings`` and ``load_settings``, imported from :mod:`playlisteval.settings` on use."""
    if name in __all__:
        return getattr(importlib.import_module("playlisteval.settings"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
