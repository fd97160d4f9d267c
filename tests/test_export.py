"""The benchmark export: a real curated workspace, exported and loaded back with `datasets`."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from datasets import Features, List, Value, Video, load_dataset
from huggingface_hub import DatasetCard
from PIL import Image
from typer.testing import CliRunner

from playlisteval import runs
from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.export import (
    FILES,
    check_export_target,
    clip_name,
    export_benchmark,
    size_category,
)
from playlisteval.settings import load_settings
from policies.pairs import JudgeVerdict, SelectedPair
from store.errors import ConfigError
from store.events import CallRecorded, ItemAccepted, pairs_stream, seed_stream
from tests.workspaces import copy_workspace
from tools.index import media

JUDGES = ("qwen3-vl-30b-a3b", "internvl3.5-8b")
SELECTION = {"difficulty_judges": list(JUDGES), "pairs_per_domain": 90, "seed": 7}

SPAN = {"video_id": Value("string"), "start_s": Value("float64"), "end_s": Value("float64")}
EXPECTED_FEATURES = Features(
    {
        "id": Value("string"),
        "prompt": Value("string"),
        "chosen": Value("string"),
        "rejected": Value("string"),
        "subset": Value("string"),
        "playlist_id": Value("string"),
        "domain": Value("string"),
        "chosen_rating": Value("int64"),
        "rejected_rating": Value("int64"),
        "gap": Value("int64"),
        "videos": List(
            {
                "id": Value("string"),
                "path": Value("string"),
                "url": Value("string"),
                "duration_s": Value("float64"),
            }
        ),
        "evidence": List(SPAN),
        "transcripts": List({**SPAN, "text": Value("string")}),
        "clips": List({**SPAN, "path": Value("string"), "frames": Value("string")}),
        "models": {
            "difficulty_judges": List(
                {
                    "judge": Value("string"),
                    "verdict_chosen_first": Value("string"),
                    "verdict_rejected_first": Value("string"),
                    "failed": Value("bool"),
                }
            )
        },
        "meta": {
            "seed_id": Value("string"),
            "run_id": Value("string"),
            "cost_micros": Value("int64"),
            "chosen_causal_record": Value("string"),
            "rejected_causal_record": Value("string"),
        },
        "provenance": {
            "offline": Value("bool"),
            "run_offline": Value("bool"),
            "generator": List(Value("string")),
            "distractor_generator": List(Value("string")),
            "checked_by": List(Value("string")),
            "judges": List(Value("string")),
        },
    }
)


def spec_pair_id(seed_id: str, chosen: int, rejected: int) -> str:
    """The pair id as the spec defines it."""
    return "pair-" + hashlib.sha1(f"{seed_id}|{chosen}|{rejected}".encode()).hexdigest()[:16]


def made_up_verdicts(chosen: int, rejected: int) -> tuple[JudgeVerdict, ...]:
    """Two judges; the first fails the pairs of small gaps in one order."""
    small = chosen - rejected <= 2
    return (
        JudgeVerdict(JUDGES[0], "A", "B" if small else "A", failed=small),
        JudgeVerdict(JUDGES[1], "A", "tie" if chosen == 5 else "A", failed=chosen == 5),
    )


def items_of(app: App, run_id: str, accepted: list[str]) -> dict[str, ItemAccepted]:
    """Each accepted seed's item, read straight from the log."""
    found: dict[str, ItemAccepted] = {}
    for seed_id in accepted:
        for stored in app.events.read_stream(seed_stream(run_id, seed_id)):
            event = stored.event()
            if isinstance(event, ItemAccepted):
                found[seed_id] = event
    return found


def all_pairs(app: App, run_id: str, accepted: list[str]) -> list[SelectedPair]:
    """All ten pairs of every accepted item, with made-up verdicts; the first item's pairs have
    no judges at all (an empty list must not break the Parquet or JSON types)."""
    pairs = []
    for n, seed_id in enumerate(sorted(accepted)):
        domain = app.catalog.seeds_by_id([seed_id])[0].domain
        for chosen in range(5, 0, -1):
            for rejected in range(chosen - 1, 0, -1):
                pairs.append(
                    SelectedPair(
                        pair_id=spec_pair_id(seed_id, chosen, rejected),
                        run_id=run_id,
                        seed_id=seed_id,
                        domain=domain,
                        chosen_rating=chosen,
                        rejected_rating=rejected,
                        judges=() if n == 0 else made_up_verdicts(chosen, rejected),
                    )
                )
    return pairs


@pytest.fixture(scope="module")
def curated(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the indexed demo with one small offline run (four seeds)."""
    home = tmp_path_factory.mktemp("export-run") / "ws"
    copy_workspace(demo_home, home)
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=4)
        assert len(report.accepted) >= 2, "the offline demo run should accept most seeds"
    return home, report.run_id


@pytest.fixture
def app(curated: tuple[Path, str]) -> Iterator[App]:
    """The curated workspace, opened."""
    with App(load_settings(curated[0])) as opened:
        yield opened


@pytest.fixture
def pairs(app: App, curated: tuple[Path, str]) -> list[SelectedPair]:
    """All pairs of the run's accepted items."""
    run_id = curated[1]
    accepted = [s.id for s in app.catalog.seeds() if items_of(app, run_id, [s.id])]
    return all_pairs(app, run_id, accepted)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The export's records, as the file holds them."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_json_and_parquet_load_with_the_schema_and_the_same_rows(
    app: App, pairs: list[SelectedPair], curated: tuple[Path, str], tmp_path: Path
) -> None:
    out = tmp_path / "bench"
    summary = export_benchmark(app, out, pairs, settings=SELECTION)
    assert summary.path == out.absolute()
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)

    cache = str(tmp_path / "hf-cache")
    from_json = load_dataset(
        "json", data_files=str(out / "pairs.jsonl"), split="train", cache_dir=cache
    )
    from_parquet = load_dataset(
        "parquet", data_files=str(out / "pairs.parquet"), split="train", cache_dir=cache
    )
    assert from_json.features == EXPECTED_FEATURES
    assert from_parquet.features == EXPECTED_FEATURES
    assert list(from_parquet.features) == list(EXPECTED_FEATURES)
    rows = from_json.to_list()
    assert rows == from_parquet.to_list()
    assert len(rows) == len(pairs) == summary.pairs
    assert [r["id"] for r in rows] == sorted(p.pair_id for p in pairs)

    # The texts are the logged item's answers at the pair's ratings.
    run_id = curated[1]
    items = items_of(app, run_id, sorted({p.seed_id for p in pairs}))
    for row in rows:
        item = items[row["meta"]["seed_id"]]
        by_rating = {a["rating"]: a for a in item.distractors["answers"]}
        by_rating[5] = {"answer": item.qa["gold_answer"], "causal_record": []}
        assert row["prompt"] == item.qa["question"]
        assert row["chosen"] == by_rating[row["chosen_rating"]]["answer"]
        assert row["rejected"] == by_rating[row["rejected_rating"]]["answer"]
        assert row["gap"] == row["chosen_rating"] - row["rejected_rating"] >= 1
        assert row["subset"] == row["domain"]
        assert json.loads(row["meta"]["rejected_causal_record"]) == json.loads(
            json.dumps(by_rating[row["rejected_rating"]]["causal_record"])
        )
        assert row["meta"]["run_id"] == run_id
        seed = app.catalog.seeds_by_id([row["meta"]["seed_id"]])[0]
        segments = [app.catalog.segment(seed.segment_a), app.catalog.segment(seed.segment_b)]
        assert [(e["video_id"], e["start_s"], e["end_s"]) for e in row["evidence"]] == [
            (s.video_id, s.start_s, s.end_s) for s in segments if s is not None
        ]
        assert all(t["text"] for t in row["transcripts"])
        assert {v["id"] for v in row["videos"]} == {e["video_id"] for e in row["evidence"]}
        # Paths are the export's own: relative to its folder, leading to the workspace's videos.
        assert all(not Path(v["path"]).is_absolute() for v in row["videos"])
        assert all((out / v["path"]).is_file() and v["url"] == "" for v in row["videos"])
        # Each evidence span has its clip entry; without with_clips none is bundled.
        assert [(c["video_id"], c["start_s"], c["end_s"]) for c in row["clips"]] == [
            (e["video_id"], e["start_s"], e["end_s"]) for e in row["evidence"]
        ]
        assert all(c["path"] == c["frames"] == "" for c in row["clips"])

    # Verdicts and the seed's cost come through as given and as logged.
    judged = next(p for p in pairs if p.judges)
    row = next(r for r in rows if r["id"] == judged.pair_id)
    assert [j["judge"] for j in row["models"]["difficulty_judges"]] == list(JUDGES)
    assert [j["failed"] for j in row["models"]["difficulty_judges"]] == [
        v.failed for v in judged.judges
    ]
    assert any(r["models"]["difficulty_judges"] == [] for r in rows)
    paid = sum(
        e.cost_micros
        for s in app.events.read_stream(seed_stream(run_id, judged.seed_id))
        if isinstance(e := s.event(), CallRecorded) and not e.replayed
    )
    assert row["meta"]["cost_micros"] == paid > 0

    manifest = json.loads((out / "manifest.json").read_text())
    assert {v["id"] for v in manifest["videos"]} == {v["id"] for r in rows for v in r["videos"]}
    assert len(manifest["clips"]) == 2 * len(rows)


def table_counts(card: str) -> tuple[dict[str, dict[int, int]], dict[int, int], int]:
    """The dataset card's domain × gap table, read back: cells, the total row, the grand total."""
    lines = card.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| domain |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    gaps = [int(h.removeprefix("gap ")) for h in header[1:-1]]
    cells: dict[str, dict[int, int]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        name, *values, total = [c.strip() for c in line.strip("|").split("|")]
        if name == "**total**":
            return cells, dict(zip(gaps, map(int, values), strict=True)), int(total)
        cells[name] = {g: int(v) for g, v in zip(gaps, values, strict=True) if int(v)}
        assert sum(cells[name].values()) == int(total)
    raise AssertionError("the card's table has no total row")


def test_card_and_benchmark_counts_match_the_records(
    app: App, pairs: list[SelectedPair], curated: tuple[Path, str], tmp_path: Path
) -> None:
    # A selection like the gate's: drop some pairs so the gaps are uneven.
    kept = [p for p in pairs if p.gap != 3 or p.chosen_rating == 5]
    summary = export_benchmark(app, tmp_path / "bench", kept, settings=SELECTION)
    out = summary.path
    records = read_jsonl(out / "pairs.jsonl")
    per_cell = Counter((r["domain"], r["gap"]) for r in records)
    per_domain = Counter(r["domain"] for r in records)
    per_gap = Counter(r["gap"] for r in records)

    card = (out / "README.md").read_text(encoding="utf-8")
    cells, gap_totals, total = table_counts(card)
    assert cells == {d: {g: n for (dd, g), n in per_cell.items() if dd == d} for d in per_domain}
    assert gap_totals == dict(per_gap)
    assert total == len(records) == len(kept)
    assert summary.per_domain == dict(per_domain)
    assert summary.per_gap == dict(per_gap)

    benchmark = json.loads((out / "benchmark.json").read_text())
    assert benchmark["version"] == "1"
    assert benchmark["counts"]["per_domain"] == dict(per_domain)
    assert benchmark["counts"]["per_gap"] == {str(g): n for g, n in per_gap.items()}
    # Who judged is the log's to say (provenance), not the selection settings'.
    assert benchmark["settings"]["selection"] == {
        k: v for k, v in SELECTION.items() if k != "difficulty_judges"
    }
    run_id = curated[1]
    assert benchmark["settings"]["runs"][run_id]["generation"]["max_attempts"] >= 1
    run_paid = sum(
        e.cost_micros
        for s in app.events.read_all(stream_prefix=seed_stream(run_id, ""))
        if isinstance(e := s.event(), CallRecorded) and not e.replayed
    )
    assert benchmark["cost_micros"] == summary.cost_micros == run_paid > 0
    assert f"({run_paid} micro-USD" in card

    videos = {v["id"]: v["duration_s"] for r in records for v in r["videos"]}
    hours = sum(videos.values()) / 3600
    assert f"{hours:.2f} hours" in card
    for needed in (
        'load_dataset("json", data_files={"test": "pairs.jsonl"}, split="test")',
        'load_dataset("parquet", data_files={"test": "pairs.parquet"}, split="test")',
        "own license",
        '"max_attempts"',
        "`meta`",
    ):
        assert needed in card


def test_same_input_gives_byte_identical_files(
    app: App, pairs: list[SelectedPair], tmp_path: Path
) -> None:
    first = export_benchmark(app, tmp_path / "a", pairs, settings=SELECTION)
    second = export_benchmark(app, tmp_path / "b", list(reversed(pairs)), settings=SELECTION)
    for name in FILES:
        assert (first.path / name).read_bytes() == (second.path / name).read_bytes(), name
    assert first.content_sha256 == second.content_sha256


def test_content_hash_follows_the_records_only(
    app: App, pairs: list[SelectedPair], tmp_path: Path
) -> None:
    base = export_benchmark(app, tmp_path / "base", pairs, settings=SELECTION)
    jsonl = (base.path / "pairs.jsonl").read_bytes()
    assert base.content_sha256 == hashlib.sha256(jsonl).hexdigest()
    benchmark = json.loads((base.path / "benchmark.json").read_text())
    assert benchmark["content_sha256"] == base.content_sha256

    other_settings = export_benchmark(app, tmp_path / "s", pairs, settings={"seed": 8})
    assert other_settings.content_sha256 == base.content_sha256

    judged = next(i for i, p in enumerate(pairs) if p.judges)
    flipped = list(pairs)
    verdicts = flipped[judged].judges
    flipped[judged] = replace(
        flipped[judged], judges=(replace(verdicts[0], failed=not verdicts[0].failed),)
    )
    changed = export_benchmark(app, tmp_path / "changed", flipped, settings=SELECTION)
    assert changed.content_sha256 != base.content_sha256

    fewer = export_benchmark(app, tmp_path / "fewer", pairs[1:], settings=SELECTION)
    assert fewer.content_sha256 != base.content_sha256


def test_export_into_an_earlier_export_replaces_it_whole_or_not_at_all(
    app: App, pairs: list[SelectedPair], tmp_path: Path
) -> None:
    out = tmp_path / "exports" / "bench"
    export_benchmark(app, out, pairs, settings=SELECTION)
    (out / "stale.txt").write_text("left from an older export")

    subset = [p for p in pairs if p.gap == 1]
    summary = export_benchmark(app, out, subset, settings=SELECTION)
    assert summary.pairs == len(subset)
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    assert len(read_jsonl(out / "pairs.jsonl")) == len(subset)
    before = {name: (out / name).read_bytes() for name in FILES}

    # A failure while the files are written (a verdict Parquet cannot store as a bool) ...
    judged = next(i for i, p in enumerate(subset) if p.judges)
    broken = list(subset)
    verdict = replace(broken[judged].judges[0], failed="maybe")  # type: ignore[arg-type]
    broken[judged] = replace(broken[judged], judges=(verdict,))
    with pytest.raises(pa.ArrowException, match="bool"):
        export_benchmark(app, out, broken, settings=SELECTION)
    # ... and one found before writing (a pair of a seed with no item) leave the export as it was.
    missing = replace(subset[0], seed_id="seed-not-curated", pair_id="pair-missing")
    with pytest.raises(ConfigError):
        export_benchmark(app, out, [*subset, missing], settings=SELECTION)
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert [p.name for p in out.parent.iterdir()] == ["bench"], "a staging folder was left"


def test_what_a_killed_export_left_is_swept_and_an_export_moved_aside_comes_back(
    app: App, pairs: list[SelectedPair], tmp_path: Path
) -> None:
    """kill -9 mid-export leaves a staging folder, or (between its two renames) the earlier
    export moved aside and none in place: the next export removes the one, restores the other
    before replacing it, and leaves only the export."""
    out = tmp_path / "exports" / "bench"
    export_benchmark(app, out, pairs, settings=SELECTION)
    staged = out.parent / ".bench.new-killed"
    staged.mkdir()
    (staged / "pairs.jsonl").write_text("half")
    aside = out.parent / ".bench.old-killed"
    os.rename(out, aside)
    summary = export_benchmark(app, out, pairs[:2], settings=SELECTION)
    assert summary.pairs == 2
    assert [p.name for p in out.parent.iterdir()] == ["bench"]
    assert len(read_jsonl(out / "pairs.jsonl")) == 2


def test_a_folder_that_is_not_an_export_is_never_replaced(
    app: App, pairs: list[SelectedPair], tmp_path: Path
) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "thesis.tex").write_text("months of work")
    with pytest.raises(ConfigError, match="other than an earlier export"):
        export_benchmark(app, out, pairs, settings=SELECTION)
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_benchmark(app, empty, pairs[:3]).pairs == 3


def test_a_pair_of_a_seed_without_an_accepted_item_is_named(
    app: App, pairs: list[SelectedPair], curated: tuple[Path, str], tmp_path: Path
) -> None:
    run_id = curated[1]
    curated_seeds = {p.seed_id for p in pairs}
    other = next(s for s in app.catalog.seeds() if s.id not in curated_seeds)
    stray = replace(pairs[0], seed_id=other.id, pair_id=spec_pair_id(other.id, 5, 4))
    with pytest.raises(ConfigError, match=re.escape(repr(other.id))) as raised:
        export_benchmark(app, tmp_path / "bench", [*pairs, stray])
    assert repr(run_id) in str(raised.value)
    assert not (tmp_path / "bench").exists()


def test_a_rating_the_item_does_not_have_is_refused(
    app: App, pairs: list[SelectedPair], tmp_path: Path
) -> None:
    bad = replace(pairs[0], chosen_rating=6, pair_id="pair-six")
    with pytest.raises(ConfigError, match="no answer rated 6"):
        export_benchmark(app, tmp_path / "bench", [bad])


def test_a_curated_run_exports_through_the_difficulty_gate(
    app: App, curated: tuple[Path, str], pairs: list[SelectedPair], tmp_path: Path
) -> None:
    """The product path (`playlisteval export`): the run's pairs go through the offline weak
    judges, the selection is exported, and `datasets` reads it back with the card's counts."""
    from datasets import load_dataset

    progress = Steps()
    summary = runs.export(app, tmp_path / "bench", curated[1], per_domain=6, progress=progress)
    records = read_jsonl(summary.path / "pairs.jsonl")
    assert records
    assert len(records) == summary.pairs
    # Every exported pair was failed by at least one difficulty judge, as the gate keeps them;
    # the judges are named as what answered: the offline provider, in the configured ones' place.
    configured = app.settings.models.difficulty_judges
    for record in records:
        judges = record["models"]["difficulty_judges"]
        assert {j["judge"] for j in judges} == {f"offline:{j}" for j in configured}
        assert record["provenance"]["judges"] == sorted(f"offline:{j}" for j in configured)
        assert any(j["failed"] for j in judges)
    cache = str(tmp_path / "hf-cache")
    as_json = load_dataset(
        "json", data_files=str(summary.path / "pairs.jsonl"), split="train", cache_dir=cache
    )
    as_parquet = load_dataset(
        "parquet", data_files=str(summary.path / "pairs.parquet"), split="train", cache_dir=cache
    )
    assert as_json.num_rows == as_parquet.num_rows == len(records)
    assert sorted(as_json["id"]) == sorted(as_parquet["id"]) == sorted(r["id"] for r in records)
    cells, gap_totals, total = table_counts((summary.path / "README.md").read_text("utf-8"))
    assert total == len(records)
    assert gap_totals == dict(Counter(r["gap"] for r in records))
    per_domain = Counter(r["domain"] for r in records)
    assert {d: sum(by_gap.values()) for d, by_gap in cells.items()} == dict(per_domain)
    # The bars heard every step: each candidate pair decided once, then each item read.
    assert progress.steps[0] == ["pairs judged", len(pairs), len(pairs)]
    assert progress.steps[1][0] == "items read"
    assert progress.steps[1][1] == progress.steps[1][2] >= 1
    # The judges' calls are priced into the benchmark's cost, apart from the curation's.
    benchmark = json.loads((summary.path / "benchmark.json").read_text())
    judged = sum(
        e.cost_micros
        for s in app.events.read_stream(pairs_stream(curated[1]))
        if isinstance(e := s.event(), CallRecorded) and not e.replayed
    )
    assert benchmark["selection_cost_micros"] == judged > 0
    # Exporting again reuses the selection in the log: no judge is asked (or paid) twice.
    again = runs.export(app, tmp_path / "bench2", curated[1], per_domain=6)
    assert again.content_sha256 == summary.content_sha256


class Steps:
    """Hears an export's progress as the CLI's bars do: each step's label, size and advances."""

    def __init__(self) -> None:
        self.steps: list[list[Any]] = []

    def begin(self, label: str, total: int) -> None:
        self.steps.append([label, total, 0])

    def advance(self) -> None:
        self.steps[-1][2] += 1


def strings(value: Any) -> Iterator[str]:
    """Every string anywhere in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def card_metadata(card: str) -> dict[str, Any]:
    """The dataset card's YAML front matter, parsed as the Hub parses it."""
    assert card.startswith("---\n")
    loaded = yaml.safe_load(card.split("\n---\n", 1)[0].removeprefix("---\n"))
    assert isinstance(loaded, dict)
    return loaded


def test_an_export_with_clips_loads_from_a_copy_moved_elsewhere(
    app: App, pairs: list[SelectedPair], tmp_path: Path
) -> None:
    """With clips bundled, the export holds every evidence span's clip and the frames a judge
    is shown of it; no record holds an absolute path; a copy moved to another folder loads with
    `datasets` (the card's own configs, and each file) and finds every clip and frame; the
    card's Hub metadata parses."""
    items = sorted({p.seed_id for p in pairs})[:2]
    chosen = [p for p in pairs if p.seed_id in items]
    progress = Steps()
    summary = export_benchmark(
        app,
        tmp_path / "made" / "bench",
        chosen,
        settings=SELECTION,
        with_clips=True,
        progress=progress,
    )
    spans = {
        (e["video_id"], e["start_s"], e["end_s"])
        for r in read_jsonl(summary.path / "pairs.jsonl")
        for e in r["evidence"]
    }
    assert summary.clips == len(spans) >= 2
    assert progress.steps == [["items read", 2, 2], ["clips bundled", len(spans), len(spans)]]
    assert sorted(p.name for p in summary.path.iterdir()) == sorted([*FILES, "clips"])

    moved = tmp_path / "elsewhere" / "copy"
    moved.parent.mkdir()
    shutil.copytree(summary.path, moved)
    shutil.rmtree(tmp_path / "made")  # nothing of the original is left to lean on

    records = read_jsonl(moved / "pairs.jsonl")
    assert len(records) == len(chosen)
    for text in strings(records):
        assert not text.startswith("/"), text
    manifest = json.loads((moved / "manifest.json").read_text())
    bundled = {(c["video_id"], c["start_s"], c["end_s"]): c for c in manifest["bundle"]["clips"]}
    assert set(bundled) == spans
    for record in records:
        for clip in record["clips"]:
            assert (moved / clip["path"]).is_file()
            frames = sorted((moved / clip["frames"]).glob("*.jpg"))
            listed = bundled[(clip["video_id"], clip["start_s"], clip["end_s"])]["frames"]
            assert [moved / f["path"] for f in listed] == frames
            # The frames a judge is shown: 0.5 fps over the span, at their times in the video.
            times = [f["t_s"] for f in listed]
            span_s = clip["end_s"] - clip["start_s"]
            assert len(times) == math.ceil(span_s * 0.5)
            assert all(clip["start_s"] <= t < clip["end_s"] for t in times)
            with Image.open(frames[0]) as first:
                assert first.height <= 720
    for clip in bundled.values():
        info = media.probe(moved / clip["path"])
        assert info.has_audio  # as the generators were sent it

    card = (moved / "README.md").read_text(encoding="utf-8")
    meta = card_metadata(card)
    assert meta["license"] == "other"
    assert (moved / meta["license_link"]).is_file()
    assert meta["task_categories"] == ["video-text-to-text", "visual-question-answering"]
    assert meta["size_categories"] == ["n<1K"]
    assert "offline-harness" in meta["tags"]
    assert meta["configs"] == [
        {"config_name": "default", "data_files": [{"split": "test", "path": "pairs.parquet"}]}
    ]
    assert DatasetCard.load(moved / "README.md").data.to_dict()["license"] == "other"

    cache = str(tmp_path / "hf-cache")
    by_card = load_dataset(str(moved), split="test", cache_dir=cache)
    from_json = load_dataset(
        "json", data_files={"test": str(moved / "pairs.jsonl")}, split="test", cache_dir=cache
    )
    assert from_json.features == EXPECTED_FEATURES
    # The Parquet (the card's config, and so the Hub) adds each clip itself as a Video.
    clip_fields = dict(EXPECTED_FEATURES["clips"].feature)
    with_video = Features({**EXPECTED_FEATURES, "clips": List({**clip_fields, "video": Video()})})
    assert by_card.features == with_video
    raw = by_card.cast_column("clips", List({**clip_fields, "video": Video(decode=False)}))
    rows = raw.to_list()
    for row in rows:
        for clip in row["clips"]:
            video = clip.pop("video")
            assert video["path"] == clip["path"]
            assert video["bytes"] == (moved / clip["path"]).read_bytes()
    assert rows == from_json.to_list() == records


@pytest.mark.parametrize(
    ("count", "bucket"), [(0, "n<1K"), (999, "n<1K"), (1000, "1K<n<10K"), (630, "n<1K")]
)
def test_the_size_category_is_the_hub_bucket_of_the_pairs(count: int, bucket: str) -> None:
    assert size_category(count) == bucket


@pytest.mark.parametrize("name", ["bench.parquet", "pairs.jsonl", "x.JSON", "out.csv"])
def test_a_target_named_like_a_data_file_is_refused_and_nothing_is_made(
    tmp_path: Path, curated: tuple[Path, str], name: str
) -> None:
    target = tmp_path / name
    with pytest.raises(ConfigError, match="an export is a folder"):
        check_export_target(target)
    result = CliRunner().invoke(cli_app, ["export", str(target), "--home", str(curated[0])])
    assert result.exit_code == 2, result.output
    assert "give a folder, e.g." in " ".join(result.output.split())
    assert not target.exists()


@pytest.mark.parametrize(
    ("video_id", "safe"),
    [("cooking-01", "cooking-01_"), ("a/b c", "a_b_c-")],
)
def test_a_clip_name_is_safe_for_any_file_system(video_id: str, safe: str) -> None:
    name = clip_name(video_id, 60.0, 90.5)
    assert name.startswith(safe)
    assert name.endswith("_000060000-000090500")
    assert "/" not in name


def documented_loads(card: str, folder: Path) -> list[str]:
    """The card's `load_dataset` lines, with the folder put in for its placeholder."""
    block = card.split("## Loading", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    return [
        line.replace("path/to/this/folder", str(folder))
        for line in block.splitlines()
        if "load_dataset(" in line and not line.startswith("from ")
    ]


@pytest.mark.parametrize("with_clips", [False, True])
def test_every_documented_way_of_loading_gives_the_one_test_split(
    app: App,
    pairs: list[SelectedPair],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    with_clips: bool,
) -> None:
    """Each load line of the card, run as written in the export folder, gives the split
    `test` and the same pairs; the card's configs declare that split alone."""
    import datasets

    chosen = [p for p in pairs if p.seed_id == pairs[0].seed_id]
    out = export_benchmark(
        app, tmp_path / "bench", chosen, settings=SELECTION, with_clips=with_clips
    ).path
    card = (out / "README.md").read_text(encoding="utf-8")
    assert [c["data_files"] for c in card_metadata(card)["configs"]] == [
        [{"split": "test", "path": "pairs.parquet"}]
    ]
    lines = documented_loads(card, out)
    assert len(lines) == 3
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    monkeypatch.chdir(out)
    ids = sorted(p.pair_id for p in chosen)
    for line in lines:
        scope: dict[str, Any] = {"load_dataset": load_dataset}
        exec(line.strip(), scope)
        loaded = scope["pairs"]
        assert loaded.split == "test", line
        assert sorted(loaded["id"]) == ids, line
