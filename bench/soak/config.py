"""The soak's stack and the config its controllers and workers read (pure: data in, data out).

The soak's stack is a ZooKeeper and two Kafka clusters of its own (:func:`soak_stack`, on ports no
other part of the local stack uses), so stopping them never touches the shared stack. The
destination has three brokers by default: the destination topic gets as many replicas
(:func:`route`), so restarting one broker leaves it writable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferry.devstack.stack import Server, Stack

ZOOKEEPER_PORT = 31600
SRC_PORT = 31612
DST_PORT = 31622  # brokers on 31622, 31625, 31628 (each also + 1 and + 2)


def soak_stack(dst_brokers: int = 3, base_port: int = ZOOKEEPER_PORT) -> Stack:
    """The soak's own ZooKeeper, a one-broker source and a ``dst_brokers``-broker destination;
    ``base_port`` moves every port by the same amount (two soaks side by side)."""
    shift = base_port - ZOOKEEPER_PORT
    return Stack(
        zookeeper=Server(name="soak-zookeeper", kind="zookeeper", port=ZOOKEEPER_PORT + shift),
        src=Server(name="soak-src", kind="kafka", port=SRC_PORT + shift),
        dst=Server(name="soak-dst", kind="kafka", port=DST_PORT + shift, brokers=dst_brokers),
    )


def route(topic: str, replicas: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """The soak's one route, src -> dst over ``topic``: the one place its keys are chosen. It has no
    ``delivery_guarantee``, so it writes exactly once as a route does by default: the soak checks that
    guarantee. ``options`` (``--route-option key=value``, e.g. ``delivery_guarantee=at_least_once``) are
    added last and win."""
    return {
        "source": "src",
        "destination": "dst",
        "include": [topic],
        "replication_factor": replicas,
        **options,
    }


def fleet_config(
    stack: Stack, zk_root: str, topic: str, session_timeout_s: float, route_options: Mapping[str, Any]
) -> dict[str, Any]:
    """The config every controller and worker of the soak reads."""
    return {
        "zookeeper": {"connect": stack.zookeeper.address, "root": zk_root, "session_timeout_s": session_timeout_s},
        "clusters": {
            "src": {"bootstrap.servers": stack.src.bootstrap},
            "dst": {"bootstrap.servers": stack.dst.bootstrap},
        },
        "routes": [route(topic, stack.dst.brokers, route_options)],
        "controller": {
            "rest_host": "127.0.0.1",
            "rebalance_delay_s": 3.0,
            "failover_delay_s": 2.0,
            "observer_interval_s": 2.0,
            "lag_interval_s": 1.0,
        },
        "worker": {"commit_interval_s": 0.5},
    }
