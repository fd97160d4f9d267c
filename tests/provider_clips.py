"""Two real segments with exported clips, as a seed's calls attach them, for provider tests."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic_ai.messages import BinaryContent

from tools.contracts.roles import ChunkText, SegmentEvidence
from tools.index import media
from tools.offline.synthetic import make_demo_playlist

CLIP_FPS = 0.5


class DemoClips:
    """Two short synthetic episodes as segments with their 0.5 fps clips; the first segment
    starts 6 s into its video, so clip time and video time differ."""

    def __init__(self, root: Path) -> None:
        make_demo_playlist(
            root,
            domains=("cooking",),
            videos_per_domain=2,
            scenes_per_video=4,
            scene_seconds=6.0,
            plant_duplicate=False,
            narrate=False,
        )
        truth = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))
        segments: list[SegmentEvidence] = []
        self.clips: list[BinaryContent] = []
        for index, video in enumerate(truth["videos"]):
            start, end = (6.0 if index == 0 else 0.0), float(video["duration"])
            segment = SegmentEvidence(
                segment_id=f"{video['id']}-s{index}",
                video_id=video["id"],
                title=video["title"],
                start_s=start,
                end_s=end,
                chunks=(
                    ChunkText(
                        start_s=start, end_s=end, text=f"the narrator of {video['id']} talks"
                    ),
                ),
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
                        "height": 720,
                        "audio": False,
                        "source": f"sha-{video['id']}",
                        "video_id": video["id"],
                        "path": str(root / video["path"]),
                    },
                )
            )
            segments.append(segment)
        self.segments = (segments[0], segments[1])
