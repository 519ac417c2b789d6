"""``rcdiag convert``: any dump rcdiag reads (another trainer's, or parquet) written as rcdiag's
parquet dump, once (docs/formats.md, "Converting")."""

from __future__ import annotations

from typing import Annotated

import typer

from rcdiag import api
from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DumpOptions,
    PathsArgument,
    QuietOption,
    cli_errors,
    outputs,
    reads_dump,
    refuse_inside_dump,
    shown,
    wrote,
)
from rcdiag.commands._progress import progress_bar
from rcdiag.errors import UsageError
from rcdiag.io.paths import PARQUET_SUFFIXES


@reads_dump
def convert(
    paths: PathsArgument,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            metavar="OUT.parquet",
            help="The parquet dump to write (atomically; never one of the inputs).",
        ),
    ],
    compression: Annotated[
        str, typer.Option("--compression", help="Parquet codec: zstd, snappy, gzip, none.")
    ] = "zstd",
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Write a dump (slime, Miles, NeMo-RL, SkyRL or parquet) as one rcdiag parquet file."""
    with cli_errors(debug):
        written = outputs({"--output": output}, paths)
        target = written["--output"]
        if target.suffix.lower() not in PARQUET_SUFFIXES:
            raise UsageError(f"--output {shown(output)}: give a .parquet file name")
        refuse_inside_dump(written, paths)
        arguments = dump_options.arguments()
        if arguments["engine"] != "local":
            raise UsageError("convert reads the dump in this process: leave out --engine")
        with progress_bar(quiet) as advance:
            done = api.convert(
                paths, target, compression=compression, progress=advance, **arguments
            )
    if quiet:
        return
    left = "".join(
        f", {count} {reason} left out" for reason, count in sorted(done.left_out.items())
    )
    dropped = f", {done.dropped_nonfinite} non-finite masked" if done.dropped_nonfinite else ""
    wrote(
        target,
        f" ({done.rows:,} responses, {done.tokens:,} tokens, {done.steps} steps from "
        f"{done.files} input files{left}{dropped})",
    )
