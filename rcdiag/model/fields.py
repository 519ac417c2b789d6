"""Reading typed values out of a parsed JSON document, and writing JSON-ready values.

A results JSON or a baseline may have been edited by hand or by another tool. Every ``from_json`` of
:mod:`rcdiag.model` reads it through a :class:`Field`: a value with its path in the document
(``steps[3].metrics['rollout_corr/kl']``) and the :class:`Origin` it came from, so a wrongly typed
value is reported as the file and the field, never as an internal error::

    run.json: not valid rcdiag results (steps[3].metrics['rollout_corr/kl'] is "high", expected a
    number or null)

Bulk readers (:meth:`Field.numbers`, :meth:`Field.integers`) check a whole mapping or list in one loop
and build a path only for the value they reject, so a document of 10,000 steps reads quickly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from rcdiag.errors import InputError

Number = float | None
"""A number of a document; null (None) where it is not finite or not defined."""
Scalar = str | int | float | bool | None
"""A configuration value as verl's keys take it."""


@dataclass(frozen=True)
class Origin:
    """Where a document comes from, and how its problems read.

    Attributes:
        source: the file (or any name) the document was read from; every message starts with it.
        invalid: the sentence around a malformed field's description, with ``{problem}``.
    """

    source: str
    invalid: str = "not valid rcdiag results ({problem})"

    def error(self, message: str) -> InputError:
        """``source: message``."""
        return InputError(f"{self.source}: {message}")

    def malformed(self, problem: str) -> InputError:
        """``source: not valid … (problem)``: a field of the wrong type or value."""
        return self.error(self.invalid.format(problem=problem))


def shown(value: Any) -> str:
    """A JSON value as a message shows it (at most 40 characters)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def child_path(path: str, key: str) -> str:
    """``path.key``, or ``path['key']`` when the key is not an identifier (a metric name)."""
    if not path:
        return key
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


def plain_numbers(values: Any) -> bool:
    """Whether ``values`` is a dict of JSON numbers and nulls (a quick test; a value it rejects may
    still be one, and :meth:`Field.numbers` then decides and names the culprit)."""
    if type(values) is not dict:
        return False
    return all(type(v) is float or v is None or type(v) is int for v in values.values())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Field:
    """A value of a JSON document, with where it is (``path``: ``""`` for the document itself).

    The path is spelled out only when a message needs it, so reading a large document builds no
    path strings.
    """

    __slots__ = ("key", "origin", "parent", "value")

    def __init__(
        self, value: Any, origin: Origin, parent: Field | None = None, key: str | int = ""
    ) -> None:
        self.value = value
        self.origin = origin
        self.parent = parent
        self.key = key

    @classmethod
    def root(cls, document: Any, source: str | Origin) -> Field:
        """The document read from ``source`` (a name, or an :class:`Origin`)."""
        return cls(document, source if isinstance(source, Origin) else Origin(source))

    @property
    def path(self) -> str:
        """``steps[3].metrics['rollout_corr/kl']``."""
        if self.parent is None:
            return ""
        if isinstance(self.key, int):
            return f"{self.parent.path}[{self.key}]"
        return child_path(self.parent.path, self.key)

    # --- problems -----------------------------------------------------------------------------

    def wrong(self, expected: str) -> InputError:
        """``path is <value>, expected <expected>``, as the origin's error."""
        where = self.path or "the document"
        return self.origin.malformed(f"{where} is {shown(self.value)}, expected {expected}")

    def problem(self, text: str) -> InputError:
        """Any other problem of this field, as the origin's error."""
        return self.origin.malformed(text)

    # --- structure ----------------------------------------------------------------------------

    def mapping(self) -> dict[str, Any]:
        """The value, which must be a JSON object."""
        if type(self.value) is not dict:
            raise self.wrong("an object")
        return self.value

    def __getitem__(self, key: str) -> Field:
        """The field ``key`` of this object, which must be present."""
        values = self.mapping()
        if key not in values:
            raise self.origin.malformed(f"{child_path(self.path, key)} is missing")
        return Field(values[key], self.origin, self, key)

    def get(self, key: str) -> Field | None:
        """The field ``key`` of this object, None when absent (a null value is present)."""
        values = self.mapping()
        if key not in values:
            return None
        return Field(values[key], self.origin, self, key)

    def entries(self) -> Iterator[tuple[str, Field]]:
        """Key and field of every entry of this object, in order."""
        for key, value in self.mapping().items():
            yield key, Field(value, self.origin, self, key)

    def items(self) -> list[Field]:
        """Every item of this list."""
        if type(self.value) is not list:
            raise self.wrong("a list")
        return [Field(v, self.origin, self, i) for i, v in enumerate(self.value)]

    def is_null(self) -> bool:
        return self.value is None

    def holding(self, value: Any) -> Field:
        """Another value at the same place (a part of this object, read on its own)."""
        return Field(value, self.origin, self.parent, self.key)

    # --- scalars ------------------------------------------------------------------------------

    def string(self) -> str:
        if not isinstance(self.value, str):
            raise self.wrong("a string")
        return self.value

    def optional_string(self) -> str | None:
        if self.value is not None and not isinstance(self.value, str):
            raise self.wrong("a string or null")
        return self.value

    def choice(self, allowed: tuple[str, ...]) -> str:
        """A string among ``allowed``."""
        if self.value not in allowed or not isinstance(self.value, str):
            raise self.wrong("one of " + ", ".join(f'"{a}"' for a in allowed))
        return self.value

    def integer(self) -> int:
        if not _is_int(self.value):
            raise self.wrong("an integer")
        return int(self.value)

    def count(self) -> int:
        """An integer ≥ 0."""
        if not _is_int(self.value) or self.value < 0:
            raise self.wrong("an integer ≥ 0")
        return int(self.value)

    def optional_integer(self) -> int | None:
        if self.value is not None and not _is_int(self.value):
            raise self.wrong("an integer or null")
        return self.value

    def number(self) -> float:
        """A number (not null)."""
        if not _is_number(self.value):
            raise self.wrong("a number")
        return self.value

    def optional_number(self) -> Number:
        """A number or null."""
        if self.value is not None and not _is_number(self.value):
            raise self.wrong("a number or null")
        return self.value

    def positive(self) -> float:
        """A number > 0."""
        if not _is_number(self.value) or not self.value > 0:
            raise self.wrong("a number > 0")
        return self.value

    def optional_positive(self) -> float | None:
        """A number > 0, or null."""
        if self.value is None:
            return None
        return self.positive()

    # --- bulk -------------------------------------------------------------------------------

    def numbers(self) -> dict[str, Number]:
        """An object of numbers or nulls (metrics by name), checked in one loop."""
        values = self.mapping()
        for key, value in values.items():
            kind = type(value)  # float and int first: one test for almost every value
            if (
                kind is not float
                and kind is not int
                and value is not None
                and not _is_number(value)
            ):
                raise Field(value, self.origin, self, str(key)).wrong("a number or null")
        return dict(values)

    def number_list(self, nulls: bool = True) -> list[Number]:
        """A list of numbers (and nulls, unless ``nulls`` is False)."""
        if type(self.value) is not list:
            raise self.wrong("a list of numbers")
        for i, value in enumerate(self.value):
            if not _is_number(value) and (value is not None or not nulls):
                item = Field(value, self.origin, self, i)
                raise item.wrong("a number or null" if nulls else "a number")
        return list(self.value)

    def integers(self) -> tuple[int, ...]:
        """A list of integers."""
        if type(self.value) is not list:
            raise self.wrong("a list")
        for i, value in enumerate(self.value):
            if not _is_int(value):
                raise Field(value, self.origin, self, i).wrong("an integer")
        return tuple(self.value)

    def strings(self) -> tuple[str, ...]:
        """A list of strings."""
        if type(self.value) is not list:
            raise self.wrong("a list")
        for i, value in enumerate(self.value):
            if not isinstance(value, str):
                raise Field(value, self.origin, self, i).wrong("a string")
        return tuple(self.value)

    def scalars(self) -> dict[str, Scalar]:
        """An object of strings, numbers, booleans or nulls (a verl configuration)."""
        values = self.mapping()
        for key, value in values.items():
            if value is not None and not isinstance(value, (str, int, float, bool)):
                raise Field(value, self.origin, self, str(key)).wrong(
                    "a string, number, boolean or null"
                )
        return dict(values)


R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """A typed part of a result document: :meth:`read` builds it from a :class:`Field` of a parsed
    JSON document, :meth:`from_json` from the document itself (``to_json`` writes it back)."""

    __slots__ = ()

    @classmethod
    def read(cls: type[R], field: Field) -> R:
        """The record at ``field``, every value checked for its type.

        Raises:
            InputError: a missing field or a value of the wrong type, naming the file and the path.
        """
        raise NotImplementedError

    @classmethod
    def from_json(cls: type[R], obj: Any, *, source: str) -> R:
        """The record of a parsed JSON value read from ``source`` (a file name, for messages).

        Raises:
            InputError: a missing field or a value of the wrong type, naming ``source`` and the
                field's path (``steps[3].metrics['rollout_corr/kl'] is "high", expected a number
                or null``).
        """
        return cls.read(Field.root(obj, source))


def json_safe(value: Any) -> Any:
    """NaN and ±inf become ``null`` (docs/report.md); containers are converted recursively
    (tuples become lists, keys strings); -0.0 becomes 0.0."""
    if isinstance(value, float):
        return value + 0.0 if math.isfinite(value) else None  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def safe_number(value: float | None) -> float | None:
    """One number as JSON writes it: null when not finite, 0.0 for -0.0."""
    if value is None:
        return None
    if isinstance(value, float):
        return value + 0.0 if math.isfinite(value) else None
    return value


def safe_numbers(values: Mapping[str, float | None]) -> dict[str, float | None]:
    """A mapping of numbers as JSON writes it (:func:`safe_number` of each)."""
    return {
        str(k): (v + 0.0 if math.isfinite(v) else None) if isinstance(v, float) else v
        for k, v in values.items()
    }
