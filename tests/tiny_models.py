"""Pieces of tiny, randomly initialised Qwen models that tests build offline."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def tiny_qwen_tokenizer(
    special_tokens: Sequence[str], corpus: str, *, vocab_size: int, **extra: Any
) -> Any:
    """A byte-level BPE ``Qwen2TokenizerFast`` trained on ``corpus`` with the given specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator([corpus] * 10, trainer)
    return Qwen2TokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        **extra,
    )


QWEN3_VL_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen's chat format, cut down to what a role call sends: text items and images.
QWEN3_VL_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|im_start|>{{ message.role }}\n"
    "{%- for item in message.content -%}"
    "{%- if item.type == 'image' -%}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif item.type == 'text' -%}{{ item.text }}{%- endif -%}"
    "{%- endfor -%}<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}"
)


def save_tiny_qwen3_vl(folder: Path, *, stop_on_every_token: bool) -> Path:
    """A randomly initialised Qwen3-VL with a tiny tokenizer, image processor and template,
    saved under ``folder`` (``tests/test_local_vlm.py`` and the provider contract use it).

    It never stops on its own (no end-of-sequence id), so it always writes ``max_tokens``;
    with ``stop_on_every_token`` every id ends the sequence, so it writes exactly one token.
    """
    import torch

    # Imported as Any: transformers' own annotations are partial and not ours to check.
    transformers: Any = importlib.import_module("transformers")

    tokenizer = tiny_qwen_tokenizer(
        QWEN3_VL_SPECIAL,
        'a red cat sat on the mat; system user assistant {"answerable": true, "reason": ""}',
        vocab_size=400,
    )
    images = transformers.Qwen2VLImageProcessor(
        patch_size=16, merge_size=2, temporal_patch_size=2, min_pixels=32 * 32, max_pixels=64 * 64
    )
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in QWEN3_VL_SPECIAL}
    config = transformers.Qwen3VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "max_position_embeddings": 32768,
            "rope_scaling": {
                "rope_type": "default",
                "mrope_section": [8, 4, 4],
                "mrope_interleaved": True,
            },
        },
        vision_config={
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
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(0)
    model = transformers.Qwen3VLForConditionalGeneration(config)
    model.generation_config = transformers.GenerationConfig(
        eos_token_id=list(range(len(tokenizer))) if stop_on_every_token else None,
        pad_token_id=ids["<|endoftext|>"],
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    images.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(QWEN3_VL_CHAT_TEMPLATE)
    return folder
