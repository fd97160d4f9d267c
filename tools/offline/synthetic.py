"""A synthetic demo playlist generated from code in seconds, with its ground truth.

``make_demo_playlist`` writes a few short "episode" videos per domain (cooking, astronomy,
woodworking): each scene is a solid background with one or two named shapes at named grid
positions and a short on-screen label, narrated (espeak-ng) about the domain's topic without ever
speaking the visual facts. That split is deliberate: questions about what is *seen* cannot be
answered from the transcript, and the transcript's topic structure (same domain related, other
domains unrelated) is what segment seeding works from downstream. Beside the videos go WebVTT
sidecars, ``ground_truth.json`` and the ``manifest.json`` that ingest reads.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageFont

from store.errors import ConfigError, MediaError

__all__ = [
    "DOMAINS",
    "LABEL_WORDS",
    "PALETTE",
    "POSITIONS",
    "SHAPE_KINDS",
    "Shape",
    "draw_scene",
    "espeak_available",
    "make_demo_playlist",
    "make_narrated_clip",
    "narrate_to_wav",
    "write_mp4",
    "write_vtt",
]

ESPEAK = "espeak-ng"
AUDIO_RATE = 16_000  # what ASR models want; AAC handles it and it keeps the files small
SENTENCE_PAUSE_S = 0.35
SCENE_LEAD_IN_S = 0.5
# Used to pick how many sentences fit a scene before any audio exists, so the narration text
# depends on the seed only. espeak-ng speaks ~3.5 words/s at 175 wpm; 2.6 keeps a margin.
PLANNING_WORDS_PER_S = 2.6
MIN_SCENE_SECONDS = 6.0
MAX_SENTENCES_PER_SCENE = 3
SILENCE_THRESHOLD = 1e-3

Rgb = tuple[int, int, int]
Cue = tuple[float, float, str]
FloatArray = npt.NDArray[np.float32]

# Named colours far enough apart that the nearest name survives H.264 and chroma subsampling.
PALETTE: dict[str, Rgb] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (240, 210, 40),
    "orange": (245, 140, 20),
    "purple": (140, 60, 190),
    "pink": (245, 140, 200),
    "cyan": (40, 200, 210),
    "white": (245, 245, 245),
    "black": (20, 20, 20),
    "gray": (128, 128, 128),
    "brown": (125, 75, 35),
}
SHAPE_KINDS = ("circle", "square", "triangle")
ROWS = ("top", "middle", "bottom")
COLUMNS = ("left", "center", "right")
POSITIONS = tuple(
    "center" if (row, col) == ("middle", "center") else f"{row}-{col}"
    for row in ROWS
    for col in COLUMNS
)
LABEL_WORDS = (
    "ALPHA", "BRAVO", "DELTA", "ECHO", "FOXTROT", "HOTEL", "JULIET", "KILO",
    "MIKE", "OSCAR", "QUEBEC", "ROMEO", "SIERRA", "TANGO", "VICTOR", "ZULU",
)  # fmt: skip
# Words a narration must never contain: they would leak a visual fact into the transcript.
VISUAL_WORDS = frozenset(
    [*PALETTE, "grey", *SHAPE_KINDS, *ROWS, *COLUMNS, "centre", *(w.lower() for w in LABEL_WORDS)]
)


@dataclass(frozen=True)
class _Topic:
    name: str
    sentences: tuple[str, ...]


@dataclass(frozen=True)
class _Domain:
    general: tuple[str, ...]
    topics: tuple[_Topic, ...]


# Each episode draws mostly from its own topic (specifics differ between episodes) and partly
# from the domain's shared sentences (vocabulary and themes shared within a domain).
DOMAINS: dict[str, _Domain] = {
    "cooking": _Domain(
        general=(
            "Good home cooking starts with fresh seasonal ingredients and a simple recipe.",
            "Taste the food as it cooks and season with salt a little at a time.",
            "Tomatoes, garlic and olive oil are the heart of Italian home cooking.",
            "Fresh basil and parmesan cheese lift almost any Italian dish.",
            "A good recipe balances salty, sweet and sour flavours in every bite.",
            "Cook with a heavy pot so the food heats evenly and never burns.",
            "Onions and garlic cooked slowly give savoury dishes their depth.",
            "Serve the meal warm with fresh bread and a simple salad.",
            "Dried oregano and chilli flakes add warmth to tomato dishes.",
            "Homemade food tastes better than anything from a packet.",
            "A pinch of sugar softens the sharp acidity of cooked tomatoes.",
            "Leftovers from this recipe make a great lunch the next day.",
        ),
        topics=(
            _Topic(
                "pizza from scratch",
                (
                    "Today we make pizza from scratch, starting with the dough.",
                    "Mix flour, water, yeast and salt into a soft pizza dough.",
                    "Knead the dough until it feels smooth and springs back.",
                    "Let the dough rise slowly in a warm spot for a few hours.",
                    "Stretch the dough by hand instead of flattening it with a rolling pin.",
                    "Spread a thin layer of tomato sauce over the pizza base.",
                    "Tear fresh mozzarella and scatter it evenly over the sauce.",
                    "Bake the pizza in the hottest oven you have on a preheated stone.",
                    "The crust should puff up and char slightly in the oven.",
                    "Add a few basil leaves and olive oil once the pizza comes out.",
                    "Scatter sliced onions, olives and a little parmesan over the pizza.",
                    "Simmer a quick tomato sauce with garlic and oregano for the topping.",
                ),
            ),
            _Topic(
                "tomato sauce",
                (
                    "This episode is all about a slow simmered tomato sauce for pasta.",
                    "Warm the olive oil gently and soften the sliced garlic.",
                    "Add chopped onions and cook them until they turn sweet.",
                    "Crush ripe plum tomatoes by hand straight into the pot.",
                    "Simmer the sauce on low heat for at least an hour.",
                    "Stir the sauce now and then so it never sticks.",
                    "A spoon of tomato paste deepens the flavour of the sauce.",
                    "Tear fresh basil leaves into the sauce just before serving.",
                    "Reduce the sauce until it coats the back of a spoon.",
                    "Toss the cooked spaghetti in the sauce with a splash of pasta water.",
                    "Finish the plate with grated parmesan cheese and olive oil.",
                    "Leftover sauce freezes well for quick weeknight dinners.",
                ),
            ),
            _Topic(
                "minestrone soup",
                (
                    "We are making a hearty minestrone soup for a cold evening.",
                    "Dice carrots, celery and onions into small even cubes.",
                    "Soften the vegetables gently in olive oil with a little garlic.",
                    "Add chopped tomatoes and a good vegetable stock to the pot.",
                    "Simmer the soup until the vegetables are tender.",
                    "Stir in cannellini beans so the soup becomes thick and filling.",
                    "Small pasta like ditalini cooks directly in the simmering broth.",
                    "A parmesan rind in the pot gives the broth a rich savoury depth.",
                    "Add chopped kale near the end so it stays tender.",
                    "Ladle the soup into deep bowls with crusty bread on the side.",
                    "Finish each bowl with basil, grated parmesan and a drizzle of olive oil.",
                    "Minestrone tastes even better the next day once the flavours settle.",
                ),
            ),
        ),
    ),
    "astronomy": _Domain(
        general=(
            "Clear skies and a dark site make all the difference for observing.",
            "Let your eyes adapt to the darkness for twenty minutes first.",
            "A sturdy tripod keeps the telescope steady in the wind.",
            "Star charts help you find your way across the night sky.",
            "Light pollution from cities washes out faint objects.",
            "Binoculars are a wonderful first instrument for stargazing.",
            "Astronomers record every observation in a careful logbook.",
            "The atmosphere makes stars twinkle and blurs fine details.",
            "Wrap up warmly because long nights outdoors get very cold.",
            "Patience at the eyepiece reveals more detail over time.",
            "A good telescope gathers far more light than the human eye.",
            "The night sky changes with the seasons as the earth orbits the sun.",
        ),
        topics=(
            _Topic(
                "the moon",
                (
                    "Tonight we observe the moon through a small refracting telescope.",
                    "The lunar surface is covered in craters from ancient impacts.",
                    "The moon shows its phases as it orbits the earth each month.",
                    "Along the terminator, shadows make lunar craters stand out sharply.",
                    "The dark lunar seas are plains of old volcanic basalt.",
                    "Mountain ranges on the moon cast long shadows at sunrise.",
                    "The same face of the moon always points toward the earth.",
                    "Tides in the oceans are raised by the pull of the moon.",
                    "A lunar eclipse happens when the earth's shadow covers the moon.",
                    "Apollo astronauts brought back moon rocks for study.",
                    "A moon filter softens the glare of the full moon.",
                    "Each lunation lasts about twenty nine and a half days.",
                ),
            ),
            _Topic(
                "the planets",
                (
                    "This session we hunt for the planets of our solar system.",
                    "Jupiter shows cloud belts and its four large moons.",
                    "The moons of Jupiter change places from night to night.",
                    "Saturn's rings are made of countless pieces of ice.",
                    "Mars appears as a small disk with polar ice caps.",
                    "Venus shows phases just like the moon as it orbits the sun.",
                    "Planets shine with a steady light instead of twinkling.",
                    "The planets wander slowly along the ecliptic against the stars.",
                    "Uranus and Neptune are distant ice giants far beyond Saturn.",
                    "Mercury stays close to the sun and hides in its glare.",
                    "Higher magnification helps bring out planetary detail on calm nights.",
                    "Space probes have mapped the surfaces of many planets.",
                ),
            ),
            _Topic(
                "galaxies and nebulae",
                (
                    "Tonight we look far beyond our galaxy at deep sky objects.",
                    "The Andromeda galaxy is the nearest large spiral to the Milky Way.",
                    "Nebulae are vast clouds of gas and dust where stars are born.",
                    "The Orion nebula is a stellar nursery visible to the naked eye.",
                    "Light from distant galaxies set out millions of years ago.",
                    "A wide aperture gathers the faint glow of a distant nebula.",
                    "Globular clusters hold hundreds of thousands of ancient stars.",
                    "Long exposure astrophotography reveals spiral arms and dust lanes.",
                    "The expansion of the universe carries galaxies away from us.",
                    "Dying stars shed glowing shells that form planetary nebulae.",
                    "Averted vision helps you notice a faint galaxy halo.",
                    "Our Milky Way contains hundreds of billions of stars.",
                ),
            ),
        ),
    ),
    "woodworking": _Domain(
        general=(
            "Always read the wood grain of the board before you cut or plane it.",
            "Sharp chisels and hand planes leave a cleaner surface than sandpaper.",
            "Measure twice and saw once to avoid wasting good hardwood.",
            "Strong wood joints and good glue make furniture last for generations.",
            "Clamp the wooden parts firmly to the workbench before sawing them.",
            "Hardwoods like oak, cherry and walnut make beautiful furniture.",
            "Let the timber settle in the workshop before you build with it.",
            "A sharp marking knife line makes joinery cuts far more accurate.",
            "Dry fit every joint before the glue comes out of the bottle.",
            "Sand the wood with progressively finer grits for a smooth surface.",
            "Wood moves with the seasons, so furniture joints must allow for it.",
            "An oil or varnish finish brings out the figure in the wood grain.",
        ),
        topics=(
            _Topic(
                "dovetail joints",
                (
                    "Today we cut hand dovetail joints for a small drawer.",
                    "Mark the tails with a marking gauge and a bevel gauge.",
                    "Saw down the waste side of the line with a fine dovetail saw.",
                    "Chop out the waste between the tails with a sharp chisel.",
                    "Transfer the tails onto the pin board with a marking knife.",
                    "Pare the pins carefully so the joint fits snugly.",
                    "A well cut dovetail holds together even without glue.",
                    "Dry fit the joint before spreading any wood glue.",
                    "Tap the joint home gently with a wooden mallet.",
                    "Plane the joint flush once the glue has cured.",
                    "Through dovetails show off the craftsmanship on the drawer side.",
                    "Practice on pine offcuts before cutting dovetails in walnut.",
                ),
            ),
            _Topic(
                "a bookshelf",
                (
                    "This episode we build a solid oak bookshelf for the living room.",
                    "Cut the sides and shelves to length on the mitre saw.",
                    "Rout dadoes in the sides so each shelf sits in a groove.",
                    "A back panel of plywood stops the bookshelf from racking.",
                    "Glue the shelves into the dadoes and clamp the case together.",
                    "Check the case for twist by measuring across the diagonals.",
                    "Pocket screws make a quick and strong joint for the face frame.",
                    "Fill any gaps with wood filler before the final sanding.",
                    "Break the sharp edges with a block plane and sandpaper.",
                    "Brush on a coat of oil based varnish to protect the oak.",
                    "Anchor the finished bookshelf to the wall for safety.",
                    "Solid shelves longer than a metre may sag under heavy books.",
                ),
            ),
            _Topic(
                "a keepsake box",
                (
                    "Today we build a small keepsake box from cherry wood.",
                    "Resaw a thick cherry board to get thin sides for the box.",
                    "Cut box joints at the corners with a jig on the table saw.",
                    "Glue the box joints and clamp the corners tight.",
                    "Cut a groove in each side so the base panel can float.",
                    "Glue up the whole box closed and saw the lid off afterwards.",
                    "Fit small brass hinges so the lid closes neatly.",
                    "Plane the lid flush with the sides of the box.",
                    "A mitred frame around a thin panel makes an elegant lid.",
                    "Line the inside of the box with felt to protect small treasures.",
                    "Hand sand the box to a silky feel before finishing.",
                    "Wipe on a few coats of shellac to warm up the cherry.",
                ),
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Shape:
    """One shape of a scene: its kind, colour and named grid position."""

    kind: str
    colour: str
    position: str


@dataclass(frozen=True)
class _ScenePlan:
    background: str
    shapes: tuple[Shape, ...]
    text: str
    narration: tuple[str, ...]


def espeak_available() -> bool:
    """Whether the ``espeak-ng`` program is on ``PATH`` (narration needs it)."""
    return shutil.which(ESPEAK) is not None


def narrate_to_wav(
    sentences: Sequence[str], wav_path: Path, *, voice: str = "en-us", rate_wpm: int = 175
) -> list[tuple[float, float, str]]:
    """Speak ``sentences`` with espeak-ng into one mono 16-bit WAV and return a cue per sentence.

    Each sentence is synthesised on its own, trimmed of espeak's leading and trailing silence and
    measured, so a cue's ``(start_s, end_s, sentence)`` is exact; a short pause separates them.
    """
    samples, rate, cues = _synthesise(sentences, voice=voice, rate_wpm=rate_wpm)
    wav_path = Path(wav_path)
    wav_path.parent.mkdir(parents=True, exist_ok=True)
    pcm = np.clip(np.round(samples * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(wav_path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return cues


def make_narrated_clip(
    out_path: Path,
    sentences: Sequence[str],
    *,
    width: int = 320,
    height: int = 240,
    fps: int = 10,
) -> tuple[Path, Path]:
    """Write an H.264/AAC mp4 narrating ``sentences`` (espeak-ng) and its ``.vtt`` sidecar.

    The picture is a single still scene; the captions are exactly the spoken sentences. Returns
    ``(video_path, vtt_path)``.
    """
    _check_frame_size(width, height, fps)
    speech, rate, cues = _synthesise(sentences, voice="en-us", rate_wpm=175)
    speech = _resample(speech, rate, AUDIO_RATE)
    lead = SCENE_LEAD_IN_S
    duration = lead + len(speech) / AUDIO_RATE + lead
    n_frames = max(1, math.ceil(duration * fps))
    duration = n_frames / fps
    audio = np.zeros(round(duration * AUDIO_RATE), dtype=np.float32)
    start = round(lead * AUDIO_RATE)
    audio[start : start + len(speech)] = speech
    shapes = (Shape("circle", "yellow", "center"),)
    image = draw_scene("blue", shapes, "", width, height)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(out_path, [(image, n_frames)], audio, fps)
    vtt_path = out_path.with_suffix(".vtt")
    write_vtt(vtt_path, [(s + lead, e + lead, text) for s, e, text in cues])
    return out_path, vtt_path


def make_demo_playlist(
    out_dir: Path,
    *,
    domains: Sequence[str] = ("cooking", "astronomy", "woodworking"),
    videos_per_domain: int = 3,
    scenes_per_video: int = 8,
    scene_seconds: float = 15.0,
    narrate: bool | None = None,
    plant_duplicate: bool = True,
    newer_episodes: int = 0,
    seed: int = 0,
    width: int = 320,
    height: int = 240,
    fps: int = 10,
) -> Path:
    """Generate the demo playlists under ``out_dir`` and return the path of ``manifest.json``.

    One playlist per domain of ``videos_per_domain`` episodes, each ``scenes_per_video`` scenes
    of ``scene_seconds``. ``narrate=None`` narrates with espeak-ng when it is installed and
    otherwise writes a silent audio track with captions only. ``plant_duplicate`` appends to the
    first playlist a byte copy of one of its earlier episodes under a new title and id;
    ``newer_episodes`` then appends that many fresh episodes to it (the "newer videos" a
    domain's target holds in reserve, to backfill the duplicate's gap). The second playlist
    (the first if there is only one) lists Episode 2 before Episode 1 in the
    manifest. Everything is deterministic given ``seed``; ``ground_truth.json`` records it all.
    """
    _check_demo_args(domains, videos_per_domain, scenes_per_video, scene_seconds)
    _check_frame_size(width, height, fps)
    if newer_episodes < 0:
        raise ConfigError(f"newer_episodes must be 0 or more, got {newer_episodes!r}")
    if narrate is None:
        narrate = espeak_available()
    elif narrate and not espeak_available():
        raise ConfigError(
            f"narrate=True but {ESPEAK!r} is not on PATH; install it (apt-get install espeak-ng) "
            "or pass narrate=False for captions over a silent track"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    frames_per_scene = max(1, round(scene_seconds * fps))
    scene_len = frames_per_scene / fps  # the exact scene length the frame count gives

    playlists: list[dict[str, Any]] = []
    truth_videos: list[dict[str, Any]] = []
    shape = _EpisodeShape(
        out_dir, seed, scenes_per_video, scene_len, frames_per_scene, fps, width, height, narrate
    )
    for domain in domains:
        entries: list[dict[str, Any]] = []
        for number in range(1, videos_per_domain + 1):
            entry, truth = _render_episode(shape, domain, number)
            truth_videos.append(truth)
            entries.append(entry)
        playlists.append(
            {
                "title": f"Demo: {domain}",
                "domain": domain,
                "id": f"demo-{domain}",
                "videos": entries,
            }
        )

    duplicate: dict[str, str] | None = None
    if plant_duplicate:
        duplicate = _plant_duplicate(out_dir, playlists[0], truth_videos, seed)
    for _ in range(newer_episodes):
        first = playlists[0]
        entry, truth = _render_episode(shape, first["domain"], len(first["videos"]) + 1)
        truth_videos.append(truth)
        first["videos"].append(entry)

    shuffled: dict[str, Any] | None = None
    target = playlists[1] if len(playlists) > 1 else playlists[0]
    if videos_per_domain >= 2:
        videos = target["videos"]
        videos[0], videos[1] = videos[1], videos[0]
        shuffled = {
            "playlist_id": target["id"],
            "manifest_order": [v["id"] for v in videos],
            "title_order": sorted((v["id"] for v in videos), key=_episode_number),
        }

    ground_truth = {
        "seed": seed,
        "width": width,
        "height": height,
        "fps": fps,
        "scene_seconds": scene_len,
        "narrated": narrate,
        "positions": {name: list(_position_centre(name, width, height)) for name in POSITIONS},
        "palette": {name: list(rgb) for name, rgb in PALETTE.items()},
        "out_of_order_playlist": shuffled,
        "duplicate": duplicate,
        "videos": truth_videos,
    }
    _write_json(out_dir / "ground_truth.json", ground_truth)
    manifest_path = out_dir / "manifest.json"
    _write_json(manifest_path, {"playlists": playlists})
    return manifest_path


# --- planning (pure) -----------------------------------------------------------------------


@dataclass(frozen=True)
class _EpisodeShape:
    """How every episode of one demo is made: where, from which seed, how long, how drawn."""

    out_dir: Path
    seed: int
    scenes: int
    scene_len: float
    frames_per_scene: int
    fps: int
    width: int
    height: int
    narrate: bool


def _render_episode(
    shape: _EpisodeShape, domain: str, number: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Episode ``number`` of ``domain``: its manifest entry and its ground truth, its files
    written. Everything follows from the seed, the domain and the number."""
    rng = random.Random(f"{shape.seed}:{domain}:{number}")
    topic = DOMAINS[domain].topics[(number - 1) % len(DOMAINS[domain].topics)]
    plans = _plan_video(rng, domain, topic, shape.scenes, shape.scene_len)
    entry = _video_entry(domain, number, f"{domain}-{number:02d}")
    truth = _render_video(
        shape.out_dir,
        entry,
        plans,
        shape.scene_len,
        shape.frames_per_scene,
        shape.fps,
        shape.width,
        shape.height,
        shape.narrate,
    )
    truth.update(domain=domain, topic=topic.name, duplicate_of=None)
    return entry, truth


def _check_demo_args(
    domains: Sequence[str], videos_per_domain: int, scenes_per_video: int, scene_seconds: float
) -> None:
    if isinstance(domains, str) or not domains:
        raise ConfigError(f"domains must be a non-empty sequence of names, got {domains!r}")
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        raise ConfigError(f"unknown demo domains {unknown!r}; choose from {sorted(DOMAINS)!r}")
    if len(set(domains)) != len(domains):
        raise ConfigError(f"domains must not repeat, got {list(domains)!r}")
    if videos_per_domain < 1 or scenes_per_video < 1:
        raise ConfigError(
            f"videos_per_domain and scenes_per_video must be >= 1, got "
            f"{videos_per_domain!r} and {scenes_per_video!r}"
        )
    if not scene_seconds >= MIN_SCENE_SECONDS:
        raise ConfigError(
            f"scene_seconds={scene_seconds!r} is too short for a narrated sentence; "
            f"use at least {MIN_SCENE_SECONDS}"
        )


def _check_frame_size(width: int, height: int, fps: int) -> None:
    # H.264 4:2:0 needs even dimensions; below 64 px the shapes and label no longer fit.
    if width < 64 or height < 64 or width % 2 or height % 2:
        raise ConfigError(f"width and height must be even and >= 64, got {width!r}x{height!r}")
    if not 1 <= fps <= 60:
        raise ConfigError(f"fps must be between 1 and 60, got {fps!r}")


def _planned_seconds(sentence: str) -> float:
    return len(sentence.split()) / PLANNING_WORDS_PER_S + SENTENCE_PAUSE_S


def _plan_video(
    rng: random.Random, domain: str, topic: _Topic, scenes: int, scene_len: float
) -> list[_ScenePlan]:
    """Choose every visual fact and narration sentence of one video from ``rng`` alone."""
    specific = list(topic.sentences)
    general = list(DOMAINS[domain].general)
    rng.shuffle(general)
    # The topic's opening sentence introduces the episode; the rest come in a seeded order.
    specific = specific[:1] + rng.sample(specific[1:], len(specific) - 1)
    slot = 0
    used_specific = used_general = 0
    budget = scene_len - SCENE_LEAD_IN_S
    plans: list[_ScenePlan] = []
    for _ in range(scenes):
        narration: list[str] = []
        spent = 0.0
        while len(narration) < MAX_SENTENCES_PER_SCENE:
            # Alternating topic and shared sentences keeps episodes related but distinct.
            if slot % 2 == 1:
                candidate = general[used_general % len(general)]
            else:
                candidate = specific[used_specific % len(specific)]
            cost = _planned_seconds(candidate)
            if narration and spent + cost > budget:
                break
            narration.append(candidate)
            spent += cost
            if slot % 2 == 1:
                used_general += 1
            else:
                used_specific += 1
            slot += 1
        background = rng.choice(list(PALETTE))
        others = [c for c in PALETTE if c != background]
        count = rng.choice((1, 2))
        colours = rng.sample(others, count)
        positions = rng.sample(POSITIONS, count)
        shapes = tuple(
            Shape(rng.choice(SHAPE_KINDS), colour, position)
            for colour, position in zip(colours, positions, strict=True)
        )
        text = f"{rng.choice(LABEL_WORDS)} {rng.randrange(10, 100)}"
        plans.append(_ScenePlan(background, shapes, text, tuple(narration)))
    return plans


def _episode_number(video_id: str) -> int:
    return int(video_id.rsplit("-", 1)[1])


def _video_entry(domain: str, number: int, video_id: str) -> dict[str, Any]:
    return {
        "path": f"{domain}/{video_id}.mp4",
        "title": f"{domain.capitalize()} Episode {number}",
        "id": video_id,
        "captions": [f"{domain}/{video_id}.vtt"],
    }


# --- pictures ------------------------------------------------------------------------------


def _label_band(height: int) -> int:
    return height // 6


def _position_centre(position: str, width: int, height: int) -> tuple[int, int]:
    """Pixel centre of a named grid cell; the grid covers the frame above the label band."""
    if position == "center":
        row, col = 1, 1
    else:
        row_name, col_name = position.split("-")
        row, col = ROWS.index(row_name), COLUMNS.index(col_name)
    grid_h = height - _label_band(height)
    return (round((col + 0.5) * width / 3), round((row + 0.5) * grid_h / 3))


def _shape_radius(width: int, height: int) -> int:
    grid_h = height - _label_band(height)
    return round(0.32 * min(width / 3, grid_h / 3))


def draw_scene(
    background: str, shapes: Sequence[Shape], text: str, width: int, height: int
) -> npt.NDArray[np.uint8]:
    """One still picture (height × width × RGB): a flat background, the shapes at their grid
    cells and ``text`` (when any) in the label band at the bottom."""
    image = Image.new("RGB", (width, height), PALETTE[background])
    draw = ImageDraw.Draw(image)
    radius = _shape_radius(width, height)
    for shape in shapes:
        cx, cy = _position_centre(shape.position, width, height)
        fill = PALETTE[shape.colour]
        if shape.kind == "circle":
            draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), fill=fill)
        elif shape.kind == "square":
            draw.rectangle((cx - radius, cy - radius, cx + radius, cy + radius), fill=fill)
        else:
            draw.polygon(
                [(cx, cy - radius), (cx - radius, cy + radius), (cx + radius, cy + radius)],
                fill=fill,
            )
    if text:
        band = _label_band(height)
        font = ImageFont.load_default(size=max(10, round(band * 0.7)))
        r, g, b = PALETTE[background]
        ink = (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 140 else (255, 255, 255)
        draw.text((width / 2, height - band / 2), text, fill=ink, font=font, anchor="mm")
    return np.asarray(image, dtype=np.uint8)


# --- sound ---------------------------------------------------------------------------------


def _synthesise(
    sentences: Sequence[str], *, voice: str, rate_wpm: int
) -> tuple[FloatArray, int, list[Cue]]:
    """Speak each sentence separately; return the joined samples, their rate and exact cues."""
    if not sentences or any(not s.strip() for s in sentences):
        raise ConfigError(f"narration needs non-empty sentences, got {list(sentences)!r}")
    if not espeak_available():
        raise ConfigError(
            f"{ESPEAK!r} is not on PATH; install it (apt-get install espeak-ng) to narrate"
        )
    pieces: list[FloatArray] = []
    cues: list[Cue] = []
    cursor = 0
    # espeak-ng spends most of its time starting up; a few at once hide that latency.
    with (
        tempfile.TemporaryDirectory(prefix="narrate-") as tmp,
        ThreadPoolExecutor(max_workers=min(4, len(sentences))) as pool,
    ):
        spoken = list(
            pool.map(
                lambda item: _speak(item[1], Path(tmp) / f"{item[0]}.wav", voice, rate_wpm),
                enumerate(sentences),
            )
        )
    for sentence, (speech, rate) in zip(sentences, spoken, strict=True):
        if pieces:
            gap = np.zeros(round(SENTENCE_PAUSE_S * rate), dtype=np.float32)
            pieces.append(gap)
            cursor += len(gap)
        cues.append((cursor / rate, (cursor + len(speech)) / rate, sentence))
        pieces.append(speech)
        cursor += len(speech)
    return np.concatenate(pieces), rate, cues


def _speak(sentence: str, path: Path, voice: str, rate_wpm: int) -> tuple[FloatArray, int]:
    """One sentence through espeak-ng, trimmed of its leading and trailing silence."""
    command = [ESPEAK, "-v", voice, "-s", str(rate_wpm), "-w", str(path), sentence]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not path.exists():
        raise MediaError(
            f"{ESPEAK} failed on {sentence!r} (voice {voice!r}): {done.stderr.strip()!r}; "
            "check the voice name with `espeak-ng --voices`"
        )
    speech, rate = _read_wav(path)
    speech = _trim_silence(speech)
    if len(speech) == 0:
        raise MediaError(f"{ESPEAK} produced no sound for {sentence!r}; check the voice {voice!r}")
    return speech, rate


def _read_wav(path: Path) -> tuple[FloatArray, int]:
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise MediaError(f"expected 16-bit PCM from {ESPEAK}, got {wav.getsampwidth()!r} bytes")
        channels, rate = wav.getnchannels(), wav.getframerate()
        raw = wav.readframes(wav.getnframes())
    pcm = np.frombuffer(raw, dtype="<i2").reshape(-1, channels).mean(axis=1)
    return (pcm / 32768.0).astype(np.float32), rate


def _trim_silence(samples: FloatArray) -> FloatArray:
    loud = np.flatnonzero(np.abs(samples) > SILENCE_THRESHOLD)
    if len(loud) == 0:
        return samples[:0]
    return samples[loud[0] : loud[-1] + 1]


def _resample(samples: FloatArray, rate: int, target: int) -> FloatArray:
    """Resample mono float samples with libswresample (through PyAV)."""
    if rate == target:
        return samples
    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="fltp", layout="mono")
    frame.sample_rate = rate
    resampler = av.AudioResampler(format="fltp", layout="mono", rate=target)
    out = [f.to_ndarray()[0] for f in resampler.resample(frame)]
    out += [f.to_ndarray()[0] for f in resampler.resample(None)]
    return np.concatenate(out).astype(np.float32) if out else samples[:0]


# --- files ---------------------------------------------------------------------------------


def _render_video(
    out_dir: Path,
    entry: dict[str, Any],
    plans: Sequence[_ScenePlan],
    scene_len: float,
    frames_per_scene: int,
    fps: int,
    width: int,
    height: int,
    narrate: bool,
) -> dict[str, Any]:
    """Write one video and its captions; return its ground-truth record."""
    duration = scene_len * len(plans)
    audio = np.zeros(round(duration * AUDIO_RATE), dtype=np.float32)
    all_cues: list[Cue] = []
    scenes: list[dict[str, Any]] = []
    pictures: list[tuple[npt.NDArray[np.uint8], int]] = []
    for index, plan in enumerate(plans):
        start = index * scene_len
        narration = list(plan.narration)
        cues = _scene_cues(narration)
        if narrate:
            speech, rate, cues = _synthesise(narration, voice="en-us", rate_wpm=175)
            # A rare overlong scene loses its last sentences rather than spill into the next.
            while cues[-1][1] > scene_len - SCENE_LEAD_IN_S and len(cues) > 1:
                cues.pop()
            speech = _resample(speech[: math.ceil(cues[-1][1] * rate)], rate, AUDIO_RATE)
            offset = round((start + SCENE_LEAD_IN_S) * AUDIO_RATE)
            speech = speech[: max(0, len(audio) - offset)]
            audio[offset : offset + len(speech)] = speech
            narration = [text for _, _, text in cues]
        cues = [(start + SCENE_LEAD_IN_S + s, start + SCENE_LEAD_IN_S + e, t) for s, e, t in cues]
        all_cues.extend(cues)
        pictures.append((draw_scene(plan.background, plan.shapes, plan.text, width, height),
                         frames_per_scene))  # fmt: skip
        scenes.append(
            {
                "index": index,
                "start_s": round(start, 6),
                "end_s": round(start + scene_len, 6),
                "background": {"colour": plan.background, "rgb": list(PALETTE[plan.background])},
                "shapes": [
                    {
                        "kind": s.kind,
                        "colour": s.colour,
                        "rgb": list(PALETTE[s.colour]),
                        "position": s.position,
                        "center_xy": list(_position_centre(s.position, width, height)),
                        "size_px": 2 * _shape_radius(width, height),
                    }
                    for s in plan.shapes
                ],
                "on_screen_text": plan.text,
                "narration": narration,
                "cues": [[round(s, 3), round(e, 3), t] for s, e, t in cues],
            }
        )
    video_path = out_dir / entry["path"]
    video_path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(video_path, pictures, audio, fps)
    write_vtt(out_dir / entry["captions"][0], all_cues)
    return {
        "id": entry["id"],
        "title": entry["title"],
        "path": entry["path"],
        "captions": entry["captions"],
        "duration": round(duration, 6),
        "scenes": scenes,
    }


def _scene_cues(sentences: Sequence[str]) -> list[Cue]:
    """Planned cue times (relative to the narration start) used when nothing is spoken."""
    cues: list[Cue] = []
    cursor = 0.0
    for sentence in sentences:
        length = _planned_seconds(sentence) - SENTENCE_PAUSE_S
        cues.append((cursor, cursor + length, sentence))
        cursor += length + SENTENCE_PAUSE_S
    return cues


def _plant_duplicate(
    out_dir: Path, playlist: dict[str, Any], truth_videos: list[dict[str, Any]], seed: int
) -> dict[str, str]:
    """Append a byte copy of an earlier episode, under a new title and id, to ``playlist``."""
    originals = list(playlist["videos"])
    source = random.Random(f"{seed}:duplicate").choice(originals)
    domain = playlist["domain"]
    number = len(originals) + 1
    entry = _video_entry(domain, number, f"{domain}-{number:02d}")
    shutil.copyfile(out_dir / source["path"], out_dir / entry["path"])
    shutil.copyfile(out_dir / source["captions"][0], out_dir / entry["captions"][0])
    original = next(v for v in truth_videos if v["id"] == source["id"])
    copy = json.loads(json.dumps(original))
    copy.update(
        id=entry["id"],
        title=entry["title"],
        path=entry["path"],
        captions=entry["captions"],
        duplicate_of=source["id"],
    )
    truth_videos.append(copy)
    playlist["videos"].append(entry)
    return {"id": entry["id"], "duplicate_of": source["id"], "playlist_id": playlist["id"]}


def write_mp4(
    path: Path,
    pictures: Sequence[tuple[npt.NDArray[np.uint8], int]],
    audio: FloatArray | None,
    fps: int,
) -> None:
    """Encode still pictures (each held for its frame count) plus a mono track to H.264/AAC;
    ``audio=None`` writes a file with no audio track (a caption-only video)."""
    height, width = pictures[0][0].shape[:2]
    with av.open(str(path), mode="w", format="mp4") as container:
        video = container.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        # One keyframe per few seconds keeps seeking cheap; ultrafast keeps encoding cheap.
        video.codec_context.gop_size = fps * 10
        video.codec_context.options = {"preset": "ultrafast", "tune": "stillimage"}
        sound = None
        if audio is not None:
            sound = container.add_stream("aac", rate=AUDIO_RATE, layout="mono")
            sound.codec_context.time_base = Fraction(1, AUDIO_RATE)
        pts = 0
        sample_at = 0
        chunk = 1024
        for image, count in pictures:
            # Convert each still once and resend the same frame: conversion dominates otherwise.
            frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p")
            frame.time_base = Fraction(1, fps)
            for _ in range(count):
                frame.pts = pts
                pts += 1
                container.mux(video.encode(frame))
            if audio is None or sound is None:
                continue
            # Interleave the audio up to the picture's end so players need not buffer much.
            until = min(len(audio), round(pts / fps * AUDIO_RATE))
            while sample_at < until:
                piece = audio[sample_at : min(sample_at + chunk, until)]
                aframe = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(piece.reshape(1, -1)), format="fltp", layout="mono"
                )
                aframe.sample_rate = AUDIO_RATE
                aframe.pts = sample_at
                aframe.time_base = Fraction(1, AUDIO_RATE)
                container.mux(sound.encode(aframe))
                sample_at += len(piece)
        container.mux(video.encode(None))
        if sound is not None:
            container.mux(sound.encode(None))


def _vtt_time(seconds: float) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def write_vtt(path: Path, cues: Sequence[Cue]) -> None:
    lines = ["WEBVTT", ""]
    for start, end, text in cues:
        lines += [f"{_vtt_time(start)} --> {_vtt_time(end)}", text, ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
