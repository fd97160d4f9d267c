"""Writing a report: evaluation folders → the numbers → tables and figures → the report folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from playlisteval.report.charts import PlannedFigures, plan_figures
from playlisteval.report.compute import compute
from playlisteval.report.drawing import FigureSpec
from playlisteval.report.evaluations import BenchmarkGroup, benchmark_groups, refuse_mixed
from playlisteval.report.load import ReportError, distinct_folders, load_evaluations
from playlisteval.report.pages import (
    REPORT_HTML,
    REPORT_MD,
    Opening,
    PagePart,
    figure_title,
    html_page,
    markdown_page,
    write_figures,
    write_tables,
)
from playlisteval.report.rows import (
    ReportTables,
    all_tables,
    provenance_line,
    provenance_table,
)
from playlisteval.report.sources import (
    AnsweredCall,
    JudgeSource,
    Source,
    answered_calls,
    figure_note,
    judge_sources,
    overall_source,
    source_sentence,
)
from playlisteval.report.table_format import Table
from policies.judging import JudgmentRecord

if TYPE_CHECKING:
    from store.eventstore import EventStore


@dataclass(frozen=True)
class ReportSummary:
    """What :func:`write_report` wrote and from what.

    ``figures`` are the titles of the figures drawn and ``omitted`` the sentences that stand in
    for those whose data is absent; ``figure_files`` the PNG and PDF files, ``table_files`` the
    CSV and LaTeX files; ``source`` whether the judges were ``offline``, ``live``, ``mixed`` or
    ``unknown`` (the evaluation's log was not read and a judge is no offline judge);
    ``real_local`` the judges a real model run on this machine answered; ``benchmarks`` the
    benchmarks reported, each apart from the others.
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
    real_local: tuple[str, ...] = ()
    benchmarks: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Judged:
    """One benchmark's share of the report, computed: its records, who answered them, its
    tables and figures (titled with the benchmark when the report holds several)."""

    group: BenchmarkGroup
    records: list[JudgmentRecord]
    runs: int
    sources: dict[str, JudgeSource]
    tables: ReportTables
    figures: PlannedFigures
    note: str | None  # under each figure and in each LaTeX caption: who answered


def _retitled(
    tables: ReportTables, figures: PlannedFigures, group: BenchmarkGroup
) -> tuple[ReportTables, PlannedFigures]:
    """``group``'s share of a report over several benchmarks, its benchmark named in every
    title, file name and sentence, so no table, figure or file can be read as another's."""

    def table(t: Table) -> Table:
        return replace(t, slug=f"{group.slug}-{t.slug}", title=f"{t.title} — {group.label}")

    retitled = PlannedFigures(
        [
            (replace(s, slug=f"{group.slug}-{s.slug}", title=f"{s.title}\n{group.label}"), c)
            for s, c in figures.drawn
        ],
        [f"{group.label}: {sentence}" for sentence in figures.omitted],
    )
    return (
        ReportTables(
            [table(t) for t in tables.headline],
            [table(t) for t in tables.details],
            table(tables.provenance),
        ),
        retitled,
    )


def _judge_group(
    group: BenchmarkGroup,
    events: EventStore | None,
    calls: Mapping[str, AnsweredCall] | None,
    log_note: str,
    now: datetime,
    *,
    merge_duplicates: bool,
    grouped: bool,
) -> _Judged:
    """Compute one benchmark's share of the report from its folders' judgments."""
    loaded = load_evaluations(group.folders, merge_duplicates=merge_duplicates)
    records = loaded.records
    if not records:
        raise ReportError(
            f"no judgments in {[str(d) for d in group.folders]!r}; run `eval` before `report`"
        )
    if calls is not None:
        found = sum(1 for r in records if r.call_key in calls)
        log_note += f"; the calls of {found} of {len(records)} judgments are in it"
    computed = compute(records, events)
    sources = judge_sources(records, calls)
    source = overall_source(sources)
    provenance = provenance_table(
        group.folders, records, computed.runs, sources, source, calls, log_note, now
    )
    tables = all_tables(computed, group.folders, loaded, provenance, sources)
    figures = plan_figures(computed)
    if grouped:
        tables, figures = _retitled(tables, figures, group)
    return _Judged(
        group, records, len(computed.runs), sources, tables, figures, figure_note(source, sources)
    )


def write_report(
    eval_dirs: Sequence[Path],
    out_dir: Path,
    *,
    events: EventStore | None = None,
    log_note: str | None = None,
    now: datetime | None = None,
    merge_duplicates: bool = False,
    across_benchmarks: bool = False,
) -> ReportSummary:
    """Read the judgments of ``eval_dirs``; write the report folder ``out_dir``.

    ``events`` is the event log of the workspace that evaluated: who answered each judgment
    (provider ids, offline or live) and when are read from it, and the difficulty gate's
    verdicts on the runs the judged pairs came from (the gate's accuracy by rating gap); without
    it the report says they were not read (``log_note``: why). Raises :class:`ReportError` when
    a directory has no judgments file, a record is malformed, there is no judgment at all, or
    one judge under one condition was judged in two evaluation folders — unless
    ``merge_duplicates``, when their judgments make one cell that names both folders.

    Folders that judged different benchmarks (their recorded content hashes differ) raise
    :class:`MixedBenchmarks`, unless ``across_benchmarks``: then every table, leaderboard and
    figure is drawn once per benchmark, its title and file names naming it, and no cell or mean
    holds judgments of two benchmarks. The pages open with the results (Table 1, the
    leaderboard, the figures) and end with the provenance.
    """
    if not eval_dirs:
        raise ReportError("write_report needs at least one evaluation directory, got none")
    groups = benchmark_groups(distinct_folders(eval_dirs))
    if not across_benchmarks:
        refuse_mixed(groups)
    now = now or datetime.now(tz=UTC)
    calls = answered_calls(events, eval_dirs) if events is not None else None
    if log_note is None:
        log_note = (
            "read from the event log given"
            if calls is not None
            else "not read (no workspace given)"
        )
    parts = [
        _judge_group(
            group,
            events,
            calls,
            log_note,
            now,
            merge_duplicates=merge_duplicates,
            grouped=len(groups) > 1,
        )
        for group in groups
    ]
    return _write_pages(parts, eval_dirs, out_dir, calls)


def _write_pages(
    parts: Sequence[_Judged],
    eval_dirs: Sequence[Path],
    out_dir: Path,
    calls: Mapping[str, AnsweredCall] | None,
) -> ReportSummary:
    """Draw the figures, write the tables and both pages of ``parts`` into ``out_dir``."""
    records = [r for part in parts for r in part.records]
    sources = judge_sources(records, calls)
    source = overall_source(sources)
    out_dir.mkdir(parents=True, exist_ok=True)
    shown: list[PagePart] = []
    table_files: list[Path] = []
    for part in parts:
        written = write_figures(part.figures.drawn, out_dir, part.note)
        table_files += write_tables(part.tables.every, out_dir, part.note)
        shown.append(
            PagePart(
                part.tables.headline,
                part.tables.details,
                part.tables.provenance,
                written,
                part.figures.omitted,
                part.group.label if len(parts) > 1 else None,
            )
        )
    runs = sum(part.runs for part in parts)
    summary_line = (
        f"{len(records)} judgments, {runs} runs (judge × condition), from "
        f"{', '.join(str(d) for d in eval_dirs)}."
    )
    opening = Opening(
        summary_line,
        source_sentence(source, sources),
        provenance_line([(p.group.sha256, p.group.label) for p in parts], source, sources),
        source,
    )
    md_path, html_path = out_dir / REPORT_MD, out_dir / REPORT_HTML
    md_path.write_text(markdown_page(opening, shown), encoding="utf-8")
    html_path.write_text(html_page(opening, shown), encoding="utf-8")
    written_all = [w for part in shown for w in part.figures]
    return ReportSummary(
        markdown=md_path,
        html=html_path,
        judgments=len(records),
        runs=runs,
        figures=tuple(figure_title(w) for w in written_all),
        omitted=tuple(s for part in shown for s in part.omitted),
        figure_files=tuple(out_dir / p for w in written_all for p in (w.png, w.pdf)),
        table_files=tuple(table_files),
        source=source,
        real_local=tuple(s.judge for s in sources.values() if s.real_local),
        benchmarks=tuple(p.group.label for p in parts),
    )


def write_workspace_report(
    eval_dirs: Sequence[Path],
    out_dir: Path,
    home: Path | None = None,
    *,
    merge_duplicates: bool = False,
    across_benchmarks: bool = False,
) -> ReportSummary:
    """:func:`write_report`, reading who answered each judgment (and the difficulty gate's
        verdicts) from the event log of the workspace ``home`` (default: the default workspace)
        when it has one; a workspace that does not exist is not made, and the report says the log
        was not read. ``merge_duplicates`` and ``across_benchmarks`` are :func:`write_report`'s; the
    benchmarks are compared before the workspace is opened."""
    from playlisteval.app import App
    from playlisteval.settings import load_settings
    from playlisteval.workspace import Workspace

    if not across_benchmarks:
        refuse_mixed(benchmark_groups(distinct_folders(eval_dirs)))
    settings = load_settings(home)
    database = Workspace(Path(settings.home)).database
    if not (settings.store.url or database.exists()):
        note = f"not read: no workspace at {settings.home} (give the --home that evaluated)"
        return write_report(
            eval_dirs,
            out_dir,
            log_note=note,
            merge_duplicates=merge_duplicates,
            across_benchmarks=across_benchmarks,
        )
    with App(settings) as app:
        where = "the PostgreSQL event log" if settings.store.url else str(database)
        return write_report(
            eval_dirs,
            out_dir,
            events=app.events,
            log_note=f"read from {where}",
            merge_duplicates=merge_duplicates,
            across_benchmarks=across_benchmarks,
        )


def figure_specs(
    records: Sequence[JudgmentRecord], events: EventStore | None = None
) -> list[FigureSpec]:
    """The figures a report of ``records`` draws, as data (a test draws and measures them);
    with ``events``, the difficulty gate's figure too."""
    return [spec for spec, _ in plan_figures(compute(records, events)).drawn]
