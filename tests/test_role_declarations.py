"""A role is one declaration and a model slot one row: the settings' ``[models]`` table, the
workers' ``RoleModels`` and the composition root read them, the offline provider answers through
them, and a declaration that cannot work is refused when it is made."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Literal

import pytest

import tools.contracts.roles
from agents.prompts import render_prompt
from agents.workers import RoleModels
from playlisteval.app import role_models
from playlisteval.settings import ModelRoles, Settings
from store.errors import ConfigError
from tools.contracts.roles import (
    MODEL_SLOTS,
    PAPER_SLOTS,
    ROLES,
    Frozen,
    ModelSlot,
    OfflineCall,
    ParametricContext,
    RoleContext,
    RoleSpec,
    parse_context,
    register_role,
    register_slot,
)
from tools.providers import Fallibility, answer


class EchoContext(RoleContext):
    role: Literal["toy_echo", "toy_silent"] = "toy_echo"
    question: str


class Echo(Frozen):
    text: str


def echo(call: OfflineCall[EchoContext]) -> Echo:
    return Echo(text=f"{call.model_id}: {call.context.question}")


@pytest.fixture
def toy_roles() -> Iterator[None]:
    """Roles and slots declared in a test are forgotten after it."""
    before = set(ROLES)
    yield
    for name in set(ROLES) - before:
        tools.contracts.roles.unregister_role(name)


def test_the_models_table_has_one_key_per_paper_slot_with_its_default_and_description() -> None:
    keys = [key for key in ModelRoles.model_fields if key not in ("gate_packages", "extensions")]
    assert keys == [slot.key for slot in PAPER_SLOTS]
    dumped = ModelRoles().model_dump(mode="json")
    for slot in PAPER_SLOTS:
        field = ModelRoles.model_fields[slot.key]
        assert field.description == slot.description
        assert slot.normalise(dumped[slot.key]) == slot.default


def test_role_models_are_the_paper_curation_slots_under_their_attributes() -> None:
    curation = [slot for slot in PAPER_SLOTS if slot.curation]
    assert [f.name for f in fields(RoleModels)] == [slot.attribute for slot in curation]
    models = RoleModels()
    # What a run records in RunStarted.models: the slots' defaults, nothing else.
    assert vars(models) == {slot.attribute: slot.default for slot in curation}
    assert role_models(Settings()) == models


def test_all_models_and_who_plays_what_come_from_the_slots() -> None:
    models = RoleModels(
        transcript_matcher="m-match", parametric_pairs=(("m-ans", "m-ver"),), textual_rankers=()
    )
    assert models.all_models() == {
        "gemini-3-flash-preview",
        "m-match",
        "m-ans",
        "m-ver",
        "qwen-3.7-plus",
    }
    playing = models.playing()
    assert playing["parametric_answerer"] == ("m-ans",)
    assert playing["parametric_verifier"] == ("m-ver",)
    assert "textual_ranker" not in playing
    assert models.models_of("parametric_pairs") == ("m-ans", "m-ver")
    assert models.model("visual_detectability") == models.visual_ranker


def test_a_recorded_run_keeps_its_models_and_ignores_names_that_are_no_slot() -> None:
    recorded = RoleModels.recorded(
        {"textual_rankers": ["a", "b"], "parametric_pairs": [["x", "y"]], "retired_role": "z"}
    )
    assert recorded.textual_rankers == ("a", "b")
    assert recorded.parametric_pairs == (("x", "y"),)
    assert recorded.phase1_generator == RoleModels().phase1_generator


def test_a_declared_slot_is_in_every_role_models_and_what_a_run_records(toy_roles: None) -> None:
    register_role(RoleSpec("toy_echo", EchoContext, Echo, video=False, max_output_tokens=64))
    slot = register_slot(ModelSlot("toy_echoes", ("toy_echo",), ("e-1", "e-2"), "Echoes."))
    models = RoleModels()
    assert vars(models)[slot.attribute] == ("e-1", "e-2")
    assert {"e-1", "e-2"} <= models.all_models()
    chosen = RoleModels.of({"toy_echoes": ["e-3"]})
    assert chosen.models_of("toy_echoes") == ("e-3",)
    assert RoleModels.recorded(vars(chosen)) == chosen


def test_the_offline_provider_answers_a_declared_role_through_its_answerer(
    toy_roles: None, tmp_path: Path
) -> None:
    prompt = tmp_path / "toy_echo.md"
    prompt.write_text("Echo the question.\n")
    register_role(
        RoleSpec(
            "toy_echo",
            EchoContext,
            Echo,
            video=False,
            max_output_tokens=64,
            prompt=prompt,
            offline=echo,
        )
    )
    rendered = render_prompt(EchoContext(question="why?"))
    assert rendered.startswith("Echo the question.\n\n## Question\nwhy?")
    context = parse_context(rendered)
    assert context == EchoContext(question="why?")
    assert answer(context, {}, Fallibility(), model_id="m") == Echo(text="m: why?")


def test_a_role_without_an_offline_answerer_or_a_template_is_refused(toy_roles: None) -> None:
    register_role(RoleSpec("toy_silent", EchoContext, Echo, video=False, max_output_tokens=64))
    silent = EchoContext(role="toy_silent", question="?")
    with pytest.raises(ConfigError, match="no answer for role 'toy_silent'"):
        answer(silent, {}, Fallibility(), model_id="m")
    with pytest.raises(ConfigError, match="'toy_silent' has no readable prompt template"):
        render_prompt(silent)


@pytest.mark.parametrize(
    ("declare", "match"),
    [
        (
            lambda: RoleSpec("toy_other", EchoContext, Echo, video=False, max_output_tokens=1),
            "takes only",
        ),
        (lambda: register_role(tools.contracts.roles.SUFFICIENCY), "declared twice"),
        (lambda: register_slot(ModelSlot("toy_x", ("no_such_role",), "m", "")), "undeclared"),
        (lambda: register_slot(tools.contracts.roles.SUFFICIENCY_SLOT), "declared twice"),
        (lambda: ModelSlot("toy_p", ("parametric_answerer",), (("a", "b"),), ""), "2 role"),
        (lambda: tools.contracts.roles.unregister_role("sufficiency"), "the paper's"),
    ],
    ids=["context-role", "role-twice", "slot-role", "slot-twice", "pairs-one-role", "paper"],
)
def test_a_declaration_that_cannot_work_is_refused(declare: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        declare()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("key", "value", "normal"),
    [
        ("sufficiency", "m", "m"),
        ("textual_undetectability", ["a", "b"], ("a", "b")),
        ("parametric_pairs", [["a", "b"]], (("a", "b"),)),
    ],
)
def test_a_slot_reads_its_value_in_its_shape(key: str, value: object, normal: object) -> None:
    assert MODEL_SLOTS[key].normalise(value) == normal


@pytest.mark.parametrize(
    ("key", "value"),
    [("sufficiency", ["m"]), ("textual_undetectability", "a"), ("parametric_pairs", [["a"]])],
)
def test_a_value_of_another_shape_is_a_config_error(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"models.{key}"):
        MODEL_SLOTS[key].normalise(value)


def test_a_paper_context_still_names_its_role_first() -> None:
    # The JSON a prompt ends with is part of every request key: its shape must not move.
    assert ParametricContext(question="q").model_dump_json() == (
        '{"role":"parametric_answerer","question":"q"}'
    )
