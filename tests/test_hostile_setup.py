"""Careless setups of the campaign rehearsal (``demo --domains N --hours-per-domain H``): a
workspace whose collection was generated with other settings, a torn record of those settings,
a size too small to give a seed. Each is one clear line and exit 2 before anything is generated,
and nothing the workspace held is lost (the hostile walk of step 22, issue 41). The real CLI on a
copy of the demo workspace; the rows share the shape of ``tests/hostile_table.py``."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.hostile_table import Case, Spoil, ids, run_cli_case
from tools.offline.campaign import SPEC_FILE, CampaignSpec


def campaign_record(data: str | bytes) -> Spoil:
    """The workspace's generated collection records its settings as ``data``."""

    def write(home: Path) -> None:
        folder = home / "collection"
        folder.mkdir(exist_ok=True)
        (folder / SPEC_FILE).write_bytes(data.encode() if isinstance(data, str) else data)

    return write


def campaign_record_folder(home: Path) -> None:
    """A folder where the generated collection records its settings."""
    (home / "collection" / SPEC_FILE).mkdir(parents=True)


# What the generator records for `demo --domains 2 --hours-per-domain 1 --video-minutes 10`.
TEN_MINUTES = json.dumps(asdict(CampaignSpec(domains=2, hours_per_domain=1.0, video_minutes=10.0)))
REHEARSE = ("demo", "--domains", "2", "--hours-per-domain", "1")
UNKNOWN = "so what was generated beside it is unknown: rehearse with another --home, or delete"

CASES = [
    Case("a rehearsal again with longer episodes", (*REHEARSE, "--video-minutes", "20"),
         "holds a collection generated with other settings (video_minutes 10.0 there, 20.0 "
         "asked): rehearse with another --home, or delete", campaign_record(TEN_MINUTES)),
    Case("a rehearsal again with more domains",
         ("demo", "--domains", "3", "--hours-per-domain", "1", "--video-minutes", "10"),
         "(domains 2 there, 3 asked)", campaign_record(TEN_MINUTES)),
    Case("a torn campaign record", (*REHEARSE, "--video-minutes", "10"),
         f"campaign.json' cannot be read (Expecting ',' delimiter: line 1 column "
         f"{len(TEN_MINUTES)}", campaign_record(TEN_MINUTES[:-1])),
    Case("an empty campaign record", (*REHEARSE, "--video-minutes", "10"),
         f"campaign.json' cannot be read (Expecting value: line 1 column 1 (char 0)), {UNKNOWN}",
         campaign_record("")),
    Case("a campaign record that is not UTF-8", (*REHEARSE, "--video-minutes", "10"),
         "campaign.json' cannot be read ('utf-8' codec can't decode byte 0xff",
         campaign_record(b"\xff\xfe{")),
    Case("a campaign record that is a list", (*REHEARSE, "--video-minutes", "10"),
         "campaign.json' holds a list, not the settings of a generated collection",
         campaign_record("[1, 2]")),
    Case("a campaign record that is a folder", (*REHEARSE, "--video-minutes", "10"),
         f"campaign.json' cannot be read (Is a directory), {UNKNOWN}", campaign_record_folder),
    Case("hours per domain that make one episode",
         ("demo", "--domains", "2", "--hours-per-domain", "0.0001"),
         "--hours-per-domain 0.0001 makes 1 episode of 30 minutes a domain; a seed pairs "
         "segments of two different episodes of a domain, so a rehearsal needs at least 2: give "
         "--hours-per-domain 0.75 or more"),
    Case("hours per domain that make one short episode",
         ("demo", "--domains", "1", "--hours-per-domain", "0.01", "--video-minutes", "7"),
         "makes 1 episode of 7 minutes a domain; a seed pairs segments of two different "
         "episodes of a domain, so a rehearsal needs at least 2: give --hours-per-domain 0.175 "
         "or more"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_a_careless_rehearsal_setup_is_one_line_and_generates_nothing(
    workspace: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_cli_case(workspace, case, monkeypatch)
    assert not list(workspace.glob("collection/**/*.mp4")), "a video was generated"
    assert not (workspace / "collection" / "manifest.json").exists()
