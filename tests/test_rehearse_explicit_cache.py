"""The rehearsal's explicit-cache what-if: DashScope's documented 125 % write and 10 % hit rates
priced over recorded calls, one video prefix a seed and model, replayed calls costing nothing."""

from __future__ import annotations

from decimal import Decimal

import pytest

from playlisteval.runs.rehearsing import (
    EXPLICIT_BEST,
    EXPLICIT_WORST,
    explicit_cache_scenarios,
)
from policies.prices import PriceTable
from store.events import CallRecorded

QWEN = "qwen-3.7-plus"
VIDEO = {"video": 243_000, "text": 12_000, "output": 150}


def _table() -> PriceTable:
    return PriceTable.load(use_genai_prices=False)


def _call(model: str, usage: dict[str, int], cost: int, *, replayed: bool = False) -> CallRecorded:
    return CallRecorded(
        call_id="c",
        key="k",
        role="sufficiency",
        model=model,
        response={},
        cost_micros=cost,
        offline=True,
        replayed=replayed,
        usage=usage,
    )


def test_the_qwen_row_carries_model_studios_explicit_cache_multipliers() -> None:
    """Creating the cache bills 125 % of the input price and a hit 10 % (Model Studio,
    "Context cache"); the implicit cache's 20 % stays the row's ordinary cached rate."""
    row = _table().price(QWEN)
    assert row.cache_write_per_mtok == row.input_per_mtok * Decimal("1.25")
    assert row.explicit_cached_input_per_mtok == row.input_per_mtok * Decimal("0.10")
    assert row.cached_input_per_mtok == row.input_per_mtok * Decimal("0.20")


def test_a_written_prefix_bills_its_video_at_the_write_rate_and_a_read_at_the_hit_rate() -> None:
    table = _table()
    listed = table.repriced(QWEN, VIDEO, batch=False)
    written = table.repriced_explicit(QWEN, VIDEO, write=True)
    read = table.repriced_explicit(QWEN, VIDEO, write=False)
    # 243,000 video tokens: 0.0972 USD at 0.40, 0.1215 at 0.50 (written), 0.00972 at 0.04 (read).
    assert written is not None
    assert read is not None
    assert written - listed == 24_300
    assert listed - read == 87_480


def test_a_model_without_explicit_rates_is_not_repriced() -> None:
    assert _table().repriced_explicit("gemini-3-flash-preview", VIDEO, write=True) is None


def test_each_seed_writes_its_prefix_once_in_the_best_case_and_at_every_call_in_the_worst() -> None:
    table = _table()
    text_only = {"text": 5_000, "output": 100}
    calls = [
        ("seed-a", _call(QWEN, VIDEO, 100_000)),
        ("seed-a", _call("gpt-5.4", text_only, 7_000)),
        ("seed-a", _call(QWEN, VIDEO, 100_000)),
        ("seed-a", _call(QWEN, VIDEO, 100_000, replayed=True)),  # served from the log: free
        ("seed-b", _call(QWEN, VIDEO, 100_000)),
    ]
    write = table.repriced_explicit(QWEN, VIDEO, write=True)
    read = table.repriced_explicit(QWEN, VIDEO, write=False)
    assert write is not None
    assert read is not None
    scenarios = explicit_cache_scenarios(table, calls)
    assert scenarios[EXPLICIT_BEST] == 7_000 + 2 * write + read
    assert scenarios[EXPLICIT_WORST] == 7_000 + 3 * write


@pytest.mark.parametrize(
    "calls",
    [
        [],
        [("seed-a", _call("gpt-5.4", {"text": 5_000}, 7_000))],
        [("seed-a", _call("gemini-3-flash-preview", VIDEO, 50_000))],
    ],
)
def test_no_what_if_is_shown_when_no_call_would_be_priced_differently(
    calls: list[tuple[str, CallRecorded]],
) -> None:
    assert explicit_cache_scenarios(_table(), calls) == {}
