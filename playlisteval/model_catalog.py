"""The models this project knows, read from the declarations that already hold them: the model
slots of :mod:`tools.contracts.roles` (each slot's default, and what the settings put in it now),
the
price rows (``policies/prices.toml`` and ``[budget.price_overrides]``), the endpoints (the
settings' ``[providers.models]`` and :func:`playlisteval.settings.default_endpoints`), the
offline judges and the paper's evaluated judges (:mod:`tools.providers.judges`).

Nothing here lists a model of its own. :func:`known_models` joins those sources into one entry
per id — its family, where it runs, its price, its context window, the slots it fills — which
``playlisteval models`` prints; :func:`check_servable_judges` is what ``eval`` asks before it
opens anything costly: a judge id no source can serve is refused with the closest known ids and
the TOML that would serve it (:class:`UnknownJudge`).
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from store.errors import ConfigError

if TYPE_CHECKING:
    from playlisteval.settings import Settings
    from policies.prices import PriceTable

__all__ = [
    "EVALUATION_JUDGE",
    "KnownModel",
    "SlotDefault",
    "UnknownJudge",
    "check_servable_judges",
    "closest_ids",
    "known_models",
    "slot_defaults",
]

Runs = Literal[
    "service", "vLLM server", "real local", "local (transformers)", "offline harness", "no provider"
]

EVALUATION_JUDGE = "evaluation judge"
"""The slot-like role every judge of ``eval`` fills (``--judge``): it has no settings key."""


class UnknownJudge(ConfigError):
    """An evaluation judge id that nothing configured or declared can serve."""


@dataclass(frozen=True)
class SlotDefault:
    """One model slot: its settings key (under ``[models]``), the roles its models play, its
    default model ids and the ids the settings put in it now."""

    key: str
    roles: tuple[str, ...]
    default: tuple[str, ...]
    configured: tuple[str, ...]
    paper: bool


@dataclass(frozen=True)
class KnownModel:
    """One model id the project knows: its provider family (None when no family serves it),
    where it runs, the environment variable its key is read from and whether it is set, its
    price per million tokens (input, output; None when unknown) and where that came from, its
    context window in tokens (None when nothing says), the slots it is the default of and those
    it fills now, whether the paper evaluates it as a judge, and where it is declared."""

    model_id: str
    family: str | None
    runs: Runs
    key_env: str | None
    key_set: bool
    input_per_mtok: str | None
    output_per_mtok: str | None
    price_source: str | None
    context_window: int | None
    default_of: tuple[str, ...]
    fills: tuple[str, ...]
    paper_judge: bool
    declared_in: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The entry as plain data (``models --json``)."""
        return asdict(self)


def slot_defaults(settings: Settings) -> list[SlotDefault]:
    """Every declared model slot (the paper's, then those gate packages declared) with its
    default and what the settings put in it now."""
    from tools.contracts.roles import MODEL_SLOTS, PAPER_SLOTS

    chosen = settings.models.model_dump()
    out = []
    for slot in MODEL_SLOTS.values():
        value = chosen.get(slot.key, settings.models.extensions.get(slot.key, slot.default))
        out.append(
            SlotDefault(
                key=slot.key,
                roles=slot.roles,
                default=slot.models(slot.default),
                configured=slot.models(slot.normalise(value)),
                paper=slot in PAPER_SLOTS,
            )
        )
    return out


def _declared(settings: Settings, slots: Sequence[SlotDefault]) -> dict[str, list[str]]:
    """Model id → where the project declares it, in a stable order of first mention."""
    from playlisteval.settings import default_endpoints
    from policies.prices import PRICES_FILE
    from tools.providers.judges import OFFLINE_JUDGES, PAPER_JUDGES

    found: dict[str, list[str]] = {}

    def add(ids: Iterable[str], where: str) -> None:
        for model_id in ids:
            places = found.setdefault(model_id, [])
            if where not in places:
                places.append(where)

    for slot in slots:
        add(slot.default, "slot default")
        add(slot.configured, "settings [models]")
    add(PAPER_JUDGES, "the paper's judges")
    rows = tomllib.loads(PRICES_FILE.read_text(encoding="utf-8")).get("models", {})
    add(rows, PRICES_FILE.name)
    add(settings.budget.price_overrides, "settings [budget.price_overrides]")
    add(default_endpoints(), "default endpoints")
    add(settings.providers.models, "settings [providers.models]")
    add(OFFLINE_JUDGES, "offline judges")
    return found


def _where(settings: Settings, model_id: str) -> tuple[str | None, Runs, str | None]:
    """(family, where it runs, the key's environment variable) of ``model_id``."""
    from playlisteval.app import endpoint
    from tools.providers.judges import OFFLINE_JUDGES
    from tools.providers.local_llm import is_real_local

    if model_id in OFFLINE_JUDGES:
        return None, "offline harness", None
    try:
        family, found = endpoint(settings, model_id)
    except ConfigError:
        return None, "no provider", None
    limits = settings.providers.family(family.name)
    key = None if family.keyless else (found.api_key_env or limits.api_key_env)
    if is_real_local(family.name):
        return family.name, "real local", None
    if family.local:
        return family.name, "local (transformers)", None
    if "base_url" in family.requires:
        return family.name, "vLLM server", key
    return family.name, "service", key


def _context_window(settings: Settings, model_id: str) -> int | None:
    """The window the settings give ``model_id``, else the one genai-prices' bundled snapshot
    records for it (read offline), else None."""
    from playlisteval.settings import default_endpoints

    found = settings.providers.models.get(model_id) or default_endpoints().get(model_id)
    if found is not None and found.context_window:
        return found.context_window
    from genai_prices import data_snapshot

    try:
        _provider, info = data_snapshot.get_snapshot().find_provider_model(
            model_id, None, None, None
        )
    except LookupError:
        return None
    window = getattr(info, "context_window", None)
    return window if isinstance(window, int) else None


def known_models(settings: Settings, prices: PriceTable) -> list[KnownModel]:
    """One entry per model id the project declares (see the module's docstring), the slots'
    defaults first in slot order, then the paper's judges, then the rest by id, the offline
    judges last."""
    import os

    from policies.prices import UnknownPriceError
    from tools.providers.judges import OFFLINE_JUDGES, PAPER_JUDGES

    slots = slot_defaults(settings)
    declared = _declared(settings, slots)
    first = [m for s in slots for m in s.default] + list(PAPER_JUDGES)

    def rank(model_id: str) -> tuple[int, int, str]:
        if model_id in OFFLINE_JUDGES:
            return (3, OFFLINE_JUDGES.index(model_id), model_id)
        if model_id in first:
            return (0, first.index(model_id), model_id)
        return (1, 0, model_id)

    out = []
    for model_id in sorted(declared, key=rank):
        family, runs, key_env = _where(settings, model_id)
        try:
            price = prices.price(model_id)
            rates: tuple[str | None, str | None, str | None] = (
                str(price.input_per_mtok),
                str(price.output_per_mtok),
                price.source,
            )
        except UnknownPriceError:
            rates = (None, None, None)
        judge = [EVALUATION_JUDGE] if model_id in OFFLINE_JUDGES + PAPER_JUDGES else []
        out.append(
            KnownModel(
                model_id=model_id,
                family=family,
                runs=runs,
                key_env=key_env,
                key_set=bool(key_env and os.environ.get(key_env)),
                input_per_mtok=rates[0],
                output_per_mtok=rates[1],
                price_source=rates[2],
                context_window=_context_window(settings, model_id),
                default_of=tuple(s.key for s in slots if model_id in s.default),
                fills=tuple(s.key for s in slots if model_id in s.configured) + tuple(judge),
                paper_judge=model_id in PAPER_JUDGES,
                declared_in=tuple(declared[model_id]),
            )
        )
    return out


def closest_ids(wanted: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The ``n`` known ids most like ``wanted`` (difflib's ratio, case aside), best first:
    those difflib calls close, else the nearest there are, so a refusal always names some."""
    ids = sorted(set(known))
    lowered = {k.lower(): k for k in ids}
    close = difflib.get_close_matches(wanted.lower(), list(lowered), n=n, cutoff=0.6)
    if close:
        return [lowered[c] for c in close]

    def likeness(model_id: str) -> float:
        return difflib.SequenceMatcher(None, wanted.lower(), model_id.lower()).ratio()

    return sorted(ids, key=lambda k: (-likeness(k), k))[:n]


def check_servable_judges(settings: Settings, prices: PriceTable, judges: Sequence[str]) -> None:
    """Refuse, before anything is opened or spent, the first judge id that nothing can serve:
    not an offline judge, no real local model, no model file named by the id, and no price
    known for it (settings, ``prices.toml``, genai-prices) — so neither a live call nor the
    offline provider's priced stand-in can be made. :class:`UnknownJudge` names the closest
    known ids and the TOML to add to the workspace's ``playlisteval.toml`` (its absolute path).
    A model file on this machine (``.gguf``, a packaged model) is left to the composition
    root's check, which says how to serve it."""
    from playlisteval.app import real_local_models
    from playlisteval.judge_toml import judge_toml, local_judge_path
    from playlisteval.settings import SETTINGS_FILE
    from policies.prices import UnknownPriceError
    from tools.providers.judges import OFFLINE_JUDGES, PAPER_JUDGES

    served = set(OFFLINE_JUDGES) | set(real_local_models(settings))
    for judge in judges:
        if judge in served or local_judge_path(judge) is not None:
            continue
        try:
            prices.price(judge)
            continue
        except UnknownPriceError:
            pass
        known = [m.model_id for m in known_models(settings, prices)]
        where = (Path(settings.home).expanduser().resolve()) / SETTINGS_FILE
        what = (
            "a judge the paper evaluates, but no price or endpoint is configured for it"
            if judge in PAPER_JUDGES
            else "no model this project knows (no price, no endpoint)"
        )
        raise UnknownJudge(
            f"judge {judge!r} is {what}; the closest known ids: "
            f"{', '.join(closest_ids(judge, known))} (all of them: `playlisteval models`). "
            f"To judge with it, add its endpoint and price to {where}:\n\n{judge_toml(judge)}"
        )
