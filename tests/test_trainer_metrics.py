"""rcdiag.torch: metrics of a trainer's tensors equal the command line's on the dump of them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from trainer_data import assert_same, batch, cli_json  # noqa: E402

from rcdiag.correction.config import ConfigError  # noqa: E402
from rcdiag.correction.presets import PRESETS  # noqa: E402
from rcdiag.torch import DumpWriter, Monitor, offpolicy_metrics, preset_metrics  # noqa: E402

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    ),
]
CUSTOM = {"rollout_is": "sequence", "rollout_is_threshold": 3.0, "rollout_rs": "seq_max_k2"}
CUSTOM["rollout_rs_threshold"] = 0.5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_offpolicy_metrics_equal_analyze_on_the_dump(
    tmp_path: Path, device: str, dtype: torch.dtype
) -> None:
    rollout, old, mask = (t.to(device) for t in batch(0, dtype=dtype))
    with DumpWriter(tmp_path / "dump") as writer:
        writer.write(3, rollout, old, mask)
    cli = cli_json("analyze", tmp_path / "dump", "--json", tmp_path / "a.json")
    assert cli["source"]["valid_tokens"] == int(mask.sum())
    assert_same(offpolicy_metrics(rollout, old, mask), cli["overall"])


@pytest.mark.parametrize("dialect", ["latest", "legacy"])
def test_legacy_veto_metrics_equal_analyze(tmp_path: Path, dialect: str) -> None:
    rollout, old, mask = batch(4)
    with DumpWriter(tmp_path / "dump") as writer:
        writer.write(0, rollout, old, mask)
    args = ("--dialect", dialect, "--veto-threshold", 1e-3, "--json", tmp_path / "a.json")
    cli = cli_json("analyze", tmp_path / "dump", *args)
    ours = offpolicy_metrics(rollout, old, mask, dialect=dialect, veto_threshold=1e-3)  # type: ignore[arg-type]
    assert ("rollout_corr/rollout_is_veto_fraction" in ours) == (dialect == "legacy")
    assert_same(ours, cli["overall"])


@pytest.mark.parametrize("dialect", ["latest", "legacy"])
def test_every_preset_equals_compare_presets_on_the_dump(tmp_path: Path, dialect: str) -> None:
    rollout, old, mask = batch(1)
    with DumpWriter(tmp_path / "dump") as writer:
        writer.write(0, rollout, old, mask)
    out = tmp_path / "c.json"
    cli = cli_json("compare-presets", tmp_path / "dump", "--dialect", dialect, "--json", out)
    monitor = Monitor(list(PRESETS[dialect]), dialect=dialect)  # type: ignore[arg-type]
    monitor.update(rollout, old, mask)
    assert [p["name"] for p in cli["presets"]] == monitor.configurations
    for preset in cli["presets"]:
        ours = monitor.preset_metrics(preset["name"])
        assert_same(ours, preset["overall"])
        alone = preset_metrics(preset["name"], rollout, old, mask, dialect=dialect)  # type: ignore[arg-type]
        assert alone.keys() == ours.keys()
        assert all(alone[k] == ours[k] or math.isnan(ours[k]) for k in ours)


def test_a_custom_configuration_equals_compare_presets_config_file(tmp_path: Path) -> None:
    rollout, old, mask = batch(2)
    with DumpWriter(tmp_path / "dump") as writer:
        writer.write(0, rollout, old, mask)
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({"algorithm": {"rollout_correction": CUSTOM}}))
    args = ("-c", config, "--preset", "none", "--json", tmp_path / "c.json")
    cli = cli_json("compare-presets", tmp_path / "dump", *args)
    (only,) = cli["presets"]
    assert "rollout_corr/rollout_rs_seq_max_k2_masked_fraction" in only["overall"]
    assert_same(preset_metrics(CUSTOM, rollout, old, mask), only["overall"])


def test_a_monitor_accumulates_micro_batches_as_one_step(tmp_path: Path) -> None:
    """Two micro-batches of one step (different widths) give the metrics of the step's dump."""
    first, second = batch(5, rows=7, width=30), batch(6, rows=6, width=44)
    monitor = Monitor(["decoupled_geo_rs", "decoupled_k3_rs_token_tis"])
    for rank, micro in enumerate((first, second)):
        monitor.update(*micro)
        with DumpWriter(tmp_path / "dump", rank=rank) as writer:
            writer.write(0, *micro)
    assert sorted(p.name for p in (tmp_path / "dump" / "step=0").iterdir()) == [
        "rank-0.parquet",
        "rank-1.parquet",
    ]
    cli = cli_json("analyze", tmp_path / "dump", "--json", tmp_path / "a.json")
    assert_same(monitor.metrics(), cli["overall"])
    out = tmp_path / "c.json"
    cmp = cli_json("compare-presets", tmp_path / "dump", "-p", "decoupled_geo_rs", "--json", out)
    assert_same(monitor.preset_metrics("decoupled_geo_rs"), cmp["presets"][0]["overall"])
    monitor.reset()
    monitor.update(*first)
    assert monitor.metrics() == offpolicy_metrics(*first)


def test_numpy_arrays_and_a_missing_mask() -> None:
    rollout, old, _ = batch(7)
    rollout = torch.nan_to_num(rollout, nan=-1.0)
    ours = offpolicy_metrics(rollout.numpy(), old.numpy())
    assert ours == offpolicy_metrics(rollout, old, torch.ones_like(rollout, dtype=torch.bool))
    assert ours["rcdiag/response_length_mean"] == rollout.shape[1]


def test_a_batch_without_valid_tokens_gives_nan() -> None:
    rollout, old, mask = batch(8)
    metrics = offpolicy_metrics(rollout, old, torch.zeros_like(mask))
    assert metrics and all(math.isnan(v) for v in metrics.values())
    for preset in PRESETS["latest"]:
        empty = preset_metrics(preset, rollout, old, 0 * mask)
        assert empty.keys() == preset_metrics(preset, rollout, old, mask).keys()
        assert all(math.isnan(v) for v in empty.values())


def test_nonfinite_log_probs_at_valid_tokens() -> None:
    rollout, old, mask = batch(9)
    old[4, 2] = -torch.inf
    with pytest.raises(ValueError, match=r"row 4: a log-prob at position 2.*drop_nonfinite"):
        offpolicy_metrics(rollout, old, mask)
    dropped = offpolicy_metrics(rollout, old, mask, drop_nonfinite=True)
    masked = mask.clone()
    masked[4, 2] = 0
    assert dropped == offpolicy_metrics(rollout, old, masked)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda r, o, m: offpolicy_metrics(r[0], o[0], m[0]), ValueError, r"must both be \[B, T\]"),
        (lambda r, o, m: offpolicy_metrics(r, o, m[:, :3]), ValueError, "response_mask"),
        (lambda r, o, m: offpolicy_metrics(m, m, m), ValueError, "floating point"),
        (lambda r, o, m: preset_metrics("no_such", r, o, m), ConfigError, "unknown latest preset"),
        (
            lambda r, o, m: preset_metrics({"rollout_is": "tokens"}, r, o, m),
            ConfigError,
            "Invalid rollout_is",
        ),
        (lambda r, o, m: Monitor().preset_metrics("x"), KeyError, "not a configuration"),
    ],
)
def test_bad_arguments(call, error: type[Exception], match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        call(*batch(10))
