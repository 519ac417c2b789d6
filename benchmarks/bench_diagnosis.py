"""Detection rates and false alarms of the diagnosis (docs/diagnosis.md).

Planted dumps (tests/planted.py: an explicit categorical model where tokens are sampled from what the
engine samples from) at several levels of numerical noise, N seeds each: how often the planted cause
is named, and how often a wrong dump-bug id is (growth: also whether it is called a ramp or a step
change, on short runs of 3 to 8 steps; false alarms: growth named on a flat run). Then every shipped
sample dump, with its verdict and causes. Usage:

    python benchmarks/bench_diagnosis.py [--seeds 20] [--variants clean,unpaired,…]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from planted import CAUSES, VARIANTS, write_planted  # noqa: E402

from rcdiag.metrics.analysis import AnalyzeOptions  # noqa: E402
from rcdiag.model import Diagnosis  # noqa: E402
from rcdiag.run.dump import DumpSpec  # noqa: E402
from rcdiag.run.results import analyze_dump  # noqa: E402

NOISES = (0.01, 0.05, 0.1, 0.3)
RUNS: tuple[tuple[str, int], ...] = (
    *((v, 8) for v in VARIANTS if v not in ("growing", "creeping", "jump", "clean", "spike")),
    ("clean", 3),
    ("clean", 4),
    ("clean", 6),
    ("clean", 8),
    ("growing", 3),
    ("growing", 4),
    ("growing", 6),
    ("growing", 8),
    ("creeping", 4),
    ("creeping", 8),
    ("jump", 4),
    ("jump", 5),
    ("jump", 6),
    ("jump", 8),
    ("spike", 5),
    ("spike", 8),
)
"""(variant, steps) of every planted row."""
SHAPES = {"growing": "ramp", "creeping": "ramp", "jump": "step"}
"""The shape the growth test must name for each growing variant."""


def judged(variant: str, found: Diagnosis) -> tuple[bool, bool]:
    """Whether the diagnosis is right for the planted ``variant``, and whether it raised a false
    alarm (a wrong dump bug, or growth on a run that does not grow)."""
    bugs = [c.id for c in found.causes if c.kind == "dump_bug"]
    want = CAUSES[variant]
    drift = next((c for c in found.causes if c.id == "growing_drift"), None)
    wrong = any(b != want for b in bugs)
    if variant in SHAPES:
        return drift is not None and drift.evidence.get("shape") == SHAPES[variant], wrong
    if variant in ("clean", "spike"):
        return not bugs and drift is None, wrong or drift is not None
    return want in [c.id for c in found.causes], wrong


def diagnosis(path: Path) -> Diagnosis:
    return analyze_dump(DumpSpec([path]), AnalyzeOptions()).diagnosis


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="planted variants, comma-separated"
    )
    args = parser.parse_args()
    chosen = [v for v in VARIANTS if v in args.variants.split(",")]
    root = Path(tempfile.mkdtemp())
    print(f"| planted | steps | {' | '.join(f'σ = {n}' for n in NOISES)} |")
    print(f"| --- | --- | {' | '.join('---' for _ in NOISES)} |")
    for variant, steps in (run for run in RUNS if run[0] in chosen):
        cells = []
        for noise in NOISES:
            right = wrong = 0
            for seed in range(args.seeds):
                path = write_planted(
                    root / f"{variant}-{steps}-{noise}-{seed}",
                    variant,
                    1000 + seed,
                    steps,
                    noise=noise,
                )
                good, alarm = judged(variant, diagnosis(path))
                right += good
                wrong += alarm
            cells.append(f"{right}/{args.seeds}" + (f" ({wrong} false)" if wrong else ""))
        print(f"| {variant} | {steps} | {' | '.join(cells)} |", flush=True)
    print("\n| sample dump | verdict | causes |\n| --- | --- | --- |")
    samples = sorted((ROOT / "sample_data" / "model").iterdir()) + [
        ROOT / "sample_data" / name
        for name in (
            "bf16.parquet",
            "fp8.parquet",
            "heavy_tails.parquet",
            "long_responses.parquet",
            "drift",
        )
    ]
    for path in samples:
        found = diagnosis(path)
        causes = ", ".join(f"{c.id} ({c.severity})" for c in found.causes) or "–"
        print(f"| {path.relative_to(ROOT)} | {found.verdict} | {causes} |", flush=True)


if __name__ == "__main__":
    main()
