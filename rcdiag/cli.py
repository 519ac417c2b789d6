"""The ``rcdiag`` command: wires the commands of :mod:`rcdiag.commands` together, nothing else."""

from __future__ import annotations

import ctypes

import typer

from rcdiag.commands import (
    analyze,
    baseline,
    check,
    compare_presets,
    presets,
    recommend,
    report,
    synth,
)

app = typer.Typer(
    name="rcdiag",
    help="Diagnose the mismatch between rollout and training log-probs, as verl's Rollout "
    "Correction measures it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command(name="analyze")(analyze.analyze)
app.command(name="compare-presets")(compare_presets.compare_presets)
app.command(name="presets")(presets.presets)
app.command(name="report")(report.report)
app.command(name="recommend")(recommend.recommend)
app.command(name="check")(check.check)
app.command(name="baseline")(baseline.baseline)
app.command(name="synth")(synth.synth)


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
    """Console-script entry point."""
    _reuse_freed_memory()
    app()


if __name__ == "__main__":
    main()
