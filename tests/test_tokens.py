"""Counting a call's worst case before it is made, per provider family."""

from __future__ import annotations

import math

import pytest

from policies.prices import PriceTable, Usage
from policies.tokens import (
    CALL_OVERHEAD_TOKENS,
    OPENAI_IMAGE_RULES,
    CallShape,
    estimate_input_tokens,
    gemini_image_tokens,
    openai_image_rule,
    openai_image_tokens,
    provider_family,
    qwen_image_tokens,
    text_tokens,
    worst_case_micros,
)
from store.errors import ConfigError


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return PriceTable.load()


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gemini-3-flash", "gemini"),
        ("google/gemini-3.1-pro", "gemini"),
        ("gpt-5.4-mini", "openai"),
        ("o4-mini", "openai"),
        ("qwen-3.7-plus", "qwen"),
        ("qwen3-vl-30b-a3b", "qwen"),
        ("internvl3.5-8b", "qwen"),
        ("my-model", None),
    ],
)
def test_provider_family_from_model_id(model: str, family: str | None) -> None:
    assert provider_family(model) == family


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1024, 1024), 765),  # OpenAI's worked example: 4 tiles
        ((2048, 4096), 1105),  # OpenAI's worked example: 6 tiles after both rescales
        ((512, 512), 255),  # small images are never scaled up: 1 tile
    ],
)
def test_gpt_4o_images_follow_the_512_px_tile_rule(size: tuple[int, int], tokens: int) -> None:
    assert openai_image_tokens(*size, model="gpt-4o") == tokens


@pytest.mark.parametrize(
    ("model", "size", "tokens"),
    [
        # The guide's worked examples for a 1,536-patch budget: 1024 patches; 1800x2400 is
        # 4275 patches, scaled to 1056x1408 = 33 x 44 = 1452; then the model's multiplier.
        ("gpt-5.4-mini", (1024, 1024), math.ceil(1024 * 1.62)),
        ("gpt-5.4-mini", (1800, 2400), math.ceil(1452 * 1.62)),
        ("gpt-5.4-nano", (1800, 2400), math.ceil(1452 * 2.46)),
        ("o4-mini", (1800, 2400), math.ceil(1452 * 1.72)),
        ("gpt-5.2", (1800, 2400), 1452),
        # gpt-5.4 sizes ``auto`` as ``high``: 2,500 patches, multiplier 1.
        ("gpt-5.4", (1280, 720), 40 * 23),
        ("gpt-5.4", (2048, 4096), 32 * 64),  # fitted within 2048 px first: 1024x2048
        ("gpt-5.4", (1800, 2400), 2451),  # past 2,500 patches: scaled to 43 x 57 patches
        # gpt-5 keeps the tile rule at 70 + 140 a tile.
        ("gpt-5", (1024, 1024), 70 + 140 * 4),
    ],
)
def test_openai_images_follow_each_models_published_rule(
    model: str, size: tuple[int, int], tokens: int
) -> None:
    assert openai_image_tokens(*size, model=model) == tokens


@pytest.mark.parametrize("model", ["openai/gpt-5.4-mini", "gpt-5.4-mini-2026-03-17"])
def test_openai_image_rule_reads_the_id_past_a_vendor_prefix_and_a_snapshot_date(
    model: str,
) -> None:
    assert openai_image_rule(model) == openai_image_rule("gpt-5.4-mini")
    assert openai_image_tokens(1280, 720, model=model) == math.ceil(920 * 1.62)


@pytest.mark.parametrize("size", [(1280, 720), (640, 360), (1800, 2400), (4000, 300)])
def test_an_unlisted_openai_id_counts_the_dearest_rule(size: tuple[int, int]) -> None:
    """gpt-4o-mini aside (33 times gpt-4o's counts: its own way of pricing images)."""
    assert openai_image_rule("gpt-9-preview") is None
    counted = openai_image_tokens(*size, model="gpt-9-preview")
    for name in OPENAI_IMAGE_RULES.keys() - {"gpt-4o-mini"}:
        assert counted >= openai_image_tokens(*size, model=name), name


@pytest.mark.parametrize(
    ("size", "tokens"),
    [((1280, 720), 46 * 26), ((28, 28), 4), ((10, 10), 4), ((56, 29), 2 * 2)],
)
def test_qwen_images_count_28_px_patches_with_a_minimum_of_4(
    size: tuple[int, int], tokens: int
) -> None:
    assert qwen_image_tokens(*size) == tokens


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((384, 384), 1120),  # one 258-token image, but Gemini 3 high resolution costs 1120
        ((1536, 1536), 1120),  # 4 tiles x 258 = 1032 < 1120
        ((3072, 3072), 16 * 258),  # 16 tiles
    ],
)
def test_gemini_images_take_the_dearer_of_tiles_and_high_resolution(
    size: tuple[int, int], tokens: int
) -> None:
    assert gemini_image_tokens(*size) == tokens


@pytest.mark.parametrize(
    ("chars", "tokens"),
    [(0, CALL_OVERHEAD_TOKENS), (4, 2 + CALL_OVERHEAD_TOKENS), (4000, 1250 + CALL_OVERHEAD_TOKENS)],
)
def test_text_is_chars_over_four_rounded_up_plus_margin(chars: int, tokens: int) -> None:
    assert text_tokens(chars) == tokens


@pytest.mark.parametrize(
    ("model", "resolution", "expected", "per_frame"),
    [
        ("gemini-2.5-flash", "default", False, 258),
        ("gemini-2.5-flash", "low", False, 66),
        ("gemini-3-flash", "default", False, 280),  # Gemini 3's worst case: high resolution
        ("gemini-3-flash", "default", True, 70),  # its default for video
        ("gemini-3.1-pro", "high", True, 280),
    ],
)
def test_gemini_native_video_counts_frames_at_the_media_resolution_and_audio_per_second(
    model: str, resolution: str, expected: bool, per_frame: int
) -> None:
    shape = CallShape(
        model,
        video_seconds=600,
        audio_seconds=600,
        video_fps=0.5,
        media_resolution=resolution,  # type: ignore[arg-type]
    )
    usage = estimate_input_tokens(shape, expected=expected)
    assert usage.input_video_tokens == 300 * per_frame
    assert usage.input_audio_tokens == 600 * 32
    assert usage.output_tokens == 0


@pytest.mark.parametrize(
    ("model", "per_frame"),
    [("qwen-3.7-plus", 46 * 26), ("gpt-5.4", 40 * 23), ("gpt-5.4-mini", math.ceil(920 * 1.62))],
)
def test_video_for_other_families_is_counted_as_16_9_frames(model: str, per_frame: int) -> None:
    usage = estimate_input_tokens(CallShape(model, video_seconds=20, video_fps=0.5))
    assert usage.input_video_tokens == 10 * per_frame


def test_expected_qwen_video_merges_frame_pairs_on_32_pixel_patches() -> None:
    shape = CallShape("qwen-3.7-plus", video_seconds=40, video_fps=0.5, video_height=480)
    expected = estimate_input_tokens(shape, expected=True).input_video_tokens
    assert expected == 10 * (15 * 27)  # 20 frames → 10 merged pairs of a 854x480 grid
    assert estimate_input_tokens(shape).input_video_tokens == 20 * (18 * 31)  # worst case
    assert expected < estimate_input_tokens(shape).input_video_tokens


def test_unknown_family_takes_the_largest_count_of_all_rules() -> None:
    shape = CallShape("my-model", text_chars=100, video_seconds=60, images=((1280, 720),))
    counted = estimate_input_tokens(shape).input_tokens
    for known in ("gemini-3-flash", "gpt-5.4", "qwen-3.7-plus"):
        other = CallShape(known, text_chars=100, video_seconds=60, images=((1280, 720),))
        assert counted >= estimate_input_tokens(other).input_tokens


@pytest.mark.parametrize(
    ("rule", "like"),
    [("gemini", "gemini-2.5-flash"), ("qwen", "qwen-3.7-plus")],
)
def test_a_named_token_rule_counts_as_the_ids_of_that_rule(rule: str, like: str) -> None:
    """A family's token rule wins over the id (an id that says nothing counts by the rule;
    OpenAI's rule is per model, so an unlisted id counts its dearest: the test below)."""
    kwargs: dict[str, object] = {"text_chars": 100, "video_seconds": 60, "images": ((1280, 720),)}
    ruled = CallShape("my-model", token_rule=rule, **kwargs)  # type: ignore[arg-type]
    named = CallShape(like, **kwargs)  # type: ignore[arg-type]
    assert estimate_input_tokens(ruled) == estimate_input_tokens(named)
    assert estimate_input_tokens(ruled, expected=True) == estimate_input_tokens(
        named, expected=True
    )


def test_an_openai_rule_on_an_unlisted_id_counts_its_dearest() -> None:
    """Named by an OpenAI family, an id the guide does not list counts as its dearest rule."""
    kwargs: dict[str, object] = {"text_chars": 100, "video_seconds": 60, "images": ((1280, 720),)}
    ruled = estimate_input_tokens(CallShape("my-model", token_rule="openai", **kwargs))  # type: ignore[arg-type]
    assert ruled.input_image_tokens == openai_image_tokens(1280, 720, model="my-model")
    assert ruled.input_video_tokens == 30 * openai_image_tokens(1280, 720, model="my-model")
    for listed in ("gpt-5.4", "gpt-5.4-mini"):
        named = estimate_input_tokens(CallShape(listed, **kwargs))  # type: ignore[arg-type]
        assert ruled.input_tokens >= named.input_tokens


def test_an_unknown_token_rule_is_a_config_error_naming_the_rules() -> None:
    with pytest.raises(ConfigError, match=r"no token rule 'tiktok'.*gemini, openai, qwen"):
        CallShape("my-model", token_rule="tiktok")


def test_worst_case_is_counted_input_plus_max_output_at_list_price(table: PriceTable) -> None:
    shape = CallShape("gpt-5.4-mini", text_chars=4000, max_output_tokens=2000)
    usage = Usage(input_text_tokens=text_tokens(4000), output_tokens=2000)
    assert worst_case_micros(table, shape) == table.cost_micros("gpt-5.4-mini", usage)
    assert worst_case_micros(table, shape, batch=True) < worst_case_micros(table, shape)


@pytest.mark.parametrize(
    "actual",
    [
        Usage(input_text_tokens=text_tokens(4000) - CALL_OVERHEAD_TOKENS, output_tokens=2000),
        Usage(input_text_tokens=1000, cached_input_tokens=1000, output_tokens=2000),
    ],
)
def test_worst_case_is_never_below_a_plausible_actual(table: PriceTable, actual: Usage) -> None:
    shape = CallShape("gemini-3.1-pro", text_chars=4000, max_output_tokens=2000)
    assert worst_case_micros(table, shape) >= table.cost_micros("gemini-3.1-pro", actual)


def test_paper_scale_generator_call_costs_cents_not_dollars(table: PriceTable) -> None:
    """Two 20-minute segments at 0.5 fps with audio: the bill the paper calls > 90 % video."""
    shape = CallShape(
        "gemini-3-flash",
        text_chars=20_000,
        video_seconds=2400,
        audio_seconds=2400,
        max_output_tokens=8192,
    )
    micros = worst_case_micros(table, shape)
    assert 100_000 < micros < 1_000_000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"text_chars": -1},
        {"video_seconds": -2.0},
        {"video_fps": 0.0},
        {"video_height": 0},
        {"audio_seconds": float("nan")},
        {"max_output_tokens": 0},
        {"images": ((0, 10),)},
    ],
)
def test_impossible_call_shape_is_a_config_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="gemini-3-flash"):
        CallShape("gemini-3-flash", **kwargs)  # type: ignore[arg-type]


def test_unpriced_model_fails_before_any_reservation(table: PriceTable) -> None:
    from policies.prices import UnknownPriceError

    with pytest.raises(UnknownPriceError):
        worst_case_micros(table, CallShape("offline", text_chars=10))
