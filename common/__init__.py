"""Ferry's shared layer: config, the ZooKeeper layout, pure algorithms, Kafka client settings, the CLI.

Nothing here imports ``controller`` or ``worker`` (enforced by import-linter, see ``.importlinter``).
"""
