"""``rcdiag synth``: write a synthetic dump with a mismatch of known shape (for demos and tests)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from rcdiag.commands._common import DebugOption, cli_errors, shown, stdout
from rcdiag.commands._progress import progress_bar
from rcdiag.errors import UsageError
from rcdiag.synth import SCENARIO_DESCRIPTIONS, config_for, write_synthetic_dump

_SCENARIO_HELP = "Start from a named scenario: " + "; ".join(
    f"{name} ({description})" for name, description in SCENARIO_DESCRIPTIONS.items()
)


def synth(
    out: Annotated[
        str,
        typer.Argument(
            metavar="OUT",
            help="Where to write: a parquet file, or with --shards a directory of step=N/ shards.",
        ),
    ],
    scenario: Annotated[
        str | None, typer.Option("--scenario", metavar="NAME", help=_SCENARIO_HELP)
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed (default 0).")] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", metavar="N", help="Training steps.")
    ] = None,
    rows_per_step: Annotated[
        int | None, typer.Option("--rows-per-step", help="Responses per step.")
    ] = None,
    group_size: Annotated[
        int | None, typer.Option("--group-size", help="Responses per prompt (rows sharing a uid).")
    ] = None,
    mean_length: Annotated[
        int | None, typer.Option("--mean-length", help="Mean response length in tokens.")
    ] = None,
    length_dist: Annotated[
        str | None,
        typer.Option("--length-dist", help="Response lengths: lognormal, uniform or fixed."),
    ] = None,
    max_length: Annotated[
        int | None, typer.Option("--max-length", help="Longest response (longer ones are clipped).")
    ] = None,
    noise: Annotated[
        float | None,
        typer.Option("--noise", help="Std of the zero-mean token noise in Δ log p (bf16: ~0.01)."),
    ] = None,
    bias: Annotated[
        float | None,
        typer.Option(
            "--bias",
            help="Δ log p = bias × log p: > 0 makes the rollout over-confident (fp8-like), "
            "< 0 under-confident; ≥ −1.",
        ),
    ] = None,
    tail_df: Annotated[
        float | None,
        typer.Option(
            "--tail-df", help="Degrees of freedom of extra Student-t noise (heavy tails); 0: none."
        ),
    ] = None,
    tail_scale: Annotated[
        float | None, typer.Option("--tail-scale", help="Scale of the Student-t noise.")
    ] = None,
    catastrophic_rate: Annotated[
        float | None,
        typer.Option(
            "--catastrophic-rate",
            help="Share of tokens with Δ log p ≈ −8 … −15 (π_train ≪ π_rollout).",
        ),
    ] = None,
    drift: Annotated[
        float | None,
        typer.Option(
            "--drift",
            help="Mismatch growth: the last step's mismatch is (1 + drift)² times the first's.",
        ),
    ] = None,
    hole_rate: Annotated[
        float | None,
        typer.Option("--hole-rate", help="Share of masked positions inside responses (hold NaN)."),
    ] = None,
    empty_row_rate: Annotated[
        float | None, typer.Option("--empty-row-rate", help="Share of rows with no valid token.")
    ] = None,
    shards: Annotated[
        bool | None,
        typer.Option(
            "--shards/--single-file",
            help="One file per step under OUT/step=N/, or one file "
            "(default: shards unless OUT ends in .parquet).",
            show_default=False,
        ),
    ] = None,
    float32: Annotated[
        bool, typer.Option("--float32/--float64", help="Precision of the log-prob columns.")
    ] = True,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists.")] = False,
    debug: DebugOption = False,
) -> None:
    """Write a synthetic dump: realistic log-probs with a rollout/training mismatch of known shape.

    Explicit options override the values of --scenario.
    """
    given: dict[str, Any] = {
        "seed": seed,
        "steps": steps,
        "rows_per_step": rows_per_step,
        "group_size": group_size,
        "mean_length": mean_length,
        "length_dist": length_dist,
        "max_length": max_length,
        "noise": noise,
        "bias": bias,
        "tail_df": tail_df,
        "tail_scale": tail_scale,
        "catastrophic_rate": catastrophic_rate,
        "drift": drift,
        "hole_rate": hole_rate,
        "empty_row_rate": empty_row_rate,
    }
    overrides = {name: value for name, value in given.items() if value is not None}
    if tail_df == 0:
        overrides["tail_df"] = None
    overrides["dtype"] = "float32" if float32 else "float64"
    names_directory = out.endswith(("/", os.sep))
    as_shards = shards if shards is not None else names_directory or Path(out).suffix != ".parquet"
    with cli_errors(debug):
        if names_directory and not as_shards:
            raise UsageError(f"{out}: names a directory (it ends in /); give a file name")
        config = config_for(scenario, **overrides)
        with progress_bar(False, "writing", "steps") as advance:
            summary = write_synthetic_dump(
                Path(out), config, shards=as_shards, overwrite=force, progress=advance
            )
    layout = "step shards" if summary.shards else "file"
    stdout.print(
        f"wrote {summary.rows:,} rows · {summary.valid_tokens:,} valid tokens · "
        f"{summary.steps} steps → {shown(summary.path)} "
        f"({layout}, {summary.bytes / 1e6:.2f} MB)",
        soft_wrap=True,  # one line, whatever the length of the path
    )
