"""Placeholder: `rcdiag recommend` is being built."""


def recommend() -> None:
    """Not available yet."""
    raise SystemExit("rcdiag recommend: not available yet")
