"""Where local models run: ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` resolved against this machine.

One rule for every local model (the chunk embedder, the ASR backends, the open-weight judges of
``providers.transformers``): ``auto`` is the first CUDA GPU when there is one and the CPU
otherwise; asking for a GPU that is not there is a :class:`~store.errors.ConfigError` naming the
setting, never a silent run on the CPU (an 8B embedder on the CPU would take weeks over a
playlist, and nobody would know why). torch and CTranslate2 count GPUs separately (a CPU build of
torch beside a CUDA build of CTranslate2 is common), so each resolver takes the count of the
library that will run the model.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from store.errors import ConfigError

__all__ = [
    "DeviceChoice",
    "ctranslate2_cuda_count",
    "device_slot",
    "model_devices",
    "resolve_device",
    "resolve_torch_dtype",
    "torch_cuda_count",
    "whisper_compute_type",
]

TorchDtype = Literal["float32", "bfloat16", "float16"]
_CUDA = re.compile(r"^cuda(?::(\d+))?$")
DEVICE_HELP = "'auto' (a CUDA GPU when present, else the CPU), 'cpu', 'cuda' or 'cuda:N'"


def torch_cuda_count() -> int:
    """How many CUDA GPUs torch can use here (0 with a CPU build of torch)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def ctranslate2_cuda_count() -> int:
    """How many CUDA GPUs CTranslate2 (faster-whisper's engine) can use here."""
    try:
        import ctranslate2
    except ImportError:
        return 0
    return int(ctranslate2.get_cuda_device_count())


@dataclass(frozen=True)
class DeviceChoice:
    """A requested device resolved: what runs the model, and why (for ``doctor`` and logs)."""

    requested: str
    device: str  # "cpu" or "cuda:N"
    reason: str

    @property
    def is_cuda(self) -> bool:
        """Whether the model runs on a GPU."""
        return self.device.startswith("cuda")

    @property
    def index(self) -> int:
        """The GPU's index (0 on the CPU), for libraries that take it apart (CTranslate2)."""
        return int(self.device.split(":", 1)[1]) if self.is_cuda else 0


def resolve_device(
    requested: str, setting: str, cuda_count: Callable[[], int] = torch_cuda_count
) -> DeviceChoice:
    """Resolve ``requested`` (the value of the setting called ``setting``) to a device here.

    ``auto`` picks ``cuda:0`` when ``cuda_count()`` is positive and ``cpu`` otherwise;
    ``cuda``/``cuda:N`` with no such GPU, or anything else, is a ConfigError naming ``setting``.
    """
    value = str(requested).strip().lower()
    if value == "cpu":
        return DeviceChoice(requested, "cpu", "asked for the CPU")
    if value == "auto":
        count = cuda_count()
        if count:
            return DeviceChoice(requested, "cuda:0", f"auto: {count} CUDA GPU(s) here")
        return DeviceChoice(requested, "cpu", "auto: no CUDA GPU here")
    match = _CUDA.match(value)
    if match is None:
        raise ConfigError(f"{setting} = {requested!r} is not a device: use {DEVICE_HELP}")
    index = int(match.group(1) or 0)
    count = cuda_count()
    if count == 0:
        raise ConfigError(
            f"{setting} = {requested!r} asks for a CUDA GPU, but this machine has none that the "
            f"model's library can use; set {setting} = 'auto' (or 'cpu') to run on the CPU, or "
            "install a CUDA build of it on a GPU machine"
        )
    if index >= count:
        raise ConfigError(
            f"{setting} = {requested!r} asks for GPU {index}, but this machine has {count} "
            f"(cuda:0 to cuda:{count - 1}); pick one of them or 'auto'"
        )
    return DeviceChoice(requested, f"cuda:{index}", f"asked for GPU {index} of {count}")


def resolve_torch_dtype(requested: str, choice: DeviceChoice, setting: str) -> TorchDtype:
    """The torch dtype for ``requested``: ``auto`` is bfloat16 on a GPU, float32 on the CPU
    (half precision on a CPU is slower than float32 in most torch kernels)."""
    value = str(requested).strip().lower()
    if value == "auto":
        return "bfloat16" if choice.is_cuda else "float32"
    if value in ("float32", "bfloat16", "float16"):
        return value  # type: ignore[return-value]  # narrowed by the membership test
    raise ConfigError(
        f"{setting} = {requested!r} is not a dtype: use 'auto', 'float32', 'bfloat16' or 'float16'"
    )


def whisper_compute_type(requested: str, choice: DeviceChoice, setting: str) -> str:
    """CTranslate2's compute type for ``requested``: ``auto`` is int8 on the CPU (what
    faster-whisper's README runs there) and float16 on a GPU; a torch dtype name passes as is."""
    value = str(requested).strip().lower()
    if value == "auto":
        return "float16" if choice.is_cuda else "int8"
    if value in ("float32", "bfloat16", "float16", "int8", "int8_float32", "int8_float16"):
        return value
    raise ConfigError(
        f"{setting} = {requested!r} is not a CTranslate2 compute type: use 'auto', 'int8', "
        "'float32', 'float16' or 'bfloat16'"
    )


# -- one model call per device -------------------------------------------------------------------

_SLOTS: dict[str, threading.Lock] = {}
_SLOTS_GUARD = threading.Lock()


def model_devices(model: Any) -> list[str]:
    """The devices a model object runs on (its ``device``, and its fallback's for a backend
    that falls back to another, as ``auto`` transcription does); none for one that runs
    nowhere here (captions, a remote API)."""
    found: list[str] = []
    device = getattr(model, "device", None)
    if device is not None:
        found.append(str(device))
    fallback = getattr(model, "fallback", None)
    if fallback is not None and fallback is not model:
        found.extend(d for d in model_devices(fallback) if d not in found)
    return sorted(found)


@contextmanager
def device_slot(*models: Any) -> Iterator[None]:
    """Hold the devices ``models`` run on for one model call, so two index jobs in one process
    (a fleet worker runs several in threads) never run a model on the same device at once:
    eight copies of an 8B embedder's activations on one GPU would not fit, and on the CPU
    they only take turns anyway. Devices are taken in sorted order (no deadlock)."""
    devices = sorted({d for model in models for d in model_devices(model)})
    with _SLOTS_GUARD:
        locks = [_SLOTS.setdefault(device, threading.Lock()) for device in devices]
    with ExitStack() as held:
        for lock in locks:
            held.enter_context(lock)
        yield
