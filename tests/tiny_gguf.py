"""A tiny, randomly initialised Qwen2 causal LM written as a GGUF file by the test itself.

The file is what llama.cpp's converter writes for Qwen2 (architecture ``qwen2``, the ``gpt2``
byte-level BPE tokenizer with its merges, a ChatML template, float32 tensors under GGUF's tensor
names), so transformers reads it back through the same ``gguf_file=`` path as the packaged
Qwen2.5 models. Nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.tiny_models import tiny_qwen_tokenizer

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = (
    "A B Answer A Answer B Transcript excerpts question which answer is more faithful reply "
    "with the single letter the chef adds garlic then onion to the pan and stirs it slowly "
    "system user assistant you are a careful judge video"
)


def _tokenizer_fields(tokenizer: Any) -> tuple[list[str], list[int], list[str]]:
    """Tokens by id, their GGUF types (1 normal, 3 control) and the BPE merges."""
    import json

    state = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab: dict[str, int] = dict(state["model"]["vocab"])
    for added in state["added_tokens"]:
        vocab[added["content"]] = added["id"]
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    types = [3 if token in SPECIAL else 1 for token in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]]
    return tokens, types, merges


def tiny_qwen2(seed: int = 0, initializer_range: float = 0.02) -> tuple[Any, Any]:
    """A tiny Qwen2 model (hidden 32, 2 layers) and its byte-level tokenizer, random weights
    drawn with ``initializer_range`` (transformers' 0.02 makes a model whose last hidden state
    barely depends on the prompt; a judge test that needs the content to move the label scores
    asks for more)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = tiny_qwen_tokenizer(SPECIAL, CORPUS, vocab_size=320)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        initializer_range=initializer_range,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config).eval(), tokenizer


def write_tiny_gguf(
    path: Path,
    seed: int = 0,
    *,
    initializer_range: float = 0.02,
    edit: Callable[[Any, Any], None] | None = None,
) -> Path:
    """Write a tiny random Qwen2 model and its tokenizer to ``path`` as GGUF (float32);
    ``edit(model, tokenizer)`` may change the weights first (a test that wants a label prior)."""
    import gguf

    model, tokenizer = tiny_qwen2(seed, initializer_range)
    if edit is not None:
        edit(model, tokenizer)
    config = model.config
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("tiny-qwen2-test")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens, types, merges = _tokenizer_fields(tokenizer)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, config.num_hidden_layers)
    for key, tensor in model.state_dict().items():
        name = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise KeyError(f"no GGUF name for {key!r}")
        writer.add_tensor(name, tensor.detach().float().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def whole_header_random_body(path: Path, seed: int = 0) -> Path:
    """A file that begins as a GGUF (its magic and version 3) and goes on with random bytes:
    what a corrupted model file looks like to anything that reads only its first bytes."""
    import random
    import struct

    path.write_bytes(b"GGUF" + struct.pack("<I", 3) + random.Random(seed).randbytes(4096))
    return path
