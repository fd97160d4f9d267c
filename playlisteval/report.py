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
  modality ablation, position consistency, per domain, retriever recall@k, retriever recall
  against the haystack hours built (``recall-vs-hours``) and the difficulty gate's accuracy by
  rating gap (``gate-accuracy-by-gap``, the paper's Figure 3, from the gate's own verdicts in the
  pairs streams of the runs the judged pairs came from) — each with its 95 % interval; a figure
  whose data is absent is a sentence that says why;
* ``tables/<name>.csv`` and ``.tex`` (booktabs) for every table (:mod:`playlisteval.report_tables`),
  among them the paper's Table 1 layout (``table1-<hours>h``: judges × domains and overall, each
  cell "retrieved / uniform" accuracy in %, one per haystack length), a leaderboard across the
  evaluations (``leaderboard``: judges × conditions, each cell naming the evaluation folder it
  came from), recall@k against hours (``recall-vs-hours``) and the gate's accuracy by gap;
* a provenance block: the benchmark's content hash, the judges and the provider ids that answered
  them (from the evaluation's log, when the workspace that ran it is given), the conditions with
  the hours asked and built, the dates, the code version and whether the judges were live or the
  offline provider — which is a harness, never evidence of model quality, and said so on every
  page, table caption and figure.

One judge under one condition judged in two evaluation folders is refused (which of the two
should a cell show?) unless ``merge_duplicates`` asks for one cell that names both.

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
from playlisteval.report_tables import Cell, Column, Sourced, Stat, Table, Versus
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
from policies.pairs import order_score
from store.errors import PlaylistEvalError
from store.events import pairs_stream
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


@dataclass(frozen=True)
class LoadedJudgments:
    """The judgments of some evaluation folders and where each run's came from.

    ``sources`` maps each ``(judge, condition id)`` to the folders (as given) whose judgments it
    holds: one, unless the evaluations were merged (``merge_duplicates``).
    """

    records: list[JudgmentRecord]
    sources: dict[tuple[str, str], tuple[Path, ...]]


def _distinct(eval_dirs: Sequence[Path]) -> list[Path]:
    """The folders in the order given, a folder given twice (by any path to it) once."""
    seen: dict[Path, Path] = {}
    for directory in eval_dirs:
        seen.setdefault(Path(directory).resolve(), Path(directory))
    return list(seen.values())


def _refuse_duplicate(run: tuple[str, str], first: Path, second: Path) -> ReportError:
    judge, condition = run
    return ReportError(
        f"{judge!r} under {condition!r} was judged in two evaluations, {str(first)!r} and "
        f"{str(second)!r}; report one of them, or merge them into one cell on purpose with "
        "merge_duplicates=True (`playlisteval report --merge-duplicates`)"
    )


def load_evaluations(
    eval_dirs: Sequence[Path], *, merge_duplicates: bool = False
) -> LoadedJudgments:
    """Every judgment of the evaluation folders, in file order, one per verdict, and the
    folders each run (judge × condition) came from.

    A verdict recorded twice in one folder (a resumed run) counts once, and a folder given twice
    is read once. The same judge under the same condition in two different folders raises
    :class:`ReportError` naming both, unless ``merge_duplicates``: then their judgments make one
    run (a verdict both hold counts once) and the run names both folders. Two different verdicts
    for the same judge, condition, pair, length and order raise either way.
    """
    seen: dict[tuple[str, str, str, float, str], tuple[JudgmentRecord, str]] = {}
    sources: dict[tuple[str, str], list[Path]] = {}
    for directory in _distinct(eval_dirs):
        path = directory / JUDGMENTS_FILE
        if not path.is_file():
            raise ReportError(
                f"{str(directory)!r} has no {JUDGMENTS_FILE}; run `eval` into it first"
            )
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            item = _parse(line, where)
            run = (item.judge, item.condition_id)
            folders = sources.setdefault(run, [directory])
            if folders[-1] != directory:
                if not merge_duplicates:
                    raise _refuse_duplicate(run, folders[0], directory)
                folders.append(directory)
            key = (*run, item.pair_id, item.length_hours, item.order)
            if key in seen:
                first, first_where = seen[key]
                if _said(first) != _said(item):
                    raise ReportError(
                        f"{where}: {item.judge!r} under {item.condition_id!r} judged pair "
                        f"{item.pair_id!r} ({item.order}, {item.length_hours:g} h) differently "
                        f"at {first_where}; keep one"
                    )
                continue
            seen[key] = (item, where)
    return LoadedJudgments(
        [item for item, _ in seen.values()], {run: tuple(f) for run, f in sources.items()}
    )


def load_records(
    eval_dirs: Sequence[Path], *, merge_duplicates: bool = False
) -> list[JudgmentRecord]:
    """The judgments of :func:`load_evaluations` (same rules), without their folders."""
    return load_evaluations(eval_dirs, merge_duplicates=merge_duplicates).records


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
        said = f"sha256 {sha} (of pairs.jsonl)"
        if meta.get("benchmark_modified"):
            said += (
                f"; records edited after the export (benchmark.json says sha256 "
                f"{meta.get('benchmark_json_sha256')}), evaluated with --allow-modified-benchmark"
            )
        sessions = [s for s in meta.get("sessions") or [] if isinstance(s, dict)]
        if any(s.get("benchmark") == "unverified" for s in sessions):
            said += "; unverified (the folder had no benchmark.json)"
        rows.append((f"benchmark of {directory}", said))
    if len(hashes) > 1:
        rows.append(("benchmarks", "these evaluations judged different benchmarks"))
    for directory, meta in metas:
        rows.append((f"evaluation {directory}", f"id {meta.get('evaluation_id') or '—'}"))
        anchor = meta.get("anchor")
        if isinstance(anchor, dict) and anchor.get("digest"):
            # What `playlisteval store verify --anchor <evaluation folder>` checks a log against.
            rows.append(
                (
                    f"log anchor of {directory}",
                    f"{anchor['digest']} ({anchor.get('events')} events of "
                    f"{', '.join(anchor.get('streams') or [])} through seq "
                    f"{anchor.get('through_seq')})",
                )
            )
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
    judgments: list[Judgment] = field(default_factory=list)  # the records', made once

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
    mean_built: float  # the haystack hours its cases were given, on average
    handed: int  # the most spans the retriever handed over for one case
    intervals: dict[int, Interval | None]  # recall@k at RECALL_THRESHOLD, by k

    def recall(self, k: int) -> Stat:
        """Recall@k at :data:`RECALL_THRESHOLD` with its 95 % interval."""
        return Stat(self.metrics.recall[(k, RECALL_THRESHOLD)].value, self.intervals.get(k))


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
        run.judgments.append(j)
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


def _recall_intervals(
    cases: Sequence[RetrievalCase], ks: Sequence[int]
) -> dict[int, Interval | None]:
    """Recall@k's 95 % interval at :data:`RECALL_THRESHOLD` for each k (playlists resampled)."""
    playlists = [c.playlist_id for c in cases]
    pair_ids = [c.pair_id for c in cases]
    return {
        k: clustered_interval(
            [recall_at_k(c.gold, c.retrieved, k, RECALL_THRESHOLD) for c in cases],
            playlists,
            pair_ids,
        )
        for k in ks
    }


def _recall_rows(
    records: Iterable[JudgmentRecord], ks: Sequence[int] = DEFAULT_KS
) -> list[_RecallRow]:
    """Retriever quality per (retriever, hours asked), one case per pair and haystack (judges,
    modalities and orders share a retrieval), with recall@k's intervals for each of ``ks``."""
    cases: dict[tuple[str, float], dict[tuple[str, float], RetrievalCase]] = {}
    for item in records:
        c = item.condition
        if c.frames != "retrieved" or not item.gold_spans:
            continue
        per = cases.setdefault((c.retriever or "?", c.hours), {})
        key = (item.pair_id, item.length_hours)
        if key not in per:
            per[key] = item.retrieval_case()
    rows = []
    for (retriever, hours), per in sorted(cases.items()):
        found = tuple(per.values())
        lengths = [length for _, length in per]
        rows.append(
            _RecallRow(
                retriever,
                hours,
                tuple(sorted(set(lengths))),
                retrieval_metrics(found, ks),
                found,
                math.fsum(lengths) / len(lengths),
                max(len(c.retrieved) for c in found),
                _recall_intervals(found, ks),
            )
        )
    return rows


def _figure_k(rows: Sequence[_RecallRow], ks: Sequence[int] = DEFAULT_KS) -> int:
    """The k the recall-against-hours figure and Table 1's retriever choice read: the largest
    of ``ks`` that every retriever handed over at every length (else the smallest k)."""
    reach = min((row.handed for row in rows), default=0)
    return max((k for k in ks if k <= reach), default=ks[0])


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


def _recall_point(x: float, row: _RecallRow, k: int) -> Point:
    stat = row.recall(k)
    interval = stat.interval
    return Point(
        x,
        stat.value or 0.0,
        None if interval is None else interval.low,
        None if interval is None else interval.high,
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
        # A k past the spans the retriever handed over repeats the last point: not drawn.
        drawn = [k for k in ks if k <= row.handed] or list(ks[:1])
        series.append(Series(label, tuple(_recall_point(float(k), row, k) for k in drawn)))
    if not series:
        return None
    return LineFigure(
        "retriever-recall",
        f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
        tuple(series),
        "k (retrieved segments)",
        "recall",
    )


# --- at paper scale: recall against hours, Table 1, the leaderboard, the gate's Figure 3 -----


def _recall_hours_table(
    rows_in: Sequence[_RecallRow], ks: Sequence[int], twins: Mapping[tuple[float, str], str]
) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for row in sorted(rows_in, key=lambda r: (r.retriever, r.mean_built, r.hours)):
        twin = twins.get((row.hours, row.retriever), row.retriever)
        same = [r for r in twin.split(" = ") if r != row.retriever]
        rows.append(
            (
                row.retriever,
                _hours_text(row.built),
                f"{row.hours:g}",
                *(row.recall(k) for k in ks),
                row.metrics.cases,
                row.handed,
                ", ".join(same) or None,
            )
        )
    return Table(
        "recall-vs-hours",
        f"Retriever recall@k against haystack hours (tIoU ≥ {RECALL_THRESHOLD:g})",
        (
            Column("retriever"),
            Column("haystack h (built)"),
            Column("hours asked"),
            *(Column(f"R@{k}", "stat") for k in ks),
            Column("N", "int"),
            Column("spans handed"),
            Column("same spans as"),
        ),
        rows,
        note=(
            f"Share of gold segments matched at tIoU ≥ {RECALL_THRESHOLD:g} by a top-k retrieved "
            "span, one row per retriever and haystack length searched, with 95 % intervals "
            "(see Provenance); N counts the pairs (a pair's retrieval is shared by judges, "
            "modalities and answer orders); a k past the spans handed over repeats R@ that "
            "number."
        ),
    )


def _retriever_name(rows: Sequence[_RecallRow], twins: Mapping[tuple[float, str], str]) -> str:
    """A retriever's name in the recall-against-hours figure: its twins' joined name when it
    returned the same spans as they did at every length, else its own."""
    names = {twins.get((row.hours, row.retriever), row.retriever) for row in rows}
    return names.pop() if len(names) == 1 else rows[0].retriever


def _recall_hours_figure(
    rows: Sequence[_RecallRow], k: int, twins: Mapping[tuple[float, str], str]
) -> tuple[LineFigure | None, str]:
    """Recall@k against the haystack hours built, one line per retriever; or None and why."""
    by_retriever: dict[str, list[_RecallRow]] = {}
    for row in rows:
        by_retriever.setdefault(row.retriever, []).append(row)
    series: list[Series] = []
    for members in by_retriever.values():
        name = _retriever_name(members, twins)
        if any(s.label == name for s in series):
            continue  # its twin is drawn: the same line
        ordered = sorted(members, key=lambda r: (r.mean_built, r.hours))
        points = tuple(_recall_point(round(r.mean_built, 4), r, k) for r in ordered)
        if len({p.x for p in points}) >= 2:
            series.append(Series(name, points))
    if not series:
        if not rows:
            return None, "no judgment carries retrieved and gold spans"
        return None, "no retriever searched haystacks of two or more lengths built"
    return (
        LineFigure(
            "recall-vs-hours",
            f"Retriever recall@{k} against haystack hours",
            tuple(series),
            "haystack hours built",
            f"recall@{k} (tIoU ≥ {RECALL_THRESHOLD:g})",
            log_x=True,
        ),
        "",
    )


def _domain_accuracy(stats: _Stats | None, domain: str | None) -> float | None:
    """A run's accuracy in ``domain`` (None: overall), or None when it has none there."""
    if stats is None:
        return None
    table = stats.metrics.tables["accuracy"]
    if table is None:
        return None
    if domain is None:
        return table.micro.value
    cell = table.by_domain.cells.get(domain)
    return None if cell is None else cell.value


def _chosen_retriever(
    hours: float, retrievers: Sequence[str], recall_rows: Sequence[_RecallRow], k: int
) -> tuple[str, str]:
    """The retriever a Table 1 at ``hours`` asked shows, and the sentence that says why: the
    highest recall@k at tIoU ≥ 0.5 at that length (a tie goes to hybrid, then by name); with
    no recall measured, hybrid when it ran, else the first by name."""
    recall = {
        row.retriever: row.metrics.recall[(k, RECALL_THRESHOLD)].value
        for row in recall_rows
        if row.hours == hours and row.retriever in retrievers
    }
    if recall:
        ranked = sorted(recall, key=lambda r: (-recall[r], r != "hybrid", r))
        listed = ", ".join(f"{r} {recall[r]:.3f}" for r in ranked)
        return ranked[0], (
            f"Retrieved: {ranked[0]}, the retriever with the highest recall@{k} at tIoU ≥ "
            f"{RECALL_THRESHOLD:g} at this length ({listed}); a tie goes to hybrid, then by name."
        )
    chosen = "hybrid" if "hybrid" in retrievers else sorted(retrievers)[0]
    return chosen, (
        f"Retrieved: {chosen}; no recall could be measured at this length (no gold spans), so "
        "the rule is hybrid when it ran, else the first retriever by name."
    )


def _paper_table(
    slug: str,
    members: Sequence[_Run],
    stats: Mapping[tuple[str, str], _Stats],
    retriever: str,
    why: str,
) -> Table:
    """One Table 1: judges × (each domain, overall), each cell retrieved / uniform accuracy."""
    domains: set[str] = set()
    uniform: dict[str, _Stats] = {}
    retrieved: dict[str, _Stats] = {}
    for run in members:
        s = stats[(run.judge, run.condition_id)]
        if run.condition.frames == "uniform":
            uniform[run.judge] = s
        elif run.condition.retriever == retriever:
            retrieved[run.judge] = s
        else:
            continue
        table = s.metrics.tables["accuracy"]
        domains.update(str(d) for d in (table.by_domain.cells if table else ()))
    columns = [*sorted(domains), None]
    rows: list[tuple[Cell, ...]] = [
        (
            judge,
            *(
                Versus(
                    _domain_accuracy(retrieved.get(judge), d),
                    _domain_accuracy(uniform.get(judge), d),
                )
                for d in columns
            ),
        )
        for judge in sorted({*uniform, *retrieved})
    ]
    base = next(r for r in members if r.condition.frames == "uniform")
    lengths = [h for r in members for h in r.built]
    hours, built = base.condition.hours, _hours_text(lengths)
    setting = base.condition.label("frames", "retriever", "hours")
    at = f"{hours:g} h"
    if not all(math.isclose(h, hours, rel_tol=0.005) for h in lengths):
        at += f" asked ({built} h built)"
    return Table(
        slug,
        f"Table 1 layout: retrieved / uniform accuracy (%) at {at}, {setting}",
        (Column("judge"), *(Column(d or "overall", "versus") for d in columns)),
        rows,
        note=(
            f"Each cell: accuracy (%) with {retriever} retrieved frames / with uniform frames, "
            f"per domain and overall (over every judgment, not the mean of the domains); a tie "
            f"or an unparseable verdict counts 0.5; haystacks of {hours:g} h asked, {built} h "
            f"built. {why} Intervals and N: see Judges by condition."
        ),
    )


def _paper_tables(
    runs: Sequence[_Run],
    stats: Mapping[tuple[str, str], _Stats],
    recall_rows: Sequence[_RecallRow],
    k: int,
) -> list[Table]:
    """The paper's Table 1 layout, one per haystack length asked (and per setting, when one
    length ran under several) that has both a retrieved and a uniform run."""
    groups: dict[tuple[float, tuple[Any, ...]], list[_Run]] = {}
    for run in runs:
        c = run.condition
        groups.setdefault((c.hours, c.without("frames", "retriever", "hours")), []).append(run)
    usable = {
        key: members
        for key, members in groups.items()
        if {m.condition.frames for m in members} == {"uniform", "retrieved"}
    }
    per_hours: dict[float, int] = {}
    for hours, _ in usable:
        per_hours[hours] = per_hours.get(hours, 0) + 1
    tables = []
    for (hours, _), members in sorted(usable.items(), key=lambda kv: (kv[0][0], repr(kv[0][1]))):
        retrievers = sorted(
            {m.condition.retriever or "?" for m in members if m.condition.retriever}
        )
        retriever, why = _chosen_retriever(hours, retrievers, recall_rows, k)
        slug = f"table1-{hours:g}h"
        if per_hours[hours] > 1:
            setting = members[0].condition.label("frames", "retriever", "hours")
            slug += "-" + "".join(ch if ch.isalnum() or ch in ".-" else "-" for ch in setting)
        tables.append(_paper_table(slug, members, stats, retriever, why))
    if not tables:
        tables.append(
            Table(
                "table1",
                "Table 1 layout: retrieved / uniform accuracy (%)",
                (Column("judge"),),
                [],
                note="No judge has a retrieved and a uniform run at one haystack length.",
            )
        )
    return tables


def _folder_names(folders: Iterable[Path]) -> dict[Path, str]:
    """How the leaderboard names each evaluation folder: its name, or its path when two
    folders share a name."""
    distinct = list(dict.fromkeys(folders))
    names = [f.name or str(f) for f in distinct]
    return {
        f: name if names.count(name) == 1 else str(f)
        for f, name in zip(distinct, names, strict=True)
    }


def _leaderboard(
    runs: Sequence[_Run],
    stats: Mapping[tuple[str, str], _Stats],
    sources: Mapping[tuple[str, str], tuple[Path, ...]],
    eval_dirs: Sequence[Path],
) -> Table:
    """Judges × conditions, each cell the accuracy and the evaluation folder it came from (or
    the folders it merges)."""
    folders = _distinct(eval_dirs)
    names = _folder_names(folders)
    conditions = list(
        dict.fromkeys(r.condition_id for r in sorted(runs, key=lambda r: _run_order(r)[1:]))
    )
    merged = False
    rows: list[tuple[Cell, ...]] = []
    for judge in sorted({r.judge for r in runs}):
        cells: list[Cell] = []
        for condition in conditions:
            s = stats.get((judge, condition))
            if s is None:
                cells.append(None)
                continue
            came = sources.get((judge, condition), ())
            merged = merged or len(came) > 1
            source = " and ".join(names.get(f, str(f)) for f in came)
            stat = Stat(_estimate(s.metrics, "accuracy"), s.accuracy)
            cells.append(Sourced(stat, f"merges {source}" if len(came) > 1 else source))
        rows.append((judge, *cells))
    listed = "; ".join(
        f"{names[f]}: evaluation {_evaluation_json(f).get('evaluation_id') or '—'}" for f in folders
    )
    return Table(
        "leaderboard",
        "Leaderboard across evaluations",
        (Column("judge"), *(Column(c, "sourced") for c in conditions)),
        rows,
        note=(
            "Accuracy (a tie or an unparseable verdict counts 0.5) with its 95 % interval, and "
            f"in parentheses the evaluation folder that judged it. Evaluations: {listed}."
            + (
                " A cell that names two folders merges their judgments (asked for with "
                "merge_duplicates)."
                if merged
                else ""
            )
        ),
    )


@dataclass(frozen=True)
class GateVerdict:
    """One difficulty-gate judge's verdict on one candidate pair in one answer order, as a
    run's pairs stream holds it, with the pair's rating gap and its item (seed)."""

    run_id: str
    judge: str
    pair_id: str
    item_id: str
    gap: int
    order: str
    choice: str  # "A" (the answer shown first), "B", "tie" or "invalid"

    @property
    def score(self) -> float:
        """1 when it picks the higher-rated answer, 0 the other, 0.5 a tie or no usable answer
        (as the rest of the report counts them)."""
        return order_score(self.choice, self.order, "half") or 0.0


def gate_verdicts(events: EventStore, pair_ids: Iterable[str]) -> list[GateVerdict]:
    """The difficulty gate's verdicts on every candidate pair (kept or dropped) of the runs
    whose pairs streams hold any of ``pair_ids`` (the pairs an evaluation judged): each judge's
    last verdict per pair and order, folded as pair selection folds them."""
    from agents.pairs import fold_pairs

    wanted = set(pair_ids)
    prefix = pairs_stream("")
    streams: dict[str, list[Any]] = {}
    for stored in events.read_all(stream_prefix=prefix, types=["PairCandidate", "PairJudged"]):
        streams.setdefault(stored.stream, []).append(stored.event())
    found: list[GateVerdict] = []
    for stream, stream_events in sorted(streams.items()):
        log = fold_pairs(stream_events)
        if wanted.isdisjoint(log.candidates):
            continue
        for (pair_id, judge, order), judged in log.judged.items():
            candidate = log.candidates.get(pair_id)
            if candidate is None:
                continue
            found.append(
                GateVerdict(
                    run_id=stream.removeprefix(prefix),
                    judge=judge,
                    pair_id=pair_id,
                    item_id=candidate.seed_id,
                    gap=candidate.chosen_rating - candidate.rejected_rating,
                    order=order,
                    choice=judged.choice,
                )
            )
    return found


@dataclass(frozen=True)
class GateRow:
    """One gate judge's accuracy per rating gap and overall, each with its interval and N
    (judgments), and the candidate pairs it judged."""

    judge: str
    by_gap: dict[int, Stat]
    overall: Stat
    pairs: int


def _gate_stat(verdicts: Sequence[GateVerdict]) -> Stat:
    scores = [v.score for v in verdicts]
    interval = clustered_interval(
        scores, [v.item_id for v in verdicts], [(v.run_id, v.pair_id) for v in verdicts]
    )
    return Stat(math.fsum(scores) / len(scores), interval, len(scores))


def gate_rows(verdicts: Iterable[GateVerdict]) -> list[GateRow]:
    """Each gate judge's accuracy by rating gap (Figure 3 of the paper), from its verdicts;
    intervals resample whole items (a question's pairs together)."""
    by_judge: dict[str, list[GateVerdict]] = {}
    for v in verdicts:
        by_judge.setdefault(v.judge, []).append(v)
    rows = []
    for judge, items in sorted(by_judge.items()):
        by_gap: dict[int, list[GateVerdict]] = {}
        for v in items:
            by_gap.setdefault(v.gap, []).append(v)
        rows.append(
            GateRow(
                judge,
                {gap: _gate_stat(by_gap[gap]) for gap in sorted(by_gap)},
                _gate_stat(items),
                len({(v.run_id, v.pair_id) for v in items}),
            )
        )
    return rows


GATE_SCORING = (
    "a verdict for the higher-rated answer counts 1, for the other 0, a tie or an unusable "
    "answer 0.5; gap = chosen rating − rejected rating"
)


def _gate_table(rows: Sequence[GateRow], runs: Sequence[str], why: str) -> Table:
    gaps = sorted({gap for row in rows for gap in row.by_gap})
    note = (
        f"The difficulty gate's own verdicts on every candidate pair of run(s) "
        f"{', '.join(runs)} (kept and dropped), both answer orders, N judgments per cell; "
        f"{GATE_SCORING}; 95 % intervals resample whole items (a question's pairs together)."
        if rows
        else f"Not computed: {why}."
    )
    return Table(
        "gate-accuracy-by-gap",
        "Difficulty-gate accuracy by rating gap",
        (
            Column("gate judge"),
            *(Column(f"gap {g}", "stat") for g in gaps),
            Column("overall", "stat"),
            Column("pairs", "int"),
        ),
        [(r.judge, *(r.by_gap.get(g) for g in gaps), r.overall, r.pairs) for r in rows],
        note=note,
    )


def _gate_figure(rows: Sequence[GateRow]) -> LineFigure | None:
    series = [
        Series(
            row.judge,
            tuple(
                Point(
                    float(gap),
                    stat.value or 0.0,
                    None if stat.interval is None else stat.interval.low,
                    None if stat.interval is None else stat.interval.high,
                )
                for gap, stat in row.by_gap.items()
            ),
        )
        for row in rows
    ]
    if not series:
        return None
    return LineFigure(
        "gate-accuracy-by-gap",
        "Difficulty-gate accuracy by rating gap",
        tuple(series),
        "rating gap (chosen − rejected)",
        "accuracy",
        reference=0.5,
    )


@dataclass(frozen=True)
class _Gate:
    """What the report knows of the difficulty gate: its rows, runs, or why it has none."""

    rows: tuple[GateRow, ...]
    runs: tuple[str, ...]
    why: str


def _gate(events: EventStore | None, records: Sequence[JudgmentRecord]) -> _Gate:
    if events is None:
        return _Gate(
            (), (), "no event log was read (give the workspace that curated the benchmark)"
        )
    verdicts = gate_verdicts(events, {r.pair_id for r in records})
    if not verdicts:
        return _Gate(
            (),
            (),
            "the event log read holds no difficulty-gate verdict on the pairs judged (was the "
            "benchmark curated in another workspace?)",
        )
    runs = tuple(sorted({v.run_id for v in verdicts}))
    return _Gate(tuple(gate_rows(verdicts)), runs, "")


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


@dataclass(frozen=True)
class _Computed:
    """Everything the report shows, computed from the records (and the log) before a line is
    written: the pure core that the pages, tables and figures render."""

    records: Sequence[JudgmentRecord]
    runs: list[_Run]
    stats: dict[tuple[str, str], _Stats]
    comparisons: list[_Comparison]
    recall_rows: list[_RecallRow]
    coincidences: list[_Coincidence]
    k: int  # the recall@k the recall-against-hours figure and Table 1's retriever rule read
    gate: _Gate


def _compute(records: Sequence[JudgmentRecord], events: EventStore | None) -> _Computed:
    runs = _runs(records)
    stats = {(r.judge, r.condition_id): _stats(r) for r in runs}
    recall_rows = _recall_rows(records)
    return _Computed(
        records=records,
        runs=runs,
        stats=stats,
        comparisons=_comparisons(runs, stats),
        recall_rows=recall_rows,
        coincidences=_coincidences(records),
        k=_figure_k(recall_rows),
        gate=_gate(events, records),
    )


def _accuracy_figures(c: _Computed, figures: _Figures) -> None:
    runs, stats = c.runs, c.stats
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
        _comparison_figure(c.comparisons, stats, _twin_names(c.coincidences)),
        f"Swap-averaged accuracy with uniform and retrieved frames, all else equal. {WHISKERS} "
        + " ".join(_coincidence_sentence(x) for x in c.coincidences),
        "Retrieved against uniform frames",
        "no judge has both a retrieved and a uniform run on the same pairs and setting",
    )
    figures.add(
        _modality_figure(_modality_groups(runs), stats),
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


def _retrieval_figures(c: _Computed, figures: _Figures) -> None:
    twins = _twin_names(c.coincidences)
    twin_note = " ".join(_coincidence_sentence(x) for x in c.coincidences)
    figures.add(
        _recall_figure(c.recall_rows, DEFAULT_KS, twins),
        f"Share of gold segments matched at tIoU ≥ {RECALL_THRESHOLD:g} by a top-k retrieved "
        f"span, for k up to the spans the retriever handed over. {WHISKERS} " + twin_note,
        f"Retriever recall@k at tIoU ≥ {RECALL_THRESHOLD:g}",
        "no judgment carries retrieved and gold spans",
    )
    recall_hours, why = _recall_hours_figure(c.recall_rows, c.k, twins)
    figures.add(
        recall_hours,
        f"Recall@{c.k} (the largest k every retriever handed over at every length) at tIoU ≥ "
        f"{RECALL_THRESHOLD:g} against the haystack hours searched (log scale), one line per "
        f"retriever. {WHISKERS} " + twin_note,
        "Retriever recall against haystack hours",
        why,
    )
    gate = c.gate
    figures.add(
        _gate_figure(gate.rows),
        "Accuracy of each difficulty-gate judge by the pair's rating gap, from the gate's own "
        f"verdicts on every candidate pair of run(s) {', '.join(gate.runs)} (kept and dropped), "
        f"both answer orders; {GATE_SCORING}. Dashed line: 0.5. Whiskers: 95 % intervals "
        "resampling whole items.",
        "Difficulty-gate accuracy by rating gap",
        gate.why,
    )


def _figure_specs(c: _Computed) -> _Figures:
    figures = _Figures()
    _accuracy_figures(c, figures)
    _retrieval_figures(c, figures)
    return figures


def _files_md(table: Table) -> str:
    return f"Files: [{table.slug}.csv]({TABLES_DIR}/{table.slug}.csv) · " + (
        f"[{table.slug}.tex]({TABLES_DIR}/{table.slug}.tex)"
    )


def _files_html(table: Table) -> str:
    e = html.escape
    csv_path, tex_path = f"{TABLES_DIR}/{table.slug}.csv", f"{TABLES_DIR}/{table.slug}.tex"
    return f'Files: <a href="{e(csv_path)}">CSV</a> · <a href="{e(tex_path)}">LaTeX</a>'


def _report_tables(
    c: _Computed,
    eval_dirs: Sequence[Path],
    loaded: LoadedJudgments,
    provenance: Table,
    sources: Mapping[str, _JudgeSource],
) -> list[Table]:
    """Every table of the report, provenance first."""
    twins = _twin_names(c.coincidences)
    return [
        provenance,
        *_paper_tables(c.runs, c.stats, c.recall_rows, c.k),
        _leaderboard(c.runs, c.stats, loaded.sources, eval_dirs),
        _table1(c.runs, c.stats, sources),
        _shown_table(c.runs),
        _strata_table(c.runs, c.stats, "domain", "Accuracy per domain"),
        _strata_table(c.runs, c.stats, "gap", "Accuracy per rating gap"),
        _modality_table(_modality_groups(c.runs), c.stats),
        _comparison_table(c.comparisons, twins),
        _recall_table(c.recall_rows, DEFAULT_KS, c.coincidences),
        _recall_hours_table(c.recall_rows, DEFAULT_KS, twins),
        _gate_table(c.gate.rows, c.gate.runs, c.gate.why),
    ]


def _write_tables(tables: Sequence[Table], out_dir: Path, note: str | None) -> list[Path]:
    """Each table as ``tables/<slug>.csv`` and ``.tex``; the files written."""
    written: list[Path] = []
    (out_dir / TABLES_DIR).mkdir(exist_ok=True)
    for table in tables:
        csv_path = out_dir / TABLES_DIR / f"{table.slug}.csv"
        tex_path = out_dir / TABLES_DIR / f"{table.slug}.tex"
        csv_path.write_text(table.csv_text(), encoding="utf-8")
        tex_path.write_text(table.latex(note or ""), encoding="utf-8")
        written += [csv_path, tex_path]
    return written


def _markdown_page(
    summary_line: str,
    banner: str,
    tables: Sequence[Table],
    written: Sequence[_Written],
    omitted: Sequence[str],
) -> str:
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
    md_figures += [f"_{sentence}_\n" for sentence in omitted]
    return "\n".join(
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


def _html_page(
    summary_line: str,
    banner: str,
    source: Source,
    tables: Sequence[Table],
    written: Sequence[_Written],
    omitted: Sequence[str],
) -> str:
    e = html.escape
    html_figures = [
        f'<figure><img src="{e(w.png)}" alt="{e(w.spec.title)}">'
        f"<figcaption><b>{e(w.spec.title)}.</b> {e(w.caption.strip())} "
        f'<a href="{e(w.pdf)}">PDF</a></figcaption></figure>'
        for w in written
    ]
    html_figures += [f'<p class="no-figure">{e(s)}</p>' for s in omitted]
    return "\n".join(
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


def write_report(
    eval_dirs: Sequence[Path],
    out_dir: Path,
    *,
    events: EventStore | None = None,
    log_note: str | None = None,
    now: datetime | None = None,
    merge_duplicates: bool = False,
) -> ReportSummary:
    """Read the judgments of ``eval_dirs``; write the report folder ``out_dir``.

    ``events`` is the event log of the workspace that evaluated: who answered each judgment
    (provider ids, offline or live) and when are read from it, and the difficulty gate's
    verdicts on the runs the judged pairs came from (the gate's accuracy by rating gap); without
    it the report says they were not read (``log_note``: why). Raises :class:`ReportError` when
    a directory has no judgments file, a record is malformed, there is no judgment at all, or
    one judge under one condition was judged in two evaluation folders — unless
    ``merge_duplicates``, when their judgments make one cell that names both folders.
    """
    if not eval_dirs:
        raise ReportError("write_report needs at least one evaluation directory, got none")
    loaded = load_evaluations(eval_dirs, merge_duplicates=merge_duplicates)
    records = loaded.records
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
    computed = _compute(records, events)
    sources = _judge_sources(records, calls)
    source = _source(sources)
    offline_note = OFFLINE_NOTE if source in ("offline", "mixed") else None
    if source == "unknown":
        offline_note = UNKNOWN_NOTE
    provenance = _provenance_table(
        eval_dirs, records, computed.runs, sources, source, calls, log_note, now
    )
    tables = _report_tables(computed, eval_dirs, loaded, provenance, sources)
    figures = _figure_specs(computed)

    out_dir.mkdir(parents=True, exist_ok=True)
    written = _write_figures(figures.drawn, out_dir, offline_note)
    table_files = _write_tables(tables, out_dir, offline_note)
    sources_text = ", ".join(str(d) for d in eval_dirs)
    summary_line = (
        f"{len(records)} judgments, {len(computed.runs)} runs (judge × condition), from "
        f"{sources_text}."
    )
    banner = _source_sentence(source, sources)
    md_path = out_dir / REPORT_MD
    md_path.write_text(
        _markdown_page(summary_line, banner, tables, written, figures.omitted), encoding="utf-8"
    )
    html_path = out_dir / REPORT_HTML
    html_path.write_text(
        _html_page(summary_line, banner, source, tables, written, figures.omitted),
        encoding="utf-8",
    )
    return ReportSummary(
        markdown=md_path,
        html=html_path,
        judgments=len(records),
        runs=len(computed.runs),
        figures=tuple(w.spec.title for w in written),
        omitted=tuple(figures.omitted),
        figure_files=tuple(out_dir / p for w in written for p in (w.png, w.pdf)),
        table_files=tuple(table_files),
        source=source,
    )


def write_workspace_report(
    eval_dirs: Sequence[Path],
    out_dir: Path,
    home: Path | None = None,
    *,
    merge_duplicates: bool = False,
) -> ReportSummary:
    """:func:`write_report`, reading who answered each judgment (and the difficulty gate's
    verdicts) from the event log of the workspace ``home`` (default: the default workspace)
    when it has one; a workspace that does not exist is not made, and the report says the log
    was not read. ``merge_duplicates`` is :func:`write_report`'s."""
    from playlisteval.app import App
    from playlisteval.settings import load_settings
    from playlisteval.workspace import Workspace

    settings = load_settings(home)
    database = Workspace(Path(settings.home)).database
    if not (settings.store.url or database.exists()):
        note = f"not read: no workspace at {settings.home} (give the --home that evaluated)"
        return write_report(eval_dirs, out_dir, log_note=note, merge_duplicates=merge_duplicates)
    with App(settings) as app:
        where = "the PostgreSQL event log" if settings.store.url else str(database)
        return write_report(
            eval_dirs,
            out_dir,
            events=app.events,
            log_note=f"read from {where}",
            merge_duplicates=merge_duplicates,
        )


def figure_specs(
    records: Sequence[JudgmentRecord], events: EventStore | None = None
) -> list[FigureSpec]:
    """The figures a report of ``records`` draws, as data (a test draws and measures them);
    with ``events``, the difficulty gate's figure too."""
    return [spec for spec, _ in _figure_specs(_compute(records, events)).drawn]
