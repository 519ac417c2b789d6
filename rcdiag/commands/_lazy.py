"""Commands imported when they run: ``rcdiag analyze`` loads the analysis, not the report, the CI
checks or the synthetic dumps; ``rcdiag --help`` loads none of them (nor numpy or pyarrow).

Each command lives in the module of :mod:`rcdiag.commands` named after it (``compare-presets`` in
``compare_presets.py``), as a function of the same name whose docstring is its help. The group's
help lists every command by the first paragraph of that docstring, read from the module's source
without importing it; a command about to run is imported and built by typer as if it had been
registered up front.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import typer

from rcdiag.commands._help import Command, Group, help_of, reflowed

PACKAGE = "rcdiag.commands"


def function_name(command: str) -> str:
    """The module and function of a command (``compare-presets`` → ``compare_presets``)."""
    return command.replace("-", "_")


def load(command: str) -> Callable[..., Any]:
    """The function behind ``rcdiag COMMAND``, importing its module."""
    name = function_name(command)
    module = importlib.import_module(f"{PACKAGE}.{name}")
    function: Callable[..., Any] = getattr(module, name)
    return function


def help_text(command: str) -> str:
    """The help of a command as :func:`~rcdiag.commands._help.help_of` gives it, read from its
    module's source (imported only when the source is not there)."""
    name = function_name(command)
    spec = importlib.util.find_spec(f"{PACKAGE}.{name}")
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is not None and origin.suffix == ".py" and origin.is_file():
        for node in ast.parse(origin.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return reflowed(ast.get_docstring(node))
    return help_of(load(command))


def build(command: str) -> Any:
    """The click command of ``rcdiag COMMAND``, built by typer from its function."""
    function = load(command)
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command(name=command, cls=Command, help=help_of(function))(function)
    return typer.main.get_command(single)


class LazyCommands(MutableMapping[str, Any]):
    """A group's ``commands`` mapping whose entries are built on first access: ``names`` lists
    every command (in order) without importing any."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in self.names:
                raise KeyError(name)
            self._built[name] = build(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("rcdiag's commands are fixed")

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self.names, *self._built]))

    def __len__(self) -> int:
        return len(set(self.names) | set(self._built))


class LazyGroup(Group):
    """A group whose commands (:attr:`names`, in the order of the help) are imported on use."""

    names: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.names)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.names)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.names:
            return None
        if self._listing:  # the group's help: name and help only, nothing imported
            return Command(name=cmd_name, help=help_text(cmd_name))
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
