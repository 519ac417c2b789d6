"""One pass over a dump for every consumer that a command asks for.

Every command reads the dump exactly once through :func:`run`: the analysis always (the per-row
statistics, the ℓ sketch, the diagnosis evidence), and as requested the preset comparison (verl's
metrics per configuration, sweep points for their summary only), the mismatch profile and the
Poisson bootstrap. What the consumers share is computed once per batch: the masked log ratio (cached
on the batch) and the per-row statistics (the analysis's, handed to the bootstrap and used as the
comparison's base).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rcdiag.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.checks.bootstrap import PoissonBootstrap
from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.view import TokenView
from rcdiag.errors import UsageError
from rcdiag.frameworks.analysis import FrameworkMetrics
from rcdiag.frameworks.base import Framework
from rcdiag.io.files import ColumnNames, StepSelection
from rcdiag.io.native import InputFormat
from rcdiag.io.reader import DumpReader, prefetch
from rcdiag.metrics.profile import MismatchProfile
from rcdiag.metrics.ragged import F64, RaggedBatch

ENGINES = ("local", "ray")
"""Where a pass runs: this process (``local``) or a Ray cluster (``ray``, docs/scale.md)."""


@dataclass(frozen=True)
class DumpSpec:
    """Where a dump is and how to read it.

    Args:
        engine: ``local`` (this process) or ``ray`` (the files spread over a Ray cluster).
        ray_address: the cluster for ``ray`` (None: ``RAY_ADDRESS``, else a local Ray).
    """

    paths: Sequence[str | Path]
    columns: ColumnNames = field(default_factory=ColumnNames)
    drop_nonfinite: bool = False
    selection: StepSelection = field(default_factory=StepSelection)
    engine: str = "local"
    ray_address: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the file system of remote paths (:mod:`rcdiag.io.remote`)."""
    input_format: InputFormat = field(default_factory=InputFormat)
    """The files' format (``--format``) and whether pickles may be read (``--trust-pickle``)."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise UsageError(f"--engine {self.engine!r}: expected one of {', '.join(ENGINES)}")

    def reader(
        self,
        row_details: bool = False,
        paths: Sequence[str | Path] | None = None,
        stream_offset: int = 0,
    ) -> DumpReader:
        """A streaming reader; ``row_details`` also reads each row's uid and position. ``paths``
        and ``stream_offset``: a part of the dump (its files, and the rows before them)."""
        return DumpReader(
            self.paths if paths is None else paths,
            self.columns,
            drop_nonfinite=self.drop_nonfinite,
            selection=self.selection,
            row_details=row_details,
            stream_offset=stream_offset,
            storage_options=self.storage_options,
            input_format=self.input_format,
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
class Consumers:
    """What one pass computes, apart from the reader: mergeable, so that parts of a dump read
    apart (by workers) combine into the result of one pass (docs/scale.md)."""

    analysis: OffPolicyAnalysis
    comparison: PresetComparison | None
    profile: MismatchProfile | None
    bootstrap: PoissonBootstrap | None
    frameworks: FrameworkMetrics | None = None

    @classmethod
    def for_request(cls, request: Request) -> Consumers:
        options = request.options
        analysis = OffPolicyAnalysis(options)
        comparison = None
        if request.configs or request.summary_only:
            comparison = PresetComparison(
                request.configs, request.summary_only, base=analysis.stats
            )
        top_k = request.profile_top_k
        profile = None if top_k is None else MismatchProfile(top_k)
        boot = None
        if request.bootstrap is not None:
            b = request.bootstrap
            veto = options.effective_veto_threshold
            boot = PoissonBootstrap(b.replicates, b.seed, b.stream, veto)
        frameworks = None
        if request.frameworks:
            frameworks = FrameworkMetrics(request.frameworks, analysis.stats)
        return cls(analysis, comparison, profile, boot, frameworks)

    def update(self, batch: RaggedBatch) -> None:
        """Fold one batch into every consumer; the per-row statistics are computed once."""
        row_stats = self.analysis.update(batch)
        if self.bootstrap is not None and row_stats is not None:
            self.bootstrap.add(row_stats, batch.stream_rows)
        shared = self.comparison is not None or self.frameworks is not None
        view = TokenView(batch) if shared else None  # what both compute from the batch, once
        if self.comparison is not None:
            self.comparison.update(batch, view)
        if self.frameworks is not None:
            self.frameworks.update(batch, view)
        if self.profile is not None:
            self.profile.update(batch, row_stats)

    def finish(self, dump: DumpSpec, reader: DumpReader) -> Pass:
        """The finished pass over ``dump`` (read by ``reader``)."""
        return Pass(
            dump,
            reader,
            self.analysis,
            self.comparison,
            self.profile,
            self.bootstrap,
            self.frameworks,
        )

    def merge(self, other: Consumers) -> None:
        """Fold in the consumers of other rows of the same dump, with the same request."""
        self.analysis.merge(other.analysis)  # also the comparison's shared base
        if self.comparison is not None and other.comparison is not None:
            self.comparison.merge(other.comparison)
        if self.profile is not None and other.profile is not None:
            self.profile.merge(other.profile)
        if self.bootstrap is not None and other.bootstrap is not None:
            self.bootstrap.merge(other.bootstrap)
        if self.frameworks is not None and other.frameworks is not None:
            self.frameworks.merge(other.frameworks)


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
    """Read ``dump`` once for the analysis and every consumer ``request`` asks for, here or on a
    Ray cluster (``dump.engine``).

    Raises:
        InputError: unreadable input (the reader's errors, naming file, row, step and column).
    """
    request = request or Request()
    if dump.engine == "ray":
        from rcdiag.ray_engine import run_on_ray

        return run_on_ray(dump, request, progress)
    consumers = Consumers.for_request(request)
    reader = stream(dump, consumers.update, progress, row_details=consumers.profile is not None)
    return consumers.finish(dump, reader)
