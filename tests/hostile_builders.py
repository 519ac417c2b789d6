"""Input builders of the hostile cases (tests/test_hostile.py): each writes what a case reads under
a test's ``tmp_path`` and returns the names its command refers to (``{dump}``, ``{baseline}``…)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from tests.dumps import simple_columns, write_table

Built = dict[str, Path]
Builder = Callable[[Path], Built]


def shards(root: Path, steps: int = 3) -> Path:
    """A dump directory of ``steps`` step shards."""
    for step in range(steps):
        write_table(root / f"step={step}" / "part-0.parquet", simple_columns(rows=4, step=step))
    return root


def dump(tmp: Path) -> Built:
    return {"dump": shards(tmp / "in" / "dump")}


def _results(tmp: Path, command: str, flag: str, name: str) -> Path:
    from typer.testing import CliRunner

    from rcdiag.cli import app

    out = tmp / "in" / name
    done = CliRunner().invoke(app, [command, str(tmp / "in" / "dump"), flag, str(out), "-q"])
    assert done.exit_code == 0, done.stderr
    return out


def _replaced(path: Path, field: str, token: str) -> Path:
    """``path`` with the value of ``overall[field]`` written as the JSON number ``token``
    (``Infinity``, ``NaN``, ``1e999``)."""
    document = json.loads(path.read_text())
    document["overall"][field] = "@TOKEN@"
    path.write_text(json.dumps(document).replace('"@TOKEN@"', token))
    return path


def baseline_with(token: str) -> Builder:
    """A dump and a baseline whose first ``rollout_corr/k3_kl`` value is ``token``."""

    def build(tmp: Path) -> Built:
        built = dump(tmp)
        baseline = _results(tmp, "baseline", "-o", "baseline.json")
        built["baseline"] = _replaced(baseline, "rollout_corr/k3_kl", token)
        return built

    return build


def results_with(token: str) -> Builder:
    """A results JSON (``analyze --json``) whose first ``rollout_corr/kl`` value is ``token``."""

    def build(tmp: Path) -> Built:
        built = dump(tmp)
        results = _results(tmp, "analyze", "--json", "results.json")
        built["results"] = _replaced(results, "rollout_corr/kl", token)
        return built

    return build


def text_file(name: str, text: str) -> Builder:
    """A dump and a text input (rules, configuration) named ``name``."""

    def build(tmp: Path) -> Built:
        built = dump(tmp)
        built[name.split(".")[0]] = tmp / "in" / name
        built[name.split(".")[0]].write_text(text)
        return built

    return build


def many_files(tmp: Path) -> Built:
    """600 steps × 2 ranks, the files DumpWriter writes (1,200 files)."""
    import rcdiag

    root = tmp / "in" / "dump"
    rng = np.random.default_rng(0)
    rollout = rng.normal(-1.0, 0.1, (2, 4))
    for step in range(600):
        for rank in range(2):
            rcdiag.write_dump(
                root / f"step={step}" / f"rank-{rank}.parquet", rollout, rollout + 0.01, step=step
            )
    return {"dump": root}


def odd_uids(tmp: Path) -> Built:
    """A dump whose uids hold NUL, ESC, a right-to-left override, and one of 2 MB."""
    columns = simple_columns(rows=4, step=0)
    columns["old_log_probs"] = [[v - 3.0 for v in row] for row in columns["old_log_probs"]]
    columns["uid"] = ["a\x00b", "\x1b[2Jc", "d\u202eevil", "u" * (2 << 20)]
    return {"dump": write_table(tmp / "in" / "dump.parquet", columns)}


def big_dump(tmp: Path) -> Built:
    """A dump large enough that writing its report or synthetic copy takes a moment."""
    return {"dump": shards(tmp / "in" / "dump", steps=2), "out": tmp / "out"}


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A server on 127.0.0.1 that accepts connections and never answers; it stops by itself
    (within 120 s) and when the block ends. Yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        for _ in range(600):  # 120 s at most
            if stop.is_set():
                break
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])
        for connection in held:
            connection.close()
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)


def unused_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path → sha256), inputs and outputs alike."""
    import hashlib

    files: dict[str, str] = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            if not stat.S_ISREG(path.lstat().st_mode):  # a link or a FIFO: never read (it blocks)
                files[str(path.relative_to(root))] = f"not a regular file: {path.lstat().st_mode}"
                continue
            files[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def with_entry(kind: str) -> Builder:
    """A dump directory holding, among its parts, a ``kind`` ("dangling" symbolic link or "fifo")
    named like a parquet file."""

    def build(tmp: Path) -> Built:
        built = dump(tmp)
        odd = built["dump"] / "step=1" / "part-1.parquet"
        if kind == "fifo":
            os.mkfifo(odd)
        else:
            odd.symlink_to(tmp / "in" / "nowhere.parquet")
        return built

    return build
