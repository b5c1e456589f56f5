"""The leader's periodic jobs: the scheduler and its executors, and the heartbeat job."""
