"""Renderings of a check result (:func:`~rcdiag.checks.evaluate.check_document`): JUnit XML and
Markdown. Pure: they return text; the command writes it.

JUnit follows the schema Jenkins, GitLab and the GitHub test-report actions read (Jenkins xunit
``junit-10.xsd``): ``<testsuites>`` holding one ``<testsuite name="rcdiag check">`` with one
``<testcase>`` per rule. A failed fail-severity rule has a ``<failure>``; a rule without a value has a
``<skipped>``; a failed warn-severity rule passes (it does not fail the run) and says so in its
``<system-out>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from rcdiag.formatting import fmt

SUITE_NAME = "rcdiag check"
CLASSNAME = "rcdiag.check"
STATUS_TEXT = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skipped": "SKIP"}


def _source_line(document: Mapping[str, Any]) -> str:
    source = document["source"]
    line = (
        f"dialect {document['dialect']} · {source['rows']:,} rows · "
        f"{source['valid_tokens']:,} valid tokens · {source['steps']} steps"
    )
    baseline = document.get("baseline")
    if baseline is not None:
        line += f" · baseline {baseline['path']} ({baseline['created']})"
    return line


def verdict_line(document: Mapping[str, Any]) -> str:
    """``PASSED: 7 rules · 6 pass · 1 warn · 0 fail · 0 skipped``."""
    counts = document["counts"]
    total = sum(counts.values())
    word = "PASSED" if document["passed"] else "FAILED"
    return (
        f"{word}: {total} rules · {counts['pass']} pass · {counts['fail']} fail · "
        f"{counts['warn']} warn · {counts['skipped']} skipped"
    )


def failure_message(rule: Mapping[str, Any]) -> str:
    """One line: the value, the limit it violates, and why."""
    message = f"{rule['name']}: value {fmt(rule['value'])} violates {rule['limit']}"
    if rule["detail"]:
        message += f" ({rule['detail']})"
    if rule["why"]:
        message += f" — {rule['why']}"
    return message


def junit_xml(document: Mapping[str, Any], timestamp: str) -> str:
    """JUnit XML of a check result: one test case per rule.

    Args:
        document: :func:`~rcdiag.checks.evaluate.check_document`.
        timestamp: ISO 8601 time of the run (``2026-01-31T12:00:00``).

    Example:
        >>> doc = {"dialect": "latest", "rcdiag_version": "0", "counts": {"pass": 1, "fail": 0,
        ...     "warn": 0, "skipped": 0}, "source": {"paths": ["d.parquet"]}, "baseline": None,
        ...     "rules": [{"name": "k3 < 1e-3", "status": "pass", "value": 1e-4, "limit": "< 0.001",
        ...     "detail": "", "why": "", "step": None}]}
        >>> ET.fromstring(junit_xml(doc, "2026-01-01T00:00:00")).find("testsuite/testcase").get("name")
        'k3 < 1e-3'
    """
    counts = document["counts"]
    total = str(sum(counts.values()))
    failures = str(counts["fail"])
    suites = ET.Element(
        "testsuites",
        {"name": "rcdiag", "tests": total, "failures": failures, "errors": "0", "time": "0"},
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": SUITE_NAME,
            "tests": total,
            "failures": failures,
            "errors": "0",
            "skipped": str(counts["skipped"]),
            "time": "0",
            "timestamp": timestamp,
        },
    )
    properties = ET.SubElement(suite, "properties")
    facts = {
        "rcdiag_version": document["rcdiag_version"],
        "dialect": document["dialect"],
        "source": ", ".join(document["source"]["paths"]),
    }
    if document.get("baseline"):
        facts["baseline"] = str(document["baseline"]["path"])
    for name, value in facts.items():
        ET.SubElement(properties, "property", {"name": name, "value": str(value)})
    for rule in document["rules"]:
        case = ET.SubElement(
            suite, "testcase", {"name": rule["name"], "classname": CLASSNAME, "time": "0"}
        )
        status = rule["status"]
        if status == "fail":
            failure = ET.SubElement(
                case, "failure", {"message": failure_message(rule), "type": "threshold"}
            )
            failure.text = f"value {fmt(rule['value'])}, allowed {rule['limit']}"
        elif status == "skipped":
            ET.SubElement(case, "skipped", {"message": rule["detail"] or "no value"})
        out = ET.SubElement(case, "system-out")
        out.text = (
            f"{STATUS_TEXT[status]}: value {fmt(rule['value'])}, allowed {rule['limit']}"
            + (f"; {rule['detail']}" if rule["detail"] else "")
            + (" (warn severity: does not fail the run)" if status == "warn" else "")
        )
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(document: Mapping[str, Any]) -> str:
    """A Markdown summary: verdict, source, and a table of every rule (for CI step summaries)."""
    lines = [
        f"### rcdiag check: {verdict_line(document)}",
        "",
        _source_line(document),
        "",
        "| status | rule | value | allowed | detail |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rule in document["rules"]:
        lines.append(
            "| "
            + " | ".join(
                [
                    STATUS_TEXT[rule["status"]],
                    f"`{_cell(rule['name'])}`",
                    fmt(rule["value"]),
                    _cell(rule["limit"]),
                    _cell(rule["detail"]),
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"
