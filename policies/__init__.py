"""Rules that bound a run: budget, prices, token counts and the attempt policy.

Pure rules over plain data; the only I/O is reading the shipped ``prices.toml``. ``policies``
imports only ``store`` of our packages.
"""

from __future__ import annotations

from policies.attempts import (
    DEFAULT_GATES,
    GateSpec,
    LoopPolicy,
    gate_order,
    gates_from_mapping,
)
from policies.budget import (
    Budget,
    BudgetExhausted,
    BudgetSnapshot,
    Reservation,
    ReservationError,
)
from policies.prices import ModelPrice, PriceTable, UnknownPriceError, Usage, UsageError
from policies.tokens import CallShape, estimate_input_tokens, provider_family, worst_case_micros

__all__ = [
    "DEFAULT_GATES",
    "Budget",
    "BudgetExhausted",
    "BudgetSnapshot",
    "CallShape",
    "GateSpec",
    "LoopPolicy",
    "ModelPrice",
    "PriceTable",
    "Reservation",
    "ReservationError",
    "UnknownPriceError",
    "Usage",
    "UsageError",
    "estimate_input_tokens",
    "gate_order",
    "gates_from_mapping",
    "provider_family",
    "worst_case_micros",
]
