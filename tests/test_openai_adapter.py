"""The OpenAI adapters drive the real ``openai`` SDK against fake servers: clips go as labelled
frames (Responses ``input_image`` / Chat ``image_url``), the role's JSON schema goes natively,
usage and every failure come back in pydantic-ai's terms, and each call is one HTTP request."""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.exceptions import (
    ContentFilterError,
    ModelAPIError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelServerError,
    ModelTimeoutError,
    OutputTokenLimitExceeded,
)
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.batch import BatchRequest
from pydantic_ai.output import OutputObjectDefinition
from pydantic_ai.settings import ModelSettings

from agents.batching import Batcher
from agents.prompts import render_prompt
from agents.recorded import call_clips
from policies.tokens import CallShape, estimate_input_tokens, openai_image_tokens
from tests.fakes_openai import (
    CACHE_STEP_TOKENS,
    OPENAI_VISION,
    QUOTA_MESSAGE,
    VLLM_VISION,
    OpenAIHarness,
    chat_cost_usd,
    openai_compatible_harness,
    openai_harness,
    strict_schema_violation,
)
from tests.fakes_providers import RETRY_AFTER_S, Fault
from tools.contracts.roles import (
    QA,
    ROLES,
    AnyContext,
    ChunkText,
    FreeAnswer,
    LabelledAnswer,
    MatchContext,
    ParametricContext,
    Phase1Context,
    RankingContext,
    SegmentEvidence,
    SufficiencyContext,
    SufficiencyVerdict,
    cite,
    format_timestamp,
)
from tools.index import media
from tools.offline.synthetic import make_demo_playlist
from tools.offline.vision import COLOURS, decode_clip, describe_frames
from tools.providers.base import clip_info, frame_times

# These tests drive the adapters against local fake servers (see conftest).
pytestmark = pytest.mark.usefixtures("allow_model_requests")

CLIP_FPS = 1.0
FRAME_FPS = 0.5
SETTINGS = ModelSettings(max_tokens=4096, temperature=0.0)
LABEL_RE = re.compile(r"^\((?P<video>\S+) @ (?P<min>\d+):(?P<sec>\d{2})\)$")


class Demo:
    """Two short synthetic episodes as segments with their exported clips; the first segment
    starts 6 s into its video, so clip time and video time differ."""

    def __init__(self, root: Path, width: int = 320, height: int = 240) -> None:
        make_demo_playlist(
            root,
            domains=("cooking",),
            videos_per_domain=2,
            scenes_per_video=4,
            scene_seconds=6.0,
            plant_duplicate=False,
            narrate=False,
            width=width,
            height=height,
        )
        truth = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))
        segments: list[SegmentEvidence] = []
        self.clips: list[BinaryContent] = []
        for index, video in enumerate(truth["videos"]):
            start, end = (6.0 if index == 0 else 0.0), float(video["duration"])
            segment = SegmentEvidence(
                segment_id=f"{video['id']}#{index}",
                video_id=video["id"],
                title=video["title"],
                start_s=start,
                end_s=end,
                chunks=(ChunkText(start_s=start, end_s=end, text=f"narration of {video['id']}"),),
            )
            clip = media.export_clip(
                root / video["path"], root / f"{video['id']}.mp4", start, end, fps=CLIP_FPS
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
                        "height": height,
                        "audio": False,
                        "source": f"sha256:{video['id']}",
                        "video_id": video["id"],
                        "path": str(root / video["path"]),
                    },
                )
            )
            segments.append(segment)
        self.segments = (segments[0], segments[1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("openai-demo"))


@pytest.fixture(scope="module")
def demo_720p(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The episodes at 1280x720 (16:9, the shape the reservation assumes)."""
    return Demo(tmp_path_factory.mktemp("openai-demo-720p"), 1280, 720)


def long_context_harness(**kw: Any) -> Any:
    """A vLLM-like fake served with a context far longer than the demo's requests take: the
    tests that call the adapter directly (no runner fits their frames to a window) and are
    about something else."""
    return openai_compatible_harness(max_model_len=1_048_576, **kw)


@pytest.fixture(params=["responses", "chat"])
def harness(request: pytest.FixtureRequest) -> Iterator[OpenAIHarness]:
    """Each fake in turn: OpenAI's Responses API, and an OpenAI-compatible Chat server."""
    start = openai_harness if request.param == "responses" else long_context_harness
    with start() as running:
        yield running


def phase1(demo: Demo) -> Phase1Context:
    return Phase1Context(segments=demo.segments)


def sufficiency(demo: Demo) -> SufficiencyContext:
    return SufficiencyContext(
        question="What colours appear in the two episodes?",
        gold_answer="The first episode shows shapes on a coloured background.",
        segments=demo.segments,
    )


def parametric() -> ParametricContext:
    return ParametricContext(question="Why does bread rise?")


async def ask(
    model: Any,
    context: AnyContext,
    output_type: type[Any],
    clips: list[BinaryContent] | None = None,
) -> Any:
    """One role call as ``agents.workers.ModelRunner`` makes it: a real Agent, retries off."""
    agent = Agent(None, output_type=output_type, retries=0)
    prompt: list[Any] = [render_prompt(context), *(clips or [])]
    return await agent.run(prompt, model=model, model_settings=SETTINGS)


def call(
    model: Any,
    context: AnyContext,
    output_type: type[Any],
    clips: list[BinaryContent] | None = None,
) -> Any:
    """:func:`ask` in its own event loop (a model's HTTP client lives in one loop)."""

    async def run() -> Any:
        return await ask(model, context, output_type, clips)

    return anyio.run(run)


def last_response(result: Any) -> ModelResponse:
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    return response


# -- request shape ------------------------------------------------------------------------------


def test_clips_go_as_labelled_frames_in_the_source_timeline(
    harness: OpenAIHarness, demo: Demo
) -> None:
    """Each clip becomes its label, then per frame ``(video-id @ MM:SS)`` and a JPEG, timed in the
    video (the first segment's frames start at 00:06, not 00:00); the transcript is in the text."""
    result = call(harness.model(harness.default_model), phase1(demo), QA, demo.clips)
    assert isinstance(result.output, QA)
    (request,) = harness.model_requests()
    items = harness.items(request)
    labels: list[tuple[str, int]] = []
    for (kind, value), (next_kind, next_value) in itertools.pairwise(items):
        match = LABEL_RE.match(value) if kind == "text" else None
        if match:
            assert next_kind == "image"
            assert next_value.startswith("data:image/jpeg;base64,")
            labels.append((match["video"], int(match["min"]) * 60 + int(match["sec"])))
    first, second = demo.segments
    expected = [
        (first.video_id, int(first.start_s + i / FRAME_FPS))
        for i in range(9)  # 18 s at 0.5 fps
    ] + [(second.video_id, int(i / FRAME_FPS)) for i in range(12)]  # 24 s at 0.5 fps
    assert labels == expected
    assert harness.media(request) == [{"kind": "image"}] * len(expected)
    text = harness.prompt_text(request)
    assert f"Video {first.video_id} (segment {first.segment_id}), shown from 00:06–00:24" in text
    assert "narration of cooking-01" in text
    assert "narration of cooking-02" in text


def test_frames_are_the_clip_pictures_at_the_configured_height(
    harness: OpenAIHarness, demo: Demo
) -> None:
    """Frames are decodable JPEGs no taller than ``frame_height``."""
    call(
        harness.model(harness.default_model, frame_height=120),
        sufficiency(demo),
        SufficiencyVerdict,
        demo.clips,
    )
    (request,) = harness.model_requests()
    images = [v for kind, v in harness.items(request) if kind == "image"]
    assert images
    for data_url in images:
        picture = Image.open(io.BytesIO(base64.b64decode(data_url.partition("base64,")[2])))
        assert picture.format == "JPEG"
        assert picture.height == 120


def test_max_frames_thins_the_frames(harness: OpenAIHarness, demo: Demo) -> None:
    """No more than ``max_frames`` frames go in one request."""
    call(
        harness.model(harness.default_model, max_frames=6),
        sufficiency(demo),
        SufficiencyVerdict,
        demo.clips,
    )
    (request,) = harness.model_requests()
    assert 2 <= len(harness.media(request)) <= 6


def test_the_role_schema_is_sent_natively_and_the_answer_parsed(
    harness: OpenAIHarness, demo: Demo
) -> None:
    """The output type's JSON schema goes as ``json_schema``; the answer validates into it."""
    result = call(
        harness.model(harness.default_model), sufficiency(demo), SufficiencyVerdict, demo.clips
    )
    assert isinstance(result.output, SufficiencyVerdict)
    (request,) = harness.model_requests()
    schema = harness.output_schema(request)
    assert schema is not None
    assert set(schema["properties"]) == set(SufficiencyVerdict.model_json_schema()["properties"])
    body = request.json()
    if harness.api == "responses":
        assert body["text"]["format"]["type"] == "json_schema"
        assert body["max_output_tokens"] == SETTINGS["max_tokens"]
    else:
        assert body["response_format"]["type"] == "json_schema"
        # Compatible servers all take ``max_tokens``; vLLM's guided decoding hides the schema
        # from the model, so it is in the instructions too.
        assert body["max_tokens"] == SETTINGS["max_tokens"]
        assert '"answerable"' in harness.prompt_text(request).split("<context>")[0]


def test_text_only_roles_stay_text_only(harness: OpenAIHarness) -> None:
    """A role with no clips sends no images and parses its answer."""
    result = call(harness.model(harness.default_model), parametric(), FreeAnswer)
    assert isinstance(result.output, FreeAnswer)
    (request,) = harness.model_requests()
    assert harness.media(request) == []
    assert "Why does bread rise?" in harness.prompt_text(request)


def test_the_provider_model_name_is_sent_and_the_key_is_used(harness: OpenAIHarness) -> None:
    """``config.model_name`` is what goes on the wire; a keyless compatible server gets EMPTY."""
    wire = "gpt-5.4-mini" if harness.api == "responses" else "OpenGVLab/InternVL3_5-8B"
    call(harness.model("our-judge", model_name=wire), parametric(), FreeAnswer)
    (request,) = harness.model_requests()
    assert request.json()["model"] == wire
    auth = {k.lower(): v for k, v in request.headers.items()}["authorization"]
    assert auth == ("Bearer sk-fake-key" if harness.api == "responses" else "Bearer EMPTY")


# -- strict structured output ---------------------------------------------------------------------


@pytest.fixture(params=["responses", "chat"])
def strict_harness(request: pytest.FixtureRequest) -> Iterator[OpenAIHarness]:
    """Each fake refusing a strict schema outside OpenAI's subset, as OpenAI does on both APIs
    (a vLLM server would take it and ignore ``strict``)."""
    start = openai_harness if request.param == "responses" else openai_compatible_harness
    with start(checks_strict_schemas=True) as running:
        yield running


def role_schema_request(output_type: type[Any]) -> ModelRequestParameters:
    """The request parameters an Agent with ``output_type`` hands the model (native output)."""
    return ModelRequestParameters(
        output_mode="native",
        output_object=OutputObjectDefinition(
            json_schema=output_type.model_json_schema(), name=output_type.__name__
        ),
        allow_text_output=False,
    )


def wire_format(harness: OpenAIHarness, body: dict[str, Any]) -> dict[str, Any]:
    """The ``json_schema`` object as sent: ``name``, ``schema``, ``strict``."""
    if harness.api == "responses":
        return dict(body["text"]["format"])
    return dict(body["response_format"]["json_schema"])


ROLE_OUTPUTS = sorted({spec.output for spec in ROLES.values()}, key=lambda t: t.__name__)


@pytest.mark.parametrize("output_type", ROLE_OUTPUTS, ids=lambda t: t.__name__)
def test_every_role_schema_is_sent_strict_in_openais_subset_and_accepted(
    strict_harness: OpenAIHarness, output_type: type[Any]
) -> None:
    """Defaulted fields included (QA, SufficiencyVerdict, Ranking, VerificationMeta): ``strict:
    true``, every property required, no additional properties, no ``default``."""
    model = strict_harness.model(strict_harness.default_model)
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Answer.")])]

    async def send() -> ModelResponse:
        return await model.request(messages, SETTINGS, role_schema_request(output_type))

    anyio.run(send)  # the fake answered 200: it accepted the schema
    (request,) = strict_harness.model_requests()
    sent = wire_format(strict_harness, request.json())
    assert sent["strict"] is True
    schema = sent["schema"]
    assert strict_schema_violation(schema) is None
    assert schema["additionalProperties"] is False
    assert schema["required"] == list(output_type.model_fields)
    assert '"default"' not in json.dumps(schema)


@pytest.mark.parametrize(
    ("role", "context"),
    [
        (
            "textual_ranker",
            RankingContext(
                role="textual_ranker",
                question="Which is best?",
                answers=(
                    LabelledAnswer(label="A", text="First."),
                    LabelledAnswer(label="B", text="Second."),
                ),
            ),
        ),
        (
            "transcript_matcher",
            MatchContext(
                role="transcript_matcher", question="Q?", gold_answer="A.", candidate="A."
            ),
        ),
    ],
    ids=["Ranking", "MatchVerdict"],
)
def test_a_strict_answer_with_every_field_validates_into_the_role_output(
    strict_harness: OpenAIHarness, role: str, context: AnyContext
) -> None:
    """A strict answer carries defaulted fields too (``Ranking.reason``); it still parses."""
    output_type = ROLES[role].output
    result = call(strict_harness.model(strict_harness.default_model), context, output_type)
    assert isinstance(result.output, output_type)
    sent = json.loads(last_response(result).text or "{}")
    assert set(sent) == set(output_type.model_fields)


def loose_schemas() -> list[tuple[str, dict[str, Any], str]]:
    """Schemas OpenAI refuses as strict, each with the words of its refusal."""
    qa = QA.model_json_schema()  # defaulted ``verification``: not required, has a default
    closed = FreeAnswer.model_json_schema()
    return [
        (
            "pydantic's own schema of QA",
            qa,
            "In context=(), 'required' is required to be supplied and to be an array "
            "including every key in properties. Missing 'verification'.",
        ),
        (
            "an open object",
            {**closed, "additionalProperties": True},
            "In context=(), 'additionalProperties' is required to be supplied and to be false.",
        ),
        (
            "a default",
            {**closed, "properties": {"answer": {"type": "string", "default": ""}}},
            "In context=('properties', 'answer'), 'default' is not permitted.",
        ),
        (
            "allOf",
            {**closed, "properties": {"answer": {"allOf": [{"type": "string"}]}}},
            "In context=('properties', 'answer'), 'allOf' is not permitted.",
        ),
        (
            "a root anyOf",
            {"anyOf": [closed]},
            "schema must be a JSON Schema of 'type: \"object\"'",
        ),
    ]


@pytest.mark.parametrize(
    ("schema", "words"),
    [(schema, words) for _, schema, words in loose_schemas()],
    ids=[name for name, _, _ in loose_schemas()],
)
def test_a_strict_schema_outside_openais_subset_is_refused_with_its_400(
    strict_harness: OpenAIHarness, schema: dict[str, Any], words: str
) -> None:
    """Sent by the SDK as it is, a strict schema OpenAI cannot enforce is a 400
    ``invalid_json_schema`` naming the schema and the rule."""
    fmt = {"name": "Answer", "schema": schema, "strict": True}
    model = strict_harness.config(strict_harness.default_model).model_name

    async def send() -> Any:
        # Closed on the loop that opened it (a client left to the collector closes itself on
        # whichever loop runs then, and fails there).
        async with openai.AsyncOpenAI(
            api_key="sk-fake-key", base_url=f"{strict_harness.server.base_url}/v1", max_retries=0
        ) as client:
            if strict_harness.api == "responses":
                return await client.responses.create(
                    model=model, input="Hi.", text={"format": {"type": "json_schema", **fmt}}
                )
            return await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Hi."}],
                response_format={"type": "json_schema", "json_schema": fmt},
            )

    with pytest.raises(openai.BadRequestError) as raised:
        anyio.run(send)
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["code"] == "invalid_json_schema"
    assert error["type"] == "invalid_request_error"
    assert error["param"] == (
        "text.format.schema" if strict_harness.api == "responses" else "response_format"
    )
    assert error["message"].startswith("Invalid schema for response_format 'Answer': ")
    assert words in error["message"]


# -- usage --------------------------------------------------------------------------------------


def test_usage_is_what_the_provider_reported_cached_input_included(
    harness: OpenAIHarness, demo: Demo
) -> None:
    """Input (frames billed by the tile rule), output, and cached input on a repeated prompt."""
    model = harness.model(harness.default_model)
    reports: list[dict[str, int]] = []

    async def twice() -> list[ModelResponse]:
        responses: list[ModelResponse] = []
        for _ in range(2):
            result = await ask(model, sufficiency(demo), SufficiencyVerdict, demo.clips)
            responses.append(last_response(result))
            reports.append(harness.last_usage())
        return responses

    first, second = anyio.run(twice)
    reported = reports[0]
    assert reported["image"] > 0
    assert reported["cached_tokens"] == 0
    assert first.usage.input_tokens == reported["input_tokens"]
    assert first.usage.output_tokens == reported["output_tokens"]
    assert first.usage.cache_read_tokens == 0

    reported = reports[1]
    assert reported["cached_tokens"] > 0
    assert reported["cached_tokens"] % CACHE_STEP_TOKENS == 0
    assert second.usage.cache_read_tokens == reported["cached_tokens"]
    assert second.usage.input_tokens == reported["input_tokens"]
    # The API does not split images out of the input count, so neither do we.
    assert "image_prompt_tokens" not in second.usage.details


OUR_FRAME_SIZES = [(640, 360), (854, 480), (1280, 720)]  # frame_height 360 / 480 / 720, 16:9


@pytest.mark.parametrize("model", ["gpt-5.4", "gpt-5.4-mini"])
@pytest.mark.parametrize("size", OUR_FRAME_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_an_image_is_reserved_at_least_what_openai_bills_for_it(
    model: str, size: tuple[int, int]
) -> None:
    """The reservation's count (``policies.tokens``) against the fake's own transcription of
    the guide's rule, for every detail we could be billed at: we send ``auto``."""
    reserved = openai_image_tokens(*size, model=model)
    assert reserved >= OPENAI_VISION[model].tokens(*size, "auto")
    assert reserved >= OPENAI_VISION[model].tokens(*size, "high")


@pytest.mark.parametrize(
    ("model", "rule", "start"),
    [
        ("gpt-5.4", "openai", openai_harness),
        ("gpt-5.4-mini", "openai", openai_harness),
        # InternVL cuts each picture into 448-px tiles: the qwen rule's worst case for an
        # internvl id counts every tile it may cut.
        ("internvl3.5-8b", "qwen", long_context_harness),
    ],
)
@pytest.mark.parametrize("frame_height", [360, 480, 720])
def test_a_calls_frames_are_reserved_at_least_what_the_fake_bills(
    model: str, rule: str, start: Any, frame_height: int, demo_720p: Demo
) -> None:
    """Our defaults' frames of 720p clips, sent by the adapter: the fake bills their images by
    the model's rule (OpenAI's guide, or the vLLM model's processor), and the worst case of the
    call's shape holds at least as many tokens."""
    with start() as harness:
        call(
            harness.model(model, frame_height=frame_height),
            sufficiency(demo_720p),
            SufficiencyVerdict,
            demo_720p.clips,
        )
        (request,) = harness.model_requests()
        billed = harness.last_usage()["image"]
    frames = len(harness.media(request))
    assert frames >= 2
    shape = CallShape(model, video_frames=frames, video_height=frame_height, token_rule=rule)
    assert billed > 0
    assert estimate_input_tokens(shape).input_video_tokens >= billed


def test_a_reported_cost_lands_in_provider_details() -> None:
    """An OpenRouter-style ``usage.cost`` becomes ``provider_details['cost_usd']``."""
    with openai_compatible_harness(report_cost=True) as harness:
        response = last_response(
            call(harness.model(harness.default_model), parametric(), FreeAnswer)
        )
        assert response.provider_details is not None
        assert response.provider_details["cost_usd"] == pytest.approx(
            chat_cost_usd(harness.last_usage())
        )
    with openai_compatible_harness() as harness:
        response = last_response(
            call(harness.model(harness.default_model), parametric(), FreeAnswer)
        )
        assert "cost_usd" not in (response.provider_details or {})


# -- faults -------------------------------------------------------------------------------------


FAULT_ERRORS: list[tuple[Fault, type[Exception]]] = [
    ("429", ModelRateLimitError),
    ("500", ModelServerError),
    ("timeout", ModelTimeoutError),
    ("malformed", ModelAPIError),
    ("truncated", OutputTokenLimitExceeded),
    ("refusal", ContentFilterError),
]


@pytest.mark.parametrize(("fault", "error"), FAULT_ERRORS, ids=[f for f, _ in FAULT_ERRORS])
def test_each_fault_surfaces_as_pydantic_ai_error_after_one_request(
    harness: OpenAIHarness, fault: Fault, error: type[Exception]
) -> None:
    """Every failure is pydantic-ai's categorised exception, and the SDK never retries."""
    harness.server.fail_next(fault)
    with pytest.raises(error) as raised:
        call(harness.model(harness.default_model, timeout_s=0.5), parametric(), FreeAnswer)
    assert len(harness.model_requests()) == 1
    if fault == "429":
        assert isinstance(raised.value, ModelAPIError)
        assert raised.value.retry_after == RETRY_AFTER_S


def test_a_request_the_server_rejects_is_a_rejected_request(harness: OpenAIHarness) -> None:
    """A 400 (here: a video role whose frames are missing) is ModelRequestRejectedError."""
    with pytest.raises(ModelRequestRejectedError):
        call(harness.model(harness.default_model), sufficiency_without_frames(), SufficiencyVerdict)
    assert len(harness.model_requests()) == 1


def test_an_exhausted_quota_is_a_quota_error_not_a_rate_limit() -> None:
    """OpenAI's 429 ``insufficient_quota`` (no Retry-After: waiting will not help) surfaces as
    ModelQuotaExceededError, after one request."""
    with openai_harness(quota_exhausted=True) as harness:
        with pytest.raises(ModelQuotaExceededError) as raised:
            call(harness.model(harness.default_model), parametric(), FreeAnswer)
        assert not isinstance(raised.value, ModelRateLimitError)
        assert len(harness.model_requests()) == 1
    assert isinstance(raised.value, ModelHTTPError)
    assert raised.value.status_code == 429
    assert raised.value.body == {
        "message": QUOTA_MESSAGE,
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }


def test_a_model_id_the_server_does_not_serve_is_its_404(harness: OpenAIHarness) -> None:
    """OpenAI's ``model_not_found``, or vLLM's NotFoundError naming the model, each as
    ModelNotFoundError; the ids our defaults send are served."""
    with pytest.raises(ModelNotFoundError) as raised:
        call(harness.model("gpt-9-preview"), parametric(), FreeAnswer)
    error = raised.value
    assert isinstance(error, ModelHTTPError)
    assert error.status_code == 404
    if harness.api == "responses":
        assert error.body == {
            "message": "The model `gpt-9-preview` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
        defaults = ("gpt-5.4", "gpt-5.4-mini")
    else:
        assert error.body == {
            "message": "The model `gpt-9-preview` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
        defaults = ("qwen3-vl-30b-a3b", "internvl3.5-8b")
    served = harness.fake.served_models
    assert all(harness.config(model_id).model_name in served for model_id in defaults)


def sufficiency_without_frames() -> SufficiencyContext:
    segment = SegmentEvidence(segment_id="v#0", video_id="v", start_s=0.0, end_s=10.0, chunks=())
    return SufficiencyContext(
        question="Q?",
        gold_answer="A.",
        segments=(segment, segment.model_copy(update={"segment_id": "v#1"})),
    )


# -- batch --------------------------------------------------------------------------------------


def test_a_batch_round_trip_sends_frames_and_decodes_the_answer(demo: Demo) -> None:
    """batch_encode (frames in the line) → create → status until ended → results → decode."""
    with openai_harness() as harness:
        model: Model = harness.model(harness.default_model)
        schema = SufficiencyVerdict.model_json_schema()
        request = BatchRequest(
            custom_id="seed-1",
            messages=[
                ModelRequest(
                    parts=[UserPromptPart([render_prompt(sufficiency(demo)), *demo.clips])]
                )
            ],
            model_settings=SETTINGS,
            model_request_parameters=ModelRequestParameters(
                output_mode="native",
                output_object=OutputObjectDefinition(json_schema=schema, name="SufficiencyVerdict"),
                allow_text_output=False,
            ),
        )

        async def round_trip() -> ModelResponse:
            encoded = await model.batch_encode(request)
            line = json.loads(encoded.body)
            assert any(part["type"] == "input_image" for part in line["input"][0]["content"]), (
                "the batch line carries the frames"
            )
            assert line["text"]["format"]["type"] == "json_schema"
            batch = await model.batch_create([encoded])
            polls = 0
            while batch.status != "ended":
                batch = await model.batch_status(batch)
                polls += 1
            assert polls >= 2
            (result,) = await model.batch_results(batch)
            assert result.custom_id == "seed-1"
            assert result.status == "succeeded"
            return model.batch_decode(result, request)

        response = anyio.run(round_trip)
        verdict = SufficiencyVerdict.model_validate_json(response.text or "")
        assert isinstance(verdict, SufficiencyVerdict)
        assert response.usage.input_tokens == harness.last_usage()["input_tokens"]
        assert harness.model_requests() == []  # nothing went to /v1/responses directly
        assert harness.server.seen("POST", "/v1/files")
        assert harness.server.seen("POST", "/v1/batches")


def text_batch_request(custom_id: str, context: AnyContext, output_type: type[Any]) -> BatchRequest:
    """A role call as the recorder batches it: its prompt alone, the role's schema native."""
    return BatchRequest(
        custom_id=custom_id,
        messages=[ModelRequest(parts=[UserPromptPart([render_prompt(context)])])],
        model_settings=SETTINGS,
        model_request_parameters=role_schema_request(output_type),
    )


def test_a_failed_batch_request_is_read_from_the_error_file(demo: Demo) -> None:
    """The Batch API puts a failed request in the ``error_file_id`` file, not the output file;
    our batcher reads both: the good answer decodes, the failure is its own error."""
    good = text_batch_request("good", parametric(), FreeAnswer)
    bad = text_batch_request("bad", sufficiency_without_frames(), SufficiencyVerdict)
    with openai_harness() as harness:
        model: Model = harness.model(harness.default_model)
        # Every wait of the batcher (its window, its polls) lasts until the other call is
        # blocked too: both join one job, and nothing waits on the clock.
        batcher = Batcher(sleep=lambda _seconds: anyio.wait_all_tasks_blocked())
        outcomes: dict[str, ModelResponse | BaseException] = {}

        async def ask_batched(request: BatchRequest) -> None:
            async def submitted(_batch: Any) -> None:
                pass

            try:
                outcomes[request.custom_id] = await batcher.call(model, request, submitted)
            except ModelAPIError as exc:
                outcomes[request.custom_id] = exc

        async def both() -> None:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(ask_batched, good)
                tasks.start_soon(ask_batched, bad)

        anyio.run(both)
        (batch,) = harness.fake.batches.values()

    assert [line["custom_id"] for line in harness.fake.file_lines(batch["output_file_id"])] == [
        "good"
    ]
    (failed,) = harness.fake.file_lines(batch["error_file_id"])
    assert failed["custom_id"] == "bad"
    assert failed["response"]["status_code"] == 400
    assert batch["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
    answer = outcomes["good"]
    assert isinstance(answer, ModelResponse)
    assert FreeAnswer.model_validate_json(answer.text or "").answer
    error = outcomes["bad"]
    assert isinstance(error, ModelAPIError)
    assert "'bad' errored" in str(error)
    assert failed["response"]["body"]["error"]["message"][:40] in str(error)


# -- vLLM: video for the Qwen-VL judges -----------------------------------------------------------

QWEN_VL = "qwen3-vl-30b-a3b"  # served as Qwen/Qwen3-VL-30B-A3B-Instruct


def test_qwen_vl_judges_get_each_clip_as_its_label_then_one_video(demo: Demo) -> None:
    """No frames as pictures: per clip its label (where its 00:00 is in the video), then one
    ``video_url`` mp4 of the planned frames at the planned rate; the answer parses."""
    with openai_compatible_harness() as harness:
        result = call(harness.model(QWEN_VL), sufficiency(demo), SufficiencyVerdict, demo.clips)
        (request,) = harness.model_requests()
        media_sent = harness.media(request)
        items = harness.items(request)
    assert isinstance(result.output, SufficiencyVerdict)
    parts = [p for m in request.json()["messages"] for p in m["content"] if isinstance(p, dict)]
    videos = [p for p in parts if p["type"] == "video_url"]
    assert len(videos) == 2
    assert all(v["video_url"]["url"].startswith("data:video/mp4;base64,") for v in videos)
    assert not [p for p in parts if p["type"] == "image_url"]
    for segment in demo.segments:
        opening = f"Video {segment.video_id} (segment {segment.segment_id}), "
        label = next(i for i, (_, text) in enumerate(items) if text.startswith(opening))
        assert items[label + 1][0] == "video"
        assert f"this clip's 00:00 is {format_timestamp(segment.start_s)}" in items[label][1]
    plan = frame_times([c for c in map(clip_info, demo.clips) if c], FRAME_FPS, 256)
    assert [m["frames"] for m in media_sent] == [len(times) for times in plan] == [9, 12]
    assert [m["kind"] for m in media_sent] == ["video", "video"]
    assert all(m["fps"] == FRAME_FPS for m in media_sent)
    assert [m["start_s"] for m in media_sent] == [s.start_s for s in demo.segments]
    assert all(m["size"][1] == 240 for m in media_sent)  # frame_height 720: never upscaled


def test_a_video_verdict_is_judged_against_the_frames_of_the_videos(demo: Demo) -> None:
    """The fake reads each video's frames as vLLM does, in the source timeline: a claim of a
    colour the footage shows stands, one of a colour it never shows does not."""
    segment, clip = demo.segments[0], demo.clips[0]
    facts = describe_frames(decode_clip(clip.data, FRAME_FPS), segment.start_s)
    seen = sorted({f.colour for f in facts if segment.start_s <= f.t_s < segment.end_s})
    absent = next(c for c in COLOURS if c not in seen)
    span = cite(segment.video_id, segment.start_s, segment.end_s)
    shown, unseen = f"Something {seen[0]} is on screen {span}.", f"A {absent} glow {span}."
    context = SufficiencyContext(
        question="What colours are on screen?",
        gold_answer=f"{shown} {unseen}",
        segments=demo.segments,
    )
    with openai_compatible_harness() as harness:
        verdict = call(harness.model(QWEN_VL), context, SufficiencyVerdict, demo.clips).output
    assert verdict.answerable
    assert verdict.unsupported_claims == (unseen,)


@pytest.mark.parametrize("max_frames", [256, 6])
def test_a_videos_frames_are_the_frames_the_budget_reserves(demo: Demo, max_frames: int) -> None:
    """The videos carry exactly the frame plan the recorder reserves for (each clip at its
    rate, thinned to ``max_frames``), and the Qwen worst case holds what vLLM counts."""
    with openai_compatible_harness() as harness:
        model = harness.model(QWEN_VL, max_frames=max_frames)
        result = call(model, sufficiency(demo), SufficiencyVerdict, demo.clips)
        (request,) = harness.model_requests()
        sent = sum(m["frames"] for m in harness.media(request))
        billed = harness.last_usage()["video"]
    request_messages = result.all_messages()[:1]
    plan = frame_times(call_clips(request_messages), FRAME_FPS, max_frames)
    assert sent == sum(len(times) for times in plan) <= max_frames
    shape = CallShape(QWEN_VL, video_frames=sent, video_height=240, token_rule="qwen")
    assert 0 < billed <= estimate_input_tokens(shape).input_video_tokens


def test_vllm_reads_every_frame_of_each_video_part_whatever_its_default(demo: Demo) -> None:
    """A vLLM server reads ``num_frames`` of a video (32 by default, 4 here when launched with
    ``--media-io-kwargs '{"video": {"num_frames": 4}}'``); each request says to read every frame
    (``media_io_kwargs``), so the model sees exactly the frames planned — what the prompt's rate
    and the reservation count — and the record says what was sent."""
    server_num_frames = 4  # the demo's short clips: 32, the default, would not thin them
    with long_context_harness(video_num_frames=server_num_frames) as harness:
        response = last_response(
            call(harness.model(QWEN_VL), sufficiency(demo), SufficiencyVerdict, demo.clips)
        )
        (request,) = harness.model_requests()
        sent = [m["frames"] for m in harness.media(request)]
        (read,) = harness.fake.videos_read
        billed = harness.last_usage()["video"]
    assert request.json()["media_io_kwargs"] == {"video": {"num_frames": -1}}
    assert read == sent
    assert min(sent) > server_num_frames  # the server's own setting would have thinned them
    vision = VLLM_VISION["Qwen/Qwen3-VL-30B-A3B-Instruct"]
    assert billed == sum(vision.video_tokens(n, 320, 240) for n in sent)
    shape = CallShape(QWEN_VL, video_frames=sum(sent), video_height=240, token_rule="qwen")
    assert billed <= estimate_input_tokens(shape).input_video_tokens
    details = response.provider_details or {}
    assert details["playlisteval_sent"]["media_io_kwargs"] == {"video": {"num_frames": -1}}


@pytest.mark.parametrize(
    ("model_id", "limit", "words"),
    [
        ("internvl3.5-8b", {"image": 4}, "At most 4 image(s) may be provided in one prompt."),
        (QWEN_VL, {"video": 1}, "At most 1 video(s) may be provided in one prompt."),
    ],
)
def test_more_media_than_the_servers_limit_mm_per_prompt_is_vllms_400(
    demo: Demo, model_id: str, limit: dict[str, int], words: str
) -> None:
    """``--limit-mm-per-prompt`` caps each modality per prompt (999 unless set): past it, vLLM's
    400 BadRequestError, which pydantic-ai calls a rejected request."""
    with openai_compatible_harness(limit_mm_per_prompt=limit) as harness:
        with pytest.raises(ModelRequestRejectedError) as raised:
            call(harness.model(model_id), sufficiency(demo), SufficiencyVerdict, demo.clips)
        assert len(harness.model_requests()) == 1
    error = raised.value
    assert isinstance(error, ModelHTTPError)
    assert error.body == {"message": words, "type": "BadRequestError", "param": None, "code": 400}


def test_a_video_for_a_model_served_without_video_is_vllms_400(demo: Demo) -> None:
    """A model vLLM serves without video support allows 0 videos a prompt."""
    with openai_compatible_harness() as harness:
        url = "data:video/mp4;base64," + base64.b64encode(demo.clips[0].data).decode()

        async def send() -> Any:
            async with openai.AsyncOpenAI(
                api_key="EMPTY", base_url=f"{harness.server.base_url}/v1", max_retries=0
            ) as client:
                return await client.chat.completions.create(
                    model="OpenGVLab/InternVL3_5-8B",
                    messages=[
                        {
                            "role": "user",
                            "content": [{"type": "video_url", "video_url": {"url": url}}],
                        }
                    ],
                )

        with pytest.raises(openai.BadRequestError) as raised:
            anyio.run(send)
    assert raised.value.body == {
        "message": "At most 0 video(s) may be provided in one prompt.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


def test_a_reasoning_model_asked_to_think_is_sent_no_temperature_and_the_log_says_so(
    demo: Demo,
) -> None:
    """gpt-5.4 thinking at the role's level takes no sampling parameters: the adapter drops
    the temperature the role asked for and records what it sent, frames counted."""
    with openai_harness() as harness:
        model = harness.model(harness.default_model)
        agent = Agent(None, output_type=QA, retries=0)
        prompt: list[Any] = [render_prompt(phase1(demo)), *demo.clips]
        settings = ModelSettings(max_tokens=4096, temperature=0.0, thinking="low")
        result = anyio.run(lambda: agent.run(prompt, model=model, model_settings=settings))
        (request,) = harness.model_requests()
        body = request.json()
        media = harness.media(request)
    assert "temperature" not in body
    assert body["reasoning"]["effort"] == "low"
    sent = (last_response(result).provider_details or {})["playlisteval_sent"]
    assert sent["temperature"] is None
    assert sent["thinking"] == "low"
    assert sent["media"]["images"] == len(media) > 0
