"""What a delivery report per record costs with confluent-kafka, against a real broker.

``python scripts/bench_delivery_reports.py [--bootstrap 127.0.0.1:29092] [--records 1000000]
[--value-bytes 100] [--rounds 3]``

Produces the same records (a key, two headers, a timestamp; Ferry's producer defaults) into a
fresh topic of the given cluster three ways, each in a fresh producer, and prints this process's
CPU seconds (all threads, librdkafka's included) per million records:

- ``none``: no delivery callback (the ceiling's way: librdkafka reports nothing to Python);
- ``callback``: a Python callback per record that only queues the report (Ferry's copier);
- ``only-errors``: the same callback with ``delivery.report.only.error`` (confluent-kafka then
  skips successes in C, before it builds a ``Message``).

Ferry's offset map needs every record's destination offset, so it must take the ``callback``
path; the difference between ``none`` and ``callback`` is what that costs per record. The
figures are in BENCHMARKS.md ("Where the rest of the CPU per record goes").
"""

from __future__ import annotations

import argparse
import resource
import time
import uuid
from typing import Any

from confluent_kafka.admin import NewTopic

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.support import produce_blocking


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(bootstrap: str, topic: str, records: int, value: bytes, mode: str) -> tuple[float, float]:
    """Produces ``records`` records; returns (records/s, CPU seconds per million records)."""
    settings: dict[str, Any] = {}
    reports: list[Any] = []

    def on_delivery(error: Any, message: Any) -> None:
        reports.append(message)

    if mode != "none":
        settings["on_delivery"] = on_delivery
    if mode == "only-errors":
        settings["delivery.report.only.error"] = True
    producer = kafka_clients.producer({"bootstrap.servers": bootstrap}, **settings)
    producer.list_topics(topic, timeout=10)
    headers: list[tuple[str, str | bytes | None]] = [("trace", b"0123456789abcdef"), ("origin", b"bench")]
    poll = producer.poll
    started, cpu_started = time.monotonic(), _cpu_s()
    for i in range(records):
        produce_blocking(
            producer,
            topic,
            value,
            b"key-%d" % (i % 1000),
            i % 8,
            wait_s=0.01,
            timestamp=1_700_000_000_000 + i,
            headers=headers,
        )
        if i % 1000 == 0:
            poll(0)
            reports.clear()
    remaining = producer.flush(60)
    if remaining:
        raise SystemExit(f"{remaining} records not delivered")
    seconds, cpu = time.monotonic() - started, _cpu_s() - cpu_started
    return records / seconds, cpu / records * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:29092")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    admin = kafka_clients.admin({"bootstrap.servers": args.bootstrap})
    topic = f"ferry-bench-dr-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 8, 1)])[topic].result(30)
    value = b"v" * args.value_bytes
    try:
        print(f"{args.records:,} records of {args.value_bytes} B per run, {args.rounds} rounds, topic {topic}")
        for round_ in range(1, args.rounds + 1):
            for mode in ("none", "callback", "only-errors"):
                rate, cpu = run(args.bootstrap, topic, args.records, value, mode)
                print(f"round {round_} {mode:>12}: {rate:>10,.0f} records/s  {cpu:5.2f} CPU s / M records")
    finally:
        admin.delete_topics([topic])[topic].result(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
