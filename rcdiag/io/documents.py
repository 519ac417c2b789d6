"""Documents rcdiag reads (baselines, results JSON, rules files, configurations): no non-finite
number gets in.

rcdiag writes a non-finite value as ``null``; a number that is ``Infinity`` or ``NaN`` in a document
it reads (JSON's ``Infinity``/``NaN`` tokens, an exponent too large for a float, TOML's ``inf``/``nan``,
YAML's ``.inf``/``.nan``) would switch a gate off or draw nonsense, so it is refused with the field
named.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rcdiag.errors import UsageError
from rcdiag.finite import NonFinite, nonfinite_field

_MAY_OVERFLOW = re.compile(r"[eE][+]?0*[0-9]{3,}|[0-9]{300,}")
"""Text where a JSON number may overflow a float (``1e999``): only then are the numbers walked."""


def refuse_nonfinite(document: Any, origin: str) -> None:
    """Raise when ``document`` (parsed from ``origin``) holds a non-finite number.

    Raises:
        UsageError: naming the file and the field.
    """
    found = nonfinite_field(document)
    if found is not None:
        where, value = found
        raise UsageError(
            f"{origin}: field {where} is {value}; rcdiag reads finite numbers only (a value that "
            "cannot be computed is written as null)"
        )


def loads_json(text: str, origin: str) -> Any:
    """``json.loads`` of a document rcdiag reads, refusing non-finite numbers.

    Raises:
        json.JSONDecodeError, RecursionError: as ``json.loads``.
        UsageError: a non-finite number, naming ``origin`` and the field.
    """
    constants: list[str] = []

    def constant(token: str) -> float:
        constants.append(token)
        return NonFinite(token)

    document = json.loads(text, parse_constant=constant)
    if constants or _MAY_OVERFLOW.search(text):
        refuse_nonfinite(document, origin)
    return document
