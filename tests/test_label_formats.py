"""Issue 44: the human labels where annotators' tools read them. `annotations export --format
label-studio` and `--format argilla` (and the UI's downloads) write Label Studio tasks with the
labelling config their results refer to, and Argilla 2.x records with the dataset settings they
answer. Each is loaded with the tool's own SDK (label-studio-sdk's LabelInterface and task model,
argilla's Settings, Dataset and Record); the owner's export carries the whole record, an
annotator's stays blind (no letter the intended answer was shown under, no label, no prediction
or suggestion of it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.ui import create_app
from playlisteval.ui.annotations import AnnotationLog, AnnotationState, in_letters_of
from playlisteval.ui.benchmark import load_benchmark
from playlisteval.ui.label_formats import LS_CHOICES, argilla_user_id, owner_letter
from store.annotation_events import AnnotatorReadLabels, decode_annotation
from tests.test_ui import (
    SECRET,
    answer_text,
    as_owner,
    hidden,
    join,
    label_next,
    stream_of,
)

# The small benchmark of tests/test_ui.py, its records and the open workspace: its fixtures.
from tests.test_ui import bench as bench
from tests.test_ui import opened as opened
from tests.test_ui import records as records

ls_interface = pytest.importorskip("label_studio_sdk.label_interface")
ls_types = pytest.importorskip("label_studio_sdk.types")
rg = pytest.importorskip("argilla")

SAMPLE = 6
LABELS = ("intended", "other", "cant_tell")


@pytest.fixture
def web(opened: App, bench: Path, records: dict[str, dict[str, Any]]) -> FastAPI:
    """A UI where ann answered three pairs (one of each label, two with comments) and bob the
    first of them: every pair goes to both."""
    web = create_app(
        opened,
        bench,
        sample_size=SAMPLE,
        secret=SECRET,
        invites=["ann", "bob"],
        overlap=2,
        overlap_share=1.0,
    )
    ann, bob = _browser(web, "ann"), _browser(web, "bob")
    comments = dict(zip(LABELS, ("=SUM(A1)", "", "ambigu, «quoted»"), strict=True))
    given = [label_next(ann, records, label, comment=comments[label]) for label in LABELS]
    _answer_pair(bob, records, given[0], "other")
    return web


def _answer_pair(
    client: TestClient, records: dict[str, dict[str, Any]], pair_id: str, label: str
) -> None:
    """Answer ``pair_id`` with the letter that means ``label`` on the page the annotator sees."""
    page = client.get(f"/annotate?pair={pair_id}").text
    chosen = "A" if answer_text(page, "A") == records[pair_id]["chosen"] else "B"
    choice = chosen if label == "intended" else "B" if chosen == "A" else "A"
    fields = {"pair_id": pair_id, "token": hidden(page, "token"), "choice": choice}
    assert client.post("/annotate", data=fields).status_code == 303


def _browser(web: FastAPI, name: str) -> TestClient:
    client = TestClient(web, follow_redirects=False)
    join(client, name)
    return client


def _state(opened: App, bench: Path) -> AnnotationState:
    return AnnotationLog(opened.events, load_benchmark(bench)).state()


def _export(workspace: Path, bench: Path, out: Path, fmt: str) -> Any:
    return CliRunner().invoke(
        cli_app,
        [
            "annotations",
            "export",
            str(bench),
            "--out",
            str(out),
            "--format",
            fmt,
            "--home",
            str(workspace),
        ],
    )


# -- Label Studio --------------------------------------------------------------------------------


def _check_with_label_studio(config: str, tasks: list[dict[str, Any]]) -> None:
    """What Label Studio's SDK checks of a project's config and of tasks imported into it."""
    interface = ls_interface.LabelInterface(config)
    interface.validate()  # the config's schema, unique names, every toName names an object
    for task in tasks:
        # The import API's task model. Its PredictionRequest is the model of POST
        # /api/predictions, which names its task (``task: int``); a prediction inside an
        # imported task has none ("Import pre-annotated data": model_version, score, result),
        # so predictions are checked against the config below instead.
        ls_types.ImportApiRequest.model_validate(
            {k: v for k, v in task.items() if k != "predictions"}
        )
        for prediction in task.get("predictions", []):
            assert set(prediction) <= {"model_version", "score", "result"}
        for obj in interface.objects:  # every $value the config reads is in the task's data
            assert task["data"].get(obj.value_name) is not None, obj.value_name
        for annotation in task["annotations"]:
            assert interface.validate_annotation(annotation), annotation
        for prediction in task.get("predictions", []):
            assert interface.validate_prediction(prediction, return_errors=True) == []


def test_the_owners_label_studio_export_loads_in_label_studios_sdk_with_the_whole_record(
    web: FastAPI, opened: App, bench: Path, workspace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "labels.json"
    result = _export(workspace, bench, out, "label-studio")
    assert result.exit_code == 0, result.output
    assert "4 label(s) written" in result.output
    config = (tmp_path / "labels.label_config.xml").read_text(encoding="utf-8")
    tasks = json.loads(out.read_text(encoding="utf-8"))
    owner = as_owner(web)
    assert owner.get("/annotations.label-studio.json").json() == tasks  # the same download
    assert owner.get("/annotations.label-studio.xml").text == config
    _check_with_label_studio(config, tasks)

    state, benchmark = _state(opened, bench), load_benchmark(bench)
    assert {t["data"]["pair_id"] for t in tasks} == {p for (_a, p) in state.labels}
    for task in tasks:
        data, pair_id = task["data"], task["data"]["pair_id"]
        pair = benchmark.pairs[pair_id]
        assert data["intended"] == owner_letter(pair_id)
        intended_text = data["answer_a"] if data["intended"] == "A" else data["answer_b"]
        assert intended_text == pair.chosen
        assert data["question"] == pair.prompt
        (prediction,) = task["predictions"]
        assert prediction["result"][0]["value"] == {"choices": [data["intended"]]}
        names = [m["annotator"] for m in task["meta"]["annotations"]]
        assert len(names) == len(task["annotations"])
        for name, annotation in zip(names, task["annotations"], strict=True):
            label = state.labels[name, pair_id]
            picked = annotation["result"][0]["value"]["choices"][0]
            assert picked == LS_CHOICES[in_letters_of(label, data["intended"])]
            comments = [r["value"]["text"] for r in annotation["result"][1:]]
            assert comments == ([[label.comment]] if label.comment else [])
    assert sorted(n for t in tasks for n in (m["annotator"] for m in t["meta"]["annotations"])) == [
        "ann",
        "ann",
        "ann",
        "bob",
    ]


def test_label_studios_sdk_refuses_a_result_the_config_does_not_offer(
    web: FastAPI, tmp_path: Path, workspace: Path, bench: Path
) -> None:
    """The check above can fail: a choice the config does not list, or a control it has not."""
    out = tmp_path / "labels.json"
    assert _export(workspace, bench, out, "label-studio").exit_code == 0
    interface = ls_interface.LabelInterface(
        (tmp_path / "labels.label_config.xml").read_text(encoding="utf-8")
    )
    annotation = json.loads(out.read_text())[0]["annotations"][0]
    wrong_value = json.loads(json.dumps(annotation))
    wrong_value["result"][0]["value"] = {"choices": ["C"]}
    wrong_control = json.loads(json.dumps(annotation))
    wrong_control["result"][0]["from_name"] = "rating"
    assert interface.validate_annotation(annotation)
    assert not interface.validate_annotation(wrong_value)
    assert not interface.validate_annotation(wrong_control)


# -- Argilla ---------------------------------------------------------------------------------------


def _offline_argilla() -> Any:
    """An Argilla client whose server is a fake at the network edge. Constructing settings and
    fields needs a client (``argilla/settings/_field.py``: ``_client or Argilla._get_default()``),
    and making one asks the server who it is (``argilla/_api/_client.py``:
    ``_validate_connection`` → ``GET /api/v1/me``, ``argilla/_api/_users.py``), answered here
    with the fields ``UserModel`` reads (``argilla/_models/_user.py``: username, role). Any other
    request fails the test: building objects must not reach a server."""

    def server(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/api/v1/me":
            return httpx.Response(
                200,
                json={
                    "id": "00000000-0000-4000-8000-000000000001",
                    "username": "owner",
                    "role": "owner",
                },
            )
        raise AssertionError(f"building Argilla objects sent {request.method} {request.url}")

    url = "http://argilla.invalid"
    return rg.Argilla(api_url=url, api_key="offline", mounts={url: httpx.MockTransport(server)})


def _load_with_argilla(settings_path: Path, records: list[dict[str, Any]]) -> list[Any]:
    """The export as Argilla's SDK builds it: settings from their file, a dataset of them, its
    records from their dicts; each record's responses as the API model the server takes."""
    client = _offline_argilla()
    settings = rg.Settings.from_json(settings_path)
    settings.validate()
    dataset = rg.Dataset(name="labels", settings=settings, client=client)
    question = dataset.settings.questions["preference"]
    built = []
    for data in records:
        record = rg.Record.from_dict(data, dataset=dataset)
        record.api_model()  # every response names a question of the settings
        # The server takes a label question's answer only from its options (Argilla's
        # LabelQuestion: "labels"); no model in the SDK checks it before sending, so here.
        for response in record.responses["preference"]:
            assert response.value in question.labels
        for suggestion in record.suggestions:
            assert suggestion.value in question.labels
        # allow_extra_metadata=False: the server refuses a metadata name the settings lack.
        assert set(record.metadata) <= {m.name for m in dataset.settings.metadata}
        built.append(record)
    return built


def test_the_owners_argilla_export_builds_with_argillas_sdk_offline(
    web: FastAPI, opened: App, bench: Path, workspace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "labels.json"
    result = _export(workspace, bench, out, "argilla")
    assert result.exit_code == 0, result.output
    settings_path = tmp_path / "labels.settings.json"
    exported = json.loads(out.read_text(encoding="utf-8"))
    owner = as_owner(web)
    assert owner.get("/annotations.argilla.json").json() == exported
    assert owner.get("/annotations.argilla-settings.json").json() == json.loads(
        settings_path.read_text()
    )
    built = _load_with_argilla(settings_path, exported)

    state, benchmark = _state(opened, bench), load_benchmark(bench)
    users = {argilla_user_id(name): name for name in ("ann", "bob")}
    assert len(users) == 2
    assert {str(r.id) for r in built} == {p for (_a, p) in state.labels}
    for record in built:
        pair = benchmark.pairs[str(record.id)]
        intended = record.metadata["intended"]
        assert intended == owner_letter(pair.id)
        fields = record.fields
        assert (fields["answer_a"] if intended == "A" else fields["answer_b"]) == pair.chosen
        assert record.suggestions["preference"].value == intended
        given = {users[str(r.user_id)]: r.value for r in record.responses["preference"]}
        assert given == {
            name: in_letters_of(state.labels[name, pair.id], intended)
            for (name, p) in state.labels
            if p == pair.id
        }
        assert record.metadata["annotators"] == list(given)


# -- blind for annotators -----------------------------------------------------------------------


def _reads(opened: App, bench: Path) -> list[str]:
    events = [decode_annotation(s) for s in opened.events.read_stream(stream_of(bench))]
    return [e.read for e in events if isinstance(e, AnnotatorReadLabels)]


def test_an_annotators_tool_downloads_stay_blind_and_in_their_own_letters(
    web: FastAPI, opened: App, bench: Path, tmp_path: Path
) -> None:
    bob = _browser(web, "bob")
    state = _state(opened, bench)
    (mine,) = [p for (a, p) in state.labels if a == "bob"]
    bobs_letter = state.labels["bob", mine].chosen_shown_as
    pair = load_benchmark(bench).pairs[mine]

    config = bob.get("/annotations.label-studio.xml")
    settings = bob.get("/annotations.argilla-settings.json")
    assert config.status_code == settings.status_code == 200
    assert _reads(opened, bench) == []  # no labels in them: the undo is still open
    tasks_response = bob.get("/annotations.label-studio.json")
    records_response = bob.get("/annotations.argilla.json")
    assert _reads(opened, bench) == ["label-studio"]  # the first labels read ends the undo

    for text in (tasks_response.text, records_response.text, settings.text):
        for secret in ("intended", "chosen_shown_as", '"label"'):
            assert secret not in text
    tasks, exported = tasks_response.json(), records_response.json()
    _check_with_label_studio(config.text, tasks)
    settings_path = tmp_path / "settings.json"
    settings_path.write_text(settings.text)
    (record,) = _load_with_argilla(settings_path, exported)
    (task,) = tasks
    assert task["data"]["pair_id"] == str(record.id) == mine  # only the pair bob answered
    assert "predictions" not in task
    assert len(record.suggestions) == 0
    shown = (pair.chosen, pair.rejected) if bobs_letter == "A" else (pair.rejected, pair.chosen)
    assert (task["data"]["answer_a"], task["data"]["answer_b"]) == shown  # as bob saw them
    expected = {
        name: in_letters_of(state.labels[name, mine], bobs_letter) for name in ("ann", "bob")
    }
    assert expected["bob"] == state.labels["bob", mine].choice  # his own letters
    names = [m["annotator"] for m in task["meta"]["annotations"]]
    picked = [a["result"][0]["value"]["choices"][0] for a in task["annotations"]]
    assert dict(zip(names, picked, strict=True)) == {n: LS_CHOICES[c] for n, c in expected.items()}
    users = {argilla_user_id(name): name for name in ("ann", "bob")}
    assert {users[str(r.user_id)]: r.value for r in record.responses["preference"]} == expected


@pytest.mark.parametrize(
    "path",
    [
        "/annotations.label-studio.json",
        "/annotations.label-studio.xml",
        "/annotations.argilla.json",
        "/annotations.argilla-settings.json",
    ],
)
def test_a_stranger_gets_no_tool_download(web: FastAPI, path: str) -> None:
    response = TestClient(web, follow_redirects=False).get(path)
    assert response.status_code == 403
    assert "owner link" in response.text


def test_an_unknown_format_is_one_line_and_writes_nothing(
    web: FastAPI, workspace: Path, bench: Path, tmp_path: Path
) -> None:
    result = _export(workspace, bench, tmp_path / "labels.json", "prodigy")
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "cannot tell the label format" in said
    assert "label-studio or argilla" in said
    assert "Traceback" not in result.output
    assert list(tmp_path.glob("labels*")) == []
    assert as_owner(web).get("/annotations.prodigy.json").status_code == 404
