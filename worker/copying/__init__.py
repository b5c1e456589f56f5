"""A route copier's parts, each owning its state, composed by :class:`worker.copier.RouteCopier`: the
partitions held and their states, the starter that acquires them, the delivery ledger, and the
committer that owns the destination producer and commits only what the destination acknowledged."""
