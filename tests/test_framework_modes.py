"""The correction modes of NeMo-RL, SkyRL, AReaL, open-instruct and prime-rl against the independent
references (tests/reference_framework_modes.py, tests/reference_frameworks.py): weights, kept tokens,
the comparison's summary figures and the metrics each framework logs for the mode."""

from __future__ import annotations

import math

import pytest
import reference_framework_modes as modes_ref
import reference_frameworks as ref
from test_frameworks import assert_nested, close, make_steps, ragged, tokens_of

from rcdiag.correction import modes as modes_module
from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.external import keep_mask
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks import areal_modes, open_instruct, openrlhf, prime_rl, skyrl_modes
from rcdiag.frameworks import nemo_rl_modes as nemo_modes


@pytest.mark.parametrize("name", list(nemo_modes.MODES))
def test_nemo_rl_modes(name: str) -> None:
    """Every NeMo-RL mode's weights, kept rows, summary figures and logged metrics."""
    options = nemo_modes.MODES[name][1]
    rows = make_steps(5, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    plan = nemo_modes.plan(**options)
    want_w, want_keep, want_metrics = modes_ref.nemo_mode(rows, **options)
    if plan.weights is not None:
        assert want_w is not None
        assert_nested(tokens_of(view, plan.weights.applied(view), rows), want_w, "weights")
    comparison = PresetComparison([NamedConfig(name, {}, plan)])
    comparison.update(view.batch)
    raw = [[ref._exp(e) for e in ref._ells(row)] for row in rows]
    for figure, value in ref.summary(rows, raw, want_w, want_keep).items():
        got = comparison.summary(name)[figure]
        if value is None:
            assert got is None, figure
        else:
            close(got, value, figure)
    logged = comparison.metrics(name)
    assert set(logged) == set(want_metrics)
    for metric, value in want_metrics.items():
        close(logged[metric], value, metric)


SKYRL_REFERENCE = {
    "token_tis": {"tis": "token"},
    "sequence_tis": {"tis": "sequence"},
    "geometric_mask": {"seq_mask": "geometric"},
    "product_mask": {"seq_mask": "product"},
    "outlier_token_mask": {"outlier": (1e-4, 100.0)},
    "token_mask": {"token_mask": (0.5, 2.0)},
}


@pytest.mark.parametrize("name", list(skyrl_modes.MODES))
def test_skyrl_modes(name: str) -> None:
    """Every SkyRL mode's weights, kept tokens, summary figures and logged metrics."""
    plan = skyrl_modes.plan(skyrl_modes.MODES[name][1])
    rows = make_steps(9, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    want_w, want_keep, want_metrics = modes_ref.skyrl_mode(rows, **SKYRL_REFERENCE[name])
    if plan.weights is not None:
        assert want_w is not None
        assert_nested(tokens_of(view, plan.weights.applied(view), rows), want_w, "weights")
    comparison = PresetComparison([NamedConfig(name, {}, plan)])
    comparison.update(view.batch)
    clamp = 20.0
    raw = []
    for row in rows:
        ells = ref._ells(row)
        if name == "sequence_tis":
            raw.append([math.exp(max(-clamp, min(clamp, math.fsum(ells))))] * len(ells))
        else:
            raw.append([math.exp(max(-clamp, min(clamp, e))) for e in ells])
    for figure, value in ref.summary(rows, raw, want_w, want_keep).items():
        got = comparison.summary(name)[figure]
        if value is None:
            assert got is None, figure
        else:
            close(got, value, figure)
    logged = comparison.metrics(name)
    assert set(logged) == set(want_metrics)
    for metric, value in want_metrics.items():
        close(logged[metric], value, metric)


AREAL_CASES = [
    *(dict(vars(rs)) for _, rs in areal_modes.MODES.values()),
    {"level": "sequence", "metric": "ratio", "agg": "sum", "upper": 3.0, "lower": 0.2},
    {"level": "sequence", "metric": "ratio", "agg": "max", "upper": 2.0},
    {"level": "token", "metric": "kl_k2", "upper": 0.02},
    {"level": "sequence", "metric": "kl_k3", "agg": "mean", "upper": 0.01},
    {"level": "sequence", "metric": "kl_k1", "agg": "sum", "upper": 0.3, "lower": -0.3},
    {"level": "token", "action": "clamp", "upper": 1.2, "lower": 0.8},
]


@pytest.mark.parametrize("case", range(len(AREAL_CASES)))
def test_areal_rejection_sampling(case: int) -> None:
    """AReaL's rejection sampling: weights, kept tokens, summary figures and logged statistics."""
    options = AREAL_CASES[case]
    plan = areal_modes.plan(areal_modes.Rs(**options))
    rows = make_steps(12, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    want_w, want_keep, want_metrics = modes_ref.areal_mode(rows, **options)
    assert plan.weights is not None
    assert_nested(tokens_of(view, plan.weights.applied(view), rows), want_w, "weights")
    comparison = PresetComparison([NamedConfig("a", {}, plan)])
    comparison.update(view.batch)
    geometric = options.get("level") == "sequence" and options.get("metric", "ratio") == "ratio"
    raw = []
    for row in rows:
        ells = ref._ells(row)
        geo = ref._exp(ref._sample_mean(ells))
        raw.append([geo] * len(ells) if geometric else [ref._exp(e) for e in ells])
    for figure, value in ref.summary(rows, raw, want_w, want_keep).items():
        got = comparison.summary("a")[figure]
        if value is None:
            assert got is None, figure
        else:
            close(got, value, figure)
    logged = comparison.metrics("a")
    assert set(logged) == set(want_metrics)
    for metric, value in want_metrics.items():
        close(logged[metric], value, metric)


@pytest.mark.parametrize("name", list(open_instruct.MODES))
def test_open_instruct_rho_modes(name: str) -> None:
    """open-instruct's ρ correction: weights, summary figures (nothing leaves the loss mask: a
    dropped token's loss is zeroed) and the val/rho_ metrics."""
    options = open_instruct.MODES[name][1]
    preset = next(p for p in open_instruct.PRESETS if p.name == f"open_instruct:{name}")
    rows = make_steps(4, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    clamp = (options.clamp_lower, options.clamp_upper)
    drop = (options.mask_lower, options.mask_upper)
    want_w, clipped, lows, highs = ref.open_instruct_rho(rows, clamp, drop, options.sequence_level)
    assert preset.plan.weights is not None
    assert_nested(tokens_of(view, preset.plan.weights.applied(view), rows), want_w, "weights")
    comparison = PresetComparison([NamedConfig(name, {}, preset.plan)])
    comparison.update(view.batch)
    raw = []
    for row in rows:
        ells = [max(-10.0, min(10.0, e)) for e in ref._ells(row)]
        geo = math.exp(ref._sample_mean(ells))
        raw.append([geo] * len(ells) if options.sequence_level else [math.exp(e) for e in ells])
    keep = [[1] * len(w) for w in want_w]
    for figure, value in ref.summary(rows, raw, want_w, keep).items():
        got = comparison.summary(name)[figure]
        if value is None:
            assert got is None, figure
        else:
            close(got, value, figure)
    n = sum(len(w) for w in want_w)

    def share(flags: list[list[bool]]) -> float:
        return sum(1 for f in flags for x in f if x) / n

    want = {
        "open_instruct/val/rho_weight": math.fsum(x for w in want_w for x in w) / n,
        "open_instruct/val/rho_clipfrac": share(clipped),
        "open_instruct/val/rho_drop_frac": share(lows) + share(highs),
        "open_instruct/val/rho_drop_low_frac": share(lows),
        "open_instruct/val/rho_drop_high_frac": share(highs),
    }
    logged = comparison.metrics(name)
    assert set(logged) == set(want)
    for metric, value in want.items():
        close(logged[metric], value, metric)


@pytest.mark.parametrize("threshold", [0.1, 0.02])
def test_prime_rl_ipo(threshold: float) -> None:
    plan = prime_rl.ipo_plan(threshold)
    rows = make_steps(13, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    want_w, want_keep, want_metrics = modes_ref.prime_ipo(rows, threshold)
    keep = keep_mask(view, plan.rules)
    assert keep is not None
    got_keep = tokens_of(view, keep.astype(float), rows)
    assert_nested(got_keep, [[float(k) for k in row] for row in want_keep], "keep")
    comparison = PresetComparison([NamedConfig("p", {}, plan)])
    comparison.update(view.batch)
    raw = [[ref._exp(e) for e in ref._ells(row)] for row in rows]
    for figure, value in ref.summary(rows, raw, want_w, want_keep).items():
        got = comparison.summary("p")[figure]
        if value is None:
            assert got is None, figure
        else:
            close(got, value, figure)
    logged = comparison.metrics("p")
    assert set(logged) == set(want_metrics)
    for metric, value in want_metrics.items():
        close(logged[metric], value, metric)


@pytest.mark.parametrize("name", list(openrlhf.GATES))
def test_openrlhf_divergence_gates(name: str) -> None:
    """OpenRLHF's binary-KL and TV gates (a trust region: mask only, an upper bound)."""
    level, gating, delta, _ = openrlhf.GATES[name]
    plan = openrlhf.plan(level, "mask", 0.0, delta, gating)
    rows = make_steps(14, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    want_w, want_metrics = modes_ref.openrlhf_gate(rows, level, gating, delta)
    assert plan.weights is not None
    assert_nested(tokens_of(view, plan.weights.applied(view), rows), want_w, "weights")
    comparison = PresetComparison([NamedConfig(name, {}, plan)])
    comparison.update(view.batch)
    raw = [[ref._exp(e) for e in ref._ells(row)] for row in rows]
    keep = [[1] * len(w) for w in want_w]
    for figure, value in ref.summary(rows, raw, want_w, keep).items():
        got = comparison.summary(name)[figure]
        if value is None:
            assert got is None, figure
        else:
            close(got, value, figure)
    logged = comparison.metrics(name)
    assert set(logged) == set(want_metrics)
    for metric, value in want_metrics.items():
        close(logged[metric], value, metric)


def _row_level_plans() -> list[ModePlan]:
    """Every framework mode that is one value per row, and sequence- and geometric-level
    weights renormalised over the batch (token and sequence means), with and without rules."""
    from rcdiag.correction.external import Band, Ratio, Veto, Weights
    from rcdiag.frameworks import FRAMEWORKS

    plans = [
        p.plan
        for f in FRAMEWORKS.values()
        for p in f.presets
        if isinstance(p.plan, ModePlan) and modes_module._row_level(p.plan)
    ]
    for level in ("sequence", "geometric"):
        ratio = Ratio(level, 20.0)  # type: ignore[arg-type]
        weights = Weights(ratio, "clip", 0.5, 2.0, zero=(Band(ratio, 0.1, 50.0),))
        for normalize in ("token", "sequence"):
            plans.append(ModePlan("test", weights, (), normalize))  # type: ignore[arg-type]
            plans.append(ModePlan("test", weights, (Veto(1e-4), Band(ratio, 0.2, 5.0)), normalize))  # type: ignore[arg-type]
    return plans


@pytest.mark.parametrize("seed", [0, 3])
def test_row_level_modes_sum_per_row_as_over_tokens(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row-level mode's statistics from one value per row equal those over its token arrays
    (holes, empty rows, |ℓ| up to 30, several steps in a batch)."""
    plans = _row_level_plans()
    assert len(plans) > 8
    dump = make_steps(seed, steps=3)
    tagged = [(s, r) for s, rows in dump.items() for r in rows]
    batch = ragged([r for _, r in tagged], [s for s, _ in tagged])
    for plan in plans:
        outcome = plan.outcome()
        per_row = TokenView(batch)
        got = {**outcome.row_stats(per_row), **outcome.run_stats(per_row)}
        with monkeypatch.context() as patched:
            patched.setattr(modes_module, "_row_level", lambda plan: False)
            tokens = TokenView(batch)
            want = {**outcome.row_stats(tokens), **outcome.run_stats(tokens)}
        assert got.keys() == want.keys()
        for name, values in want.items():
            kept_any = got["kept_raw"] if name == "kept_applied_max" else None
            for k, (g, w) in enumerate(zip(got[name].tolist(), values.tolist(), strict=True)):
                if kept_any is not None and want["kept_applied"][k] == 0:
                    continue  # no kept token: the largest is never read
                close(g, w, f"{plan} {name}[{k}]")
