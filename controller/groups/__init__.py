"""Consumer-group failover: checkpoints (committed offsets translated and synced) and `ferry groups`."""
