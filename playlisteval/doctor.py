"""``playlisteval doctor``: is this workspace ready to curate, and if not, what to do.

Checks, in the order a user should fix them: a price for every configured model (and a cache
storage price where context caching is on), the key of every provider a live run calls, every
endpoint reachable (a plain GET that carries no key: any HTTP answer means the network path
works), every configured model id listed by its provider's model-list call (live runs with the
key at hand), the local model files (a ``.gguf`` checked for GGUF's magic bytes), the device
each local model runs on (and a configured GPU that is absent), a Qdrant server the index lives
on, the seeds, the event log and its key (there, and readable by its owner alone). The
databases come first (:func:`database_checks`): SQLite's integrity check on every workspace
file, a connection to a PostgreSQL store; they run before anything opens the workspace, so a
corrupt file is diagnosed rather than failing the doctor itself.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from playlisteval.app import App, endpoint, key_env, provider_config, role_models
from playlisteval.settings import Settings
from playlisteval.workspace import Workspace
from policies.prices import UnknownPriceError
from store.errors import ConfigError, PlaylistEvalError
from tools.providers.base import ProviderConfig
from tools.providers.dashscope_model import FAMILY as DASHSCOPE_FAMILY
from tools.providers.dashscope_model import MAX_BASE64_IMAGES, video_route
from tools.providers.family import ListModels, ProviderFamily, ServedWindows
from tools.providers.specs.local_llm import is_real_local
from tools.runtime.devices import ctranslate2_cuda_count, resolve_device, torch_cuda_count
from tools.runtime.gguf_models import PACKAGED_MODELS, local_path_problem

PROBE_TIMEOUT_S = 5.0
DASHSCOPE = DASHSCOPE_FAMILY.name
CLOSEST_SHOWN = 10  # ids a provider lists shown next to a configured one it does not

Probe = Callable[[str], str | None]


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, whether it is fine, and what to do when it is not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def probe_url(url: str) -> str | None:
    """``None`` when ``url`` answers over HTTP at all (any status), else why it does not."""
    try:
        httpx.get(url, timeout=PROBE_TIMEOUT_S, follow_redirects=False)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return None


INTEGRITY_LINES = 3  # problems SQLite's integrity check reports, shown per file


def _sqlite_file(url: str | None, default: Path) -> Path | None:
    """The SQLite file a store setting names (``None`` for a server database)."""
    if url is None:
        return default
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///") :])
    return None if "://" in url else Path(url)


def sqlite_integrity(path: Path) -> Check:
    """SQLite's ``PRAGMA integrity_check`` on ``path``, opened read-only (nothing is written)."""
    name = f"database {path}"
    if not path.exists():
        return Check(name, True, "not created yet (the first command that needs it creates it)")
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.DatabaseError as exc:
        rows = [str(exc)]
    if rows == ["ok"]:
        return Check(name, True, "SQLite integrity check: ok")
    return Check(
        name,
        False,
        "SQLite integrity check: " + "; ".join(rows[:INTEGRITY_LINES]),
        "restore the file from a backup; or move it aside and `playlisteval add` + `index` "
        "rebuild the catalogue from the media (its event log is lost unless restored); for the "
        "log's own hash chain, `playlisteval store verify`",
    )


def server_reachable(url: str) -> Check:
    """A connection and ``SELECT 1`` to a server database (PostgreSQL)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    try:
        engine = create_engine(url)
    except Exception as exc:  # SQLAlchemy raises several types for a bad URL
        return Check("database server", False, f"{url!r}: {exc}", "fix store.url")
    shown = engine.url.render_as_string(hide_password=True)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        return Check(
            f"database {shown}",
            False,
            f"cannot connect: {str(reason).strip().splitlines()[0]}",
            "start the server (or fix store.url / store.catalog_url)",
        )
    finally:
        engine.dispose()
    return Check(f"database {shown}", True, "reachable (SELECT 1)")


def database_checks(settings: Settings) -> list[Check]:
    """Every database the workspace uses, checked without opening the workspace: an integrity
    check of each SQLite file, a connection to each server."""
    default = Workspace(settings.home).database
    checks: list[Check] = []
    seen: set[str] = set()
    for url in (settings.store.url, settings.store.catalog_url):
        path = _sqlite_file(url, default)
        where = str(path) if path is not None else str(url)
        if where in seen:
            continue
        seen.add(where)
        checks.append(sqlite_integrity(path) if path is not None else server_reachable(str(url)))
    return checks


def run_checks(app: App, probe: Probe = probe_url) -> list[Check]:
    """Every check, in the order a user should fix them."""
    checks: list[Check] = []
    settings = app.settings
    # The roles' models, the difficulty judges, and any model given an endpoint of its own
    # (an evaluation judge configured only for ``eval --judge``).
    models = sorted(
        role_models(settings).all_models()
        | set(settings.models.difficulty_judges)
        | set(settings.providers.models)
    )
    prices = app.prices()
    for model in models:
        try:
            price = prices.price(model)
        except UnknownPriceError as exc:
            checks.append(
                Check(
                    f"price of {model}",
                    False,
                    str(exc),
                    "add it under [budget.price_overrides] in playlisteval.toml",
                )
            )
            continue
        checks.append(
            Check(
                f"price of {model}",
                True,
                f"{price.input_per_mtok} / {price.output_per_mtok} USD per M tokens "
                f"in/out ({price.source})",
            )
        )
        try:
            family, found = endpoint(settings, model)
        except ConfigError:
            continue
        caching = family.context_cache and found.context_cache
        if caching and price.cache_storage_per_mtok_hour is None:
            checks.append(
                Check(
                    f"cache price of {model}",
                    False,
                    "context caching is on but no cache_storage_per_mtok_hour is known",
                    f"add cache_storage_per_mtok_hour for {model!r} under "
                    "[budget.price_overrides], or set its context_cache = false",
                )
            )
    checks += _provider_checks(app, models, probe)
    checks += _model_list_checks(settings, models)
    checks += device_checks(settings, models)
    vectors = vector_index_check(settings, probe)
    if vectors is not None:
        checks.append(vectors)
    try:
        seeds = len(app.catalog.seeds())
        checks.append(
            Check(
                "seeds",
                seeds > 0,
                f"{seeds} active seeds",
                "" if seeds else "run `playlisteval add …` then `playlisteval index`",
            )
        )
        app.events.last_seq()
        checks.append(Check("event log", True, settings.store.url or str(app.workspace.database)))
        checks.append(log_key_check(app.log_key_path()))
    except PlaylistEvalError as exc:
        checks.append(Check("workspace", False, str(exc), "check --home and store.url"))
    return checks


def log_key_check(key: Path) -> Check:
    """The event log's chain key: there, and readable by its owner alone (whoever reads it can
    write a log whose chain checks out)."""
    if not key.is_file():
        return Check(
            "log key",
            False,
            f"{key} is missing: the log cannot be extended or checked",
            "restore the key file the workspace was written with",
        )
    mode = stat.S_IMODE(key.stat().st_mode)
    if mode & 0o077:
        return Check(
            "log key",
            False,
            f"{key} may be read or written by other users (mode {mode:04o}): whoever reads it "
            "can forge the event log's chain",
            f"chmod 600 {key}",
        )
    return Check(
        "log key",
        True,
        f"{key}, mode {mode:04o} (the event log's chain is keyed with it; keep a copy away from "
        "the database, and publish anchors: docs/log-integrity.md)",
    )


def vector_index_check(settings: Settings, probe: Probe) -> Check | None:
    """A Qdrant server the settings index into (``vectors.backend = "qdrant-server"``) answers
    at its URL; None for the embedded backends, which live in the workspace."""
    vectors = settings.vectors
    if vectors.backend != "qdrant-server":
        return None
    fix = (
        "start the Qdrant server, or fix vectors.url in playlisteval.toml "
        '(vectors.backend = "qdrant-edge" keeps the index in the workspace)'
    )
    if not vectors.url:
        return Check("vector index", False, 'vectors.backend = "qdrant-server" but no url', fix)
    problem = probe(vectors.url)
    if problem is None:
        return Check("vector index", True, f"Qdrant server {vectors.url} reachable")
    return Check(
        "vector index", False, f"Qdrant server {vectors.url} is unreachable: {problem}", fix
    )


@dataclass(frozen=True)
class LocalModel:
    """A model that runs on this machine and the setting that says on which device."""

    what: str
    setting: str
    requested: str
    cuda_count: Callable[[], int] = torch_cuda_count
    fix: str = ""


def local_models(settings: Settings, models: list[str]) -> list[LocalModel]:
    """Every model the settings run on this machine: the chunk embedder, the ASR model of
    ``index.transcriber`` (or of ``local_transcriber`` under ``auto``) and each configured
    model served by ``providers.transformers``."""
    idx = settings.index
    index_fix = "set index.device = 'auto' (or 'cpu') in playlisteval.toml"
    found = [LocalModel(f"embedder {idx.embedder}", "index.device", idx.device, fix=index_fix)]
    asr = idx.local_transcriber if idx.transcriber == "auto" else idx.transcriber
    if asr == "faster-whisper":
        found.append(
            LocalModel(
                f"ASR faster-whisper {idx.whisper_model}",
                "index.device",
                idx.device,
                ctranslate2_cuda_count,
                index_fix,
            )
        )
    elif asr == "qwen3-asr":
        found.append(
            LocalModel(
                f"ASR qwen3-asr {idx.qwen_asr_model}", "index.device", idx.device, fix=index_fix
            )
        )
    for model in models:
        try:
            family, entry = endpoint(settings, model)
        except ConfigError:
            continue
        if family.local:
            setting = f"providers.models.{model!r}.device"
            found.append(
                LocalModel(f"judge {model}", setting, entry.device, fix=f"set {setting} = 'auto'")
            )
    return found


def device_checks(settings: Settings, models: list[str]) -> list[Check]:
    """The device each local model will run on, and a failing check where the configured one
    is not on this machine (the command that loads it would stop with the same message)."""
    checks: list[Check] = []
    for local in local_models(settings, models):
        name = f"device of {local.what}"
        try:
            choice = resolve_device(local.requested, local.setting, local.cuda_count)
        except ConfigError as exc:
            checks.append(Check(name, False, str(exc), local.fix))
            continue
        checks.append(Check(name, True, f"{choice.device} ({local.setting} = {choice.reason})"))
    return checks


def _local_model_check(model: str, family: str, path: str | None, offline: bool) -> Check:
    """Whether ``model``'s ``local_path`` names a model here. A ``real-local`` one may be a
    ``.gguf`` file, a folder or a packaged model (checked without joining or loading: the
    packaged parts are installed), and it is served in offline runs too, so offline does not
    excuse it; another local family's is a model folder, needed only live."""
    fix = f"set providers.models.{model!r}.local_path to its folder"
    if is_real_local(family):
        problem = local_path_problem(path) if path else "no local_path"
        fix = (
            f"set providers.models.{model!r}.local_path to a .gguf file, a model folder or a "
            f"packaged model ({', '.join(sorted(PACKAGED_MODELS))})"
        )
        return Check(
            f"local model of {model}",
            problem is None,
            f"{path} (a real local model, served offline too)" if problem is None else problem,
            "" if problem is None else fix,
        )
    ok = bool(path) and Path(path or "").is_dir()
    return Check(
        f"local model of {model}",
        ok or offline,
        f"{path or 'no local_path'}" + ("" if ok else " (not a folder here)"),
        "" if ok else fix,
    )


def _provider_checks(app: App, models: list[str], probe: Probe) -> list[Check]:
    settings = app.settings
    curation_models = role_models(settings).all_models()
    offline = settings.curation.offline
    checks: list[Check] = []
    keys: dict[str, list[str]] = {}
    urls: dict[str, list[str]] = {}
    for model in models:
        try:
            family, found = endpoint(settings, model)
        except ConfigError as exc:
            checks.append(Check(f"provider of {model}", False, str(exc), "see the message"))
            continue
        if family.local:
            checks.append(_local_model_check(model, family.name, found.local_path, offline))
            continue
        if not family.keyless:
            keys.setdefault(key_env(settings, model), []).append(model)
        limits = settings.providers.family(family.name)
        # The family's default endpoint (its SDK's own) when the settings name none.
        url = found.base_url or limits.base_url or family.default_endpoint
        if url is None:
            needed = model in curation_models and not offline
            checks.append(
                Check(
                    f"endpoint of {model}",
                    not needed,
                    "no base_url configured"
                    + ("" if needed else " (not needed now: only the difficulty gate uses it)"),
                    f"set providers.models.{model!r}.base_url to its vLLM server (…/v1)",
                )
            )
            continue
        urls.setdefault(url, []).append(model)
        if family.name == DASHSCOPE:
            checks.append(_video_route_check(model, url, found.video_fps, found.max_frames))
    for name, users in sorted(keys.items()):
        present = bool(os.environ.get(name))
        needed = not offline and any(m in curation_models for m in users)
        checks.append(
            Check(
                f"key {name}",
                present or not needed,
                ("set" if present else "missing")
                + f" (for {', '.join(users)})"
                + ("" if needed or present else "; not needed: curation.offline = true"),
                "" if present or not needed else f"export {name}=… before curating",
            )
        )
    for url, users in sorted(urls.items()):
        if offline:
            checks.append(Check(f"endpoint {url}", True, "not checked: curation.offline = true"))
            continue
        problem = probe(url)
        checks.append(
            Check(
                f"endpoint {url}",
                problem is None,
                f"reachable (for {', '.join(users)})" if problem is None else problem,
                ""
                if problem is None
                else "check the network, a proxy (HTTPS_PROXY) or the base_url in "
                "[providers.…] of playlisteval.toml",
            )
        )
    return checks


def _video_route_check(model: str, url: str, video_fps: float, max_frames: int) -> Check:
    """How DashScope's ``model`` is sent video at ``url``: as video files where the endpoint's
    region has DashScope's temporary storage (China (Beijing) only), else as Base64 frame lists
    (:func:`tools.providers.dashscope_model.video_route`), at what rate, and, off Beijing, the
    250 images a request past which a call is refused before it is sent."""
    route = video_route(url)
    detail = route.describe(video_fps, max_frames)
    if route.route == "frame-list" and max_frames > MAX_BASE64_IMAGES:
        detail += (
            f"; a request planning more than {MAX_BASE64_IMAGES} frames is refused before it "
            f"is sent: set providers.models.{model!r}.max_frames to at most "
            f"{MAX_BASE64_IMAGES}, or base_url to the Beijing endpoint "
            "https://dashscope.aliyuncs.com/api/v1"
        )
    return Check(f"video route of {model}", True, detail)


def _names(value: object) -> list[str]:
    """Every model id in a ``models.<role>`` value (an id, a list of ids, a list of pairs)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [name for item in value for name in _names(item)]
    return []


def _roles_of(settings: Settings, model: str) -> list[str]:
    """The ``models.<role>`` settings that name ``model``."""
    return [r for r, v in settings.models.model_dump().items() if model in _names(v)]


async def _listed(list_models: ListModels, config: ProviderConfig) -> list[str]:
    return await list_models(config)


async def _windows(read: ServedWindows, config: ProviderConfig) -> dict[str, int]:
    return await read(config)


def _window_checks(
    settings: Settings,
    family: ProviderFamily,
    config: ProviderConfig,
    where: str,
    users: list[str],
) -> list[Check]:
    """Each model's ``context_window`` setting against the window its server reports (vLLM's
    ``max_model_len``): a setting above it would plan requests the server refuses."""
    if family.served_windows is None:
        return []
    try:
        served = asyncio.run(_windows(family.served_windows, config))
    except Exception as exc:  # the listing's own check says the server is unreachable
        return [
            Check(
                f"context windows at {family.name}",
                False,
                f"reading the context windows at {where} failed: {type(exc).__name__}: {exc}",
                f"check the server at {where}",
            )
        ]
    checks: list[Check] = []
    for model in users:
        _family, found = endpoint(settings, model)
        sent = provider_config(settings, model).model_name
        window = served.get(sent)
        setting = found.context_window
        if window is None:
            detail = f"{where} reports no context window for {sent!r}"
            ok, fix = True, ""
            if setting is not None:
                detail += f"; requests are fitted to the setting's {setting:,} tokens"
        elif setting is None:
            ok, fix = True, ""
            detail = f"{window:,} tokens (max_model_len at {where}; read when a live run starts)"
        else:
            ok = setting <= window
            detail = f"setting {setting:,} tokens, server {window:,}"
            fix = (
                ""
                if ok
                else f'set providers.models."{model}".context_window = {window} (or unset it)'
            )
        checks.append(Check(f"context window of {model}", ok, detail, fix))
    return checks


def _model_list_checks(settings: Settings, models: list[str]) -> list[Check]:
    """Each configured model against what its provider lists: one model-list call per family
    and endpoint, on a live run only, and only where the key is at hand (or none is needed);
    a missing key or endpoint is the key and endpoint checks' finding, not this one's."""
    if settings.curation.offline:
        return []
    groups: dict[tuple[str, str], tuple[ProviderFamily, ProviderConfig, list[str]]] = {}
    for model in models:
        try:
            family, _found = endpoint(settings, model)
            if family.list_models is None or family.local:
                continue
            config = provider_config(settings, model)
        except ConfigError:
            continue
        url = config.base_url or family.default_endpoint or ""
        groups.setdefault((family.name, url), (family, config, []))[2].append(model)
    checks: list[Check] = []
    for (name, url), (family, config, users) in sorted(groups.items()):
        assert family.list_models is not None
        where = url or "its default endpoint"
        try:
            served = set(asyncio.run(_listed(family.list_models, config)))
        except Exception as exc:  # the provider's own error (auth, network): reported, not raised
            checks.append(
                Check(
                    f"models at {name}",
                    False,
                    f"listing the models at {where} failed (for {', '.join(users)}): "
                    f"{type(exc).__name__}: {exc}",
                    (
                        "check the server"
                        if family.keyless
                        else f"check {key_env(settings, users[0])}"
                    )
                    + f", the network and the base_url of [providers.{family.settings_key}]",
                )
            )
            continue
        checks += _window_checks(settings, family, config, where, users)
        for model in users:
            sent = provider_config(settings, model).model_name
            ok = sent in served
            detail = f"sent as {sent!r}"
            if ok:
                detail += f", listed at {where}"
            else:
                closest = difflib.get_close_matches(sent, sorted(served), CLOSEST_SHOWN, 0.0)
                detail += f": not listed at {where}; it lists " + (
                    ", ".join(closest) + (" …" if len(served) > len(closest) else "")
                    if closest
                    else "no models"
                )
            roles = " or ".join(f"models.{r}" for r in _roles_of(settings, model))
            checks.append(
                Check(
                    f"model {model} at {name}",
                    ok,
                    detail,
                    ""
                    if ok
                    else f"set {roles or 'the role'} to a model it serves, or "
                    f'providers.models."{model}".model_name to its id there',
                )
            )
    return checks
