"""The dumps `sample_data/model_dumps.py` makes from a real transformer: each is a valid dump and has
the property that defines its variant; the generator still runs (``--quick``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.model import ReportDocument
from rcdiag.run.documents import build_report_document
from rcdiag.run.dump import DumpSpec
from rcdiag.run.results import analyze_dump

SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data"
MODEL_DUMPS = SAMPLE_DATA / "model"
SCRIPT = SAMPLE_DATA / "model_dumps.py"
VARIANTS = (
    "bf16",
    "bf16_mixed",
    "fp8",
    "stale",
    "topp",
    "temperature",
    "offset",
    "swapped",
    "identical",
    "padding",
    "context",
    "growing",
)
SHORT = {"growing": 6}
"""Variants of a shorter run: their number of steps."""
WITHOUT_LAG = {"growing"}
"""Variants written without a ``policy_lag`` column."""
MAX_RESPONSE = 96
"""The longest response the full run samples (``Settings.max_response``)."""


@dataclass(frozen=True)
class Tokens:
    """A dump's valid tokens, flattened in row order, with each row's step and policy lag."""

    rollout: np.ndarray
    old: np.ndarray
    lengths: np.ndarray
    steps: np.ndarray
    lags: np.ndarray
    masks_all_valid: bool

    @property
    def log_ratio(self) -> np.ndarray:
        """ℓ = old − rollout per token."""
        return self.old - self.rollout

    def tokens_of(self, rows: np.ndarray) -> np.ndarray:
        """Boolean selection of the tokens of the rows selected by ``rows``."""
        return np.repeat(rows, self.lengths)


@cache
def load(directory: Path) -> Tokens:
    """The dump ``directory/part-0.parquet``."""
    table = pq.read_table(directory / "part-0.parquet")

    def flat(name: str) -> np.ndarray:
        return table.column(name).combine_chunks().flatten().to_numpy(zero_copy_only=False)

    def per_row(name: str) -> np.ndarray:
        return table.column(name).to_numpy()

    mask = flat("response_mask")
    lengths = np.diff(table.column("response_mask").combine_chunks().offsets.to_numpy())
    return Tokens(
        rollout=flat("rollout_log_probs")[mask].astype(np.float64),
        old=flat("old_log_probs")[mask].astype(np.float64),
        lengths=lengths,
        steps=per_row("step"),
        lags=per_row("policy_lag")
        if "policy_lag" in table.column_names
        else np.zeros(table.num_rows, dtype=np.int64),
        masks_all_valid=bool(mask.all()),
    )


def shipped(variant: str) -> Tokens:
    return load(MODEL_DUMPS / variant)


def mean_abs(x: np.ndarray) -> float:
    return float(np.abs(x).mean())


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1])


@pytest.mark.parametrize("variant", VARIANTS)
def test_shipped_dump_is_valid_and_analysable(variant: str) -> None:
    directory = MODEL_DUMPS / variant
    document = analyze_dump(DumpSpec([directory]), AnalyzeOptions())
    tokens = shipped(variant)
    steps = SHORT.get(variant, 15)
    assert document.source.steps == steps
    assert document.source.rows == tokens.lengths.size == steps * 32
    assert document.source.valid_tokens == tokens.rollout.size
    assert all(np.isfinite(v) for v in document.overall.values() if v is not None)
    # one response per row: valid tokens then nothing (the writer trims the padding)
    assert tokens.masks_all_valid and tokens.lengths.min() >= 1
    assert tokens.lengths.max() <= MAX_RESPONSE
    if variant == "padding":  # the mask counts the batch's padding: every row its full width
        assert (tokens.lengths == MAX_RESPONSE).all()
    else:  # every response its own length
        assert np.unique(tokens.lengths).size > 20
    assert (tokens.rollout <= 0).all() and (tokens.old <= 0).all()
    assert [p.name for p in directory.iterdir()] == ["part-0.parquet"]
    assert (np.diff(tokens.steps) >= 0).all()
    schema = pq.read_schema(directory / "part-0.parquet")
    assert str(schema.field("rollout_log_probs").type.value_type) == "float"
    lag = set() if variant in WITHOUT_LAG else {"policy_lag"}
    assert set(schema.names) == {
        "rollout_log_probs",
        "old_log_probs",
        "response_mask",
        "step",
        "uid",
        *lag,
    }


@pytest.mark.parametrize("variant", ["bf16", "bf16_mixed"])
def test_clean_runs_are_on_policy(variant: str) -> None:
    ell = shipped(variant).log_ratio
    k3 = float(np.mean(np.expm1(ell) - ell))
    assert abs(ell.mean()) < 1e-3 and k3 < 1e-3 and mean_abs(ell) < 0.02
    assert correlation(shipped(variant).rollout, shipped(variant).old) > 0.999


def test_fp8_engine_disagrees_more_than_bf16() -> None:
    assert mean_abs(shipped("fp8").log_ratio) > 3 * mean_abs(shipped("bf16").log_ratio)


def test_stale_mismatch_grows_with_the_policy_lag() -> None:
    stale = shipped("stale")
    assert (np.diff(stale.lags) >= 0).all() and stale.lags[0] == 0 and stale.lags[-1] >= 3
    lags = np.unique(stale.lags)
    by_lag = [mean_abs(stale.log_ratio[stale.tokens_of(stale.lags == k)]) for k in lags]
    assert by_lag == sorted(by_lag)
    assert by_lag[-1] > 10 * by_lag[0]
    assert by_lag[0] < 2 * mean_abs(shipped("bf16").log_ratio)  # no lag: as clean as bf16


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "stale"])
def test_only_the_stale_dump_lags(variant: str) -> None:
    assert (shipped(variant).lags == 0).all()


def test_identical_columns_are_equal() -> None:
    tokens = shipped("identical")
    np.testing.assert_array_equal(tokens.rollout, tokens.old)


def t_statistic(x: np.ndarray) -> float:
    """Mean over its standard error."""
    return float(x.mean() / (x.std() / np.sqrt(x.size)))


def test_swapped_columns_make_kl_negative() -> None:
    """Samples come from the rollout policy, so E[log π_rollout − log π_train] = KL ≥ 0; with the
    columns exchanged the mean is −KL, several standard errors below zero."""
    assert t_statistic(-shipped("swapped").log_ratio) < -4  # rollout − old per token
    assert t_statistic(-shipped("fp8").log_ratio) > 4


def test_topp_renormalisation_inflates_the_rollout_log_probs() -> None:
    """log p_nucleus = log p − log(mass kept) ≥ log p: the rollout side is higher almost always."""
    higher = shipped("topp").rollout > shipped("topp").old
    assert higher.mean() > 0.9
    assert (shipped("bf16").rollout > shipped("bf16").old).mean() < 0.6


def test_temperature_sharpens_the_rollout_distribution() -> None:
    """log p_T = log p / T + c with T < 1: likely tokens gain, unlikely ones lose, so the log-ratio
    rollout − old rises with the trainer's log-prob."""
    tokens = shipped("temperature")
    assert correlation(tokens.old, tokens.rollout - tokens.old) > 0.5
    clean = shipped("bf16")
    assert abs(correlation(clean.old, clean.rollout - clean.old)) < 0.2


def test_offset_scores_the_wrong_positions() -> None:
    assert correlation(shipped("offset").rollout, shipped("offset").old) < 0.8
    assert correlation(shipped("bf16").rollout, shipped("bf16").old) > 0.999


def test_padding_counted_in_the_mask_ends_responses_in_a_constant_run() -> None:
    """The mask counts the batch's padding: after each response's end the engine's column holds
    0.0 while the trainer scores the pad byte (a very unlikely byte); before it the column is
    bf16's, token for token."""
    padding, clean = shipped("padding"), shipped("bf16")
    zero = padding.rollout == 0.0
    assert zero.mean() > 0.2 and (padding.old[zero] < -5).all()
    assert (clean.rollout == 0.0).mean() < 0.01
    assert padding.lengths.sum() > clean.lengths.sum()
    starts = np.concatenate([[0], np.cumsum(padding.lengths)[:-1]])
    first = padding.rollout[starts]  # the first response token is never padding
    assert (first != 0.0).all()


def _by_position(tokens: Tokens, first: int, last: int) -> float:
    position = np.arange(tokens.lengths.sum()) - np.repeat(
        np.concatenate([[0], np.cumsum(tokens.lengths)[:-1]]), tokens.lengths
    )
    chosen = (position >= first) & (position <= last)
    return mean_abs(tokens.log_ratio[chosen])


def test_another_context_moves_the_first_response_tokens_most() -> None:
    """Scored after another prompt, the first response tokens disagree most; the disagreement
    fades as the response itself becomes the context."""
    context, clean = shipped("context"), shipped("bf16")
    head, tail = _by_position(context, 0, 3), _by_position(context, 16, MAX_RESPONSE)
    assert head > 0.3 and head > 10 * tail
    assert _by_position(clean, 0, 3) < 3 * _by_position(clean, 16, MAX_RESPONSE)
    np.testing.assert_array_equal(context.rollout, clean.rollout)  # the same rollouts


def test_the_short_run_grows_step_by_step() -> None:
    """The engine is never synced: at step s it samples with the weights of step 0, s optimizer
    steps behind, and the run records no policy lag."""
    growing = shipped("growing")
    k3 = []
    for step in np.unique(growing.steps):
        ell = growing.log_ratio[growing.tokens_of(growing.steps == step)]
        k3.append(float(np.mean(np.expm1(ell) - ell)))
    assert k3[-1] > 20 * k3[0] and k3[-1] > 1e-3
    assert (np.diff(k3[1:]) > 0).all()


def test_sample_data_stays_small() -> None:
    size = sum(p.stat().st_size for p in SAMPLE_DATA.rglob("*") if p.is_file())
    assert size < 5_000_000


def test_quick_mode_writes_every_variant(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path), "--seed", "3"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(VARIANTS)
    for variant in VARIANTS:
        assert f"| {variant} |" in result.stdout
        tokens = load(tmp_path / variant)
        assert tokens.rollout.size > 0 and np.isfinite(tokens.rollout).all()
    np.testing.assert_array_equal(load(tmp_path / "identical").rollout, load(tmp_path / "bf16").old)
    assert result.stderr == ""


@cache
def tiny_lm() -> ModuleType:
    """``sample_data/tiny_lm.py``, the generator's model and engine (not a package module)."""
    spec = importlib.util.spec_from_file_location("tiny_lm", SAMPLE_DATA / "tiny_lm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_cached_decoding_matches_the_full_forward() -> None:
    lm = tiny_lm()
    torch.manual_seed(0)
    model = lm.TinyLM(lm.LMConfig(d_model=32, n_layers=2, n_heads=2, max_len=32)).eval()
    tokens = torch.randint(0, 256, (3, 12))
    cache = lm.KVCache(model.config, 3, torch.float32)
    with torch.no_grad():
        steps = [model(tokens[:, :5], cache)] + [
            model(tokens[:, i : i + 1], cache) for i in range(5, 12)
        ]
        torch.testing.assert_close(torch.cat(steps, dim=1), model(tokens), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 1.0), (1.0, 0.9)])
def test_sampler_log_probs_are_a_distribution(temperature: float, top_p: float) -> None:
    lm = tiny_lm()
    logits = torch.randn(4, 256) * 3
    logp = lm.Sampler(temperature, top_p).log_probs(logits)
    torch.testing.assert_close(logp.exp().sum(dim=1), torch.ones(4))
    full = torch.log_softmax(logits / temperature, dim=1)
    kept = torch.isfinite(logp)
    assert (logp[kept] >= full[kept] - 1e-6).all()  # renormalising only raises log-probs
    assert kept.all() if top_p == 1.0 else (full.exp() * kept).sum(dim=1).ge(top_p - 1e-6).all()


def test_response_mask_ends_at_the_first_blank_line() -> None:
    lm = tiny_lm()
    responses = torch.tensor([list(b"ab\n\ncd\n\nef"), list(b"a\nb\nc\nde\nf")])
    assert lm.response_mask(responses).sum(dim=1).tolist() == [4, 10]


EXPECTED_CAUSE = {
    "bf16": None,
    "bf16_mixed": None,
    "fp8": "numeric_mismatch",
    "stale": "stale_policy",
    "topp": "processed_logprobs",
    "temperature": "temperature_mismatch",
    "offset": "misaligned_tokens",
    "swapped": "swapped_columns",
    "identical": "identical_columns",
    "padding": "padding_in_mask",
    "context": "context_mismatch",
    "growing": "growing_drift",
}
"""The cause every command must name on each real-model sample (None: no cause, healthy)."""
DUMP_BUGS = {"topp", "temperature", "offset", "swapped", "identical", "padding", "context"}


@cache
def report_of(variant: str) -> ReportDocument:
    return build_report_document(DumpSpec([MODEL_DUMPS / variant]))


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_diagnosis_names_the_cause_of_each_real_model_sample(variant: str) -> None:
    document = report_of(variant)
    assert document.diagnosis is not None and document.recommendation is not None
    causes = [c.id for c in document.diagnosis.causes]
    bugs = [c.id for c in document.diagnosis.causes if c.kind == "dump_bug"]
    want = EXPECTED_CAUSE[variant]
    if want is None:
        assert causes == [] and document.diagnosis.verdict == "healthy"
    else:
        assert want in causes
    rec = document.recommendation
    if variant in DUMP_BUGS:  # fix the dump: no IS/RS correction
        assert bugs == [want] and rec.dump_bug == want and rec.choices == ()
        assert document.verdict is not None and document.verdict.lead == want
    else:
        assert bugs == [] and rec.recommended is not None
    if variant in ("growing", "stale"):  # a growth story, never engine numerics
        assert "growing_drift" in causes and "numeric_mismatch" not in causes


@pytest.mark.parametrize("variant", ["padding", "context", "growing"])
def test_every_command_tells_the_same_story_on_the_new_samples(
    variant: str, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from rcdiag.cli import app

    runner = CliRunner()
    dump = str(MODEL_DUMPS / variant)
    env = {"COLUMNS": "200"}
    outputs = {
        command: runner.invoke(app, [command, dump], env=env)
        for command in ("analyze", "recommend", "check")
    }
    want = EXPECTED_CAUSE[variant]
    assert want is not None
    assert want in outputs["analyze"].output and want in outputs["check"].output
    assert outputs["check"].exit_code == 1  # act: the CI gate fails
    page = tmp_path / "page.html"
    report = runner.invoke(app, ["report", dump, "-o", str(page)], env=env)
    assert report.exit_code == 0, report.output
    html = page.read_text()
    assert want in html
    recommend = outputs["recommend"].output
    if variant in DUMP_BUGS:
        assert "No rollout-correction configuration is recommended" in recommend
        assert "Recommended:" not in recommend and "→ use" not in report.output
        assert "fix the dump" in outputs["analyze"].output
        assert "Not applicable to this dump" in html  # the preset comparison
        assert "Recommended for verl" not in html
    else:
        assert "Recommended:" in recommend and "The mismatch grows" in recommend
        assert "Not applicable to this dump" not in html
        for output in (*outputs.values(), report):
            assert "numeric_mismatch" not in output.output
