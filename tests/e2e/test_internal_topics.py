"""Other systems' internal topics stay home: a route whose include matches them mirrors only the ordinary topic.

The source holds Schema Registry's ``_schemas``, Kafka Connect's ``connect-configs``,
``connect-offsets`` and ``connect-status``, and a MirrorMaker 2 ``mm2-offsets.<alias>.internal``
beside an ordinary topic. The route's include matches every one of them by name (on the shared
stack an ``include: ['.*']`` would also take other tests' topics, so the pattern names this test's
topics and the internal ones, which is what matters). Only the ordinary topic is mirrored, and
``ferry check --connect`` names the internal ones it leaves out.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Callable

import pytest
import requests
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics, ferry_command
from tests.harness import read_committed
from tests.harness.processes import Fleet, wait_until

pytestmark = pytest.mark.e2e

# Shared names on the shared stack: created (compacted, as their systems want them) only where absent, and
# deleted afterwards only when this test created them.
FIXED = ["_schemas", "connect-configs", "connect-offsets", "connect-status"]


def test_a_route_including_everything_leaves_other_systems_internal_topics_alone(
    local_stack: devstack.Stack, fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    src = {"bootstrap.servers": local_stack.bootstrap("src")}
    dst = {"bootstrap.servers": local_stack.bootstrap("dst")}
    src_admin, dst_admin = kafka_clients.admin(src), kafka_clients.admin(dst)
    ordinary = topic_name("internal-ordinary")
    mm2 = f"mm2-offsets.{topic_name('alias')}.internal"
    on_src = set(src_admin.list_topics(timeout=10).topics)
    on_dst_before = set(dst_admin.list_topics(timeout=10).topics)
    created = [name for name in FIXED if name not in on_src] + [mm2]
    compacted = {"cleanup.policy": "compact"}
    create_topics(src_admin, [NewTopic(ordinary, 1, 1), *(NewTopic(n, 1, 1, config=compacted) for n in created)])
    internal = [*FIXED, mm2]
    try:
        include = f"^({'|'.join(re.escape(name) for name in [ordinary, *internal])})$"
        fleet.extra = {
            "routes": [{"source": "src", "destination": "dst", "include": [include]}],
            "controller": {"observer_interval_s": 1.0},
        }
        fleet.write_config()

        check = subprocess.run(
            ferry_command("check", "--config", str(fleet.config_path), "--connect"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = [line for line in check.stdout.splitlines() if "route src.dst topics" in line]
        assert len(lines) == 1, check.stdout + check.stderr
        assert f"include mirrors 1 topic ({ordinary}) of src" in lines[0]
        assert f"left out as internal (exclude_internal): 5 topics ({', '.join(sorted(internal))})" in lines[0]

        controller = fleet.wait_for_leader(fleet.start_controller("controller"), timeout=60)
        fleet.start_worker("worker")
        fleet.wait_for_workers(controller, {"worker"}, timeout=60)
        producer = kafka_clients.producer(src)
        for i in range(10):
            producer.produce(ordinary, value=b"%d" % i)
        assert producer.flush(30) == 0

        def copied() -> bool:
            if ordinary not in dst_admin.list_topics(timeout=10).topics:
                return False
            # Read, not the log end: the default route writes exactly once, and its marker takes an offset.
            return len(read_committed.read(dst, ordinary).get(0, [])) == 10

        wait_until(copied, 90, f"the 10 records of {ordinary} on dst", interval=1.0)
        # The observer decided every source topic in the pass that whitelisted the ordinary one.
        mirrored = requests.get(f"{controller.url}/topics", timeout=5).text
        assert ordinary in mirrored
        assert not [name for name in internal if name in mirrored]
        on_dst = set(dst_admin.list_topics(timeout=10).topics)
        assert not [name for name in internal if name in on_dst and name not in on_dst_before]
    finally:
        fleet.stop_all()
        for admin, names in ((src_admin, [ordinary, *created]), (dst_admin, [ordinary])):
            for future in admin.delete_topics(names, operation_timeout=30).values():
                with contextlib.suppress(KafkaException):  # a topic that was not created
                    future.result()
