"""What every component that makes recorded model calls is built from: one frozen object.

The curator (single-process and fleet), the difficulty gate's pair selection and judge
evaluation all reach the same things — the event store they append to, the catalogue and clip
fetcher their evidence comes from, the models, the prices, how calls travel, the secrets to
scrub, the campaign's accounts. The composition root (``playlisteval.app``) builds a
:class:`CallDeps` once per workspace and hands it over, in the way pydantic-ai hands an agent its
``deps``; a caller that needs a variation (a scratch store for a replay, the offline judges'
models and prices for an evaluation) makes one with :func:`dataclasses.replace`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic_ai.models import Model

from agents.batching import Batcher
from agents.recorded import Pricing
from policies.budget import Campaign
from policies.prices import PriceTable
from policies.ratelimits import Sleep, Traffic
from store.catalog import Catalog
from store.eventstore import EventStore
from tools.evidence.clips import ClipFetcher


@dataclass(frozen=True)
class CallDeps:
    """The dependencies of recorded model calls.

    ``traffic`` says per model id how its calls travel (retries, rate limiter, frames, batch);
    ``pricing`` scales what a rehearsal prices; ``sleep`` is how retries wait (tests pass a clock
    of their own); ``secrets`` are scrubbed from every event; ``batcher`` collects batch jobs
    when live calls may use batch APIs; ``campaign`` is the daemon's or fleet's accounts, in which
    every call also reserves; ``prices_at`` prices a replayed call as it was priced when made.
    """

    store: EventStore
    catalog: Catalog
    clips: ClipFetcher
    model_for: Callable[[str], Model]
    prices: PriceTable
    traffic: Callable[[str], Traffic | None] | None = None
    pricing: Pricing | None = None
    sleep: Sleep | None = None
    secrets: Sequence[str] = ()
    batcher: Batcher | None = None
    campaign: Campaign | None = None
    # A replay's prices by the seq each recorded call was logged at (None: ``prices`` for all).
    prices_at: Callable[[int], PriceTable] | None = None
