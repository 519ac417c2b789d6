"""The report of every sample dump says one thing: no figure is called healthy in one place and past
its range in another, the size of the mismatch has one word, the verdict, its headline, its blurb,
the reasons and the metric cards agree, and no internal rule or cause id reaches the prose.

Read from the rendered page (what a person sees, code spans left out) and from the texts of the
results JSON (which ``rcdiag recommend`` prints).
"""

from __future__ import annotations

import functools
import html as htmllib
import re
from pathlib import Path
from typing import Any

import pytest

from rcdiag.assess.diagnosis.causes import CAUSES
from rcdiag.assess.recommendation.rules import RULES
from rcdiag.assess.verdict.signals import SIGNALS
from rcdiag.metrics.records import RECORDS, REGISTRY
from rcdiag.report.render import render_html
from rcdiag.run.documents import ReportOptions, build_report_document
from rcdiag.run.dump import DumpSpec
from rcdiag.status import rank

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = {
    **{p.stem: p for p in sorted((ROOT / "sample_data").glob("*.parquet"))},
    "drift": ROOT / "sample_data" / "drift",
    **{f"model/{p.name}": p for p in sorted((ROOT / "sample_data" / "model").iterdir())},
}
PHRASES = {
    "within the healthy range": "healthy",
    "past the healthy range": "watch",
    "past the act limit": "act",
}
NAMES = {r.label: r.name for r in RECORDS if r.bands and (" " not in r.label or "|" in r.label)}
JUDGED = re.compile(
    r"(?P<name>" + "|".join(re.escape(n) for n in sorted(NAMES, key=len, reverse=True)) + r")"
    r" = (?P<value>-?[0-9.e+-]+%?) (?P<scope>overall|over the last steps)"
    r"(?: \(overall [^)]*\))?, (?P<phrase>" + "|".join(PHRASES) + r")"
)
SIZE = re.compile(r"mismatch is (small|tiny|moderate|large)\b")


@functools.cache
def _rendered(sample: str) -> tuple[dict[str, Any], str]:
    document = build_report_document(DumpSpec([str(SAMPLES[sample])]), ReportOptions()).to_json()
    return document, render_html(document)


def visible_text(page: str) -> str:
    """What a reader sees, minus code spans, preformatted snippets, scripts and styles."""
    body = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", page, flags=re.S | re.I)
    body = re.sub(r"<[^>]+>", " ", body)
    return re.sub(r"\s+", " ", htmllib.unescape(body))


def json_texts(document: dict[str, Any]) -> list[str]:
    """The sentences of the results document (the verdict and the recommendation)."""
    verdict, rec = document["verdict"], document["recommendation"]
    texts = [verdict["headline"], verdict["blurb"], *(s["text"] for s in verdict["signals"])]
    texts += [r["text"] for r in rec["rules"]] + list(rec["notes"])
    texts += [g["reason"] for g in rec["avoid"]]
    texts += [reason for choice in rec["choices"] for reason in choice["reasons"]]
    return texts


def _number(text: str) -> float:
    return float(text[:-1]) / 100.0 if text.endswith("%") else float(text)


def _near_a_limit(metric: str, value: float) -> bool:
    """Printed with two digits, a value this close to a limit may round onto it."""
    limits = [b.limit for b in REGISTRY[metric].bands if isinstance(b.limit, float)]
    return any(abs(abs(value) - limit) <= 0.05 * limit for limit in limits)


def judgements(text: str) -> list[tuple[str, str, float, str]]:
    """(metric, scope, value, status) of every judged figure in ``text``."""
    return [
        (NAMES[m["name"]], m["scope"], _number(m["value"]), PHRASES[m["phrase"]])
        for m in JUDGED.finditer(text)
    ]


@pytest.fixture(params=sorted(SAMPLES), scope="module")
def report(request: pytest.FixtureRequest) -> tuple[dict[str, Any], str, str]:
    document, page = _rendered(request.param)
    text = visible_text(page) + " " + " ".join(json_texts(document))
    return document, page, text


def test_every_sample_is_covered() -> None:
    assert len(SAMPLES) >= 14 and "drift" in SAMPLES and "model/stale" in SAMPLES


def test_a_figure_has_one_status_and_it_is_the_registrys(
    report: tuple[dict[str, Any], str, str],
) -> None:
    document, _, text = report
    found = judgements(text)
    bug = any(c["kind"] == "dump_bug" for c in document["diagnosis"]["causes"])
    assert found or bug, "no judged figure on the page"
    statuses: dict[tuple[str, str], set[str]] = {}
    for metric, scope, value, status in found:
        statuses.setdefault((metric, scope), set()).add(status)
        if not _near_a_limit(metric, value):
            assert REGISTRY[metric].status(value) == status, (metric, value, status)
    for key, seen in statuses.items():
        assert len(seen) == 1, f"{key} is called {sorted(seen)}"
    checks = {c["metric"]: c["status"] for c in document["checks"]}
    for (metric, scope), seen in statuses.items():
        if scope == "overall" and metric in checks:
            assert seen == {checks[metric]}, (metric, seen, checks[metric])


def test_the_mismatch_has_one_size_and_its_figures_agree(
    report: tuple[dict[str, Any], str, str],
) -> None:
    document, _, text = report
    words = set(SIZE.findall(text))
    assert len(words) <= 1, f"the mismatch is called {sorted(words)}"
    if not words:
        return
    word = words.pop()
    assert word != "tiny", "the size is said 'small'"
    for sentence in re.findall(r"per-token mismatch is \w+: [^.]*(?:\.\d[^.]*)*", text):
        cited = [status for _, _, _, status in judgements(sentence)]
        assert cited, sentence
        if word == "small":
            assert set(cited) == {"healthy"}, sentence
        elif word == "moderate":
            assert "watch" in cited and "act" not in cited, sentence
        else:
            assert "act" in cited, sentence
    if word == "small":
        assert document["verdict"]["status"] != "act"


def test_the_verdict_its_blurb_and_its_reasons_agree(
    report: tuple[dict[str, Any], str, str],
) -> None:
    document, page, text = report
    verdict, rec = document["verdict"], document["recommendation"]
    status = verdict["status"]
    assert status == document["diagnosis"]["verdict"]
    word = re.search(r'<div class="verdict-word">(.*?)</div>', page)
    assert word is not None and word.group(1) == status.capitalize()
    headline = [j[3] for j in judgements(verdict["headline"])]
    assert all(rank(s) <= rank(status) for s in headline), (status, verdict["headline"])
    for signal in verdict["signals"]:
        assert rank(signal["status"]) <= rank(status), signal
    bug = any(c["kind"] == "dump_bug" for c in document["diagnosis"]["causes"])
    if status == "healthy":
        assert "past the" not in " ".join(json_texts(document))
        assert rec["choices"][0]["preset"] == "disabled"
        assert "No correction needed" in verdict["blurb"]
    else:
        assert "No correction needed" not in text and "Rollout and training agree" not in text
        if not bug:
            assert "past the" in verdict["headline"], verdict["headline"]
            assert rec["choices"] and rec["choices"][0]["preset"] != "disabled"
    if bug:
        assert rec["choices"] == [] and "fix how it is made" in verdict["blurb"]
    if "large enough to bias training" in verdict["blurb"]:
        assert "mismatch is large" in text
    for row in re.findall(r"<tr class=\"row-(?:recommended|alternative)\">.*?</tr>", page, re.S):
        assert "not for this dump" not in row, "a preset both advised and advised against"


def test_metric_cards_say_what_the_sentences_say(
    report: tuple[dict[str, Any], str, str],
) -> None:
    document, page, text = report
    badges = {
        metric: word
        for word, metric in re.findall(
            r'class="card card-\w+">\s*<div class="card-top"><span class="card-label">[^<]*</span>'
            r'<span class="badge badge-\w+">(\w+)</span></div>.*?<div class="card-name"><code>'
            r"([^<]+)</code>",
            page,
            flags=re.S,
        )
    }
    assert badges, "no metric card"
    checks = {c["metric"]: c["status"] for c in document["checks"]}
    for metric, word in badges.items():
        assert word == checks.get(metric, "info"), (metric, word)
    for metric, scope, _, status in judgements(text):
        if scope == "overall" and metric in badges:
            assert badges[metric] == status, (metric, badges[metric], status)


def test_no_internal_rule_or_cause_id_in_the_prose(
    report: tuple[dict[str, Any], str, str],
) -> None:
    document, page, _ = report
    prose = visible_text(page) + " " + " ".join(json_texts(document))
    rule_ids = {r.id for r in RULES}
    assert not re.search(r"\brules? (" + "|".join(rule_ids) + r")\b", prose)
    ids = {s.id for s in SIGNALS} | {d.id for d in CAUSES} | rule_ids
    for name in sorted(i for i in ids if "_" in i):
        # a quoted option value (vLLM's logprobs_mode='processed_logprobs') is not our id
        assert not re.search(rf"(?<!')\b{name}\b(?!')", prose), f"{name!r} in the prose"
