"""Placeholder: `rcdiag report` is being built."""


def report() -> None:
    """Not available yet."""
    raise SystemExit("rcdiag report: not available yet")
