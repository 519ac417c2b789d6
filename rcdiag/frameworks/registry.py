"""The registry of other RL frameworks (:mod:`rcdiag.frameworks`): every framework by id, and the
parsing of their names."""

from __future__ import annotations

from collections.abc import Iterable

from rcdiag.errors import UsageError
from rcdiag.frameworks import areal, nemo_rl, open_instruct, openrlhf, prime_rl, skyrl, slime, trl
from rcdiag.frameworks.base import Framework

FRAMEWORKS: dict[str, Framework] = {
    f.id: f
    for f in (
        trl.FRAMEWORK,
        slime.FRAMEWORK,
        openrlhf.FRAMEWORK,
        nemo_rl.FRAMEWORK,
        prime_rl.FRAMEWORK,
        areal.FRAMEWORK,
        skyrl.FRAMEWORK,
        open_instruct.FRAMEWORK,
    )
}
"""Every framework, by id, in the order the documents list them."""

_BY_NAME: dict[str, str] = {
    **{f.id: f.id for f in FRAMEWORKS.values()},
    **{alias: f.id for f in FRAMEWORKS.values() for alias in f.aliases},
    **{f.title.lower(): f.id for f in FRAMEWORKS.values()},
}


def parse_frameworks(values: Iterable[str] | str, option: str = "--frameworks") -> list[Framework]:
    """The frameworks named in comma lists (``all`` for every one), in the registry's order.

    Raises:
        UsageError: an unknown name (the message lists the known ones).
    """
    items = [values] if isinstance(values, str) else list(values)
    names = [n.strip().lower() for item in items for n in item.split(",") if n.strip()]
    if not names:
        raise UsageError(f"{option}: no framework named; known: {', '.join(FRAMEWORKS)}")
    if "all" in names:
        return list(FRAMEWORKS.values())
    chosen: set[str] = set()
    for name in names:
        found = _BY_NAME.get(name)
        if found is None:
            raise UsageError(
                f"{option}: unknown framework {name!r}; known: {', '.join(FRAMEWORKS)} (or all)"
            )
        chosen.add(found)
    return [f for f in FRAMEWORKS.values() if f.id in chosen]
