"""Results in a notebook: a short repr, an escaped self-contained HTML card and Markdown for every
result type, a clean ``dir(rcdiag)``, errors in Python's words, and a notebook executed end to end."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import rcdiag
from rcdiag.errors import UsageError
from rcdiag.model import (
    AnalysisResult,
    Baseline,
    CheckResult,
    ComparisonResult,
    Recommendation,
    ReportDocument,
)
from rcdiag.synth import config_for, write_synthetic_dump

HOSTILE = 'run <script>alert("x")</script> & *bold* | `tick`'
"""A directory name a card must escape in HTML and in Markdown."""
PRESETS = ["decoupled_token_is", "decoupled_geo_rs"]

pytestmark = pytest.mark.xdist_group("notebook")


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nb") / HOSTILE
    config = config_for("drift", steps=4, rows_per_step=24, mean_length=40)
    write_synthetic_dump(root, config, shards=True)
    return root


@pytest.fixture(scope="module")
def results(dump: Path) -> dict[str, Any]:
    document = rcdiag.report(dump, translate="trl")
    return {
        "analysis": rcdiag.analyze(dump),
        "comparison": rcdiag.compare_presets(dump, presets=PRESETS),
        "report": document,
        "recommendation": document.recommendation,
        "check": rcdiag.check(dump, rules=["rollout_corr/k3_kl.overall < 1e-9"]),
        "baseline": rcdiag.baseline(dump, replicates=10),
    }


KINDS = {
    "analysis": AnalysisResult,
    "comparison": ComparisonResult,
    "report": ReportDocument,
    "recommendation": Recommendation,
    "check": CheckResult,
    "baseline": Baseline,
}


class _Tags(HTMLParser):
    """Every start tag and attribute of a page, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(page: str) -> _Tags:
    tags = _Tags()
    tags.feed(page)
    tags.close()
    return tags


@pytest.mark.parametrize("name", list(KINDS))
def test_repr_is_short_and_says_what_it_is(results: dict[str, Any], name: str) -> None:
    result = results[name]
    assert isinstance(result, KINDS[name])
    text = repr(result)
    assert len(text) < 1000
    assert text.startswith(f"<{KINDS[name].__name__} ") and text.endswith(">")
    assert "\n" not in text
    if name in ("analysis", "comparison", "report", "check"):
        assert re.search(r"verdict (healthy|watch|act)", text), text
    if name in ("analysis", "comparison", "report", "baseline"):
        assert "4 steps, 96 rows" in text
    if name == "check":
        assert text.startswith("<CheckResult failed · 1 rules: 1 fail")


@pytest.mark.parametrize("name", list(KINDS))
def test_html_card_is_self_contained_and_escaped(results: dict[str, Any], name: str) -> None:
    result = results[name]
    page = result._repr_html_()
    tags = parsed(page)
    names = [tag for tag, _ in tags.tags]
    assert names[0] == "div" and "script" not in names and "link" not in names
    assert "iframe" not in names and "img" not in names
    for _, attrs in tags.tags:
        for key, value in attrs.items():
            assert not key.startswith("on"), key
            assert "http" not in (value or ""), (key, value)
    assert "<script>alert" not in page
    text = "".join(tags.text)
    if name != "recommendation":  # the advice holds no source
        assert HOSTILE in text  # shown as text, escaped in the markup
    words = re.search(r"(Healthy|Watch|Act|No verdict)", text)
    assert words is not None
    if name in ("analysis", "report", "check"):
        assert names.count("svg") >= 2  # the per-step curves
        assert "Key metrics" in text
    if name in ("comparison", "report"):
        assert "decoupled_token_is" in text
    if name in ("report", "recommendation"):
        assert "Recommended" in text and "TRL" in text


@pytest.mark.parametrize("name", list(KINDS))
def test_markdown_escapes_the_users_strings(results: dict[str, Any], name: str) -> None:
    text = results[name]._repr_markdown_()
    assert text.endswith("\n") and "<script>" not in text
    if name != "recommendation":
        assert r"\<script\>alert" in text and r"\*bold\*" in text and r"\|" in text


def test_a_gauge_sits_where_its_value_is(results: dict[str, Any]) -> None:
    document: ReportDocument = results["report"]
    assert document.verdict is not None and document.verdict.deciding
    page = document._repr_html_()
    pins = re.findall(r'class="pin" style="left:([0-9.]+)%"', page)
    assert len(pins) == len(document.verdict.deciding)
    assert all(0.0 <= float(p) <= 100.0 for p in pins)


def test_a_sparkline_draws_each_value_and_leaves_gaps() -> None:
    from rcdiag.report.cards import Trend
    from rcdiag.report.notebook import SPARK_HEIGHT, SPARK_WIDTH, sparkline

    svg = sparkline(Trend("k3 <KL>", (10, 11, 12, 13), (1.0, 3.0, None, 2.0), False))
    runs = re.findall(r'points="([^"]*)"', svg)
    assert len(runs) == 2 and "k3 &lt;KL&gt;" in svg
    first = [tuple(map(float, p.split(","))) for p in runs[0].split()]
    last = [tuple(map(float, p.split(","))) for p in runs[1].split()]
    # x: steps 10 … 13 across the width; y: the lowest value at the bottom, the highest at the top
    assert first[0] == (2.0, SPARK_HEIGHT - 2) and first[1][1] == 2.0
    assert last[0][0] == pytest.approx(SPARK_WIDTH - 2)
    assert last[0][1] == pytest.approx(SPARK_HEIGHT / 2)


def test_a_result_read_back_repr_and_html(results: dict[str, Any]) -> None:
    analysis: AnalysisResult = results["analysis"]
    again = AnalysisResult.from_json(analysis.to_json(), source="x.json")
    assert repr(again) == repr(analysis)
    assert again._repr_html_() == analysis._repr_html_()


def test_dir_is_clean() -> None:
    names = dir(rcdiag)
    assert names == sorted(rcdiag.__all__)
    for unwanted in ("Any", "Mapping", "Path", "sys", "TYPE_CHECKING", "annotations", "types"):
        assert unwanted not in names


@pytest.mark.parametrize(
    ("call", "python", "flag"),
    [
        (lambda d: rcdiag.analyze(d, steps="a:b"), "steps 'a:b'", "--steps"),
        (lambda d: rcdiag.analyze(d, frameworks="nope"), "frameworks: unknown", "--frameworks"),
        (lambda d: rcdiag.recommend(d, translate="nope"), "translate: unknown", "--framework"),
        (
            lambda d: rcdiag.compare_presets(d, frameworks="nope"),
            "frameworks: unknown",
            "--frameworks",
        ),
        (lambda d: rcdiag.analyze(d, engine="nope"), "engine 'nope'", "--engine"),
    ],
)
def test_python_errors_name_python_arguments(dump: Path, call: Any, python: str, flag: str) -> None:
    with pytest.raises(UsageError) as caught:
        call(dump)
    message = str(caught.value)
    assert message.startswith(python), message
    assert flag not in message


def test_the_command_line_keeps_its_flags(dump: Path) -> None:
    from typer.testing import CliRunner

    from rcdiag.cli import app

    result = CliRunner().invoke(app, ["analyze", str(dump), "--steps", "a:b"])
    assert result.exit_code == 2
    assert "Error: --steps 'a:b'" in result.stderr


@pytest.fixture
def kernel() -> Iterator[None]:
    pytest.importorskip("nbclient")
    pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    yield


def test_a_notebook_shows_each_result_as_a_card(dump: Path, tmp_path: Path, kernel: None) -> None:
    import nbclient
    import nbformat

    where = tmp_path / "run"
    shutil.copytree(dump, where)
    cells = [
        "import rcdiag",
        f"result = rcdiag.analyze({str(where)!r})\nresult",
        f"document = rcdiag.report({str(where)!r})\ndocument",
        "document.recommendation",
        "print(len(repr(document)))",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    outputs = [cell.outputs for cell in notebook.cells]
    for shown in outputs[1:4]:
        (display,) = [o for o in shown if o.output_type == "execute_result"]
        assert display.data["text/html"].startswith('<div class="rcdiag-nb">')
        assert len(display.data["text/plain"]) < 1000
        assert "text/markdown" in display.data
    assert "Recommended" in outputs[3][0].data["text/html"]
    assert int(outputs[4][0].text) < 1000


CARD_PROBE = """<script>
window.addEventListener("load", function () {
  var wide = Array.prototype.filter.call(document.querySelectorAll(".rcdiag-nb *"), function (e) {
    // a table scrolls inside its own box when it cannot fit: its cells may lie beyond
    return !e.closest("table") && e.getBoundingClientRect().right > window.innerWidth + 0.5;
  }).map(function (e) { return e.tagName + "." + e.className; });
  var p = document.createElement("script"); p.type = "application/json"; p.id = "card-probe";
  p.textContent = JSON.stringify({page: document.documentElement.scrollWidth,
    window: window.innerWidth, wide: wide, cards: document.querySelectorAll(".rcdiag-nb").length,
    svgs: document.querySelectorAll(".rcdiag-nb svg polyline").length});
  document.body.appendChild(p);
});
</script>"""


@pytest.mark.parametrize("width", [500, 800])
def test_cards_fit_a_narrow_notebook_in_a_browser(
    results: dict[str, Any], tmp_path: Path, width: int
) -> None:
    import html as htmllib
    import json
    import subprocess

    from test_report_browser import OFFLINE_FLAGS, _find

    chromium = _find()
    if chromium is None:
        pytest.skip("no Chromium: `make browser` installs Debian's chromium")
    cards = "".join(results[name]._repr_html_() for name in KINDS)
    page = tmp_path / "cards.html"
    page.write_text(f"<!doctype html><html><body>{cards}{CARD_PROBE}</body></html>")
    command = [
        chromium,
        *OFFLINE_FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={width},3000",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=True)
    found = re.search(r'id="card-probe">(.*?)</script>', done.stdout)
    assert found is not None, "the probe did not run"
    layout = json.loads(htmllib.unescape(found.group(1)))
    assert layout["cards"] == len(KINDS)
    assert layout["svgs"] >= 4
    assert layout["wide"] == [] and layout["page"] <= layout["window"]
