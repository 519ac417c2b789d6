"""Running an analysis over a dump and shaping its serializable result (contract §4).

The JSON document built here is the one thing the terminal view, the HTML report and CI checks read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rcdiag import __version__
from rcdiag.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.errors import InputError
from rcdiag.health import evaluate
from rcdiag.io.reader import ColumnNames, DumpReader, StepSelection, prefetch

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class DumpSpec:
    """Where a dump is and how to read it."""

    paths: Sequence[str | Path]
    columns: ColumnNames = field(default_factory=ColumnNames)
    drop_nonfinite: bool = False
    selection: StepSelection = field(default_factory=StepSelection)

    def reader(self) -> DumpReader:
        return DumpReader(
            self.paths,
            self.columns,
            drop_nonfinite=self.drop_nonfinite,
            selection=self.selection,
        )


Progress = Callable[[int, int], None]
"""Called as ``progress(rows_read, total_rows)`` after each batch."""


def analyze_dump(
    dump: DumpSpec, options: AnalyzeOptions, progress: Progress | None = None
) -> dict[str, Any]:
    """Read the dump once and return the ``rcdiag analyze`` JSON document (contract §4).

    Raises:
        InputError: unreadable input, or a dump (or step selection) without any valid token.
    """
    reader = dump.reader()
    analysis = OffPolicyAnalysis(options)
    total = reader.total_rows
    for batch in prefetch(reader.batches()):
        analysis.update(batch)
        if progress is not None:
            progress(reader.rows_read, total)
    where = ", ".join(str(f.path) for f in reader.files[:3]) + (
        ", …" if len(reader.files) > 3 else ""
    )
    totals = analysis.totals()
    selected = "" if dump.selection.is_everything else " in the selected steps"
    if totals["rows"] == 0:
        raise InputError(f"{where}: the dump holds no rows{selected}")
    if totals["valid_tokens"] == 0:
        raise InputError(
            f"{where}: no valid token{selected} (every response_mask position is 0); "
            "verl would raise 'response_mask must contain at least one valid token'"
        )
    overall = analysis.overall()
    steps = [analysis.step_result(s) for s in analysis.steps()]
    return {
        "schema_version": SCHEMA_VERSION,
        "rcdiag_version": __version__,
        "dialect": options.dialect,
        "source": {
            "paths": [str(f.path) for f in reader.files],
            "rows": int(totals["rows"]),
            "tokens": int(totals["positions"]),
            "valid_tokens": int(totals["valid_tokens"]),
            "steps": len(steps),
            "dropped_nonfinite": reader.dropped_nonfinite,
        },
        "options": {
            "veto_threshold": options.veto_threshold,
            "effective_veto_threshold": options.effective_veto_threshold,
            "selected_steps": None if dump.selection.is_everything else [s.step for s in steps],
        },
        "overall": overall,
        "steps": [
            {"step": s.step, "rows": s.rows, "valid_tokens": s.valid_tokens, "metrics": s.metrics}
            for s in steps
        ],
        "checks": evaluate(overall),
    }


def empty_steps(document: dict[str, Any]) -> list[int]:
    """Steps without any valid token (null metrics)."""
    return [s["step"] for s in document["steps"] if s["valid_tokens"] == 0]
