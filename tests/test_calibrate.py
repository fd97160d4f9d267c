"""Seed bands per embedder, and ``seeds --calibrate``: the same-domain pair cosines of the embedder
in use, the shares in the band and at the duplicate threshold, and a band suggested from the
catalogue (related: above 95 % of cross-domain pairs; distinct: the paper's margin below
duplicates), with warnings when a band makes almost no seeds or takes almost every pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from playlisteval.app import App, index_config, seed_band
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from tools.index.calibration import PAPER_BAND, PairCosines, SeedBand, calibrate, pair_cosines
from tools.index.seeding import SegmentRef


def test_pairs_are_split_by_domain_and_pairs_within_one_video_left_out() -> None:
    refs = [
        SegmentRef("a1-s0", "a1", "cooking"),
        SegmentRef("a1-s1", "a1", "cooking"),
        SegmentRef("a2-s0", "a2", "cooking"),
        SegmentRef("b1-s0", "b1", "astronomy"),
    ]
    vectors = np.array([[1, 0], [0.6, 0.8], [0.8, 0.6], [0, 2]], dtype=np.float32)
    found = pair_cosines(refs, vectors)
    assert sorted(np.round(found.same_domain, 3)) == [0.8, 0.96]  # a1-s0~a2, a1-s1~a2
    assert sorted(np.round(found.cross_domain, 3)) == [0.0, 0.6, 0.8]
    assert found.domains == 2


def _cosines(same: list[float], cross: list[float]) -> PairCosines:
    return PairCosines(np.array(same, np.float32), np.array(cross, np.float32), 2 if cross else 1)


SPREAD = [0.3, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.85, 0.92, 0.97]


@pytest.mark.parametrize(
    ("same", "cross", "band", "warning"),
    [
        pytest.param(SPREAD, [0.1, 0.2, 0.25, 0.3], (0.30, 0.90), None, id="related-but-distinct"),
        pytest.param(SPREAD, [], (0.40, 0.90), "one domain only", id="no-unrelated-baseline"),
        pytest.param(
            [0.1, 0.12, 0.2] * 10, [0.3] * 20, (0.30, 0.90), "almost no seeds", id="almost-none"
        ),
        pytest.param(
            [0.5, 0.6, 0.7] * 10, [0.1] * 20, (0.10, 0.90), "filters almost nothing", id="all"
        ),
        pytest.param(SPREAD, [0.93] * 5, (0.40, 0.90), "no band fits", id="no-room-for-a-band"),
        pytest.param(
            [0.35, 0.4, 0.45], [0.2, 0.5, 0.55], (0.55, 0.90), "barely tells", id="blurred-domains"
        ),
    ],
)
def test_the_suggested_band_and_its_warnings(
    same: list[float], cross: list[float], band: tuple[float, float], warning: str | None
) -> None:
    found = calibrate(_cosines(same, cross), PAPER_BAND)
    assert (found.suggested.min_cosine, found.suggested.max_cosine) == pytest.approx(band)
    assert found.pairs == len(same)
    if warning is None:
        assert found.warnings == []
    else:
        assert any(warning in text for text in found.warnings), found.warnings


def test_shares_quantiles_and_histogram_count_the_same_domain_pairs() -> None:
    found = calibrate(_cosines(SPREAD, [0.1, 0.2]), SeedBand(0.5, 0.8, 0.95, "test"))
    assert found.in_current == pytest.approx(0.5)  # 0.5 0.55 0.6 0.7 0.8
    assert found.duplicates == pytest.approx(0.1)  # 0.97
    assert found.quantiles[0.5] == pytest.approx(np.quantile(SPREAD, 0.5))
    assert sum(count for _, _, count in found.histogram) == len(SPREAD)
    assert found.histogram[0][0] == pytest.approx(0.30)
    assert found.histogram[-1][1] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("embedder", "seeds", "expected"),
    [
        pytest.param("qwen3-vl-embedding", {}, (0.40, 0.90, 0.95), id="paper-band-for-qwen"),
        pytest.param("minilm-text+frame-stats", {}, (0.33, 0.90, 0.95), id="calibrated-offline"),
        pytest.param(
            "minilm-text+frame-stats",
            {"seed_min_cosine": 0.5},
            (0.5, 0.90, 0.95),
            id="a-setting-wins",
        ),
    ],
)
def test_each_embedder_seeds_with_its_stored_band_unless_the_settings_say(
    tmp_path: Path, embedder: str, seeds: dict[str, float], expected: tuple[float, ...]
) -> None:
    settings = load_settings(tmp_path, index={"embedder": embedder}, seeds=seeds)
    config = index_config(settings)
    assert (config.seed_min_cosine, config.seed_max_cosine, config.duplicate_cosine) == expected
    assert (seed_band(settings).source == "the [seeds] settings") is bool(seeds)


def test_calibrate_on_the_demo_catalogue_prints_the_distribution_and_a_band(
    workspace: Path,
) -> None:
    with App(load_settings(workspace)) as app:
        before = app.catalog.seeds()
    result = CliRunner().invoke(cli_app, ["seeds", "--calibrate", "--home", str(workspace)])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "seed band calibration for embedder minilm-text+frame-stats" in out
    assert "quantiles: 5% " in out
    assert "cross-domain pairs (unrelated): " in out
    assert "band in force [0.33, 0.90]" in out
    assert "at or above the duplicate threshold 0.95: " in out  # the planted copy
    assert "suggested band [0.33, 0.90]" in out
    assert "seed_min_cosine = 0.33" in out
    assert "0.60-0.65 " in out  # a histogram row
    with App(load_settings(workspace)) as app:
        assert app.catalog.seeds() == before  # calibrating changes nothing
