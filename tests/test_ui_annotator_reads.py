"""Owners see judgments; annotators see their own choices (issue 41, item 4). Nothing an annotator
is served says which answer was intended: their downloads carry no ``chosen_shown_as`` and no
``label``, every choice in them is in the reader's own letters, and their results page shows no
agreement with the intended answer — the owner's downloads and page keep all of it. The letter
order is keyed with the UI's secret, so it cannot be worked out from the names either. Undo takes
back only the latest answer and only until its annotator opens the results or a labels download;
each undo is counted beside agreement on the owner's page. Real SQLite workspace, the real app
through FastAPI's TestClient."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from playlisteval.app import App
from playlisteval.ui import create_app
from playlisteval.ui.annotations import (
    BLIND_COLUMNS,
    EXPORT_COLUMNS,
    AnnotationLog,
    AnnotatorReadLabels,
    UndoClosed,
    decode_annotation,
)
from playlisteval.ui.benchmark import load_benchmark
from tests.test_ui import (
    CELLS,
    SECRET,
    as_owner,
    hidden,
    join,
    label_next,
    signer_of,
    stream_of,
    undo_fields,
)

# The small benchmark of tests/test_ui.py, its records and the open workspace: its fixtures.
from tests.test_ui import bench as bench
from tests.test_ui import opened as opened
from tests.test_ui import records as records

SAMPLE = 6
# Two annotators, every pair to both: each reads the other's answers once they gave their own.
BOTH: dict[str, Any] = {"invites": ["ann", "bob"], "overlap": 2, "overlap_share": 1.0}
INTENDED_VALUES = {"intended", "other"}
REFUSED = "undo is allowed only until you open the results or download the labels"


@pytest.fixture
def web(opened: App, bench: Path) -> FastAPI:
    """The UI with two annotators on every pair and a known secret."""
    return create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, **BOTH)


def browser(web: FastAPI, name: str) -> TestClient:
    """A browser in which ``name`` opened their invite link."""
    client = TestClient(web, follow_redirects=False)
    join(client, name)
    return client


def answer(client: TestClient, pair_id: str, choice: str) -> None:
    """Open ``pair_id``'s page and answer it with the letter ``choice``."""
    page = client.get(f"/annotate?pair={quote(pair_id, safe='')}").text
    assert hidden(page, "pair_id") == pair_id
    posted = client.post(
        "/annotate", data={"pair_id": pair_id, "token": hidden(page, "token"), "choice": choice}
    )
    assert posted.status_code == 303, posted.text[:2000]


def shown_letter(client: TestClient, records: dict[str, dict[str, Any]], pair_id: str) -> str:
    """The letter ``client``'s annotator is shown the intended answer of ``pair_id`` under."""
    page = client.get(f"/annotate?pair={quote(pair_id, safe='')}").text
    match = re.search(r'id="answer-A">(.*?)</div>', page, re.S)
    assert match
    text = html.unescape(re.sub(r"<[^>]+>", "", match.group(1)))
    return "A" if text == records[pair_id]["chosen"] else "B"


def jsonl(client: TestClient) -> list[dict[str, Any]]:
    response = client.get("/annotations.jsonl")
    assert response.status_code == 200, response.text[:2000]
    return [json.loads(line) for line in response.text.splitlines()]


def csv_rows(client: TestClient) -> tuple[list[str], list[dict[str, str]]]:
    response = client.get("/annotations.csv")
    assert response.status_code == 200, response.text[:2000]
    reader = csv.DictReader(io.StringIO(response.text))
    return list(reader.fieldnames or []), list(reader)


def message(response: Any) -> str:
    """The one-line reason an error page gives."""
    found = re.search(r'<p id="message">(.*?)</p>', response.text, re.S)
    assert found, response.text[:2000]
    return html.unescape(found.group(1))


def stored_reads(opened: App, bench: Path) -> list[AnnotatorReadLabels]:
    events = [decode_annotation(s) for s in opened.events.read_stream(stream_of(bench))]
    return [e for e in events if isinstance(e, AnnotatorReadLabels)]


# -- what an annotator downloads -------------------------------------------------------------


def test_an_annotators_downloads_never_say_which_answer_was_intended_the_owners_do(
    web: FastAPI, records: dict[str, dict[str, Any]]
) -> None:
    ann, bob = browser(web, "ann"), browser(web, "bob")
    first = label_next(ann, records, "intended")
    label_next(ann, records, "other")
    answer(bob, first, "A")

    for name, client in (("ann", ann), ("bob", bob)):
        rows = jsonl(client)
        assert rows, name
        for row in rows:
            assert list(row) == list(BLIND_COLUMNS)
            assert not {"chosen_shown_as", "label"} & set(row)
            assert row["choice"] in {"A", "B", "cant_tell"}
            assert not INTENDED_VALUES & {v for v in row.values() if isinstance(v, str)}
        header, lines = csv_rows(client)
        assert header == list(BLIND_COLUMNS)
        assert [(r["annotator"], r["pair_id"]) for r in lines] == [
            (r["annotator"], r["pair_id"]) for r in rows
        ]

    owner_rows = jsonl(as_owner(web))
    assert [list(r) for r in owner_rows] == [list(EXPORT_COLUMNS)] * 3
    by_key = {(r["annotator"], r["pair_id"]): r for r in owner_rows}
    assert by_key["ann", first]["label"] == "intended"
    assert by_key["ann", first]["chosen_shown_as"] == by_key["ann", first]["choice"]
    header, _lines = csv_rows(as_owner(web))
    assert {"chosen_shown_as", "label"} <= set(header)


def test_the_others_choices_are_given_in_the_readers_own_letters(
    web: FastAPI, records: dict[str, dict[str, Any]]
) -> None:
    """Bob's answer on a pair reaches ann as the letter she saw that answer under: whether he
    picked what she picked, never which of the two was intended."""
    ann, bob = browser(web, "ann"), browser(web, "bob")
    pair = hidden(ann.get("/annotate").text, "pair_id")
    ann_letter, bob_letter = shown_letter(ann, records, pair), shown_letter(bob, records, pair)
    answer(ann, pair, ann_letter)  # the intended answer, as ann saw it
    answer(bob, pair, "B" if bob_letter == "A" else "A")  # the other one, as bob saw it
    got = {r["annotator"]: r["choice"] for r in jsonl(ann)}
    assert got == {"ann": ann_letter, "bob": "B" if ann_letter == "A" else "A"}
    got = {r["annotator"]: r["choice"] for r in jsonl(bob)}
    assert got == {"ann": bob_letter, "bob": "B" if bob_letter == "A" else "A"}


def test_an_annotators_results_page_shows_no_agreement_with_the_intended_answer(
    web: FastAPI, records: dict[str, dict[str, Any]]
) -> None:
    """One answer given as intended would show 100 % agreement with intended to its annotator:
    that column is the owner's alone; agreement between annotators stays for both."""
    ann, bob = browser(web, "ann"), browser(web, "bob")
    first = label_next(ann, records, "intended")
    answer(bob, first, "A")
    for client in (ann, bob):
        page = client.get("/results").text
        assert 'class="num agreement"' not in page
        assert 'class="num answered"' not in page
        assert "agreement with intended" not in page
        assert 'class="num kappa"' in page
        assert 'id="undos"' not in page  # the owner's figure
    owner = as_owner(web).get("/results").text
    assert 'class="num agreement"' in owner
    assert "agreement with intended" in owner


def test_the_letter_order_is_keyed_with_the_ui_secret(bench: Path) -> None:
    """The letter a pair's intended answer is shown under is no function of the names alone:
    under another secret some pairs swap."""
    ids = [f"pair-{i:02d}" for i in range(len(CELLS))]
    names = ("ann", "bob", "cy")
    ours = [signer_of(bench).chosen_shown_as(n, p) for n in names for p in ids]
    theirs = [signer_of(bench, b"x" * 40).chosen_shown_as(n, p) for n in names for p in ids]
    assert set(ours) == {"A", "B"}
    assert ours != theirs


def test_a_pair_answered_again_after_an_undo_keeps_its_letters(
    web: FastAPI, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    """An answer recorded under one order and taken back is shown again in that order, whatever
    the draw says now (a log written before the order was keyed keeps its letters)."""
    ann = browser(web, "ann")
    first = label_next(ann, records, "intended")
    letter = shown_letter(ann, records, first)
    assert ann.post("/undo", data=undo_fields(ann.get("/annotate").text)).status_code == 303
    log = AnnotationLog(opened.events, load_benchmark(bench))
    state = log.state()
    taken = state.retracted["ann", first]
    assert state.chosen_as("ann", first, "B" if letter == "A" else "A") == letter
    assert taken.chosen_shown_as == letter
    assert shown_letter(ann, records, first) == letter


# -- the undo rule -----------------------------------------------------------------------------


def test_undo_before_reading_anything_is_allowed(
    web: FastAPI, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    ann = browser(web, "ann")
    label_next(ann, records, "intended")
    page = ann.get("/annotate").text
    assert 'id="undo-rule"' in page  # the rule is stated where Back is offered
    assert ann.post("/undo", data=undo_fields(page)).status_code == 303
    assert stored_reads(opened, bench) == []


@pytest.mark.parametrize("read", ["/results", "/annotations.csv", "/annotations.jsonl"])
def test_undo_after_reading_the_results_or_the_labels_is_refused_and_the_answer_stands(
    web: FastAPI, opened: App, bench: Path, records: dict[str, dict[str, Any]], read: str
) -> None:
    ann = browser(web, "ann")
    first = label_next(ann, records, "intended")
    undo = undo_fields(ann.get("/annotate").text)  # kept, as a hostile annotator would
    assert ann.get(read).status_code == 200
    assert 'id="undo-form"' not in ann.get("/annotate").text  # no Back once she read
    version = opened.events.stream_version(stream_of(bench))
    refused = ann.post("/undo", data=undo)
    assert refused.status_code == 403
    assert REFUSED in message(refused)
    assert opened.events.stream_version(stream_of(bench)) == version  # nothing written
    log = AnnotationLog(opened.events, load_benchmark(bench))
    assert ("ann", first) in log.state().labels
    with pytest.raises(UndoClosed, match="stands"):
        log.retract("ann", first)
    [noted] = stored_reads(opened, bench)
    assert (noted.annotator, noted.read) == ("ann", read.rsplit(".", 1)[-1].lstrip("/"))


def test_a_newer_answer_after_a_read_may_be_undone_but_not_the_one_before(
    web: FastAPI, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    """A read closes undo on the answers given before it; the next answer opens it again, back
    to that answer and no further."""
    ann = browser(web, "ann")
    first = label_next(ann, records, "intended")
    assert ann.get("/results").status_code == 200
    second = label_next(ann, records, "other")
    undo = undo_fields(ann.get("/annotate").text)
    assert undo["pair_id"] == second
    assert ann.post("/undo", data=undo).status_code == 303
    assert 'id="undo-form"' not in ann.get("/annotate").text  # not back to the first
    token = signer_of(bench).form_token("ann", "undo\x1f" + first)
    refused = ann.post("/undo", data={"pair_id": first, "token": token})
    assert refused.status_code == 403
    assert REFUSED in message(refused)


def test_a_read_with_nothing_left_to_undo_writes_nothing(
    web: FastAPI, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    ann = browser(web, "ann")
    assert ann.get("/results").status_code == 200  # no answer yet
    label_next(ann, records, "intended")
    owner = as_owner(web)
    assert owner.get("/annotations.jsonl").status_code == 200  # the owner undoes nothing
    assert stored_reads(opened, bench) == []
    assert ann.get("/annotations.csv").status_code == 200
    assert ann.get("/results").status_code == 200
    assert ann.get("/annotations.jsonl").status_code == 200
    assert [r.read for r in stored_reads(opened, bench)] == ["csv"]  # once, when it closed


# -- undos beside agreement ----------------------------------------------------------------------


def test_every_undo_is_counted_beside_agreement_for_the_owner(
    web: FastAPI, records: dict[str, dict[str, Any]]
) -> None:
    ann, bob = browser(web, "ann"), browser(web, "bob")
    owner = as_owner(web)
    assert re.search(r'<p id="undos">[^<]*undos: 0', owner.get("/results").text)
    for client in (ann, ann, bob):
        label_next(client, records, "intended")
        assert (
            client.post("/undo", data=undo_fields(client.get("/annotate").text)).status_code == 303
        )
    label_next(ann, records, "other")  # one undone answer given again: still an undo
    page = owner.get("/results").text
    undos = re.search(r'<p id="undos">(.*?)</p>', page, re.S)
    assert undos
    assert "undos: 3 (ann 2, bob 1)" in undos.group(1)
    agreement = page.index('id="agreement"')
    assert page.index('id="undos"') < agreement  # beside the agreement table, above it
    assert page.index("<h2>Agreement</h2>") < page.index('id="undos"')
    assert 'id="undos"' not in ann.get("/results").text
