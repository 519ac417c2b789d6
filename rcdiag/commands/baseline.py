"""Placeholder: `rcdiag baseline` is being built."""


def baseline() -> None:
    """Not available yet."""
    raise SystemExit("rcdiag baseline: not available yet")
