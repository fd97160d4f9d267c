"""Indexing on Ray Data, on a local Ray cluster started here (``ray.init(num_cpus=2)``, once for
the file): the demo playlist indexed on Ray equals the local indexer's index; a Ray worker killed
mid-run (SIGKILL, by PID) leaves every chunk stored exactly once; a rerun changes nothing; a video
that cannot be decoded is recorded with its reason, and ``--retry-failed`` takes it up again."""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.cli import with_optional_values
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.catalog import DUPLICATE, FAILED, INDEXED, VideoRow, vectors_from_bytes
from tests.conftest import DEMO_INDEX
from tools.index import media
from tools.index.indexer import IndexSummary, SilentProgress
from tools.offline.synthetic import espeak_available, make_demo_playlist

ray = pytest.importorskip("ray", reason="ray[data] is an extra (scripts/setup.sh installs it)")

pytestmark = pytest.mark.slow

# The stated tolerance of "the same index": vectors computed in other processes, in batches of
# another size (the kill test's), agree to float32 rounding; everything else is equal.
VECTOR_ATOL = 1e-5
# Ray's process titles of the decode tasks and of the embedding actors.
DECODE, EMBED = "FlatMap(decode_video)", "MapWorker(Map(EmbedStage))"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """One local Ray cluster for the file (about 5 s to start on this machine)."""
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


def _home(tmp: Path, **index: object) -> Path:
    home = tmp / "home"
    home.mkdir()
    settings = {**DEMO_INDEX, **index}
    (home / SETTINGS_FILE).write_text(
        "[index]\n" + "".join(f"{k} = {v!r}\n" for k, v in settings.items())
    )
    return home


def _ray_index(home: Path, source: Path, progress: Any = None) -> IndexSummary:
    with App(load_settings(home)) as app:
        if source is not None:
            app.indexer().add(str(source), domain=None)  # listed only: the tasks fetch and probe
        return app.ray_indexer(progress).run()


def snapshot(home: Path) -> dict[str, Any]:
    """Everything the index stores: videos, chunks, segments, duplicates, seeds, Qdrant points."""
    with App(load_settings(home)) as app:
        cat = app.catalog
        videos = {
            v.id: (
                *(v.status, v.duration_s, v.width, v.height, v.fps, v.has_audio, v.reason),
                *(v.transcript_source, v.embedder, v.duplicate_of),
            )
            for v in cat.videos()
        }
        chunks = {
            (c.video_id, c.idx): (c.start_s, c.end_s, c.transcript, c.vector)
            for v in cat.videos()
            for c in cat.chunks(v.id)
        }
        segments = {
            s.id: (s.video_id, s.idx, s.chunk_start, s.chunk_end, s.start_s, s.end_s, s.vector)
            for s in cat.segments(video_ids=list(videos))
        }
        duplicates = [
            (d.video_id, d.kept_video_id, d.segment_id, d.kept_segment_id, d.cosine)
            for d in cat.duplicates()
        ]
        seeds = [(s.id, s.domain, s.segment_a, s.segment_b, s.cosine) for s in cat.seeds()]
        prefix = app.settings.vectors.collection_prefix
        points = {name: app.vectors.count(f"{prefix}_{name}") for name in ("chunks", "segments")}
    return {
        "videos": videos,
        "chunks": chunks,
        "segments": segments,
        "duplicates": duplicates,
        "seeds": seeds,
        "points": points,
    }


def assert_same_index(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal, vectors and cosines within :data:`VECTOR_ATOL`."""
    assert got["videos"] == want["videos"]
    assert got["points"] == want["points"]
    assert got["chunks"].keys() == want["chunks"].keys()
    for key, (*fields, vector) in got["chunks"].items():
        *wanted, wanted_vector = want["chunks"][key]
        assert fields == wanted, key
        np.testing.assert_allclose(
            vectors_from_bytes([vector]), vectors_from_bytes([wanted_vector]), atol=VECTOR_ATOL
        )
    assert got["segments"].keys() == want["segments"].keys()
    for key, (*fields, vector) in got["segments"].items():
        *wanted, wanted_vector = want["segments"][key]
        assert fields == wanted, key
        np.testing.assert_allclose(
            vectors_from_bytes([vector]), vectors_from_bytes([wanted_vector]), atol=VECTOR_ATOL
        )
    for name in ("duplicates", "seeds"):
        assert [row[:-1] for row in got[name]] == [row[:-1] for row in want[name]], name
        np.testing.assert_allclose(
            [row[-1] for row in got[name]], [row[-1] for row in want[name]], atol=VECTOR_ATOL
        )


@pytest.fixture(scope="module")
def local_index(demo_home: Path) -> dict[str, Any]:
    """The local indexer's index of the demo playlist (the session's demo workspace)."""
    return snapshot(demo_home)


def test_the_demo_playlist_indexed_on_ray_equals_the_local_index_and_a_rerun_changes_nothing(
    cluster: None, demo_playlist: Path, local_index: dict[str, Any], tmp_path: Path
) -> None:
    home = _home(tmp_path)
    summary = _ray_index(home, demo_playlist)
    assert not summary.videos_failed
    assert summary.chunks_computed == len(local_index["chunks"])
    first = snapshot(home)
    assert_same_index(first, local_index)
    assert {status for status, *_ in first["videos"].values()} == {INDEXED, DUPLICATE}

    again = _ray_index(home, demo_playlist)  # listed again: nothing new to compute or store
    assert again.chunks_computed == 0
    assert again.videos_indexed == 0
    second = snapshot(home)
    assert second == first


def _ray_processes(title: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if cmdline.startswith("ray::") and title in cmdline:
            found.append(process)
    return found


class KillingProgress(SilentProgress):
    """SIGKILLs Ray worker processes mid-run: a decode task ``task_delay_s`` after one is first
    seen running (a watcher thread), the embedding actor once ``kill_actor_at`` chunks are
    stored."""

    def __init__(self, kill_actor_at: int, task_delay_s: float) -> None:
        self.stored = 0
        self.kill_actor_at, self.task_delay_s = kill_actor_at, task_delay_s
        self.killed: dict[str, int] = {}
        self._over = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _kill(self, title: str) -> bool:
        for process in _ray_processes(title)[:1]:
            os.kill(process.pid, signal.SIGKILL)
            self.killed[title] = process.pid
            return True
        return False

    def _watch(self) -> None:
        while not self._over.is_set():
            if _ray_processes(DECODE):
                time.sleep(self.task_delay_s)
                if self._kill(DECODE):
                    return
            time.sleep(0.01)

    def advance(self, chunks: int, video: VideoRow | None = None) -> None:
        """Count the chunks; kill the embedding actor at the planned count."""
        self.stored += chunks
        if self.stored >= self.kill_actor_at and EMBED not in self.killed:
            self._kill(EMBED)

    def end(self) -> None:
        """The run is over: the watcher stops."""
        self._over.set()
        self._watcher.join()


def test_killed_workers_leave_every_chunk_once_and_an_undecodable_video_its_reason(
    cluster: None,
    demo_playlist: Path,
    local_index: dict[str, Any],
    small_playlist: Path,
    tmp_path: Path,
) -> None:
    """The demo playlist and a folder holding a file that is not a video, on Ray, while a decode
    task and the embedding actor are SIGKILLed: every chunk stored exactly once (the index equals
    the local one), the bad file failed with its stage and reason while the rest went on; the
    file replaced, ``index --ray --retry-failed`` takes it up again."""
    spare = tmp_path / "spare"
    spare.mkdir()
    broken = spare / "episode.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42 this is not a video at all" * 50)
    # One chunk a row: many rows in flight when the kills land. The kill points are seeded.
    seed = random.randrange(1_000_000)
    chosen = random.Random(seed)
    progress = KillingProgress(
        kill_actor_at=chosen.randint(1, 4), task_delay_s=chosen.uniform(0.0, 0.1)
    )
    # Decode tasks apart from the ASR actors (at the default they run inside them): a killed
    # task is retried by Ray, a killed actor restarted, and both are tried here.
    home = _home(tmp_path, embed_batch_size=1, ray_decode_cpus=1.0)
    with App(load_settings(home)) as app:
        app.indexer().add(str(spare), domain="spare")
        [bad] = app.catalog.videos(domain="spare")
    summary = _ray_index(home, demo_playlist, progress)
    assert set(progress.killed) == {DECODE, EMBED}, f"seed {seed}: {progress.killed}"
    for pid in progress.killed.values():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    assert [video_id for video_id, _ in summary.videos_failed] == [bad.id], f"seed {seed}"

    got = snapshot(home)
    status, *_, reason = got["videos"].pop(bad.id)[:7]
    assert status == FAILED
    assert str(reason).startswith("probe: "), reason
    with App(load_settings(home)) as app:
        assert [p.ref for p in app.catalog.problems(stage="probe")] == [bad.id]
        for video in app.catalog.videos(statuses=[INDEXED, DUPLICATE]):
            grid = media.chunk_grid(video.duration_s or 0.0, 30.0)
            assert [c.idx for c in app.catalog.chunks(video.id)] == list(range(len(grid)))
    assert summary.chunks_computed == len(got["chunks"])  # none stored twice
    assert_same_index(got, local_index)

    shutil.copyfile(sorted(small_playlist.rglob("*.mp4"))[0], broken)  # the file replaced
    result = CliRunner().invoke(
        cli_app, with_optional_values(["index", "--ray", "--retry-failed", "--home", str(home)])
    )
    assert result.exit_code == 0, result.output
    assert "1 failed video(s) taken up again" in result.output
    with App(load_settings(home)) as app:
        again = app.catalog.video(bad.id)
        assert again is not None
        assert again.status == INDEXED, again.reason
        assert app.catalog.chunks(bad.id)


@pytest.fixture(scope="module")
def small_playlist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One short captioned episode unlike the demo's (another seed)."""
    folder = tmp_path_factory.mktemp("small-playlist")
    make_demo_playlist(
        folder,
        domains=("cooking",),
        videos_per_domain=1,
        scenes_per_video=2,
        scene_seconds=15.0,
        narrate=False,
        plant_duplicate=False,
        seed=7,
    )
    return folder


def test_a_bare_ray_option_takes_the_local_default_and_an_address_is_kept() -> None:
    assert with_optional_values(["index", "--ray"]) == ["index", "--ray", "local"]
    assert with_optional_values(["index", "--ray", "--home", "h"]) == [
        "index",
        "--ray",
        "local",
        "--home",
        "h",
    ]
    assert with_optional_values(["index", "--ray", "ray://head:10001"]) == [
        "index",
        "--ray",
        "ray://head:10001",
    ]


@pytest.mark.skipif(not espeak_available(), reason="espeak-ng narrates the playlist")
def test_gpu_index_dry_run_on_ray_runs_both_models_as_actors(
    cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench/gpu_index.py --ray --dry-run``: the tiny Qwen3-ASR and Qwen3-VL-Embedding built
    inside Ray actors (never on the driver), fed by decode tasks, through the real pipeline."""
    from tests.test_gpu_index import gpu_index

    module = gpu_index()
    figures = module.main(["--dry-run", "--ray", "--workdir", str(tmp_path), "--batch", "2"])
    out = capsys.readouterr().out
    assert figures["chunks"] == 2  # one minute of video
    assert figures["hours_indexed_per_hour"] > 0
    assert "embedder: Qwen3-VL-Embedding" not in out  # nothing loaded on the driver
    assert "GPU memory: in the Ray actors" in out
    assert "hours of video indexed per hour" in out


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1"])
def test_an_unreachable_cluster_address_gives_up_within_its_timeout_in_one_line(
    address: str, tmp_path: Path
) -> None:
    """``index --ray 127.0.0.1:1`` (nothing listens there): one line naming the bounded wait
    (``index.ray_connect_timeout_s``, as the settings give it), instead of Ray's retries for
    minutes. (Checked on the address itself: an earlier test of this module may have a Ray
    session open in this process, which ``connect`` would use as it is.)"""
    from playlisteval.app import ray_options
    from playlisteval.settings import load_settings
    from tools.index.ray_index import RayIndexError, reachable

    settings = load_settings(tmp_path, index={"ray_connect_timeout_s": 2.0})
    options = ray_options(settings, address)
    assert (options.address, options.connect_timeout_s) == (address, 2.0)
    with pytest.raises(RayIndexError, match=r"cannot reach the Ray cluster at .* within 2 s"):
        reachable(options.address or "", options.connect_timeout_s)
    reachable("auto", 2.0)  # forms Ray resolves itself are left to it


def test_ray_that_does_not_import_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tools.index.ray_index import RayIndexError, RayOptions, connect

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RayIndexError, match="Ray does not import here"):
        connect(RayOptions())


def test_a_still_picture_named_as_a_video_fails_its_decode_task_at_the_probe(
    tmp_path: Path,
) -> None:
    """A PNG renamed ``.mp4`` (a file swapped after listing, or a download that is one picture)
    fails its decode task at the probe with the local engine's reason, and nothing of it is
    decoded: a "video" of one frame is not indexed on Ray either."""
    import pickle
    import subprocess

    from tools.index import ingest
    from tools.index.indexer import DecodeSpec, IndexConfig
    from tools.index.ray_index import ERROR, VideoJob, decode_video

    png = tmp_path / "picture.png"
    one_picture = ["-f", "lavfi", "-i", "testsrc=s=64x48", "-frames:v", "1"]
    subprocess.run(["ffmpeg", "-v", "error", "-y", *one_picture, str(png)], check=True)
    picture = png.rename(tmp_path / "picture.mp4")
    entry = ingest.VideoEntry("picture", "picture", 0, picture, None, (), None)
    job = {"video_id": "picture", "kind": "job", "data": pickle.dumps(VideoJob(entry, frozenset()))}
    spec = DecodeSpec(
        chunk_s=30.0, frame_fps=0.5, frame_height=48, batch_chunks=4, audio_rate=16_000
    )
    rows = list(
        decode_video(job, config=IndexConfig(), spec=spec, audio="never", scratch=str(tmp_path))
    )
    assert [row["kind"] for row in rows] == [ERROR]
    stage, reason = pickle.loads(rows[0]["data"])
    assert stage == "probe"
    assert "holds a single still picture (png)" in reason
