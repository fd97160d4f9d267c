"""The evaluation report: judgments of one or more evaluations → a folder fit for a paper.

An evaluation directory holds ``judgments.jsonl`` (one verdict per line: judge, condition, pair,
answer order, what it picked, what it was shown, retrieved and gold spans, the haystack's hours)
and ``evaluation.json`` (its id, the benchmark's content hash, when it started). This module reads
the records with the strict parse of :class:`policies.judging.JudgmentRecord`, lets
:mod:`policies.judging` compute every metric and :mod:`policies.bootstrap` every 95 % interval,
and writes into the report folder:

* ``report.md`` and ``report.html`` (one page, nothing loaded from elsewhere: its figures are the
  PNG files beside it, which a Content-Security-Policy of ``img-src 'self'`` lets it show);
* ``figures/<name>.png`` and ``.pdf`` drawn with matplotlib (:mod:`playlisteval.figures`): accuracy
  by condition, against the haystack hours actually built, retrieved against uniform frames, the
  modality ablation, position consistency, per domain, and retriever recall@k — each accuracy
  with its 95 % interval; a figure whose data is absent is a sentence that says why;
* ``tables/<name>.csv`` and ``.tex`` (booktabs) for every table (:mod:`playlisteval.report_tables`);
* a provenance block: the benchmark's content hash, the judges and the provider ids that answered
  them (from the evaluation's log, when the workspace that ran it is given), the conditions with
  the hours asked and built, the dates, the code version and whether the judges were live or the
  offline provider — which is a harness, never evidence of model quality, and said so on every
  page, table caption and figure.

A condition keeps its one name (:meth:`policies.judging.Condition.label`) in the tables; figures
and the hours columns name the haystack hours each run actually built (``length_hours``), so a
condition asked as "1h" over a playlist of 0.1 h reads "0.1 h (1 h asked)". Two retrievers that
returned the same spans for every pair are named as one measurement beside their recall.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from playlisteval.figures import (
    Bar,
    BarFigure,
    BarGroup,
    FigureSpec,
    HeatCell,
    HeatFigure,
    LineFigure,
    Point,
    Series,
)
from playlisteval.report_tables import Cell, Column, Stat, Table
from policies.bootstrap import BOOTSTRAP_DRAWS, Interval, clustered_interval
from policies.judging import (
    DEFAULT_KS,
    IOU_THRESHOLDS,
    Condition,
    JudgedPair,
    JudgeMetrics,
    JudgingError,
    Judgment,
    JudgmentRecord,
    PairedTest,
    RetrievalCase,
    RetrievalMetrics,
    judge_metrics,
    judged_pairs,
    paired_test,
    recall_at_k,
    retrieval_metrics,
)
from store.errors import PlaylistEvalError
from store.version import code_version
from tools.providers.judges import OFFLINE_JUDGES

if TYPE_CHECKING:
    from store.eventstore import EventStore

JUDGMENTS_FILE = "judgments.jsonl"
EVALUATION_FILE = "evaluation.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
FIGURES_DIR = "figures"
TABLES_DIR = "tables"
RECALL_THRESHOLD = 0.5
"""The tIoU at which the recall@k figure is drawn (the tables show every threshold)."""
OFFLINE_NOTE = (
    "Offline provider: a deterministic harness that exercises the pipeline; "
    "these numbers are not evidence of model quality."
)
UNKNOWN_NOTE = (
    "Not known whether the judges answered live or through the offline provider (the log was "
    "not read); an offline answer is a harness, not evidence of model quality."
)
INTERVALS = (
    f"95 % intervals are percentile bootstraps over {BOOTSTRAP_DRAWS} resamples (seeded) of "
    "whole playlists drawn with replacement, or of whole pairs when a run's judgments come from "
    "one playlist; with few playlists they are rough and tend to be narrow."
)

Source = Literal["offline", "live", "mixed", "unknown"]


class ReportError(PlaylistEvalError):
    """The evaluation directories cannot be reported on (missing file, malformed record)."""


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportSummary:
    """What :func:`write_report` wrote and from what.

    ``figures`` are the titles of the figures drawn and ``omitted`` the sentences that stand in
    for those whose data is absent; ``figure_files`` the PNG and PDF files, ``table_files`` the
    CSV and LaTeX files; ``source`` whether the judges were ``offline``, ``live``, ``mixed`` or
    ``unknown`` (the evaluation's log was not read and a judge is no offline judge).
    """

    markdown: Path
    html: Path
    judgments: int
    runs: int
    figures: tuple[str, ...]
    omitted: tuple[str, ...]
    figure_files: tuple[Path, ...] = ()
    table_files: tuple[Path, ...] = ()
    source: Source = "unknown"


def _parse(line: str, where: str) -> JudgmentRecord:
    try:
        return JudgmentRecord.from_line(line)
    except JudgingError as error:
        raise ReportError(f"{where}: {error}") from error


def _said(record: JudgmentRecord) -> tuple[Any, ...]:
    """What a record says, not the call that made it: equal for a verdict recorded twice."""
    return (record.judgment, record.condition, record.ranked, record.gold)


def load_records(eval_dirs: Sequence[Path]) -> list[JudgmentRecord]:
    """Every judgment of the evaluation directories, in file order, one per verdict.

    A verdict recorded twice (a resumed run, or a directory given twice) counts once; two
    different verdicts for the same judge, condition, pair, length and order raise.
    """
    seen: dict[tuple[str, str, str, float, str], tuple[JudgmentRecord, str]] = {}
    for directory in eval_dirs:
        path = Path(directory) / JUDGMENTS_FILE
        if not path.is_file():
            raise ReportError(
                f"{str(directory)!r} has no {JUDGMENTS_FILE}; run `eval` into it first"
            )
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            item = _parse(line, where)
            j = item.judgment
            key = (j.judge, j.condition, j.pair_id, j.length_hours, j.order)
            if key in seen:
                first, first_where = seen[key]
                if _said(first) != _said(item):
                    raise ReportError(
                        f"{where}: {j.judge!r} under {j.condition!r} judged pair {j.pair_id!r} "
                        f"({j.order}, {j.length_hours:g} h) differently at {first_where}; keep one"
                    )
                continue
            seen[key] = (item, where)
    return [item for item, _ in seen.values()]


# --- provenance ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnsweredCall:
    """Who answered one recorded judgment call, as the evaluation's log says: the priced model
    id, the provider id the response names (``provider:model`` as the provider reported it),
    whether the offline provider answered, and when."""

    model: str
    answered_as: str
    offline: bool
    recorded_at: datetime


def _evaluation_json(directory: Path) -> dict[str, Any]:
    path = Path(directory) / EVALUATION_FILE
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ReportError(
            f"{path} is not JSON ({error}); restore it or run `eval` again"
        ) from error
    return found if isinstance(found, dict) else {}


def answered_calls(events: EventStore, eval_dirs: Sequence[Path]) -> dict[str, AnsweredCall]:
    """Request key → who answered it, from each evaluation's stream ``eval-<id>`` (its id read
    from ``evaluation.json``); a call served again from the log keeps its first answer."""
    from agents.evaluation import eval_stream

    found: dict[str, AnsweredCall] = {}
    for directory in eval_dirs:
        evaluation_id = _evaluation_json(directory).get("evaluation_id")
        if not evaluation_id:
            continue
        for stored in events.read_stream(eval_stream(str(evaluation_id))):
            if stored.type != "CallRecorded" or stored.data.get("replayed"):
                continue
            data = stored.data
            raw = data.get("response")
            response: dict[str, Any] = raw if isinstance(raw, dict) else {}
            model_name = str(response.get("model_name") or data.get("model", "?"))
            provider = response.get("provider_name")
            found.setdefault(
                str(data.get("key", "")),
                AnsweredCall(
                    model=str(data.get("model", "?")),
                    answered_as=f"{provider}:{model_name}" if provider else model_name,
                    offline=bool(data.get("offline")),
                    recorded_at=stored.recorded_at,
                ),
            )
    return found


@dataclass(frozen=True)
class _JudgeSource:
    judge: str
    answered_as: tuple[str, ...]  # provider ids from the log
    mode: Source  # offline, live, mixed (some calls each way) or unknown
    missing: int  # records whose call the log read does not hold


def _judge_sources(
    records: Sequence[JudgmentRecord], calls: Mapping[str, AnsweredCall] | None
) -> dict[str, _JudgeSource]:
    by_judge: dict[str, list[JudgmentRecord]] = {}
    for r in records:
        by_judge.setdefault(r.judge, []).append(r)
    sources = {}
    for judge, items in sorted(by_judge.items()):
        answered = [calls.get(r.call_key) for r in items] if calls is not None else []
        known = [a for a in answered if a is not None]
        flags = {a.offline for a in known}
        mode: Source
        if len(flags) == 2:
            mode = "mixed"
        elif judge in OFFLINE_JUDGES:
            mode = "offline"  # an offline judge exists only in the offline provider
        elif known and len(known) == len(items):
            mode = "offline" if flags == {True} else "live"
        else:
            mode = "unknown"
        sources[judge] = _JudgeSource(
            judge=judge,
            answered_as=tuple(sorted({a.answered_as for a in known})),
            mode=mode,
            missing=len(items) - len(known),
        )
    return sources


def _source(sources: Mapping[str, _JudgeSource]) -> Source:
    modes = {s.mode for s in sources.values()}
    if "unknown" in modes:
        return "unknown"
    if len(modes) == 1:
        return modes.pop()
    return "mixed"


MODE_TEXT: dict[Source, str] = {
    "offline": "offline provider",
    "live": "live",
    "mixed": "partly offline provider, partly live",
    "unknown": "not known",
}


def _source_sentence(source: Source, sources: Mapping[str, _JudgeSource]) -> str:
    if source == "offline":
        return "Offline evaluation. " + OFFLINE_NOTE
    if source == "live":
        return "Live evaluation: every judgment was answered by the provider named beside it."
    if source == "mixed":
        offline = ", ".join(s.judge for s in sources.values() if s.mode != "live")
        return f"Mixed evaluation: {offline} answered offline, in whole or in part. " + OFFLINE_NOTE
    unknown = ", ".join(s.judge for s in sources.values() if s.mode == "unknown")
    return (
        f"Whether {unknown} answered live or through the offline provider is not known: no log "
        "was read, or the one read lacks their calls (run `playlisteval report` with the --home "
        "of the workspace that evaluated). An offline answer is a harness, not evidence of model "
        "quality."
    )


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _started(value: object) -> str:
    """``evaluation.json``'s start time as the other dates read (as written if unreadable)."""
    try:
        return _stamp(datetime.fromisoformat(str(value)))
    except ValueError:
        return str(value)


def _provenance_table(
    eval_dirs: Sequence[Path],
    records: Sequence[JudgmentRecord],
    runs: Sequence[_Run],
    sources: Mapping[str, _JudgeSource],
    source: Source,
    calls: Mapping[str, AnsweredCall] | None,
    log_note: str,
    now: datetime,
) -> Table:
    rows: list[tuple[Cell, ...]] = [("source", _source_sentence(source, sources))]
    metas = [(Path(d), _evaluation_json(d)) for d in eval_dirs]
    hashes = {str(m.get("benchmark_sha256") or "") for _, m in metas}
    for directory, meta in metas:
        sha = meta.get("benchmark_sha256") or f"not recorded in {directory / EVALUATION_FILE}"
        rows.append((f"benchmark of {directory}", f"sha256 {sha} (of pairs.jsonl)"))
    if len(hashes) > 1:
        rows.append(("benchmarks", "these evaluations judged different benchmarks"))
    for directory, meta in metas:
        rows.append((f"evaluation {directory}", f"id {meta.get('evaluation_id') or '—'}"))
    for s in sources.values():
        who = ", ".join(s.answered_as) if s.answered_as else "not in the log read"
        if s.missing and s.answered_as:
            who += f" ({s.missing} judgments not in the log read)"
        rows.append((f"judge {s.judge}", f"{MODE_TEXT[s.mode]}; answered as {who}"))
    for run in _by_condition(runs):
        asked = f"{run.condition.hours:g} h asked, {_hours_text(run.built)} h built"
        rows.append((f"condition {run.condition_id}", asked))
    for directory, meta in metas:
        if meta.get("started"):
            rows.append((f"evaluation started ({directory})", _started(meta["started"])))
        sessions = [s for s in meta.get("sessions") or [] if isinstance(s, dict)]
        if sessions:
            versions = dict.fromkeys(str(s.get("code_version", "?")) for s in sessions)
            modes = dict.fromkeys("offline" if s.get("offline") else "live" for s in sessions)
            rows.append(
                (
                    f"code version (of the evaluation, {directory})",
                    f"{', '.join(versions)}; {len(sessions)} session(s), {', '.join(modes)}",
                )
            )
    times = [calls[r.call_key].recorded_at for r in records if calls and r.call_key in calls]
    if times:
        rows.append(("first judgment", _stamp(min(times))))
        rows.append(("last judgment", _stamp(max(times))))
    rows.append(("report written", _stamp(now)))
    rows.append(("code version (of the report)", code_version()))
    rows.append(("log", log_note))
    rows.append(("intervals", INTERVALS))
    rows.append(("judgments", f"{len(records)} in {len(runs)} runs (judge × condition)"))
    return Table(
        "provenance",
        "Provenance",
        (
            Column("what", latex_width="0.3\\linewidth"),
            Column("value", latex_width="0.6\\linewidth"),
        ),
        rows,
    )


def _by_condition(runs: Sequence[_Run]) -> list[_Run]:
    """One run per condition id (its built hours are the same for every judge)."""
    first: dict[str, _Run] = {}
    for run in runs:
        first.setdefault(run.condition_id, run)
    return list(first.values())


# --- computing -------------------------------------------------------------------------------


def _score(judgment: Judgment) -> float:
    """A judgment's accuracy score: 1 right, 0 wrong, 0.5 a tie or an unparseable verdict."""
    if judgment.answered:
        return 1.0 if judgment.correct else 0.0
    return 0.5


def _hours_text(hours: Sequence[float]) -> str:
    if not hours:
        return "?"
    low, high = min(hours), max(hours)
    return f"{low:.3g}" if math.isclose(low, high) else f"{low:.3g}–{high:.3g}"


def _judgment_interval(judgments: Sequence[Judgment]) -> Interval | None:
    return clustered_interval(
        [_score(j) for j in judgments],
        [j.playlist_id for j in judgments],
        [j.key for j in judgments],
    )


def _pair_interval(pairs: Sequence[JudgedPair], value: Any) -> Interval | None:
    if not pairs:
        return None
    return clustered_interval(
        [float(value(p)) for p in pairs],
        [p.playlist_id for p in pairs],
        [(p.pair_id, p.length_hours) for p in pairs],
    )


@dataclass
class _Run:
    judge: str
    condition_id: str
    condition: Condition
    records: list[JudgmentRecord] = field(default_factory=list)

    @property
    def judgments(self) -> list[Judgment]:
        return [r.judgment for r in self.records]

    @property
    def built(self) -> tuple[float, ...]:
        """The haystack hours the run's judgments were actually given, distinct and sorted."""
        return tuple(sorted({r.length_hours for r in self.records}))

    @property
    def mean_built(self) -> float:
        return math.fsum(r.length_hours for r in self.records) / len(self.records)

    def hours_label(self) -> str:
        """The hours built, and those asked when they differ: ``0.1 h (1 h asked)``."""
        built = _hours_text(self.built)
        asked = self.condition.hours
        # No-break spaces: a wrapped figure label keeps "(1 h asked)" on one line.
        if len(self.built) == 1 and math.isclose(self.built[0], asked, rel_tol=0.005):
            return f"{built}\u00a0h"
        return f"{built}\u00a0h\u00a0({asked:g}\u00a0h\u00a0asked)"

    def name(self, *without: str) -> str:
        """The condition's label without its asked hours, then the hours built."""
        return f"{self.condition.label('hours', *without)} · {self.hours_label()}"


@dataclass(frozen=True)
class _Stats:
    """One run's metrics and the intervals the report shows beside them."""

    metrics: JudgeMetrics
    pairs: tuple[JudgedPair, ...]
    accuracy: Interval | None
    swap: Interval | None
    consistent: Interval | None
    consistency: Interval | None
    by_domain: dict[str, Interval | None]
    by_gap: dict[int, Interval | None]


def _stats(run: _Run) -> _Stats:
    judgments = run.judgments
    pairs = tuple(judged_pairs(judgments))

    def strata(key: str) -> dict[Any, Interval | None]:
        groups: dict[Any, list[Judgment]] = {}
        for j in judgments:
            groups.setdefault(getattr(j, key), []).append(j)
        return {k: _judgment_interval(v) for k, v in groups.items()}

    return _Stats(
        metrics=judge_metrics(judgments),
        pairs=pairs,
        accuracy=_judgment_interval(judgments),
        swap=_pair_interval(pairs, lambda p: p.swap_averaged),
        consistent=_pair_interval(pairs, lambda p: p.consistent_correct),
        consistency=_pair_interval(pairs, lambda p: p.position_consistent),
        by_domain=strata("domain"),
        by_gap=strata("gap"),
    )


@dataclass(frozen=True)
class _Comparison:
    judge: str
    retrieved: _Run
    uniform: _Run
    test: PairedTest
    interval: Interval | None  # of the difference


@dataclass(frozen=True)
class _RecallRow:
    retriever: str
    hours: float  # asked
    built: tuple[float, ...]
    metrics: RetrievalMetrics
    cases: tuple[RetrievalCase, ...]


def _runs(records: Iterable[JudgmentRecord]) -> list[_Run]:
    runs: dict[tuple[str, str], _Run] = {}
    for item in records:
        j = item.judgment
        run = runs.get((j.judge, j.condition))
        if run is None:
            run = runs[(j.judge, j.condition)] = _Run(j.judge, j.condition, item.condition)
        elif run.condition != item.condition:
            raise ReportError(
                f"condition id {j.condition!r} names two conditions, {run.condition!r} and "
                f"{item.condition!r}; condition ids must be unique"
            )
        run.records.append(item)
    return sorted(runs.values(), key=_run_order)


def _run_order(run: _Run) -> tuple[Any, ...]:
    """Judge, then sampling, retriever, modality and hours in numeric order (1 h before 10 h)."""
    c = run.condition
    return (
        run.judge,
        c.frames != "uniform",
        c.retriever or "",
        c.modality,
        c.hours,
        c.n_frames,
        -1 if c.thinking_budget is None else c.thinking_budget,
        c.resolution,
        run.condition_id,
    )


def _comparisons(
    runs: Sequence[_Run], stats: Mapping[tuple[str, str], _Stats]
) -> list[_Comparison]:
    """Each retrieved run against the same judge's uniform run that differs only in sampling."""
    uniform = {
        (r.judge, r.condition.without("frames", "retriever")): r
        for r in runs
        if r.condition.frames == "uniform"
    }
    found: list[_Comparison] = []
    for run in runs:
        if run.condition.frames != "retrieved":
            continue
        base = uniform.get((run.judge, run.condition.without("frames", "retriever")))
        if base is None:
            continue
        try:
            test = paired_test(run.judgments, base.judgments)
        except JudgingError:
            continue  # no shared complete pair: nothing to compare
        a = {(p.pair_id, p.length_hours): p for p in stats[(run.judge, run.condition_id)].pairs}
        b = {(p.pair_id, p.length_hours): p for p in stats[(base.judge, base.condition_id)].pairs}
        shared = [k for k in a if k in b]
        interval = clustered_interval(
            [a[k].swap_averaged - b[k].swap_averaged for k in shared],
            [a[k].playlist_id for k in shared],
            shared,
        )
        found.append(_Comparison(run.judge, run, base, test, interval))
    return found


def _recall_rows(records: Iterable[JudgmentRecord]) -> list[_RecallRow]:
    """Retriever quality per (retriever, hours asked), one case per pair and haystack (judges,
    modalities and orders share a retrieval)."""
    cases: dict[tuple[str, float], dict[tuple[str, float], RetrievalCase]] = {}
    for item in records:
        c = item.condition
        if c.frames != "retrieved" or not item.gold:
            continue
        per = cases.setdefault((c.retriever or "?", c.hours), {})
        per.setdefault((item.pair_id, item.length_hours), item.retrieval_case())
    return [
        _RecallRow(
            retriever,
            hours,
            tuple(sorted({length for _, length in per})),
            retrieval_metrics(per.values()),
            tuple(per.values()),
        )
        for (retriever, hours), per in sorted(cases.items())
    ]


@dataclass(frozen=True)
class _Coincidence:
    """Retrievers that returned the same ranked spans for every pair they share."""

    hours: float
    retrievers: tuple[str, ...]
    pairs: int


def _coincidences(records: Iterable[JudgmentRecord]) -> list[_Coincidence]:
    spans: dict[float, dict[str, dict[tuple[str, float], tuple[Any, ...]]]] = {}
    for item in records:
        c = item.condition
        if c.frames != "retrieved":
            continue
        per = spans.setdefault(c.hours, {}).setdefault(c.retriever or "?", {})
        per.setdefault((item.pair_id, item.length_hours), item.ranked)
    found: list[_Coincidence] = []
    for hours, by_retriever in sorted(spans.items()):
        left = sorted(by_retriever)
        while left:
            first, *rest = left
            same = [
                other
                for other in rest
                if (shared := by_retriever[first].keys() & by_retriever[other].keys())
                and all(by_retriever[first][k] == by_retriever[other][k] for k in shared)
            ]
            if same:
                shared_pairs = set(by_retriever[first])
                for other in same:
                    shared_pairs &= set(by_retriever[other])
                found.append(_Coincidence(hours, (first, *same), len(shared_pairs)))
            left = [r for r in rest if r not in same]
    return found


def _coincidence_sentence(c: _Coincidence) -> str:
    names = " and ".join(c.retrievers)
    count = {2: "two", 3: "three", 4: "four"}.get(len(c.retrievers), str(len(c.retrievers)))
    return (
        f"{names} returned the same ranked spans for every one of the {c.pairs} pairs at "
        f"{c.hours:g} h asked: their recall, and the accuracy of judges shown their spans, are "
        f"one measurement, not {count}."
    )


def _twin_names(coincidences: Sequence[_Coincidence]) -> dict[tuple[float, str], str]:
    """(hours asked, retriever) → how figures name it, e.g. ``text = multimodal``."""
    names = {}
    for c in coincidences:
        for r in c.retrievers:
            names[(c.hours, r)] = " = ".join(c.retrievers)
    return names


def _modality_groups(runs: Sequence[_Run]) -> list[tuple[str, list[_Run]]]:
    """Runs of one judge that differ only in modality, when there are at least two of them."""
    groups: dict[tuple[str, tuple[Any, ...]], list[_Run]] = {}
    for run in runs:
        groups.setdefault((run.judge, run.condition.without("modality")), []).append(run)
    return [
        (f"{members[0].judge} · {members[0].name('modality')}", members)
        for members in groups.values()
        if len({m.condition.modality for m in members}) >= 2
    ]


# --- tables ----------------------------------------------------------------------------------


def _estimate(metrics: JudgeMetrics, name: str) -> float | None:
    table = metrics.tables[name]
    return None if table is None else table.micro.value


def _table1(
    runs: Sequence[_Run],
    stats: Mapping[tuple[str, str], _Stats],
    sources: Mapping[str, _JudgeSource],
) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for run in runs:
        s = stats[(run.judge, run.condition_id)]
        m = s.metrics
        acc = m.tables["accuracy"]
        source = sources[run.judge]
        answered = ", ".join(source.answered_as) or MODE_TEXT[source.mode]
        rows.append(
            (
                run.judge,
                run.condition_id,
                _hours_text(run.built),
                answered,
                Stat(_estimate(m, "accuracy"), s.accuracy),
                Stat(_estimate(m, "swap_averaged_accuracy"), s.swap),
                Stat(_estimate(m, "consistent_accuracy"), s.consistent),
                Stat(_estimate(m, "position_consistency"), s.consistency),
                _estimate(m, "position_bias"),
                m.judgments,
                m.pairs,
                None if acc is None else acc.micro.clustered_se,
            )
        )
    return Table(
        "judges-by-condition",
        "Judges by condition",
        (
            Column("judge"),
            Column("condition"),
            Column("haystack h (built)"),
            Column("answered by"),
            Column("accuracy", "stat"),
            Column("swap-averaged", "stat"),
            Column("consistent", "stat"),
            Column("position consistency", "stat"),
            Column("position bias", "signed"),
            Column("N", "int"),
            Column("pairs", "int"),
            Column("SE (clustered)", "num"),
        ),
        rows,
        note=(
            "Accuracy counts a tie or an unparseable verdict as 0.5; N counts judgments; "
            "swap-averaged, consistent and position consistency are over the pairs judged in "
            "both orders; brackets hold the 95 % interval; SE is the accuracy's standard error "
            "clustered by playlist; haystack h is what each judgment was given (the condition "
            "names the hours asked)."
        ),
    )


def _shown_table(runs: Sequence[_Run]) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for run in runs:
        shown = [r.shown for r in run.records if r.shown is not None]
        if not shown:
            rows.append((run.judge, run.condition_id, f"0 / {len(run.records)}", *([None] * 5)))
            continue
        frames = [s.frames for s in shown]
        resolutions = sorted({s.resolution for s in shown if s.resolution is not None})
        rows.append(
            (
                run.judge,
                run.condition_id,
                f"{len(shown)} / {len(run.records)}",
                math.fsum(frames) / len(frames),
                f"{min(frames)}–{max(frames)}" if min(frames) != max(frames) else str(frames[0]),
                ", ".join(f"{r}p" for r in resolutions) or None,
                math.fsum(s.transcript_chars for s in shown) / len(shown),
                math.fsum(s.audio_s for s in shown) / len(shown),
            )
        )
    return Table(
        "shown",
        "What the judges were shown",
        (
            Column("judge"),
            Column("condition"),
            Column("records with shown"),
            Column("frames (mean)", "num"),
            Column("frames (range)"),
            Column("resolution"),
            Column("transcript chars (mean)", "num"),
            Column("audio s (mean)", "num"),
        ),
        rows,
        note=(
            "From each judgment's record of what its request carried (shown): pictures or "
            "frames, their height, transcript characters and seconds of sound."
        ),
    )


def _strata_table(
    runs: Sequence[_Run],
    stats: Mapping[tuple[str, str], _Stats],
    by: Literal["domain", "gap"],
    title: str,
) -> Table:
    attr = f"by_{by}"
    keys: set[Any] = set()
    for s in stats.values():
        table = s.metrics.tables["accuracy"]
        if table is not None:
            keys.update(getattr(table, attr).cells)
    ordered = sorted(keys, key=lambda k: (str(type(k)), k))
    rows: list[tuple[Cell, ...]] = []
    for run in runs:
        s = stats[(run.judge, run.condition_id)]
        table = s.metrics.tables["accuracy"]
        intervals: Mapping[Any, Interval | None] = getattr(s, attr)
        cells: list[Cell] = []
        for key in ordered:
            cell = None if table is None else getattr(table, attr).cells.get(key)
            cells.append(None if cell is None else Stat(cell.value, intervals.get(key), cell.n))
        macro = None if table is None else getattr(table, attr).macro
        rows.append((run.judge, run.condition_id, *cells, macro))
    return Table(
        f"accuracy-per-{by}",
        title,
        (
            Column("judge"),
            Column("condition"),
            *(Column(str(k), "stat") for k in ordered),
            Column("macro", "num"),
        ),
        rows,
        note=(
            "Accuracy per stratum with its 95 % interval and N (judgments); macro is the "
            "unweighted mean of the cells."
        ),
    )


def _modality_table(
    groups: Sequence[tuple[str, list[_Run]]], stats: Mapping[tuple[str, str], _Stats]
) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for _, members in groups:
        for run in sorted(members, key=lambda r: r.condition.modality):
            s = stats[(run.judge, run.condition_id)]
            rows.append(
                (
                    run.judge,
                    run.condition.label("modality"),
                    run.condition.modality,
                    Stat(_estimate(s.metrics, "accuracy"), s.accuracy),
                    Stat(_estimate(s.metrics, "swap_averaged_accuracy"), s.swap),
                    s.metrics.judgments,
                )
            )
    return Table(
        "modality-ablation",
        "Modality ablation",
        (
            Column("judge"),
            Column("setting"),
            Column("modality"),
            Column("accuracy", "stat"),
            Column("swap-averaged", "stat"),
            Column("N", "int"),
        ),
        rows,
        note="Runs of one judge that differ only in what the judge is shown.",
    )


def _comparison_table(
    comparisons: Sequence[_Comparison], twins: Mapping[tuple[float, str], str]
) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for c in comparisons:
        t = c.test
        retriever = c.retrieved.condition.retriever or "?"
        rows.append(
            (
                c.judge,
                twins.get((c.retrieved.condition.hours, retriever), retriever),
                c.uniform.condition_id,
                c.retrieved.condition_id,
                t.pairs,
                Stat(t.difference.value, c.interval),
                t.difference.clustered_se,
                t.z,
                t.p,
                t.a_only,
                t.b_only,
                t.sign_p,
            )
        )
    return Table(
        "retrieved-vs-uniform",
        "Retrieved against uniform frames",
        (
            Column("judge"),
            Column("retriever"),
            Column("uniform"),
            Column("retrieved"),
            Column("pairs", "int"),
            Column("difference", "signed_stat"),
            Column("SE (clustered)", "num"),
            Column("z", "signed"),
            Column("p", "p"),
            Column("only retrieved consistent", "int"),
            Column("only uniform consistent", "int"),
            Column("sign test p", "p"),
        ),
        rows,
        note=(
            "Difference: retrieved minus uniform swap-averaged accuracy on the pairs both judged "
            "in both orders, with its 95 % interval; z and p from the playlist-clustered SE; the "
            "sign test is McNemar's on pairs consistently correct under one run only."
        ),
    )


def _recall_table(
    rows_in: Sequence[_RecallRow], ks: Sequence[int], coincidences: Sequence[_Coincidence]
) -> Table:
    twins = {(c.hours, r): c.retrievers for c in coincidences for r in c.retrievers}
    rows: list[tuple[Cell, ...]] = []
    for row in rows_in:
        same = [r for r in twins.get((row.hours, row.retriever), ()) if r != row.retriever]
        for threshold in IOU_THRESHOLDS:
            rows.append(
                (
                    row.retriever,
                    f"{row.hours:g}",
                    _hours_text(row.built),
                    f"{threshold:g}",
                    *(row.metrics.recall[(k, threshold)].value for k in ks),
                    row.metrics.coverage.value,
                    row.metrics.mean_best_iou.value,
                    row.metrics.cases,
                    ", ".join(same) or None,
                )
            )
    sentences = " ".join(_coincidence_sentence(c) for c in coincidences)
    return Table(
        "retriever-recall",
        "Retriever recall of the gold evidence",
        (
            Column("retriever"),
            Column("hours asked"),
            Column("haystack h (built)"),
            Column("tIoU ≥"),
            *(Column(f"R@{k}", "num") for k in ks),
            Column("coverage", "num"),
            Column("mean IoU", "num"),
            Column("N", "int"),
            Column("same spans as"),
        ),
        rows,
        note=(
            "Recall@k: share of gold segments matched by a top-k retrieved span at the tIoU "
            "(a k past the spans retrieved repeats R@ that number). " + sentences
        ).strip(),
    )


# --- figures ---------------------------------------------------------------------------------


def _bar(series: str, value: float | None, interval: Interval | None) -> Bar | None:
    if value is None:
        return None
    if interval is None:
        return Bar(series, value)
    return Bar(series, value, interval.low, interval.high)


def _present(*bars: Bar | None) -> tuple[Bar, ...]:
    return tuple(b for b in bars if b is not None)


@dataclass
class _Figures:
    """The figures to draw, each with its caption, and the sentences for those not drawn."""

    drawn: list[tuple[FigureSpec, str]] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)

    def add(self, spec: FigureSpec | None, caption: str, title: str, why: str) -> None:
        if spec is None:
            self.omitted.append(f"{title}: not drawn, {why}.")
        else:
            self.drawn.append((spec, caption))


WHISKERS = "Whiskers: 95 % intervals (see Provenance)."


def _accuracy_figure(runs: Sequence[_Run], stats: Mapping[tuple[str, str], _Stats]) -> BarFigure:
    groups: dict[str, list[Bar]] = {}
    for run in sorted(runs, key=lambda r: (_run_order(r)[1:], r.judge)):
        s = stats[(run.judge, run.condition_id)]
        bar = _bar(run.judge, _estimate(s.metrics, "accuracy"), s.accuracy)
        if bar is not None:
            groups.setdefault(run.name(), []).append(bar)
    return BarFigure(
        "accuracy-by-condition",
        "Accuracy by condition",
        tuple(BarGroup(label, tuple(bars)) for label, bars in groups.items()),
        "accuracy",
        reference=0.5,
    )


def _hours_figure(
    runs: Sequence[_Run], stats: Mapping[tuple[str, str], _Stats]
) -> tuple[LineFigure | None, str]:
    """Accuracy against the haystack hours built, one line per judge and condition apart from
    its hours; or None and why not."""
    families: dict[tuple[str, tuple[Any, ...]], list[_Run]] = {}
    for run in runs:
        families.setdefault((run.judge, run.condition.without("hours")), []).append(run)
    series: list[Series] = []
    collapsed: list[_Run] = []
    for members in families.values():
        points = []
        for run in sorted(members, key=lambda r: (r.mean_built, r.condition.hours)):
            s = stats[(run.judge, run.condition_id)]
            value = _estimate(s.metrics, "accuracy")
            if value is None:
                continue
            low = high = None
            if s.accuracy is not None:
                low, high = s.accuracy.low, s.accuracy.high
            points.append(Point(round(run.mean_built, 4), value, low, high))
        if len({p.x for p in points}) >= 2:
            label = f"{members[0].judge} · {members[0].condition.label('hours')}"
            series.append(Series(label, tuple(points)))
        elif len({m.condition.hours for m in members}) >= 2:
            collapsed += members
    if series:
        figure = LineFigure(
            "accuracy-vs-hours",
            "Accuracy against haystack hours",
            tuple(series),
            "haystack hours built",
            "accuracy",
            log_x=True,
            reference=0.5,
        )
        return figure, ""
    if collapsed:
        asked = [f"{h:g}" for h in sorted({r.condition.hours for r in collapsed})]
        built = _hours_text([h for r in collapsed for h in r.built])
        return None, (
            f"conditions asked for {', '.join(asked[:-1])} and {asked[-1]} h, but every haystack "
            f"built holds {built} h (the playlists hold no more), so there is no length axis"
        )
    return None, "no judge was run at more than one haystack length under one condition"


def _comparison_figure(
    comparisons: Sequence[_Comparison],
    stats: Mapping[tuple[str, str], _Stats],
    twins: Mapping[tuple[float, str], str],
) -> BarFigure | None:
    if not comparisons:
        return None
    groups: dict[tuple[str, str], list[Bar]] = {}
    for c in comparisons:
        key = (c.judge, c.uniform.condition_id)
        bars = groups.setdefault(key, [])
        if not bars:
            s = stats[(c.uniform.judge, c.uniform.condition_id)]
            bars += _present(
                _bar("uniform", _estimate(s.metrics, "swap_averaged_accuracy"), s.swap)
            )
        retriever = c.retrieved.condition.retriever or "?"
        name = twins.get((c.retrieved.condition.hours, retriever), retriever)
        series = f"retrieved: {name}"
        if any(b.series == series for b in bars):
            continue  # a retriever that coincides with one drawn: the same bar
        s = stats[(c.retrieved.judge, c.retrieved.condition_id)]
        value = _estimate(s.metrics, "swap_averaged_accuracy")
        bars += _present(_bar(series, value, s.swap))
    labels = {
        (c.judge, c.uniform.condition_id): f"{c.judge} · {c.uniform.name('frames', 'retriever')}"
        for c in comparisons
    }
    return BarFigure(
        "retrieved-vs-uniform",
        "Retrieved against uniform frames",
        tuple(BarGroup(labels[key], tuple(bars)) for key, bars in groups.items()),
        "swap-averaged accuracy",
        reference=0.5,
    )


def _modality_figure(
    groups: Sequence[tuple[str, list[_Run]]], stats: Mapping[tuple[str, str], _Stats]
) -> BarFigure | None:
    if not groups:
        return None
    drawn = []
    for label, members in groups:
        bars = []
        for run in sorted(members, key=lambda r: r.condition.modality):
            s = stats[(run.judge, run.condition_id)]
            bars.append(_bar(run.condition.modality, _estimate(s.metrics, "accuracy"), s.accuracy))
        drawn.append(BarGroup(label, _present(*bars)))
    return BarFigure("modality-ablation", "Modality ablation", tuple(drawn), "accuracy", 0.5)


def _consistency_figure(
    runs: Sequence[_Run], stats: Mapping[tuple[str, str], _Stats]
) -> BarFigure | None:
    groups: dict[str, list[Bar]] = {}
    for run in sorted(runs, key=lambda r: (_run_order(r)[1:], r.judge)):
        s = stats[(run.judge, run.condition_id)]
        bar = _bar(run.judge, _estimate(s.metrics, "position_consistency"), s.consistency)
        if bar is not None:
            groups.setdefault(run.name(), []).append(bar)
    if not groups:
        return None
    return BarFigure(
        "position-consistency",
        "Position consistency across the answer swap",
        tuple(BarGroup(label, tuple(bars)) for label, bars in groups.items()),
        "share of pairs",
    )


def _domain_figure(
    runs: Sequence[_Run], stats: Mapping[tuple[str, str], _Stats]
) -> HeatFigure | None:
    cells: dict[tuple[str, str], HeatCell] = {}
    rows: list[str] = []
    columns: set[str] = set()
    for run in runs:
        s = stats[(run.judge, run.condition_id)]
        table = s.metrics.tables["accuracy"]
        if table is None:
            continue
        row = f"{run.judge} · {run.name()}"
        for domain, cell in table.by_domain.cells.items():
            if cell is None:
                continue
            interval = s.by_domain.get(str(domain))
            cells[(row, str(domain))] = HeatCell(
                cell.value,
                None if interval is None else interval.low,
                None if interval is None else interval.high,
                cell.n,
            )
            columns.add(str(domain))
            if row not in rows:
                rows.append(row)
    if not cells:
        return None
    return HeatFigure(
        "accuracy-per-domain", "Accuracy per domain", tuple(rows), tuple(sorted(columns)), cells
    )


def _recall_figure(
    rows: Sequence[_RecallRow], ks: Sequence[int], twins: Mapping[tuple[float, str], str]
) -> LineFigure | None:
    series: list[Series] = []
    seen: set[str] = set()
    for row in rows:
        name = twins.get((row.hours, row.retriever), row.retriever)
        label = f"{name} · {_hours_text(row.built)} h"
        if label in seen:
            continue  # its twin is drawn: the same line
        seen.add(label)
        points = []
        # A k past the spans the retriever handed over repeats the last point: not drawn.
        handed = max(len(c.retrieved) for c in row.cases)
        for k in [k for k in ks if k <= handed] or list(ks[:1]):
            values = [recall_at_k(c.gold, c.retrieved, k, RECALL_THRESHOLD) for c in row.cases]
            interval = clustered_interval(
                values, [c.playlist_id for c in row.cases], [c.pair_id for c in row.cases]
            )
            value = row.metrics.recall[(k, RECALL_THRESHOLD)].value
            points.append(
                Point(
                    float(k),
                    value,
                    None if interval is None else interval.low,
                    None if interval is None else interval.high,
                )
            )
        series.append(Series(label, tuple(points)))
    if not series:
        return None
    return LineFigure(
        "retriever-recall",
        f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
        tuple(series),
        "k (retrieved segments)",
        "recall",
    )


# --- the report ------------------------------------------------------------------------------


_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 0.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
#provenance + table td { text-align: left; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 13px; color: #444; max-width: 60em; }
.no-figure { color: #666; font-style: italic; }
.files { font-size: 12px; }
.offline { background: #fff3f3; border: 1px solid #d99; padding: 0.6em 1em; }
"""


@dataclass(frozen=True)
class _Written:
    spec: FigureSpec
    caption: str
    png: str  # relative to the report folder
    pdf: str


def _write_figures(
    figures: Sequence[tuple[FigureSpec, str]], out_dir: Path, note: str | None
) -> list[_Written]:
    from playlisteval.figures import draw, save

    written = []
    for spec, caption in figures:
        figure = draw(spec, note)
        png, pdf = save(figure, out_dir / FIGURES_DIR / spec.slug)
        written.append(
            _Written(
                spec,
                caption,
                png.relative_to(out_dir).as_posix(),
                pdf.relative_to(out_dir).as_posix(),
            )
        )
    return written


def _figure_specs(
    runs: Sequence[_Run],
    stats: Mapping[tuple[str, str], _Stats],
    comparisons: Sequence[_Comparison],
    recall_rows: Sequence[_RecallRow],
    coincidences: Sequence[_Coincidence],
) -> _Figures:
    twins = _twin_names(coincidences)
    twin_note = " ".join(_coincidence_sentence(c) for c in coincidences)
    figures = _Figures()
    figures.add(
        _accuracy_figure(runs, stats),
        "Accuracy of each judge under each condition (a tie or an unparseable verdict counts "
        "0.5), named with the haystack hours actually built. Dashed line: 0.5, a coin flip. "
        + WHISKERS,
        "Accuracy by condition",
        "no run has an accuracy",
    )
    hours, why = _hours_figure(runs, stats)
    figures.add(
        hours,
        "Accuracy against the haystack hours each judgment was given (log scale), one line per "
        "judge and condition apart from its hours. " + WHISKERS,
        "Accuracy against haystack hours",
        why,
    )
    figures.add(
        _comparison_figure(comparisons, stats, twins),
        f"Swap-averaged accuracy with uniform and retrieved frames, all else equal. {WHISKERS} "
        + twin_note,
        "Retrieved against uniform frames",
        "no judge has both a retrieved and a uniform run on the same pairs and setting",
    )
    modality_groups = _modality_groups(runs)
    figures.add(
        _modality_figure(modality_groups, stats),
        "Accuracy of one judge shown different modalities, all else equal. " + WHISKERS,
        "Modality ablation",
        "no judge was run under two modalities with everything else equal",
    )
    figures.add(
        _consistency_figure(runs, stats),
        "Share of pairs whose two verdicts name the same answer across the answer swap. "
        + WHISKERS,
        "Position consistency across the answer swap",
        "no pair was judged in both answer orders",
    )
    figures.add(
        _domain_figure(runs, stats),
        "Accuracy per domain with its 95 % interval (brackets) and N (judgments).",
        "Accuracy per domain",
        "no run has an accuracy",
    )
    figures.add(
        _recall_figure(recall_rows, DEFAULT_KS, twins),
        f"Share of gold segments matched at tIoU ≥ {RECALL_THRESHOLD:g} by a top-k retrieved "
        f"span, for k up to the spans the retriever handed over. {WHISKERS} " + twin_note,
        f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
        "no judgment carries retrieved and gold spans",
    )
    return figures


def _files_md(table: Table) -> str:
    return f"Files: [{table.slug}.csv]({TABLES_DIR}/{table.slug}.csv) · " + (
        f"[{table.slug}.tex]({TABLES_DIR}/{table.slug}.tex)"
    )


def _files_html(table: Table) -> str:
    e = html.escape
    csv_path, tex_path = f"{TABLES_DIR}/{table.slug}.csv", f"{TABLES_DIR}/{table.slug}.tex"
    return f'Files: <a href="{e(csv_path)}">CSV</a> · <a href="{e(tex_path)}">LaTeX</a>'


def write_report(
    eval_dirs: Sequence[Path],
    out_dir: Path,
    *,
    events: EventStore | None = None,
    log_note: str | None = None,
    now: datetime | None = None,
) -> ReportSummary:
    """Read the judgments of ``eval_dirs``; write the report folder ``out_dir``.

    ``events`` is the event log of the workspace that evaluated: who answered each judgment
    (provider ids, offline or live) and when are read from it; without it the report says they
    were not read (``log_note``: why). Raises :class:`ReportError` when a directory has no
    judgments file, a record is malformed, or there is no judgment at all.
    """
    if not eval_dirs:
        raise ReportError("write_report needs at least one evaluation directory, got none")
    records = load_records(eval_dirs)
    if not records:
        raise ReportError(
            f"no judgments in {[str(d) for d in eval_dirs]!r}; run `eval` before `report`"
        )
    now = now or datetime.now(tz=UTC)
    calls = answered_calls(events, eval_dirs) if events is not None else None
    if log_note is None:
        log_note = (
            "read from the event log given"
            if calls is not None
            else "not read (no workspace given)"
        )
    if calls is not None:
        found = sum(1 for r in records if r.call_key in calls)
        log_note += f"; the calls of {found} of {len(records)} judgments are in it"
    runs = _runs(records)
    stats = {(r.judge, r.condition_id): _stats(r) for r in runs}
    comparisons = _comparisons(runs, stats)
    recall_rows = _recall_rows(records)
    coincidences = _coincidences(records)
    sources = _judge_sources(records, calls)
    source = _source(sources)
    offline_note = OFFLINE_NOTE if source in ("offline", "mixed") else None
    if source == "unknown":
        offline_note = UNKNOWN_NOTE

    tables = [
        _provenance_table(eval_dirs, records, runs, sources, source, calls, log_note, now),
        _table1(runs, stats, sources),
        _shown_table(runs),
        _strata_table(runs, stats, "domain", "Accuracy per domain"),
        _strata_table(runs, stats, "gap", "Accuracy per rating gap"),
        _modality_table(_modality_groups(runs), stats),
        _comparison_table(comparisons, _twin_names(coincidences)),
        _recall_table(recall_rows, DEFAULT_KS, coincidences),
    ]
    figures = _figure_specs(runs, stats, comparisons, recall_rows, coincidences)

    out_dir.mkdir(parents=True, exist_ok=True)
    written = _write_figures(figures.drawn, out_dir, offline_note)
    table_files: list[Path] = []
    (out_dir / TABLES_DIR).mkdir(exist_ok=True)
    for table in tables:
        csv_path = out_dir / TABLES_DIR / f"{table.slug}.csv"
        tex_path = out_dir / TABLES_DIR / f"{table.slug}.tex"
        csv_path.write_text(table.csv_text(), encoding="utf-8")
        tex_path.write_text(table.latex(offline_note or ""), encoding="utf-8")
        table_files += [csv_path, tex_path]

    sources_text = ", ".join(str(d) for d in eval_dirs)
    summary_line = (
        f"{len(records)} judgments, {len(runs)} runs (judge × condition), from {sources_text}."
    )
    banner = _source_sentence(source, sources)
    md_figures: list[str] = []
    for number, w in enumerate(written, start=1):
        md_figures += [
            f"### Figure {number}. {w.spec.title}",
            "",
            f"![{w.spec.title}]({w.png})",
            "",
            f"{w.caption.strip()} PDF: [{Path(w.pdf).name}]({w.pdf})",
            "",
        ]
    md_figures += [f"_{sentence}_\n" for sentence in figures.omitted]
    markdown = "\n".join(
        [
            "# Judge evaluation report",
            "",
            summary_line,
            "",
            f"**{banner}**",
            "",
            tables[0].markdown(_files_md(tables[0])),
            "## Figures",
            "",
            *md_figures,
            *(t.markdown(_files_md(t)) for t in tables[1:]),
        ]
    )
    md_path = out_dir / REPORT_MD
    md_path.write_text(markdown, encoding="utf-8")

    e = html.escape
    html_figures = [
        f'<figure><img src="{e(w.png)}" alt="{e(w.spec.title)}">'
        f"<figcaption><b>{e(w.spec.title)}.</b> {e(w.caption.strip())} "
        f'<a href="{e(w.pdf)}">PDF</a></figcaption></figure>'
        for w in written
    ]
    html_figures += [f'<p class="no-figure">{e(s)}</p>' for s in figures.omitted]
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            # Nothing may load from anywhere but the report's own folder (its figures).
            '<meta http-equiv="Content-Security-Policy" '
            "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src 'self'\">",
            "<title>Judge evaluation report</title>",
            f"<style>{_CSS}</style></head><body>",
            "<h1>Judge evaluation report</h1>",
            f"<p>{e(summary_line)}</p>",
            f'<p class="{"offline" if source != "live" else "live"}">{e(banner)}</p>',
            tables[0].html(_files_html(tables[0])),
            "<h2>Figures</h2>",
            *html_figures,
            *(t.html(_files_html(t)) for t in tables[1:]),
            "</body></html>",
            "",
        ]
    )
    html_path = out_dir / REPORT_HTML
    html_path.write_text(page, encoding="utf-8")
    figure_files = [out_dir / p for w in written for p in (w.png, w.pdf)]
    return ReportSummary(
        markdown=md_path,
        html=html_path,
        judgments=len(records),
        runs=len(runs),
        figures=tuple(w.spec.title for w in written),
        omitted=tuple(figures.omitted),
        figure_files=tuple(figure_files),
        table_files=tuple(table_files),
        source=source,
    )


def write_workspace_report(
    eval_dirs: Sequence[Path], out_dir: Path, home: Path | None = None
) -> ReportSummary:
    """:func:`write_report`, reading who answered each judgment from the event log of the
    workspace ``home`` (default: the default workspace) when it has one; a workspace that does
    not exist is not made, and the report says the log was not read."""
    from playlisteval.app import App
    from playlisteval.settings import load_settings
    from playlisteval.workspace import Workspace

    settings = load_settings(home)
    database = Workspace(Path(settings.home)).database
    if not (settings.store.url or database.exists()):
        note = f"not read: no workspace at {settings.home} (give the --home that evaluated)"
        return write_report(eval_dirs, out_dir, log_note=note)
    with App(settings) as app:
        where = "the PostgreSQL event log" if settings.store.url else str(database)
        return write_report(eval_dirs, out_dir, events=app.events, log_note=f"read from {where}")


def figure_specs(records: Sequence[JudgmentRecord]) -> list[FigureSpec]:
    """The figures a report of ``records`` draws, as data (a test draws and measures them)."""
    runs = _runs(records)
    stats = {(r.judge, r.condition_id): _stats(r) for r in runs}
    figures = _figure_specs(
        runs, stats, _comparisons(runs, stats), _recall_rows(records), _coincidences(records)
    )
    return [spec for spec, _ in figures.drawn]
