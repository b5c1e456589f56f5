"""Operating a running fleet: the operator's controls and the throttle's token bucket (pure)."""
