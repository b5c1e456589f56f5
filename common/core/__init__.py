"""Ferry's pure core: the algorithms and formats every package computes with.

No I/O and no clock: no ZooKeeper, Kafka, HTTP, sockets or processes (import-linter forbids
kazoo, confluent_kafka, requests, socket, subprocess, flask, ... here; see ``.importlinter``).
Time comes in as arguments. Each module says so in its docstring.
"""
