"""What a model call costs: one price table, looked up in a fixed order.

Order: the run's settings overrides → our own ``prices.toml`` (shipped beside this module) →
``genai-prices`` (the table pydantic-ai uses). ``genai-prices`` has no DashScope and only the
``-preview`` ids of some Gemini models; those gaps are ``prices.toml``'s job. A model that none
of the three knows is refused with :class:`UnknownPriceError`, never priced at zero: the budget
cannot guard a call it cannot price. There is deliberately no "offline" row: offline calls are
priced as the configured live model would be, so a rehearsal costs what the real run would.

Money is :class:`~decimal.Decimal` USD per million tokens; a cost is rounded *up* to whole
micro-dollars (the project's integer money unit, :data:`store.events.MICROS_PER_USD`), so the
ledger never under-counts.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from store.errors import ConfigError, PlaylistEvalError
from store.events import MICROS_PER_USD

PRICES_FILE = Path(__file__).with_name("prices.toml")
_MTOK = Decimal(1_000_000)


class UnknownPriceError(ConfigError):
    """No price is known for a model, so a call to it cannot be budgeted."""


class UsageError(PlaylistEvalError):
    """A token count is impossible (negative, or more cached tokens than input tokens)."""


@dataclass(frozen=True)
class ModelPrice:
    """List prices of one model in USD per million tokens.

    Images are priced at the text input rate (all three providers count them as input tokens);
    audio and video have their own rate only where the provider prices them apart. The
    ``long_*`` rates apply to the *whole* request once its input passes
    ``long_context_from_tokens`` (the "cliff" rule of Gemini Pro and GPT-5.4).
    """

    model: str
    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cached_input_per_mtok: Decimal | None = None
    input_audio_per_mtok: Decimal | None = None
    input_video_per_mtok: Decimal | None = None
    batch_discount: Decimal = Decimal("0.5")
    source: str = "prices.toml"
    long_context_from_tokens: int | None = None
    long_input_per_mtok: Decimal | None = None
    long_output_per_mtok: Decimal | None = None
    long_cached_input_per_mtok: Decimal | None = None
    # Explicit context caches (Gemini): writing the cache bills its tokens at this rate (the
    # input rate when unset), and keeping it bills tokens x hours at the storage rate.
    cache_write_per_mtok: Decimal | None = None
    cache_storage_per_mtok_hour: Decimal | None = None
    cached_input_audio_per_mtok: Decimal | None = None  # cached audio, where priced apart
    # A provider's *explicit* prefix cache, where its hits bill apart from the automatic
    # (implicit) cache's ``cached_input_per_mtok`` (DashScope: 10 % against 20 %). Only the
    # rehearsal's what-if scenarios read it (:meth:`PriceTable.repriced_explicit`): no adapter
    # sends explicit cache markers yet, so no recorded call is priced by it.
    explicit_cached_input_per_mtok: Decimal | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Decimal) and (not value.is_finite() or value < 0):
                raise ConfigError(
                    f"price {f.name}={value!r} for model {self.model!r} must be a finite "
                    "number >= 0; fix the price table or the override"
                )
        if not Decimal(0) < self.batch_discount <= Decimal(1):
            raise ConfigError(
                f"batch_discount={self.batch_discount!r} for model {self.model!r} must be in "
                "(0, 1]: it multiplies the list price of a batch call"
            )
        if self.long_context_from_tokens is not None and self.long_context_from_tokens <= 0:
            raise ConfigError(
                f"long_context_from_tokens={self.long_context_from_tokens!r} for model "
                f"{self.model!r} must be a positive token count"
            )


@dataclass(frozen=True)
class Usage:
    """Token counts of one call, by modality.

    ``cached_input_tokens`` is the part of the input (all modalities together) that the
    provider served from its context cache; it is included in the other ``input_*`` counts,
    as providers report it (pydantic-ai's ``cache_read_tokens`` is likewise part of
    ``input_tokens``).
    """

    input_text_tokens: int = 0
    input_image_tokens: int = 0
    input_video_tokens: int = 0
    input_audio_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0  # tokens written into a context cache by this call
    cache_storage_token_s: int = 0  # tokens x seconds of cache storage this call paid for
    cached_audio_tokens: int = 0  # the audio part of cached_input_tokens
    cache_write_audio_tokens: int = 0  # the audio part of cache_write_tokens

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or value < 0:
                raise UsageError(f"token count {f.name}={value!r} must be an int >= 0")
        if (
            self.cached_audio_tokens > self.cached_input_tokens
            or self.cache_write_audio_tokens > self.cache_write_tokens
        ):
            raise UsageError(
                f"audio parts ({self.cached_audio_tokens!r} cached, "
                f"{self.cache_write_audio_tokens!r} written) exceed their totals "
                f"({self.cached_input_tokens!r}, {self.cache_write_tokens!r})"
            )
        if self.cached_input_tokens > self.input_tokens:
            raise UsageError(
                f"cached_input_tokens={self.cached_input_tokens!r} is more than all input "
                f"tokens ({self.input_tokens!r}); the provider's usage report is inconsistent"
            )

    @property
    def input_tokens(self) -> int:
        """All input tokens, every modality, cached or not."""
        return (
            self.input_text_tokens
            + self.input_image_tokens
            + self.input_video_tokens
            + self.input_audio_tokens
        )

    def without_cache(self) -> Usage:
        """The same call as if no context cache had served or stored any of it: every cached or
        cache-written token counted as plain input, no storage."""
        return replace(
            self,
            cached_input_tokens=0,
            cache_write_tokens=0,
            cache_storage_token_s=0,
            cached_audio_tokens=0,
            cache_write_audio_tokens=0,
        )


class PriceTable:
    """Prices by model id; build with :meth:`load`."""

    def __init__(
        self,
        rows: Mapping[str, ModelPrice],
        *,
        use_genai_prices: bool = True,
        as_of: datetime | None = None,
    ) -> None:
        self._rows = dict(rows)
        self._use_genai_prices = use_genai_prices
        # genai-prices holds dated price changes; the date is fixed at load so one run prices
        # every call alike (and a replay prices them as the run did).
        self._as_of = as_of or datetime.now(tz=UTC)
        self._genai_cache: dict[str, ModelPrice | None] = {}

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Mapping[str, float]] | None = None,
        extra_file: Path | None = None,
        *,
        use_genai_prices: bool = True,
        as_of: datetime | None = None,
    ) -> PriceTable:
        """The table from ``prices.toml``, then ``extra_file`` rows, then ``overrides`` rows.

        An override for a model our file or genai-prices knows may give only the rates it
        changes (e.g. ``{"gpt-5.4": {"output_per_mtok": 12}}``); a new model needs at least
        ``input_per_mtok`` and ``output_per_mtok``.
        """
        rows = _read_price_file(PRICES_FILE)
        if extra_file is not None:
            rows.update(_read_price_file(extra_file))
        table = cls(rows, use_genai_prices=use_genai_prices, as_of=as_of)
        for model, values in (overrides or {}).items():
            base = table._lookup(model)
            table._rows[model] = _price_from_mapping(model, values, "settings", base)
        return table

    def price(self, model: str) -> ModelPrice:
        """The price row for ``model``; :class:`UnknownPriceError` when no source knows it."""
        found = self._lookup(model)
        if found is None:
            raise UnknownPriceError(
                f"no price known for model {model!r} (not in settings overrides, "
                f'{PRICES_FILE.name} or genai-prices): add [budget.price_overrides."{model}"] '
                "with input_per_mtok and output_per_mtok to the workspace's playlisteval.toml"
            )
        return found

    def cost_micros(self, model: str, usage: Usage, *, batch: bool = False) -> int:
        """The cost of a call with ``usage`` in micro-dollars, rounded up."""
        p = self.price(model)
        long = p.long_context_from_tokens is not None and (
            usage.input_tokens > p.long_context_from_tokens
        )
        text_rate = _pick(p.long_input_per_mtok if long else None, p.input_per_mtok)
        output_rate = _pick(p.long_output_per_mtok if long else None, p.output_per_mtok)
        cached_rate = p.long_cached_input_per_mtok if long else None
        cached_rate = cached_rate if cached_rate is not None else p.cached_input_per_mtok
        rates = {
            "text": text_rate,
            "image": text_rate,
            "video": _pick(p.input_video_per_mtok, text_rate),
            "audio": _pick(p.input_audio_per_mtok, text_rate),
        }
        counts = {
            "text": usage.input_text_tokens,
            "image": usage.input_image_tokens,
            "video": usage.input_video_tokens,
            "audio": usage.input_audio_tokens,
        }
        cached_cost = Decimal(0)
        if cached_rate is not None and usage.cached_input_tokens:
            # The audio part, when known, comes out of the audio count; for the rest reports do
            # not say which modality was cached: take it out of the cheapest modality first,
            # so what is left is billed at the dearest rates (never under).
            audio_taken = min(usage.cached_audio_tokens, counts["audio"])
            counts["audio"] -= audio_taken
            to_take = usage.cached_input_tokens - audio_taken
            for kind in sorted(counts, key=lambda k: rates[k]):
                taken = min(to_take, counts[kind])
                counts[kind] -= taken
                to_take -= taken
            audio_cached_rate = _pick(p.cached_input_audio_per_mtok, cached_rate)
            cached_cost = (
                Decimal(usage.cached_input_tokens - usage.cached_audio_tokens) * cached_rate
                + Decimal(usage.cached_audio_tokens) * audio_cached_rate
            )
        total = cached_cost + Decimal(usage.output_tokens) * output_rate
        total += sum((Decimal(counts[k]) * rates[k] for k in counts), Decimal(0))
        if batch:
            total *= p.batch_discount
        if usage.cache_write_tokens:
            # Writing a cache bills its tokens at the input rate of their modality.
            write_rate = _pick(p.cache_write_per_mtok, rates["video"])
            audio_write = usage.cache_write_audio_tokens
            total += Decimal(usage.cache_write_tokens - audio_write) * write_rate
            total += Decimal(audio_write) * _pick(p.cache_write_per_mtok, rates["audio"])
        if usage.cache_storage_token_s:
            if p.cache_storage_per_mtok_hour is None:
                raise UnknownPriceError(
                    f"model {model!r} kept a context cache but has no cache_storage_per_mtok_hour "
                    f"price; add it to {PRICES_FILE.name} or a settings override"
                )
            total += Decimal(usage.cache_storage_token_s) * p.cache_storage_per_mtok_hour / 3600
        return _ceil_micros(total / _MTOK)

    def as_usage(self, counts: Mapping[str, int]) -> Usage:
        """A recorded ``usage`` mapping (see ``CallRecorded.usage``) back as :class:`Usage`."""
        return Usage(
            input_text_tokens=counts.get("text", 0),
            input_image_tokens=counts.get("image", 0),
            input_video_tokens=counts.get("video", 0),
            input_audio_tokens=counts.get("audio", 0),
            cached_input_tokens=counts.get("cached", 0),
            output_tokens=counts.get("output", 0),
            cache_write_tokens=counts.get("cache_write", 0),
            cache_storage_token_s=counts.get("cache_storage_token_s", 0),
            cached_audio_tokens=counts.get("cached_audio", 0),
            cache_write_audio_tokens=counts.get("cache_write_audio", 0),
        )

    def repriced(
        self, model: str, counts: Mapping[str, int], *, batch: bool, cache: bool = True
    ) -> int:
        """A recorded call's cost again from its usage ``counts`` (``CallRecorded.usage``):
        under other rules — without its context-cache savings (``cache=False``: every cached
        or cache-written token paid at the input rate, no storage), or at or off batch rates."""
        usage = self.as_usage(counts)
        if not cache:
            usage = usage.without_cache()
        return self.cost_micros(model, usage, batch=batch)

    def repriced_explicit(
        self, model: str, counts: Mapping[str, int], *, write: bool
    ) -> int | None:
        """A recorded call's cost again as if its video tokens were the prefix of the provider's
        explicit cache: written by this call (``write``: billed at ``cache_write_per_mtok``
        instead of the input rate) or read from it (billed at
        ``explicit_cached_input_per_mtok``); the rest of the call as recorded, at list price.
        ``None`` when ``model``'s row has no explicit-cache rates."""
        row = self.price(model)
        if row.cache_write_per_mtok is None or row.explicit_cached_input_per_mtok is None:
            return None
        usage = self.as_usage(counts)
        prefix = usage.input_video_tokens
        bare = usage.without_cache()
        if write:
            usage = replace(bare, input_video_tokens=0, cache_write_tokens=prefix)
            return self.cost_micros(model, usage)
        explicit = replace(row, cached_input_per_mtok=row.explicit_cached_input_per_mtok)
        table = PriceTable({model: explicit}, use_genai_prices=False, as_of=self._as_of)
        return table.cost_micros(model, replace(bare, cached_input_tokens=prefix))

    def snapshot(self, models: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The rows ``models`` are priced by, as plain data (rates as decimal strings) for a
        run's log: a replay prices its calls as the run did, whatever the table says later.
        Models with no known price are left out (the recorder refuses their calls anyway)."""
        out: dict[str, dict[str, Any]] = {}
        for model in sorted(set(models)):
            row = self._lookup(model)
            if row is None:
                continue
            values: dict[str, Any] = {}
            for f in fields(ModelPrice):
                value = getattr(row, f.name)
                if f.name in ("model", "source") or value is None:
                    continue
                values[f.name] = str(value) if isinstance(value, Decimal) else value
            out[model] = values
        return out

    @classmethod
    def from_snapshot(cls, snapshot: Mapping[str, Mapping[str, Any]]) -> PriceTable:
        """The table a :meth:`snapshot` recorded (nothing else: no file, no genai-prices)."""
        rows = {
            model: _price_from_mapping(model, values, "the run's log", None)
            for model, values in snapshot.items()
        }
        return cls(rows, use_genai_prices=False)

    def _lookup(self, model: str) -> ModelPrice | None:
        if model in self._rows:
            return self._rows[model]
        if not self._use_genai_prices:
            return None
        if model not in self._genai_cache:
            self._genai_cache[model] = _genai_price(model, self._as_of)
        return self._genai_cache[model]


def _pick(first: Decimal | None, fallback: Decimal) -> Decimal:
    return first if first is not None else fallback


def _ceil_micros(usd: Decimal) -> int:
    micros = (usd * MICROS_PER_USD).to_integral_value(rounding=ROUND_CEILING)
    return int(micros)


def _decimal(model: str, key: str, value: Any) -> Decimal:
    # Through str: a TOML float 0.1 must become Decimal("0.1"), not its binary expansion.
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ConfigError(f"price {key}={value!r} for model {model!r} must be a number")
    try:
        result = Decimal(str(value))
    except InvalidOperation as exc:
        raise ConfigError(f"price {key}={value!r} for model {model!r} is not a number") from exc
    return result


_DECIMAL_KEYS = {
    f.name
    for f in fields(ModelPrice)
    if f.name not in {"model", "source", "long_context_from_tokens"}
}


def _price_from_mapping(
    model: str, values: Mapping[str, Any], source: str, base: ModelPrice | None
) -> ModelPrice:
    unknown = set(values) - _DECIMAL_KEYS - {"long_context_from_tokens"}
    if unknown:
        raise ConfigError(
            f"unknown price field(s) {sorted(unknown)!r} for model {model!r}; "
            f"allowed: {sorted(_DECIMAL_KEYS | {'long_context_from_tokens'})!r}"
        )
    parsed: dict[str, Any] = {
        k: _decimal(model, k, v) for k, v in values.items() if k in _DECIMAL_KEYS
    }
    if "long_context_from_tokens" in values:
        threshold = values["long_context_from_tokens"]
        if isinstance(threshold, bool) or not isinstance(threshold, int):
            raise ConfigError(
                f"long_context_from_tokens={threshold!r} for model {model!r} must be an integer"
            )
        parsed["long_context_from_tokens"] = threshold
    if base is not None:
        return replace(base, model=model, source=source, **parsed)
    missing = [k for k in ("input_per_mtok", "output_per_mtok") if k not in parsed]
    if missing:
        raise ConfigError(
            f"price for new model {model!r} in {source} lacks {missing!r}; give at least "
            "input_per_mtok and output_per_mtok (USD per million tokens)"
        )
    return ModelPrice(model=model, source=source, **parsed)


def _read_price_file(path: Path) -> dict[str, ModelPrice]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read price file {str(path)!r}: {exc}; check the path") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"price file {str(path)!r} is not valid TOML: {exc}") from exc
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ConfigError(f"price file {str(path)!r}: [models] must be a table of model rows")
    rows: dict[str, ModelPrice] = {}
    for model, values in models.items():
        if not isinstance(values, dict):
            raise ConfigError(f"price file {str(path)!r}: row {model!r} must be a table")
        rows[model] = _price_from_mapping(model, values, path.name, None)
    return rows


def _genai_price(model: str, as_of: datetime) -> ModelPrice | None:
    """Our row from genai-prices' bundled snapshot, or ``None`` when it does not know ``model``."""
    from genai_prices import data_snapshot, types

    try:
        _provider, info = data_snapshot.get_snapshot().find_provider_model(model, None, None, None)
    except LookupError:
        return None
    prices = info.get_prices(as_of)

    def flat(value: object) -> tuple[Decimal | None, Decimal | None, int | None]:
        # Tiered rows: base rate, and the dearest tier as the long-context rate (never under).
        if isinstance(value, types.TieredPrices):
            if not value.tiers:
                return value.base, None, None
            return value.base, max(t.price for t in value.tiers), value.tiers[0].start
        return (value if isinstance(value, Decimal) else None), None, None

    inp, long_inp, threshold = flat(prices.input_mtok)
    out, long_out, _ = flat(prices.output_mtok)
    cached, long_cached, _ = flat(prices.cache_read_mtok)
    if inp is None or out is None:
        return None
    audio, _, _ = flat(prices.input_audio_mtok)
    video, _, _ = flat(prices.input_video_mtok)
    return ModelPrice(
        model=model,
        input_per_mtok=inp,
        output_per_mtok=out,
        cached_input_per_mtok=cached,
        input_audio_per_mtok=audio,
        input_video_per_mtok=video,
        source="genai-prices",
        long_context_from_tokens=threshold,
        long_input_per_mtok=long_inp,
        long_output_per_mtok=long_out,
        long_cached_input_per_mtok=long_cached,
    )
