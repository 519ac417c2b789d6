"""Other frameworks' metrics and correction modes against the independent reference
(tests/reference_frameworks.py) and hand-computed cases (docs/frameworks.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference_frameworks as ref

from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.external import keep_mask, ratio_tokens
from rcdiag.correction.view import TokenView
from rcdiag.frameworks import (
    FRAMEWORKS,
    parse_frameworks,
)
from rcdiag.frameworks import openrlhf as openrlhf_module
from rcdiag.frameworks import slime as slime_module
from rcdiag.frameworks import trl as trl_module
from rcdiag.frameworks.analysis import FrameworkMetrics
from rcdiag.metrics.analysis import OffPolicyAnalysis
from rcdiag.metrics.ragged import RaggedBatch

Row = tuple[list[float], list[float], list[int]]
REL = 1e-6


def make_steps(seed: int, steps: int = 3, extreme: bool = True) -> dict[int, list[Row]]:
    """Rows per step: varied lengths (some empty), masked holes holding garbage, and — with
    ``extreme`` — a few tokens with |ℓ| up to 30 (beyond every ±20 clamp)."""
    rng = np.random.default_rng(seed)
    out: dict[int, list[Row]] = {}
    for step in range(steps):
        rows: list[Row] = []
        for _ in range(int(rng.integers(3, 9))):
            n = int(rng.integers(0, 12))
            rollout = -rng.exponential(1.0, n)
            ell = rng.normal(0.0, 0.15, n)
            if extreme and n and rng.random() < 0.3:
                ell[rng.integers(0, n)] = rng.choice([-30.0, -12.0, 8.0, 25.0])
            old = rollout + ell
            mask = (rng.random(n) > 0.15).astype(int)
            rollout = np.where(mask == 1, rollout, np.nan)  # garbage under the mask
            rows.append((rollout.tolist(), old.tolist(), mask.tolist()))
        rows.append(([], [], []))  # an empty row in every step
        out[step] = rows
    return out


def ragged(rows: list[Row], steps: list[int]) -> RaggedBatch:
    lengths = [len(r[0]) for r in rows]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])

    def flat(i: int, dtype: type) -> np.ndarray:
        parts = [np.asarray(r[i], dtype=dtype) for r in rows]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    return RaggedBatch(
        rollout=flat(0, float),
        old=flat(1, float),
        mask=flat(2, float).astype(bool),
        offsets=offsets,
        steps=np.asarray(steps, dtype=np.int64),
    )


def batches(dump: dict[int, list[Row]], chunk: int = 5) -> list[RaggedBatch]:
    """The rows of every step interleaved, cut into batches of ``chunk`` rows."""
    tagged = [(s, r) for s, rows in dump.items() for r in rows]
    tagged = tagged[::2] + tagged[1::2]
    return [
        ragged([r for _, r in tagged[i : i + chunk]], [s for s, _ in tagged[i : i + chunk]])
        for i in range(0, len(tagged), chunk)
    ]


def close(got: float | None, want: float | None, where: str) -> None:
    if want is None:  # the framework logs nothing there
        assert got is None, (where, got)
        return
    assert got is not None, where
    if math.isinf(want) or math.isnan(want):
        assert got == want or (math.isnan(want) and math.isnan(got)), (where, got, want)
        return
    assert math.isclose(got, want, rel_tol=REL, abs_tol=1e-12), (where, got, want)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("framework", sorted(ref.METRICS))
def test_metrics_match_reference(framework: str, seed: int) -> None:
    dump = make_steps(seed)
    analysis = OffPolicyAnalysis()
    chosen = parse_frameworks(framework)
    metrics = FrameworkMetrics(chosen, analysis.stats)
    for batch in batches(dump):
        analysis.update(batch)
        metrics.update(batch)
    (result,) = metrics.results()
    everything = [r for rows in dump.values() for r in rows]
    for name, want in ref.METRICS[framework](everything).items():
        close(result.overall[name], want, f"overall {name}")
    for step in result.steps:
        for name, want in ref.METRICS[framework](dump[step.step]).items():
            close(step.metrics[name], want, f"step {step.step} {name}")


def test_every_framework_is_referenced() -> None:
    assert set(ref.METRICS) == set(FRAMEWORKS)


def test_hand_computed_metrics() -> None:
    """Two rows: ℓ = ln 2 and 0 (row 1), ℓ = −ln 2 (row 2); rollout log-probs −1."""
    ln2 = math.log(2.0)
    rows: list[Row] = [([-1.0, -1.0], [-1.0 + ln2, -1.0], [1, 1]), ([-1.0], [-1.0 - ln2], [1])]
    analysis = OffPolicyAnalysis()
    metrics = FrameworkMetrics(list(FRAMEWORKS.values()), analysis.stats)
    batch = ragged(rows, [0, 0])
    analysis.update(batch)
    metrics.update(batch)
    got = {k: v for r in metrics.results() for k, v in r.overall.items()}
    # |ℓ| = (ln2, 0, ln2): token mean 2 ln2 / 3, max ln2
    assert math.isclose(got["trl/sampling/sampling_logp_difference/mean"], 2 * ln2 / 3)
    # sequence_mask, C = 3: row ratios exp(ln2) = 2 and exp(−ln2) = ½ (both ≤ 3)
    assert math.isclose(got["trl/sampling/importance_sampling_ratio/mean"], 1.25)
    assert math.isclose(got["trl/sampling/importance_sampling_ratio/min"], 0.5)
    # slime: per-sample means ln2/2 and ln2, averaged over 2 samples
    assert math.isclose(got["slime/train_rollout_logprob_abs_diff"], 0.75 * ln2)
    # NeMo-RL: exp|ℓ| = 2, 1, 2 → 5/3; k3(ln2) = 1 − ln2, k3(0) = 0, k3(−ln2) = ln2 − ½
    assert math.isclose(got["nemo_rl/token_mult_prob_error"], 5 / 3)
    assert math.isclose(got["nemo_rl/gen_kl_error"], (0.5) / 3)
    # ρ = 2, 1, ½: the token mean of the IS weight; per row mean e^|ℓ| = 1.5 and 2
    assert math.isclose(got["nemo_rl/sampling_importance_ratio"], 3.5 / 3)
    assert math.isclose(got["nemo_rl/max_seq_mult_prob_error"], 2.0)
    assert math.isclose(got["nemo_rl/mean_seq_mult_prob_error"], 1.75)
    assert math.isclose(got["nemo_rl/min_seq_mult_prob_error"], 1.5)
    assert math.isclose(got["prime_rl/mismatch_kl/all/mean"], 0.5 / 3)
    assert math.isclose(got["prime_rl/mismatch_kl/all/max"], 1 - ln2)
    # OpenRLHF: mean(rollout − old) = (−ln2 + 0 + ln2)/3 = 0; open-instruct weights it by e^−1
    assert abs(got["openrlhf/vllm_kl"]) < 1e-15
    assert abs(got["open_instruct/debug/vllm_local_reverse_kl"]) < 1e-15
    # ρ ≤ 2 everywhere: nothing clamped at 2, nothing over AReaL's 5
    assert math.isclose(got["open_instruct/val/rho_weight"], 3.5 / 3)
    assert got["open_instruct/val/rho_clipfrac"] == 0.0
    assert math.isclose(got["areal/behave_imp_weight/avg"], (2 + 1 + 0.5) / 3)
    assert math.isclose(got["areal/behave_imp_weight/min"], 0.5)
    assert got["areal/rs_filtered_fraction"] == 0
    assert math.isclose(got["areal/behave_approx_kl/max"], ln2)
    assert math.isclose(got["skyrl/is_ratio_max"], 2.0)
    assert math.isclose(got["skyrl/policy/rollout_train_logprobs_abs_diff_mean"], 2 * ln2 / 3)
    assert got["skyrl/policy/rollout_train_logprobs_abs_diff_min"] == 0.0


def test_hand_computed_weighted_metrics() -> None:
    """One row: rollout −0.5 and −2, ℓ = −0.1 and 0.3 (and ρ = e^0.3 < 2, e^−0.1 > ½).

    open-instruct's reverse KL weights r − o = −ℓ by e^r: (e^−0.5·0.1 − e^−2·0.3) / 2. AReaL at an
    upper bound of 5 keeps both; with ℓ = 2 on the second token (ρ = e² > 5) it drops it from
    both the numerator and the denominator."""
    rows: list[Row] = [([-0.5, -2.0], [-0.6, -1.7], [1, 1])]
    got = _overall(rows, "open_instruct,areal")
    want = (math.exp(-0.5) * 0.1 - math.exp(-2.0) * 0.3) / 2
    assert math.isclose(got["open_instruct/debug/vllm_local_reverse_kl"], want, rel_tol=1e-9)
    got = _overall([([-0.5, -2.0], [-0.6, 0.0], [1, 1])], "areal,open_instruct")
    assert math.isclose(got["areal/behave_imp_weight/avg"], math.exp(-0.1))
    assert math.isclose(got["areal/behave_approx_kl/avg"], -0.1)
    assert got["areal/rs_filtered_fraction"] == 0.5
    # open-instruct clamps ρ = e² at 2: weight (e^−0.1 + 2)/2, one token of two clipped
    assert math.isclose(got["open_instruct/val/rho_weight"], (math.exp(-0.1) + 2) / 2)
    assert got["open_instruct/val/rho_clipfrac"] == 0.5


def _overall(rows: list[Row], names: str) -> dict[str, float | None]:
    analysis = OffPolicyAnalysis()
    metrics = FrameworkMetrics(parse_frameworks(names), analysis.stats)
    batch = ragged(rows, [0] * len(rows))
    analysis.update(batch)
    metrics.update(batch)
    return {k: v for r in metrics.results() for k, v in r.overall.items()}


def test_a_step_without_valid_tokens_has_null_metrics() -> None:
    rows: list[Row] = [([-1.0], [-2.0], [0])]
    analysis = OffPolicyAnalysis()
    metrics = FrameworkMetrics(list(FRAMEWORKS.values()), analysis.stats)
    good = ragged([([-1.0], [-1.5], [1])], [1])
    for batch in (ragged(rows, [0]), good):
        analysis.update(batch)
        metrics.update(batch)
    for result in metrics.results():
        empty = next(s for s in result.steps if s.step == 0)
        assert all(v is None for v in empty.metrics.values())


def test_ci_gates_are_judged() -> None:
    ell = 0.2  # exp(0.2) = 1.22 > 1.05; k3 = 0.0214 > 1e-3; |Δ| = 0.2 > 0.1
    rows: list[Row] = [([-1.0, -1.0], [-1.0 + ell, -1.0 - ell], [1, 1])]
    analysis = OffPolicyAnalysis()
    metrics = FrameworkMetrics(parse_frameworks("slime,nemo_rl"), analysis.stats)
    batch = ragged(rows, [0])
    analysis.update(batch)
    metrics.update(batch)
    statuses = {c.metric: c.status for r in metrics.results() for c in r.checks}
    assert statuses == {
        "slime/train_rollout_logprob_abs_diff": "act",
        "nemo_rl/token_mult_prob_error": "act",
        "nemo_rl/gen_kl_error": "act",
    }


# ------------------------------------------------------------------------------------------------
# Correction modes: weights and masks against each framework's formula


def tokens_of(view: TokenView, values: np.ndarray, rows: list[Row]) -> list[list[float]]:
    """Per row, the values at valid positions."""
    out = []
    for i in range(len(rows)):
        lo, hi = view.offsets[i], view.offsets[i + 1]
        out.append(values[lo:hi][view.mask[lo:hi]].tolist())
    return out


def assert_nested(got: list[list[float]], want: list[list[float]], what: str) -> None:
    assert [len(g) for g in got] == [len(w) for w in want], what
    for g_row, w_row in zip(got, want, strict=True):
        for g, w in zip(g_row, w_row, strict=True):
            close(g, w, what)


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("mode", trl_module.MODES)
@pytest.mark.parametrize("low", [None, 0.5])
def test_trl_mode_weights(mode: str, seed: int, low: float | None) -> None:
    rows = make_steps(seed, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    weights = trl_module.mode_weights(mode, 3.0, low)
    want = ref.trl_ratios(rows, mode, 3.0, low)
    if mode.startswith("sequence"):
        assert_nested([[w] for w in weights.rows(view).tolist()], want, mode)
        want = [r * len(ref._ells(row)) for r, row in zip(want, rows, strict=True)]
    assert_nested(tokens_of(view, weights.applied(view), rows), want, mode)


@pytest.mark.parametrize("icepop", [False, True])
def test_slime_tis_and_icepop_weights(icepop: bool) -> None:
    rows = make_steps(4, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    plan = slime_module.icepop_plan(0.5, 2.0) if icepop else slime_module.tis_plan(0.5, 2.0)
    assert plan.weights is not None
    got = tokens_of(view, plan.weights.applied(view), rows)
    assert_nested(got, ref.slime_tis_weights(rows, 0.5, 2.0, icepop), "slime tis")


MIS_CASES = [
    {},
    {"tis_mode": "clip", "use_rs": False},
    {"tis_mode": "mask", "use_rs": False, "tis_batch_normalize": False},
    {"tis_level": "sequence", "use_rs": False},
    {
        "tis_level": "geometric",
        "tis_mode": "mask",
        "tis_lower_bound": 0.95,
        "tis_upper_bound": 1.05,
        "use_rs": False,
        "tis_batch_normalize": False,
    },
    {"rs_veto_threshold": 1e-4},
    {"rs_level": "sequence", "rs_lower_bound": 0.2, "rs_upper_bound": 5.0},
    {"rs_level": "geometric", "rs_lower_bound": 0.9, "rs_upper_bound": 1.1},
    {"tis_level": "sequence", "rs_level": "token", "rs_veto_threshold": 1e-5},
    {"tis_mode": "clip", "rs_veto_threshold": 1e-4, "tis_batch_normalize": False},
]


@pytest.mark.parametrize("seed", [11, 2], ids=["low outliers", "high outliers too"])
@pytest.mark.parametrize("case", range(len(MIS_CASES)))
def test_slime_mis_weights_and_masks(case: int, seed: int) -> None:
    options = slime_module.Mis(**MIS_CASES[case])
    rows = make_steps(seed, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    plan = slime_module.mis_plan(options)
    want_w, want_keep, want_mu = ref.slime_mis(rows, options.config())
    assert plan.weights is not None
    assert_nested(tokens_of(view, plan.weights.applied(view), rows), want_w, "mis weights")
    keep = keep_mask(view, plan.rules)
    got_keep = tokens_of(
        view, np.ones(view.mask.size) if keep is None else keep.astype(float), rows
    )
    assert_nested(got_keep, [[float(k) for k in row] for row in want_keep], "mis keep")
    comparison = PresetComparison([NamedConfig("m", options.config(), plan)])
    comparison.update(view.batch)
    raw = tokens_of(view, ratio_tokens(view, plan.weights.ratio), rows)
    want = ref.summary(rows, raw, want_w, want_keep, want_mu)
    got = comparison.summary("m")
    for figure, value in want.items():
        if value is None:
            assert got[figure] is None, figure
        else:
            close(got[figure], value, figure)
    logged = comparison.metrics("m")
    want_logged = ref.slime_mis_metrics(rows, options.config())
    assert set(logged) == set(want_logged)  # the names mis.py logs, and only those
    for name, value in want_logged.items():
        close(logged[name], value, name)
    # in a pass the view holds the analysis's row sums (Σk3, Σw² read from them): the same metrics
    from rcdiag.metrics.offpolicy import row_statistics

    shared = PresetComparison([NamedConfig("m", options.config(), plan)])
    batch = view.batch
    shared.update(batch, TokenView(batch, row_statistics(batch, batch.log_ratio, 1e-4)))
    for name, value in want_logged.items():
        close(shared.metrics("m")[name], value, f"{name} (shared row sums)")


@pytest.mark.parametrize("kind", ["tis", "icepop", "seq-mask-tis"])
def test_openrlhf_weights(kind: str) -> None:
    rows = make_steps(8, steps=1)[0]
    view = TokenView(ragged(rows, [0] * len(rows)))
    level, mode, _ = openrlhf_module.MODES[kind]
    weights = openrlhf_module.weights(level, mode, 0.5, 5.0)
    got = tokens_of(view, weights.applied(view), rows)
    assert_nested(got, ref.openrlhf_weights(rows, kind, 0.5, 5.0), kind)
    comparison = PresetComparison([NamedConfig("o", {}, openrlhf_module.plan(level, mode))])
    comparison.update(view.batch)
    logged = comparison.metrics("o")
    want = ref.openrlhf_logged(rows, kind, 0.5, 5.0)
    assert set(logged) == set(want)
    for name, value in want.items():
        close(logged[name], value, name)


@pytest.mark.parametrize("seed", [0, 3])
def test_framework_presets_summaries_per_step(seed: int) -> None:
    """Every TRL and OpenRLHF mode's summary figures, per step and overall, streamed in chunks."""
    dump = make_steps(seed)
    ratio_gates = [
        p for p in openrlhf_module.PRESETS if p.name.split(":")[1] in openrlhf_module.MODES
    ]
    presets = [*trl_module.PRESETS, *ratio_gates]
    comparison = PresetComparison([NamedConfig(p.name, p.config, p.plan) for p in presets])
    for batch in batches(dump):
        comparison.update(batch)
    for preset in presets:
        for step, rows in [(None, [r for rs in dump.values() for r in rs]), *dump.items()]:
            if preset.name.startswith("trl"):
                mode = preset.config["vllm_importance_sampling_mode"]
                low = preset.config.get("vllm_importance_sampling_clip_min")
                w = ref.trl_ratios(rows, mode, 3.0, low)
                if mode.startswith("sequence"):
                    w = [r * len(ref._ells(row)) for r, row in zip(w, rows, strict=True)]
                level = "sequence" if mode.startswith("sequence") else "token"
            else:
                kind = preset.name.split(":")[1]
                w = ref.openrlhf_weights(rows, kind, 0.5, 5.0)
                level = "token"
            raw = []
            for row in rows:
                ells = ref._ells(row)
                if level == "sequence":
                    raw.append([ref._exp(math.fsum(ells))] * len(ells))
                else:
                    raw.append([ref._exp(e) for e in ells])
            keep = [[1] * len(ref._ells(row)) for row in rows]
            want = ref.summary(rows, raw, w, keep)
            got = comparison.summary(preset.name, step)
            for figure, value in want.items():
                if value is None:
                    assert got[figure] is None
                else:
                    close(got[figure], value, f"{preset.name} {step} {figure}")


def test_trl_mode_metrics_follow_the_mode() -> None:
    rows = make_steps(2, steps=1)[0]
    batch = ragged(rows, [0] * len(rows))
    presets = trl_module.PRESETS
    comparison = PresetComparison([NamedConfig(p.name, p.config, p.plan) for p in presets])
    comparison.update(batch)
    for preset in presets:
        mode = preset.config["vllm_importance_sampling_mode"]
        low = preset.config.get("vllm_importance_sampling_clip_min")
        want = ref.trl(rows, mode, 3.0, low)
        got = comparison.metrics(preset.name)
        assert set(got) == set(want)  # no verl metric for another framework's mode
        for name, value in want.items():
            close(got[name], value, f"{mode} {name}")


@pytest.mark.parametrize("seed", [6, 2], ids=["nothing clipped", "ratios above the cap"])
def test_slime_tis_metrics(seed: int) -> None:
    rows = make_steps(seed, steps=1)[0]
    batch = ragged(rows, [0] * len(rows))
    plan = slime_module.tis_plan(0.0, 2.0)
    comparison = PresetComparison([NamedConfig("t", {}, plan)])
    comparison.update(batch)
    got = comparison.metrics("t")
    tis, clip, dev = [], [], []
    for row in rows:
        ratios = [ref._exp(e) for e in ref._ells(row)]
        tis.append(ref._sample_mean(ratios))
        clip.append(ref._sample_mean([float(min(max(r, 0.0), 2.0) != r) for r in ratios]))
        dev.append(ref._sample_mean([abs(r - 1.0) for r in ratios]))
    close(got["slime/tis"], math.fsum(tis) / len(rows), "tis")
    close(got["slime/tis_clipfrac"], math.fsum(clip) / len(rows), "tis_clipfrac")
    close(got["slime/tis_abs"], math.fsum(dev) / len(rows), "tis_abs")
    # the built-in TIS logs no mis_ metric (only the MIS helper does)
    names = {"train_rollout_logprob_abs_diff", "tis", "tis_clipfrac", "tis_abs"}
    assert set(got) == {f"slime/{name}" for name in names}
