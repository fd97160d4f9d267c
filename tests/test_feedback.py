"""Feedback the generator can use: after a Phase II rejection the next Phase II prompt carries
every rejected answer whole (not the first few thousand characters of the set), and the
visual-detectability reason speaks of the generator's own ratings, never of the shuffled
labels only the ranker saw.

The loop runs for real (SQLite log, the offline provider for the roles not scripted here with
pydantic-ai's ``FunctionModel``, behind the real runner and recorder)."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import replace
from pathlib import Path

import anyio
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.structural import phase1_structural, phase2_structural
from agents.workers import REJECTED_ANSWER_CHARS, REJECTED_OUTPUT_CHARS, RoleModels
from playlisteval.app import App, model_factory
from playlisteval.settings import load_settings
from policies.attempts import default_gate
from store.events import AttemptStarted, GateRejected, seed_stream
from tools.contracts.roles import CONTEXT_OPEN, Phase2Context, RankingContext, parse_context

MODELS = RoleModels()
COLOURS = {4: "grey", 3: "green", 2: "orange", 1: "purple"}
# What the ranker answers, in ratings: 3 before 4, then 2 and 1.
RANKED = (3, 4, 2, 1)


def _answer(rating: int) -> str:
    """A distractor of about 5,800 characters (longer than a rejection once kept of a whole
    set), with a last sentence of its own, so a cut shows."""
    colour = COLOURS[rating]
    body = " ".join(
        f"Step {i}: the presenter lifts the {colour} mug beside the telescope and sets it down."
        for i in range(70)
    )
    return f"{body} This is the end of the answer rated {rating}."


ANSWERS = {rating: _answer(rating) for rating in COLOURS}


def _distractors() -> dict[str, object]:
    return {
        "answers": [
            {
                "rating": rating,
                "answer": ANSWERS[rating],
                "causal_record": [
                    {
                        "attribute": "mug colour",
                        "element": "the mug beside the telescope",
                        "original": "white",
                        "degraded": colour,
                        "kind": "colour",
                    }
                ],
            }
            for rating, colour in COLOURS.items()
        ]
    }


def _ranking(context: RankingContext) -> dict[str, object]:
    """The labels of the answers in the order :data:`RANKED` (found by their texts)."""
    label_of = {a.text: a.label for a in context.answers}
    return {"order": [label_of[ANSWERS[r]] for r in RANKED], "reason": "by the mug's colour"}


def _scripted(model_id: str, inner: Model, phase2_prompts: list[str]) -> Model:
    """The offline model, but the Phase II generator writes :func:`_distractors` (and its
    prompts are kept) and the visual ranker answers :func:`_ranking`."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[-1].parts[-1].content[0])  # type: ignore[union-attr,index]
        context = parse_context(prompt)
        if context.role == "phase2_generator":
            phase2_prompts.append(prompt)
            output: dict[str, object] = _distractors()
        elif isinstance(context, RankingContext) and context.role == "visual_ranker":
            output = _ranking(context)
        else:
            return await inner.request(messages, None, info.model_request_parameters)
        tool = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(tool_name=tool, args=json.dumps(output))])

    return FunctionModel(answer, model_name=inner.model_name)


def _curate(workspace: Path) -> tuple[list[object], list[str]]:
    """One seed curated with the structural gates and visual detectability; its events and
    every Phase II generator prompt."""
    prompts: list[str] = []
    gates = (("structural", 1), ("structural", 2), ("visual_detectability", 2))
    with App(load_settings(workspace, generation={"max_attempts": 3})) as app:
        offline = model_factory(app.settings)
        curator = app.curator()
        curator.model_for = lambda model_id: _scripted(model_id, offline(model_id), prompts)
        policy = replace(curator.config.policy, gates=tuple(default_gate(*g) for g in gates))
        curator.config = replace(curator.config, policy=policy)
        seed = app.catalog.seeds()[0]
        anyio.run(lambda: curator.curate("feedback", [seed], budget_micros=None))
        events = [s.event() for s in app.events.read_stream(seed_stream("feedback", seed.id))]
    return list(events), prompts


def test_the_next_phase2_prompt_carries_all_four_rejected_answers_whole(workspace: Path) -> None:
    events, prompts = _curate(workspace)
    rejection = next(
        e for e in events if isinstance(e, GateRejected) and e.gate == "visual_detectability"
    )
    later = events[events.index(rejection) :]
    assert any(isinstance(e, AttemptStarted) and e.phase == 2 for e in later)
    assert len(prompts) >= 2, "no Phase II attempt came after the rejection"
    prompt = prompts[1]
    context = parse_context(prompt)
    assert isinstance(context, Phase2Context)
    [told] = [f for f in context.feedback if f.gate == "visual_detectability"]
    readable = prompt[: prompt.index(CONTEXT_OPEN)]
    for rating, text in ANSWERS.items():
        assert text in told.rejected_output, f"the answer rated {rating} was not fed back whole"
        assert text in readable
        assert f"your answer rated {rating}" in told.rejected_output
    # Each answer alone is longer than all a rejection once kept of a set (4,000 characters).
    assert min(len(text) for text in ANSWERS.values()) > 4000


def test_the_visual_detectability_reason_names_ratings_not_labels(workspace: Path) -> None:
    events, _ = _curate(workspace)
    rejection = next(
        e for e in events if isinstance(e, GateRejected) and e.gate == "visual_detectability"
    )
    assert "ordered your answers rated 3 > 4 > 2 > 1" in rejection.reason
    assert "the intended order is 4 > 3 > 2 > 1" in rejection.reason
    # No shuffled label (a lone capital A–D) appears in what the generator is told.
    assert not re.search(r"\b[A-D]\b", rejection.reason), rejection.reason


def test_a_whole_set_the_structural_gates_pass_fits_the_bound_on_a_rejected_output() -> None:
    """The bound on what goes back is set by the structural gates' own length limit: every
    answer they let through goes back whole, and four of them fit together."""
    for gate in (phase1_structural, phase2_structural):
        limit = inspect.signature(gate).parameters["max_answer_chars"].default
        assert limit <= REJECTED_ANSWER_CHARS
    assert 4 * REJECTED_ANSWER_CHARS < REJECTED_OUTPUT_CHARS
