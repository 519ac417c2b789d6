"""Other trainers' dumps read as they are (rcdiag/io/native, docs/formats.md): the same numbers
give the same results through every format as through rcdiag's parquet dump; what each format
leaves out, and every kind of bad input, is a one-line error."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app
from rcdiag.errors import InputError, UsageError
from rcdiag.io.files import StepSelection
from rcdiag.io.native.detect import InputFormat
from rcdiag.io.native.miles import cp_ranges
from rcdiag.io.reader import DumpReader
from tests import native_dumps as nd
from tests.documents import assert_documents_close

runner = CliRunner()
pytestmark = pytest.mark.xdist_group("native")

STEPS = (3, 4)


def steps_of(seed: int, mismatch: float = 0.05, count: int = 11) -> dict[int, list[nd.Sample]]:
    return {s: nd.random_samples(seed + s, count, mismatch=mismatch) for s in STEPS}


def write_parquet(
    path: Path, steps: dict[int, list[nd.Sample]], lags: dict[int, list[int]] | None = None
) -> Path:
    """The same samples as rcdiag's parquet dump (an independent path: rcdiag.write_dump)."""
    for step, samples in steps.items():
        width = max(len(s.rollout) for s in samples)
        rollout = np.zeros((len(samples), width), np.float32)
        old = np.zeros_like(rollout)
        mask = np.zeros(rollout.shape, bool)
        for i, s in enumerate(samples):
            rollout[i, : len(s.rollout)], old[i, : len(s.old)], mask[i, : len(s.mask)] = (
                s.rollout,
                s.old,
                s.mask,
            )
        extra = {} if lags is None else {"policy_lag": np.asarray(lags[step], np.int64)}
        rcdiag.write_dump(
            path / f"step={step}" / "part.parquet", rollout, old, mask, step, extra_columns=extra
        )
    return path


def slime_v2(root: Path, steps: dict[int, list[nd.Sample]]) -> Path:
    for step, samples in steps.items():
        nd.write_slime_rollout(root, step, samples)
        nd.write_slime_v2(root, step, samples)
    nd.write_slime_rollout(root, STEPS[0], steps[STEPS[0]][:3], evaluation=True)
    return root


def miles(root: Path, steps: dict[int, list[nd.Sample]]) -> Path:
    for step, samples in steps.items():
        nd.write_slime_rollout(root, step, samples)
        nd.write_per_rank(root, step, samples, dp_size=2, cp_size=2, tp_size=2)
        nd.write_miles_extras(root, step, samples)
    return root


def slime_legacy(root: Path, steps: dict[int, list[nd.Sample]]) -> Path:
    for step, samples in steps.items():
        nd.write_slime_rollout(root, step, samples)
        nd.write_per_rank(root, step, samples, cp_size=3, record_cp=False, key="partition")
    return root


def slime_legacy_split_trainer_side(root: Path, steps: dict[int, list[nd.Sample]]) -> Path:
    """Older slime files where only the trainer's log-probs are context-parallel slices."""
    for step, samples in steps.items():
        nd.write_slime_rollout(root, step, samples)
        nd.write_per_rank(
            root, step, samples, cp_size=2, tp_size=2, record_cp=False, split=("log_probs",)
        )
    return root


def slime_train_only(root: Path, steps: dict[int, list[nd.Sample]]) -> Path:
    for step, samples in steps.items():
        nd.write_slime_v2(root, step, samples)
    return root / "train_data"


def nemo_rl(root: Path, steps: dict[int, list[nd.Sample]]) -> Path:
    for step, samples in steps.items():
        nd.write_nemo_rl(root / "exp_001", step, samples)
    return root


def skyrl(root: Path, steps: dict[int, list[nd.Sample]]) -> Path:
    for step, samples in steps.items():
        nd.write_skyrl(root, step, samples, pad_size=step % 3)
    return root


WRITERS: dict[str, Callable[[Path, dict[int, list[nd.Sample]]], Path]] = {
    "slime_v2": slime_v2,
    "miles_cp2_tp2": miles,
    "slime_legacy_cp3": slime_legacy,
    "slime_legacy_cp2_trainer_split": slime_legacy_split_trainer_side,
    "slime_train_only": slime_train_only,
    "nemo_rl": nemo_rl,
    "skyrl": skyrl,
}


def comparable(result: Any) -> dict[str, Any]:
    """A result's document without the paths read, the count of positions read (masked ones
    included: rcdiag.write_dump trims a row's trailing masked positions, a trainer keeps them) and
    the count of samples left out (checked on their own)."""
    document = result.to_json()
    document["source"] = {
        k: v for k, v in document["source"].items() if k not in ("paths", "tokens", "left_out")
    }
    return document


def close(a: Any, b: Any, where: str = "") -> None:
    """Equal documents, floats to 1e-9 relative (the reader's batches may differ)."""
    assert_documents_close(a, b, rel=1e-9, abs_tol=1e-12, where=where)


@pytest.mark.parametrize("mismatch", [0.05, 0.6])
@pytest.mark.parametrize("kind", list(WRITERS))
def test_every_format_gives_the_parquet_results(tmp_path: Path, kind: str, mismatch: float) -> None:
    steps = steps_of(7, mismatch)
    native = WRITERS[kind](tmp_path / kind, steps)
    parquet = write_parquet(tmp_path / "parquet", steps)
    expected = rcdiag.analyze(parquet)
    got = rcdiag.analyze(native, trust_pickle=kind == "skyrl")
    assert got.source.rows == sum(len(v) for v in steps.values())
    assert got.source.valid_tokens == sum(int(s.mask.sum()) for v in steps.values() for s in v)
    close(comparable(expected), comparable(got))
    assert got.diagnosis.verdict == expected.diagnosis.verdict
    if mismatch > 0.5:
        assert expected.diagnosis.verdict == "act"  # the comparison covers a failing dump too
    compared = rcdiag.compare_presets(native, trust_pickle=kind == "skyrl")
    close(comparable(rcdiag.compare_presets(parquet)), comparable(compared), "compare_presets")


@pytest.mark.parametrize("kind", ["slime_v2", "nemo_rl", "skyrl", "miles_cp2_tp2"])
def test_the_cli_reads_each_format_and_convert_round_trips(tmp_path: Path, kind: str) -> None:
    steps = steps_of(3)
    native = WRITERS[kind](tmp_path / kind, steps)
    trust = ["--trust-pickle"] if kind == "skyrl" else []
    out, converted = tmp_path / "a.json", tmp_path / "converted.parquet"
    result = runner.invoke(app, ["analyze", str(native), *trust, "-q", "--json", str(out)])
    assert result.exit_code == 0, result.stderr
    result = runner.invoke(app, ["convert", str(native), *trust, "-o", str(converted)])
    assert result.exit_code == 0, result.stderr
    assert "wrote" in result.stderr
    again = tmp_path / "b.json"
    result = runner.invoke(app, ["analyze", str(converted), "-q", "--json", str(again)])
    assert result.exit_code == 0, result.stderr
    first, second = json.loads(out.read_text()), json.loads(again.read_text())
    for document in (first, second):
        for key in ("paths", "tokens", "left_out"):
            document["source"].pop(key, None)
    close(first, second)


def test_slime_leaves_out_aborted_and_failed_samples_and_counts_them(tmp_path: Path) -> None:
    steps = steps_of(11)
    steps[3][2].status = "aborted"
    steps[3][5].status = "failed"
    steps[4][0].status = "truncated"  # trained on: kept
    native = slime_v2(tmp_path / "slime", steps)
    kept = {s: [x for x in v if x.status not in ("aborted", "failed")] for s, v in steps.items()}
    close(
        comparable(rcdiag.analyze(write_parquet(tmp_path / "parquet", kept))),
        comparable(rcdiag.analyze(native)),
    )
    reader = DumpReader([native])
    assert sum(b.rows for b in reader.batches()) == 20
    assert reader.left_out == {"aborted": 1, "failed": 1}
    assert rcdiag.analyze(native).source.left_out == (("aborted", 1), ("failed", 1))
    out = tmp_path / "a.json"
    result = runner.invoke(app, ["analyze", str(native), "--json", str(out)])
    assert "samples not read: 1 aborted, 1 failed" in result.stderr
    assert json.loads(out.read_text())["source"]["left_out"] == {"aborted": 1, "failed": 1}


def test_skyrl_padding_rows_are_left_out_and_counted(tmp_path: Path) -> None:
    steps = steps_of(5)
    reader = DumpReader([skyrl(tmp_path, steps)], input_format=InputFormat(trust_pickle=True))
    assert sum(b.rows for b in reader.batches()) == 22
    assert reader.left_out == {"padding": 3 % 3 + 4 % 3}


def test_policy_lag_from_slime_weight_versions(tmp_path: Path) -> None:
    steps = steps_of(13)
    versions = [("9",), ("8", "9"), ("7",), ("9", "9", "9")]
    for step, samples in steps.items():
        for i, sample in enumerate(samples):
            sample.versions = tuple(str(int(v) + step) for v in versions[i % 4])
    # newest version of the step's rollout minus the oldest of the sample's turns
    lags = {s: [[0, 1, 2, 0][i % 4] for i in range(len(v))] for s, v in steps.items()}
    for writer in (slime_v2, miles):
        native = writer(tmp_path / writer.__name__, steps)
        reader = DumpReader([native], row_details=True)
        got = np.concatenate([b.lags for b in reader.batches() if b.lags is not None])
        assert got.tolist() == lags[3] + lags[4]
    close(
        comparable(rcdiag.analyze(write_parquet(tmp_path / "parquet", steps, lags))),
        comparable(rcdiag.analyze(tmp_path / "slime_v2")),
    )


def test_slime_prompt_groups_are_read_as_uids(tmp_path: Path) -> None:
    steps = steps_of(17)
    reader = DumpReader([slime_v2(tmp_path, steps)], row_details=True)
    uids = np.concatenate([b.uids for b in reader.batches() if b.uids is not None])
    assert uids.tolist() == [str(s.group) for v in steps.values() for s in v]


def test_without_versions_or_groups_no_lag_and_no_uid(tmp_path: Path) -> None:
    reader = DumpReader([nemo_rl(tmp_path, steps_of(2))], row_details=True)
    batches = list(reader.batches())
    assert all(b.lags is None and b.uids is None for b in batches)


def test_nemo_rl_sample_loss_mask_masks_the_whole_row(tmp_path: Path) -> None:
    steps = steps_of(19)
    steps[4][1].status = "masked"  # written with sample_loss_mask 0
    native = nemo_rl(tmp_path / "nemo", steps)
    steps[4][1].mask = np.zeros_like(steps[4][1].mask)
    close(
        comparable(rcdiag.analyze(write_parquet(tmp_path / "parquet", steps))),
        comparable(rcdiag.analyze(native)),
    )


def test_nemo_rl_position_shift(tmp_path: Path) -> None:
    """A hand case: prompt of 3 tokens, response of 2; the log-probs of tokens 3 and 4 sit at
    positions 3 and 4, position 0 holds nothing (NeMo-RL's [:, 1:] drops it)."""
    line = {
        "generation_logprobs": [[0.0, 0.0, 0.0, -0.5, -0.25, 0.0]],
        "prev_logprobs": [[0.0, -3.0, -2.0, -0.75, -0.125, 0.0]],
        "token_loss_mask": [[0, 0, 0, 1, 1, 0]],
        "sample_loss_mask": [1.0],
        "idx": 0,
    }
    path = tmp_path / "train_data_step7.jsonl"
    path.write_text(json.dumps(line) + "\n")
    batch = next(DumpReader([path]).batches())
    assert batch.rollout.tolist() == [-0.5, -0.25]
    assert batch.old.tolist() == [-0.75, -0.125]
    assert batch.steps.tolist() == [7]


def test_context_parallel_ranges_cover_the_response_once() -> None:
    for total, response in ((10, 6), (33, 20), (9, 8), (50, 1)):  # a prompt has ≥ 1 token
        for cp in (2, 3, 4):
            covered = sorted(
                i
                for r in range(cp)
                for a, b in cp_ranges(total, response, r, cp, total)
                for i in range(a, b)
            )
            assert covered == list(range(response))


def test_step_selection_reads_only_the_selected_files(tmp_path: Path) -> None:
    native = slime_v2(tmp_path, steps_of(23))
    (native / "train_data" / "3.pt").write_bytes(b"not read")  # step 3 is never opened
    reader = DumpReader([native], selection=StepSelection.parse([4]))
    assert [f.step for f in reader.files] == [4]  # type: ignore[union-attr]
    assert sum(b.rows for b in reader.batches()) == 11


def test_the_ray_engine_task_reopens_a_native_unit(tmp_path: Path) -> None:
    from rcdiag.run.consumers import Request
    from rcdiag.run.dump import dump_spec
    from rcdiag.run.ray import file_pass

    native = miles(tmp_path, steps_of(29))
    spec = dump_spec(native)
    reader = spec.reader()
    done = [file_pass(spec, Request(), str(f.path), 0) for f in reader.files]
    assert [d.rows_read for d in done] == [11, 11]


def test_pickles_are_refused_without_trust(tmp_path: Path) -> None:
    native = skyrl(tmp_path, steps_of(31))
    with pytest.raises(UsageError, match="pass trust_pickle"):
        rcdiag.analyze(native)
    result = runner.invoke(app, ["analyze", str(native), "-q"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "--trust-pickle" in lines[0] and "run any code" in lines[0]


def test_pt_files_load_without_running_code(tmp_path: Path) -> None:
    """A .pt file that names a callable (here: a class outside torch's and numpy's data types)
    is refused by weights_only=True, unless the user trusts it."""
    steps = steps_of(37)
    native = slime_v2(tmp_path, steps)
    pack = torch.load(native / "train_data" / "3.pt", weights_only=True)
    pack["samples"][0]["extra"] = StepSelection()  # any class: unpickling would call it
    torch.save(pack, native / "train_data" / "3.pt")
    with pytest.raises(InputError, match=r"weights_only=True.*--trust-pickle"):
        rcdiag.analyze(native)
    assert rcdiag.analyze(native, trust_pickle=True).source.rows == 22


def test_a_missing_torch_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    native = slime_v2(tmp_path, steps_of(41))
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(UsageError, match=r"rcdiag\[torch\]"):
        rcdiag.analyze(native)


def test_two_formats_in_one_directory_need_format(tmp_path: Path) -> None:
    steps = steps_of(43)
    write_parquet(tmp_path, steps)
    nemo_rl(tmp_path, steps)
    with pytest.raises(InputError, match="--format"):
        rcdiag.analyze(tmp_path)
    a = rcdiag.analyze(tmp_path, format="nemo_rl")
    b = rcdiag.analyze(tmp_path, format="parquet")
    close(comparable(a), comparable(b))
    with pytest.raises(UsageError, match=r"^format 'verl'"):
        rcdiag.analyze(tmp_path, format="verl")
    with pytest.raises(InputError, match="holds no SkyRL"):
        rcdiag.analyze(tmp_path, format="skyrl")


def bad_legacy_without_log_probs(tmp_path: Path) -> tuple[Path, str]:
    for step, samples in steps_of(47).items():
        nd.write_per_rank(tmp_path, step, samples, with_log_probs=False)
    return tmp_path, "no 'log_probs'"


def bad_missing_cp_rank(tmp_path: Path) -> tuple[Path, str]:
    miles(tmp_path, steps_of(53))
    for path in tmp_path.glob("train_data/3_*.pt"):
        pack = torch.load(path, weights_only=False)
        if pack["cp_rank"] == 1:
            path.unlink()
    return tmp_path, "context-parallel ranks [1]"


def bad_json_line(tmp_path: Path) -> tuple[Path, str]:
    path = nemo_rl(tmp_path, steps_of(59)) / "exp_001" / "train_data_step4.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:40]
    path.write_text("\n".join(lines) + "\n")
    return path, "train_data_step4.jsonl: line 3: not JSON"


def bad_nemo_lengths(tmp_path: Path) -> tuple[Path, str]:
    path = nemo_rl(tmp_path, steps_of(61)) / "exp_001" / "train_data_step3.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["prev_logprobs"][0].pop()
    lines[0] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    return path, "line 1: 'prev_logprobs' has"


def bad_nonfinite(tmp_path: Path) -> tuple[Path, str]:
    steps = steps_of(67)
    steps[4][2].old[0] = np.nan
    steps[4][2].mask[0] = True
    return slime_v2(tmp_path, steps), "row 2 (step 4): column 'old_log_probs' holds NaN"


def bad_policy_loss_debug(tmp_path: Path) -> tuple[Path, str]:
    miles(tmp_path, steps_of(71))
    return tmp_path / "policy_loss_debug" / "rank_0_call_0.pt", "policy_loss_debug"


def bad_evaluation_file(tmp_path: Path) -> tuple[Path, str]:
    slime_v2(tmp_path, steps_of(73))
    return tmp_path / "rollout_data" / "eval_3.pt", "evaluation rollout"


def bad_rollout_only(tmp_path: Path) -> tuple[Path, str]:
    for step, samples in steps_of(79).items():
        nd.write_slime_rollout(tmp_path, step, samples)
    return tmp_path, "no training file for rollout 3"


def bad_not_a_pickle(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "dumped_data" / "global_step_2_training_input.pkl"
    path.parent.mkdir()
    path.write_bytes(b"\x80\x05garbage")
    return path, "not a readable SkyRL pickle"


def bad_step_name(tmp_path: Path) -> tuple[Path, str]:
    path = nemo_rl(tmp_path, steps_of(83)) / "exp_001" / "train_data_step3.jsonl"
    renamed = path.with_name("samples.jsonl")
    path.rename(renamed)
    return renamed, "does not give the step"


BAD = [
    bad_legacy_without_log_probs,
    bad_missing_cp_rank,
    bad_json_line,
    bad_nemo_lengths,
    bad_nonfinite,
    bad_policy_loss_debug,
    bad_evaluation_file,
    bad_rollout_only,
    bad_not_a_pickle,
    bad_step_name,
]


@pytest.mark.parametrize("make", BAD, ids=[f.__name__ for f in BAD])
def test_bad_native_input_is_one_line_error_exit_2(
    tmp_path: Path, make: Callable[[Path], tuple[Path, str]]
) -> None:
    path, expected = make(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = runner.invoke(app, ["analyze", str(path), "--trust-pickle", "-q"])
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stderr
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_convert_never_writes_a_partial_file(tmp_path: Path) -> None:
    path, _ = bad_json_line(tmp_path / "in")
    out = tmp_path / "out.parquet"
    result = runner.invoke(app, ["convert", str(path.parent), "-o", str(out)])
    assert result.exit_code == 2
    assert not out.exists() and not list(tmp_path.glob(".out.parquet.*"))


def test_column_options_do_not_apply_to_native_dumps(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="rollout_col"):
        rcdiag.analyze(nemo_rl(tmp_path, steps_of(89)), rollout_col="x")


def test_older_skyrl_pickles_of_the_batch_as_a_dict_subclass(tmp_path: Path) -> None:
    """Before TensorBatch defined ``__reduce__``, a batch pickled as a dict subclass: its tensors
    as torch tensors, its attributes (``metadata``) as the object's state."""
    import pickle
    import types

    name = "skyrl_train.training_batch"
    module = types.ModuleType(name)

    class TrainingInputBatch(dict):  # type: ignore[type-arg]
        pass

    TrainingInputBatch.__module__ = name
    TrainingInputBatch.__qualname__ = "TrainingInputBatch"
    module.TrainingInputBatch = TrainingInputBatch  # type: ignore[attr-defined]
    sys.modules.setdefault("skyrl_train", types.ModuleType("skyrl_train"))
    sys.modules[name] = module
    try:
        steps = {5: nd.random_samples(97, 8)}
        new = skyrl(tmp_path / "new", steps)
        path = new / "dumped_data" / "global_step_5_training_input.pkl"
        state = pickle.loads(path.read_bytes())  # the test's own stand-in classes
        old = TrainingInputBatch(
            {
                k: torch.as_tensor(np.frombuffer(v["data"], v["dtype"]).reshape(v["shape"]).copy())
                for k, v in state.items()
                if v is not None
            }
        )
        old.metadata = {"pad_size": 5 % 3}
        target = tmp_path / "old" / "dumped_data" / "global_step_5_training_input.pkl"
        target.parent.mkdir(parents=True)
        target.write_bytes(pickle.dumps(old))
    finally:
        del sys.modules[name]
    a = rcdiag.analyze(new, trust_pickle=True)
    b = rcdiag.analyze(tmp_path / "old", trust_pickle=True)
    close(comparable(a), comparable(b))


def test_nemo_rl_values_written_without_the_batch_list(tmp_path: Path) -> None:
    path = nemo_rl(tmp_path / "a", steps_of(101)) / "exp_001" / "train_data_step3.jsonl"
    flat = tmp_path / "b" / "train_data_step3.jsonl"
    flat.parent.mkdir()
    lines = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        lines.append(json.dumps({k: v[0] if isinstance(v, list) else v for k, v in record.items()}))
    flat.write_text("\n".join(lines) + "\n")
    close(comparable(rcdiag.analyze(path)), comparable(rcdiag.analyze(flat)))


def test_skyrl_batch_pickled_as_a_plain_dictionary(tmp_path: Path) -> None:
    import pickle

    steps = {2: nd.random_samples(103, 7)}
    new = skyrl(tmp_path / "new", steps)
    state = pickle.loads((new / "dumped_data" / "global_step_2_training_input.pkl").read_bytes())
    plain = {
        k: torch.as_tensor(np.frombuffer(v["data"], v["dtype"]).reshape(v["shape"]).copy())
        for k, v in state.items()
        if v is not None
    }
    plain["metadata"] = {"pad_size": 2 % 3}
    target = tmp_path / "old" / "global_step_2_training_input.pkl"
    target.parent.mkdir()
    target.write_bytes(pickle.dumps(plain))
    close(
        comparable(rcdiag.analyze(new, trust_pickle=True)),
        comparable(rcdiag.analyze(target, trust_pickle=True)),
    )


def test_a_pass_reads_each_step_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rcdiag.io.native import slime

    native = slime_v2(tmp_path, steps_of(107))
    calls: list[Path] = []
    original = slime.read_rollout_file

    def counted(path: Path, trust_pickle: bool = False) -> Any:
        calls.append(path)
        return original(path, trust_pickle)

    monkeypatch.setattr(slime, "read_rollout_file", counted)
    progress: list[tuple[int, int]] = []
    rcdiag.analyze(native, progress=lambda read, total: progress.append((read, total)))
    assert sorted(p.name for p in calls) == ["3.pt", "4.pt"]
    assert progress[-1] == (22, 22)


def test_a_file_named_by_a_custom_template(tmp_path: Path) -> None:
    steps = {8: nd.random_samples(109, 6)}
    nd.write_slime_v2(tmp_path, 8, steps[8])
    custom = tmp_path / "debug_train_8.pt"
    (tmp_path / "train_data" / "8.pt").rename(custom)
    result = rcdiag.analyze(custom, format="slime")
    close(
        comparable(rcdiag.analyze(write_parquet(tmp_path / "parquet", steps))), comparable(result)
    )


def test_no_output_over_a_file_the_step_reads(tmp_path: Path) -> None:
    """A step named by one of its files still reads its rollout file: no output may replace it."""
    native = slime_v2(tmp_path, steps_of(113))
    rollout = native / "rollout_data" / "3.pt"
    before = rollout.read_bytes()
    result = runner.invoke(
        app, ["analyze", str(native / "train_data" / "3.pt"), "--json", str(rollout), "-q"]
    )
    assert result.exit_code == 2 and "refusing to overwrite" in result.stderr
    assert rollout.read_bytes() == before
