"""The composition root: builds the parts from the settings and hands them out.

Nothing below ``playlisteval`` reads settings; this module turns them into plain parameters.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import Engine

from playlisteval.settings import SETTINGS_FILE, ModelEndpoint, Settings, default_endpoints
from playlisteval.workspace import Workspace
from policies.budget import TOTAL_ACCOUNT, Campaign, cap_micros, day_account
from policies.prices import PriceTable, UnknownPriceError
from policies.ratelimits import Limiter, RateLimiter, RetryPolicy, SharedRateLimiter, Sleep, Traffic
from policies.tokens import provider_family
from store.catalog import Catalog
from store.chain import LOG_KEY_FILE, read_log_key
from store.closing import ClosesOnExit
from store.coordination import BudgetAccounts, Leases, WorkQueue
from store.errors import ConfigError, disk_full
from store.events import CapSet, micros_to_usd, usd_to_micros
from store.eventstore import EventStore, open_event_store
from store.ledger import current_cap, spend
from store.projections import Projections
from tools.providers.family import ProviderFamily, families, family_named, family_of
from tools.providers.specs.local_llm import free_price_rows, is_real_local

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from agents.batching import Batcher
    from agents.coordinator import LoopPolicy
    from agents.curation import CurationConfig, CurationProgress, Curator
    from agents.deps import CallDeps
    from agents.fleet import FleetConfig, FleetWorker, IndexJob
    from agents.ownership import WriterLease
    from agents.replay import Replayer
    from agents.workers import RoleModels
    from tools.evidence.clips import ClipFetcher
    from tools.evidence.retrieval import RetrieverSet
    from tools.evidence.search import ChunkSearch
    from tools.index.calibration import SeedBand
    from tools.index.embeddings import Embedder
    from tools.index.indexer import IndexConfig, Indexer, IndexProgress
    from tools.index.ray_index import AudioNeed, RayIndexer, RayModels, RayOptions
    from tools.index.transcripts import Transcriber
    from tools.index.vectors import VectorIndex
    from tools.providers.base import ProviderConfig
    from tools.providers.registry import ProviderRegistry

log = structlog.get_logger("playlisteval.app")


def _or(value: float | None, stored: float) -> float:
    return stored if value is None else value


def seed_band(settings: Settings) -> SeedBand:
    """The seed band in force: the ``seeds`` settings, each unset one from the band stored for
    the configured embedder (:data:`tools.index.calibration.SEED_BANDS`)."""
    from tools.index.calibration import SeedBand, stored_band

    seeds, band = settings.seeds, stored_band(settings.index.embedder)
    given = {"seed_min_cosine", "seed_max_cosine", "duplicate_cosine"} & seeds.model_fields_set
    return SeedBand(
        _or(seeds.seed_min_cosine, band.min_cosine),
        _or(seeds.seed_max_cosine, band.max_cosine),
        _or(seeds.duplicate_cosine, band.duplicate_cosine),
        "the [seeds] settings" if given else band.source,
    )


def index_config(settings: Settings) -> IndexConfig:
    """The pipeline's numbers, from the settings (the seed band: :func:`seed_band`)."""
    from tools.index.indexer import IndexConfig

    idx, band = settings.index, seed_band(settings)
    return IndexConfig(
        chunk_s=idx.chunk_seconds,
        segment_min_s=idx.segment_min_minutes * 60.0,
        segment_target_s=idx.segment_target_minutes * 60.0,
        segment_max_s=idx.segment_max_minutes * 60.0,
        frame_fps=idx.frame_fps,
        frame_max_height=idx.frame_max_height,
        audio_rate=idx.audio_rate,
        duplicate_cosine=band.duplicate_cosine,
        seed_min_cosine=band.min_cosine,
        seed_max_cosine=band.max_cosine,
        seed_candidates_per_segment=settings.seeds.candidates_per_segment,
        batch_chunks=idx.embed_batch_size,
        decode_workers=idx.decode_workers,
        collection_prefix=settings.vectors.collection_prefix,
        max_download_height=settings.ingest.max_height,
        subtitle_langs=tuple(settings.ingest.subtitle_langs),
        ocr=idx.ocr,
    )


def embedder_options(settings: Settings) -> dict[str, Any]:
    """What :func:`tools.index.embeddings.make_embedder` takes for the configured embedder."""
    idx = settings.index
    options: dict[str, Any] = {"device": idx.device, "batch_size": idx.embed_batch_size}
    if idx.embedder == "qwen3-vl-embedding":
        options.update(model=idx.qwen_embedding_model, dtype=idx.dtype)
    return options


def build_embedder(settings: Settings) -> Embedder:
    """The configured chunk embedder, on ``index.device`` (a GPU asked for and absent is a
    ConfigError), ``index.embed_batch_size`` chunks per model call."""
    from tools.index.embeddings import make_embedder

    return make_embedder(settings.index.embedder, **embedder_options(settings))


def ray_models(settings: Settings) -> RayModels:
    """The index models the settings name, as factories the Ray actors call, and what decoding
    needs to know of them beforehand (the driver loads neither model)."""
    from tools.index.embeddings import FrameStatsTextEmbedder, make_embedder
    from tools.index.ray_index import RayModels
    from tools.index.transcripts import make_transcriber

    idx = settings.index
    frame_height = (
        FrameStatsTextEmbedder.frame_height if idx.embedder == FrameStatsTextEmbedder.name else None
    )
    asr = idx.local_transcriber if idx.transcriber == "auto" else idx.transcriber
    audio: AudioNeed = "always"
    if idx.transcriber in ("captions", "none") or asr == "none":
        audio = "never"
    elif idx.transcriber == "auto":
        audio = "without-captions"
    # The tools' own factories with plain options: an actor imports the model's module only,
    # not this one (the whole application, seconds of imports per actor on a small node).
    name, options = transcriber_spec(settings)
    return RayModels(
        embedder=partial(make_embedder, idx.embedder, **embedder_options(settings)),
        transcriber=partial(make_transcriber, name, **options),
        frame_height=frame_height,
        audio=audio,
    )


def ray_options(settings: Settings, address: str | None = None) -> RayOptions:
    """Where the Ray stages run and what each reserves, from ``[index]``. ``index.device =
    'cpu'`` keeps the models off GPUs even on a GPU cluster."""
    from tools.index.ray_index import RayOptions

    idx = settings.index
    return RayOptions(
        address=address or idx.ray_address,
        connect_timeout_s=idx.ray_connect_timeout_s,
        decode_cpus=idx.ray_decode_cpus,
        actor_cpus=idx.ray_actor_cpus,
        gpus_per_actor=idx.ray_gpus_per_actor,
        actors=idx.ray_actors,
        use_gpus=str(idx.device).strip().lower() != "cpu",
        require_gpus=str(idx.device).strip().lower().startswith("cuda"),
        scratch=str(idx.scratch_dir) if idx.scratch_dir else None,
    )


def _backend_spec(settings: Settings, name: str) -> tuple[str, dict[str, Any]]:
    from tools.index.transcripts import DashScopeTranscriber

    idx = settings.index
    # Local models run on index.device at index.dtype, index.asr_batch_size chunks a batch.
    on_device = {"device": idx.device, "batch_size": idx.asr_batch_size}
    if name == "faster-whisper":
        if idx.whisper_model_dir is not None:
            log.warning(
                "setting_renamed",
                setting="index.whisper_model_dir",
                read_as="index.whisper_model",
                value=str(idx.whisper_model_dir),
                fix="rename the key to whisper_model in playlisteval.toml",
            )
        return name, {"model": idx.whisper_model, "compute_type": idx.dtype, **on_device}
    if name == "qwen3-asr":
        return name, {"model": idx.qwen_asr_model, "dtype": idx.dtype, **on_device}
    if name == DashScopeTranscriber.name:
        # Its family's endpoint and key, as generation has them (regions take different keys).
        limits = settings.providers.family(DashScopeTranscriber.family)
        key = os.environ.get(limits.api_key_env) or None
        return name, {"base_url": limits.base_url, "api_key": key}
    return name, {}


def transcriber_spec(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The configured transcript backend as :func:`tools.index.transcripts.make_transcriber` takes
    it
    (``auto``: captions, else the local backend, with its options)."""
    idx = settings.index
    if idx.transcriber == "auto":
        name, options = _backend_spec(settings, idx.local_transcriber)
        return "auto", {"fallback": name, "fallback_options": options}
    return _backend_spec(settings, idx.transcriber)


def build_transcriber(settings: Settings) -> Transcriber:
    """The configured transcript backend (``auto``: captions, else the local backend)."""
    from tools.index.transcripts import make_transcriber

    name, options = transcriber_spec(settings)
    return make_transcriber(name, **options)


def open_vectors(settings: Settings, workspace: Workspace) -> VectorIndex:
    """The configured Qdrant backend."""
    from tools.index.vectors import open_vector_index

    vec = settings.vectors
    if vec.backend == "qdrant-server":
        if not vec.url:
            raise ConfigError("vectors.backend 'qdrant-server' needs vectors.url")
        return open_vector_index(vec.backend, url=vec.url, api_key=os.environ.get(vec.api_key_env))
    return open_vector_index(vec.backend, path=workspace.vectors / vec.backend)


def loop_policy(settings: Settings) -> LoopPolicy:
    """The loop's numbers and gate order (cheap first) from the settings and the gate table:
    the paper's gates and those of the gate packages the settings name (loaded here)."""
    from agents.coordinator import LoopPolicy
    from agents.gates import load_gate_packages, registered_gates

    gen = settings.generation
    load_gate_packages(settings.models.gate_packages)
    return LoopPolicy(
        max_attempts=gen.max_attempts,
        phase2_rejections_before_restart=gen.phase2_rejections_before_restart,
        gates=registered_gates(),
    )


def role_models(settings: Settings) -> RoleModels:
    """Which model plays each role: every curation model slot (``tools.contracts.roles``), as the
    settings' ``[models]`` table sets it, else at its default; the gate packages the settings
    name are loaded first, so their slots are among them."""
    from agents.gates import load_gate_packages
    from agents.workers import RoleModels

    load_gate_packages(settings.models.gate_packages)
    return RoleModels.of(settings.models.slot_values())


def curation_config(settings: Settings, concurrency: int | None = None) -> CurationConfig:
    """How runs curate, from the settings."""
    from agents.curation import CurationConfig
    from agents.evidence import ClipSpec
    from agents.workers import GenerationLimits

    gen = settings.generation
    return CurationConfig(
        policy=loop_policy(settings),
        models=role_models(settings),
        limits=GenerationLimits(
            min_paragraphs=gen.gold_min_paragraphs,
            max_paragraphs=gen.gold_max_paragraphs,
            min_cited_chunks=gen.min_cited_chunks_per_segment,
            max_cited_chunks=gen.max_cited_chunks_per_segment,
            generator_clip=ClipSpec(
                fps=gen.video_fps, max_height=gen.video_max_height, audio=gen.video_audio
            ),
        ),
        concurrency=concurrency or settings.curation.concurrency,
        offline=settings.curation.offline,
        ramp_s=settings.curation.ramp_s,
        provider_retry_rounds=settings.curation.provider_retry_rounds,
        provider_retry_delay_s=settings.curation.provider_retry_delay_s,
    )


def offline_models(latency_s: float = 0.0) -> Callable[[str], Model]:
    """Model id → the offline provider answering as that model (priced as it), holding each
    call ``latency_s`` seconds when asked to stand in for a latency-bound provider."""
    from tools.providers import LatencyModel, OfflineProvider

    provider = OfflineProvider()
    if latency_s <= 0:
        return provider.model
    return lambda model_id: LatencyModel(provider.model(model_id), latency_s)


def endpoint(settings: Settings, model_id: str) -> tuple[ProviderFamily, ModelEndpoint]:
    """How ``model_id`` is served: the settings' entry (or our default one), and its family."""
    configured = settings.providers.models.get(model_id)
    found = configured or default_endpoints().get(model_id) or ModelEndpoint()
    family = family_named(found.family) if found.family else family_of(model_id)
    if family is None:
        raise ConfigError(
            f"model {model_id!r}: its provider is not known from the id; set "
            f"providers.models.{model_id!r}.family ({', '.join(sorted(families()))}) in "
            "playlisteval.toml"
        )
    return family, found


def real_local_models(settings: Settings) -> list[str]:
    """The model ids the settings serve by the ``real-local`` family: real models run on this
    machine, keyless and free, that answer as themselves in offline runs too."""

    found = []
    for model_id in sorted(settings.providers.models):
        try:
            family, _found = endpoint(settings, model_id)
        except ConfigError:
            continue
        if is_real_local(family.name):
            found.append(model_id)
    return found


def price_overrides(settings: Settings) -> dict[str, dict[str, float]]:
    """The settings' price rows (``[budget.price_overrides]``) over a zero row for every real
    local model (:func:`real_local_models`): such a model costs nothing and is never refused as
    unpriced; a row written for it by hand still wins."""

    rows = free_price_rows(real_local_models(settings))
    rows.update(settings.budget.price_overrides)
    return rows


def key_env(settings: Settings, model_id: str) -> str:
    """The environment variable that holds ``model_id``'s API key."""
    family, found = endpoint(settings, model_id)
    return found.api_key_env or settings.providers.family(family.name).api_key_env


def _check_required(
    family: ProviderFamily, model_id: str, base_url: str | None, found: ModelEndpoint
) -> None:
    """ConfigError when a setting ``family`` cannot do without is unset for ``model_id``."""
    if "base_url" in family.requires and not base_url:
        raise ConfigError(
            f"model {model_id!r} ({family.name}) needs an endpoint: set "
            f"providers.models.{model_id!r}.base_url or "
            f"providers.{family.settings_key}.base_url (a vLLM server's …/v1)"
        )
    if "local_path" in family.requires and not found.local_path:
        raise ConfigError(
            f"model {model_id!r} ({family.name}) runs on this machine: set "
            f"providers.models.{model_id!r}.local_path to its model folder"
        )


def provider_config(
    settings: Settings, model_id: str, env: Mapping[str, str] | None = None
) -> ProviderConfig:
    """The live adapter configuration of one model id, its key read from the environment."""
    from tools.providers.base import ProviderConfig

    source = os.environ if env is None else env
    family, found = endpoint(settings, model_id)
    limits = settings.providers.family(family.name)
    key_name = found.api_key_env or limits.api_key_env
    key = source.get(key_name) or None
    if key is None and not family.keyless:
        raise ConfigError(
            f"model {model_id!r} ({family.name}) needs an API key: export {key_name}=… "
            "(or set curation.offline = true to rehearse with the offline provider)"
        )
    base_url = found.base_url or limits.base_url
    _check_required(family, model_id, base_url, found)
    return ProviderConfig(
        family=family.name,
        model_name=found.model_name or model_id,
        base_url=base_url,
        api_key=key,
        timeout_s=limits.timeout_s,
        video_fps=found.video_fps,
        frame_height=found.frame_height,
        # The provider's own per-request limit over the setting, as the budget plans it.
        max_frames=min(found.max_frames, family.max_frames or found.max_frames),
        inline_max_bytes=found.inline_max_bytes,
        media_resolution=found.media_resolution,
        context_cache=found.context_cache,
        cache_ttl_s=found.cache_ttl_s,
        local_path=found.local_path,
        device=found.device,
    )


def _token_rule(family: ProviderFamily, model_id: str) -> str | None:
    """The token rule ``model_id``'s calls are counted by, where its id alone would pick
    another (None: the id's prefix picks the family's): so the run facts of the models whose
    ids name their rule stay as they were, and old logs replay as recorded."""
    return None if provider_family(model_id) == family.token_rule else family.token_rule


SERVED_WINDOW_TIMEOUT_S = 10.0


def served_window(settings: Settings, model_id: str) -> int | None:
    """The context window the server of ``model_id`` reports for it (its family's
    ``served_windows``: a vLLM server's ``max_model_len``), or None when the family reports
    none, the server names no window for it, or it cannot be reached (logged: the run goes on
    without a window, as ``playlisteval doctor`` says)."""
    family, _found = endpoint(settings, model_id)
    if family.served_windows is None:
        return None
    # A model list answers at once or not at all: a hung server does not hold the run long.
    config = replace(provider_config(settings, model_id), timeout_s=SERVED_WINDOW_TIMEOUT_S)
    read = family.served_windows

    async def asked() -> dict[str, int]:
        return await read(config)

    def ask() -> dict[str, int]:
        return asyncio.run(asked())

    # The composition root is sync and may be called on an event loop: the one request goes
    # from a thread of its own.
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        windows = pool.submit(ask).result(timeout=SERVED_WINDOW_TIMEOUT_S + 1)
    except Exception as exc:  # a server down now is the doctor's to report, not a crash here
        log.warning(
            "context_window_unknown", model=model_id, url=config.base_url, error=str(exc)[:300]
        )
        return None
    finally:
        pool.shutdown(wait=False)
    return windows.get(config.model_name)


def traffic_for(
    settings: Settings, *, live: bool, engine: Engine | None = None
) -> Callable[[str], Traffic | None]:
    """Model id → how its calls travel: retries and one rate limiter per provider family (live
    only), its context cache lifetime, whether batch APIs may answer its text-only calls, the
    frames its adapter sends, the token rule its family counts by and the context window its
    requests are fitted to.

    With the store's ``engine`` the limiter is fleet-wide (:class:`SharedRateLimiter`: every
    process on that database together stays within the family's rpm/tpm, and a Retry-After
    one of them hears holds them all); without it, this process's own."""

    limiters: dict[str, Limiter] = {}
    known: dict[str, Traffic | None] = {}

    def traffic(model_id: str) -> Traffic | None:
        if model_id in known:
            return known[model_id]
        try:
            family, found = endpoint(settings, model_id)
        except ConfigError:
            known[model_id] = None
            return None
        limits = settings.providers.family(family.name)
        limiter = None
        if live:
            limiter = limiters.get(family.name)
            if limiter is None and engine is not None:
                limiter = limiters[family.name] = SharedRateLimiter(
                    engine,
                    family.name,
                    rpm=limits.rpm,
                    tpm=limits.tpm,
                    max_concurrency=limits.max_concurrency,
                )
            elif limiter is None:
                limiter = limiters[family.name] = RateLimiter(
                    rpm=limits.rpm, tpm=limits.tpm, max_concurrency=limits.max_concurrency
                )
        frames = family.video == "frames"
        result = Traffic(
            real_local=is_real_local(family.name),
            retry=RetryPolicy(
                max_retries=limits.max_retries if live else 0,
                backoff_s=limits.backoff_s,
                max_backoff_s=limits.max_backoff_s,
            ),
            limiter=limiter,
            cache_ttl_s=found.cache_ttl_s if family.context_cache and found.context_cache else None,
            batchable=family.batchable,
            frame_height=found.frame_height if frames else None,
            max_frames=min(found.max_frames, family.max_frames or found.max_frames)
            if frames
            else None,
            video_fps=found.video_fps if frames else None,
            min_frames_per_clip=family.min_frames_per_clip,
            token_rule=_token_rule(family, model_id),
            context_window=found.context_window
            or (served_window(settings, model_id) if live and frames else None),
            # Fixed frames are refused past every count cap a request has: the model's, the
            # family's frames (OpenAI's 500 images) and its pictures (DashScope's 250 Base64).
            max_fixed_frames=min(
                cap for cap in (found.max_frames, family.max_frames, family.max_pictures) if cap
            )
            if frames
            else None,
        )
        known[model_id] = result
        return result

    return traffic


def model_factory(
    settings: Settings, app: App | None = None, models: set[str] | None = None
) -> Callable[[str], Model]:
    """Model id → the pydantic-ai model that answers as it: the offline provider, or the live
    adapters of ``models`` (default: every curation role's; each key is checked up front).

    A model of the ``real-local`` family (:func:`real_local_models`) is served by itself in
    both modes: it is local, keyless and free, so an offline run has no reason to play it, and
    what it answers is a real model's (the recorder marks its calls so). Nothing is loaded
    until it is asked."""
    from tools.providers.registry import ProviderRegistry

    if settings.curation.offline:
        played = offline_models(settings.curation.offline_latency_s)
        real = set(real_local_models(settings))
        if not real:
            return played
        own = ProviderRegistry({m: provider_config(settings, m) for m in sorted(real)})
        return RealLocalFirst(own, played)
    wanted = models if models is not None else role_models(settings).all_models()
    configs = {m: provider_config(settings, m) for m in sorted(wanted)}
    resources = None
    if app is not None:
        from tools.providers.resources import EventResourceLedger

        resources = EventResourceLedger(app.events)
    return ProviderRegistry(configs, resources).model


@dataclass(frozen=True)
class RealLocalFirst:
    """Model id → the real local model when ``own`` serves it, else the offline provider's
    stand-in (an offline run with real local models configured)."""

    own: ProviderRegistry
    played: Callable[[str], Model]

    def __call__(self, model_id: str) -> Model:
        """The model that answers as ``model_id``."""
        if model_id in self.own.configs:
            return self.own.model(model_id)
        return self.played(model_id)


def secret_names(settings: Settings) -> list[str]:
    """Every environment variable the settings read keys from (scrubbed from logs and events)."""
    names = {settings.providers.family(name).api_key_env for name in families()}
    names |= {e.api_key_env for e in settings.providers.models.values() if e.api_key_env}
    names.add(settings.vectors.api_key_env)
    return sorted(names)


def secret_values_of(settings: Settings) -> list[str]:
    """The keys set in those variables (long enough to be worth scrubbing)."""
    values = (os.environ.get(name, "") for name in secret_names(settings))
    return [value for value in values if len(value) >= 6]


def _micros(usd: float | None) -> int | None:
    return None if usd is None else usd_to_micros(usd)


CAP_SETTINGS = {
    "curation run": "budget.cap_usd",
    "difficulty gate": "budget.pairs_usd",
    "evaluation": "budget.eval_usd",
}


def round_up_usd(micros: int) -> str:
    """A round figure above ``micros`` for a hint (0.61 USD → 1.00)."""
    usd = micros_to_usd(micros)
    step = 1.0 if usd >= 1 else 0.1
    return f"{(int(usd / step) + 1) * step:.2f}"


def check_judge_configured(settings: Settings, prices: PriceTable, judge: str) -> None:
    """ConfigError with the TOML to add to the workspace's settings file when an evaluation
    judge is not configured, before anything is spent: live, one with no provider or no price;
    offline (where the offline provider plays a judge at its price), one with no price, or one
    whose id names a model file on this machine (a ``.gguf``, a packaged model) that no family
    serves: such a model answers as itself, offline too, once the ``real-local`` table says
    where it is."""
    from playlisteval.judge_toml import judge_toml, local_judge_path

    local = local_judge_path(judge) is not None
    missing: list[str] = []
    try:
        endpoint(settings, judge)
    except ConfigError:
        if local or not settings.curation.offline:
            missing.append("no provider family serves it")
    try:
        prices.price(judge)
    except UnknownPriceError:
        if not local:  # a real-local model is priced at zero once it is served
            missing.append("no price is known for it")
    if missing:
        where = Path(settings.home) / SETTINGS_FILE
        what = (
            "the table that runs it on this machine (no endpoint, key or price)"
            if local
            else "its real endpoint, id and price"
        )
        raise ConfigError(
            f"judge {judge!r} is not configured ({' and '.join(missing)}): add to {where} "
            f"{what}:\n\n{judge_toml(judge)}"
        )


@dataclass(frozen=True)
class EvaluationParts:
    """What an evaluation is run with, composed by :meth:`App.evaluation`: the call
    dependencies (the judges' models, the one price table, how calls travel, the campaign's
    accounts), the live adapters to release afterwards, the retrievers, how many judgments at
    once, whether the run is offline, the writer lease to take, and how the cap of the
    evaluation's stream is read (``(stream, --budget) → cap``: a paid evaluation without one is
    refused)."""

    deps: CallDeps
    live_models: Callable[[str], Model]
    retrievers: RetrieverSet
    concurrency: int
    offline: bool
    writer: Callable[[str, str], WriterLease]
    cap: Callable[[str, float | None], int | None]


@dataclass
class App(ClosesOnExit):
    """The parts of one workspace, opened lazily and closed together."""

    settings: Settings
    workspace: Workspace = field(init=False)
    _catalog: Catalog | None = field(default=None, init=False)
    _vectors: VectorIndex | None = field(default=None, init=False)
    _embedder: Embedder | None = field(default=None, init=False)
    _events: EventStore | None = field(default=None, init=False)
    _prices: PriceTable | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        try:
            self.workspace = Workspace(Path(self.settings.home)).create()
        except OSError as exc:
            full = disk_full(exc)
            if full is not None:
                raise full from exc
            # --home naming a file, or a file where the workspace keeps a folder (qdrant, media).
            raise ConfigError(
                f"cannot use {str(self.settings.home)!r} as a workspace: {exc.strerror or exc} "
                f"({str(exc.filename)!r}); --home must be a folder, and its qdrant, media and "
                "exports entries folders too"
            ) from exc

    @property
    def catalog(self) -> Catalog:
        """The catalogue: ``store.catalog_url`` when set, else the workspace's SQLite file."""
        if self._catalog is None:
            self._catalog = Catalog.open(
                self.settings.store.catalog_url or self.workspace.database,
                root=self.workspace.root,
            )
        return self._catalog

    @property
    def vectors(self) -> VectorIndex:
        """The vector index."""
        if self._vectors is None:
            self._vectors = open_vectors(self.settings, self.workspace)
        return self._vectors

    @property
    def embedder(self) -> Embedder:
        """The chunk embedder (loaded on first use)."""
        if self._embedder is None:
            self._embedder = build_embedder(self.settings)
        return self._embedder

    @property
    def events(self) -> EventStore:
        """The event log: PostgreSQL when configured, else the workspace's SQLite file."""
        if self._events is None:
            store = self.settings.store
            key = self.log_key()
            key_file = self.log_key_path()
            if store.url:
                self._events = open_event_store(
                    store.url, schema=store.schema_name, key=key, key_file=key_file
                )
            else:
                self._events = open_event_store(self.workspace.database, key=key, key_file=key_file)
        return self._events

    def log_key_path(self) -> Path:
        """Where the event log's chain key lives: ``store.key_file`` when set (a fleet's
        workers on PostgreSQL share one key file, kept away from the database), else
        ``log_key`` in the workspace."""
        configured = self.settings.store.key_file
        if configured is None:
            return self.workspace.root / LOG_KEY_FILE
        return self.workspace.root / configured.expanduser()  # an absolute path stays itself

    def log_key(self) -> bytes | None:
        """The event log's chain key, made on first use (see :mod:`store.eventstore`); None
        only in a read-only workspace that never had one (its log is read as it was chained)."""
        path = self.log_key_path()
        if not path.parent.is_dir():
            if not path.parent.is_relative_to(self.workspace.root):
                # A key kept outside the workspace is kept where its owner made room for it: no
                # folder is made for it (a typo would otherwise make folders anywhere, under /
                # too). One under the workspace gets its folder.
                raise ConfigError(
                    f"store.key_file {str(path)!r}: its folder {str(path.parent)!r} does not "
                    "exist; create it (readable by this user only) or fix the setting"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() and not os.access(path.parent, os.W_OK):
            return None
        return read_log_key(path, create=True)

    def queue(self) -> WorkQueue:
        """The shared work queue (in the event store's database)."""
        return WorkQueue(self.events.engine)

    def accounts(self) -> BudgetAccounts:
        """The shared budget accounts (in the event store's database)."""
        return BudgetAccounts(self.events.engine)

    def fleet_config(
        self, name: str | None = None, *, exit_when_idle: bool | None = None
    ) -> FleetConfig:
        """How this process takes part in the fleet, from ``[worker]`` and ``[budget]``."""
        from agents.fleet import FleetConfig, default_worker_name

        worker, budget = self.settings.worker, self.settings.budget
        return FleetConfig(
            owner=name or worker.name or default_worker_name(),
            lease_s=worker.lease_s,
            heartbeat_s=worker.heartbeat_s,
            poll_s=worker.poll_s,
            shutdown_grace_s=worker.shutdown_grace_s,
            exit_when_idle=worker.exit_when_idle if exit_when_idle is None else exit_when_idle,
            index_jobs=worker.index_jobs,
            per_seed_micros=_micros(budget.per_seed_usd),
            total_cap_micros=_micros(budget.cap_usd),
            day_cap_micros=_micros(budget.per_day_usd),
        )

    def leases(self) -> Leases:
        """The named leases (one writer per run) in the event store's database."""
        return Leases(self.events.engine)

    def writer(self, name: str, command: str, *, wait_s: float = 0.0) -> WriterLease:
        """Take lease ``name`` for this process (``command`` says what it does), renewed until
        released; :class:`~store.coordination.LeaseHeld` when another live process holds it.
        A lease taken over from a dead holder has that holder's campaign holds written off."""
        from agents.ownership import WriterLease

        held = WriterLease.acquire(
            self.leases(), name, command, lease_s=self.settings.worker.lease_s, wait_s=wait_s
        )
        if held.took_over is not None and self.campaign() is not None:
            self.accounts().write_off(name)
        return held

    def campaign(self) -> Campaign | None:
        """The campaign's shared accounts when this store has them (a daemon, a worker or
        ``enqueue`` made them from ``budget.cap_usd`` and ``budget.per_day_usd``): every paid
        call of every command then reserves in them too. None for a plain workspace."""
        accounts = self.accounts()
        if accounts.account(TOTAL_ACCOUNT) is None:
            return None
        budget = self.settings.budget
        return Campaign(
            accounts,
            total_cap_micros=cap_micros(budget.cap_usd, "budget.cap_usd"),
            day_cap_micros=cap_micros(budget.per_day_usd, "budget.per_day_usd"),
        )

    def set_budget_caps(self) -> None:
        """Make the shared accounts' caps those of the settings: ``budget.cap_usd`` for the
        campaign's total and ``budget.per_day_usd`` for today (unset: uncapped)."""
        budget = self.settings.budget
        accounts = self.accounts()
        accounts.set_cap(TOTAL_ACCOUNT, cap_micros(budget.cap_usd, "budget.cap_usd"))
        accounts.set_cap(day_account(), cap_micros(budget.per_day_usd, "budget.per_day_usd"))

    def fleet_worker(
        self,
        fleet: FleetConfig,
        *,
        concurrency: int | None = None,
        index_job: IndexJob | None = None,
        progress: CurationProgress | None = None,
    ) -> FleetWorker:
        """A worker of the fleet over this workspace's store, catalogue and providers."""
        from agents.fleet import FleetWorker

        return FleetWorker(
            self.call_deps(),
            config=curation_config(self.settings, concurrency),
            queue=self.queue(),
            accounts=self.accounts(),
            fleet=fleet,
            index_job=index_job,
            progress=progress,
        )

    def prices(self) -> PriceTable:
        """The workspace's one price table, built on first use: the packaged prices, the
        settings' price file and overrides, a real local model at zero
        (:func:`price_overrides`), and the offline judges at zero (they cost nothing, and a
        model with no price is refused). Every command of this workspace prices by it."""
        if self._prices is None:
            from agents.evaluation import OFFLINE_JUDGE_PRICES

            budget = self.settings.budget
            self._prices = PriceTable.load(
                overrides={**price_overrides(self.settings), **OFFLINE_JUDGE_PRICES},
                extra_file=budget.price_file,
            )
        return self._prices

    def needs_cap(self, cap: int | None, what: str) -> None:
        """A live command must have a cap: its own, or a capped campaign total it reserves in
        (``what``: a key of :data:`CAP_SETTINGS`)."""
        if cap is not None or self.settings.curation.offline:
            return
        campaign = self.campaign()
        if campaign is None or campaign.total_cap_micros is None:
            raise ConfigError(
                f"a live {what} needs a cap: pass --budget USD (or set {CAP_SETTINGS[what]}); "
                "every paid call reserves against it first"
            )

    def stream_cap(
        self, stream: str, budget_usd: float | None, setting: str, what: str
    ) -> int | None:
        """The cap a command's calls in ``stream`` (a pair selection's, an evaluation's) are
        made under: ``--budget`` when given (the stream's new total, refused below what it has
        spent), else the cap the stream was last given, else the setting ``setting``
        (``budget.…``)."""
        history = [s.event() for s in self.events.read_stream(stream)]
        spent = spend(history).spent_micros
        if budget_usd is not None:
            cap = cap_micros(budget_usd, "--budget")
            assert cap is not None
            if cap < spent:
                raise ConfigError(
                    f"the {what} has spent {micros_to_usd(spent):.4f} USD already; --budget is "
                    f"its total cap, so give at least that (e.g. --budget {round_up_usd(spent)})"
                )
            return cap
        if any(isinstance(e, CapSet) for e in history):
            return current_cap(history)
        name = setting.rsplit(".", 1)[-1]
        return cap_micros(getattr(self.settings.budget, name), setting)

    def evaluation(self, judges: Sequence[str]) -> EvaluationParts:
        """What an evaluation by ``judges`` is run with, composed from the settings: each live
        judge checked configured (an endpoint and a price: the TOML to add otherwise) before
        anything is written, the judges' models, the one price table, retrievers over the
        index (opened now: a missing index stops here), and how its cap is read."""
        from tools.evidence.retrieval import RetrieverSet
        from tools.providers.judges import OFFLINE_JUDGES, judge_models

        if not judges:
            raise ConfigError("name at least one judge: --judge offline-frames, --judge gpt-5.4, …")
        settings = self.settings
        prices = self.prices()
        live = [j for j in judges if j not in OFFLINE_JUDGES]
        # A real local model costs nothing: an evaluation of only such judges needs no cap.
        paid = tuple(j for j in live if j not in real_local_models(settings))
        for judge in live:
            check_judge_configured(settings, prices, judge)
        live_models = model_factory(settings, self, set(live))
        search = self.search()
        deps = self.call_deps(model_for=judge_models(live_models), prices=prices)

        def cap(stream: str, budget_usd: float | None) -> int | None:
            found = self.stream_cap(stream, budget_usd, "budget.eval_usd", "evaluation")
            if paid:
                self.needs_cap(found, "evaluation")
            return found

        return EvaluationParts(
            deps=deps,
            live_models=live_models,
            retrievers=RetrieverSet(self.catalog, lambda: search),
            concurrency=settings.curation.concurrency,
            offline=settings.curation.offline,
            writer=lambda name, command: self.writer(name, command),
            cap=cap,
        )

    def replayer(self) -> Replayer:
        """A replayer over the workspace's log: no live adapter is built, so a strict replay
        needs no key even where the settings say live; every model it could reach refuses to
        answer. Its config is today's (what ``--against-today`` runs under); a run's own
        replay builds from the run's recorded definition (:mod:`agents.run_spec`)."""
        from pydantic_ai.models.test import TestModel

        from agents.recorded import NoCallModel
        from agents.replay import Replayer

        def guard(model_id: str) -> Model:
            return NoCallModel(TestModel(custom_output_text=f"no call to {model_id}"))

        return Replayer(
            store=self.events,
            catalog=self.catalog,
            clips=self.clips(),
            model_for=guard,
            config=replace(curation_config(self.settings), offline=True),
            prices=self.prices(),
            traffic=traffic_for(self.settings, live=False),
        )

    def projections(self) -> Projections:
        """Read models over the log."""
        return Projections(self.events, self.events.engine)

    def curator(
        self,
        progress: CurationProgress | None = None,
        concurrency: int | None = None,
        sleep: Sleep | None = None,
    ) -> Curator:
        """The curation shell over this workspace (``sleep``: how retries wait; tests pass a
        clock of their own)."""
        from agents.curation import Curator

        deps = self.call_deps()
        return Curator(
            replace(deps, sleep=sleep) if sleep is not None else deps,
            config=curation_config(self.settings, concurrency),
            progress=progress,
        )

    def call_deps(
        self,
        model_for: Callable[[str], Model] | None = None,
        prices: PriceTable | None = None,
    ) -> CallDeps:
        """What this workspace's recorded model calls are made with: its store, catalogue and
        clips, the models (default: every curation role's, live or offline as the settings say),
        the prices, how calls travel, the secrets to scrub, the batch collector and the
        campaign's accounts. Built once per command and handed to whatever calls models."""
        from agents.deps import CallDeps

        offline = self.settings.curation.offline
        return CallDeps(
            store=self.events,
            catalog=self.catalog,
            clips=self.clips(),
            model_for=model_for or model_factory(self.settings, self),
            prices=prices or self.prices(),
            traffic=traffic_for(self.settings, live=not offline, engine=self.events.engine),
            secrets=secret_values_of(self.settings),
            batcher=self.batcher(),
            campaign=self.campaign(),
        )

    def batcher(self) -> Batcher | None:
        """The batch-job collector when live calls may go through batch APIs."""
        from agents.batching import Batcher

        if self.settings.curation.offline or not self.settings.providers.batch:
            return None
        return Batcher(
            window_s=self.settings.providers.batch_window_s,
            poll_s=self.settings.providers.batch_poll_s,
        )

    def ray_indexer(
        self, progress: IndexProgress | None = None, address: str | None = None
    ) -> RayIndexer:
        """The pipeline over this workspace with chunks computed on a Ray cluster (``address``,
        else ``index.ray_address``, else RAY_ADDRESS, else a local cluster started for it)."""
        from tools.index.ray_index import RayIndexer

        return RayIndexer(
            catalog=self.catalog,
            vectors=self.vectors,
            models=ray_models(self.settings),
            config=index_config(self.settings),
            media_dir=self.workspace.media,
            options=ray_options(self.settings, address),
            progress=progress,
        )

    def indexer(self, progress: IndexProgress | None = None) -> Indexer:
        """The pipeline over this workspace."""
        from tools.index.indexer import Indexer

        return Indexer(
            catalog=self.catalog,
            vectors=self.vectors,
            embedder=self.embedder,
            transcriber=build_transcriber(self.settings),
            config=index_config(self.settings),
            media_dir=self.workspace.media,
            progress=progress,
        )

    def search(self) -> ChunkSearch:
        """The agents' search tool."""
        from tools.evidence.search import ChunkSearch

        return ChunkSearch(
            self.vectors, self.embedder, index_config(self.settings).chunk_collection
        )

    def clips(self) -> ClipFetcher:
        """The agents' clip tool."""
        from tools.evidence.clips import ClipFetcher

        return ClipFetcher(self.catalog, self.workspace.clips)

    def close(self) -> None:
        """Close what was opened."""
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._vectors is not None:
            self._vectors.close()
            self._vectors = None
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None
