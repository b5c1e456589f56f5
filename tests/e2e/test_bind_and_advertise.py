"""One config file for every controller and worker: they bind every interface (``0.0.0.0``) and
advertise a URL others can reach (common/endpoints.py), so a standby forwards writes to the leader."""

from __future__ import annotations

from collections.abc import Callable

import requests
from confluent_kafka.admin import NewTopic

from ferry.common import endpoints
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.support import create_topics
from tests.harness.processes import Fleet, wait_until


def test_controllers_and_workers_from_one_wildcard_config_advertise_reachable_urls(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    fleet.extra = {"controller": {"rest_host": "0.0.0.0"}, "worker": {"metrics_host": "0.0.0.0"}}
    fleet.write_config()
    config_text = fleet.config_path.read_text()
    host = endpoints.host_name()
    assert host is not None, "no name of this host resolves: the derived URLs need one"
    topic = topic_name("advertise")
    create_topics(kafka_clients.admin({"bootstrap.servers": fleet.stack.bootstrap("src")}), [NewTopic(topic, 2, 1)])

    leader = fleet.start_controller("c1")
    fleet.wait_for_leader(leader)
    standby = fleet.start_controller("c2")

    def follows() -> bool:
        health = requests.get(f"{standby.url}/health", timeout=2).json()
        return bool(not health["leader"] and health["leaderId"] == "c1")

    wait_until(follows, 30, "c2 to follow c1")
    # The leader advertises the host's name, not the address it binds.
    assert requests.get(f"{standby.url}/health", timeout=2).json()["leaderUrl"] == f"http://{host}:{leader.port}"
    derived = fleet.start_worker("w1")
    given = fleet.start_worker("w2", env={"FERRY_ADVERTISED_METRICS_URL": "http://127.0.0.1:{port}"})
    fleet.wait_for_workers(leader, {"w1", "w2"})

    # A write sent to the standby is forwarded to the leader's advertised URL and answered there.
    response = requests.post(f"{standby.url}/topics", json={"topic": topic}, timeout=15)
    assert response.status_code == 201, response.text
    assert requests.get(f"{leader.url}/topics/{topic}", timeout=5).status_code == 200
    wait_until(lambda: len(fleet.online_by_worker(leader, topic)) == 2, 30, "both partitions ONLINE")

    # Each worker registered a metrics URL that answers: derived from the host name, or as given.
    instances = {i["id"]: i for i in requests.get(f"{leader.url}/instances", timeout=5).json()["instances"]}
    assert instances["w1"]["metricsUrl"] == f"http://{host}:{derived.port}"
    assert instances["w2"]["metricsUrl"] == f"http://127.0.0.1:{given.port}"
    for worker in ("w1", "w2"):
        assert requests.get(f"{instances[worker]['metricsUrl']}/health", timeout=5).ok
    assert fleet.config_path.read_text() == config_text  # one file, as written, for all four
