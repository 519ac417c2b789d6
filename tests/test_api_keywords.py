"""One spelling of each keyword across the public Python API (docs/python-api.md, "Keyword
arguments"): every parameter of every public function of ``rcdiag``, ``rcdiag.api`` and
``rcdiag.torch`` is a word of :data:`VOCABULARY`, each concept has one word, and a former
spelling still works with a ``DeprecationWarning``."""

from __future__ import annotations

import inspect
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import rcdiag
from rcdiag import api
from rcdiag.run.dump import DumpArguments

VOCABULARY: dict[str, str] = {
    # what is read
    "paths": "the dump read (files, directories, globs, URLs)",
    "from_json": "a results JSON read instead of a dump",
    "result": "a result of the API to render",
    # what is written
    "output": "the file a function writes",
    "directory": "the directory a writer fills",
    "compression": "the parquet codec of what is written",
    "plotlyjs": "how the page gets plotly.js",
    # what is computed
    "dialect": "verl's metric set: latest or legacy",
    "veto_threshold": "τ of the catastrophic-token metrics",
    "frameworks": "other frameworks brought in (their metrics, their correction modes)",
    "translate": "the framework whose keys the recommendation is also given in",
    "presets": "verl preset names",
    "configs": "your own correction configurations",
    "preset_or_config": "one configuration: a preset name or verl's keys",
    "sweep": "the criterion or IS level whose thresholds are swept",
    "grid": "the thresholds of the sweep",
    "top": "offending sequences listed per ranking",
    "rules": "CI rules",
    "rules_file": "a TOML rules file",
    "with_defaults": "the built-in rules too",
    "baseline": "a reference run's baseline",
    "abs_tol": "absolute tolerance of drift rules",
    "rel_tol": "relative tolerance of drift rules",
    "confidence": "confidence of the baseline tests",
    "trend_alpha": "significance of the trend test",
    "seed": "seed of the bootstrap",
    "replicates": "bootstrap replicates",
    "progress": "the callback told of rows read",
    "run_id": "an existing MLflow run",
    "run": "a W&B run",
    # a trainer's tensors
    "rollout_log_probs": "log π_rollout, [B, T]",
    "old_log_probs": "log π_train, [B, T]",
    "response_mask": "the [B, T] mask of valid tokens",
    "step": "a training step (or the steps read)",
    "uid": "each row's prompt-group id",
    "policy_lag": "optimizer steps the rollout policy was behind",
    "trim_padding": "drop each row's trailing padding",
    "extra_columns": "per-row columns to add",
    "rank": "the trainer process writing",
    "max_pending": "batches queued before write() blocks",
    # how a dump is read (**dump)
    "steps": "a range of steps read",
    "rollout_col": "the rollout log-prob column",
    "training_col": "the training log-prob column",
    "mask_col": "the response-mask column",
    "step_col": "the step column",
    "drop_nonfinite": "mask non-finite log-probs instead of failing",
    "storage_options": "the remote file system's settings",
    "engine": "where the pass runs",
    "ray_address": "the Ray cluster",
    "cache": "the directory of each file's cached partial results",
    "format": "the dump's format",
    "trust_pickle": "read pickled native dumps",
}
"""Every keyword of the public API → its concept (one word per concept)."""

RENAMED = {
    ("compare_presets", "framework"): "frameworks",
    ("recommend", "framework"): "translate",
    ("write_report", "path"): "output",
    ("write_dump", "path"): "output",
}
"""Former spellings, still accepted with a DeprecationWarning."""


def public_functions() -> Iterator[tuple[str, Callable[..., Any]]]:
    for name in api.__all__:
        value = getattr(api, name)
        if inspect.isfunction(value):
            yield name, value
    yield "write_dump", rcdiag.write_dump
    from rcdiag import trackers

    for name in ("to_tensorboard", "to_mlflow", "to_wandb", "step_scalars"):
        yield name, getattr(trackers, name)
    torch_api = pytest.importorskip("rcdiag.torch")
    yield "offpolicy_metrics", torch_api.offpolicy_metrics
    yield "preset_metrics", torch_api.preset_metrics
    yield "Monitor", torch_api.Monitor.__init__
    yield "Monitor.update", torch_api.Monitor.update
    yield "DumpWriter", torch_api.DumpWriter.__init__
    yield "DumpWriter.write", torch_api.DumpWriter.write


def keywords(function: Callable[..., Any]) -> list[str]:
    """The parameters a caller names, with ``**dump`` as the dump arguments it takes."""
    out = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "self":
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            out += list(DumpArguments.__annotations__)
        else:
            out.append(parameter.name)
    return out


def test_each_concept_has_one_word() -> None:
    twice = [c for c, n in Counter(VOCABULARY.values()).items() if n > 1]
    assert not twice


@pytest.mark.parametrize(("name", "function"), list(public_functions()))
def test_every_keyword_is_a_word_of_the_vocabulary(name: str, function: Callable[..., Any]) -> None:
    unknown = [k for k in keywords(function) if k not in VOCABULARY]
    assert not unknown, f"{name}: {unknown} (add the word, or use the existing one)"
    former = [old for (where, old) in RENAMED if where == name and old in keywords(function)]
    assert not former, f"{name} still spells {former} the old way"


def test_the_convert_dump_arguments_are_in_the_vocabulary() -> None:
    assert set(DumpArguments.__annotations__) <= set(VOCABULARY)


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rcdiag.synth import config_for, write_synthetic_dump

    path = tmp_path_factory.mktemp("kw") / "run"
    write_synthetic_dump(path, config_for("drift", steps=2, rows_per_step=8, mean_length=16))
    return path


def test_former_spellings_work_with_a_deprecation_warning(dump: Path, tmp_path: Path) -> None:
    import numpy as np

    calls: dict[tuple[str, str], Callable[[], Any]] = {
        ("compare_presets", "framework"): lambda: rcdiag.compare_presets(
            dump, presets=[], framework="trl"
        ),
        ("recommend", "framework"): lambda: rcdiag.recommend(dump, framework="trl"),
        ("write_report", "path"): lambda: rcdiag.write_report(
            rcdiag.analyze(dump), path=tmp_path / "r.html"
        ),
        ("write_dump", "path"): lambda: rcdiag.write_dump(
            path=tmp_path / "d.parquet",
            rollout_log_probs=np.zeros((1, 2)),
            old_log_probs=np.zeros((1, 2)),
        ),
    }
    assert set(calls) == set(RENAMED)
    for (name, old), call in calls.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            done = call()
        messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
        assert messages == [
            f"{name}({old}=...) is now {name}({RENAMED[name, old]}=...); the old name will be removed"
        ]
        assert done is not None
    assert rcdiag.recommend(dump, translate="trl").framework is not None
    compared = rcdiag.compare_presets(dump, presets=[], frameworks="trl")
    assert compared.presets and all(p.framework == "trl" for p in compared.presets)
    with pytest.raises(TypeError, match="both framework= and translate="):
        rcdiag.recommend(dump, framework="trl", translate="trl")
