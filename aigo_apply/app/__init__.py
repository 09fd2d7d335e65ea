"""Use cases (plan, apply, destroy, status, models, watch): they wire the adapters to the pure core."""
