"""The ``rcdiag`` command: wires the commands of :mod:`rcdiag.commands` together, nothing else."""

from __future__ import annotations

import ctypes
import sys
from typing import Annotated, Any

import typer

from rcdiag import __version__, _threads, process  # noqa: F401  (before numpy is imported)
from rcdiag.commands import (
    analyze,
    baseline,
    check,
    compare_presets,
    convert,
    presets,
    recommend,
    report,
    synth,
    watch,
)
from rcdiag.commands._help import Command, Group, help_of
from rcdiag.io.paths import printable

app = typer.Typer(
    name="rcdiag",
    cls=Group,
    help="Diagnose the mismatch between rollout and training log-probs, as verl's Rollout "
    "Correction measures it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"rcdiag {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Diagnose the mismatch between rollout and training log-probs, as verl's Rollout
    Correction measures it."""


for _name, _command in (
    ("analyze", analyze.analyze),
    ("compare-presets", compare_presets.compare_presets),
    ("presets", presets.presets),
    ("report", report.report),
    ("recommend", recommend.recommend),
    ("check", check.check),
    ("baseline", baseline.baseline),
    ("synth", synth.synth),
    ("convert", convert.convert),
    ("watch", watch.watch),
):
    app.command(name=_name, cls=Command, help=help_of(_command))(_command)


# click's ClickException, whether typer vendors click (recent versions) or builds on it (older ones)
USAGE_ERRORS: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _reuse_freed_memory() -> None:
    """Ask glibc to keep freed large blocks for reuse instead of returning them to the kernel.

    Streaming allocates arrays of the same few sizes for every batch; when each one is a fresh
    mmap, page faults cost more than the arithmetic (measured: 2× slower end to end on a 50M-token
    dump). Memory stays bounded by the largest batch. A no-op where glibc is absent.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 1 << 30)
    libc.mallopt(m_trim_threshold, (1 << 31) - 1)


def main() -> None:
    """Console-script entry point: every error, usage errors included, is one ``Error:`` line;
    SIGTERM, a closed stdout and narrow encodings are handled (:mod:`rcdiag.process`)."""
    process.prepare()
    _reuse_freed_memory()
    interrupts_before = process.printed_interrupts()
    try:
        code = app(standalone_mode=False)
    except USAGE_ERRORS as exc:
        message = exc.format_message()
        if message:  # empty when the help itself was shown (no arguments)
            print(f"Error: {printable(message)} (see --help)", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort as exc:  # Ctrl-C (or SIGTERM) outside a command's own error handling
        sys.exit(process.report_interrupt(exc.__cause__))
    except KeyboardInterrupt as exc:
        sys.exit(process.report_interrupt(exc))
    except MemoryError:
        print(f"Error: {process.OUT_OF_MEMORY}", file=sys.stderr)
        sys.exit(2)
    if code == process.EXIT_INTERRUPTED:  # typer's own exit on an interrupt it caught, silently
        code = process.report_interrupt(unless_printed_since=interrupts_before)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
