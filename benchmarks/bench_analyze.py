"""Benchmark: `rcdiag analyze` against merely reading the same parquet columns with pyarrow.

Generates (once, cached under benchmarks/data/) a dump of about 50 million valid tokens as hive step
shards, then runs, each in a fresh subprocess so peak memory is measured per run:

* ``read``     — pyarrow iterating the same three columns in record batches (the floor);
* ``analyze``  — ``rcdiag analyze DIR --json …`` on the whole dump;
* ``analyze½`` — the same on half of the steps, to show memory does not grow with the dump;
* ``compare``  — ``rcdiag compare-presets DIR`` with every preset of the latest dialect (one pass).

Prints wall times, the ratio analyze / read, and peak RSS of each. Usage:

    python benchmarks/bench_analyze.py [--tokens 50_000_000] [--steps 50]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

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
    """Hive shards with ~tokens valid tokens, float32 log-probs, mean response length ~600."""
    from rcdiag.io.writer import write_dump

    rng = np.random.default_rng(seed)
    per_step = tokens // steps
    mean_len = 600
    rows = max(1, per_step // mean_len)
    for step in range(steps):
        lengths = rng.integers(mean_len // 2, 3 * mean_len // 2, rows)
        width = int(lengths.max())
        rollout = -rng.exponential(0.7, (rows, width)).astype(np.float32)
        noise = rng.normal(0.0, 0.01 * (1 + step / steps), (rows, width)).astype(np.float32)
        old = rollout + noise
        mask = np.arange(width)[None, :] < lengths[:, None]
        write_dump(out / f"step={step}" / "part-0.parquet", rollout, old, mask, step=step)
        print(f"\rgenerating step {step + 1}/{steps}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def peak_rss_of(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command, measured with a fresh wrapper process."""
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
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

    dump = args.data / f"dump_{args.tokens}_{args.steps}"
    if not (dump / ".complete").exists():
        generate(dump, args.tokens, args.steps)
        (dump / ".complete").touch()
    half = [str(dump / f"step={s}") for s in range(args.steps // 2)]
    rcdiag = [sys.executable, "-m", "rcdiag.cli"]
    out_json = args.data / "bench_out.json"
    runs = {
        "read": [sys.executable, "-c", READ_SCRIPT, str(dump)],
        "analyze": [*rcdiag, "analyze", str(dump), "--quiet", "--json", str(out_json)],
        "analyze_half": [*rcdiag, "analyze", *half, "--quiet"],
        "compare": [*rcdiag, "compare-presets", str(dump), "--quiet"],
    }
    results = {}
    for name, cmd in runs.items():
        best = min((peak_rss_of(cmd) for _ in range(args.repeat)), key=lambda r: r[0])
        results[name] = best
        print(f"{name:>13}: {best[0]:7.2f} s   peak RSS {best[1]:7.0f} MB", flush=True)
    document = json.loads(out_json.read_text())
    tokens = document["source"]["valid_tokens"]
    ratio = results["analyze"][0] / results["read"][0]
    print(f"valid tokens: {tokens:,}  ({tokens / results['analyze'][0] / 1e6:.1f} M tokens/s)")
    print(f"ratio analyze / read: {ratio:.2f}x   (target <= 3x)")
    print(
        f"ratio compare-presets (19 presets) / analyze: "
        f"{results['compare'][0] / results['analyze'][0]:.2f}x   (target < 4x)"
    )
    print(
        f"peak RSS whole / half dump: {results['analyze'][1]:.0f} / "
        f"{results['analyze_half'][1]:.0f} MB   (target < 1500 MB, flat)"
    )


if __name__ == "__main__":
    main()
