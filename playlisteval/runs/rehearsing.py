"""A curation rehearsal: the loop run offline in a scratch log, priced as the configured live
models would be."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import anyio

from agents.audit import Audit
from agents.curation import Curator
from agents.deps import CallDeps
from agents.evidence import MAX_WINDOW_CHUNKS
from agents.recorded import Pricing
from playlisteval.app import (
    App,
    offline_models,
    traffic_for,
)
from playlisteval.runs.auditing import audit
from playlisteval.runs.curation import choose_seeds
from playlisteval.settings import IndexSettings
from policies.budget import check_concurrency
from policies.prices import PriceTable
from store.catalog import SeedRow
from store.errors import ConfigError
from store.events import (
    CallRecorded,
    seed_stream,
)
from store.eventstore import scratch_event_store


@dataclass
class Rehearsal:
    """What a curation would cost with the configured live models, before any money is spent.

    ``scenarios`` prices the same calls again without the savings: ``without caching`` (every
    video call pays full input price, no cache written or kept), ``without batch`` (text-only
    gates at list price) and ``neither``; and, where a model has explicit-cache rates, the two
    bounds of :func:`explicit_cache_scenarios` (what-if figures: no adapter sends the markers).
    """

    audit: Audit
    accepted: int
    seeds: int
    scale: float = 1.0
    segment_minutes: float = 0.0
    batch: bool = False
    scenarios: dict[str, int] = field(default_factory=dict)
    cached_tokens: int = 0
    batch_calls: int = 0
    video_share: float = 0.0

    @property
    def cost_per_accepted_micros(self) -> int | None:
        """Expected spend per accepted question (all retries and discards included)."""
        return self.audit.spent_micros // self.accepted if self.accepted else None

    def per_accepted(self, scenario: str) -> int | None:
        """Cost per accepted question in one scenario."""
        total = self.scenarios.get(scenario)
        return None if total is None or not self.accepted else total // self.accepted


EXPLICIT_BEST = "what if: one explicit-cache video prefix a seed, every read a hit"
EXPLICIT_WORST = "what if: explicit cache, every read after its 5-minute life"


def explicit_cache_scenarios(
    prices: PriceTable, calls: Sequence[tuple[str, CallRecorded]]
) -> dict[str, int]:
    """What the rehearsal's calls would cost if the video calls to models with explicit-cache
    rates (``cache_write_per_mtok`` and ``explicit_cached_input_per_mtok``: DashScope's Qwen)
    sent each seed's clips as one explicit-cache prefix shared by every such call of the seed
    and model (both Qwen video gates), every other call as configured. ``calls`` are
    ``(seed stream, call)`` in log order. Two bounds, since a block lives 5 minutes from its
    last hit and a live seed's calls may lie further apart (batched text gates between them):
    the best case, where the seed's first such call writes the prefix and every later one
    reads it, and the worst, where every call finds it expired and writes it again. Empty
    when no call would be priced differently (no such model called with video)."""
    best = worst = 0
    written: set[tuple[str, str]] = set()
    touched = False
    for stream, call in calls:
        if call.replayed:
            continue  # served again from the log: it cost the run nothing
        if not call.usage.get("video"):
            best += call.cost_micros
            worst += call.cost_micros
            continue
        as_write = prices.repriced_explicit(call.model, call.usage, write=True)
        as_hit = prices.repriced_explicit(call.model, call.usage, write=False)
        if as_write is None or as_hit is None:
            best += call.cost_micros
            worst += call.cost_micros
            continue
        touched = True
        first = (stream, call.model) not in written
        written.add((stream, call.model))
        best += as_write if first else as_hit
        worst += as_write
    return {EXPLICIT_BEST: best, EXPLICIT_WORST: worst} if touched else {}


def paper_scale(app: App, seeds: list[SeedRow]) -> tuple[float, float]:
    """``(factor, minutes)``: how much longer the paper's segments are than these seeds' (the
    paper's segment length, the default of ``index.segment_target_minutes``, over the mean
    segment length here; never below 1)."""
    lengths: list[float] = []
    for seed in seeds:
        for segment_id in (seed.segment_a, seed.segment_b):
            row = app.catalog.segment(segment_id)
            if row is not None and row.end_s > row.start_s:
                lengths.append(row.end_s - row.start_s)
    target_s = IndexSettings().segment_target_minutes * 60.0
    if not lengths:
        return 1.0, target_s / 60.0
    mean = sum(lengths) / len(lengths)
    return max(target_s / mean, 1.0), target_s / 60.0


def rehearse(
    app: App,
    *,
    seeds: int = 20,
    concurrency: int | None = None,
    paper: bool = True,
    batch: bool | None = None,
) -> Rehearsal:
    """Run the loop with the offline provider in a scratch log, every call priced with the
    configured live models' token rules, prices, context caching and (``batch``) batch rates,
    and audit it. With ``paper`` the video, audio and transcripts of each call are priced at the
    paper's segment length (20 minutes) whatever this playlist's segments are. The workspace's
    log is not touched."""
    check_concurrency(concurrency, most=app.settings.curation.max_concurrency)
    # Any active seed, curated already or not: a rehearsal writes to a scratch log, never to a run.
    chosen, _ = choose_seeds(app, seeds, again=True)
    if not chosen:
        raise ConfigError("no seeds to rehearse on: run `playlisteval index` first")
    config = replace(app.curator().config, offline=True)
    if concurrency is not None:
        config = replace(config, concurrency=concurrency)
    scale, minutes = paper_scale(app, chosen) if paper else (1.0, 0.0)
    # The transcript test's windows stop at MAX_WINDOW_CHUNKS chunks, however long the segments.
    cap_s = MAX_WINDOW_CHUNKS * app.settings.index.chunk_seconds
    windows = scale * min(1.0, cap_s / (minutes * 60.0)) if minutes > 0 else scale
    use_batch = app.settings.providers.batch if batch is None else batch
    traffic = traffic_for(app.settings, live=False)
    prices = app.prices()
    with scratch_event_store("rehearsal") as store:
        curator = Curator(
            CallDeps(
                store=store,
                catalog=app.catalog,
                clips=app.clips(),
                model_for=offline_models(),
                prices=prices,
                traffic=traffic,
                pricing=Pricing(scale=scale, batch_text=use_batch, window_scale=max(windows, 1.0)),
            ),
            config=config,
        )
        report = anyio.run(lambda: curator.curate("rehearsal", chosen, budget_micros=None))
        result = audit(app, "rehearsal", store=store)
        streams = [
            (s.stream, e)
            for s in store.read_all(stream_prefix=seed_stream("rehearsal", ""))
            if isinstance(e := s.event(), CallRecorded)
        ]
        calls = [e for _, e in streams]
    scenarios = {"as configured": result.spent_micros}
    for name, cache, batch_on in (
        ("without caching", False, use_batch),
        ("without batch", True, False),
        ("neither", False, False),
    ):
        # A call served again from the log (``replayed``) cost the run nothing, as the audit
        # counts it: only the calls made are priced again.
        scenarios[name] = sum(
            prices.repriced(e.model, e.usage, batch=batch_on and e.batch, cache=cache)
            for e in calls
            if not e.replayed
        )
    scenarios.update(explicit_cache_scenarios(prices, streams))
    # The native-video (and image) calls' share, by the one ledger the audit folded.
    video = result.by_media.get("video", 0)
    return Rehearsal(
        audit=result,
        accepted=len(report.accepted),
        seeds=len(chosen),
        scale=scale,
        segment_minutes=minutes,
        batch=use_batch,
        scenarios=scenarios,
        cached_tokens=sum(e.cached_tokens for e in calls if not e.replayed),
        batch_calls=sum(1 for e in calls if e.batch and not e.replayed),
        video_share=video / result.spent_micros if result.spent_micros else 0.0,
    )
