"""PrimeIntellect prime-rl: ``mismatch_kl`` (metrics only).

Read from PrimeIntellect-ai/prime-rl ``src/prime_rl/trainer/rl/loss.py``: the log importance ratio
trainer − inference and the per-token mismatch KL e^ℓ − ℓ − 1, averaged over the loss mask
(docs/frameworks.md, "prime-rl"). Its masking options (token / sequence / geometric bounds) changed
between versions and are not dry-run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Source, prefixed
from rcdiag.metrics.grouped import Kind

ID = "prime_rl"


@dataclass(frozen=True)
class PrimeLogged(Component):
    """``mismatch_kl``: the token mean of e^ℓ − ℓ − 1 (unclamped; = verl's k3_kl)."""

    kinds: ClassVar[dict[str, Kind]] = {}

    def row_stats(self, view: TokenView) -> RowStats:
        return {}

    def metrics(self, get: Getter) -> Metrics:
        return prefixed(ID, {"mismatch_kl": get("k3") / get("valid_tokens")})


FRAMEWORK = Framework(
    id=ID,
    title="prime-rl",
    sources=(
        Source(
            "PrimeIntellect-ai/prime-rl",
            "src/prime_rl/trainer/rl/loss.py",
            None,
            "mismatch_kl = exp(log ratio) − log ratio − 1, masked mean",
        ),
    ),
    metrics=(PrimeLogged(),),
    aggregation=(
        "a token mean over a packed micro-batch's loss mask; rcdiag takes a step as one micro-batch"
    ),
    aliases=("prime-rl", "primerl"),
)
