"""NVIDIA NeMo-RL: ``token_mult_prob_error``, ``gen_kl_error``, ``policy_kl_error``,
``js_divergence_error`` (metrics only: rcdiag has not read NeMo-RL's correction options).

Read from NVIDIA/NeMo-RL's clipped policy-gradient loss (``nemo_rl/algorithms/loss_functions.py``,
the diagnostic-metrics helper of the 2026 refactor) and ``calculate_kl`` in
``nemo_rl/algorithms/utils.py``; its CI gates from ``tests/functional/grpo.sh`` and
``tests/test_suites/llm/`` (docs/frameworks.md, "NeMo-RL").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Source, abs_log_ratio, prefixed
from rcdiag.metrics.grouped import Kind

ID = "nemo_rl"
# Its CI gates are bands of the metric registry (rcdiag/assess/judge.py, FRAMEWORK_RECORDS).

SOURCES = (
    Source(
        "NVIDIA/NeMo-RL",
        "nemo_rl/algorithms/loss_functions.py",
        None,
        "ClippedPGLossFn: token_mult_prob_error, gen_kl_error, policy_kl_error, "
        "js_divergence_error (masked means over the step's valid tokens)",
    ),
    Source(
        "NVIDIA/NeMo-RL",
        "nemo_rl/algorithms/utils.py",
        None,
        "calculate_kl: logr = reference − logprobs; k3 = e^logr − 1 − logr (default kl_type k3)",
    ),
    Source(
        "NVIDIA/NeMo-RL",
        "tests/functional/grpo.sh",
        "2d5a89cabf0a0c7fb737aa5346f40b3a6928e92b",
        "CI gate: max over steps of train/token_mult_prob_error < 1.05",
    ),
    Source(
        "NVIDIA/NeMo-RL",
        "tests/test_suites/llm/grpo-llama3.2-1b-instruct-1n8g-fsdp2tp1.sh",
        "f656e495e2b46d0d11b86b975776ae1727396d5c",
        "nightly gate: mean train/token_mult_prob_error < 1.1",
    ),
)

LN2 = math.log(2.0)


@dataclass(frozen=True)
class NemoLogged(Component):
    """Token means over the step's valid tokens (NeMo-RL normalises every micro-batch by the
    global valid-token count and sums): e^|ℓ|; k3(ℓ) (generation against training, = verl's
    k3_kl); k3(−ℓ) (training against generation); and the Jensen-Shannon estimate through the
    mixture M = ½(p_train + p_rollout)."""

    kinds: ClassVar[dict[str, Kind]] = {"exp_abs": "sum", "reverse_k3": "sum", "js": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        ell = view.log_ratio
        with np.errstate(over="ignore", invalid="ignore"):
            exp_abs = view.row_sum(np.expm1(abs_log_ratio(view))) + view.n
            reverse = view.row_sum(np.expm1(-ell) + ell)
            old, rollout = view.batch.old, view.batch.rollout
            log_mixture = np.logaddexp(old, rollout) - LN2
            a, b = old - log_mixture, rollout - log_mixture
            js = 0.5 * (np.expm1(a) - a) + 0.5 * (np.expm1(b) - b)
            js = js if view.batch.all_valid else np.where(view.mask, js, 0.0)
        return {"exp_abs": exp_abs, "reverse_k3": reverse, "js": view.row_sum(js)}

    def metrics(self, get: Getter) -> Metrics:
        valid = get("valid_tokens")
        return prefixed(
            ID,
            {
                "token_mult_prob_error": get("exp_abs") / valid,
                "gen_kl_error": get("k3") / valid,
                "policy_kl_error": get("reverse_k3") / valid,
                "js_divergence_error": get("js") / valid,
            },
        )


FRAMEWORK = Framework(
    id=ID,
    title="NeMo-RL",
    sources=SOURCES,
    metrics=(NemoLogged(),),
    aggregation="a token mean over the step's (global batch's) valid tokens",
    aliases=("nemo-rl", "nemorl"),
)
