"""The real-local family's spec (adapter: :mod:`tools.providers.local_llm`, llama.cpp or
transformers): a real text model run on this machine."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from store.answers import REAL_LOCAL_PROVIDER
from tools.providers.family import Deferred, local_model_family

FAMILY_NAME = REAL_LOCAL_PROVIDER
REAL_LOCAL_LABEL = "real local model"
"""How a call of this family is labelled where outputs say who answered (never "offline")."""
FREE_PRICE: Mapping[str, float] = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}


def is_real_local(family: str | None) -> bool:
    """Whether a model of provider family ``family`` is a real model run on this machine by
    :mod:`tools.providers.local_llm` (what an output labels :data:`REAL_LOCAL_LABEL`)."""
    return family == FAMILY_NAME


def free_price_rows(model_ids: Iterable[str]) -> dict[str, dict[str, float]]:
    """Zero price rows for ``model_ids`` (settings overrides, ``[budget.price_overrides]``): a
    model run here costs no money, and the recorder refuses a model it cannot price."""
    return {model_id: dict(FREE_PRICE) for model_id in model_ids}


FAMILY = local_model_family(
    name=FAMILY_NAME,
    factory=Deferred("tools.providers.local_llm:local_llm_model"),
    about=(
        "A real text model run on this machine (a GGUF file, a model folder or a packaged "
        "model such as `qwen2.5-coder-1.5b-instruct`): judges pairs and ranks answers from "
        "text by the scores of the answer labels in both orders. Served in offline runs too "
        "(it is a real model, not the offline harness) and priced at zero."
    ),
    notes={
        "api_key_env": "Unused: a local model needs no key (nothing is downloaded).",
        "max_concurrency": "Forward passes at once (one model in memory serves them in turn).",
    },
)
