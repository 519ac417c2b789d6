"""The terminal view of ``rcdiag check``: the rules (result, severity, rule, value, detail), why
each failed or warned, and the verdict line."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from rcdiag.checks.evaluate import fmt
from rcdiag.checks.outputs import STATUS_TEXT, verdict_line
from rcdiag.commands._common import printable, stdout
from rcdiag.commands._layout import Col, hanging, header_line, new_table, paragraph
from rcdiag.commands._terminal import CHI2_METRICS, chi2_note, source_counts

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skipped": "dim"}
SEVERITY_NOTE = (
    "severity: a fail rule that does not hold fails the run (exit 1); a warn rule is reported only."
)


def rule_name(rule: dict[str, Any]) -> str:
    """The rule's name without the ``warn:`` / ``fail:`` of its grammar (the severity is shown
    in a column of its own).

    Example:
        >>> rule_name({"name": "warn: rcdiag/ess_seq.overall >= 0.5", "severity": "warn"})
        'rcdiag/ess_seq.overall >= 0.5'
    """
    name = str(rule["name"])
    prefix = f"{rule['severity']}:"
    return name[len(prefix) :].lstrip() if name.startswith(prefix) else name


def _rule_cell(rule: dict[str, Any]) -> Text:
    """The name (never cut), then what is allowed when the name does not say it, then the detail."""
    name = rule_name(rule)
    cell = Text(printable(name))
    limit = str(rule["limit"])
    if not str(rule["metric"]).startswith("diagnosis/") and limit not in name:
        cell.append(f"\nallowed: {printable(limit)}", style="dim")
    if rule["detail"]:
        cell.append("\n" + printable(str(rule["detail"])), style="dim")
    return cell


def show(document: dict[str, Any]) -> None:
    """A table of every rule, then why each failed or warned, then the verdict."""
    source = document["source"]
    parts = [
        f"dialect {document['dialect']}",
        *source_counts(source["rows"], source["valid_tokens"], source["steps"]),
    ]
    if document["baseline"] is not None:
        parts.append(f"baseline {printable(str(document['baseline']['path']))}")
    stdout.print(header_line(stdout, "rcdiag check", parts))
    table = new_table(
        "Rules",
        [Col("result"), Col("severity"), Col("rule", wrap=True), Col("value", "right")],
    )
    for rule in document["rules"]:
        status = rule["status"]
        table.add_row(
            Text(STATUS_TEXT[status], style=STYLE[status]),
            rule["severity"],
            _rule_cell(rule),
            fmt(rule["value"]),
        )
    stdout.print(table)
    stdout.print(paragraph(SEVERITY_NOTE, style="dim"))
    chi2_note(r["value"] for r in document["rules"] if r["metric"] in CHI2_METRICS)
    why = [
        (
            Text(STATUS_TEXT[rule["status"]], style=STYLE[rule["status"]]),
            Text(f"{printable(rule_name(rule))}: {printable(str(rule['why']))}"),
        )
        for rule in document["rules"]
        if rule["status"] in ("fail", "warn") and rule["why"]
    ]
    if why:
        stdout.print(hanging(why, indent=0))
    style = "bold green" if document["passed"] else "bold red"
    stdout.print(Text(verdict_line(document), style=style))
