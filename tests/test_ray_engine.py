"""The Ray engine gives the local engine's results: sample dumps, a many-shard dump, a corrupt shard
and a worker killed mid-run, on a local Ray of 2 CPUs started (and stopped) by this module."""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rcdiag.assess.recommendation.candidates import candidate_sweeps, preset_configs
from rcdiag.errors import InputError, UsageError
from rcdiag.frameworks import FRAMEWORKS
from rcdiag.io.files import StepSelection
from rcdiag.io.writer import write_dump
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.run.consumers import BootstrapRequest, Request
from rcdiag.run.dump import DumpSpec
from rcdiag.run.engine import run
from rcdiag.run.ray import KILL_ONCE_VARIABLE

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")  # one Ray for the module, in one test process

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Path]:
    """A local Ray with 2 CPUs; yields the kill marker (present: no task dies)."""
    workdir = Path(tempfile.mkdtemp(prefix="rcd-ray-"))
    marker = workdir / "killed"
    marker.touch()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "disabled")  # no token written to the home directory
        env.setenv(KILL_ONCE_VARIABLE, str(marker))
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=str(workdir / "ray"),
        )
        try:
            yield marker
        finally:
            ray.shutdown()
            shutil.rmtree(workdir, ignore_errors=True)


def full_request(dialect: str = "latest") -> Request:
    """Everything a pass can compute: presets, sweeps, profile, bootstrap."""
    sweeps = candidate_sweeps(dialect)  # type: ignore[arg-type]
    return Request(
        AnalyzeOptions(dialect=dialect),  # type: ignore[arg-type]
        configs=preset_configs(dialect)[0],  # type: ignore[arg-type]
        summary_only=[c for s in sweeps for c in s.configs],
        profile_top_k=5,
        bootstrap=BootstrapRequest(replicates=40, seed=3, stream=0),
        frameworks=tuple(FRAMEWORKS.values()),
    )


def snapshot(spec: DumpSpec, request: Request) -> dict[str, Any]:
    """Every number of a pass: metrics per step and overall, every configuration's metrics and
    summary, the profile, the bootstrap replicates, the reader's counts."""
    done = run(spec, request)
    analysis, comparison = done.analysis, done.comparison
    assert comparison is not None and done.profile is not None
    out: dict[str, Any] = {
        "overall": analysis.overall(),
        "steps": [(s.step, s.rows, s.valid_tokens, s.metrics) for s in analysis.step_results()],
        "lags": analysis.lags.table(),
        "evidence": analysis.evidence.total(),
        "profile": done.profile.result(),
        "replicates": {k: v.tolist() for k, v in (done.replicates() or {}).items()},
        "counts": (done.reader.dropped_nonfinite, done.reader.positive_log_probs),
        "frameworks": [r.to_json() for r in done.frameworks.results()] if done.frameworks else [],
    }
    for name in comparison.configs:
        full = name in request_names(request)  # sweep points are kept for the whole dump only
        out[f"config {name}"] = (
            comparison.metrics(name) if full else None,
            comparison.summary(name),
            [comparison.summary(name, s) for s in comparison.steps()] if full else None,
        )
    return out


def request_names(request: Request) -> set[str]:
    return {c.name for c in request.configs}


def assert_same(local: Any, distributed: Any, path: str = "") -> None:
    """Equal, floats to 1e-9 relative: the engines add the same numbers in another order."""
    if isinstance(local, dict):
        assert local.keys() == distributed.keys(), path
        for key in local:
            assert_same(local[key], distributed[key], f"{path}/{key}")
    elif isinstance(local, (list, tuple)):
        assert len(local) == len(distributed), path
        for i, (a, b) in enumerate(zip(local, distributed, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(local, float) and not math.isnan(local):
        assert distributed == pytest.approx(local, rel=1e-9, abs=1e-12), path
    elif isinstance(local, float):
        assert isinstance(distributed, float) and math.isnan(distributed), path
    else:
        assert local == distributed, path


def many_shards(root: Path) -> Path:
    """12 files: 4 steps × 3 ranks, ragged rows with padding, uids, policy lags, one empty row."""
    rng = np.random.default_rng(7)
    for step in range(4):
        for rank in range(3):
            rows, width = 9 + rank, 40
            lengths = rng.integers(0, width, rows)
            rollout = -rng.exponential(0.8, (rows, width))
            old = rollout + rng.normal(0.0, 0.05 * (1 + step), (rows, width))
            mask = np.arange(width)[None, :] < lengths[:, None]
            write_dump(
                root / f"step={step}" / f"rank-{rank}.parquet",
                rollout,
                old,
                mask,
                step=step,
                extra_columns={
                    "uid": [f"s{step}r{rank}g{i // 3}" for i in range(rows)],
                    "policy_lag": rng.integers(0, 3, rows),
                },
            )
    return root


@pytest.mark.parametrize(
    ("dump", "dialect"),
    [("drift", "latest"), ("fp8.parquet", "latest"), ("drift", "legacy"), ("model", "latest")],
)
def test_sample_dumps_give_the_local_results(cluster: Path, dump: str, dialect: str) -> None:
    paths = [str(SAMPLES / dump)]
    request = full_request(dialect)
    local = snapshot(DumpSpec(paths), request)
    assert_same(local, snapshot(DumpSpec(paths, engine="ray"), request))


def test_a_many_shard_dump_gives_the_local_results(cluster: Path, tmp_path: Path) -> None:
    paths = [str(many_shards(tmp_path / "run"))]
    request = full_request()
    local = snapshot(DumpSpec(paths), request)
    assert_same(local, snapshot(DumpSpec(paths, engine="ray"), request))
    # a step selection keeps each row's place in the dump: the bootstrap does not move
    selected = DumpSpec(paths, selection=StepSelection.parse(steps="1:2"))
    distributed = DumpSpec(paths, selection=selected.selection, engine="ray")
    assert_same(snapshot(selected, request), snapshot(distributed, request))


def test_a_corrupt_shard_gives_the_local_error(cluster: Path, tmp_path: Path) -> None:
    root = many_shards(tmp_path / "run")
    shard = root / "step=2" / "rank-1.parquet"
    data = shard.read_bytes()
    shard.write_bytes(data[:4] + bytes(len(data) // 2) + data[len(data) // 2 + 4 :])
    errors = []
    for engine in ("local", "ray"):
        with pytest.raises(InputError) as caught:
            run(DumpSpec([str(root)], engine=engine), Request())
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert str(shard) in errors[1]


def test_a_worker_killed_mid_run_is_retried(cluster: Path, tmp_path: Path) -> None:
    paths = [str(many_shards(tmp_path / "run"))]
    request = full_request()
    local = snapshot(DumpSpec(paths), request)
    cluster.unlink()  # the next task to start kills its worker, once
    distributed = snapshot(DumpSpec(paths, engine="ray"), request)
    assert cluster.exists(), "no worker was killed"
    assert_same(local, distributed)


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(UsageError, match=r"rcdiag\[ray\]"):
        run(DumpSpec([str(SAMPLES / "fp8.parquet")], engine="ray"), Request())


def test_an_address_where_nothing_listens_is_refused_at_once() -> None:
    from rcdiag.run.ray import _check_reachable

    with pytest.raises(UsageError, match=r"--ray-address 127\.0\.0\.1:1: no Ray cluster answers"):
        _check_reachable("127.0.0.1:1")
    _check_reachable("auto")  # left to Ray


@pytest.mark.parametrize("kind", ["miles", "skyrl", "nemo_rl"])
def test_other_trainers_dumps_give_the_local_results(
    cluster: Path, tmp_path: Path, kind: str
) -> None:
    """A native dump's units re-opened by the Ray tasks from their paths: the same rows at the
    same places (bootstrap and profile included), the same samples left out."""
    from rcdiag.io.native.detect import InputFormat
    from tests import native_dumps as nd

    root = tmp_path / kind
    for step in (2, 3, 5):
        samples = nd.random_samples(step, 13)
        samples[4].status = "aborted"
        if kind == "miles":
            nd.write_slime_rollout(root, step, samples)
            nd.write_per_rank(root, step, samples, cp_size=2, tp_size=2)
        elif kind == "skyrl":
            nd.write_skyrl(root, step, samples, pad_size=step % 3)
        else:
            nd.write_nemo_rl(root, step, samples)
    spec = DumpSpec([str(root)], input_format=InputFormat(trust_pickle=True))
    request = full_request()
    local = snapshot(spec, request)
    assert_same(local, snapshot(replace(spec, engine="ray"), request))
    done = run(replace(spec, engine="ray"), Request())
    assert done.reader.left_out == run(spec, Request()).reader.left_out
