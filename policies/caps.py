"""A spending cap as the user gives it (US dollars) and as the ledger counts it (micro-dollars).

Apart from :mod:`policies.budget` (the run's reservations, which need the store) so that reading
the settings checks every ``budget.*_usd`` without importing the store's database layer.
"""

from __future__ import annotations

import math

from store.errors import ConfigError

#: A cap above this is refused as a likely typo (the paper's whole benchmark cost 352 USD).
MAX_CAP_USD = 100_000.0


def cap_micros(usd: float | None, what: str) -> int | None:
    """A cap given in USD, checked, as micro-dollars (``None``: no cap).

    nan, inf, negative and absurd values (above :data:`MAX_CAP_USD`) raise :class:`ConfigError`
    naming ``what`` (the flag or setting it came from), before anything is written.
    """
    if usd is None:
        return None
    if isinstance(usd, bool) or not isinstance(usd, int | float):
        raise ConfigError(f"{what} must be a number of US dollars, got {usd!r}")
    if not math.isfinite(usd):
        raise ConfigError(f"{what} must be a finite number of US dollars, got {usd!r}")
    if usd < 0:
        raise ConfigError(f"{what} must be 0 or more US dollars, got {usd!r}")
    if usd > MAX_CAP_USD:
        raise ConfigError(
            f"{what}={usd!r} USD is above {MAX_CAP_USD:g} USD, refused as a likely typo "
            "(a cap is dollars, not micro-dollars or cents)"
        )
    return round(usd * 1_000_000)
