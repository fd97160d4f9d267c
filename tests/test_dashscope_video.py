"""DashScope sees a clip as a video file at the rate the frame plan gives: each clip whose frames
the caller did not fix is encoded from its planned frames, uploaded through the SDK's own
temporary-storage upload (policy, form POST, ``oss://``) to the fake, and declared at the file's
own rate, so the fake samples the frames the budget reserved for — 0.5 fps over two 20-minute
segments, where 250 Base64 pictures gave 0.1. A file longer than its model takes is cut into
labelled files; one that cannot be cut to fit is refused before anything is uploaded or sent.
That is the route at the Beijing endpoint, the only region whose temporary storage Model Studio
documents; anywhere else (the default international endpoint among them) clips go as Base64
frame lists of the same planned frames, and the fake refuses an upload there.

The clips are short real mp4s described as long spans (each planned frame is the nearest one
decoded), at a few dozen pixels, so a 20-minute segment costs little to encode and decode."""

from __future__ import annotations

import io
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import dashscope
import numpy as np
import pytest
import requests
from dashscope import MultiModalConversation
from dashscope.common.error import UploadFileException
from dashscope.utils.oss_utils import OssUtils
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import BinaryContent

from agents.prompts import render_prompt
from playlisteval.app import App
from playlisteval.doctor import run_checks
from playlisteval.settings import load_settings
from tests.fakes_dashscope import (
    API_KEY,
    BEIJING,
    GENERATION_PATH,
    OSS_RESOLVE_HEADER,
    SINGAPORE,
    DashScopeHarness,
    dashscope_harness,
)
from tools.contracts.roles import ChunkText, SegmentEvidence, SufficiencyContext, SufficiencyVerdict
from tools.providers import dashscope_model as adapter
from tools.providers.base import clip_info, frame_times

pytestmark = pytest.mark.usefixtures("allow_model_requests")

MODEL = "qwen-3.7-plus"  # sent as qwen3.7-plus (the settings' default endpoint)
HEIGHT = 36
TWENTY_MINUTES = 1200.0


@pytest.fixture
def harness() -> Any:
    with dashscope_harness() as running:
        yield running


def mp4(frames: int, rate: Fraction) -> bytes:
    """A real H.264 video of ``frames`` solid colours, 64×36, ``rate`` frames a second."""
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = 64, 36, "yuv420p"
        stream.codec_context.time_base = 1 / rate
        for index in range(frames):
            colour = ((index * 40) % 256, (index * 90) % 256, (255 - index * 20) % 256)
            picture = np.full((36, 64, 3), colour, dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts, frame.time_base = index, 1 / rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def tiny_mp4(frames: int = 12) -> bytes:
    """A short clip: ``frames`` seconds, a colour a second."""
    return mp4(frames, Fraction(1))


CLIPS = {"v1": tiny_mp4(), "v2": tiny_mp4(frames=10), "v3": tiny_mp4(frames=8)}


def clip(segment_id: str, seconds: float, **meta: Any) -> BinaryContent:
    """A segment's clip attachment: its video's tiny mp4, described as ``seconds`` of it."""
    return BinaryContent(
        data=CLIPS[segment_id.split("#")[0]],
        media_type="video/mp4",
        identifier=segment_id,
        vendor_metadata={
            "fps": 0.5,
            "start_s": 0.0,
            "end_s": seconds,
            "height": HEIGHT,
            "audio": False,
            "source": f"sha256:{segment_id}",
            "video_id": segment_id.split("#")[0],
            "path": "",
            **meta,
        },
    )


def sufficiency_prompt(clips: list[BinaryContent]) -> list[Any]:
    """A sufficiency call as the gate makes it: the rendered prompt, then the clips."""
    segments = tuple(
        SegmentEvidence(
            segment_id=c.identifier or "",
            video_id=c.identifier.split("#")[0] if c.identifier else "",
            start_s=0.0,
            end_s=float((c.vendor_metadata or {})["end_s"]),
            chunks=(ChunkText(start_s=0.0, end_s=30.0, text="narration"),),
        )
        for c in clips
    )
    context = SufficiencyContext(
        question="What do the two episodes show?",
        gold_answer="They show coloured cards (v1 @ 00:10–00:20).",
        segments=segments,
    )
    return [render_prompt(context), *clips]


def run(harness: DashScopeHarness, model_id: str, prompt: list[Any], **config: Any) -> Any:
    model = harness.model(model_id, frame_height=HEIGHT, **config)
    return Agent(model, output_type=SufficiencyVerdict, retries=0).run_sync(prompt)


def plan(clips: list[BinaryContent], fps: float, max_frames: int) -> list[int]:
    """Frames per clip as the budget plans them (agents.recorded: the same frame_times)."""
    infos = [info for c in clips if (info := clip_info(c)) is not None]
    return [len(t) for t in frame_times(infos, fps, max_frames, adapter.MIN_VIDEO_FRAMES)]


def test_two_twenty_minute_segments_are_seen_at_half_a_frame_a_second(
    harness: DashScopeHarness,
) -> None:
    """The paper's sufficiency call: 2 × 20 minutes at 0.5 fps is 1,200 frames, each clip a
    video file the fake samples at 0.5 fps, declared at the rate the file was sent at."""
    clips = [clip("v1#0", TWENTY_MINUTES), clip("v2#0", TWENTY_MINUTES)]
    result = run(harness, MODEL, sufficiency_prompt(clips), max_frames=1200)
    assert isinstance(result.output, SufficiencyVerdict)
    [videos] = harness.fake.received
    assert [v.kind for v in videos] == ["file", "file"]
    assert [v.segment_id for v in videos] == ["v1#0", "v2#0"]
    planned = plan(clips, 0.5, 1200)
    assert planned == [600, 600]
    for video, frames in zip(videos, planned, strict=True):
        assert video.fps == 0.5
        assert video.duration_s == pytest.approx(TWENTY_MINUTES)
        # DashScope takes an even count: the plan's frames, or one fewer.
        assert frames - 1 <= video.frames <= frames
        assert video.rate == pytest.approx(video.fps, abs=1 / TWENTY_MINUTES)
    # The SDK's upload, at our endpoint: one policy, one form POST per file; the call then
    # carries the header that resolves oss:// URLs.
    [policy] = harness.fake.policy_requests()
    assert "model=qwen3.7-plus" in policy.path
    assert len(harness.fake.uploads()) == 2
    [request] = harness.model_requests()
    assert request.headers[OSS_RESOLVE_HEADER] == "enable"
    assert dashscope.base_http_api_url.startswith("https://dashscope")  # nothing set module-wide
    sent = result.all_messages()[-1].provider_details["playlisteval_sent"]["media"]
    assert sent == {"images": 0, "frames": 1200, "video_files": 2, "sampled_frames": 1200}


def test_a_plan_thinned_below_a_tenth_of_a_frame_a_second_is_never_declared_above_it(
    harness: DashScopeHarness,
) -> None:
    """200 frames over 2 × 20 minutes is 0.083 fps, under DashScope's 0.1 floor: the file runs
    at 0.1 fps (its frames closer together than the source's) and is declared at 0.1, so the
    fake samples the 100 planned frames of each, not 120; the label gives the source times."""
    clips = [clip("v1#0", TWENTY_MINUTES), clip("v2#0", TWENTY_MINUTES)]
    run(harness, MODEL, sufficiency_prompt(clips), max_frames=200)
    [videos] = harness.fake.received
    assert plan(clips, 0.5, 200) == [100, 100]
    for video in videos:
        assert video.kind == "file"
        assert (video.fps, video.frames) == (0.1, 100)
        assert video.rate == pytest.approx(video.fps)
        assert video.step_s == pytest.approx(TWENTY_MINUTES / 100)  # 12 s of the source each


def test_a_clip_longer_than_its_model_takes_goes_as_labelled_files_within_it(
    harness: DashScopeHarness,
) -> None:
    """qwen3-vl-plus takes a file of an hour at most: a 90-minute segment at 0.1 fps (540
    frames) goes as two 45-minute files, each labelled with its span, all accepted."""
    clips = [clip("v1#0", 5400.0), clip("v2#0", 60.0)]
    run(harness, "qwen3-vl-plus", sufficiency_prompt(clips), video_fps=0.1, max_frames=0)
    [request] = harness.model_requests()
    [videos] = harness.fake.received
    assert [(v.kind, v.segment_id, v.fps, v.frames) for v in videos] == [
        ("file", "v1#0", 0.1, 270),
        ("file", "v1#0", 0.1, 270),
        ("file", "v2#0", 0.1, 6),
    ]
    assert all(v.duration_s is not None and v.duration_s <= 3600 for v in videos)
    assert [v.start_s for v in videos] == [0.0, 2700.0, 0.0]
    text = harness.prompt_text(request)
    for span, part in (("00:00–45:00", 1), ("45:00–90:00", 2)):
        assert f"shown from {span}" in text
        assert f"(part {part} of 2 of this segment)" in text


def test_a_clip_no_file_of_its_model_can_hold_is_refused_before_anything_is_sent(
    harness: DashScopeHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model whose files may hold fewer bytes than four frames encode to: cut as far as a
    file may be cut, it still does not fit, so the call is refused naming the limit, before
    an upload policy is asked for, a file uploaded or the model called."""
    small = adapter.VideoFileLimits(max_duration_s=7200.0, max_bytes=500)
    monkeypatch.setitem(adapter.VIDEO_FILE_LIMITS, "qwen3.7-", small)
    with pytest.raises(UserError, match=r"over the 500 bytes DashScope takes of one 'qwen3\.7"):
        run(harness, MODEL, sufficiency_prompt([clip("v1#0", 60.0), clip("v2#0", 60.0)]))
    assert harness.fake.policy_requests() == []
    assert harness.fake.uploads() == []
    assert harness.model_requests() == []


def test_clips_whose_frames_were_fixed_still_go_as_base64_frame_lists(
    harness: DashScopeHarness,
) -> None:
    """An evaluation condition's frames are sent exactly so: no file, no upload."""
    fixed = clip("v1#0", 600.0, frame_times=[0.0, 100.0, 200.0, 300.0, 400.0, 500.0])
    Agent(harness.model(MODEL, frame_height=HEIGHT)).run_sync(["Describe it.", fixed])
    [videos] = harness.fake.received
    assert [(v.kind, v.frames) for v in videos] == [("frames", 6)]
    assert harness.fake.policy_requests() == []


def test_a_clip_is_uploaded_once_per_model_and_its_file_reused(
    harness: DashScopeHarness,
) -> None:
    model = harness.model(MODEL, frame_height=HEIGHT)
    agent = Agent(model, output_type=SufficiencyVerdict, retries=0)
    prompt = sufficiency_prompt([clip("v1#0", 120.0), clip("v2#0", 120.0)])
    agent.run_sync(prompt)
    agent.run_sync(prompt)
    assert len(harness.fake.policy_requests()) == 1
    assert len(harness.fake.uploads()) == 2
    first, second = ([v.url for v in videos] for videos in harness.fake.received)
    assert first == second


# -- the route by the endpoint's region ----------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "region", "route"),
    [
        ("https://dashscope.aliyuncs.com/api/v1", BEIJING, "temporary-storage"),
        ("https://dashscope-intl.aliyuncs.com/api/v1", SINGAPORE, "frame-list"),
        ("https://dashscope-us.aliyuncs.com/api/v1", "us-east-1", "frame-list"),
        ("https://cn-hongkong.dashscope.aliyuncs.com/api/v1", "cn-hongkong", "frame-list"),
        ("https://ws-1a2b.cn-beijing.maas.aliyuncs.com/api/v1", BEIJING, "temporary-storage"),
        ("https://ws-1a2b.ap-southeast-1.maas.aliyuncs.com/api/v1", SINGAPORE, "frame-list"),
        ("http://127.0.0.1:9/api/v1", None, "frame-list"),  # a proxy: no region it can name
    ],
)
def test_video_files_go_only_where_the_endpoints_region_has_temporary_storage(
    base_url: str, region: str | None, route: str
) -> None:
    """Model Studio documents its temporary storage for China (Beijing) only; the default
    endpoint is the international one (Singapore)."""
    assert adapter.video_route(base_url) == adapter.VideoRoute(region, route)  # type: ignore[arg-type]
    assert adapter.video_route(base_url, BEIJING).route == "temporary-storage"  # told its region


def test_off_beijing_clips_go_as_base64_frame_lists_at_their_planned_rate() -> None:
    """At an endpoint outside Beijing (the default, Singapore) no upload is tried: each clip
    goes as a frame list of its planned frames (2 × 120 s at 0.5 fps: 60 each), declared at
    that rate, and the response records the region, the route and each clip's fps."""
    with dashscope_harness(region=SINGAPORE) as harness:
        clips = [clip("v1#0", 120.0), clip("v2#0", 120.0)]
        result = run(harness, MODEL, sufficiency_prompt(clips))
        assert harness.fake.policy_requests() == []
        assert harness.fake.uploads() == []
        [videos] = harness.fake.received
    assert [(v.kind, v.segment_id, v.fps, v.frames) for v in videos] == [
        ("frames", "v1#0", 0.5, 60),
        ("frames", "v2#0", 0.5, 60),
    ]
    sent = result.all_messages()[-1].provider_details["playlisteval_sent"]
    assert (sent["region"], sent["video_route"]) == (SINGAPORE, "frame-list")
    assert [(v["segment_id"], v["route"], v["fps"], v["frames"]) for v in sent["videos"]] == [
        ("v1#0", "frame-list", 0.5, 60),
        ("v2#0", "frame-list", 0.5, 60),
    ]
    assert sent["media"] == {"images": 0, "frames": 120, "video_files": 0, "sampled_frames": 120}


def test_in_beijing_each_call_records_its_video_files_and_their_rate(
    harness: DashScopeHarness,
) -> None:
    clips = [clip("v1#0", 120.0), clip("v2#0", 120.0)]
    result = run(harness, MODEL, sufficiency_prompt(clips))
    sent = result.all_messages()[-1].provider_details["playlisteval_sent"]
    assert (sent["region"], sent["video_route"]) == (BEIJING, "temporary-storage")
    assert [(v["route"], v["fps"], v["files"], v["frames"]) for v in sent["videos"]] == [
        ("temporary-storage", 0.5, 1, 60),
        ("temporary-storage", 0.5, 1, 60),
    ]


def test_off_beijing_a_plan_past_the_base64_limit_is_refused_naming_the_setting() -> None:
    """2 × 20 minutes at 0.5 fps is 1,200 frames; outside Beijing they would go as Base64
    images, of which DashScope takes 250 a request. The plan is what the prompt states and the
    budget reserves, so it is not thinned here: the call is refused before anything is sent,
    saying which setting to lower."""
    with dashscope_harness(region=SINGAPORE) as harness:
        clips = [clip("v1#0", TWENTY_MINUTES), clip("v2#0", TWENTY_MINUTES)]
        with pytest.raises(UserError) as raised:
            run(harness, MODEL, sufficiency_prompt(clips), max_frames=1200)
        assert harness.model_requests() == []
        assert harness.fake.policy_requests() == []
    message = str(raised.value)
    assert "1200 base64 images" in message
    assert f"providers.models.{MODEL!r}.max_frames to at most 250" in message
    assert "China (Beijing) only" in message


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        (None, "region ap-southeast-1: DashScope's temporary storage is documented for China"),
        ("https://dashscope.aliyuncs.com/api/v1", "region cn-beijing: clips go as mp4 video"),
    ],
)
def test_doctor_states_the_video_route_and_rate_of_the_endpoint(
    workspace: Path, base_url: str | None, says: str
) -> None:
    """The default endpoint (the international one) and the Beijing one: the route each takes,
    at the model's 0.5 fps; off Beijing, which setting keeps a request within 250 images."""
    providers = {"dashscope": {"base_url": base_url}} if base_url else {}
    with App(load_settings(workspace, providers=providers)) as app:
        checks = {c.name: c for c in run_checks(app, probe=lambda _url: None)}
    check = checks[f"video route of {MODEL}"]
    assert check.ok
    assert says in check.detail
    assert "0.5 fps" in check.detail
    if base_url is None:
        assert f"providers.models.{MODEL!r}.max_frames to at most 250" in check.detail


def test_the_fake_refuses_a_temporary_upload_outside_beijing() -> None:
    """The SDK's own upload, against an endpoint of a region without the storage: the policy
    request is refused, so nothing is posted and no oss:// URL exists."""
    with dashscope_harness(region=SINGAPORE) as harness:
        base = f"{harness.server.base_url}/api/v1"
        policy = OssUtils.get_upload_certificate(
            model="qwen3.7-plus", api_key=API_KEY, base_address=base
        )
        assert (policy.status_code, policy.code) == (404, "NotFound")
        assert SINGAPORE in policy.message
        with tempfile.TemporaryDirectory() as folder:
            file = Path(folder) / "v.mp4"
            file.write_bytes(long_file(60))
            with pytest.raises(UploadFileException, match="Get upload certificate failed"):
                OssUtils.upload(
                    model="qwen3.7-plus", file_path=str(file), api_key=API_KEY, base_address=base
                )
        assert harness.fake.uploads() == []


# -- the fake is as strict as the service -------------------------------------------------------


def upload(harness: DashScopeHarness, model: str, data: bytes, name: str) -> str:
    """``data`` on the fake's temporary storage for ``model``, through the SDK's own upload."""
    policy = OssUtils.get_upload_certificate(
        model=model, api_key=API_KEY, base_address=f"{harness.server.base_url}/api/v1"
    )
    assert policy.status_code == 200
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / name
        file.write_bytes(data)
        url, _ = OssUtils.upload(
            model=model, file_path=str(file), api_key=API_KEY, upload_certificate=policy.output
        )
    return str(url)


def call_with_file(harness: DashScopeHarness, model: str, url: str, fps: float) -> Any:
    label = (
        "Video v1 (segment v1#0), shown from 00:00–10:00; its timestamps are the video's own. "
        f"The video file that follows holds 6 frames at {fps:g} fps; its frame k (k = 0, 1, …) "
        "shows 00:00 + k × 100 s of the video's own time."
    )
    return MultiModalConversation.call(
        model=model,
        api_key=API_KEY,
        base_address=f"{harness.server.base_url}/api/v1",
        messages=[
            {
                "role": "user",
                "content": [{"text": label}, {"video": url, "fps": fps}, {"text": "Say."}],
            }
        ],
    )


def long_file(seconds: int, frames: int = 6) -> bytes:
    """A real mp4 of ``frames`` frames lasting ``seconds``."""
    return mp4(frames, Fraction(frames, seconds))


@pytest.mark.parametrize(
    ("model", "seconds", "status"),
    [
        ("qwen3-vl-plus", 3000, 200),
        ("qwen3-vl-plus", 3700, 400),  # over an hour
        ("qwen3.7-plus", 3700, 200),
        ("qwen3.7-plus", 7300, 400),  # over two hours
        ("qwen3-vl-flash", 700, 400),  # over ten minutes
    ],
)
def test_the_fake_takes_a_video_file_only_within_its_models_duration(
    harness: DashScopeHarness, model: str, seconds: int, status: int
) -> None:
    url = upload(harness, model, long_file(seconds), f"v{seconds}.mp4")
    reply = call_with_file(harness, model, url, 0.1)
    assert reply.status_code == status
    if status == 400:
        assert reply.code == "InvalidParameter"
        assert harness.fake.received == []


@pytest.mark.parametrize(("fps", "status"), [(0.05, 400), (0.1, 200), (10.0, 200), (12.0, 400)])
def test_the_fake_takes_a_files_rate_only_in_dashscopes_range(
    harness: DashScopeHarness, fps: float, status: int
) -> None:
    url = upload(harness, "qwen3.7-plus", long_file(60), "v.mp4")
    assert call_with_file(harness, "qwen3.7-plus", url, fps).status_code == status


def test_the_fake_samples_a_file_at_its_declared_rate(harness: DashScopeHarness) -> None:
    """120 frames over 600 s: declared at 0.1 fps the service takes 60 of them, at 0.2 all."""
    url = upload(harness, "qwen3.7-plus", long_file(600, frames=120), "v.mp4")
    assert call_with_file(harness, "qwen3.7-plus", url, 0.1).status_code == 200
    assert call_with_file(harness, "qwen3.7-plus", url, 0.2).status_code == 200
    slow, fast = harness.fake.received
    assert [(v.kind, v.duration_s, v.frames) for v in slow] == [("file", 600.0, 60)]
    assert [(v.kind, v.duration_s, v.frames) for v in fast] == [("file", 600.0, 120)]


def test_the_fake_refuses_a_file_uploaded_for_another_model(harness: DashScopeHarness) -> None:
    """Model Studio binds a temporary file to the model it was uploaded for."""
    url = upload(harness, "qwen3.6-plus", long_file(60), "v.mp4")
    reply = call_with_file(harness, "qwen3.7-plus", url, 0.5)
    assert (reply.status_code, reply.code) == (400, "InvalidParameter")


def test_the_fake_resolves_an_oss_url_only_when_asked_to(harness: DashScopeHarness) -> None:
    """Straight over HTTP, without the header the SDK adds for an oss:// URL: refused."""
    url = upload(harness, "qwen3.7-plus", long_file(60), "v.mp4")
    body: dict[str, Any] = {
        "model": "qwen3.7-plus",
        "input": {
            "messages": [{"role": "user", "content": [{"video": url, "fps": 0.5}, {"text": "?"}]}]
        },
        "parameters": {"result_format": "message"},
    }
    headers = {"Authorization": f"Bearer {API_KEY}"}
    reply = requests.post(f"{harness.server.base_url}{GENERATION_PATH}", json=body, headers=headers)
    assert reply.status_code == 400
    assert "resolve" in reply.json()["message"]


def test_the_fake_refuses_an_upload_past_its_policy(harness: DashScopeHarness) -> None:
    """The form upload is checked against its policy: a key outside the policy's directory
    is refused as OSS refuses it."""
    policy = OssUtils.get_upload_certificate(
        model="qwen3.7-plus", api_key=API_KEY, base_address=f"{harness.server.base_url}/api/v1"
    ).output
    forged = {**policy, "upload_dir": "dashscope-instant/someone-else"}
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "v.mp4"
        file.write_bytes(long_file(60))
        with pytest.raises(UploadFileException, match="AccessDenied"):
            OssUtils.upload(
                model="qwen3.7-plus",
                file_path=str(file),
                api_key=API_KEY,
                upload_certificate=forged,
            )
