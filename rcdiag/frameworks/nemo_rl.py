"""NVIDIA NeMo-RL: ``token_mult_prob_error``, ``gen_kl_error``, ``policy_kl_error``,
``js_divergence_error``, ``sampling_importance_ratio`` and the sequence-level
``{max,mean,min}_seq_mult_prob_error``, all logged on every GRPO step.

Read on NeMo-RL's main branch (NVIDIA-NeMo/RL) at commit 7ea279a (2026-08-22):
``nemo_rl/algorithms/loss/loss_functions.py`` (``ClippedPGLossFn``: the diagnostics, the IS weights
and their ``truncated_importance_sampling_*`` options), ``nemo_rl/algorithms/grpo.py``
(``compute_and_apply_seq_logprob_error_masking``) and ``nemo_rl/algorithms/utils.py``
(``calculate_kl``); its CI gates from ``tests/functional/`` and ``tests/test_suites/llm/``
(docs/frameworks.md, "NeMo-RL").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Source, abs_log_ratio, prefixed, rho
from rcdiag.frameworks.nemo_rl_modes import PRESETS
from rcdiag.metrics.grouped import Kind

ID = "nemo_rl"
# Its CI gates are bands of the metric registry (rcdiag/assess/judge.py, FRAMEWORK_RECORDS).

PIN = Pin("NVIDIA-NeMo/RL", "main", "7ea279abfbeb698b092856d0dab61e7cf39bc909", "2026-08-22")

SOURCES = (
    Source(
        PIN.repo,
        "nemo_rl/algorithms/loss/loss_functions.py",
        PIN.commit,
        "ClippedPGLossFn: token_mult_prob_error, gen_kl_error, policy_kl_error, "
        "js_divergence_error, sampling_importance_ratio (masked means over the step's valid "
        "tokens); truncated_importance_sampling_type / _ratio / _ratio_min",
    ),
    Source(
        PIN.repo,
        "nemo_rl/algorithms/grpo.py",
        PIN.commit,
        "compute_and_apply_seq_logprob_error_masking: {max,mean,min}_seq_mult_prob_error; "
        "grpo.seq_logprob_error_threshold",
    ),
    Source(
        PIN.repo,
        "nemo_rl/algorithms/utils.py",
        PIN.commit,
        "calculate_kl: logr = reference − logprobs; k3 = e^logr − 1 − logr (default kl_type k3)",
    ),
    Source(
        PIN.repo,
        "tests/functional/grpo_dynamo.sh",
        PIN.commit,
        "CI gate: max over steps of train/token_mult_prob_error < 1.05 (25 functional and recipe "
        "tests; tests/functional/grpo.sh no longer has it)",
    ),
    Source(
        PIN.repo,
        "tests/test_suites/llm/dapo-nanov3.5-30BA3B-4n8g-automodel.sh",
        PIN.commit,
        "recipe gate: mean train/gen_kl_error < 1e-3 (the strictest of the 48 recipes gating it; "
        "tests/functional/grpo.sh gates the max below 2e-3)",
    ),
)

LN2 = math.log(2.0)


@dataclass(frozen=True)
class NemoLogged(Component):
    """Token means over the step's valid tokens (NeMo-RL normalises every micro-batch by the
    global valid-token count and sums): e^|ℓ|; k3(ℓ) (generation against training, = verl's
    k3_kl); k3(−ℓ) (training against generation); the Jensen-Shannon estimate through the
    mixture M = ½(p_train + p_rollout); and ``sampling_importance_ratio``, the token mean of the
    IS weight e^ℓ (unclamped; an overflow to inf counts 0, NeMo-RL's nan_to_num).

    And per row i with valid tokens, the mean of e^|ℓ| over its tokens: ``max_``, ``mean_``,
    ``min_seq_mult_prob_error`` are the maximum, mean and minimum over those rows."""

    kinds: ClassVar[dict[str, Kind]] = {
        "exp_abs": "sum",
        "reverse_k3": "sum",
        "js": "sum",
        "is_weight": "sum",
        "seq_mult_sum": "sum",
        "seq_mult_max": "max",
        "seq_mult_min": "min",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        ell = view.log_ratio
        with np.errstate(over="ignore", invalid="ignore"):
            exp_abs = view.row_sum(np.expm1(abs_log_ratio(view))) + view.n
            reverse = view.row_sum(np.expm1(-ell) + ell)
            old, rollout = view.old, view.rollout
            log_mixture = np.logaddexp(old, rollout) - LN2
            a, b = old - log_mixture, rollout - log_mixture
            js = 0.5 * (np.expm1(a) - a) + 0.5 * (np.expm1(b) - b)
            js = js if view.batch.all_valid else np.where(view.mask, js, 0.0)
            weight = rho(view)
            weight = np.where(np.isinf(weight), 0.0, weight)
            row_mult = exp_abs / np.maximum(view.n, 1.0)
        return {
            "exp_abs": exp_abs,
            "reverse_k3": reverse,
            "js": view.row_sum(js),
            "is_weight": view.row_sum(weight),
            "seq_mult_sum": np.where(view.nonempty, row_mult, 0.0),
            "seq_mult_max": np.where(view.nonempty, row_mult, -np.inf),
            "seq_mult_min": np.where(view.nonempty, row_mult, np.inf),
        }

    def metrics(self, get: Getter) -> Metrics:
        valid = get("valid_tokens")
        return prefixed(
            ID,
            {
                "token_mult_prob_error": get("exp_abs") / valid,
                "gen_kl_error": get("k3") / valid,
                "policy_kl_error": get("reverse_k3") / valid,
                "js_divergence_error": get("js") / valid,
                "sampling_importance_ratio": get("is_weight") / valid,
                "max_seq_mult_prob_error": get("seq_mult_max"),
                "mean_seq_mult_prob_error": get("seq_mult_sum") / get("nonempty_rows"),
                "min_seq_mult_prob_error": get("seq_mult_min"),
            },
        )


FRAMEWORK = Framework(
    id=ID,
    title="NeMo-RL",
    sources=SOURCES,
    pin=PIN,
    metrics=(NemoLogged(),),
    aggregation=(
        "token means over the step's (global batch's) valid tokens, and the sequence statistics "
        "over its rows with valid tokens: exact (sampling_importance_ratio as with the default "
        "token-level weights; sequence_level_importance_ratios changes it)"
    ),
    presets=PRESETS,
    aliases=("nemo-rl", "nemorl"),
)
