"""User strings (rule names, paths, uids) reach Markdown, JUnit XML, HTML and the terminal as text:
they cannot add markup, break the document's structure or spill over lines."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from rcdiag.cli import app
from rcdiag.io.paths import printable
from tests.dumps import simple_columns, write_table

runner = CliRunner()

HOSTILE_NAMES = [
    "x` <img src=x onerror=alert(1)> `",
    "``two`` ticks",
    "`",
    "a|b",
    "![i](http://e.example/x.png)",
    "<script>alert(1)</script>",
    "**bold** _it_ [link](http://e.example) ~~s~~",
    "$\\sqrt{x}$ &amp; &#60;b&#62;",
    "line\nbreak\r\x1b[31m\x00\x07",
    "tab\there ' \"",
    "lone \udcff surrogate",
]


def rules_file(tmp_path: Path) -> Path:
    """One [[rule]] per hostile name: half pass, half fail."""
    lines = []
    for i, name in enumerate(HOSTILE_NAMES):
        limit = 1 if i % 2 else 1e-12
        quoted = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        escaped = quoted.replace("\\", "\\\\").replace('"', '\\"')
        escaped = "".join(c if c >= " " or c == "\t" else f"\\u{ord(c):04x}" for c in escaped)
        lines += [
            "[[rule]]",
            f'name = "{escaped}"',
            f'expr = "rollout_corr/k3_kl.overall < {limit}"',
        ]
    path = tmp_path / "rules.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def hostile_dump(tmp_path: Path) -> Path:
    """A dump whose path holds markup and control characters."""
    return write_table(tmp_path / "a<b>`|![x](y)" / "d\x1b[1m.parquet", simple_columns(step=0))


@pytest.fixture
def check_outputs(tmp_path: Path, hostile_dump: Path) -> dict[str, str]:
    md, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    result = runner.invoke(
        app,
        [
            "check", str(hostile_dump), "--rules", str(rules_file(tmp_path)),
            "--markdown", str(md), "--junit", str(junit), "-q",
        ],
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    return {"markdown": md.read_text(), "junit": junit.read_text()}


def names_in_document() -> list[str]:
    """The names as the rules file gives them back (TOML has no lone surrogates)."""
    return [n.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for n in HOSTILE_NAMES]


def test_markdown_summary_renders_every_name_as_code_and_adds_no_markup(
    check_outputs: dict[str, str],
) -> None:
    text = check_outputs["markdown"]
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)
    for tag in ("<img", "<script", "<a ", "<strong", "<em", "<s>", "<del"):
        assert tag not in html, tag
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]
    assert len(rows) == len(HOSTILE_NAMES)
    for row, name in zip(rows, names_in_document(), strict=True):
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)
        assert len(cells) == 5, row
        shown = printable(name).replace("&", "&amp;").replace("<", "&lt;")
        shown = shown.replace(">", "&gt;").replace('"', "&quot;")
        assert cells[1] == f"<code>{shown}</code>", (cells[1], name)
    assert len(text.splitlines()) == 6 + len(HOSTILE_NAMES), "one line per rule"
    assert not any(c in text for c in "\x1b\x00\x07\r")


def test_markdown_of_the_source_line_escapes_the_baseline_path(tmp_path: Path) -> None:
    from rcdiag.checks.outputs import markdown

    document = {
        "dialect": "latest",
        "counts": {"pass": 0, "fail": 0, "warn": 0, "skipped": 0},
        "passed": True,
        "source": {"rows": 1, "valid_tokens": 1, "steps": 1},
        "baseline": {"path": "<img src=x onerror=alert(1)>|*b*", "created": "[c](http://x)"},
        "rules": [],
    }
    html = MarkdownIt("commonmark").enable("table").render(markdown(document))
    assert "<img" not in html and "<em>" not in html and "<a " not in html
    assert "&lt;img src=x onerror=alert(1)&gt;|*b*" in html and "[c](http://x)" in html


def test_junit_parses_whatever_the_names(check_outputs: dict[str, str], hostile_dump: Path) -> None:
    root = ET.fromstring(check_outputs["junit"])
    cases = root.findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == [
        re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]", lambda m: repr(m[0])[1:-1], n)
        for n in names_in_document()
    ]
    assert [c.find("failure") is not None for c in cases] == [i % 2 == 0 for i in range(len(cases))]
    source = root.find("testsuite/properties/property[@name='source']")
    assert source is not None and source.get("value") == str(hostile_dump).replace("\x1b", "\\x1b")


def test_junit_of_a_name_with_every_forbidden_character() -> None:
    from rcdiag.checks.outputs import junit_xml

    name = "".join(chr(c) for c in range(32)) + "\ud800\udfff\ufffe<&>\"'"
    rule = {"name": name, "status": "fail", "value": 2.0, "limit": "< 1", "detail": name}
    rule["why"] = name
    document = {
        "dialect": "latest",
        "rcdiag_version": "0",
        "counts": {"pass": 0, "fail": 1, "warn": 0, "skipped": 0},
        "source": {"paths": [name]},
        "baseline": {"path": name},
        "rules": [rule],
    }
    case = ET.fromstring(junit_xml(document, "2026-01-01T00:00:00")).find("testsuite/testcase")
    assert case is not None
    assert case.get("name", "").endswith("\\ud800\\udfff\\ufffe<&>\"'")
    assert all(c in case.get("name", "") for c in "\t\n\r") and "\\x1f" in case.get("name", "")


def test_html_report_escapes_paths_and_uids(tmp_path: Path) -> None:
    evil = "</script><img src=x onerror=alert(1)>"
    columns = simple_columns(4, step=0)
    columns["uid"] = pa.array([evil, "u&1", "<b>", "'\""])
    plain = write_table(tmp_path / "plain" / "d.parquet", columns)
    hostile = write_table(tmp_path / "a</script>" / "b<img src=x>" / "d.parquet", columns)
    pages = {}
    for name, dump in (("plain", plain), ("hostile", hostile)):
        out = tmp_path / f"{name}.html"
        result = runner.invoke(app, ["report", str(dump), "-o", str(out), "-q"])
        assert result.exit_code == 0, result.stderr
        pages[name] = out.read_text()
    page = pages["hostile"]
    for tag in ("<script", "</script", "<img"):
        assert page.count(tag) == pages["plain"].count(tag), tag
    assert "&lt;/script&gt;" in page or "\\u003c/script\\u003e" in page


def test_terminal_shows_user_strings_without_markup(tmp_path: Path) -> None:
    rules = tmp_path / "r.toml"
    rules.write_text(
        '[[rule]]\nname = "[bold]n[/bold] \\u001b[2J"\nexpr = "rollout_corr/k3_kl.overall < 1"\n'
    )
    dump = write_table(tmp_path / "[red]d[/red].parquet", simple_columns(step=0))
    result = runner.invoke(app, ["check", str(dump), "--rules", str(rules)])
    assert result.exit_code == 0, result.stderr
    assert "[bold]n[/bold] \\x1b[2J" in result.stdout and "\x1b" not in result.stdout
    result = runner.invoke(app, ["analyze", str(dump), "--json", str(tmp_path / "[b]o.json")])
    assert result.exit_code == 0
    assert "wrote " + str(tmp_path / "[b]o.json") in " ".join(result.stderr.split())


def test_a_file_name_that_is_not_utf8_is_read_and_shown(tmp_path: Path) -> None:
    plain = write_table(tmp_path / "plain.parquet", simple_columns(step=0))
    dump = Path(os.fsdecode(os.fsencode(tmp_path) + b"/d\xff.parquet"))
    os.rename(plain, dump)
    out = {k: tmp_path / f"out.{k}" for k in ("json", "html", "xml", "md")}
    for args in (
        ["analyze", dump, "--json", out["json"], "--html", out["html"]],
        ["check", dump, "--junit", out["xml"], "--markdown", out["md"]],
    ):
        result = runner.invoke(app, [str(a) for a in [*args, "-q"]])
        assert result.exit_code == 0, result.stderr
    assert json.loads(out["json"].read_text())["source"]["paths"] == [str(dump)]
    assert "d\\udcff.parquet" in out["html"].read_text(encoding="utf-8")
    source = ET.parse(out["xml"]).getroot().find("testsuite/properties/property[@name='source']")
    assert source is not None and source.get("value", "").endswith("d\\udcff.parquet")
