"""PlaylistEval's shell: the CLI, the settings object and the composition root."""

from playlisteval.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
