"""Results in a notebook: ``_repr_html_`` and ``_repr_markdown_`` of every top-level result
(docs/python-api.md, "In a notebook").

The HTML is one self-contained ``<div>``: the verdict card, the deciding gauges, the key metrics,
the causes, a few per-step curves as inline SVG, a table and the advice (:mod:`rcdiag.report.cards`
gathers them). No script, no network, no external style; every string of the result is escaped.
Importing this module registers it with :mod:`rcdiag.model.display` (:mod:`rcdiag.api` does); it
imports the cards, and with them the report's view, when a result is first drawn.
"""

from __future__ import annotations

import html
import math
import re
from typing import TYPE_CHECKING, Any

from rcdiag.formatting import pct, short
from rcdiag.model.display import register

if TYPE_CHECKING:
    from rcdiag.report.cards import Table, Trend

COLOURS = {"ok": "#15803d", "warn": "#b45309", "fail": "#b91c1c", "info": "#475569"}
"""The report's status colours (templates/report.css)."""
VERDICT_CSS = {"healthy": "ok", "watch": "warn", "act": "fail"}
SPARK_WIDTH, SPARK_HEIGHT = 220, 48
"""The size of a per-step curve, in pixels."""

_STYLE = (
    ".rcdiag-nb{font:13px/1.45 system-ui,sans-serif;color:#1f2937;max-width:900px;"
    "border:1px solid #e5e7eb;border-radius:8px;padding:12px 14px;background:#fff}"
    ".rcdiag-nb h4{margin:10px 0 4px;font-size:13px}"
    ".rcdiag-nb .facts{color:#6b7280;font-size:12px;overflow-wrap:anywhere}"
    ".rcdiag-nb .badge{display:inline-block;color:#fff;border-radius:999px;padding:1px 10px;"
    "font-weight:600;margin-right:8px}"
    ".rcdiag-nb .grid{display:flex;flex-wrap:wrap;gap:8px}"
    ".rcdiag-nb .tile{border:1px solid #e5e7eb;border-radius:6px;padding:4px 8px;min-width:120px}"
    ".rcdiag-nb .bar{position:relative;height:8px;border-radius:4px;background:#f1f5f9;"
    "overflow:hidden;width:260px}"
    ".rcdiag-nb .seg{position:absolute;top:0;height:8px;opacity:.35}"
    ".rcdiag-nb .pin{position:absolute;top:-2px;width:3px;height:12px;background:#111827}"
    ".rcdiag-nb table{border-collapse:collapse;font-size:12px;max-width:100%;"
    "display:block;overflow-x:auto}"
    ".rcdiag-nb td,.rcdiag-nb th{border-bottom:1px solid #e5e7eb;padding:2px 8px;text-align:left}"
    ".rcdiag-nb pre{background:#f9fafb;padding:6px;white-space:pre-wrap;"
    "overflow-wrap:anywhere;margin:4px 0}"
)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _colour(css: str | None) -> str:
    return COLOURS.get(css or "info", COLOURS["info"])


def sparkline(trend: Trend) -> str:
    """One per-step curve as inline SVG (gaps where a step has no value), with its last value.

    Example:
        >>> from rcdiag.report.cards import Trend
        >>> svg = sparkline(Trend("k3", (0, 1, 2), (1.0, None, 3.0), False))
        >>> svg.count("<polyline"), "k3" in svg
        (2, True)
    """
    points = [
        (s, v)
        for s, v in zip(trend.steps, trend.values, strict=True)
        if v is not None and math.isfinite(v)
    ]
    fmt = pct if trend.share else short
    last = fmt(points[-1][1]) if points else "–"
    header = f"<div>{_e(trend.label)}: <b>{_e(last)}</b> at the last step</div>"
    if not points:
        return f'<div class="tile">{header}</div>'
    first, final = trend.steps[0], trend.steps[-1]
    low, high = min(v for _, v in points), max(v for _, v in points)
    span_x, span_y = max(final - first, 1), (high - low) or 1.0

    def xy(step: int, value: float) -> str:
        x = (step - first) / span_x * (SPARK_WIDTH - 4) + 2
        y = SPARK_HEIGHT - 2 - (value - low) / span_y * (SPARK_HEIGHT - 4)
        return f"{x:.1f},{y:.1f}"

    runs: list[list[str]] = [[]]
    for step, value in zip(trend.steps, trend.values, strict=True):
        if value is None or not math.isfinite(value):
            runs.append([])
        else:
            runs[-1].append(xy(step, value))
    lines = "".join(
        f'<polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="{" ".join(r)}"/>'
        for r in runs
        if r
    )
    title = f"{trend.label}: {fmt(low)} … {fmt(high)} over steps {first}–{final}"
    return (
        f'<div class="tile">{header}<svg width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" '
        f'role="img" aria-label="{_e(title)}"><title>{_e(title)}</title>{lines}</svg></div>'
    )


def _gauge(gauge: Any) -> str:
    segments = "".join(
        f'<div class="seg" style="left:{s["left"]:.1f}%;width:{s["width"]:.1f}%;'
        f'background:{_colour(s["status"])}"></div>'
        for s in gauge["segments"]
    )
    pin = "" if gauge["at"] is None else f'<div class="pin" style="left:{gauge["at"]:.1f}%"></div>'
    band = f" — {_e(gauge['band'])}" if gauge.get("band") else ""
    return (
        f'<div class="tile"><div>{_e(gauge["label"])} ({_e(gauge["caption"])}): '
        f'<b style="color:{_colour(gauge["status"])}">{_e(gauge["display"])}</b>{band}</div>'
        f'<div class="bar">{segments}{pin}</div></div>'
    )


def _table(table: Table) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in table.rows
    )
    more = f'<div class="facts">… and {table.more} more</div>' if table.more else ""
    return f"<h4>{_e(table.title)}</h4><table><tr>{head}</tr>{body}</table>{more}"


def to_html(result: Any) -> str:
    """The result's HTML card (module docstring)."""
    from rcdiag.report.cards import card

    c = card(result)
    colour = _colour(VERDICT_CSS.get(str(c.status)))
    parts = [
        f'<div class="rcdiag-nb"><style>{_STYLE}</style>',
        f"<div><b>{_e(c.kind)}</b> {_e(c.source)}</div>",
        f'<div class="facts">{_e(" · ".join(c.facts))}</div>',
        f'<h4><span class="badge" style="background:{colour}">{_e(c.word)}</span>'
        f"{_e(c.headline)}</h4>",
    ]
    if c.blurb:
        parts.append(f'<div class="facts">{_e(c.blurb)}</div>')
    if c.gauges:
        parts.append('<div class="grid">' + "".join(_gauge(g) for g in c.gauges) + "</div>")
    if c.causes:
        parts.append("<h4>Causes</h4><ul>")
        parts += [
            f'<li><b style="color:{_colour(VERDICT_CSS.get(x["severity"]))}">'
            f"{_e(x['title'])}</b> ({_e(x['severity'])}): {_e(x['summary'])} "
            f"<i>{_e(x['advice'])}</i></li>"
            for x in c.causes
        ]
        parts.append("</ul>")
    if c.metrics:
        tiles = "".join(
            f'<div class="tile"><div class="facts">{_e(m["label"])}</div>'
            f'<b style="color:{_colour(m["status"])}">{_e(m["value"])}</b></div>'
            for m in c.metrics
        )
        parts.append(f'<h4>Key metrics</h4><div class="grid">{tiles}</div>')
    if c.trends:
        curves = "".join(sparkline(t) for t in c.trends)
        parts.append(f'<h4>Per step</h4><div class="grid">{curves}</div>')
    parts += [_table(t) for t in c.tables]
    if c.advice:
        parts.append(_advice_html(c.advice))
    if c.notes:
        parts.append("<h4>Notes</h4><ul>" + "".join(f"<li>{_e(n)}</li>" for n in c.notes) + "</ul>")
    parts.append("</div>")
    return "".join(parts)


def _advice_html(advice: Any) -> str:
    out = f"<h4>Recommended: {_e(advice['name'])}</h4><div>{_e(advice['title'])}</div>"
    if advice.get("overrides"):
        out += f"<pre>{_e(advice['overrides'])}</pre>"
    if advice.get("snippet"):
        out += f"<div>In {_e(advice.get('framework', ''))}:</div><pre>{_e(advice['snippet'])}</pre>"
    return out


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def md(text: Any) -> str:
    """Text safe in Markdown: every character Markdown or HTML reads is backslash-escaped and
    line breaks become spaces.

    Example:
        >>> md("a|b <script> *x*")
        'a\\\\|b \\\\<script\\\\> \\\\*x\\\\*'
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def to_markdown(result: Any) -> str:
    """The result's card as Markdown (module docstring)."""
    from rcdiag.report.cards import card

    c = card(result)
    lines = [f"**{md(c.kind)}** {md(c.source)}", "", md(" · ".join(c.facts)), ""]
    lines += [f"**{md(c.word)}**: {md(c.headline)}", ""]
    for g in c.gauges:
        lines.append(f"- {md(g['label'])} ({md(g['caption'])}): **{md(g['display'])}**")
    for x in c.causes:
        lines.append(f"- **{md(x['title'])}** ({md(x['severity'])}): {md(x['summary'])}")
    if c.metrics:
        lines += ["", " · ".join(f"{md(m['label'])} **{md(m['value'])}**" for m in c.metrics)]
    for t in c.tables:
        lines += ["", f"**{md(t.title)}**", "", "| " + " | ".join(md(x) for x in t.columns) + " |"]
        lines.append("|" + "---|" * len(t.columns))
        lines += ["| " + " | ".join(md(x) for x in row) + " |" for row in t.rows]
        if t.more:
            lines.append(f"\n… and {t.more} more")
    if c.advice:
        lines += ["", f"**Recommended: {md(c.advice['name'])}** — {md(c.advice['title'])}"]
        if c.advice.get("overrides"):
            lines += ["", _fence(c.advice["overrides"])]
    lines += [f"- {md(n)}" for n in c.notes]
    return "\n".join(lines).rstrip() + "\n"


register("html", to_html)
register("markdown", to_markdown)

__all__ = ["md", "sparkline", "to_html", "to_markdown"]
