"""Ingest: turn a source (playlist URL, local folder or manifest) into videos on disk.

Three kinds of source are accepted by :func:`list_source`:

* an ``http(s)://`` URL that yt-dlp understands (YouTube playlist, RSS feed, a page with
  ``<video>`` tags, a single video); it is listed *flat* (no per-video requests) and each video
  is fetched later by :func:`download_video`;
* a local folder of videos, with sidecar captions (``stem.vtt``, ``stem.en.vtt``,
  ``stem.en-US.srt`` ...) next to each video; the folder is its own allowed root;
* a manifest file (``.json`` or ``.toml``) naming one or more playlists, each either by URL or as
  an explicit list of videos (local paths, ``file://`` URLs or remote URLs).

Local paths and ``file://`` URLs are only ever read when, after resolving symlinks and ``..``,
they lie inside an allowed root (the manifest's folder, the source folder, ``allowed_roots``);
anything else becomes a :class:`DroppedEntry` with the reason, as do missing files, private or
deleted videos and duplicate ids. A source that cannot be listed at all raises
:class:`~store.errors.IngestError`.

Episode re-sorting rule (:func:`sort_by_episode`): the videos whose titles carry an episode key
("Episode 4", "Ep. 12", "Part 3", "#7", "E05", "S02E03" ...) are sorted by that key, stably, *among
the slots they already occupy*; videos without a key stay exactly where they are.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
import tomllib
import unicodedata
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from store.errors import ConfigError, IngestError, UnsafeSourceError

__all__ = [
    "DroppedEntry",
    "PlaylistListing",
    "VideoEntry",
    "download_video",
    "episode_key",
    "list_source",
    "sort_by_episode",
]

VIDEO_SUFFIXES = frozenset(
    {".mp4", ".mkv", ".webm", ".mov", ".m4v", ".avi", ".mpg", ".mpeg", ".ts"}
)
CAPTION_SUFFIXES = frozenset({".vtt", ".srt"})
MANIFEST_SUFFIXES = frozenset({".json", ".toml"})

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]+$")
# A sidecar's middle part is a language tag: "en", "eng", "en-US", "pt-BR", "zh-Hans".
_LANG_TAG = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")
_YOUTUBE_ID = re.compile(r"(?:[?&]v=|youtu\.be/|/shorts/|/embed/|/live/)([A-Za-z0-9_-]{11})")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True)
class VideoEntry:
    """One video of a playlist, local or remote, in playlist order.

    ``video_id`` is citation-safe (``[A-Za-z0-9_-]`` only): YouTube ids as they are; local files
    get a slug of the stem plus 8 hex of the sha1 of the path relative to the source root, unless
    a manifest names an explicit id.
    """

    video_id: str
    title: str
    position: int
    path: Path | None
    url: str | None
    caption_paths: tuple[Path, ...]
    duration_s: float | None


@dataclass(frozen=True)
class DroppedEntry:
    """An entry that was not taken in, with the reason (private, deleted, unsafe path ...)."""

    ref: str
    title: str | None
    reason: str


@dataclass(frozen=True)
class PlaylistListing:
    """The videos of one playlist, the entries dropped from it and whether re-sorting moved any."""

    playlist_id: str
    title: str
    domain: str
    source: str
    videos: tuple[VideoEntry, ...]
    dropped: tuple[DroppedEntry, ...]
    reordered: bool


# --------------------------------------------------------------------------------------------
# Episode keys, re-sorting and trimming: pure functions over entries.
# --------------------------------------------------------------------------------------------

_NUM = r"(\d{1,4})"
# Tried in order; the first that matches decides the key. Season+episode forms come first so
# that "S02E03" is (2, 3) rather than the bare "E03".
_SEASON_EPISODE = (
    re.compile(rf"\bS{_NUM}\s*[._-]?\s*E{_NUM}\b", re.IGNORECASE),
    re.compile(rf"\b{_NUM}x{_NUM}\b", re.IGNORECASE),
    re.compile(rf"\bseason\s*{_NUM}\W{{0,3}}\s*(?:episode|ep\.?)\s*{_NUM}\b", re.IGNORECASE),
)
_SINGLE = (
    re.compile(
        rf"\b(?:episode|ep\.?|part|pt\.?|chapter|lecture|lesson)\s*(?:no\.?\s*)?{_NUM}\b",
        re.IGNORECASE,
    ),
    re.compile(rf"\bE{_NUM}\b"),
    re.compile(rf"#\s?{_NUM}\b"),
)


def episode_key(title: str) -> tuple[int, ...] | None:
    """Return the episode key a title carries, or ``None``.

    "Episode 4" → (4,), "Ep. 12" → (12,), "Part 3" → (3,), "#7" → (7,), "E05" → (5,),
    "S02E03" / "2x03" / "Season 2 Episode 3" → (2, 3). Only the first match counts.
    """
    for pattern in _SEASON_EPISODE:
        found = pattern.search(title)
        if found:
            return (int(found.group(1)), int(found.group(2)))
    for pattern in _SINGLE:
        found = pattern.search(title)
        if found:
            return (int(found.group(1)),)
    return None


def sort_by_episode(entries: Sequence[VideoEntry]) -> tuple[list[VideoEntry], bool]:
    """Re-sort videos by their episode keys; return the new list and whether the order changed.

    Keyed videos are sorted (stably) among the slots keyed videos occupy; videos without a key
    keep their slots. Positions are renumbered 0..n-1 in the returned order.
    """
    keys = [episode_key(entry.title) for entry in entries]
    slots = [index for index, key in enumerate(keys) if key is not None]

    def key_at(index: int) -> tuple[int, ...]:
        key = keys[index]
        assert key is not None  # only keyed slots are sorted
        return key

    ordered = sorted(slots, key=key_at)  # sorted() is stable: equal keys keep playlist order
    order = list(range(len(entries)))
    for slot, source in zip(slots, ordered, strict=True):
        order[slot] = source
    reordered = order != list(range(len(entries)))
    result = [replace(entries[source], position=pos) for pos, source in enumerate(order)]
    return result, reordered


def _entry_ref(video: VideoEntry) -> str:
    if video.url is not None:
        return video.url
    if video.path is not None:
        return str(video.path)
    return video.video_id


# --------------------------------------------------------------------------------------------
# Ids, roots and small helpers.
# --------------------------------------------------------------------------------------------


def _slug(text: str, *, fallback: str = "video", max_len: int = 48) -> str:
    """A citation-safe slug: ASCII letters, digits, ``_`` and ``-``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", ascii_text).strip("-_")
    slug = re.sub(r"-{2,}", "-", slug)[:max_len].strip("-_")
    return slug or fallback


def _sha8(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def _local_video_id(path: Path, root: Path) -> str:
    relative = path.relative_to(root).as_posix()
    return f"{_slug(path.stem)}-{_sha8(relative)}"


def _resolve_roots(roots: Iterable[Path]) -> tuple[Path, ...]:
    resolved: list[Path] = []
    for root in roots:
        path = Path(root).expanduser().resolve()
        if path not in resolved:
            resolved.append(path)
    return tuple(resolved)


def _root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    """The first allowed root that holds ``path`` (already resolved), or ``None``."""
    for root in roots:
        if path == root or path.is_relative_to(root):
            return root
    return None


def _outside_reason(given: str, roots: Sequence[Path]) -> str:
    listed = ", ".join(repr(str(root)) for root in roots)
    return (
        f"path {given!r} is outside the allowed roots [{listed}]; "
        "pass its folder as an allowed root to read it"
    )


def _name_problem(given: str) -> str | None:
    """Why ``given`` cannot name a file here, or None: a NUL character (no file name holds
    one) or bytes that are not UTF-8 (ids, the catalogue and exports hold text)."""
    if "\x00" in given:
        return f"path {given!r} holds a NUL character, which no file name can; fix the entry"
    try:
        given.encode("utf-8")
    except UnicodeEncodeError:
        return f"file name {given!r} is not UTF-8; rename the file"
    return None


def _file_url_to_path(url: str) -> Path:
    parsed = urllib.parse.urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise UnsafeSourceError(
            f"file URL {url!r} names host {parsed.netloc!r}; only local file:// URLs are read"
        )
    return Path(urllib.request.url2pathname(parsed.path))


def _sidecar_captions(video: Path, roots: Sequence[Path]) -> tuple[Path, ...]:
    """Caption files next to ``video``: ``stem.vtt``, ``stem.srt``, ``stem.<lang>.vtt|srt``."""
    found: list[Path] = []
    try:
        siblings = sorted(video.parent.iterdir())
    except OSError:
        return ()
    for candidate in siblings:
        if candidate.suffix.lower() not in CAPTION_SUFFIXES or not candidate.name.startswith(
            video.stem + "."
        ):
            continue
        middle = candidate.name[len(video.stem) + 1 : -len(candidate.suffix)]
        if middle and not _LANG_TAG.match(middle):
            continue
        resolved = candidate.resolve()
        # A sidecar symlinked out of the roots is not read, like any other outside path.
        if resolved.is_file() and _root_of(resolved, roots) is not None:
            found.append(resolved)
    return tuple(found)


def _empty_file(given: str, resolved: Path) -> str | None:
    """Why a local file is no video before anything decodes it: it holds no byte (a copy or
    download that never started), or it cannot be looked at. None when it has content."""
    try:
        size = resolved.stat().st_size
    except OSError as exc:
        return f"{given!r} cannot be read: {exc.strerror or exc}"
    if size == 0:
        return f"{given!r} is empty (0 bytes), not a video: copy the whole file and add it again"
    return None


def _probe_duration(path: Path) -> float | None:
    """The picture's length in seconds (what :func:`tools.index.media.probe` finds: sound that runs
    past the last frame does not count), or ``None`` when the file cannot be probed here.

    A file that cannot be read as a video is still listed: the media stage refuses it with its
    reason (a MediaError recorded against the video).
    """
    from tools.index import media

    try:
        return media.probe(path).duration_s
    except Exception:  # any decoder/container failure just means "unknown" at listing time
        return None


@dataclass
class _Collector:
    """Accumulates entries for one playlist, enforcing unique ids."""

    videos: list[VideoEntry] = field(default_factory=list)
    dropped: list[DroppedEntry] = field(default_factory=list)
    _titles_by_id: dict[str, str] = field(default_factory=dict)

    def add(self, entry: VideoEntry) -> None:
        first_title = self._titles_by_id.get(entry.video_id)
        if first_title is not None:
            self.drop(
                _entry_ref(entry),
                entry.title,
                f"duplicate video id {entry.video_id!r} (already used by {first_title!r})",
            )
            return
        self._titles_by_id[entry.video_id] = entry.title
        self.videos.append(entry)

    def drop(self, ref: str, title: str | None, reason: str) -> None:
        self.dropped.append(
            DroppedEntry(
                ref=_as_text(ref), title=None if title is None else _as_text(title), reason=reason
            )
        )


def _as_text(name: str) -> str:
    """``name`` as printable UTF-8 text: bytes of a file name that are not UTF-8 (which
    Python keeps as lone surrogates) and NUL are written as escapes, so the reason can be
    stored and printed."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _finish(
    playlist_id: str, title: str, domain: str, source: str, collector: _Collector
) -> PlaylistListing:
    videos, reordered = sort_by_episode(collector.videos)
    return PlaylistListing(
        playlist_id=playlist_id,
        title=title,
        domain=domain,
        source=source,
        videos=tuple(videos),
        dropped=tuple(collector.dropped),
        reordered=reordered,
    )


def _require_domain(domain: str | None, what: str) -> str:
    if domain is None or not domain.strip():
        raise IngestError(
            f'{what} has no domain: pass --domain NAME (or set "domain" in the manifest)'
        )
    return domain.strip()


# --------------------------------------------------------------------------------------------
# Local files: one entry from a path, a folder listing.
# --------------------------------------------------------------------------------------------


def _local_entry(
    collector: _Collector,
    given: str,
    candidate: Path,
    roots: Sequence[Path],
    *,
    title: str | None,
    explicit_id: str | None,
    captions: Sequence[str] | None,
    caption_base: Path,
) -> None:
    """Vet one local path (roots first, never reading outside them) and add or drop it."""
    problem = _name_problem(str(candidate))
    if problem is not None:
        collector.drop(given, title, problem)
        return
    resolved = candidate.expanduser().resolve()
    root = _root_of(resolved, roots)
    if root is None:
        collector.drop(given, title, _outside_reason(given, roots))
        return
    if not resolved.exists():
        collector.drop(given, title, f"file {given!r} does not exist (looked at {str(resolved)!r})")
        return
    if not resolved.is_file():
        collector.drop(given, title, f"path {given!r} is not a file")
        return
    problem = _empty_file(given, resolved)
    if problem is not None:
        collector.drop(given, title, problem)
        return
    if explicit_id is not None and not _SAFE_ID.match(explicit_id):
        collector.drop(
            given, title, f"id {explicit_id!r} is not citation-safe: use only [A-Za-z0-9_-]"
        )
        return
    if captions is None:
        caption_paths = _sidecar_captions(resolved, roots)
    else:
        vetted: list[Path] = []
        for caption in captions:
            problem = _name_problem(caption)
            if problem is not None:
                collector.drop(given, title, "caption " + problem)
                return
            caption_path = (caption_base / caption).expanduser().resolve()
            if _root_of(caption_path, roots) is None:
                collector.drop(given, title, "caption " + _outside_reason(caption, roots))
                return
            if not caption_path.is_file():
                collector.drop(given, title, f"caption file {caption!r} does not exist")
                return
            vetted.append(caption_path)
        caption_paths = tuple(vetted)
    collector.add(
        VideoEntry(
            video_id=explicit_id or _local_video_id(resolved, root),
            title=title or resolved.stem,
            position=len(collector.videos),
            path=resolved,
            url=None,
            caption_paths=caption_paths,
            duration_s=_probe_duration(resolved),
        )
    )


def _natural_key(path: Path) -> list[tuple[int, int | str]]:
    # "ep2" before "ep10": digits compare as numbers.
    parts = re.split(r"(\d+)", path.as_posix().lower())
    return [(1, int(part)) if part.isdigit() else (0, part) for part in parts if part]


def _unreadable(relative: Path, exc: OSError | RuntimeError) -> str:
    """Why an entry the walk found cannot be read: a symlink loop (``resolve`` raises
    RuntimeError for one before Python 3.13, OSError ELOOP after), or what the OS said."""
    loop = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
    reason = "a symlink loop" if loop else getattr(exc, "strerror", None) or exc
    return f"{str(relative)!r} cannot be read: {reason}"


def _vet_link(collector: _Collector, path: Path, relative: Path) -> None:
    """Drop, with its reason, a link the folder walk does not follow: one that cannot be
    resolved (a loop such as ``a -> a``, a dangling link) or one to a folder. The walk never
    descends through a linked folder, so a loop (``clips/loop -> ..``) cannot make it run
    forever; without a reason printed, though, the videos behind it would vanish unexplained."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        collector.drop(str(relative), path.name, _unreadable(relative, exc))
        return
    if not target.is_dir():
        return  # a link to a file that is not a video: nothing to take in, nothing lost
    if path.parent.resolve().is_relative_to(target):
        collector.drop(
            str(relative),
            path.name,
            f"{str(relative)!r} links to {str(target)!r}, a folder that holds it: a symlink loop, "
            "not followed",
        )
        return
    collector.drop(
        str(relative),
        path.name,
        f"{str(relative)!r} links to the folder {str(target)!r}; linked folders are not "
        "followed: add that folder as a source of its own",
    )


def _list_folder(
    folder: Path, source: str, domain: str | None, extra_roots: Sequence[Path]
) -> PlaylistListing:
    root = folder.resolve()
    roots = _resolve_roots([root, *extra_roots])
    collector = _Collector()
    found = [
        path
        for path in root.rglob("*")
        if not any(part.startswith(".") for part in path.relative_to(root).parts)
    ]
    candidates = [path for path in found if path.suffix.lower() in VIDEO_SUFFIXES]
    for path in sorted(found, key=lambda p: _natural_key(p.relative_to(root))):
        if path.suffix.lower() not in VIDEO_SUFFIXES and path.is_symlink():
            _vet_link(collector, path, path.relative_to(root))
    for path in sorted(candidates, key=lambda p: _natural_key(p.relative_to(root))):
        relative = path.relative_to(root)
        problem = _name_problem(str(relative))
        if problem is not None:
            collector.drop(str(relative), None, problem)
            continue
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            # A dangling link, a file gone meanwhile: dropped with its reason, the rest taken in.
            collector.drop(str(relative), path.stem, _unreadable(relative, exc))
            continue
        # Ids hash the path as found under the root, so a symlinked file keeps a stable id.
        if _root_of(resolved, roots) is None:
            collector.drop(str(relative), path.stem, _outside_reason(str(relative), roots))
            continue
        if not resolved.is_file():
            continue
        problem = _empty_file(str(relative), resolved)
        if problem is not None:
            collector.drop(str(relative), path.stem, problem)
            continue
        collector.add(
            VideoEntry(
                video_id=_local_video_id(path, root),
                title=path.stem,
                position=len(collector.videos),
                path=resolved,
                url=None,
                caption_paths=_sidecar_captions(path, roots),
                duration_s=_probe_duration(resolved),
            )
        )
    return _finish(
        _slug(root.name, fallback="folder"),
        root.name,
        _require_domain(domain, f"folder {source!r}"),
        source,
        collector,
    )


# --------------------------------------------------------------------------------------------
# yt-dlp: flat listing and per-video download.
# --------------------------------------------------------------------------------------------


class _QuietLogger:
    """A yt-dlp logger that prints nothing and keeps the messages for error reasons."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def debug(self, msg: str) -> None:
        """Ignore debug and info lines (yt-dlp sends both through ``debug``)."""

    def info(self, msg: str) -> None:
        """Ignore informational lines."""

    def warning(self, msg: str) -> None:
        """Keep warnings for the record."""
        self.messages.append(msg)

    def error(self, msg: str) -> None:
        """Keep errors for the record."""
        self.messages.append(msg)


def _base_ydl_options(logger: _QuietLogger) -> dict[str, Any]:
    return {
        "quiet": True,
        "no_warnings": True,
        "noprogress": True,
        "logger": logger,
        "socket_timeout": 30,
        "color": {"stdout": "never", "stderr": "never"},
    }


# Titles yt-dlp (YouTube) gives placeholder entries in a flat listing.
_PLACEHOLDER_TITLES = {
    "[private video]": "private video",
    "[deleted video]": "deleted video",
    "[unavailable video]": "unavailable video",
}
_UNAVAILABLE = {
    "private": "private video",
    "needs_auth": "needs sign-in",
    "subscriber_only": "subscribers / members only",
    "premium_only": "premium only",
}


def _listing_drop_reason(info: Mapping[str, Any]) -> str | None:
    title = str(info.get("title") or "").strip().lower()
    if title in _PLACEHOLDER_TITLES:
        return _PLACEHOLDER_TITLES[title]
    availability = info.get("availability")
    if isinstance(availability, str) and availability in _UNAVAILABLE:
        return _UNAVAILABLE[availability]
    if info.get("live_status") == "is_upcoming":
        return "upcoming live stream, not recorded yet"
    if info.get("ie_key") == "YoutubeTab" or info.get("_type") == "playlist":
        return "a nested playlist or channel tab, not a video: add it as its own source"
    return None


def _describe_failure(message: str) -> str:
    """A short, specific reason from a yt-dlp error message."""
    lowered = message.lower()
    status = re.search(r"http error (\d{3})", lowered)
    if status:
        code = status.group(1)
        kind = {"404": "deleted", "410": "deleted", "403": "private", "401": "private"}.get(
            code, "unavailable"
        )
        return f"{kind} / HTTP {code}"
    if "private video" in lowered:
        return "private video"
    if "removed" in lowered or "deleted" in lowered or "terminated" in lowered:
        return "deleted video"
    if "sign in" in lowered or "members-only" in lowered or "join this channel" in lowered:
        return "needs sign-in or membership"
    if "unavailable" in lowered or "not available" in lowered:
        return "unavailable video"
    return "download failed"


def _ydl_error_text(error: BaseException, logger: _QuietLogger) -> str:
    text = str(error).strip() or (logger.messages[-1] if logger.messages else type(error).__name__)
    return re.sub(r"^ERROR:\s*", "", text)


def _remote_video_id(info: Mapping[str, Any], url: str) -> str:
    raw_id = info.get("id")
    if isinstance(raw_id, str) and _SAFE_ID.match(raw_id):
        return raw_id
    youtube = _YOUTUBE_ID.search(url)
    if youtube:
        return youtube.group(1)
    stem = Path(urllib.parse.urlparse(url).path).stem or str(info.get("title") or "")
    return f"{_slug(stem)}-{_sha8(url)}"


def _unsmuggle(url: str) -> tuple[str, dict[str, Any]]:
    from yt_dlp.utils import unsmuggle_url

    plain, data = unsmuggle_url(url, {})
    return str(plain), dict(data or {})


def _add_ydl_entry(collector: _Collector, info: Mapping[str, Any], roots: Sequence[Path]) -> None:
    """Turn one flat-listing entry into a video or a dropped entry."""
    raw_url = info.get("url") or info.get("webpage_url")
    title = info.get("title")
    title_text = str(title) if title else None
    if not isinstance(raw_url, str) or not raw_url:
        ref = str(info.get("id") or title_text or "?")
        collector.drop(ref, title_text, "the listing gives no URL for this entry")
        return
    url, smuggled = _unsmuggle(raw_url)
    reason = _listing_drop_reason(info)
    if reason is not None:
        collector.drop(url, title_text, reason)
        return
    if url.lower().startswith("file:"):
        try:
            path = _file_url_to_path(url)
        except UnsafeSourceError as error:
            collector.drop(url, title_text, str(error))
            return
        _local_entry(
            collector,
            url,
            path,
            roots,
            title=title_text,
            explicit_id=None,
            captions=None,
            caption_base=path.parent,
        )
        return
    forced = smuggled.get("force_videoid")
    id_info = {**info, "id": forced} if isinstance(forced, str) else info
    duration = info.get("duration")
    video_id = _remote_video_id(id_info, url)
    collector.add(
        VideoEntry(
            video_id=video_id,
            title=title_text or video_id,
            position=len(collector.videos),
            path=None,
            url=url,
            caption_paths=(),
            duration_s=float(duration) if isinstance(duration, int | float) else None,
        )
    )


def _flat_listing(url: str, *, enable_file_urls: bool) -> dict[str, Any]:
    import yt_dlp

    logger = _QuietLogger()
    options = _base_ydl_options(logger)
    options["extract_flat"] = "in_playlist"
    # file:// is only opened for URLs already checked against the allowed roots.
    options["enable_file_urls"] = enable_file_urls
    try:
        with yt_dlp.YoutubeDL(options) as ydl:
            info = ydl.extract_info(url, download=False)
            clean = ydl.sanitize_info(info)
    except yt_dlp.utils.YoutubeDLError as error:
        text = _ydl_error_text(error, logger)
        raise IngestError(
            f"cannot list {url!r}: {_describe_failure(text)} ({text}); "
            "check the URL and that it is public"
        ) from error
    if not isinstance(clean, dict):
        raise IngestError(f"cannot list {url!r}: yt-dlp returned nothing")
    return clean


def _list_ydl(
    url: str,
    source: str,
    domain: str | None,
    roots: Sequence[Path],
    *,
    title: str | None = None,
    playlist_id: str | None = None,
) -> PlaylistListing:
    info = _flat_listing(url, enable_file_urls=url.lower().startswith("file:"))
    collector = _Collector()
    entries = info.get("entries")
    if info.get("_type") in ("playlist", "multi_video") or entries is not None:
        for entry in entries or ():
            if isinstance(entry, dict):
                _add_ydl_entry(collector, entry, roots)
            else:
                collector.drop(url, None, "the listing returned an empty entry")
    else:
        # A single video: a playlist of one.
        single = {**info, "url": info.get("webpage_url") or url}
        _add_ydl_entry(collector, single, roots)
    listed_title = title or str(info.get("title") or "") or url
    if playlist_id is None:
        raw_id = info.get("id")
        playlist_id = (
            raw_id
            if isinstance(raw_id, str) and _SAFE_ID.match(raw_id)
            else f"{_slug(listed_title, fallback='playlist')}-{_sha8(url)}"
        )
    return _finish(
        playlist_id,
        listed_title,
        _require_domain(domain, f"playlist {listed_title!r}"),
        source,
        collector,
    )


def _finished_media(media_dir: Path, video_id: str) -> Path | None:
    """A finished media file for ``video_id`` in ``media_dir`` (never a ``.part`` or a piece)."""
    for suffix in (".mp4", ".mkv", ".webm", ".mov", ".m4v"):
        candidate = media_dir / f"{video_id}{suffix}"
        if candidate.is_file() and candidate.stat().st_size > 0:
            return candidate
    return None


def _downloaded_captions(media_dir: Path, video_id: str) -> tuple[Path, ...]:
    found = [
        path
        for path in sorted(media_dir.glob(f"{video_id}.*"))
        if path.suffix.lower() in CAPTION_SUFFIXES and path.is_file()
    ]
    return tuple(path.resolve() for path in found)


def download_video(
    entry: VideoEntry,
    media_dir: Path,
    *,
    max_height: int = 720,
    subtitle_langs: Sequence[str] = ("en",),
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> VideoEntry:
    """Make sure ``entry``'s media is on disk; return the entry with ``path`` and captions set.

    A local entry is returned as it is (its file must exist). A remote one is fetched with yt-dlp
    into ``media_dir/<video_id>.<ext>`` (video at most ``max_height`` high, merged to mp4, manual
    and automatic subtitles in ``subtitle_langs``). A file already finished there is returned at
    once with no network access; a ``.part`` left by an interrupted run is resumed.
    Raises IngestError (with the reason: private, deleted / HTTP 404 ...) when it cannot be fetched.
    """
    if entry.path is not None and entry.url is None:
        if not entry.path.is_file():
            raise IngestError(
                f"local video {str(entry.path)!r} of {entry.video_id!r} no longer exists; "
                "list the source again"
            )
        return entry
    if entry.url is None:
        raise IngestError(f"entry {entry.video_id!r} has neither a path nor a URL; list it again")
    if not _SAFE_ID.match(entry.video_id):
        raise IngestError(
            f"video id {entry.video_id!r} is not citation-safe; use only [A-Za-z0-9_-]"
        )
    if _SCHEME.match(entry.url) is None or not entry.url.lower().startswith(
        ("http://", "https://")
    ):
        # file:// entries are turned into local paths by list_source, after the roots check.
        raise UnsafeSourceError(
            f"download_video only fetches http(s) URLs, got {entry.url!r}; "
            "list local files through list_source so they are checked against the allowed roots"
        )
    if max_height <= 0:
        raise ConfigError(f"max_height must be a positive number of pixels, got {max_height!r}")

    media_dir = Path(media_dir)
    media_dir.mkdir(parents=True, exist_ok=True)
    finished = _finished_media(media_dir, entry.video_id)
    if finished is not None:
        return replace(
            entry,
            path=finished.resolve(),
            caption_paths=_downloaded_captions(media_dir, entry.video_id),
        )

    import yt_dlp

    logger = _QuietLogger()
    options = _base_ydl_options(logger)
    # yt-dlp expands %(...)s in the template, so a literal '%' in the folder must be doubled.
    template = str(media_dir.resolve() / entry.video_id).replace("%", "%%") + ".%(ext)s"
    options.update(
        {
            "format": f"bv*[height<={max_height}]+ba/b[height<={max_height}]/b",
            "merge_output_format": "mp4",
            "outtmpl": {"default": template},
            "writesubtitles": True,
            "writeautomaticsub": True,
            "subtitleslangs": list(subtitle_langs),
            "subtitlesformat": "vtt/srt/best",
            "continuedl": True,
            "nopart": False,
            "overwrites": False,
            "noplaylist": True,
            "enable_file_urls": False,
        }
    )
    if progress is not None:
        options["progress_hooks"] = [progress]
    try:
        with yt_dlp.YoutubeDL(options) as ydl:
            ydl.extract_info(entry.url, download=True)
    except yt_dlp.utils.YoutubeDLError as error:
        text = _ydl_error_text(error, logger)
        raise IngestError(
            f"cannot download {entry.video_id!r} ({entry.title!r}) from {entry.url!r}: "
            f"{_describe_failure(text)} ({text}); the entry is skipped, the rest goes on"
        ) from error
    finished = _finished_media(media_dir, entry.video_id)
    if finished is None:
        raise IngestError(
            f"yt-dlp reported success for {entry.url!r} but no media file named "
            f"{entry.video_id + '.*'!r} is in {str(media_dir)!r}"
        )
    return replace(
        entry,
        path=finished.resolve(),
        caption_paths=_downloaded_captions(media_dir, entry.video_id),
    )


# --------------------------------------------------------------------------------------------
# Manifests.
# --------------------------------------------------------------------------------------------


class _ManifestEntry(BaseModel):
    """What a manifest's videos and playlists both may say: a URL, a title and an id; any other
    key is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = None
    title: str | None = None
    id: str | None = None


def _exactly_one(entry: str, **given: object) -> None:
    """ValueError unless exactly one of the ``given`` keys of a manifest ``entry`` is set."""
    if sum(value is not None for value in given.values()) != 1:
        names = " or ".join(f'"{name}"' for name in given)
        raise ValueError(f"{entry} needs exactly one of {names}")


class _ManifestVideo(_ManifestEntry):
    path: str | None = None
    captions: list[str] | None = None

    @model_validator(mode="after")
    def _one_location(self) -> _ManifestVideo:
        _exactly_one("a video", path=self.path, url=self.url)
        return self


class _ManifestPlaylist(_ManifestEntry):
    domain: str | None = None
    videos: list[_ManifestVideo] | None = None

    @model_validator(mode="after")
    def _one_content(self) -> _ManifestPlaylist:
        _exactly_one("a playlist", url=self.url, videos=self.videos)
        if self.videos is not None and not (self.title and self.title.strip()):
            raise ValueError('a playlist given as "videos" needs a "title"')
        return self


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    playlists: list[_ManifestPlaylist]


def _read_manifest(path: Path) -> _Manifest:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise IngestError(f"cannot read manifest {str(path)!r}: {error}") from error
    try:
        raw: object = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise IngestError(
            f"manifest {str(path)!r} is not valid {kind}: {error}; fix the file and run again"
        ) from error
    except RecursionError as error:  # both parsers recurse once per level of nesting
        raise IngestError(
            f"manifest {str(path)!r} nests its lists or tables too deeply to read (a manifest "
            "needs three levels); fix the file and run again"
        ) from error
    try:
        return _Manifest.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '(top)'}: {item['msg']}"
            for item in error.errors()
        )
        raise IngestError(
            f"manifest {str(path)!r} does not have the expected shape: {problems}"
        ) from error


def _list_manifest(
    manifest_path: Path, source: str, domain: str | None, extra_roots: Sequence[Path]
) -> list[PlaylistListing]:
    manifest_path = manifest_path.resolve()
    base = manifest_path.parent
    roots = _resolve_roots([base, *extra_roots])
    manifest = _read_manifest(manifest_path)
    listings: list[PlaylistListing] = []
    for number, playlist in enumerate(manifest.playlists):
        title = playlist.title.strip() if playlist.title else None
        name = title or playlist.url or f"#{number}"
        playlist_domain = _require_domain(playlist.domain or domain, f"playlist {name!r}")
        if playlist.id is not None and not _SAFE_ID.match(playlist.id):
            raise IngestError(
                f"manifest {str(manifest_path)!r}: playlist id {playlist.id!r} is not "
                "citation-safe; use only [A-Za-z0-9_-]"
            )
        if playlist.url is not None:
            listings.append(
                _manifest_url_playlist(
                    playlist.url, title, playlist.id, playlist_domain, source, roots
                )
            )
            continue
        assert title is not None
        assert playlist.videos is not None
        collector = _Collector()
        for video in playlist.videos:
            _add_manifest_video(collector, video, base, roots)
        listings.append(
            _finish(
                playlist.id or _slug(title, fallback="playlist"),
                title,
                playlist_domain,
                source,
                collector,
            )
        )
    return listings


def _manifest_url_playlist(
    url: str,
    title: str | None,
    playlist_id: str | None,
    domain: str,
    source: str,
    roots: Sequence[Path],
) -> PlaylistListing:
    """List a manifest playlist given by URL; a failure is recorded, not raised.

    One unreachable or unsafe playlist must not stop the others in the same manifest, so it
    comes back as an empty listing whose only dropped entry says why.
    """
    default_id = playlist_id or (_slug(title, fallback="playlist") if title else None)
    try:
        if url.lower().startswith("file:"):
            path = _file_url_to_path(url).resolve()
            if _root_of(path, roots) is None:
                raise UnsafeSourceError(_outside_reason(url, roots))
        elif not url.lower().startswith(("http://", "https://")):
            raise IngestError(f"playlist URL {url!r} must be http(s):// or file://")
        return _list_ydl(url, source, domain, roots, title=title, playlist_id=default_id)
    except IngestError as error:
        return PlaylistListing(
            playlist_id=default_id or f"playlist-{_sha8(url)}",
            title=title or url,
            domain=domain,
            source=source,
            videos=(),
            dropped=(DroppedEntry(ref=url, title=title, reason=str(error)),),
            reordered=False,
        )


def _add_manifest_video(
    collector: _Collector, video: _ManifestVideo, base: Path, roots: Sequence[Path]
) -> None:
    if video.path is not None:
        ref, path = video.path, base / video.path
    else:
        assert video.url is not None  # checked by the model
        ref = video.url
        if not ref.lower().startswith("file:"):
            _add_remote_manifest_video(collector, video, ref)
            return
        try:
            path = _file_url_to_path(ref)
        except UnsafeSourceError as error:
            collector.drop(ref, video.title, str(error))
            return
    _local_entry(
        collector,
        ref,
        path,
        roots,
        title=video.title,
        explicit_id=video.id,
        captions=video.captions,
        caption_base=base,
    )


def _add_remote_manifest_video(collector: _Collector, video: _ManifestVideo, url: str) -> None:
    """Add a manifest video given by a URL other than ``file:``: http(s) only, listed as is."""
    scheme = _SCHEME.match(url)
    if scheme is None or scheme.group(1).lower() not in ("http", "https"):
        collector.drop(url, video.title, f"URL {url!r} is neither http(s):// nor file://")
        return
    if video.id is not None and not _SAFE_ID.match(video.id):
        collector.drop(
            url, video.title, f"id {video.id!r} is not citation-safe: use only [A-Za-z0-9_-]"
        )
        return
    video_id = video.id or _remote_video_id({}, url)
    collector.add(
        VideoEntry(
            video_id=video_id,
            title=video.title or video_id,
            position=len(collector.videos),
            path=None,
            url=url,
            caption_paths=(),
            duration_s=None,
        )
    )


# --------------------------------------------------------------------------------------------
# The entry point.
# --------------------------------------------------------------------------------------------


def list_source(
    source: str, *, domain: str | None, allowed_roots: Sequence[Path] = ()
) -> list[PlaylistListing]:
    """List every playlist a source names: a URL, a local folder or a ``.json``/``.toml`` manifest.

    ``domain`` is the default for playlists that do not name one. ``allowed_roots`` are extra
    folders local paths and ``file://`` URLs may point into (a manifest's folder and a folder
    source are always allowed). Nothing is downloaded here.
    Raises IngestError when the source cannot be listed (missing, malformed, no domain).
    """
    text = source.strip()
    if not text:
        raise IngestError("the source is empty: pass a playlist URL, a folder or a manifest file")
    scheme = _SCHEME.match(text)
    if scheme is not None:
        name = scheme.group(1).lower()
        if name in ("http", "https"):
            return [_list_ydl(text, source, domain, _resolve_roots(allowed_roots))]
        if name != "file":
            raise IngestError(
                f"source {source!r} has an unsupported scheme {name!r}; use http(s)://, file:// "
                "or a local path"
            )
        path = _file_url_to_path(text)
    else:
        path = Path(text)
    path = path.expanduser()
    if not path.exists():
        raise IngestError(
            f"source {source!r} does not exist; pass a playlist URL, a folder or a manifest file"
        )
    if path.is_dir():
        return [_list_folder(path, source, domain, allowed_roots)]
    if path.suffix.lower() in MANIFEST_SUFFIXES:
        return _list_manifest(path, source, domain, allowed_roots)
    # Any other local file (an RSS feed, a page, one video): yt-dlp reads it, its folder a root.
    resolved = path.resolve()
    roots = _resolve_roots([resolved.parent, *allowed_roots])
    return [_list_ydl(resolved.as_uri(), source, domain, roots)]
