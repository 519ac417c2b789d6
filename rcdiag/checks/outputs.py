"""Renderings of a check result (:func:`~rcdiag.checks.evaluate.check_document`): JUnit XML and
Markdown. Pure: they return text; the command writes it.

JUnit follows the schema Jenkins, GitLab and the GitHub test-report actions read (Jenkins xunit
``junit-10.xsd``): ``<testsuites>`` holding one ``<testsuite name="rcdiag check">`` with one
``<testcase>`` per rule. A failed fail-severity rule has a ``<failure>``; a rule without a value has a
``<skipped>``; a failed warn-severity rule passes (it does not fail the run) and says so in its
``<system-out>``.

User strings (rule names, paths, the baseline's fields) cannot change either document's structure:
characters XML 1.0 forbids are written as Python escapes (``\\x1b``) and ElementTree escapes the
rest; in Markdown every character with inline meaning is backslash-escaped, and rule names are code
spans fenced by more backticks than they hold.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from rcdiag.formatting import fmt
from rcdiag.io.paths import printable

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


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: object) -> str:
    r"""``text`` without the characters XML 1.0 forbids (control characters, lone surrogates from
    undecodable file names): each is written as its Python escape.

    Example:
        >>> print(xml_text("rule\x1b\x00 <ok>"))
        rule\x1b\x00 <ok>
    """
    return _NOT_XML.sub(lambda m: repr(m[0])[1:-1], str(text))


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]!|~&$])")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def markdown_text(text: object) -> str:
    r"""``text`` as literal Markdown on one line: characters that are not printable are spelled as
    escapes; every character that could start emphasis, a link, an image, an entity, math, a code
    span or a table cell is backslash-escaped, and a ``<`` that could open raw HTML or an autolink
    is written ``&lt;`` (``<=`` stays as it is).

    Example:
        >>> print(markdown_text("![x](http://e/i.png) <b>|`a` <= 1"))
        \!\[x\](http://e/i.png) &lt;b>\|\`a\` <= 1
    """
    return _TAG_START.sub("&lt;", _MARKDOWN_SPECIAL.sub(r"\\\1", printable(str(text))))


def markdown_code_cell(text: object) -> str:
    r"""``text`` as a code span inside a Markdown table cell: fenced by one backtick more than its
    longest run of backticks (so it cannot close early), padded by a space (removed when
    rendered) when it starts or ends with a backtick or a space, with ``|`` escaped (GitHub
    splits cells before reading code spans).

    Example:
        >>> print(markdown_code_cell("k3 | x"), markdown_code_cell("`a` b"))
        `k3 \| x` `` `a` b ``
    """
    body = printable(str(text)).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    pad = " " if not body or body[0] in "` " or body[-1] in "` " else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def verdict_line(document: Mapping[str, Any]) -> str:
    """``PASSED: 7 rules · 6 pass · 0 fail · 1 warn · 0 skipped`` (``1 rule`` for one).

    Example:
        >>> verdict_line({"passed": True, "counts": {"pass": 1, "fail": 0, "warn": 0, "skipped": 0}})
        'PASSED: 1 rule · 1 pass · 0 fail · 0 warn · 0 skipped'
    """
    counts = document["counts"]
    total = sum(counts.values())
    word = "PASSED" if document["passed"] else "FAILED"
    return (
        f"{word}: {total} rule{'' if total == 1 else 's'} · {counts['pass']} pass · "
        f"{counts['fail']} fail · {counts['warn']} warn · {counts['skipped']} skipped"
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
        ET.SubElement(properties, "property", {"name": name, "value": xml_text(value)})
    for rule in document["rules"]:
        case = ET.SubElement(
            suite, "testcase", {"name": xml_text(rule["name"]), "classname": CLASSNAME, "time": "0"}
        )
        status = rule["status"]
        if status == "fail":
            failure = ET.SubElement(
                case, "failure", {"message": xml_text(failure_message(rule)), "type": "threshold"}
            )
            failure.text = xml_text(f"value {fmt(rule['value'])}, allowed {rule['limit']}")
        elif status == "skipped":
            ET.SubElement(case, "skipped", {"message": xml_text(rule["detail"] or "no value")})
        out = ET.SubElement(case, "system-out")
        out.text = xml_text(
            f"{STATUS_TEXT[status]}: value {fmt(rule['value'])}, allowed {rule['limit']}"
            + (f"; {rule['detail']}" if rule["detail"] else "")
            + (" (warn severity: does not fail the run)" if status == "warn" else "")
        )
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def markdown(document: Mapping[str, Any]) -> str:
    """A Markdown summary: verdict, source, and a table of every rule (for CI step summaries)."""
    lines = [
        f"### rcdiag check: {verdict_line(document)}",
        "",
        markdown_text(_source_line(document)),
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
                    markdown_code_cell(rule["name"]),
                    markdown_text(fmt(rule["value"])),
                    markdown_text(rule["limit"]),
                    markdown_text(rule["detail"]),
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"
