"""Step 18 of the validation UI: labels stay blind and held to each annotator's share (a pair
outside it is refused, by the page and by the log at append time); the results and label
downloads are for annotators who joined — the others' answers on a pair only once the reader gave
theirs — and for whoever runs the UI (the owner link); names in any alphabet; and `store verify`
and `doctor` pass on a workspace holding invites, labels, undos, a read that ended an undo and a
withdrawal."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from playlisteval.ui import create_app
from playlisteval.ui.annotations import (
    AnnotationLog,
    BadName,
    NotAssigned,
    assignees,
    check_name,
    label_rows,
)
from playlisteval.ui.app import Signer, owner_cookie_name
from playlisteval.ui.benchmark import load_benchmark
from tests.test_ui import (
    SECRET,
    as_owner,
    cookie_of,
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
# Three annotators, half of the sample to two of them, the other half to one: shares differ.
SHARED: dict[str, Any] = {"invites": ["ann", "bob", "cy"], "overlap": 2, "overlap_share": 0.5}


@pytest.fixture
def web(opened: App, bench: Path) -> FastAPI:
    """The UI with :data:`SHARED`'s design and a known secret."""
    return create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, **SHARED)


def browser(web: FastAPI, name: str) -> TestClient:
    """A browser in which ``name`` opened their invite link."""
    client = TestClient(web, follow_redirects=False)
    join(client, name)
    return client


def answer(client: TestClient, pair_id: str, choice: str = "A", comment: str = "") -> Any:
    """Open ``pair_id``'s page and answer it."""
    page = client.get(f"/annotate?pair={quote(pair_id, safe='')}")
    assert page.status_code == 200, page.text
    assert hidden(page.text, "pair_id") == pair_id
    fields = {"pair_id": pair_id, "token": hidden(page.text, "token")}
    return client.post("/annotate", data={**fields, "choice": choice, "comment": comment})


def log_of(opened: App, bench: Path) -> AnnotationLog:
    return AnnotationLog(opened.events, load_benchmark(bench))


def message(response: Any) -> str:
    """The one-line reason an error page gives."""
    found = re.search(r'<p id="message">(.*?)</p>', response.text, re.S)
    assert found, response.text[:2000]
    return html.unescape(found.group(1))


# -- each annotator's share ----------------------------------------------------------------------


def test_a_pair_outside_the_annotators_share_is_refused_and_its_form_not_served(
    web: FastAPI, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    ann = browser(web, "ann")
    state = log_of(opened, bench).state()
    mine = state.assigned("ann")
    others = [p for p in state.pair_ids if p not in mine]
    assert mine
    assert others
    for pair_id in others:
        page = ann.get(f"/annotate?pair={pair_id}")
        assert page.status_code == 403, pair_id
        assert f"pair {pair_id!r} is not in 'ann''s share of the sample" in message(page)
        assert 'name="token"' not in page.text  # no form to answer it with
        assert html.escape(records[pair_id]["prompt"], quote=False) not in page.text
    outside = next(p for p in records if p not in state.pair_ids)
    assert ann.get(f"/annotate?pair={outside}").status_code == 404
    assert ann.get("/annotate?pair=pair-nope").status_code == 404
    assert hidden(ann.get(f"/annotate?pair={mine[-1]}").text, "pair_id") == mine[-1]


def test_an_answer_outside_the_share_is_refused_by_the_log_even_with_a_signed_form(
    web: FastAPI, opened: App, bench: Path
) -> None:
    """A form token is no assignment: the log refuses the answer when it records it."""
    ann = browser(web, "ann")
    log = log_of(opened, bench)
    theirs = next(p for p in log.state().pair_ids if p not in log.state().assigned("ann"))
    before = opened.events.stream_version(stream_of(bench))
    token = signer_of(bench).form_token("ann", theirs)
    posted = ann.post("/annotate", data={"pair_id": theirs, "token": token, "choice": "A"})
    assert posted.status_code == 403
    assert "not in 'ann''s share" in message(posted)
    with pytest.raises(NotAssigned, match="share of the sample"):
        log.record("ann", theirs, "B", "", "A")
    assert opened.events.stream_version(stream_of(bench)) == before


def _newcomer_taking(log: AnnotationLog, annotator: str) -> tuple[str, str]:
    """A name that, invited now, takes one of ``annotator``'s pairs, and that pair."""
    state = log.state()
    assert state.design is not None
    for name in ("dan", "eve", "fay", "gus", "hal", "ida", "jo", "kim", "lee", "max"):
        for pair_id in state.assigned(annotator):
            k = state.design.k if pair_id in state.overlap else 1
            if annotator not in assignees(pair_id, [*state.invited, name], k):
                return name, pair_id
    raise AssertionError("no newcomer takes a pair of theirs")


def test_the_assignment_is_checked_on_the_stream_at_append_time(opened: App, bench: Path) -> None:
    """A server that read the state before another invited a newcomer who took the pair still
    refuses the answer: the check is made on the stream caught up under the append's lock."""
    create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, **SHARED)
    first, second = log_of(opened, bench), log_of(opened, bench)
    first.join("ann")
    newcomer, moved = _newcomer_taking(first, "ann")
    assert moved in first.state().assigned("ann")  # what the first server last read
    second.invite([newcomer])
    with pytest.raises(NotAssigned):
        first.record("ann", moved, "A", "", "A")
    assert ("ann", moved) not in second.state().labels


def test_an_answer_no_longer_in_the_share_cannot_be_undone(
    web: FastAPI, opened: App, bench: Path
) -> None:
    """Undo would take back an answer its annotator may no longer give again: refused, and the
    pages offer no undo for it; the answer stands."""
    ann = browser(web, "ann")
    log = log_of(opened, bench)
    newcomer, moved = _newcomer_taking(log, "ann")
    assert answer(ann, moved).status_code == 303
    undo = undo_fields(ann.get("/annotate").text)
    assert undo["pair_id"] == moved
    log.invite([newcomer])
    refused = ann.post("/undo", data=undo)
    assert refused.status_code == 403
    assert "not in 'ann''s share" in message(refused)
    assert 'id="undo-form"' not in ann.get("/annotate").text
    assert ("ann", moved) in log.state().labels


# -- who reads the labels --------------------------------------------------------------------------

READS = ["/results", "/annotations.csv", "/annotations.jsonl"]


@pytest.mark.parametrize("path", READS)
@pytest.mark.parametrize(
    "who",
    ["nobody", "forged annotator", "withdrawn annotator", "forged owner", "another UI's owner"],
)
def test_labels_are_refused_to_anyone_but_joined_annotators_and_the_owner(
    web: FastAPI, opened: App, bench: Path, path: str, who: str
) -> None:
    ann = browser(web, "ann")
    first = hidden(ann.get("/annotate").text, "pair_id")
    assert answer(ann, first, comment="ann-private-comment").status_code == 303
    client = TestClient(web, follow_redirects=False)
    if who == "forged annotator":
        client.cookies.set(cookie_of(bench), Signer(b"k" * 40, stream_of(bench)).cookie("ann"))
    elif who == "withdrawn annotator":
        client = browser(web, "bob")
        log_of(opened, bench).withdraw(["bob"])
    elif who == "forged owner":
        client.cookies.set(owner_cookie_name(load_benchmark(bench)), "0" * 64)
    elif who == "another UI's owner":
        other = Signer(b"k" * 40, stream_of(bench)).owner()
        assert client.get(f"/owner?token={other}").status_code == 403
    response = client.get(path)
    assert response.status_code == 403, response.text[:2000]
    assert "\n" not in message(response).strip()
    assert "ann-private-comment" not in response.text
    assert "set-cookie" not in response.headers


def test_no_cookie_is_told_who_may_read_the_labels(web: FastAPI) -> None:
    response = TestClient(web).get("/results")
    assert response.status_code == 403
    assert message(response) == (
        "the results and labels are for invited annotators who joined (through their invite "
        "link) and for whoever runs the UI (its owner link); this browser is signed in as "
        "neither"
    )


def test_a_token_or_cookie_in_other_characters_is_refused_not_an_error(
    web: FastAPI, opened: App, bench: Path
) -> None:
    """Tokens are compared in constant time as bytes: text outside ASCII in an answer's token,
    an owner link or a cookie is a refusal (403), never a server error."""
    ann = browser(web, "ann")
    client = TestClient(web, follow_redirects=False, raise_server_exceptions=False)
    before = opened.events.stream_version(stream_of(bench))
    pair_id = hidden(ann.get("/annotate").text, "pair_id")
    posted = ann.post("/annotate", data={"pair_id": pair_id, "token": "é" * 64, "choice": "A"})
    assert posted.status_code == 403
    assert client.get("/owner", params={"token": "é" * 64}).status_code == 403
    names = (owner_cookie_name(load_benchmark(bench)), cookie_of(bench))
    for name in names:
        header = f"{name}=\xe9\xe9.\xe9".encode("latin-1")
        response = client.get("/results", headers={b"cookie": header})
        assert response.status_code == 403, name
    assert opened.events.stream_version(stream_of(bench)) == before


def _rows(client: TestClient) -> set[tuple[str, str]]:
    response = client.get("/annotations.jsonl")
    assert response.status_code == 200, response.text[:2000]
    return {(r["annotator"], r["pair_id"]) for r in map(json.loads, response.text.splitlines())}


def test_an_annotator_reads_the_others_answers_on_a_pair_only_after_giving_their_own(
    opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    web = create_app(
        opened,
        bench,
        sample_size=SAMPLE,
        secret=SECRET,
        invites=["ann", "bob"],
        overlap=2,
        overlap_share=1.0,
    )
    ann, bob = browser(web, "ann"), browser(web, "bob")
    first = label_next(ann, records, "intended", comment="ann-on-the-first")
    second = label_next(ann, records, "other", comment="ann-on-the-second")
    page = bob.get("/results").text
    assert "ann-on-the-first" not in page
    assert "ann-on-the-second" not in page
    assert 'id="no-results"' in page  # no agreement from answers bob may not read
    assert _rows(bob) == set()
    for read in ("/annotations.csv", "/annotations.jsonl"):
        assert "ann-on-the-first" not in bob.get(read).text

    assert answer(bob, first, comment="bob-on-the-first").status_code == 303
    bob.post("/undo", data=undo_fields(bob.get("/annotate").text))  # before he read anything
    assert _rows(bob) == set()  # taken back: hidden again until he answers
    assert answer(bob, first, comment="bob-on-the-first").status_code == 303
    page = bob.get("/results").text
    assert "ann-on-the-first" in page
    assert "bob-on-the-first" in page
    assert "ann-on-the-second" not in page
    assert 'id="blind"' in page
    assert _rows(bob) == {("ann", first), ("bob", first)}
    assert _rows(ann) == {("ann", first), ("ann", second), ("bob", first)}

    assert _rows(as_owner(web)) == {("ann", first), ("ann", second), ("bob", first)}


def test_the_owner_link_opens_every_label_and_is_the_same_after_a_restart(
    web: FastAPI, opened: App, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    ann = browser(web, "ann")
    label_next(ann, records, "intended", comment="only-ann-answered")
    link = web.state.owner_link
    assert link == f"/owner?token={signer_of(bench).owner()}"
    owner = TestClient(web, follow_redirects=False)
    assert owner.get("/results").status_code == 403
    opened_link = owner.get(link)
    assert opened_link.status_code == 303
    assert opened_link.headers["location"] == "/results"
    assert owner_cookie_name(load_benchmark(bench)) in opened_link.cookies
    page = owner.get("/results").text
    assert "only-ann-answered" in page
    assert 'id="blind"' not in page
    assert 'id="owner"' in owner.get("/").text
    state = log_of(opened, bench).state()
    everything = label_rows(state, load_benchmark(bench))
    assert _rows(owner) == {(r["annotator"], r["pair_id"]) for r in everything}
    for forged in ("", "0" * 64, Signer(SECRET, "annotations-0123456789ab").owner()):
        refused = TestClient(web, follow_redirects=False).get(f"/owner?token={forged}")
        assert refused.status_code == 403
        assert "set-cookie" not in refused.headers
    again = create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, **SHARED)
    assert again.state.owner_link == link


# -- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("Zoë", "Zoë"),
        ("Zoe\u0308", "Zoë"),  # typed decomposed: the same annotator
        ("José Núñez", "José Núñez"),
        ("Łukasz_2", "Łukasz_2"),
        ("李雷", "李雷"),
        ("प्रिया", "प्रिया"),  # vowel signs and a virama: combining marks on letters
        ("Ann-Marie O.", "Ann-Marie O."),
    ],
)
def test_a_name_in_any_alphabet_is_invited_and_joins_labels_and_reads_with_its_link(
    opened: App, bench: Path, records: dict[str, dict[str, Any]], typed: str, name: str
) -> None:
    web = create_app(opened, bench, sample_size=SAMPLE, secret=SECRET, invites=[typed])
    assert list(web.state.invite_links) == [name]
    client = browser(web, name)
    assert f'id="signed-in">{html.escape(name)}<' in client.get("/").text
    assert client.cookies[cookie_of(bench)].isascii()
    label_next(client, records, "intended", comment="mine")
    assert _rows(client) == {(name, p) for (_n, p) in log_of(opened, bench).state().labels}
    assert f'<tr data-annotator="{html.escape(name)}">' in client.get("/results").text


@pytest.mark.parametrize(
    "name",
    [
        "ann/bob", "ann\\bob", 'say "hi"', "Ann O'Tator", "a\x00b", "tab\there", "line\nbreak",
        "\u202eevil", "zero\u200bwidth", "\u0308mark first", "Zoë" * 14, "<b>", "a|b", "x²",
    ],
)  # fmt: skip
def test_a_name_with_a_control_slash_quote_or_symbol_is_still_refused(name: str) -> None:
    with pytest.raises(BadName, match="is not allowed"):
        check_name(name)


def test_the_invite_command_prints_a_working_link_for_a_name_in_another_alphabet(
    workspace: Path, bench: Path
) -> None:
    url = "http://127.0.0.1:8765"
    result = CliRunner().invoke(
        cli_app,
        ["annotations", "invite", str(bench), "Zoë", "--url", url, "--home", str(workspace)],
    )
    assert result.exit_code == 0, result.output
    link = re.search(rf"invite Zoë: {re.escape(url)}(/join\?invite=\S+)", result.output)
    assert link, result.output
    assert link.group(1).isascii()
    with App(load_settings(workspace)) as app:
        client = TestClient(create_app(app, bench, sample_size=SAMPLE), follow_redirects=False)
        page = client.get(link.group(1))
        assert '<strong id="invited-name">Zoë</strong>' in page.text
        joined = client.post("/join", data={"invite": hidden(page.text, "invite")})
        assert joined.status_code == 303
        assert 'id="signed-in">Zoë<' in client.get("/").text


# -- the store checks out ------------------------------------------------------------------------


@pytest.mark.usefixtures("allow_model_requests")  # doctor probes the (fake) providers
def test_store_verify_and_doctor_pass_after_invites_labels_undos_and_a_withdrawal(
    workspace: Path, bench: Path, records: dict[str, dict[str, Any]]
) -> None:
    runner = CliRunner()
    with App(load_settings(workspace)) as app:
        create_app(app, bench, sample_size=SAMPLE)  # draws the sample and its design
    invited = runner.invoke(
        cli_app, ["annotations", "invite", str(bench), "alice", "bob", "--home", str(workspace)]
    )
    assert invited.exit_code == 0, invited.output
    link = re.search(r"invite alice: \S*?(/join\?invite=\S+)", invited.output)
    assert link, invited.output
    with App(load_settings(workspace)) as app:
        client = TestClient(create_app(app, bench, sample_size=SAMPLE), follow_redirects=False)
        page = client.get(link.group(1))
        joined = client.post("/join", data={"invite": hidden(page.text, "invite")})
        assert joined.status_code == 303
        label_next(client, records, "intended", comment="first thoughts")
        assert (
            client.post("/undo", data=undo_fields(client.get("/annotate").text)).status_code == 303
        )
        label_next(client, records, "other")
        assert client.get("/results").status_code == 200  # ends the undo of that answer
        types = {s.type for s in app.events.read_stream(stream_of(bench))}
    withdrawn = runner.invoke(
        cli_app, ["annotations", "withdraw", str(bench), "bob", "--home", str(workspace)]
    )
    assert withdrawn.exit_code == 0, withdrawn.output
    assert {"AnnotatorInvited", "AnnotatorJoined", "AnnotationRecorded"} <= types
    assert "AnnotationRetracted" in types
    assert "AnnotatorReadLabels" in types

    verified = runner.invoke(cli_app, ["store", "verify", "--home", str(workspace)])
    assert verified.exit_code == 0, verified.output
    assert "every chain intact" in verified.output
    assert "problem" not in verified.output
    doctor = runner.invoke(cli_app, ["doctor", "--home", str(workspace)])
    assert doctor.exit_code == 0, doctor.output
    assert "FAIL" not in doctor.output
