"""``rcdiag watch``: follow a dump directory while the run writes it, one line per new step.

Each time the dump's files change (a new shard, a shard rewritten), the dump is analysed again with
a cache of each file's finished results (:mod:`rcdiag.run.cache`), so only the new files are read;
the results equal a cold run's. A shard the trainer is still writing (no footer yet) or a file that
cannot be read yet is waited for: the error is printed once, and the next poll tries again.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from rcdiag import api
from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DialectOption,
    DumpOptions,
    FrameworksOption,
    PathsArgument,
    VetoOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
)
from rcdiag.commands._progress import progress_bar
from rcdiag.commands._trackers import MlflowOption, TensorboardOption, Trackers, WandbOption
from rcdiag.errors import InputError, UsageError
from rcdiag.formatting import fmt
from rcdiag.io.files import discover
from rcdiag.io.paths import printable
from rcdiag.metrics.records import (
    ABS_LOG_RATIO_MEAN,
    CHI2_SEQ,
    ESS_SEQ,
    K3_KL,
    label,
    worst_status,
)
from rcdiag.model import AnalysisResult, StepResult
from rcdiag.process import reader_gone
from rcdiag.status import STATUSES, rank

LINE_METRICS = tuple(r.name for r in (K3_KL, ABS_LOG_RATIO_MEAN, CHI2_SEQ, ESS_SEQ))
"""The figures of a step's line."""
EXIT_VERDICT = 1
"""The exit code when the verdict reaches ``--fail-on``."""


def step_line(step: StepResult) -> str:
    """One line for a step: its status on the published ranges and its key figures."""
    if not step.valid_tokens:
        return f"step {step.step}: no valid token ({step.rows:,} rows)"
    figures = [
        f"{label(name)} {fmt(step.metrics[name])}"
        for name in LINE_METRICS
        if step.metrics.get(name) is not None
    ]
    status = worst_status(step.metrics)
    return f"step {step.step}: {status} · {' · '.join(figures)} · {step.rows:,} rows"


@dataclass
class Follower:
    """What has been said so far: the steps shown, the causes named, the verdict."""

    steps: set[int] = field(default_factory=set)
    causes: set[str] = field(default_factory=set)
    verdict: str | None = None

    def news(self, result: AnalysisResult) -> list[str]:
        """The lines a new analysis of the grown dump adds: new steps, new causes, a new
        verdict."""
        lines = [step_line(s) for s in result.step_results if s.step not in self.steps]
        self.steps.update(s.step for s in result.step_results)
        for cause in result.diagnosis.causes:
            if cause.id not in self.causes:
                self.causes.add(cause.id)
                lines.append(f"new cause ({cause.severity}): {cause.id}: {cause.summary}")
        verdict = result.diagnosis.verdict
        if verdict != self.verdict:
            lines.append(f"verdict: {verdict} ({result.source.steps:,} steps)")
            self.verdict = verdict
        return lines


def listing(paths: Sequence[str]) -> tuple[tuple[str, int, int], ...] | None:
    """The dump's files with their sizes and modification times (None: none yet)."""
    try:
        found = discover(list(paths))
    except InputError:
        return None
    out = []
    for path in found:
        with contextlib.suppress(OSError, AttributeError):
            stat = Path(str(path)).stat()
            out.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(out)


@contextlib.contextmanager
def cache_dir(given: str | None) -> Iterator[str]:
    """The ``--cache`` directory, or a temporary one for this watch."""
    if given is not None:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="rcdiag-watch-") as scratch:
        yield scratch


def say(line: str) -> None:
    print(printable(line), flush=True)


@reads_dump
def watch(
    paths: PathsArgument,
    interval: Annotated[
        float,
        typer.Option("--interval", metavar="SECONDS", help="How often to look for new files."),
    ] = 5.0,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            metavar="watch|act",
            help="Exit 1 as soon as the verdict reaches this status (for a job supervisor).",
        ),
    ] = None,
    exit_when_idle: Annotated[
        float | None,
        typer.Option(
            "--exit-when-idle",
            metavar="SECONDS",
            help="Exit 0 when no file has changed for this long (default: follow until stopped).",
        ),
    ] = None,
    html: Annotated[
        str | None,
        typer.Option("--html", metavar="FILE", help="Also keep this HTML report up to date."),
    ] = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    frameworks: FrameworksOption = None,
    tensorboard: TensorboardOption = None,
    mlflow: MlflowOption = None,
    wandb: WandbOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Follow a growing dump directory: a line per new step, new causes and verdict changes."""
    with cli_errors(debug):
        if fail_on is not None and fail_on not in STATUSES[1:]:
            raise UsageError(f"--fail-on {fail_on}: expected watch or act")
        written = outputs({"--html": html}, paths)
        trackers = Trackers(tensorboard, mlflow, wandb)
        trackers.check()
        arguments: dict[str, Any] = {
            "dialect": parse_dialect(dialect),
            "veto_threshold": veto_threshold,
            **dump_options.arguments(),
            "frameworks": frameworks,
        }
        with cache_dir(arguments.pop("cache")) as cache, contextlib.ExitStack() as opened:
            streams = []
            for stream in trackers.streams():
                opened.callback(stream.close)
                streams.append(stream)
            code = follow(
                paths,
                {**arguments, "cache": cache},
                written,
                streams,
                interval,
                fail_on,
                exit_when_idle,
            )
    raise typer.Exit(code)


def follow(
    paths: list[str],
    arguments: dict[str, Any],
    written: dict[str, Path],
    streams: Sequence[Any],
    interval: float,
    fail_on: str | None,
    exit_when_idle: float | None,
) -> int:
    """Poll until stopped, idle for ``exit_when_idle`` seconds, the verdict reaches ``fail_on``,
    or the reader of the output has gone (``rcdiag watch … | head``: exit 0, quietly); returns the
    exit code."""
    follower, seen, waiting = Follower(), None, None
    changed_at = time.monotonic()
    while True:
        now = listing(paths)
        if now is not None and now != seen:
            try:
                result = analysed(paths, arguments, written)
            except InputError as exc:  # a shard being written: try again at the next poll
                if str(exc) != waiting:
                    say(f"waiting: {exc}")
                    waiting = str(exc)
            else:
                seen, waiting, changed_at = now, None, time.monotonic()
                for line in follower.news(result):
                    say(line)
                for stream in streams:  # each logs the steps it has not logged yet
                    stream.add(result)
                verdict = result.diagnosis.verdict
                if fail_on is not None and rank(verdict) >= rank(fail_on):  # type: ignore[arg-type]
                    say(f"stopping: the verdict is {verdict} (--fail-on {fail_on})")
                    return EXIT_VERDICT
        if exit_when_idle is not None and time.monotonic() - changed_at >= exit_when_idle:
            return 0
        if reader_gone(sys.stdout):
            return 0
        time.sleep(interval)


def analysed(
    paths: list[str], arguments: dict[str, Any], written: dict[str, Path]
) -> AnalysisResult:
    """The analysis of the dump as it is now (with the report page, when asked for), with a bar
    of the files read or taken from the cache on a terminal's stderr."""
    if "--html" not in written:
        with progress_bar(False) as advance:
            return api.analyze(paths, **arguments, progress=advance)
    with progress_bar(False) as advance:
        document = api.report(paths, **arguments, progress=advance)
    api.write_report(document, written["--html"])
    result = document.analysis
    assert result is not None, "a report document computed from a dump holds the analysis"
    return result
