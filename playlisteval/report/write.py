"""Writing a report: evaluation folders → the numbers → tables and figures → the report folder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from playlisteval.report.charts import plan_figures
from playlisteval.report.compute import compute
from playlisteval.report.drawing import FigureSpec
from playlisteval.report.load import ReportError, load_evaluations
from playlisteval.report.pages import (
    REPORT_HTML,
    REPORT_MD,
    html_page,
    markdown_page,
    write_figures,
    write_tables,
)
from playlisteval.report.rows import all_tables, provenance_table
from playlisteval.report.sources import (
    Source,
    answered_calls,
    figure_note,
    judge_sources,
    overall_source,
    source_sentence,
)
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
    ``real_local`` the judges a real model run on this machine answered.
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
    computed = compute(records, events)
    sources = judge_sources(records, calls)
    source = overall_source(sources)
    offline_note = figure_note(source, sources)
    provenance = provenance_table(
        eval_dirs, records, computed.runs, sources, source, calls, log_note, now
    )
    tables = all_tables(computed, eval_dirs, loaded, provenance, sources)
    figures = plan_figures(computed)

    out_dir.mkdir(parents=True, exist_ok=True)
    written = write_figures(figures.drawn, out_dir, offline_note)
    table_files = write_tables(tables, out_dir, offline_note)
    sources_text = ", ".join(str(d) for d in eval_dirs)
    summary_line = (
        f"{len(records)} judgments, {len(computed.runs)} runs (judge × condition), from "
        f"{sources_text}."
    )
    banner = source_sentence(source, sources)
    md_path = out_dir / REPORT_MD
    md_path.write_text(
        markdown_page(summary_line, banner, tables, written, figures.omitted), encoding="utf-8"
    )
    html_path = out_dir / REPORT_HTML
    html_path.write_text(
        html_page(summary_line, banner, source, tables, written, figures.omitted), encoding="utf-8"
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
        real_local=tuple(s.judge for s in sources.values() if s.real_local),
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
    return [spec for spec, _ in plan_figures(compute(records, events)).drawn]
