"""The commands' consoles: rich consoles fitted to the output width.

rich is imported when a command first prints through one (:data:`rcdiag.commands._common.stdout`,
``stderr``): about 30 ms of every start-up, which a ``--quiet`` run never spends.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console, ConsoleDimensions

PIPE_WIDTH = 100
"""Columns of output to a pipe or a file when ``COLUMNS`` is not set."""
MIN_WIDTH = 40
"""Narrower widths (``COLUMNS=20``) are taken as this: below it no table can be read."""


def output_width(console: Console) -> int:
    """The width ``console`` lays its output out for: ``COLUMNS`` when set, else the terminal's
    width, else :data:`PIPE_WIDTH` (a pipe or a file); never below :data:`MIN_WIDTH`."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(MIN_WIDTH, int(columns))
    if not console.is_terminal:
        return PIPE_WIDTH
    try:
        return max(MIN_WIDTH, os.get_terminal_size(console.file.fileno()).columns or 80)
    except (OSError, ValueError, AttributeError):  # a terminal that cannot tell its size
        return 80


class FittedConsole(Console):
    """A rich console whose width is :func:`output_width`, read at every print (so ``COLUMNS``
    set by a caller, or a resized terminal, is honoured). Text wraps at that width; a message that
    must stay one line (a path) is printed with ``soft_wrap=True``."""

    @property
    def size(self) -> ConsoleDimensions:
        return ConsoleDimensions(output_width(self), super().size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:  # rich's setter, kept for its callers
        self._width, self._height = new_size

    def _render_buffer(self, buffer: Any) -> str:
        """Rich's text, without the spaces it pads lines with (they end up in files and pipes)."""
        text = super()._render_buffer(buffer)
        return "\n".join(line.rstrip(" ") for line in text.split("\n"))
