"""inclusionAI AReaL: the decoupled-PPO behaviour statistics, and its rejection sampling as dry-runs.

Read on AReaL's main branch at commit 4aef98d (2026-05-21): ``areal/utils/functional/functional.py``
(``apply_rejection_sampling`` and ``ppo_actor_loss_fn``: behave_imp_weight = exp(proximal −
behaviour log-probs), zeroed where rejection sampling drops the token; behave_mask = weight > 0 on
the updated loss mask; behave_approx_kl = the log ratio there), ``areal/trainer/ppo/actor.py``
(``stats_tracker.stat(…, denominator="unclipped_behave_tokens")`` and ``rs_filtered_fraction``),
``areal/utils/stats_tracker.py`` (avg / min / max over the denominator's tokens, pooled over the
step's micro-batches) and ``areal/api/cli_args.py`` (``RejectionSamplingConfig``: level token,
action mask, metric ratio, upper 5.0, lower None). AReaL logs the statistics only with
``actor.rejection_sampling`` set (since April 2026 its default is None); rcdiag computes them at
that configuration's defaults, the old ``behave_imp_weight_cap`` 5.0 with token_mask.
"""

from __future__ import annotations

from rcdiag.frameworks.areal_modes import PRESETS, ArealLogged
from rcdiag.frameworks.base import Framework, Pin, Source

ID = "areal"
PIN = Pin("inclusionAI/AReaL", "main", "4aef98d8d818af55b43621aaadba047ae10f4e77", "2026-05-21")


FRAMEWORK = Framework(
    id=ID,
    title="AReaL",
    sources=(
        Source(
            PIN.repo,
            "areal/utils/functional/functional.py",
            PIN.commit,
            "apply_rejection_sampling; ppo_actor_loss_fn: behave_imp_weight, behave_approx_kl, "
            "behave_mask",
        ),
        Source(
            PIN.repo,
            "areal/trainer/ppo/actor.py",
            PIN.commit,
            "stats_tracker.stat(behave_imp_weight, behave_approx_kl, "
            "denominator=unclipped_behave_tokens); rs_filtered_fraction",
        ),
        Source(
            PIN.repo,
            "areal/utils/stats_tracker.py",
            PIN.commit,
            "AVG_MIN_MAX: /avg, /min, /max over the denominator's tokens",
        ),
        Source(
            PIN.repo,
            "areal/api/cli_args.py",
            PIN.commit,
            "RejectionSamplingConfig defaults (token, mask, ratio, upper 5.0); rejection_sampling None",
        ),
        Source(
            PIN.repo,
            "areal/utils/data.py",
            PIN.commit,
            "KLEstimator._compute_approx_kl: k1, k2, k3 of the rejection sampling's KL metrics",
        ),
    ),
    pin=PIN,
    metrics=(ArealLogged(),),
    presets=PRESETS,
    aggregation=(
        "avg / min / max over the step's kept tokens (the stats tracker pools the micro-batches: "
        "exact); rs_filtered_fraction is a mean of per-micro-batch fractions (rcdiag: the step as "
        "one); logged only with actor.rejection_sampling set, here at its defaults (upper 5.0); "
        "AReaL's float32 ratio is 0 below ℓ ≈ −104 and drops such a token, rcdiag's float64 one "
        "only below ℓ ≈ −745"
    ),
)
