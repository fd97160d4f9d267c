"""What a gate's check is given and what it answers: :class:`GateCall` and :class:`Verdict`.

A check calls a role through :meth:`GateCall.ask`, which makes a call again while its answer is
unusable (:data:`VERIFIER_RETRIES`) and then raises :class:`NoVerdict`. A gate none of whose
verifiers answered does not pass the output (:func:`undecided`); a gate of several verifiers
rejects it only when every one that answers finds against it (:func:`unanimous`). What a
rejection tells the generator is in its own terms: its answers whole, its ratings, never the
shuffled labels.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from agents.prompts import retry_note
from agents.workers import (
    REJECTED_ANSWER_CHARS,
    GenerationLimits,
    MalformedOutput,
    ModelRunner,
    RoleModels,
    SeedCall,
    clip_output,
    qa_text,
)
from store.events import GateRequested
from tools.contracts.roles import QA, DistractorSet, Frozen, RoleContext, RoleSpec

ContextT = TypeVar("ContextT", bound=RoleContext)
OutputT = TypeVar("OutputT", bound=Frozen)


VERIFIER_RETRIES = 1
"""How many more times a gate's role call is made when its answer is unusable (malformed, cut
off, refused) before that model counts as giving no verdict: two calls at most. Each retry is a
new request through the runner — its prompt ends with a note of what was wrong before
(:func:`agents.prompts.retry_note`), so the recorder does not answer it from the first
record — reserved, recorded and paid like any other call, and served from the log on replay."""


_HOW = {"malformed": "malformed", "truncated": "cut off", "refused": "refused"}


class NoVerdict(Exception):
    """A model gave a gate no usable answer in ``1 + VERIFIER_RETRIES`` calls: who, in which
    role, and what was wrong each time (``failures``, in order)."""

    def __init__(self, role: str, model: str, failures: Sequence[MalformedOutput]) -> None:
        self.role = role
        self.model = model
        self.failures = tuple(failures)
        last = self.failures[-1].detail if self.failures else ""
        super().__init__(f"{self.summary}; the last time: {last[:300]}")

    @property
    def summary(self) -> str:
        """``"gpt-5.4: no verdict (malformed twice)"``: the model and how it failed."""
        kinds = {_HOW[f.kind] for f in self.failures}
        how = " or ".join(sorted(kinds)) or "no answer"
        times = {1: "once", 2: "twice"}.get(len(self.failures), f"{len(self.failures)} times")
        return f"{self.model}: no verdict ({how} {times})"


class Verdict(NamedTuple):
    """A gate's answer: passed or not, why, and (on a rejection) the output it rejected, as the
    generator will be shown it."""

    passed: bool
    reason: str
    rejected_output: str = ""


@dataclass(frozen=True)
class GateCall:
    """What a gate's check is given: how to call models, who plays each role, the paper's limits,
    the seed it judges and the request it answers."""

    runner: ModelRunner
    models: RoleModels
    limits: GenerationLimits
    seed: SeedCall
    request: GateRequested

    @property
    def qa(self) -> QA:
        """The seed's current QA."""
        return QA.model_validate(self.seed.qa)

    @property
    def distractors(self) -> DistractorSet:
        """The seed's current distractor set (Phase II)."""
        return DistractorSet.model_validate(self.seed.distractors)

    def output_text(self) -> str:
        """The output this gate judges, as a rejection feeds it back to the generator."""
        if self.request.phase == 1:
            return qa_text(self.qa)
        return distractor_set_text(self.distractors)

    async def ask(
        self, role: RoleSpec[ContextT, OutputT], model_id: str, context: ContextT
    ) -> OutputT:
        """One call of ``role`` for this gate (a video role gets the segments' verifier clips,
        and its context the rate the model is sent them at: the runner fills it), made again
        up to :data:`VERIFIER_RETRIES` times while its answer is unusable; :class:`NoVerdict`
        when it never was."""
        videos = self.seed.evidence.videos(self.limits.verifier_clip) if role.video else ()
        failures: list[MalformedOutput] = []
        for _ in range(1 + VERIFIER_RETRIES):
            try:
                output: OutputT = await self.runner.run(
                    self.seed,
                    role.name,
                    model_id,
                    context,
                    role.output,
                    phase=self.request.phase,
                    gate=self.request.gate,
                    attachments=videos,
                    note=retry_note([f.kind for f in failures]) if failures else "",
                )
            except MalformedOutput as exc:
                failures.append(exc)
                continue
            return output
        raise NoVerdict(role.name, model_id, failures)


def undecided(gate: str, silent: Sequence[str], call: GateCall, last: str = "") -> Verdict:
    """The verdict of a gate none of whose verifiers answered (``silent`` names each): not a
    pass, since nobody vouches for the output, and told to the generator as what it is — no
    judgment of the output (``last``: the last thing wrong with a verifier's answer)."""
    why = f" (the last answer: {last[:300]})" if last else ""
    return Verdict(
        False,
        f"no verdict: none of the {gate} gate's verifiers gave a usable answer "
        f"({'; '.join(silent)}), so it cannot pass the output; nothing was found wrong with "
        f"it{why}",
        call.output_text(),
    )


class Finding(NamedTuple):
    """What one verifier of a :func:`unanimous` gate found: whether it recovered what the output
    should hide from it, and in what words (a pass's reason, or what a rejection lists)."""

    recovered: bool
    said: str


Verifier = tuple[str, Callable[[], Awaitable[Finding]]]
"""One verifier of a :func:`unanimous` gate: its name and how to ask it."""


async def unanimous(
    gate: str,
    call: GateCall,
    verifiers: Iterable[Verifier],
    rejection: Callable[[Sequence[str]], tuple[str, str]],
) -> Verdict:
    """The verdict of a gate that rejects the output only when every verifier that answers
    recovers what it should hide, as the paper has it (the parametric test's answerer–verifier
    pairs, the textual rankers).

    The verifiers are asked in turn: the first that does not recover it passes the output, in
    its own words, and the rest are not asked. One that gives no verdict (:class:`NoVerdict`,
    after its retries) leaves the decision to those that answered and is named after the reason;
    when none answered the gate cannot decide (:func:`undecided`). ``rejection`` words a
    rejection from what each verifier that recovered it said: the head, after which the silent
    ones are named, and what the generator should do."""
    recovered: list[str] = []
    silent: list[str] = []
    for name, ask in verifiers:
        try:
            finding = await ask()
        except NoVerdict as exc:
            # The summary names the model that failed; a verifier of several models is named too.
            silent.append(exc.summary if exc.model == name else f"{name}: {exc.summary}")
            continue
        if not finding.recovered:
            return Verdict(True, noted(finding.said, silent))
        recovered.append(finding.said)
    if not recovered:
        return undecided(gate, silent, call)
    head, advice = rejection(recovered)
    return Verdict(False, noted(head, silent) + advice, call.output_text())


def noted(text: str, silent: Sequence[str]) -> str:
    """``text`` with the verifiers that gave no verdict named after it."""
    return text + "".join(f"; {s}" for s in silent)


def distractor_set_text(distractors: DistractorSet) -> str:
    """A distractor set as a rejection feeds it back: every answer whole, under its rating
    (an answer is cut only past the structural gate's own length limit)."""
    return "\n\n".join(
        f"--- your answer rated {a.rating} ---\n{clip_output(a.answer, REJECTED_ANSWER_CHARS)}"
        for a in distractors.answers
    )
