"""Every event type the project writes is one ``store verify`` decodes: walked from the code
(every concrete subclass of :class:`store.events.Event` in every module), so a new event class
that the verifier does not know fails here rather than as "tampering" on a user's workspace."""

from __future__ import annotations

import importlib
import pkgutil
from datetime import UTC, datetime

import pytest

from store.annotation_events import ANNOTATION_TYPES
from store.errors import UndecodableEvent
from store.events import Event, decode_event
from store.eventstore import StoredEvent, decode_known

PACKAGES = ("agents", "playlisteval", "policies", "store", "tools")


def _import_everything() -> None:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if not info.name.endswith(".__main__"):  # that one runs the CLI
                importlib.import_module(info.name)


def _concrete(cls: type[Event]) -> list[type[Event]]:
    out: list[type[Event]] = []
    for sub in cls.__subclasses__():
        # The project's own classes (a test may declare one of its own: test_event_kinds.py).
        if "type" in sub.model_fields and sub.__module__.split(".")[0] in PACKAGES:
            out.append(sub)
        out += _concrete(sub)
    return out


def test_every_event_class_in_the_code_is_known_to_the_verifier() -> None:
    _import_everything()
    classes = _concrete(Event)
    assert len(classes) > 30  # the walk found the project's events (not a vacuous pass)
    unknown: list[str] = []
    when = datetime.now(UTC)
    for cls in classes:
        name = str(cls.model_fields["type"].default)
        schema = int(cls.model_fields["schema_version"].default)
        try:
            decode_known(StoredEvent(1, "any", 1, name, schema, {}, when))
        except (UndecodableEvent, ValueError) as exc:
            # A known type fails on its missing fields; only an unknown type is a miss.
            if "no event type" in str(exc) or "does not match any of the expected tags" in str(exc):
                unknown.append(f"{cls.__module__}.{cls.__name__} ({name})")
    assert not unknown, f"store verify would call these tampering: {unknown}"


@pytest.mark.parametrize("name", sorted(ANNOTATION_TYPES))
def test_the_annotation_types_decode_by_their_registered_class(name: str) -> None:
    """Every class is in one registry: an annotation row decodes (here, fails on its missing
    fields, not as an unknown type) like any curation event."""
    with pytest.raises(ValueError, match="Field required"):
        decode_event(name, 1, {})
