"""Hostile and careless requests to the validation UI, and careless benchmark folders given to
`playlisteval ui`. The media route serves nothing outside the workspace's media and the
benchmark's own folder, whatever an edited manifest says (``..``, absolute paths, symlinks to
files or folders, device and proc files): 403 outside, 404 for what is not a file; a malformed
request or form is a 4xx page that says what is wrong, never a 500; nothing is written to the
log by a refused request. An annotator after the intended answer learns it from nothing she is
served, and cannot take an answer back once she read the labels. FastAPI's TestClient on the
real app over a copy of the demo workspace; the rows share the shape of ``tests/hostile_table.py``
(``code`` is the HTTP status, ``spoil`` edits the benchmark folder)."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from playlisteval.app import App
from playlisteval.cli import EXIT_FIX
from playlisteval.settings import load_settings
from playlisteval.ui import create_app
from tests.hostile_table import Case, Spoil, rows, run_cli_case
from tests.test_ui import hidden, join, undo_fields
from tests.workspaces import copy_workspace

SECRET = b"hostile-ui-secret-0123456789abcdef0123"


def _record(index: int, video: str, tag: str = "") -> dict[str, Any]:
    return {
        "id": f"pair-{index:02d}",
        "prompt": f"Question {index}{tag}: what changed?",
        "chosen": f"Chosen answer {index}",
        "rejected": f"Rejected answer {index}",
        "domain": "cooking",
        "gap": 1 + index % 4,
        "evidence": [{"video_id": video, "start_s": 1.0, "end_s": 20.0}],
    }


def write_benchmark(out: Path, video: Path, tag: str = "") -> Path:
    """A small export folder (four pairs) whose one video is the demo's ``video``; ``tag`` in its
    questions makes it another benchmark (another annotations stream) on the same workspace."""
    out.mkdir(parents=True)
    text = "".join(json.dumps(_record(i, "v", tag), sort_keys=True) + "\n" for i in range(4))
    (out / "pairs.jsonl").write_text(text)
    (out / "manifest.json").write_text(json.dumps({"videos": [{"id": "v", "path": str(video)}]}))
    digest = hashlib.sha256(text.encode()).hexdigest()
    (out / "benchmark.json").write_text(json.dumps({"version": "1", "content_sha256": digest}))
    return out


@pytest.fixture(scope="module")
def opened(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """A copy of the demo workspace, open for the module's requests."""
    home = copy_workspace(demo_home, tmp_path_factory.mktemp("ui") / "ws")
    with App(load_settings(home)) as app:
        yield app


@pytest.fixture(scope="module")
def demo_video(opened: App) -> Path:
    """A catalogued demo video: the UI may serve it."""
    paths = [Path(v.path) for v in opened.catalog.videos() if v.path]
    return paths[0]


# -- the media route, after the manifest was edited --------------------------------------------


def serving(video_id: str, path: str, make: Spoil | None = None) -> Spoil:
    """The manifest also lists ``video_id`` at ``path`` ({bench} is the benchmark folder, {home}
    the workspace); ``make`` makes what the path should find."""

    def spoil(bench: Path) -> None:
        manifest = json.loads((bench / "manifest.json").read_text())
        home = bench.parent.parent / "ws"
        manifest["videos"].append({"id": video_id, "path": path.format(bench=bench, home=home)})
        (bench / "manifest.json").write_text(json.dumps(manifest))
        if make is not None:
            make(bench)

    return spoil


def symlink(name: str, target: str) -> Spoil:
    """A symlink ``name`` in the benchmark folder to ``target`` ({bench}, {home} as above)."""

    def make(bench: Path) -> None:
        home = bench.parent.parent / "ws"
        (bench / name).symlink_to(target.format(bench=bench, home=home))

    return make


OUTSIDE = "lies outside this workspace's media and this benchmark's folder"
MEDIA = [
    Case("a manifest path to /etc/passwd", ("GET", "/media/x"), OUTSIDE,
         serving("x", "/etc/passwd"), 403),
    Case("a manifest path to the workspace's database", ("GET", "/media/x"), OUTSIDE,
         serving("x", "{home}/playlisteval.db"), 403),
    Case("a manifest path that climbs out with ..", ("GET", "/media/x"), OUTSIDE,
         serving("x", "../../ws/playlisteval.db"), 403),
    Case("a process's environment", ("GET", "/media/x"), OUTSIDE,
         serving("x", "/proc/self/environ"), 403),
    Case("a symlink in the benchmark to /etc/passwd", ("GET", "/media/x"), OUTSIDE,
         serving("x", "out.mp4", symlink("out.mp4", "/etc/passwd")), 403),
    Case("a symlink in the benchmark to the database", ("GET", "/media/x"), OUTSIDE,
         serving("x", "db.mp4", symlink("db.mp4", "{home}/playlisteval.db")), 403),
    Case("a symlinked folder that leads out", ("GET", "/media/x"), OUTSIDE,
         serving("x", "etc/passwd", symlink("etc", "/etc")), 403),
    Case("a symlink to nothing", ("GET", "/media/x"), "is not on this machine",
         serving("x", "gone.mp4", symlink("gone.mp4", "{bench}/nothing.mp4")), 404),
    Case("two symlinks that point at each other", ("GET", "/media/x"), "is not on this machine",
         serving("x", "a.mp4", lambda bench: (symlink("a.mp4", "{bench}/b.mp4")(bench),
                                             symlink("b.mp4", "{bench}/a.mp4")(bench))), 404),
    Case("a manifest path to a folder", ("GET", "/media/x"), "is not a file",
         serving("x", "{home}/media"), 404),
    Case("a manifest path to a device", ("GET", "/media/x"), "is not a file",
         serving("x", "/dev/zero"), 404),
    Case("a file:// URL as a path", ("GET", "/media/x"), "is not on this machine",
         serving("x", "file:///etc/passwd"), 404),
    Case("a video id the manifest does not list", ("GET", "/media/nope"), "no video 'nope'",
         code=404),
    Case("an encoded ../ in the video id", ("GET", "/media/..%2F..%2Fetc%2Fpasswd"), "Not Found",
         code=404),
    Case("a NUL in the video id", ("GET", "/media/%00"), "no video", code=404),
    Case("a video id five thousand long", ("GET", "/media/" + "a" * 5000), "no video", code=404),
    Case("a manifest path holding a NUL", ("GET", "/media/x"), "is not on this machine",
         serving("x", "a\u0000b.mp4"), 404),
]  # fmt: skip
MEDIA_BUGS: dict[str, str] = {}  # a case the UI gets wrong: a strict xfail, with why

# -- requests and forms ------------------------------------------------------------------------

FORM = "application/x-www-form-urlencoded"
REQUESTS = [
    Case("joining by a bare name", ("POST", "/", "name=ann"), "takes your invite link", code=403),
    Case("joining with no invite", ("POST", "/join", ""), "invite", code=403),
    Case("joining with a forged invite", ("POST", "/join", "invite=ann.0000"), "invite", code=403),
    Case("an invite page with a forged token", ("GET", "/join?invite=garbage"), "invite",
         code=403),
    Case("a form that is not UTF-8", ("POST", "/join", "\udcff\udcfe"), "invite", code=403),
    Case("a form over the size limit", ("POST", "/join", "invite=" + "x" * 70_000), "bytes",
         code=413),
    Case("an answer with no annotator cookie", ("POST", "/annotate", "pair_id=pair-00&choice=A"),
         "no annotator cookie", code=403),
    Case("an empty answer", ("POST", "/annotate", ""), "no annotator cookie", code=403),
    Case("an undo with no annotator cookie", ("POST", "/undo", "pair_id=pair-00"),
         "no annotator cookie", code=403),
    Case("a method the page does not take", ("PUT", "/", "x=1"), "Method Not Allowed", code=405),
    Case("a page that does not exist", ("GET", "/nope"), "Not Found", code=404),
    # The audit pages hold gold answers and rated wrong answers: the owner's (before any lookup).
    Case("an audit of a run that does not exist", ("GET", "/audit/no-run/no-seed"),
         "owner link", code=403),
    Case("an audit with a NUL in the run", ("GET", "/audit/%00/x"), "owner link", code=403),
    Case("the audit pages without the owner link", ("GET", "/audit"), "owner link", code=403),
    Case("annotations in a format there is none of", ("GET", "/annotations.exe"), "exe",
         code=404),
]  # fmt: skip

FORBIDDEN_BYTES = (b"root:", b"SQLite format 3")


def _request(client: TestClient, case: Case) -> Any:
    method, path, *form = case.command
    if method == "GET":
        return client.get(path)
    body = os.fsencode(form[0]) if form else b""
    return client.request(method, path, content=body, headers={"content-type": FORM})


@pytest.mark.parametrize("case", rows([*MEDIA, *REQUESTS], MEDIA_BUGS))
def test_a_hostile_request_is_refused_with_a_page_that_says_why(
    opened: App, demo_video: Path, tmp_path: Path, case: Case
) -> None:
    bench = write_benchmark(tmp_path / "exports" / "bench", demo_video)
    (tmp_path / "ws").symlink_to(opened.workspace.root)  # {home} beside the benchmark's parent
    case.spoil(bench)
    web = create_app(opened, bench, sample_size=4, secret=SECRET)
    client = TestClient(web, raise_server_exceptions=False, follow_redirects=False)
    before = opened.events.last_seq()
    response = _request(client, case)
    assert response.status_code == case.code, response.text[:2000]
    assert case.says in html.unescape(response.text), response.text[:2000]
    assert "Traceback" not in response.text
    for secret in FORBIDDEN_BYTES:
        assert secret not in response.content
    assert opened.events.last_seq() == before  # a refused request writes nothing


def test_the_benchmark_s_own_video_is_still_served(
    opened: App, demo_video: Path, tmp_path: Path
) -> None:
    """The refusals above are not a UI that serves nothing: the manifest's real video plays."""
    bench = write_benchmark(tmp_path / "bench", demo_video)
    client = TestClient(create_app(opened, bench, sample_size=4, secret=SECRET))
    response = client.get("/media/v")
    assert response.status_code == 200
    assert response.content == demo_video.read_bytes()


# -- an annotator after the intended answer ----------------------------------------------------

# ann and bob label every pair; bob answered ann's first pair, then ann answered it (keeping the
# undo form, as a hostile annotator would). ``command``: the requests she then makes, in order
# (``POST /undo`` sends the kept form); ``says`` and ``code``: what the last one gets. Whatever
# she is served on the way says nothing of which answer was intended.
PEEKS = [
    Case("an annotator's JSON Lines download after answering", ("GET /annotations.jsonl",),
         '"pair_id"', code=200),
    Case("an annotator's CSV download after answering", ("GET /annotations.csv",),
         "pair_id,annotator,choice,comment", code=200),
    Case("an annotator's results page after answering", ("GET /results",),
         "Which answer was the intended one is not shown here", code=200),
    Case("an undo before reading anything", ("POST /undo",), "", code=303),
    Case("an undo after reading the results", ("GET /results", "POST /undo"),
         "undo is allowed only until you open the results", code=403),
    Case("an undo after downloading the labels as JSON Lines",
         ("GET /annotations.jsonl", "POST /undo"),
         "undo is allowed only until you open the results", code=403),
    Case("an undo after downloading the labels as CSV", ("GET /annotations.csv", "POST /undo"),
         "undo is allowed only until you open the results", code=403),
    Case("an undo after reading, the page reloaded", ("GET /results", "GET /annotate",
         "POST /undo"), "undo is allowed only until you open the results", code=403),
]  # fmt: skip
PEEK_BUGS: dict[str, str] = {}

INTENDED_KEYS = {"chosen_shown_as", "label"}
INTENDED_VALUES = {"intended", "other"}


def _says_nothing_of_the_intended_answer(response: Any) -> None:
    """No field, value or column of ``response`` says which answer was intended."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/x-ndjson"):
        for row in map(json.loads, response.text.splitlines()):
            assert not INTENDED_KEYS & set(row), row
            assert not INTENDED_VALUES & {v for v in row.values() if isinstance(v, str)}, row
    elif kind.startswith("text/csv"):
        reader = csv.DictReader(io.StringIO(response.text))
        assert not INTENDED_KEYS & set(reader.fieldnames or []), reader.fieldnames
        for row in reader:
            assert not INTENDED_VALUES & set(row.values()), row
    else:
        assert "agreement with intended" not in response.text
        assert 'class="num agreement"' not in response.text


@pytest.mark.parametrize("case", rows(PEEKS, PEEK_BUGS))
def test_an_annotator_learns_no_intended_answer_and_undoes_nothing_after_reading(
    opened: App, demo_video: Path, tmp_path: Path, case: Case
) -> None:
    bench = write_benchmark(tmp_path / "bench", demo_video, tag=f" ({case.name})")
    both = {"invites": ["ann", "bob"], "overlap": 2, "overlap_share": 1.0}
    web = create_app(opened, bench, sample_size=4, secret=SECRET, **both)
    ann, bob = (TestClient(web, follow_redirects=False) for _ in range(2))
    join(ann, "ann")
    join(bob, "bob")
    page = ann.get("/annotate").text
    pair_id, token = hidden(page, "pair_id"), hidden(page, "token")
    theirs = bob.get(f"/annotate?pair={pair_id}").text
    bob.post(
        "/annotate", data={"pair_id": pair_id, "token": hidden(theirs, "token"), "choice": "A"}
    )
    ann.post("/annotate", data={"pair_id": pair_id, "token": token, "choice": "B"})
    kept = undo_fields(ann.get("/annotate").text)
    for step in case.command:
        method, path = step.split(" ", 1)
        before = opened.events.last_seq()
        response = ann.get(path) if method == "GET" else ann.post(path, data=kept)
        assert response.status_code < 500
        _says_nothing_of_the_intended_answer(response)
    assert response.status_code == case.code, response.text[:2000]
    if case.code >= 400:
        assert opened.events.last_seq() == before  # a refused request writes nothing
    assert case.says in html.unescape(response.text), response.text[:2000]
    assert "Traceback" not in response.text


# -- `playlisteval ui` on a careless benchmark folder -------------------------------------------


def bench_with(**files: str | bytes | None) -> Spoil:
    """A benchmark folder in {src}: a good one (for the demo's first video) with ``files``
    replaced (None: removed)."""

    def spoil(home: Path) -> None:
        bench = write_benchmark(home.parent / "src" / "bench", home / "media" / "v.mp4")
        for name, content in files.items():
            target = bench / name.replace("_", ".", 1)
            if content is None:
                target.unlink()
            elif isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)

    return spoil


UI = ("ui", "{src}/bench")
GOOD = json.dumps(_record(0, "v"), sort_keys=True)
FOLDERS = [
    Case("ui on a folder that does not exist", ("ui", "{src}/nothing"), "does not exist"),
    Case("ui on a folder that is not an export", ("ui", "{src}"), "pairs.jsonl' is missing"),
    Case("ui on an export whose records are not JSON", UI, "line 1 is not valid JSON",
         bench_with(pairs_jsonl="{not json\n", benchmark_json=None)),
    Case("ui on an export with a record missing its fields", UI, "not a benchmark pair record",
         bench_with(pairs_jsonl='{"id": "p"}\n', benchmark_json=None)),
    Case("ui on an export with one pair twice", UI, "appears twice",
         bench_with(pairs_jsonl=f"{GOOD}\n{GOOD}\n", benchmark_json=None)),
    Case("ui on an export whose records were edited", UI, "does not match the content hash",
         bench_with(pairs_jsonl=GOOD.replace("Chosen", "Edited") + "\n")),
    Case("ui on an export with no manifest", UI, "manifest.json' is missing",
         bench_with(manifest_json=None)),
    Case("ui on an export whose manifest is not JSON", UI, "manifest.json' is not valid JSON",
         bench_with(manifest_json="{")),
    Case("ui on an export whose records are not UTF-8", UI, "UTF-8",
         bench_with(pairs_jsonl=b"\xff\xfe{}\n", benchmark_json=None)),
]  # fmt: skip


FOLDER_BUGS: dict[str, str] = {}


@pytest.mark.parametrize("case", rows(FOLDERS, FOLDER_BUGS))
def test_ui_on_a_careless_benchmark_folder_is_one_line_and_exit_2(
    workspace: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert case.code == EXIT_FIX
    run_cli_case(workspace, case, monkeypatch)
