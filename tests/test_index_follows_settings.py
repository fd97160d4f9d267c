"""Speech is heard by default, and an index follows its settings (issue 44).

A folder of three clips, as a new user would add it: one narrated by espeak-ng with no captions,
one that looks exactly like it but has no audio stream, one that looks different (no audio
either). Indexed with the shipped settings, Whisper base hears the narration, so the narrated
clip is found by its words and is no near-duplicate of its silent look-alike. Then a changed
setting redoes only what it made stale: a transcriber change the narrated clip's transcripts
(and what depends on them), a frame rate change the embeddings, a segment length the segments;
everything else keeps its stored rows and vectors.

Whisper base on a CPU costs seconds per clip, so the workspace is indexed once for the module
and each test works on a copy.
"""

from __future__ import annotations

import math
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.catalog import DUPLICATE, INDEXED, IndexRecordRow
from tests.workspaces import copy_workspace
from tools.index.index_records import old_defaults_record, plan_redo
from tools.offline.synthetic import (
    Shape,
    draw_scene,
    espeak_available,
    make_narrated_clip,
    write_mp4,
)

pytestmark = [
    pytest.mark.hears_speech,  # the shipped default: auto falls back to faster-whisper base
    pytest.mark.skipif(not espeak_available(), reason="espeak-ng narrates the clip"),
]

NARRATION = ["The lighthouse keeper polishes the brass lantern before the storm arrives."]
SEGMENTS = "segment_min_minutes = 0.05\nsegment_target_minutes = 0.1\nsegment_max_minutes = 0.5\n"
FPS = 10


def _still_clip(path: Path, background: str, shape: Shape, seconds: float) -> Path:
    """A clip of one still picture and no audio stream."""
    image = draw_scene(background, (shape,), "", 320, 240)
    write_mp4(path, [(image, max(1, math.ceil(seconds * FPS)))], None, FPS)
    return path


def _folder(root: Path) -> Path:
    """The three clips: the look-alike and the different one first, the narrated one last
    (near-duplicates drop the later of a pair)."""
    folder = root / "clips"
    narrated, captions = make_narrated_clip(folder / "c_narrated.mp4", NARRATION, fps=FPS)
    captions.unlink()  # no captions: the words must come from the speech
    seconds = _duration(narrated)
    _still_clip(folder / "a_lookalike.mp4", "blue", Shape("circle", "yellow", "center"), seconds)
    _still_clip(folder / "b_other.mp4", "green", Shape("square", "red", "top-left"), seconds)
    return folder


def _duration(path: Path) -> float:
    from tools.index.media import probe

    return probe(path).duration_s


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app, list(args), catch_exceptions=False)
    return result.exit_code, " ".join(result.output.split())


def _settings(home: Path, extra: str = "") -> None:
    (home / SETTINGS_FILE).write_text("[index]\n" + SEGMENTS + extra)


def _vectors(home: Path) -> dict[tuple[str, int], tuple[str, bytes]]:
    with App(load_settings(home)) as app:
        return {
            (v.id, c.idx): (c.transcript, c.vector)
            for v in app.catalog.videos()
            for c in app.catalog.chunks(v.id)
        }


def _statuses(home: Path) -> dict[str, str]:
    with App(load_settings(home)) as app:
        return {v.id: v.status for v in app.catalog.videos()}


def _ids(home: Path) -> dict[str, str]:
    """Each clip's video id by its file's stem (an id carries a hash of where the file is)."""
    with App(load_settings(home)) as app:
        return {Path(v.path or "").stem: v.id for v in app.catalog.videos()}


def _row(out: str, what: str) -> str | None:
    """The value of the index summary table's row ``what`` (None when the row is absent)."""
    found = re.search(rf"│ {re.escape(what)} │ (\S+) │", out)
    return None if found is None else found.group(1)


def _words(text: str) -> set[str]:
    return {w.strip(".,").lower() for w in text.split()}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The three clips added and indexed with the shipped settings; the CLI's output of both."""
    root = tmp_path_factory.mktemp("issue44")
    folder, home = _folder(root), root / "home"
    home.mkdir()
    _settings(home)
    assert load_settings(home).index.local_transcriber == "faster-whisper"  # nothing set
    code, added = _cli("add", str(folder), "--domain", "misc", "--home", str(home))
    assert code == 0, added
    code, indexed_ = _cli("index", "--home", str(home))
    assert code == 0, indexed_
    return home, added, indexed_


@pytest.fixture
def home(indexed: tuple[Path, str, str], tmp_path: Path) -> Path:
    """A private copy of the indexed workspace."""
    return copy_workspace(indexed[0], tmp_path / "ws")


def test_add_says_which_videos_get_which_transcript_source(
    indexed: tuple[Path, str, str],
) -> None:
    home, added, indexed_ = indexed
    ids = _ids(home)
    narrated = f"transcripts from faster-whisper base: 1 video ({ids['c_narrated']})"
    assert narrated in added
    silent = f"({ids['a_lookalike']}, {ids['b_other']})"
    assert f"transcripts from none (no audio stream): 2 videos {silent}" in added
    assert narrated in indexed_
    assert "speech-to-text is off" not in added + indexed_


def test_the_narrated_clip_is_heard_found_first_and_not_a_near_duplicate(
    indexed: tuple[Path, str, str],
) -> None:
    home, _added, _indexed = indexed
    ids = _ids(home)
    assert set(_statuses(home).values()) == {INDEXED}
    with App(load_settings(home)) as app:
        narrated = app.catalog.video(ids["c_narrated"])
        assert narrated is not None
        assert narrated.transcript_source == "faster-whisper"
        heard = " ".join(c.transcript for c in app.catalog.chunks(narrated.id))
        said = _words(NARRATION[0])
        assert len(said & _words(heard)) / len(said) >= 0.6, heard
        records = app.catalog.index_records()
        assert records[narrated.id].transcripts == "faster-whisper base"
        assert records[ids["a_lookalike"]].transcripts == "none"
    code, out = _cli("search", "lighthouse keeper brass lantern storm", "--home", str(home))
    assert code == 0, out
    assert out.startswith(f"1. ({ids['c_narrated']} @"), out


def test_a_transcriber_change_redoes_only_the_transcripts_it_makes_stale(home: Path) -> None:
    before, narrated_id = _vectors(home), _ids(home)["c_narrated"]
    _settings(home, 'local_transcriber = "none"\n')
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    assert f"redo transcripts of {narrated_id}: transcripts 'faster-whisper base' → 'none'" in out
    assert _row(out, "videos redone: transcripts") == "1"
    assert _row(out, "chunks transcribed again") == "1"
    assert _row(out, "chunks embedded again") == "1"
    assert _row(out, "videos redone: embeddings") is None
    after = _vectors(home)
    for key in [k for k in before if k[0] != narrated_id]:
        assert after[key] == before[key], key  # the other videos' rows untouched
    (narrated,) = [k for k in after if k[0] == narrated_id]
    assert after[narrated][0] == ""
    assert after[narrated][1] != before[narrated][1]
    # Unheard, it is its look-alike again: near-duplicates follow the new transcripts.
    assert _statuses(home)[narrated_id] == DUPLICATE
    with App(load_settings(home)) as app:
        record = app.catalog.index_records()[narrated_id]
        assert (record.transcripts, record.redo) == ("none", None)
    code, again = _cli("index", "--home", str(home))
    assert code == 0, again
    assert "redo" not in again  # nothing stale any more


def test_a_frame_rate_change_redoes_the_embeddings_and_no_transcript(home: Path) -> None:
    before = _vectors(home)
    _settings(home, "frame_fps = 1.0\n")
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    assert _row(out, "videos redone: embeddings") == "3"
    assert _row(out, "chunks transcribed again") == "0"
    assert _row(out, "chunks embedded again") == "3"
    assert f"redo embeddings of {_ids(home)['c_narrated']}: embeddings" in out
    after = _vectors(home)
    assert {k: t for k, (t, _) in after.items()} == {k: t for k, (t, _) in before.items()}
    with App(load_settings(home)) as app:
        records = app.catalog.index_records()
        assert all("frames 1 fps" in r.embeddings for r in records.values())


def test_a_segment_length_change_rebuilds_segments_only(home: Path) -> None:
    before = _vectors(home)
    (home / SETTINGS_FILE).write_text(
        "[index]\nsegment_min_minutes = 0.05\nsegment_target_minutes = 0.2\n"
        "segment_max_minutes = 0.5\n"
    )
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    assert _row(out, "videos redone: segments") == "3"
    assert _row(out, "chunks embedded again") == "0"
    assert _vectors(home) == before


def test_redo_only_embeddings_is_forced_without_a_changed_setting(home: Path) -> None:
    code, out = _cli("index", "--redo", "--only", "embeddings", "--home", str(home))
    assert code == 0, out
    assert _row(out, "videos redone: embeddings") == "3"
    assert _row(out, "chunks transcribed again") == "0"
    assert "asked for (--redo)" in out


def test_a_redo_left_unfinished_by_a_kill_is_taken_up_again(home: Path) -> None:
    """A killed redo leaves its mark on the video's record (set before the work starts); the
    next ``index`` redoes that video, though the settings did not change since."""
    other = _ids(home)["b_other"]
    with App(load_settings(home)) as app:
        app.catalog.mark_redo(other, "embeddings")
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    assert f"redo embeddings of {other}: asked for (an unfinished redo)" in out
    assert _row(out, "videos redone: embeddings") == "1"
    with App(load_settings(home)) as app:
        assert app.catalog.index_records()[other].redo is None


def test_a_workspace_indexed_before_records_were_kept_is_read_with_the_old_defaults(
    home: Path,
) -> None:
    """An old catalogue has no records table: the videos are taken as made with the old
    defaults (transcripts as their recorded source), said so, and redone where that differs."""
    narrated = _ids(home)["c_narrated"]
    with sqlite3.connect(home / "playlisteval.db") as db:
        db.execute("UPDATE videos SET transcript_source = 'none' WHERE id = ?", (narrated,))
        db.execute("DROP TABLE index_records")
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    assert "3 video(s) indexed before settings were recorded" in out
    assert f"redo transcripts of {narrated}: transcripts 'none' → 'faster-whisper base'" in out
    assert _row(out, "videos redone: transcripts") == "1"
    assert _row(out, "videos redone: embeddings") is None


def test_where_whisper_cannot_run_one_line_says_so_and_nothing_crashes(
    indexed: tuple[Path, str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "clips"
    folder.mkdir()
    _still_clip(folder / "quiet.mp4", "gray", Shape("circle", "white", "center"), 2.0)
    home = tmp_path / "home"
    home.mkdir()
    missing = tmp_path / "no-such-model"
    _settings(home, f'whisper_model = "{missing}"\n')
    code, out = _cli("add", str(folder), "--domain", "misc", "--home", str(home))
    assert code == 0, out
    assert out.count("speech-to-text is off:") == 1
    assert f"faster-whisper {missing} cannot run here" in out
    assert 'index.local_transcriber = "none"' in out
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    assert out.count("speech-to-text is off:") == 1


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (("--only", "embeddings"), "--only embeddings goes with --redo"),
        (("--redo", "--only", "frames"), "--only 'frames': choose one of transcripts, embeddings"),
    ],
)
def test_a_bad_redo_request_is_one_line(args: tuple[str, ...], wanted: str, tmp_path: Path) -> None:
    code, out = _cli("index", *args, "--home", str(tmp_path))
    assert code != 0
    assert wanted in out
    assert "Traceback" not in out


# -- what is stale, as pure decisions ---------------------------------------------------------

NOW = IndexRecordRow(
    video_id="v",
    chunks="30 s chunks",
    transcripts="faster-whisper base",
    embeddings="minilm-text+frame-stats; frames 0.5 fps at 180p; ocr off",
    segments="segments 10-20-30 min",
)


def _was(**changed: str | None) -> IndexRecordRow:
    return IndexRecordRow(**{**NOW.model_dump(), **changed})


@pytest.mark.parametrize(
    ("recorded", "force", "wanted"),
    [
        (_was(), None, None),
        (_was(transcripts="none"), None, ("transcripts", False)),
        (_was(transcripts="none", embeddings="x"), None, ("transcripts", True)),
        (
            _was(embeddings="qwen3-vl-embedding Qwen/Qwen3-VL-Embedding-8B"),
            None,
            ("embeddings", True),
        ),
        (_was(segments="segments 1-1-2 min"), None, ("segments", False)),
        (_was(chunks="20 s chunks", transcripts="none"), None, ("chunks", True)),
        (_was(), "all", ("transcripts", True)),
        (_was(), "transcripts", ("transcripts", False)),
        (_was(), "embeddings", ("embeddings", True)),
        (_was(redo="embeddings"), None, ("embeddings", True)),
        (_was(redo="all"), None, ("transcripts", True)),
    ],
)
def test_plan_redo_picks_the_earliest_stale_stage(
    recorded: IndexRecordRow, force: str | None, wanted: tuple[str, bool] | None
) -> None:
    plan = plan_redo(recorded, NOW, force)
    assert (None if plan is None else (plan.kind, plan.reembed_all)) == wanted


def test_an_old_video_keeps_what_its_catalogue_row_recorded() -> None:
    from store.catalog import VideoRow

    video = VideoRow(
        id="v",
        playlist_id="p",
        domain="d",
        position=0,
        title="t",
        transcript_source="faster-whisper",
        embedder="minilm-text+frame-stats",
    )
    old = old_defaults_record(video, NOW, grid_matches=True)
    assert plan_redo(old, NOW) is None  # the same backend and embedder: nothing to redo
    unheard = old_defaults_record(
        VideoRow(**{**video.model_dump(), "transcript_source": "none"}), NOW, grid_matches=False
    )
    assert (unheard.transcripts, unheard.chunks.startswith("unknown")) == ("none", True)
