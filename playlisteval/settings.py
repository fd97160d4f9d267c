"""One settings object for the whole system.

Every number of the paper (``../shared/DESIGN.md``) is a default here. Values come, in rising
priority, from these defaults, the workspace's ``playlisteval.toml``, and ``PLAYLISTEVAL_*``
environment variables (nested fields with ``__``: ``PLAYLISTEVAL_INDEX__CHUNK_SECONDS=20``).
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

SETTINGS_FILE = "playlisteval.toml"


def default_home() -> Path:
    """Workspace used without ``--home``: ``$PLAYLISTEVAL_HOME``, else ``~/.playlisteval``."""
    env = os.environ.get("PLAYLISTEVAL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".playlisteval"


class IngestSettings(BaseModel):
    """Taking playlists in."""

    max_height: int = Field(720, description="Highest video resolution downloaded (p).")
    target_hours: float | None = Field(
        None, description="Per-domain target: trim or extend each domain to about this many hours."
    )
    allowed_roots: list[Path] = Field(
        default_factory=list,
        description="Folders a manifest may point into (besides the manifest's own folder).",
    )
    download_subtitles: bool = True
    subtitle_langs: list[str] = Field(default_factory=lambda: ["en", "en-US", "en-GB"])


class IndexSettings(BaseModel):
    """Chunks, segments, frames, transcripts and embeddings (paper: Automatic Indexing)."""

    chunk_seconds: float = Field(30.0, gt=0, description="Length of one chunk.")
    segment_min_minutes: float = Field(10.0, gt=0, description="Shortest segment.")
    segment_max_minutes: float = Field(30.0, gt=0, description="Longest segment.")
    segment_target_minutes: float = Field(20.0, gt=0, description="Preferred segment length.")
    frame_fps: float = Field(0.5, gt=0, description="Frames sampled per second for embeddings.")
    frame_max_height: int = Field(720, gt=0, description="Frames are scaled down to this height.")
    audio_rate: int = Field(16_000, description="Sample rate of per-chunk audio (mono).")
    transcriber: Literal["auto", "captions", "faster-whisper", "qwen3-asr", "dashscope", "none"] = (
        Field("auto", description="auto: captions when present, else `local_transcriber`.")
    )
    local_transcriber: Literal["faster-whisper", "qwen3-asr", "dashscope", "none"] = "none"
    whisper_model_dir: Path | None = Field(None, description="A CTranslate2 Whisper model folder.")
    qwen_asr_model: str = "Qwen/Qwen3-ASR-1.7B"
    embedder: Literal["minilm-text+frame-stats", "qwen3-vl-embedding"] = "minilm-text+frame-stats"
    qwen_embedding_model: str = "Qwen/Qwen3-VL-Embedding-8B"
    embed_batch_size: int = 32

    @model_validator(mode="after")
    def _segments_ordered(self) -> IndexSettings:
        lo, mid, hi = (
            self.segment_min_minutes,
            self.segment_target_minutes,
            self.segment_max_minutes,
        )
        if not lo <= mid <= hi:
            raise ValueError(
                f"segment lengths must satisfy min <= target <= max, got {lo!r}, {mid!r}, {hi!r}"
            )
        return self


class VectorSettings(BaseModel):
    """Where chunk and segment vectors live."""

    backend: Literal["qdrant-edge", "qdrant-local", "qdrant-server"] = "qdrant-edge"
    url: str | None = Field(None, description="Qdrant server URL (backend qdrant-server).")
    api_key_env: str = Field("QDRANT_API_KEY", description="Env var holding the server's key.")
    collection_prefix: str = "playlisteval"


class SeedSettings(BaseModel):
    """Near-duplicates and seed pairs."""

    duplicate_cosine: float = Field(0.95, description="Segments above this are near-duplicates.")
    seed_min_cosine: float = Field(0.40, description="Seed pairs: lowest segment cosine.")
    seed_max_cosine: float = Field(0.90, description="Seed pairs: highest segment cosine.")


class GenerationSettings(BaseModel):
    """Phase I and II (paper 3.1–3.3)."""

    video_fps: float = 0.5
    video_max_height: int = 720
    video_audio: bool = True
    gold_min_paragraphs: int = 3
    gold_max_paragraphs: int = 5
    min_cited_chunks_per_segment: int = 2
    max_cited_chunks_per_segment: int = 15
    distractors: int = 4
    gold_rating: int = 5
    max_attempts: int = Field(6, description="T: attempts per seed and phase before discarding.")
    phase2_regenerations: int = Field(2, description="Distractor-only retries after a rejection.")
    phase2_rejections_before_restart: int = 3


class ModelRoles(BaseModel):
    """Default model per role (DESIGN.md); ids are strings priced by the price table."""

    phase1_generator: str = "gemini-3-flash"
    phase2_generator: str = "gemini-3-flash"
    transcript_answerer: str = "gemini-3-flash"
    transcript_matcher: str = "gpt-5.4-mini"
    parametric_pairs: list[tuple[str, str]] = Field(
        default_factory=lambda: [("gemini-3-flash", "gpt-5.4"), ("gpt-5.4-mini", "gemini-3.1-pro")]
    )
    sufficiency: str = "qwen-3.7-plus"
    textual_undetectability: list[str] = Field(
        default_factory=lambda: ["gemini-3.1-pro", "gpt-5.4"]
    )
    visual_detectability: str = "qwen-3.7-plus"
    difficulty_judges: list[str] = Field(
        default_factory=lambda: ["qwen3-vl-30b-a3b", "internvl3.5-8b"]
    )


class PairSettings(BaseModel):
    """Pair selection and human validation (paper 3.3, Appendix)."""

    pairs_per_domain: int = 90
    human_sample: int = 152
    sample_seed: int = 0


class BudgetSettings(BaseModel):
    """Money bounds (the paper: 352 USD for 327 accepted questions)."""

    cap_usd: float | None = Field(None, description="Default cap of a run (--budget wins).")
    per_seed_usd: float | None = Field(None, description="Optional cap per seed.")
    price_overrides: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per model: input_per_mtok, output_per_mtok, cached_input_per_mtok, … (USD).",
    )
    price_file: Path | None = Field(None, description="Another TOML price table, over ours.")


class StoreSettings(BaseModel):
    """Where the event log lives."""

    url: str | None = Field(
        None,
        description="postgresql+psycopg://USER@HOST:PORT/DB for a shared store; "
        "default: the workspace's SQLite file.",
    )


ProviderFamily = Literal["gemini", "openai", "dashscope", "openai-compatible", "transformers"]


class ProviderLimits(BaseModel):
    """How one provider family is reached and how hard it may be pushed."""

    base_url: str | None = Field(None, description="Endpoint override (a proxy, vLLM, a fake).")
    api_key_env: str = Field("", description="Environment variable holding the API key.")
    timeout_s: float = Field(600.0, gt=0, description="One HTTP attempt's limit.")
    max_retries: int = Field(6, ge=0, description="Retries of 429, 5xx, timeouts, bad bodies.")
    backoff_s: float = Field(2.0, gt=0, description="First retry wait; doubles each retry.")
    max_backoff_s: float = Field(120.0, gt=0, description="Longest wait between retries.")
    rpm: int | None = Field(None, gt=0, description="Requests per minute (None: no limit).")
    tpm: int | None = Field(None, gt=0, description="Input tokens per minute (None: no limit).")
    max_concurrency: int = Field(16, ge=1, description="Requests in flight at once.")


class ModelEndpoint(BaseModel):
    """How one model id is served (anything unset comes from its family)."""

    family: ProviderFamily | None = Field(None, description="Default: from the id's prefix.")
    model_name: str | None = Field(None, description="The provider's id (default: ours).")
    base_url: str | None = None
    api_key_env: str | None = None
    video_fps: float = Field(0.5, gt=0)
    frame_height: int = Field(
        480,
        gt=0,
        description="Height of the frames sent to frame-based providers (OpenAI, DashScope, "
        "open-weight judges); Gemini gets the clip itself (720p).",
    )
    max_frames: int = Field(
        512,
        ge=1,
        description="Frames per request at most; more are thinned uniformly over the clips.",
    )
    inline_max_bytes: int = Field(20 * 1024 * 1024, ge=0, description="Gemini inline limit.")
    context_cache: bool = Field(True, description="Gemini: cache a seed's videos explicitly.")
    cache_ttl_s: int = Field(600, ge=60, description="Gemini: context cache lifetime (paid).")
    local_path: str | None = Field(None, description="transformers: a local model folder.")
    device: str = "auto"


def default_endpoints() -> dict[str, ModelEndpoint]:
    """Where the DESIGN.md models that are not named after their provider are served."""
    return {
        "qwen-3.7-plus": ModelEndpoint(family="dashscope", model_name="qwen3.7-plus"),
        "qwen3-vl-30b-a3b": ModelEndpoint(
            family="openai-compatible", model_name="Qwen/Qwen3-VL-30B-A3B-Instruct"
        ),
        "internvl3.5-8b": ModelEndpoint(
            family="openai-compatible", model_name="OpenGVLab/InternVL3_5-8B"
        ),
    }


class GeminiLimits(ProviderLimits):
    """Gemini (google-genai)."""

    api_key_env: str = "GEMINI_API_KEY"
    rpm: int | None = Field(1000, gt=0)


class OpenAILimits(ProviderLimits):
    """OpenAI (Responses API)."""

    api_key_env: str = "OPENAI_API_KEY"
    rpm: int | None = Field(500, gt=0)


class DashScopeLimits(ProviderLimits):
    """DashScope (Qwen, native multimodal API)."""

    api_key_env: str = "DASHSCOPE_API_KEY"
    base_url: str | None = "https://dashscope-intl.aliyuncs.com/api/v1"
    rpm: int | None = Field(600, gt=0)


class OpenWeightLimits(ProviderLimits):
    """Any OpenAI-compatible endpoint (vLLM serving the open-weight judges)."""

    api_key_env: str = "OPENWEIGHT_API_KEY"


class TransformersLimits(ProviderLimits):
    """Local transformers on this machine's GPU."""

    api_key_env: str = "HF_TOKEN"
    max_concurrency: int = Field(1, ge=1)


class ProviderSettings(BaseModel):
    """Live providers: one block per family, and per-model endpoints."""

    gemini: GeminiLimits = Field(default_factory=GeminiLimits)
    openai: OpenAILimits = Field(default_factory=OpenAILimits)
    dashscope: DashScopeLimits = Field(default_factory=DashScopeLimits)
    openai_compatible: OpenWeightLimits = Field(default_factory=OpenWeightLimits)
    transformers: TransformersLimits = Field(default_factory=TransformersLimits)
    models: dict[str, ModelEndpoint] = Field(default_factory=default_endpoints)
    batch: bool = Field(
        False, description="Send text-only gate calls through the Gemini and OpenAI batch APIs."
    )
    batch_window_s: float = Field(
        30.0, ge=0, description="Calls arriving within this many seconds share one batch job."
    )
    batch_poll_s: float = Field(60.0, gt=0, description="First wait between batch status checks.")

    def family(self, name: ProviderFamily) -> ProviderLimits:
        """The block of one family."""
        limits: ProviderLimits = getattr(self, name.replace("-", "_"))
        return limits


class CurationSettings(BaseModel):
    """How a curation run executes."""

    concurrency: int = Field(8, ge=1, description="Seeds in flight at once.")
    offline: bool = Field(
        True, description="Answer every role with the offline provider (no key, no network)."
    )
    max_seeds: int | None = Field(None, description="Curate at most this many seeds per run.")
    ramp_s: float = Field(
        0.0, ge=0, description="Spread the first wave of seeds over this many seconds."
    )
    provider_retry_rounds: int = Field(
        1, ge=0, description="More tries, in the same run, for seeds a provider failure parked."
    )
    provider_retry_delay_s: float = Field(
        60.0, ge=0, description="Pause before each such round (an outage often passes)."
    )


class Settings(BaseSettings):
    """Everything configurable. Build with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="PLAYLISTEVAL_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    home: Path = Field(default_factory=default_home)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    vectors: VectorSettings = Field(default_factory=VectorSettings)
    seeds: SeedSettings = Field(default_factory=SeedSettings)
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    models: ModelRoles = Field(default_factory=ModelRoles)
    pairs: PairSettings = Field(default_factory=PairSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    curation: CurationSettings = Field(default_factory=CurationSettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _TOML_FILE.get()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file is not None and toml_file.is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)


# The TOML file depends on --home, which is itself a setting: load_settings passes it through here.
_TOML_FILE: ContextVar[Path | None] = ContextVar("playlisteval_toml_file", default=None)


def load_settings(home: Path | str | None = None, **overrides: Any) -> Settings:
    """Settings for the workspace ``home`` (default :func:`default_home`).

    ``overrides`` win over the environment and the workspace's ``playlisteval.toml``.
    """
    resolved = Path(home or default_home()).expanduser().resolve()
    token = _TOML_FILE.set(resolved / SETTINGS_FILE)
    try:
        return Settings(home=resolved, **overrides)
    finally:
        _TOML_FILE.reset(token)
