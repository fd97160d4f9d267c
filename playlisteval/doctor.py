"""``playlisteval doctor``: is this workspace ready to curate, and if not, what to do."""

from __future__ import annotations

import os
from dataclasses import dataclass

from playlisteval.app import App, role_models
from policies.prices import UnknownPriceError
from policies.tokens import provider_family
from store.errors import PlaylistEvalError

# Which environment variable holds the key of each provider family (the SDKs' own names).
KEY_VARS = {
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
    "qwen": ("DASHSCOPE_API_KEY",),
}


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, whether it is fine, and what to do when it is not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def run_checks(app: App) -> list[Check]:
    """Every check, in the order a user should fix them."""
    checks: list[Check] = []
    models = sorted(role_models(app.settings).all_models())
    prices = app.prices()
    for model in models:
        try:
            price = prices.price(model)
        except UnknownPriceError as exc:
            checks.append(
                Check(
                    f"price of {model}",
                    False,
                    str(exc),
                    "add it under [budget.price_overrides] in playlisteval.toml",
                )
            )
            continue
        checks.append(
            Check(
                f"price of {model}",
                True,
                f"{price.input_per_mtok} / {price.output_per_mtok} USD per M tokens "
                f"in/out ({price.source})",
            )
        )
    offline = app.settings.curation.offline
    families = sorted({f for m in models if (f := provider_family(m)) is not None})
    for family in families:
        names = KEY_VARS.get(family, ())
        present = [n for n in names if os.environ.get(n)]
        if offline:
            checks.append(
                Check(
                    f"{family} key",
                    True,
                    ("set in " + present[0])
                    if present
                    else "not needed: curation.offline = true (the offline provider answers)",
                )
            )
        else:
            checks.append(
                Check(
                    f"{family} key",
                    bool(present),
                    ("set in " + present[0]) if present else "missing",
                    "" if present else f"export {names[0]}=… before curating",
                )
            )
    try:
        seeds = len(app.catalog.seeds())
        checks.append(
            Check(
                "seeds",
                seeds > 0,
                f"{seeds} active seeds",
                "" if seeds else "run `playlisteval add …` then `playlisteval index`",
            )
        )
        app.events.last_seq()
        checks.append(
            Check("event log", True, app.settings.store.url or str(app.workspace.database))
        )
    except PlaylistEvalError as exc:
        checks.append(Check("workspace", False, str(exc), "check --home and store.url"))
    return checks
