"""``rcdiag analyze``'s terminal view: the source line, the diagnosis, the overall metrics with
their statuses and bands, the per-step table, other frameworks' metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from rcdiag.commands._common import stdout
from rcdiag.commands._layout import (
    COLUMN_GAP,
    Col,
    TitledTable,
    fitted_tables,
    header_line,
    needed_width,
    new_table,
    part_title,
)
from rcdiag.commands._terminal import (
    CHI2_METRICS,
    band_words,
    chi2_note,
    plural,
    show_diagnosis,
    source_counts,
    status_text,
)
from rcdiag.formatting import fmt
from rcdiag.metrics.records import STEP_COLUMNS, worst_status
from rcdiag.model import AnalysisResult, StepResult
from rcdiag.model.frameworks import FrameworkResult
from rcdiag.status import worst

STEP_TABLE_ROWS = 40
"""Up to this many steps are listed one per row; beyond it, consecutive steps are grouped."""


def show(result: AnalysisResult) -> None:
    """The terminal view: source line, diagnosis, overall metrics with statuses, per-step table."""
    source = result.source
    stdout.print(
        header_line(
            stdout,
            "rcdiag analyze",
            [
                f"dialect {result.dialect}",
                *source_counts(source.rows, source.valid_tokens, source.steps),
                plural(len(source.paths), "file"),
            ],
        )
    )
    show_diagnosis(result.diagnosis)
    judged = {c.metric: c for c in result.checks}
    columns = [Col("metric"), Col("value", "right"), Col("status"), Col("bands", wrap=True)]
    rows = [
        [
            name,
            fmt(value),
            status_text(judged[name].status) if name in judged else "",
            band_words(name) if name in judged else "",
        ]
        for name, value in result.overall.items()
    ]
    for table in overall_tables(columns, rows):
        stdout.print(table)
    for part in step_table(result.step_results):
        stdout.print(part)
    if result.frameworks:
        show_frameworks(result.frameworks)
    chi2 = [result.overall.get(name) for name in CHI2_METRICS]
    chi2 += [s.metrics.get(name) for s in result.step_results for name in CHI2_METRICS]
    chi2_note(chi2)


def overall_tables(columns: list[Col], rows: list[list[Any]]) -> list[TitledTable]:
    """The overall metrics with their status and bands: one table when the bands fit beside the
    values (one band per line if need be), else two, the second holding the bands of the judged
    metrics only (a long metric name, such as the legacy dialect's
    ``rollout_corr/rollout_is_catastrophic_token_fraction``, leaves no room at 80 columns)."""
    title = "Overall (whole dump as one batch)"
    bands = [band for row in rows for band in row[3].split(", ") if band]
    room = stdout.width - needed_width(stdout, columns[:3], [r[:3] for r in rows]) - COLUMN_GAP
    if room >= max(map(len, bands), default=0):
        table = new_table(title, columns)
        for row in rows:
            words = row[3] if len(row[3]) <= room else row[3].replace(", ", "\n")
            table.add_row(*row[:3], Text(words, style="dim"))
        return [table]
    values = new_table(part_title(title, 1, 2), columns[:3])
    for row in rows:
        values.add_row(*row[:3])
    judged = [row for row in rows if row[3]]
    key = [[row[0]] for row in judged]
    room = stdout.width - needed_width(stdout, columns[:1], key) - COLUMN_GAP
    limits = new_table(part_title(title, 2, 2), [columns[0], columns[3]])
    for row in judged:
        words = row[3] if len(row[3]) <= room else row[3].replace(", ", "\n")
        limits.add_row(row[0], Text(words, style="dim"))
    return [values, limits]


def step_table(steps: Sequence[StepResult]) -> list[TitledTable]:
    """One row per step, or per range of consecutive steps (means; worst status) when many; split
    into parts that repeat the step when the columns do not fit the width."""
    group = max(1, math.ceil(len(steps) / STEP_TABLE_ROWS))
    title = "Per step" if group == 1 else f"Per step (groups of {group} steps: means, worst status)"
    rows = []
    for start in range(0, len(steps), group):
        chunk = steps[start : start + group]
        label = str(chunk[0].step) if len(chunk) == 1 else f"{chunk[0].step}–{chunk[-1].step}"
        values = []
        for column in STEP_COLUMNS:
            present = [v for s in chunk if (v := s.metrics.get(column.name)) is not None]
            values.append(fmt(sum(present) / len(present)) if present else "–")
        statuses = [worst_status(s.metrics) for s in chunk]
        status = worst(statuses) if any(s.valid_tokens for s in chunk) else "empty"
        rows.append(
            [
                label,
                status_text(status),
                *values,
                f"{sum(s.rows for s in chunk):,}",
                f"{sum(s.valid_tokens for s in chunk):,}",
            ]
        )
    columns = [
        Col("status"),
        *(Col(column.header, "right") for column in STEP_COLUMNS),
        Col("rows", "right"),
        Col("valid tok", "right"),
    ]
    return fitted_tables(stdout, title, [Col("step", "right")], columns, rows)


def gate_text(status: str) -> str:
    """Another framework's CI gate as what it is: ``breached`` or ``within``, not rcdiag's status."""
    return "[bold red]breached[/]" if status != "healthy" else "[green]within[/]"


def show_frameworks(results: Sequence[FrameworkResult]) -> None:
    """Each framework's metrics over the whole dump under its own names, with the status of the
    ones the framework gates in its CI."""
    rows = []
    for result in results:
        judged = {c.metric: c for c in result.checks}
        for name, value in result.overall.items():
            check = judged.get(name)
            rows.append(
                [
                    result.title,
                    name.split("/", 1)[1],
                    fmt(value),
                    gate_text(check.status) if check else "",
                ]
            )
    for table in fitted_tables(
        stdout,
        "Other frameworks' metrics (overall; per step in --json)",
        [Col("framework"), Col("metric")],
        [Col("value", "right"), Col("CI gate")],
        rows,
    ):
        stdout.print(table)
    for result in results:
        if result.aggregation:
            stdout.print(Text(f"{result.title}: {result.aggregation}.", style="dim"))
    gates = [c for r in results for c in r.checks]
    if gates:
        lines = [f"{c.metric}: {c.band or 'within its gate'}" for c in gates if c.band]
        if lines:
            stdout.print(
                Text("Breached: " + "; ".join(lines) + " (docs/frameworks.md).", style="dim")
            )
