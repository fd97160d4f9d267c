"""A generated campaign collection: N domains × H hours of playlists, cheap to make and to index.

The demo playlist (:mod:`tools.offline.synthetic`) is a tenth of an hour; the paper's collection is
seven
domains of about 100 hours each. :func:`make_campaign` writes a collection of any size in the
paper's shape — one playlist per domain of ``video_minutes`` episodes — made to be cheap on two
cores: small frames (128×96) at one frame a second, no audio track, WebVTT captions instead of
speech. What it keeps from the demo is what the evaluation measures: every 30-second chunk is one
scene (a background and one or two named shapes, never spoken of), so a visual fact is visible in
its own chunk only, and its narration names a term found nowhere else in the collection, so a
question about that moment can be found by a retriever and not by watching frames spread over a
100-hour haystack.

Generation is deterministic in the spec and resumable: videos already written (their captions
are written last) are kept, and a finished collection is returned as it is when asked again with
the same spec (``campaign.json`` records it).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import random
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from store.errors import ConfigError
from tools.offline.synthetic import (
    LABEL_WORDS,
    PALETTE,
    POSITIONS,
    SHAPE_KINDS,
    Shape,
    draw_scene,
    write_mp4,
    write_vtt,
)

__all__ = [
    "CAMPAIGN_DOMAINS",
    "PAPER_SCALE",
    "REHEARSAL_EPISODES",
    "CampaignSpec",
    "ForeignCollection",
    "campaign_videos",
    "check_collection",
    "make_campaign",
]

CHUNK_SECONDS = 30.0  # one scene per indexed chunk
SPEC_FILE = "campaign.json"
MANIFEST_FILE = "manifest.json"
REHEARSAL_EPISODES = 2  # seeds pair segments of two different videos of one domain

# Seven domains as the paper has; each episode draws its topic from its domain's terms, so
# episodes of one domain are related (shared vocabulary) but distinct (their own terms and name).
CAMPAIGN_DOMAINS: dict[str, tuple[str, ...]] = {
    "cooking": (
        "dough", "sauce", "broth", "pastry", "risotto", "marinade", "dumplings", "custard",
        "noodles", "caramel", "braise", "vinaigrette", "sourdough", "omelette", "stock", "glaze",
    ),
    "astronomy": (
        "telescope", "nebula", "galaxy", "eclipse", "comet", "asteroid", "quasar", "pulsar",
        "supernova", "parallax", "spectrum", "meteor", "orbit", "exoplanet", "cluster", "redshift",
    ),
    "woodworking": (
        "dovetail", "chisel", "mortise", "tenon", "veneer", "lathe", "bandsaw", "plane",
        "router", "joinery", "walnut", "oak", "cabinet", "clamp", "rasp", "shellac",
    ),
    "chemistry": (
        "titration", "catalyst", "solvent", "precipitate", "buffer", "isotope", "polymer",
        "reagent", "oxidation", "crystal", "distillation", "enzyme", "molarity", "ester",
        "electrolysis", "ligand",
    ),
    "gardening": (
        "compost", "seedling", "mulch", "pruning", "tomatoes", "trellis", "perennials",
        "irrigation", "bulbs", "hedge", "greenhouse", "roses", "cuttings", "soil", "herbs", "lawn",
    ),
    "cycling": (
        "derailleur", "cadence", "sprint", "peloton", "gearing", "saddle", "crankset", "climb",
        "descent", "tubeless", "drafting", "intervals", "chainring", "spokes", "helmet", "brakes",
    ),
    "pottery": (
        "clay", "wheel", "kiln", "glazing", "trimming", "slip", "porcelain", "stoneware",
        "coiling", "bisque", "firing", "wedging", "centering", "handles", "raku", "underglaze",
    ),
}  # fmt: skip

# A term no other chunk of the collection says: syllables joined to a pseudo-word.
_SYLLABLES = (
    "ka", "lo", "mi", "ra", "te", "vu", "zo", "ne", "pa", "si", "do", "fe", "gu", "ha", "ri",
    "bo", "ta", "le", "mo", "ve", "qui", "dra", "sten", "mar", "kol", "ven", "tor", "lin",
)  # fmt: skip
_TOPIC_TEMPLATES = (
    "We keep working on the {a} and the {b} for the {name} project.",
    "The {name} episode returns to the {a} before the {b} is ready.",
    "Here the {a} meets the {b}, as the {name} series promised.",
    "Patience with the {a} pays off once the {b} comes in, says the {name} guide.",
)
_ANCHOR_TEMPLATES = (
    "This step is called the {anchor} {c}.",
    "Remember the {anchor} {c} for later.",
    "Our notes file it under the {anchor} {c}.",
)


@dataclass(frozen=True)
class CampaignSpec:
    """What to generate: ``domains`` playlists (the first of :data:`CAMPAIGN_DOMAINS`) of about
    ``hours_per_domain`` hours each, in episodes of ``video_minutes`` minutes."""

    domains: int
    hours_per_domain: float
    video_minutes: float = 30.0
    width: int = 128
    height: int = 96
    fps: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.domains <= len(CAMPAIGN_DOMAINS):
            raise ConfigError(
                f"--domains must be between 1 and {len(CAMPAIGN_DOMAINS)} (the generator knows "
                f"{', '.join(CAMPAIGN_DOMAINS)}), got {self.domains!r}"
            )
        if not (math.isfinite(self.hours_per_domain) and 0 < self.hours_per_domain <= 1000):
            raise ConfigError(
                f"--hours-per-domain must be a number of hours in (0, 1000], got "
                f"{self.hours_per_domain!r}"
            )
        if not (math.isfinite(self.video_minutes) and 1 <= self.video_minutes <= 180):
            raise ConfigError(f"video_minutes must be in [1, 180], got {self.video_minutes!r}")

    @property
    def domain_names(self) -> tuple[str, ...]:
        """The domains generated, in order."""
        return tuple(CAMPAIGN_DOMAINS)[: self.domains]

    @property
    def hours(self) -> float:
        """Hours of video the collection holds in all (whole episodes)."""
        return self.domains * self.videos_per_domain * self.video_seconds / 3600.0

    @property
    def video_seconds(self) -> float:
        """One episode's length: whole chunks, at least one."""
        return max(1, round(self.video_minutes * 60 / CHUNK_SECONDS)) * CHUNK_SECONDS

    @property
    def videos_per_domain(self) -> int:
        """Episodes per domain: as many as make the hours asked, at least one."""
        return max(1, round(self.hours_per_domain * 3600 / self.video_seconds))

    def check_rehearsable(self) -> None:
        """ConfigError unless every domain gets at least :data:`REHEARSAL_EPISODES` episodes:
        a seed pairs segments of two different videos of one domain, so a domain of one episode
        has no seed, and a rehearsal of it would stop at curation, after generating and
        indexing."""
        if self.videos_per_domain >= REHEARSAL_EPISODES:
            return
        # videos_per_domain rounds half to even: 1.5 episodes' worth of hours makes two.
        least = (REHEARSAL_EPISODES - 0.5) * self.video_seconds / 3600.0
        shown = math.ceil(round(least * 1000, 6)) / 1000  # up to the next thousandth of an hour
        raise ConfigError(
            f"--hours-per-domain {self.hours_per_domain:g} makes {self.videos_per_domain} "
            f"episode of {self.video_seconds / 60:g} minutes a domain; a seed pairs segments of "
            f"two different episodes of a domain, so a rehearsal needs at least "
            f"{REHEARSAL_EPISODES}: give --hours-per-domain {shown:g} or more (or shorter "
            "episodes with --video-minutes, down to 1)"
        )


PAPER_SCALE = CampaignSpec(domains=7, hours_per_domain=100.0)


@dataclass(frozen=True)
class _Video:
    domain: str
    number: int
    spec: CampaignSpec

    @property
    def video_id(self) -> str:
        return f"{self.domain}-{self.number:04d}"

    def file(self, extension: str) -> str:
        """The episode's file of ``extension`` (``mp4``, ``vtt``), relative to the collection."""
        return f"{self.domain}/{self.video_id}.{extension}"


def campaign_videos(spec: CampaignSpec) -> list[dict[str, Any]]:
    """The manifest's playlists for ``spec`` (one per domain), without touching the disk."""
    playlists = []
    for domain in spec.domain_names:
        entries = [
            {
                "path": v.file("mp4"),
                "title": f"{domain.capitalize()} Episode {v.number}",
                "id": v.video_id,
                "captions": [v.file("vtt")],
            }
            for v in (_Video(domain, n, spec) for n in range(1, spec.videos_per_domain + 1))
        ]
        playlists.append(
            {
                "title": f"Campaign: {domain}",
                "domain": domain,
                "id": f"campaign-{domain}",
                "videos": entries,
            }
        )
    return playlists


def make_campaign(
    out_dir: Path,
    spec: CampaignSpec,
    *,
    workers: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Generate the collection of ``spec`` under ``out_dir`` and return its ``manifest.json``.

    Resumable: a video whose captions exist is kept; an ``out_dir`` holding another spec's
    collection is refused (ConfigError) rather than mixed. ``progress(done, total)`` hears of
    each video written.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / MANIFEST_FILE
    try:
        recorded = check_collection(out_dir, spec)
    except ForeignCollection as exc:
        raise ConfigError(f"{exc}: use another folder (or delete that one)") from exc
    if not recorded:
        _write_whole(out_dir / SPEC_FILE, json.dumps(asdict(spec), indent=2) + "\n")
    videos = [
        _Video(domain, n, spec)
        for domain in spec.domain_names
        for n in range(1, spec.videos_per_domain + 1)
    ]
    todo = [v for v in videos if not (out_dir / v.file("vtt")).exists()]
    done = len(videos) - len(todo)
    if progress is not None:
        progress(done, len(videos))
    if todo:
        # Spawned, not forked: a fork of a process that already runs threads (torch's pool, a
        # stage meter's sampler, a test runner's) can leave a lock held in the child, which then
        # waits forever inside the encoder (seen in CI: two writers asleep for 14 minutes).
        spawned = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=spawned) as pool:
            for _ in pool.map(_write_video, [out_dir] * len(todo), todo, chunksize=4):
                done += 1
                if progress is not None:
                    progress(done, len(videos))
    if not manifest.exists() or todo:
        _write_whole(manifest, json.dumps({"playlists": campaign_videos(spec)}, indent=2) + "\n")
    return manifest


class ForeignCollection(ConfigError):
    """A folder holds a collection generated for another spec, or a ``campaign.json`` that
    cannot be read as one. The message names the file and what differs; the caller adds what
    to do (another folder, or another workspace)."""


def check_collection(out_dir: Path, spec: CampaignSpec) -> bool:
    """Whether ``out_dir`` holds the collection of ``spec`` (False: it records none yet, so
    nothing was generated there). :class:`ForeignCollection` when its ``campaign.json``
    records another spec, or is torn, edited or not a file."""
    path = Path(out_dir) / SPEC_FILE
    if not path.exists() and not path.is_symlink():
        return False
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # not a file, UTF-8 or JSON (torn)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ForeignCollection(
            f"the campaign record {str(path)!r} cannot be read ({reason}), so what was "
            "generated beside it is unknown"
        ) from exc
    wanted = asdict(spec)
    if found == wanted:
        return True
    if not isinstance(found, dict):
        raise ForeignCollection(
            f"the campaign record {str(path)!r} holds a {type(found).__name__}, not the "
            "settings of a generated collection"
        )
    differences = [
        f"{key} {found.get(key)!r} there, {wanted.get(key)!r} asked"
        for key in sorted(set(found) | set(wanted))
        if found.get(key) != wanted.get(key)
    ]
    raise ForeignCollection(
        f"{str(out_dir)!r} holds a collection generated with other settings "
        f"({'; '.join(differences)})"
    )


def _write_whole(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a killed write leaves no torn record)."""
    partial = path.with_name(f"{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _pseudo_word(rng: random.Random, taken: set[str]) -> str:
    while True:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(4))
        if word not in taken:
            taken.add(word)
            return word


def _plan(video: _Video) -> list[tuple[str, tuple[Shape, ...], str, str]]:
    """Each chunk's (background, shapes, label, narration) of one episode, from its id alone.

    The anchor words are unique within the episode and, being four random syllables seeded by
    the episode, across the collection in all but rare collisions (which only make a retriever's
    job harder, as repeated phrases do in real footage).
    """
    spec = video.spec
    rng = random.Random(f"{spec.seed}:{video.video_id}")
    terms = CAMPAIGN_DOMAINS[video.domain]
    topic = rng.sample(terms, 3)
    taken: set[str] = set()
    name = _pseudo_word(rng, taken).capitalize()
    chunks = round(spec.video_seconds / CHUNK_SECONDS)
    plans = []
    for _ in range(chunks):
        background = rng.choice(list(PALETTE))
        count = rng.choice((1, 2))
        colours = rng.sample([c for c in PALETTE if c != background], count)
        positions = rng.sample(POSITIONS, count)
        shapes = tuple(
            Shape(rng.choice(SHAPE_KINDS), colour, position)
            for colour, position in zip(colours, positions, strict=True)
        )
        label = f"{rng.choice(LABEL_WORDS)} {rng.randrange(10, 100)}"
        a, b = rng.sample(topic, 2)
        said = rng.choice(_TOPIC_TEMPLATES).format(a=a, b=b, name=name)
        anchor = rng.choice(_ANCHOR_TEMPLATES).format(
            anchor=_pseudo_word(rng, taken), c=rng.choice(topic)
        )
        plans.append((background, shapes, label, f"{anchor} {said}"))
    return plans


def _write_video(out_dir: Path, video: _Video) -> None:
    """One episode: the mp4 (no audio track), then its captions (the mark that it is done)."""
    spec = video.spec
    plans = _plan(video)
    frames_per_chunk = round(CHUNK_SECONDS * spec.fps)
    pictures = [
        (draw_scene(bg, shapes, label, spec.width, spec.height), frames_per_chunk)
        for bg, shapes, label, _ in plans
    ]
    path = out_dir / video.file("mp4")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(path, pictures, None, spec.fps)
    cues = [
        (i * CHUNK_SECONDS + 1.0, (i + 1) * CHUNK_SECONDS - 1.0, text)
        for i, (_, _, _, text) in enumerate(plans)
    ]
    captions = out_dir / video.file("vtt")
    partial = captions.with_suffix(".vtt.partial")
    write_vtt(partial, cues)
    partial.replace(captions)  # whole, or not there: a rerun writes it again
