"""The brokers' own limits on this machine, measured with Kafka's perf tools (``kafka-tools`` jar).

* ``limit-produce``: ``org.apache.kafka.tools.ProducerPerformance`` (``kafka-producer-perf-test``)
  writes the workload's record count and value size into a fresh destination topic with the
  guarantees a replicator needs (``acks=all``, idempotent) and large batches: what the
  destination broker takes on this machine.
* ``limit-consume``: ``org.apache.kafka.tools.ConsumerPerformance`` (``kafka-consumer-perf-test``)
  reads the workload's source topic: what the source broker gives.

Both tools time themselves, so the JVM's start is not counted; the rate each prints is the
figure (consume: the fetch rate, without the group join). Their records carry no key and no
headers, so they are a few bytes smaller than the bench's. A copy on this machine cannot beat
either of them for long; the lower one bounds it.

The parsers are pure (:func:`parse_producer_output`, :func:`parse_consumer_output`).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ferry.bench.errors import BenchError
from ferry.common.paths import jars_dir

PRODUCER_MAIN = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_MAIN = "org.apache.kafka.tools.ConsumerPerformance"
TOOL_JVM_OPTS = ["-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
# The producer's settings: a replicator's guarantees, batches as large as help.
PRODUCER_PROPS = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "5",
    "batch.size": "1048576",
    "buffer.memory": "134217728",
    "max.request.size": "4194304",
    "compression.type": "none",
}
CONSUMER_PROPS = {"max.partition.fetch.bytes": "4194304", "fetch.max.bytes": "67108864", "max.poll.records": "10000"}
_TOOL_TIMEOUT_S = 300.0

_PRODUCED = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", re.MULTILINE)


@dataclass(frozen=True)
class ToolRate:
    records: int
    records_per_s: float
    mb_per_s: float  # MB = 10^6 bytes, the tool's values only (the tools print MiB)


def parse_producer_output(text: str, record_bytes: int) -> ToolRate:
    """The final summary line of ProducerPerformance (the last ``N records sent, R records/sec`` line)."""
    matches = _PRODUCED.findall(text)
    if not matches:
        raise BenchError(f"no summary line in ProducerPerformance's output: {text[-500:]!r}")
    records, rate, _ = matches[-1]
    return ToolRate(int(records), float(rate), round(float(rate) * record_bytes / 1e6, 2))


def parse_consumer_output(text: str, record_bytes: int) -> ToolRate:
    """ConsumerPerformance's CSV line (``--hide-header``): its 5th field is records, its last the fetch rate."""
    for line in reversed(text.strip().splitlines()):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 10:
            try:
                records, rate = int(fields[4]), float(fields[9])
            except ValueError:
                continue
            return ToolRate(records, rate, round(rate * record_bytes / 1e6, 2))
    raise BenchError(f"no result line in ConsumerPerformance's output: {text[-500:]!r}")


def _java(main: str, args: list[str], log: Path) -> str:
    command = ["java", *TOOL_JVM_OPTS, "-cp", f"{jars_dir('kafka')}/*", main, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{main} did not finish within {_TOOL_TIMEOUT_S:.0f}s") from None
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise BenchError(f"{main} exited with status {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def produce_rate(bootstrap: str, topic: str, records: int, value_bytes: int, log: Path) -> ToolRate:
    props = [f"{k}={v}" for k, v in {"bootstrap.servers": bootstrap, **PRODUCER_PROPS}.items()]
    output = _java(
        PRODUCER_MAIN,
        [
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            str(value_bytes),
            "--throughput",
            "-1",
            "--producer-props",
            *props,
        ],
        log,
    )
    return parse_producer_output(output, value_bytes)


def consume_rate(bootstrap: str, topic: str, records: int, value_bytes: int, workdir: Path, log: Path) -> ToolRate:
    config = workdir / f"{log.stem}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in CONSUMER_PROPS.items()))
    output = _java(
        CONSUMER_MAIN,
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--messages",
            str(records),
            "--hide-header",
            "--timeout",
            "30000",
            "--consumer.config",
            str(config),
        ],
        log,
    )
    return parse_consumer_output(output, value_bytes)
