"""A provider's bill, as the shape its usage export has: one small parser per provider.

Each parser reads the text of one export and gives a :class:`Bill`: what the provider charged,
per day and per item (the provider's own name of what it charged for: a cost line item, a SKU,
a model). Which of our models an item is, and how it compares with the ledger, is
:mod:`policies.reconcile`'s job. A file that is not of the shape asked for is refused with one
line naming the file and what was expected (:class:`~store.errors.ConfigError`).

The shapes, from the providers' documentation:

- ``openai``: the Costs API's answer, ``GET /v1/organization/costs?group_by=line_item``
  (https://platform.openai.com/docs/api-reference/usage/costs, mirrored at
  https://developers.openai.com/api/reference/resources/organization/subresources/audit_logs/methods/get_costs):
  a ``{"object": "page", "data": [bucket, ...]}``, each bucket
  ``{"object": "bucket", "start_time": unix, "end_time": unix, "results": [...]}`` of one UTC
  day (``bucket_width`` is only ``1d``), each result
  ``{"object": "organization.costs.result", "amount": {"value": 0.06, "currency": "usd"},
  "line_item": ..., "project_id": ...}``. The reference's examples spell the bucket's list
  ``results`` and its schema ``result``: both are read. A page, a list of pages (one per
  ``next_page``), or the list of buckets the OpenAI Cookbook's ``get_data`` collects
  (https://cookbook.openai.com/examples/completions_usage_api) are taken. ``line_item`` names
  the model and what was charged (``"gpt-4o-2024-08-06, input"``; the reference's example is
  ``"Image models"``). An export whose costs have none (not grouped by line item) cannot be
  told apart by model and is refused; one cost without one, among others, is a line of its
  own.
- ``gemini``: Google Cloud Billing's cost data as CSV — a query of the BigQuery standard usage
  cost export (https://cloud.google.com/billing/docs/how-to/export-data-bigquery-tables/standard-usage:
  ``service.description``, ``sku.description``, ``usage_start_time``, ``cost``, ``currency``)
  or the console's cost report download (https://cloud.google.com/billing/docs/how-to/cost-table,
  https://cloud.google.com/billing/docs/how-to/reports: "Service description", "SKU
  description", "Usage start date", "Cost ($)", and "Unrounded Cost ($)" where given). The
  docs do not fix the spelling of a saved query's columns, so a header is read without case,
  spaces or punctuation (``service.description`` = "Service description"); the unrounded
  cost is preferred to the rounded one. The Gemini API bills as "Gemini API" (formerly
  "Generative Language API") or "Vertex AI"; rows of other services are left out. The model
  is named in the SKU description.
- ``dashscope``: Alibaba Cloud's Bill Details export (Expenses and Costs, statistic item
  "Billable Item", statistical period "Day";
  https://www.alibabacloud.com/help/en/user-center/user-guide/billing-details-1, fields in
  https://www.alibabacloud.com/help/en/user-center/v2-version-bill-field-description-1):
  "Billing Date" (the day the service was consumed), "Product Name", "Instance ID",
  "Billable Item", "Pretax Amount", "Currency". Which column names the Model Studio model is
  not spelled out there: a "Model" or "Model Name" column is read first, then "Instance ID";
  the API's spellings (``BillingDate``, ``PretaxAmount``, ``InstanceID``) are the same
  columns once case and spaces are set aside. Rows of other products are left out.

Days: OpenAI's buckets are UTC days. Cloud Billing's reports start a day at midnight US
Pacific Time, observing daylight saving (the reports page says so); BigQuery's timestamps are
UTC instants and are put on the Pacific day they fall in. Alibaba Cloud states its billing
times in UTC+8; its docs do not say so of "Billing Date" outright, so that is the default
and ``zone`` says otherwise. Money is :class:`~decimal.Decimal` USD as the bill states it; a
bill in another currency is refused (the ledger is in USD).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo

from store.errors import ConfigError

Provider = Literal["openai", "gemini", "dashscope"]
PROVIDERS: tuple[Provider, ...] = get_args(Provider)

#: Where each provider's bill starts and ends a day (see the module docstring).
DEFAULT_ZONES: Mapping[Provider, tzinfo] = {
    "openai": UTC,
    "gemini": ZoneInfo("America/Los_Angeles"),
    "dashscope": timezone(timedelta(hours=8), "UTC+8"),
}

#: What each parser takes, for the line that refuses a file of another shape.
EXPECTED: Mapping[Provider, str] = {
    "openai": (
        "the OpenAI Costs API's JSON (GET /v1/organization/costs?group_by=line_item: "
        '{"object": "page", "data": [{"object": "bucket", "results": [...]}]})'
    ),
    "gemini": (
        "a Google Cloud Billing CSV with the columns SKU description, Usage start date (or "
        "usage_start_time) and Cost"
    ),
    "dashscope": (
        "an Alibaba Cloud Bill Details CSV (statistic item Billable Item, period Day) with the "
        "columns Billing Date, Instance ID (or Model) and Pretax Amount"
    ),
}

#: The item of an OpenAI cost that names no line item (the reference lets ``line_item`` be null).
NO_LINE_ITEM = "(no line item)"
# How many lines may come before a CSV's header (an export's title or account lines).
_PREAMBLE_ROWS = 20


@dataclass(frozen=True)
class BillLine:
    """One charge: on ``day`` (in the bill's zone), ``usd`` for ``item``."""

    day: date
    item: str
    usd: Decimal


@dataclass(frozen=True)
class Bill:
    """What a provider's export says it charged.

    ``first_day`` and ``last_day`` are the days the bill covers (a day with no charge among
    them is a day the provider charged nothing); ``zone`` is where its days start and end;
    ``skipped`` counts rows of other services or products of the same account, left out.
    """

    provider: Provider
    source: str
    zone: tzinfo
    first_day: date
    last_day: date
    lines: tuple[BillLine, ...]
    skipped: int = 0

    def covers(self, day: date) -> bool:
        """Whether ``day`` is one of the days the bill covers."""
        return self.first_day <= day <= self.last_day


def zone_named(name: str) -> tzinfo:
    """An IANA time zone (``America/Los_Angeles``) or ``UTC``; ConfigError for another name."""
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise ConfigError(
            f"--bill-tz {name!r} is no time zone: give an IANA name such as "
            "'America/Los_Angeles' or 'Asia/Shanghai', or 'UTC'"
        ) from exc


def detect_provider(text: str, source: str) -> Provider:
    """Whose bill ``text`` is, by its shape: JSON is OpenAI's, a CSV with a SKU description
    column Google Cloud's, one with a billing date column Alibaba Cloud's."""
    body = text.lstrip("\ufeff \t\r\n")
    if body.startswith(("{", "[")):
        return "openai"
    for row in _rows(text)[:_PREAMBLE_ROWS]:
        names = {_column(cell) for cell in row}
        if "skudescription" in names:
            return "gemini"
        if "billingdate" in names:
            return "dashscope"
    raise ConfigError(
        f"{source}: cannot tell whose bill this is; expected {EXPECTED['openai']}, "
        f"{EXPECTED['gemini']}, or {EXPECTED['dashscope']} (or say which with --provider)"
    )


def parse_bill(text: str, source: str, provider: Provider, zone: tzinfo | None = None) -> Bill:
    """``text`` read as ``provider``'s export (``zone``: where its days start, default the
    provider's own; OpenAI's buckets are UTC days whatever is asked)."""
    if provider == "openai":
        if zone is not None and zone is not UTC:
            raise ConfigError(
                "--bill-tz applies to the CSV bills: OpenAI's cost buckets are UTC days"
            )
        return parse_openai_costs(text, source)
    if provider == "gemini":
        return parse_gemini_billing(text, source, zone or DEFAULT_ZONES["gemini"])
    return parse_dashscope_bill(text, source, zone or DEFAULT_ZONES["dashscope"])


# -- OpenAI --------------------------------------------------------------------------------------


def parse_openai_costs(text: str, source: str) -> Bill:
    """The OpenAI Costs API's answer (a page, a list of pages, or a list of buckets)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _shape(source, "openai", f"it is not JSON ({exc.msg} at line {exc.lineno})") from exc
    lines: list[BillLine] = []
    days: list[date] = []
    for bucket in _buckets(document, source):
        start, end = _unix(bucket.get("start_time"), source), _unix(bucket.get("end_time"), source)
        days += [start.date(), (end - timedelta(seconds=1)).date() if end > start else start.date()]
        results = bucket.get("results", bucket.get("result"))
        if not isinstance(results, list):
            raise _shape(source, "openai", "a bucket has no results list")
        lines += [_openai_line(result, start.date(), source) for result in results]
    if not days:
        raise _shape(source, "openai", "it holds no bucket")
    if lines and all(line.item == NO_LINE_ITEM for line in lines):
        raise ConfigError(
            f"{source}: its costs have no line_item, so they cannot be told apart by model; "
            "export the costs with group_by=line_item"
        )
    return Bill("openai", source, UTC, min(days), max(days), tuple(lines))


def _buckets(document: Any, source: str) -> list[Mapping[str, Any]]:
    pages = document if isinstance(document, list) else [document]
    found: list[Mapping[str, Any]] = []
    for page in pages:
        if isinstance(page, dict) and page.get("object") == "bucket":
            found.append(page)  # the Cookbook's get_data: the pages' buckets, collected
        elif (
            isinstance(page, dict)
            and page.get("object") == "page"
            and isinstance(page.get("data"), list)
        ):
            found += page["data"]
        else:
            raise _shape(source, "openai", 'it is not a {"object": "page", "data": [...]} answer')
    for bucket in found:
        if not isinstance(bucket, dict) or bucket.get("object") != "bucket":
            raise _shape(source, "openai", f"{_cut(bucket)} in data is not a bucket")
    return found


def _openai_line(result: Any, day: date, source: str) -> BillLine:
    kind = result.get("object") if isinstance(result, dict) else None
    if kind != "organization.costs.result":
        usage = isinstance(kind, str) and kind.startswith("organization.usage.")
        why = "it is the Usage API's answer (tokens, not money)" if usage else "a result"
        raise _shape(source, "openai", f"{why}: {_cut(result)} is not a costs result")
    named = result.get("line_item")
    item = named.strip() if isinstance(named, str) and named.strip() else NO_LINE_ITEM
    amount = result.get("amount")
    if not isinstance(amount, dict):
        raise _shape(source, "openai", f"the cost of {item!r} has no amount")
    _check_currency(amount.get("currency", "usd"), source)
    return BillLine(day, item, _money(amount.get("value"), source, item))


def _unix(value: Any, source: str) -> datetime:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _shape(source, "openai", f"a bucket's time {value!r} is not Unix seconds")
    return datetime.fromtimestamp(value, UTC)


# -- the CSV bills ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _CsvExport:
    """Where a provider's CSV bill says what: the day, the item charged and the amount (each
    a column by the label its errors name it by and the spellings it is read under); the column
    of the service or product (``scope``, its spellings) and the words that make a row one of
    ours (other rows are skipped); and the columns whose words name a row's item when its own
    column is empty (``described``)."""

    provider: Provider
    day: tuple[str, tuple[str, ...]]
    item: tuple[str, tuple[str, ...]]
    cost: tuple[str, tuple[str, ...]]
    scope: tuple[str, ...]
    ours: tuple[str, ...]
    described: tuple[str, ...] = ()


def _parse_csv(export: _CsvExport, text: str, source: str, zone: tzinfo) -> Bill:
    """``text`` read as the CSV bill ``export`` describes, its days in ``zone``."""
    required = dict((export.day, export.item, export.cost))
    header, rows = _table(text, source, export.provider, required)
    day, item, cost = (header[label] for label in required)
    scope = _first(header, export.scope)
    currency = _first(header, ("currency",))
    described = [c for c in (_first(header, (n,)) for n in export.described) if c is not None]
    lines: list[BillLine] = []
    days: list[date] = []
    skipped = 0
    for row in rows:
        when = _day(row[day], zone, source)
        days.append(when)
        if scope is not None and not _mentions(row[scope], export.ours):
            skipped += 1
            continue
        if currency is not None:
            _check_currency(row[currency], source)
        name = row[item].strip() or " ".join(row[c].strip() for c in described if row[c].strip())
        lines.append(BillLine(when, name, _money(row[cost], source, name)))
    if not days:
        raise _shape(source, export.provider, "it holds no row under its header")
    return Bill(export.provider, source, zone, min(days), max(days), tuple(lines), skipped)


# -- Google Cloud Billing (Gemini) ------------------------------------------------------------


def parse_gemini_billing(text: str, source: str, zone: tzinfo) -> Bill:
    """A Cloud Billing cost CSV: the Gemini API's rows, per SKU and day (in ``zone``)."""
    return _parse_csv(_GEMINI_CSV, text, source, zone)


_GEMINI_CSV = _CsvExport(
    provider="gemini",
    day=("Usage start date", ("usagestartdate", "usagestarttime", "usagedate")),
    item=("SKU description", ("skudescription",)),
    cost=("Cost", ("unroundedcost", "cost")),
    scope=("servicedescription", "service"),
    ours=("gemini", "generative language", "vertex ai"),
)


# -- Alibaba Cloud (DashScope) ----------------------------------------------------------------


def parse_dashscope_bill(text: str, source: str, zone: tzinfo) -> Bill:
    """An Alibaba Cloud Bill Details CSV: Model Studio's rows, per model and billing date."""
    return _parse_csv(_DASHSCOPE_CSV, text, source, zone)


_DASHSCOPE_CSV = _CsvExport(
    provider="dashscope",
    day=("Billing Date", ("billingdate",)),
    item=("Instance ID", ("model", "modelname", "instanceid")),
    cost=("Pretax Amount", ("pretaxamount", "amountafterreduction", "payableamount")),
    scope=("productname", "product"),
    ours=("model studio", "dashscope", "bailian"),
    described=("productdetail", "commodityname", "billableitem"),
)


# -- shared ---------------------------------------------------------------------------------------


def _rows(text: str) -> list[list[str]]:
    try:
        return list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    except csv.Error:
        return []


def _column(name: str) -> str:
    """A header as the parsers compare it: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _table(
    text: str, source: str, provider: Provider, required: Mapping[str, Sequence[str]]
) -> tuple[dict[str, int], list[list[str]]]:
    """The header (each required column's and every other column's index, by its compared
    name) and the rows under it that have a date (the first required column); the header may
    come after a few lines of preamble."""
    try:
        rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    except csv.Error as exc:
        raise _shape(source, provider, f"it is not CSV ({exc})") from exc
    for at, row in enumerate(rows[:_PREAMBLE_ROWS]):
        names = {_column(cell): n for n, cell in enumerate(row)}
        found = {label: _first(names, options) for label, options in required.items()}
        columns = {label: index for label, index in found.items() if index is not None}
        if len(columns) == len(required):
            # A row with no date (a total or subtotal under the charges) is not a charge.
            day = columns[next(iter(required))]
            body = [r for r in rows[at + 1 :] if len(r) > day and r[day].strip()]
            short = next((r for r in body if len(r) <= max(columns.values())), None)
            if short is not None:
                raise _shape(source, provider, f"the row {_cut(short)} lacks cells of its header")
            return {**names, **columns}, body
    missing = ", ".join(required)
    raise _shape(source, provider, f"no header row with the columns {missing}")


def _first(header: Mapping[str, int], options: Iterable[str]) -> int | None:
    return next((header[o] for o in options if o in header), None)


def _mentions(value: str, words: Iterable[str]) -> bool:
    low = value.lower()
    return any(word in low for word in words)


def _day(value: str, zone: tzinfo, source: str) -> date:
    """A bill's date or time as a day in ``zone``: a date is that day; a time with an offset
    (or ``UTC``) is the day it falls on in ``zone``; a time without one is read in ``zone``."""
    text = value.strip()
    if re.fullmatch(r"\d{8}", text):
        text = f"{text[:4]}-{text[4:6]}-{text[6:]}"
    text = re.sub(r"\s*UTC$", "+00:00", text).replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        try:
            when = datetime.strptime(text, "%b %d, %Y")
        except ValueError:
            raise ConfigError(
                f"{source}: {value!r} is not a date (expected 2026-12-01, 20261201 or an ISO "
                "time such as 2026-12-01 08:00:00 UTC)"
            ) from None
    if when.tzinfo is not None:
        return when.astimezone(zone).date()
    return when.date()


def _money(value: Any, source: str, item: str) -> Decimal:
    if isinstance(value, bool) or value is None:
        raise ConfigError(f"{source}: the amount of {item!r} is {value!r}, not a number")
    text = str(value).strip().replace(",", "").replace("$", "")
    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise ConfigError(f"{source}: the amount of {item!r} is {value!r}, not a number") from None
    if not amount.is_finite():
        raise ConfigError(f"{source}: the amount of {item!r} is {value!r}, not a finite number")
    return amount


def _check_currency(value: Any, source: str) -> None:
    if not isinstance(value, str) or value.strip().upper() not in ("USD", ""):
        raise ConfigError(
            f"{source}: an amount is in {value!r}, and the ledger is in USD; export the bill in "
            "USD (or convert it) first"
        )


def _shape(source: str, provider: Provider, why: str) -> ConfigError:
    return ConfigError(f"{source} is not {EXPECTED[provider]}: {why}")


def _cut(value: Any, room: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= room else text[: room - 1] + "…"
