"""verl's rollout correction on a dump: configurations, presets, IS weights, rejection, metrics."""
