"""The ``rcdiag`` console script: sets the process up (:mod:`rcdiag.process`) before the command's
modules load, so that Ctrl-C or SIGTERM during start-up is one ``Error:`` line too."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the command line (:func:`rcdiag.cli.main`)."""
    from rcdiag import process

    gone = process.check_working_directory()
    if gone is not None:
        print(f"Error: {gone}", file=sys.stderr)
        sys.exit(2)
    try:
        process.check_start_up_memory()
        process.prepare()
        from rcdiag.cli import main as run_command_line
    except KeyboardInterrupt as exc:
        sys.exit(process.report_interrupt(exc))
    except (MemoryError, ImportError) as exc:  # a library that cannot be mapped: no memory
        reason = process.exhausted(exc)
        if reason is None:
            raise
        print(f"Error: {reason}", file=sys.stderr)
        sys.exit(2)
    run_command_line()


if __name__ == "__main__":
    main()
