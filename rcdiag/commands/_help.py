"""How ``--help`` reads: paragraphs reflowed at the terminal's width, no type shown for flags.

typer keeps the line breaks of a docstring's later paragraphs, so a paragraph written at 100
columns broke in the middle of a phrase on an 80-column terminal; and it shows the type of every
option, ``<bool>`` for a flag that takes no value. The command classes here fix both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from typer.core import TyperCommand, TyperGroup, TyperOption


def reflowed(text: str | None) -> str:
    """A docstring with each paragraph on one line (the help wraps it at the width).

    Example:
        >>> reflowed('''First line.
        ...
        ...     Second paragraph, written
        ...     on two lines.''')
        'First line.\\n\\nSecond paragraph, written on two lines.'
    """
    paragraphs = inspect.cleandoc(text or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def help_of(command: Callable[..., Any]) -> str:
    """The help of a command function: its docstring, reflowed."""
    return reflowed(command.__doc__)


def _without_flag_types(params: list[Any]) -> list[Any]:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # shown as the type column: nothing, a flag takes no value
    return params


class Command(TyperCommand):
    """A typer command whose flags show no ``<bool>`` in the help."""

    def get_params(self, ctx: Any) -> list[Any]:  # click's Context and Parameter
        return _without_flag_types(super().get_params(ctx))


class Group(TyperGroup):
    """The ``rcdiag`` group: its flags (``--version``, ``--help``) show no ``<bool>`` either."""

    def get_params(self, ctx: Any) -> list[Any]:  # click's Context and Parameter
        return _without_flag_types(super().get_params(ctx))
