"""Benchmark: a growing run analysed again with ``--cache`` (docs/scale.md, "A growing run").

Writes a dump of 1,000 steps, one shard per step (``step=N/part-0.parquet``, 64 responses of about
256 tokens each: the drift scenario), analyses it cold (no cache) and once to fill a cache, adds
step 1,000's shard and analyses again with the cache. Prints each time, how many files the warm
pass read, the warm/cold ratio, and checks that the warm result equals a cold run of the grown dump
(to 1e-9 relative: the order of additions differs) and, exactly, a cold run with a fresh cache.
Usage:

    python benchmarks/bench_incremental.py [--steps 1000] [--rows 64]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import rcdiag
from rcdiag.run import cache as cached_pass
from rcdiag.synth import config_for, write_synthetic_dump


def timed(call: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


def close(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
    return bool(a == b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rcdiag-bench-") as scratch:
        work = Path(scratch)
        config = config_for("drift", steps=args.steps + 1, rows_per_step=args.rows, mean_length=256)
        write_synthetic_dump(work / "all", config, shards=True)
        run = work / "run"
        for step in range(args.steps):
            shutil.move(work / "all" / f"step={step}", run / f"step={step}")
        cold, _ = timed(lambda: rcdiag.analyze(run))
        fill, _ = timed(lambda: rcdiag.analyze(run, cache=work / "cache"))
        shutil.move(work / "all" / f"step={args.steps}", run / f"step={args.steps}")
        warm, result = timed(lambda: rcdiag.analyze(run, cache=work / "cache"))
        read, loaded = cached_pass.LAST.misses, cached_pass.LAST.loaded
        grown_cold, reference = timed(lambda: rcdiag.analyze(run))
        fresh = rcdiag.analyze(run, cache=work / "fresh")
        print(f"dump: {args.steps:,} steps + 1, {args.rows} responses per step")
        print(f"cold analyze, no cache:          {cold:7.2f} s")
        print(f"first analyze, filling a cache:  {fill:7.2f} s")
        print(
            f"one step added, with the cache:  {warm:7.2f} s ({read} file read, "
            f"{loaded} cache entries loaded)"
        )
        print(f"one step added, no cache:        {grown_cold:7.2f} s")
        print(f"warm / cold ratio:               {warm / grown_cold:7.3f}")
        equal = close(result.to_json(), reference.to_json())
        exact = json.dumps(result.to_json()) == json.dumps(fresh.to_json())
        print(f"equal to a cold run: {equal} (1e-9); to a cold cached run: {exact} (exactly)")


if __name__ == "__main__":
    main()
