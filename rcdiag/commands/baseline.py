"""``rcdiag baseline``: store a reference run's metrics and bootstrap replicates for ``rcdiag check``."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import typer

from rcdiag import api
from rcdiag.checks.defaults import BASELINE_DIRECTIONS
from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DialectOption,
    DumpOptions,
    PathsArgument,
    QuietOption,
    VetoOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
    stderr,
    stdout,
    write_output,
    wrote,
)
from rcdiag.commands._layout import Col, header_line, new_table
from rcdiag.commands._progress import progress_bar, warn_about_input
from rcdiag.commands._terminal import CHI2_METRICS, chi2_note, source_counts
from rcdiag.errors import UsageError
from rcdiag.formatting import fmt
from rcdiag.metrics.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED, MAX_REPLICATES
from rcdiag.metrics.distributions import quantiles
from rcdiag.model import Baseline, Diagnosis


@reads_dump
def baseline(
    paths: PathsArgument,
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", metavar="FILE", help="The baseline JSON file to write (atomically)."
        ),
    ],
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the bootstrap weights (reproducible).")
    ] = DEFAULT_SEED,
    replicates: Annotated[
        int, typer.Option("--replicates", help="Bootstrap replicates K (≥ 10).")
    ] = DEFAULT_REPLICATES,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Store a reference dump's metrics and bootstrap replicates for `rcdiag check --baseline`."""
    with cli_errors(debug):
        written = outputs({"--output": output}, paths)
        if seed < 0:
            raise UsageError(f"--seed must be ≥ 0, got {seed}")
        if not 10 <= replicates <= MAX_REPLICATES:
            raise UsageError(f"--replicates must lie in [10, {MAX_REPLICATES:,}], got {replicates}")
        with progress_bar(quiet) as advance:
            made = api.baseline(
                paths,
                seed=seed,
                replicates=replicates,
                dialect=parse_dialect(dialect),
                veto_threshold=veto_threshold,
                **dump_options.arguments(),
                progress=advance,
            )
        warn_about_input(made.source, quiet)
        write_output(written["--output"], made.to_json())
    if quiet:
        return
    show(made)
    if made.diagnosis is not None:
        warn_if_not_healthy(made.diagnosis)
    warn_about_null_replicates(made)
    wrote(written["--output"])


def warn_if_not_healthy(diagnosis: Diagnosis) -> None:
    """A baseline is the reference of "no regression": say so when the reference itself is not
    healthy: checks against it then only flag what gets worse."""
    if diagnosis.verdict == "healthy":
        return
    causes = ", ".join(f"{c.id} ({c.severity})" for c in diagnosis.causes) or (
        "metrics outside the healthy ranges"
    )
    stderr.print(
        f"[yellow]Warning:[/] the reference run is not healthy (verdict {diagnosis.verdict}: "
        f"{causes}); checks against this baseline will only flag what gets worse than it."
    )


def warn_about_null_replicates(made: Baseline) -> None:
    """Say which stored replicates are not finite (written as null, left out by ``check``)."""
    counts = {
        name: int(np.count_nonzero(~np.isfinite(values))) for name, values in made.bootstrap.items()
    }
    counts = {name: count for name, count in counts.items() if count}
    if not counts:
        return
    listed = ", ".join(f"{name} {count}" for name, count in list(counts.items())[:3])
    more = f" and {len(counts) - 3} more metrics" if len(counts) > 3 else ""
    stderr.print(
        f"[yellow]Warning:[/] bootstrap replicates that are not finite are stored as null "
        f"(of {made.replicates}: {listed}{more}): a resample without rows (a tiny dump) or a "
        "log ratio beyond ±709 (e^ℓ overflows); rcdiag check leaves them out of its intervals."
    )


def show(made: Baseline) -> None:
    """The mismatch metrics of the baseline with their 95 % bootstrap percentile intervals."""
    source = made.source
    stdout.print(
        header_line(
            stdout,
            "rcdiag baseline",
            [
                f"dialect {made.dialect}",
                *source_counts(source.rows, source.valid_tokens, source.steps),
                f"{made.replicates} replicates (seed {made.seed})",
            ],
        )
    )
    table = new_table(
        "Baseline (overall, 95% bootstrap interval)",
        [Col("metric"), Col("value", "right"), Col("interval", "right")],
    )
    for name in BASELINE_DIRECTIONS:
        if name not in made.overall:
            continue
        reps = made.bootstrap.get(name)
        interval = "–"
        if reps is not None and reps.size:
            values = reps[np.isfinite(reps)]
            if values.size:
                lo, hi = quantiles(values, [0.025, 0.975])
                interval = f"[{fmt(lo)}, {fmt(hi)}]"
        table.add_row(name, fmt(made.overall[name]), interval)
    stdout.print(table)
    chi2_note(made.overall.get(name) for name in CHI2_METRICS if name in BASELINE_DIRECTIONS)
