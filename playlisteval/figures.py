"""The evaluation report's figures: moved to :mod:`playlisteval.report.drawing` (the specs and
their drawing with matplotlib); every name is handed on here for the code that imports it from
this module."""

from playlisteval.report.drawing import (
    COLOURS,
    LABEL_CHARS,
    LEGEND_CHARS,
    NOTE_IN,
    PNG_DPI,
    WIDTH_IN,
    Bar,
    BarFigure,
    BarGroup,
    FigureSpec,
    HeatCell,
    HeatFigure,
    LineFigure,
    Point,
    Series,
    draw,
    save,
    text_overlaps,
    wrapped,
)

__all__ = [
    "COLOURS",
    "LABEL_CHARS",
    "LEGEND_CHARS",
    "NOTE_IN",
    "PNG_DPI",
    "WIDTH_IN",
    "Bar",
    "BarFigure",
    "BarGroup",
    "FigureSpec",
    "HeatCell",
    "HeatFigure",
    "LineFigure",
    "Point",
    "Series",
    "draw",
    "save",
    "text_overlaps",
    "wrapped",
]
