"""Advice sized to where the run is going: a growing run's rejection threshold is judged on its
recent and worst steps, and the recommended configuration's kept share per step is shown in the
JSON, the terminal and the report (docs/recommendation.md, "Where the run is going")."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from rcdiag.assess.findings import ADVICE_LIMITS
from rcdiag.assess.recommendation.entries import Entries, Entry, choose_is_threshold, knee
from rcdiag.assess.recommendation.steps import StepTable, kept_by_step
from rcdiag.cli import app
from rcdiag.io.writer import write_dump
from rcdiag.model import Recommendation, ReportDocument
from rcdiag.run.documents import build_report_document, complete, document_of
from rcdiag.run.dump import DumpSpec

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
ROWS, LENGTH = 48, 48


@dataclass(frozen=True)
class Growing:
    path: Path
    log_ratio: np.ndarray  # [rows, length]: log π_train − log π_rollout
    step: np.ndarray  # [rows]


def write_growing(path: Path, steps: int, hi: float, lo: float = 0.02, seed: int = 0) -> Growing:
    """A run whose per-token noise grows geometrically from ``lo`` to ``hi`` over ``steps``
    steps, each sequence with its own scale (lognormal around the step's), E[ρ] = 1."""
    rng = np.random.default_rng(seed)
    sigma = lo * (hi / lo) ** (np.arange(steps) / (steps - 1))
    rollout = -1.5 - rng.exponential(0.7, (steps * ROWS, LENGTH))
    scale = np.repeat(sigma, ROWS) * np.exp(rng.normal(0.0, 0.8, steps * ROWS))
    noise = scale[:, None] * rng.standard_normal((steps * ROWS, LENGTH))
    old = rollout + noise - (scale**2 / 2)[:, None]
    step = np.repeat(np.arange(steps), ROWS)
    write_dump(path, rollout, old, step=step)
    return Growing(path, old - rollout, step)


@functools.cache
def _run(steps: int, hi: float, root: Path) -> tuple[Growing, ReportDocument]:
    growing = write_growing(root / f"growing-{steps}.parquet", steps, hi)
    return growing, build_report_document(DumpSpec([str(growing.path)]))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("growing")


RUNS = [(6, 0.08), (8, 0.1)]


def kept_by_hand(growing: Growing, threshold: float) -> np.ndarray:
    """Per step, the share of the sequences (= of the tokens: equal lengths) whose
    geometric-mean ratio exp(mean ℓ) lies in [1/x, x] (seq_mean_k1 at x)."""
    geometric = np.exp(growing.log_ratio.mean(axis=1))
    keep = (geometric >= 1.0 / threshold) & (geometric <= threshold)
    steps = np.unique(growing.step)
    return np.array([keep[growing.step == s].mean() for s in steps])


@pytest.mark.parametrize(("steps", "hi"), RUNS)
def test_a_growing_run_is_judged_on_its_recent_and_worst_steps(
    steps: int, hi: float, root: Path
) -> None:
    growing, document = _run(steps, hi, root)
    data = document.to_json()
    assert "growing_drift" in [c["id"] for c in data["diagnosis"]["causes"]]
    rec = document.recommendation
    assert rec is not None and rec.recommended is not None
    best = rec.recommended
    assert best.evaluated is not None and best.evaluated["ref"].startswith("geo@")
    threshold = float(best.evaluated["ref"].split("@")[1])
    assert best.name == f"decoupled_geo_rs_token_tis@{best.evaluated['ref'].split('@')[1]}"

    # the per-step shares against an independent count of the kept sequences
    by_hand = kept_by_hand(growing, threshold)
    kept = best.per_step
    assert kept is not None
    assert kept.steps == tuple(range(steps))
    np.testing.assert_allclose(np.array(kept.kept_token_share, dtype=float), by_hand, rtol=1e-12)
    np.testing.assert_allclose(np.array(kept.kept_sequence_share, dtype=float), by_hand, rtol=1e-12)
    recent = max(1, steps // 4)
    assert kept.recent_count == recent
    assert kept.recent_steps == (steps - recent, steps - 1)
    assert kept.recent_kept_token_share == pytest.approx(by_hand[-recent:].mean(), rel=1e-12)
    assert kept.worst_step == int(np.argmin(by_hand))
    assert kept.worst_kept_token_share == pytest.approx(by_hand.min(), rel=1e-12)
    assert kept.recent_kept_token_share >= ADVICE_LIMITS["keep_target"]
    assert kept.worst_kept_token_share >= ADVICE_LIMITS["worst_step_keep"]

    # judged on the whole dump alone, a tighter threshold would be chosen: one that keeps too
    # little of the recent steps
    whole, _ = knee(Entries(data, "latest").points("geo"))
    assert whole is not None and float(whole.ref.split("@")[1]) < threshold
    tighter = kept_by_hand(growing, float(whole.ref.split("@")[1]))
    assert tighter.mean() >= ADVICE_LIMITS["keep_target"]
    assert (
        tighter[-recent:].mean() < ADVICE_LIMITS["keep_target"]
        or tighter.min() < ADVICE_LIMITS["worst_step_keep"]
    )
    reason = next(r for r in best.reasons if r.startswith("Geometric-mean rejection"))
    assert "over the whole dump" in reason and f"step {kept.worst_step} (its worst)" in reason
    assert f"{whole.ref.split('@')[1]} would keep only" in reason

    # the story: the first, the worst and the recent steps against the whole dump
    assert kept.story is not None
    assert re.search(rf"at step {kept.worst_step} \((the last and )?the worst\)", kept.story)
    assert "over the whole dump" in kept.story


def _entry(threshold: str, overall: float, per_step: list[float]) -> Entry:
    table = StepTable(
        tuple(range(len(per_step))),
        np.full(len(per_step), 100.0),
        np.full(len(per_step), 10.0),
    )
    return Entry(
        "sweep",
        f"geo@{threshold}",
        {},
        {"kept_token_share": overall},
        lambda: kept_by_step(table, per_step, per_step),
    )


def test_the_knee_reads_the_recent_steps_only_for_a_growing_run() -> None:
    points = [
        _entry("1.02", 0.96, [1.0, 1.0, 1.0, 0.99, 0.95, 0.8, 0.78, 0.75]),  # falls at the end
        _entry("1.05", 0.99, [1.0, 1.0, 1.0, 1.0, 1.0, 0.97, 0.96, 0.95]),
        _entry("1.1", 1.0, [1.0] * 8),
    ]
    flat, why_flat = knee(points, recent=False)
    assert flat is not None and flat.ref == "geo@1.02", why_flat
    growing, why = knee(points, recent=True)
    assert growing is not None and growing.ref == "geo@1.05", why
    assert "1.02 would keep only 76.5% over the last 2 steps (6–7)" in why
    nothing, why_not = knee(points[:1], recent=True)
    assert nothing is None and "keeps only 76.5% of the tokens over the last 2 steps" in why_not


def test_kept_by_step_pools_the_recent_steps_by_their_tokens() -> None:
    table = StepTable((3, 5, 8, 9), np.array([10.0, 0.0, 30.0, 10.0]), np.array([2, 0, 3, 1.0]))
    kept = kept_by_step(table, [1.0, None, 0.5, 0.9], [1.0, None, 2 / 3, 1.0])
    assert kept.recent_count == 1 and kept.recent_steps == (9, 9)  # 3 steps with tokens → 1
    assert kept.worst_step == 8 and kept.worst_kept_token_share == 0.5
    wide = StepTable(tuple(range(8)), np.arange(1.0, 9.0), np.ones(8))
    shares = [1.0] * 6 + [0.5, 0.8]
    pooled = kept_by_step(wide, shares, shares)
    assert pooled.recent_steps == (6, 7)
    assert pooled.recent_kept_token_share == pytest.approx((7 * 0.5 + 8 * 0.8) / 15)
    assert kept_by_step(wide).story is None  # keeps everything: nothing to tell


def test_the_per_step_figures_round_trip_and_decide_again_from_the_json(root: Path) -> None:
    _, document = _run(*RUNS[0], root)
    rec = document.recommendation
    assert rec is not None
    assert Recommendation.from_json(rec.to_json(), source="t") == rec
    again = complete(document_of(document.to_json(), "t.json"))  # rcdiag report --from
    assert again.recommendation == rec
    assert again.sweeps == document.sweeps


def test_every_output_tells_the_per_step_story(root: Path, tmp_path: Path) -> None:
    growing, document = _run(*RUNS[1], root)
    rec = document.recommendation
    assert rec is not None and rec.recommended is not None and rec.recommended.per_step
    story = rec.recommended.per_step.story
    assert story is not None

    def flat(text: str) -> str:
        return re.sub(r"\s+", " ", text)

    result = runner.invoke(app, ["recommend", str(growing.path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert story in flat(result.output)
    assert "tokens kept per step: 0 100%" in flat(result.output)
    assert "sequences kept per step:" in flat(result.output)
    page = tmp_path / "page.html"
    result = runner.invoke(
        app, ["report", str(growing.path), "-o", str(page)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert story in flat(result.output)
    html = page.read_text()
    assert 'id="fig-kept-by-step"' in html
    assert story.replace("–", "–") in html
    section = html[html.index('<section id="recommendation">') :]
    assert section.index("fig-kept-by-step") < section.index("</section>")


def _samples() -> list[Path]:
    synthetic = [ROOT / "sample_data" / n for n in ("bf16.parquet", "fp8.parquet", "drift")]
    synthetic += [
        ROOT / "sample_data" / n for n in ("heavy_tails.parquet", "long_responses.parquet")
    ]
    return synthetic + sorted(p for p in (ROOT / "sample_data" / "model").iterdir() if p.is_dir())


@pytest.mark.parametrize("sample", _samples(), ids=lambda p: p.name)
def test_no_configuration_is_both_recommended_and_not_recommended(sample: Path) -> None:
    document = build_report_document(DumpSpec([str(sample)]))
    rec = document.recommendation
    assert rec is not None
    avoided = {p["name"] for group in rec.avoid for p in group.presets}
    for choice in rec.choices:
        assert choice.name not in avoided, (sample.name, choice.name)
        if choice.preset is not None and "@" not in choice.name:
            presets = {p.name: p for p in document.presets or ()}
            assert dict(presets[choice.preset].config) == dict(choice.config)
        if choice.per_step is not None:  # a per-step figure for every step with a valid token
            assert len(choice.per_step.steps) == document.source.steps
            expected = choice.expected or {}
            if expected.get("kept_token_share") == 1.0:
                assert all(v in (1.0, None) for v in choice.per_step.kept_token_share)


def test_a_long_run_keeps_its_per_step_figures_as_numbers(tmp_path: Path) -> None:
    """The per-step figures of a 2,000-step run: every candidate that rejects something carries
    one share per step (equal steps: their mean is the whole dump's); one that keeps everything
    carries none (1 at every step)."""
    steps = 2_000
    rng = np.random.default_rng(3)
    rollout = -1.0 - rng.exponential(0.7, (steps, 16))
    old = rollout + np.linspace(0.01, 0.2, steps)[:, None] * rng.standard_normal((steps, 16))
    path = write_dump(tmp_path / "long.parquet", rollout, old, step=np.arange(steps))
    document = build_report_document(DumpSpec([str(path)]))
    carried = 0
    for sweep in document.sweeps or ():
        assert sweep.steps is not None and len(sweep.steps.steps) == steps
        for point in sweep.points:
            whole = point.summary["kept_token_share"]
            assert whole is not None
            if point.per_step is None or "kept_token_share" not in point.per_step:
                assert whole == 1.0 and point.summary["kept_sequence_share"] == 1.0
                continue
            carried += 1
            assert all(len(v) == steps for v in point.per_step.values())
            kept = np.array(point.per_step["kept_token_share"], dtype=float)
            assert math.isclose(float(kept.mean()), whole, rel_tol=1e-9)
    assert carried > 0


@pytest.mark.parametrize(
    ("shares", "story"),
    [
        (
            [1.0] * 5 + [0.9],
            "Step by step it keeps 100% of the tokens at step 0 (the first) and 90.0% at step 5 "
            "(the last and the worst), against 98.3% over the whole dump; 90.0% of the sequences "
            "at step 5.",
        ),
        (
            [1.0] * 9 + [0.95, 0.97, 0.99, 0.98, 0.93, 0.97],
            "Step by step it keeps 100% of the tokens at step 0 (the first), 93.0% at step 13 "
            "(the worst) and 96.0% over the last 3 steps (12–14), against 98.6% over the whole "
            "dump; 93.0% of the sequences at step 13.",
        ),
        (
            [0.5] + [1.0] * 14,
            "Step by step it keeps 50.0% of the tokens at step 0 (the first and the worst) and "
            "100% over the last 3 steps (12–14), against 96.7% over the whole dump; 50.0% of the "
            "sequences at step 0.",
        ),
        ([1.0] * 7 + [0.995], None),  # within a point of the whole dump: nothing to tell
    ],
)
def test_the_story_names_the_first_the_worst_and_the_recent_steps(
    shares: list[float], story: str | None
) -> None:
    table = StepTable(
        tuple(range(len(shares))), np.full(len(shares), 10.0), np.full(len(shares), 2.0)
    )
    assert kept_by_step(table, shares, shares).story == story


def _is_sweep(removed: dict[str, tuple[float, list[float]]]) -> dict[str, Any]:
    """A document with only an ``is`` sweep: C → (whole-dump share removed, per step)."""
    steps = len(next(iter(removed.values()))[1])
    return {
        "sweeps": [
            {
                "key": "is",
                "target": "is_token",
                "title": "token TIS threshold C",
                "steps": {
                    "step": list(range(steps)),
                    "valid_tokens": [100] * steps,
                    "sequences": [10] * steps,
                },
                "points": [
                    {
                        "threshold": c,
                        "config": {"rollout_is": "token", "rollout_is_threshold": float(c)},
                        "summary": {
                            "kept_token_share": 1.0,
                            "kept_sequence_share": 1.0,
                            "weight_mass_removed": whole,
                        },
                        "per_step": {"weight_mass_removed": per_step},
                    }
                    for c, (whole, per_step) in removed.items()
                ],
            }
        ]
    }


def test_a_growing_run_chooses_c_on_its_recent_steps_too() -> None:
    """At C = 2 the whole dump loses 3% of its weight mass but the last two of 8 steps 8%: a
    growing run takes the smallest C that stays within 5% at every recent step."""
    document = _is_sweep(
        {
            "2": (0.03, [0.0, 0.0, 0.01, 0.02, 0.03, 0.04, 0.08, 0.08]),
            "3": (0.02, [0.0, 0.0, 0.0, 0.01, 0.02, 0.03, 0.06, 0.04]),
            "5": (0.01, [0.0, 0.0, 0.0, 0.0, 0.01, 0.01, 0.03, 0.02]),
        }
    )
    entries = Entries(document, "latest")
    c, why = choose_is_threshold(entries)
    assert c == 2.0, why
    c, why = choose_is_threshold(entries, recent=True)
    assert c == 5.0, why
    assert "at a recent step" in why and "at most 3.0% at a recent step (step 6)" in why


@pytest.mark.parametrize("sample", ["stale", "drift"])
def test_a_growing_run_avoids_presets_that_empty_its_worst_step(sample: str) -> None:
    """When the mismatch grows, a preset keeping over half of the dump's tokens but under half of
    one step's is listed under "Not recommended" with that step, and never also chosen."""
    import rcdiag

    root = Path(__file__).resolve().parent.parent / "sample_data"
    dump = root / "model" / sample if sample == "stale" else root / sample
    advice = rcdiag.recommend(dump)
    grows = [a for a in advice.avoid if a.reason.startswith("as the mismatch grows")]
    listed_before = {p["name"] for a in advice.avoid if a not in grows for p in a.presets}
    chosen = {c.name for c in advice.choices}
    comparison = rcdiag.compare_presets(dump)
    expected = {
        p.name
        for p in comparison.presets
        if (w := p.worst_steps.get("kept_token_share")) is not None
        and w.value < 0.5
        and p.name not in listed_before | chosen
    }
    assert expected, "the sample has presets that empty one step but not the dump"
    assert len(grows) == 1
    assert {p["name"] for p in grows[0].presets} == expected
    assert not expected & chosen
