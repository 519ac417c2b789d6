"""Make rcdiag dumps from a real (tiny) transformer: real numerics, real staleness, real dump bugs.

Run from the repository root::

    .venv/bin/python sample_data/model_dumps.py [--out DIR] [--seed N] [--quick]

1. Pre-train a byte-level transformer (``tiny_lm.py``) on the standard library's own source.
2. Run a short GRPO loop per rollout set-up: each step samples ``group`` responses for each of
   ``prompts`` random snippets with a bf16 (or fp8) engine that decodes with a key/value cache
   and reports its own log-probs; an fp32 trainer scores the same tokens (``old_log_probs``)
   and takes one Adam step on the group-normalised advantage of a dense reward.
3. Write one dump per variant into ``DIR/<variant>/part-0.parquet`` (a ``step`` column) with
   ``rcdiag.write_dump`` and print what ``rcdiag analyze`` reports for each.

Variants (see ``sample_data/README.md``): ``bf16``, ``bf16_mixed``, ``fp8``, ``stale`` and
``growing`` carry a real mismatch; ``topp``, ``temperature``, ``offset``, ``swapped``,
``identical``, ``padding`` and ``context`` are dump bugs.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_lm import (  # the script's sibling module
    LMConfig,
    Sampler,
    TinyLM,
    blank_lines,
    generate,
    load_corpus,
    pretrain,
    quantize_fp8_,
    random_windows,
    response_mask,
)

from rcdiag import write_dump
from rcdiag.io.reader import StepSelection
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.model import AnalysisResult
from rcdiag.run.dump import DumpSpec
from rcdiag.run.results import analyze_dump

VARIANTS = (
    "bf16",
    "bf16_mixed",
    "fp8",
    "stale",
    "topp",
    "temperature",
    "offset",
    "swapped",
    "identical",
    "padding",
    "context",
    "growing",
)


@dataclass(frozen=True)
class Settings:
    """Sizes of one run of the script; ``QUICK`` is a smoke test of a few seconds."""

    model: LMConfig = field(default_factory=LMConfig)
    pretrain_steps: int = 240
    pretrain_len: int = 128
    rl_steps: int = 15
    prompts: int = 4
    group: int = 8
    prompt_len: int = 48
    max_response: int = 96
    rl_lr: float = 1.5e-4
    top_p: float = 0.9
    temperature: float = 0.7
    growing_steps: int = 6
    context_replaced: int = 12


FULL = Settings()
QUICK = replace(
    FULL,
    model=LMConfig(d_model=32, n_layers=1, n_heads=2, max_len=64),
    pretrain_steps=5,
    pretrain_len=32,
    rl_steps=4,
    prompts=2,
    group=4,
    prompt_len=16,
    max_response=24,
    growing_steps=4,
    context_replaced=4,
)

TEMPLATE = b"<|im_end|>\n<|im_start|>assistant\n"
"""The chat-template turn header the ``context`` trainer scores after, in place of the end of the
prompt the engine saw."""
PAD = 0
"""The pad byte of the ``padding`` trainer's batch."""


def policy_lag(step: int) -> int:
    """Optimizer steps the stale engine's weights lag the trainer at ``step``: 0,0,0,1,1,1,2,…"""
    return step // 3


@dataclass(frozen=True)
class Rollout:
    """How one run's engine is set up: fp8 weights, sampling, and policy lag per step."""

    fp8: bool = False
    sampler: Sampler = field(default_factory=Sampler)
    lag: Callable[[int], int] = lambda step: 0


def generator(seed: int, stream: int) -> torch.Generator:
    """The random stream ``stream`` of ``seed``: 0 pre-training batches, 1 prompts, 2 sampling."""
    return torch.Generator().manual_seed(seed * 1000 + stream)


@dataclass
class StepLog:
    """What one step of one run produced: prompts [B, P] and responses [B, L] (bytes), the
    response mask, row ids and [B, L] float32 log-prob columns."""

    step: int
    lag: int
    prompts: torch.Tensor
    responses: torch.Tensor
    mask: torch.Tensor
    uid: np.ndarray
    columns: dict[str, torch.Tensor]


def reward(responses: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Share of a response's bytes that are lowercase ASCII letters (the closing blank line not
    counted) plus a bonus for ending within the limit:
    r = letters / (length − 2·[finished]) + 0.5·[finished], in [0, 1.5]."""
    finished = blank_lines(responses).any(dim=1)
    letters = ((responses >= ord("a")) & (responses <= ord("z")) & mask).sum(dim=1)
    body = (mask.sum(dim=1) - 2 * finished.long()).clamp(min=1)
    return letters / body + 0.5 * finished


def group_advantage(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """GRPO advantage per response: A = (r − mean_group r) / (std_group r + 1e-6)."""
    r = rewards.view(-1, group)
    return ((r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + 1e-6)).reshape(-1)


def token_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[token] per position, float32: [B, L, 256], [B, L] → [B, L]."""
    return torch.log_softmax(logits.float(), dim=-1).gather(2, tokens[..., None])[..., 0]


def engine_from(state: dict[str, torch.Tensor], config: LMConfig, fp8: bool) -> TinyLM:
    """An inference copy of the weights in bf16 (linear weights rounded through fp8 if asked)."""
    engine = TinyLM(config)
    engine.load_state_dict(state)
    engine = engine.to(torch.bfloat16).eval()
    return quantize_fp8_(engine) if fp8 else engine


def run(
    base: TinyLM,
    corpus: torch.Tensor,
    settings: Settings,
    rollout: Rollout,
    seed: int,
    extra_scores: bool = False,
) -> list[StepLog]:
    """A GRPO loop from the pre-trained ``base``; one ``StepLog`` per step.

    Columns: ``rollout`` (engine), ``old`` (fp32 trainer, the tokens' log-probs under the
    trainer's current weights) and, with ``extra_scores``, ``old_bf16`` (the trainer under bf16
    autocast), ``old_offset`` (logits[t] scored against token t instead of t + 1),
    ``old_padded`` (the trainer's batch right-padded with :data:`PAD` after each response's end,
    scored at every position) and ``old_context`` (the response scored after another context:
    the prompt's last ``context_replaced`` bytes replaced by the end of :data:`TEMPLATE`).
    Every run sees the same prompts at a given step.
    """
    model = copy.deepcopy(base).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.rl_lr)
    prompt_rng, sampling = generator(seed, 1), generator(seed, 2)
    history: list[dict[str, torch.Tensor]] = []
    logs = []
    p = settings.prompt_len
    for step in range(settings.rl_steps):
        history.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        lag = min(rollout.lag(step), step)
        engine = engine_from(history[step - lag], model.config, rollout.fp8)
        prompts = random_windows(corpus, settings.prompts, p, prompt_rng)
        prompts = prompts.repeat_interleave(settings.group, dim=0)
        responses, rollout_lp = generate(
            engine, prompts, settings.max_response, rollout.sampler, sampling
        )
        mask = response_mask(responses)
        sequences = torch.cat([prompts, responses], dim=1)
        logits = model(sequences)
        old = token_log_probs(logits[:, p - 1 : -1], responses)
        columns = {"rollout": rollout_lp, "old": old.detach()}
        if extra_scores:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                columns["old_bf16"] = token_log_probs(model(sequences)[:, p - 1 : -1], responses)
            columns["old_offset"] = token_log_probs(logits[:, p:], responses).detach()
            with torch.no_grad():
                pad = torch.where(mask, responses, torch.full_like(responses, PAD))
                scored = model(torch.cat([prompts, pad], dim=1))[:, p - 1 : -1]
                columns["old_padded"] = token_log_probs(scored, pad)
                columns["old_context"] = token_log_probs(
                    model(torch.cat([other_context(prompts, settings), responses], dim=1))[
                        :, p - 1 : -1
                    ],
                    responses,
                )
        advantage = group_advantage(reward(responses, mask), settings.group)
        loss = -(advantage[:, None] * old * mask).sum() / mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        uid = np.array(
            [f"s{step:02d}-p{i // settings.group:02d}" for i in range(responses.shape[0])]
        )
        logs.append(StepLog(step, lag, prompts, responses, mask, uid, columns))
    return logs


def other_context(prompts: torch.Tensor, settings: Settings) -> torch.Tensor:
    """The prompts as the ``context`` trainer sees them: the last ``context_replaced`` bytes are
    :data:`TEMPLATE`'s last bytes (another chat template's turn header where the engine's prompt
    ended; same length, so the response sits where it did)."""
    cut = prompts.shape[1] - settings.context_replaced
    header = torch.tensor(list(TEMPLATE[-settings.context_replaced :]), dtype=prompts.dtype)
    return torch.cat([prompts[:, :cut], header.expand(prompts.shape[0], -1)], dim=1)


def make_runs(settings: Settings, seed: int) -> tuple[dict[str, list[StepLog]], list[float], float]:
    """Pre-train, then run every rollout set-up; returns the runs, pre-training losses, seconds."""
    torch.manual_seed(seed)
    corpus = load_corpus()
    base = TinyLM(settings.model)
    started = time.perf_counter()
    losses = pretrain(
        base,
        corpus,
        settings.pretrain_steps,
        generator(seed, 0),
        length=settings.pretrain_len,
    )
    seconds = time.perf_counter() - started
    setups = {
        "bf16": Rollout(),
        "fp8": Rollout(fp8=True),
        "stale": Rollout(lag=policy_lag),
        "topp": Rollout(sampler=Sampler(top_p=settings.top_p)),
        "temperature": Rollout(sampler=Sampler(temperature=settings.temperature)),
    }
    runs = {
        name: run(base, corpus, settings, setup, seed, extra_scores=name == "bf16")
        for name, setup in setups.items()
    }
    short = replace(settings, rl_steps=settings.growing_steps)
    runs["growing"] = run(base, corpus, short, Rollout(lag=lambda step: step), seed)
    return runs, losses, seconds


DUMP_FILE = "part-0.parquet"
"""Each variant is one file, ``DIR/<variant>/part-0.parquet``, with a ``step`` column."""

# variant → (run, rollout column written, old column written)
LAYOUT: dict[str, tuple[str, str, str]] = {
    "bf16": ("bf16", "rollout", "old"),
    "bf16_mixed": ("bf16", "rollout", "old_bf16"),
    "fp8": ("fp8", "rollout", "old"),
    "stale": ("stale", "rollout", "old"),
    "topp": ("topp", "rollout", "old"),
    "temperature": ("temperature", "rollout", "old"),
    "offset": ("bf16", "rollout", "old_offset"),
    "swapped": ("fp8", "old", "rollout"),
    "identical": ("bf16", "old", "old"),
    "padding": ("bf16", "rollout", "old_padded"),
    "context": ("bf16", "rollout", "old_context"),
    "growing": ("growing", "rollout", "old"),
}
WITHOUT_LAG = {"growing"}
"""Variants written without a ``policy_lag`` column (a run that does not record it)."""
PADDED = {"padding"}
"""Variants whose mask counts every position of the batch, padding included (the rollout column
holds 0.0 after each response's end, as a padded engine output does)."""


def padded(tensors: list[torch.Tensor]) -> torch.Tensor:
    """[B_i, L_i] tensors stacked into one [ΣB_i, max L_i], right-padded with zeros."""
    width = max(t.shape[1] for t in tensors)
    return torch.cat([F.pad(t, (0, width - t.shape[1])) for t in tensors])


def write_variant(
    path: Path,
    logs: list[StepLog],
    rollout_key: str,
    old_key: str,
    lag: bool = True,
    pad_counted: bool = False,
) -> None:
    """Every step in one file: float32 log-probs, mask, and ``step``, ``uid``, ``policy_lag`` per
    row (``lag`` False: no ``policy_lag`` column; ``pad_counted``: every position of a step's
    batch is in the mask, the rollout column 0.0 after each response's end)."""
    rows = [log.mask.shape[0] for log in logs]
    masks = [torch.ones_like(log.mask) if pad_counted else log.mask for log in logs]
    rollout = [log.columns[rollout_key] for log in logs]
    if pad_counted:
        rollout = [
            torch.where(log.mask, r, torch.zeros_like(r))
            for log, r in zip(logs, rollout, strict=True)
        ]
    extra = {"uid": np.concatenate([log.uid for log in logs])}
    if lag:
        extra["policy_lag"] = np.repeat([log.lag for log in logs], rows)
    write_dump(
        path,
        padded(rollout),
        padded([log.columns[old_key] for log in logs]),
        padded(masks),
        step=np.repeat([log.step for log in logs], rows),
        compression="zstd",
        extra_columns=extra,
    )


def write_all(out: Path, runs: dict[str, list[StepLog]]) -> None:
    """Write every variant beside ``out``, then replace ``out/<variant>`` directories one by one."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".model_dumps.", dir=out))
    try:
        for variant in VARIANTS:
            run_name, rollout_key, old_key = LAYOUT[variant]
            write_variant(
                staging / variant / DUMP_FILE,
                runs[run_name],
                rollout_key,
                old_key,
                lag=variant not in WITHOUT_LAG,
                pad_counted=variant in PADDED,
            )
        for variant in VARIANTS:
            if (out / variant).exists():
                shutil.rmtree(out / variant)
            (staging / variant).rename(out / variant)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


SUMMARY_METRICS = {
    "kl": "rollout_corr/kl",
    "k3_kl": "rollout_corr/k3_kl",
    "|Δlogp|": "rcdiag/abs_log_ratio_mean",
}


def analyze(paths: list[Path], steps: frozenset[int] = frozenset()) -> AnalysisResult:
    """The ``rcdiag analyze`` result of a dump (only ``steps`` if given)."""
    return analyze_dump(DumpSpec(paths, selection=StepSelection(only=steps)), AnalyzeOptions())


def summary(out: Path, runs: dict[str, list[StepLog]]) -> str:
    """A markdown table per variant (rows, valid tokens, size, overall metrics), then the stale
    dump's metrics per policy lag."""
    head = ["variant", "rows", "tokens", "size kB", *SUMMARY_METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for variant in VARIANTS:
        directory = out / variant
        document = analyze([directory])
        size = sum(p.stat().st_size for p in directory.rglob("*.parquet")) / 1000
        values = [f"{document.overall[key]:.3g}" for key in SUMMARY_METRICS.values()]
        source = document.source
        cells = [variant, str(source.rows), str(source.valid_tokens), f"{size:.0f}", *values]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| policy lag | steps | " + " | ".join(SUMMARY_METRICS) + " |"]
    lines.append("|" + " --- |" * (2 + len(SUMMARY_METRICS)))
    by_lag: dict[int, list[int]] = {}
    for log in runs["stale"]:
        by_lag.setdefault(log.lag, []).append(log.step)
    for lag, steps in sorted(by_lag.items()):
        document = analyze([out / "stale"], frozenset(steps))
        values = [f"{document.overall[key]:.3g}" for key in SUMMARY_METRICS.values()]
        span = f"{steps[0]}–{steps[-1]}" if len(steps) > 1 else str(steps[0])
        lines.append(f"| {lag} | {span} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def sample_text(log: StepLog, row: int = 0) -> str:
    """One prompt and the valid part of its sampled response, as Python string literals."""
    prompt = bytes(log.prompts[row].tolist()).decode(errors="replace")
    response = bytes(log.responses[row][log.mask[row]].tolist()).decode(errors="replace")
    return f"{prompt!r} → {response!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "model",
        help="directory that receives one sub-directory per variant (default: sample_data/model)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    parser.add_argument("--quick", action="store_true", help="a tiny model and run (seconds)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one thread: faster on a shared machine, and reproducible
    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    runs, losses, pretrain_seconds = make_runs(settings, args.seed)
    write_all(args.out, runs)
    tail = float(np.mean(losses[-20:]))
    print(
        f"pre-training: {settings.pretrain_steps} steps in {pretrain_seconds:.0f} s, "
        f"final loss {tail:.2f} nats/byte (ln 256 = 5.55); "
        f"everything: {time.perf_counter() - started:.0f} s"
    )
    print(f"a bf16 rollout at step 0: {sample_text(runs['bf16'][0])}")
    print(summary(args.out, runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
