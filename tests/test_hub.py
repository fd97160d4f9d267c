"""`export --push-to-hub`: the export published as a Hub dataset repo and loaded back with its
videos, against a loopback stand-in of the Hub (tests/hub_standin.py) driven by the real
``huggingface_hub`` and ``datasets``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from huggingface_hub import CommitOperationAdd, HfApi, constants
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from huggingface_hub.utils import reset_sessions
from typer.testing import CliRunner

from playlisteval import hub
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.export import export_benchmark
from playlisteval.settings import load_settings
from policies.pairs import SelectedPair
from store.errors import ConfigError
from tests.hub_standin import INVALID_CREDENTIALS, HubStandIn, serve
from tests.test_export import SELECTION, all_pairs, items_of
from tests.workspaces import copy_workspace

TOKENS = {"hf_alice_write": "alice", "hf_bob_write": "bob"}


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubStandIn]:
    """The stand-in, named by HF_ENDPOINT; no token in the environment or saved login (the
    SDK reads its login file at ``constants.HF_TOKEN_PATH``), and the SDK allowed online for
    the test's own calls (loopback only)."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-login" / "token"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    reset_sessions()
    with serve(TOKENS) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.url)
        # What the SDK made of HF_ENDPOINT when it was imported (constants.py), as in a process
        # started with it set: CommitInfo and RepoUrl parse URLs against it.
        monkeypatch.setattr(constants, "ENDPOINT", running.url)
        yield running
    reset_sessions()
    assert running.unknown == [], "the SDK called an endpoint the stand-in does not know"


@pytest.fixture(scope="module")
def curated_two(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the indexed demo with one small offline run."""
    from playlisteval import runs

    home = tmp_path_factory.mktemp("hub-run") / "ws"
    copy_workspace(demo_home, home)
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=3)
        assert len(report.accepted) >= 1
    return home, report.run_id


def two_items(app: App, run_id: str) -> list[SelectedPair]:
    """All pairs of (at most) two accepted items."""
    accepted = sorted(s.id for s in app.catalog.seeds() if items_of(app, run_id, [s.id]))[:2]
    return all_pairs(app, run_id, accepted)


@pytest.fixture(scope="module")
def export_with_clips(
    curated_two: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """An export of two items with their clips bundled."""
    home, run_id = curated_two
    with App(load_settings(home)) as app:
        out = tmp_path_factory.mktemp("hub-export") / "bench"
        export_benchmark(app, out, two_items(app, run_id), settings=SELECTION, with_clips=True)
    return out


def load_from(endpoint: str, code: str, tmp_path: Path) -> Any:
    """Run ``code`` (which prints one JSON value last) in a fresh Python whose ``datasets`` and
    ``huggingface_hub`` know the Hub only by HF_ENDPOINT, as a user's would."""
    env = {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    }
    env.pop("HF_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


READ_BACK = """
import json
from datasets import load_dataset, Video
pairs = load_dataset("alice/bench", split="test")
clip = pairs.features["clips"].feature["video"]
row = pairs.with_format(None)[0]
out = {"feature": type(clip).__name__, "rows": pairs.num_rows, "ids": list(pairs["id"]),
       "splits": list(load_dataset("alice/bench").keys())}
try:
    import torchcodec  # noqa: F401
    decoder = row["clips"][0]["video"]
    out["decoded"] = [decoder.metadata.num_frames, list(decoder[0].shape)]
except ImportError:
    out["decoded"] = None
from datasets import List
fields = dict(pairs.features["clips"].feature)
raw = pairs.cast_column("clips", List({**fields, "video": Video(decode=False)}))
out["clips"] = [[c["path"], c["video"]["path"], c["video"]["bytes"].hex()]
                for c in raw.with_format(None)[0]["clips"]]
print(json.dumps(out))
"""


def test_an_export_with_clips_pushed_to_the_hub_loads_back_with_its_videos(
    standin: HubStandIn, export_with_clips: Path, tmp_path: Path
) -> None:
    """The folder goes up as a dataset repo in one commit (LFS for the Parquet and media,
    through the SDK's preupload / batch / commit calls); `load_dataset("alice/bench")` from
    the Hub gives the one `test` split, the rows of the export, and each clip as the `datasets`
    Video feature whose bytes are the bundled clip file."""
    done = hub.push_export(export_with_clips, "alice/bench", token="hf_alice_write")
    local = sorted(str(p.relative_to(export_with_clips)) for p in export_with_clips.rglob("*"))
    local_files = [p for p in local if (export_with_clips / p).is_file()]
    repo = standin.repos["alice/bench"]
    assert sorted(n for n in repo.files if n != ".gitattributes") == local_files
    assert done.files == len(local_files) + 1
    assert done.commit == repo.sha
    assert {"pairs.parquet"} <= repo.lfs
    assert any(n.endswith(".mp4") for n in repo.lfs)
    assert ("POST", "/datasets/alice/bench.git/info/lfs/objects/batch") in standin.calls

    got = load_from(standin.url, READ_BACK, tmp_path)
    records = [
        json.loads(line) for line in (export_with_clips / "pairs.jsonl").read_text().splitlines()
    ]
    assert got["feature"] == "Video"
    assert got["splits"] == ["test"]
    assert got["rows"] == len(records)
    assert got["ids"] == [r["id"] for r in records]
    for path, video_path, data in got["clips"]:
        assert path == video_path
        assert path.startswith("clips/")
        assert path.endswith(".mp4")
        assert bytes.fromhex(data) == (export_with_clips / path).read_bytes()
    try:
        import torchcodec  # noqa: F401
    except ImportError:
        return  # the feature, paths and bytes are checked; decoding needs torchcodec
    frames, shape = got["decoded"]
    assert frames >= 1
    assert shape[0] == 3


def test_pushing_the_same_export_again_mirrors_it_and_a_stale_file_goes(
    standin: HubStandIn, export_with_clips: Path, tmp_path: Path
) -> None:
    """A second push into the repo of an earlier export replaces it: a file the new export
    does not have is deleted in the same commit."""
    hub.push_export(export_with_clips, "alice/bench", token="hf_alice_write")
    api = HfApi(endpoint=standin.url, token="hf_alice_write")
    api.create_commit(
        "alice/bench",
        [CommitOperationAdd("old-notes.txt", b"from an earlier export")],
        commit_message="stale",
        repo_type="dataset",
    )
    hub.push_export(export_with_clips, "alice/bench", token="hf_alice_write")
    assert "old-notes.txt" not in standin.repos["alice/bench"].files
    assert "benchmark.json" in standin.repos["alice/bench"].files


@pytest.fixture
def small_folder(tmp_path: Path) -> Path:
    """A folder shaped like an export (enough for the push: the Hub does not read it)."""
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "README.md").write_text("---\nlicense: other\n---\n# bench\n")
    (folder / "benchmark.json").write_text("{}\n")
    return folder


def test_the_standin_refuses_what_the_hub_refuses(standin: HubStandIn) -> None:
    """Driven by the real SDK: an invalid token is a 401 with the Hub's message (not a missing
    repo), a commit to a missing repo is RepositoryNotFound, a bad repo name is a 400, and a
    write without a token is refused."""
    bad = HfApi(endpoint=standin.url, token="hf_not_a_token")
    with pytest.raises(HfHubHTTPError) as invalid:
        bad.create_repo("alice/x", repo_type="dataset")
    assert invalid.value.response.status_code == 401
    assert not isinstance(invalid.value, RepositoryNotFoundError)
    assert invalid.value.response.headers["X-Error-Message"] == INVALID_CREDENTIALS

    api = HfApi(endpoint=standin.url, token="hf_alice_write")
    with pytest.raises(RepositoryNotFoundError):
        api.create_commit(
            "alice/missing",
            [CommitOperationAdd("a.txt", b"a")],
            commit_message="m",
            repo_type="dataset",
        )
    answer = requests.post(
        f"{standin.url}/api/repos/create",
        json={"name": "bad--name", "type": "dataset"},
        headers={"Authorization": "Bearer hf_alice_write"},
        timeout=10,
    )
    assert answer.status_code == 400
    assert "error" in answer.json()
    anonymous = requests.post(
        f"{standin.url}/api/repos/create", json={"name": "x", "type": "dataset"}, timeout=10
    )
    assert anonymous.status_code == 401
    assert standin.repos == {}


def closed_port() -> str:
    """An endpoint on the loopback where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("case", "exit_code"),
    [
        ("no token", hub.EXIT_HUB_NO_TOKEN),
        ("invalid token", hub.EXIT_HUB_DENIED),
        ("another's namespace", hub.EXIT_HUB_DENIED),
        ("repo of something else", hub.EXIT_HUB_REPO_TAKEN),
        ("network down", hub.EXIT_HUB_UNREACHABLE),
    ],
)
def test_each_failure_of_a_push_is_its_own_error_and_leaves_the_folder(
    standin: HubStandIn, small_folder: Path, case: str, exit_code: int
) -> None:
    before = {p: p.read_bytes() for p in small_folder.iterdir()}
    token: str | None = "hf_alice_write"
    repo_id, endpoint = "alice/bench", None
    if case == "no token":
        token = None
    elif case == "invalid token":
        token = "hf_revoked"
    elif case == "another's namespace":
        repo_id = "bob/bench"
    elif case == "repo of something else":
        api = HfApi(endpoint=standin.url, token="hf_alice_write")
        api.create_repo(repo_id, repo_type="dataset")
        api.upload_file(
            path_or_fileobj=b"a,b\n", path_in_repo="data.csv", repo_id=repo_id, repo_type="dataset"
        )
    elif case == "network down":
        endpoint = closed_port()
    with pytest.raises(hub.HubError) as failed:
        hub.push_export(small_folder, repo_id, token=token, endpoint=endpoint)
    assert failed.value.exit_code == exit_code
    assert "\n" not in str(failed.value)
    assert {p: p.read_bytes() for p in small_folder.iterdir()} == before
    if case == "repo of something else":
        assert sorted(standin.repos[repo_id].files) == [".gitattributes", "data.csv"]


@pytest.mark.parametrize("repo_id", ["", "a/b/c", "bad--name", "-x", "x" * 97, "with space"])
def test_a_repo_id_the_hub_refuses_is_refused_before_anything(repo_id: str) -> None:
    with pytest.raises(ConfigError, match="is not a Hub repo id"):
        hub.check_repo_id(repo_id)


def test_the_cli_pushes_after_exporting_and_keeps_the_export_when_the_hub_refuses(
    standin: HubStandIn, curated_two: tuple[Path, str], tmp_path: Path
) -> None:
    """`export --push-to-hub`: without a token it stops before exporting (exit 10, nothing
    made); with a refused token the export is written and kept, and the exit is 11; with a good
    one the repo holds the export."""
    home, run_id = curated_two
    target = tmp_path / "bench"
    base = ["export", str(target), "--run", run_id, "--per-domain", "2", "--home", str(home)]
    runner = CliRunner()

    none = runner.invoke(cli_app, [*base, "--push-to-hub", "alice/bench"])
    assert none.exit_code == hub.EXIT_HUB_NO_TOKEN, none.output
    assert "--token" in none.output
    assert not target.exists()

    refused = runner.invoke(cli_app, [*base, "--push-to-hub", "alice/bench", "--token", "hf_x"])
    assert refused.exit_code == hub.EXIT_HUB_DENIED, refused.output
    assert "is kept" in refused.output
    assert (target / "benchmark.json").is_file()
    assert "Traceback" not in refused.output

    pushed = runner.invoke(
        cli_app, [*base, "--push-to-hub", "alice/bench", "--token", "hf_alice_write", "--private"]
    )
    assert pushed.exit_code == 0, pushed.output
    repo = standin.repos["alice/bench"]
    assert repo.private
    assert repo.files["pairs.jsonl"] == (target / "pairs.jsonl").read_bytes()
    assert 'load_dataset("alice/bench", split="test")' in pushed.output
