"""How ``--help`` reads: paragraphs reflowed at the terminal's width, a word for what each option
takes, no type shown for flags.

typer keeps the line breaks of a docstring's later paragraphs, so a paragraph written at 100
columns broke in the middle of a phrase on an 80-column terminal; and it shows the Python type of
every option that names no metavar (``<list[str]>``, ``<int range>``), ``<bool>`` for a flag that
takes no value. The command classes here fix all three: an option without a metavar shows the one
:data:`METAVARS` gives for its name, else the one :data:`TYPE_METAVARS` gives for its type.
"""

from __future__ import annotations

import copy
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
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


METAVARS = {
    "dialect": "latest|legacy",
    "veto_threshold": "TAU",
    "preset": "NAME",
    "rule": "RULE",
    "sweep": "KEY",
    "grid": "C,C,…",
    "sort": "FIELD",
    "abs_tol": "TOL",
    "rel_tol": "TOL",
    "confidence": "LEVEL",
    "trend_alpha": "ALPHA",
}
"""The metavar of an option (by its parameter's name) that declares none."""
TYPE_METAVARS = {int: "N", float: "X", Path: "FILE", str: "TEXT"}
"""The metavar of any other option without one, by its Python type (of its items, for a list)."""


def _python_type(param: Any) -> Any:
    """The type a parameter's values have (``int`` for ``list[int]``)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:  # typer before 0.29: click's type
        kind = getattr(getattr(param, "type", None), "name", "text").split()[0].lower()
        return {"integer": int, "float": float, "path": Path}.get(kind, str)
    args = typing.get_args(annotation)
    return args[0] if typing.get_origin(annotation) is list and args else annotation


def _no_type(ctx: Any) -> None:
    return None


def _no_metavar(*args: Any, **kwargs: Any) -> str:
    return ""  # no type shown; the usage line then shows the argument's name


def _readable(params: list[Any]) -> list[Any]:
    for param in params:
        if not isinstance(param, TyperOption):  # an argument: its name says what it takes
            param.display_type_rich = _no_type  # typer 0.29
            param.type = copy.copy(param.type)  # typer before 0.29 shows its type's metavar
            param.type.get_metavar = _no_metavar
        elif param.metavar is not None:
            continue
        elif param.is_flag:
            param.metavar = ""  # shown as the type column: nothing, a flag takes no value
        else:
            kind = _python_type(param)
            param.metavar = METAVARS.get(param.name or "", TYPE_METAVARS.get(kind, "TEXT"))
    return params


class Command(TyperCommand):
    """A typer command whose options show a word for what they take (module docstring)."""

    def get_params(self, ctx: Any) -> list[Any]:  # click's Context and Parameter
        return _readable(super().get_params(ctx))


class Group(TyperGroup):
    """The ``rcdiag`` group: its flags (``--version``, ``--help``) show no ``<bool>`` either."""

    def get_params(self, ctx: Any) -> list[Any]:  # click's Context and Parameter
        return _readable(super().get_params(ctx))
