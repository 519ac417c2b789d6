"""Configurations from the command line: preset names and YAML files, with the dialect resolved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rcdiag.correction.compare import NamedConfig
from rcdiag.correction.config import ConfigError, detect_dialect, parse_config
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.errors import UsageError
from rcdiag.io.documents import refuse_nonfinite
from rcdiag.io.paths import read_text_input


def read_config_file(path: Path) -> dict[str, Any]:
    """A YAML file holding rollout-correction keys: bare, or under ``algorithm: rollout_correction:``."""
    import yaml

    text = read_text_input(path, "configuration")
    try:
        document = yaml.safe_load(text)
    except RecursionError:
        raise UsageError(f"{path}: not a configuration (YAML nested too deeply)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}: not valid YAML{where}") from None
    refuse_nonfinite(document, str(path))
    if isinstance(document, Mapping) and isinstance(document.get("algorithm"), Mapping):
        document = document["algorithm"].get("rollout_correction")
    if not isinstance(document, Mapping):
        raise UsageError(
            f"{path}: expected a mapping of rollout-correction keys "
            "(bare, or under algorithm: rollout_correction:)"
        )
    return dict(document)


def files_dialect(
    files: Mapping[Path, Mapping[str, Any]],
    given: Dialect | None,
    given_by: str = "--dialect {dialect} was given",
) -> Dialect | None:
    """The dialect the configuration files' keys imply (None when they fit both).

    Raises:
        ConfigError: a file mixes the dialects, contradicts another file, or contradicts the
            dialect ``given`` (``given_by`` says by what, with ``{dialect}`` in it).
    """
    implied: dict[Dialect, Path] = {}
    for path, config in files.items():
        try:
            found = detect_dialect(config)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        if found is not None:
            if given is not None and found != given:
                raise ConfigError(
                    f"{path}: uses {found}-dialect keys but " + given_by.format(dialect=given)
                )
            implied.setdefault(found, path)
    if len(implied) > 1:
        raise ConfigError(
            f"{implied['legacy']} uses legacy-dialect keys and {implied['latest']} latest ones; "
            "use configurations of one dialect at a time"
        )
    return next(iter(implied), None)


class _Inline:
    """An inline configuration's name, standing where a file's path stands (messages, ``stem``)."""

    def __init__(self, name: str) -> None:
        self.stem = name

    def __str__(self) -> str:
        return f"configuration {self.stem!r}"


def resolve_configs(
    presets: Sequence[str] | None,
    config_files: Sequence[Path],
    explicit: Dialect | None,
    inline: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[Dialect, list[NamedConfig]]:
    """The dialect and the configurations to compare: the named presets (None: every preset of the
    dialect) followed by the files, then the ``inline`` configurations (name → rollout-correction
    keys, as a file holds them).

    The dialect is ``explicit`` if given, else the one the files' keys imply, else ``latest``; a file
    contradicting ``explicit`` or another file is an error.
    """
    files: dict[Path, Mapping[str, Any]] = {path: read_config_file(path) for path in config_files}
    given: dict[Any, Mapping[str, Any]] = {**files}
    for name, config in (inline or {}).items():
        if not isinstance(config, Mapping):
            raise UsageError(
                f"configuration {name!r}: expected a mapping of rollout-correction keys"
            )
        given[_Inline(name)] = dict(config)
    dialect = files_dialect(given, explicit) or explicit or DEFAULT_DIALECT
    registry = PRESETS[dialect]
    named: list[NamedConfig] = []
    for name in list(registry) if presets is None else presets:
        if name not in registry:
            raise ConfigError(
                f"unknown {dialect} preset {name!r}; `rcdiag presets --dialect {dialect}` lists "
                f"them: {', '.join(registry)}"
            )
        preset = registry[name]
        named.append(NamedConfig(name, preset.config, parse_config(preset.config, dialect)))
    for path, config in given.items():
        try:
            plan = parse_config(config, dialect)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        named.append(NamedConfig(path.stem, config, plan))
    seen: set[str] = set()
    for item in named:
        if item.name in seen:
            raise UsageError(f"two configurations are named {item.name!r}; rename a file")
        seen.add(item.name)
    return dialect, named
