"""The diagnosis: the right cause for planted dump bugs and real mismatch, no dump bug on clean dumps,
one verdict for every command (docs/diagnosis.md)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from planted import CAUSES, write_planted
from typer.testing import CliRunner

import rcdiag
from rcdiag.assess.diagnosis import causes as cause_records
from rcdiag.assess.diagnosis.observations import DETECTOR_LIMITS, ratio_z
from rcdiag.cli import app
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.metrics.evidence import evidence_statistics
from rcdiag.metrics.positions import position_statistics
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.metrics.records import JUDGED, RECORDS, REGISTRY
from rcdiag.run.dump import DumpSpec
from rcdiag.run.results import analyze_dump
from rcdiag.status import worst

MODEL = Path(__file__).resolve().parent.parent / "sample_data" / "model"


def diagnosis_of(path: Path) -> dict[str, Any]:
    return analyze_dump(DumpSpec([path]), AnalyzeOptions()).diagnosis.to_json()


def dump_bugs(diagnosis: dict[str, Any]) -> list[str]:
    return [c["id"] for c in diagnosis["causes"] if c["kind"] == "dump_bug"]


@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("variant", list(CAUSES))
def test_planted_causes_are_named(tmp_path: Path, variant: str, seed: int) -> None:
    """σ = 0.3 of logit noise: large enough for even a swap to show in kl."""
    diagnosis = diagnosis_of(write_planted(tmp_path / variant, variant, seed, noise=0.3))
    expected = CAUSES[variant]
    ids = [c["id"] for c in diagnosis["causes"]]
    if expected is None:
        assert dump_bugs(diagnosis) == []
    else:
        assert expected in ids
        assert dump_bugs(diagnosis) in ([], [expected]), "a dump bug is the only bug named"
    if expected is not None and expected not in (
        "stale_policy",
        "growing_drift",
        "position_growth",
    ):
        assert ids == [expected], "a dump bug explains the dump: no correction advice beside it"
    if variant == "spike":
        assert "growing_drift" not in ids, "one spike step is not growth"


@pytest.mark.parametrize("noise", [0.002, 0.01, 0.05, 0.1, 0.5])
@pytest.mark.parametrize("seed", [21, 22, 23])
def test_no_dump_bug_on_clean_dumps(tmp_path: Path, noise: float, seed: int) -> None:
    diagnosis = diagnosis_of(write_planted(tmp_path / "clean", "clean", seed, noise=noise))
    assert dump_bugs(diagnosis) == []


@pytest.mark.parametrize(
    ("variant", "cause", "verdicts"),
    [
        ("bf16", None, {"healthy", "watch"}),
        ("bf16_mixed", None, {"healthy", "watch"}),
        ("fp8", None, {"watch", "act"}),
        ("stale", "growing_drift", {"act"}),
        ("topp", "processed_logprobs", {"act"}),
        ("temperature", "temperature_mismatch", {"act"}),
        ("offset", "misaligned_tokens", {"act"}),
        ("swapped", "swapped_columns", {"act"}),
        ("identical", "identical_columns", {"watch"}),
    ],
)
def test_real_model_dumps(variant: str, cause: str | None, verdicts: set[str]) -> None:
    diagnosis = diagnosis_of(MODEL / variant)
    assert diagnosis["verdict"] in verdicts
    if cause is None:
        assert dump_bugs(diagnosis) == []
    else:
        assert cause in [c["id"] for c in diagnosis["causes"]]


def test_staleness_is_told_apart_from_numerics() -> None:
    diagnosis = diagnosis_of(MODEL / "stale")
    stale = next(c for c in diagnosis["causes"] if c["id"] == "stale_policy")
    by_lag = {g["lag"]: g for g in stale["evidence"]["by_lag"]}
    assert by_lag[0]["k3_kl"] < 1e-3 < by_lag[max(by_lag)]["k3_kl"]
    assert "numeric_mismatch" not in [c["id"] for c in diagnosis["causes"]]


def test_every_cause_says_what_to_do_and_shows_numbers() -> None:
    for variant in ("topp", "offset", "stale"):
        for cause in diagnosis_of(MODEL / variant)["causes"]:
            assert cause["summary"] and cause["advice"] and cause["evidence"]
            assert cause["severity"] in ("watch", "act")


def test_ratio_z_by_hand() -> None:
    """Two sequences, T = (3, 1), n = (2, 2): r = 1, Σ(T − r·n)² = 1 + 1 = 2, Var = 2/16."""
    z = ratio_z(total=4.0, count=4.0, sq=10.0, cross=8.0, count_sq=8.0)
    assert z == pytest.approx(1.0 / math.sqrt(2.0 / 16.0))


ONE_VERDICT_DUMPS = [MODEL / v for v in ("bf16", "fp8", "topp", "identical", "stale")]


@pytest.mark.parametrize("dump", ONE_VERDICT_DUMPS, ids=lambda p: p.name)
def test_every_command_gives_the_one_verdict(dump: Path, tmp_path: Path) -> None:
    runner = CliRunner()

    def document(*args: object) -> dict[str, Any]:
        out = tmp_path / f"{args[0]}.json"
        result = runner.invoke(app, [str(a) for a in (*args, "--json", out, "-q")])
        assert result.exit_code in (0, 1), result.stderr
        return json.loads(out.read_text())

    analyzed = document("analyze", dump)
    verdict = analyzed["diagnosis"]["verdict"]
    reported = document("report", dump, "-o", tmp_path / "r.html")
    assert reported["diagnosis"]["verdict"] == reported["verdict"]["status"] == verdict
    assert document("recommend", dump)["verdict"]["status"] == verdict
    checked = document("check", dump)
    assert checked["diagnosis"]["verdict"] == verdict
    assert checked["exit_code"] == (1 if verdict == "act" else 0)


def test_registry_bands_are_ordered_and_sourced() -> None:
    for record in RECORDS:
        assert record.name in REGISTRY and record.docs.startswith("docs/")
        limits = [b.limit for b in record.bands if not isinstance(b.limit, tuple)]
        assert all(b.source for b in record.bands)
        if record.worse == "lower":
            assert limits == sorted(limits, reverse=True)
        else:
            assert limits == sorted(limits)
    assert worst(["watch", "act", "healthy"]) == "act"
    assert DETECTOR_LIMITS["z"] > 3


def test_docs_list_every_band_and_every_cause() -> None:
    docs = Path(__file__).resolve().parent.parent / "docs"
    metrics, diagnosis = (docs / "metrics.md").read_text(), (docs / "diagnosis.md").read_text()
    for record in JUDGED:
        row = next(line for line in metrics.splitlines() if line.startswith(f"| `{record.name}` |"))
        for band in record.bands:
            assert record.limit_text(band).replace("|", "\\|") in row, record.name
    for detector in cause_records.CAUSES:
        assert f"| `{detector.id}` |" in diagnosis, detector.id


def test_code_and_docs_point_only_inside_the_repository() -> None:
    root = Path(__file__).resolve().parent.parent
    outside = ("spec §", "contract §", "shared/spec", "verl_rollout_correction.md", "contract.md")
    files = [
        *root.joinpath("rcdiag").rglob("*.py"),
        *root.joinpath("docs").glob("*.md"),
        *(p for p in root.joinpath("tests").glob("*.py") if p.name != "test_diagnosis.py"),
        *root.joinpath("benchmarks").glob("*.py"),
    ]
    for path in [*files, root / "README.md"]:
        text = path.read_text()
        assert not [w for w in outside if w in text], path
    for path in root.joinpath("rcdiag").rglob("*.py"):
        for cited in set(re.findall(r"docs/[a-z_]+\.md", path.read_text())):
            assert (root / cited).exists(), (path, cited)


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("bf16.parquet", set()),
        ("heavy_tails.parquet", {"catastrophic_tokens", "heavy_tail"}),
        ("long_responses.parquet", {"long_sequence_compounding"}),
        ("drift", {"growing_drift"}),
    ],
)
def test_the_synthetic_samples_show_their_planted_causes(sample: str, expected: set[str]) -> None:
    root = Path(__file__).resolve().parent.parent
    result = rcdiag.analyze(root / "sample_data" / sample)
    found = {c.id for c in result.diagnosis.causes}
    assert expected <= found if expected else not found, found
    assert not any(c.kind == "dump_bug" for c in result.diagnosis.causes)


@pytest.mark.parametrize("steps", [4, 5, 8])
@pytest.mark.parametrize("seed", [31, 32])
def test_short_growing_runs_are_growing_not_numerics(tmp_path: Path, steps: int, seed: int) -> None:
    path = write_planted(tmp_path / "growing", "growing", seed, steps=steps, noise=0.02)
    causes = {c["id"]: c for c in diagnosis_of(path)["causes"]}
    assert "growing_drift" in causes and "numeric_mismatch" not in causes
    growth = causes["growing_drift"]
    assert growth["evidence"]["shape"] == "ramp" and "steadily" in growth["summary"]
    assert "policy_lag" in growth["advice"] or "policy lag" in growth["advice"]


def test_a_step_change_names_its_step(tmp_path: Path) -> None:
    path = write_planted(tmp_path / "jump", "jump", 41, steps=12, noise=0.03)
    (growth,) = [c for c in diagnosis_of(path)["causes"] if c["id"] == "growing_drift"]
    assert growth["evidence"]["shape"] == "step" and growth["evidence"]["change_step"] == 6
    assert "at step 6" in growth["summary"]


def test_one_spike_step_is_reported_and_does_not_set_the_verdict(tmp_path: Path) -> None:
    from planted import planted_step

    from rcdiag.io.writer import write_dump

    for step in range(8):
        data = planted_step("clean", 51, step, rows=24, length=60, noise=0.01)
        rollout = data["rollout"]
        if step == 5:  # three responses of one step far off: their sequence weights explode
            rollout = rollout.copy()
            rollout[:3] -= 0.15
        write_dump(tmp_path / f"step={step}" / "part-0.parquet", rollout, data["old"], step=step)
    diagnosis = diagnosis_of(tmp_path)
    spikes = {s["metric"]: s for s in diagnosis.get("spikes", [])}
    assert "rollout_corr/chi2_seq" in spikes and spikes["rollout_corr/chi2_seq"]["step"] == 5
    assert diagnosis["verdict"] == "healthy" and not diagnosis["causes"]
    out = CliRunner().invoke(app, ["analyze", str(tmp_path)]).stdout
    assert "HEALTHY" in out and "at step 5 alone" in " ".join(out.split())


def test_pairing_and_constancy_evidence_by_hand() -> None:
    """Per response: informative (≥ 16 pairs, neighbour gap ≥ 0.5, no lag), unpaired (same-position
    gap ≥ 0.8 × neighbour gap), and the signed and absolute sums of the unpaired rows."""
    seesaw = np.tile([-1.0, -3.0], 10)  # neighbours 2 apart
    rows = [
        (seesaw, seesaw + 0.1),  # paired: 0.1 at the same position, ≈ 2 beside it
        (seesaw, np.full(20, -2.0)),  # another response: 1 at the same position and beside it
        (seesaw[:10], np.full(10, -2.0)),  # too short to tell
        (seesaw, np.full(20, -2.0)),  # as the second, but its policy lagged: left out
    ]
    rollout = np.concatenate([r for r, _ in rows])
    old = np.concatenate([o for _, o in rows])
    offsets = np.cumsum([0, *(len(r) for r, _ in rows)])
    batch = RaggedBatch(
        rollout=rollout,
        old=old,
        mask=np.ones(rollout.size, dtype=bool),
        offsets=offsets,
        steps=np.zeros(4, dtype=np.int64),
        lags=np.array([0, 0, 0, 1]),
    )
    stats = evidence_statistics(batch)
    assert stats["pairing_rows"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert stats["unpaired_rows"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert stats["unpaired_ell"].tolist() == [0.0, 0.0, 0.0, 0.0]  # Σ(x − y) = 10·1 − 10·1
    assert stats["unpaired_abs"].tolist() == [0.0, 20.0, 0.0, 0.0]
    assert stats["rollout_min"].tolist() == [-3.0] * 4
    assert stats["old_min"].tolist() == [-2.9, -2.0, -2.0, -2.0]
    assert stats["old_max"].tolist() == [-0.9, -2.0, -2.0, -2.0]


def test_padded_ends_by_hand() -> None:
    """A run of ≥ 4 valid positions at either end of a response where one column repeats one value
    and the other does not, the two more than 1 apart on average: counted once per position."""
    varied = np.array([-1.0, -2.5, -0.5, -3.0, -1.5, -2.0, -0.7, -2.2])
    rows = [
        (np.r_[varied[:4], np.zeros(4)], varied),  # a padded tail of 4 in the engine's column
        (np.r_[np.zeros(5), varied[5:]], varied),  # a padded start of 5 (the prompt)
        (varied, varied + 0.01),  # nothing padded
        (np.r_[varied[:5], np.zeros(3)], varied),  # a run of 3 is too short
    ]
    rollout = np.concatenate([r for r, _ in rows])
    old = np.concatenate([o for _, o in rows])
    batch = RaggedBatch(
        rollout=rollout,
        old=old,
        mask=np.ones(rollout.size, dtype=bool),
        offsets=np.arange(5) * 8,
        steps=np.zeros(4, dtype=np.int64),
    )
    stats = position_statistics(batch)
    assert stats["pad_rows"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert stats["pad_tokens"].tolist() == [4.0, 5.0, 0.0, 0.0]
    assert stats["lead_tokens"].tolist() == [0.0, 5.0, 0.0, 0.0]
    assert stats["pad_abs"].tolist() == pytest.approx(
        [1.5 + 2.0 + 0.7 + 2.2, 1.0 + 2.5 + 0.5 + 3.0 + 1.5, 0.0, 0.0]
    )


def _real_model_rows(
    variant: str,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray]:
    table = pq.read_table(
        Path(__file__).resolve().parent.parent / "sample_data" / "model" / variant
    )
    data = table.to_pydict()
    rollout = [np.asarray(r, dtype=np.float64) for r in data["rollout_log_probs"]]
    old = [np.asarray(o, dtype=np.float64) for o in data["old_log_probs"]]
    mask = [np.asarray(m, dtype=bool) for m in data["response_mask"]]
    return rollout, old, mask, np.asarray(data["step"])


def _other_row(old: list[np.ndarray], rows: np.ndarray, length: int, shift: int) -> np.ndarray:
    """Row ``rows[shift]``'s training column cut or zero-padded to ``length`` (a wrong join)."""
    theirs = old[int(rows[shift % rows.size])][:length]
    return np.concatenate([theirs, np.zeros(length - theirs.size)])


def _plant_in_real_rows(bug: str, variant: str) -> dict[str, list[np.ndarray]]:
    rollout, old, mask, steps = _real_model_rows(variant)
    if bug == "placeholder":
        rollout = [np.zeros_like(r) for r in rollout]
    elif bug == "prompt":
        prompt = [np.resize(o, 20) for o in old[7:] + old[:7]]  # another row's log-probs
        rollout = [np.r_[np.zeros(20), r] for r in rollout]
        old = [np.r_[p, o] for p, o in zip(prompt, old, strict=True)]
        mask = [np.r_[np.ones(20, dtype=bool), m] for m in mask]
    else:  # rows of a step paired with other rows: all of them, or the first quarter
        shuffled = list(old)
        for step in np.unique(steps):
            rows = np.flatnonzero(steps == step)
            moved = rows if bug == "all_rows_unpaired" else rows[: rows.size // 4]
            for k, row in enumerate(moved):
                shuffled[row] = _other_row(old, moved, rollout[row].size, k + 1)
        old = shuffled
    return {"rollout": rollout, "old": old, "mask": mask, "steps": [steps]}


@pytest.mark.parametrize("variant", ["bf16", "fp8"])
@pytest.mark.parametrize(
    ("bug", "cause"),
    [
        ("placeholder", "constant_column"),
        ("prompt", "padding_in_mask"),
        ("quarter_unpaired", "unpaired_rows"),
        ("all_rows_unpaired", "misaligned_tokens"),
    ],
)
def test_bugs_planted_in_real_model_rows(
    tmp_path: Path, variant: str, bug: str, cause: str
) -> None:
    """Real transformer log-probs (sample_data/model) with a pipeline bug planted: that bug alone."""
    planted = _plant_in_real_rows(bug, variant)
    path = tmp_path / "dump.parquet"
    floats = pa.list_(pa.float64())
    table = pa.table(
        {
            "rollout_log_probs": pa.array([r.tolist() for r in planted["rollout"]], floats),
            "old_log_probs": pa.array([o.tolist() for o in planted["old"]], floats),
            "response_mask": pa.array([m.tolist() for m in planted["mask"]], pa.list_(pa.bool_())),
            "step": pa.array(planted["steps"][0]),
        }
    )
    pq.write_table(table, path)
    diagnosis = diagnosis_of(path)
    assert [c["id"] for c in diagnosis["causes"]] == [cause]
    advice = rcdiag.recommend(path)
    assert advice.recommended is None and advice.dump_bug == cause, "fix the dump: no correction"
    assert not rcdiag.check(path).passed
