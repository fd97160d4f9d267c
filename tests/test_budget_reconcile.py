"""``budget reconcile`` puts a workspace's ledger beside a provider's usage export, per model and
day: on an export of each provider, shaped as its docs show and agreeing with the ledger, it
exits 0; with one difference injected, it names that difference (day, model, amounts) and
exits 9. A file of no bill's shape is one line and exit 2.

The ledger is a real workspace's SQLite log, its call events appended through the store at
fixed times (the store's clock), so each call's day is known in every bill's time zone."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from typer.testing import CliRunner, Result

from playlisteval import cli
from playlisteval.app import App
from playlisteval.cli import EXIT_BILL_DIFFERS, EXIT_FIX
from playlisteval.cli import app as cli_app
from playlisteval.settings import load_settings
from policies.bills import detect_provider, parse_bill
from policies.reconcile import DaySpend, LedgerDays, model_of, reconcile
from store.events import (
    CallRecorded,
    CallReserved,
    CallRetried,
    Event,
    RunStarted,
    run_stream,
    seed_stream,
)
from store.eventstore import SqliteEventStore

RUN, OFFLINE_RUN = "r1", "r0"
DEC1, DEC2 = date(2026, 12, 1), date(2026, 12, 2)


def at(day: int, hour: int) -> datetime:
    """A December 2026 instant, in UTC."""
    return datetime(2026, 12, day, hour, tzinfo=UTC)


#: The live calls of run r1: (when, seed, model, cost in micro-dollars). 2 Dec 05:00 UTC is
#: still 1 Dec in US Pacific time (Cloud Billing's day); 1 Dec 17:00 UTC is already 2 Dec in
#: UTC+8 (Alibaba Cloud's).
CALLS = [
    (at(1, 15), "s1", "gpt-5.4", 120_000),
    (at(1, 16), "s1", "gpt-5.4", 30_000),
    (at(2, 10), "s2", "gpt-5.4-mini", 42_500),
    (at(1, 15), "s3", "gemini-3-flash-preview", 250_000),
    (at(2, 5), "s3", "gemini-3-flash-preview", 40_000),
    (at(2, 10), "s4", "gemini-3-flash-preview", 100_000),
    (at(2, 11), "s4", "gemini-3.1-pro-preview", 800_000),
    (at(1, 10), "s5", "qwen-3.7-plus", 330_000),
    (at(1, 17), "s5", "qwen-3.7-plus", 210_000),
]
#: An attempt of gpt-5.4 on 2 Dec whose outcome is unknown (charged 0.02 USD: it may have been
#: billed), then its answer (0.05 USD).
RETRIED = (at(2, 12), "s6", "gpt-5.4", 20_000, 50_000)


def call(seed: str, n: int, model: str) -> dict[str, Any]:
    """The fields every event about call ``n`` of ``seed`` shares."""
    return {
        "call_id": f"{seed}:{n}",
        "key": f"k-{seed}-{n}",
        "role": "generator",
        "model": model,
        "phase": 1,
    }


def answered(seed: str, n: int, model: str, cost: int, *, offline: bool = False) -> list[Event]:
    """One call reserved and answered at ``cost``."""
    fields = call(seed, n, model)
    return [
        CallReserved(**fields, reserved_micros=cost * 2),
        CallRecorded(
            **fields,
            response={},
            cost_micros=cost,
            offline=offline,
            answered_by="offline" if offline else "live",
        ),
    ]


def started(run: str, *, offline: bool) -> RunStarted:
    return RunStarted(
        run_id=run,
        seeds=(),
        budget_micros=10_000_000,
        max_attempts=3,
        concurrency=1,
        offline=offline,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose log holds run r1's live calls (:data:`CALLS`, :data:`RETRIED`) and an
    offline run's call of 5 USD that no provider billed."""
    root = tmp_path_factory.mktemp("reconcile-home")
    moment = [at(1, 0)]
    with App(load_settings(root)) as opened:
        store = SqliteEventStore(
            opened.workspace.database,
            clock=lambda: moment[0],
            key=opened.log_key(),
            key_file=opened.log_key_path(),
        )

        def append(when: datetime, stream: str, events: list[Event]) -> None:
            moment[0] = when
            store.append(stream, events)

        append(at(1, 1), run_stream(OFFLINE_RUN), [started(OFFLINE_RUN, offline=True)])
        append(
            at(1, 2),
            seed_stream(OFFLINE_RUN, "s1"),
            answered("s1", 1, "gemini-3-flash-preview", 5_000_000, offline=True),
        )
        append(at(1, 3), run_stream(RUN), [started(RUN, offline=False)])
        for n, (when, seed, model, cost) in enumerate(CALLS, start=1):
            append(when, seed_stream(RUN, seed), answered(seed, n, model, cost))
        when, seed, model, charged, cost = RETRIED
        fields = call(seed, 1, model)
        retry = CallRetried(
            **fields,
            attempt=1,
            kind="timeout",
            wait_s=1.0,
            error="read timed out",
            charged_micros=charged,
        )
        append(
            when, seed_stream(RUN, seed), [CallReserved(**fields, reserved_micros=charged), retry]
        )
        # The retry reserves again, and is answered.
        append(when, seed_stream(RUN, seed), answered(seed, 1, model, cost))
        store.close()
    return root


# -- the three bills, shaped as each provider's docs show --------------------------------------


def unix(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def cost(item: str | None, value: float | str) -> dict[str, Any]:
    """One result of the Costs API grouped by line item."""
    return {
        "object": "organization.costs.result",
        "amount": {"value": value, "currency": "usd"},
        "line_item": item,
        "project_id": "proj_abc",
    }


def bucket(day: date, results: list[dict[str, Any]]) -> dict[str, Any]:
    """One UTC day's bucket (``bucket_width=1d``)."""
    start = unix(day)
    return {"object": "bucket", "start_time": start, "end_time": start + 86_400, "results": results}


def page(*buckets: dict[str, Any]) -> str:
    """The Costs API's answer: one page of buckets."""
    return json.dumps(
        {"object": "page", "data": list(buckets), "has_more": False, "next_page": None}
    )


def openai_costs(mini_on_dec2: float) -> str:
    """The Costs API's page (GET /v1/organization/costs?group_by=line_item), one bucket a UTC
    day; ``mini_on_dec2`` is what it says gpt-5.4-mini cost on 2 Dec (the ledger: 0.0425)."""
    snapshot = "gpt-5.4-2026-03-05"
    return page(
        bucket(DEC1, [cost(f"{snapshot}, input", 0.06), cost(f"{snapshot}, output", 0.09)]),
        bucket(
            DEC2,
            [
                # 0.055 lies between the answer's 0.05 and the 0.07 with the retried
                # attempt (more than the tolerance from the latter): the attempt was partly
                # billed, which matches.
                cost(f"{snapshot}, input", 0.02),
                cost(f"{snapshot}, output", 0.035),
                cost("gpt-5.4-mini, input", round(mini_on_dec2 - 0.0125, 6)),
                cost("gpt-5.4-mini, output", 0.0125),
            ],
        ),
    )


FLASH_IN, FLASH_OUT = "Gemini 3 Flash Preview Input token count", "Gemini 3 Flash Preview Output"
PRO_OUT = "Gemini 3.1 Pro Preview Output token count"
BIGQUERY_COLUMNS = [
    "billing_account_id",
    "service.description",
    "sku.description",
    "usage_start_time",
    "usage_end_time",
    "cost",
    "currency",
]


def gemini_billing(pro_on_dec2: bool) -> str:
    """Cloud Billing's standard usage cost export, queried from BigQuery and saved as CSV
    (``service.description``, ``sku.description``, ``usage_start_time`` and ``cost`` as the
    export's schema names them; hourly usage windows in UTC). The Gemini API's SKUs name the
    model. ``pro_on_dec2``: whether it bills gemini-3.1-pro-preview's 0.80 USD of 2 Dec."""
    rows = [
        ("Gemini API", FLASH_IN, at(1, 15), "0.15"),
        ("Gemini API", FLASH_OUT, at(1, 15), "0.10"),
        # 05:00 UTC on 2 Dec is 21:00 on 1 Dec in Pacific time: Cloud Billing's 1 Dec.
        ("Gemini API", FLASH_IN, at(2, 5), "0.04"),
        ("Gemini API", FLASH_IN, at(2, 10), "0.1"),
        ("Cloud Storage", "Standard Storage US Multi-region", at(2, 10), "0.37"),
    ]
    if pro_on_dec2:
        rows.append(("Gemini API", PRO_OUT, at(2, 11), "0.8"))
    account = "012345-6789AB-CDEF01"
    lines = [
        [account, service, sku, _utc(start), _utc(start + timedelta(hours=1)), usd, "USD"]
        for service, sku, start, usd in rows
    ]
    return _csv([BIGQUERY_COLUMNS, *lines])


def _utc(when: datetime) -> str:
    """A BigQuery TIMESTAMP as a query's CSV writes it."""
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


ALIBABA_COLUMNS = [
    "Billing Cycle",
    "Billing Date",
    "Account Name",
    "Product Name",
    "Product Detail",
    "Instance ID",
    "Billable Item",
    "Usage",
    "Usage Unit",
    "Pretax Gross Amount",
    "Pretax Amount",
    "Currency",
]


def dashscope_bill(qwen_on_dec2: str) -> str:
    """Alibaba Cloud's Bill Details export (statistic item Billable Item, period Day), days in
    UTC+8; ``qwen_on_dec2`` is the Pretax Amount of qwen-3.7-plus on 2 Dec (the ledger: 0.21)."""
    studio = ["Alibaba Cloud Model Studio", "Model Studio (Pay-As-You-Go)", "qwen-3.7-plus"]
    oss = ["Object Storage Service", "OSS (Pay-As-You-Go)", "cn-beijing;standard"]
    rows = [
        ["2026-12-01", *studio, "input_tokens", "500000", "Tokens", "0.20", "0.20"],
        ["2026-12-01", *studio, "output_tokens", "81250", "Tokens", "0.13", "0.13"],
        ["2026-12-02", *studio, "input_tokens", "525000", "Tokens", qwen_on_dec2, qwen_on_dec2],
        ["2026-12-02", *oss, "Storage", "10", "GB", "0.05", "0.05"],
    ]
    return _csv([ALIBABA_COLUMNS, *(["2026-12", day, "acct", *rest, "USD"] for day, *rest in rows)])


def _csv(rows: Iterable[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


MATCHING: dict[str, Callable[[], str]] = {
    "openai": lambda: openai_costs(0.0425),
    "gemini": lambda: gemini_billing(pro_on_dec2=True),
    "dashscope": lambda: dashscope_bill("0.21"),
}


class Injected(NamedTuple):
    """The row that must name a bill's injected difference."""

    day: str
    model: str
    ledger: float
    bill: float
    verdict: str
    note: str


#: Each bill with one difference injected, and the row that must name it.
INJECTED: dict[str, tuple[Callable[[], str], Injected]] = {
    "openai": (
        lambda: openai_costs(0.2925),
        Injected(
            "2026-12-02",
            "gpt-5.4-mini",
            0.0425,
            0.2925,
            "bill-higher",
            "billed 0.2500 USD more than the ledger records",
        ),
    ),
    "gemini": (
        lambda: gemini_billing(pro_on_dec2=False),
        Injected(
            "2026-12-02",
            "gemini-3.1-pro-preview",
            0.8,
            0.0,
            "only-ledger",
            "the ledger records 0.8000 USD the bill does not show",
        ),
    ),
    "dashscope": (
        lambda: dashscope_bill("0.18"),
        Injected(
            "2026-12-02",
            "qwen-3.7-plus",
            0.21,
            0.18,
            "ledger-higher",
            "the ledger records 0.0300 USD more than was billed",
        ),
    ),
}
SUFFIX = {"openai": ".json", "gemini": ".csv", "dashscope": ".csv"}


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consoles wide enough that no table cell or line is folded."""
    for console in (cli.console, cli.err_console):
        monkeypatch.setattr(console, "_width", 400)


def reconcile_cli(home: Path, bill: Path, *more: str) -> Result:
    return CliRunner().invoke(
        cli_app, ["budget", "reconcile", str(bill), "--home", str(home), *more]
    )


def write(tmp_path: Path, provider: str, text: str) -> Path:
    path = tmp_path / f"{provider}-bill{SUFFIX[provider]}"
    path.write_text(text)
    return path


@pytest.mark.parametrize("provider", sorted(MATCHING))
def test_a_bill_that_agrees_with_the_ledger_exits_0(
    provider: str, home: Path, tmp_path: Path
) -> None:
    result = reconcile_cli(home, write(tmp_path, provider, MATCHING[provider]()), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["provider"] == provider  # told from the file's shape
    assert found["matches"], found
    assert found["differences"] == 0
    assert {row["verdict"] for row in found["rows"]} <= {"match", "within-uncertain"}
    # The offline run's 5 USD was never billed: left out, and said so.
    assert any("answered by the offline harness" in line for line in found["not_compared"]), found


@pytest.mark.parametrize("provider", sorted(INJECTED))
def test_the_injected_difference_is_named_and_exits_9(
    provider: str, home: Path, tmp_path: Path
) -> None:
    make, want = INJECTED[provider]
    bill = write(tmp_path, provider, make())

    shown = reconcile_cli(home, bill)
    assert shown.exit_code == EXIT_BILL_DIFFERS, shown.output
    line = next(r for r in shown.stdout.splitlines() if want.day in r and want.model in r)
    for said in (f"{want.ledger:.4f}", f"{want.bill:.4f}", want.note):
        assert said in line, shown.stdout
    assert "1 difference(s)" in shown.stdout

    found = json.loads(reconcile_cli(home, bill, "--json", "--provider", provider).stdout)
    assert [r for r in found["rows"] if r["verdict"] not in ("match", "within-uncertain")] == [
        {
            "day": want.day,
            "model": want.model,
            "ledger_usd": pytest.approx(want.ledger),
            "uncertain_usd": 0.0,
            "bill_usd": pytest.approx(want.bill),
            "difference_usd": pytest.approx(want.bill - want.ledger),
            "verdict": want.verdict,
            "note": want.note,
        }
    ]


def test_a_retried_attempt_that_may_have_been_billed_matches_a_bill_between_its_bounds(
    home: Path, tmp_path: Path
) -> None:
    bill = write(tmp_path, "openai", MATCHING["openai"]())
    found = json.loads(reconcile_cli(home, bill, "--json").stdout)
    row = next(r for r in found["rows"] if r["day"] == "2026-12-02" and r["model"] == "gpt-5.4")
    assert row["verdict"] == "within-uncertain"
    shown = (row["ledger_usd"], row["uncertain_usd"], row["bill_usd"])
    assert shown == pytest.approx((0.07, 0.02, 0.055))


def test_days_are_counted_in_the_bills_time_zone(home: Path, tmp_path: Path) -> None:
    """Cloud Billing's day is US Pacific: the call at 05:00 UTC on 2 Dec is on 1 Dec, in the
    ledger as in the bill. With --bill-tz UTC both sides move to 2 Dec, and still agree."""
    bill = write(tmp_path, "gemini", MATCHING["gemini"]())
    flash = ("2026-12-01", "gemini-3-flash-preview")
    for zone, billed in (((), 0.29), (("--bill-tz", "UTC"), 0.25)):
        found = json.loads(reconcile_cli(home, bill, "--json", *zone).stdout)
        assert found["matches"], found
        by_day = {(r["day"], r["model"]): r["bill_usd"] for r in found["rows"]}
        assert by_day[flash] == pytest.approx(billed)


def test_a_run_of_its_own_leaves_the_other_runs_out(home: Path, tmp_path: Path) -> None:
    bill = write(tmp_path, "dashscope", MATCHING["dashscope"]())
    found = json.loads(reconcile_cli(home, bill, "--json", "--run", RUN).stdout)
    assert found["matches"]
    assert not any("offline" in line for line in found["not_compared"])
    unknown = reconcile_cli(home, bill, "--run", "nope")
    assert unknown.exit_code == EXIT_FIX
    assert unknown.stderr.strip().splitlines() == [
        "error: no run 'nope' in this log: `playlisteval runs` lists them"
    ]


def one_bucket(*results: dict[str, Any]) -> str:
    """A page of one bucket of ``results`` (any shape)."""
    return json.dumps({"object": "page", "data": [bucket(DEC1, list(results))]})


USAGE = {"object": "organization.usage.completions.result", "input_tokens": 5}
DASHSCOPE_HEAD = "Billing Date,Instance ID,Pretax Amount\n"
DASHSCOPE_OK = DASHSCOPE_HEAD + "2026-12-01,qwen-3.7-plus,0.1\n"
GEMINI_EUR = "SKU description,Usage start date,Cost,Currency\nGemini 3 Flash,2026-12-01,1,EUR\n"
UNUSABLE = {
    "usage-not-costs": ("u.json", one_bucket(USAGE), (), "the Usage API's answer (tokens"),
    "costs-not-by-line-item": ("c.json", one_bucket(cost(None, 1)), (), "group_by=line_item"),
    "broken-json": ("b.json", '{"object": "page", "data": [', (), "it is not JSON"),
    "unknown-csv": ("n.csv", "name,amount\nlunch,12\n", (), "cannot tell whose bill this is"),
    "not-gemini": (
        "n.csv",
        "name,amount\nlunch,12\n",
        ("--provider", "gemini"),
        "no header row with the columns Usage start date, SKU description, Cost",
    ),
    "euros": ("e.csv", GEMINI_EUR, (), "is in 'EUR', and the ledger is in USD"),
    "no-date": ("d.csv", DASHSCOPE_HEAD + "yesterday,qwen,0.1\n", (), "'yesterday' is not a date"),
    "no-amount": ("a.csv", DASHSCOPE_HEAD + "2026-12-01,qwen,lots\n", (), "'lots', not a number"),
    "no-provider": ("p.csv", DASHSCOPE_OK, ("--provider", "bank"), "'bank' is none of openai"),
    "no-zone": ("z.csv", DASHSCOPE_OK, ("--bill-tz", "Mars/Olympus"), "is no time zone"),
    "nan-tolerance": ("t.csv", DASHSCOPE_OK, ("--tolerance-usd", "nan"), "between 0 and 1000"),
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_a_file_or_value_that_is_not_usable_is_one_line_and_exit_2(
    case: str, home: Path, tmp_path: Path
) -> None:
    name, text, more, said = UNUSABLE[case]
    bill = tmp_path / name
    bill.write_text(text)
    result = reconcile_cli(home, bill, *more)
    assert result.exit_code == EXIT_FIX, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert said in lines[0]
    if not more:
        assert str(bill) in lines[0]  # a file of no bill's shape is named


def test_a_missing_file_is_one_line_and_exit_2(home: Path, tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere.json"
    result = reconcile_cli(home, nowhere)
    assert result.exit_code == EXIT_FIX
    assert result.stderr.strip().splitlines() == [
        f"error: no bill at {str(nowhere)!r}: give the path of the exported file"
    ]


# -- the parsers and the matching, without a workspace -----------------------------------------


def test_the_console_reports_csv_reads_as_the_bigquery_query_does() -> None:
    """Cloud Billing's report download ("Service description", "Usage start date", "Cost ($)",
    "Unrounded Cost ($)"), after a line of preamble: the unrounded cost is the one read, and a
    total row (no date) is no charge."""
    header = ["Service description", "SKU description", "Usage start date"]
    text = _csv(
        [
            ["Cost report for billing account 012345-6789AB-CDEF01"],
            [*header, "Unrounded Cost ($)", "Cost ($)"],
            ["Gemini API", FLASH_IN, "2026-12-01", "0.123456", "0.12"],
            ["Total", "", "", "0.123456", "0.12"],
        ]
    )
    assert detect_provider(text, "report.csv") == "gemini"
    bill = parse_bill(text, "report.csv", "gemini")
    assert [(line.day, line.item, str(line.usd)) for line in bill.lines] == [
        (DEC1, FLASH_IN, "0.123456")
    ]


def test_a_cookbook_list_of_buckets_and_the_result_spelling_are_read() -> None:
    """The Cookbook's get_data collects the pages' buckets in a list; the API reference's
    schema spells a bucket's list ``result``."""
    one = bucket(DEC1, [])
    del one["results"]
    one["result"] = [cost("gpt-5.4, output", "0.5")]
    bill = parse_bill(json.dumps([one]), "costs.json", "openai")
    assert (bill.first_day, bill.last_day) == (DEC1, DEC1)
    assert [(line.item, str(line.usd)) for line in bill.lines] == [("gpt-5.4, output", "0.5")]


@pytest.mark.parametrize(
    ("item", "model"),
    [
        ("gpt-5.4-2026-03-05, input", "gpt-5.4"),
        ("gpt-5.4-mini, cached input", "gpt-5.4-mini"),
        ("GPT-5.4 mini", "gpt-5.4-mini"),
        ("gpt-5.4-nano, input", None),
        ("Gemini 3 Flash Preview Output token count", "gemini-3-flash"),
        ("Gemini 3 Flash Lite Input token count", None),
        ("qwen3.7-plus", "qwen-3.7-plus"),
        ("Image models", None),
    ],
)
def test_a_bill_item_names_the_model_its_words_stand_for_and_no_variant_of_it(
    item: str, model: str | None
) -> None:
    names = {
        "gpt-5.4": (),
        "gpt-5.4-mini": (),
        "gemini-3-flash": ("gemini-3-flash-preview",),  # a model_name from the settings
        "qwen-3.7-plus": ("qwen3.7-plus",),
    }
    assert model_of(item, names) == model


def test_a_bill_line_naming_no_model_of_ours_is_a_difference_of_its_own() -> None:
    text = one_bucket(cost("Image models", 0.06), cost("Web search", 0.0))
    ledger = LedgerDays({(DEC1, "gpt-5.4"): DaySpend(10_000, 0)})
    bill = parse_bill(text, "c.json", "openai")
    found = reconcile(ledger, bill, {"gpt-5.4": ("openai", ())}, 10_000)
    assert [(r.model, r.verdict, r.note) for r in found.rows] == [
        (
            "Image models",
            "unmapped",
            "billed 0.0600 USD for 'Image models', which names no model of ours",
        ),
        ("gpt-5.4", "match", "matches"),  # 0.01 in the ledger, none billed: within tolerance
    ]
