"""The smoke test before a campaign: one minimal call per configured role and model.

Each (role, model) pair the settings configure gets one structured call with a small context of
the role's own type — built from the first indexed segment's first seconds and its transcript —
and, for video roles, two short clips cut at the role's usual clip spec. Every call goes through
the :class:`~agents.workers.ModelRunner` and a live :class:`~agents.recorded.CallRecorder`
under the smoke's own cap, so it is reserved, priced and recorded in stream ``smoke-<run id>``
like any campaign call; a call the cap would pass is not made. What comes back per pair is
passed, failed (with the provider's own words) or skipped (the cap).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic_ai.messages import BinaryContent

from agents.curation import scrubbed
from agents.deps import CallDeps
from agents.evidence import ClipSpec, SeedEvidence, clip_content
from agents.pairs import JUDGE_CLIP
from agents.recorded import CallRecorder
from agents.workers import GenerationLimits, MalformedOutput, ModelRunner, RoleModels, SeedCall
from policies.budget import BudgetExhausted, make_budget
from policies.ratelimits import RetryPolicy, Traffic
from store.catalog import Catalog, SegmentRow
from store.errors import MediaError, PlaylistEvalError, ProviderError
from store.events import Event
from store.ledger import spend
from store.redact import scrub, secret_values
from tools.contracts.roles import (
    ROLES,
    ChunkText,
    Degradation,
    LabelledAnswer,
    MatchContext,
    PairJudgeContext,
    ParametricContext,
    Phase2Context,
    RankingContext,
    SegmentEvidence,
    SufficiencyContext,
    TranscriptTestContext,
    TranscriptWindow,
    cite,
)

#: Seconds of video each of the two evidence spans covers (both within the segment's first 16 s):
#: a few frames per clip at the smoke's rate, as little as a provider will take as a video.
SPAN_S = 8.0
#: Frames per second the smoke's clips are cut at (the campaign's default rate).
SMOKE_FPS = 0.5

Status = Literal["pass", "fail", "skip"]


def smoke_stream(run_id: str) -> str:
    """The stream a smoke run's calls are recorded in."""
    return f"smoke-{run_id}"


@dataclass(frozen=True)
class SmokeTarget:
    """One configured (role, model) pair the smoke calls once."""

    role: str
    model: str


@dataclass(frozen=True)
class SmokeResult:
    """What one pair's call came to: passed, failed or skipped, how long it took, what it cost
    (micro-USD, as recorded) and, when it did not pass, the provider's or the cap's words."""

    role: str
    model: str
    status: Status
    seconds: float
    cost_micros: int
    message: str = ""

    @property
    def ok(self) -> bool:
        """The call was made and answered in the role's output type."""
        return self.status == "pass"


@dataclass(frozen=True)
class SmokeReport:
    """A smoke run: its id and stream, one result per pair, the spend and the cap, and whether
    the offline provider answered (its spend is then what the calls would have cost)."""

    run_id: str
    stream: str
    results: tuple[SmokeResult, ...]
    spent_micros: int
    cap_micros: int | None
    offline: bool = False

    @property
    def ok(self) -> bool:
        """Every pair passed."""
        return all(r.ok for r in self.results)


def smoke_targets(
    models: RoleModels, judges: Sequence[str], roles: Collection[str] | None = None
) -> list[SmokeTarget]:
    """Every (role, model) pair the settings configure, in :data:`~tools.contracts.roles.ROLES`
    order:
    each model of the list roles (parametric pairs, textual rankers), the difficulty judges as
    ``pair_judge``; ``roles`` keeps only those roles (``ValueError`` for one that is no role)."""
    if roles is not None:
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown role(s) {unknown!r}; the roles are {sorted(ROLES)!r}")
    # Who plays each role is the slot table's (RoleModels.playing); the difficulty judges, which
    # no curation run casts, play pair_judge.
    by_role: dict[str, Sequence[str]] = dict(models.playing())
    by_role["pair_judge"] = (*by_role.get("pair_judge", ()), *judges)
    targets: list[SmokeTarget] = []
    for role in ROLES:
        if roles is not None and role not in roles:
            continue
        for model in by_role.get(role, ()):
            target = SmokeTarget(role, model)
            if target not in targets:  # one model in two pairs is one call
                targets.append(target)
    return targets


def first_segment(catalog: Catalog) -> SegmentRow | None:
    """The first segment of the first indexed video (seeding order) that has one."""
    for video in catalog.videos(statuses=["indexed"]):
        found = catalog.segments(video_ids=[video.id])
        if found:
            return found[0]
    return None


@dataclass(frozen=True)
class SmokeEvidence:
    """The two short spans at the start of one segment the smoke's contexts are made of."""

    row: SegmentRow
    spans: tuple[SegmentEvidence, SegmentEvidence]

    @classmethod
    def of(cls, catalog: Catalog, row: SegmentRow) -> SmokeEvidence:
        """The segment's first ``2 × SPAN_S`` seconds as two spans, each with the transcript
        chunks it overlaps (at least the segment's first chunk)."""
        video = catalog.video(row.video_id)
        chunks = catalog.chunks(row.video_id)[row.chunk_start : row.chunk_end]
        end = min(
            row.end_s, row.start_s + 2 * SPAN_S, (video.duration_s if video else 0) or row.end_s
        )
        middle = row.start_s + (end - row.start_s) / 2
        spans: list[SegmentEvidence] = []
        for start, stop in ((row.start_s, middle), (middle, end)):
            texts = tuple(
                ChunkText(start_s=c.start_s, end_s=c.end_s, text=c.transcript)
                for c in chunks
                if c.start_s < stop and c.end_s > start
            ) or tuple(
                ChunkText(start_s=c.start_s, end_s=c.end_s, text=c.transcript) for c in chunks[:1]
            )
            spans.append(
                SegmentEvidence(
                    segment_id=row.id,
                    video_id=row.video_id,
                    title=video.title if video else "",
                    start_s=start,
                    end_s=stop,
                    chunks=texts,
                )
            )
        return cls(row, (spans[0], spans[1]))


def _transcript(span: SegmentEvidence) -> str:
    return " ".join(c.text for c in span.chunks if c.text) or "(no speech)"


def smoke_context(role: str, evidence: SmokeEvidence, limits: GenerationLimits) -> Any:
    """A minimal context of ``role``'s own type over the smoke's two spans: the facts are
    plain (a question about what the opening seconds show, the transcript as the gold answer),
    the shape is the campaign's."""
    a, b = evidence.spans
    question = f"What is shown and said in the opening seconds of {a.title or a.video_id}?"
    gold = (
        f"The video opens with: {_transcript(a)[:400]} {cite(a.video_id, a.start_s, a.end_s)}\n\n"
        f"It goes on with: {_transcript(b)[:400]} {cite(b.video_id, b.start_s, b.end_s)}"
    )
    wrong = "The video opens on a blank screen with no one speaking."
    change = Degradation(
        attribute="what the opening shows",
        element="first sentence",
        original="the opening as filmed",
        degraded="a blank screen",
        kind="on_screen_graphics",
    )
    answers = (
        LabelledAnswer(label="A", text=gold),
        LabelledAnswer(label="B", text=wrong, causal_record=(change,)),
    )
    segments = (a, b)
    if role == "phase1_generator":
        return limits.phase1_context(segments)
    if role == "phase2_generator":
        return Phase2Context(question=question, gold_answer=gold, segments=segments)
    if role == "transcript_answerer":
        windows = (
            TranscriptWindow(label="W1", text=_transcript(a)),
            TranscriptWindow(label="W2", text=_transcript(b)),
        )
        return TranscriptTestContext(question=question, windows=windows)
    if role == "parametric_answerer":
        return ParametricContext(question=question)
    if role in ("transcript_matcher", "parametric_verifier"):
        return MatchContext(role=role, question=question, gold_answer=gold, candidate=wrong)
    if role == "sufficiency":
        return SufficiencyContext(question=question, gold_answer=gold, segments=segments)
    if role == "textual_ranker":
        plain = tuple(LabelledAnswer(label=x.label, text=x.text) for x in answers)
        return RankingContext(
            role="textual_ranker", question=question, answers=plain, rubric=(change.attribute,)
        )
    if role == "visual_ranker":
        return RankingContext(
            role="visual_ranker", question=question, answers=answers, segments=segments
        )
    if role == "pair_judge":
        return PairJudgeContext(question=question, answer_a=gold, answer_b=wrong, segments=segments)
    raise ValueError(f"no smoke context for role {role!r}")


def clip_spec(role: str, limits: GenerationLimits) -> ClipSpec:
    """The clip spec ``role`` is shown segments with in a campaign, at the smoke's rate."""
    if role in ("phase1_generator", "phase2_generator"):
        usual = limits.generator_clip
    elif role == "pair_judge":
        usual = JUDGE_CLIP
    else:
        usual = limits.verifier_clip
    return replace(usual, fps=SMOKE_FPS)


def smoke_clips(deps: CallDeps, evidence: SmokeEvidence, spec: ClipSpec) -> list[BinaryContent]:
    """The two spans as clips, with the metadata every adapter reads (:func:`clip_content`, as
    :meth:`agents.evidence.SeedEvidence.videos` makes them), each named by its segment's id."""
    video = deps.catalog.video(evidence.row.video_id)
    return [clip_content(deps.clips, video, span.segment_id, span, spec) for span in evidence.spans]


def _one_attempt(deps: CallDeps) -> Callable[[str], Traffic | None]:
    """How calls travel in a smoke: the configured limiter and token rules, but no retries —
    one request per pair, so a transient failure shows as the provider's own words."""
    traffic = deps.traffic or (lambda _model: None)

    def travel(model: str) -> Traffic | None:
        found = traffic(model)
        return None if found is None else replace(found, retry=RetryPolicy(max_retries=0))

    return travel


def _appender(
    deps: CallDeps, stream: str, secrets: list[str], written: list[Event]
) -> Callable[[Event], Awaitable[None]]:
    """Appends a call's events to the smoke's stream (scrubbed of keys), keeping a copy in
    ``written`` for the pair's result."""

    async def append(event: Event) -> None:
        clean = scrubbed(event, secrets)
        deps.store.append(stream, [clean])
        written.append(clean)

    return append


async def run_smoke(
    deps: CallDeps,
    run_id: str,
    targets: Sequence[SmokeTarget],
    *,
    budget_micros: int | None,
    limits: GenerationLimits,
    offline: bool,
) -> SmokeReport:
    """One call per target, one after another, recorded in ``smoke-<run_id>`` under the cap
    ``budget_micros``; the first indexed segment must exist (:class:`MediaError` otherwise).
    A failure of one pair is that pair's result: the others are still called."""
    row = first_segment(deps.catalog)
    if row is None:
        raise MediaError(
            "the workspace has no indexed segment: run `playlisteval add <playlist>` and "
            "`playlisteval index` first"
        )
    evidence = SmokeEvidence.of(deps.catalog, row)
    stream = smoke_stream(run_id)
    budget = make_budget(
        deps.campaign,
        cap_micros=budget_micros,
        hold_prefix=stream,
        item=lambda _owner: None,
    )
    recorder = CallRecorder(
        budget=budget,
        prices=deps.prices,
        mode="live",
        offline=offline,
        traffic=_one_attempt(deps),
        sleep=deps.sleep,
        # No batcher: a smoke wants its answer now, not within hours.
    )
    runner = ModelRunner(recorder=recorder, model_for=deps.model_for)
    secrets = sorted({*secret_values(), *deps.secrets}, key=len, reverse=True)
    placeholder = SeedEvidence(deps.catalog, deps.clips, stream, row.id, row.id)
    clips: dict[ClipSpec, list[BinaryContent]] = {}
    results: list[SmokeResult] = []
    for target in targets:
        written: list[Event] = []
        append = _appender(deps, stream, secrets, written)
        spec = ROLES[target.role]
        started = time.monotonic()
        status: Status = "pass"
        message = ""
        try:
            attachments: list[BinaryContent] = []
            if spec.video:
                wanted = clip_spec(target.role, limits)
                if wanted not in clips:
                    clips[wanted] = smoke_clips(deps, evidence, wanted)
                attachments = clips[wanted]
            await runner.run(
                SeedCall(seed_id=stream, evidence=placeholder, append=append),
                target.role,
                target.model,
                smoke_context(target.role, evidence, limits),
                spec.output,
                phase=None,
                gate="smoke",
                attachments=attachments,
            )
        except BudgetExhausted as exc:
            status, message = "skip", f"budget: {exc}"
        except (ProviderError, MalformedOutput) as exc:
            status, message = "fail", str(exc)
        except PlaylistEvalError as exc:  # a missing key, a clip that cannot be cut
            status, message = "fail", str(exc)
        except Exception as exc:  # whatever else one pair raises is that pair's finding
            status, message = "fail", f"{type(exc).__name__}: {exc}"
        # What the pair's call spent, by the one ledger's rules (a charged failure counts).
        cost = spend(written).spent_micros
        results.append(
            SmokeResult(
                role=target.role,
                model=target.model,
                status=status,
                seconds=time.monotonic() - started,
                cost_micros=cost,
                # Providers quote requests back in their errors, and a request may carry a key.
                message=scrub(message, secrets),
            )
        )
    return SmokeReport(
        run_id=run_id,
        stream=stream,
        results=tuple(results),
        spent_micros=budget.spent_micros,
        cap_micros=budget_micros,
        offline=offline,
    )
