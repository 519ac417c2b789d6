"""Incremental passes (``--cache DIR``): a warm pass reads only new or changed files and equals a
cold one exactly, and a pass without a cache up to the order of floating-point additions."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app
from rcdiag.run import cache as cached_pass
from rcdiag.synth import config_for, write_synthetic_dump
from tests.documents import assert_documents_close

pytestmark = pytest.mark.xdist_group("cache")
STEPS = 6


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src") / "run"
    config = config_for("drift", steps=STEPS + 1, rows_per_step=20, mean_length=30)
    write_synthetic_dump(root, config, shards=True)
    return root


@pytest.fixture
def grown(source: Path, tmp_path: Path) -> Path:
    """The first STEPS steps of the run (the last one is added by a test)."""
    root = tmp_path / "run"
    for step in range(STEPS):
        shutil.copytree(source / f"step={step}", root / f"step={step}")
    return root


def assert_close(a: Any, b: Any) -> None:
    """Equal documents, numbers to 1e-9 relative (the order of additions differs)."""
    assert_documents_close(a, b, rel=1e-9, abs_tol=1e-15)


CALLS = {
    "analyze": lambda p, **k: rcdiag.analyze(p, frameworks="all", **k).to_json(),
    "report": lambda p, **k: rcdiag.report(p, **k).to_json(),
    "baseline": lambda p, **k: {
        **rcdiag.baseline(p, replicates=12, **k).to_json(),
        "created": None,
    },
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_warm_pass_equals_a_cold_one(grown: Path, tmp_path: Path, call: str) -> None:
    compute = CALLS[call]
    plain = compute(grown)
    cold = compute(grown, cache=tmp_path / "cache")
    assert (cached_pass.LAST.hits, cached_pass.LAST.misses) == (0, STEPS)
    warm = compute(grown, cache=tmp_path / "cache")
    assert (cached_pass.LAST.hits, cached_pass.LAST.misses) == (STEPS, 0)
    assert json.dumps(warm) == json.dumps(cold)  # exactly
    assert_close(cold, plain)


@pytest.mark.parametrize("call", ["analyze", "report"])
def test_a_new_step_reads_one_file(grown: Path, source: Path, tmp_path: Path, call: str) -> None:
    compute, cache = CALLS[call], tmp_path / "cache"
    compute(grown, cache=cache)
    shutil.copytree(source / f"step={STEPS}", grown / f"step={STEPS}")
    after = compute(grown, cache=cache)
    assert (cached_pass.LAST.hits, cached_pass.LAST.misses) == (STEPS, 1)
    assert json.dumps(after) == json.dumps(compute(grown, cache=tmp_path / "fresh"))
    assert_close(after, compute(grown))
    assert len(after["steps"]) == STEPS + 1


def test_a_changed_file_or_option_is_read_again(grown: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    rcdiag.analyze(grown, cache=cache)
    shard = grown / "step=2" / "part-0.parquet"
    rng = np.random.default_rng(0)
    rollout = rng.normal(-1.0, 0.2, (4, 8)).clip(max=-0.01)
    rcdiag.write_dump(shard, rollout, rollout + 0.5, step=2)
    changed = rcdiag.analyze(grown, cache=cache)
    assert (cached_pass.LAST.hits, cached_pass.LAST.misses) == (STEPS - 1, 1)
    assert_close(changed.to_json(), rcdiag.analyze(grown).to_json())
    rcdiag.analyze(grown, cache=cache, veto_threshold=1e-3)
    assert cached_pass.LAST.misses == STEPS
    rcdiag.analyze(grown, cache=cache, steps="1:3")
    assert cached_pass.LAST.misses == STEPS


def test_entries_of_other_code_are_never_read(
    grown: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two builds of one version may pickle their consumers differently: an entry written by
    other code (another digest of rcdiag's sources) is a miss, never loaded."""
    cache = tmp_path / "cache"
    digest = cached_pass.code_digest()
    assert len(digest) == 64 and digest == cached_pass.code_digest()
    rcdiag.analyze(grown, cache=cache)
    monkeypatch.setattr(cached_pass, "code_digest", lambda: "other code")
    rcdiag.analyze(grown, cache=cache)
    assert (cached_pass.LAST.hits, cached_pass.LAST.misses) == (0, STEPS)


def test_an_unreadable_entry_is_computed_again(grown: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = rcdiag.analyze(grown, cache=cache).to_json()
    entries = sorted(cache.iterdir())
    assert len(entries) >= STEPS  # one per file, one per merged run below the root
    for entry in entries:
        entry.write_bytes(b"not a pickle")
    assert rcdiag.analyze(grown, cache=cache).to_json() == first
    assert (cached_pass.LAST.hits, cached_pass.LAST.misses) == (0, STEPS)


def test_the_command_line_flag(grown: Path, tmp_path: Path) -> None:
    out, cache = tmp_path / "a.json", tmp_path / "cache"
    runner = CliRunner()
    for _ in range(2):
        done = runner.invoke(
            app, ["analyze", str(grown), "--cache", str(cache), "--json", str(out), "-q"]
        )
        assert done.exit_code == 0, done.stderr
    assert cached_pass.LAST.hits == STEPS
    assert json.loads(out.read_text())["steps"][0]["step"] == 0
    refused = runner.invoke(app, ["analyze", str(grown), "--cache", str(cache), "--engine", "ray"])
    assert refused.exit_code == 2
    assert refused.stderr == "Error: --cache: the cache serves the local engine only\n"
    assert not any(p.suffix == ".rcdiag-pass" for p in grown.rglob("*"))  # the dump is untouched
    assert sorted(os.listdir(grown)) == sorted(f"step={s}" for s in range(STEPS))


def test_the_merge_tree_depends_on_the_files_alone_and_changes_one_node_per_level() -> None:
    """A warm pass with one new file among 1,000 loads a few dozen entries, not 1,000: the file's
    run, that run's run, and so on up to the root; every other node keeps its key."""
    import hashlib

    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(1000)]
    tree = cached_pass.merge_tree(list(keys))
    grown = cached_pass.merge_tree([*keys[:500], "f" * 63 + "1", *keys[500:]])

    def nodes(node: cached_pass.Node) -> dict[str | None, cached_pass.Node]:
        if not node.members:
            return {}
        found = {node.key: node}
        for member in node.members:
            found.update(nodes(member))
        return found

    def files(node: cached_pass.Node) -> list[int]:
        return [node.index] if not node.members else [i for m in node.members for i in files(m)]

    assert files(tree) == list(range(1000))  # every file once, in order
    assert files(grown) == list(range(1001))
    before, after = nodes(tree), nodes(grown)
    changed = [after[key] for key in after.keys() - before.keys()]
    depth, node = 0, grown
    while node.members:
        depth, node = depth + 1, node.members[0]
    assert 2 <= depth <= 4 and len(changed) <= 2 * depth  # about one merged node per level
    loads = sum(len(n.members) for n in changed)  # what a warm pass loads or computes
    assert loads < 100
    assert cached_pass.merge_tree(list(keys)) == tree  # the same files, the same tree


def test_one_new_file_among_many_loads_a_few_entries(tmp_path: Path) -> None:
    """With 160 files, a warm pass after adding one loads the merged runs around the new file,
    not every file's entry, and equals a cold cached pass exactly."""
    rng = np.random.default_rng(11)
    root = tmp_path / "many"

    def shard(step: int) -> None:
        rollout = -rng.exponential(0.7, (2, 6))
        rcdiag.write_dump(
            root / f"step={step}" / "part-0.parquet", rollout, rollout + 0.01, step=step
        )

    for step in range(160):
        shard(step)
    cache = tmp_path / "cache"
    rcdiag.analyze(root, cache=cache)
    shard(160)
    warm = rcdiag.analyze(root, cache=cache).to_json()
    assert (cached_pass.LAST.hits, cached_pass.LAST.misses) == (160, 1)
    assert cached_pass.LAST.loaded < 120  # merged runs reused (each file's entry: 160 loads)
    assert json.dumps(warm) == json.dumps(rcdiag.analyze(root, cache=tmp_path / "fresh").to_json())
