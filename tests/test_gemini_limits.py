"""Gemini's limits as the real google-genai SDK meets them in the fake Gemini API: a clip goes to
the Files API cut (never its whole source video) and under the per-file limit, a part's media
resolution goes in the shape the API reads, and a request naming a context cache sets no system
instruction or tools. Each rule is checked on the fake itself, then on our adapter."""

from __future__ import annotations

import io
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from google.genai import errors
from google.genai import types as genai_types
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelRequestRejectedError
from pydantic_ai.messages import BinaryContent

from agents.prompts import render_prompt
from agents.recorded import classify_failure
from tests.fakes_gemini import SERVED_MODELS, GeminiHarness, camel_keys, gemini_harness
from tests.provider_clips import DemoClips
from tools.contracts.roles import QA, Phase1Context
from tools.providers import gemini
from tools.providers.base import MemoryResourceLedger, clip_info
from tools.providers.gemini import estimate_video_tokens

MODEL = "gemini-3-flash-preview"

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("allow_model_requests")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoClips:
    return DemoClips(tmp_path_factory.mktemp("gemini-limits"))


@pytest.fixture
async def harness() -> AsyncIterator[GeminiHarness]:
    with gemini_harness(MemoryResourceLedger()) as running:
        yield running
        await running.aclose()


def with_audio(demo: DemoClips) -> list[BinaryContent]:
    """The demo's clips as a call attaches clips that carry their audio (the exported mp4s do)."""
    return [
        BinaryContent(
            data=clip.data,
            media_type=clip.media_type,
            identifier=clip.identifier,
            vendor_metadata={**(clip.vendor_metadata or {}), "audio": True},
        )
        for clip in demo.clips
    ]


async def run_phase1(model: Any, demo: DemoClips, clips: list[BinaryContent], **agent: Any) -> QA:
    prompt: list[Any] = [render_prompt(Phase1Context(segments=demo.segments)), *clips]
    result = await Agent(None, output_type=QA, retries=0, **agent).run(prompt, model=model)
    assert isinstance(result.output, QA)
    return result.output


def upload_starts(harness: GeminiHarness) -> int:
    return sum(
        1
        for r in harness.server.seen("POST", "/upload/v1beta/files")
        if r.headers.get("X-Goog-Upload-Command") == "start"
    )


def video_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    parts = [p for c in camel_keys(body.get("contents", [])) for p in c["parts"]]
    return [p for p in parts if "inlineData" in p or "fileData" in p]


def test_the_adapters_files_api_limit_is_the_documented_two_gigabytes() -> None:
    """ "a per-file maximum size of 2 GB" (https://ai.google.dev/gemini-api/docs/files)."""
    assert getattr(gemini, "FILES_API_MAX_BYTES", None) == 2_000_000_000


# -- the Files API's per-file limit (fake rule a; issue step 17 point 5) ---------------------


async def test_the_fake_refuses_an_upload_over_its_per_file_limit(
    harness: GeminiHarness,
) -> None:
    """Scaled down from Gemini's 2 GB to 1,000 bytes: a file of the limit is taken, one byte
    more is refused with 400 before its bytes are read."""
    harness.state.max_file_bytes = 1000
    client = harness.model(MODEL).client
    config = genai_types.UploadFileConfig(mime_type="video/mp4")
    taken = await client.aio.files.upload(file=io.BytesIO(b"\0" * 1000), config=config)
    assert taken.size_bytes == 1000
    with pytest.raises(errors.ClientError) as raised:
        await client.aio.files.upload(file=io.BytesIO(b"\0" * 1001), config=config)
    assert raised.value.code == 400
    assert "exceeds the maximum allowed size of 1000 bytes" in str(raised.value)
    assert len(harness.state.files) == 1


async def test_a_clip_with_audio_is_uploaded_cut_in_its_own_timeline_and_reused(
    harness: GeminiHarness, demo: DemoClips
) -> None:
    """A clip too big to go inline is uploaded as the clip (never its whole source, which here
    is over the Files API's limit), shown whole with the clip's 00:00 at its start in the video,
    and reused by a later call."""
    clips = with_audio(demo)
    sources = [Path(str((c.vendor_metadata or {})["path"])).stat().st_size for c in clips]
    biggest_clip = max(len(c.data) for c in clips)
    assert biggest_clip < min(sources)
    harness.state.max_file_bytes = (biggest_clip + min(sources)) // 2  # scaled down from 2 GB
    for _ in range(2):
        model = harness.model(MODEL, inline_max_bytes=1, context_cache=False)
        await run_phase1(model, demo, clips)
    assert upload_starts(harness) == 2  # one per clip; the second call reused both
    stored = sorted(bytes(f.data) for f in harness.state.files.values())
    assert stored == sorted(c.data for c in clips)
    for request in harness.model_requests():
        body = request.json()
        parts = [p for c in camel_keys(body["contents"]) for p in c["parts"]]
        files = video_parts(body)
        assert [p["videoMetadata"] for p in files] == [{"fps": 0.5}] * 2  # no source offsets
        label = parts[parts.index(files[0]) - 1]["text"]
        assert f"(segment {demo.segments[0].segment_id})" in label
        assert "this clip's 00:00 is 00:06 of the video" in label
        seen = harness.media(request)
        assert [(m["start_s"], m["end_s"], m["audio"]) for m in seen] == [
            (s.start_s, s.end_s, True) for s in demo.segments
        ]


async def test_a_clip_over_the_files_api_limit_is_refused_before_anything_is_uploaded(
    harness: GeminiHarness, demo: DemoClips
) -> None:
    """With the limit scaled down between the two clips' sizes, the call fails on the second
    clip before the first is uploaded, naming the clip and the limit; it is not retried."""
    small, large = sorted(len(c.data) for c in demo.clips)
    limit = (small + large) // 2
    harness.state.max_file_bytes = limit
    model = harness.model(MODEL, inline_max_bytes=1, context_cache=False, max_upload_bytes=limit)
    with pytest.raises(ModelRequestRejectedError) as raised:
        await run_phase1(model, demo, with_audio(demo))
    over = next(c for c in demo.clips if len(c.data) > limit)
    assert f"clip {over.identifier!r} is {len(over.data):,} bytes" in str(raised.value)
    assert f"per-file limit of {limit:,} bytes" in str(raised.value)
    assert classify_failure(raised.value).transient is False
    assert upload_starts(harness) == 0
    assert not harness.model_requests()


# -- a part's media resolution (fake rule b; issue step 17 point 6) ---------------------------


@pytest.mark.parametrize(
    ("resolution", "applied", "per_frame"),
    [
        # The message the API reads.
        ({"level": "MEDIA_RESOLUTION_HIGH"}, "high", 280),
        # The request-wide enum in a part: google-genai sends it as ``{}``, no level, and the
        # part goes at the model's default.
        (genai_types.MediaResolution.MEDIA_RESOLUTION_HIGH, "medium", 70),
    ],
)
async def test_the_fake_applies_and_bills_the_resolution_a_part_actually_sets(
    harness: GeminiHarness,
    demo: DemoClips,
    resolution: object,
    applied: str,
    per_frame: int,
) -> None:
    part = genai_types.Part.model_validate(
        {
            "inline_data": {"data": demo.clips[1].data, "mime_type": "video/mp4"},
            "video_metadata": {"fps": 0.5},
            "media_resolution": resolution,
        }
    )
    client = harness.model(MODEL).client
    await client.aio.models.generate_content(
        model=MODEL, contents=[genai_types.Content(role="user", parts=[part])]
    )
    (request,) = harness.model_requests()
    (seen,) = harness.media(request)
    assert seen["resolution"] == applied
    info = clip_info(demo.clips[1])
    assert info is not None
    assert harness.last_usage()["video"] == info.native_frames * per_frame


async def test_the_fake_refuses_a_part_resolution_with_a_level_the_api_does_not_have(
    harness: GeminiHarness, demo: DemoClips
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # google-genai warns, then sends it anyway
        part = genai_types.Part.model_validate(
            {
                "inline_data": {"data": demo.clips[1].data, "mime_type": "video/mp4"},
                "media_resolution": {"level": "MEDIA_RESOLUTION_SHARP"},
            }
        )
    client = harness.model(MODEL).client
    with pytest.raises(errors.ClientError) as raised:
        await client.aio.models.generate_content(
            model=MODEL, contents=[genai_types.Content(role="user", parts=[part])]
        )
    assert raised.value.code == 400
    assert raised.value.status == "INVALID_ARGUMENT"
    assert "'contents[0].parts[0].media_resolution.level'" in str(raised.value)


@pytest.mark.parametrize("cached", [True, False])
async def test_each_video_part_carries_the_configured_resolution_in_the_shape_the_api_reads(
    harness: GeminiHarness, demo: DemoClips, cached: bool
) -> None:
    """On Gemini 3 every video part says its level; in a context cache (no generationConfig)
    that is the only place it is said, so the cache is billed at it."""
    model = harness.model(
        MODEL, media_resolution="high", cache_min_tokens=1000, context_cache=cached
    )
    await run_phase1(model, demo, demo.clips)
    if cached:
        (create,) = harness.server.seen("POST", "/v1beta/cachedContents")
        parts = video_parts(create.json())
    else:
        parts = video_parts(harness.model_requests()[-1].json())
    assert [p["mediaResolution"] for p in parts] == [{"level": "MEDIA_RESOLUTION_HIGH"}] * 2
    request = harness.model_requests()[-1]
    assert [m["resolution"] for m in harness.media(request)] == ["high", "high"]
    infos = [info for c in demo.clips if (info := clip_info(c)) is not None]
    if cached:
        (cache,) = harness.state.caches.values()
        assert cache.usage["VIDEO"] == estimate_video_tokens(infos, MODEL, "high")
    else:
        assert harness.last_usage()["video"] == estimate_video_tokens(infos, MODEL, "high")


# -- a cached request sets no system instruction or tools (fake rule c) -----------------------


@pytest.mark.parametrize(
    "owned",
    [
        {"system_instruction": "Answer briefly."},
        {"tools": [genai_types.Tool(function_declarations=[{"name": "lookup"}])]},
        {"tool_config": {"function_calling_config": {"mode": "NONE"}}},
    ],
)
async def test_the_fake_refuses_a_cached_request_that_sets_what_the_cache_owns(
    harness: GeminiHarness, owned: dict[str, Any]
) -> None:
    client = harness.model(MODEL).client
    cache = await client.aio.caches.create(
        model=MODEL,
        config=genai_types.CreateCachedContentConfig(
            contents=[{"role": "user", "parts": [{"text": "background " * 500}]}]
        ),
    )
    assert cache.name is not None
    answered = await client.aio.models.generate_content(
        model=MODEL,
        contents="And so?",
        config=genai_types.GenerateContentConfig(cached_content=cache.name),
    )
    assert answered.text
    with pytest.raises(errors.ClientError) as raised:
        await client.aio.models.generate_content(
            model=MODEL,
            contents="And so?",
            config=genai_types.GenerateContentConfig(cached_content=cache.name, **owned),
        )
    assert raised.value.code == 400
    assert "CachedContent can not be used with GenerateContent request setting" in str(raised.value)


async def test_a_calls_instructions_reach_the_model_when_its_videos_are_cached(
    harness: GeminiHarness, demo: DemoClips
) -> None:
    """The cached request carries no system instruction, and nothing is silently stripped:
    the instructions go as user text beside the cache."""
    instructions = "Ask only about what the cook does with their hands."
    model = harness.model(MODEL, cache_min_tokens=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await run_phase1(model, demo, demo.clips, instructions=instructions)
    (request,) = harness.model_requests()
    body = request.json()
    assert body["cachedContent"].startswith("cachedContents/")
    assert "systemInstruction" not in body
    assert instructions in harness.prompt_text(request)


async def test_a_call_with_tools_keeps_its_videos_rather_than_lose_its_tools_to_a_cache(
    harness: GeminiHarness, demo: DemoClips
) -> None:
    agent = Agent(None, output_type=QA, retries=0)

    @agent.tool_plain
    def scene_count() -> int:
        """How many scenes each episode has."""
        return 4

    prompt: list[Any] = [render_prompt(Phase1Context(segments=demo.segments)), *demo.clips]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await agent.run(prompt, model=harness.model(MODEL, cache_min_tokens=1000))
    (request,) = harness.model_requests()
    body = request.json()
    assert "cachedContent" not in body
    assert body["tools"]
    assert len(video_parts(body)) == 2
    assert not harness.server.seen("POST", "/v1beta/cachedContents")


# -- Gemini's inline request limit: 100 MB of the request as sent, base64 included ---------------


def padded(clip: BinaryContent, size: int) -> BinaryContent:
    """``clip`` grown to ``size`` bytes by a trailing ``free`` box (ISO/IEC 14496-12: a box
    every reader skips), so it is still the same video, only bigger."""
    pad = size - len(clip.data)
    box = pad.to_bytes(4, "big") + b"free" + bytes(pad - 8)
    return BinaryContent(
        data=clip.data + box,
        media_type=clip.media_type,
        identifier=clip.identifier,
        vendor_metadata=clip.vendor_metadata,
    )


SEVENTY_TWO_MIB = 72 * 1024 * 1024  # the settings' default inline_max_bytes


def video_content(data: bytes) -> list[genai_types.Content]:
    part = genai_types.Part(
        inline_data=genai_types.Blob(data=data, mime_type="video/mp4"),
        video_metadata=genai_types.VideoMetadata(fps=0.5),
    )
    return [genai_types.Content(role="user", parts=[part, genai_types.Part(text="Describe.")])]


async def test_the_fake_takes_a_request_under_100_mb_as_sent_and_refuses_one_over(
    harness: GeminiHarness, demo: DemoClips
) -> None:
    """Inline data travels base64-encoded: 74,000,000 bytes of video is a request of about
    98.7 MB and is answered; 72 MiB (75,497,472 bytes) is about 100.7 MB and is refused as
    Gemini refuses an oversized payload, before anything in it is read."""
    client = harness.model(MODEL).client
    taken = await client.aio.models.generate_content(
        model=MODEL, contents=video_content(padded(demo.clips[1], 74_000_000).data)
    )
    assert taken.usage_metadata is not None
    (request,) = harness.model_requests()
    assert 98_000_000 < len(request.body) < 100_000_000
    with pytest.raises(errors.ClientError) as raised:
        await client.aio.models.generate_content(
            model=MODEL, contents=video_content(padded(demo.clips[1], SEVENTY_TWO_MIB).data)
        )
    assert (raised.value.code, raised.value.status) == (400, "INVALID_ARGUMENT")
    assert "Request payload size exceeds the limit: 100000000 bytes." in str(raised.value)
    assert len(harness.model_requests()[-1].body) > 100_000_000
    assert len(harness.state.usage) == 1  # the refused one was never answered


async def test_72_mib_of_video_goes_through_the_files_api_since_inline_it_is_over_100_mb(
    harness: GeminiHarness, demo: DemoClips
) -> None:
    """The default inline_max_bytes (72 MiB) counts raw bytes; Gemini's limit is on the
    request as sent. A 72 MiB clip goes through the Files API and the small one beside it
    inline, so the call is answered and records each clip's route."""
    big = padded(demo.clips[0], SEVENTY_TWO_MIB)
    model = harness.model(MODEL, context_cache=False)
    assert model.config.inline_max_bytes == SEVENTY_TWO_MIB
    result = await Agent(None, output_type=QA, retries=0).run(
        [render_prompt(Phase1Context(segments=demo.segments)), big, demo.clips[1]], model=model
    )
    assert isinstance(result.output, QA)
    assert upload_starts(harness) == 1
    (request,) = harness.model_requests()
    assert len(request.body) < 100_000_000
    assert [m["route"] for m in harness.media(request)] == ["file", "inline"]
    sent = result.all_messages()[-1].provider_details["playlisteval_sent"]
    assert [v["route"] for v in sent["videos"]] == ["file", "inline"]


def test_an_inline_request_is_measured_base64_encoded_in_decimal_megabytes() -> None:
    assert gemini.INLINE_REQUEST_MAX_BYTES == 100_000_000
    assert gemini.base64_size(SEVENTY_TWO_MIB) == 100_663_296
    assert gemini.base64_size(74_000_000) == 98_666_668


# -- the fake counts tokens by its own reading of Gemini's table ----------------------------------


async def test_the_fake_bills_video_by_its_own_token_table_not_the_adapters(
    harness: GeminiHarness, demo: DemoClips, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were the adapter's table wrong, the fake would still bill as Gemini documents (70 a
    frame at medium on Gemini 3), so the tests that compare the two would catch it."""
    monkeypatch.setitem(gemini.FRAME_TOKENS, 3, {"low": 1, "medium": 1, "high": 1})
    monkeypatch.setattr(gemini, "AUDIO_TOKENS_PER_SECOND", 1)
    client = harness.model(MODEL).client
    await client.aio.models.generate_content(
        model=MODEL, contents=video_content(demo.clips[1].data)
    )
    info = clip_info(demo.clips[1])
    assert info is not None
    assert harness.last_usage()["video"] == info.native_frames * 70


# The 2.5 models are retiring (pydantic-ai warns so); their token table still differs from 3's.
@pytest.mark.filterwarnings("ignore::pydantic_ai.exceptions.DeprecatedModelWarning")
@pytest.mark.parametrize("resolution", ["low", "medium", "high"])
@pytest.mark.parametrize("served", SERVED_MODELS)
async def test_the_fake_and_the_adapter_count_a_calls_video_and_audio_alike(
    harness: GeminiHarness, demo: DemoClips, served: str, resolution: str
) -> None:
    """The adapter reserves by its count (``estimate_video_tokens``); the fake bills by its
    own reading of Gemini's table. For every model the fake serves, at every resolution, the
    two agree on what the clips (with their audio) of a call cost."""
    clips = with_audio(demo)
    model = harness.model(served, media_resolution=resolution, context_cache=False)
    await run_phase1(model, demo, clips)
    infos = [info for c in clips if (info := clip_info(c)) is not None]
    billed = harness.last_usage()
    assert billed["audio"] > 0
    assert billed["video"] + billed["audio"] == estimate_video_tokens(infos, served, resolution)
