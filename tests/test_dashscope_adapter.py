"""The DashScope adapter drives the real ``dashscope`` SDK against a fake native API: video goes
as labelled video files at their fps (fixed frames as frame lists, within DashScope's limit of
Base64 images per request), reserved as sent, output as prompted JSON, usage and every failure
come back in pydantic-ai's terms (a used-up quota apart from a rate limit), and each call is
exactly one model request. The fake bills as DashScope documents, and our worst-case count
covers it."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from dashscope import MultiModalConversation
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.exceptions import (
    ContentFilterError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
    UnexpectedModelBehavior,
    UserError,
)
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings

from agents.prompts import render_prompt
from agents.recorded import CallContext, CallRecorder, call_clips, call_shape
from agents.workers import ModelRunner, SeedCall
from playlisteval.app import provider_config, traffic_for
from playlisteval.settings import load_settings
from policies.budget import Budget
from policies.prices import PriceTable
from policies.ratelimits import RetryPolicy, Traffic
from policies.tokens import CallShape, estimate_input_tokens
from store.events import CallFailed, CallRecorded, CallRetried, Event
from store.eventstore import open_event_store
from tests.fakes_dashscope import (
    API_KEY,
    GENERATION_PATH,
    PLAIN_ANSWER,
    DashScopeHarness,
    base64_images,
    dashscope_harness,
    image_tokens,
    request_videos,
    video_tokens,
)
from tests.fakes_providers import RETRY_AFTER_S, Fault
from tools.contracts.roles import (
    ChunkText,
    FreeAnswer,
    ParametricContext,
    SegmentEvidence,
    SufficiencyContext,
    SufficiencyVerdict,
)
from tools.index import media
from tools.offline.synthetic import make_demo_playlist
from tools.providers.base import ClipInfo, ProviderConfig, frame_times
from tools.providers.dashscope_model import (
    MAX_BASE64_IMAGES,
    dashscope_model,
    frame_time_text,
)
from tools.providers.offline import OfflineProvider

# These tests drive the adapters against local fake servers (see conftest).
pytestmark = pytest.mark.usefixtures("allow_model_requests")

MODEL = "qwen3.7-plus"
CLIP_FPS = 0.5
HEIGHT = 360


class Demo:
    """Two synthetic episodes as segments, each with its exported clip (no audio: Qwen has none)."""

    def __init__(self, root: Path) -> None:
        make_demo_playlist(
            root, domains=("cooking",), videos_per_domain=2, plant_duplicate=False, narrate=False
        )
        truth = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))
        segments: list[SegmentEvidence] = []
        self.clips: list[BinaryContent] = []
        for video in truth["videos"]:
            # The second half of each video, so clip time and video time differ.
            start, end = video["duration"] / 2, video["duration"]
            segment = SegmentEvidence(
                segment_id=f"{video['id']}#1",
                video_id=video["id"],
                title=video["title"],
                start_s=start,
                end_s=end,
                chunks=(
                    ChunkText(start_s=start, end_s=start + 30, text=f"narration of {video['id']}"),
                ),
            )
            clip = media.export_clip(
                root / video["path"],
                root / f"{video['id']}-clip.mp4",
                start,
                end,
                fps=CLIP_FPS,
                max_height=HEIGHT,
                audio=False,
            )
            self.clips.append(
                BinaryContent(
                    data=clip.read_bytes(),
                    media_type="video/mp4",
                    identifier=segment.segment_id,
                    vendor_metadata={
                        "fps": CLIP_FPS,
                        "start_s": start,
                        "end_s": end,
                        "height": HEIGHT,
                        "audio": False,
                        "source": f"sha256:{video['id']}",
                        "video_id": video["id"],
                        "path": "",
                    },
                )
            )
            segments.append(segment)
        self.segments = (segments[0], segments[1])
        self.scenes = [video["scenes"] for video in truth["videos"]]
        first = segments[0]
        self.context = SufficiencyContext(
            question="What does the first episode show in its second half?",
            gold_answer=(
                f"It shows the set ({first.video_id} @ "
                f"{frame_time_text(first.start_s)}–{frame_time_text(first.start_s + 10)})."
            ),
            segments=self.segments,
        )

    def claim(self, index: int, start: float, end: float) -> str:
        """A true sentence about the scene of video ``index`` over ``[start, end)``, cited."""
        scene = next(c for c in self.scenes[index] if c["start_s"] <= start < c["end_s"])
        shape = scene["shapes"][0]
        segment = self.segments[index]
        return (
            f"The background is {scene['background']['colour']} and a {shape['colour']} "
            f"{shape['kind']} is shown ({segment.video_id} @ "
            f"{frame_time_text(start)}–{frame_time_text(end)})."
        )

    def prompt(self) -> list[Any]:
        """The sufficiency call as ModelRunner makes it: the rendered prompt, then the clips."""
        return [render_prompt(self.context), *self.clips]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("dashscope-demo"))


@pytest.fixture
def harness() -> Any:
    with dashscope_harness() as running:
        yield running


def sufficiency(harness: DashScopeHarness, demo: Demo, **config: Any) -> Any:
    model = harness.model(MODEL, frame_height=HEIGHT, **config)
    agent = Agent(model, output_type=SufficiencyVerdict, retries=0)
    return agent.run_sync(
        demo.prompt(), model_settings=ModelSettings(max_tokens=777, temperature=0.0)
    )


def test_clips_go_as_labelled_video_files_at_their_fps(
    harness: DashScopeHarness, demo: Demo
) -> None:
    sufficiency(harness, demo)
    [request] = harness.model_requests()
    body = request.json()
    assert body["model"] == MODEL
    system, user = body["input"]["messages"]
    assert system["role"] == "system"
    assert user["role"] == "user"
    items = user["content"]
    assert items[0] == {"text": render_prompt(demo.context)}  # transcript included, unchanged
    assert "narration of cooking-01" in items[0]["text"]
    for index, segment in enumerate(demo.segments):
        label, video = items[1 + 2 * index], items[2 + 2 * index]
        assert f"(segment {segment.segment_id})" in label["text"]
        start = frame_time_text(segment.start_s)
        assert (
            f"holds 30 frames at 0.5 fps; its frame k (k = 0, 1, …) shows {start} + k × 2 s"
            in (label["text"])
        )
        assert video["fps"] == CLIP_FPS
        assert video["video"].startswith("oss://")
    assert harness.media(request) == [
        {
            "kind": "video",
            "fps": CLIP_FPS,
            "start_s": s.start_s,
            "end_s": s.end_s,
            "audio": False,
            "frames": 30,
        }
        for s in demo.segments
    ]


def test_output_is_json_mode_with_the_schema_in_the_instructions(
    harness: DashScopeHarness, demo: Demo
) -> None:
    sufficiency(harness, demo)
    [request] = harness.model_requests()
    parameters = request.json()["parameters"]
    assert parameters["response_format"] == {"type": "json_object"}
    assert parameters["result_format"] == "message"
    assert parameters["enable_thinking"] is False
    assert parameters["max_tokens"] == 777
    assert parameters["temperature"] == 0.0
    schema = harness.output_schema(request)
    assert schema is not None
    assert set(schema["properties"]) == set(SufficiencyVerdict.model_json_schema()["properties"])
    assert "JSON" in harness.prompt_text(request)  # JSON mode requires the word in the prompt


def test_the_answer_is_parsed_and_matches_the_offline_provider(
    harness: DashScopeHarness, demo: Demo
) -> None:
    """The fake saw each frame at the time the adapter sampled it: claims about what the cited
    spans show are judged as the offline provider judges them from the clips themselves."""
    true_claim = demo.claim(0, 60.0, 74.0)
    false_claim = "In the second segment the background is green (cooking-02 @ 01:00–01:14)."
    context = SufficiencyContext(
        question="What do the two episodes show in their second halves?",
        gold_answer=f"{true_claim} {demo.claim(1, 90.0, 104.0)} {false_claim}",
        segments=demo.segments,
    )
    prompt: list[Any] = [render_prompt(context), *demo.clips]
    model = harness.model(MODEL, frame_height=HEIGHT)
    result = Agent(model, output_type=SufficiencyVerdict, retries=0).run_sync(prompt)
    offline = Agent(OfflineProvider().model(MODEL), output_type=SufficiencyVerdict)
    expected = offline.run_sync(prompt).output
    assert isinstance(result.output, SufficiencyVerdict)
    assert result.output == expected
    assert len(result.output.unsupported_claims) == 1
    assert "green" in result.output.unsupported_claims[0]


def test_usage_carries_what_dashscope_reported(harness: DashScopeHarness, demo: Demo) -> None:
    result = sufficiency(harness, demo)
    reported = harness.last_usage()
    [response] = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    usage = response.usage
    assert usage.input_tokens == reported["input_tokens"]
    assert usage.output_tokens == reported["output_tokens"]
    assert usage.cache_read_tokens == reported["cached_tokens"] == 0
    assert usage.details == {
        "text_prompt_tokens": reported["text"],
        "video_prompt_tokens": reported["video"],
    }
    assert reported["video"] > 0
    assert response.finish_reason == "stop"
    assert response.provider_name == "dashscope"
    assert response.provider_response_id is not None


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("429", ModelRateLimitError),
        ("500", ModelServerError),
        ("timeout", ModelTimeoutError),
        ("malformed", ModelAPIError),
        ("truncated", UnexpectedModelBehavior),
        ("refusal", ContentFilterError),
    ],
)
def test_each_fault_surfaces_as_its_pydantic_ai_error_after_one_request(
    harness: DashScopeHarness, demo: Demo, fault: Fault, error: type[Exception]
) -> None:
    harness.server.fail_next(fault)
    # Only the timeout case gets the short client limit: the others must not race the fake.
    config: dict[str, Any] = {"timeout_s": 0.5} if fault == "timeout" else {}
    with pytest.raises(error) as raised:
        sufficiency(harness, demo, **config)
    assert len(harness.model_requests()) == 1  # no SDK-level retry
    if fault == "429":
        assert isinstance(raised.value, ModelHTTPError)
        assert raised.value.status_code == 429
        assert raised.value.retry_after == RETRY_AFTER_S
        assert raised.value.provider_error_code == "Throttling.RateQuota"
    if fault == "500":
        assert isinstance(raised.value, ModelHTTPError)
        assert raised.value.status_code == 500
    if fault == "malformed":
        assert "not JSON" in str(raised.value)
    if fault == "refusal":
        assert "DataInspectionFailed" in str(raised.value)


def test_a_truncated_answer_is_a_response_cut_at_the_length_limit(
    harness: DashScopeHarness,
) -> None:
    harness.server.fail_next("truncated")
    model: Model = harness.model(MODEL)
    request = ModelRequest.user_text_prompt("Say something short.")

    async def call() -> ModelResponse:
        return await model.request([request], None, ModelRequestParameters())

    response = anyio.run(call)
    assert response.finish_reason == "length"
    assert response.parts == [TextPart(content=PLAIN_ANSWER[: len(PLAIN_ANSWER) // 2])]


def test_a_plain_text_call_asks_for_no_json_mode(harness: DashScopeHarness) -> None:
    result = Agent(harness.model(MODEL)).run_sync("Say something short.")
    assert result.output == PLAIN_ANSWER
    [request] = harness.model_requests()
    assert "response_format" not in request.json()["parameters"]
    assert harness.output_schema(request) is None


def test_a_wrong_key_is_an_authentication_error(harness: DashScopeHarness) -> None:
    model = harness.model(MODEL, api_key="sk-wrong")
    with pytest.raises(ModelAuthenticationError):
        Agent(model).run_sync("hello")
    [request] = harness.model_requests()
    assert request.headers["Authorization"] == "Bearer sk-wrong"


def test_an_unreachable_endpoint_is_a_connection_error() -> None:
    with dashscope_harness() as gone:
        base_url = f"{gone.server.base_url}/api/v1"
    config = ProviderConfig(
        family="dashscope", model_name=MODEL, base_url=base_url, api_key=API_KEY
    )
    with pytest.raises(ModelConnectionError) as raised:
        Agent(dashscope_model(MODEL, config)).run_sync("hello")
    assert not isinstance(raised.value, ModelTimeoutError)


def test_two_models_with_different_endpoints_share_one_process() -> None:
    with dashscope_harness() as first, dashscope_harness() as second:
        models = [
            dashscope_model(
                MODEL,
                ProviderConfig(
                    family="dashscope",
                    model_name=name,
                    base_url=f"{h.server.base_url}/api/v1",
                    api_key=API_KEY,
                ),
            )
            for h, name in ((first, "qwen3.7-plus"), (second, "qwen3-vl-plus"))
        ]
        for model in models + models[::-1]:
            Agent(model).run_sync("hello")
        assert [r.json()["model"] for r in first.server.seen("POST", GENERATION_PATH)] == [
            "qwen3.7-plus",
            "qwen3.7-plus",
        ]
        assert [r.json()["model"] for r in second.server.seen("POST", GENERATION_PATH)] == [
            "qwen3-vl-plus",
            "qwen3-vl-plus",
        ]


def test_a_short_clip_still_sends_the_minimum_four_frames(
    harness: DashScopeHarness, demo: Demo
) -> None:
    short = demo.clips[0]
    meta = dict(short.vendor_metadata or {})
    clip = BinaryContent(
        data=short.data,
        media_type="video/mp4",
        identifier=short.identifier,
        vendor_metadata={**meta, "end_s": float(meta["start_s"]) + 4.0},
    )
    Agent(harness.model(MODEL)).run_sync(["Describe it.", clip])
    [request] = harness.model_requests()
    [video] = [i for i in request.json()["input"]["messages"][0]["content"] if "video" in i]
    assert video["video"].startswith("oss://")  # a 4-second file of 4 frames
    assert video["fps"] == 1.0
    [[seen]] = harness.fake.received
    assert (seen.frames, seen.duration_s) == (4, 4.0)


# -- DashScope's limit of Base64 images per request -------------------------------------------


def stretched(clip: BinaryContent, seconds: float) -> BinaryContent:
    """``clip`` described as ``seconds`` long, so it asks for that many seconds of frames (the
    frames repeat the clip's own: each is its nearest decoded frame)."""
    meta = dict(clip.vendor_metadata or {})
    return BinaryContent(
        data=clip.data,
        media_type="video/mp4",
        identifier=clip.identifier,
        vendor_metadata={**meta, "end_s": float(meta["start_s"]) + seconds},
    )


def picture() -> BinaryContent:
    """A small JPEG picture, sent as it is (one Base64 image)."""
    buffer = io.BytesIO()
    Image.new("RGB", (64, 36), (200, 40, 40)).save(buffer, format="JPEG")
    return BinaryContent(data=buffer.getvalue(), media_type="image/jpeg")


def send(model: Model, messages: list[ModelMessage]) -> ModelResponse:
    async def call() -> ModelResponse:
        return await model.request(messages, None, ModelRequestParameters())

    return anyio.run(call)


def test_long_clips_go_as_video_files_thinned_to_max_frames_and_reserved_as_sent(
    harness: DashScopeHarness, demo: Demo, tmp_path: Path
) -> None:
    """Two clips that each ask for 300 frames (10 minutes at 0.5 fps; the settings allow 512)
    go as video files of 256 frames each, not held to the 250 Base64 images; the budget
    reserves exactly those frames, and its worst case covers what DashScope bills for them."""
    model_id = "qwen-3.7-plus"
    endpoint = {"family": "dashscope", "model_name": "qwen3.7-plus", "max_frames": 512}
    settings = load_settings(
        tmp_path,
        providers={
            "dashscope": {"base_url": f"{harness.server.base_url}/api/v1"},
            "models": {model_id: endpoint},
        },
    )
    assert settings.providers.models[model_id].max_frames == 512
    clips = [stretched(clip, 600.0) for clip in demo.clips]
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(content=["Describe both.", *clips])])
    ]
    recorder = CallRecorder(
        budget=Budget(None), prices=PriceTable.load(), traffic=traffic_for(settings, live=False)
    )
    context = CallContext(seed_id="s1", role="pair_judge", model=model_id)
    shape = recorder._effective(context, call_shape(model_id, messages, None), call_clips(messages))
    config = provider_config(settings, model_id, env={"DASHSCOPE_API_KEY": API_KEY})
    send(dashscope_model(model_id, config, region=harness.fake.region), messages)  # Beijing
    [request] = harness.model_requests()
    videos = request_videos(request.json())
    assert [len(video["frames"]) for video in videos] == [256, 256]
    assert shape.video_frames == 512
    assert base64_images(request.json()) == 0
    reserved = estimate_input_tokens(shape)
    assert reserved.input_video_tokens >= harness.last_usage()["video"] > 0
    assert reserved.input_tokens >= harness.last_usage()["input_tokens"]


def test_pictures_do_not_thin_clips_sent_as_video_files(
    harness: DashScopeHarness, demo: Demo
) -> None:
    """The 250 Base64 images hold the pictures; the clips, as files, keep their plan."""
    pictures = [picture() for _ in range(200)]
    clips = [stretched(clip, 600.0) for clip in demo.clips]
    Agent(harness.model(MODEL, frame_height=HEIGHT, max_frames=512)).run_sync(
        ["Describe them.", *pictures, *clips]
    )
    [request] = harness.model_requests()
    assert [len(video["frames"]) for video in request_videos(request.json())] == [256, 256]
    assert base64_images(request.json()) == 200


def test_a_request_that_cannot_fit_the_base64_limit_is_refused_before_it_is_sent(
    harness: DashScopeHarness, demo: Demo
) -> None:
    """247 pictures leave three images for a clip whose four frames were fixed: 251."""
    pictures = [picture() for _ in range(247)]
    clip = demo.clips[0]
    start = float((clip.vendor_metadata or {})["start_s"])
    fixed = BinaryContent(
        data=clip.data,
        media_type="video/mp4",
        identifier=clip.identifier,
        vendor_metadata={
            **(clip.vendor_metadata or {}),
            "frame_times": [start + 10.0 * i for i in range(4)],
        },
    )
    with pytest.raises(UserError, match=r"carry 251 base64 images .* at most 250 per request"):
        Agent(harness.model(MODEL)).run_sync(["Describe them.", *pictures, fixed])
    assert harness.model_requests() == []


def test_the_frame_plan_stays_within_max_frames_when_clips_sit_at_their_floor() -> None:
    """One long clip and ten short ones held at four frames each: the long one gives up what
    the floors add, so the plan (the adapter's and the budget's) is still 250."""

    def clip(name: str, seconds: float) -> ClipInfo:
        return ClipInfo(name, "v", 0.0, seconds, 0.5, 360, False, "sha256:v", None)

    clips = [clip("long", 600.0), *(clip(f"short{i}", 4.0) for i in range(10))]
    plan = frame_times(clips, 0.5, MAX_BASE64_IMAGES, 4)
    assert [len(times) for times in plan] == [210] + [4] * 10


def test_the_fake_refuses_more_base64_images_than_dashscope_takes(
    harness: DashScopeHarness,
) -> None:
    """Straight through the SDK (our adapter never sends it): 251 Base64 images is a 400."""
    uri = "data:image/jpeg;base64," + base64.b64encode(picture().data).decode("ascii")

    def call(images: int) -> Any:
        content: list[dict[str, str]] = [{"image": uri}] * images + [{"text": "Describe."}]
        return MultiModalConversation.call(
            model=MODEL,
            api_key=API_KEY,
            base_address=f"{harness.server.base_url}/api/v1",
            messages=[{"role": "user", "content": content}],
        )

    refused = call(MAX_BASE64_IMAGES + 1)
    assert (refused.status_code, refused.code) == (400, "InvalidParameter")
    assert call(MAX_BASE64_IMAGES).status_code == 200


@pytest.mark.parametrize(("fps", "status"), [(0.05, 400), (0.1, 200), (10.0, 200), (12.0, 400)])
def test_the_fake_takes_a_frame_lists_rate_only_in_dashscopes_range(
    harness: DashScopeHarness, fps: float, status: int
) -> None:
    """Straight through the SDK: a frame list declared outside 0.1–10 fps is a 400."""
    uri = "data:image/jpeg;base64," + base64.b64encode(picture().data).decode("ascii")
    # Labelled as the adapter labels a frame list (the fake reads each frame's time from it).
    label = (
        "Video v1 (segment v1#0): 4 frames; in the video's own time they show "
        "00:00, 00:10, 00:20, 00:30."
    )
    reply = MultiModalConversation.call(
        model=MODEL,
        api_key=API_KEY,
        base_address=f"{harness.server.base_url}/api/v1",
        messages=[
            {
                "role": "user",
                "content": [{"text": label}, {"video": [uri] * 4, "fps": fps}, {"text": "Say."}],
            }
        ],
    )
    assert reply.status_code == status


# -- what DashScope bills, and our worst case ---------------------------------------------------


@pytest.mark.parametrize(
    ("height", "width", "model", "billed"),
    [
        (480, 854, "qwen3.7-plus", 15 * 27 + 2),  # 854 px rounds to 27 tokens of 32 px
        (360, 640, "qwen3.7-plus", 11 * 20 + 2),  # 360 px rounds down to 11
        (720, 1280, "qwen3-vl-plus", 22 * 40 + 2),  # 22.5 rounds to even: 22
        (480, 854, "qvq-max", 17 * 30 + 2),  # QVQ: 28-px tokens
        (20, 20, "qwen3.7-plus", 4 + 2),  # scaled up to the 4-token floor
    ],
)
def test_the_fake_bills_an_image_by_the_documented_token_rule(
    height: int, width: int, model: str, billed: int
) -> None:
    assert image_tokens(height, width, model) == billed


def test_the_fake_bills_a_huge_image_at_the_high_resolution_cap() -> None:
    assert image_tokens(8000, 8000, "qwen3.7-plus") <= 16384 + 2


@pytest.mark.parametrize("model", ["qwen3.7-plus", "qvq-max"])
@pytest.mark.parametrize("height", [240, 360, 480, 720])
@pytest.mark.parametrize("aspect", [16 / 9, 4 / 3, 9 / 16, 21 / 9])
def test_our_worst_case_covers_what_dashscope_bills_for_our_frames(
    model: str, height: int, aspect: float
) -> None:
    """Frames of any shape at the heights we send (frame_height scales them down to it), in
    frame lists of any length up to the limit: policies.tokens' worst case is never below the
    bill."""
    width = round(height * aspect)
    for frames in (4, 31, MAX_BASE64_IMAGES):
        shape = CallShape(model=model, video_frames=frames, video_height=height, token_rule="qwen")
        billed = video_tokens([(height, width)] * frames, model)
        assert estimate_input_tokens(shape).input_video_tokens >= billed, (frames, width)


@pytest.mark.parametrize("height", [240, 360, 480, 720])
@pytest.mark.parametrize("aspect", [16 / 9, 4 / 3, 9 / 16, 21 / 9])
def test_our_worst_case_covers_what_dashscope_bills_for_a_picture(
    height: int, aspect: float
) -> None:
    width = round(height * aspect)
    shape = CallShape(model=MODEL, images=[(width, height)], token_rule="qwen")
    assert estimate_input_tokens(shape).input_image_tokens >= image_tokens(height, width, MODEL)


# -- quota, throttling and unknown models ---------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("AllocationQuota.FreeTierOnly", 403, ModelQuotaExceededError),
        ("Arrearage", 400, ModelQuotaExceededError),
        ("Throttling.RateQuota", 429, ModelRateLimitError),
        ("Throttling", 429, ModelRateLimitError),
        # The tokens-a-minute limit (Model Studio "Rate limits"; the dashscope SDK's
        # dashscope/v2/errors.py maps it to rate_limit_exceeded): a wait clears it.
        ("Throttling.AllocationQuota", 429, ModelRateLimitError),
    ],
)
def test_a_used_up_quota_is_a_quota_error_and_throttling_a_rate_limit(
    harness: DashScopeHarness, code: str, status: int, error: type[Exception]
) -> None:
    harness.fake.refuse_next(code)
    with pytest.raises(error) as raised:
        Agent(harness.model(MODEL)).run_sync("hello")
    other = ModelRateLimitError if error is ModelQuotaExceededError else ModelQuotaExceededError
    assert not isinstance(raised.value, other)
    assert isinstance(raised.value, ModelHTTPError)
    assert raised.value.status_code == status
    assert raised.value.provider_error_code == code
    assert len(harness.model_requests()) == 1


def test_an_allocation_quota_429_is_waited_out_and_retried_as_a_rate_limit(
    harness: DashScopeHarness, tmp_path: Path
) -> None:
    """DashScope's 429 ``Throttling.AllocationQuota`` ("Allocated quota exceeded") is its
    tokens-a-minute limit, cleared within a minute, not a spent account: a role call that meets
    it waits as the retry policy says and is sent again, and the answer is recorded, never
    parked. The real SDK reads the service's own error body from the fake."""
    harness.fake.refuse_next("Throttling.AllocationQuota")
    store = open_event_store(tmp_path / "log.db")
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def append(event: Event) -> None:
        store.append("seed-s1", [event])

    recorder = CallRecorder(
        budget=Budget(50_000_000),
        prices=PriceTable.load(),
        traffic=lambda _model: Traffic(retry=RetryPolicy(max_retries=3, backoff_s=0.5)),
        sleep=sleep,
    )
    model = harness.model("qwen-3.7-plus")
    question = ParametricContext(question="Why does bread dough rise when it is left to rest?")

    async def main() -> Any:
        runner = ModelRunner(recorder=recorder, model_for=lambda _model_id: model)
        seed = SeedCall(seed_id="s1", evidence=None, append=append)  # type: ignore[arg-type]
        return await runner.run(
            seed, "parametric_answerer", "qwen-3.7-plus", question, FreeAnswer, phase=1, gate="q"
        )

    result = anyio.run(main)
    events = [stored.event() for stored in store.read_stream("seed-s1")]
    store.close()
    assert isinstance(result, FreeAnswer)
    [retried] = [e for e in events if isinstance(e, CallRetried)]
    assert (retried.kind, retried.status) == ("rate_limit", 429)
    assert "Allocated quota exceeded" in retried.error
    [waited] = waits  # it waited before sending again
    assert waited > 0
    [recorded] = [e for e in events if isinstance(e, CallRecorded)]
    assert recorded.attempts == 2
    assert not [e for e in events if isinstance(e, CallFailed)]
    assert len(harness.model_requests()) == 2


def test_an_unknown_model_id_is_refused_as_a_model_that_is_not_there(
    harness: DashScopeHarness,
) -> None:
    with pytest.raises(ModelNotFoundError) as raised:
        Agent(harness.model("qwen9-imaginary")).run_sync("hello")
    assert isinstance(raised.value, ModelHTTPError)
    assert (raised.value.status_code, raised.value.provider_error_code) == (400, "InvalidParameter")
    assert "qwen9-imaginary" in str(raised.value)
    assert "Model not exist." in str(raised.value)


def test_the_response_records_what_the_request_carried(
    harness: DashScopeHarness, demo: Demo
) -> None:
    """A run's log says what DashScope was sent, not what was configured: thinking is off
    whatever the role asks, and the frames counted are the frames in the request."""
    model = harness.model(MODEL, frame_height=HEIGHT)
    agent = Agent(model, output_type=SufficiencyVerdict, retries=0)
    settings = ModelSettings(max_tokens=777, temperature=0.0, thinking="low")
    result = agent.run_sync(demo.prompt(), model_settings=settings)
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    sent = (response.provider_details or {})["playlisteval_sent"]
    [request] = harness.model_requests()
    body = request.json()
    [videos] = harness.fake.received
    frames = sum(video.frames for video in videos)  # the frames sampled of each video file
    assert sent["media"]["video_files"] == len(videos) == 2
    assert sent["model"] == body["model"] == MODEL
    assert sent["thinking"] is False is body["parameters"]["enable_thinking"]
    assert sent["max_output_tokens"] == body["parameters"]["max_tokens"] == 777
    assert sent["media"]["frames"] == frames > 0
