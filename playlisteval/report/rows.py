"""Every table of the report, as rows of typed cells (:class:`Table`): provenance, the paper's
Table 1 layout (``table1-<hours>h``: judges × domains and overall, each cell "retrieved / uniform"
accuracy in %), the leaderboard across evaluations, judges by condition, what the judges were
shown, accuracy per domain and gap, the modality ablation, retrieved against uniform frames,
retriever recall (and against the haystack hours built) and the gate's accuracy by gap.
:mod:`playlisteval.report.table_format` writes each as markdown, HTML, CSV and LaTeX.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from playlisteval.report.compute import (
    RECALL_THRESHOLD,
    Coincidence,
    Comparison,
    Computed,
    RecallRow,
    Run,
    RunStats,
    coincidence_sentence,
    hours_text,
    metric_value,
    modality_groups,
    run_order,
    twin_names,
)
from playlisteval.report.evaluations import evaluation_labels
from playlisteval.report.gate import GATE_SCORING, GateRow
from playlisteval.report.load import (
    EVALUATION_FILE,
    LoadedJudgments,
    distinct_folders,
    evaluation_json,
)
from playlisteval.report.sources import (
    MODE_TEXT,
    AnsweredCall,
    JudgeSource,
    Source,
    source_sentence,
)
from playlisteval.report.table_format import Cell, Column, Sourced, Stat, Table, Versus
from policies.bootstrap import BOOTSTRAP_DRAWS, Interval
from policies.judging import DEFAULT_KS, IOU_THRESHOLDS, JudgmentRecord
from store.version import code_version
from tools.providers.specs.local_llm import REAL_LOCAL_LABEL

INTERVALS = (
    f"95 % intervals are percentile bootstraps over {BOOTSTRAP_DRAWS} resamples (seeded) of "
    "whole playlists drawn with replacement, or of whole pairs when a run's judgments come from "
    "one playlist; with few playlists they are rough and tend to be narrow."
)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _started(value: object) -> str:
    """``evaluation.json``'s start time as the other dates read (as written if unreadable)."""
    try:
        return _stamp(datetime.fromisoformat(str(value)))
    except ValueError:
        return str(value)


def provenance_table(
    eval_dirs: Sequence[Path],
    records: Sequence[JudgmentRecord],
    runs: Sequence[Run],
    sources: Mapping[str, JudgeSource],
    source: Source,
    calls: Mapping[str, AnsweredCall] | None,
    log_note: str,
    now: datetime,
) -> Table:
    """The provenance block: benchmarks, evaluations, who answered, dates, versions."""
    rows: list[tuple[Cell, ...]] = [("source", source_sentence(source, sources))]
    metas = [(Path(d), evaluation_json(d)) for d in eval_dirs]
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
        rows.append((f"dataset of {directory}", backfill_sentence(meta.get("benchmark_backfill"))))
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
        rows.append((f"judge {s.judge}", f"{s.label}; answered as {who}"))
    for run in _by_condition(runs):
        asked = f"{run.condition.hours:g} h asked, {hours_text(run.built)} h built"
        rows.append((f"condition {run.condition_id}", asked))
    for directory, meta in metas:
        if meta.get("started"):
            rows.append((f"evaluation started ({directory})", _started(meta["started"])))
        sessions = [s for s in meta.get("sessions") or [] if isinstance(s, dict)]
        if sessions:
            versions = dict.fromkeys(str(s.get("code_version", "?")) for s in sessions)
            modes = dict.fromkeys(_session_mode(s) for s in sessions)
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


def backfill_sentence(backfill: object) -> str:
    """How many videos each domain of the judged benchmark took from reserve after
    near-duplicates were dropped (its ``benchmark.json``'s ``backfill``, which the evaluation
    copies into ``evaluation.json`` as ``benchmark_backfill``), and the domains left short."""
    if not isinstance(backfill, Mapping) or not backfill:
        return (
            "videos backfilled per domain: not recorded (the benchmark or its evaluation "
            "predates the record)"
        )
    parts = []
    for domain, said in sorted(backfill.items()):
        if not isinstance(said, Mapping):
            continue
        count = int(said.get("backfilled_videos") or 0)
        target = said.get("target_hours")
        part = (
            f"{domain} {count} video{'s' if count != 1 else ''} "
            f"({float(said.get('backfilled_hours') or 0.0):.2f} h)"
        )
        if target is None:
            part += ", no target"
        elif said.get("short"):
            part += f", short of its {float(target):g} h target (reserve used up)"
        parts.append(part)
    said_all = "; ".join(parts)
    return f"videos backfilled from reserve after near-duplicates were dropped: {said_all}"


def _session_mode(session: Mapping[str, Any]) -> str:
    """A session's mode in words: offline or live, and with a real local model where one of
    its judges was (``answered_by``, :func:`agents.evaluation.answered_by`)."""
    mode = "offline" if session.get("offline") else "live"
    answered = session.get("answered_by")
    if isinstance(answered, dict) and REAL_LOCAL_LABEL in answered.values():
        mode += f" with a {REAL_LOCAL_LABEL}"
    return mode


def _by_condition(runs: Sequence[Run]) -> list[Run]:
    """One run per condition id (its built hours are the same for every judge)."""
    first: dict[str, Run] = {}
    for run in runs:
        first.setdefault(run.condition_id, run)
    return list(first.values())


def _table1(
    runs: Sequence[Run],
    stats: Mapping[tuple[str, str], RunStats],
    sources: Mapping[str, JudgeSource],
) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for run in runs:
        s = stats[(run.judge, run.condition_id)]
        m = s.metrics
        acc = m.tables["accuracy"]
        source = sources[run.judge]
        answered = ", ".join(source.answered_as) or MODE_TEXT[source.mode]
        if source.real_local:
            answered = f"{REAL_LOCAL_LABEL} ({answered})"
        rows.append(
            (
                run.judge,
                run.condition_id,
                hours_text(run.built),
                answered,
                Stat(metric_value(m, "accuracy"), s.accuracy),
                Stat(metric_value(m, "swap_averaged_accuracy"), s.swap),
                Stat(metric_value(m, "consistent_accuracy"), s.consistent),
                Stat(metric_value(m, "position_consistency"), s.consistency),
                metric_value(m, "position_bias"),
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


def _shown_table(runs: Sequence[Run]) -> Table:
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
    runs: Sequence[Run],
    stats: Mapping[tuple[str, str], RunStats],
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
    groups: Sequence[tuple[str, list[Run]]], stats: Mapping[tuple[str, str], RunStats]
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
                    Stat(metric_value(s.metrics, "accuracy"), s.accuracy),
                    Stat(metric_value(s.metrics, "swap_averaged_accuracy"), s.swap),
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
    comparisons: Sequence[Comparison], twins: Mapping[tuple[float, str], str]
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
    rows_in: Sequence[RecallRow], ks: Sequence[int], coincidences: Sequence[Coincidence]
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
                    hours_text(row.built),
                    f"{threshold:g}",
                    *(row.metrics.recall[(k, threshold)].value for k in ks),
                    row.metrics.coverage.value,
                    row.metrics.mean_best_iou.value,
                    row.metrics.cases,
                    ", ".join(same) or None,
                )
            )
    sentences = " ".join(coincidence_sentence(c) for c in coincidences)
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


def _recall_hours_table(
    rows_in: Sequence[RecallRow], ks: Sequence[int], twins: Mapping[tuple[float, str], str]
) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for row in sorted(rows_in, key=lambda r: (r.retriever, r.mean_built, r.hours)):
        twin = twins.get((row.hours, row.retriever), row.retriever)
        same = [r for r in twin.split(" = ") if r != row.retriever]
        rows.append(
            (
                row.retriever,
                hours_text(row.built),
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


def _domain_accuracy(stats: RunStats | None, domain: str | None) -> float | None:
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
    hours: float, retrievers: Sequence[str], recall_rows: Sequence[RecallRow], k: int
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
    members: Sequence[Run],
    stats: Mapping[tuple[str, str], RunStats],
    retriever: str,
    why: str,
) -> Table:
    """One Table 1: judges × (each domain, overall), each cell retrieved / uniform accuracy."""
    domains: set[str] = set()
    uniform: dict[str, RunStats] = {}
    retrieved: dict[str, RunStats] = {}
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
    hours, built = base.condition.hours, hours_text(lengths)
    setting = base.condition.label("frames", "retriever", "hours")
    at = f"{hours:g} h"
    if not all(math.isclose(h, hours, rel_tol=0.005) for h in lengths):
        at += f" asked ({built} h built)"
    return Table(
        slug,
        f"Table 1 layout: retrieved / uniform accuracy (%) at {at}, {setting}",
        (Column("judge"), *(Column(d or "overall", "versus") for d in columns)),
        rows,
        ranked=True,
        note=(
            f"Each cell: accuracy (%) with {retriever} retrieved frames / with uniform frames, "
            f"per domain and overall (over every judgment, not the mean of the domains); a tie "
            f"or an unparseable verdict counts 0.5; haystacks of {hours:g} h asked, {built} h "
            f"built. {why} In each column, each side's best value is in bold and its second "
            "underlined, as the paper prints Table 1. Intervals and N: see Judges by condition."
        ),
    )


def _paper_tables(
    runs: Sequence[Run],
    stats: Mapping[tuple[str, str], RunStats],
    recall_rows: Sequence[RecallRow],
    k: int,
) -> list[Table]:
    """The paper's Table 1 layout, one per haystack length asked (and per setting, when one
    length ran under several) that has both a retrieved and a uniform run."""
    groups: dict[tuple[float, tuple[Any, ...]], list[Run]] = {}
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


def _leaderboard(
    runs: Sequence[Run],
    stats: Mapping[tuple[str, str], RunStats],
    sources: Mapping[tuple[str, str], tuple[Path, ...]],
    eval_dirs: Sequence[Path],
    real_local: Collection[str] = (),
) -> Table:
    """Judges × conditions, each cell the accuracy and the evaluation it came from (or the
    evaluations it merges), named by what it judged (:func:`evaluation_labels`); a judge in
    ``real_local`` is named a real local model."""
    folders = distinct_folders(eval_dirs)
    names = evaluation_labels(folders)
    conditions = list(
        dict.fromkeys(r.condition_id for r in sorted(runs, key=lambda r: run_order(r)[1:]))
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
            stat = Stat(metric_value(s.metrics, "accuracy"), s.accuracy)
            cells.append(Sourced(stat, f"merges {source}" if len(came) > 1 else source))
        named = f"{judge} ({REAL_LOCAL_LABEL})" if judge in real_local else judge
        rows.append((named, *cells))
    listed = "; ".join(
        f"{names[f]}: folder {f}, evaluation {evaluation_json(f).get('evaluation_id') or '—'}"
        for f in folders
    )
    return Table(
        "leaderboard",
        "Leaderboard across evaluations",
        (Column("judge"), *(Column(c, "sourced") for c in conditions)),
        rows,
        note=(
            "Accuracy (a tie or an unparseable verdict counts 0.5) with its 95 % interval, and "
            "in parentheses the evaluation that judged it, named by what it judged. "
            f"Evaluations: {listed}."
            + (
                " A cell that names two evaluations merges their judgments (asked for with "
                "merge_duplicates)."
                if merged
                else ""
            )
        ),
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


@dataclass(frozen=True)
class ReportTables:
    """The report's tables in the order its pages show them: the headline results (the paper's
    Table 1 layouts and the leaderboard), every other table of results, then the provenance."""

    headline: list[Table]
    details: list[Table]
    provenance: Table

    @property
    def every(self) -> list[Table]:
        """Every table, in page order."""
        return [*self.headline, *self.details, self.provenance]


def all_tables(
    c: Computed,
    eval_dirs: Sequence[Path],
    loaded: LoadedJudgments,
    provenance: Table,
    sources: Mapping[str, JudgeSource],
) -> ReportTables:
    """Every table of the report: results first, provenance last."""
    twins = twin_names(c.coincidences)
    return ReportTables(
        headline=[
            *_paper_tables(c.runs, c.stats, c.recall_rows, c.k),
            _leaderboard(
                c.runs,
                c.stats,
                loaded.sources,
                eval_dirs,
                {s.judge for s in sources.values() if s.real_local},
            ),
        ],
        details=[
            _table1(c.runs, c.stats, sources),
            _shown_table(c.runs),
            _strata_table(c.runs, c.stats, "domain", "Accuracy per domain"),
            _strata_table(c.runs, c.stats, "gap", "Accuracy per rating gap"),
            _modality_table(modality_groups(c.runs), c.stats),
            _comparison_table(c.comparisons, twins),
            _recall_table(c.recall_rows, DEFAULT_KS, c.coincidences),
            _recall_hours_table(c.recall_rows, DEFAULT_KS, twins),
            _gate_table(c.gate.rows, c.gate.runs, c.gate.why),
        ],
        provenance=provenance,
    )


_WHO_ANSWERED: dict[Source, str] = {
    "offline": "the offline harness answered (not evidence of model quality)",
    "live": "real models answered, live",
    "mixed": "partly the offline harness (not evidence of model quality), partly real models",
    "unknown": "not known whether real models or the offline harness answered",
}


def provenance_line(
    benchmarks: Sequence[tuple[str | None, str]],
    source: Source,
    sources: Mapping[str, JudgeSource],
) -> str:
    """The one line of provenance a report opens with (the whole table is at its end): who
    answered, and each benchmark's content hash (``benchmarks``: hash or None, and the
    benchmark's label for when there are several)."""
    who = _WHO_ANSWERED[source]
    real = [s.judge for s in sources.values() if s.real_local]
    if real:
        who += f"; real models run on this machine: {', '.join(real)}"
    if len(benchmarks) == 1:
        sha = benchmarks[0][0]
        judged = f"benchmark sha256 {sha}" if sha else "benchmark hash not recorded"
    else:
        judged = f"{len(benchmarks)} benchmarks, reported apart: " + ", ".join(
            label for _, label in benchmarks
        )
    return f"Provenance (in full at the end): {who}; {judged}; report code {code_version()}."
