"""The evaluation report: judgments of one or more evaluations → a folder fit for a paper.

An evaluation directory holds ``judgments.jsonl`` (one verdict per line: judge, condition, pair,
answer order, what it picked, what it was shown, retrieved and gold spans, the haystack's hours)
and ``evaluation.json`` (its id, the benchmark's content hash, when it started). The report
folder gets ``report.md`` and ``report.html``, ``figures/<name>.png`` and ``.pdf`` and
``tables/<name>.csv`` and ``.tex``, with a provenance block: the benchmark's content hash, the
judges and the provider ids that answered them (from the evaluation's log, when the workspace
that ran it is given), the conditions with the hours asked and built, the dates, the code
version and whether the judges were live or the offline provider — which is a harness, never
evidence of model quality, and said so on every page, table caption and figure.

Computing apart from rendering, one room each:

* what the report says — :mod:`~playlisteval.report.load` (the records, read strictly),
  :mod:`~playlisteval.report.sources` (who answered), :mod:`~playlisteval.report.compute` (runs,
  metrics, intervals, comparisons, recall), :mod:`~playlisteval.report.gate` (the difficulty
  gate's accuracy by gap), :mod:`~playlisteval.report.rows` (every table's rows) and
  :mod:`~playlisteval.report.charts` (every figure's data and caption);
* how it is shown — :mod:`~playlisteval.report.table_format` (a table as markdown, HTML, CSV
  and LaTeX), :mod:`~playlisteval.report.drawing` (a figure drawn with matplotlib) and
  :mod:`~playlisteval.report.pages` (the markdown and HTML pages and the files);
* :mod:`~playlisteval.report.write` puts them together (:func:`write_report`).

One judge under one condition judged in two evaluation folders is refused (which of the two
should a cell show?) unless ``merge_duplicates`` asks for one cell that names both; evaluations
of two benchmarks are refused (:class:`MixedBenchmarks`, :mod:`~playlisteval.report.evaluations`)
unless ``across_benchmarks`` asks for every table and figure once per benchmark. An evaluation
is named by what it judged (:func:`evaluation_labels`). The pages open with the results and end
with the provenance. Every name the report module offered before is handed on here.
"""

from playlisteval.report.charts import WHISKERS
from playlisteval.report.compute import RECALL_THRESHOLD
from playlisteval.report.evaluations import (
    BenchmarkGroup,
    MixedBenchmarks,
    benchmark_groups,
    evaluation_labels,
)
from playlisteval.report.gate import GATE_SCORING, GateRow, GateVerdict, gate_rows, gate_verdicts
from playlisteval.report.load import (
    EVALUATION_FILE,
    JUDGMENTS_FILE,
    LoadedJudgments,
    ReportError,
    load_evaluations,
    load_records,
)
from playlisteval.report.pages import FIGURES_DIR, REPORT_HTML, REPORT_MD, TABLES_DIR
from playlisteval.report.rows import INTERVALS
from playlisteval.report.sources import (
    MODE_TEXT,
    OFFLINE_NOTE,
    UNKNOWN_NOTE,
    AnsweredCall,
    Source,
    answered_calls,
)
from playlisteval.report.write import (
    ReportSummary,
    figure_specs,
    write_report,
    write_workspace_report,
)

# The provenance block's code version, read from here by the report's tests.
from store.version import code_version

__all__ = [
    "EVALUATION_FILE",
    "FIGURES_DIR",
    "GATE_SCORING",
    "INTERVALS",
    "JUDGMENTS_FILE",
    "MODE_TEXT",
    "OFFLINE_NOTE",
    "RECALL_THRESHOLD",
    "REPORT_HTML",
    "REPORT_MD",
    "TABLES_DIR",
    "UNKNOWN_NOTE",
    "WHISKERS",
    "AnsweredCall",
    "BenchmarkGroup",
    "GateRow",
    "GateVerdict",
    "LoadedJudgments",
    "MixedBenchmarks",
    "ReportError",
    "ReportSummary",
    "Source",
    "answered_calls",
    "benchmark_groups",
    "code_version",
    "evaluation_labels",
    "figure_specs",
    "gate_rows",
    "gate_verdicts",
    "load_evaluations",
    "load_records",
    "write_report",
    "write_workspace_report",
]
