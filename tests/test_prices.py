"""Price table: lookup order, rounding up, modality and cache rates, refusing unknown models."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from policies.prices import ModelPrice, PriceTable, UnknownPriceError, Usage, UsageError
from store.errors import ConfigError, PlaylistEvalError

DESIGN_DEFAULT_MODELS = [
    "gemini-3-flash-preview",
    "gemini-3.1-pro-preview",
    "gpt-5.4",
    "gpt-5.4-mini",
    "qwen-3.7-plus",
    "qwen3-vl-30b-a3b",
    "internvl3.5-8b",
]


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return PriceTable.load()


@pytest.mark.parametrize("model", DESIGN_DEFAULT_MODELS)
def test_every_design_default_model_has_a_row_in_our_file(table: PriceTable, model: str) -> None:
    price = table.price(model)
    assert price.source == "prices.toml"
    assert price.input_per_mtok > 0
    assert price.output_per_mtok > price.input_per_mtok


@pytest.mark.parametrize(
    ("model", "input_rate", "output_rate"),
    [
        ("gemini-2.5-flash", Decimal("0.3"), Decimal("2.5")),
        ("gpt-5-mini", Decimal("0.25"), Decimal("2")),
    ],
)
def test_models_missing_from_our_file_fall_back_to_genai_prices(
    table: PriceTable, model: str, input_rate: Decimal, output_rate: Decimal
) -> None:
    price = table.price(model)
    assert price.source == "genai-prices"
    assert (price.input_per_mtok, price.output_per_mtok) == (input_rate, output_rate)


@pytest.mark.parametrize("model", ["offline", "no-such-model-xyz", "dashscope/qwen-unknown"])
def test_unknown_model_is_refused_with_how_to_add_it(table: PriceTable, model: str) -> None:
    with pytest.raises(UnknownPriceError) as caught:
        table.price(model)
    assert repr(model) in str(caught.value)
    assert "prices.toml" in str(caught.value)
    assert isinstance(caught.value, ConfigError)
    with pytest.raises(UnknownPriceError):
        table.cost_micros(model, Usage(output_tokens=1))


def test_settings_override_beats_our_file_and_keeps_unset_rates() -> None:
    table = PriceTable.load(overrides={"gpt-5.4": {"output_per_mtok": 100.0}})
    price = table.price("gpt-5.4")
    assert price.output_per_mtok == Decimal("100.0")
    assert price.input_per_mtok == Decimal("2.50")
    assert price.source == "settings"


def test_override_can_add_a_new_model() -> None:
    table = PriceTable.load(
        overrides={"my-local-vlm": {"input_per_mtok": 0.1, "output_per_mtok": 1}}
    )
    assert table.cost_micros(
        "my-local-vlm", Usage(input_text_tokens=10**6, output_tokens=10**6)
    ) == (1_100_000)


def test_extra_file_rows_beat_our_file(tmp_path: Path) -> None:
    extra = tmp_path / "prices.toml"
    extra.write_text('[models."gemini-3-flash"]\ninput_per_mtok = 9\noutput_per_mtok = 10\n')
    price = PriceTable.load(extra_file=extra).price("gemini-3-flash")
    assert (price.input_per_mtok, price.output_per_mtok) == (Decimal(9), Decimal(10))


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("[models.x\n", "not valid TOML"),
        ('[models."x"]\ninput_per_mtok = 1\n', "output_per_mtok"),
        ('[models."x"]\ninput_per_mtok = 1\noutput_per_mtok = "abc"\n', "'abc'"),
        ('[models."x"]\ninput_per_mtok = -1\noutput_per_mtok = 1\n', "-1"),
        ('[models."x"]\ninput_per_mtok = 1\noutput_per_mtok = 1\ncolour = 2\n', "colour"),
        ('[models."x"]\ninput_per_mtok = 1\noutput_per_mtok = 1\nbatch_discount = 0\n', "batch"),
    ],
)
def test_bad_price_file_is_a_config_error_naming_the_problem(
    tmp_path: Path, content: str, fragment: str
) -> None:
    extra = tmp_path / "bad.toml"
    extra.write_text(content)
    with pytest.raises(ConfigError, match=fragment):
        PriceTable.load(extra_file=extra)


def test_missing_extra_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        PriceTable.load(extra_file=tmp_path / "absent.toml")


def _table(**rates: str) -> PriceTable:
    values = {"input_per_mtok": "1", "output_per_mtok": "10", **rates}
    return PriceTable.load(overrides={"m": values}, use_genai_prices=False)  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("usage", "rates", "batch", "micros"),
    [
        (Usage(), {}, False, 0),
        (Usage(input_text_tokens=1), {}, False, 1),  # 1e-6 USD: exactly one micro
        (Usage(input_text_tokens=1), {"input_per_mtok": "0.01"}, False, 1),  # ceil, never 0
        (Usage(input_text_tokens=1_000_000, output_tokens=1_000_000), {}, False, 11_000_000),
        (Usage(input_text_tokens=1_000_000, output_tokens=1_000_000), {}, True, 5_500_000),
        (Usage(input_image_tokens=1000), {}, False, 1000),  # images at the text rate
        (Usage(input_video_tokens=1000), {"input_video_per_mtok": "2"}, False, 2000),
        (Usage(input_audio_tokens=1000), {"input_audio_per_mtok": "3"}, False, 3000),
        (Usage(input_audio_tokens=1000), {}, False, 1000),  # no audio rate: text rate
        # 600 of 1000 text tokens cached at 0.1: 600*0.1 + 400*1 = 460
        (
            Usage(input_text_tokens=1000, cached_input_tokens=600),
            {"cached_input_per_mtok": "0.1"},
            False,
            460,
        ),
        # no cached rate known: cached tokens bill at the full rate
        (Usage(input_text_tokens=1000, cached_input_tokens=600), {}, False, 1000),
        # cached tokens come out of the cheapest modality first: 100 text cached, audio full
        (
            Usage(input_text_tokens=100, input_audio_tokens=100, cached_input_tokens=100),
            {"cached_input_per_mtok": "0", "input_audio_per_mtok": "5"},
            False,
            500,
        ),
    ],
)
def test_cost_is_decimal_arithmetic_rounded_up_to_whole_micros(
    usage: Usage, rates: dict[str, str], batch: bool, micros: int
) -> None:
    assert _table(**rates).cost_micros("m", usage, batch=batch) == micros


@pytest.mark.parametrize(
    ("input_tokens", "micros"),
    [
        (200_000, 200_000 * 2 + 1000 * 12),  # at the threshold: base rates
        (200_001, 200_001 * 4 + 1000 * 18),  # past it: the whole request at long rates
    ],
)
def test_long_context_cliff_bills_the_whole_request_at_the_long_rate(
    table: PriceTable, input_tokens: int, micros: int
) -> None:
    usage = Usage(input_video_tokens=input_tokens, output_tokens=1000)
    assert table.cost_micros("gemini-3.1-pro", usage) == micros


def test_genai_prices_tiers_become_the_long_context_rate(table: PriceTable) -> None:
    price = table.price("gemini-3.1-pro-preview")
    assert price.long_context_from_tokens == 200_000
    assert price.long_input_per_mtok == Decimal(4)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"input_text_tokens": -1},
        {"output_tokens": -5},
        {"input_text_tokens": 10, "cached_input_tokens": 11},
    ],
)
def test_impossible_usage_is_a_usage_error(kwargs: dict[str, int]) -> None:
    with pytest.raises(UsageError) as caught:
        Usage(**kwargs)
    assert isinstance(caught.value, PlaylistEvalError)


def test_model_price_rejects_negative_rate() -> None:
    with pytest.raises(ConfigError, match="input_per_mtok"):
        ModelPrice("m", Decimal(-1), Decimal(1))


def test_price_file_ships_beside_the_module() -> None:
    import policies.prices

    assert (Path(policies.prices.__file__).parent / "prices.toml").is_file()
