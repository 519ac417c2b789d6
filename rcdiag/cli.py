"""The ``rcdiag`` command: wires the commands of :mod:`rcdiag.commands` together, nothing else."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from rcdiag import __version__, _threads, process  # noqa: F401  (before numpy is imported)
from rcdiag.commands._lazy import LazyGroup
from rcdiag.run.allocator import keep_freed_memory


class Commands(LazyGroup):
    """Every command, in the order ``--help`` lists them; each is imported when it runs."""

    names = (
        "analyze",
        "compare-presets",
        "presets",
        "report",
        "recommend",
        "check",
        "baseline",
        "synth",
        "convert",
        "watch",
    )


app = typer.Typer(
    name="rcdiag",
    cls=Commands,
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


# click's ClickException, whether typer vendors click (recent versions) or builds on it (older ones)
USAGE_ERRORS: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def main() -> None:
    """Console-script entry point: every error, usage errors included, is one ``Error:`` line;
    SIGTERM, a closed stdout and narrow encodings are handled (:mod:`rcdiag.process`)."""
    process.prepare()
    keep_freed_memory()  # the process exits after its work: no need to give memory back
    interrupts_before = process.printed_interrupts()
    try:
        code = app(standalone_mode=False)
    except USAGE_ERRORS as exc:
        from rcdiag.io.paths import printable  # imports pyarrow: only on this error's path

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
