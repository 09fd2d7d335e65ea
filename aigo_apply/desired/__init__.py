"""Config + host context -> DesiredState (pure): canonical specs, labels, and each engine's container."""
