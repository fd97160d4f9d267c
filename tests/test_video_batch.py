"""Video calls in Gemini batch lines: every clip goes as its Files API upload and no line names a
context cache (a job may run after the cache is gone); the fake's batch runner fails, line by line,
what the service would fail: a cache or an upload that is no longer there."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.batch import BatchRequest
from pydantic_ai.output import OutputObjectDefinition
from pydantic_ai.settings import ModelSettings

from tests.fakes_gemini import PUBLIC_FILES, GeminiHarness, camel_keys, gemini_harness
from tools.contracts.roles import PHASE1_GENERATOR, QA
from tools.index import media
from tools.offline.synthetic import make_demo_playlist
from tools.providers.base import MemoryResourceLedger

MODEL = "gemini-3-flash-preview"
SETTINGS = ModelSettings(
    max_tokens=PHASE1_GENERATOR.max_output_tokens, thinking=PHASE1_GENERATOR.thinking
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("allow_model_requests")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> BinaryContent:
    """One 60-second segment of a synthetic episode, attached as a role call attaches it."""
    root = tmp_path_factory.mktemp("video-batch")
    make_demo_playlist(
        root,
        domains=("cooking",),
        videos_per_domain=1,
        scenes_per_video=4,
        plant_duplicate=False,
        narrate=False,
    )
    video = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))["videos"][0]
    source = root / video["path"]
    exported = media.export_clip(source, root / "clip.mp4", 0.0, 60.0, fps=0.5)
    return BinaryContent(
        data=exported.read_bytes(),
        media_type="video/mp4",
        identifier=f"{video['id']}#0",
        vendor_metadata={
            "fps": 0.5,
            "start_s": 0.0,
            "end_s": 60.0,
            "height": 720,
            "audio": True,
            "source": f"src-{video['id']}",
            "video_id": video["id"],
            "path": str(source),
        },
    )


@pytest.fixture
async def harness() -> AsyncIterator[GeminiHarness]:
    with gemini_harness(MemoryResourceLedger()) as running:
        yield running
        await running.aclose()


def _request(custom_id: str, clip: BinaryContent) -> BatchRequest:
    schema = OutputObjectDefinition(json_schema=QA.model_json_schema(), name="QA")
    return BatchRequest(
        custom_id=custom_id,
        messages=[ModelRequest(parts=[UserPromptPart(["Ask one question of the video.", clip])])],
        model_settings=SETTINGS,
        model_request_parameters=ModelRequestParameters(output_mode="native", output_object=schema),
    )


def _parts(body: str) -> list[dict[str, Any]]:
    line = camel_keys(json.loads(body))
    return [p for c in line["contents"] for p in c["parts"]]


async def test_a_batch_line_names_no_cache_even_where_a_live_call_would_make_one(
    harness: GeminiHarness, clip: BinaryContent
) -> None:
    """With caching on and a cache minimum the clip passes, a live call caches its video; the
    batch line of the same call carries the upload itself and no ``cachedContent``."""
    model = harness.model(MODEL, context_cache=True, cache_min_tokens=1)
    encoded = await model.batch_encode(_request("seed-1", clip))
    line = camel_keys(json.loads(encoded.body))
    assert "cachedContent" not in line
    files = [p["fileData"]["fileUri"] for p in _parts(encoded.body) if "fileData" in p]
    assert len(files) == 1
    assert not [p for p in _parts(encoded.body) if "inlineData" in p]
    assert not harness.server.seen("POST", "/v1beta/cachedContents")


async def test_a_batch_of_video_lines_answers_each_from_its_upload(
    harness: GeminiHarness, clip: BinaryContent
) -> None:
    """Two lines over the same clip share one upload, and the job answers both."""
    model = harness.model(MODEL)
    requests = [_request(f"seed-{i}", clip) for i in (1, 2)]
    encoded = [await model.batch_encode(r) for r in requests]
    assert (
        len({p["fileData"]["fileUri"] for e in encoded for p in _parts(e.body) if "fileData" in p})
        == 1
    )
    batch = await model.batch_create(encoded)
    while batch.status != "ended":
        batch = await model.batch_status(batch)
    results = {r.custom_id: r for r in await model.batch_results(batch)}
    assert {k: r.status for k, r in results.items()} == {
        "seed-1": "succeeded",
        "seed-2": "succeeded",
    }
    response = model.batch_decode(results["seed-1"], requests[0])
    # Billed for the video it read from the upload (Gemini reports it per modality).
    assert response.usage.details.get("video_prompt_tokens", 0) > 0


async def test_a_line_whose_upload_is_gone_fails_alone(
    harness: GeminiHarness, clip: BinaryContent
) -> None:
    """A line naming an upload that was deleted before the job ran fails with the service's
    status; the job ends and reports it per line (the recorder retries such a call live)."""
    model = harness.model(MODEL)
    request = _request("seed-1", clip)
    encoded = await model.batch_encode(request)
    (uri,) = {p["fileData"]["fileUri"] for p in _parts(encoded.body) if "fileData" in p}
    harness.state.files.pop(uri.removeprefix(PUBLIC_FILES))
    batch = await model.batch_create([encoded])
    while batch.status != "ended":
        batch = await model.batch_status(batch)
    (result,) = await model.batch_results(batch)
    assert result.status != "succeeded"
    assert "not found" in (result.body or "")
