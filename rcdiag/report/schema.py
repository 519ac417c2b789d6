"""The shape of a results document, checked when one is read back (``rcdiag report --from``).

A results JSON may have been edited by hand or by another tool; the report and the recommendation
read it field by field, so every field they read is checked here for its type first, and a problem
is reported as the file and the field (``steps[3].metrics['rollout_corr/kl'] is "high", expected a
number``), never as an internal error. Fields that are absent are fine (an analyze document has no
presets, a compare-presets document no steps); fields not listed here are not read.

A shape is one of: a kind name of :data:`KINDS`; ``[shape]`` (a list of it); a dict of key → shape,
where the key ``"*"`` gives the shape of every other key (a dict without ``"*"`` accepts other keys
unchecked).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from rcdiag.errors import UsageError

KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "number": (
        "a number or null",
        lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
    ),
    "integer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "integer?": (
        "an integer or null",
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
    ),
    "string": ("a string", lambda v: isinstance(v, str)),
    "string?": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "scalar": (
        "a string, number, boolean or null",
        lambda v: v is None or isinstance(v, (str, int, float, bool)),
    ),
    "object": ("an object", lambda v: isinstance(v, Mapping)),
}

_METRICS = {"*": "number"}
_SUMMARY = {
    "worst_steps": {"*": {"value": "number", "step": "integer"}},
    "fully_rejected_steps": ["integer"],
    "*": "number",
}
_BUCKETS = [{"bucket": "integer", "label": "string", "*": "number"}]
_HISTOGRAM = {"counts": ["integer"], "total": "integer"}
_SEQUENCE = {
    "file": "string?",
    "uid": "string?",
    "row": "integer?",
    "step": "integer",
    "*": "number",
}
_CONFIG = {"*": "scalar"}

SHAPE: dict[str, Any] = {
    "rcdiag_version": "string",
    "source": {
        "paths": ["string"],
        "rows": "integer",
        "tokens": "integer",
        "valid_tokens": "integer",
        "steps": "integer",
        "empty_steps": ["integer"],
        "dropped_nonfinite": "integer",
        "positive_log_probs": "integer",
        "first_positive_log_prob": "string?",
    },
    "options": {
        "veto_threshold": "number",
        "effective_veto_threshold": "number",
        "selected_steps": ["integer"],
        "top_k": "integer",
    },
    "overall": _METRICS,
    "steps": [
        {"step": "integer", "rows": "integer", "valid_tokens": "integer", "metrics": _METRICS}
    ],
    "checks": [
        {"metric": "string", "value": "number", "status": "string", "why": "string"},
    ],
    "presets": [
        {
            "name": "string",
            "purpose": "string",
            "config": _CONFIG,
            "overall": _METRICS,
            "summary": _SUMMARY,
            "steps": [{"step": "integer", "metrics": _METRICS, "summary": _SUMMARY}],
        }
    ],
    "preset_aliases": {"*": ["string"]},
    "sweep": {
        "target": "string",
        "points": [{"threshold": "scalar", "config": _CONFIG, "summary": _SUMMARY}],
    },
    "sweeps": [
        {
            "key": "string?",
            "target": "string?",
            "title": "string",
            "points": [{"threshold": "scalar", "config": _CONFIG, "summary": _SUMMARY}],
        }
    ],
    "profile": {
        "histogram_edges": ["number"],
        "token_log_ratio": _HISTOGRAM,
        "seq_sum_log_ratio": _HISTOGRAM,
        "seq_mean_log_ratio": _HISTOGRAM,
        "by_rollout_prob": _BUCKETS,
        "by_position": _BUCKETS,
        "by_length": _BUCKETS,
        "top_sequences": {"*": [_SEQUENCE]},
        "rows": "integer",
        "empty_rows": "integer",
        "valid_tokens": "integer",
        "top_k": "integer",
    },
}
"""The fields of a report document (and of the analyze and compare-presets documents) that are read."""


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _key(where: str, key: str) -> str:
    if not where:
        return key
    return f"{where}.{key}" if key.isidentifier() else f"{where}[{key!r}]"


def shape_problem(value: Any, shape: Any, where: str = "") -> str | None:
    """The first field of ``value`` that does not have ``shape`` (module docstring), described;
    None when every field does.

    Example:
        >>> shape_problem({"steps": [{"step": 1}, {"step": "2"}]}, SHAPE)
        'steps[1].step is "2", expected an integer'
    """
    if isinstance(shape, str):
        description, test = KINDS[shape]
        return None if test(value) else f"{where} is {_shown(value)}, expected {description}"
    if isinstance(shape, list):
        if value is None:
            return None
        if not isinstance(value, list):
            return f"{where} is {_shown(value)}, expected a list"
        for i, item in enumerate(value):
            problem = shape_problem(item, shape[0], f"{where}[{i}]")
            if problem:
                return problem
        return None
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f"{where or 'the document'} is {_shown(value)}, expected an object"
    for key, item in value.items():
        inner = shape.get(key, shape.get("*"))
        if inner is not None:
            problem = shape_problem(item, inner, _key(where, str(key)))
            if problem:
                return problem
    return None


def check_shape(document: Mapping[str, Any], origin: str) -> None:
    """Raise a :class:`~rcdiag.errors.UsageError` naming ``origin`` and the first malformed field."""
    problem = shape_problem(document, SHAPE)
    if problem:
        raise UsageError(f"{origin}: not valid rcdiag results ({problem})")
