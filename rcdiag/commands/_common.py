"""What every command shares: common options, error handling at the CLI edge, JSON writing."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import glob
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer

from rcdiag import process
from rcdiag.argument_checks import command_line_message
from rcdiag.dialects import DIALECTS, Dialect
from rcdiag.errors import RcdiagError, UsageError
from rcdiag.io.files import discover
from rcdiag.io.paths import check_outputs, printable
from rcdiag.io.remote import is_remote, parse_storage_options
from rcdiag.io.writer import atomic_write
from rcdiag.model import json_safe
from rcdiag.model.tables import encode_table
from rcdiag.run.dump import DUMP_OPTIONS, DumpOption
from rcdiag.run.python_words import from_command_line

if TYPE_CHECKING:
    import pyarrow as pa
    from rich.console import Console

    from rcdiag.frameworks.base import Framework

EXIT_OK = 0
EXIT_CHECKS_FAILED = 1
EXIT_BAD_INPUT = 2

DebugOption = Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")]
JsonOption = Annotated[
    str | None,
    typer.Option(
        "--json", metavar="FILE", help="Also write the results as JSON to this file (atomically)."
    ),
]
"""Output paths are taken as typed (str): a trailing / must still be there for :func:`outputs`."""


class _Console:
    """A command's rich console (:class:`~rcdiag.commands._console.FittedConsole`), made at its
    first use: a ``--quiet`` run that prints nothing never imports rich."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def made(self) -> Console:
        """The console itself (made now if not yet)."""
        if self._console is None:
            from rcdiag.commands._console import FittedConsole

            self._console = FittedConsole(stderr=self._stderr)
        return self._console

    def __getattr__(self, name: str) -> Any:
        if name in ("_stderr", "_console"):  # not set yet (a copy made without __init__)
            raise AttributeError(name)
        return getattr(self.made(), name)


stdout = cast("Console", _Console(stderr=False))
stderr = cast("Console", _Console(stderr=True))


def made(console: Console) -> Console:
    """The rich console behind :data:`stdout` or :data:`stderr`, for a rich object that keeps
    the console it is given (a progress bar)."""
    return console.made() if isinstance(console, _Console) else console


@contextlib.contextmanager
def cli_errors(debug: bool) -> Iterator[None]:
    """Turn library errors into one ``Error: …`` line and exit code 2 (a traceback with --debug)."""
    try:
        with from_command_line():
            yield
    except RcdiagError as exc:
        if debug:
            raise
        _error(command_line_message(exc) or type(exc).__name__)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (rcdiag.process.Terminated)
        raise typer.Exit(process.report_interrupt(exc)) from None
    except MemoryError:
        if debug:
            raise
        _error(process.OUT_OF_MEMORY)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except OSError as exc:  # an output we cannot write (a directory, no permission, disk full)
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or exc}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except (typer.Exit, typer.Abort):
        raise
    except (
        Exception
    ) as exc:  # a bug: still one line and exit 2, so 1 only ever means "checks failed"
        if debug:
            raise
        _error(
            process.exhausted(exc)
            or f"internal error ({type(exc).__name__}: {exc}); rerun with --debug for the traceback"
        )
        raise typer.Exit(EXIT_BAD_INPUT) from None


def _error(message: str) -> None:
    """One ``Error:`` line on stderr, whatever control characters the message holds."""
    print(f"Error: {printable(message.strip())}", file=sys.stderr)


def shown(text: object) -> str:
    """A user string (a path, a file stem, a rule name) for rich output: no markup, one line."""
    from rich.markup import escape

    return escape(printable(str(text)))


def wrote(path: Path, note: str = "") -> None:
    """Tell the user (on stderr) that ``path`` was written."""
    stderr.print(f"wrote {shown(path)}{note}", soft_wrap=True)


def outputs(
    given: dict[str, str | None],
    dump: Sequence[str] | None = None,
    inputs: Mapping[str, Sequence[Path] | Path | None] | None = None,
) -> dict[str, Path]:
    """The output paths of a run (option → path as typed), checked before anything is read
    (:func:`~rcdiag.io.paths.check_outputs`): none is a file of the ``dump`` or one of the
    ``inputs`` (option → the path or paths it names), a directory, another output's path, or a
    parquet file inside a directory of the dump (:func:`refuse_inside_dump`).
    """
    read: dict[str, Iterable[Path]] = {}
    local = [p for p in dump or () if not is_remote(p)]  # a remote file is no local output
    if local:  # discovered only once the output paths themselves are known to be good

        def dump_files() -> Iterator[Path]:
            yield from (p for p in discover(local) if isinstance(p, Path))

        read["a file of the dump"] = dump_files()
    for option, value in (inputs or {}).items():
        read[option] = [value] if isinstance(value, Path) else list(value or [])
    checked = check_outputs(given, read)
    refuse_inside_dump(checked, dump or ())  # every output, not only --csv and --parquet
    return checked


def write_table(path: Path, table: pa.Table, kind: str) -> None:
    """Write a result's table (``to_arrow()``) as CSV or parquet (``kind``) atomically; an
    unwritable path is exit 2."""
    try:
        with atomic_write(path, "wb") as handle:
            encode_table(table, handle, kind)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(f"{path}: cannot write ({reason})") from None


def refuse_inside_dump(given: Mapping[str, Path], dump: Sequence[str]) -> None:
    """Refuse a parquet output inside a directory of the dump: the next run would read it as a
    part of the dump.

    Raises:
        UsageError: naming the option and the directory.
    """
    for option, path in given.items():
        if path.suffix.lower() not in (".parquet", ".parq", ".pq"):
            continue
        for raw in dump:
            pattern = not is_remote(raw) and glob.has_magic(raw) and not Path(raw).exists()
            if pattern and fnmatch.fnmatch(str(path.resolve()), str(Path(raw).resolve())):
                raise UsageError(
                    f"{option} {printable(str(path))} matches {printable(raw)}, a pattern of "
                    "the dump: the next run would read it as part of the dump (choose another "
                    "path)"
                )
            if is_remote(raw) or not Path(raw).is_dir():
                continue
            directory = Path(raw).resolve()
            if directory in path.resolve().parents:
                raise UsageError(
                    f"{option} {printable(str(path))} is inside {printable(raw)}, a directory of "
                    "the dump: the next run would read it as part of the dump (choose another path)"
                )


CsvOption = Annotated[
    str | None,
    typer.Option(
        "--csv",
        metavar="FILE",
        help="Also write the per-step table as CSV to this file (atomically).",
    ),
]
ParquetOption = Annotated[
    str | None,
    typer.Option(
        "--parquet",
        metavar="FILE",
        help="Also write the per-step table as parquet to this file (atomically).",
    ),
]


def write_output(path: Path, content: dict[str, Any] | str) -> None:
    """Write a JSON document (NaN as null) or a text atomically; an unwritable path is exit 2."""
    try:
        with atomic_write(path) as handle:
            if isinstance(content, str):
                handle.write(content)
            else:
                # one line, by the C encoder: an indented document of 10,000 steps × 19 presets
                # takes the pure-Python encoder half a minute (pipe it to `jq` to read it)
                handle.write(json.dumps(json_safe(content), allow_nan=False) + "\n")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(f"{path}: cannot write ({reason})") from None


PathsArgument = Annotated[
    list[str],
    typer.Argument(
        help="Parquet files, globs or directories (read recursively), local or URLs (s3://, "
        "gs://, hf://, https://); or slime, Miles, NeMo-RL, SkyRL dumps (docs/formats.md)."
    ),
]
DialectOption = Annotated[
    str | None,
    typer.Option(
        "--dialect", help="verl version to match: latest (Aug 2026) or legacy (PR #4070, Nov 2025)."
    ),
]
VetoOption = Annotated[
    float | None,
    typer.Option(
        "--veto-threshold",
        help="τ: a valid token with π_train/π_rollout < τ is catastrophic (rcdiag's default "
        "1e-4; in the legacy dialect it also enables verl's veto metrics).",
    ),
]
FrameworksOption = Annotated[
    str | None,
    typer.Option(
        "--frameworks",
        metavar="LIST",
        help="Also compute the mismatch metrics other frameworks log, under their own names: a "
        "comma list of trl, slime, openrlhf, nemo_rl, prime_rl, areal, skyrl, open_instruct, or "
        "all (docs/frameworks.md).",
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")]


def parse_frameworks_option(value: str | None, option: str = "--frameworks") -> list[Framework]:
    """The frameworks of ``--frameworks`` / ``--framework`` (none when not given)."""
    from rcdiag.frameworks import parse_frameworks

    return [] if value is None else parse_frameworks(value, option)


def parse_dialect(value: str | None) -> Dialect | None:
    """The ``--dialect`` value checked (None when not given)."""
    if value is None:
        return None
    if value not in DIALECTS:
        raise UsageError(f"--dialect {value!r}: expected one of {', '.join(DIALECTS)}")
    return value  # type: ignore[return-value]


class DumpOptions:
    """The dump options a command was given (:data:`~rcdiag.run.dump.DUMP_OPTIONS`), by the names
    of its parameters (a repeatable flag's parameter is named after the flag)."""

    def __init__(self, given: Mapping[str, Any] | None = None) -> None:
        self.given = dict(given or {})

    def arguments(self) -> dict[str, Any]:
        """The dump arguments of the :mod:`rcdiag.api` functions.

        Raises:
            UsageError: an empty column name, a malformed ``--storage-option``.
        """
        out = {}
        for option in DUMP_OPTIONS:
            value = self.given.get(_parameter(option), option.default)
            if option.metavar == "COLUMN" and value is not None and not value.strip():
                raise UsageError(f"{option.flag}: empty column name")
            if option.name == "storage_options":
                value = parse_storage_options(value or ())
            out[option.name] = value
        return out


ALL_STEPS = DumpOptions()
"""The default: every step, default column names, non-finite values are errors."""


def _parameter(option: DumpOption) -> str:
    """The command's parameter of a dump option: named after its flag (``storage_option``)."""
    return option.flag.removeprefix("--").replace("-", "_")


def _annotation(option: DumpOption) -> Any:
    """The typer option of a dump option, from its row of the table."""
    kind: Any = option.kind
    if option.repeatable:
        kind = list[kind] | None
    elif option.kind is not bool and option.default is None:
        kind = kind | None
    declared = typer.Option(option.flag, help=option.help, metavar=option.metavar)
    return Annotated[kind, declared]


Command = TypeVar("Command", bound=Callable[..., None])


def reads_dump(command: Command) -> Command:
    """Give a typer command the options every dump-reading command shares (``--step``,
    ``--steps``, the column names, ``--drop-nonfinite``), handed over as ``dump_options``.

    typer builds a command's options from its signature; this one declares them once for all.
    They are listed before ``--quiet`` and ``--debug`` in the help.
    """
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "dump_options"]
    last = [p for p in own if p.name in ("quiet", "debug")]
    shared = [
        inspect.Parameter(
            _parameter(option),
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=option.default,
            annotation=_annotation(option),
        )
        for option in DUMP_OPTIONS
    ]

    @functools.wraps(command)
    def with_dump_options(**kwargs: Any) -> None:
        given = {_parameter(o): kwargs.pop(_parameter(o)) for o in DUMP_OPTIONS}
        command(**kwargs, dump_options=DumpOptions(given))

    parameters = [*(p for p in own if p not in last), *shared, *last]
    with_dump_options.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters
    )
    return cast(Command, with_dump_options)
