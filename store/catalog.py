"""The catalogue: what has been taken in and indexed, in one SQLite (or PostgreSQL) database.

Tables hold playlists, videos (with their status and, when they left the run, the reason),
30-second chunks (transcript and vector), segments, near-duplicate decisions, seeds and every
problem met along the way. Vectors are kept here as float32 bytes as well as in Qdrant: the
catalogue is the source of truth that dedupe and seeding read exactly, and Qdrant is the search
structure rebuilt from it if need be.

Writes of many rows go through SQLAlchemy Core (``executemany``), which DESIGN.md measured about
ten times faster than the ORM's ``add_all``.

Media paths (a video's file, its caption files) that lie inside the catalogue's root — the
workspace folder — are stored relative to it and handed back absolute, resolved against wherever
the root is now: a workspace copied or moved elsewhere still finds, indexes and serves its own
videos. Paths outside it stay absolute. Catalogues written before kept absolute paths; those
inside the root are made relative when the catalogue is opened.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, event, func, or_, update
from sqlalchemy import select as sa_select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlmodel import Field, Session, SQLModel, col, create_engine, delete, select

from store.errors import ConfigError, unreadable_database
from store.folders import make_folder
from store.sqlite import immutable_url, read_only, refuse_writes

if TYPE_CHECKING:
    import numpy as np

# Video status values. "listed": known, media not on disk yet; "ready": media on disk;
# "indexed": every chunk and segment stored; "failed": a recorded error stopped it; "duplicate":
# a near-duplicate of an earlier video, out of seeding; "reserve": beyond the domain's target hours.
LISTED, READY, INDEXED, FAILED, DUPLICATE, RESERVE = (
    "listed",
    "ready",
    "indexed",
    "failed",
    "duplicate",
    "reserve",
)
VIDEO_STATUSES = (LISTED, READY, INDEXED, FAILED, DUPLICATE, RESERVE)

_Row = TypeVar("_Row", bound=SQLModel)


class PlaylistRow(SQLModel, table=True):
    """A playlist as taken in by ``playlisteval add``."""

    __tablename__ = "playlists"
    id: str = Field(primary_key=True)
    title: str
    domain: str = Field(index=True)
    source: str
    reordered: bool = False
    added_seq: int = Field(default=0, description="Order in which playlists were added.")


class VideoRow(SQLModel, table=True):
    """One video of a playlist and where it stands."""

    __tablename__ = "videos"
    id: str = Field(primary_key=True)
    playlist_id: str = Field(index=True, foreign_key="playlists.id")
    domain: str = Field(index=True)
    position: int
    title: str
    url: str | None = None
    path: str | None = None
    captions: str = "[]"  # JSON list of paths
    duration_s: float | None = None
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    has_audio: bool | None = None
    status: str = Field(default=LISTED, index=True)
    reason: str | None = None
    duplicate_of: str | None = None
    transcript_source: str | None = None
    embedder: str | None = None


class ChunkRow(SQLModel, table=True):
    """A 30-second chunk: its transcript and its vector."""

    __tablename__ = "chunks"
    video_id: str = Field(primary_key=True, foreign_key="videos.id")
    idx: int = Field(primary_key=True)
    start_s: float
    end_s: float
    transcript: str
    vector: bytes


class SegmentRow(SQLModel, table=True):
    """Consecutive chunks of one video (10–30 minutes by default)."""

    __tablename__ = "segments"
    id: str = Field(primary_key=True)
    video_id: str = Field(index=True, foreign_key="videos.id")
    domain: str = Field(index=True)
    idx: int
    chunk_start: int
    chunk_end: int  # exclusive
    start_s: float
    end_s: float
    vector: bytes


class DuplicateRow(SQLModel, table=True):
    """A near-duplicate decision: ``video_id`` left seeding because of ``kept_video_id``."""

    __tablename__ = "duplicates"
    video_id: str = Field(primary_key=True, foreign_key="videos.id")
    kept_video_id: str
    segment_id: str
    kept_segment_id: str
    cosine: float


class SeedRow(SQLModel, table=True):
    """A seed: two segments of one domain, from different videos, related but distinct."""

    __tablename__ = "seeds"
    id: str = Field(primary_key=True)
    domain: str = Field(index=True)
    segment_a: str
    segment_b: str
    cosine: float
    active: bool = Field(default=True, index=True)


class ProblemRow(SQLModel, table=True):
    """Something that went wrong for one entry, kept with its reason; the run went on."""

    __tablename__ = "problems"
    id: int | None = Field(default=None, primary_key=True)
    stage: str = Field(index=True)
    ref: str = Field(index=True)
    reason: str
    playlist_id: str | None = None


class IndexRecordRow(SQLModel, table=True):
    """What one video's index was made with, stage by stage, in words the settings map to
    (``transcripts = "faster-whisper base"``, ``embeddings = "minilm-text+frame-stats; frames
    0.5 fps at 180p; ocr off"``): ``index`` compares them with what the settings make now and
    redoes the stages that differ. ``redo`` names a redo under way (set before it starts,
    cleared when the video is done), so one killed midway is taken up again. A video indexed
    before records were kept has none (its own table: older catalogues gain it empty)."""

    __tablename__ = "index_records"
    video_id: str = Field(primary_key=True, foreign_key="videos.id")
    chunks: str
    transcripts: str
    embeddings: str
    segments: str
    redo: str | None = None


class DomainTargetRow(SQLModel, table=True):
    """The hours a domain is kept at (``add --target-hours``, else ``ingest.target_hours`` when
    ``add`` applied it): ``index`` backfills a domain that near-duplicates left below it. Its
    own table: older catalogues gain it empty (no target recorded, nothing backfilled)."""

    __tablename__ = "domain_targets"
    domain: str = Field(primary_key=True)
    hours: float


class BackfillRow(SQLModel, table=True):
    """A video taken from reserve because its domain fell below its target after
    near-duplicates (or failures) were dropped: ``replaces`` names the dropped video whose gap
    it fills (None when no dropped video was left uncovered), ``reason`` says why in words and
    ``seq`` orders the backfills as they were made."""

    __tablename__ = "backfills"
    video_id: str = Field(primary_key=True, foreign_key="videos.id")
    domain: str = Field(index=True)
    replaces: str | None = None
    reason: str
    hours: float = 0.0
    seq: int = 0


@dataclass(frozen=True)
class DomainHours:
    """Hours of video per domain, split by status, with the domain's recorded target (None
    when none is) and how many videos were backfilled from its reserve."""

    domain: str
    videos: int
    hours_total: float
    hours_in_seeding: float
    hours_duplicate: float
    hours_failed: float
    hours_reserve: float
    hours_target: float | None = None
    videos_backfilled: int = 0


def vector_to_bytes(vector: np.ndarray) -> bytes:
    """float32 little-endian bytes of a 1-d vector."""
    import numpy as np  # not at import: `status` and `runs` read the catalogue without it

    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def vectors_from_bytes(blobs: Sequence[bytes]) -> np.ndarray:
    """Stack stored vectors into an (n, dim) float32 matrix."""
    import numpy as np

    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([np.frombuffer(b, dtype="<f4") for b in blobs]).astype(np.float32)


def _stored_path(path: str, root: Path | None) -> str:
    """``path`` as the catalogue keeps it: relative to ``root`` when it lies inside (``..``
    folded first, symlinks not followed), else as given."""
    if root is None or not path:
        return path
    candidate = Path(os.path.normpath(path))
    if candidate.is_absolute() and candidate != root and candidate.is_relative_to(root):
        return candidate.relative_to(root).as_posix()
    return path


def _shown_path(path: str, root: Path | None) -> str:
    """A stored path as readers get it: absolute, a relative one taken from ``root``."""
    if root is None or not path or Path(path).is_absolute():
        return path
    return str(root / path)


def _mapped_captions(
    captions: str, convert: Callable[[str, Path | None], str], root: Path | None
) -> str:
    """The JSON list of caption paths with ``convert(path, root)`` applied to each."""
    if root is None:
        return captions
    try:
        paths = json.loads(captions)
    except ValueError:  # not written by this module: kept as it is
        return captions
    if not isinstance(paths, list):
        return captions
    return json.dumps([convert(p, root) if isinstance(p, str) else p for p in paths])


def _put(session: Session, row: SQLModel, key: str) -> None:
    """Add ``row`` in place of the row its table holds under the primary key ``key``, if any."""
    existing = session.get(type(row), key)
    if existing is not None:
        session.delete(existing)
        session.flush()
    session.add(row)


# The root each engine's media paths are relative to: a view made over the same engine
# (``agents.evaluation.ReadCatalog`` passes only the engine) reads them as the opener wrote them.
_ROOTS: weakref.WeakKeyDictionary[Engine, Path] = weakref.WeakKeyDictionary()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (search, status) run while the indexer writes; NORMAL sync is durable at
    # every checkpoint and safe against a process kill, which is the crash the indexer must survive.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class Catalog:
    """Typed access to the catalogue tables. Open with :meth:`open`.

    ``root`` is the folder media paths inside of are stored relative to (see the module's
    docstring); None keeps every path as given.
    """

    def __init__(self, engine: Engine, root: Path | None = None) -> None:
        self.engine = engine
        if root is not None:
            _ROOTS[engine] = root.expanduser().resolve()
        self.root = _ROOTS.get(engine)

    @classmethod
    def open(cls, url_or_path: str | Path, *, root: Path | None = None) -> Catalog:
        """Open (and create) the catalogue at a SQLite path or an SQLAlchemy URL.

        ``root`` is the workspace folder; a SQLite file given by its path defaults it to the
        file's folder (the workspace's ``playlisteval.db`` lies at its root). A URL without a
        ``root`` keeps paths absolute.
        """
        url = str(url_or_path)
        if "://" not in url:
            path = Path(url).expanduser()
            root = path.parent if root is None else root
            if read_only(path):  # an archived workspace: read as it is (store/sqlite.py)
                engine = create_engine(immutable_url(path))
                return cls(refuse_writes(engine, f"the catalogue {str(path)!r}"), root)
            make_folder(path.parent, f"the catalogue's folder {str(path.parent)!r}")
            url = f"sqlite:///{path}"
        try:
            engine = create_engine(url)
        except Exception as exc:  # SQLAlchemy raises several types for a bad URL
            raise ConfigError(f"cannot open the catalogue at {url!r}: {exc}") from exc
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        try:
            SQLModel.metadata.create_all(engine)
        except OperationalError as exc:
            engine.dispose()
            raise ConfigError(f"cannot open the catalogue at {url!r}: {exc.orig}") from exc
        except DatabaseError as exc:  # a corrupt or truncated file, or not SQLite at all
            engine.dispose()
            raise unreadable_database(engine.url.database or url, exc.orig) from exc
        catalog = cls(engine, root)
        try:
            catalog._make_paths_relative()
        except OperationalError:
            pass  # locked or read-only now: the paths stay absolute, and still work here
        except DatabaseError as exc:  # rows past the schema that cannot be read
            engine.dispose()
            raise unreadable_database(engine.url.database or url, exc.orig) from exc
        return catalog

    def _make_paths_relative(self) -> None:
        """Store relative the absolute paths an older catalogue kept inside the root, so that
        the workspace can move from here on. Only rows naming the root are read."""
        if self.root is None:
            return
        table = VideoRow.__table__  # type: ignore[attr-defined]
        prefix = str(self.root)
        in_json = json.dumps(prefix)[1:-1]
        with self.engine.begin() as conn:
            rows = conn.execute(
                sa_select(table.c.id, table.c.path, table.c.captions).where(
                    or_(table.c.path.like(prefix + "%"), table.c.captions.like(f"%{in_json}%"))
                )
            ).all()
            for video_id, path, captions in rows:
                stored = self._stored(path, captions)
                if stored != (path, captions):
                    conn.execute(
                        table.update()
                        .where(table.c.id == video_id)
                        .values(path=stored[0], captions=stored[1])
                    )

    def _stored(self, path: str | None, captions: str) -> tuple[str | None, str]:
        """A video's path and captions as the catalogue keeps them."""
        return (
            None if path is None else _stored_path(path, self.root),
            _mapped_captions(captions, _stored_path, self.root),
        )

    def _shown(self, row: VideoRow) -> VideoRow:
        """``row`` (out of its session) with its paths absolute, as readers get them."""
        if row.path is not None:
            row.path = _shown_path(row.path, self.root)
        row.captions = _mapped_captions(row.captions, _shown_path, self.root)
        return row

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success and rolls back on error."""
        with Session(self.engine, expire_on_commit=False) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def _ordered(self, table: type[_Row], order: Any, where: Any, value: str | None) -> list[_Row]:
        """Every row of ``table`` by its ``order`` column; only those whose ``where`` column is
        ``value`` when one is given."""
        with self.session() as s:
            query = select(table).order_by(col(order))
            if value is not None:
                query = query.where(col(where) == value)
            return list(s.exec(query).all())

    # -- playlists and videos -------------------------------------------------------------

    def upsert_playlist(self, row: PlaylistRow) -> PlaylistRow:
        """Insert a playlist, or update its title/domain/source when it is already known."""
        with self.session() as s:
            existing = s.get(PlaylistRow, row.id)
            if existing is None:
                seq = s.exec(select(func.count()).select_from(PlaylistRow)).one()
                row.added_seq = int(seq)
                s.add(row)
                return row
            existing.title, existing.domain = row.title, row.domain
            existing.source, existing.reordered = row.source, row.reordered
            s.add(existing)
            return existing

    def upsert_video(self, row: VideoRow) -> VideoRow:
        """Insert a video, or refresh its listing fields while keeping its progress (a video
        that had failed is listed again: adding it again is asking for another try)."""
        path, captions = self._stored(row.path, row.captions)
        with self.session() as s:
            existing = s.get(VideoRow, row.id)
            if existing is None:
                row.path, row.captions = path, captions
                s.add(row)
                kept = row
            else:
                existing.playlist_id, existing.domain = row.playlist_id, row.domain
                existing.position, existing.title = row.position, row.title
                existing.url = row.url or existing.url
                existing.path = path or existing.path
                if captions != "[]":
                    existing.captions = captions
                if existing.status == FAILED:
                    # Added again (the file replaced or restored): the next index tries it anew.
                    existing.status, existing.reason = LISTED, None
                s.add(existing)
                kept = existing
        return self._shown(kept)

    def update_video(self, video_id: str, **fields: Any) -> None:
        """Set fields of one video."""
        if fields.get("path") is not None:
            fields["path"] = _stored_path(fields["path"], self.root)
        if "captions" in fields:
            fields["captions"] = _mapped_captions(fields["captions"], _stored_path, self.root)
        with self.session() as s:
            s.exec(update(VideoRow).where(col(VideoRow.id) == video_id).values(**fields))

    def video(self, video_id: str) -> VideoRow | None:
        """One video, or None."""
        with self.session() as s:
            found = s.get(VideoRow, video_id)
        return None if found is None else self._shown(found)

    def videos(
        self, *, statuses: Iterable[str] | None = None, domain: str | None = None
    ) -> list[VideoRow]:
        """Videos in seeding order: playlists by when they were added, then playlist position."""
        with self.session() as s:
            query = select(VideoRow).join(PlaylistRow)
            if statuses is not None:
                query = query.where(col(VideoRow.status).in_(list(statuses)))
            if domain is not None:
                query = query.where(VideoRow.domain == domain)
            query = query.order_by(col(PlaylistRow.added_seq), col(VideoRow.position))
            found = list(s.exec(query).all())
        return [self._shown(row) for row in found]

    def playlists(self) -> list[PlaylistRow]:
        """Every playlist, in the order they were added."""
        with self.session() as s:
            return list(s.exec(select(PlaylistRow).order_by(col(PlaylistRow.added_seq))).all())

    def captions_of(self, video: VideoRow) -> list[Path]:
        """The caption files recorded for a video."""
        return [Path(_shown_path(p, self.root)) for p in json.loads(video.captions)]

    # -- problems ---------------------------------------------------------------------------

    def record_problem(
        self, stage: str, ref: str, reason: str, playlist_id: str | None = None
    ) -> None:
        """Keep a reason for something that failed; the caller goes on with the rest."""
        with self.session() as s:
            s.add(ProblemRow(stage=stage, ref=ref, reason=reason, playlist_id=playlist_id))

    def problems(self, stage: str | None = None) -> list[ProblemRow]:
        """Recorded problems, oldest first."""
        return self._ordered(ProblemRow, ProblemRow.id, ProblemRow.stage, stage)

    # -- chunks and segments ------------------------------------------------------------------

    def done_chunks(self, video_id: str) -> set[int]:
        """Indexes of the chunks of a video already stored."""
        with self.session() as s:
            rows = s.exec(select(ChunkRow.idx).where(ChunkRow.video_id == video_id)).all()
            return set(rows)

    def add_chunks(self, rows: Sequence[ChunkRow]) -> None:
        """Store finished chunks in one transaction; re-adding one replaces it."""
        if not rows:
            return
        values = [r.model_dump() for r in rows]
        with self.engine.begin() as conn:
            if self.engine.dialect.name == "sqlite":
                stmt = sqlite_insert(ChunkRow.__table__).prefix_with("OR REPLACE")  # type: ignore[attr-defined]
                conn.execute(stmt, values)
            else:
                keys = [(r.video_id, r.idx) for r in rows]
                for video_id, idx in keys:
                    conn.execute(
                        delete(ChunkRow).where(
                            col(ChunkRow.video_id) == video_id, col(ChunkRow.idx) == idx
                        )
                    )
                conn.execute(ChunkRow.__table__.insert(), values)  # type: ignore[attr-defined]

    def chunks(self, video_id: str) -> list[ChunkRow]:
        """A video's chunks in time order."""
        with self.session() as s:
            query = (
                select(ChunkRow).where(ChunkRow.video_id == video_id).order_by(col(ChunkRow.idx))
            )
            return list(s.exec(query).all())

    def chunk_transcripts(self, video_id: str) -> list[tuple[float, float, str]]:
        """A video's chunks as ``(start_s, end_s, transcript)`` in time order, without their
        vectors (what a judge's transcript windows need, read at a fraction of the cost)."""
        with self.session() as s:
            query = (
                select(col(ChunkRow.start_s), col(ChunkRow.end_s), col(ChunkRow.transcript))
                .where(ChunkRow.video_id == video_id)
                .order_by(col(ChunkRow.idx))
            )
            return [(float(a), float(b), str(t)) for a, b, t in s.exec(query).all()]

    def chunk_count(self) -> int:
        """How many chunks are stored."""
        with self.session() as s:
            return int(s.exec(select(func.count()).select_from(ChunkRow)).one())

    def replace_segments(self, video_id: str, rows: Sequence[SegmentRow]) -> None:
        """Set a video's segments (all or nothing)."""
        with self.session() as s:
            s.exec(delete(SegmentRow).where(col(SegmentRow.video_id) == video_id))
            s.add_all(rows)

    def segments(
        self, *, video_ids: Iterable[str] | None = None, domain: str | None = None
    ) -> list[SegmentRow]:
        """Segments, ordered by video then position."""
        with self.session() as s:
            query = select(SegmentRow)
            if video_ids is not None:
                query = query.where(col(SegmentRow.video_id).in_(list(video_ids)))
            if domain is not None:
                query = query.where(SegmentRow.domain == domain)
            query = query.order_by(col(SegmentRow.video_id), col(SegmentRow.idx))
            return list(s.exec(query).all())

    def segment(self, segment_id: str) -> SegmentRow | None:
        """One segment, or None."""
        with self.session() as s:
            return s.get(SegmentRow, segment_id)

    def delete_chunks(self, video_id: str) -> None:
        """Forget a video's chunks and segments (its chunk grid changed: all are made again)."""
        with self.session() as s:
            s.exec(delete(SegmentRow).where(col(SegmentRow.video_id) == video_id))
            s.exec(delete(ChunkRow).where(col(ChunkRow.video_id) == video_id))

    # -- what each video's index was made with ------------------------------------------------

    def index_records(self) -> dict[str, IndexRecordRow]:
        """Every video's record of the settings its index was made with, by video id."""
        with self.session() as s:
            return {r.video_id: r for r in s.exec(select(IndexRecordRow)).all()}

    def set_index_record(self, row: IndexRecordRow) -> None:
        """Record (or replace) what a video's index was made with."""
        with self.session() as s:
            _put(s, IndexRecordRow(**row.model_dump()), row.video_id)

    def mark_redo(self, video_id: str, stage: str | None) -> None:
        """Note that ``stage`` of a video is being redone (None: the redo is over)."""
        with self.session() as s:
            s.exec(
                update(IndexRecordRow)
                .where(col(IndexRecordRow.video_id) == video_id)
                .values(redo=stage)
            )

    # -- duplicates and seeds -----------------------------------------------------------------

    def record_duplicate(self, row: DuplicateRow) -> None:
        """Mark ``row.video_id`` a near-duplicate and take it out of seeding."""
        with self.session() as s:
            _put(s, row, row.video_id)
            s.exec(
                update(VideoRow)
                .where(col(VideoRow.id) == row.video_id)
                .values(
                    status=DUPLICATE,
                    duplicate_of=row.kept_video_id,
                    reason=(
                        f"near-duplicate of {row.kept_video_id!r}: segment {row.segment_id!r} "
                        f"~ {row.kept_segment_id!r} at cosine {row.cosine:.3f}"
                    ),
                )
            )

    def duplicates(self) -> list[DuplicateRow]:
        """Every near-duplicate decision."""
        with self.session() as s:
            return list(s.exec(select(DuplicateRow).order_by(col(DuplicateRow.video_id))).all())

    def replace_seeds(self, rows: Sequence[SeedRow]) -> tuple[int, int]:
        """Make ``rows`` the active seeds; seeds no longer found stay, marked inactive.

        Returns (new seeds, retired seeds). Ids are stable, so a seed that later stages refer to
        keeps its id across recomputations.
        """
        wanted = {r.id: r for r in rows}
        table = SeedRow.__table__  # type: ignore[attr-defined]
        # Through SQLAlchemy Core, not ORM objects: a 7 × 100 h catalogue holds half a million
        # seeds (every same-domain pair in the band), and the ORM's per-row bookkeeping was most
        # of this step's time there (bench/RESULTS.md, campaign rehearsal).
        with self.engine.begin() as conn:
            existing: dict[str, bool] = {
                str(row[0]): bool(row[1])
                for row in conn.execute(sa_select(table.c.id, table.c.active))
            }
            flip_on = [i for i, active in existing.items() if not active and i in wanted]
            flip_off = [i for i, active in existing.items() if active and i not in wanted]
            for ids, active in ((flip_on, True), (flip_off, False)):
                for start in range(0, len(ids), 500):
                    batch = ids[start : start + 500]
                    conn.execute(table.update().where(table.c.id.in_(batch)).values(active=active))
            fresh = [
                {
                    "id": r.id,
                    "domain": r.domain,
                    "segment_a": r.segment_a,
                    "segment_b": r.segment_b,
                    "cosine": r.cosine,
                    "active": True,
                }
                for seed_id, r in wanted.items()
                if seed_id not in existing
            ]
            if fresh:
                conn.execute(table.insert(), fresh)
            return len(fresh), len(flip_off)

    def seeds_by_id(self, ids: Sequence[str]) -> list[SeedRow]:
        """Seeds by id, in the order given; unknown ids are left out."""
        with self.session() as s:
            found = {r.id: r for r in s.exec(select(SeedRow).where(col(SeedRow.id).in_(list(ids))))}
        return [found[i] for i in ids if i in found]

    def seeds(self, *, domain: str | None = None, active: bool = True) -> list[SeedRow]:
        """Seeds in their deterministic order (domain, then segment ids)."""
        with self.session() as s:
            query = select(SeedRow).where(SeedRow.active == active)
            if domain is not None:
                query = query.where(SeedRow.domain == domain)
            query = query.order_by(
                col(SeedRow.domain), col(SeedRow.segment_a), col(SeedRow.segment_b)
            )
            return list(s.exec(query).all())

    # -- targets and backfills ----------------------------------------------------------------

    def set_domain_target(self, domain: str, hours: float) -> None:
        """Record (or replace) the hours ``domain`` is kept at."""
        with self.session() as s:
            existing = s.get(DomainTargetRow, domain)
            if existing is None:
                s.add(DomainTargetRow(domain=domain, hours=hours))
            else:
                existing.hours = hours
                s.add(existing)

    def domain_targets(self) -> dict[str, float]:
        """Every recorded target, hours by domain."""
        with self.session() as s:
            return {r.domain: r.hours for r in s.exec(select(DomainTargetRow)).all()}

    def record_backfill(self, row: BackfillRow) -> BackfillRow:
        """Take ``row.video_id`` out of reserve (listed again, to be fetched and indexed) and
        record why, in one transaction: a kill leaves either both or neither. ``seq`` is set
        to the next number. Returns the row as stored."""
        with self.session() as s:
            count = s.exec(select(func.count()).select_from(BackfillRow)).one()
            stored = BackfillRow(**{**row.model_dump(), "seq": int(count)})
            s.add(stored)
            s.exec(
                update(VideoRow)
                .where(col(VideoRow.id) == row.video_id)
                .values(status=LISTED, reason=None)
            )
        return stored

    def backfills(self, domain: str | None = None) -> list[BackfillRow]:
        """Every backfill in the order it was made (of ``domain`` only, when given)."""
        return self._ordered(BackfillRow, BackfillRow.seq, BackfillRow.domain, domain)

    # -- reports ------------------------------------------------------------------------------

    def domain_hours(self) -> list[DomainHours]:
        """Hours per domain and status, with each domain's target and backfills, for the
        summaries."""
        targets = self.domain_targets()
        backfilled: dict[str, int] = {}
        for row in self.backfills():
            backfilled[row.domain] = backfilled.get(row.domain, 0) + 1
        per: dict[str, dict[str, float]] = {}
        counts: dict[str, int] = {}
        for video in self.videos():
            hours = (video.duration_s or 0.0) / 3600.0
            bucket = per.setdefault(video.domain, {})
            bucket[video.status] = bucket.get(video.status, 0.0) + hours
            counts[video.domain] = counts.get(video.domain, 0) + 1
        return [
            DomainHours(
                domain=domain,
                videos=counts[domain],
                hours_total=sum(b.values()),
                hours_in_seeding=b.get(INDEXED, 0.0) + b.get(READY, 0.0) + b.get(LISTED, 0.0),
                hours_duplicate=b.get(DUPLICATE, 0.0),
                hours_failed=b.get(FAILED, 0.0),
                hours_reserve=b.get(RESERVE, 0.0),
                hours_target=targets.get(domain),
                videos_backfilled=backfilled.get(domain, 0),
            )
            for domain, b in sorted(per.items())
        ]
