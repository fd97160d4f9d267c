"""The live curate panel fits an 80-column terminal: no line wider than 80, no cell wrapped
onto a second line, with figures as large as a campaign's and long gate names."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from playlisteval.curation_display import CurationSnapshot, render

#: A campaign's figures: five-digit counts, seven-digit calls, the longest gate names, every
#: kind of end and of call shown.
BUSY = CurationSnapshot(
    total=12_600,
    ended={
        "accepted": 4_120,
        "discarded": 970,
        "stopped (budget)": 31,
        "stopped (provider)": 7,
        "stopped (unrecorded)": 3,
    },
    in_flight=512,
    spent_micros=123_456_789,
    cap_micros=500_000_000,
    calls_made=1_234_567,
    calls_replayed=23_456,
    calls_failed=123,
    calls_refused=45,
    rejections={
        "phase 2 textual_undetectability": 1_234,
        "phase 1 transcript_test": 321,
        "phase 2 visual_detectability": 12,
        "phase 1 parametric_test": 4,
    },
    elapsed_s=36_000.0,
    calls_per_s=12.3,
    eta_s=72_000.0,
    offline=True,
)

#: Each row as it must read, label and figure on one line.
ROWS = [
    ("seeds", "5131 of 12600 done · 512 in flight · 6957 queued"),
    ("stopped (unrecorded)", "3"),
    ("spend (USD)", "123.4568 of 500.0000 (25%)"),
    ("model calls", "1234567 made · 12.3/s"),
    ("from the log", "23456"),
    ("refused by the cap", "45"),
    ("elapsed · ETA", "10:00:00 · 20:00:00"),
    ("rejected by phase 2 textual_undetectability", "1234"),
]


def _drawn(snapshot: CurationSnapshot, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(render(snapshot))
    return console.export_text().splitlines()


def test_the_panel_fits_80_columns_with_every_row_on_one_line() -> None:
    lines = _drawn(BUSY, 80)
    assert max(map(len, lines)) <= 80
    for label, value in ROWS:
        assert any(label in line and line.rstrip().endswith(value) for line in lines), (
            label,
            "\n".join(lines),
        )
    assert "Curation (offline provider: a harness, not model quality)" in "\n".join(lines)


@pytest.mark.parametrize("width", [60, 80, 100])
def test_no_cell_wraps_at_any_width(width: int) -> None:
    """As many lines as at a width with room to spare: no row took a second line (a cell that
    cannot fit a very narrow terminal is cut with "…" instead)."""
    lines = _drawn(BUSY, width)
    assert len(lines) == len(_drawn(BUSY, 200))
    assert max(map(len, lines)) <= width


def test_a_quiet_run_keeps_its_title_on_one_line() -> None:
    quiet = CurationSnapshot(
        total=4,
        ended={},
        in_flight=1,
        spent_micros=0,
        cap_micros=None,
        calls_made=0,
        calls_replayed=0,
        calls_failed=0,
        calls_refused=0,
        rejections={},
        elapsed_s=1.0,
        calls_per_s=None,
        eta_s=None,
        offline=True,
    )
    lines = _drawn(quiet, 80)
    assert any(
        "Curation (offline provider: a harness, not model quality)" in line for line in lines
    )
    assert any(line.rstrip().endswith("0.0000 (no cap)") for line in lines)


def test_a_real_local_model_in_an_offline_run_is_named_on_a_row_of_its_own() -> None:
    """An offline run whose textual ranker is a real model run here: the title still says the
    run is the harness's, and a row names the real model, within 80 columns, on one line."""
    mixed = replace(BUSY, real_local=("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"))
    lines = _drawn(mixed, 80)
    assert max(map(len, lines)) <= 80
    assert len(lines) == len(_drawn(BUSY, 80)) + 1
    assert any(
        "real local model" in line
        and line.rstrip().endswith("qwen2.5-coder-1.5b, qwen2.5-coder-0.5b")
        for line in lines
    ), "\n".join(lines)
    assert "real local model" not in "\n".join(_drawn(BUSY, 80))
