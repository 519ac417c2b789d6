"""Dumps with planted causes, from an explicit categorical model (independent of rcdiag's synth).

Every position t of every response has logits z_t ~ N(0, LOGIT_SCALE²) over a vocabulary of VOCAB
tokens. The trainer's policy is π_t = softmax(z_t); the engine's is q_t = softmax(z_t + σ·ε_t), the
numerical mismatch (ε standard normal). The token x_t is *sampled* from what the engine samples from
and both columns are log-probs of x_t, so every identity of real dumps holds (E_q[π/q] = 1, kl ≥ 0).
A variant changes one thing, the way a real pipeline bug or a real staleness would:

* ``clean`` — as above;
* ``processed`` — the engine samples from the top-p (p = 0.9) nucleus of q, renormalised, and reports
  that distribution's log-probs;
* ``temperature`` — the engine samples from softmax((z + σε)/T) and reports it; the trainer uses T = 1;
* ``offset`` — the training column is shifted one position later within each response;
* ``swapped`` — the two columns exchanged; ``identical`` — the rollout column written twice;
* ``logits`` — the training column holds the raw logit of x_t instead of its log-prob;
* ``stale`` — rows carry a ``policy_lag`` k ∈ {0, …, 3}; the trainer's logits moved by k·DRIFT·η
  since the engine's weights were synced (η standard normal);
* ``padding`` — each response ends early (a length drawn in [length/2, length]); after it the
  engine's column holds 0.0 and the trainer's the log-prob of a pad token, and the mask counts
  those positions;
* ``context`` — the trainer scored the response after another context: its logits at position t
  differ by CONTEXT·e^{−t/3}·η, large on the first tokens and fading;
* ``growing`` — the engine's noise grows ×4 from the first step to the last, geometrically;
* ``creeping`` — the same, ×1.5 (k3_kl ×2.25): a rise near what the growth test can resolve;
* ``jump`` — the engine's noise is ×4 from the middle step on (a step change);
* ``spike`` — one step (the third) with ×8 the noise, the others alike;
* ``unpaired`` — a quarter of the rows of every step carry another row's training column (a batch
  reordered before the trainer scored it);
* ``placeholder`` — the engine's column holds 0.0 everywhere (its log-probs were never returned);
* ``kv_cache`` — the engine's noise grows along the response, from 0 at the first position to
  ×4 at the last (precision lost with the context, as with an fp8 KV cache);
* ``prompt`` — the mask counts the prompt: each response starts with 4–12 positions where the
  engine's column holds 0.0 (it scored no prompt token) and the trainer's the log-prob of a
  prompt token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rcdiag.io.writer import write_dump

VOCAB = 48
LOGIT_SCALE = 2.5
TOP_P = 0.9
TEMPERATURE = 0.7
DRIFT = 0.4
CONTEXT = 4.0
PAD_TOKEN = 0
CAUSES: dict[str, str | None] = {
    "clean": None,
    "processed": "processed_logprobs",
    "temperature": "temperature_mismatch",
    "offset": "misaligned_tokens",
    "swapped": "swapped_columns",
    "identical": "identical_columns",
    "logits": "logits_not_logprobs",
    "stale": "stale_policy",
    "padding": "padding_in_mask",
    "context": "context_mismatch",
    "growing": "growing_drift",
    "creeping": "growing_drift",
    "jump": "growing_drift",
    "spike": None,
    "unpaired": "unpaired_rows",
    "placeholder": "constant_column",
    "prompt": "padding_in_mask",
    "kv_cache": "position_growth",
}
"""Each variant and the cause the diagnosis must name for it (None: no dump bug)."""
VARIANTS = tuple(CAUSES)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _sample(rng: np.random.Generator, log_p: np.ndarray) -> np.ndarray:
    cumulative = np.cumsum(np.exp(log_p), axis=-1)
    u = rng.random(log_p.shape[:-1])[..., None] * cumulative[..., -1:]
    return np.minimum((cumulative < u).sum(axis=-1), log_p.shape[-1] - 1)


def _nucleus(log_q: np.ndarray, top_p: float) -> np.ndarray:
    """log of the top-p nucleus of q, renormalised (−inf outside)."""
    order = np.argsort(-log_q, axis=-1)
    sorted_p = np.exp(np.take_along_axis(log_q, order, axis=-1))
    before = np.cumsum(sorted_p, axis=-1) - sorted_p
    keep_sorted = before < top_p
    keep = np.empty_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    kept = np.where(keep, log_q, -np.inf)
    return kept - np.log(np.exp(kept).sum(axis=-1, keepdims=True))


def planted_step(
    variant: str,
    seed: int,
    step: int,
    rows: int = 24,
    length: int = 40,
    noise: float = 0.05,
    steps: int = 8,
) -> dict[str, np.ndarray]:
    """One step of a planted dump: padded [rows, length] columns (every position valid) and lags."""
    rng = np.random.default_rng((seed, step, VARIANTS.index(variant)))
    z = LOGIT_SCALE * rng.standard_normal((rows, length, VOCAB))
    lags = np.zeros(rows, dtype=np.int64)
    trainer_z = z
    if variant == "stale":
        lags = rng.integers(0, 4, rows)
        moved = DRIFT * rng.standard_normal((rows, length, VOCAB))
        trainer_z = z + lags[:, None, None] * moved
    if variant == "context":
        fade = CONTEXT * np.exp(-np.arange(length) / 3.0)[None, :, None]
        trainer_z = z + fade * rng.standard_normal(z.shape)
    ramp = step / max(1, steps - 1)
    scale = {
        "growing": 4.0**ramp,
        "creeping": 1.5**ramp,
        "jump": 4.0 if step >= steps // 2 else 1.0,
    }.get(variant, 1.0)
    if variant == "spike" and step == 2:
        scale = 8.0
    if variant == "kv_cache":
        scale = 4.0 * np.arange(length)[None, :, None] / length
    engine_z = z + scale * noise * rng.standard_normal(z.shape)
    log_q = _log_softmax(engine_z / (TEMPERATURE if variant == "temperature" else 1.0))
    if variant == "processed":
        log_q = _nucleus(log_q, TOP_P)
    tokens = _sample(rng, log_q)[..., None]
    rollout = np.take_along_axis(log_q, tokens, axis=-1)[..., 0]
    old = np.take_along_axis(_log_softmax(trainer_z), tokens, axis=-1)[..., 0]
    if variant == "offset":
        old = np.concatenate([old[:, :1], old[:, :-1]], axis=1)
    elif variant == "swapped":
        rollout, old = old, rollout
    elif variant == "identical":
        old = rollout.copy()
    elif variant == "logits":
        old = np.take_along_axis(trainer_z, tokens, axis=-1)[..., 0]
    elif variant == "unpaired":
        quarter = rows // 4
        old[:quarter] = np.roll(old[:quarter], 1, axis=0)
    elif variant == "placeholder":
        rollout = np.zeros_like(rollout)
    elif variant == "prompt":
        before = np.arange(length)[None, :] < rng.integers(4, 13, rows)[:, None]
        rollout = np.where(before, 0.0, rollout)
    elif variant == "padding":
        ends = rng.integers(length // 2, length + 1, rows)
        after = np.arange(length)[None, :] >= ends[:, None]
        rollout = np.where(after, 0.0, rollout)
        old = np.where(after, _log_softmax(trainer_z)[..., PAD_TOKEN], old)
    return {"rollout": rollout, "old": old, "lags": lags}


def write_planted(
    out: Path, variant: str, seed: int, steps: int = 8, noise: float = 0.05, **shape: int
) -> Path:
    """A planted dump as hive step shards under ``out``."""
    for step in range(steps):
        data = planted_step(variant, seed, step, noise=noise, steps=steps, **shape)
        write_dump(
            out / f"step={step}" / "part-0.parquet",
            data["rollout"],
            data["old"],
            step=step,
            extra_columns={"policy_lag": data["lags"]},
        )
    return out
