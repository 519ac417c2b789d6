"""Benchmark: the Ray engine on a local cluster of 1 and 2 workers, and the cost of its merge.

1. **Throughput**: ``analyze`` and ``report``'s pass (presets, sweeps, profile) over the ~50M-token
   benchmark dump of ``bench_analyze.py`` (50 files), with the local engine and with the Ray engine
   on a local Ray of 1 and of 2 CPUs; valid tokens per second, and per worker.
2. **Merge**: what folding one worker's result into the driver's costs as the number of steps in it
   grows (100 / 1,000 / 10,000 steps, the dumps of ``bench_steps.py``), for the report's request.

Ray start-up is not timed (a cluster is up before the run). Usage:

    python benchmarks/bench_ray.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

from bench_steps import generate as steps_generate

from rcdiag.assess.recommendation.candidates import candidate_sweeps, preset_configs
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.run.consumers import Consumers, Request
from rcdiag.run.dump import DumpSpec
from rcdiag.run.engine import run

HERE = Path(__file__).resolve().parent


def report_request() -> Request:
    sweeps = candidate_sweeps("latest")
    return Request(
        AnalyzeOptions(),
        configs=preset_configs("latest")[0],
        summary_only=[c for s in sweeps for c in s.configs],
        profile_top_k=20,
    )


def timed(spec: DumpSpec, request: Request, repeat: int) -> tuple[float, int]:
    best, tokens = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        done = run(spec, request)
        best = min(best, time.perf_counter() - start)
        tokens = int(done.analysis.stats.total()["valid_tokens"])
    return best, tokens


def main() -> None:
    import ray

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    dump = args.data / "dump_v2_50000000_50"
    if not dump.exists():
        sys.exit(f"{dump} is missing: run benchmarks/bench_analyze.py once to generate it")
    paths = [str(dump)]
    requests = {"analyze": Request(), "report pass": report_request()}

    print("| pass | engine | workers | seconds | M tokens/s | per worker |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, request in requests.items():
        seconds, tokens = timed(DumpSpec(paths), request, args.repeat)
        rate = tokens / seconds / 1e6
        print(f"| {name} | local | 1 | {seconds:.2f} | {rate:.1f} | {rate:.1f} |", flush=True)
    for workers in (1, 2):
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        try:
            for name, request in requests.items():
                spec = DumpSpec(paths, engine="ray")
                timed(spec, Request(), 1)  # warm the workers up
                seconds, tokens = timed(spec, request, args.repeat)
                rate = tokens / seconds / 1e6
                print(
                    f"| {name} | ray | {workers} | {seconds:.2f} | {rate:.1f} | "
                    f"{rate / workers:.1f} |",
                    flush=True,
                )
        finally:
            ray.shutdown()

    print("\n| steps in a worker's result | merge seconds | per step (µs) |")
    print("| ---: | ---: | ---: |")
    request = report_request()
    for steps in (100, 1_000, 10_000):
        path = steps_generate(args.data / f"steps_{steps}.parquet", steps)
        part = Consumers.for_request(request)
        for batch in DumpSpec([str(path)]).reader(row_details=True).batches():
            part.update(batch)
        driver = copy.deepcopy(part)
        start = time.perf_counter()
        driver.merge(part)
        seconds = time.perf_counter() - start
        print(f"| {steps:,} | {seconds:.3f} | {seconds / steps * 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
