"""A reservation counts exactly the frames a frame-based request carries.

Evaluation clips fix their frames (``frame_times``: the condition's ``n_frames`` instants): the
OpenAI, DashScope and OpenAI-compatible adapters send exactly those, at the clip's height, and
the budget reserves for the same frames — not for the model's 0.5 fps over every second of
every clip, which once sent 180 images for ``n_frames=8`` (and 180 for 32).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart

from agents.evaluation import build_view, parse_condition
from agents.recorded import CallContext, CallRecorder, call_clips, call_shape
from playlisteval.app import App, provider_config, traffic_for
from playlisteval.settings import load_settings
from policies.budget import Budget
from tools.providers.base import frames_content
from tools.providers.dashscope_model import DashScopeModel

FAMILIES = {
    "gpt-5.4": "openai",
    "qwen-3.7-plus": "dashscope",
    "qwen3-vl-30b-a3b": "openai-compatible",
}
ENV = {
    "OPENAI_API_KEY": "sk-test",
    "DASHSCOPE_API_KEY": "sk-test",
}


def _sent(model_id: str, app: App, parts: list[Any]) -> list[BinaryContent]:
    """The images the model's adapter puts in the request for these parts."""
    config = provider_config(app.settings, model_id, env=ENV)
    if config.family == "dashscope":
        clips = DashScopeModel(model_id, config)._clips(parts)
        return [
            BinaryContent(data=f.jpeg, media_type="image/jpeg")
            for c in clips.values()
            for f in c.frames
        ]
    framed = frames_content(parts, config.video_fps, config.frame_height, config.max_frames)
    return [p for p in framed if isinstance(p, BinaryContent)]


@pytest.mark.parametrize("model_id", sorted(FAMILIES))
@pytest.mark.parametrize("n_frames", [8, 32])
@pytest.mark.parametrize("resolution", [360, 720])
def test_frames_reserved_are_the_frames_sent(
    workspace: Path, model_id: str, n_frames: int, resolution: int
) -> None:
    overrides = {"providers": {"openai_compatible": {"base_url": "http://127.0.0.1:9/v1"}}}
    with App(load_settings(workspace, **overrides)) as app:
        video = app.catalog.videos(statuses=["indexed"])[0]
        record = {"id": "p1", "evidence": [{"video_id": video.id, "start_s": 0.0, "end_s": 30.0}]}
        condition = parse_condition(f"uniform::frames:1h:{n_frames}:res={resolution}")
        view = build_view(app.catalog, app.clips(), {}, record, condition)
        parts: list[Any] = ["Which answer is better?", *view.clips]
        messages = [ModelRequest(parts=[UserPromptPart(content=parts)])]
        recorder = CallRecorder(
            budget=Budget(None), prices=app.prices(), traffic=traffic_for(app.settings, live=False)
        )
        context = CallContext(seed_id="p1", role="pair_judge", model=model_id)
        shape = recorder._effective(
            context, call_shape(model_id, messages, None), call_clips(messages)
        )
        sent = _sent(model_id, app, parts)
    assert shape.video_frames == len(sent) == n_frames == view.shown.frames, model_id
    # At the condition's height, never above the demo's 240-pixel sources (nor capped at the
    # models' 480-pixel frame height).
    assert shape.video_height == view.shown.resolution == min(resolution, 240)
