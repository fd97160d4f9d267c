"""Indexing on a GPU with the index models of the paper at full size (Qwen3-VL-Embedding-8B and
Qwen3-ASR-1.7B).

For a machine with a CUDA GPU (not run in CI). Both architectures are built here from their
published configurations (written out below; nothing is downloaded), with random weights unless
``--embedding-model`` / ``--asr-model`` name checkpoint folders, in bfloat16 on the GPU. Random
weights cost what trained ones cost per token; the ASR writes ``--asr-tokens`` tokens per chunk
(what 30 s of speech takes, about 75 words) since random weights never stop on their own. A
generated playlist of narrated 720p video without captions (``bench/throughput.py``) then goes
through the real pipeline (``tools.index.indexer.Indexer``: frames and audio decoded in CPU threads
ahead of the models, batched embedding and ASR, Qdrant, SQLite), printing as it goes: each
video's chunks/s, the GPU's memory, and at the end chunks/s and hours of video indexed per hour.

Run: ``python bench/gpu_index.py [--minutes 60] [--batch 16] [--device cuda]`` (under 5 minutes
on one H100/H200-class GPU for the default hour of video). ``--dry-run`` runs the same code on
the CPU with tiny configurations and a one-minute playlist (the test suite does), so a GPU run
does not fail on a typo; without ``--dry-run`` and without a CUDA device it stops at once.

``--ray [ADDRESS]`` runs the same models as Ray Data actors instead (``tools.index.ray_index``): one
ASR and one embedding replica per GPU of the cluster (each takes half a GPU), built inside the
actors, with decode tasks feeding them; a local cluster is started when no address is given.
With ``--dry-run`` the actors run the tiny models on CPUs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Qwen3-VL-8B (the base of Qwen3-VL-Embedding-8B) as its config.json has it.
QWEN3_VL_8B: dict[str, Any] = {
    "text_config": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 262144,
        "rope_theta": 5000000.0,
        "rope_scaling": {
            "rope_type": "default",
            "mrope_section": [24, 20, 20],
            "mrope_interleaved": True,
        },
    },
    "vision_config": {
        "depth": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_heads": 16,
        "out_hidden_size": 4096,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "deepstack_visual_indexes": [8, 16, 24],
        "num_position_embeddings": 2304,
    },
}
# Qwen3-ASR-1.7B: its AuT audio encoder and the Qwen3-1.7B decoder, as its config.json has them.
QWEN3_ASR_1_7B: dict[str, Any] = {
    "audio_config": {
        "num_mel_bins": 128,
        "encoder_layers": 24,
        "encoder_attention_heads": 16,
        "encoder_ffn_dim": 4096,
        "d_model": 1024,
        "output_dim": 2048,
        "downsample_hidden_size": 480,
        "n_window": 50,
        "n_window_infer": 800,
    },
    "text_config": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "tie_word_embeddings": True,
        "rope_theta": 1000000.0,
        "rope_scaling": {
            "rope_type": "default",
            "mrope_section": [24, 20, 20],
            "interleaved": True,
        },
    },
}
# The tiny stand-ins of --dry-run (the test suite's tiny configurations).
TINY_VL: dict[str, Any] = {
    "text_config": {
        "vocab_size": 2000,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "rope_scaling": {
            "rope_type": "default",
            "mrope_section": [8, 4, 4],
            "mrope_interleaved": True,
        },
    },
    "vision_config": {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": 64,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "deepstack_visual_indexes": [0],
        "num_position_embeddings": 64,
    },
}
TINY_ASR: dict[str, Any] = {
    "audio_config": {
        "num_mel_bins": 128,
        "encoder_layers": 1,
        "encoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "d_model": 32,
        "output_dim": 64,
        "downsample_hidden_size": 8,
        "n_window": 50,
        "n_window_infer": 800,
    },
    "text_config": {
        "vocab_size": 2000,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "rope_scaling": {"rope_type": "default", "mrope_section": [8, 4, 4], "interleaved": True},
    },
}
SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_pad|>",
    "<asr_text>",
]
# Qwen3-ASR's chat format, cut down to what a transcription request sends.
ASR_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message.role }}{{ '\\n' }}"
    "{% if message.content is string %}{{ message.content }}{% else %}"
    "{% for item in message.content %}{% if item.type == 'audio' %}"
    "<|audio_start|><|audio_pad|><|audio_end|>{% elif item.type == 'text' %}{{ item.text }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
)


def fail(message: str) -> NoReturn:
    """One line saying what is wrong, exit status 2."""
    print(f"gpu_index: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def tokenizer(vocab_size: int) -> Any:
    """A byte-level BPE tokenizer with Qwen's special tokens (the real vocabulary is not here;
    sequence lengths, which set the cost, come out close: it is trained on the narration)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    from tools.offline.synthetic import DOMAINS

    corpus = " ".join(s for d in DOMAINS.values() for s in d.general) + " system user assistant"
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        [corpus] * 10,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=SPECIAL,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    return Qwen2TokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        extra_special_tokens={
            "audio_token": "<|audio_pad|>",
            "audio_bos_token": "<|audio_start|>",
            "audio_eos_token": "<|audio_end|>",
        },
    )


def build_embedder(
    spec: dict[str, Any], folder: str | None, device: str, dtype: str, batch: int
) -> Any:
    """Qwen3-VL-Embedding from ``folder``, else the architecture of ``spec`` with random weights."""
    import torch
    from transformers import Qwen2VLImageProcessor, Qwen3VLConfig

    from tools.index.embeddings import Qwen3VLEmbedder, embedding_model_class, make_embedder

    if folder:
        return make_embedder(
            "qwen3-vl-embedding", model=folder, device=device, dtype=dtype, batch_size=batch
        )
    words = tokenizer(1000)
    ids = {token: words.convert_tokens_to_ids(token) for token in SPECIAL}
    config = Qwen3VLConfig(
        **spec,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    with torch.device(device):
        torch.manual_seed(0)
        model = embedding_model_class()(config).to(getattr(torch, dtype)).eval()
    images = Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2)
    return Qwen3VLEmbedder.from_parts(model, words, images, batch_size=batch)


def build_transcriber(
    spec: dict[str, Any], folder: str | None, device: str, dtype: str, batch: int, tokens: int
) -> Any:
    """Qwen3-ASR from ``folder``, else the architecture of ``spec`` with random weights."""
    import torch
    from qwen_asr import Qwen3ASRModel
    from qwen_asr.core.transformers_backend import (
        Qwen3ASRConfig,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRProcessor,
    )
    from transformers import WhisperFeatureExtractor

    from tools.index.transcripts import Qwen3AsrTranscriber, make_transcriber

    torch.set_flush_denormal(False)  # qwen-asr's nagisa turns flush-to-zero on when imported
    if folder:
        return make_transcriber(
            "qwen3-asr",
            model=folder,
            device=device,
            dtype=dtype,
            batch_size=batch,
            max_new_tokens=tokens,
        )
    words = tokenizer(1000)
    processor = Qwen3ASRProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=words,
        chat_template=ASR_TEMPLATE,
    )
    config = Qwen3ASRConfig(
        thinker_config={
            **spec,
            "audio_token_id": words.convert_tokens_to_ids("<|audio_pad|>"),
            "audio_start_token_id": words.convert_tokens_to_ids("<|audio_start|>"),
        }
    )
    with torch.device(device):
        torch.manual_seed(0)
        model = Qwen3ASRForConditionalGeneration(config).to(getattr(torch, dtype)).eval()
    # Random weights never end a transcript: make every chunk cost exactly ``tokens`` tokens.
    model.generation_config.eos_token_id = None
    wrapped = Qwen3ASRModel(
        backend="transformers",
        model=model,
        processor=processor,
        max_inference_batch_size=batch,
        max_new_tokens=tokens,
    )
    return Qwen3AsrTranscriber.from_model(wrapped)


def parameters(module: Any) -> float:
    """Billions of parameters."""
    return sum(p.numel() for p in module.parameters()) / 1e9


def gpu_memory(device: str) -> str:
    """What the GPU holds now and at most so far (GiB), or that the run is on the CPU."""
    import torch

    if device == "ray":
        return "GPU memory: in the Ray actors (`ray status` shows it)"
    if not device.startswith("cuda"):
        return "cpu (no GPU memory)"
    gib = 1024**3
    return (
        f"GPU memory {torch.cuda.memory_allocated(device) / gib:.1f} GiB, "
        f"peak {torch.cuda.max_memory_allocated(device) / gib:.1f} GiB"
    )


class PrintedProgress:
    """Prints each video's chunks/s and the GPU's memory as indexing goes."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.started = self.video_started_at = time.perf_counter()
        self.chunks = self.video_chunks = 0

    def begin(self, total_chunks: int, videos: int) -> None:
        """The run starts."""
        print(f"indexing {total_chunks} chunks of {videos} videos", flush=True)
        self.started = time.perf_counter()

    def video_started(self, video: Any, chunks: int) -> None:
        """A video starts."""
        self.video_started_at, self.video_chunks = time.perf_counter(), 0

    def expect(self, chunks: int) -> None:
        """More chunks than planned (a video probed on a Ray worker)."""

    def advance(self, chunks: int, video: Any = None) -> None:
        """More chunks stored."""
        self.chunks += chunks
        self.video_chunks += chunks

    def video_finished(self, video: Any, error: str | None) -> None:
        """A video ends: its rate, the GPU's memory."""
        took = time.perf_counter() - self.video_started_at
        rate = self.video_chunks / took if took else 0.0
        status = f"FAILED: {error}" if error else f"{rate:.2f} chunks/s"
        print(f"  {video.id}: {self.video_chunks} chunks, {status}; {gpu_memory(self.device)}")

    def end(self) -> None:
        """Indexing is over."""


def playlist(workdir: Path, minutes: float, dry_run: bool) -> Path:
    """A folder of narrated videos without captions: 720p (bench/throughput.py), or for a dry
    run one small demo episode."""
    if dry_run:
        from tools.offline.synthetic import make_demo_playlist

        folder = workdir / "dry-run"
        make_demo_playlist(
            folder,
            domains=("cooking",),
            videos_per_domain=1,
            scenes_per_video=4,
            scene_seconds=15.0,
            plant_duplicate=False,
        )
        for captions in folder.rglob("*.vtt"):
            captions.unlink()
        return folder
    import throughput

    return throughput.make_playlist(workdir, minutes / 60, captions=False)[0].parent


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Build both models, index the playlist, print and return the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N")
    parser.add_argument("--minutes", type=float, default=60.0, help="playlist length")
    parser.add_argument("--batch", type=int, default=16, help="chunks per model call")
    parser.add_argument("--asr-tokens", type=int, default=100, help="tokens written per chunk")
    parser.add_argument("--embedding-model", help="a Qwen3-VL-Embedding checkpoint folder")
    parser.add_argument("--asr-model", help="a Qwen3-ASR checkpoint folder")
    parser.add_argument("--workdir", type=Path, default=Path(".bench-cache") / "gpu")
    parser.add_argument("--decode-workers", type=int, default=4)
    parser.add_argument("--dry-run", action="store_true", help="tiny models on the CPU")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the models as Ray actors, one per GPU (no ADDRESS: a local cluster)",
    )
    args = parser.parse_args(argv)

    from store.errors import ConfigError
    from tools.runtime.devices import resolve_device

    if args.dry_run:
        device, dtype, vl, asr = "cpu", "float32", TINY_VL, TINY_ASR
    else:
        try:
            choice = resolve_device(args.device, "--device")
        except ConfigError as exc:
            fail(
                f"{exc.args[0].split(';')[0]}: run it on a GPU machine, or with --dry-run to try "
                "it on the CPU with tiny models"
            )
        if not choice.is_cuda:
            fail(f"--device {args.device!r} is not a GPU; this benchmark is for a CUDA device")
        device, dtype, vl, asr = choice.device, "bfloat16", QWEN3_VL_8B, QWEN3_ASR_1_7B
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"device {device}, {dtype}, batch {args.batch}", flush=True)
    if args.ray is not None:
        return index_on_ray(playlist(args.workdir, args.minutes, args.dry_run), vl, asr, args)

    started = time.perf_counter()
    embedder = build_embedder(vl, args.embedding_model, device, dtype, args.batch)
    print(
        f"embedder: Qwen3-VL-Embedding {parameters(embedder._model):.2f} B parameters"
        f" ({'checkpoint' if args.embedding_model else 'random weights'}), "
        f"{time.perf_counter() - started:.0f} s; {gpu_memory(device)}",
        flush=True,
    )
    started = time.perf_counter()
    transcriber = build_transcriber(asr, args.asr_model, device, dtype, args.batch, args.asr_tokens)
    print(
        f"ASR: Qwen3-ASR {parameters(transcriber._model.model):.2f} B parameters"
        f" ({'checkpoint' if args.asr_model else 'random weights'}), "
        f"{time.perf_counter() - started:.0f} s; {gpu_memory(device)}",
        flush=True,
    )
    folder = playlist(args.workdir, args.minutes, args.dry_run)
    return index(folder, embedder, transcriber, device, args)


def index_on_ray(
    folder: Path, vl: dict[str, Any], asr: dict[str, Any], args: argparse.Namespace
) -> dict[str, float]:
    """Index ``folder`` with both models as Ray actors (built there, one per GPU share)."""
    from functools import partial

    from ray import cloudpickle  # Ray's own copy: what serialises the actors' arguments

    from tools.index.ray_index import RayModels, RayOptions

    module = sys.modules[__name__]
    if __name__ != "__main__":  # imported by path (the tests): workers cannot import it by name
        cloudpickle.register_pickle_by_value(module)
    # Inside an actor its GPU is the only one it sees: cuda:0.
    device, dtype = ("cpu", "float32") if args.dry_run else ("cuda:0", "bfloat16")
    models = RayModels(
        embedder=partial(build_embedder, vl, args.embedding_model, device, dtype, args.batch),
        transcriber=partial(
            build_transcriber, asr, args.asr_model, device, dtype, args.batch, args.asr_tokens
        ),
        frame_height=None,
        audio="always",  # no captions: Qwen3-ASR reads every chunk's audio
    )
    options = RayOptions(
        address=args.ray or None,
        num_cpus=2 if args.dry_run else None,
        gpus_per_actor=0.5,  # one ASR and one embedding replica per GPU
        use_gpus=not args.dry_run,
        require_gpus=not args.dry_run,
    )
    return index(folder, None, None, "ray", args, (models, options))


def index(
    folder: Path,
    embedder: Any,
    transcriber: Any,
    device: str,
    args: argparse.Namespace,
    on_ray: tuple[Any, Any] | None = None,
) -> dict[str, float]:
    """Index ``folder`` through the real pipeline and print the figures."""
    import shutil

    from store.catalog import Catalog
    from tools.index.indexer import IndexConfig, Indexer
    from tools.index.vectors import open_vector_index

    home = args.workdir / "home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    catalog = Catalog.open(home / "catalog.db")
    vectors = open_vector_index("qdrant-edge", path=home / "qdrant")
    progress = PrintedProgress(device)
    config = IndexConfig(batch_chunks=args.batch, decode_workers=args.decode_workers)
    indexer: Any
    if on_ray is None:
        indexer = Indexer(catalog, vectors, embedder, transcriber, config, home / "media", progress)
    else:
        from tools.index.ray_index import RayIndexer

        models, options = on_ray
        indexer = RayIndexer(catalog, vectors, models, config, home / "media", options, progress)
    try:
        indexer.add(str(folder), domain="lectures")
        indexer.prepare_media()
        hours = sum(v.duration_s or 0.0 for v in catalog.videos()) / 3600
        started = time.perf_counter()
        summary = indexer.run()
        took = time.perf_counter() - started
    finally:
        vectors.close()
        catalog.close()
    if summary.videos_failed:
        fail(f"indexing failed: {summary.videos_failed}")
    figures = {
        "video_hours": hours,
        "chunks": float(summary.chunks_computed),
        "index_s": took,
        "chunks_per_s": summary.chunks_computed / took,
        "hours_indexed_per_hour": hours * 3600 / took,
    }
    print(
        f"indexed {hours:.2f} h ({summary.chunks_computed} chunks) in {took:.1f} s: "
        f"{figures['chunks_per_s']:.2f} chunks/s, {figures['hours_indexed_per_hour']:.0f} hours "
        f"of video indexed per hour; {gpu_memory(device)}",
        flush=True,
    )
    return figures


if __name__ == "__main__":
    main()
