"""The paper's Phase I gates: the gold answer's form, then video necessity (the transcript and
parametric tests, text only), then video sufficiency (with the video). Registered in this order,
which is the order the loop runs gates of one cost kind in."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from agents.gates.call import Finding, GateCall, Verdict, unanimous
from agents.gates.table import register_gate
from agents.structural import phase1_structural
from agents.workers import qa_text
from policies.attempts import default_gate
from tools.contracts.roles import (
    PARAMETRIC_ANSWERER,
    PARAMETRIC_VERIFIER,
    SUFFICIENCY,
    TRANSCRIPT_ANSWERER,
    TRANSCRIPT_MATCHER,
    MatchContext,
    ParametricContext,
    SufficiencyContext,
    TranscriptTestContext,
)


@register_gate(default_gate("structural", 1))
async def structural_1(call: GateCall) -> Verdict:
    """The gold answer's form: paragraphs, and citations of enough chunks of each segment."""
    qa, limits = call.qa, call.limits
    result = phase1_structural(
        qa,
        call.seed.evidence.segments,
        min_paragraphs=limits.min_paragraphs,
        min_chunks=limits.min_cited_chunks,
        max_chunks=limits.max_cited_chunks,
    )
    return Verdict(result.passed, result.reason, qa_text(qa))


@register_gate(default_gate("transcript_test", 1))
async def transcript_test(call: GateCall) -> Verdict:
    """Rejected when an answer written from the transcripts alone matches the gold."""
    qa = call.qa
    answer = await call.ask(
        TRANSCRIPT_ANSWERER,
        call.models.transcript_answerer,
        TranscriptTestContext(
            question=qa.question, windows=call.seed.evidence.transcript_windows(qa.gold_answer)
        ),
    )
    verdict = await call.ask(
        TRANSCRIPT_MATCHER,
        call.models.transcript_matcher,
        MatchContext(
            role="transcript_matcher",
            question=qa.question,
            gold_answer=qa.gold_answer,
            candidate=answer.answer,
        ),
    )
    if verdict.matches_gold:
        return Verdict(
            False,
            "answerable from the transcripts alone: an answer written from the narration "
            f"matched the gold ({verdict.reason}). Ground the answer in what is seen, "
            "not said.",
            qa_text(qa),
        )
    return Verdict(True, f"transcript-only answer does not match: {verdict.reason}")


@register_gate(default_gate("parametric_test", 1))
async def parametric_test(call: GateCall) -> Verdict:
    """Rejected only when every answerer–verifier pair recovers the gold from memory alone.

    As the paper has it, the QA is rejected only when all the pairs recover the gold; one pair
    that does not settles it (a pass, and the remaining calls are saved). A pair whose answerer
    or verifier gives no usable answer, after its retries (``VERIFIER_RETRIES``), gives no
    verdict and the pairs that answered decide: rejected when every one of them recovered the
    gold, and the reason says how many answered and who gave no verdict. When no pair answered
    the gate cannot decide, and the QA is not passed on a vacuous "nobody recovered it": it is
    rejected as undecided (:func:`~agents.gates.call.undecided`: no judgment of the QA, the
    attempt counts as any rejection does, so a verifier that never answers costs at most the
    seed's attempts)."""
    qa = call.qa

    async def recovers(answerer: str, verifier: str) -> Finding:
        answer = await call.ask(
            PARAMETRIC_ANSWERER, answerer, ParametricContext(question=qa.question)
        )
        verdict = await call.ask(
            PARAMETRIC_VERIFIER,
            verifier,
            MatchContext(
                role="parametric_verifier",
                question=qa.question,
                gold_answer=qa.gold_answer,
                candidate=answer.answer,
            ),
        )
        pair = f"{answerer}→{verifier}"
        if verdict.matches_gold:
            return Finding(True, f"{pair}: {verdict.reason}")
        return Finding(False, f"{pair} did not recover the gold: {verdict.reason}")

    def rejection(recovered: Sequence[str]) -> tuple[str, str]:
        n = len(recovered)
        return (
            f"rejected: {n} of {n} answerer–verifier pairs that answered recovered the gold "
            "(the test rejects when every pair that answers does)",
            ". Answerable from model memory alone: "
            + "; ".join(recovered)
            + ". Ground the answer in what is seen, not in what a model knows.",
        )

    pairs = call.models.parametric_pairs
    verifiers = [(f"{a}→{v}", partial(recovers, a, v)) for a, v in pairs]
    return await unanimous("parametric_test", call, verifiers, rejection)


@register_gate(default_gate("sufficiency", 1))
async def sufficiency(call: GateCall) -> Verdict:
    """A third model family checks that the video answers the question and supports each claim."""
    qa = call.qa
    verdict = await call.ask(
        SUFFICIENCY,
        call.models.sufficiency,
        SufficiencyContext(
            question=qa.question, gold_answer=qa.gold_answer, segments=call.seed.evidence.segments
        ),
    )
    if verdict.answerable and not verdict.unsupported_claims:
        return Verdict(True, verdict.reason)
    unsupported = "; ".join(repr(c) for c in verdict.unsupported_claims[:5])
    why = "not answerable from the video" if not verdict.answerable else "claims not supported"
    return Verdict(
        False,
        f"{why}: {verdict.reason}" + (f" Unsupported: {unsupported}" if unsupported else ""),
        qa_text(qa),
    )
