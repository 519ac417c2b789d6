"""Decisions from measured figures: the metric registry, the diagnosis, the verdict and the advice."""
