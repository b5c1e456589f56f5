"""The native copy core's Python side without a broker: when a worker copies in Python instead, and the
message it hands the Python sender."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from ferry.worker.copying import core


@pytest.fixture(autouse=True)
def _not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "_loaded", None)


def test_without_the_library_the_worker_copies_in_python_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(core, "LIBRARY", tmp_path / "libferry-copy-core.so")
    library, why = core.load()
    assert library is None
    assert why == "no libferry-copy-core.so (built by `make setup`)"


def test_another_confluent_kafka_major_release_copies_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "_confluent_kafka_version", lambda: "3.0.0")
    library, why = core.load()
    assert library is None
    assert why == "confluent-kafka 3.0.0 is not a release the native copy core knows"


def test_a_library_that_does_not_load_copies_in_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    broken = tmp_path / "libferry-copy-core.so"
    broken.write_bytes(b"not a shared object")
    monkeypatch.setattr(core, "LIBRARY", broken)
    library, why = core.load()
    assert library is None
    assert why.startswith("libferry-copy-core.so does not load: ")


def test_a_core_message_reads_as_a_consumed_message() -> None:
    message = core.CoreMessage(
        topic="orders",
        partition=3,
        offset=42,
        value=b"abc",
        key=b"k",
        timestamp=(1, 1_700_000_000_000),
        headers=[("h", None)],
    )
    assert (message.topic(), message.partition(), message.offset()) == ("orders", 3, 42)
    assert (message.value(), message.key(), message.timestamp(), message.headers()) == (
        b"abc",
        b"k",
        (1, 1_700_000_000_000),
        [("h", None)],
    )
    assert message.error() is None and len(message) == 3
    failed = core.CoreMessage(topic="orders", partition=3, offset=7, error=KafkaError(KafkaError._PARTITION_EOF))
    assert failed.error().code() == KafkaError._PARTITION_EOF  # type: ignore[union-attr]
    assert len(failed) == 0 and failed.value() is None and failed.headers() is None
