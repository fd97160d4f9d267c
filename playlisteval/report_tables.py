"""The report's tables: moved to :mod:`playlisteval.report.table_format` (a table written as
markdown, HTML, CSV and LaTeX); every name is handed on here for the code that imports it from
this module."""

from playlisteval.report.table_format import (
    MISSING,
    STATS,
    Cell,
    Column,
    ColumnKind,
    Sourced,
    Stat,
    Table,
    Versus,
    latex_escape,
    shown,
)

__all__ = [
    "MISSING",
    "STATS",
    "Cell",
    "Column",
    "ColumnKind",
    "Sourced",
    "Stat",
    "Table",
    "Versus",
    "latex_escape",
    "shown",
]
