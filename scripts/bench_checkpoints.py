"""What one pass of the leader's checkpoint job costs, per consumer group and per partition, against the
local stack (``ferry dev up``).

``python scripts/bench_checkpoints.py [--groups 1,10,50] [--partitions 8] [--passes 5]``

For each group count: a fresh topic of ``--partitions`` partitions on ``src``, an offset map on ``dst``
that says its first 1,000 records of each partition were copied (written straight to
``__ferry_offset_map``, as a worker writes it), and that many groups committed on ``src``, half of them
inside the copy (translated exactly) and half past it (``ahead``). Then the checkpoint job
(:class:`controller.groups.checkpoints.Checkpointer`) runs ``--passes`` times with group offset sync on,
as the leader runs it, and the script prints the median pass, and that per group and per partition.
Asserts nothing: compare the pass with ``controller.checkpoint_interval_s``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ferry.common.config import parse_config
from ferry.common.core.offset_map import MAP_TOPIC, Segment, segment_key, segment_value
from ferry.controller.groups.checkpoints import Checkpointer
from ferry.devstack import stack as devstack
from ferry.devstack.support import commit_offset, create_topics

COPIED = 1_000  # records of each partition the map says were copied


def _pass_seconds(groups: int, partitions: int, passes: int, stack: devstack.Stack) -> list[float]:
    token = uuid.uuid4().hex[:8]
    topic, prefix = f"bench-checkpoints-{token}", f"bench-checkpoints-{token}-g"
    src: dict[str, str | int | float | bool] = {"bootstrap.servers": stack.bootstrap("src")}
    dst: dict[str, str | int | float | bool] = {"bootstrap.servers": stack.bootstrap("dst")}
    create_topics(AdminClient(src), [NewTopic(topic, partitions, 1)])
    create_topics(AdminClient(dst), [NewTopic(topic, partitions, 1)])
    producer = Producer(dst)
    for partition in range(partitions):
        segment = Segment(0, 0, COPIED)
        producer.produce(MAP_TOPIC, segment_value(segment), segment_key("src.dst", topic, partition, 0))
    producer.flush(30)
    for index in range(groups):
        offset = COPIED // 2 if index % 2 == 0 else COPIED + 100  # inside the copy, or past it
        for partition in range(partitions):
            commit_offset(src, f"{prefix}{index}", topic, offset, partition)
    config = parse_config(
        {
            "zookeeper": {"connect": stack.zookeeper.address, "root": f"/bench-checkpoints-{token}"},
            "clusters": {"src": src, "dst": dst},
            "routes": [{"source": "src", "destination": "dst", "groups": [f"{prefix}.*"]}],
            "controller": {"sync_group_offsets": True},
        }
    )
    checkpointer = Checkpointer(config, f"bench-{token}")
    try:
        checkpointer.run()  # the first pass creates the checkpoint topic and the clients
        seconds = []
        for _ in range(passes):
            started = time.perf_counter()
            checkpointer.run()
            seconds.append(time.perf_counter() - started)
        translated = checkpointer.latest()
        assert len(translated) == groups, f"{len(translated)} of {groups} groups checkpointed"
        return seconds
    finally:
        checkpointer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="1,10,50", help="comma-separated group counts (default 1,10,50)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of each group's topic (default 8)")
    parser.add_argument("--passes", type=int, default=5, help="timed passes per group count (default 5)")
    args = parser.parse_args()
    stack = devstack.stack_from_env()
    print(f"{'groups':>6} {'partitions':>10} {'median pass s':>14} {'ms per group':>13} {'ms per partition':>17}")
    for groups in (int(g) for g in args.groups.split(",")):
        seconds = statistics.median(_pass_seconds(groups, args.partitions, args.passes, stack))
        per_group = seconds * 1000 / groups
        per_partition = per_group / args.partitions
        print(f"{groups:>6} {args.partitions:>10} {seconds:>14.3f} {per_group:>13.1f} {per_partition:>17.2f}")


if __name__ == "__main__":
    main()
