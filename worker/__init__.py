"""Ferry worker: applies its assignment with assign()-based consumers and copies records."""
