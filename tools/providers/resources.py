"""Provider-side resources (uploaded files, context caches) recorded in the event log, so a
restarted run reuses what it already paid for instead of uploading or caching again."""

from __future__ import annotations

import threading
from datetime import datetime

from store.events import PROVIDER_RESOURCES_STREAM, ProviderResourceCreated
from store.eventstore import EventStore
from tools.providers.base import MemoryResourceLedger, ProviderResource


class EventResourceLedger:
    """A :class:`~tools.providers.base.ResourceLedger` over the ``provider-resources`` stream."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._memory = MemoryResourceLedger()
        self._lock = threading.Lock()
        for stored in store.read_stream(PROVIDER_RESOURCES_STREAM):
            event = stored.event()
            if isinstance(event, ProviderResourceCreated):
                self._memory.record(_resource(event))

    def find(self, provider: str, kind: str, key: str, now: datetime) -> ProviderResource | None:
        """The live resource under ``key``, from this process or an earlier one."""
        with self._lock:
            return self._memory.find(provider, kind, key, now)

    def record(self, resource: ProviderResource) -> None:
        """Append the resource to the log and remember it."""
        with self._lock:
            self.store.append(
                PROVIDER_RESOURCES_STREAM,
                [
                    ProviderResourceCreated(
                        provider=resource.provider,
                        kind=resource.kind,
                        key=resource.key,
                        name=resource.name,
                        expires_at=resource.expires_at.isoformat() if resource.expires_at else None,
                        tokens=resource.tokens,
                    )
                ],
            )
            self._memory.record(resource)


def _resource(event: ProviderResourceCreated) -> ProviderResource:
    return ProviderResource(
        provider=event.provider,
        kind=event.kind,
        key=event.key,
        name=event.name,
        expires_at=datetime.fromisoformat(event.expires_at) if event.expires_at else None,
        tokens=event.tokens,
    )
