"""The resume look-back (worker/position/lookback.py) on a transactional destination, against the local stack.

Transaction markers take offsets, so a window of N destination offsets holds fewer than N records: the
reader must end a window when its position reached the window's end, not wait for records that are
not there. The test wraps the reader's real consumer (built by Ferry's adapter) to count the reads
that waited out their timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer

from ferry.common.core import provenance
from ferry.common.kafka import clients as kafka_clients
from ferry.worker.position import lookback
from ferry.worker.position.lookback import DestinationReader

pytestmark = pytest.mark.integration


class RecordingConsumer:
    """A real consumer whose ``consume`` calls are recorded: (records asked for, timeout, records returned)."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self.reads: list[tuple[int, float, int]] = []

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        messages = self._consumer.consume(num_messages, timeout)
        self.reads.append((num_messages, timeout, len(messages)))
        return messages

    def waited_out(self) -> list[tuple[int, float, int]]:
        """The reads that waited for records that never came: they returned fewer than asked for."""
        return [read for read in self.reads if read[1] > 0 and read[2] < read[0]]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RecordingConsumer]]:
    """Every consumer the look-back builds through Ferry's adapter, recorded."""
    built: list[RecordingConsumer] = []
    consumer = kafka_clients.consumer

    def recording(cluster: Any, group_id: str, **overrides: Any) -> Any:
        built.append(RecordingConsumer(consumer(cluster, group_id, **overrides)))
        return built[-1]

    monkeypatch.setattr(lookback.kafka_clients, "consumer", recording)
    yield built


def write_copies(cluster: dict[str, str], topic: str, offsets: range, per_transaction: int, writer_id: str) -> None:
    """Copies of ``src`` offsets ``offsets`` on partition 0 of ``topic``, committed ``per_transaction`` at a time."""
    producer = kafka_clients.producer(cluster, **{"transactional.id": writer_id, "linger.ms": 0})
    producer.init_transactions(30)
    batch = list(offsets)
    for first in range(0, len(batch), per_transaction):
        producer.begin_transaction()
        for offset in batch[first : first + per_transaction]:
            producer.produce(
                topic, b"copy", None, 0, headers=[(provenance.HEADER, provenance.encode(["src"], 0, offset))]
            )
        producer.commit_transaction(30)
    producer.flush(10)


def test_a_transactional_destination_is_read_back_without_waiting_out_a_timeout_per_window(
    cluster_conf: Callable[[str], dict[str, str]],
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    recorded: list[RecordingConsumer],
) -> None:
    """3,000 copies in 300 committed transactions of 10: 3,300 destination offsets, read back in three
    windows (1,000, 2,000 and 300 offsets), each holding fewer records than offsets. Every copy is found,
    and no read of the look-back waits out its timeout for records that are not there."""
    dst = cluster_conf("dst")
    topic = topic_name("txn-lookback")
    create_topic("dst", topic, 1)
    write_copies(dst, topic, range(3_000), 10, f"ferry.test.{topic}")
    reader = DestinationReader(destination=dst, group_id="ferry.src.dst", client_id="test-lookback")
    try:
        found = reader.look_back(topic, 0, "src", None, 100_000)
    finally:
        reader.close()
    assert [source for source, _ in found.own] == list(range(2_999, -1, -1))
    assert found.own[0] == (2_999, 3_298)  # the last copy; its transaction's marker at 3,299
    assert found.read == 3_000 and not found.bounded
    (consumer,) = recorded
    assert consumer.waited_out() == [], consumer.reads
