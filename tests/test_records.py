"""Every metric record and every cause record is complete, documented and tested: nothing can be
half-added (rcdiag/metrics/records.py, rcdiag/assess/diagnosis/causes.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from rcdiag.assess.diagnosis.causes import CAUSE_RECORDS, CAUSES
from rcdiag.assess.diagnosis.observations import DETECTOR_LIMITS
from rcdiag.metrics.offpolicy import LEGACY_VETO_METRICS, RCDIAG_METRICS, VERL_OFFPOLICY_METRICS
from rcdiag.metrics.records import JUDGED, KEY_METRICS, RECORDS, REGISTRY, STEP_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
TESTS = "\n".join(p.read_text() for p in (ROOT / "tests").glob("*.py"))


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub makes of a document's headings."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _documented(target: str) -> None:
    path, _, anchor = target.partition("#")
    document = ROOT / path
    assert document.is_file(), target
    if anchor:
        assert anchor in _anchors(document.read_text()), target


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_every_metric_record_is_complete_and_documented(record) -> None:  # type: ignore[no-untyped-def]
    computed = {*VERL_OFFPOLICY_METRICS, *LEGACY_VETO_METRICS, *RCDIAG_METRICS}
    preset_metric = record.name.startswith("rollout_corr/rollout_is_")
    assert record.name in computed or preset_metric, record.name
    assert record.label and record.what.endswith("."), record.name
    _documented(record.docs)
    text = (ROOT / record.docs.partition("#")[0]).read_text()
    short = record.name.split("/", 1)[1]
    assert f"`{record.name}`" in text or f"`{short}`" in text, record.name
    for band in record.bands:
        assert band.source, (record.name, band.status)
        assert band.status in ("watch", "act")


@pytest.mark.parametrize("record", JUDGED, ids=lambda r: r.name)
def test_every_band_judges_the_values_past_its_limit(record) -> None:  # type: ignore[no-untyped-def]
    for band in record.bands:
        if isinstance(band.limit, tuple):
            low, high = band.limit
            inside, past = (low + high) / 2, high * 1.01 + 1e-12
        else:
            step = abs(band.limit) * 0.01 + 1e-12
            past = band.limit - step if record.worse == "lower" else band.limit + step
            inside = band.limit + step if record.worse == "lower" else band.limit - step
        assert record.status(past) in ("watch", "act"), (record.name, band)
        assert record.status(past) == band.status or band.status == "watch", (record.name, band)
        if band is min(record.bands, key=lambda b: 0 if b.status == "watch" else 1):
            assert record.status(inside) == "healthy", (record.name, band)
    assert record.status(None) is None and record.status(float("nan")) is None


def test_the_record_tables_hold_records_once() -> None:
    assert len(REGISTRY) == len(RECORDS)
    for table in (JUDGED, KEY_METRICS, STEP_COLUMNS):
        assert len(set(table)) == len(table) and all(r.name in REGISTRY for r in table)
    assert len({r.label for r in RECORDS}) == len(RECORDS), "two metrics share a label"


@pytest.mark.parametrize("cause", CAUSES, ids=lambda c: c.id)
def test_every_cause_record_is_complete_and_documented(cause) -> None:  # type: ignore[no-untyped-def]
    assert CAUSE_RECORDS[cause.id] is cause
    assert cause.kind in ("dump_bug", "mismatch") and cause.title
    assert set(cause.limits) <= set(DETECTOR_LIMITS), cause.id
    _documented(cause.docs)
    assert f"| `{cause.id}` |" in (ROOT / "docs" / "diagnosis.md").read_text(), cause.id
    assert f'"{cause.id}"' in TESTS or f"'{cause.id}'" in TESTS, f"{cause.id}: no test names it"


def test_every_detector_limit_belongs_to_a_cause_or_a_shared_test() -> None:
    used = {limit for cause in CAUSES for limit in cause.limits}
    assert used <= set(DETECTOR_LIMITS)


def test_a_metric_name_is_written_only_in_its_record_and_verls_tables() -> None:
    """Code reads a judged metric through its record; only the modules that compute verl's
    metrics under verl's names write them (doctests show computed values by name)."""
    allowed = {
        "rcdiag/metrics/records.py",
        "rcdiag/metrics/offpolicy.py",
        "rcdiag/correction/rejection.py",
        "rcdiag/correction/importance.py",
    }
    for record in JUDGED:
        if not record.name.startswith(("rollout_corr/", "rcdiag/")):
            continue
        found = subprocess.run(
            ["grep", "-rn", "--include=*.py", f'"{record.name}"', "rcdiag"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.splitlines()
        code = {
            line.split(":", 1)[0]
            for line in found
            if not line.split(":", 2)[2].lstrip().startswith((">>>", "..."))
        }
        assert code <= allowed, (record.name, sorted(code - allowed))
    k3 = subprocess.run(
        ["grep", "-rln", '"rollout_corr/k3_kl"', "rcdiag"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert set(k3) == {"rcdiag/metrics/records.py", "rcdiag/metrics/offpolicy.py"}, k3
