"""Backfill after near-duplicates: a domain that ``index`` leaves below its target (``add
--target-hours``, recorded in the catalogue) takes the next videos of its playlists from
reserve, indexes them, drops near-duplicates again and seeds; a domain whose reserve runs out
stays short and ``index`` says so; a run killed midway is taken up by the next ``index``. On
real files: the synthetic demo playlist of one domain, its planted duplicate and one newer
episode after it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.export import export_benchmark
from playlisteval.report.rows import backfill_sentence
from playlisteval.settings import SETTINGS_FILE, load_settings
from policies.pairs import SelectedPair
from store.catalog import DUPLICATE, FAILED, INDEXED, LISTED, RESERVE, BackfillRow, VideoRow
from tests.workspaces import copy_workspace
from tools.index.indexer import plan_backfill

# Each demo episode is 4 scenes of 15 s: one minute. Episodes 1-3, the planted copy (4) and one
# newer episode (5): a 3.5-minute target keeps 1-4 and holds 5 in reserve.
TARGET_H = 3.5 / 60
SETTINGS = (
    "[index]\n"
    "segment_min_minutes = 1.0\n"
    "segment_target_minutes = 1.0\n"
    "segment_max_minutes = 2.0\n"
    "embed_batch_size = 1\n"
    'local_transcriber = "none"\n'
)


@pytest.fixture(scope="module")
def playlist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One domain (cooking) of three episodes, the planted copy and one newer episode."""
    from tools.offline.synthetic import make_demo_playlist

    return make_demo_playlist(
        tmp_path_factory.mktemp("backfill-playlist"),
        domains=("cooking",),
        videos_per_domain=3,
        scenes_per_video=4,
        newer_episodes=1,
    )


def _truth(manifest: Path) -> tuple[str, str, str]:
    """The planted duplicate, its original and the newer episode, from the ground truth."""
    truth = json.loads((manifest.parent / "ground_truth.json").read_text())
    newer = [v["id"] for v in truth["videos"]][-1]
    return truth["duplicate"]["id"], truth["duplicate"]["duplicate_of"], newer


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / SETTINGS_FILE).write_text(SETTINGS)
    return home


def _cli(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli_app, [*args, "--home", str(home)])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def backfilled(playlist: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A workspace of the playlist added with a 3.5-minute target (episode 5 in reserve, the
    target recorded), then indexed; and what ``index`` printed."""
    home = _home(tmp_path_factory.mktemp("backfilled"))
    newer = _truth(playlist)[2]
    added = _cli(home, "add", str(playlist), "--target-hours", f"{TARGET_H!r}")
    assert f"reserve {newer}" in " ".join(added.split())
    with App(load_settings(home)) as app:
        assert app.catalog.domain_targets() == {"cooking": TARGET_H}
        assert app.catalog.video(newer).status == RESERVE  # type: ignore[union-attr]
    return home, " ".join(_cli(home, "index").split())


def test_index_backfills_the_duplicates_gap_from_reserve(
    playlist: Path, backfilled: tuple[Path, str], tmp_path: Path
) -> None:
    """The planted copy is dropped, the newer episode held in reserve is indexed in its place,
    the domain is back at its target in seeding, and all of it is recorded and said."""
    dup, original, newer = _truth(playlist)
    home = tmp_path / "ws"
    copy_workspace(backfilled[0], home)
    said = backfilled[1]

    with App(load_settings(home)) as app:
        catalog = app.catalog
        assert catalog.video(dup).status == DUPLICATE  # type: ignore[union-attr]
        assert catalog.video(newer).status == INDEXED  # type: ignore[union-attr]
        [row] = catalog.backfills()
        assert (row.video_id, row.domain, row.replaces) == (newer, "cooking", dup)
        assert f"near-duplicate of {original!r}" in row.reason
        [hours] = catalog.domain_hours()
        assert hours.hours_in_seeding >= TARGET_H
        assert hours.hours_reserve == 0.0
        assert hours.videos_backfilled == 1
        newer_segments = {s.id for s in catalog.segments(video_ids=[newer])}
        assert newer_segments
        seeded = {s.segment_a for s in catalog.seeds()} | {s.segment_b for s in catalog.seeds()}
        assert seeded & newer_segments, "the backfilled video takes part in seeding"
        in_search = sum(len(catalog.chunks(v.id)) for v in catalog.videos(statuses=[INDEXED]))
        assert app.vectors.count(app.indexer().config.chunk_collection) == in_search
    assert f"backfill {newer}: for {dup!r}" in said
    assert "backfilled cooking: 1 video," in said
    assert "(1 in all)" in said
    assert "short" not in said

    # Indexed again, nothing changes: the gap is filled, the reserve is empty.
    again = " ".join(_cli(home, "index").split())
    assert "backfilled cooking: 0 videos, 0.00 h from reserve this run (1 in all)" in again
    with App(load_settings(home)) as app:
        assert len(app.catalog.backfills()) == 1


def test_a_domain_whose_reserve_runs_out_stays_short_and_is_said_so(
    playlist: Path, tmp_path: Path
) -> None:
    """A 4.5-minute target takes all five episodes in; once the copy is dropped the domain has
    four minutes and nothing in reserve: it stays short, and ``index`` says what to do."""
    dup, _original, _newer = _truth(playlist)
    home = _home(tmp_path)
    _cli(home, "add", str(playlist), "--target-hours", f"{4.5 / 60!r}")
    said = " ".join(_cli(home, "index").split())
    with App(load_settings(home)) as app:
        assert app.catalog.video(dup).status == DUPLICATE  # type: ignore[union-attr]
        assert app.catalog.backfills() == []
        [hours] = app.catalog.domain_hours()
        assert hours.hours_in_seeding < 4.5 / 60
    assert "backfilled cooking: 0 videos" in said
    assert "short cooking:" in said
    assert "its reserve is used up" in said
    assert "--target-hours 0.075" in said


def test_the_dataset_card_and_the_report_say_how_many_videos_were_backfilled(
    playlist: Path, backfilled: tuple[Path, str], tmp_path: Path
) -> None:
    """An offline run over the backfilled workspace, exported: the card's table, the
    benchmark.json record and the report's dataset line each say one video was backfilled."""
    home = tmp_path / "ws"
    copy_workspace(backfilled[0], home)
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=2)
        assert report.accepted, "the offline run should accept a seed"
        pairs = [
            SelectedPair(
                pair_id=f"pair-{seed_id}-5-1",
                run_id=report.run_id,
                seed_id=seed_id,
                domain="cooking",
                chosen_rating=5,
                rejected_rating=1,
                judges=(),
            )
            for seed_id in sorted(report.accepted)
        ]
        out = export_benchmark(app, tmp_path / "bench", pairs).path
    card = (out / "README.md").read_text(encoding="utf-8")
    [row] = [line for line in card.splitlines() if line.startswith("| cooking | 0.0583333 |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3:] == ["1", "0.02"], row  # backfilled videos, backfilled hours
    assert float(cells[2]) >= TARGET_H
    assert "short" not in cells[2]
    backfill = json.loads((out / "benchmark.json").read_text())["backfill"]
    assert backfill["cooking"]["backfilled_videos"] == 1
    dup, _original, newer = _truth(playlist)
    assert list(backfill["cooking"]["backfilled_for"].items()) == [(newer, dup)]
    line = backfill_sentence(backfill)
    assert line.endswith("dropped: cooking 1 video (0.02 h)"), line
    assert "not recorded" in backfill_sentence(None)


KILL_SCRIPT = """
import os, signal, sys
from playlisteval import runs
from playlisteval.app import App
from playlisteval.export import export_benchmark
from playlisteval.report.rows import backfill_sentence
from playlisteval.settings import load_settings
from tools.index.indexer import SilentProgress
home, manifest, target, newer = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]

class KillOnBackfill(SilentProgress):
    def advance(self, chunks, video=None):
        if video is not None and video.id == newer:  # one chunk of the backfill stored
            os.kill(os.getpid(), signal.SIGKILL)

with App(load_settings(home)) as app:
    indexer = app.indexer(KillOnBackfill())
    indexer.add(manifest, domain=None, target_hours=target)
    indexer.prepare_media()
    indexer.run()
"""


def test_a_backfill_killed_midway_is_taken_up_by_the_next_index(
    playlist: Path, tmp_path: Path
) -> None:
    """Killed (SIGKILL) once the backfilled episode's first chunk is stored: the next
    ``index`` finishes it without computing that chunk again, and records it once."""
    dup, _original, newer = _truth(playlist)
    home = _home(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PLAYLISTEVAL_HOME"}
    done = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, str(home), str(playlist), repr(TARGET_H), newer],
        env=env,
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    with App(load_settings(home)) as app:
        [row] = app.catalog.backfills()
        assert row.video_id == newer
        assert app.catalog.video(newer).status != INDEXED  # type: ignore[union-attr]
        stored = len(app.catalog.chunks(newer))
        assert stored >= 1
        before = app.catalog.chunk_count()

    said = " ".join(_cli(home, "index").split())

    with App(load_settings(home)) as app:
        catalog = app.catalog
        assert catalog.video(newer).status == INDEXED  # type: ignore[union-attr]
        assert catalog.video(dup).status == DUPLICATE  # type: ignore[union-attr]
        assert [r.video_id for r in catalog.backfills()] == [newer]
        assert catalog.domain_hours()[0].hours_in_seeding >= TARGET_H
        assert catalog.chunk_count() - before == len(catalog.chunks(newer)) - stored
        left = len(catalog.chunks(newer)) - stored
    # The chunk stored before the kill is not computed again: only the rest are.
    computed = re.search(r"chunks \(computed this run / stored\)\W*(\d+) / ", said)
    assert computed is not None, said
    assert int(computed.group(1)) == left
    assert "backfilled cooking: 0 videos, 0.00 h from reserve this run (1 in all)" in said


# -- which videos a domain takes (pure) --------------------------------------------------------


def _video(video_id: str, status: str, minutes: float | None, **more: object) -> VideoRow:
    return VideoRow(
        id=video_id,
        playlist_id="p",
        domain="d",
        position=int(video_id[1:]),
        title=video_id,
        status=status,
        duration_s=None if minutes is None else minutes * 60.0,
        **more,  # type: ignore[arg-type]
    )


def test_the_reserve_is_taken_in_playlist_order_until_the_target_is_met() -> None:
    videos = [
        _video("v1", INDEXED, 10),
        _video("v2", DUPLICATE, 10, duplicate_of="v1"),
        _video("v3", INDEXED, 10),
        _video("v4", RESERVE, 6),
        _video("v5", RESERVE, 6),
        _video("v6", RESERVE, 6),
    ]
    picks = plan_backfill("d", videos, 30 / 60, [])
    assert [(p.video_id, p.replaces) for p in picks] == [("v4", "v2"), ("v5", "v2")]
    assert "dropped as a near-duplicate of 'v1'" in picks[0].reason
    assert "'d' had 0.33 h in seeding of its 0.5 h target" in picks[0].reason


def test_a_backfilled_video_that_is_itself_dropped_is_replaced_in_turn() -> None:
    """v4 came in for v2 and was then found a copy: v5 comes in for v4."""
    videos = [
        _video("v1", INDEXED, 10),
        _video("v2", DUPLICATE, 10, duplicate_of="v1"),
        _video("v3", INDEXED, 10),
        _video("v4", DUPLICATE, 10, duplicate_of="v3"),
        _video("v5", RESERVE, 10),
    ]
    done = [BackfillRow(video_id="v4", domain="d", replaces="v2", reason="", hours=10 / 60)]
    [pick] = plan_backfill("d", videos, 30 / 60, done)
    assert (pick.video_id, pick.replaces) == ("v5", "v4")


@pytest.mark.parametrize(
    ("videos", "expected"),
    [
        # at its target: nothing taken
        ([_video("v1", INDEXED, 30), _video("v2", RESERVE, 10)], []),
        # a failed video leaves a gap too, and is named
        ([_video("v1", INDEXED, 20), _video("v2", FAILED, 10), _video("v3", RESERVE, 10)], ["v3"]),
        # a reserve video of unknown length is taken alone, then probed
        (
            [_video("v1", LISTED, 10), _video("v2", RESERVE, None), _video("v3", RESERVE, 10)],
            ["v2"],
        ),
        # no reserve: nothing to take
        ([_video("v1", INDEXED, 10), _video("v2", DUPLICATE, 10)], []),
    ],
)
def test_what_a_domain_takes_from_reserve(videos: list[VideoRow], expected: list[str]) -> None:
    assert [p.video_id for p in plan_backfill("d", videos, 30 / 60, [])] == expected
