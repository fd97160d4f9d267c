"""Rules that bound a run: budget, prices, token counts and the attempt policy.

Pure rules over plain data; the only I/O is reading the shipped ``prices.toml``. ``policies``
imports only ``store`` of our packages.

The names below are handed on from their modules when first asked for (``from policies import
Budget``): importing one submodule (``policies.budget``) loads only that one and what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.lazy import lazy_getattr

if TYPE_CHECKING:
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
    from policies.tokens import (
        CallShape,
        estimate_input_tokens,
        provider_family,
        worst_case_micros,
    )

#: Each name this package offers → the module it lives in.
_HOMES = {
    "DEFAULT_GATES": "policies.attempts",
    "GateSpec": "policies.attempts",
    "LoopPolicy": "policies.attempts",
    "gate_order": "policies.attempts",
    "gates_from_mapping": "policies.attempts",
    "Budget": "policies.budget",
    "BudgetExhausted": "policies.budget",
    "BudgetSnapshot": "policies.budget",
    "Reservation": "policies.budget",
    "ReservationError": "policies.budget",
    "ModelPrice": "policies.prices",
    "PriceTable": "policies.prices",
    "UnknownPriceError": "policies.prices",
    "Usage": "policies.prices",
    "UsageError": "policies.prices",
    "CallShape": "policies.tokens",
    "estimate_input_tokens": "policies.tokens",
    "provider_family": "policies.tokens",
    "worst_case_micros": "policies.tokens",
}

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

__getattr__ = lazy_getattr(__name__, _HOMES)
