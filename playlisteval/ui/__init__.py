"""The human-validation and audit web UI (``playlisteval ui``)."""

from playlisteval.ui.app import create_app, serve

__all__ = ["create_app", "serve"]
