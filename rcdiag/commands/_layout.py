"""Terminal layouts that fit the output width: tables split over parts, wrapped paragraphs.

No cell is ever cut with an ellipsis: names and numbers are never wrapped (``no_wrap``), prose wraps
at spaces, and a table too wide for the width is split into parts that each repeat its key columns
(the step, the configuration). A word longer than the whole width is folded, never cut.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Col:
    """A table column: its header, alignment, and whether its cells may wrap (prose) or not
    (names and numbers)."""

    header: str
    justify: Literal["left", "right"] = "left"
    wrap: bool = False


class TitledTable(Table):
    """A table with its title on a line of its own above it: a rich title wraps at the width of
    the table, which can be narrower than the title."""

    heading: str | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.heading:
            yield Text(self.heading, style="bold")
        yield from super().__rich_console__(console, options)


def new_table(
    title: str | None, columns: Sequence[Col], widths: Sequence[int] | None = None
) -> TitledTable:
    """An empty table in the commands' style, with ``columns``; a header longer than its
    column's width in ``widths`` (when given) is broken between its words."""
    table = TitledTable(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.heading = title
    for i, col in enumerate(columns):
        header = col.header
        if widths is not None and len(header) > widths[i]:
            header = "\n".join(textwrap.wrap(header, widths[i], break_long_words=False))
        table.add_column(
            header,
            justify=col.justify,
            no_wrap=not col.wrap,
            overflow="fold",
            header_style="bold",
        )
    return table


COLUMN_GAP = 3
"""Characters between two columns of :func:`new_table` (padding, separator, padding)."""


def column_widths(
    console: Console, columns: Sequence[Col], rows: Sequence[Sequence[Any]]
) -> list[int]:
    """The width each column of a :func:`new_table` needs so that no name or number is cut: its
    longest cell when it does not wrap, its longest word when it does; a header may be broken
    between its words."""
    options = console.options
    widths = []
    for i, col in enumerate(columns):
        sizes = [Measurement.get(console, options, row[i]) for row in rows]
        cells = max((m.minimum if col.wrap else m.maximum for m in sizes), default=0)
        widths.append(max(cells, *(len(word) for word in col.header.split())))
    return widths


def needed_width(console: Console, columns: Sequence[Col], rows: Sequence[Sequence[Any]]) -> int:
    """The width of a :func:`new_table` of ``columns`` and ``rows`` (:func:`column_widths`)."""
    return sum(column_widths(console, columns, rows)) + COLUMN_GAP * max(0, len(columns) - 1)


def fitted_tables(
    console: Console,
    title: str | None,
    key: Sequence[Col],
    columns: Sequence[Col],
    rows: Sequence[Sequence[Any]],
) -> list[TitledTable]:
    """The rows as one table when it fits the console's width, else as several tables, each with
    the ``key`` columns and as many of the other ``columns`` (in order) as fit.

    Each row holds the key cells first, then one cell per column. Every column is measured once:
    a part's width is the sum of its columns' (:func:`needed_width`).
    """
    widths = column_widths(console, [*key, *columns], rows)
    key_width = sum(widths[: len(key)]) + COLUMN_GAP * len(key)  # with the gap after it
    parts: list[list[int]] = []
    width = 0  # of the last part
    for index, column_width in enumerate(widths[len(key) :]):
        if parts and width + COLUMN_GAP + column_width <= console.width:
            parts[-1].append(index)
            width += COLUMN_GAP + column_width
        else:
            parts.append([index])
            width = key_width + column_width
    tables = []
    for n, part in enumerate(parts or [[]], start=1):
        chosen, cells = _part(key, columns, rows, part)
        table = new_table(part_title(title, n, len(parts)), chosen, _widths(console, chosen, cells))
        for row in cells:
            table.add_row(*row)
        tables.append(table)
    return tables


def _widths(console: Console, columns: Sequence[Col], rows: Sequence[Sequence[Any]]) -> list[int]:
    """Column widths within the console's width: headers are broken between words only as much
    as the width requires (the columns first in order keep their header on one line first)."""
    widths = column_widths(console, columns, rows)
    slack = console.width - sum(widths) - COLUMN_GAP * max(0, len(columns) - 1)
    for i, col in enumerate(columns):
        extra = max(0, min(slack, len(col.header) - widths[i]))
        widths[i] += extra
        slack -= extra
    return widths


def _part(
    key: Sequence[Col], columns: Sequence[Col], rows: Sequence[Sequence[Any]], chosen: list[int]
) -> tuple[list[Col], list[list[Any]]]:
    """The key columns and the ``chosen`` other columns, with their cells."""
    cells = [[*row[: len(key)], *(row[len(key) + i] for i in chosen)] for row in rows]
    return [*key, *(columns[i] for i in chosen)], cells


def part_title(title: str | None, n: int, parts: int) -> str | None:
    """``Per step (part 1 of 2)``, ``Configurations (overall, part 1 of 2)``; the title itself
    when there is one part."""
    if title is None or parts <= 1:
        return title
    if title.endswith(")"):
        return f"{title[:-1]}, part {n} of {parts})"
    return f"{title} (part {n} of {parts})"


def hanging(rows: Sequence[tuple[RenderableType, RenderableType]], indent: int = 2) -> Table:
    """Paragraphs with a hanging label: the label column, then the text wrapped beside it.

    Example: ``act    growing_drift: k3_kl rises …`` with the continuation lines under the text.
    """
    grid = Table.grid(padding=(0, 1), pad_edge=False)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for label, text in rows:
        grid.add_row(label, text)
    if indent:
        outer = Table.grid(pad_edge=False)
        outer.add_column(width=indent)
        outer.add_column()
        outer.add_row("", grid)
        return outer
    return grid


def header_line(console: Console, command: str, parts: Sequence[str]) -> Text:
    """``rcdiag COMMAND · part · part …`` broken between parts (never inside one) to fit the
    width; continuation lines are indented. ``parts`` are plain text."""
    width = console.width
    line = Text(command, style="bold")
    current = line.cell_len
    for part in parts:
        piece = Text(part)
        if current + 3 + piece.cell_len <= width:
            line.append(" · ")
            line.append_text(piece)
            current += 3 + piece.cell_len
        else:
            line.append("\n  ")
            line.append_text(piece)
            current = 2 + piece.cell_len
    return line


def paragraph(text: str | Text, indent: int = 0, style: str = "") -> RenderableType:
    """A paragraph wrapped at the width, every line indented by ``indent``."""
    body = Text(text, style=style) if isinstance(text, str) else text
    if not indent:
        return body
    grid = Table.grid(pad_edge=False)
    grid.add_column(width=indent)
    grid.add_column(overflow="fold")
    grid.add_row("", body)
    return grid
