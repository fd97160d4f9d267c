"""One contract for the catalogue on every database it runs on: the workspace's SQLite file, and
PostgreSQL (``store.catalog_url``, workers on several machines). Subclasses only say how to
open a fresh one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine

from store.catalog import (
    FAILED,
    INDEXED,
    Catalog,
    ChunkRow,
    DuplicateRow,
    PlaylistRow,
    SeedRow,
    SegmentRow,
    VideoRow,
    vector_to_bytes,
    vectors_from_bytes,
)
from tests.conftest import PG_URL

VECTOR = np.arange(8, dtype=np.float32) / 8


def playlist(pid: str, domain: str = "cooking") -> PlaylistRow:
    return PlaylistRow(id=pid, title=f"{pid} title", domain=domain, source=f"/src/{pid}")


def video(vid: str, pid: str, position: int, *, domain: str = "cooking") -> VideoRow:
    return VideoRow(
        id=vid, playlist_id=pid, domain=domain, position=position, title=f"{vid}", duration_s=600.0
    )


# Ids whose byte order and a locale's collation disagree (case, "-" against "_", digits).
SEED_IDS = ["seed-B", "seed-a", "seed_a", "seed-10", "seed-9", "Seed-z"]


class CatalogContract:
    """The behaviour every catalogue backend shares."""

    def make_catalog(self, tmp_path: Path) -> Catalog:
        raise NotImplementedError

    @pytest.fixture
    def catalog(self, tmp_path: Path) -> Iterator[Catalog]:
        opened = self.make_catalog(tmp_path)
        yield opened
        opened.close()

    def _videos(self, catalog: Catalog) -> None:
        catalog.upsert_playlist(playlist("p1"))
        catalog.upsert_playlist(playlist("p2", "astronomy"))
        for n, vid in enumerate(("v-b", "v-a", "v_c")):
            catalog.upsert_video(video(vid, "p1", n))
        catalog.upsert_video(video("w1", "p2", 0, domain="astronomy"))

    def test_videos_are_upserted_updated_and_listed_by_status(self, catalog: Catalog) -> None:
        self._videos(catalog)
        catalog.update_video("v-a", status=INDEXED, duration_s=1200.0)
        catalog.update_video("w1", status=FAILED, reason="cannot decode")
        again = catalog.upsert_video(video("v-b", "p1", 0))  # the same id again: one row
        assert again.id == "v-b"
        assert {v.id for v in catalog.videos()} == {"v-b", "v-a", "v_c", "w1"}
        assert [v.id for v in catalog.videos(statuses=[INDEXED])] == ["v-a"]
        failed = catalog.video("w1")
        assert failed is not None
        assert (failed.status, failed.reason) == (FAILED, "cannot decode")
        assert catalog.video("nope") is None
        assert {p.id for p in catalog.playlists()} == {"p1", "p2"}

    def test_chunks_keep_their_vectors_and_say_which_are_done(self, catalog: Catalog) -> None:
        self._videos(catalog)
        rows = [
            ChunkRow(
                video_id="v-a",
                idx=i,
                start_s=30.0 * i,
                end_s=30.0 * (i + 1),
                transcript=f"chunk {i} — é",
                vector=vector_to_bytes(VECTOR + i),
            )
            for i in range(4)
        ]
        catalog.add_chunks(rows[:2])
        catalog.add_chunks(rows[1:])  # a resumed index adds what is new; a redo changes nothing
        assert catalog.done_chunks("v-a") == {0, 1, 2, 3}
        assert catalog.chunk_count() == 4
        chunks = catalog.chunks("v-a")
        assert [c.idx for c in chunks] == [0, 1, 2, 3]
        assert chunks[2].transcript == "chunk 2 — é"
        np.testing.assert_array_equal(vectors_from_bytes([chunks[3].vector])[0], VECTOR + 3)

    def test_segments_are_replaced_per_video(self, catalog: Catalog) -> None:
        self._videos(catalog)

        def segment(sid: str, vid: str, idx: int) -> SegmentRow:
            return SegmentRow(
                id=sid,
                video_id=vid,
                domain="cooking",
                idx=idx,
                chunk_start=idx * 20,
                chunk_end=idx * 20 + 20,
                start_s=600.0 * idx,
                end_s=600.0 * (idx + 1),
                vector=vector_to_bytes(VECTOR),
            )

        catalog.replace_segments("v-a", [segment("v-a#0", "v-a", 0), segment("v-a#1", "v-a", 1)])
        catalog.replace_segments("v-b", [segment("v-b#0", "v-b", 0)])
        catalog.replace_segments("v-a", [segment("v-a#0", "v-a", 0)])
        assert {s.id for s in catalog.segments()} == {"v-a#0", "v-b#0"}
        found = catalog.segment("v-b#0")
        assert found is not None
        assert found.end_s == 600.0
        assert catalog.segment("v-a#1") is None

    def test_seeds_are_replaced_retired_and_ordered_alike_on_every_backend(
        self, catalog: Catalog
    ) -> None:
        rows = [
            SeedRow(id=sid, domain="cooking", segment_a=sid, segment_b=f"{sid}~b", cosine=0.5)
            for sid in SEED_IDS
        ]
        assert catalog.replace_seeds(rows) == (len(rows), 0)
        # Byte order, whatever the database's locale would collate.
        assert [s.id for s in catalog.seeds()] == sorted(SEED_IDS)
        assert catalog.replace_seeds(rows[:3]) == (0, 3)
        assert [s.id for s in catalog.seeds()] == sorted(SEED_IDS[:3])
        assert {s.id for s in catalog.seeds(active=False)} == set(SEED_IDS[3:])
        assert [s.id for s in catalog.seeds_by_id(["seed-9", "seed-a", "missing"])] == [
            "seed-9",
            "seed-a",
        ]

    def test_problems_and_duplicates_are_kept(self, catalog: Catalog) -> None:
        self._videos(catalog)
        catalog.record_problem("ingest", "v-b", "no video stream", playlist_id="p1")
        catalog.record_problem("index", "v_c", "truncated file")
        catalog.record_duplicate(
            DuplicateRow(
                video_id="v_c",
                kept_video_id="v-a",
                segment_id="v_c#0",
                kept_segment_id="v-a#0",
                cosine=0.97,
            )
        )
        assert {(p.stage, p.ref) for p in catalog.problems()} == {
            ("ingest", "v-b"),
            ("index", "v_c"),
        }
        assert [p.ref for p in catalog.problems("index")] == ["v_c"]
        assert [d.video_id for d in catalog.duplicates()] == ["v_c"]

    def test_hours_per_domain_add_up(self, catalog: Catalog) -> None:
        self._videos(catalog)
        catalog.update_video("v-a", status=INDEXED)
        catalog.update_video("w1", status=FAILED)
        hours = {h.domain: h for h in catalog.domain_hours()}
        assert set(hours) == {"astronomy", "cooking"}
        assert hours["cooking"].videos == 3
        assert hours["cooking"].hours_total == pytest.approx(0.5)
        assert hours["astronomy"].hours_failed == pytest.approx(600.0 / 3600)


class TestSqliteCatalog(CatalogContract):
    """The workspace's SQLite file."""

    def make_catalog(self, tmp_path: Path) -> Catalog:
        return Catalog.open(tmp_path / "playlisteval.db")


@pytest.mark.postgres
class TestPostgresCatalog(CatalogContract):
    """A catalogue on the machine's PostgreSQL, in a fresh schema (dropped after)."""

    schema: str = ""

    def make_catalog(self, tmp_path: Path) -> Catalog:
        self.schema = f"t_{uuid.uuid4().hex[:16]}"
        engine = create_engine(PG_URL)
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{self.schema}"')
        engine.dispose()
        return Catalog.open(f"{PG_URL}?options=-csearch_path%3D{self.schema}")

    @pytest.fixture(autouse=True)
    def _drop_schema(self) -> Iterator[None]:
        yield
        if self.schema:
            engine = create_engine(PG_URL)
            with engine.begin() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            engine.dispose()


def test_a_catalogue_folder_that_cannot_be_made_is_one_project_error(tmp_path: Path) -> None:
    """A file where the catalogue's folder should be is a ConfigError naming that folder, not a
    bare OSError from deep in the store."""
    from store.errors import ConfigError

    (tmp_path / "in-the-way").write_text("a file, not a folder")
    with pytest.raises(ConfigError, match=r"cannot create the catalogue's folder .*in-the-way"):
        Catalog.open(tmp_path / "in-the-way" / "sub" / "catalog.db")
