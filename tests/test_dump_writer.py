"""DumpWriter: one shard per step and rank, written off the training thread, the same dump as
write_dump."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import rcdiag
from rcdiag.io import shards
from rcdiag.io.shards import DumpWriter
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.run.dump import DumpSpec
from rcdiag.run.results import analyze_dump


def arrays(seed: int, rows: int = 6, width: int = 9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rollout = np.log(rng.uniform(0.01, 1.0, (rows, width))).astype(np.float32)
    old = (rollout + rng.normal(0.0, 0.05, (rows, width))).astype(np.float32)
    mask = np.arange(width)[None, :] < rng.integers(0, width + 1, rows)[:, None]
    return rollout, old, mask


def analysed(directory: Path) -> dict[str, Any]:
    doc = analyze_dump(DumpSpec([directory]), AnalyzeOptions()).to_json()
    return {k: v for k, v in doc.items() if k != "source"} | {
        "rows": doc["source"]["rows"],
        "valid_tokens": doc["source"]["valid_tokens"],
    }


def test_the_same_dump_as_write_dump(tmp_path: Path) -> None:
    uids = [f"p{i // 2}" for i in range(6)]
    with DumpWriter(tmp_path / "w", rank=2) as writer:
        for step in (1, 2, 5):
            writer.write(step, *arrays(step), uid=uids, policy_lag=step % 2)
            rcdiag.write_dump(
                tmp_path / "d" / f"step={step}" / "part.parquet",
                *arrays(step),
                step=step,
                extra_columns={"uid": uids, "policy_lag": [step % 2] * 6},
            )
    assert [p.relative_to(tmp_path / "w").as_posix() for p in writer.written] == [
        f"step={s}/rank-2.parquet" for s in (1, 2, 5)
    ]
    for step in (1, 2, 5):
        ours = pq.read_table(writer.path(step))
        theirs = pq.read_table(tmp_path / "d" / f"step={step}" / "part.parquet")
        assert ours.equals(theirs)
    assert analysed(tmp_path / "w") == analysed(tmp_path / "d")


def test_the_arrays_are_copied_before_write_returns(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    rollout = torch.full((2, 3), -1.0)
    old = torch.full((2, 3), -2.0, dtype=torch.bfloat16)
    with DumpWriter(tmp_path) as writer:
        writer.write(0, rollout, old, torch.ones(2, 3, dtype=torch.bool))
        rollout.fill_(0.0)  # the trainer reuses its buffers at once
        old.fill_(0.0)
    table = pq.read_table(writer.path(0))
    assert table.column("rollout_log_probs").to_pylist() == [[-1.0] * 3] * 2
    assert table.column("old_log_probs").to_pylist() == [[-2.0] * 3] * 2


def test_writes_happen_on_a_background_thread_with_a_bounded_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, threads = threading.Event(), []

    def slow_write(*args: Any, **kwargs: Any) -> Path:
        threads.append(threading.current_thread().name)
        release.wait(10)
        return rcdiag.write_dump(*args, **kwargs)

    monkeypatch.setattr(shards, "write_dump", slow_write)
    writer = DumpWriter(tmp_path, max_pending=1)
    writer.write(0, *arrays(0))  # taken by the thread, which then waits
    writer.write(1, *arrays(1))  # fills the queue (the thread may not have taken step 0 yet)
    blocked = threading.Thread(target=writer.write, args=(2, *arrays(2)))
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()  # a third write waits for room: memory stays bounded
    release.set()
    blocked.join(10)
    writer.close()
    assert threads == ["rcdiag-dump-writer"] * 3
    assert [p.name for p in writer.written] == ["rank-0.parquet"] * 3


def test_errors_of_the_thread_surface_in_the_trainer(tmp_path: Path) -> None:
    (tmp_path / "step=0").write_text("a file where a directory goes")
    writer = DumpWriter(tmp_path)
    writer.write(0, *arrays(0))
    with pytest.raises(RuntimeError, match="could not write") as caught:
        writer.flush()
    assert isinstance(caught.value.__cause__, OSError)
    writer.write(1, *arrays(1))  # later steps are still written
    writer.close()
    writer.close()
    assert [p.parent.name for p in writer.written] == ["step=1"]
    with pytest.raises(ValueError, match="closed"):
        writer.write(2, *arrays(2))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rollout_log_probs": np.zeros(3)}, r"must both be \[B, T\]"),
        ({"response_mask": np.ones((2, 2))}, "response_mask"),
        ({"uid": ["a"]}, "uid has 1 entries; expected 6"),
    ],
)
def test_bad_arguments_raise_in_the_call(tmp_path: Path, kwargs: dict, match: str) -> None:
    rollout, old, mask = arrays(0)
    args = {"rollout_log_probs": rollout, "old_log_probs": old, "response_mask": mask} | kwargs
    with DumpWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match=match):
            writer.write(0, **args)
        writer.write(0, rollout, old, mask)  # the failed call did not use up step 0
        with pytest.raises(ValueError, match=r"step 0 was already written.*one call per step"):
            writer.write(0, rollout, old, mask)
    with pytest.raises(ValueError, match="rank"):
        DumpWriter(tmp_path, rank=-1)


def test_queued_steps_are_written_at_interpreter_exit(tmp_path: Path) -> None:
    code = (
        "import numpy as np, time\n"
        "from rcdiag.io import shards\n"
        "slow = shards.write_dump\n"
        "shards.write_dump = lambda *a, **k: (time.sleep(0.2), slow(*a, **k))[1]\n"
        f"w = shards.DumpWriter({str(tmp_path)!r}, rank=3)\n"
        "for step in range(3):\n"
        "    w.write(step, np.zeros((2, 2)), np.zeros((2, 2)))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert sorted(p.parent.name for p in tmp_path.glob("step=*/rank-3.parquet")) == [
        "step=0",
        "step=1",
        "step=2",
    ]
