"""Pieces of tiny, randomly initialised Qwen models that tests build offline."""

from __future__ import annotations

from collections.abc import Sequence
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
