"""The offline provider runs every role through a real pydantic-ai Agent, erring on cue."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, ModelResponse

from agents.prompts import render_prompt
from store.errors import ConfigError, MediaError
from tools.contracts.roles import (
    QA,
    ROLES,
    AnyContext,
    ChunkText,
    DistractorSet,
    Feedback,
    FreeAnswer,
    Frozen,
    LabelledAnswer,
    MatchContext,
    MatchVerdict,
    PairJudgeContext,
    PairVerdict,
    ParametricContext,
    Phase1Context,
    Phase2Context,
    Ranking,
    RankingContext,
    SegmentEvidence,
    SufficiencyContext,
    SufficiencyVerdict,
    TranscriptTestContext,
    TranscriptWindow,
)
from tools.index import media
from tools.offline.synthetic import make_demo_playlist
from tools.providers import Fallibility, OfflineProvider, answer

CLEAN = Fallibility(narration_leaning=0, citation_slip=0, textual_tell=0, blind_spot=0)
CITE = re.compile(r"\((\S+) @ (\d+):(\d\d)–(\d+):(\d\d)\)")


class Demo:
    """Two demo episodes as whole-video segments, with their clips and ground truth."""

    def __init__(self, root: Path) -> None:
        make_demo_playlist(
            root, domains=("cooking",), videos_per_domain=2, plant_duplicate=False, narrate=False
        )
        self.truth = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))
        segments: list[SegmentEvidence] = []
        self.clips: list[BinaryContent] = []
        for video in self.truth["videos"]:
            cues = [cue for scene in video["scenes"] for cue in scene["cues"]]
            chunks = tuple(
                ChunkText(
                    start_s=start,
                    end_s=end,
                    text=" ".join(t for s, _, t in cues if start <= s < end),
                )
                for start, end in media.chunk_grid(video["duration"])
            )
            segment = SegmentEvidence(
                segment_id=f"{video['id']}#0",
                video_id=video["id"],
                title=video["title"],
                start_s=0.0,
                end_s=video["duration"],
                chunks=chunks,
            )
            clip = media.export_clip(
                root / video["path"], root / f"{video['id']}-clip.mp4", 0.0, segment.end_s, fps=0.5
            )
            self.clips.append(
                BinaryContent(
                    data=clip.read_bytes(),
                    media_type="video/mp4",
                    identifier=segment.segment_id,
                    vendor_metadata={"fps": 0.5, "start_s": 0.0, "end_s": segment.end_s},
                )
            )
            segments.append(segment)
        self.segments = (segments[0], segments[1])
        self.frames = {
            s.segment_id: media.sample_frames(root / v["path"], fps=0.5)
            for s, v in zip(segments, self.truth["videos"], strict=True)
        }

    def scene_values(self, video_id: str, start: float, end: float) -> set[str]:
        video = next(v for v in self.truth["videos"] if v["id"] == video_id)
        values: set[str] = set()
        for scene in video["scenes"]:
            if scene["start_s"] < end and start < scene["end_s"]:
                values.add(scene["background"]["colour"])
                for shape in scene["shapes"]:
                    values |= {shape["colour"], shape["kind"], shape["position"]}
        return values


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("offline-demo"))


def ask(
    demo: Demo,
    context: AnyContext,
    fallibility: Fallibility = CLEAN,
    model_id: str = "gemini-3-flash",
) -> Any:
    """One call through a real pydantic-ai Agent, clips attached for video roles."""
    provider = OfflineProvider(fallibility)
    role = ROLES[context.role]
    agent = Agent(model=provider.model(model_id), output_type=role.output)
    clips = demo.clips if role.video else []
    return agent.run_sync([render_prompt(context), *clips]).output


def phase1(demo: Demo, fallibility: Fallibility = CLEAN, *feedback: Feedback) -> QA:
    qa = ask(demo, Phase1Context(segments=demo.segments, feedback=feedback), fallibility)
    assert isinstance(qa, QA)
    return qa


def phase2(demo: Demo, qa: QA, fallibility: Fallibility = CLEAN) -> DistractorSet:
    context = Phase2Context(
        question=qa.question, gold_answer=qa.gold_answer, segments=demo.segments
    )
    result = ask(demo, context, fallibility)
    assert isinstance(result, DistractorSet)
    return result


def transcript_windows(demo: Demo) -> tuple[TranscriptWindow, ...]:
    return tuple(
        TranscriptWindow(label=f"W{i}", text=chunk.text)
        for i, chunk in enumerate(c for s in demo.segments for c in s.chunks)
    )


def matches(demo: Demo, role: str, qa: QA, candidate: str) -> MatchVerdict:
    context = MatchContext(
        role=role,
        question=qa.question,
        gold_answer=qa.gold_answer,
        candidate=candidate,
    )
    verdict = ask(demo, context, model_id="gpt-5.4-mini")
    assert isinstance(verdict, MatchVerdict)
    return verdict


# -- Phase I -------------------------------------------------------------------------------------


def test_a_clean_gold_is_structured_cited_and_true_to_the_frames(demo: Demo) -> None:
    qa = phase1(demo)
    paragraphs = [p for p in qa.gold_answer.split("\n\n") if p.strip()]
    assert 3 <= len(paragraphs) <= 5
    cited: dict[str, set[tuple[int, int]]] = {}
    for sentence in re.split(r"(?<=\.)\s+", qa.gold_answer):
        found = CITE.findall(sentence)
        assert len(found) == 1, sentence
        video, m1, s1, m2, s2 = found[0]
        start, end = int(m1) * 60 + int(s1), int(m2) * 60 + int(s2)
        assert end - start == 30
        assert end <= 120
        cited.setdefault(video, set()).add((start, end))
        named = set(re.findall(r"[a-z]+(?:-[a-z]+)?", sentence.split("(")[0]))
        truth = demo.scene_values(video, start, end)
        visual = {w for w in named if w in demo.truth["palette"] or w in truth}
        assert visual, sentence
        assert visual <= truth, sentence
    assert sorted(cited) == ["cooking-01", "cooking-02"]
    assert all(2 <= len(spans) <= 4 for spans in cited.values())
    assert qa.verification.visual_facts
    assert "background" in qa.question
    assert "segment" in qa.question


def test_a_narration_leaning_gold_is_matched_by_the_transcript_answer(demo: Demo) -> None:
    qa = phase1(demo, Fallibility(narration_leaning=1, citation_slip=0, blind_spot=0))
    assert "narration" in qa.gold_answer
    assert not qa.verification.visual_facts
    context = TranscriptTestContext(question=qa.question, windows=transcript_windows(demo))
    candidate = ask(demo, context)
    assert isinstance(candidate, FreeAnswer)
    assert matches(demo, "transcript_matcher", qa, candidate.answer).matches_gold


def test_a_visual_gold_is_not_matched_from_transcripts_or_from_memory(demo: Demo) -> None:
    qa = phase1(demo)
    transcript = ask(
        demo, TranscriptTestContext(question=qa.question, windows=transcript_windows(demo))
    )
    memory = ask(demo, ParametricContext(question=qa.question))
    for role, candidate in (("transcript_matcher", transcript), ("parametric_verifier", memory)):
        verdict = matches(demo, role, qa, candidate.answer)
        assert not verdict.matches_gold, verdict.reason
        assert "content words" in verdict.reason


@pytest.mark.parametrize(
    ("fallibility", "feedback", "leans", "slips"),
    [
        (Fallibility(narration_leaning=1, citation_slip=0, blind_spot=0), (), True, False),
        (
            Fallibility(narration_leaning=1, citation_slip=0, blind_spot=0),
            (Feedback(phase=1, gate="transcript_test", reason="recovered", rejected_output="x"),),
            False,
            False,
        ),
        (Fallibility(narration_leaning=0, citation_slip=1, blind_spot=0), (), False, True),
        (
            Fallibility(narration_leaning=0, citation_slip=1, blind_spot=0),
            (Feedback(phase=1, gate="structural", reason="bad citation", rejected_output="x"),),
            False,
            False,
        ),
    ],
    ids=["leans", "transcript-feedback-grounds-it", "slips", "citation-feedback-fixes-it"],
)
def test_feedback_switches_the_matching_failure_off(
    demo: Demo,
    fallibility: Fallibility,
    feedback: tuple[Feedback, ...],
    leans: bool,
    slips: bool,
) -> None:
    qa = phase1(demo, fallibility, *feedback)
    assert ("narration explains" in qa.gold_answer) is leans
    ends = [int(m2) * 60 + int(s2) for *_, m2, s2 in CITE.findall(qa.gold_answer)]
    assert (max(ends) > 120) is slips


# -- sufficiency ---------------------------------------------------------------------------------


def sufficiency(demo: Demo, qa: QA) -> SufficiencyVerdict:
    context = SufficiencyContext(
        question=qa.question, gold_answer=qa.gold_answer, segments=demo.segments
    )
    verdict = ask(demo, context, model_id="qwen-3.7-plus")
    assert isinstance(verdict, SufficiencyVerdict)
    return verdict


def test_sufficiency_supports_every_claim_of_a_clean_gold(demo: Demo) -> None:
    verdict = sufficiency(demo, phase1(demo))
    assert verdict.answerable
    assert verdict.unsupported_claims == (), verdict.reason


def test_a_blind_spot_gold_is_unsupported_on_every_attempt(demo: Demo) -> None:
    blind = Fallibility(narration_leaning=0, citation_slip=0, blind_spot=1)
    told = Feedback(phase=1, gate="sufficiency", reason="wrong colours", rejected_output="x")
    for feedback in ((), (told,)):
        verdict = sufficiency(demo, phase1(demo, blind, *feedback))
        assert verdict.answerable
        assert verdict.unsupported_claims
        assert "not seen there" in verdict.reason


def test_a_gold_without_citations_is_not_answerable(demo: Demo) -> None:
    qa = QA(question="What happens?", gold_answer="Things happen.\n\nMore things.\n\nThe end.")
    assert not sufficiency(demo, qa).answerable


# -- Phase II ------------------------------------------------------------------------------------


def test_the_four_distractors_change_one_to_four_visual_facts(demo: Demo) -> None:
    qa = phase1(demo)
    distractors = phase2(demo, qa)
    assert [a.rating for a in distractors.answers] == [4, 3, 2, 1]
    gold_words = qa.gold_answer.split()
    for graded in distractors.answers:
        assert len(graded.causal_record) == 5 - graded.rating
        assert {d.kind for d in graded.causal_record} <= {"colour", "spatial_layout", "props"}
        words = graded.answer.split()
        assert len(words) == len(gold_words)  # same length and structure
        assert graded.answer.count("\n\n") == qa.gold_answer.count("\n\n")
        assert CITE.findall(graded.answer) == CITE.findall(qa.gold_answer)
        changed = [(g, w) for g, w in zip(gold_words, words, strict=True) if g != w]
        assert len(changed) == 5 - graded.rating
        record = {(d.original, d.degraded) for d in graded.causal_record}
        assert {(g.strip(",."), w.strip(",.")) for g, w in changed} == record


def _labelled(qa: QA, distractors: DistractorSet) -> tuple[LabelledAnswer, ...]:
    # Labels that do not sort in rating order, so a correct ranking is not an accident of labels.
    names = {5: "K", 4: "B", 3: "Q", 2: "A", 1: "M"}
    answers = [LabelledAnswer(label=names[5], text=qa.gold_answer)]
    answers += [
        LabelledAnswer(label=names[a.rating], text=a.answer, causal_record=a.causal_record)
        for a in distractors.answers
    ]
    return tuple(sorted(answers, key=lambda a: a.label))


def test_the_visual_ranker_recovers_the_intended_order_on_a_clean_set(demo: Demo) -> None:
    qa = phase1(demo)
    answers = [a for a in _labelled(qa, phase2(demo, qa)) if a.label != "K"]
    context = RankingContext(
        role="visual_ranker", question=qa.question, answers=tuple(answers), segments=demo.segments
    )
    ranking = ask(demo, context, model_id="qwen-3.7-plus")
    assert isinstance(ranking, Ranking)
    assert ranking.order == ("B", "Q", "A", "M"), ranking.reason


@pytest.mark.parametrize(
    ("textual_tell", "recovered"), [(0.0, False), (1.0, True)], ids=["clean", "tell"]
)
def test_the_textual_ranker_recovers_the_order_only_from_textual_tells(
    demo: Demo, textual_tell: float, recovered: bool
) -> None:
    qa = phase1(demo)
    fallible = Fallibility(narration_leaning=0, citation_slip=0, blind_spot=0, textual_tell=1)
    distractors = phase2(demo, qa, fallible if recovered else CLEAN)
    context = RankingContext(
        role="textual_ranker", question=qa.question, answers=_labelled(qa, distractors)
    )
    for model_id in ("gemini-3.1-pro", "gpt-5.4"):
        ranking = ask(demo, context, model_id=model_id)
        assert isinstance(ranking, Ranking)
        assert (ranking.order == ("K", "B", "Q", "A", "M")) is recovered, ranking.reason


def test_textual_feedback_removes_the_tells(demo: Demo) -> None:
    qa = phase1(demo)
    told = Feedback(phase=2, gate="textual_undetectability", reason="order", rejected_output="x")
    context = Phase2Context(
        question=qa.question, gold_answer=qa.gold_answer, segments=demo.segments, feedback=(told,)
    )
    fallible = Fallibility(narration_leaning=0, citation_slip=0, blind_spot=0, textual_tell=1)
    result = ask(demo, context, fallible)
    assert all("Possibly" not in a.answer for a in result.answers)


# -- the call itself -----------------------------------------------------------------------------


def test_the_same_call_gives_byte_identical_output_and_usage_counts_frames(demo: Demo) -> None:
    context = Phase1Context(segments=demo.segments)
    runs = []
    for _ in range(2):
        agent = Agent(model=OfflineProvider().model("gemini-3-flash"), output_type=QA)
        runs.append(agent.run_sync([render_prompt(context), *demo.clips]))
    assert runs[0].output.model_dump_json() == runs[1].output.model_dump_json()
    usage = runs[0].usage
    assert usage.input_tokens >= 258 * 120  # 2 clips × 60 frames at 0.5 fps
    assert usage.output_tokens > 0
    responses = [m for m in runs[0].all_messages() if isinstance(m, ModelResponse)]
    assert [r.model_name for r in responses] == ["offline:gemini-3-flash"]


def test_the_pure_core_answers_like_the_model(demo: Demo) -> None:
    context = Phase1Context(segments=demo.segments)
    direct = answer(context, demo.frames, Fallibility(), model_id="gemini-3-flash")
    assert isinstance(direct, Frozen)
    assert direct.model_dump_json() == ask(demo, context, Fallibility()).model_dump_json()


def test_a_video_role_without_its_clip_is_a_media_error(demo: Demo) -> None:
    context = Phase1Context(segments=demo.segments)
    with pytest.raises(MediaError, match="no clip for segment"):
        answer(context, {}, CLEAN, model_id="gemini-3-flash")


@pytest.mark.parametrize("receives", ["transcript", "audio", "none"])
def test_a_pair_judge_given_no_picture_answers_from_its_habit_without_clips(
    demo: Demo, receives: Any
) -> None:
    """An evaluation condition with no frames attaches no clip: the offline judge checks no
    claim against frames (none were given) and answers by its habit, never a MediaError."""
    context = PairJudgeContext(
        question="What changed?",
        answer_a="An answer (x @ 00:00–00:10).",
        answer_b="Another answer (x @ 00:00–00:10).",
        segments=demo.segments if receives != "none" else (),
        receives=receives,
    )
    verdict = answer(context, {}, CLEAN, model_id="gpt-5.4-mini")
    assert isinstance(verdict, PairVerdict)
    assert "0 claim detail(s)" in verdict.reason


def test_a_prompt_without_context_is_a_config_error() -> None:
    agent = Agent(model=OfflineProvider().model("gemini-3-flash"), output_type=QA)
    with pytest.raises(ConfigError, match="context"):
        agent.run_sync("Write a question.")


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_shares_outside_zero_to_one_are_a_config_error(value: float) -> None:
    with pytest.raises(ConfigError, match="blind_spot"):
        Fallibility(blind_spot=value)
