"""placeholder, replaced by the synth implementation"""

def synth() -> None:
    """Write a synthetic dump."""
