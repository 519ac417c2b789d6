"""Detection rates and false alarms of the diagnosis (docs/diagnosis.md).

Planted dumps (tests/planted.py: an explicit categorical model where tokens are sampled from what the
engine samples from) at several levels of numerical noise, N seeds each: how often the planted cause
is named, and how often a wrong dump-bug id is. Then every shipped sample dump, with its verdict and
causes. Usage:

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
    print(f"| planted | {' | '.join(f'σ = {n}' for n in NOISES)} |")
    print(f"| --- | {' | '.join('---' for _ in NOISES)} |")
    for variant in chosen:
        cells = []
        for noise in NOISES:
            right = wrong = 0
            for seed in range(args.seeds):
                steps = 4 if variant == "growing" else 8
                path = write_planted(
                    root / f"{variant}-{noise}-{seed}", variant, 1000 + seed, steps, noise=noise
                )
                found = diagnosis(path).causes
                bugs = [c.id for c in found if c.kind == "dump_bug"]
                want = CAUSES[variant]
                ids = [c.id for c in found]
                if variant == "spike":  # right: no dump bug and no growth
                    right += not bugs and "growing_drift" not in ids
                else:
                    right += (not bugs) if want is None else want in ids
                wrong += any(b != want for b in bugs)
            cells.append(f"{right}/{args.seeds}" + (f" ({wrong} wrong)" if wrong else ""))
        print(f"| {variant} | {' | '.join(cells)} |", flush=True)
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
