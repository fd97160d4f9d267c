"""The validation UI over a real workspace: the sample, blind annotation, every bad input, the
results and audit pages, restart persistence and video range requests (FastAPI TestClient)."""

from __future__ import annotations

import csv as csv_module
import hashlib
import html
import io
import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from playlisteval.ui import create_app
from playlisteval.ui.annotations import (
    AnnotationLog,
    AnnotationRecorded,
    AnnotationRetracted,
    AnnotationState,
    AnnotatorInvited,
    AnnotatorWithdrawn,
    BadName,
    OverlapDesigned,
    SampleDrawn,
    assignees,
    decode_annotation,
    design_overlap,
)
from playlisteval.ui.app import Signer, cookie_name, invite_path, workspace_secret
from playlisteval.ui.benchmark import BenchmarkPair, draw_sample, load_benchmark
from policies.agreement import cohen_kappa
from store.errors import ConfigError
from store.events import GateRejected, seed_stream

SECRET = b"test-secret-0123456789abcdef0123456789"
SAMPLE = 6
# The annotators every test UI invites, and a design that gives each of them every pair (each
# pair to all four), so one annotator walks the whole sample.
INVITED = ("ann", "bob", "cy", "Ann Tator")
FULL: dict[str, Any] = {"overlap": len(INVITED), "overlap_share": 1.0}

# (domain, gap) of each pair the test benchmark holds: 2 domains, gaps 1..4, unevenly.
CELLS = [
    ("cooking", 1),
    ("cooking", 1),
    ("cooking", 2),
    ("cooking", 4),
    ("astronomy", 1),
    ("astronomy", 3),
    ("astronomy", 3),
    ("astronomy", 3),
]


def _record(index: int, domain: str, gap: int, video: str) -> dict[str, Any]:
    chosen_rating = 5
    return {
        "id": f"pair-{index:02d}",
        "prompt": f"Question {index} about {domain}: what changed between the two segments?",
        "chosen": f"Chosen answer {index} <b>with a tag</b> & an ampersand",
        "rejected": f"Rejected answer {index}",
        "subset": domain,
        "playlist_id": f"demo-{domain}",
        "domain": domain,
        "chosen_rating": chosen_rating,
        "rejected_rating": chosen_rating - gap,
        "gap": gap,
        "videos": [],
        "evidence": [
            {"video_id": video, "start_s": 12.0, "end_s": 47.5},
            {"video_id": video, "start_s": 60.0, "end_s": 90.0},
        ],
        "transcripts": [],
        "models": {"difficulty_judges": []},
        "meta": {"seed_id": f"s{index}", "run_id": "r", "cost_micros": 0},
    }


def write_benchmark(
    out: Path,
    demo_playlist: Path,
    cells: list[tuple[str, int]],
    answers: Callable[[int, str], tuple[str, str]] | None = None,
) -> Path:
    """An export folder per the spec, its videos the demo playlist's own files; ``answers``
    gives pair ``i`` of ``video`` its (chosen, rejected) answers instead of the plain ones."""
    root = demo_playlist.parent
    videos = {
        "cooking": root / "cooking" / "cooking-01.mp4",
        "astronomy": root / "astronomy" / "astronomy-01.mp4",
    }
    out.mkdir(parents=True)
    records = [_record(i, d, g, f"{d}-01") for i, (d, g) in enumerate(cells)]
    if answers is not None:
        for i, record in enumerate(records):
            record["chosen"], record["rejected"] = answers(i, record["evidence"][0]["video_id"])
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    (out / "pairs.jsonl").write_text(text)
    manifest = {
        "videos": [
            {"id": f"{d}-01", "path": str(p), "url": "", "duration_s": 120.0}
            for d, p in videos.items()
        ],
        "clips": [{"pair_id": r["id"], **e} for r in records for e in r["evidence"]],
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    digest = hashlib.sha256(text.encode()).hexdigest()
    (out / "benchmark.json").write_text(json.dumps({"version": "1", "content_sha256": digest}))
    return out


@pytest.fixture
def bench(tmp_path: Path, demo_playlist: Path) -> Path:
    """The small benchmark of :data:`CELLS`."""
    return write_benchmark(tmp_path / "bench", demo_playlist, CELLS)


@pytest.fixture
def records(bench: Path) -> dict[str, dict[str, Any]]:
    """The benchmark's records by pair id, as written."""
    lines = (bench / "pairs.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


@pytest.fixture
def opened(workspace: Path) -> Iterator[App]:
    """The workspace, open."""
    with App(load_settings(workspace)) as app:
        yield app


@pytest.fixture
def client(opened: App, bench: Path) -> TestClient:
    """The UI over the workspace and the benchmark, with a known secret."""
    web = create_app(
        opened, bench, sample_size=SAMPLE, sample_seed=0, secret=SECRET, invites=INVITED, **FULL
    )
    return TestClient(web, follow_redirects=False)


def stream_of(bench: Path) -> str:
    digest = json.loads((bench / "benchmark.json").read_text())["content_sha256"]
    return f"annotations-{digest[:12]}"


def hidden(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert match, f"no hidden field {name!r} in the page"
    return html.unescape(match.group(1))


def answer_text(page: str, letter: str) -> str:
    """The text of answer ``letter`` as shown (its diff marks and citation links taken off)."""
    match = re.search(rf'id="answer-{letter}">(.*?)</div>', page, re.S)
    assert match
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1)))


def cookie_of(bench: Path) -> str:
    """The name of the benchmark's annotator cookie."""
    return cookie_name(load_benchmark(bench))


def signer_of(bench: Path, secret: bytes = SECRET) -> Signer:
    """What the test UI over ``bench`` signs with."""
    return Signer(secret, stream_of(bench))


def join(client: TestClient, name: str) -> None:
    """Open ``name``'s invite link and start, as an annotator does."""
    link = client.app.state.invite_links[name]  # type: ignore[attr-defined]
    page = client.get(link)
    assert page.status_code == 200, page.text
    response = client.post("/join", data={"invite": hidden(page.text, "invite")})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/annotate"


def as_owner(web: Any) -> TestClient:
    """A browser that opened the UI's owner link (whoever runs the UI: it reads every label)."""
    client = TestClient(web, follow_redirects=False)
    opened = client.get(web.state.owner_link)
    assert opened.status_code == 303, opened.text
    return client


def label_next(
    client: TestClient, records: dict[str, dict[str, Any]], label: str, comment: str = ""
) -> str:
    """Answer the next pair: ``label`` is intended / other / cant_tell, turned into the letter
    from the answers the page shows. Returns the pair id."""
    page = client.get("/annotate").text
    pair_id = hidden(page, "pair_id")
    chosen_letter = "A" if answer_text(page, "A") == records[pair_id]["chosen"] else "B"
    assert answer_text(page, "B" if chosen_letter == "A" else "A") == records[pair_id]["rejected"]
    choice = {
        "intended": chosen_letter,
        "other": "B" if chosen_letter == "A" else "A",
        "cant_tell": "cant_tell",
    }[label]
    response = client.post(
        "/annotate",
        data={
            "pair_id": pair_id,
            "token": hidden(page, "token"),
            "choice": choice,
            "comment": comment,
        },
    )
    assert response.status_code == 303, response.text
    return pair_id


# -- the sample ---------------------------------------------------------------------------------


def _pairs(cells: list[tuple[str, int]]) -> list[BenchmarkPair]:
    return [BenchmarkPair(f"p{i:03d}", "q", "c", "r", d, g, ()) for i, (d, g) in enumerate(cells)]


def test_sample_is_even_over_domains_then_gaps_and_fixed_by_the_seed() -> None:
    cells = [("a", 1)] * 10 + [("a", 2)] * 10 + [("a", 3)] * 1 + [("b", 1)] * 2 + [("b", 4)] * 30
    pairs = _pairs(cells)
    by_id = {p.id: p for p in pairs}
    sample = draw_sample(pairs, 12, seed=7)
    assert len(sample) == len(set(sample)) == 12
    got: dict[tuple[str, int], int] = {}
    for pair_id in sample:
        key = (by_id[pair_id].domain, by_id[pair_id].gap)
        got[key] = got.get(key, 0) + 1
    # 6 per domain; in "a" 3 gaps share 6 but gap 3 has one pair: 1, then 5 left over two gaps
    # gives 3 + 2 (which gap gets the odd one is the seed's); in "b" gap 1 holds only 2.
    assert got[("a", 3)] == 1
    assert sorted([got[("a", 1)], got[("a", 2)]]) == [2, 3]
    assert got[("b", 1)] == 2
    assert got[("b", 4)] == 4
    assert draw_sample(pairs, 12, seed=7) == sample
    assert draw_sample(list(reversed(pairs)), 12, seed=7) == sample
    assert draw_sample(pairs, 12, seed=8) != sample
    assert len(draw_sample(pairs, 500, seed=7)) == len(pairs)


def test_the_sample_is_recorded_once_and_kept_across_restarts(workspace: Path, bench: Path) -> None:
    for _ in range(2):
        with App(load_settings(workspace)) as app:
            create_app(app, bench, sample_size=SAMPLE, secret=SECRET)
            stored = app.events.read_stream(stream_of(bench))
    drawn = [decode_annotation(s) for s in stored if s.type == "SampleDrawn"]
    assert len(drawn) == 1
    assert isinstance(drawn[0], SampleDrawn)
    assert len(drawn[0].pair_ids) == SAMPLE
    designed = [decode_annotation(s) for s in stored if s.type == "OverlapDesigned"]
    assert len(designed) == 1
    assert isinstance(designed[0], OverlapDesigned)
    # The settings' default design: a quarter of the sample (rounded up) to two annotators.
    assert (designed[0].k, designed[0].share) == (2, 0.25)
    assert len(designed[0].overlap_pair_ids) == 2
    assert set(designed[0].overlap_pair_ids) <= set(drawn[0].pair_ids)
    with App(load_settings(workspace)) as app, pytest.raises(ConfigError, match="seed 0"):
        create_app(app, bench, sample_size=SAMPLE, sample_seed=3, secret=SECRET)
    with App(load_settings(workspace)) as app, pytest.raises(ConfigError, match="human_overlap=2"):
        create_app(app, bench, sample_size=SAMPLE, secret=SECRET, overlap=3)


def test_the_workspace_secret_is_made_once_and_private(workspace: Path) -> None:
    first = workspace_secret(workspace)
    assert (workspace / "ui_secret").stat().st_mode & 0o777 == 0o600
    assert workspace_secret(workspace) == first
    assert len(first) >= 32


# -- joining and annotating ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    # Letters of any alphabet are allowed since step 18 ("émile" was refused before; see
    # tests/test_ui_blind_labels.py); slashes, quotes and control characters still are not.
    ["", " ", "x" * 41, "<script>", "ann;drop", "Ann O'Tator", "émile/x", "é\x00mile"],
)
def test_a_bad_name_is_not_invited(opened: App, bench: Path, name: str) -> None:
    with pytest.raises(BadName, match="is not allowed"):
        create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, invites=["ann", name])
    invited = [
        s for s in opened.events.read_stream(stream_of(bench)) if s.type == "AnnotatorInvited"
    ]
    assert invited == []  # not even the good name: the invite is all or nothing


def test_an_annotator_sees_the_pair_blind_with_playable_clips(
    client: TestClient, records: dict[str, dict[str, Any]]
) -> None:
    assert client.get("/annotate").status_code == 303  # no name yet: back to the start page
    join(client, "Ann Tator")
    page = client.get("/annotate").text
    pair_id = hidden(page, "pair_id")
    record = records[pair_id]
    assert html.escape(record["prompt"], quote=False) in page
    shown = {answer_text(page, "A"), answer_text(page, "B")}
    assert shown == {record["chosen"], record["rejected"]}
    assert "<b>with a tag</b>" not in page  # answers are escaped, not rendered
    video = record["evidence"][0]["video_id"]
    # One evidence player, at the first clip's start; every clip a link that seeks it.
    assert f'<video id="player" controls preload="metadata" src="/media/{video}#t=12">' in page
    for clip in record["evidence"]:
        assert f'data-video="{clip["video_id"]}" data-start="{clip["start_s"]:g}"' in page
    assert f"{video} @ 0:12–0:47" in page
    assert f"{video} @ 1:00–1:30" in page
    assert 'name="choice" value="cant_tell"' in page
    assert 'id="guidelines" open' in page  # open on an annotator's first pair


def test_the_letter_order_is_random_across_pairs_and_fixed_per_annotator(
    client: TestClient, records: dict[str, dict[str, Any]]
) -> None:
    join(client, "ann")
    seen: dict[str, str] = {}
    for _ in range(SAMPLE):
        page = client.get("/annotate").text
        again = client.get("/annotate").text
        assert again == page  # the same pair, the same order, until it is answered
        pair_id = hidden(page, "pair_id")
        seen[pair_id] = "A" if answer_text(page, "A") == records[pair_id]["chosen"] else "B"
        label_next(client, records, "intended")
    assert set(seen.values()) == {"A", "B"}
    done = client.get("/annotate").text
    assert "All done" in done
    assert 'href="/results"' in done


def _post(client: TestClient, **fields: str) -> Any:
    return client.post("/annotate", data=fields)


def test_bad_submissions_are_refused_and_change_nothing(
    client: TestClient, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    join(client, "ann")
    page = client.get("/annotate").text
    pair_id, token = hidden(page, "pair_id"), hidden(page, "token")
    sample = set(opened.events.read_stream(stream_of(bench))[0].data["pair_ids"])
    outside = next(p for p in records if p not in sample)
    signer = signer_of(bench)
    other_in_sample = next(p for p in sorted(sample) if p != pair_id)
    good = {"pair_id": pair_id, "token": token, "choice": "A", "comment": ""}
    cases: list[tuple[dict[str, str], int, str]] = [
        (
            {**good, "pair_id": "pair-nope", "token": signer.form_token("ann", "pair-nope")},
            404,
            "no pair",
        ),
        (
            {**good, "pair_id": outside, "token": signer.form_token("ann", outside)},
            404,
            "not in the sample",
        ),
        ({**good, "comment": "x" * 2001}, 413, "2001 characters"),
        ({**good, "choice": "C"}, 422, "'C'"),
        ({**good, "choice": ""}, 422, "choice"),
        ({**good, "token": "0" * 64}, 403, "not issued"),
        ({**good, "token": signer.form_token("bob", pair_id)}, 403, "not issued"),
        ({**good, "token": signer.form_token("ann", other_in_sample)}, 403, "not issued"),
        ({**good, "comment": "y" * 70_000}, 413, "bytes"),
    ]
    before = opened.events.stream_version(stream_of(bench))
    for fields, status, needle in cases:
        response = _post(client, **fields)
        assert response.status_code == status, (fields.get("choice"), response.text)
        assert needle in html.unescape(response.text)
    assert opened.events.stream_version(stream_of(bench)) == before
    assert client.get("/annotate").text == page  # still waiting for the same pair


@pytest.mark.parametrize(
    "cookie",
    [
        Signer(b"another-secret-another-secret-another").cookie("ann"),  # forged with another key
        Signer(SECRET, "annotations-0123456789ab").cookie("ann"),  # another benchmark's
        Signer(SECRET).cookie("ann").replace("YW5u", "Ym9i"),  # name swapped, signature kept
        "garbage",
    ],
)
def test_a_forged_or_tampered_annotator_cookie_is_forbidden(
    client: TestClient, opened: App, bench: Path, cookie: str
) -> None:
    join(client, "ann")
    page = client.get("/annotate").text
    pair_id = hidden(page, "pair_id")
    before = opened.events.stream_version(stream_of(bench))
    client.cookies.clear()
    client.cookies.set(cookie_of(bench), cookie)
    assert client.get("/annotate").status_code == 403
    response = _post(
        client, pair_id=pair_id, token=signer_of(bench).form_token("bob", pair_id), choice="A"
    )
    assert response.status_code == 403
    client.cookies.clear()
    assert (
        _post(client, pair_id=pair_id, token=hidden(page, "token"), choice="A").status_code == 403
    )
    assert opened.events.stream_version(stream_of(bench)) == before


def test_a_second_answer_is_refused_and_the_first_stands(
    client: TestClient, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    join(client, "ann")
    page = client.get("/annotate").text
    fields = {"pair_id": hidden(page, "pair_id"), "token": hidden(page, "token")}
    assert _post(client, **fields, choice="A").status_code == 303
    version = opened.events.stream_version(stream_of(bench))
    again = _post(client, **fields, choice="B")
    assert again.status_code == 409
    assert "the answer stands" in again.text
    # A second server on the same workspace (its own state, read before the first answer)
    # refuses too: the check is made against the stream at append time.
    other = TestClient(
        create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, **FULL),
        follow_redirects=False,
    )
    other.cookies.set(cookie_of(bench), signer_of(bench).cookie("ann"))
    assert other.post("/annotate", data={**fields, "choice": "B"}).status_code == 409
    assert opened.events.stream_version(stream_of(bench)) == version
    answers = [
        decode_annotation(s)
        for s in opened.events.read_stream(stream_of(bench))
        if s.type == "AnnotationRecorded"
    ]
    assert len(answers) == 1
    assert isinstance(answers[0], AnnotationRecorded)
    assert answers[0].choice == "A"


def test_a_comment_with_script_is_stored_as_written_and_shown_escaped(
    client: TestClient, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    comment = '<script>alert(1)</script> & "quotes"'
    join(client, "ann")
    label_next(client, records, "intended", comment=comment)
    stored = [
        s for s in opened.events.read_stream(stream_of(bench)) if s.type == "AnnotationRecorded"
    ]
    assert stored[0].data["comment"] == comment
    page = client.get("/results").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;quotes&#34;" in page
    assert "<script>" not in page


def undo_fields(page: str) -> dict[str, str]:
    """The fields of a page's undo form (Back, u)."""
    form = re.search(r'<form method="post" action="/undo" id="undo-form".*?</form>', page, re.S)
    assert form, "no undo form on the page"
    return {"pair_id": hidden(form.group(0), "pair_id"), "token": hidden(form.group(0), "token")}


def _stored(opened: App, bench: Path, kind: type[Any]) -> list[Any]:
    events = [decode_annotation(s) for s in opened.events.read_stream(stream_of(bench))]
    return [e for e in events if isinstance(e, kind)]


def test_undo_takes_back_the_latest_answer_and_shows_that_pair_again(
    client: TestClient, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    """Back (u) retracts the annotator's latest answer (kept in the log, no longer counted) and
    shows its pair next with the earlier answer said and the comment kept; a second undo from
    the same page, a forged token or another annotator's token change nothing."""
    join(client, "ann")
    first = label_next(client, records, "intended", comment="the sauce colour")
    page = client.get("/annotate").text
    assert hidden(page, "pair_id") != first
    undo = undo_fields(page)
    assert undo["pair_id"] == first
    for forged in (
        {**undo, "token": "0" * 64},
        {**undo, "token": signer_of(bench).form_token("ann", first)},  # an answer's, not an undo's
        {**undo, "token": signer_of(bench).form_token("bob", "undo\x1f" + first)},
    ):
        assert client.post("/undo", data=forged).status_code == 403
    assert _stored(opened, bench, AnnotationRetracted) == []
    back = client.post("/undo", data=undo)
    assert back.status_code == 303
    assert back.headers["location"] == f"/annotate?pair={first}"
    again = client.get(back.headers["location"]).text
    assert hidden(again, "pair_id") == first
    assert 'id="before">You answered' in again
    assert ">the sauce colour</textarea>" in again  # the comment is not lost
    assert client.post("/undo", data=undo).status_code == 409  # already undone
    assert hidden(client.get("/annotate").text, "pair_id") == first  # next in the order too
    assert label_next(client, records, "cant_tell") == first
    state = AnnotationLog(opened.events, load_benchmark(bench)).state()
    assert state.labels[("ann", first)].choice == "cant_tell"
    assert [e.pair_id for e in _stored(opened, bench, AnnotationRetracted)] == [first]
    assert len(_stored(opened, bench, AnnotationRecorded)) == 2  # the first answer stays logged


def test_the_overlap_design_gives_a_stated_share_to_k_annotators_and_the_rest_to_one(
    opened: App, bench: Path
) -> None:
    web = create_app(
        opened,
        bench,
        sample_size=SAMPLE,
        secret=SECRET,
        invites=["ann", "bob", "cy"],
        overlap=2,
        overlap_share=0.5,
    )
    state = AnnotationLog(opened.events, load_benchmark(bench)).state()
    assert len(state.overlap) == 3  # half of the six sampled pairs
    for pair_id in state.pair_ids:
        holders = [a for a in state.invited if pair_id in state.assigned(a)]
        assert len(holders) == (2 if pair_id in state.overlap else 1), pair_id
    for name in state.invited:
        mine = state.assigned(name)
        shared = [p for p in mine if p in state.overlap]
        assert mine[: len(shared)] == shared  # the shared pairs come first
    results = as_owner(web).get("/results").text
    assert "3 of the 6 pairs (50 %) go to 2 of the 3 invited annotators each" in results
    for name in state.invited:
        assert f'<tr data-annotator="{name}"><td>{name}</td><td>not yet</td>' in results


def test_inviting_one_more_annotator_only_moves_pairs_to_them() -> None:
    pairs = [f"p{i:03d}" for i in range(200)]
    before, after = ["ann", "bob", "cy"], ["ann", "bob", "cy", "dan"]
    moved = 0
    for pair_id in pairs:
        old, new = set(assignees(pair_id, before, 2)), set(assignees(pair_id, after, 2))
        assert new - old <= {"dan"}
        moved += len(new - old)
    assert 0 < moved < len(pairs)  # dan takes a share, not everything
    design = design_overlap(pairs, 2, 0.25, seed=0)
    assert len(design.overlap_pair_ids) == 50
    assert design == design_overlap(list(reversed(pairs)), 2, 0.25, seed=0)
    for k, share in ((1, 0.5), (2, 0.0), (2, 1.5)):
        with pytest.raises(ConfigError):
            design_overlap(pairs, k, share, seed=0)
    assert AnnotationState().overlap == frozenset()


def test_labels_export_as_csv_and_jsonl_from_the_cli_and_the_results_page(
    client: TestClient, workspace: Path, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    """The standing labels, one row each; a label taken back is not among them; the owner's
    download links give what the command writes; an unknown format is one line and exit 2."""
    join(client, "ann")
    taken_back = label_next(client, records, "intended", comment='says "red", a, b')
    page = client.get("/annotate").text
    client.post("/undo", data=undo_fields(page))
    kept = [label_next(client, records, label) for label in ("other", "cant_tell", "intended")]
    assert kept[0] == taken_back  # answered again: that label counts, the first does not
    runner = CliRunner()
    out = workspace.parent / "labels"
    out.mkdir()
    owner = as_owner(client.app)
    for fmt in ("csv", "jsonl"):
        result = runner.invoke(
            cli_app,
            [
                "annotations",
                "export",
                str(bench),
                "--out",
                str(out / f"labels.{fmt}"),
                "--home",
                str(workspace),
            ],
        )
        assert result.exit_code == 0, result.output
        assert "3 label(s) written" in result.output
        written = (out / f"labels.{fmt}").read_text(encoding="utf-8")
        assert owner.get(f"/annotations.{fmt}").text == written

    rows = list(csv_module.DictReader((out / "labels.csv").open(encoding="utf-8")))
    lines = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert [r["pair_id"] for r in rows] == [r["pair_id"] for r in lines] == kept
    assert [r["label"] for r in lines] == ["other", "cant_tell", "intended"]
    for row, line in zip(rows, lines, strict=True):
        record = records[line["pair_id"]]
        assert line["annotator"] == row["annotator"] == "ann"
        assert line["domain"] == record["domain"]
        assert line["gap"] == record["gap"]
        assert (line["choice"] == line["chosen_shown_as"]) == (line["label"] == "intended")
        assert line["recorded_at"]
    download = client.get("/annotations.csv")
    assert download.headers["content-type"].startswith("text/csv")
    assert "attachment" in download.headers["content-disposition"]
    assert client.get("/annotations.xml").status_code == 404
    bad = runner.invoke(
        cli_app,
        [
            "annotations",
            "export",
            str(bench),
            "--out",
            str(out / "labels.xlsx"),
            "--home",
            str(workspace),
        ],
    )
    assert bad.exit_code == 2
    assert "cannot tell the label format" in " ".join(bad.output.split())


# -- results -------------------------------------------------------------------------------------


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _cell(page: str, stratum: str, column: str) -> str:
    row = re.search(
        rf'<tr class="stratum" data-kind="\w+" data-stratum="{stratum}">(.*?)</tr>', page, re.S
    )
    assert row, f"no row {stratum!r}"
    value = re.search(rf'class="num {column}" data-value="([^"]*)"', row.group(1))
    assert value, f"no {column!r} in row {stratum!r}"
    return value.group(1)


def _bound(page: str, stratum: str, column: str, which: str) -> str:
    row = re.search(rf'data-stratum="{stratum}">(.*?)</tr>', page, re.S)
    assert row, f"no row {stratum!r}"
    found = re.search(rf'class="num {column}"[^>]* data-{which}="([^"]*)"', row.group(1))
    assert found, f"no {which} of {column!r} in row {stratum!r}"
    return found.group(1)


def _annotator_row(page: str, name: str) -> str:
    row = re.search(rf'<tr data-annotator="{name}">(.*?)</tr>', page, re.S)
    assert row, f"no row for annotator {name!r}"
    return row.group(1)


def test_three_annotators_get_agreement_and_alpha_as_computed_by_hand(
    opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    web = create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, invites=INVITED, **FULL)
    drawn = decode_annotation(opened.events.read_stream(stream_of(bench))[0])
    assert isinstance(drawn, SampleDrawn)
    # Row k: what ann, bob and cy answer on pair k of the sorted sample, whatever order each of
    # them is shown the pairs in (I intended, O the other answer, C can't tell).
    table = ["III", "III", "IIO", "IOO", "CCI", "III"]
    wanted = dict(zip(sorted(drawn.pair_ids), table, strict=True))
    names = {"I": "intended", "O": "other", "C": "cant_tell"}
    orders: list[tuple[str, ...]] = []
    for column, name in enumerate(("ann", "bob", "cy")):
        client = TestClient(web, follow_redirects=False)
        join(client, name)
        order = []
        for _ in range(SAMPLE):
            pair = hidden(client.get("/annotate").text, "pair_id")
            order.append(pair)
            assert label_next(client, records, names[wanted[pair][column]]) == pair
        orders.append(tuple(order))
    assert len(set(orders)) > 1  # each annotator is shown the pairs in an order of their own
    page = as_owner(web).get("/results").text
    # 18 labels, 13 intended (3 + 3 + 2 + 1 + 1 + 3).
    assert float(_cell(page, "overall", "agreement")) == pytest.approx(13 / 18)
    low, high = _wilson(13, 18)
    row = re.search(r'data-stratum="overall">(.*?)</tr>', page, re.S)
    assert row
    assert f"{13 / 18 * 100:.1f} % [{low * 100:.1f}, {high * 100:.1f}]" in row.group(1)
    # Coincidences (3 values per pair, each pair of values weighted 1/2): o_II = 3+3+1+3 = 10,
    # o_OO = 1, o_CC = 1, o_IO = o_OI = 2, o_IC = o_CI = 1; n_I = 13, n_O = 3, n_C = 2, n = 18.
    # D_o = 6, D_e = 2 (13*3 + 13*2 + 3*2) = 142, alpha = 1 - (18 - 1) * 6 / 142.
    assert float(_cell(page, "overall", "alpha")) == pytest.approx(1 - 17 * 6 / 142)
    assert _cell(page, "overall", "kappa") == ""  # three annotators: no Cohen's kappa
    assert _cell(page, "overall", "shared") == "6"  # N: every pair labelled by all three
    assert _bound(page, "overall", "alpha", "low") == ""  # six shared pairs: no interval
    assert "(N &lt; 10: no interval)" in page
    for name in ("ann", "bob", "cy"):
        assert f'<td class="num done">{SAMPLE} / {SAMPLE}</td>' in _annotator_row(page, name)


def test_kappa_is_shown_with_the_shared_pairs_and_a_bootstrap_interval(
    opened: App, tmp_path: Path, demo_playlist: Path
) -> None:
    """Two annotators on twelve shared pairs: kappa as computed by hand from their labels, N =
    12 beside it, and a 95 % interval around it."""
    bench = write_benchmark(tmp_path / "big", demo_playlist, CELLS * 2)
    records = {
        r["id"]: r for r in map(json.loads, (bench / "pairs.jsonl").read_text().splitlines())
    }
    web = create_app(
        opened,
        bench,
        sample_size=12,
        secret=SECRET,
        invites=["ann", "bob"],
        overlap=2,
        overlap_share=1.0,
    )
    plan = {"ann": "IIOICIOIIOIC", "bob": "IOOICIIIOOIC"}
    names = {"I": "intended", "O": "other", "C": "cant_tell"}
    given: dict[str, dict[str, str]] = {}
    for name, row in plan.items():
        client = TestClient(web, follow_redirects=False)
        join(client, name)
        sample = sorted(AnnotationLog(opened.events, load_benchmark(bench)).state().pair_ids)
        wanted = dict(zip(sample, row, strict=True))
        given[name] = {}
        for _ in range(12):
            pair = hidden(client.get("/annotate").text, "pair_id")
            given[name][pair] = names[wanted[pair]]
            label_next(client, records, given[name][pair])
    pairs = sorted(given["ann"])
    kappa = cohen_kappa([given["ann"][p] for p in pairs], [given["bob"][p] for p in pairs])
    page = as_owner(web).get("/results").text
    assert float(_cell(page, "overall", "kappa")) == pytest.approx(kappa)
    assert _cell(page, "overall", "shared") == "12"
    low, high = (float(_bound(page, "overall", "kappa", b)) for b in ("low", "high"))
    assert low <= kappa <= high
    assert low < high  # twelve pairs with disagreements: a real interval
    assert f"{kappa:.3f} [{low:.2f}, {high:.2f}]" in page


def test_restarting_the_server_loses_no_answer(
    workspace: Path, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    with App(load_settings(workspace)) as app:
        # Both servers sign with the workspace's own secret (made by the first, read by the second).
        client = TestClient(
            create_app(app, bench, sample_size=SAMPLE, invites=["ann"]), follow_redirects=False
        )
        join(client, "ann")
        first = [label_next(client, records, label) for label in ("intended", "other", "cant_tell")]
        results = client.get("/results").text
        cookie = client.cookies[cookie_of(bench)]
    assert "No answers yet" not in results
    with App(load_settings(workspace)) as app:
        client = TestClient(create_app(app, bench, sample_size=SAMPLE), follow_redirects=False)
        client.cookies.set(cookie_of(bench), cookie)  # the results are for who joined (step 18)
        assert client.get("/results").text == results
        page = client.get("/annotate").text
        assert hidden(page, "pair_id") not in first
        assert '<span id="position">4</span> of <span id="total">6</span>' in page
        # The curation projections fold a log holding annotation events without tripping on them.
        assert app.projections().rebuild() == app.events.last_seq()


# -- media ---------------------------------------------------------------------------------------


def test_media_serves_only_manifest_videos_with_range_requests(
    client: TestClient, demo_playlist: Path
) -> None:
    data = (demo_playlist.parent / "cooking" / "cooking-01.mp4").read_bytes()
    whole = client.get("/media/cooking-01")
    assert whole.status_code == 200
    assert whole.content == data
    assert whole.headers["content-type"] == "video/mp4"
    assert whole.headers["accept-ranges"] == "bytes"
    part = client.get("/media/cooking-01", headers={"Range": "bytes=100-1123"})
    assert part.status_code == 206
    assert part.content == data[100:1124]
    assert part.headers["content-range"] == f"bytes 100-1123/{len(data)}"
    tail = client.get("/media/cooking-01", headers={"Range": "bytes=-10"})
    assert tail.status_code == 206
    assert tail.content == data[-10:]
    beyond = client.get("/media/cooking-01", headers={"Range": f"bytes={len(data) + 5}-"})
    assert beyond.status_code == 416
    for path in ("/media/cooking-02", "/media/nope", "/media/..%2Fmanifest.json", "/media/"):
        assert client.get(path).status_code == 404, path


def test_media_serves_nothing_outside_the_workspace_and_the_benchmark(
    opened: App, bench: Path, tmp_path: Path
) -> None:
    """An edited manifest cannot make the UI serve any file: outside the benchmark's folder,
    the workspace's media and the catalogued videos it is 403, through ``..`` or a symlink too;
    a missing file, a dangling link or a loop is 404."""
    secret_file = tmp_path / "outside" / "secret.txt"
    secret_file.parent.mkdir()
    secret_file.write_text("not for the browser")
    (bench / "link-out.mp4").symlink_to(secret_file)
    (bench / "dangling.mp4").symlink_to(tmp_path / "gone.mp4")
    (bench / "loop-a.mp4").symlink_to(bench / "loop-b.mp4")
    (bench / "loop-b.mp4").symlink_to(bench / "loop-a.mp4")
    (bench / "clip.mp4").write_bytes(b"a clip kept in the benchmark folder")
    manifest = json.loads((bench / "manifest.json").read_text())
    manifest["videos"] += [
        {"id": "passwd", "path": "/etc/passwd"},
        {"id": "secret", "path": str(secret_file)},
        {"id": "dotdot", "path": "../outside/secret.txt"},
        {"id": "link-out", "path": "link-out.mp4"},
        {"id": "dangling", "path": "dangling.mp4"},
        {"id": "loop", "path": "loop-a.mp4"},
        {"id": "own", "path": "clip.mp4"},
    ]
    (bench / "manifest.json").write_text(json.dumps(manifest))
    client = TestClient(create_app(opened, bench, sample_size=SAMPLE, secret=SECRET))
    for video in ("passwd", "secret", "dotdot", "link-out"):
        response = client.get(f"/media/{video}")
        assert response.status_code == 403, video
        assert b"not for the browser" not in response.content
        assert b"root:" not in response.content
    for video in ("dangling", "loop"):
        assert client.get(f"/media/{video}").status_code == 404, video
    own = client.get("/media/own")
    assert own.status_code == 200
    assert own.content == b"a clip kept in the benchmark folder"
    assert client.get("/media/cooking-01").status_code == 200  # a catalogued video


def test_joining_takes_an_invite_link_not_a_name(
    client: TestClient, opened: App, bench: Path
) -> None:
    """No token, a forged one, another benchmark's or another UI's: refused (403), no cookie,
    nothing written. The invite link signs the browser in as its annotator."""
    before = opened.events.stream_version(stream_of(bench))
    refused = [
        client.post("/", data={"name": "ann"}),  # the old way in: a bare name
        client.get("/join"),
        client.get("/join", params={"invite": "garbage"}),
        client.post("/join", data={"invite": ""}),
        client.post("/join", data={"invite": signer_of(bench).cookie("ann")}),  # not an invite
        client.post("/join", data={"invite": Signer(SECRET, "annotations-x").invite("ann")}),
        client.post("/join", data={"invite": signer_of(bench, b"k" * 40).invite("ann")}),
        client.post("/join", data={"invite": signer_of(bench).invite("dan")}),  # never invited
    ]
    for response in refused:
        assert response.status_code == 403, response.text
        assert "set-cookie" not in response.headers
    assert "invite link" in html.unescape(refused[0].text)
    assert opened.events.stream_version(stream_of(bench)) == before
    assert client.get("/annotate").status_code == 303  # not signed in: back to the start page
    start = client.get("/").text
    assert 'id="invite-only"' in start
    assert 'name="name"' not in start  # no name form any more
    page = client.get(invite_path(signer_of(bench), "ann"))
    assert page.status_code == 200
    assert '<strong id="invited-name">ann</strong>' in page.text
    joined = client.post("/join", data={"invite": hidden(page.text, "invite")})
    assert joined.status_code == 303
    assert cookie_of(bench) in joined.cookies
    assert client.get("/annotate").status_code == 200
    assert 'id="signed-in">ann<' in client.get("/").text


def test_another_annotators_name_without_their_token_is_refused(
    client: TestClient, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    """Bob, holding his own invite, can neither join as ann nor post her labels: her name in
    any form without her token is refused; her own link signs her in on a second browser."""
    join(client, "ann")
    label_next(client, records, "intended")
    bob = TestClient(client.app, follow_redirects=False)
    join(bob, "bob")
    page = bob.get("/annotate").text
    pair_id = hidden(page, "pair_id")
    before = opened.events.stream_version(stream_of(bench))
    bobs_invite = signer_of(bench).invite("bob")
    as_ann = [
        bob.post("/", data={"name": "ann"}),
        bob.post("/join", data={"invite": bobs_invite.replace("Ym9i", "YW5u")}),  # name swapped
        bob.post("/join", data={"invite": "YW5u." + bobs_invite.partition(".")[2]}),
        # Her label through his signed-in browser: a form token made for her, not for him.
        _post(bob, pair_id=pair_id, token=signer_of(bench).form_token("ann", pair_id), choice="A"),
    ]
    for response in as_ann:
        assert response.status_code == 403, response.text
        assert "set-cookie" not in response.headers
    assert opened.events.stream_version(stream_of(bench)) == before
    assert 'id="signed-in">bob<' in bob.get("/").text  # still bob
    second = TestClient(client.app, follow_redirects=False)
    join(second, "ann")  # her own link, on another browser of hers
    assert hidden(second.get("/annotate").text, "pair_id") == hidden(
        client.get("/annotate").text, "pair_id"
    )


def test_invites_are_recorded_once_and_their_links_survive_a_restart(
    workspace: Path, bench: Path
) -> None:
    with App(load_settings(workspace)) as app:
        first = create_app(app, bench, sample_size=SAMPLE, invites=["ann", "bob"])
        links = dict(first.state.invite_links)
    with App(load_settings(workspace)) as app:
        again = create_app(app, bench, sample_size=SAMPLE, invites=["bob", "cy"])
        assert again.state.invite_links == {**links, "cy": again.state.invite_links["cy"]}
        invited = [
            decode_annotation(s)
            for s in app.events.read_stream(stream_of(bench))
            if s.type == "AnnotatorInvited"
        ]
    assert [e.name for e in invited if isinstance(e, AnnotatorInvited)] == ["ann", "bob", "cy"]
    client = TestClient(again, follow_redirects=False)
    page = client.get(links["ann"])  # the link printed before the restart
    assert page.status_code == 200
    assert client.post("/join", data={"invite": hidden(page.text, "invite")}).status_code == 303


def test_the_invite_command_prints_one_working_link_per_annotator(
    workspace: Path, bench: Path
) -> None:
    """`annotations invite` prints each annotator's link (the same again on a second call, with
    the earlier ones marked); the printed link joins a UI over the workspace; a bad name is one
    line and exit 2."""
    runner = CliRunner()
    url = "http://127.0.0.1:8765"
    argv = ["annotations", "invite", str(bench), "ann", "bob", "--url", url]
    first = runner.invoke(cli_app, [*argv, "--home", str(workspace)])
    assert first.exit_code == 0, first.output
    printed = dict(re.findall(rf"invite (\w+): {re.escape(url)}(/join\?invite=\S+)", first.output))
    assert set(printed) == {"ann", "bob"}
    again = runner.invoke(
        cli_app, ["annotations", "invite", str(bench), "cy", "--url", url, "--home", str(workspace)]
    )
    assert again.exit_code == 0, again.output
    assert f"invite ann: {url}{printed['ann']} (invited before)" in again.output
    assert "invite cy: " in again.output
    with App(load_settings(workspace)) as app:
        client = TestClient(create_app(app, bench, sample_size=SAMPLE), follow_redirects=False)
        page = client.get(printed["bob"])
        assert '<strong id="invited-name">bob</strong>' in page.text
        assert client.post("/join", data={"invite": hidden(page.text, "invite")}).status_code == 303
    bad = runner.invoke(
        cli_app, ["annotations", "invite", str(bench), "<b>", "--home", str(workspace)]
    )
    assert bad.exit_code == 2
    assert "is not allowed" in bad.output
    assert "Traceback" not in bad.output


def test_a_benchmark_whose_records_were_edited_after_the_export_is_refused(
    opened: App, bench: Path
) -> None:
    """Labels are filed under the benchmark's content hash: an edited pairs.jsonl beside the old
    benchmark.json is refused with one line, not served as the old benchmark."""
    lines = (bench / "pairs.jsonl").read_text().splitlines()
    edited = json.loads(lines[0])
    edited["chosen"] = "an answer swapped in by hand"
    lines[0] = json.dumps(edited, sort_keys=True)
    (bench / "pairs.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="does not match the content hash"):
        create_app(opened, bench, sample_size=SAMPLE, secret=SECRET)


# -- audit ---------------------------------------------------------------------------------------


def test_the_audit_pages_show_runs_gates_and_a_seed_timeline(
    client: TestClient, opened: App
) -> None:
    # A seed's timeline holds its gold answer and rated wrong answers: the owner's pages.
    assert client.get("/audit").status_code == 403
    client = as_owner(client.app)
    assert "No curation run" in client.get("/audit").text
    report = runs.curate(opened, budget_usd=None, max_seeds=2)
    audit = runs.audit(opened, report.run_id)
    seed = audit.seeds[0].seed_id
    # A rejection whose reason and output hold markup, appended to the seed's real stream.
    opened.events.append(
        seed_stream(report.run_id, seed),
        [
            GateRejected(
                phase=1,
                gate="structural",
                attempt=9,
                reason="<img src=x onerror=alert(1)> too few paragraphs",
                rejected_output="<script>alert('out')</script>",
            )
        ],
    )
    page = client.get("/audit").text
    assert f"Run {report.run_id}" in page
    assert "no cap" in page
    passes = sum(1 for line in audit.seeds for s in line.steps if s["step"] == "pass")
    assert passes > 0
    gates = re.findall(
        r"<tr><td>(\d)</td><td>([\w-]+)</td>"
        r"<td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>",
        page,
    )
    assert sum(int(p) for _ph, _g, p, _r in gates) == passes
    assert ("1", "structural") in {(ph, g) for ph, g, _p, _r in gates}
    assert sum(int(r) for _ph, _g, _p, r in gates) == 1 + sum(
        1 for line in audit.seeds for s in line.steps if s["step"] == "reject"
    )
    assert f'href="/audit/{report.run_id}/{seed}"' in page
    timeline = client.get(f"/audit/{report.run_id}/{seed}")
    assert timeline.status_code == 200
    assert "&lt;img src=x onerror=alert(1)&gt; too few paragraphs" in timeline.text
    assert "&lt;script&gt;alert(&#39;out&#39;)&lt;/script&gt;" in timeline.text
    assert "<script>" not in timeline.text
    assert "Attempt 1" in timeline.text
    assert client.get(f"/audit/{report.run_id}/no-such-seed").status_code == 404
    assert client.get(f"/audit/no-such-run/{seed}").status_code == 404


def test_a_comment_a_spreadsheet_would_run_is_written_to_csv_as_text() -> None:
    """An annotator's comment is untrusted: in the CSV a cell starting like a formula gets a
    leading quote (OWASP CSV injection); JSON Lines keeps it as typed."""
    from playlisteval.ui.annotations import EXPORT_COLUMNS, labels_text

    row = {column: "" for column in EXPORT_COLUMNS}
    row |= {"comment": '=HYPERLINK("http://x.example","click")', "annotator": "@ann", "gap": 2}
    rows = list(csv_module.DictReader(io.StringIO(labels_text([row], "csv"))))
    assert rows[0]["comment"] == '\'=HYPERLINK("http://x.example","click")'
    assert rows[0]["annotator"] == "'@ann"
    assert rows[0]["gap"] == "2"
    (line,) = labels_text([row], "jsonl").splitlines()
    assert json.loads(line)["comment"] == '=HYPERLINK("http://x.example","click")'


# -- withdrawing an annotator -------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    names=st.lists(st.sampled_from(["ann", "bob", "cy", "dan", "eve", "fay"]), min_size=2,
                   max_size=6, unique=True),
    k=st.integers(min_value=2, max_value=3),
    share=st.sampled_from([0.25, 0.5, 1.0]),
    seed=st.integers(min_value=0, max_value=2**16),
    data=st.data(),
)  # fmt: skip
def test_withdrawing_annotators_moves_only_their_pairs_and_leaves_none_unassigned(
    names: list[str], k: int, share: float, seed: int, data: st.DataObject
) -> None:
    """Whoever is withdrawn, every sampled pair still goes to as many of the others as the
    design asks (or all of them, when fewer are left), no remaining annotator loses a pair,
    and inviting them again gives back exactly what they had."""
    gone = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names) - 1,
                              unique=True))  # fmt: skip
    pairs = tuple(f"p{i:03d}" for i in range(40))
    state = AnnotationState()
    events: list[Any] = [
        SampleDrawn(benchmark_sha256="x", sample_size=len(pairs), seed=seed, pair_ids=pairs),
        design_overlap(pairs, k, share, seed),
        *(AnnotatorInvited(name=n) for n in names),
    ]
    for version, event in enumerate(events, start=1):
        state.apply(version, event)
    before = {name: set(state.assigned(name)) for name in names}
    for name in gone:
        state.apply(state.version + 1, AnnotatorWithdrawn(name=name))
    left = [n for n in names if n not in gone]
    assert state.invited == left
    assert state.withdrawn == gone
    for pair_id in pairs:
        holders = [n for n in left if pair_id in state.assigned(n)]
        wanted = k if pair_id in state.overlap else 1
        assert len(holders) == min(wanted, len(left)), pair_id
    for name in left:
        assert before[name] <= set(state.assigned(name))  # theirs stay theirs
    for name in gone:
        assert state.assigned(name) == []
        state.apply(state.version + 1, AnnotatorInvited(name=name))
    assert state.withdrawn == []
    assert {n: set(state.assigned(n)) for n in names} == before


def test_a_withdrawn_annotator_is_let_in_no_more_their_answers_stay_and_an_invite_undoes_it(
    opened: App, workspace: Path, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    """`annotations withdraw`: one who never joined gives their pairs to the others; one who
    labelled keeps their answers in the export but can neither join nor label again; a name
    not invited is one line and exit 2; `annotations invite` takes them back."""
    web = create_app(
        opened,
        bench,
        sample_size=SAMPLE,
        secret=SECRET,
        invites=["ann", "bob", "cy"],
        overlap=2,
        overlap_share=0.5,
    )
    client = TestClient(web, follow_redirects=False)
    join(client, "ann")
    answered = label_next(client, records, "intended")
    unsent = client.get("/annotate").text  # ann's next pair, open in her browser
    log = AnnotationLog(opened.events, load_benchmark(bench))
    bobs = set(log.state().assigned("bob"))
    assert bobs
    runner = CliRunner()

    def withdraw(*names: str) -> Any:
        argv = ["annotations", "withdraw", str(bench), *names, "--home", str(workspace)]
        return runner.invoke(cli_app, argv)

    result = withdraw("bob")
    assert result.exit_code == 0, result.output
    assert f"withdrew bob: the {len(bobs)} sampled pair(s) assigned to them now go to" in " ".join(
        result.output.split()
    )
    state = log.state()
    assert state.invited == ["ann", "cy"]
    assert all(state.pair_annotators(p) for p in state.pair_ids)  # nothing left unassigned
    refused = client.get(web.state.invite_links["bob"])
    assert refused.status_code == 403
    assert "was withdrawn" in html.unescape(refused.text)

    assert withdraw("ann").exit_code == 0
    late = client.post(
        "/annotate",
        data={
            "pair_id": hidden(unsent, "pair_id"),
            "token": hidden(unsent, "token"),
            "choice": "A",
            "comment": "",
        },
    )
    assert late.status_code == 403
    state = log.state()
    assert [(r.annotator, r.pair_id) for r in state.recorded()] == [("ann", answered)]
    assert all(state.pair_annotators(p) == ["cy"] for p in state.pair_ids)

    again = withdraw("ann", "zed")
    assert again.exit_code == 2
    assert "'ann' was withdrawn" in " ".join(again.output.split())
    assert "Traceback" not in again.output
    assert log.state().invited == ["cy"]  # a refused call withdraws no one

    back = runner.invoke(
        cli_app, ["annotations", "invite", str(bench), "bob", "--home", str(workspace)]
    )
    assert back.exit_code == 0, back.output
    assert client.get(web.state.invite_links["bob"]).status_code == 200
    assert bobs <= set(log.state().assigned("bob"))  # his again, and ann's share with cy


def test_a_folder_where_the_ui_secret_goes_is_one_line(tmp_path: Path) -> None:
    from store.errors import ConfigError

    (tmp_path / "ui_secret").mkdir()
    with pytest.raises(ConfigError, match="is not a readable key file"):
        workspace_secret(tmp_path)
