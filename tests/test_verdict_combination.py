"""Verdicts combined as the paper has it: the parametric test and textual undetectability reject
only when every verifier that answers recovers the gold (the order). A verifier whose answer is
unusable is asked again — a real, recorded call — and then counts as giving no verdict: the
verifiers that answered decide, and the event says by which rule; a gate nobody answered does
not pass.

The loop runs for real (SQLite log, the offline provider for every role but the ones a test
scripts with pydantic-ai's ``FunctionModel``, behind the real runner and recorder)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.gates import VERIFIER_RETRIES
from agents.workers import RoleModels
from playlisteval.app import App, model_factory
from playlisteval.settings import load_settings
from policies.attempts import default_gate
from store.events import (
    CallRecorded,
    Event,
    GatePassed,
    GateRejected,
    GateRequested,
    ItemAccepted,
    seed_stream,
)
from tools.contracts.roles import Phase2Context, RankingContext, parse_context

MODELS = RoleModels()
# The first parametric pair's verifier and the first text-only ranker: the ones that write garbage.
(_, BROKEN_VERIFIER), (_, OTHER_VERIFIER) = MODELS.parametric_pairs
BROKEN_RANKER, OTHER_RANKER = MODELS.textual_rankers
CALLS_EACH = 1 + VERIFIER_RETRIES


def _garbage(info: AgentInfo) -> ModelResponse:
    """An answer that is not the role's output type: JSON cut off mid-string."""
    tool = info.output_tools[0].name
    return ModelResponse(parts=[ToolCallPart(tool_name=tool, args='{"matches_gold": "perh')])


class Script:
    """What the scripted roles answer, by ``(role, model id)``: an output as JSON data, a
    function of the script and the context giving one, or ``"garbage"``. ``ratings`` holds
    the rating of every distractor written (by its text), for a ranker that must recover the
    intended order."""

    def __init__(self, answers: dict[tuple[str, str], object]) -> None:
        self.answers = answers
        self.ratings: dict[str, int] = {}
        self.prompts: dict[tuple[str, str], list[str]] = {}

    def model(self, model_id: str, inner: Model) -> Model:
        """The offline model for ``model_id``, except where the script answers its role."""

        async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            prompt = str(messages[-1].parts[-1].content[0])  # type: ignore[union-attr,index]
            context = parse_context(prompt)
            scripted = self.answers.get((context.role, model_id))
            self.prompts.setdefault((context.role, model_id), []).append(prompt)
            if scripted is None:
                return await inner.request(messages, None, info.model_request_parameters)
            if scripted == "garbage":
                return _garbage(info)
            if callable(scripted):
                scripted = scripted(self, context)
            tool = info.output_tools[0].name
            return ModelResponse(parts=[ToolCallPart(tool_name=tool, args=json.dumps(scripted))])

        return FunctionModel(answer, model_name=inner.model_name)


def _curate(
    workspace: Path,
    gates: tuple[tuple[str, int], ...],
    answers: dict[tuple[str, str], object],
    script: Script | None = None,
) -> list[Event]:
    """One seed curated with only ``gates`` (and three attempts a phase); its events."""
    script = script or Script(answers)
    with App(load_settings(workspace, generation={"max_attempts": 3})) as app:
        offline = model_factory(app.settings)
        curator = app.curator()
        curator.model_for = lambda model_id: script.model(model_id, offline(model_id))
        policy = replace(curator.config.policy, gates=tuple(default_gate(n, p) for n, p in gates))
        curator.config = replace(curator.config, policy=policy)
        seed = app.catalog.seeds()[0]
        anyio.run(lambda: curator.curate("verdicts", [seed], budget_micros=None))
        return [s.event() for s in app.events.read_stream(seed_stream("verdicts", seed.id))]


def _verdicts(events: list[Event], gate: str) -> list[GatePassed | GateRejected]:
    return [e for e in events if isinstance(e, GatePassed | GateRejected) and e.gate == gate]


def _calls_per_request(events: list[Event], gate: str, role: str, model: str) -> list[int]:
    """For each request of ``gate``, how many calls of ``role`` to ``model`` it recorded. The
    first request's are all first-hand and paid (a retry is a request of its own, not the first
    answer served again); a later attempt's identical requests may be served from those."""
    counts: list[int] = []
    for event in events:
        if isinstance(event, GateRequested) and event.gate == gate:
            counts.append(0)
        elif isinstance(event, CallRecorded) and (event.gate, event.role, event.model) == (
            gate,
            role,
            model,
        ):
            assert len(counts) > 1 or not (event.replayed or event.cost_micros <= 0), event
            counts[-1] += 1
    return counts


PHASE1 = (("structural", 1), ("parametric_test", 1))


def test_a_verifier_writing_garbage_does_not_reject_a_qa_the_other_pair_passes(
    workspace: Path,
) -> None:
    script = Script(
        {
            ("parametric_verifier", BROKEN_VERIFIER): "garbage",
            ("parametric_verifier", OTHER_VERIFIER): {
                "matches_gold": False,
                "reason": "the memory answer names no colour at all",
            },
        }
    )
    events = _curate(workspace, PHASE1, script.answers, script)
    [verdict] = _verdicts(events, "parametric_test")
    assert isinstance(verdict, GatePassed)
    assert "did not recover the gold" in verdict.detail
    assert f"{BROKEN_VERIFIER}: no verdict (malformed twice)" in verdict.detail
    assert isinstance(events[-1], ItemAccepted)
    # The garbage was asked for again, once, and both calls are in the log (paid like any).
    assert _calls_per_request(
        events, "parametric_test", "parametric_verifier", BROKEN_VERIFIER
    ) == [CALLS_EACH]
    # The retry told the model what was wrong with its first answer.
    first, retry = script.prompts[("parametric_verifier", BROKEN_VERIFIER)]
    assert retry.startswith(first)
    assert "answer 1: it was not in the required form" in retry[len(first) :]


def test_the_pairs_that_answered_decide_and_the_rule_is_in_the_rejection(workspace: Path) -> None:
    events = _curate(
        workspace,
        PHASE1,
        {
            ("parametric_verifier", BROKEN_VERIFIER): "garbage",
            ("parametric_verifier", OTHER_VERIFIER): {
                "matches_gold": True,
                "reason": "the memory answer recovers every claim",
            },
        },
    )
    rejections = _verdicts(events, "parametric_test")
    assert rejections
    assert all(isinstance(r, GateRejected) for r in rejections)
    reason = rejections[0].reason  # type: ignore[union-attr]
    assert reason.startswith(
        "rejected: 1 of 1 answerer–verifier pairs that answered recovered the gold"
    )
    assert f"{BROKEN_VERIFIER}: no verdict (malformed twice)" in reason
    assert "the memory answer recovers every claim" in reason
    assert set(
        _calls_per_request(events, "parametric_test", "parametric_verifier", BROKEN_VERIFIER)
    ) == {CALLS_EACH}


def test_a_gate_no_verifier_answered_does_not_pass_and_says_it_judged_nothing(
    workspace: Path,
) -> None:
    events = _curate(
        workspace,
        PHASE1,
        {
            ("parametric_verifier", BROKEN_VERIFIER): "garbage",
            ("parametric_verifier", OTHER_VERIFIER): "garbage",
        },
    )
    verdicts = _verdicts(events, "parametric_test")
    assert verdicts
    assert all(isinstance(v, GateRejected) for v in verdicts)
    reason = verdicts[0].reason  # type: ignore[union-attr]
    assert reason.startswith("no verdict: none of the parametric_test gate's verifiers")
    assert "nothing was found wrong" in reason
    assert f"{BROKEN_VERIFIER}: no verdict" in reason
    assert f"{OTHER_VERIFIER}: no verdict" in reason
    assert verdicts[0].rejected_output.startswith("Question: ")  # type: ignore[union-attr]
    for model in (BROKEN_VERIFIER, OTHER_VERIFIER):
        counts = _calls_per_request(events, "parametric_test", "parametric_verifier", model)
        assert set(counts) == {CALLS_EACH}


def test_a_single_verifier_gate_with_no_verdict_does_not_pass(workspace: Path) -> None:
    """Sufficiency has one verifier: after its retry it still cannot vouch, so no pass."""
    events = _curate(
        workspace,
        (("structural", 1), ("sufficiency", 1)),
        {("sufficiency", MODELS.sufficiency): "garbage"},
    )
    verdicts = _verdicts(events, "sufficiency")
    assert verdicts
    assert all(isinstance(v, GateRejected) for v in verdicts)
    reason = verdicts[0].reason  # type: ignore[union-attr]
    assert f"{MODELS.sufficiency}: no verdict (malformed twice)" in reason
    assert "nothing was found wrong" in reason
    assert set(_calls_per_request(events, "sufficiency", "sufficiency", MODELS.sufficiency)) == {
        CALLS_EACH
    }


COLOURS = {4: "grey", 3: "green", 2: "orange", 1: "purple"}


def _distractors(script: Script, context: object) -> dict[str, object]:
    """A well-formed set: the gold with one visual detail added, a colour per rating."""
    assert isinstance(context, Phase2Context)
    answers = []
    for rating, colour in COLOURS.items():
        text = f"{context.gold_answer} The mug beside the presenter is {colour}."
        script.ratings[text] = rating
        answers.append(
            {
                "rating": rating,
                "answer": text,
                "causal_record": [
                    {
                        "attribute": "mug colour",
                        "element": "the mug beside the presenter",
                        "original": "white",
                        "degraded": colour,
                        "kind": "colour",
                    }
                ],
            }
        )
    return {"answers": answers}


def _mixed_up(script: Script, context: object) -> dict[str, object]:
    """A text-only ranking that misses the intended order: the labels as shown, reversed."""
    assert isinstance(context, RankingContext)
    return {"order": [a.label for a in reversed(context.answers)], "reason": "guessed"}


def _recovering(script: Script, context: object) -> dict[str, object]:
    """A text-only ranking that recovers the intended order: the gold (the one answer the
    generator did not write), then the distractors by their ratings."""
    assert isinstance(context, RankingContext)
    rating = {a.label: script.ratings.get(a.text, 5) for a in context.answers}
    return {"order": sorted(rating, key=lambda label: -rating[label]), "reason": "read it"}


@pytest.mark.parametrize(("other_recovers", "passed"), [(False, True), (True, False)])
def test_text_only_rankers_that_answered_decide(
    workspace: Path, other_recovers: bool, passed: bool
) -> None:
    """One ranker writes garbage twice; the other decides: a pass when it misses the order, a
    rejection naming the rule when it recovers it."""
    events = _curate(
        workspace,
        (("structural", 1), ("structural", 2), ("textual_undetectability", 2)),
        {
            ("phase2_generator", MODELS.phase2_generator): _distractors,
            ("textual_ranker", BROKEN_RANKER): "garbage",
            ("textual_ranker", OTHER_RANKER): _recovering if other_recovers else _mixed_up,
        },
    )
    verdicts = _verdicts(events, "textual_undetectability")
    assert verdicts
    first = verdicts[0]
    assert isinstance(first, GatePassed) is passed
    said = first.detail if isinstance(first, GatePassed) else first.reason
    assert f"{BROKEN_RANKER}: no verdict (malformed twice)" in said
    if passed:
        assert f"{OTHER_RANKER} could not recover the order from text alone" in said
        assert isinstance(events[-1], ItemAccepted)
    else:
        assert said.startswith(
            f"rejected: 1 of 1 text-only rankers that answered ({OTHER_RANKER}) recovered"
        )
    counts = _calls_per_request(events, "textual_undetectability", "textual_ranker", BROKEN_RANKER)
    assert set(counts) == {CALLS_EACH}
