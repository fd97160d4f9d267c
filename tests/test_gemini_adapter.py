"""The Gemini adapter drives the real google-genai SDK against a fake Gemini API: clips go as
native video (inline, or uploaded once and referenced), big videos through one context cache,
structured output natively, and every failure as pydantic-ai's categorised exception."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import (
    ContentFilterError,
    ModelAPIError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
    ModelUnavailableError,
    OutputTokenLimitExceeded,
)
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.batch import BatchRequest
from pydantic_ai.output import OutputObjectDefinition
from pydantic_ai.settings import ModelSettings

from agents.prompts import render_prompt
from agents.recorded import classify_failure
from tests.fakes_gemini import (
    MAX_REQUEST_BYTES,
    PUBLIC_FILES,
    THINKING_TOKENS,
    GeminiHarness,
    camel_keys,
    gemini_harness,
)
from tests.fakes_providers import RETRY_AFTER_S, Fault
from tools.contracts.roles import (
    PARAMETRIC_VERIFIER,
    PHASE1_GENERATOR,
    QA,
    ROLES,
    ChunkText,
    FreeAnswer,
    ParametricContext,
    Phase1Context,
    SegmentEvidence,
)
from tools.index import media
from tools.offline.synthetic import make_demo_playlist
from tools.providers.base import MemoryResourceLedger, clip_info
from tools.providers.gemini import estimate_video_tokens
from tools.providers.registry import ProviderRegistry, release_models

MODEL = "gemini-3-flash-preview"
# What the Phase I generator is sent (its row of tools.contracts.roles.ROLES).
SETTINGS = ModelSettings(
    max_tokens=PHASE1_GENERATOR.max_output_tokens,
    temperature=0.0,
    thinking=PHASE1_GENERATOR.thinking,
)
SPANS = ((0.0, 60.0), (30.0, 60.0))  # the second segment starts mid-video: offsets matter

# These tests drive the adapter against a local fake server (see conftest's guard).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("allow_model_requests")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Demo:
    """Two synthetic episodes, one segment of each, with their clips as a role call attaches
    them (see ``agents.evidence.SeedEvidence.videos``)."""

    def __init__(self, root: Path) -> None:
        make_demo_playlist(
            root,
            domains=("cooking",),
            videos_per_domain=2,
            scenes_per_video=4,
            plant_duplicate=False,
            narrate=False,
        )
        truth = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))
        segments: list[SegmentEvidence] = []
        self.clips: list[BinaryContent] = []
        for video, (start, end) in zip(truth["videos"], SPANS, strict=True):
            cues = [cue for scene in video["scenes"] for cue in scene["cues"]]
            chunks = tuple(
                ChunkText(
                    start_s=lo,
                    end_s=hi,
                    text=" ".join(t for s, _, t in cues if lo <= s < hi) or f"talk {lo:g}",
                )
                for lo, hi in media.chunk_grid(video["duration"])
                if start <= lo < end
            )
            segment_id = f"{video['id']}#{int(start)}"
            segments.append(
                SegmentEvidence(
                    segment_id=segment_id,
                    video_id=video["id"],
                    title=video["title"],
                    start_s=start,
                    end_s=end,
                    chunks=chunks,
                )
            )
            source = root / video["path"]
            clip = media.export_clip(
                source, root / f"{video['id']}-{int(start)}.mp4", start, end, fps=0.5
            )
            self.clips.append(
                BinaryContent(
                    data=clip.read_bytes(),
                    media_type="video/mp4",
                    identifier=segment_id,
                    vendor_metadata={
                        "fps": 0.5,
                        "start_s": start,
                        "end_s": end,
                        "height": 720,
                        "audio": True,
                        "source": f"src-{video['id']}",
                        "video_id": video["id"],
                        "path": str(source),
                    },
                )
            )
        self.segments = (segments[0], segments[1])

    def phase1_prompt(self) -> list[Any]:
        return [render_prompt(Phase1Context(segments=self.segments)), *self.clips]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("gemini-demo"))


@pytest.fixture
def ledger() -> MemoryResourceLedger:
    return MemoryResourceLedger()


@pytest.fixture
async def harness(ledger: MemoryResourceLedger) -> AsyncIterator[GeminiHarness]:
    with gemini_harness(ledger) as running:
        yield running
        await running.aclose()


async def run_phase1(harness: GeminiHarness, demo: Demo, **config: Any) -> Any:
    agent = Agent(None, output_type=QA, retries=0)
    return await agent.run(
        demo.phase1_prompt(), model=harness.model(MODEL, **config), model_settings=SETTINGS
    )


def last_response(result: Any) -> ModelResponse:
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    return response


def parts_of(harness: GeminiHarness, index: int = -1) -> list[dict[str, Any]]:
    body = harness.model_requests()[index].json()
    return [p for c in camel_keys(body["contents"]) for p in c["parts"]]


def clip_key(clip: BinaryContent) -> str:
    """The ledger key of a clip's upload: its bytes' digest (``tools.providers.gemini``)."""
    return "clip:" + hashlib.sha256(clip.data).hexdigest()[:16]


def uploads(harness: GeminiHarness) -> int:
    return sum(
        1
        for r in harness.server.seen("POST", "/upload/v1beta/files")
        if r.headers.get("X-Goog-Upload-Command") == "start"
    )


# -- request shape ---------------------------------------------------------------------------------


async def test_small_clips_go_inline_as_native_video_with_labels_and_schema(
    harness: GeminiHarness, demo: Demo
) -> None:
    result = await run_phase1(harness, demo, context_cache=False)
    assert isinstance(result.output, QA)
    assert "(cooking-01 @" in result.output.gold_answer
    (request,) = harness.model_requests()
    parts = parts_of(harness)
    videos = [p for p in parts if "inlineData" in p]
    assert len(videos) == 2
    assert all(p["inlineData"]["mimeType"] == "video/mp4" for p in videos)
    assert all(p["videoMetadata"] == {"fps": 0.5} for p in videos)
    texts = [p.get("text", "") for p in parts]
    # Each clip follows its label, which says how to cite in the source video's timeline.
    for clip, segment in zip(videos, demo.segments, strict=True):
        label = texts[parts.index(clip) - 1]
        assert f"(segment {segment.segment_id})" in label
        assert f"this clip's 00:00 is 00:{int(segment.start_s):02d}" in label
    prompt = harness.prompt_text(request)
    assert demo.segments[0].chunks[0].text in prompt  # the transcript rides in the prompt text
    schema = harness.output_schema(request)
    assert schema is not None
    assert {"question", "gold_answer"} <= set(schema["properties"])
    body = request.json()
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert "tools" not in body  # native structured output, not an output tool
    assert [m["kind"] for m in harness.media(request)] == ["video", "video"]
    assert [(m["start_s"], m["end_s"], m["audio"]) for m in harness.media(request)] == [
        (0.0, 60.0, True),
        (30.0, 60.0, True),
    ]


async def test_usage_carries_what_gemini_reported_per_modality(
    harness: GeminiHarness, demo: Demo
) -> None:
    result = await run_phase1(harness, demo, context_cache=False)
    usage = last_response(result).usage
    reported = harness.last_usage()
    assert usage.input_tokens == reported["input_tokens"]
    # Thinking is billed as output (candidatesTokenCount + thoughtsTokenCount).
    assert reported["thoughts"] > 0
    assert usage.output_tokens == reported["output_tokens"]
    # 60 s and 30 s at 0.5 fps: 45 frames of 70 tokens (Gemini 3 at medium resolution), and
    # 90 s of audio at 32 a second.
    assert usage.details["video_prompt_tokens"] == reported["video"] == 45 * 70
    assert usage.details["audio_prompt_tokens"] == reported["audio"] == 90 * 32
    assert usage.details["text_prompt_tokens"] == reported["text"] > 0
    assert usage.input_audio_tokens == reported["audio"]
    assert usage.cache_read_tokens == 0


# -- Files API -------------------------------------------------------------------------------------


async def test_a_large_clip_is_uploaded_once_as_the_clip_itself(
    harness: GeminiHarness, ledger: MemoryResourceLedger, demo: Demo
) -> None:
    first = await run_phase1(harness, demo, inline_max_bytes=1, context_cache=False)
    second = await run_phase1(harness, demo, inline_max_bytes=1, context_cache=False)
    assert isinstance(first.output, QA)
    assert isinstance(second.output, QA)
    assert uploads(harness) == 2  # one per clip, none for the second call
    # Uploaded files were PROCESSING; the adapter waited for ACTIVE before using them.
    assert harness.server.seen("GET", "/v1beta/files/")
    for index in (0, 1):
        parts = parts_of(harness, index)
        files = [p for p in parts if "fileData" in p]
        assert not [p for p in parts if "inlineData" in p]
        assert [p["videoMetadata"] for p in files] == [{"fps": 0.5}] * 2  # the clip, whole
        assert all(p["fileData"]["fileUri"].startswith("https://") for p in files)
        label = parts[parts.index(files[1]) - 1]["text"]
        assert "this clip's 00:00 is 00:30 of the video" in label
    now = datetime.now(UTC)
    for clip in demo.clips:
        found = ledger.find("gemini", "upload", clip_key(clip), now)
        assert found is not None
        stored = harness.state.files[found.name.removeprefix(PUBLIC_FILES)]
        assert stored.data == clip.data  # the clip, never its whole source video
        assert found.expires_at == stored.created + timedelta(hours=47)
    later = now + timedelta(hours=48)
    assert ledger.find("gemini", "upload", clip_key(demo.clips[0]), later) is None


async def test_a_large_silent_clip_uploads_the_clip_itself(
    harness: GeminiHarness, demo: Demo
) -> None:
    silent = [
        BinaryContent(
            data=c.data,
            media_type=c.media_type,
            identifier=c.identifier,
            vendor_metadata={**(c.vendor_metadata or {}), "audio": False},
        )
        for c in demo.clips
    ]
    agent = Agent(None, output_type=QA, retries=0)
    prompt: list[Any] = [render_prompt(Phase1Context(segments=demo.segments)), *silent]
    model = harness.model(MODEL, inline_max_bytes=1, context_cache=False)
    result = await agent.run(prompt, model=model, model_settings=SETTINGS)
    assert isinstance(result.output, QA)
    files = [p for p in parts_of(harness) if "fileData" in p]
    assert [p["videoMetadata"] for p in files] == [{"fps": 0.5}] * 2
    uploaded = sorted(len(f.data) for f in harness.state.files.values())
    assert uploaded == sorted(len(c.data) for c in demo.clips)


async def test_an_expired_upload_is_uploaded_again(
    harness: GeminiHarness, ledger: MemoryResourceLedger, demo: Demo
) -> None:
    await run_phase1(harness, demo, inline_max_bytes=1, context_cache=False)
    for clip in demo.clips:
        found = ledger.find("gemini", "upload", clip_key(clip), datetime.now(UTC))
        assert found is not None
        ledger.record(replace(found, expires_at=datetime.now(UTC)))
    await run_phase1(harness, demo, inline_max_bytes=1, context_cache=False)
    assert uploads(harness) == 4


# -- context caching -------------------------------------------------------------------------------


async def test_big_videos_go_through_one_context_cache_that_later_calls_reuse(
    harness: GeminiHarness, demo: Demo
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no system instruction or tool is silently stripped
        first = await run_phase1(harness, demo, cache_min_tokens=1000)
        second = await run_phase1(harness, demo, cache_min_tokens=1000)
    assert isinstance(first.output, QA)
    assert isinstance(second.output, QA)
    (create,) = harness.server.seen("POST", "/v1beta/cachedContents")
    created = create.json()
    assert created["ttl"] == "600s"  # ProviderConfig.cache_ttl_s
    assert created["model"] == f"models/{MODEL}"
    cached_parts = [p for c in camel_keys(created["contents"]) for p in c["parts"]]
    assert sum("inlineData" in p for p in cached_parts) == 2
    assert sum("(segment " in p.get("text", "") for p in cached_parts) == 2
    expected_tokens = estimate_video_tokens([i for c in demo.clips if (i := clip_info(c))])
    for index, result in enumerate((first, second)):
        body = harness.model_requests()[index].json()
        parts = parts_of(harness, index)
        assert body["cachedContent"].startswith("cachedContents/")
        assert not [p for p in parts if "inlineData" in p or "fileData" in p]
        assert demo.segments[0].chunks[0].text in " ".join(p.get("text", "") for p in parts)
        assert harness.output_schema(harness.model_requests()[index]) is not None
        response = last_response(result)
        report = (response.provider_details or {})["playlisteval_cache"]
        assert report["name"] == body["cachedContent"]
        assert report["created"] is (index == 0)
        assert report["ttl_s"] == 600
        cache_tokens = harness.state.caches[report["name"]].tokens
        assert report["tokens"] == cache_tokens
        assert response.usage.cache_read_tokens == cache_tokens
        assert harness.last_usage()["cached_tokens"] == cache_tokens
        # The model still sees both videos, from the cache.
        assert [m["start_s"] for m in harness.media(harness.model_requests()[index])] == [
            0.0,
            30.0,
        ]
    assert expected_tokens >= 1000


async def test_small_videos_are_not_cached(harness: GeminiHarness, demo: Demo) -> None:
    result = await run_phase1(harness, demo, cache_min_tokens=10**6)
    assert not harness.server.seen("POST", "/v1beta/cachedContents")
    assert "playlisteval_cache" not in (last_response(result).provider_details or {})
    assert "cachedContent" not in harness.model_requests()[0].json()


# -- faults ----------------------------------------------------------------------------------------

FAULT_ERRORS: list[tuple[Fault, type[Exception]]] = [
    ("429", ModelRateLimitError),
    ("500", ModelServerError),
    ("timeout", ModelTimeoutError),
    ("malformed", ModelAPIError),
    ("refusal", ContentFilterError),
    ("truncated", OutputTokenLimitExceeded),
]


@pytest.mark.parametrize(("fault", "error"), FAULT_ERRORS)
async def test_each_fault_surfaces_as_its_pydantic_ai_exception_after_one_request(
    harness: GeminiHarness, fault: Fault, error: type[Exception]
) -> None:
    harness.server.fail_next(fault)
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt = render_prompt(ParametricContext(question="What colour is the square?"))
    model = harness.model(MODEL, timeout_s=0.5)
    with pytest.raises(error) as raised:
        await agent.run(prompt, model=model, model_settings=SETTINGS)
    assert len(harness.model_requests()) == 1  # SDK retries are off
    if fault == "429":
        assert isinstance(raised.value, ModelRateLimitError)
        assert raised.value.retry_after == RETRY_AFTER_S


async def test_a_truncated_answer_reports_finish_reason_length(harness: GeminiHarness) -> None:
    harness.server.fail_next("truncated")
    model = harness.model(MODEL)
    prompt = render_prompt(ParametricContext(question="What colour is the square?"))
    messages: list[ModelMessage] = [ModelRequest.user_text_prompt(prompt)]
    response = await model.request(messages, SETTINGS, ModelRequestParameters())
    assert response.finish_reason == "length"


async def test_without_faults_a_text_role_answers_in_one_request(harness: GeminiHarness) -> None:
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt = render_prompt(ParametricContext(question="What colour is the square?"))
    result = await agent.run(prompt, model=harness.model(MODEL), model_settings=SETTINGS)
    assert isinstance(result.output, FreeAnswer)
    assert len(harness.model_requests()) == 1


@pytest.mark.parametrize(
    ("status", "config", "error"),
    [
        (429, {"cache_min_tokens": 1000}, ModelRateLimitError),
        (500, {"cache_min_tokens": 1000}, ModelServerError),
        (429, {"inline_max_bytes": 1, "context_cache": False}, ModelRateLimitError),
        (500, {"inline_max_bytes": 1, "context_cache": False}, ModelServerError),
    ],
)
async def test_a_failed_upload_or_cache_creation_surfaces_categorised_and_is_not_recorded(
    harness: GeminiHarness,
    ledger: MemoryResourceLedger,
    demo: Demo,
    status: int,
    config: dict[str, Any],
    error: type[Exception],
) -> None:
    harness.state.resource_faults.append(status)
    with pytest.raises(error) as raised:
        await run_phase1(harness, demo, **config)
    if status == 429:
        assert isinstance(raised.value, ModelRateLimitError)
        assert raised.value.retry_after == RETRY_AFTER_S
    assert not harness.model_requests()
    assert ledger.find("gemini", "upload", "src-cooking-01", datetime.now(UTC)) is None
    result = await run_phase1(harness, demo, **config)  # the next attempt makes it afresh
    assert isinstance(result.output, QA)
    report = (last_response(result).provider_details or {}).get("playlisteval_cache")
    assert report is None or report["created"] is True  # no failed cache was remembered


# -- batch -----------------------------------------------------------------------------------------


async def test_a_batch_round_trip_sends_the_video_as_uploaded_files(
    harness: GeminiHarness, demo: Demo
) -> None:
    """A batch line references each clip's upload (``fileData``), never its base64."""
    model = harness.model(MODEL, context_cache=False)
    schema = OutputObjectDefinition(json_schema=QA.model_json_schema(), name="QA")
    params = ModelRequestParameters(output_mode="native", output_object=schema)
    request = BatchRequest(
        custom_id="seed-1",
        messages=[ModelRequest(parts=[UserPromptPart(demo.phase1_prompt())])],
        model_settings=SETTINGS,
        model_request_parameters=params,
    )
    encoded = await model.batch_encode(request)
    line = json.loads(encoded.body)
    parts = [p for c in camel_keys(line["contents"]) for p in c["parts"]]
    assert not [p for p in parts if "inlineData" in p]
    assert [p["videoMetadata"]["fps"] for p in parts if "fileData" in p] == [0.5] * 2
    batch = await model.batch_create([encoded])
    while batch.status != "ended":
        batch = await model.batch_status(batch)
    (result,) = await model.batch_results(batch)
    assert result.custom_id == "seed-1"
    assert result.status == "succeeded"
    response = model.batch_decode(result, request)
    qa = QA.model_validate_json(response.text or "")
    assert "(cooking-02 @" in qa.gold_answer


# -- the live path as Gemini sees it (issue: step 9) ----------------------------------------------


async def test_an_id_gemini_does_not_serve_is_a_404_naming_it(harness: GeminiHarness) -> None:
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt = render_prompt(ParametricContext(question="What colour is the square?"))
    with pytest.raises(ModelNotFoundError) as raised:
        # The id the defaults used to send: the models page lists only the -preview one.
        await agent.run(prompt, model=harness.model("gemini-3-flash"), model_settings=SETTINGS)
    assert "models/gemini-3-flash is not found" in str(raised.value)


def test_every_role_cap_leaves_room_for_its_thinking_and_an_answer() -> None:
    """Gemini 3 takes thinking out of maxOutputTokens: each role's cap holds what the fake
    (standing in for the service) thinks at the role's level, plus at least 1,024 tokens."""
    for spec in ROLES.values():
        assert spec.max_output_tokens - THINKING_TOKENS[spec.thinking.upper()] >= 1024, spec.name


async def test_a_short_verdict_cap_at_the_default_thinking_level_ends_before_any_answer(
    harness: GeminiHarness,
) -> None:
    """The old verifier settings (512 tokens, no level: Gemini 3 thinks HIGH) get nothing
    back; the role's own settings get the verdict."""
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt = render_prompt(ParametricContext(question="What colour is the square?"))
    model = harness.model(MODEL)
    with pytest.raises(OutputTokenLimitExceeded):
        await agent.run(prompt, model=model, model_settings=ModelSettings(max_tokens=512))
    role = ModelSettings(
        max_tokens=PARAMETRIC_VERIFIER.max_output_tokens, thinking=PARAMETRIC_VERIFIER.thinking
    )
    result = await agent.run(prompt, model=model, model_settings=role)
    assert isinstance(result.output, FreeAnswer)
    config = camel_keys(harness.model_requests()[-1].json()["generationConfig"])
    assert config["thinkingConfig"]["thinkingLevel"] == "LOW"
    assert config["maxOutputTokens"] == PARAMETRIC_VERIFIER.max_output_tokens


async def test_gemini_3_keeps_its_default_temperature_and_the_run_records_what_was_sent(
    harness: GeminiHarness, demo: Demo
) -> None:
    result = await run_phase1(harness, demo, context_cache=False)
    config = harness.model_requests()[-1].json()["generationConfig"]
    assert "temperature" not in config  # asked for 0.0; Gemini 3's guide says keep 1.0
    assert config["mediaResolution"] == "MEDIA_RESOLUTION_MEDIUM"
    sent = (last_response(result).provider_details or {})["playlisteval_sent"]
    assert sent["model"] == MODEL
    assert sent["temperature"] is None
    assert sent["thinking"] == PHASE1_GENERATOR.thinking
    assert sent["media_resolution"] == "medium"
    assert [(v["fps"], v["audio"], v["route"]) for v in sent["videos"]] == [
        (0.5, True, "inline")
    ] * 2


async def test_gemini_2_models_are_sent_the_temperature_asked(harness: GeminiHarness) -> None:
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt = render_prompt(ParametricContext(question="What colour is the square?"))
    await agent.run(prompt, model=harness.model("gemini-2.5-flash"), model_settings=SETTINGS)
    assert harness.model_requests()[-1].json()["generationConfig"]["temperature"] == 0.0


@pytest.mark.parametrize(("resolution", "per_frame"), [("low", 70), ("high", 280)])
async def test_the_media_resolution_sent_is_the_one_billed_and_estimated(
    harness: GeminiHarness, demo: Demo, resolution: str, per_frame: int
) -> None:
    result = await run_phase1(harness, demo, context_cache=False, media_resolution=resolution)
    config = harness.model_requests()[-1].json()["generationConfig"]
    assert config["mediaResolution"] == f"MEDIA_RESOLUTION_{resolution.upper()}"
    assert harness.last_usage()["video"] == 45 * per_frame
    infos = [info for c in demo.clips if (info := clip_info(c)) is not None]
    silent = [replace(i, audio=False) for i in infos]
    assert estimate_video_tokens(silent, MODEL, resolution) == 45 * per_frame
    assert isinstance(result.output, QA)


async def test_a_cache_below_the_models_minimum_is_refused_and_the_default_never_asks_for_one(
    harness: GeminiHarness, demo: Demo
) -> None:
    # One 8-second silent clip at low resolution: 280 tokens, under Flash's 1,024.
    source = Path(str((demo.clips[0].vendor_metadata or {})["path"]))
    short = media.export_clip(source, source.with_name("short.mp4"), 0.0, 8.0, fps=0.5)
    clip = BinaryContent(
        data=short.read_bytes(),
        media_type="video/mp4",
        identifier=demo.segments[0].segment_id,
        vendor_metadata={**(demo.clips[0].vendor_metadata or {}), "end_s": 8.0, "audio": False},
    )
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt: list[Any] = [render_prompt(ParametricContext(question="What colour?")), clip]
    forced = harness.model(MODEL, cache_min_tokens=1, media_resolution="low")
    with pytest.raises(ModelHTTPError) as raised:
        await agent.run(prompt, model=forced, model_settings=SETTINGS)
    assert raised.value.status_code == 400
    assert "Cached content is too small" in str(raised.value)
    # The default threshold (4,096) is at or above every served model's minimum.
    result = await agent.run(prompt, model=harness.model(MODEL), model_settings=SETTINGS)
    assert isinstance(result.output, FreeAnswer)
    assert "cachedContent" not in harness.model_requests()[-1].json()


async def test_a_cache_about_to_expire_is_not_reused(
    harness: GeminiHarness, ledger: MemoryResourceLedger, demo: Demo
) -> None:
    await run_phase1(harness, demo, cache_min_tokens=1000)
    (entry,) = [r for r in ledger._items.values() if r.kind == "cache"]
    ledger.record(replace(entry, expires_at=datetime.now(UTC) + timedelta(seconds=20)))
    result = await run_phase1(harness, demo, cache_min_tokens=1000)
    report = (last_response(result).provider_details or {})["playlisteval_cache"]
    assert report["created"] is True
    assert len(harness.server.seen("POST", "/v1beta/cachedContents")) == 2


@pytest.mark.parametrize(
    ("fault", "error", "retry_after"),
    [
        ("retry_info", ModelRateLimitError, 13.0),
        ("daily_quota", ModelQuotaExceededError, None),
        ("503", ModelUnavailableError, None),
    ],
)
async def test_geminis_own_failures_surface_as_their_categories(
    harness: GeminiHarness, fault: str, error: type[Exception], retry_after: float | None
) -> None:
    harness.state.gemini_faults.append(fault)
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt = render_prompt(ParametricContext(question="What colour is the square?"))
    with pytest.raises(error) as raised:
        await agent.run(prompt, model=harness.model(MODEL), model_settings=SETTINGS)
    assert isinstance(raised.value, ModelAPIError)
    if retry_after is not None:  # read from google.rpc.RetryInfo: Gemini sends no header
        assert raised.value.retry_after == retry_after
    if fault == "daily_quota":
        assert classify_failure(raised.value).transient is False


async def test_a_source_in_a_container_gemini_does_not_take_is_not_uploaded_whole(
    harness: GeminiHarness, demo: Demo, tmp_path: Path
) -> None:
    mkv = tmp_path / "cooking-01.mkv"
    mkv.write_bytes(Path(str((demo.clips[0].vendor_metadata or {})["path"])).read_bytes())
    clips = [
        BinaryContent(
            data=c.data,
            media_type=c.media_type,
            identifier=c.identifier,
            vendor_metadata={**(c.vendor_metadata or {}), "path": str(mkv)},
        )
        for c in demo.clips
    ]
    agent = Agent(None, output_type=QA, retries=0)
    prompt: list[Any] = [render_prompt(Phase1Context(segments=demo.segments)), *clips]
    model = harness.model(MODEL, inline_max_bytes=1, context_cache=False)
    result = await agent.run(prompt, model=model, model_settings=SETTINGS)
    assert isinstance(result.output, QA)
    stored = sorted(harness.state.files.values(), key=lambda f: len(f.data))
    assert [len(f.data) for f in stored] == sorted(len(c.data) for c in demo.clips)
    assert {f.mime_type for f in stored} == {"video/mp4"}


async def test_inline_video_is_bounded_per_request_and_the_fps_by_the_models_setting(
    harness: GeminiHarness, demo: Demo
) -> None:
    """Gemini's inline limit is per request: once the first clip takes the budget the second
    goes through the Files API; and no clip is shown faster than ``video_fps``."""
    budget = len(demo.clips[0].data)
    await run_phase1(harness, demo, inline_max_bytes=budget, context_cache=False, video_fps=0.25)
    parts = parts_of(harness)
    routes = ["inline" if "inlineData" in p else "file" for p in parts if "videoMetadata" in p]
    assert routes == ["inline", "file"]
    assert {p["videoMetadata"]["fps"] for p in parts if "videoMetadata" in p} == {0.25}


async def test_a_request_over_geminis_size_limit_is_refused(harness: GeminiHarness) -> None:
    blob = BinaryContent(data=b"\0" * (MAX_REQUEST_BYTES // 4 * 3 + 1), media_type="image/png")
    agent = Agent(None, output_type=FreeAnswer, retries=0)
    prompt: list[Any] = [render_prompt(ParametricContext(question="What colour?")), blob]
    with pytest.raises(ModelHTTPError) as raised:
        await agent.run(prompt, model=harness.model(MODEL), model_settings=SETTINGS)
    assert raised.value.status_code == 400
    assert "payload size exceeds the limit" in str(raised.value)


async def test_a_runs_end_deletes_the_uploads_its_models_made(
    harness: GeminiHarness, ledger: MemoryResourceLedger, demo: Demo
) -> None:
    """Gemini keeps uploads 48 h against the project's 20 GB of files: a run's models delete
    theirs when the run ends (``release_models``), and the ledger no longer offers them."""
    registry = ProviderRegistry({MODEL: harness.config(MODEL, inline_max_bytes=1)}, ledger)
    agent = Agent(None, output_type=QA, retries=0)
    model = registry.model(MODEL)
    result = await agent.run(demo.phase1_prompt(), model=model, model_settings=SETTINGS)
    assert isinstance(result.output, QA)
    assert len(harness.state.files) == 2  # one per clip
    key = clip_key(demo.clips[0])
    assert ledger.find("gemini", "upload", key, datetime.now(UTC)) is not None
    await release_models(registry.model)
    assert harness.state.files == {}
    assert len(harness.server.seen("DELETE", "/v1beta/files/")) == 2
    assert ledger.find("gemini", "upload", key, datetime.now(UTC)) is None
