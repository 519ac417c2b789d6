"""The correction engine against the independent reference (tests/reference_correction.py).

Every preset of both dialects and custom configurations exercising every criterion, threshold
syntax, IcePop and batch normalisation: weights, rejected tokens and every metric, per step and
overall (streamed in chunks), must agree with the reference.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from reference_correction import reference_correction
from test_metrics_reference import (
    PaddedStep,
    chunked,
    overall_padded,
    ragged,
    rows_of,
    scenario_dump,
)

from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.config import ConfigError, parse_config
from rcdiag.correction.outcome import apply_correction
from rcdiag.correction.presets import PRESETS

RTOL, ATOL = 1e-6, 1e-9

CUSTOM: dict[str, dict[str, dict[str, Any]]] = {
    "latest": {
        "token_k1_float": {"rollout_rs": "token_k1", "rollout_rs_threshold": 1.3},
        "chain_k1_k3": {"rollout_rs": "token_k1,seq_max_k3", "rollout_rs_threshold": "0.4_1.8,3.0"},
        "every_k1": {
            "rollout_rs": "token_k1,seq_sum_k1,seq_mean_k1",
            "rollout_rs_threshold": "0.6_1.6, 0.5_2.0 ,0.99_1.02",
        },
        "every_k2_k3_broadcast": {
            "rollout_rs": "token_k2,seq_sum_k2,seq_mean_k2,seq_max_k2,"
            "token_k3,seq_sum_k3,seq_mean_k3,seq_max_k3",
            "rollout_rs_threshold": 0.05,
        },
        "duplicates_and_blanks": {
            "rollout_rs": " seq_mean_k1, seq_mean_k1,,token_k1 ",
            "rollout_rs_threshold": "0.9_1.1",
        },
        "tis_string_threshold": {"rollout_is": "token", "rollout_is_threshold": " 1.5 "},
        "tis_int_threshold": {"rollout_is": "sequence", "rollout_is_threshold": 3},
        "icepop_sequence": {"rollout_is": "sequence", "rollout_is_threshold": "0.5_5.0"},
        "token_batch_norm": {
            "rollout_is": "token",
            "rollout_is_threshold": 1.05,
            "rollout_is_batch_normalize": True,
        },
        "seq_batch_norm": {"rollout_is": "sequence", "rollout_is_batch_normalize": True},
        "icepop_batch_norm_rs": {
            "rollout_is": "token",
            "rollout_is_threshold": "0.98_1.02",
            "rollout_is_batch_normalize": True,
            "rollout_rs": "seq_max_k2",
            "rollout_rs_threshold": 2.0,
        },
    },
    "legacy": {
        "token_rs": {"rollout_rs": "token", "rollout_rs_threshold": 1.05},
        "token_rs_lower_is": {
            "rollout_is": "token",
            "rollout_rs": "token",
            "rollout_rs_threshold": 2.0,
            "rollout_rs_threshold_lower": 0.98,
        },
        "seq_rs_batch_norm": {
            "rollout_is": "sequence",
            "rollout_is_batch_normalize": True,
            "rollout_rs": "sequence",
            "rollout_rs_threshold": 5.0,
        },
        "token_batch_norm": {
            "rollout_is": "token",
            "rollout_is_threshold": 1.05,
            "rollout_is_batch_normalize": True,
        },
        "geometric_veto": {
            "rollout_rs": "geometric",
            "rollout_rs_threshold": 1.01,
            "rollout_token_veto_threshold": 1e-3,
        },
        "veto_only": {"rollout_is": "token", "rollout_token_veto_threshold": 1e-4},
    },
}

CASES = [
    (d, f"preset:{name}", dict(p.config)) for d, reg in PRESETS.items() for name, p in reg.items()
]
CASES += [(d, f"custom:{name}", c) for d, configs in CUSTOM.items() for name, c in configs.items()]
CASE_IDS = [f"{d}-{name}" for d, name, _ in CASES]
SCENARIOS = ("bf16", "fp8_bias", "catastrophic", "beyond_clamp", "empty_rows", "mixed")


def _close(got: float | None, want: float | None) -> bool:
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got is None or (isinstance(got, float) and math.isnan(got))
    if got is None:
        return False
    if math.isinf(want):
        return got == want
    return math.isclose(got, want, rel_tol=RTOL, abs_tol=ATOL)


def assert_metrics_match(got: dict, want: dict, where: str) -> None:
    assert set(got) == set(want), f"{where}: names differ: {set(got) ^ set(want)}"
    bad = {k: (got[k], want[k]) for k in want if not _close(got[k], want[k])}
    assert not bad, f"{where}: {bad}"


def _padded_step(step: PaddedStep) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return step.old.astype(np.float64), step.rollout.astype(np.float64), step.mask


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize(("dialect", "name", "config"), CASES, ids=CASE_IDS)
def test_weights_and_rejected_tokens_match(
    dialect: str, name: str, config: dict, scenario: str
) -> None:
    plan = parse_config(config, dialect)  # type: ignore[arg-type]
    for step in scenario_dump(scenario):
        old, rollout, mask = _padded_step(step)
        want_weights, want_mask, _ = reference_correction(old, rollout, mask, config, dialect)
        got_weights, got_mask = apply_correction(ragged(rows_of([step], "full")), plan)
        width = mask.shape[1]
        assert np.array_equal(got_mask.reshape(-1, width), want_mask != 0), f"step {step.step}"
        if want_weights is None:
            assert got_weights is None
        else:
            assert got_weights is not None
            valid = mask != 0
            np.testing.assert_allclose(
                got_weights.reshape(-1, width)[valid], want_weights[valid], rtol=RTOL, atol=ATOL
            )


@pytest.mark.parametrize("chunking", ["whole", "shuffled"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_metric_matches_per_step_and_overall(scenario: str, chunking: str) -> None:
    steps = list(scenario_dump(scenario))
    for dialect in ("latest", "legacy"):
        cases = [(n, c) for d, n, c in CASES if d == dialect]
        named = [NamedConfig(n, c, parse_config(c, dialect)) for n, c in cases]  # type: ignore[arg-type]
        comparison = PresetComparison(named).consume(chunked(rows_of(steps), chunking))
        for name, config in cases:
            for step in steps:
                _, _, want = reference_correction(*_padded_step(step), config, dialect)
                got = comparison.metrics(name, step.step)
                assert_metrics_match(got, want, f"{dialect} {name} step {step.step}")
            rollout, old, mask = overall_padded(steps)
            _, _, want = reference_correction(
                old.astype(np.float64), rollout.astype(np.float64), mask, config, dialect
            )
            assert_metrics_match(comparison.metrics(name), want, f"{dialect} {name} overall")


# Spec §5, written out independently of rcdiag's registry: a preset added, removed or changed
# there without this table fails here.
LATEST_EXPECTED = {
    "decoupled_token_is": ("token", 2.0, None, None, False, "ppo_clip"),
    "decoupled_token_icepop": ("token", "0.5_5.0", None, None, False, "ppo_clip"),
    "decoupled_seq_is": ("sequence", 2.0, None, None, False, "ppo_clip"),
    "decoupled_seq_is_rs": ("sequence", 2.0, "seq_sum_k1", "0.5_2.0", False, "ppo_clip"),
    "decoupled_geo_rs": (None, 2.0, "seq_mean_k1", "0.999_1.001", False, "ppo_clip"),
    "decoupled_geo_rs_seq_tis": ("sequence", 2.0, "seq_mean_k1", "0.999_1.001", False, "ppo_clip"),
    "decoupled_geo_rs_token_tis": ("token", 2.0, "seq_mean_k1", "0.999_1.001", False, "ppo_clip"),
    "decoupled_k3_rs": (None, 2.0, "seq_mean_k3", 0.01, False, "ppo_clip"),
    "decoupled_k3_rs_seq_tis": ("sequence", 2.0, "seq_mean_k3", 0.01, False, "ppo_clip"),
    "decoupled_k3_rs_token_tis": ("token", 2.0, "seq_mean_k3", 0.01, False, "ppo_clip"),
    "bypass_ppo_clip": (None, 2.0, None, None, True, "ppo_clip"),
    "bypass_ppo_clip_geo_rs": (None, 2.0, "seq_mean_k1", "0.999_1.001", True, "ppo_clip"),
    "bypass_ppo_clip_k3_rs": (None, 2.0, "seq_mean_k3", 0.01, True, "ppo_clip"),
    "bypass_pg_is": ("sequence", 2.0, None, None, True, "reinforce"),
    "bypass_pg_token_icepop": ("token", "0.5_5.0", None, None, True, "reinforce"),
    "bypass_pg_geo_rs": (None, 2.0, "seq_mean_k1", "0.999_1.001", True, "reinforce"),
    "bypass_pg_geo_rs_seq_tis": ("sequence", 2.0, "seq_mean_k1", "0.999_1.001", True, "reinforce"),
    "bypass_pg_geo_rs_token_tis": ("token", 2.0, "seq_mean_k1", "0.999_1.001", True, "reinforce"),
    "disabled": (None, 2.0, None, None, False, "ppo_clip"),
}
LATEST_KEYS = (
    "rollout_is",
    "rollout_is_threshold",
    "rollout_rs",
    "rollout_rs_threshold",
    "bypass_mode",
    "loss_type",
)

# (rollout_is, is_threshold, rollout_rs, rs_threshold, rs_lower, veto) per legacy preset
LEGACY_EXPECTED = {
    "decoupled_token_is": ("token", 2.0, None, None, None, None),
    "token_is": ("token", 2.0, None, None, None, None),
    "token_tis": ("token", 2.0, None, None, None, None),
    "decoupled_seq_is": ("sequence", 2.0, None, None, None, None),
    "seq_is": ("sequence", 2.0, None, None, None, None),
    "decoupled_seq_is_rs": ("sequence", 2.0, "sequence", 2.0, None, None),
    "seq_is_rs": ("sequence", 2.0, "sequence", 2.0, None, None),
    "seq_mis": ("sequence", 2.0, "sequence", 2.0, 0.0, None),
    "decoupled_geo_rs": (None, 2.0, "geometric", 1.001, None, 1e-4),
    "geo_rs": (None, 2.0, "geometric", 1.001, None, 1e-4),
    "geo_mis": (None, 2.0, "geometric", 1.001, 0.999, 1e-4),
    "ppo_is_bypass": ("token", 2.0, None, None, None, None),
    "pg_is": ("sequence", 2.0, None, None, None, None),
    "pure_is": ("sequence", 2.0, None, None, None, None),
    "pg_rs": (None, 2.0, "geometric", 1.001, None, 1e-4),
    "pure_rs": (None, 2.0, "geometric", 1.001, None, 1e-4),
    "disabled": (None, 2.0, None, None, None, None),
}
LEGACY_KEYS = (
    "rollout_is",
    "rollout_is_threshold",
    "rollout_rs",
    "rollout_rs_threshold",
    "rollout_rs_threshold_lower",
    "rollout_token_veto_threshold",
)


@pytest.mark.parametrize(
    ("dialect", "expected", "keys"),
    [("latest", LATEST_EXPECTED, LATEST_KEYS), ("legacy", LEGACY_EXPECTED, LEGACY_KEYS)],
)
def test_registry_matches_the_spec(dialect: str, expected: dict, keys: tuple) -> None:
    registry = PRESETS[dialect]  # type: ignore[index]
    assert list(registry) == list(expected) or set(registry) == set(expected)
    for name, values in expected.items():
        config = registry[name].config
        assert tuple(config.get(k) for k in keys) == values, name
        assert registry[name].purpose


def test_every_registered_preset_is_exercised_against_the_reference() -> None:
    exercised = {(d, n.removeprefix("preset:")) for d, n, _ in CASES if n.startswith("preset:")}
    registered = {(d, name) for d, reg in PRESETS.items() for name in reg}
    assert registered == exercised


def test_legacy_bypass_spellings() -> None:
    legacy = PRESETS["legacy"]
    assert legacy["pg_is"].config["use_policy_gradient"] is True
    assert legacy["pure_is"].config["use_pure_rollout_correction"] is True
    assert legacy["pure_rs"].config["bypass_old_logprob_for_rollout"] is True
    assert legacy["ppo_is_bypass"].config["bypass_mode"] is True


LEGACY_RS = {"rollout_rs": "token", "rollout_rs_threshold": 2.0}
INVALID = [
    ("latest", {"rollout_is": "geometric"}, "Invalid rollout_is 'geometric'"),
    ("latest", {"rollout_is": "token", "rollout_is_threshold": True}, "not a bool"),
    ("latest", {"rollout_is": "token", "rollout_is_threshold": 0}, "must be > 0"),
    ("latest", {"rollout_is": "token", "rollout_is_threshold": ""}, "empty string"),
    (
        "latest",
        {"rollout_is": "token", "rollout_is_threshold": "abc"},
        "Invalid rollout_is_threshold",
    ),
    ("latest", {"rollout_is": "token", "rollout_is_threshold": "2_0.5"}, "lower bound exceeds"),
    ("latest", {"rollout_is": "token", "rollout_is_threshold": "0_2"}, "must be > 0"),
    ("latest", {"rollout_rs": "token_k1"}, "needs rollout_rs_threshold"),
    (
        "latest",
        {"rollout_rs": "seq_max_k1", "rollout_rs_threshold": 2.0},
        "Invalid rollout_rs option 'seq_max_k1'",
    ),
    ("latest", {"rollout_rs": " , ", "rollout_rs_threshold": 2.0}, "names no criterion"),
    ("latest", {"rollout_rs": ["token_k1"], "rollout_rs_threshold": 2.0}, "must be a string"),
    (
        "latest",
        {"rollout_rs": "token_k1,token_k2", "rollout_rs_threshold": "2,3,4"},
        "3 values for 2 criteria",
    ),
    ("latest", {"rollout_rs": "token_k1", "rollout_rs_threshold": "2_1"}, "lower bound exceeds"),
    (
        "latest",
        {"rollout_rs": "token_k1", "rollout_rs_threshold": "x"},
        "Invalid numeric threshold",
    ),
    ("latest", {"rollout_rs": "token_k1", "rollout_rs_threshold": "-1"}, "positive"),
    (
        "latest",
        {"rollout_rs": "seq_mean_k3", "rollout_rs_threshold": "0.1_0.2"},
        "single upper bound",
    ),
    (
        "latest",
        {"rollout_rs": "token_k2", "rollout_rs_threshold": [1.0]},
        "must be a number or a string",
    ),
    ("latest", {"rollout_rs_threshold_lower": 0.5}, "unknown rollout-correction key"),
    ("legacy", {"rollout_rs": "token_k1", "rollout_rs_threshold": 2.0}, "legacy dialect accepts"),
    ("legacy", {"rollout_rs": "geometric"}, "needs rollout_rs_threshold"),
    ("legacy", {"rollout_token_veto_threshold": 0.0}, "must be > 0"),
    (
        "legacy",
        {"rollout_is": "token", "rollout_is_threshold": "0.5_5.0"},
        "expected a positive number",
    ),
    ("legacy", {"loss_type": "reinforce"}, "unknown rollout-correction key 'loss_type'"),
    ("latest", {"rollout_rs": "token_k1", "rollout_rs_threshold": 0.5}, "lower bound exceeds"),
    ("latest", {"rollout_rs": "token_k1,seq_sum_k1", "rollout_rs_threshold": "2,0.9"}, "exceeds"),
    ("latest", {"loss_type": "banana"}, "Invalid loss_type 'banana'"),
    ("latest", {"bypass_mode": "yes"}, "bypass_mode must be true or false"),
    ("latest", {"rollout_is_batch_normalize": "false"}, "must be true or false"),
    ("legacy", {**LEGACY_RS, "rollout_rs_threshold_lower": "abc"}, "must be a number in the legacy"),
    ("legacy", {**LEGACY_RS, "rollout_rs_threshold_lower": -0.5}, "must be ≥ 0"),
    ("legacy", {**LEGACY_RS, "rollout_rs_threshold": "2.0"}, "must be a number in the legacy"),
    ("legacy", {"rollout_token_veto_threshold": True}, "must be a number in the legacy dialect"),
]  # fmt: skip


def test_rollout_is_is_only_checked_when_weights_are_computed() -> None:
    # verl validates the level inside the IS computation, which a null threshold skips
    plan = parse_config({"rollout_is": "geometric", "rollout_is_threshold": None}, "latest")
    assert plan.importance is None


def test_dialect_keys_count_even_when_null() -> None:
    from rcdiag.correction.config import detect_dialect

    assert detect_dialect({"rollout_is": "token", "rollout_token_veto_threshold": None}) == "legacy"
    assert detect_dialect({"loss_type": None}) == "latest"
    assert detect_dialect({"rollout_is": "token"}) is None


@pytest.mark.parametrize(("dialect", "config", "match"), INVALID)
def test_invalid_configurations_are_rejected(dialect: str, config: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config(config, dialect)  # type: ignore[arg-type]


def _tiny(ell_rows: list[list[float]], step: int = 0) -> Any:
    """A batch whose rollout log-probs are −1 and whose log ratios ℓ are given per row."""
    from rcdiag.metrics.ragged import RaggedBatch

    flat = np.array([x for row in ell_rows for x in row], dtype=np.float64)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in ell_rows])]).astype(np.int64)
    return RaggedBatch(
        rollout=np.full(flat.size, -1.0),
        old=-1.0 + flat,
        mask=np.ones(flat.size, dtype=bool),
        offsets=offsets,
        steps=np.full(len(ell_rows), step, dtype=np.int64),
    )


def test_summary_figures_by_hand() -> None:
    # ρ per token: row 0 = [3, 1], row 1 = [0.25, 1], row 2 = [1.5]
    batch = _tiny([[math.log(3), 0.0], [math.log(0.25), 0.0], [math.log(1.5)]])
    config = {"rollout_is": "token", "rollout_rs": "token_k1", "rollout_rs_threshold": 2.5}
    comparison = PresetComparison([NamedConfig("c", config, parse_config(config, "latest"))])
    comparison.update(batch)
    s = comparison.summary("c")
    # token_k1 2.5 keeps 1/2.5 ≤ ρ ≤ 2.5: rejects ρ = 3 and ρ = 0.25 → kept tokens 1, 1, 1.5
    assert s["kept_token_share"] == pytest.approx(3 / 5)
    assert s["kept_sequence_share"] == pytest.approx(1 / 3)  # only row 2 loses nothing
    assert s["rejected_sequence_share"] == 0.0  # rows 0 and 1 keep their ρ = 1 token
    # TIS at 2 truncates nothing among the kept tokens (1, 1, 1.5)
    assert s["weight_mass_removed"] == pytest.approx(0.0, abs=1e-12)
    assert s["ess"] == pytest.approx(3.5**2 / (3 * (1 + 1 + 2.25)))
    assert s["max_weight"] == pytest.approx(1.5)


@pytest.mark.parametrize("summary_only", [False, True])
def test_summary_of_a_row_level_rejection_by_hand(summary_only: bool) -> None:
    # geometric-mean ρ per row: √3 ≈ 1.73, √0.25 = 0.5, 1.5; TIS weights ρ per token, C = 2
    batch = _tiny([[math.log(3), 0.0], [math.log(0.25), 0.0], [math.log(1.5)]])
    config = {"rollout_is": "token", "rollout_rs": "seq_mean_k1", "rollout_rs_threshold": 1.6}
    named = [NamedConfig("c", config, parse_config(config, "latest"))]
    comparison = PresetComparison([], named) if summary_only else PresetComparison(named)
    comparison.update(batch)
    s = comparison.summary("c")
    # keeps rows with 1/1.6 ≤ geometric ρ ≤ 1.6: only row 2 (one token, weight 1.5)
    assert s["kept_token_share"] == pytest.approx(1 / 5)
    assert s["kept_sequence_share"] == pytest.approx(1 / 3)
    assert s["rejected_sequence_share"] == pytest.approx(2 / 3)
    assert s["weight_mass_removed"] == pytest.approx(0.0, abs=1e-12)
    assert s["ess"] == pytest.approx(1.0)
    assert s["max_weight"] == pytest.approx(1.5)


def test_summary_without_rejection_counts_truncated_mass() -> None:
    batch = _tiny([[math.log(3), 0.0], [math.log(0.25)]])
    config = {
        "rollout_is": "token",
        "rollout_is_threshold": 2.0,
        "rollout_is_batch_normalize": True,
    }
    comparison = PresetComparison([NamedConfig("c", config, parse_config(config, "latest"))])
    comparison.update(batch)
    s = comparison.summary("c")
    assert s["kept_token_share"] == 1.0 and s["rejected_sequence_share"] == 0.0
    # R = 3, 1, 0.25 and W = 2, 1, 0.25: Σ(R − W)/ΣR = 1 / 4.25
    assert s["weight_mass_removed"] == pytest.approx(1 / 4.25)
    # batch normalisation divides by μ = ΣW / (V + ε) = 3.25 / 3
    assert s["max_weight"] == pytest.approx(2 / (3.25 / 3))


@pytest.mark.parametrize("padding", [True, False])
@pytest.mark.parametrize(
    "config",
    [
        {"rollout_is": "token", "rollout_is_threshold": 2.0, "rollout_is_batch_normalize": True},
        {"rollout_is": "sequence", "rollout_is_threshold": 3.0, "rollout_is_batch_normalize": True},
        {"rollout_is": "token", "rollout_rs": "token_k3", "rollout_rs_threshold": 0.01},
        {"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": 1.01},
        {
            "rollout_is": "token",
            "rollout_is_threshold": 1.5,
            "rollout_rs": "seq_mean_k1,seq_max_k2",
            "rollout_rs_threshold": "1.2,0.05",
        },
    ],
)
def test_a_sweep_point_summarises_as_the_full_configuration(
    config: dict[str, Any], padding: bool
) -> None:
    """Summary-only configurations (sweep points) track fewer statistics; their summary, of the
    whole dump and of each step, must not differ from the full configuration's, nor their
    per-step figures computed for every step at once."""
    rng = np.random.default_rng(11)
    full = PresetComparison([NamedConfig("c", config, parse_config(config, "latest"))])
    point = PresetComparison([], [NamedConfig("c", config, parse_config(config, "latest"))])
    for step in range(3):
        rows = [rng.normal(0, 0.3, int(rng.integers(0 if padding else 1, 12))) for _ in range(7)]
        batch = _tiny([r.tolist() for r in rows], step=step)
        if padding:  # hide a quarter of the positions behind the mask
            batch = dataclasses.replace(batch, mask=rng.random(batch.mask.size) > 0.25)
        full.update(batch)
        point.update(batch)
    want, got = full.summary("c"), point.summary("c")
    assert got.keys() == want.keys()
    for key, value in want.items():
        if value is None:
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(value, rel=1e-12, nan_ok=True), key
    steps, figures = point.step_figures("c")
    assert steps.tolist() == [0, 1, 2]
    for i, step in enumerate(steps.tolist()):
        want, got = full.summary("c", step), point.summary("c", step)
        for key, value in want.items():
            if value is None:
                assert got[key] is None, (step, key)
            else:
                assert got[key] == pytest.approx(value, rel=1e-12, nan_ok=True), (step, key)
        for key, values in figures.items():
            if want[key] is None:
                assert np.isnan(values[i]), (step, key)
            else:
                assert values[i] == pytest.approx(want[key], rel=1e-12), (step, key)


def test_a_configuration_that_rejects_a_whole_step_is_reported() -> None:
    comparison = PresetComparison(
        [
            NamedConfig(
                "geo",
                {},
                parse_config(dict(PRESETS["latest"]["decoupled_geo_rs"].config), "latest"),
            )
        ]
    )
    comparison.update(_tiny([[0.5, 0.5]], step=0))  # geometric mean ρ = e^0.5: rejected
    comparison.update(_tiny([[0.0, 0.0]], step=1))  # ρ = 1: kept
    from rcdiag.run.results import configuration_result

    entry = configuration_result(comparison, comparison.configs["geo"])
    assert entry.fully_rejected_steps == (0,)
    assert comparison.summary("geo", 0)["kept_token_share"] == 0.0
    assert comparison.summary("geo", 0)["ess"] is None
