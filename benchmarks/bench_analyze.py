"""Benchmark: every command that reads a dump, against merely reading the same columns with pyarrow.

Generates (once, cached under benchmarks/data/) a dump of about 50 million valid tokens as hive step
shards, then runs, each in a fresh subprocess so peak memory is measured per run:

* ``read``      — pyarrow iterating the same three columns in record batches (the floor);
* ``analyze``   — ``rcdiag analyze DIR --json …`` on the whole dump;
* ``analyze½``  — the same on half of the steps, to show memory does not grow with the dump;
* ``compare``   — ``rcdiag compare-presets DIR`` with every preset of the latest dialect (one pass);
* ``compare trl,slime`` — the same with TRL's and slime's correction modes beside them
  (``--framework trl,slime``; target ≤ 2× ``compare``);
* ``report``    — ``rcdiag report DIR -o …`` (analysis, presets, sweeps, profile: one pass);
* ``baseline``  — ``rcdiag baseline DIR -o …`` (analysis and bootstrap, untimed target);
* ``check``     — ``rcdiag check DIR --baseline …`` (default rules, bootstrap drift);
* ``… 10k steps`` — ``analyze``, ``check`` and ``report`` on a 10,000-step dump of one 32-token
  response per step (``bench_steps.py``'s), where per-step work dominates.

Prints a table of wall times, each command's ratio to the bare read and to ``analyze``, peak RSS, and
the targets. Each figure is the best of ``--repeat`` runs. Usage:

    python benchmarks/bench_analyze.py [--tokens 50_000_000] [--steps 50] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from bench_steps import generate as steps_generate

HERE = Path(__file__).resolve().parent
READ_SCRIPT = """
import sys, pathlib, pyarrow.parquet as pq
n = 0
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.parquet")):
    for batch in pq.ParquetFile(path).iter_batches(
        columns=["rollout_log_probs", "old_log_probs", "response_mask"]
    ):
        n += batch.num_rows
print(n)
"""


def generate(out: Path, tokens: int, steps: int, seed: int = 0) -> None:
    """Hive shards with ~tokens valid tokens, float32 log-probs, mean response length ~600, and a
    bf16-like mismatch growing from σ = 0.01 to 0.02 over the steps."""
    from rcdiag.io.writer import write_dump

    rng = np.random.default_rng(seed)
    per_step = tokens // steps
    mean_len = 600
    rows = max(1, per_step // mean_len)
    for step in range(steps):
        lengths = rng.integers(mean_len // 2, 3 * mean_len // 2, rows)
        width = int(lengths.max())
        base = -rng.exponential(0.7, (rows, width))
        sigma = 0.01 * (1 + step / steps)
        # ℓ with E[e^ℓ] = 1, as for tokens sampled from the rollout policy; both log-probs ≤ 0
        ell = rng.normal(-0.5 * sigma * sigma, sigma, (rows, width))
        rollout = np.minimum(base, -ell).astype(np.float32)
        old = (rollout + ell).astype(np.float32)
        mask = np.arange(width)[None, :] < lengths[:, None]
        write_dump(out / f"step={step}" / "part-0.parquet", rollout, old, mask, step=step)
        print(f"\rgenerating step {step + 1}/{steps}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def peak_rss_of(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command, measured with a fresh wrapper process."""
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *cmd], check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[0]), float(out[1]) / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=50_000_000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--data", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=2, help="best of N runs")
    args = parser.parse_args()

    dump = args.data / f"dump_v2_{args.tokens}_{args.steps}"
    if not (dump / ".complete").exists():
        generate(dump, args.tokens, args.steps)
        (dump / ".complete").touch()
    half = [str(dump / f"step={s}") for s in range(args.steps // 2)]
    rcdiag = [sys.executable, "-m", "rcdiag.cli"]
    out = args.data / "out"
    out.mkdir(exist_ok=True)
    out_json = out / "analyze.json"
    baseline = out / "baseline.json"
    runs = {
        "read": [sys.executable, "-c", READ_SCRIPT, str(dump)],
        "analyze": [*rcdiag, "analyze", str(dump), "--quiet", "--json", str(out_json)],
        "analyze_half": [*rcdiag, "analyze", *half, "--quiet"],
        "compare": [*rcdiag, "compare-presets", str(dump), "--quiet"],
        "compare trl,slime": [
            *rcdiag,
            "compare-presets",
            str(dump),
            "--quiet",
            "--framework",
            "trl,slime",
        ],
        "report": [*rcdiag, "report", str(dump), "--quiet", "-o", str(out / "report.html")],
        "baseline": [*rcdiag, "baseline", str(dump), "--quiet", "-o", str(baseline)],
        "check": [*rcdiag, "check", str(dump), "--quiet", "--baseline", str(baseline)],
    }
    steps_dump = str(steps_generate(args.data / "steps_10000.parquet", 10_000))
    runs |= {
        "analyze 10k steps": [
            *rcdiag,
            "analyze",
            steps_dump,
            "--quiet",
            "--json",
            str(out / "s.json"),
        ],
        "check 10k steps": [*rcdiag, "check", steps_dump, "--quiet"],
        "report 10k steps": [*rcdiag, "report", steps_dump, "--quiet", "-o", str(out / "s.html")],
    }
    results: dict[str, tuple[float, float]] = {}
    for name, cmd in runs.items():
        best = min((peak_rss_of(cmd) for _ in range(args.repeat)), key=lambda r: r[0])
        results[name] = best
        print(f"{name:>13}: {best[0]:7.2f} s   peak RSS {best[1]:7.0f} MB", flush=True)
    document = json.loads(out_json.read_text())
    tokens = document["source"]["valid_tokens"]
    read, analyze = results["read"][0], results["analyze"][0]
    print(f"\nvalid tokens: {tokens:,}  ({tokens / analyze / 1e6:.1f} M tokens/s in analyze)\n")
    targets = {
        "analyze": ("read", 1.5),
        "compare": ("analyze", 2.0),
        "report": ("analyze", 3.0),
        "check": ("analyze", None),
        "check 10k steps": ("seconds", 20.0),
    }
    print("| command | seconds | × read | × analyze | peak RSS MB | target |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, (seconds, rss) in results.items():
        target = targets.get(name)
        wanted = ""
        if target and target[1]:
            wanted = (
                f"< {target[1]:g} s" if target[0] == "seconds" else f"≤ {target[1]}× {target[0]}"
            )
        print(
            f"| {name} | {seconds:.2f} | {seconds / read:.2f} | {seconds / analyze:.2f} | "
            f"{rss:.0f} | {wanted} |"
        )
    peak = max(rss for _, rss in results.values())
    print(
        f"\npeak RSS whole / half dump (analyze): {results['analyze'][1]:.0f} / "
        f"{results['analyze_half'][1]:.0f} MB; largest of any command {peak:.0f} MB (target < 600)"
    )
    frameworks = results["compare trl,slime"][0] / results["compare"][0]
    print(f"compare with TRL's and slime's modes / verl's alone: {frameworks:.2f}× (target ≤ 2)")
    check_rc = subprocess.run(runs["check"], stdout=subprocess.DEVNULL).returncode
    print(f"check exit code on its own baseline: {check_rc} (0 expected)")


if __name__ == "__main__":
    main()
