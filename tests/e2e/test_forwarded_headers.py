"""An application on a mirrored cluster forwards Ferry's header to another topic: its records still travel.

Active-active ``src <-> dst`` with loop prevention and identity names. An application on ``dst``
(here a plain consumer and producer) reads the mirrored topic and writes a derived record for each
record to another topic on ``dst``, every header forwarded, ``ferry.provenance`` included, as Kafka
Streams does; it also writes records of its own there. Every derived record and every record of its
own reaches ``src`` once, and nothing of the mirrored topic comes back to ``src``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from ferry.common.config import parse_config
from ferry.common.core import provenance
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics
from tests.harness import read_committed
from tests.harness.processes import Fleet, wait_until

pytestmark = pytest.mark.e2e

RECORDS = 30
OWN = 5
SEQ = "seq"


def _read(conf: dict[str, str], topic: str) -> list[Any]:
    """Every record of ``topic`` (one partition) as a read_committed reader gets it now, read to the
    end by position (both routes write exactly once: transaction markers take offsets)."""
    return read_committed.read(conf, topic).get(0, [])


def _seqs(records: list[Any]) -> Counter[str]:
    return Counter((dict(provenance.split(m.headers())[0]).get(SEQ) or b"?").decode() for m in records)


def test_records_an_application_derives_with_forwarded_headers_reach_the_other_side(
    local_stack: devstack.Stack, fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    mirrored, derived = topic_name("fwd-in"), topic_name("fwd-out")
    conf = {name: {"bootstrap.servers": local_stack.bootstrap(name)} for name in ("src", "dst")}
    for name in conf:
        create_topics(kafka_clients.admin(conf[name]), [NewTopic(mirrored, 1, 1), NewTopic(derived, 1, 1)])
    include = [f"^({re.escape(mirrored)}|{re.escape(derived)})$"]
    fleet.extra = {
        "clusters": conf,
        "routes": [
            {"source": "src", "destination": "dst", "include": include, "loop_prevention": True},
            {"source": "dst", "destination": "src", "include": include, "loop_prevention": True},
        ],
        "controller": {**fleet.config()["controller"], "observer_interval_s": 1.0},
    }
    fleet.write_config()
    config = parse_config(fleet.config())
    controller = fleet.wait_for_leader(fleet.start_controller("controller"), timeout=60)
    fleet.start_worker("worker")
    fleet.wait_for_workers(controller, {"worker"}, timeout=60)

    producer = kafka_clients.producer(conf["src"])
    for i in range(RECORDS):
        producer.produce(mirrored, value=b"v", headers=[(SEQ, b"src-%d" % i), ("app", b"kept")])
    assert producer.flush(30) == 0
    wait_until(lambda: len(_read(conf["dst"], mirrored)) >= RECORDS, 90, f"{RECORDS} copies on dst")

    # The application on dst: a derived record per mirrored record, headers forwarded as they are.
    app = kafka_clients.producer(conf["dst"])
    for message in _read(conf["dst"], mirrored):
        seq = dict(provenance.split(message.headers())[0])[SEQ]
        assert provenance.read(message.headers(), mirrored) is not None  # a copy, its header bound to it
        app.produce(derived, value=b"derived", headers=[*message.headers(), (SEQ, b"derived-" + seq)])
    for i in range(OWN):
        app.produce(derived, value=b"own", headers=[(SEQ, b"own-%d" % i)])
    assert app.flush(30) == 0

    expected = Counter([f"derived-src-{i}" for i in range(RECORDS)] + [f"own-{i}" for i in range(OWN)])

    def settled() -> bool:
        if len(_read(conf["src"], derived)) < sum(expected.values()):
            return False
        for route in config.routes:
            consumer = kafka_clients.consumer(conf[route.source], group_id=route.group_id)
            try:
                for topic in (mirrored, derived):
                    # Past the source's last record: a copy topic ends with a transaction marker, which
                    # takes an offset that no record holds.
                    records = _read(conf[route.source], topic)
                    past_last = records[-1].offset() + 1 if records else 0
                    if consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset < past_last:
                        return False
            finally:
                consumer.close()
        return True

    wait_until(settled, 120, "every derived record on src and every route committed past its source's last", 1.0)

    on_src = _read(conf["src"], derived)
    assert _seqs(on_src) == expected  # every one, once: none skipped as a copy from src
    for message in on_src:
        _, own = provenance.split(message.headers())
        assert [k for k, _ in message.headers()].count(provenance.HEADER) == 1  # replaced, not kept twice
        assert provenance.read(message.headers(), derived) == provenance.decode(own)
        assert provenance.decode(own).path == ("dst",)  # a record of dst's, though a forwarded path said src
    assert _seqs(_read(conf["dst"], derived)) == expected  # their copies on src are not copied back
    back = _read(conf["src"], mirrored)
    assert _seqs(back) == Counter(f"src-{i}" for i in range(RECORDS))  # nothing of the mirrored topic came back
    assert all(provenance.split(m.headers())[1] is None for m in back)
