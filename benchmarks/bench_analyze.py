"""Benchmark: every command that reads a dump, against merely reading the same columns with pyarrow.

Generates (once, cached under benchmarks/data/) a dump of about 50 million valid tokens as hive step
shards, a 20-row dump, a 10,000-step dump (``bench_steps.py``'s) and a dump of one 5M-token row, then
runs, each in a fresh subprocess so peak memory is measured per run:

* ``read``        — pyarrow reading the same three columns, each file whole (``ParquetFile.read``;
  ``read_table`` would import pyarrow.dataset, and pandas through it when installed);
* ``stream``      — pyarrow iterating them in record batches of rcdiag's size (2²⁰ tokens): the
  steadier floor (the whole-file read varies with its system time);
* ``analyze``     — ``rcdiag analyze DIR --json …`` on the whole dump;
* ``API``         — ``rcdiag.analyze(DIR)`` and its JSON document from Python (target ≤ 1.1× the
  command line); ``API baseline`` the same for ``rcdiag.baseline(DIR)``, whose bootstrap makes
  matrix products (numpy's BLAS on one thread during the pass, as on the command line);
* ``analyze½``    — the same on half of the steps, to show memory does not grow with the dump;
* ``compare``     — ``rcdiag compare-presets DIR`` with every preset of the latest dialect (one pass);
* ``compare trl,slime`` — the same with TRL's and slime's correction modes beside them
  (``--framework trl,slime``; target ≤ 2× ``compare``);
* ``report``      — ``rcdiag report DIR -o …`` (analysis, presets, sweeps, profile: one pass);
* ``baseline``    — ``rcdiag baseline DIR -o …`` (analysis and bootstrap, untimed target);
* ``check``       — ``rcdiag check DIR --baseline …`` (default rules, bootstrap drift);
* ``… 20 rows``   — the whole-file read and ``analyze`` of a 20-row dump: the fixed cost of a run
  (start-up, imports, the diagnosis, the JSON), target ≤ 2× its read;
* ``… 10k steps`` — ``analyze``, ``check``, ``compare`` and ``report`` on a 10,000-step dump of one
  32-token response per step, where per-step work dominates (targets: < 600 MB, compare ≤ 3×
  analyze);
* ``… 5M row``    — ``analyze``, ``compare`` and ``report`` of one 5M-token row (target
  < 600 MB).

rcdiag's modules are compiled to bytecode first, as an install does.
A round runs the commands in turn: ``--repeat`` rounds of every command, then ``--pairs`` rounds
of the commands whose ratios have targets (``analyze`` and the streaming read, the API calls and
the commands they match, the 20-row pair, ``compare``, ``report``). A ratio is taken within each
round, where the two commands ran moments apart (a machine whose speed drifts slows both alike),
and judged by its median over the rounds; each command's seconds in the table are its best.
Prints the table (wall times, each command's ratio to the whole-file read, the streaming read and
``analyze``, peak RSS, the targets with the median, range and CPU median of their paired ratios)
and the summary ratios. Usage:

    python benchmarks/bench_analyze.py [--tokens 50_000_000] [--steps 50] [--repeat 2] [--pairs 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
from bench_steps import generate as steps_generate

HERE = Path(__file__).resolve().parent
COLUMNS = ["rollout_log_probs", "old_log_probs", "response_mask"]
READ_SCRIPT = f"""
import sys, pathlib, pyarrow.parquet as pq
root = pathlib.Path(sys.argv[1])
for path in sorted(root.rglob("*.parquet")) if root.is_dir() else [root]:
    pq.ParquetFile(path).read(columns={COLUMNS!r})
"""
STREAM_SCRIPT = f"""
import sys, pathlib, pyarrow.parquet as pq
root = pathlib.Path(sys.argv[1])
for path in sorted(root.rglob("*.parquet")) if root.is_dir() else [root]:
    handle = pq.ParquetFile(path)
    meta = handle.metadata
    tokens = sum(meta.row_group(g).column(0).num_values for g in range(meta.num_row_groups))
    rows = max(1, int(2**20 / max(1.0, tokens / max(1, meta.num_rows))))
    for batch in handle.iter_batches(batch_size=rows, columns={COLUMNS!r}):
        pass
"""
API_SCRIPT = """
import json, sys, rcdiag
json.dumps(rcdiag.{}(sys.argv[1]).to_json())
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


class Measured(NamedTuple):
    seconds: float
    """Wall seconds."""
    rss: float
    """Peak resident memory, MB."""
    cpu: float
    """User + system seconds of every thread: steadier than wall time on a shared machine."""


def measure(cmd: list[str]) -> Measured:
    """Wall and CPU seconds and peak RSS (MB) of one command, measured with a fresh wrapper
    process."""
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(time.perf_counter() - t, u.ru_maxrss, u.ru_utime + u.ru_stime)"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *cmd], check=True, capture_output=True, text=True
    ).stdout.split()
    return Measured(float(out[0]), float(out[1]) / 1024.0, float(out[2]))


def compile_bytecode() -> None:
    """Compile rcdiag's modules as an install does (an editable install ships no bytecode, and
    with PYTHONDONTWRITEBYTECODE set every run would compile them again: ~0.1 s of each)."""
    import rcdiag

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(rcdiag.__file__).parent)], check=True
    )


def tiny_generate(path: Path) -> Path:
    """A 20-row dump (2 steps × 10 responses of 32 tokens): what start-up costs (cached)."""
    from rcdiag.io.writer import write_dump

    if not path.exists():
        rng = np.random.default_rng(0)
        rollout = -rng.exponential(0.7, (20, 32))
        old = rollout + rng.normal(0, 0.01, rollout.shape)
        write_dump(path, rollout, old, step=np.repeat([0, 1], 10))
    return path


def long_row_generate(path: Path, tokens: int = 5_000_000) -> Path:
    """One row of ``tokens`` float32 tokens (cached): memory bounded for a long response."""
    from rcdiag.io.writer import write_dump

    if not path.exists():
        rng = np.random.default_rng(0)
        rollout = (-rng.exponential(0.7, (1, tokens))).astype(np.float32)
        old = (rollout + rng.normal(0, 0.01, rollout.shape)).astype(np.float32)
        write_dump(path, rollout, old, step=0)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=50_000_000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--data", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of every command")
    parser.add_argument(
        "--pairs",
        type=int,
        default=4,
        help="further rounds of the commands whose ratios have targets only",
    )
    args = parser.parse_args()

    dump = args.data / f"dump_v2_{args.tokens}_{args.steps}"
    if not (dump / ".complete").exists():
        generate(dump, args.tokens, args.steps)
        (dump / ".complete").touch()
    half = [str(dump / f"step={s}") for s in range(args.steps // 2)]
    tiny = str(tiny_generate(args.data / "tiny_20_rows.parquet"))
    long_row = str(long_row_generate(args.data / "long_row_5M.parquet"))
    steps_dump = str(steps_generate(args.data / "steps_10000.parquet", 10_000))
    rcdiag = [sys.executable, "-m", "rcdiag.cli"]
    out = args.data / "out"
    out.mkdir(exist_ok=True)
    out_json = out / "analyze.json"
    baseline = out / "baseline.json"
    runs = {
        "read": [sys.executable, "-c", READ_SCRIPT, str(dump)],
        "stream": [sys.executable, "-c", STREAM_SCRIPT, str(dump)],
        "analyze": [*rcdiag, "analyze", str(dump), "--quiet", "--json", str(out_json)],
        "API": [sys.executable, "-c", API_SCRIPT.format("analyze"), str(dump)],
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
        "API baseline": [sys.executable, "-c", API_SCRIPT.format("baseline"), str(dump)],
        "check": [*rcdiag, "check", str(dump), "--quiet", "--baseline", str(baseline)],
        "read 20 rows": [sys.executable, "-c", READ_SCRIPT, tiny],
        "analyze 20 rows": [*rcdiag, "analyze", tiny, "--quiet", "--json", str(out / "t.json")],
        "analyze 10k steps": [
            *rcdiag,
            "analyze",
            steps_dump,
            "--quiet",
            "--json",
            str(out / "s.json"),
        ],
        "check 10k steps": [*rcdiag, "check", steps_dump, "--quiet"],
        "compare 10k steps": [*rcdiag, "compare-presets", steps_dump, "--quiet"],
        "report 10k steps": [*rcdiag, "report", steps_dump, "--quiet", "-o", str(out / "s.html")],
        "analyze 5M row": [*rcdiag, "analyze", long_row, "--quiet"],
        "compare 5M row": [*rcdiag, "compare-presets", long_row, "--quiet"],
        "report 5M row": [*rcdiag, "report", long_row, "--quiet", "-o", str(out / "l.html")],
    }
    compile_bytecode()
    subprocess.run(runs["baseline"], check=True, stdout=subprocess.DEVNULL)  # check reads it
    rounds: list[dict[str, Measured]] = []
    for _ in range(args.repeat):  # every command in turn, then again
        rounds.append({name: measure(cmd) for name, cmd in runs.items()})
    paired = [name for name, (against, _) in TARGETS.items() if against != "seconds"]
    headline = [n for n in runs if n in paired or n in {TARGETS[p][0] for p in paired}]
    for _ in range(args.pairs):  # the ratios with targets: more rounds of those commands only
        rounds.append({name: measure(runs[name]) for name in headline})
    best = {
        name: min((r[name] for r in rounds if name in r), key=lambda m: m.seconds) for name in runs
    }
    for name, measured in best.items():
        print(
            f"{name:>18}: {measured.seconds:7.2f} s  cpu {measured.cpu:7.2f} s  "
            f"peak RSS {measured.rss:7.0f} MB",
            flush=True,
        )
    report(best, rounds, json.loads(out_json.read_text())["source"]["valid_tokens"])
    check_rc = subprocess.run(runs["check"], stdout=subprocess.DEVNULL).returncode
    print(f"check exit code on its own baseline: {check_rc} (0 expected)")


TARGETS = {
    "analyze": ("stream", 1.5),
    "API": ("analyze", 1.1),
    "API baseline": ("baseline", 1.1),
    "compare": ("analyze", 2.0),
    "compare trl,slime": ("compare", 2.0),
    "report": ("analyze", 2.5),
    "analyze 20 rows": ("read 20 rows", 2.0),
    "check 10k steps": ("seconds", 20.0),
    "compare 10k steps": ("analyze 10k steps", 3.0),
}
"""Each command's target: a ratio of wall times to another command's, or seconds."""


class Ratio(NamedTuple):
    """A command's wall time over another's, measured in the same rounds."""

    median: float
    low: float
    high: float
    cpu: float
    """The median ratio of CPU times."""
    rounds: int


def paired(rounds: list[dict[str, Measured]], a: str, b: str) -> Ratio:
    """The ratio of ``a`` to ``b`` in each round that ran both (the two run moments apart, so a
    machine whose speed drifts slows both alike), summarised by its median."""
    walls = [r[a].seconds / r[b].seconds for r in rounds if a in r and b in r]
    cpus = [r[a].cpu / r[b].cpu for r in rounds if a in r and b in r]
    return Ratio(
        float(np.median(walls)), min(walls), max(walls), float(np.median(cpus)), len(walls)
    )


def report(results: dict[str, Measured], rounds: list[dict[str, Measured]], tokens: int) -> None:
    """The table of every command's best time against the reads and ``analyze`` (wall time),
    each target judged on the median of its paired ratios (CPU median and range beside it), and
    the summary ratios."""
    read, stream = results["read"].seconds, results["stream"].seconds
    analyze = results["analyze"].seconds
    print(f"\nvalid tokens: {tokens:,}  ({tokens / analyze / 1e6:.1f} M tokens/s in analyze)\n")
    print("| command | seconds | × read | × stream | × analyze | peak RSS MB | target | met |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for name, measured in results.items():
        seconds, rss = measured.seconds, measured.rss
        wanted, met = "", ""
        target = TARGETS.get(name)
        if target is not None:
            against, limit = target
            if against == "seconds":
                wanted, ok = f"< {limit:g} s", seconds < limit
            else:
                ratio = paired(rounds, name, against)
                wanted = (
                    f"≤ {limit}× {against} (median of {ratio.rounds} pairs {ratio.median:.2f}, "
                    f"{ratio.low:.2f}–{ratio.high:.2f}; cpu {ratio.cpu:.2f})"
                )
                ok = ratio.median <= limit
            met = "yes" if ok else "**no**"
        if "10k" in name or "5M" in name:
            wanted += ("; " if wanted else "") + "< 600 MB"
            met += ("; " if met else "") + ("yes" if rss < 600 else "**no**")
        print(
            f"| {name} | {seconds:.2f} | {seconds / read:.2f} | {seconds / stream:.2f} | "
            f"{seconds / analyze:.2f} | {rss:.0f} | {wanted} | {met} |"
        )

    def pair(a: str, b: str) -> str:
        ratio = paired(rounds, a, b)
        return f"{ratio.median:.2f} (cpu {ratio.cpu:.2f}; {ratio.rounds} pairs)"

    print(
        f"\npeak RSS whole / half dump (analyze): {results['analyze'].rss:.0f} / "
        f"{results['analyze_half'].rss:.0f} MB (flat in the dump's size)"
    )
    print(
        f"analyze × whole-file read: {pair('analyze', 'read')}; "
        f"× streaming read: {pair('analyze', 'stream')}"
    )
    print(
        f"API × command line: analyze {pair('API', 'analyze')}, "
        f"baseline {pair('API baseline', 'baseline')}"
    )
    print(f"20-row analyze × its read (fixed cost): {pair('analyze 20 rows', 'read 20 rows')}")
    print(
        f"compare × analyze: {pair('compare', 'analyze')}; "
        f"report × analyze: {pair('report', 'analyze')}"
    )
    print(
        f"peak RSS: compare 10k steps {results['compare 10k steps'].rss:.0f} MB, report 10k "
        f"steps {results['report 10k steps'].rss:.0f} MB, report 5M row "
        f"{results['report 5M row'].rss:.0f} MB (target < 600)"
    )
    print(
        f"compare with TRL's and slime's modes / verl's alone: "
        f"{pair('compare trl,slime', 'compare')} (target ≤ 2, docs/frameworks.md)"
    )


if __name__ == "__main__":
    main()
