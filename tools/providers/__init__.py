"""Model providers for the curation roles: models that answer the prompts of
``tools.contracts.roles``.

``OfflineProvider`` answers every role deterministically with no key and no network (for the demo,
the tests and cost rehearsals); it is labelled ``offline:<model id>`` everywhere.

Each provider family is one :class:`tools.providers.family.ProviderFamily` spec, declared in its
own light module of :mod:`tools.providers.specs` (the family's adapter module hands it on as
``FAMILY``): :func:`tools.providers.family.families` knows every family from those specs without
importing an SDK, and a family's adapter module (and its SDK) is imported when its first model
is built. A module of this package that declares ``FAMILY`` (or ``FAMILIES``) itself is a family
too (imported when the families are read).

Importing this package imports nothing heavy: the offline provider's names below are imported
from :mod:`tools.providers.offline` (pydantic-ai and all) on first use.

May import: :mod:`tools.contracts` (the prompts it answers), :mod:`tools.offline` (the offline
provider's answers and frame reading), :mod:`tools.runtime` (local models' devices and files)
and :mod:`tools.index` (media), besides :mod:`store`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.lazy import lazy_getattr

if TYPE_CHECKING:
    from tools.providers.offline import Fallibility, LatencyModel, OfflineProvider, answer

__all__ = ["Fallibility", "LatencyModel", "OfflineProvider", "answer"]

__getattr__ = lazy_getattr(__name__, dict.fromkeys(__all__, "tools.providers.offline"))
