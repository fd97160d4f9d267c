"""Careless and hostile settings, environment variables and command-line values: each is one
clear line, exit 2, no traceback, and nothing lost or half-written (the event log, the catalogue
and the exports are as they were). The real CLI on a copy of the demo workspace; the rows share
the shape of ``tests/hostile_table.py`` with the other ``test_hostile_*`` tables."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from playlisteval.settings import SETTINGS_FILE
from tests.hostile_table import Case, Spoil, ids, run_cli_case


def settings_text(text: str) -> Spoil:
    """The workspace's settings file says ``text``."""

    def write(home: Path) -> None:
        (home / SETTINGS_FILE).write_text(text, encoding="utf-8")

    return write


def settings_bytes(data: bytes) -> Spoil:
    """The workspace's settings file holds ``data``."""

    def write(home: Path) -> None:
        (home / SETTINGS_FILE).write_bytes(data)

    return write


def settings_folder(home: Path) -> None:
    """A folder where the settings file should be."""
    (home / SETTINGS_FILE).unlink(missing_ok=True)
    (home / SETTINGS_FILE).mkdir()


def qdrant_is_a_file(home: Path) -> None:
    """A file where the workspace keeps its vector index folder."""
    shutil.rmtree(home / "qdrant")
    (home / "qdrant").write_text("not a folder")


UNREACHABLE_PG = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # nothing listens on port 1

SETTINGS = [
    Case("settings file that is not TOML", ("status",), "is not valid TOML",
         settings_text("[generation\nmax_attempts = 6\n")),
    Case("settings file that is not UTF-8", ("status",), "is not UTF-8 text",
         settings_bytes(b"\xff\xfe[generation]\n")),
    Case("settings file with a byte-order mark", ("status",), "is not valid TOML",
         settings_bytes(b"\xef\xbb\xbf[index]\nchunk_seconds = 30\n")),
    Case("settings file that is a folder", ("status",), "is not a file", settings_folder),
    Case("a setting that does not exist", ("status",), "generation.distractors: no such setting",
         settings_text("[generation]\ndistractors = 4\n")),
    Case("a section that does not exist", ("status",), "no such setting",
         settings_text("[genration]\nmax_attempts = 6\n")),
    Case("a top-level key", ("status",), "cap: no such setting", settings_text("cap = 3\n")),
    Case("a section given as a number", ("status",), "index: Input should be a valid dictionary",
         settings_text("index = 3\n")),
    Case("a setting of the wrong type", ("status",), "generation.max_attempts",
         settings_text('[generation]\nmax_attempts = "six"\n')),
    Case("seeds_per_segment below one", ("status",), "curation.seeds_per_segment",
         settings_text("[curation]\nseeds_per_segment = 0\n")),
    Case("a negative chunk length", ("status",), "index.chunk_seconds: Input should be greater",
         settings_text("[index]\nchunk_seconds = -30\n")),
    Case("an infinite chunk length", ("status",), "index.chunk_seconds: Input should be a finite",
         settings_text("[index]\nchunk_seconds = inf\n")),
    Case("a frame rate of zero", ("status",), "index.frame_fps",
         settings_text("[index]\nframe_fps = 0\n")),
    Case("segments shortest longer than longest", ("status",), "segment lengths must satisfy",
         settings_text("[index]\nsegment_min_minutes = 30\nsegment_max_minutes = 10\n")),
    Case("a cap that is not a number", ("status",), "budget.cap_usd: Input should be a finite",
         settings_text("[budget]\ncap_usd = nan\n")),
    Case("a negative cap", ("status",), "budget.cap_usd must be 0 or more",
         settings_text("[budget]\ncap_usd = -5\n")),
    Case("a transcriber that does not exist", ("status",), "index.transcriber",
         settings_text('[index]\ntranscriber = "telepathy"\n')),
    Case("a vector backend that does not exist", ("status",), "vectors.backend",
         settings_text('[vectors]\nbackend = "excel"\n')),
    Case("allowed roots given as one string", ("status",), "ingest.allowed_roots",
         settings_text('[ingest]\nallowed_roots = "/"\n')),
    Case("a price override that is not a table", ("status",), "budget.price_overrides.foo",
         settings_text('[budget.price_overrides]\nfoo = "cheap"\n')),
    Case("a negative number of pairs per domain", ("status",), "pairs.pairs_per_domain",
         settings_text("[pairs]\npairs_per_domain = -1\n")),
    Case("a store that is a bare word", ("status",), "is not a database URL",
         settings_text('[store]\nurl = "not a url"\n')),
    Case("heartbeats slower than the lease", ("status",), "must be below worker.lease_s",
         settings_text("[worker]\nlease_s = 10\nheartbeat_s = 60\n")),
    Case("concurrency above max_concurrency in the settings", ("status",),
         "above max_concurrency",
         settings_text("[curation]\nconcurrency = 300\nmax_concurrency = 100\n")),
]  # fmt: skip

ENVIRONMENT = [
    Case("a table variable that is not JSON", ("status",), "takes JSON",
         env={"PLAYLISTEVAL_BUDGET__PRICE_OVERRIDES": "{x"}),
    Case("a list variable that is not JSON", ("status",), "takes JSON",
         env={"PLAYLISTEVAL_INGEST__ALLOWED_ROOTS": "/tmp"}),
    Case("a list variable holding an object", ("status",), "ingest.allowed_roots",
         env={"PLAYLISTEVAL_INGEST__ALLOWED_ROOTS": '{"a": 1}'}),
    Case("a setting variable of the wrong type", ("status",), "curation.concurrency",
         env={"PLAYLISTEVAL_CURATION__CONCURRENCY": "many"}),
    Case("a negative concurrency variable", ("status",), "curation.concurrency",
         env={"PLAYLISTEVAL_CURATION__CONCURRENCY": "-3"}),
    Case("a number variable that is empty", ("status",), "index.chunk_seconds",
         env={"PLAYLISTEVAL_INDEX__CHUNK_SECONDS": ""}),
    Case("a boolean variable that is neither", ("status",), "curation.offline",
         env={"PLAYLISTEVAL_CURATION__OFFLINE": "maybe"}),
    Case("a variable for a setting that does not exist", ("status",), "index.nope: no such",
         env={"PLAYLISTEVAL_INDEX__NOPE": "1"}),
    Case("a cap variable that is not a number", ("status",), "budget.cap_usd",
         env={"PLAYLISTEVAL_BUDGET__CAP_USD": "nan"}),
    Case("a log level that does not exist", ("status",), "is no log level",
         env={"PLAYLISTEVAL_LOG_LEVEL": "shouty"}),
    Case("an event store of an unknown kind", ("status",), "is not a database URL",
         env={"PLAYLISTEVAL_STORE__URL": "bogus://nowhere"}),
    Case("an event store server that does not answer", ("audit",), "cannot reach PostgreSQL",
         env={"PLAYLISTEVAL_STORE__URL": UNREACHABLE_PG}),
    Case("a catalogue server that does not answer", ("status",), "cannot open the catalogue",
         env={"PLAYLISTEVAL_STORE__CATALOG_URL": UNREACHABLE_PG}),
    Case("a model with no price, at curate", ("curate", "--budget", "1", "--max-seeds", "2"),
         "no price known for model 'mystery-vl-9000'",
         env={"PLAYLISTEVAL_MODELS__SUFFICIENCY": "mystery-vl-9000"}),
    Case("a model with no price, at enqueue", ("enqueue", "--max-seeds", "2"),
         "no price known for model 'mystery-vl-9000'",
         env={"PLAYLISTEVAL_MODELS__SUFFICIENCY": "mystery-vl-9000"}),
]  # fmt: skip

WORKSPACE = [
    Case("--home naming a file", ("status", "--home", "{home}/playlisteval.toml"),
         "--home must be a folder"),
    Case("--home under a file", ("status", "--home", "{home}/playlisteval.toml/ws"),
         "--home must be a folder"),
    Case("a file where the vector index folder goes", ("status",), "--home must be a folder",
         qdrant_is_a_file),
]  # fmt: skip

VALUES = [
    Case("a negative --per-domain", ("pairs", "--per-domain", "-5"), "--per-domain"),
    Case("--concurrency 0", ("curate", "--budget", "1", "--concurrency", "0"), "--concurrency"),
    Case("a negative --concurrency", ("curate", "--budget", "1", "--concurrency", "-3"),
         "--concurrency must be a whole number of at least 1, got -3"),
    Case("--concurrency 1000000", ("curate", "--budget", "1", "--concurrency", "1000000"),
         "above curation.max_concurrency"),
    Case("a worker's --concurrency of 0", ("worker", "--concurrency", "0"), "--concurrency"),
    Case("a worker's --concurrency past the bound", ("worker", "--concurrency", "100000"),
         "above curation.max_concurrency"),
    Case("a daemon's --concurrency past the bound", ("serve", "--concurrency", "100000"),
         "above curation.max_concurrency"),
    Case("a rehearsal's --concurrency past the bound", ("rehearse", "--concurrency", "100000"),
         "above curation.max_concurrency"),
    Case("a negative rehearsal --concurrency", ("rehearse", "--concurrency", "-1"),
         "--concurrency"),
    Case("--max-seeds 0", ("curate", "--budget", "1", "--max-seeds", "0"),
         "--max-seeds must be at least 1, got 0"),
    Case("a negative --max-seeds", ("curate", "--budget", "1", "--max-seeds", "-2"),
         "--max-seeds must be at least 1, got -2"),
    Case("--max-seeds 0 at enqueue", ("enqueue", "--max-seeds", "0"), "--max-seeds"),
    Case("a negative --budget", ("curate", "--budget", "-1"), "--budget"),
    Case("an infinite --budget", ("curate", "--budget", "inf"), "--budget must be a finite"),
    Case("a --budget in micro-dollars", ("curate", "--budget", "1e9"),
         "refused as a likely typo"),
    Case("a --per-seed that is not a number", ("curate", "--budget", "1", "--per-seed", "nan"),
         "--per-seed must be a finite"),
    Case("a negative --budget for pairs", ("pairs", "--budget", "-2"), "--budget"),
    Case("an unknown run to resume", ("curate", "--run", "no-such-run", "--budget", "1"),
         "no-such-run"),
    Case("an unknown run to replay", ("replay", "no-such-run"), "no run 'no-such-run'"),
    Case("search for no hits at all", ("search", "dough", "-k", "0"), "-k must be at least 1"),
    Case("a negative number of seeds to show", ("seeds", "--show", "-3"), "--show"),
    Case("a negative target of hours",
         ("add", "{src}", "--domain", "d", "--target-hours", "-1"),
         "--target-hours must be a positive number of hours, got -1.0"),
    Case("a target of hours that is not a number",
         ("add", "{src}", "--domain", "d", "--target-hours", "nan"), "--target-hours"),
    # The hostile walk of step 22 (issue 41): a model file named as a judge that no setting
    # serves is told the settings that would, not a price row in the installed package.
    Case("an unconfigured GGUF judge", ("eval", "--benchmark", "{src}", "--judge", "x.gguf"),
         "judge 'x.gguf' is not configured (no provider family serves it): add to "),
    Case("an unconfigured GGUF judge, live",
         ("eval", "--benchmark", "{src}", "--judge", "x.gguf", "--live"),
         '[providers.models."x.gguf"] family = "real-local"'),
    Case("an unconfigured packaged judge", ("eval", "--benchmark", "{src}", "--judge",
         "qwen2.5-coder-1.5b"), 'local_path = "qwen2.5-coder-1.5b-instruct"'),
]  # fmt: skip

CASES = [*SETTINGS, *ENVIRONMENT, *WORKSPACE, *VALUES]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_careless_input_is_one_line_and_loses_nothing(
    workspace: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_cli_case(workspace, case, monkeypatch)


def test_the_workspace_is_usable_again_once_the_setting_is_fixed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A careless setting costs nothing but the run it refused: fixed, the command works."""
    broken = Case("broken", ("status",), "is not valid TOML", settings_text("[index\n"))
    run_cli_case(workspace, broken, monkeypatch)
    fixed = Case("fixed", ("status",), "videos: duplicate 1, indexed 9",
                 settings_text("[index]\nsegment_min_minutes = 1.0\nsegment_target_minutes = "
                               "1.0\nsegment_max_minutes = 2.0\n"), code=0)  # fmt: skip
    run_cli_case(workspace, fixed, monkeypatch)


@pytest.mark.parametrize("live", [False, True], ids=["offline", "live"])
def test_an_unconfigured_gguf_judge_is_told_the_real_local_table_for_this_workspace(
    workspace: Path, tmp_path: Path, live: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``eval --judge FILE.gguf`` with no setting that serves it: one error, exit 2, naming the
    workspace's settings file and the ``real-local`` table to add there (the file's whole
    path), never a row for the installed package's ``policies/prices.toml``; nothing judged."""
    model = tmp_path / "judge.gguf"
    model.write_bytes(b"GGUF")
    command = ("eval", "--benchmark", "{src}", "--judge", str(model), "--out", str(tmp_path / "e"))
    case = Case(
        "unconfigured gguf",
        (*command, *(["--live"] if live else [])),
        f"judge {str(model)!r} is not configured (no provider family serves it): add to "
        f"{workspace / SETTINGS_FILE} the table that runs it on this machine (no endpoint, key "
        f'or price): [providers.models."{model}"] family = "real-local"',
    )
    result = run_cli_case(workspace, case, monkeypatch)
    said = " ".join(result.output.split())
    assert f'local_path = "{model}"' in said
    assert "prices.toml" not in said
    assert not (tmp_path / "e").exists()
