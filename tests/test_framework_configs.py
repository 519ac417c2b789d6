"""Every configuration rcdiag writes in another framework's keys — its presets' ``config`` and the
translations of ``recommend --framework`` — is accepted by that framework's own config class or
argument parser (tests/framework_packages.py loads the one module), or, for frameworks not on
PyPI, uses only keys read from the pinned commit (the lists below cite it).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import shlex
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from framework_packages import (
    class_from_source,
    isolated_modules,
    load_module,
    main_block_parser,
    package_file,
)

from rcdiag.correction.presets import PRESETS
from rcdiag.frameworks import FRAMEWORKS
from rcdiag.frameworks.translate import TRANSLATORS, translate

pytestmark = pytest.mark.xdist_group("framework_configs")


def translations(framework: str) -> Iterator[tuple[str, Any]]:
    """The translation of every verl preset of both dialects (the configurations recommend can
    print are made of the same mechanisms)."""
    for dialect, presets in PRESETS.items():
        for name, preset in presets.items():
            yield f"{dialect}:{name}", translate(framework, dict(preset.config), dialect)


def flags(snippet: str) -> list[str]:
    """The command-line words of a snippet (comment lines and line continuations left out)."""
    lines = [line for line in snippet.splitlines() if not line.startswith("#")]
    return shlex.split(" ".join(line.rstrip("\\") for line in lines))


# ------------------------------------------------------------------------------------------------
# verl (PyPI verl 0.9.1): rcdiag's presets are verl's RolloutCorrectionConfig presets


@pytest.fixture(scope="module")
def verl_config() -> Any:
    base = package_file("verl", "verl/base_config.py")
    algorithm = package_file("verl", "verl/trainer/config/algorithm.py")
    with isolated_modules(roots=("verl",)):
        load_module("verl.base_config", base)
        return load_module("verl.trainer.config.algorithm", algorithm).RolloutCorrectionConfig


def test_verl_accepts_every_latest_preset(verl_config: Any) -> None:
    for name, preset in PRESETS["latest"].items():
        config = verl_config(**dict(preset.config))
        made = getattr(verl_config, name, None)
        if made is not None:  # verl's own preset of that name: the same keys and values
            assert asdict(made()) == asdict(config), name


# ------------------------------------------------------------------------------------------------
# TRL (PyPI trl 1.16.0): GRPOConfig, warning-free (no deprecated key)


@pytest.fixture(scope="module")
def grpo_config() -> Any:
    package_file("trl", "trl/trainer/grpo_config.py")
    pytest.importorskip("transformers", reason="TRL's GRPOConfig subclasses transformers'")
    from trl.trainer.grpo_config import GRPOConfig  # one module (and transformers)

    return GRPOConfig


def _trl_configs() -> Iterator[tuple[str, dict[str, Any]]]:
    for preset in FRAMEWORKS["trl"].presets:
        yield preset.name, dict(preset.config)
    for name, done in translations("trl"):
        yield name, done.config or {"vllm_importance_sampling_correction": False}


def test_trl_grpo_config_accepts_every_configuration(grpo_config: Any, tmp_path: Path) -> None:
    for name, keys in _trl_configs():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            config = grpo_config(
                output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", **keys
            )
        deprecated = [str(w.message) for w in seen if "vllm_importance_sampling" in str(w.message)]
        assert not deprecated, (name, deprecated)
        for key, value in keys.items():
            assert getattr(config, key) == value, (name, key)


# ------------------------------------------------------------------------------------------------
# OpenRLHF (PyPI openrlhf 0.11.2): train_ppo_ray's own parser on the snippet's words


@pytest.fixture(scope="module")
def openrlhf_parser() -> argparse.ArgumentParser:
    path = package_file("openrlhf", "openrlhf/cli/train_ppo_ray.py")
    return main_block_parser(path, {"argparse": argparse, "datetime": datetime.datetime})


def test_openrlhf_parser_accepts_every_snippet(openrlhf_parser: argparse.ArgumentParser) -> None:
    for name, done in translations("openrlhf"):
        args = openrlhf_parser.parse_args(flags(done.snippet))
        for key, value in done.config.items():
            got = getattr(args, key)
            assert (tuple(got) if isinstance(got, list) else got) == value, (name, key)
    for preset in FRAMEWORKS["openrlhf"].presets:
        words = []
        for key, value in preset.config.items():
            words += [f"--{key}", *map(str, value if isinstance(value, tuple) else [value])]
        args = openrlhf_parser.parse_args(words)
        assert getattr(args, "algo.advantage.is_correction_level") != "off", preset.name


def test_openrlhf_parser_rejects_the_april_flags(openrlhf_parser: argparse.ArgumentParser) -> None:
    """The check can fail: the flags of OpenRLHF's main of April–August 2026 are refused."""
    with pytest.raises(SystemExit):
        openrlhf_parser.parse_args(["--algo.advantage.is_correction_enable"])


# ------------------------------------------------------------------------------------------------
# slime (not on PyPI): keys read from THUDM/slime main at 624b824 (2026-08-21)

SLIME_MIS_YAML_KEYS = (
    "use_tis",
    "use_rs",
    "tis_level",
    "rs_level",
    "tis_mode",
    "tis_lower_bound",
    "tis_upper_bound",
    "rs_lower_bound",
    "rs_upper_bound",
    "rs_veto_threshold",
    "tis_batch_normalize",
)
"""examples/train_infer_mismatch_helper/mis.yaml at 624b824, in its order: mis.py reads every one
(``args.<key>``), so a YAML lacking one fails with AttributeError."""
SLIME_FLAGS = ("--use-tis", "--tis-clip", "--tis-clip-low", "--custom-tis-function-path")
"""slime/utils/arguments.py at 624b824: the built-in TIS flags."""
SLIME_CHOICES = {
    "tis_level": {"token", "sequence", "geometric"},
    "rs_level": {"token", "sequence", "geometric"},
    "tis_mode": {"truncate", "clip", "mask"},
}
"""The values compute_mis_weights accepts (it raises ValueError on others)."""


def _check_mis_yaml(name: str, config: dict[str, Any], text: str) -> None:
    loaded = yaml.safe_load(text)
    assert tuple(loaded) == SLIME_MIS_YAML_KEYS, name
    for key, allowed in SLIME_CHOICES.items():
        assert loaded[key] in allowed, (name, key)
    for key, value in config.items():
        assert loaded[key] == value and type(loaded[key]) is type(value), (name, key)


def test_slime_configurations_use_the_pinned_keys() -> None:
    for name, done in translations("slime"):
        if "mis.yaml" in done.snippet:
            body = [line for line in done.snippet.splitlines() if not line.startswith("#")]
            _check_mis_yaml(name, done.config, "\n".join(body))
        elif done.config:
            words = flags(done.snippet)
            assert {w for w in words if w.startswith("--")} <= set(SLIME_FLAGS), name
    for preset in FRAMEWORKS["slime"].presets:
        if "tis_level" in preset.config:
            text = yaml.safe_dump(dict(preset.config), sort_keys=False)
            _check_mis_yaml(preset.name, dict(preset.config), text)
        else:
            assert {f"--{k.replace('_', '-')}" for k in preset.config} <= set(SLIME_FLAGS)


def test_slime_float_format_survives_safe_load() -> None:
    """PyYAML reads 1e-10 as a string: the YAML rcdiag writes keeps every float a float."""
    config = {**dict(FRAMEWORKS["slime"].presets[2].config), "rs_veto_threshold": 1e-10}
    from rcdiag.frameworks.translate import slime_render

    body = [line for line in slime_render(config).splitlines() if not line.startswith("#")]
    assert yaml.safe_load("\n".join(body))["rs_veto_threshold"] == 1e-10


# ------------------------------------------------------------------------------------------------
# SkyRL (PyPI skyrl 0.3.0): OffPolicyCorrectionConfig, reached through the trainer's config tree


@dataclass
class _EnvConfig:
    """Stands in for the two environment configs config.py imports from skyrl_gym."""


@pytest.fixture(scope="module")
def skyrl_config() -> Any:
    path = package_file("skyrl", "skyrl/train/config/config.py")
    pytest.importorskip("omegaconf", reason="SkyRL's config module imports omegaconf")
    packages = ("skyrl_gym", "skyrl_gym.envs", "skyrl_gym.envs.search", "skyrl_gym.envs.sql")
    stubs: dict[str, dict[str, Any]] = {name: {"__path__": []} for name in packages}
    stubs["skyrl_gym.envs.search.env"] = {"SearchEnvConfig": _EnvConfig}
    stubs["skyrl_gym.envs.sql.env"] = {"Text2SQLEnvConfig": _EnvConfig}
    with isolated_modules(stubs, roots=("skyrl",)):
        return load_module("skyrl.train.config.config", path)


def test_skyrl_config_accepts_every_configuration(skyrl_config: Any) -> None:
    from omegaconf import OmegaConf

    def check(name: str, keys: dict[str, Any]) -> None:
        if not keys:  # no correction: nothing set
            return
        tree = OmegaConf.to_container(OmegaConf.from_dotlist([f"{k}={v}" for k, v in keys.items()]))
        assert isinstance(tree, dict)
        section = tree["trainer"]["algorithm"]["off_policy_correction"]
        config = skyrl_config.OffPolicyCorrectionConfig.from_dict_config(OmegaConf.create(section))
        for key, value in keys.items():
            assert getattr(config, key.rsplit(".", 1)[1]) == value, (name, key)

    names = {f.name for f in fields(skyrl_config.SkyRLTrainConfig)}
    assert "trainer" in names  # the path the keys take: trainer.algorithm.off_policy_correction
    assert "algorithm" in {f.name for f in fields(skyrl_config.TrainerConfig)}
    assert "off_policy_correction" in {f.name for f in fields(skyrl_config.AlgorithmConfig)}
    for preset in FRAMEWORKS["skyrl"].presets:
        check(preset.name, dict(preset.config))
    for name, done in translations("skyrl"):
        check(name, done.config)
        lines = [line for line in done.snippet.splitlines() if not line.startswith("#")]
        assert [line.split("=", 1)[0] for line in lines] == list(done.config), name


# ------------------------------------------------------------------------------------------------
# NeMo-RL (not on PyPI): keys read from NVIDIA-NeMo/RL main at 7ea279a (2026-08-22)

NEMO_KEYS = {
    "loss_fn": {
        "use_importance_sampling_correction",
        "truncated_importance_sampling_type",
        "truncated_importance_sampling_ratio",
        "truncated_importance_sampling_ratio_min",
        "sequence_level_importance_ratios",
    },
    "grpo": {"seq_logprob_error_threshold"},
}
"""ClippedPGLossConfig (nemo_rl/algorithms/loss/loss_functions.py) and GRPOConfig
(nemo_rl/algorithms/grpo.py) fields at 7ea279a; both allow extra keys, so a misspelt one would be
ignored silently: the list is the check."""
NEMO_TYPES = {"tis", "icepop", "seq-mask-tis"}


def _check_nemo(name: str, config: dict[str, Any]) -> None:
    loss: dict[str, Any] = {}
    for key, value in config.items():
        section, field_name = key.split(".", 1)
        assert field_name in NEMO_KEYS[section], (name, key)
        if section == "loss_fn":
            loss[field_name] = value
    kind = loss.get("truncated_importance_sampling_type")
    if kind is not None:  # ClippedPGLossFn.__init__'s assertions
        high = loss["truncated_importance_sampling_ratio"]
        low = loss.get("truncated_importance_sampling_ratio_min")
        assert kind in NEMO_TYPES and high > 0, name
        assert low is None or low <= high, name
        assert kind == "tis" or low is not None, name


def test_nemo_rl_configurations_use_the_pinned_keys() -> None:
    for preset in FRAMEWORKS["nemo_rl"].presets:
        _check_nemo(preset.name, dict(preset.config))
    for name, done in translations("nemo_rl"):
        _check_nemo(name, done.config)
        body = [line for line in done.snippet.splitlines() if not line.startswith("#")]
        loaded = yaml.safe_load("\n".join(body))
        flat = {f"{s}.{k}": v for s, section in loaded.items() for k, v in section.items()}
        assert flat == (done.config or flat), name


# ------------------------------------------------------------------------------------------------
# AReaL (PyPI areal 1.0.4): RejectionSamplingConfig, executed from cli_args.py alone (the module's
# imports start hydra, uvloop and its engines)


@pytest.fixture(scope="module")
def areal_config() -> tuple[Any, set[str]]:
    path = package_file("areal", "areal/api/cli_args.py")
    config = class_from_source(
        path, "RejectionSamplingConfig", {"dataclass": dataclass, "field": field}
    )
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (actor,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PPOActorConfig"]
    names = {n.target.id for n in actor.body if isinstance(n, ast.AnnAssign)}
    names |= {  # and its bases' fields (PPOActorConfig extends TrainEngineConfig)
        n.target.id
        for c in tree.body
        if isinstance(c, ast.ClassDef) and c.name in {ast.unparse(b) for b in actor.bases}
        for n in c.body
        if isinstance(n, ast.AnnAssign)
    }
    return config, names


def test_areal_config_accepts_every_configuration(areal_config: tuple[Any, set[str]]) -> None:
    config_class, actor_fields = areal_config
    assert {"use_decoupled_loss", "rejection_sampling"} <= actor_fields

    def check(name: str, keys: dict[str, Any]) -> None:
        if not keys:
            return
        assert keys["actor.use_decoupled_loss"] is True, name
        options = {k.removeprefix("actor.rejection_sampling."): v for k, v in keys.items()}
        del options["actor.use_decoupled_loss"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. agg set at token level
            made = config_class(**options)
        for key, value in options.items():
            assert getattr(made, key) == value, (name, key)

    for preset in FRAMEWORKS["areal"].presets:
        check(preset.name, dict(preset.config))
    for name, done in translations("areal"):
        check(name, done.config)
        body = [line for line in done.snippet.splitlines() if not line.startswith("#")]
        actor = yaml.safe_load("\n".join(body))["actor"]
        section = actor["rejection_sampling"] or {}
        flat = {f"actor.rejection_sampling.{k}": v for k, v in section.items()}
        if done.config:
            flat["actor.use_decoupled_loss"] = actor["use_decoupled_loss"]
        assert flat == done.config, name


def test_areal_config_rejects_a_clamp_on_a_kl_metric(areal_config: tuple[Any, set[str]]) -> None:
    """The check can fail: AReaL's own validation runs."""
    with pytest.raises(ValueError, match="clamp"):
        areal_config[0](action="clamp", metric="kl_k3")


# ------------------------------------------------------------------------------------------------
# open-instruct and prime-rl (not on PyPI): keys read from their pinned commits

OPEN_INSTRUCT_KEYS = {
    "use_rho_correction": bool,
    "rho_clamp_lower_bound": float,
    "rho_clamp_upper_bound": float,
    "rho_mask_lower_bound": float,
    "rho_mask_upper_bound": float,
    "rho_mask_sequence_level": bool,
    "rho_mask_tv_divergence": bool,
}
"""GRPOExperimentConfig's ρ options, open_instruct/grpo_utils.py at allenai/open-instruct main
e6c3044 (2026-08-20)."""


def _check_open_instruct(name: str, keys: dict[str, Any]) -> None:
    for key, value in keys.items():
        assert type(value) is OPEN_INSTRUCT_KEYS[key], (name, key)
    # GRPOExperimentConfig.__post_init__'s checks (0 turns a bound off)
    lo, hi = keys.get("rho_mask_lower_bound", 0.0), keys.get("rho_mask_upper_bound", 0.0)
    assert lo == 0 or 0 < lo < 1, name
    assert hi == 0 or hi > 1, name
    clamp_lo = keys.get("rho_clamp_lower_bound", 0.0)
    clamp_hi = keys.get("rho_clamp_upper_bound", 2.0)
    assert clamp_lo == 0 or clamp_lo < 1, name
    assert clamp_hi == 0 or clamp_hi > 1, name


def test_open_instruct_configurations_use_the_pinned_keys() -> None:
    for preset in FRAMEWORKS["open_instruct"].presets:
        _check_open_instruct(preset.name, dict(preset.config))
    for name, done in translations("open_instruct"):
        _check_open_instruct(name, done.config)
        words = flags(done.snippet)
        parsed = dict(zip(words[::2], words[1::2], strict=True))
        assert set(parsed) == {f"--{k}" for k in done.config or {"use_rho_correction": False}}


PRIME_RL_KEYS = {"trainer.loss.type", "trainer.loss.ipo_threshold", "trainer.loss.adv_tau"}
"""IPOLossConfig's fields under TrainerConfig.loss, packages/prime-rl-configs/src/prime_rl/configs/
trainer.py at PrimeIntellect-ai/prime-rl main 559b447 (2026-08-21); ipo_threshold ≥ 0."""


def test_prime_rl_configurations_use_the_pinned_keys() -> None:
    for preset in FRAMEWORKS["prime_rl"].presets:
        assert set(preset.config) <= PRIME_RL_KEYS
        assert preset.config["trainer.loss.type"] == "ipo"
        assert preset.config["trainer.loss.ipo_threshold"] >= 0
    for _, done in translations("prime_rl"):
        assert set(done.config) <= PRIME_RL_KEYS


def test_every_translator_has_a_check() -> None:
    assert set(TRANSLATORS) == set(FRAMEWORKS)
