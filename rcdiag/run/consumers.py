"""What one pass over a dump computes: every consumer that a command asks for.

Every command reads the dump exactly once (:func:`rcdiag.run.engine.run`): the analysis always (the per-row
statistics, the ℓ sketch, the diagnosis evidence), and as requested the preset comparison (verl's
metrics per configuration, sweep points for their summary only), the mismatch profile and the
Poisson bootstrap. What the consumers share is computed once per batch: the masked log ratio (cached
on the batch) and the per-row statistics (the analysis's, handed to the bootstrap and used as the
comparison's base); the analysis's ℓ sketch also gives the profile its histogram of token ℓ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rcdiag.io.reader import DumpReader
from rcdiag.metrics.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.metrics.ragged import F64, RaggedBatch
from rcdiag.run.dump import DumpSpec

if TYPE_CHECKING:  # imported by the consumers a request asks for: analyze needs none of them
    from rcdiag.correction.compare import NamedConfig, PresetComparison
    from rcdiag.frameworks.analysis import FrameworkMetrics
    from rcdiag.frameworks.base import Framework
    from rcdiag.metrics.bootstrap import PoissonBootstrap
    from rcdiag.metrics.profile import MismatchProfile


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

    @property
    def other_frameworks(self) -> bool:
        """Whether the pass computes other frameworks' metrics or correction modes."""
        if self.frameworks:
            return True
        if not (self.configs or self.summary_only):
            return False
        from rcdiag.correction.modes import ExternalPlan

        return any(isinstance(c.plan, ExternalPlan) for c in (*self.configs, *self.summary_only))

    @property
    def analysis_only(self) -> bool:
        """Whether the pass computes the analysis alone (``analyze``)."""
        return not (
            self.configs
            or self.summary_only
            or self.profile_top_k is not None
            or self.bootstrap is not None
            or self.frameworks
        )


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
            from rcdiag.correction.compare import PresetComparison

            comparison = PresetComparison(
                request.configs, request.summary_only, base=analysis.stats
            )
        top_k = request.profile_top_k
        profile = None
        if top_k is not None:
            from rcdiag.metrics.profile import MismatchProfile

            profile = MismatchProfile(top_k, log_ratios=analysis.sketch)
        boot = None
        if request.bootstrap is not None:
            from rcdiag.metrics.bootstrap import PoissonBootstrap

            b = request.bootstrap
            veto = options.effective_veto_threshold
            boot = PoissonBootstrap(b.replicates, b.seed, b.stream, veto)
        frameworks = None
        if request.frameworks:
            from rcdiag.frameworks.analysis import FrameworkMetrics

            frameworks = FrameworkMetrics(request.frameworks, analysis.stats)
        return cls(analysis, comparison, profile, boot, frameworks)

    def update(self, batch: RaggedBatch) -> None:
        """Fold one batch into every consumer; the per-row statistics are computed once."""
        row_stats = self.analysis.update(batch)
        if self.bootstrap is not None and row_stats is not None:
            self.bootstrap.add(row_stats, batch.stream_rows)
        shared = self.comparison is not None or self.frameworks is not None
        view = None
        if shared:
            from rcdiag.correction.view import TokenView

            view = TokenView(batch, row_stats)  # what both compute from the batch, once
        if self.comparison is not None:
            self.comparison.update(batch, view)
        if self.frameworks is not None:
            self.frameworks.update(batch, view)
        del view  # its token arrays are not held while the profile makes its own
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
