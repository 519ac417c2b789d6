"""The ``rcdiag`` command: wires the commands of :mod:`rcdiag.commands` together, nothing else."""

from __future__ import annotations

import typer

from rcdiag.commands import analyze, synth

app = typer.Typer(
    name="rcdiag",
    help="Diagnose the mismatch between rollout and training log-probs, as verl's Rollout "
    "Correction measures it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command(name="analyze")(analyze.analyze)
app.command(name="synth")(synth.synth)


def main() -> None:
    """Console-script entry point."""
    app()
