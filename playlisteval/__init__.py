"""PlaylistEval's shell: the CLI, the settings object and the composition root.

``Settings`` and ``load_settings`` are handed on from :mod:`playlisteval.settings` when first
asked for: importing a submodule (the CLI, to show its help) does not load the settings, nor
the model providers they name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.lazy import lazy_getattr

if TYPE_CHECKING:
    from playlisteval.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]

__getattr__ = lazy_getattr(__name__, dict.fromkeys(__all__, "playlisteval.settings"))
