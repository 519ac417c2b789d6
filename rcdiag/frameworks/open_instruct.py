"""AllenAI open-instruct: the ``debug/`` comparison of vLLM and trainer log-probs (metrics only).

Read from allenai/open-instruct ``open_instruct/grpo_fast.py`` (the vLLM-vs-local log-prob block of
the learner's training step; docs/frameworks.md, "open-instruct"). Earlier versions weighted each
token of ``debug/vllm_local_reverse_kl`` by the rollout probability; rcdiag follows the later
plain mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats, unbiased_std
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Source, abs_log_ratio, prefixed
from rcdiag.metrics.grouped import Kind

ID = "open_instruct"


@dataclass(frozen=True)
class OpenInstructLogged(Component):
    """Mean, max and sample standard deviation (N − 1; 0 for one token) of |ℓ| over valid tokens,
    and the token mean of log π_rollout − log π_train."""

    kinds: ClassVar[dict[str, Kind]] = {"abs_moments": "moments"}

    def row_stats(self, view: TokenView) -> RowStats:
        return {"abs_moments": view.token_moments(abs_log_ratio(view))}

    def metrics(self, get: Getter) -> Metrics:
        valid = get("valid_tokens")
        return prefixed(
            ID,
            {
                "debug/vllm_vs_local_logprob_diff_mean": get("abs_log_ratio") / valid,
                "debug/vllm_vs_local_logprob_diff_max": get("abs_log_ratio_max"),
                "debug/vllm_vs_local_logprob_diff_std": unbiased_std(
                    get("abs_moments.n"), get("abs_moments.m2")
                ),
                "debug/vllm_local_reverse_kl": -get("log_ratio") / valid,
            },
        )


FRAMEWORK = Framework(
    id=ID,
    title="open-instruct",
    sources=(
        Source(
            "allenai/open-instruct",
            "open_instruct/grpo_fast.py",
            None,
            "debug/vllm_vs_local_logprob_diff_{mean,max,std}, debug/vllm_local_reverse_kl",
        ),
    ),
    metrics=(OpenInstructLogged(),),
    aggregation="per micro-batch (local metrics); rcdiag takes a step as one micro-batch",
    aliases=("open-instruct", "openinstruct"),
)
