"""Terminal layouts that fit the output width: tables split over parts, wrapped paragraphs.

No cell is ever cut with an ellipsis: names and numbers are never wrapped (``no_wrap``), prose wraps
at spaces, and a table too wide for the width is split into parts that each repeat its key columns
(the step, the configuration). A word longer than the whole width is folded, never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich import box
from rich.console import Console, RenderableType
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


def new_table(title: str | None, columns: Sequence[Col]) -> Table:
    """An empty table in the commands' style, with ``columns``."""
    table = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    for col in columns:
        table.add_column(
            col.header,
            justify=col.justify,
            no_wrap=not col.wrap,
            overflow="fold",
            header_style="bold",
        )
    return table


COLUMN_GAP = 3
"""Characters between two columns of :func:`new_table` (padding, separator, padding)."""


def needed_width(console: Console, columns: Sequence[Col], rows: Sequence[Sequence[Any]]) -> int:
    """The width a :func:`new_table` of ``columns`` needs so that no name or number is cut: the
    longest cell of every column that does not wrap, the longest word of every column that does."""
    options = console.options
    total = COLUMN_GAP * max(0, len(columns) - 1)
    for i, col in enumerate(columns):
        cells = [Text(col.header), *(row[i] for row in rows)]
        sizes = [Measurement.get(console, options, cell) for cell in cells]
        total += max((m.minimum if col.wrap else m.maximum) for m in sizes)
    return total


def fitted_tables(
    console: Console,
    title: str | None,
    key: Sequence[Col],
    columns: Sequence[Col],
    rows: Sequence[Sequence[Any]],
) -> list[Table]:
    """The rows as one table when it fits the console's width, else as several tables, each with
    the ``key`` columns and as many of the other ``columns`` (in order) as fit.

    Each row holds the key cells first, then one cell per column.
    """
    width = console.width
    parts: list[list[int]] = []
    for index in range(len(columns)):
        if parts:
            chosen = [*key, *(columns[i] for i in [*parts[-1], index])]
            cells = [
                [*row[: len(key)], *(row[len(key) + i] for i in [*parts[-1], index])]
                for row in rows
            ]
            if needed_width(console, chosen, cells) <= width:
                parts[-1].append(index)
                continue
        parts.append([index])
    if len(parts) <= 1:
        return [_build(title, key, columns, rows, parts[0] if parts else [])]
    return [
        _build(_part_title(title, n, len(parts)), key, columns, rows, part)
        for n, part in enumerate(parts, start=1)
    ]


def _part_title(title: str | None, n: int, parts: int) -> str | None:
    """``Per step (part 1 of 2)``, ``Configurations (overall, part 1 of 2)``."""
    if title is None:
        return None
    if title.endswith(")"):
        return f"{title[:-1]}, part {n} of {parts})"
    return f"{title} (part {n} of {parts})"


def _build(
    title: str | None,
    key: Sequence[Col],
    columns: Sequence[Col],
    rows: Sequence[Sequence[Any]],
    chosen: Sequence[int],
) -> Table:
    table = new_table(title, [*key, *(columns[i] for i in chosen)])
    for row in rows:
        table.add_row(*row[: len(key)], *(row[len(key) + i] for i in chosen))
    return table


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
