"""One pass over a dump for every consumer that a command asks for.

Every command reads the dump exactly once through :func:`run`: the analysis always (the per-row
statistics, the ℓ sketch, the diagnosis evidence), and as requested the preset comparison (verl's
metrics per configuration, sweep points for their summary only), the mismatch profile and the
Poisson bootstrap. What the consumers share is computed once per batch: the masked log ratio (cached
on the batch) and the per-row statistics (the analysis's, handed to the bootstrap and used as the
comparison's base).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rcdiag.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.checks.bootstrap import PoissonBootstrap
from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.engine import TokenView
from rcdiag.frameworks.analysis import FrameworkMetrics
from rcdiag.frameworks.base import Framework
from rcdiag.io.reader import ColumnNames, DumpReader, StepSelection, prefetch
from rcdiag.metrics.profile import MismatchProfile
from rcdiag.metrics.ragged import F64, RaggedBatch


@dataclass(frozen=True)
class DumpSpec:
    """Where a dump is and how to read it."""

    paths: Sequence[str | Path]
    columns: ColumnNames = field(default_factory=ColumnNames)
    drop_nonfinite: bool = False
    selection: StepSelection = field(default_factory=StepSelection)

    def reader(self, row_details: bool = False) -> DumpReader:
        """A streaming reader; ``row_details`` also reads each row's uid and position."""
        return DumpReader(
            self.paths,
            self.columns,
            drop_nonfinite=self.drop_nonfinite,
            selection=self.selection,
            row_details=row_details,
        )


Progress = Callable[[int, int], None]
"""Called as ``progress(rows_read, total_rows)`` after each batch."""


@dataclass(frozen=True)
class BootstrapRequest:
    """K Poisson-bootstrap replicates with a seed and a stream (baseline 0, check 1)."""

    replicates: int
    seed: int
    stream: int


@dataclass(frozen=True)
class Request:
    """What one pass computes besides the analysis.

    Args:
        options: the analysis options (dialect, veto threshold).
        configs: configurations whose every verl metric is wanted (presets, ``--config`` files).
        summary_only: configurations wanted for rcdiag's summary figures only (sweep points).
        profile_top_k: collect the mismatch profile, listing this many worst sequences.
        bootstrap: draw bootstrap replicates of every overall metric.
        frameworks: other frameworks whose logged metrics are wanted (docs/frameworks.md).
    """

    options: AnalyzeOptions = field(default_factory=AnalyzeOptions)
    configs: Sequence[NamedConfig] = ()
    summary_only: Sequence[NamedConfig] = ()
    profile_top_k: int | None = None
    bootstrap: BootstrapRequest | None = None
    frameworks: Sequence[Framework] = ()


@dataclass
class Pass:
    """The consumers of one finished pass, ready for the result documents."""

    dump: DumpSpec
    reader: DumpReader
    analysis: OffPolicyAnalysis
    comparison: PresetComparison | None
    profile: MismatchProfile | None
    bootstrap: PoissonBootstrap | None
    frameworks: FrameworkMetrics | None = None

    def replicates(self) -> dict[str, F64] | None:
        """K replicates of every overall metric, when the pass drew them."""
        if self.bootstrap is None:
            return None
        return self.bootstrap.replicate_metrics(self.analysis.options.legacy_veto)


def stream(
    dump: DumpSpec,
    consume: Callable[[RaggedBatch], None],
    progress: Progress | None,
    row_details: bool = False,
) -> DumpReader:
    """Read the dump once, handing every batch to ``consume``; returns the exhausted reader."""
    reader = dump.reader(row_details)
    total = reader.total_rows
    for batch in prefetch(reader.batches()):
        consume(batch)
        if progress is not None:
            progress(reader.rows_read, total)
    return reader


def run(dump: DumpSpec, request: Request | None = None, progress: Progress | None = None) -> Pass:
    """Read ``dump`` once for the analysis and every consumer ``request`` asks for.

    Raises:
        InputError: unreadable input (the reader's errors, naming file, row, step and column).
    """
    request = request or Request()
    options = request.options
    analysis = OffPolicyAnalysis(options)
    comparison = None
    if request.configs or request.summary_only:
        comparison = PresetComparison(request.configs, request.summary_only, base=analysis.stats)
    profile = None if request.profile_top_k is None else MismatchProfile(request.profile_top_k)
    boot = None
    if request.bootstrap is not None:
        b = request.bootstrap
        boot = PoissonBootstrap(b.replicates, b.seed, b.stream, options.effective_veto_threshold)

    frameworks = None
    if request.frameworks:
        frameworks = FrameworkMetrics(request.frameworks, analysis.stats)

    def consume(batch: RaggedBatch) -> None:
        row_stats = analysis.update(batch)
        if boot is not None and row_stats is not None:
            boot.add(row_stats)
        view = TokenView(batch) if comparison is not None or frameworks is not None else None
        if comparison is not None:
            comparison.update(batch, view)
        if frameworks is not None:
            frameworks.update(batch, view)
        if profile is not None:
            profile.update(batch, row_stats)

    reader = stream(dump, consume, progress, row_details=profile is not None)
    return Pass(dump, reader, analysis, comparison, profile, boot, frameworks)
