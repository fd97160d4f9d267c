"""``bench/gpu_index.py`` runs its real code on the CPU with tiny configurations (``--dry-run``),
so a GPU run does not fail on a typo; without a CUDA device and without ``--dry-run`` it stops at
once with one line saying why."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tools.offline.synthetic import espeak_available

BENCH = Path(__file__).resolve().parent.parent / "bench" / "gpu_index.py"


def gpu_index() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_index", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_index"] = module  # as importlib's recipe has it (cloudpickle looks it up)
    spec.loader.exec_module(module)
    return module


def test_without_a_cuda_device_it_stops_at_once_saying_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        gpu_index().main(["--workdir", str(tmp_path)])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("gpu_index: --device = 'cuda' asks for a CUDA GPU")
    assert "--dry-run" in err[0]
    assert not any(tmp_path.iterdir())  # nothing built or generated first


def test_the_full_size_configurations_build_the_published_architectures() -> None:
    """Built on the meta device (no memory, no weights): Qwen3-VL-8B without its LM head has
    8.15 B parameters (8.77 B with it), Qwen3-ASR-1.7B with its audio encoder about 2.0 B."""
    import torch
    from qwen_asr.core.transformers_backend import (
        Qwen3ASRConfig,
        Qwen3ASRForConditionalGeneration,
    )
    from transformers import Qwen3VLConfig

    from tools.index.embeddings import embedding_model_class

    module = gpu_index()
    with torch.device("meta"):
        embedder = embedding_model_class()(Qwen3VLConfig(**module.QWEN3_VL_8B))
        asr = Qwen3ASRForConditionalGeneration(Qwen3ASRConfig(thinker_config=module.QWEN3_ASR_1_7B))
    assert module.parameters(embedder) == pytest.approx(8.14, abs=0.02)
    assert module.parameters(asr) == pytest.approx(2.04, abs=0.02)


@pytest.mark.slow
@pytest.mark.skipif(not espeak_available(), reason="espeak-ng narrates the playlist")
def test_a_dry_run_indexes_a_narrated_video_through_both_models_and_prints_its_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = gpu_index().main(["--dry-run", "--workdir", str(tmp_path), "--batch", "2"])
    out = capsys.readouterr().out
    assert figures["chunks"] == 2  # one minute of video
    assert figures["chunks_per_s"] > 0
    assert figures["hours_indexed_per_hour"] > 0
    assert "embedder: Qwen3-VL-Embedding" in out
    assert "ASR: Qwen3-ASR" in out
    assert "chunks/s" in out
    assert "hours of video indexed per hour" in out
