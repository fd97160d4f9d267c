"""The human labels in the formats annotation tools import: Label Studio tasks (with the labelling
config their results refer to) and Argilla 2.x records (with the dataset settings they answer).

Both are made from the rows :func:`playlisteval.ui.annotations.label_rows` gives a reader, so they
keep its rule: the owner (``reader`` None) gets the whole record, an annotator only the pairs they
answered, every choice in the letters they saw that pair in, and nothing that says which answer
was intended (no letter it was shown under, no label, no suggestion or prediction of it).

Each pair is one task (one record) whose two answers are laid out as the reader reads them: for an
annotator in the order they were shown, for the owner in an order drawn from the pair's id
(:func:`owner_letter`), so no layout puts the intended answer always first. The owner's task also
says which letter that is (``data.intended``, and a prediction or suggestion of it), for agreement
with the intended preference in the tool.

Nothing here imports either tool's SDK: the shapes follow their import formats, and the tests
build the SDKs' own objects from what is written here.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any, Literal, get_args

from playlisteval.ui.annotations import AnnotationState, label_rows, other_letter
from playlisteval.ui.benchmark import Benchmark, BenchmarkPair
from store.annotation_events import Choice, Shown

#: The label tool formats, by the name ``annotations export --format`` takes.
ToolFormat = Literal["label-studio", "argilla"]
TOOL_FORMATS: tuple[ToolFormat, ...] = get_args(ToolFormat)

# Label Studio's labelling config: the names the results refer to (from_name, to_name).
LS_CHOICE = "preference"
LS_COMMENT = "comment"
LS_OBJECT = "question"
#: A Label Studio choice per PlaylistEval choice (``cant_tell`` shows as words there).
LS_CHOICES: dict[Choice, str] = {"A": "A", "B": "B", "cant_tell": "Can't tell"}
#: The model_version of the owner's prediction: the benchmark's intended answer, not a model's.
LS_INTENDED_VERSION = "benchmark-intended-answer"

# Argilla's question names and the agent of the owner's suggestion.
ARGILLA_CHOICE = "preference"
ARGILLA_COMMENT = "comment"
ARGILLA_INTENDED_AGENT = "benchmark-intended-answer"
#: Namespace of the user ids an annotator's name maps to (:func:`argilla_user_id`).
ARGILLA_USERS = uuid.uuid5(uuid.NAMESPACE_URL, "https://playlisteval/annotators")

GUIDELINES = (
    "A question about a long video, and two answers to it. Pick the better answer (A or B), "
    "or can't tell when neither is better; say why in the comment if you like."
)


def tool_format(name: str | None) -> ToolFormat | None:
    """The label tool format ``name`` names, None when it names none."""
    return next((fmt for fmt in TOOL_FORMATS if fmt == name), None)


def owner_letter(pair_id: str) -> Shown:
    """The letter the owner's export shows the intended answer of ``pair_id`` under: drawn from
    the pair's id, so about half the pairs show it first and the same pair always the same."""
    return "A" if hashlib.sha256(pair_id.encode()).digest()[0] % 2 == 0 else "B"


def argilla_user_id(annotator: str) -> str:
    """The Argilla user id an annotator's answers carry: a UUID made from their name (UUID 5),
    the same in every export; map it to the user on your Argilla server when logging."""
    return str(uuid.uuid5(ARGILLA_USERS, annotator))


def _as_letter(choice: str, intended: Shown, label: str | None) -> Choice:
    """An owner's row's choice in the export's letters: the intended answer under ``intended``."""
    if label == "intended":
        return intended
    if label == "other":
        return other_letter(intended)
    return "cant_tell"


def _by_pair(
    state: AnnotationState, benchmark: Benchmark, reader: str | None
) -> dict[str, tuple[Shown, list[dict[str, Any]]]]:
    """The rows ``reader`` may read (:func:`label_rows`), by pair in the order first answered,
    each pair with the letter its intended answer is laid out under and every row's ``choice``
    in those letters."""
    pairs: dict[str, tuple[Shown, list[dict[str, Any]]]] = {}
    for row in label_rows(state, benchmark, reader):
        pair_id = row["pair_id"]
        if reader is None:
            intended = owner_letter(pair_id)
            row = {**row, "choice": _as_letter(row["choice"], intended, row["label"])}
        else:  # the reader answered this pair: their own letters (label_rows' rule)
            intended = state.labels[reader, pair_id].chosen_shown_as
        pairs.setdefault(pair_id, (intended, []))[1].append(row)
    return pairs


def _answers(pair: BenchmarkPair | None, intended: Shown) -> tuple[str, str]:
    """The two answers of ``pair`` as A and B, the intended one under ``intended``."""
    if pair is None:
        return "", ""
    return (pair.chosen, pair.rejected) if intended == "A" else (pair.rejected, pair.chosen)


def _pair_data(
    benchmark: Benchmark, pair_id: str, intended: Shown, owner: bool, overlap: bool
) -> dict[str, Any]:
    """What a task or record shows and files of one pair: the question, the answers as A and
    B, the pair's strata and clips; for the owner also the intended answer's letter."""
    pair = benchmark.pairs.get(pair_id)
    answer_a, answer_b = _answers(pair, intended)
    data: dict[str, Any] = {
        "pair_id": pair_id,
        "question": pair.prompt if pair else "",
        "answer_a": answer_a,
        "answer_b": answer_b,
        "domain": pair.domain if pair else "",
        "gap": pair.gap if pair else None,
        "overlap": overlap,
        "benchmark_sha256": benchmark.content_sha256,
        "evidence": [
            {"video_id": c.video_id, "start_s": c.start_s, "end_s": c.end_s}
            for c in (pair.evidence if pair else ())
        ],
    }
    if owner:
        data["intended"] = intended
    return data


# -- Label Studio --------------------------------------------------------------------------------


def label_studio_config() -> str:
    """The labelling config (XML) the exported tasks' results refer to: the question and the
    two answers as text, a single choice among A, B and can't tell, and a comment."""
    choices = "\n".join(f'    <Choice value="{value}"/>' for value in LS_CHOICES.values())
    return (
        "<View>\n"
        '  <Header value="Question"/>\n'
        f'  <Text name="{LS_OBJECT}" value="$question"/>\n'
        '  <Header value="Answer A"/>\n'
        '  <Text name="answer_a" value="$answer_a"/>\n'
        '  <Header value="Answer B"/>\n'
        '  <Text name="answer_b" value="$answer_b"/>\n'
        '  <Header value="Which answer is better?"/>\n'
        f'  <Choices name="{LS_CHOICE}" toName="{LS_OBJECT}" choice="single-radio" '
        'required="true" showInline="true">\n'
        f"{choices}\n"
        "  </Choices>\n"
        f'  <TextArea name="{LS_COMMENT}" toName="{LS_OBJECT}" maxSubmissions="1" '
        'editable="true" placeholder="Why (optional)"/>\n'
        "</View>\n"
    )


def _ls_result(choice: Choice, comment: str, region: str) -> list[dict[str, Any]]:
    """One answer as Label Studio result items (Label Studio's task format: from_name, to_name,
    type, value): the choice, and the comment when there is one."""
    result: list[dict[str, Any]] = [
        {
            "id": f"{region}-choice",
            "from_name": LS_CHOICE,
            "to_name": LS_OBJECT,
            "type": "choices",
            "value": {"choices": [LS_CHOICES[choice]]},
        }
    ]
    if comment:
        result.append(
            {
                "id": f"{region}-comment",
                "from_name": LS_COMMENT,
                "to_name": LS_OBJECT,
                "type": "textarea",
                "value": {"text": [comment]},
            }
        )
    return result


def label_studio_tasks(
    state: AnnotationState, benchmark: Benchmark, reader: str | None = None
) -> list[dict[str, Any]]:
    """The labels ``reader`` may read as Label Studio tasks (import format): one task per pair,
    its ``data`` the pair, one annotation per standing answer; Label Studio users are its own, so
    who answered (and where the log holds it) is in the task's ``meta``, one entry per
    annotation in the same order. The owner's tasks also carry the intended answer as a
    prediction (``model_version`` :data:`LS_INTENDED_VERSION`)."""
    tasks = []
    for pair_id, (intended, rows) in _by_pair(state, benchmark, reader).items():
        task: dict[str, Any] = {
            "data": _pair_data(benchmark, pair_id, intended, reader is None, rows[0]["overlap"]),
            "annotations": [
                {"result": _ls_result(r["choice"], r["comment"], f"{pair_id}-{n}")}
                for n, r in enumerate(rows)
            ],
            "meta": {
                "annotations": [
                    {"annotator": r["annotator"], "seq": r["seq"], "recorded_at": r["recorded_at"]}
                    for r in rows
                ]
            },
        }
        if reader is None:
            task["predictions"] = [
                {
                    "model_version": LS_INTENDED_VERSION,
                    "result": _ls_result(intended, "", f"{pair_id}-intended"),
                }
            ]
        tasks.append(task)
    return tasks


# -- Argilla ---------------------------------------------------------------------------------------


def _text_field(name: str, title: str) -> dict[str, Any]:
    return {
        "name": name,
        "title": title,
        "required": True,
        "description": None,
        "settings": {"type": "text", "use_markdown": False},
        "type": "text",
    }


def _terms(name: str, values: Sequence[str] | None, visible: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "title": name,
        "visible_for_annotators": visible,
        "settings": {"type": "terms", "values": list(values) if values else None},
    }


def argilla_settings(owner: bool) -> dict[str, Any]:
    """Argilla 2.x dataset settings (the shape ``rg.Settings.from_json`` reads): the question and
    the two answers as text fields, a label question (A, B, can't tell) and an optional comment,
    the pair's strata as metadata; for the owner also the intended answer's letter, hidden from
    annotators."""
    metadata = [
        _terms("domain", None),
        {
            "name": "gap",
            "title": "gap",
            "visible_for_annotators": True,
            "settings": {"type": "integer", "min": None, "max": None},
        },
        _terms("overlap", ("yes", "no")),
        _terms("annotators", None, visible=False),
    ]
    if owner:
        metadata.append(_terms("intended", ("A", "B"), visible=False))
    options = [
        {"value": "A", "text": "Answer A"},
        {"value": "B", "text": "Answer B"},
        {"value": "cant_tell", "text": "Can't tell"},
    ]
    return {
        "guidelines": GUIDELINES,
        "fields": [
            _text_field("question", "Question"),
            _text_field("answer_a", "Answer A"),
            _text_field("answer_b", "Answer B"),
        ],
        "questions": [
            {
                "name": ARGILLA_CHOICE,
                "title": "Which answer is better?",
                "description": None,
                "required": True,
                "settings": {"type": "label_selection", "options": options},
                "type": "label_selection",
            },
            {
                "name": ARGILLA_COMMENT,
                "title": "Why (optional)",
                "description": None,
                "required": False,
                "settings": {"type": "text", "use_markdown": False},
                "type": "text",
            },
        ],
        "vectors": [],
        "metadata": metadata,
        "allow_extra_metadata": False,
        "distribution": {"strategy": "overlap", "min_submitted": 1},
        "mapping": None,
    }


def argilla_records(
    state: AnnotationState, benchmark: Benchmark, reader: str | None = None
) -> list[dict[str, Any]]:
    """The labels ``reader`` may read as Argilla records (the shape ``rg.Record.from_dict``
    reads): one record per pair, id the pair's, one submitted response per standing answer under
    the annotator's user id (:func:`argilla_user_id`; their names in the ``annotators``
    metadata). The owner's records also suggest the intended answer (agent
    :data:`ARGILLA_INTENDED_AGENT`)."""
    records = []
    for pair_id, (intended, rows) in _by_pair(state, benchmark, reader).items():
        data = _pair_data(benchmark, pair_id, intended, reader is None, rows[0]["overlap"])
        responses: dict[str, list[dict[str, Any]]] = {ARGILLA_CHOICE: []}
        for row in rows:
            user = argilla_user_id(row["annotator"])
            responses[ARGILLA_CHOICE].append(
                {"value": row["choice"], "user_id": user, "status": "submitted"}
            )
            if row["comment"]:
                responses.setdefault(ARGILLA_COMMENT, []).append(
                    {"value": row["comment"], "user_id": user, "status": "submitted"}
                )
        metadata: dict[str, Any] = {
            "domain": data["domain"],
            "gap": data["gap"],
            "overlap": "yes" if data["overlap"] else "no",
            "annotators": [row["annotator"] for row in rows],
        }
        record: dict[str, Any] = {
            "id": pair_id,
            "fields": {k: data[k] for k in ("question", "answer_a", "answer_b")},
            "metadata": metadata,
            "responses": responses,
            "suggestions": {},
        }
        if reader is None:
            metadata["intended"] = intended
            record["suggestions"] = {
                ARGILLA_CHOICE: {"value": intended, "agent": ARGILLA_INTENDED_AGENT}
            }
        records.append(record)
    return records


# -- files ----------------------------------------------------------------------------------------


def tool_files(
    fmt: ToolFormat, state: AnnotationState, benchmark: Benchmark, reader: str | None = None
) -> tuple[str, str]:
    """The two texts of label tool format ``fmt`` for ``reader``: the labels (Label Studio
    tasks, or Argilla records) and what they answer (the labelling config, or the dataset
    settings)."""
    if fmt == "label-studio":
        tasks = label_studio_tasks(state, benchmark, reader)
        return _json(tasks), label_studio_config()
    records = argilla_records(state, benchmark, reader)
    return _json(records), _json(argilla_settings(owner=reader is None))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1) + "\n"


def companion_name(name: str, fmt: str) -> str:
    """The file written beside labels file ``name`` in ``fmt``: ``labels.json`` gets
    ``labels.label_config.xml`` (Label Studio) or ``labels.settings.json`` (Argilla)."""
    stem = name[: -len(".json")] if name.lower().endswith(".json") else name
    return f"{stem}.label_config.xml" if fmt == "label-studio" else f"{stem}.settings.json"
