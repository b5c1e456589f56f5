"""The CLIs' tables (``ferry zk``, ``ferry validate``/``audit``, ``ferry dev status``), drawn with rich.

One look everywhere: upper-case column names, ``-`` for a missing value, no borders. On a
terminal the table fits the terminal; elsewhere (a pipe, a file, a test) it is neither wrapped
nor coloured, one line per row, so scripts can ``grep`` it (``--json`` is for parsing).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

# Wide enough for any row Ferry prints (ZooKeeper paths, log paths, 70-character data), so a
# table written to a pipe is never wrapped.
_PIPE_WIDTH = 1000


def cell(value: Any) -> str:
    return "-" if value is None else str(value)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Table:
    """``rows`` as a table of ``columns`` (keys of each row), headed by the upper-cased names."""
    drawn = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        drawn.add_column(column.upper(), no_wrap=True)
    for row in rows:
        drawn.add_row(*(cell(row.get(column)) for column in columns))
    return drawn


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], file: TextIO | None = None) -> None:
    """Prints ``rows`` (see :func:`table`) to ``file`` (default: the current ``sys.stdout``)."""
    out = file or sys.stdout
    terminal = out.isatty()
    console = Console(
        file=out,
        width=None if terminal else _PIPE_WIDTH,
        highlight=False,
        soft_wrap=False,
        color_system="auto" if terminal else None,
    )
    console.print(table(rows, columns))
