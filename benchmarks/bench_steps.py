"""Benchmark: how the commands scale with the number of training steps.

Generates (once, cached under benchmarks/data/) dumps of 100, 1,000 and 10,000 steps of one
32-token response each (``rcdiag synth --scenario drift``: a mismatch that grows over the steps),
then times each command in a fresh process (start-up included):

* ``analyze``         — ``rcdiag analyze DUMP --json …``;
* ``check``           — ``rcdiag check DUMP`` with the default rules (registry bands, diagnosis);
* ``check --baseline``— the same against a baseline of the 100-step dump (bootstrap in the pass);
* ``compare-presets`` — every preset of the latest dialect, terminal output only;
* ``report``          — ``rcdiag report DUMP -o …`` (also prints the page size).

Prints one row per command, one column per dump, and the growth factor from 1,000 to 10,000 steps
(10 when linear, 100 when quadratic). Usage:

    python benchmarks/bench_steps.py [--steps 100,1000,10000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RCDIAG = [sys.executable, "-m", "rcdiag.cli"]


def generate(path: Path, steps: int) -> Path:
    """A single-file dump of ``steps`` steps × one 32-token response (cached)."""
    if not path.exists():
        subprocess.run(
            [
                *RCDIAG,
                "synth",
                str(path),
                "--scenario",
                "drift",
                "--steps",
                str(steps),
                "--rows-per-step",
                "1",
                "--group-size",
                "1",
                "--mean-length",
                "32",
                "--length-dist",
                "fixed",
                "--max-length",
                "32",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return path


def seconds(cmd: list[str], repeat: int) -> float:
    """Best wall time of ``repeat`` runs; exit code 1 (a failed check) is a normal outcome."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        best = min(best, time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="100,1000,10000", help="comma-separated step counts")
    parser.add_argument("--data", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs")
    args = parser.parse_args()

    sizes = [int(s) for s in args.steps.split(",")]
    args.data.mkdir(parents=True, exist_ok=True)
    dumps = {n: generate(args.data / f"steps_{n}.parquet", n) for n in sizes}
    baseline = args.data / "steps_baseline.json"
    if not baseline.exists():
        base_dump = generate(args.data / "steps_100.parquet", 100)
        subprocess.run(
            [*RCDIAG, "baseline", str(base_dump), "-o", str(baseline), "-q"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    out = args.data / "steps_out"
    commands = {
        "analyze": lambda d: ["analyze", d, "-q", "--json", str(out) + ".json"],
        "check": lambda d: ["check", d, "-q"],
        "check --baseline": lambda d: ["check", d, "-q", "--baseline", str(baseline)],
        "compare-presets": lambda d: ["compare-presets", d, "-q"],
        "report": lambda d: ["report", d, "-q", "-o", str(out) + ".html"],
    }
    print(f"{'steps':>18}" + "".join(f"{n:>12,}" for n in sizes) + "   growth ×10 steps")
    page_sizes = []
    for name, arguments in commands.items():
        times = []
        for n in sizes:
            times.append(seconds([*RCDIAG, *arguments(str(dumps[n]))], args.repeat))
            if name == "report":
                page_sizes.append(Path(str(out) + ".html").stat().st_size)
        growth = ""
        if 1000 in sizes and 10000 in sizes:
            growth = f"{times[sizes.index(10000)] / times[sizes.index(1000)]:.1f}"
        print(f"{name:>18}" + "".join(f"{t:11.2f}s" for t in times) + f"   {growth:>6}", flush=True)
    print(f"{'report page':>18}" + "".join(f"{b / 1e6:10.2f}MB" for b in page_sizes))


if __name__ == "__main__":
    main()
