"""Media a hostile user hands over (issue step 18): a workspace copied elsewhere keeps serving
and indexing its own videos, sound that far outlasts its picture is not indexed as video, a
picture or a song renamed ``.mp4`` is refused with its reason, and a folder linked to itself is
named, not silently dropped. Real files made with ffmpeg, the real CLI and real SQLite."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.catalog import FAILED, INDEXED, READY, Catalog, PlaylistRow, VideoRow
from store.errors import MediaError
from tests.conftest import DEMO_INDEX
from tests.hostile_media import tiny_video
from tests.workspaces import copy_workspace
from tools.index import ingest, media

CUES = "WEBVTT\n\n00:00:01.000 --> 00:00:09.000\nhello from the first lecture\n"


def _home(path: Path) -> Path:
    """A workspace folder with the demo's small segment settings (nothing indexed yet)."""
    path.mkdir(parents=True)
    (path / SETTINGS_FILE).write_text(
        "[index]\n" + "".join(f"{k} = {v}\n" for k, v in DEMO_INDEX.items())
    )
    return path


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app, list(args))
    return result.exit_code, " ".join(result.output.split())


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True)


def _video_with_sound(path: Path, picture_s: float, sound_s: float) -> Path:
    """A 64x48 test picture of ``picture_s`` over a sine of ``sound_s`` (no ``-shortest``)."""
    audio = ["-c:a", "libopus"] if path.suffix == ".mkv" else ["-c:a", "aac"]
    _ffmpeg(
        *("-f", "lavfi", "-i", f"testsrc=d={picture_s}:s=64x48:r=10"),
        *("-f", "lavfi", "-i", f"sine=d={sound_s}"),
        *("-c:v", "libx264", "-preset", "ultrafast", *audio, "-b:a", "24k", str(path)),
    )
    return path


def _png_as_mp4(path: Path) -> Path:
    """One PNG picture, written by ffmpeg, under a video's name."""
    png = path.with_suffix(".png")
    _ffmpeg("-f", "lavfi", "-i", "testsrc=s=64x48", "-frames:v", "1", str(png))
    png.rename(path)
    return path


def _jpeg_as_mp4(path: Path) -> Path:
    """One JPEG picture under a video's name."""
    jpeg = path.with_suffix(".jpg")
    _ffmpeg("-f", "lavfi", "-i", "testsrc=s=64x48", "-frames:v", "1", str(jpeg))
    jpeg.rename(path)
    return path


def _m4a_as_mp4(path: Path) -> Path:
    """An AAC song (what a ``.m4a`` holds) under a video's name."""
    song = path.with_suffix(".m4a")
    _ffmpeg("-f", "lavfi", "-i", "sine=d=5", "-c:a", "aac", str(song))
    song.rename(path)
    return path


def _m4a_with_cover_as_mp4(path: Path) -> Path:
    """An AAC song with its cover picture attached, under a video's name."""
    song = _m4a_as_mp4(path.with_name("plain-song.mp4"))
    cover = path.with_suffix(".png")
    _ffmpeg("-f", "lavfi", "-i", "testsrc=s=64x48", "-frames:v", "1", str(cover))
    _ffmpeg(
        *("-i", str(song), "-i", str(cover), "-map", "0", "-map", "1", "-c", "copy"),
        *("-disposition:v:0", "attached_pic", "-f", "mp4", str(path)),
    )
    song.unlink()
    cover.unlink()
    return path


# -- 1. a workspace copied or moved elsewhere ----------------------------------------------------


def _lecture_in_media(home: Path) -> Path:
    """A video with its captions inside the workspace's own media folder."""
    folder = home / "media" / "lectures"
    folder.mkdir(parents=True)
    tiny_video(folder / "ep1.mp4", seconds=40)
    (folder / "ep1.en.vtt").write_text(CUES)
    return folder


def _moved(home: Path, to: Path) -> Path:
    """``home`` copied to ``to`` and the original deleted: only the copy is left."""
    to.parent.mkdir(parents=True, exist_ok=True)
    copy_workspace(home, to)
    shutil.rmtree(home)
    return to


def test_a_copied_workspace_finds_indexes_and_serves_its_own_videos(tmp_path: Path) -> None:
    home = _home(tmp_path / "ws")
    folder = _lecture_in_media(home)
    code, out = _cli("add", str(folder), "--domain", "lectures", "--home", str(home))
    assert code == 0, out
    moved = _moved(home, tmp_path / "elsewhere" / "ws")

    with App(load_settings(moved)) as app:
        [video] = app.catalog.videos()
        assert video.status == READY
        assert video.path is not None
        assert Path(video.path).is_relative_to(moved.resolve()), video.path
        assert Path(video.path).is_file()
        [captions] = app.catalog.captions_of(video)
        assert captions.is_relative_to(moved.resolve()), captions
        assert captions.is_file()

    code, out = _cli("index", "--home", str(moved))
    assert code == 0, out
    with App(load_settings(moved)) as app:
        [video] = app.catalog.videos()
        assert video.status == INDEXED, video.reason
        chunks = app.catalog.chunks(video.id)
        assert chunks
        assert "hello from the first lecture" in chunks[0].transcript

        from playlisteval.ui.app import MediaRoots

        real = Path(video.path or "").resolve(strict=True)
        assert MediaRoots(app, moved / "exports").allows(real)


def test_an_old_catalogue_with_absolute_paths_is_made_relative_and_moves_too(
    tmp_path: Path,
) -> None:
    """A catalogue written before kept absolute paths: opened once, those inside the workspace
    are stored relative (paths outside stay absolute), so a later copy finds its files."""
    home = _home(tmp_path / "ws")
    folder = _lecture_in_media(home)
    outside = tiny_video(tmp_path / "outside.mp4", seconds=4)
    database = home / "playlisteval.db"
    catalog = Catalog.open(database)
    catalog.upsert_playlist(PlaylistRow(id="p", title="p", domain="d", source=str(folder)))
    catalog.close()
    inside = str((folder / "ep1.mp4").resolve())
    captions = json.dumps([str((folder / "ep1.en.vtt").resolve())])
    with sqlite3.connect(database) as db:  # rows as the old catalogue wrote them
        db.executemany(
            "INSERT INTO videos (id, playlist_id, domain, position, title, path, captions, status)"
            " VALUES (?, 'p', 'd', ?, ?, ?, ?, 'listed')",
            [("in", 0, "in", inside, captions), ("out", 1, "out", str(outside), "[]")],
        )

    catalog = Catalog.open(database)
    in_video, out_video = catalog.video("in"), catalog.video("out")
    catalog.close()
    assert in_video is not None
    assert in_video.path == inside
    assert out_video is not None
    assert out_video.path == str(outside)
    with sqlite3.connect(database) as db:
        stored = dict(db.execute("SELECT id, path FROM videos").fetchall())
        [stored_captions] = db.execute("SELECT captions FROM videos WHERE id = 'in'").fetchone()
    assert stored == {"in": "media/lectures/ep1.mp4", "out": str(outside)}
    assert json.loads(stored_captions) == ["media/lectures/ep1.en.vtt"]

    moved = _moved(home, tmp_path / "copy")
    catalog = Catalog.open(moved / "playlisteval.db")
    try:
        video = catalog.video("in")
        assert video is not None
        assert video.path == str(moved.resolve() / "media/lectures/ep1.mp4")
        assert Path(video.path).is_file()
        assert [p.is_file() for p in catalog.captions_of(video)] == [True]
    finally:
        catalog.close()


def test_a_catalogue_without_a_root_keeps_paths_as_given(tmp_path: Path) -> None:
    """A catalogue opened by URL with no workspace named keeps paths absolute, as before."""
    catalog = Catalog.open(f"sqlite:///{tmp_path / 'cat.db'}")
    try:
        catalog.upsert_playlist(PlaylistRow(id="p", title="p", domain="d", source="s"))
        path = str(tmp_path / "v.mp4")
        catalog.upsert_video(
            VideoRow(id="v", playlist_id="p", domain="d", position=0, title="v", path=path)
        )
        assert catalog.root is None
        video = catalog.video("v")
        assert video is not None
        assert video.path == path
    finally:
        catalog.close()
    with sqlite3.connect(tmp_path / "cat.db") as db:
        assert db.execute("SELECT path FROM videos").fetchone() == (path,)


# -- 2. sound that far outlasts the picture --------------------------------------------------


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_sound_past_the_picture_is_left_out_of_the_video_s_length(
    tmp_path: Path, suffix: str
) -> None:
    path = _video_with_sound(tmp_path / f"long{suffix}", 3, 300)
    info = media.probe(path)
    assert info.duration_s == pytest.approx(3.0, abs=0.1)
    assert info.sound_s == pytest.approx(300.0, abs=0.1)
    assert info.sound_past_picture is not None
    assert "past its picture" in info.sound_past_picture
    assert media.sample_frames(path, fps=1.0)[-1].t < 3.5  # no frozen frame for 297 s more


def test_a_video_whose_sound_runs_a_moment_longer_says_nothing(tmp_path: Path) -> None:
    info = media.probe(_video_with_sound(tmp_path / "v.mp4", 3, 3.2))
    assert info.duration_s == pytest.approx(3.0, abs=0.1)
    assert info.sound_s is None
    assert info.sound_past_picture is None


def test_a_long_sound_over_a_short_picture_is_catalogued_and_indexed_at_the_picture_s_length(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    _video_with_sound(source / "long.mp4", 3, 300)
    [listing] = ingest.list_source(str(source), domain="d")
    assert listing.videos[0].duration_s == pytest.approx(3.0, abs=0.1)

    home = _home(tmp_path / "ws")
    code, out = _cli("add", str(source), "--domain", "d", "--home", str(home))
    assert code == 0, out
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    with App(load_settings(home)) as app:
        [video] = app.catalog.videos()
        assert video.status == INDEXED, video.reason
        assert video.duration_s == pytest.approx(3.0, abs=0.1)
        chunks = app.catalog.chunks(video.id)
        assert len(chunks) == 1
        assert chunks[0].end_s <= 3.1
        [problem] = app.catalog.problems("probe")
        assert problem.ref == video.id
        assert "297.0 s past its picture" in problem.reason
    code, out = _cli("status", "--home", str(home))
    assert code == 0, out
    assert "past its picture" in out, out


# -- 3. a picture or a song named as a video ---------------------------------------------------

NOT_VIDEOS = [
    ("picture.mp4", _png_as_mp4, "holds a single still picture (png)"),
    ("photo.mp4", _jpeg_as_mp4, "holds a single still picture (mjpeg)"),
    ("song.mp4", _m4a_as_mp4, "has no video stream"),
    ("cover.mp4", _m4a_with_cover_as_mp4, "has no video stream"),
]


@pytest.mark.parametrize(("name", "make", "says"), NOT_VIDEOS, ids=[n for n, _, _ in NOT_VIDEOS])
def test_a_picture_or_a_song_named_as_a_video_is_refused_with_its_reason(
    tmp_path: Path, name: str, make: object, says: str
) -> None:
    assert callable(make)
    source = tmp_path / "src"
    source.mkdir()
    path = make(source / name)
    tiny_video(source / "real.mp4", seconds=4)
    with pytest.raises(MediaError, match=says.replace("(", r"\(").replace(")", r"\)")):
        media.check_indexable(media.probe(path))

    home = _home(tmp_path / "ws")
    code, out = _cli("add", str(source), "--domain", "d", "--home", str(home))
    assert code == 0, out
    assert f"failed {path.stem}" in out, out
    assert says in out, out
    with App(load_settings(home)) as app:
        statuses = {v.title: (v.status, v.reason) for v in app.catalog.videos()}
        assert statuses["real"] == (READY, None)
        status, reason = statuses[path.stem]
        assert status == FAILED
        assert reason is not None
        assert says in reason
        assert [p.ref for p in app.catalog.problems("probe")] == [
            v.id for v in app.catalog.videos(statuses=[FAILED])
        ]


def test_a_one_frame_clip_is_still_described_for_those_that_send_clips(tmp_path: Path) -> None:
    """Providers are sent one-frame clips: the probe describes one; only indexing refuses it."""
    one = tmp_path / "one.mp4"
    _ffmpeg("-f", "lavfi", "-i", "testsrc=s=64x48", "-frames:v", "1", "-c:v", "libx264", str(one))
    info = media.probe(one)
    assert (info.pictures, info.video_codec) == (1, "h264")
    with pytest.raises(MediaError, match="holds a single still picture"):
        media.check_indexable(info)
    media.check_indexable(media.probe(tiny_video(tmp_path / "two.mp4", seconds=1)))


# -- 4. a folder linked to itself --------------------------------------------------------------


def test_a_folder_linked_to_itself_is_named_and_the_rest_taken_in(tmp_path: Path) -> None:
    source = tmp_path / "clips"
    (source / "season1").mkdir(parents=True)
    (tmp_path / "extras").mkdir()
    tiny_video(source / "ep1.mp4", seconds=4)
    tiny_video(source / "season1" / "ep2.mp4", seconds=4)
    (source / "loop").symlink_to("..")
    (source / "season1" / "back").symlink_to("..")
    (source / "itself").symlink_to("itself")
    (source / "extras").symlink_to(tmp_path / "extras")

    [listing] = ingest.list_source(str(source), domain="d")
    assert sorted(v.title for v in listing.videos) == ["ep1", "ep2"]
    reasons = {d.ref: d.reason for d in listing.dropped}
    assert "a folder that holds it: a symlink loop" in reasons["loop"]
    assert "a folder that holds it: a symlink loop" in reasons["season1/back"]
    assert "'itself' cannot be read" in reasons["itself"]
    assert "linked folders are not followed" in reasons["extras"]

    home = _home(tmp_path / "ws")
    code, out = _cli("add", str(source), "--domain", "d", "--home", str(home))
    assert code == 0, out
    assert "2 videos listed" in out
    assert "dropped loop: 'loop' links to" in out, out
    assert "a symlink loop" in out, out
    assert "dropped itself: 'itself' cannot be read" in out, out
    with App(load_settings(home)) as app:
        assert {v.status for v in app.catalog.videos()} == {READY}
        assert {p.ref for p in app.catalog.problems("listing")} == {
            "loop",
            "season1/back",
            "itself",
            "extras",
        }


@pytest.mark.parametrize("original", ["deleted", "still there"])
def test_a_copied_workspace_serves_its_own_video_where_the_benchmark_names_the_old_place(
    tmp_path: Path, demo_playlist: Path, original: str
) -> None:
    """A benchmark exported outside the workspace names the video where the workspace was; the
    UI over the copy serves the copy's file (found by id in its catalogue), not a 403 or 404."""
    from fastapi.testclient import TestClient

    from playlisteval.ui.app import create_app
    from tests.test_ui import CELLS, write_benchmark

    home = _home(tmp_path / "ws")
    folder = _lecture_in_media(home)
    code, out = _cli("add", str(folder), "--domain", "lectures", "--home", str(home))
    assert code == 0, out
    with App(load_settings(home)) as app:
        [video] = app.catalog.videos()
    old_file = folder / "ep1.mp4"
    bench = write_benchmark(tmp_path / "bench", demo_playlist, CELLS)
    for name in ("pairs.jsonl", "manifest.json"):  # the benchmark's first video is this one
        text = (bench / name).read_text().replace('"cooking-01"', json.dumps(video.id))
        (bench / name).write_text(text)
    manifest = json.loads((bench / "manifest.json").read_text())
    for entry in manifest["videos"]:
        if entry["id"] == video.id:
            entry["path"] = str(old_file)
    (bench / "manifest.json").write_text(json.dumps(manifest))
    info = json.loads((bench / "benchmark.json").read_text())
    info["content_sha256"] = hashlib.sha256((bench / "pairs.jsonl").read_bytes()).hexdigest()
    (bench / "benchmark.json").write_text(json.dumps(info))
    if original == "deleted":
        moved = _moved(home, tmp_path / "elsewhere" / "ws")
    else:
        moved = copy_workspace(home, tmp_path / "elsewhere-ws")
    with App(load_settings(moved)) as app:
        client = TestClient(create_app(app, bench, sample_size=4), follow_redirects=False)
        served = client.get(f"/media/{video.id}")
        assert served.status_code == 200, served.text
        assert served.content == (moved / "media" / "lectures" / "ep1.mp4").read_bytes()


def test_a_video_shorter_than_a_segment_is_one_segment_and_says_so(tmp_path: Path) -> None:
    """A 40-second lecture under the demo's 1–2-minute segments: one segment of 40 s, and a
    recorded word on it (it became one segment without a word), which `status` shows."""
    home = _home(tmp_path / "ws")
    folder = _lecture_in_media(home)
    for args in (("add", str(folder), "--domain", "lectures"), ("index",)):
        code, out = _cli(*args, "--home", str(home))
        assert code == 0, out
    with App(load_settings(home)) as app:
        [video] = app.catalog.videos()
        [segment] = app.catalog.segments(video_ids=[video.id])
        assert segment.end_s - segment.start_s == pytest.approx(40.0, abs=1.0)
        [problem] = app.catalog.problems(stage="segments")
    assert problem.ref == video.id
    assert "shorter than a segment (1–2 min): indexed as one segment" in problem.reason
    code, out = _cli("status", "--home", str(home))
    assert code == 0, out
    assert "shorter than a segment" in " ".join(out.split())
