"""Use cases, one per command (plan, apply, destroy, status, logs, models, watch, top, bench, render, add...),
and the one converge loop: each wires a platform (platforms/) and the editors (edit/) to the pure core."""
