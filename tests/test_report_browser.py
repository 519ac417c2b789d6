"""The report in a real browser: headless Chromium, no JavaScript error, every chart drawn, offline.

The page records its own health (``window.onerror``, rejected promises, charts drawn with data, the
resources it fetched) into ``<script id="rcdiag-status">``; Chromium's ``--dump-dom`` hands the
finished DOM back. The network is switched off for the browser (a dead proxy and a resolver that
resolves nothing), so a page that needed the network would show errors or empty charts. Each test
also saves a screenshot under its tmp directory.

Chromium comes from Debian's ``chromium`` package, which ``make browser`` installs (``make test`` runs
it first, and says what it does); without it these tests are skipped, with the reason.
"""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rcdiag.model import ReportDocument
from rcdiag.report.render import render_html, write_html
from rcdiag.run.documents import ReportOptions, analyze_part, build_report_document, page_json
from rcdiag.run.dump import DumpSpec

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = {
    "drift": ROOT / "sample_data" / "drift",
    "heavy_tails": ROOT / "sample_data" / "heavy_tails.parquet",
    "bf16": ROOT / "sample_data" / "bf16.parquet",
}
INSTALL = "apt-get update && apt-get install -y --no-install-recommends chromium"
OFFLINE_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def _find() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


@pytest.fixture(scope="session")
def chromium() -> str:
    """The headless Chromium binary; the tests are skipped, saying why, when there is none."""
    found = _find()
    if found is None:
        pytest.skip(f"no Chromium: `make browser` installs Debian's chromium (`{INSTALL}`)")
    return found


def _run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [chromium, *OFFLINE_FLAGS, f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    return done


def load_in_browser(
    chromium: str, page: Path, workdir: Path, width: int = 1400
) -> tuple[dict[str, Any], str]:
    """Open ``page`` offline; return the status the page recorded and the final DOM."""
    done = _run(
        chromium,
        workdir / "profile-dom",
        f"--window-size={width},2000",
        "--virtual-time-budget=30000",
        "--dump-dom",
        page.as_uri(),
    )
    dom = done.stdout
    assert 'data-rcdiag-done="1"' in dom, "the page never finished drawing its charts"
    found = re.search(
        r'<script type="application/json" id="rcdiag-status">(.*?)</script>', dom, re.S
    )
    assert found is not None, "no status element in the DOM"
    return json.loads(htmllib.unescape(found.group(1))), dom


def screenshot(chromium: str, page: Path, workdir: Path) -> Path:
    """A tall screenshot of the page (saved beside it)."""
    target = workdir / f"{page.stem}.png"
    _run(
        chromium,
        workdir / "profile-shot",
        "--window-size=1400,9000",
        "--virtual-time-budget=30000",
        f"--screenshot={target}",
        page.as_uri(),
    )
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert target.stat().st_size > 50_000, "the screenshot is suspiciously empty"
    return target


def _report(sample: str, path: Path, plotlyjs: str | None = None) -> Path:
    document = build_report_document(DumpSpec([str(SAMPLES[sample])]), ReportOptions())
    write_html(path, document.to_json(), plotlyjs)
    return path


LAYOUT_PROBE = r"""<script>
window.addEventListener("load", function () { setTimeout(function () {
  var head = document.querySelector(".masthead"), verdict = document.getElementById("verdict");
  var tables = Array.prototype.map.call(document.querySelectorAll("table"), function (t) {
    return [t.scrollWidth, t.parentNode.clientWidth, t.getBoundingClientRect().right];
  });
  var code = Array.prototype.map.call(document.querySelectorAll("pre"), function (p) {
    return [p.id, p.scrollWidth, p.clientWidth];
  });
  // command-line options and their arguments (`--from results.json`) broken across lines
  var broken = [];
  Array.prototype.forEach.call(document.querySelectorAll("code"), function (c) {
    var nodes = [], walker = document.createTreeWalker(c, NodeFilter.SHOW_TEXT), n;
    while ((n = walker.nextNode())) nodes.push(n);
    var text = nodes.map(function (t) { return t.data; }).join("");
    var pair = /(^|\s)(--?[a-z][\w-]* [^\s-][^\s]*)/g, m;
    function at(offset) {
      for (var i = 0; i < nodes.length; i++) {
        if (offset <= nodes[i].data.length) return [nodes[i], offset];
        offset -= nodes[i].data.length;
      }
      return [nodes[nodes.length - 1], nodes[nodes.length - 1].data.length];
    }
    while ((m = pair.exec(text))) {
      var start = m.index + m[1].length, range = document.createRange();
      var a = at(start), b = at(start + m[2].length);
      range.setStart(a[0], a[1]); range.setEnd(b[0], b[1]);
      var tops = {};
      Array.prototype.forEach.call(range.getClientRects(), function (r) {
        if (r.width > 0) tops[Math.round(r.top)] = true;
      });
      if (Object.keys(tops).length > 1) broken.push(m[2]);
    }
  });
  var probe = document.createElement("script");
  probe.type = "application/json"; probe.id = "layout-probe";
  probe.textContent = JSON.stringify({
    page: document.documentElement.scrollWidth, window: window.innerWidth, tables: tables,
    code: code, broken: broken,
    sticky: getComputedStyle(head).position, header: head.getBoundingClientRect().bottom,
    verdict: verdict.getBoundingClientRect().top
  });
  document.body.appendChild(probe);
}, 500); });
</script></body>"""


@pytest.mark.parametrize("sample", ["drift", "heavy_tails"])
def test_report_renders_every_chart_without_errors_offline(
    chromium: str, sample: str, tmp_path: Path
) -> None:
    page = _report(sample, tmp_path / f"{sample}.html")
    status, dom = load_in_browser(chromium, page, tmp_path)
    charts = page.read_text().count('data-figure="')
    assert status["errors"] == []
    assert status["empty"] == []
    assert status["plotly"] == "embedded"  # inflated in the page from its gzip+base64 copy
    assert page.stat().st_size < 2_000_000
    assert status["expected"] == charts >= 14
    assert status["rendered"] == charts
    assert dom.count('data-rendered="1"') == charts
    assert status["resources"] == [], "the page fetched something"
    shot = screenshot(chromium, page, tmp_path)
    print(f"screenshot: {shot}")


def test_analyze_only_report_renders_in_the_browser(chromium: str, tmp_path: Path) -> None:
    analysis = analyze_part(
        build_report_document(DumpSpec([str(SAMPLES["bf16"])]), ReportOptions())
    )
    document = page_json(ReportDocument.of(analysis))  # decided once, as report --from does
    page = tmp_path / "analyze_only.html"
    page.write_text(render_html(document), encoding="utf-8")
    status, dom = load_in_browser(chromium, page, tmp_path)
    assert status["errors"] == [] and status["empty"] == []
    assert status["rendered"] == status["expected"] == page.read_text().count('data-figure="') > 0
    assert "Not in these results" in dom
    screenshot(chromium, page, tmp_path)


def test_the_harness_sees_a_broken_page(chromium: str, tmp_path: Path) -> None:
    """A figure with no data and a script error must both show up in the recorded status."""
    page = _report("bf16", tmp_path / "broken.html")
    text = page.read_text()
    blob = re.search(
        r'(<script type="application/json" id="rcdiag-figures">)(.*?)(</script>)', text
    )
    assert blob is not None
    figures = json.loads(blob.group(2))
    first = next(iter(figures))
    del figures[first]
    broken = text.replace(blob.group(2), json.dumps(figures)).replace(
        "</body>", "<script>undefinedFunction();</script></body>"
    )
    page.write_text(broken)
    status, _ = load_in_browser(chromium, page, tmp_path)
    assert any(first in e for e in status["errors"])
    assert any("undefinedFunction" in e for e in status["errors"])
    assert status["rendered"] == status["expected"] - 1


def test_a_shared_plotly_js_file_draws_every_chart(chromium: str, tmp_path: Path) -> None:
    page = _report("bf16", tmp_path / "pages" / "bf16.html", str(tmp_path / "js" / "plotly.js"))
    status, _ = load_in_browser(chromium, page, tmp_path)
    charts = page.read_text().count('data-figure="')
    assert status["errors"] == [] and status["plotly"] == "script"  # Plotly came from the file
    assert status["rendered"] == status["expected"] == charts > 0
    assert all(r.startswith("file://") for r in status["resources"]), "fetched from the network"


def test_a_browser_without_decompression_says_why_charts_are_missing(
    chromium: str, tmp_path: Path
) -> None:
    page = _report("bf16", tmp_path / "old.html")
    text = page.read_text().replace(
        "<script>\n/* Installed first",
        "<script>delete window.DecompressionStream;</script><script>\n/* Installed first",
        1,
    )
    page.write_text(text)
    status, dom = load_in_browser(chromium, page, tmp_path)
    assert status["rendered"] == 0 and status["expected"] > 0
    assert any("DecompressionStream" in e for e in status["errors"])
    assert dom.count("Chart not drawn: this browser cannot inflate") == status["expected"]


@pytest.mark.parametrize("width", [800, 1400])
def test_nothing_sits_off_screen_or_under_the_header(
    chromium: str, tmp_path: Path, width: int
) -> None:
    page = _report("drift", tmp_path / "drift.html")
    page.write_text(page.read_text().replace("</body>", LAYOUT_PROBE, 1))
    status, dom = load_in_browser(chromium, page, tmp_path, width)
    assert status["errors"] == []
    found = re.search(r'<script type="application/json" id="layout-probe">(.*?)</script>', dom)
    assert found is not None, "the layout probe did not run"
    layout = json.loads(htmllib.unescape(found.group(1)))
    assert layout["page"] <= layout["window"], "the page scrolls sideways"
    for table, box, right in layout["tables"]:
        assert table <= box, f"a table ({table} px) overflows its card ({box} px)"
        assert right <= layout["window"], f"a table ends at {right} px, off-screen"
    for name, content, box in layout["code"]:
        assert content <= box, f"code block {name} hides {content - box} px behind a scroll"
    assert layout["verdict"] >= layout["header"] + 10, "the header covers the verdict card"
    assert layout["broken"] == [], "an option is broken from its argument across lines"
    if width < 1000:
        assert layout["sticky"] == "static"
