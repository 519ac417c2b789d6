"""Placeholder: `rcdiag check` is being built."""


def check() -> None:
    """Not available yet."""
    raise SystemExit("rcdiag check: not available yet")
