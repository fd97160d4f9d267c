"""Model providers for the curation roles: models that answer the prompts of ``tools.roles``.

``OfflineProvider`` answers every role deterministically with no key and no network (for the demo,
the tests and cost rehearsals); it is labelled ``offline:<model id>`` everywhere.

Each live adapter module declares its provider family as a module-level ``FAMILY`` (or
``FAMILIES``), a :class:`tools.providers.family.ProviderFamily`; a module added to this package
is a new family (:func:`tools.providers.registry.families` finds it).
"""

from __future__ import annotations

from tools.providers.offline import Fallibility, LatencyModel, OfflineProvider, answer

__all__ = ["Fallibility", "LatencyModel", "OfflineProvider", "answer"]
