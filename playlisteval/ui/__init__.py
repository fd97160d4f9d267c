"""The human-validation, judgments and audit web UI (``playlisteval ui``)."""

from playlisteval.ui.app import (
    create_app,
    export_labels,
    invite_annotators,
    serve,
    withdraw_annotators,
)

__all__ = ["create_app", "export_labels", "invite_annotators", "serve", "withdraw_annotators"]
