"""The paper's Phase II gates: the distractor set's form, then textual undetectability (text
only), then visual detectability (with the video). Registered in this order, which is the order
the loop runs gates of one cost kind in."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from functools import partial

from agents.gates.call import Finding, GateCall, Verdict, distractor_set_text, unanimous
from agents.gates.table import register_gate
from agents.structural import phase2_structural
from policies.attempts import default_gate
from tools.contracts.roles import TEXTUAL_RANKER, VISUAL_RANKER, LabelledAnswer, RankingContext


def _shuffled(labelled: list[tuple[str, str]], salt: str) -> list[tuple[str, str]]:
    """Deterministic shuffle (replay must see the same order)."""
    rng = random.Random(hashlib.sha256(salt.encode()).hexdigest())
    out = list(labelled)
    rng.shuffle(out)
    return out


def _in_ratings(order: Sequence[str], rating_of: Mapping[str, str]) -> str:
    """A ranker's order of shuffled labels told in the generator's own terms: the ratings of the
    answers (``gold`` for the gold answer), never the labels it never saw. A label the ranker
    made up shows as ``?``; answers it left out are named after the order."""

    def name(label: str) -> str:
        rating = rating_of.get(label)
        return "?" if rating is None else ("gold" if rating == "5" else rating)

    text = " > ".join(name(label) for label in order) or "nothing"
    missing = [name(label) for label in rating_of if label not in order]
    if missing:
        text += f" (leaving out {', '.join(missing)})"
    return text


@register_gate(default_gate("structural", 2))
async def structural_2(call: GateCall) -> Verdict:
    """The distractor set's form: four ratings, causal records, visual-only degradations."""
    distractors = call.distractors
    result = phase2_structural(distractors, call.qa.gold_answer)
    return Verdict(result.passed, result.reason, distractor_set_text(distractors))


@register_gate(default_gate("textual_undetectability", 2))
async def textual_undetectability(call: GateCall) -> Verdict:
    """Rejected only when every text-only ranker recovers the intended order gold ≻ 4 ≻ … ≻ 1.

    As the paper has it, the set is rejected only when all the rankers recover the order; one
    that does not settles it (a pass, the rest are not asked). A ranker that gives no usable
    answer, after its retries, gives no verdict and those that answered decide, as in
    :func:`agents.gates.phase1.parametric_test`; when none answered the set is rejected as
    undecided. Orders are told in ratings, never in the shuffled labels the generator never
    saw."""
    qa, distractors = call.qa, call.distractors
    graded = [("5", qa.gold_answer), *((str(a.rating), a.answer) for a in distractors.answers)]
    order = _shuffled(graded, f"{call.seed.seed_id}|text|{call.request.attempt}")
    labels = {rating: chr(ord("A") + i) for i, (rating, _) in enumerate(order)}
    rating_of = {label: rating for rating, label in labels.items()}
    intended = tuple(labels[r] for r in ("5", "4", "3", "2", "1"))
    rubric = tuple(sorted({d.attribute for a in distractors.answers for d in a.causal_record}))
    context = RankingContext(
        role="textual_ranker",
        question=qa.question,
        answers=tuple(LabelledAnswer(label=labels[r], text=text) for r, text in order),
        rubric=rubric,
    )

    async def ranks(model: str) -> Finding:
        ranking = await call.ask(TEXTUAL_RANKER, model, context)
        if tuple(ranking.order) == intended:
            return Finding(True, model)
        return Finding(
            False,
            f"{model} could not recover the order from text alone (it ranked "
            f"{_in_ratings(ranking.order, rating_of)})",
        )

    def rejection(recovered: Sequence[str]) -> tuple[str, str]:
        n = len(recovered)
        return (
            f"rejected: {n} of {n} text-only rankers that answered ({', '.join(recovered)}) "
            "recovered the intended order gold > 4 > 3 > 2 > 1 from the text alone (the test "
            "rejects when every ranker that answers does)",
            ": make the errors visual only and keep length, tone and structure identical",
        )

    verifiers = [(model, partial(ranks, model)) for model in call.models.textual_rankers]
    return await unanimous("textual_undetectability", call, verifiers, rejection)


@register_gate(default_gate("visual_detectability", 2))
async def visual_detectability(call: GateCall) -> Verdict:
    """Passed only when, with the video, the four answers rank in the intended order 4 ≻ … ≻ 1.

    Its one ranker's order is told to the generator in ratings (the shuffled labels the ranker
    saw mean nothing to it); a ranker that gives no verdict fails the gate (see
    :meth:`VerifierAgent.handle`)."""
    qa, distractors = call.qa, call.distractors
    by_rating = {str(a.rating): a for a in distractors.answers}
    order = _shuffled(
        [(r, by_rating[r].answer) for r in sorted(by_rating)],
        f"{call.seed.seed_id}|video|{call.request.attempt}",
    )
    labels = {rating: chr(ord("A") + i) for i, (rating, _) in enumerate(order)}
    rating_of = {label: rating for rating, label in labels.items()}
    intended = tuple(labels[r] for r in ("4", "3", "2", "1") if r in labels)
    context = RankingContext(
        role="visual_ranker",
        question=qa.question,
        answers=tuple(
            LabelledAnswer(label=labels[r], text=text, causal_record=by_rating[r].causal_record)
            for r, text in order
        ),
        segments=call.seed.evidence.segments,
    )
    ranking = await call.ask(VISUAL_RANKER, call.models.visual_ranker, context)
    if tuple(ranking.order) == intended:
        return Verdict(True, "the video ranks the four answers in the intended order")
    return Verdict(
        False,
        "with the video the ranker ordered your answers rated "
        f"{_in_ratings(ranking.order, rating_of)}; the intended order is "
        f"{_in_ratings(intended, rating_of)}: make each severity step visibly larger",
        distractor_set_text(distractors),
    )
